/*
 * cmd-import.c — `moedesk-cli import DIR [--type TYPE] [-o OUT.gguf]
 * [--name NAME] [--quiet]`: converts a Hugging Face checkpoint folder into
 * one GGUF file (app/library/import.c does the work). Without --type the
 * importer's default (moedesk_import_choose_type, where the memory
 * planner's choice plugs in) is used.
 *
 * Prints one summary line on success: the output, architecture, type,
 * tensor and parameter counts, sizes, time and (where the OS says) the
 * process's peak resident memory; with progress on stderr when it is a
 * terminal. Exit status: 0 done, 1 bad input or a failed write (one-line
 * message naming the file and what is wrong; no output file is left), 2 a
 * usage error.
 */
#include "cli.h"
#include "import.h"

#include <stdio.h>
#include <string.h>
#ifndef _WIN32
#include <unistd.h>
#endif

static void usage(FILE *out)
{
    fprintf(out,
            "usage: moedesk-cli import DIR [--type TYPE] [-o OUT.gguf] [--name NAME]\n"
            "                          [--machine FILE] [--quiet]\n"
            "\n"
            "Converts a Hugging Face checkpoint (config.json, tokenizer files,\n"
            "*.safetensors) of Qwen3-MoE, Qwen2-MoE, Mixtral or OLMoE into GGUF.\n"
            "  --type TYPE     bf16, q8_0, q6_k, q4_k (= the Q4_K_M mixture), q4_0,\n"
            "                  f16 or f32; default: the best the memory planner\n"
            "                  finds fits this machine\n"
            "  -o OUT.gguf     output file (default: DIR/NAME-TYPE.gguf)\n"
            "  --name NAME     general.name (default: the folder's name)\n"
            "  --machine FILE  plan for the machine FILE describes (moedesk-cli hw --json)\n"
            "  --quiet         no progress on stderr\n");
}

/* Peak resident memory in KiB, or -1 where unknown. */
static long peak_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

typedef struct progress_state {
    int last_pct;
} progress_state;

static void on_progress(void *user, guint64 done, guint64 total)
{
    progress_state *p = user;
    int pct = total ? (int)(done * 100 / total) : 100;
    if (pct != p->last_pct) {
        p->last_pct = pct;
        fprintf(stderr, "\rimporting: %3d%%", pct);
        if (pct == 100)
            fputc('\n', stderr);
        fflush(stderr);
    }
}

static gboolean parse_type(const char *s, moe_type *out)
{
    if (g_ascii_strcasecmp(s, "q4_k_m") == 0) {
        *out = MOE_TYPE_Q4_K;
        return TRUE;
    }
    return moe_type_from_name(s, out);
}

int cli_cmd_import(int argc, char **argv)
{
    moedesk_import_options opt = { 0 };
    gboolean quiet = FALSE;
    const char *machine_file = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const gboolean has_val = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--type") == 0 && has_val) {
            if (!parse_type(argv[++i], &opt.type)) {
                fprintf(stderr, "moedesk-cli import: unknown type '%s'\n", argv[i]);
                usage(stderr);
                return 2;
            }
            opt.type_given = TRUE;
        } else if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && has_val) {
            opt.out_path = argv[++i];
        } else if (strcmp(a, "--name") == 0 && has_val) {
            opt.name = argv[++i];
        } else if (strcmp(a, "--machine") == 0 && has_val) {
            machine_file = argv[++i];
        } else if (strcmp(a, "--quiet") == 0) {
            quiet = TRUE;
        } else if (a[0] == '-' || opt.dir) {
            fprintf(stderr, "moedesk-cli import: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        } else {
            opt.dir = a;
        }
    }
    if (!opt.dir) {
        usage(stderr);
        return 2;
    }
    moe_machine machine;
    if (machine_file) {
        moe_err err = { { 0 } };
        if (moe_machine_load(machine_file, &machine, &err) != MOE_OK) {
            fprintf(stderr, "moedesk-cli import: %s\n", err.msg);
            return 1;
        }
        opt.machine = &machine;
    }
    progress_state ps = { .last_pct = -1 };
#ifndef _WIN32
    if (!quiet && isatty(2)) {
        opt.progress = on_progress;
        opt.progress_user = &ps;
    }
#else
    (void)quiet;
    (void)on_progress;
#endif
    gint64 t0 = g_get_monotonic_time();
    moedesk_import_result res = { 0 };
    g_autoptr(GError) error = NULL;
    if (!moedesk_import(&opt, &res, &error)) {
        if (ps.last_pct >= 0 && ps.last_pct < 100)
            fputc('\n', stderr);
        fprintf(stderr, "moedesk-cli import: %s\n", error->message);
        return 1;
    }
    double secs = (double)(g_get_monotonic_time() - t0) / 1e6;
    long peak = peak_rss_kib();
    printf("%s: %s (%s), %s, %" G_GINT64_FORMAT " tensors, %.3fB params, %.1f MB -> %.1f MB"
           " in %.2f s",
           res.out_path, res.gguf_arch, res.hf_arch, moe_type_name(res.type), res.n_tensors,
           (double)res.n_params / 1e9, (double)res.in_bytes / 1e6, (double)res.out_bytes / 1e6,
           secs);
    if (peak >= 0)
        printf(", peak memory %.1f MB", (double)peak * 1024.0 / 1e6);
    printf("\n");
    if (res.type_reason)
        printf("type %s: %s\n", moe_type_name(res.type), res.type_reason);
    moedesk_import_result_clear(&res);
    return 0;
}

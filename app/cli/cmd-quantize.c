/*
 * cmd-quantize.c — `moedesk-cli quantize IN.gguf OUT.gguf TYPE [-t N]`:
 * rewrites a model with its tensors at TYPE (q8_0, q4_0, q4_k, q6_k, f16,
 * bf16, f32) following llama-quantize's per-tensor policy (see
 * moe_model_quantize in moe.h). OUT appears only when complete.
 */
#include "cli.h"

#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct quantize_progress {
    bool tty;
    int last_pct;
    gint64 start_us;
} quantize_progress;

static void quantize_on_progress(void *user, int64_t done, int64_t total)
{
    quantize_progress *p = user;
    int pct = total > 0 ? (int)(done * 100 / total) : 100;
    if (!p->tty || pct == p->last_pct)
        return;
    p->last_pct = pct;
    double s = (g_get_monotonic_time() - p->start_us) / 1e6;
    fprintf(stderr, "\rquantizing: %3d%%  %.1f s", pct, s);
    fflush(stderr);
}

int cli_cmd_quantize(int argc, char **argv)
{
    gint threads = 0;
    GOptionEntry entries[] = {
        {"threads", 't', 0, G_OPTION_ARG_INT, &threads, "Worker threads (default: all cores)", "N"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) oc = g_option_context_new(
        "IN.gguf OUT.gguf TYPE — rewrite a model at TYPE (q8_0 q4_0 q4_k q6_k f16 bf16 f32)");
    g_option_context_add_main_entries(oc, entries, NULL);
    g_autoptr(GError) gerr = NULL;
    if (!g_option_context_parse(oc, &argc, &argv, &gerr) || argc != 4) {
        fprintf(stderr, "moedesk-cli quantize: %s\nusage: moedesk-cli quantize IN.gguf OUT.gguf TYPE [-t N]\n",
                gerr ? gerr->message : "expected IN, OUT and TYPE");
        return 2;
    }
    moe_type type;
    if (!moe_type_from_name(argv[3], &type) || !moe_type_can_quantize(type)) {
        fprintf(stderr, "moedesk-cli quantize: unknown or unsupported target type '%s' "
                "(use q8_0, q4_0, q4_k, q6_k, f16, bf16 or f32)\n", argv[3]);
        return 1;
    }
    moe_quantize_params params;
    moe_quantize_params_init(&params, type);
    params.n_threads = threads > 0 ? threads : (int)g_get_num_processors();
    quantize_progress prog = {isatty(2) != 0, -1, g_get_monotonic_time()};
    params.progress = quantize_on_progress;
    params.progress_user = &prog;

    moe_err err = {{0}};
    moe_status st = moe_model_quantize_ex(argv[1], argv[2], &params, &err);
    if (prog.tty)
        fputc('\n', stderr);
    if (st != MOE_OK) {
        fprintf(stderr, "moedesk-cli quantize: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "wrote %s (%s) in %.1f s\n", argv[2], moe_type_name(type),
            (g_get_monotonic_time() - prog.start_us) / 1e6);
    return 0;
}

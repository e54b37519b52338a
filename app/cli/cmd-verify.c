/*
 * cmd-verify.c — `moedesk-cli verify NAME`: re-hashes and re-checks an
 * installed model (app/library/verify.h) and prints one verdict per file.
 * Exit status 1 if any file is not OK.
 */
#include "cli.h"
#include "library.h"
#include "manifest.h"
#include "progress.h"
#include "verify.h"

#include <stdio.h>

typedef struct {
    GMainLoop   *loop;
    CliProgress *bar;
    GPtrArray   *results;
    GError      *error;
    gint64       start_us;
} VerifyRun;

static void on_progress(guint64 done, guint64 total, guint n_done, guint n_files, gpointer data)
{
    VerifyRun *run = data;
    double secs = (double)(g_get_monotonic_time() - run->start_us) / 1e6;
    double rate = secs > 0.2 ? (double)done / secs : 0;
    gint64 eta = rate > 0 ? (gint64)((double)(total - done) / rate) : -1;
    g_autofree char *what = g_strdup_printf("%u/%u files hashed", n_done, n_files);
    cli_progress_update(run->bar, what, done, total, rate, eta, FALSE);
}

static void on_verified(GObject *source, GAsyncResult *res, gpointer data)
{
    VerifyRun *run = data;
    run->results = moe_verify_finish(res, &run->error);
    g_main_loop_quit(run->loop);
}

int cli_cmd_verify(int argc, char **argv)
{
    int threads = 0;
    GOptionEntry entries[] = {
        { "threads", 't', 0, G_OPTION_ARG_INT, &threads,
          "Files hashed at once (default: one per processor)", "N" },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "NAME - check an installed model's files (sizes, hashes, headers)");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &error) || argc != 2 || threads < 0) {
        fprintf(stderr, "moedesk-cli verify: %s\n", error ? error->message : "name one model");
        return 2;
    }
    g_autoptr(MoeManifest) m = moe_manifest_find_installed(argv[1], &error);
    g_autofree char *dir = m ? moe_library_model_dir(m->name, &error) : NULL;
    if (!dir) {
        fprintf(stderr, "moedesk-cli verify: %s\n", error->message);
        return 1;
    }
    VerifyRun run = { .loop = g_main_loop_new(NULL, FALSE), .bar = cli_progress_new(stderr),
                      .start_us = g_get_monotonic_time() };
    moe_verify_async(m, dir, (guint)threads, on_progress, &run, NULL, on_verified, &run);
    g_main_loop_run(run.loop);
    cli_progress_done(run.bar);
    double secs = (double)(g_get_monotonic_time() - run.start_us) / 1e6;
    int rc = 0;
    if (!run.results) {
        fprintf(stderr, "moedesk-cli verify: %s\n", run.error->message);
        rc = 1;
    } else {
        guint bad = 0;
        for (guint i = 0; i < run.results->len; i++) {
            MoeVerifyResult *r = g_ptr_array_index(run.results, i);
            bad += r->status != MOE_VERIFY_OK;
            printf("%-14s %s%s%s\n", moe_verify_status_name(r->status), r->path,
                   r->detail ? ": " : "", r->detail ? r->detail : "");
        }
        g_autofree char *size = moe_library_format_size(moe_manifest_total_bytes(m));
        if (bad) {
            printf("%s: %u of %u files not OK\n", m->name, bad, run.results->len);
            rc = 1;
        } else {
            printf("%s: all %u files OK (%s in %.1f s)\n", m->name, run.results->len, size, secs);
            m->verified = g_get_real_time() / G_USEC_PER_SEC;
            if (g_strcmp0(m->state, "complete") != 0) {
                g_free(m->state);
                m->state = g_strdup("complete");
            }
            if (!moe_manifest_save_model(m, &error))
                fprintf(stderr, "moedesk-cli verify: %s\n", error->message);
        }
        g_ptr_array_unref(run.results);
    }
    g_clear_error(&run.error);
    cli_progress_free(run.bar);
    g_main_loop_unref(run.loop);
    return rc;
}

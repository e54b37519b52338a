/*
 * cmd-pull.c — `moedesk-cli pull [--machine FILE] SOURCE...`: a thin
 * wrapper over moe_pull_on_machine_async (app/library/pull.h) that draws
 * progress and turns Ctrl-C into a clean stop (the partial files stay; the
 * same command resumes).
 */
#include "cli.h"
#include "library.h"
#include "progress.h"
#include "pull.h"

#include <signal.h>
#ifdef G_OS_UNIX
#include <glib-unix.h>
#else
#include <windows.h>
#endif
#include <stdio.h>
#include <string.h>

typedef struct {
    GMainLoop    *loop;
    GCancellable *cancel;
    CliProgress  *bar;
    MoeManifest  *manifest;
    GError       *error;
    GHashTable   *states; /* dest -> last MoeDownloadState seen, to print changes */
} PullRun;

static gboolean on_signal(gpointer data)
{
    PullRun *run = data;
    g_cancellable_cancel(run->cancel);
    return G_SOURCE_CONTINUE;
}

#ifndef G_OS_UNIX
/* Windows runs console control handlers on a thread of their own: hand the
 * cancellation to the main context. */
static PullRun *ctrl_run;

static gboolean cancel_idle(gpointer data)
{
    on_signal(data);
    return G_SOURCE_REMOVE;
}

static BOOL WINAPI on_console_ctrl(DWORD type)
{
    if (type != CTRL_C_EVENT && type != CTRL_BREAK_EVENT && type != CTRL_CLOSE_EVENT)
        return FALSE;
    if (ctrl_run)
        g_idle_add(cancel_idle, ctrl_run);
    return TRUE;
}
#endif

/* One line per change of a file's state worth knowing about. */
static void file_event(PullRun *run, const MoeDownloadProgress *f)
{
    gpointer old = g_hash_table_lookup(run->states, f->dest);
    if (old && GPOINTER_TO_INT(old) - 1 == (int)f->state && f->state != MOE_DOWNLOAD_RETRY_WAIT)
        return;
    g_hash_table_insert(run->states, g_strdup(f->dest), GINT_TO_POINTER((int)f->state + 1));
    switch (f->state) {
    case MOE_DOWNLOAD_WAITING_LOCK:
        cli_progress_message(run->bar, "%s: already being downloaded by pid %d; waiting for it",
                             f->label, f->lock_pid);
        break;
    case MOE_DOWNLOAD_CHECKING:
        cli_progress_message(run->bar, "%s: resuming, re-checking the partial file", f->label);
        break;
    case MOE_DOWNLOAD_RETRY_WAIT:
        cli_progress_message(run->bar, "%s: %s; retrying in %.1f s (attempt %u)", f->label,
                             f->last_error ? f->last_error : "failed",
                             (double)f->retry_in_ms / 1000.0, f->attempt + 1);
        break;
    case MOE_DOWNLOAD_DONE: {
        g_autofree char *size = moe_library_format_size(f->done);
        cli_progress_message(run->bar, "%s: done (%s, %s)", f->label, size,
                             f->received ? "hash OK" : "already present");
        break;
    }
    default:
        break;
    }
}

static void on_progress(const MoePullProgress *p, gpointer data)
{
    PullRun *run = data;
    if (p->note)
        cli_progress_message(run->bar, "%s", p->note);
    if (p->file)
        file_event(run, p->file);
    if (g_strcmp0(p->phase, "downloading") == 0 && p->n_files) {
        g_autofree char *what = g_strdup_printf("%u/%u files", p->n_done, p->n_files);
        cli_progress_update(run->bar, what, p->done, p->total, p->rate, p->eta_s,
                            p->file && p->file->state == MOE_DOWNLOAD_DONE);
    }
}

static void on_pulled(GObject *source, GAsyncResult *res, gpointer data)
{
    PullRun *run = data;
    run->manifest = moe_pull_finish(res, &run->error);
    g_main_loop_quit(run->loop);
}

static int pull_one(const char *source, MoeDownloadManager *mgr, MoeDownloadFlags flags,
                    const moe_machine *machine)
{
    PullRun run = { 0 };
    run.loop = g_main_loop_new(NULL, FALSE);
    run.cancel = g_cancellable_new();
    run.bar = cli_progress_new(stderr);
    run.states = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
#ifdef G_OS_UNIX
    guint sig_int = g_unix_signal_add(SIGINT, on_signal, &run);
    guint sig_term = g_unix_signal_add(SIGTERM, on_signal, &run);
#else
    ctrl_run = &run;
    SetConsoleCtrlHandler(on_console_ctrl, TRUE);
#endif
    moe_pull_on_machine_async(mgr, source, flags, machine, on_progress, &run, run.cancel,
                              on_pulled, &run);
    g_main_loop_run(run.loop);
#ifdef G_OS_UNIX
    g_source_remove(sig_int);
    g_source_remove(sig_term);
#else
    SetConsoleCtrlHandler(on_console_ctrl, FALSE);
    ctrl_run = NULL;
#endif
    cli_progress_done(run.bar);
    int rc = 0;
    if (run.manifest) {
        g_autofree char *size = moe_library_format_size(moe_manifest_total_bytes(run.manifest));
        g_autofree char *dir = moe_library_model_dir(run.manifest->name, NULL);
        printf("installed %s (%u files, %s) from %s@%.12s in %s\n", run.manifest->name,
               run.manifest->files->len, size, run.manifest->repo,
               run.manifest->revision ? run.manifest->revision : "?", dir);
    } else if (g_error_matches(run.error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
        fprintf(stderr, "moedesk-cli pull: interrupted; partial files are kept, run the same"
                " pull again to resume\n");
        rc = 130;
    } else {
        fprintf(stderr, "moedesk-cli pull: %s\n", run.error->message);
        rc = 1;
    }
    g_clear_error(&run.error);
    moe_manifest_free(run.manifest);
    g_hash_table_unref(run.states);
    cli_progress_free(run.bar);
    g_object_unref(run.cancel);
    g_main_loop_unref(run.loop);
    return rc;
}

int cli_cmd_pull(int argc, char **argv)
{
    gboolean no_wait = FALSE;
    int jobs = 4;
    g_autofree char *machine_file = NULL;
    GOptionEntry entries[] = {
        { "machine", 0, 0, G_OPTION_ARG_FILENAME, &machine_file,
          "Choose the quantisation for the machine FILE describes (see `hw --help`)"
          " instead of this one", "FILE" },
        { "no-wait", 0, 0, G_OPTION_ARG_NONE, &no_wait,
          "Fail instead of waiting when another process downloads the same file", NULL },
        { "jobs", 'j', 0, G_OPTION_ARG_INT, &jobs, "Files downloaded at once (default 4)", "N" },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "SOURCE... - download models\n\n"
        "SOURCE is ORG/REPO[@REV][:FILE|:QUANT] (prefix hf: or ms: for the hub;\n"
        "Hugging Face by default), a catalog name, or an installed model's name.\n"
        "Without FILE or QUANT the memory planner picks the best quantisation that\n"
        "fits this machine (or --machine FILE).\n"
        "Environment: HF_ENDPOINT, HF_TOKEN, MODELSCOPE_ENDPOINT, MOEDESK_DATA_DIR;\n"
        "proxies come from the system settings (http_proxy/https_proxy).");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &error) || argc < 2 || jobs < 1 || jobs > 64) {
        fprintf(stderr, "moedesk-cli pull: %s\n", error ? error->message
                        : argc < 2 ? "name a SOURCE (see --help)" : "--jobs must be 1..64");
        return 2;
    }
#ifdef SIGXFSZ
    /* A file size limit must be an error we can report, not a kill. */
    signal(SIGXFSZ, SIG_IGN);
#endif
    moe_machine machine;
    if (machine_file) {
        moe_err err = { { 0 } };
        if (moe_machine_load(machine_file, &machine, &err) != MOE_OK) {
            fprintf(stderr, "moedesk-cli pull: %s\n", err.msg);
            return 1;
        }
    }
    g_autoptr(MoeDownloadManager) mgr = moe_download_manager_new(NULL, (guint)jobs);
    int rc = 0;
    for (int i = 1; i < argc && rc != 130; i++) {
        int r = pull_one(argv[i], mgr, no_wait ? MOE_DOWNLOAD_NO_WAIT : 0,
                         machine_file ? &machine : NULL);
        rc = r ? r : rc;
    }
    return rc;
}

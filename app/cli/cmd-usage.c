/*
 * cmd-usage.c — `moedesk-cli usage`: move request logs in and out of the
 * usage database.
 *
 *   usage import-csv FILE [--db FILE]        add rows from a CSV log
 *   usage export --postgres URL [--db FILE] [--all] [--batch N]
 *                [--continuous [--interval SECONDS]]
 *
 * Export sends rows Postgres does not have yet for this gateway (all rows
 * with --all; rows already there are updated, so repeating is harmless),
 * one transaction per batch. --continuous repeats every interval until
 * SIGINT/SIGTERM, then exits 0 after the batch in flight.
 */
#include "cli.h"
#include "usage-csv.h"
#include "usage-pg.h"

#include <stdio.h>
#include <string.h>
#ifdef G_OS_UNIX
#include <glib-unix.h>
#endif

usage_store *cli_open_usage_store(const char *path, gboolean write, GError **error)
{
    if (write)
        return usage_store_open(path, USAGE_STORE_READ_WRITE, error);
    GError *err = NULL;
    usage_store *s = usage_store_open(path, USAGE_STORE_READ_ONLY, &err);
    if (!s && g_error_matches(err, USAGE_STORE_ERROR, USAGE_STORE_ERROR_OLD_SCHEMA)) {
        /* An upgrade left an older file: migrate it once, then read. */
        g_clear_error(&err);
        s = usage_store_open(path, USAGE_STORE_READ_WRITE, &err);
    }
    if (!s)
        g_propagate_error(error, err);
    return s;
}

static int fail(const char *what, GError *err)
{
    fprintf(stderr, "moedesk-cli usage %s: %s\n", what, err->message);
    g_error_free(err);
    return 1;
}

static gboolean parse(GOptionContext *ctx, int *argc, char ***argv, const char *what)
{
    GError *err = NULL;
    if (!g_option_context_parse(ctx, argc, argv, &err)) {
        fprintf(stderr, "moedesk-cli usage %s: %s\n", what, err->message);
        g_error_free(err);
        return FALSE;
    }
    return TRUE;
}

static int import_csv(int argc, char **argv)
{
    g_autofree char *db = NULL;
    GOptionEntry entries[] = {
        {"db", 0, 0, G_OPTION_ARG_FILENAME, &db, "Usage database (default: the data dir's)", "FILE"},
        {NULL},
    };
    g_set_prgname("moedesk-cli usage import-csv");
    g_autoptr(GOptionContext) ctx = g_option_context_new("FILE - import a CSV request log");
    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!parse(ctx, &argc, &argv, "import-csv"))
        return 2;
    if (argc != 2) {
        fprintf(stderr, "moedesk-cli usage import-csv: expected one CSV file\n");
        return 2;
    }
    g_autofree char *path = db ? g_strdup(db) : usage_store_default_path();
    g_autofree char *dir = g_path_get_dirname(path);
    g_mkdir_with_parents(dir, 0700);
    GError *err = NULL;
    usage_store *store = cli_open_usage_store(path, TRUE, &err);
    if (!store)
        return fail("import-csv", err);
    guint64 n = 0;
    gboolean ok = usage_csv_import(store, argv[1], &n, &err);
    if (!usage_store_close(store, ok ? &err : NULL))
        ok = FALSE;
    if (!ok)
        return fail("import-csv", err);
    printf("imported %" G_GUINT64_FORMAT " rows into %s\n", n, path);
    return 0;
}

typedef struct export_loop {
    usage_pg *pg;
    usage_store *store;
    gboolean all;
    guint batch;
    GMainLoop *loop;
    int status;
    guint64 total;
} export_loop;

static gboolean export_once(export_loop *e)
{
    GError *err = NULL;
    guint64 n = 0;
    if (!usage_pg_export(e->pg, e->store, e->all, e->batch, &n, &err)) {
        e->status = fail("export", err);
        return FALSE;
    }
    e->all = FALSE;  /* --all applies to the first pass only */
    e->total += n;
    if (n)
        printf("exported %" G_GUINT64_FORMAT " rows (gateway %s)\n", n,
               usage_store_gateway_id(e->store));
    fflush(stdout);
    return TRUE;
}

static gboolean on_tick(gpointer data)
{
    export_loop *e = data;
    if (!export_once(e)) {
        g_main_loop_quit(e->loop);
        return G_SOURCE_REMOVE;
    }
    return G_SOURCE_CONTINUE;
}

#ifdef G_OS_UNIX
static gboolean on_signal(gpointer data)
{
    export_loop *e = data;
    g_main_loop_quit(e->loop);
    return G_SOURCE_CONTINUE;
}
#endif

static int export_pg(int argc, char **argv)
{
    g_autofree char *db = NULL, *url = NULL;
    gboolean all = FALSE, continuous = FALSE;
    gint interval = 10, batch = 1000;
    GOptionEntry entries[] = {
        {"postgres", 0, 0, G_OPTION_ARG_STRING, &url, "PostgreSQL connection URL", "URL"},
        {"db", 0, 0, G_OPTION_ARG_FILENAME, &db, "Usage database (default: the data dir's)", "FILE"},
        {"all", 0, 0, G_OPTION_ARG_NONE, &all, "Send every row again (upsert), not only new ones", NULL},
        {"batch", 0, 0, G_OPTION_ARG_INT, &batch, "Rows per transaction (default 1000)", "N"},
        {"continuous", 0, 0, G_OPTION_ARG_NONE, &continuous, "Keep exporting new rows", NULL},
        {"interval", 0, 0, G_OPTION_ARG_INT, &interval, "Seconds between passes (default 10)", "SECONDS"},
        {NULL},
    };
    g_set_prgname("moedesk-cli usage export");
    g_autoptr(GOptionContext) ctx = g_option_context_new("- export usage rows to PostgreSQL");
    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!parse(ctx, &argc, &argv, "export"))
        return 2;
    if (argc != 1 || !url || interval < 1 || batch < 1) {
        fprintf(stderr, "moedesk-cli usage export: needs --postgres URL (interval and batch >= 1)\n");
        return 2;
    }
    g_autofree char *path = db ? g_strdup(db) : usage_store_default_path();
    GError *err = NULL;
    export_loop e = {.all = all, .batch = (guint)batch};
    e.store = cli_open_usage_store(path, FALSE, &err);
    if (!e.store)
        return fail("export", err);
    e.pg = usage_pg_connect(url, &err);
    if (!e.pg) {
        usage_store_close(e.store, NULL);
        return fail("export", err);
    }
    if (export_once(&e) && continuous) {
        e.loop = g_main_loop_new(NULL, FALSE);
        g_timeout_add_seconds((guint)interval, on_tick, &e);
#ifdef G_OS_UNIX
        g_unix_signal_add(SIGINT, on_signal, &e);
        g_unix_signal_add(SIGTERM, on_signal, &e);
#endif
        g_main_loop_run(e.loop);
        g_main_loop_unref(e.loop);
    }
    if (e.status == 0)
        printf("%" G_GUINT64_FORMAT " rows exported in total\n", e.total);
    usage_pg_close(e.pg);
    usage_store_close(e.store, NULL);
    return e.status;
}

int cli_cmd_usage(int argc, char **argv)
{
    if (argc >= 2 && g_str_equal(argv[1], "import-csv"))
        return import_csv(argc - 1, argv + 1);
    if (argc >= 2 && g_str_equal(argv[1], "export"))
        return export_pg(argc - 1, argv + 1);
    fprintf(stderr, "usage: moedesk-cli usage import-csv FILE [--db FILE]\n"
                    "       moedesk-cli usage export --postgres URL [--db FILE] [--all] "
                    "[--continuous [--interval SECONDS]]\n");
    return argc >= 2 && (g_str_equal(argv[1], "--help") || g_str_equal(argv[1], "-h")) ? 0 : 2;
}

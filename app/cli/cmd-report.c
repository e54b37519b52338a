/*
 * cmd-report.c — `moedesk-cli report weekly`: the weekly adoption and cost
 * report from the usage database (or Postgres, for several gateways) as
 * Markdown, HTML, CSV or JSON, to stdout or a file. Rewriting an existing
 * Markdown file keeps the user's "Next week" text. The database is opened
 * read-only and never changed (an older schema is migrated first, which is
 * the one write it may make).
 */
#include "cli.h"
#include "report.h"
#include "usage-pg.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const char *const formats[] = {"md", "csv", "json", "html"};

static int fail(GError *err)
{
    fprintf(stderr, "moedesk-cli report: %s\n", err->message);
    g_error_free(err);
    return 1;
}

/*
 * Write the report. A regular file (or a new one) is replaced atomically, so
 * a reader never sees half a report; anything else that already exists — a
 * device such as /dev/null, a FIFO, a symlink — is written through in
 * place, never replaced.
 */
static gboolean write_output(const char *path, const char *text, GError **error)
{
    GStatBuf st;
    if (g_lstat(path, &st) != 0 || S_ISREG(st.st_mode))
        return g_file_set_contents(path, text, -1, error);
    FILE *f = g_fopen(path, "w");
    gboolean ok = f && fputs(text, f) != EOF;
    if (f && fclose(f) != 0)
        ok = FALSE;
    if (!ok)
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "%s: cannot write: %s", path,
                    g_strerror(errno));
    return ok;
}

static int weekly(int argc, char **argv)
{
    g_autofree char *week = NULL, *format = NULL, *output = NULL, *db = NULL;
    g_autofree char *postgres = NULL, *settings_path = NULL, *prices_path = NULL;
    gint n_weeks = 12;
    GOptionEntry entries[] = {
        {"week", 0, 0, G_OPTION_ARG_STRING, &week, "ISO week to report (default: last complete week)", "2026-W47"},
        {"weeks", 0, 0, G_OPTION_ARG_INT, &n_weeks, "Weeks of history, reported week included (default 12)", "N"},
        {"format", 0, 0, G_OPTION_ARG_STRING, &format, "md, csv, json or html (default md)", "FMT"},
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Write to FILE instead of stdout", "FILE"},
        {"db", 0, 0, G_OPTION_ARG_FILENAME, &db, "Usage database (default: the data dir's usage.sqlite3)", "FILE"},
        {"postgres", 0, 0, G_OPTION_ARG_STRING, &postgres, "Report over the rows of every gateway in Postgres", "URL"},
        {"settings", 0, 0, G_OPTION_ARG_FILENAME, &settings_path, "Settings file (default: config dir's settings.ini)", "FILE"},
        {"prices", 0, 0, G_OPTION_ARG_FILENAME, &prices_path, "User price file (default: config dir's prices.json)", "FILE"},
        {NULL},
    };
    g_set_prgname("moedesk-cli report weekly");
    g_autoptr(GOptionContext) ctx = g_option_context_new("- weekly adoption and cost report");
    g_option_context_add_main_entries(ctx, entries, NULL);
    GError *err = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &err) || argc > 1) {
        fprintf(stderr, "moedesk-cli report weekly: %s\n",
                err ? err->message : "unexpected argument");
        g_clear_error(&err);
        return 2;
    }
    const char *fmt = format ? format : "md";
    gboolean known = FALSE;
    for (guint i = 0; i < G_N_ELEMENTS(formats); i++)
        known = known || g_str_equal(fmt, formats[i]);
    if (!known) {
        fprintf(stderr, "moedesk-cli report: unknown format '%s' (expected md, csv, json or html)\n",
                fmt);
        return 1;
    }
    if (n_weeks < 1 || n_weeks > 104) {
        fprintf(stderr, "moedesk-cli report: --weeks %d: expected 1 to 104\n", n_weeks);
        return 1;
    }
    if (postgres && db) {
        fprintf(stderr, "moedesk-cli report weekly: give --db or --postgres, not both\n");
        return 2;
    }

    g_autofree char *config = report_config_dir();
    g_autofree char *default_settings = g_build_filename(config, "settings.ini", NULL);
    report_settings *st = report_settings_new();
    if (!report_settings_load(st, settings_path ? settings_path : default_settings, &err)) {
        report_settings_free(st);
        return fail(err);
    }
    report_prices *prices = report_prices_load(prices_path, &err);
    if (!prices) {
        report_settings_free(st);
        return fail(err);
    }

    report_source src;
    usage_store *store = NULL;
    usage_pg *pg = NULL;
    g_autofree char *db_path = db ? g_strdup(db) : usage_store_default_path();
    if (postgres) {
        pg = usage_pg_connect(postgres, &err);
        if (pg)
            report_source_init_pg(&src, pg, "postgres");
    } else {
        store = cli_open_usage_store(db_path, FALSE, &err);
        if (store)
            report_source_init_store(&src, store);
    }
    usage_report *r = NULL;
    if (store || pg)
        r = report_build(&src, st, prices, week, (guint)n_weeks, g_get_real_time() / 1000, &err);

    char *text = NULL;
    if (r) {
        if (g_str_equal(fmt, "json")) {
            text = report_to_json(r);
        } else if (g_str_equal(fmt, "csv")) {
            text = report_to_csv(r);
        } else if (g_str_equal(fmt, "html")) {
            text = report_to_html(r);
        } else {
            g_autofree char *old = NULL, *next = NULL;
            if (output && g_file_get_contents(output, &old, NULL, NULL))
                next = report_markdown_next_week(old);
            text = report_to_markdown(r, next);
        }
    }
    int status = 0;
    if (!text) {
        status = fail(err);
    } else if (output) {
        if (!write_output(output, text, &err))
            status = fail(err);
    } else if (fputs(text, stdout) == EOF || fflush(stdout) != 0) {
        fprintf(stderr, "moedesk-cli report: writing to stdout failed\n");
        status = 1;
    }
    g_free(text);
    usage_report_free(r);
    usage_store_close(store, NULL);
    usage_pg_close(pg);
    report_prices_free(prices);
    report_settings_free(st);
    return status;
}

int cli_cmd_report(int argc, char **argv)
{
    if (argc >= 2 && g_str_equal(argv[1], "weekly"))
        return weekly(argc - 1, argv + 1);
    if (argc >= 2 && (g_str_equal(argv[1], "--help") || g_str_equal(argv[1], "-h"))) {
        printf("usage: moedesk-cli report weekly [--week 2026-W47] [--weeks 12] "
               "[--format md|csv|json|html] [-o FILE] [--db FILE | --postgres URL]\n");
        return 0;
    }
    fprintf(stderr, "usage: moedesk-cli report weekly [OPTIONS] (see --help)\n");
    return 2;
}

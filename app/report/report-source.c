/*
 * report-source.c — the SQLite usage store and Postgres as report sources,
 * and the one-call JSON report the REST service will serve (GET on the
 * usage report route): settings and prices from the user's config dir, the
 * reported week's figures and history, as report_to_json() lays them out.
 */
#include "report-private.h"

static gboolean store_time_range(gpointer ctx, gint64 *first_ms, gint64 *last_ms,
                                 gboolean *any, GError **error)
{
    return usage_store_time_range(ctx, first_ms, last_ms, any, error);
}

static gboolean store_each_hour(gpointer ctx, gint64 from_hour, gint64 to_hour,
                                usage_hour_fn fn, gpointer user_data, GError **error)
{
    return usage_store_each_hour(ctx, from_hour, to_hour, fn, user_data, error);
}

static gboolean store_each_row(gpointer ctx, gint64 from_ms, gint64 to_ms, gint64 above_total_ms,
                               usage_row_fn fn, gpointer user_data, GError **error)
{
    return usage_store_each_row(ctx, from_ms, to_ms, above_total_ms, fn, user_data, error);
}

void report_source_init_store(report_source *src, usage_store *store)
{
    src->label = usage_store_path(store);
    src->ctx = store;
    src->time_range = store_time_range;
    src->each_hour = store_each_hour;
    src->each_row = store_each_row;
}

static gboolean pg_time_range(gpointer ctx, gint64 *first_ms, gint64 *last_ms, gboolean *any,
                              GError **error)
{
    return usage_pg_time_range(ctx, first_ms, last_ms, any, error);
}

static gboolean pg_each_hour(gpointer ctx, gint64 from_hour, gint64 to_hour, usage_hour_fn fn,
                             gpointer user_data, GError **error)
{
    return usage_pg_each_hour(ctx, from_hour, to_hour, fn, user_data, error);
}

static gboolean pg_each_row(gpointer ctx, gint64 from_ms, gint64 to_ms, gint64 above_total_ms,
                            usage_row_fn fn, gpointer user_data, GError **error)
{
    return usage_pg_each_row(ctx, from_ms, to_ms, above_total_ms, fn, user_data, error);
}

void report_source_init_pg(report_source *src, usage_pg *pg, const char *label)
{
    src->label = label;
    src->ctx = pg;
    src->time_range = pg_time_range;
    src->each_hour = pg_each_hour;
    src->each_row = pg_each_row;
}

char *usage_report_weekly_json(usage_store *store, const char *week, guint n_weeks,
                               GError **error)
{
    g_autofree char *dir = report_config_dir();
    g_autofree char *settings_path = g_build_filename(dir, "settings.ini", NULL);
    report_settings *st = report_settings_new();
    report_prices *prices = NULL;
    usage_report *r = NULL;
    char *json = NULL;
    if (report_settings_load(st, settings_path, error) &&
        (prices = report_prices_load(NULL, error))) {
        report_source src;
        report_source_init_store(&src, store);
        r = report_build(&src, st, prices, week, n_weeks, g_get_real_time() / 1000, error);
        if (r)
            json = report_to_json(r);
    }
    usage_report_free(r);
    report_prices_free(prices);
    report_settings_free(st);
    return json;
}

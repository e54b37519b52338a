/*
 * usage-pg-read.c — the report's three reads answered by Postgres over the
 * rows of every gateway: the time range, hourly roll-ups computed with
 * GROUP BY (the sums mirror usage_sums_add_row() column by column; the
 * latency histograms count the exported bucket columns), and raw rows for
 * partial hours and the slow tail.
 */
#include "usage-pg-private.h"

#include <string.h>

#ifndef HAVE_LIBPQ

static gboolean no_libpq(GError **error)
{
    g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_OPEN,
                "postgres: this moedesk was built without PostgreSQL support (libpq)");
    return FALSE;
}

gboolean usage_pg_time_range(usage_pg *pg, gint64 *first_ms, gint64 *last_ms, gboolean *any,
                             GError **error)
{
    return no_libpq(error);
}

gboolean usage_pg_each_hour(usage_pg *pg, gint64 from_hour, gint64 to_hour, usage_hour_fn fn,
                            gpointer user_data, GError **error)
{
    return no_libpq(error);
}

gboolean usage_pg_each_row(usage_pg *pg, gint64 from_ms, gint64 to_ms, gint64 above_total_ms,
                           usage_row_fn fn, gpointer user_data, GError **error)
{
    return no_libpq(error);
}

#else

/* A request failed: the same rule as usage_row_is_error(). */
#define PG_ERROR_SQL "(http_status >= 400 OR COALESCE(error_kind, '') <> '')"
#define PG_DECODE_SQL \
    "(NOT " PG_ERROR_SQL " AND decode_tps > 0 AND completion_tokens > 0)"

static gint64 get_i64(PGresult *res, int row, int col)
{
    return g_ascii_strtoll(PQgetvalue(res, row, col), NULL, 10);
}

static double get_dbl(PGresult *res, int row, int col)
{
    return g_ascii_strtod(PQgetvalue(res, row, col), NULL);
}

static const char *get_str(PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

static PGresult *query(usage_pg *pg, const char *sql, int n, const gint64 *args,
                       const char *doing, GError **error)
{
    char bufs[4][32];
    const char *values[4];
    for (int i = 0; i < n && i < 4; i++) {
        g_snprintf(bufs[i], sizeof bufs[i], "%" G_GINT64_FORMAT, args[i]);
        values[i] = bufs[i];
    }
    PGresult *res = PQexecParams(pg->conn, sql, n, NULL, values, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        usage_pg_fail(pg, error, doing, res);
        return NULL;
    }
    return res;
}

gboolean usage_pg_time_range(usage_pg *pg, gint64 *first_ms, gint64 *last_ms, gboolean *any,
                             GError **error)
{
    PGresult *res = query(pg, "SELECT min(start_ms), max(start_ms) FROM moedesk_requests", 0,
                          NULL, "reading the time range", error);
    if (!res)
        return FALSE;
    *any = !PQgetisnull(res, 0, 0);
    *first_ms = *any ? get_i64(res, 0, 0) : 0;
    *last_ms = *any ? get_i64(res, 0, 1) : 0;
    PQclear(res);
    return TRUE;
}

typedef struct pg_hist {
    GArray *pairs[2];   /* usage_hist_pair: ttft, total */
} pg_hist;

static void pg_hist_free(gpointer p)
{
    pg_hist *h = p;
    g_array_unref(h->pairs[0]);
    g_array_unref(h->pairs[1]);
    g_free(h);
}

static char *hour_key(PGresult *res, int row)
{
    return g_strdup_printf("%s\x1f%s\x1f%s\x1f%s\x1f%s", PQgetvalue(res, row, 0),
                           PQgetvalue(res, row, 1), PQgetvalue(res, row, 2),
                           PQgetvalue(res, row, 3), PQgetvalue(res, row, 4));
}

gboolean usage_pg_each_hour(usage_pg *pg, gint64 from_hour, gint64 to_hour, usage_hour_fn fn,
                            gpointer user_data, GError **error)
{
    gint64 args[2] = {from_hour * 3600000, to_hour * 3600000};
    PGresult *hist = query(pg,
        "SELECT start_ms / 3600000, model, route, caller, client, 0, ttft_bucket, count(*) "
        "FROM moedesk_requests WHERE start_ms >= $1 AND start_ms < $2 AND ttft_bucket IS NOT NULL "
        "GROUP BY 1, 2, 3, 4, 5, 7 "
        "UNION ALL "
        "SELECT start_ms / 3600000, model, route, caller, client, 1, total_bucket, count(*) "
        "FROM moedesk_requests WHERE start_ms >= $1 AND start_ms < $2 AND total_bucket IS NOT NULL "
        "GROUP BY 1, 2, 3, 4, 5, 7 ORDER BY 6, 7",
        2, args, "counting latency buckets", error);
    if (!hist)
        return FALSE;
    GHashTable *hists = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, pg_hist_free);
    for (int i = 0; i < PQntuples(hist); i++) {
        char *key = hour_key(hist, i);
        pg_hist *h = g_hash_table_lookup(hists, key);
        if (!h) {
            h = g_new0(pg_hist, 1);
            h->pairs[0] = g_array_new(FALSE, FALSE, sizeof(usage_hist_pair));
            h->pairs[1] = g_array_new(FALSE, FALSE, sizeof(usage_hist_pair));
            g_hash_table_insert(hists, key, h);
        } else {
            g_free(key);
        }
        gint64 bucket = get_i64(hist, i, 6);
        usage_hist_pair p = {(guint32)CLAMP(bucket, 0, USAGE_HIST_N_BUCKETS - 1),
                             (guint64)get_i64(hist, i, 7)};
        g_array_append_val(h->pairs[get_i64(hist, i, 5) ? 1 : 0], p);
    }
    PQclear(hist);

    PGresult *res = query(pg,
        "SELECT start_ms / 3600000, model, route, caller, client, count(*), "
        "sum(CASE WHEN " PG_ERROR_SQL " THEN 1 ELSE 0 END), "
        "sum(prompt_tokens), sum(cached_tokens), sum(completion_tokens), sum(busy_ms), "
        "sum(CASE WHEN gpu_power_w IS NULL THEN busy_ms ELSE 0 END), "
        "COALESCE(sum(gpu_power_w * busy_ms), 0), "
        "sum(CASE WHEN " PG_DECODE_SQL " THEN completion_tokens ELSE 0 END), "
        "COALESCE(sum(CASE WHEN " PG_DECODE_SQL " THEN completion_tokens / decode_tps END), 0) "
        "FROM moedesk_requests WHERE start_ms >= $1 AND start_ms < $2 "
        "GROUP BY 1, 2, 3, 4, 5 ORDER BY 1",
        2, args, "rolling up hours", error);
    gboolean ok = res != NULL;
    for (int i = 0; ok && i < PQntuples(res); i++) {
        g_autofree char *key = hour_key(res, i);
        pg_hist *h = g_hash_table_lookup(hists, key);
        usage_hour_rec rec = {
            .utc_hour = get_i64(res, i, 0),
            .model = PQgetvalue(res, i, 1),
            .route = PQgetvalue(res, i, 2),
            .caller = PQgetvalue(res, i, 3),
            .client = PQgetvalue(res, i, 4),
            .sums = {
                .calls = get_i64(res, i, 5),
                .errors = get_i64(res, i, 6),
                .prompt_tokens = get_i64(res, i, 7),
                .cached_tokens = get_i64(res, i, 8),
                .completion_tokens = get_i64(res, i, 9),
                .busy_ms = get_i64(res, i, 10),
                .busy_ms_unmeasured = get_i64(res, i, 11),
                .energy_wms = get_dbl(res, i, 12),
                .decode_tokens = get_i64(res, i, 13),
                .decode_s = get_dbl(res, i, 14),
            },
        };
        if (h) {
            rec.ttft = (const usage_hist_pair *)h->pairs[0]->data;
            rec.n_ttft = h->pairs[0]->len;
            rec.total = (const usage_hist_pair *)h->pairs[1]->data;
            rec.n_total = h->pairs[1]->len;
        }
        ok = fn(&rec, user_data, error);
    }
    if (res)
        PQclear(res);
    g_hash_table_unref(hists);
    return ok;
}

gboolean usage_pg_each_row(usage_pg *pg, gint64 from_ms, gint64 to_ms, gint64 above_total_ms,
                           usage_row_fn fn, gpointer user_data, GError **error)
{
    gint64 args[3] = {from_ms, to_ms, above_total_ms};
    const char *sql = above_total_ms >= 0
        ? "SELECT local_id, start_ms, caller, client, endpoint, model, route, backend, quant, "
          "prompt_tokens, cached_tokens, completion_tokens, ttft_ms, total_ms, decode_tps, "
          "http_status, error_kind, finish_reason, gpu_power_w, busy_ms FROM moedesk_requests "
          "WHERE start_ms >= $1 AND start_ms < $2 AND total_ms > $3 AND NOT " PG_ERROR_SQL
        : "SELECT local_id, start_ms, caller, client, endpoint, model, route, backend, quant, "
          "prompt_tokens, cached_tokens, completion_tokens, ttft_ms, total_ms, decode_tps, "
          "http_status, error_kind, finish_reason, gpu_power_w, busy_ms FROM moedesk_requests "
          "WHERE start_ms >= $1 AND start_ms < $2";
    PGresult *res = query(pg, sql, above_total_ms >= 0 ? 3 : 2, args, "reading request rows",
                          error);
    if (!res)
        return FALSE;
    gboolean ok = TRUE;
    for (int i = 0; ok && i < PQntuples(res); i++) {
        usage_row r = {
            .start_ms = get_i64(res, i, 1),
            .caller = PQgetvalue(res, i, 2),
            .client = PQgetvalue(res, i, 3),
            .endpoint = PQgetvalue(res, i, 4),
            .model = PQgetvalue(res, i, 5),
            .route = PQgetvalue(res, i, 6),
            .backend = get_str(res, i, 7),
            .quant = get_str(res, i, 8),
            .prompt_tokens = get_i64(res, i, 9),
            .cached_tokens = get_i64(res, i, 10),
            .completion_tokens = get_i64(res, i, 11),
            .ttft_ms = PQgetisnull(res, i, 12) ? -1 : get_i64(res, i, 12),
            .total_ms = get_i64(res, i, 13),
            .decode_tps = PQgetisnull(res, i, 14) ? 0.0 : get_dbl(res, i, 14),
            .http_status = (gint)get_i64(res, i, 15),
            .error_kind = get_str(res, i, 16),
            .finish_reason = get_str(res, i, 17),
            .gpu_power_w = PQgetisnull(res, i, 18) ? -1.0 : get_dbl(res, i, 18),
            .busy_ms = get_i64(res, i, 19),
        };
        ok = fn(get_i64(res, i, 0), &r, user_data, error);
    }
    PQclear(res);
    return ok;
}

#endif /* HAVE_LIBPQ */

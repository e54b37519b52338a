/*
 * usage-pg.c — connecting to PostgreSQL and exporting the store's rows to
 * it. Each transaction carries `batch_rows` rows as multi-row INSERT ...
 * ON CONFLICT DO UPDATE statements of at most PG_ROWS_PER_STATEMENT rows
 * (23 text parameters each, well under Postgres's 65535-parameter limit).
 * A failed batch rolls back whole; the next run resumes after the newest
 * row Postgres holds for this gateway.
 */
#include "usage-pg-private.h"

#include <string.h>

gboolean usage_pg_available(void)
{
#ifdef HAVE_LIBPQ
    return TRUE;
#else
    return FALSE;
#endif
}

#ifndef HAVE_LIBPQ

static gboolean no_libpq(GError **error)
{
    g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_OPEN,
                "postgres: this moedesk was built without PostgreSQL support (libpq)");
    return FALSE;
}

usage_pg *usage_pg_connect(const char *conninfo, GError **error)
{
    no_libpq(error);
    return NULL;
}

void usage_pg_close(usage_pg *pg)
{
}

gboolean usage_pg_export(usage_pg *pg, usage_store *store, gboolean all, guint batch_rows,
                         guint64 *exported, GError **error)
{
    return no_libpq(error);
}

#else

#define PG_ROWS_PER_STATEMENT 500

static const char create_sql[] =
    "CREATE TABLE IF NOT EXISTS moedesk_requests ("
    " gateway_id TEXT NOT NULL, local_id BIGINT NOT NULL,"
    " start_ms BIGINT NOT NULL, caller TEXT NOT NULL, client TEXT NOT NULL,"
    " endpoint TEXT NOT NULL, model TEXT NOT NULL, route TEXT NOT NULL,"
    " backend TEXT, quant TEXT, prompt_tokens BIGINT NOT NULL, cached_tokens BIGINT NOT NULL,"
    " completion_tokens BIGINT NOT NULL, ttft_ms BIGINT, total_ms BIGINT NOT NULL,"
    " decode_tps DOUBLE PRECISION, http_status INTEGER NOT NULL, error_kind TEXT,"
    " finish_reason TEXT, gpu_power_w DOUBLE PRECISION, busy_ms BIGINT NOT NULL,"
    " ttft_bucket SMALLINT, total_bucket SMALLINT,"
    " exported_at TIMESTAMPTZ NOT NULL DEFAULT now(),"
    " PRIMARY KEY (gateway_id, local_id));"
    "CREATE INDEX IF NOT EXISTS moedesk_requests_start ON moedesk_requests (start_ms);";

static const char *const pg_cols[PG_N_COLS] = {
    "gateway_id", "local_id", "start_ms", "caller", "client", "endpoint", "model", "route",
    "backend", "quant", "prompt_tokens", "cached_tokens", "completion_tokens", "ttft_ms",
    "total_ms", "decode_tps", "http_status", "error_kind", "finish_reason", "gpu_power_w",
    "busy_ms", "ttft_bucket", "total_bucket",
};

gboolean usage_pg_fail(usage_pg *pg, GError **error, const char *doing, PGresult *res)
{
    const char *msg = res ? PQresultErrorMessage(res) : NULL;
    if (!msg || !msg[0])
        msg = PQerrorMessage(pg->conn);
    g_autofree char *clean = g_strstrip(g_strdup(msg));
    g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_WRITE, "postgres: %s: %s", doing,
                clean);
    if (res)
        PQclear(res);
    return FALSE;
}

gboolean usage_pg_command(usage_pg *pg, const char *sql, const char *doing, GError **error)
{
    PGresult *res = PQexec(pg->conn, sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        return usage_pg_fail(pg, error, doing, res);
    PQclear(res);
    return TRUE;
}

usage_pg *usage_pg_connect(const char *conninfo, GError **error)
{
    usage_pg *pg = g_new0(usage_pg, 1);
    pg->conn = PQconnectdb(conninfo);
    if (PQstatus(pg->conn) != CONNECTION_OK) {
        g_autofree char *msg = g_strstrip(g_strdup(PQerrorMessage(pg->conn)));
        g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_OPEN,
                    "postgres: cannot connect: %s", msg);
        usage_pg_close(pg);
        return NULL;
    }
    /* Quiet "relation already exists, skipping" notices. */
    PQclear(PQexec(pg->conn, "SET client_min_messages = warning"));
    if (!usage_pg_command(pg, create_sql, "creating table moedesk_requests", error)) {
        usage_pg_close(pg);
        return NULL;
    }
    return pg;
}

void usage_pg_close(usage_pg *pg)
{
    if (!pg)
        return;
    if (pg->conn)
        PQfinish(pg->conn);
    g_free(pg);
}

/* One batch of rows as text parameters, PG_N_COLS per row (NULL = SQL NULL). */
typedef struct export_batch {
    const char *gateway;
    GPtrArray *params;   /* char*, owned */
    guint n_rows;
    gint64 last_id;
} export_batch;

static char *opt_str(const char *s)
{
    return s && s[0] ? g_strdup(s) : NULL;
}

static char *i64(gint64 v)
{
    return g_strdup_printf("%" G_GINT64_FORMAT, v);
}

static char *dbl(double v)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    return g_strdup(g_ascii_dtostr(buf, sizeof buf, v));
}

static gboolean collect_row(gint64 id, const usage_row *r, gpointer data, GError **error)
{
    export_batch *b = data;
    gboolean ok = !usage_row_is_error(r);
    char *v[PG_N_COLS] = {
        g_strdup(b->gateway), i64(id), i64(r->start_ms), g_strdup(r->caller),
        g_strdup(r->client), g_strdup(r->endpoint), g_strdup(r->model), g_strdup(r->route),
        opt_str(r->backend), opt_str(r->quant), i64(r->prompt_tokens), i64(r->cached_tokens),
        i64(r->completion_tokens), r->ttft_ms >= 0 ? i64(r->ttft_ms) : NULL, i64(r->total_ms),
        r->decode_tps > 0 ? dbl(r->decode_tps) : NULL, i64(r->http_status),
        opt_str(r->error_kind), opt_str(r->finish_reason),
        r->gpu_power_w >= 0 ? dbl(r->gpu_power_w) : NULL, i64(r->busy_ms),
        ok && r->ttft_ms >= 0 ? i64(usage_hist_bucket(r->ttft_ms)) : NULL,
        ok ? i64(usage_hist_bucket(r->total_ms)) : NULL,
    };
    for (guint i = 0; i < PG_N_COLS; i++)
        g_ptr_array_add(b->params, v[i]);
    b->n_rows++;
    b->last_id = id;
    return TRUE;
}

static char *upsert_sql(guint n_rows)
{
    GString *sql = g_string_new("INSERT INTO moedesk_requests (");
    for (guint c = 0; c < PG_N_COLS; c++)
        g_string_append_printf(sql, "%s%s", c ? ", " : "", pg_cols[c]);
    g_string_append(sql, ") VALUES ");
    for (guint r = 0; r < n_rows; r++) {
        g_string_append(sql, r ? ", (" : "(");
        for (guint c = 0; c < PG_N_COLS; c++)
            g_string_append_printf(sql, "%s$%u", c ? "," : "", r * PG_N_COLS + c + 1);
        g_string_append_c(sql, ')');
    }
    g_string_append(sql, " ON CONFLICT (gateway_id, local_id) DO UPDATE SET ");
    for (guint c = 2; c < PG_N_COLS; c++)
        g_string_append_printf(sql, "%s%s = EXCLUDED.%s", c > 2 ? ", " : "", pg_cols[c],
                               pg_cols[c]);
    g_string_append(sql, ", exported_at = now()");
    return g_string_free(sql, FALSE);
}

static gboolean send_batch(usage_pg *pg, export_batch *b, GError **error)
{
    if (!usage_pg_command(pg, "BEGIN", "starting an export batch", error))
        return FALSE;
    for (guint first = 0; first < b->n_rows; first += PG_ROWS_PER_STATEMENT) {
        guint n = MIN(PG_ROWS_PER_STATEMENT, b->n_rows - first);
        g_autofree char *sql = upsert_sql(n);
        const char *const *values = (const char *const *)b->params->pdata + first * PG_N_COLS;
        PGresult *res = PQexecParams(pg->conn, sql, (int)(n * PG_N_COLS), NULL, values, NULL,
                                     NULL, 0);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            usage_pg_fail(pg, error, "upserting rows into moedesk_requests", res);
            PQclear(PQexec(pg->conn, "ROLLBACK"));
            return FALSE;
        }
        PQclear(res);
    }
    return usage_pg_command(pg, "COMMIT", "committing an export batch", error);
}

gboolean usage_pg_export(usage_pg *pg, usage_store *store, gboolean all, guint batch_rows,
                         guint64 *exported, GError **error)
{
    const char *gateway = usage_store_gateway_id(store);
    gint64 after = 0;
    *exported = 0;
    if (!all) {
        const char *params[] = {gateway};
        PGresult *res = PQexecParams(pg->conn,
                                     "SELECT COALESCE(max(local_id), 0) FROM moedesk_requests "
                                     "WHERE gateway_id = $1", 1, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(res) != PGRES_TUPLES_OK)
            return usage_pg_fail(pg, error, "reading this gateway's newest row", res);
        after = g_ascii_strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        PQclear(res);
    }
    batch_rows = CLAMP(batch_rows, 1u, 100000u);
    for (;;) {
        export_batch b = {gateway, g_ptr_array_new_with_free_func(g_free), 0, after};
        gboolean ok = usage_store_each_new_row(store, after, batch_rows, collect_row, &b, error) &&
                      (b.n_rows == 0 || send_batch(pg, &b, error));
        g_ptr_array_unref(b.params);
        if (!ok)
            return FALSE;
        if (b.n_rows == 0)
            return TRUE;
        *exported += b.n_rows;
        after = b.last_id;
    }
}

#endif /* HAVE_LIBPQ */

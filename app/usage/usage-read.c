/*
 * usage-read.c — the read side of the usage store: time range, hourly
 * roll-ups over an hour range, raw rows over a time range (the report's
 * partial hours and slow tail), new rows by id (the Postgres export) and
 * the newest rows (the service's recent-requests view).
 * Every walk holds the store's connection lock for its duration and hands
 * each record to a callback; nothing is collected in memory here.
 */
#include "usage-store-private.h"

typedef struct read_walk {
    usage_store *store;
    sqlite3_stmt *st;
    const char *doing;
} read_walk;

static gboolean walk_prepare(read_walk *w, usage_store *store, const char *sql,
                             const char *doing, GError **error)
{
    w->store = store;
    w->st = NULL;
    w->doing = doing;
    int rc = sqlite3_prepare_v2(store->db, sql, -1, &w->st, NULL);
    if (rc != SQLITE_OK) {
        usage_store_set_sqlite_error(store, error, rc, doing);
        return FALSE;
    }
    return TRUE;
}

/* Step result to success or error; finalizes the statement either way. */
static gboolean walk_finish(read_walk *w, int rc, gboolean cb_ok, GError **error)
{
    sqlite3_finalize(w->st);
    if (!cb_ok)
        return FALSE;
    if (rc != SQLITE_DONE) {
        usage_store_set_sqlite_error(w->store, error, rc, w->doing);
        return FALSE;
    }
    return TRUE;
}

gboolean usage_store_time_range(usage_store *store, gint64 *first_ms, gint64 *last_ms,
                                gboolean *any, GError **error)
{
    /* Two statements: SQLite answers a lone min() or max() from the index
     * in O(log n) but scans the whole index when both share a query. */
    static const char *const sql[2] = {"SELECT min(start_ms) FROM requests",
                                       "SELECT max(start_ms) FROM requests"};
    gint64 *out[2] = {first_ms, last_ms};
    gboolean ok = TRUE;
    g_mutex_lock(&store->db_lock);
    for (int i = 0; i < 2 && ok; i++) {
        read_walk w;
        ok = walk_prepare(&w, store, sql[i], "reading the time range", error);
        if (!ok)
            break;
        int rc = sqlite3_step(w.st);
        if (rc == SQLITE_ROW) {
            *any = sqlite3_column_type(w.st, 0) != SQLITE_NULL;
            *out[i] = sqlite3_column_int64(w.st, 0);
            rc = SQLITE_DONE;
        }
        ok = walk_finish(&w, rc, TRUE, error);
    }
    g_mutex_unlock(&store->db_lock);
    return ok;
}

gboolean usage_store_each_hour(usage_store *store, gint64 from_hour, gint64 to_hour,
                               usage_hour_fn fn, gpointer user_data, GError **error)
{
    g_mutex_lock(&store->db_lock);
    read_walk w;
    gboolean ok = walk_prepare(&w, store,
        "SELECT utc_hour, model, route, caller, client, calls, errors, prompt_tokens, "
        "cached_tokens, completion_tokens, busy_ms, busy_ms_unmeasured, energy_wms, "
        "decode_tokens, decode_s, ttft_hist, total_hist FROM hourly "
        "WHERE utc_hour >= ? AND utc_hour < ? ORDER BY utc_hour",
        "reading hourly roll-ups", error);
    if (!ok) {
        g_mutex_unlock(&store->db_lock);
        return FALSE;
    }
    usage_hist_pair *ttft = g_new(usage_hist_pair, USAGE_HIST_N_BUCKETS);
    usage_hist_pair *total = g_new(usage_hist_pair, USAGE_HIST_N_BUCKETS);
    sqlite3_bind_int64(w.st, 1, from_hour);
    sqlite3_bind_int64(w.st, 2, to_hour);
    int rc = SQLITE_DONE;
    gboolean cb_ok = TRUE;
    while (cb_ok && (rc = sqlite3_step(w.st)) == SQLITE_ROW) {
        sqlite3_stmt *st = w.st;
        usage_hour_rec rec = {
            .utc_hour = sqlite3_column_int64(st, 0),
            .model = (const char *)sqlite3_column_text(st, 1),
            .route = (const char *)sqlite3_column_text(st, 2),
            .caller = (const char *)sqlite3_column_text(st, 3),
            .client = (const char *)sqlite3_column_text(st, 4),
            .sums = {
                .calls = sqlite3_column_int64(st, 5),
                .errors = sqlite3_column_int64(st, 6),
                .prompt_tokens = sqlite3_column_int64(st, 7),
                .cached_tokens = sqlite3_column_int64(st, 8),
                .completion_tokens = sqlite3_column_int64(st, 9),
                .busy_ms = sqlite3_column_int64(st, 10),
                .busy_ms_unmeasured = sqlite3_column_int64(st, 11),
                .energy_wms = sqlite3_column_double(st, 12),
                .decode_tokens = sqlite3_column_int64(st, 13),
                .decode_s = sqlite3_column_double(st, 14),
            },
            .ttft = ttft,
            .total = total,
        };
        if (!rec.model || !rec.route || !rec.caller || !rec.client) {
            g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_CORRUPT,
                        "%s: hourly roll-up for hour %" G_GINT64_FORMAT " has a NULL key",
                        store->path, rec.utc_hour);
            cb_ok = FALSE;
            break;
        }
        gboolean decoded =
            usage_hist_decode(sqlite3_column_blob(st, 15), (gsize)sqlite3_column_bytes(st, 15),
                              ttft, &rec.n_ttft, store->path, error) &&
            usage_hist_decode(sqlite3_column_blob(st, 16), (gsize)sqlite3_column_bytes(st, 16),
                              total, &rec.n_total, store->path, error);
        if (!decoded)
            g_prefix_error(error, "hourly roll-up of hour %" G_GINT64_FORMAT ": ", rec.utc_hour);
        cb_ok = decoded && fn(&rec, user_data, error);
    }
    ok = walk_finish(&w, rc, cb_ok, error);
    g_free(ttft);
    g_free(total);
    g_mutex_unlock(&store->db_lock);
    return ok;
}

static gboolean walk_rows(read_walk *w, usage_row_fn fn, gpointer user_data, GError **error)
{
    int rc = SQLITE_DONE;
    gboolean cb_ok = TRUE;
    while (cb_ok && (rc = sqlite3_step(w->st)) == SQLITE_ROW) {
        usage_row row;
        usage_row_read(w->st, 1, &row);
        cb_ok = fn(sqlite3_column_int64(w->st, 0), &row, user_data, error);
    }
    return walk_finish(w, rc, cb_ok, error);
}

gboolean usage_store_each_row(usage_store *store, gint64 from_ms, gint64 to_ms,
                              gint64 above_total_ms, usage_row_fn fn, gpointer user_data,
                              GError **error)
{
    g_mutex_lock(&store->db_lock);
    read_walk w;
    /* The slow-tail form filters on total_ms inside the (start_ms, total_ms)
     * index, so it reads only the rows that qualify. */
    const char *sql = above_total_ms >= 0
        ? "SELECT id, " USAGE_ROW_COLUMNS " FROM requests "
          "WHERE start_ms >= ?1 AND start_ms < ?2 AND total_ms > ?3 "
          "AND http_status < 400 AND (error_kind IS NULL OR error_kind = '')"
        : "SELECT id, " USAGE_ROW_COLUMNS " FROM requests "
          "WHERE start_ms >= ?1 AND start_ms < ?2";
    gboolean ok = walk_prepare(&w, store, sql, "reading request rows", error);
    if (ok) {
        sqlite3_bind_int64(w.st, 1, from_ms);
        sqlite3_bind_int64(w.st, 2, to_ms);
        if (above_total_ms >= 0)
            sqlite3_bind_int64(w.st, 3, above_total_ms);
        ok = walk_rows(&w, fn, user_data, error);
    }
    g_mutex_unlock(&store->db_lock);
    return ok;
}

gboolean usage_store_each_new_row(usage_store *store, gint64 after_id, guint limit,
                                  usage_row_fn fn, gpointer user_data, GError **error)
{
    g_mutex_lock(&store->db_lock);
    read_walk w;
    gboolean ok = walk_prepare(&w, store,
                               "SELECT id, " USAGE_ROW_COLUMNS " FROM requests "
                               "WHERE id > ? ORDER BY id LIMIT ?",
                               "reading request rows", error);
    if (ok) {
        sqlite3_bind_int64(w.st, 1, after_id);
        sqlite3_bind_int64(w.st, 2, limit);
        ok = walk_rows(&w, fn, user_data, error);
    }
    g_mutex_unlock(&store->db_lock);
    return ok;
}

gboolean usage_store_each_recent_row(usage_store *store, guint limit, usage_row_fn fn,
                                     gpointer user_data, GError **error)
{
    g_mutex_lock(&store->db_lock);
    read_walk w;
    gboolean ok = walk_prepare(&w, store,
                               "SELECT id, " USAGE_ROW_COLUMNS " FROM requests "
                               "ORDER BY id DESC LIMIT ?",
                               "reading recent request rows", error);
    if (ok) {
        sqlite3_bind_int64(w.st, 1, limit);
        ok = walk_rows(&w, fn, user_data, error);
    }
    g_mutex_unlock(&store->db_lock);
    return ok;
}

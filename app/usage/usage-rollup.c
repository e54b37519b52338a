/*
 * usage-rollup.c — keeps the `hourly` table in step with `requests`.
 *
 * Each write transaction first groups its rows in memory by (UTC hour,
 * model, route, caller, client): sums via usage_sums_add_row() and the
 * latency bucket of every ok row. Then, per group, it reads the existing
 * hourly row (if any), adds the sums, merges the bucket counts into the
 * stored blobs and writes the row back — one SELECT and one INSERT OR
 * REPLACE per group, not per request, which is what keeps the per-insert cost low
 * (docs/benchmarks.md, "Weekly report").
 */
#include "usage-store-private.h"

#include <string.h>

typedef struct rollup_group {
    gint64 hour;
    char *model, *route, *caller, *client;
    usage_sums sums;
    GArray *ttft_buckets;    /* guint32, one per ok row with a TTFT */
    GArray *total_buckets;   /* guint32, one per ok row */
} rollup_group;

struct usage_rollup {
    GHashTable *groups;      /* key string -> rollup_group* (owned) */
    GString *key;            /* scratch */
    usage_hist_pair *scratch_a, *scratch_b, *scratch_c;  /* N_BUCKETS each */
};

static void group_free(gpointer p)
{
    rollup_group *g = p;
    g_free(g->model);
    g_free(g->route);
    g_free(g->caller);
    g_free(g->client);
    g_array_unref(g->ttft_buckets);
    g_array_unref(g->total_buckets);
    g_free(g);
}

usage_rollup *usage_rollup_new(void)
{
    usage_rollup *r = g_new0(usage_rollup, 1);
    r->groups = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, group_free);
    r->key = g_string_sized_new(128);
    r->scratch_a = g_new(usage_hist_pair, USAGE_HIST_N_BUCKETS);
    r->scratch_b = g_new(usage_hist_pair, USAGE_HIST_N_BUCKETS);
    r->scratch_c = g_new(usage_hist_pair, USAGE_HIST_N_BUCKETS);
    return r;
}

void usage_rollup_free(usage_rollup *r)
{
    if (!r)
        return;
    g_hash_table_unref(r->groups);
    g_string_free(r->key, TRUE);
    g_free(r->scratch_a);
    g_free(r->scratch_b);
    g_free(r->scratch_c);
    g_free(r);
}

static const char *nz(const char *s)
{
    return s ? s : "";
}

void usage_rollup_add(usage_rollup *r, const usage_row *row)
{
    gint64 hour = row->start_ms / 3600000;
    /* \x1f (unit separator) cannot collide with a plain-text name boundary. */
    g_string_printf(r->key, "%" G_GINT64_FORMAT "\x1f%s\x1f%s\x1f%s\x1f%s", hour,
                    nz(row->model), nz(row->route), nz(row->caller), nz(row->client));
    rollup_group *g = g_hash_table_lookup(r->groups, r->key->str);
    if (!g) {
        g = g_new0(rollup_group, 1);
        g->hour = hour;
        g->model = g_strdup(nz(row->model));
        g->route = g_strdup(nz(row->route));
        g->caller = g_strdup(nz(row->caller));
        g->client = g_strdup(nz(row->client));
        g->ttft_buckets = g_array_new(FALSE, FALSE, sizeof(guint32));
        g->total_buckets = g_array_new(FALSE, FALSE, sizeof(guint32));
        g_hash_table_insert(r->groups, g_strdup(r->key->str), g);
    }
    usage_sums_add_row(&g->sums, row);
    if (!usage_row_is_error(row)) {
        guint32 b = usage_hist_bucket(row->total_ms);
        g_array_append_val(g->total_buckets, b);
        if (row->ttft_ms >= 0) {
            b = usage_hist_bucket(row->ttft_ms);
            g_array_append_val(g->ttft_buckets, b);
        }
    }
}

static gint cmp_u32(gconstpointer a, gconstpointer b)
{
    guint32 x = *(const guint32 *)a, y = *(const guint32 *)b;
    return x < y ? -1 : x > y;
}

/* Sorted bucket list -> pairs (run-length). */
static guint buckets_to_pairs(GArray *buckets, usage_hist_pair *out)
{
    g_array_sort(buckets, cmp_u32);
    guint n = 0;
    const guint32 *b = (const guint32 *)buckets->data;
    for (guint i = 0; i < buckets->len; i++) {
        if (n > 0 && out[n - 1].bucket == b[i]) {
            out[n - 1].count++;
        } else {
            out[n].bucket = b[i];
            out[n++].count = 1;
        }
    }
    return n;
}

/* Stored blob (may be NULL) + new buckets -> new blob (g_malloc'd). */
static gboolean merge_blob(usage_rollup *r, usage_store *store, const void *old,
                          int old_len, GArray *buckets, guint8 **blob, gsize *len,
                          GError **error)
{
    guint n_old = 0;
    if (old && old_len > 0 &&
        !usage_hist_decode(old, (gsize)old_len, r->scratch_a, &n_old, store->path, error))
        return FALSE;
    guint n_new = buckets_to_pairs(buckets, r->scratch_b);
    guint n = usage_hist_merge(r->scratch_a, n_old, r->scratch_b, n_new, r->scratch_c);
    *blob = usage_hist_encode(r->scratch_c, n, len);
    return TRUE;
}

static void bind_blob(sqlite3_stmt *st, int i, guint8 *blob, gsize len)
{
    if (blob)
        sqlite3_bind_blob64(st, i, blob, len, g_free);
    else
        sqlite3_bind_null(st, i);
}

static void bind_sums(sqlite3_stmt *st, int i, const usage_sums *s)
{
    sqlite3_bind_int64(st, i + 0, s->calls);
    sqlite3_bind_int64(st, i + 1, s->errors);
    sqlite3_bind_int64(st, i + 2, s->prompt_tokens);
    sqlite3_bind_int64(st, i + 3, s->cached_tokens);
    sqlite3_bind_int64(st, i + 4, s->completion_tokens);
    sqlite3_bind_int64(st, i + 5, s->busy_ms);
    sqlite3_bind_int64(st, i + 6, s->busy_ms_unmeasured);
    sqlite3_bind_double(st, i + 7, s->energy_wms);
    sqlite3_bind_int64(st, i + 8, s->decode_tokens);
    sqlite3_bind_double(st, i + 9, s->decode_s);
}

static gboolean flush_group(usage_rollup *r, usage_store *store, rollup_group *g,
                            GError **error)
{
    sqlite3_stmt *sel = store->sel_hour;
    sqlite3_reset(sel);
    sqlite3_bind_int64(sel, 1, g->hour);
    sqlite3_bind_text(sel, 2, g->model, -1, SQLITE_STATIC);
    sqlite3_bind_text(sel, 3, g->route, -1, SQLITE_STATIC);
    sqlite3_bind_text(sel, 4, g->caller, -1, SQLITE_STATIC);
    sqlite3_bind_text(sel, 5, g->client, -1, SQLITE_STATIC);
    int rc = sqlite3_step(sel);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        usage_store_set_sqlite_error(store, error, rc, "reading an hourly roll-up");
        sqlite3_reset(sel);
        return FALSE;
    }
    gboolean exists = rc == SQLITE_ROW;
    usage_sums sums = g->sums;
    guint8 *ttft = NULL, *total = NULL;
    gsize ttft_len = 0, total_len = 0;
    gboolean ok;
    if (exists) {
        usage_sums old = {
            .calls = sqlite3_column_int64(sel, 0),
            .errors = sqlite3_column_int64(sel, 1),
            .prompt_tokens = sqlite3_column_int64(sel, 2),
            .cached_tokens = sqlite3_column_int64(sel, 3),
            .completion_tokens = sqlite3_column_int64(sel, 4),
            .busy_ms = sqlite3_column_int64(sel, 5),
            .busy_ms_unmeasured = sqlite3_column_int64(sel, 6),
            .energy_wms = sqlite3_column_double(sel, 7),
            .decode_tokens = sqlite3_column_int64(sel, 8),
            .decode_s = sqlite3_column_double(sel, 9),
        };
        /* Old first, then the batch: the order a full rebuild adds them in. */
        usage_sums_add(&old, &sums);
        sums = old;
        ok = merge_blob(r, store, sqlite3_column_blob(sel, 10), sqlite3_column_bytes(sel, 10),
                        g->ttft_buckets, &ttft, &ttft_len, error) &&
             merge_blob(r, store, sqlite3_column_blob(sel, 11), sqlite3_column_bytes(sel, 11),
                        g->total_buckets, &total, &total_len, error);
    } else {
        ok = merge_blob(r, store, NULL, 0, g->ttft_buckets, &ttft, &ttft_len, error) &&
             merge_blob(r, store, NULL, 0, g->total_buckets, &total, &total_len, error);
    }
    sqlite3_reset(sel);
    if (!ok) {
        g_free(ttft);
        g_free(total);
        return FALSE;
    }
    sqlite3_stmt *w = store->put_hour;
    sqlite3_reset(w);
    sqlite3_bind_int64(w, 1, g->hour);
    sqlite3_bind_text(w, 2, g->model, -1, SQLITE_STATIC);
    sqlite3_bind_text(w, 3, g->route, -1, SQLITE_STATIC);
    sqlite3_bind_text(w, 4, g->caller, -1, SQLITE_STATIC);
    sqlite3_bind_text(w, 5, g->client, -1, SQLITE_STATIC);
    bind_sums(w, 6, &sums);
    bind_blob(w, 16, ttft, ttft_len);
    bind_blob(w, 17, total, total_len);
    rc = sqlite3_step(w);
    sqlite3_reset(w);
    sqlite3_clear_bindings(w);  /* drop the blobs (bound with g_free) now */
    if (rc != SQLITE_DONE) {
        usage_store_set_sqlite_error(store, error, rc, "writing an hourly roll-up");
        return FALSE;
    }
    return TRUE;
}

gboolean usage_rollup_flush(usage_rollup *r, usage_store *store, GError **error)
{
    GHashTableIter it;
    gpointer value;
    gboolean ok = TRUE;
    g_hash_table_iter_init(&it, r->groups);
    while (ok && g_hash_table_iter_next(&it, NULL, &value))
        ok = flush_group(r, store, value, error);
    g_hash_table_remove_all(r->groups);
    return ok;
}

gboolean usage_rollup_rebuild(usage_store *store, GError **error)
{
    if (!usage_store_exec(store, "DELETE FROM hourly", "clearing roll-ups", error))
        return FALSE;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(store->db,
                                "SELECT " USAGE_ROW_COLUMNS " FROM requests ORDER BY id",
                                -1, &st, NULL);
    if (rc != SQLITE_OK) {
        usage_store_set_sqlite_error(store, error, rc, "rebuilding roll-ups");
        return FALSE;
    }
    usage_rollup *r = usage_rollup_new();
    gboolean ok = TRUE;
    guint pending = 0;
    while (ok && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        usage_row row;
        usage_row_read(st, 0, &row);
        usage_rollup_add(r, &row);
        /* Bound memory on big logs: merge every 64k rows. */
        if (++pending == 65536) {
            ok = usage_rollup_flush(r, store, error);
            pending = 0;
        }
    }
    if (ok && rc != SQLITE_DONE) {
        usage_store_set_sqlite_error(store, error, rc, "rebuilding roll-ups");
        ok = FALSE;
    }
    sqlite3_finalize(st);
    if (ok)
        ok = usage_rollup_flush(r, store, error);
    usage_rollup_free(r);
    return ok;
}

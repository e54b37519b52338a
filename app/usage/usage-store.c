/*
 * usage-store.c — opening and closing the usage database, the append queue
 * and its writer thread, and the one transaction shape every write uses
 * (raw rows + their hourly roll-ups). See usage-store.h for the contract.
 *
 * The writer thread sleeps until rows are queued, then until the oldest has
 * waited USAGE_BATCH_WAIT_US or USAGE_BATCH_ROWS are queued (or a flush or
 * close asks), then commits everything queued (at most USAGE_BATCH_MAX per
 * transaction). A failed commit puts the rows back at the head of the queue
 * and retries after USAGE_RETRY_US; flush reports the failure.
 */
#include "usage-store-private.h"

#include <string.h>

#define USAGE_BATCH_WAIT_US (250 * G_TIME_SPAN_MILLISECOND)
#define USAGE_BATCH_ROWS 256
#define USAGE_BATCH_MAX 8192
#define USAGE_RETRY_US G_TIME_SPAN_SECOND
#define USAGE_BUSY_TIMEOUT_MS 5000
#define USAGE_BUSY_TIMEOUT_RO_MS 3000

G_DEFINE_QUARK(moedesk-usage-store-error-quark, usage_store_error)

/* A queued row: the struct plus its strings in one allocation. */
typedef struct usage_qrow {
    usage_row row;
    char strings[];
} usage_qrow;

static usage_qrow *qrow_copy(const usage_row *src)
{
    const char *s[] = {src->caller, src->client, src->endpoint, src->model, src->route,
                       src->backend, src->quant, src->error_kind, src->finish_reason};
    gsize len[G_N_ELEMENTS(s)], total = 0;
    for (guint i = 0; i < G_N_ELEMENTS(s); i++) {
        len[i] = s[i] ? strlen(s[i]) + 1 : 0;
        total += len[i];
    }
    usage_qrow *q = g_malloc(sizeof *q + total);
    q->row = *src;
    const char **dst[] = {&q->row.caller, &q->row.client, &q->row.endpoint,
                          &q->row.model, &q->row.route, &q->row.backend,
                          &q->row.quant, &q->row.error_kind, &q->row.finish_reason};
    char *p = q->strings;
    for (guint i = 0; i < G_N_ELEMENTS(s); i++) {
        if (!s[i]) {
            *dst[i] = NULL;
            continue;
        }
        memcpy(p, s[i], len[i]);
        *dst[i] = p;
        p += len[i];
    }
    return q;
}

void usage_store_set_sqlite_error(usage_store *store, GError **error, int rc,
                                  const char *doing)
{
    int code;
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_LOCKED,
                    "%s: database is locked by another connection (%s; waited %d s)",
                    store->path, doing,
                    (store->read_only ? USAGE_BUSY_TIMEOUT_RO_MS : USAGE_BUSY_TIMEOUT_MS) / 1000);
        return;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        code = USAGE_STORE_ERROR_CORRUPT;
        break;
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_AUTH:
        code = USAGE_STORE_ERROR_OPEN;
        break;
    case SQLITE_READONLY:
        code = USAGE_STORE_ERROR_READ_ONLY;
        break;
    default:
        code = USAGE_STORE_ERROR_WRITE;
    }
    const char *msg = store->db ? sqlite3_errmsg(store->db) : sqlite3_errstr(rc);
    g_set_error(error, USAGE_STORE_ERROR, code, "%s: %s: %s", store->path, doing, msg);
}

gboolean usage_store_exec(usage_store *store, const char *sql, const char *doing,
                          GError **error)
{
    int rc = sqlite3_exec(store->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        usage_store_set_sqlite_error(store, error, rc, doing);
        return FALSE;
    }
    return TRUE;
}

/* ---- writes ------------------------------------------------------------ */

gboolean usage_store_write_rows(usage_store *store, const void *rows, gsize n,
                                gboolean pointers, GError **error)
{
    if (!usage_store_exec(store, "BEGIN IMMEDIATE", "starting a write", error))
        return FALSE;
    usage_rollup *rollup = usage_rollup_new();
    gint64 t0 = g_get_monotonic_time();
    gboolean ok = TRUE;
    for (gsize i = 0; i < n && ok; i++) {
        const usage_row *row = pointers ? &((usage_qrow *const *)rows)[i]->row
                                        : &((const usage_row *)rows)[i];
        sqlite3_reset(store->ins_row);
        usage_row_bind(store->ins_row, 1, row);
        int rc = sqlite3_step(store->ins_row);
        if (rc != SQLITE_DONE) {
            usage_store_set_sqlite_error(store, error, rc, "inserting a request row");
            ok = FALSE;
        }
        usage_rollup_add(rollup, row);
    }
    sqlite3_reset(store->ins_row);
    gint64 t1 = g_get_monotonic_time();
    if (ok)
        ok = usage_rollup_flush(rollup, store, error);
    usage_rollup_free(rollup);
    gint64 t2 = g_get_monotonic_time();
    if (ok)
        ok = usage_store_exec(store, "COMMIT", "committing a batch", error);
    gint64 t3 = g_get_monotonic_time();
    if (!ok) {
        sqlite3_exec(store->db, "ROLLBACK", NULL, NULL, NULL);
        return FALSE;
    }
    store->stats.rows_written += n;
    store->stats.batches++;
    store->stats.insert_us += (guint64)(t1 - t0);
    store->stats.rollup_us += (guint64)(t2 - t1);
    store->stats.commit_us += (guint64)(t3 - t2);
    return TRUE;
}

gboolean usage_store_insert_bulk(usage_store *store, const usage_row *rows, gsize n,
                                 GError **error)
{
    g_return_val_if_fail(store != NULL, FALSE);
    if (store->read_only) {
        g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_READ_ONLY,
                    "%s: opened read-only", store->path);
        return FALSE;
    }
    for (gsize i = 0; i < n; i++) {
        g_autoptr(GError) bad = NULL;
        if (!usage_row_validate(&rows[i], &bad)) {
            g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_INVALID,
                        "%s: row %" G_GSIZE_FORMAT ": %s", store->path, i, bad->message);
            return FALSE;
        }
    }
    g_mutex_lock(&store->db_lock);
    gboolean ok = usage_store_write_rows(store, rows, n, FALSE, error);
    g_mutex_unlock(&store->db_lock);
    return ok;
}

static gpointer writer_main(gpointer data)
{
    usage_store *store = data;
    gint64 retry_at = 0;
    gboolean failed_while_stopping = FALSE;

    g_mutex_lock(&store->q_lock);
    for (;;) {
        if (store->queue->len == 0 || failed_while_stopping) {
            if (store->stopping)
                break;
            g_cond_wait(&store->q_cond, &store->q_lock);
            continue;
        }
        gint64 now = g_get_monotonic_time();
        if (!store->stopping && now < retry_at) {
            g_cond_wait_until(&store->q_cond, &store->q_lock, retry_at);
            continue;
        }
        gboolean due = store->stopping || store->flush_waiters > 0 ||
                       store->queue->len >= USAGE_BATCH_ROWS ||
                       now >= store->first_queued_us + USAGE_BATCH_WAIT_US;
        if (!due) {
            g_cond_wait_until(&store->q_cond, &store->q_lock,
                              store->first_queued_us + USAGE_BATCH_WAIT_US);
            continue;
        }
        /* Take the oldest rows; later appends keep queuing meanwhile. */
        guint take = MIN(store->queue->len, (guint)USAGE_BATCH_MAX);
        GPtrArray *batch = g_ptr_array_new_full(take, g_free);
        for (guint i = 0; i < take; i++)
            g_ptr_array_add(batch, store->queue->pdata[i]);
        g_ptr_array_set_free_func(store->queue, NULL);  /* moved, not freed */
        g_ptr_array_remove_range(store->queue, 0, take);
        g_ptr_array_set_free_func(store->queue, g_free);
        store->first_queued_us = g_get_monotonic_time();
        g_mutex_unlock(&store->q_lock);

        GError *err = NULL;
        g_mutex_lock(&store->db_lock);
        gboolean ok = usage_store_write_rows(store, batch->pdata, batch->len, TRUE, &err);
        g_mutex_unlock(&store->db_lock);

        g_mutex_lock(&store->q_lock);
        if (ok) {
            store->seq_committed += batch->len;
            g_clear_error(&store->write_error);
            g_ptr_array_unref(batch);
        } else {
            /* Back to the head, in order, for the retry. */
            g_ptr_array_set_free_func(batch, NULL);
            for (guint i = 0; i < batch->len; i++)
                g_ptr_array_insert(store->queue, (gint)i, batch->pdata[i]);
            g_ptr_array_unref(batch);
            g_clear_error(&store->write_error);
            store->write_error = err;
            store->n_failures++;
            retry_at = g_get_monotonic_time() + USAGE_RETRY_US;
            if (store->stopping)
                failed_while_stopping = TRUE;
        }
        g_cond_broadcast(&store->done_cond);
    }
    g_mutex_unlock(&store->q_lock);
    return NULL;
}

gboolean usage_store_append(usage_store *store, const usage_row *row)
{
    g_return_val_if_fail(store != NULL && row != NULL, FALSE);
    gboolean ok = !store->read_only && usage_row_validate(row, NULL);
    g_mutex_lock(&store->q_lock);
    if (ok && store->queue->len >= USAGE_STORE_QUEUE_MAX)
        ok = FALSE;
    if (!ok) {
        store->stats.rows_dropped++;
    } else {
        if (store->queue->len == 0)
            store->first_queued_us = g_get_monotonic_time();
        g_ptr_array_add(store->queue, qrow_copy(row));
        store->seq_appended++;
        if (store->queue->len == 1 || store->queue->len == USAGE_BATCH_ROWS)
            g_cond_signal(&store->q_cond);
    }
    g_mutex_unlock(&store->q_lock);
    return ok;
}

gboolean usage_store_flush(usage_store *store, GError **error)
{
    g_return_val_if_fail(store != NULL, FALSE);
    if (store->read_only)
        return TRUE;
    g_mutex_lock(&store->q_lock);
    guint64 target = store->seq_appended;
    guint64 failures = store->n_failures;
    store->flush_waiters++;
    g_cond_signal(&store->q_cond);
    while (store->seq_committed < target && store->n_failures == failures)
        g_cond_wait(&store->done_cond, &store->q_lock);
    store->flush_waiters--;
    gboolean ok = store->seq_committed >= target;
    if (!ok)
        g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_WRITE,
                    "%s: %u rows not yet written: %s", store->path, store->queue->len,
                    store->write_error ? store->write_error->message : "commit failed");
    g_mutex_unlock(&store->q_lock);
    return ok;
}

/* ---- open / close ------------------------------------------------------ */

static void store_free(usage_store *store)
{
    sqlite3_finalize(store->ins_row);
    sqlite3_finalize(store->sel_hour);
    sqlite3_finalize(store->put_hour);
    if (store->db)
        sqlite3_close(store->db);
    if (store->queue)
        g_ptr_array_unref(store->queue);
    g_clear_error(&store->write_error);
    g_mutex_clear(&store->db_lock);
    g_mutex_clear(&store->q_lock);
    g_cond_clear(&store->q_cond);
    g_cond_clear(&store->done_cond);
    g_free(store->gateway_id);
    g_free(store->path);
    g_free(store);
}

usage_store *usage_store_open(const char *path, usage_store_flags flags, GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    usage_store *store = g_new0(usage_store, 1);
    store->path = g_strdup(path);
    store->read_only = (flags & USAGE_STORE_READ_ONLY) != 0;
    g_mutex_init(&store->db_lock);
    g_mutex_init(&store->q_lock);
    g_cond_init(&store->q_cond);
    g_cond_init(&store->done_cond);
    store->queue = g_ptr_array_new_with_free_func(g_free);

    if (store->read_only && !g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_OPEN,
                    "%s: no such usage database", path);
        store_free(store);
        return NULL;
    }
    /* NOMUTEX: every use of the connection is serialised by db_lock. */
    int oflags = SQLITE_OPEN_NOMUTEX |
                 (store->read_only ? SQLITE_OPEN_READONLY
                                   : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    int rc = sqlite3_open_v2(path, &store->db, oflags, NULL);
    if (rc != SQLITE_OK) {
        usage_store_set_sqlite_error(store, error, rc, "opening");
        store_free(store);
        return NULL;
    }
    sqlite3_extended_result_codes(store->db, 0);
    sqlite3_busy_timeout(store->db, store->read_only ? USAGE_BUSY_TIMEOUT_RO_MS
                                                     : USAGE_BUSY_TIMEOUT_MS);
    /* Read the header before anything writes: a file that is not a database
     * fails here untouched. */
    if (!usage_store_exec(store, "SELECT count(*) FROM sqlite_master",
                          "reading the schema", error) ||
        !usage_schema_prepare(store, error) ||
        (!store->read_only && !usage_store_prepare_writes(store, error))) {
        store_free(store);
        return NULL;
    }
    if (!store->read_only)
        store->writer = g_thread_new("usage-writer", writer_main, store);
    return store;
}

gboolean usage_store_close(usage_store *store, GError **error)
{
    if (!store)
        return TRUE;
    gboolean ok = TRUE;
    if (store->writer) {
        g_mutex_lock(&store->q_lock);
        store->stopping = TRUE;
        g_cond_signal(&store->q_cond);
        g_mutex_unlock(&store->q_lock);
        g_thread_join(store->writer);
        store->writer = NULL;
        if (store->queue->len > 0) {
            g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_WRITE,
                        "%s: %u rows could not be written before closing: %s",
                        store->path, store->queue->len,
                        store->write_error ? store->write_error->message : "commit failed");
            ok = FALSE;
        }
    }
    if (!store->read_only && store->db)
        sqlite3_exec(store->db, "PRAGMA optimize", NULL, NULL, NULL);
    store_free(store);
    return ok;
}

void usage_store_get_stats(usage_store *store, usage_store_stats *stats)
{
    g_mutex_lock(&store->db_lock);
    g_mutex_lock(&store->q_lock);
    *stats = store->stats;
    g_mutex_unlock(&store->q_lock);
    g_mutex_unlock(&store->db_lock);
}

char *usage_store_default_path(void)
{
    const char *env = g_getenv("MOEDESK_DATA_DIR");
    if (env && env[0])
        return g_build_filename(env, "usage.sqlite3", NULL);
    return g_build_filename(g_get_user_data_dir(), "moedesk", "usage.sqlite3", NULL);
}

const char *usage_store_gateway_id(usage_store *store)
{
    return store->gateway_id;
}

const char *usage_store_path(usage_store *store)
{
    return store->path;
}

int usage_store_schema_version(usage_store *store)
{
    return store->schema_version;
}

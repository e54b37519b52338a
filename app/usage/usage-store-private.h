/*
 * usage-store-private.h — what the usage store's own files share: the store
 * struct, the raw-row column list with its bind/read helpers, the schema
 * migrator and the roll-up accumulator. Not for use outside app/usage/.
 */
#ifndef MOEDESK_USAGE_STORE_PRIVATE_H
#define MOEDESK_USAGE_STORE_PRIVATE_H

#include <sqlite3.h>

#include "usage-store.h"

/* Raw columns in the order usage_row_bind()/usage_row_read() use. */
#define USAGE_ROW_COLUMNS                                                       \
    "start_ms, caller, client, endpoint, model, route, backend, quant, "       \
    "prompt_tokens, cached_tokens, completion_tokens, ttft_ms, total_ms, "     \
    "decode_tps, http_status, error_kind, finish_reason, gpu_power_w, busy_ms"
#define USAGE_ROW_N_COLUMNS 19

struct usage_store {
    char *path;
    sqlite3 *db;
    GMutex db_lock;          /* guards db, its statements and stats */
    gboolean read_only;
    char *gateway_id;
    int schema_version;

    /* Prepared on the writer's side (NULL when read-only). */
    sqlite3_stmt *ins_row;
    sqlite3_stmt *sel_hour;
    sqlite3_stmt *put_hour;  /* INSERT OR REPLACE */

    /* Append queue, guarded by q_lock. seq_* count rows ever queued and
     * committed; a flush waits for seq_committed to reach its target. */
    GMutex q_lock;
    GCond q_cond;            /* wakes the writer */
    GCond done_cond;         /* wakes flushers after each commit attempt */
    GPtrArray *queue;        /* usage_qrow*, oldest first */
    gint64 first_queued_us;  /* monotonic time the oldest queued row arrived */
    guint64 seq_appended;
    guint64 seq_committed;
    guint64 n_failures;      /* failed commit attempts */
    GError *write_error;     /* the last failure, cleared by a success */
    guint flush_waiters;
    gboolean stopping;
    GThread *writer;

    usage_store_stats stats;
};

/* Bind `row` to parameters first..first+18 / read it from columns first..
 * (strings point into the statement: valid until the next step). */
int usage_row_bind(sqlite3_stmt *stmt, int first, const usage_row *row);
void usage_row_read(sqlite3_stmt *stmt, int first, usage_row *row);

/* Turn an SQLite failure into a GError naming the store's file. */
void usage_store_set_sqlite_error(usage_store *store, GError **error, int rc,
                                  const char *doing);

/* Run SQL with no results; FALSE with an error naming `doing`. */
gboolean usage_store_exec(usage_store *store, const char *sql, const char *doing,
                          GError **error);

/* Bring the file to USAGE_SCHEMA_VERSION (read-write) or check it is
 * current (read-only); sets store->schema_version and gateway_id. */
gboolean usage_schema_prepare(usage_store *store, GError **error);

/* Prepare the insert and roll-up statements (read-write stores). */
gboolean usage_store_prepare_writes(usage_store *store, GError **error);

/*
 * Insert rows and their roll-ups in one transaction; caller holds db_lock.
 * `rows` is an array of n pointers or, when `pointers` is FALSE, an array of
 * n usage_row structs cast to void.
 */
gboolean usage_store_write_rows(usage_store *store, const void *rows, gsize n,
                                gboolean pointers, GError **error);

/* Roll-up accumulator: rows of one transaction grouped by hour and key. */
typedef struct usage_rollup usage_rollup;
usage_rollup *usage_rollup_new(void);
void usage_rollup_add(usage_rollup *rollup, const usage_row *row);
/* Merge everything accumulated into `hourly`; caller holds db_lock inside a
 * transaction. The accumulator is emptied. */
gboolean usage_rollup_flush(usage_rollup *rollup, usage_store *store, GError **error);
void usage_rollup_free(usage_rollup *rollup);

/* Rebuild `hourly` from `requests` (migrations); inside a transaction. */
gboolean usage_rollup_rebuild(usage_store *store, GError **error);

#endif /* MOEDESK_USAGE_STORE_PRIVATE_H */

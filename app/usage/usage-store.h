/*
 * usage-store.h — the usage database: one row per request the service
 * answers, in `usage.sqlite3` (SQLite, WAL), plus hourly roll-ups the
 * weekly report reads so it never scans millions of raw rows.
 *
 * Writers: the service calls usage_store_append() on its hot path; the row
 * is copied into an in-memory queue and a writer thread commits queued rows
 * in batches (every 250 ms, or as soon as 256 rows wait). Each batch is one
 * transaction that inserts the raw rows and updates their `hourly` roll-ups,
 * so the two never disagree. A process killed with SIGKILL loses at most the
 * rows appended in its last ~250 ms (WAL, synchronous=NORMAL: a committed
 * transaction survives a process crash; a power cut may lose the last
 * commits). Imports and benchmarks use usage_store_insert_bulk(), which
 * writes synchronously in one transaction.
 *
 * Readers (the report, the Postgres export) use the iteration functions at
 * the end. All functions are thread-safe; one connection is shared under a
 * lock, so a read waits for a batch commit in progress (milliseconds).
 *
 * Schema, versions and migrations: usage-schema.c and app/DESIGN.md.
 */
#ifndef MOEDESK_USAGE_STORE_H
#define MOEDESK_USAGE_STORE_H

#include <glib.h>

#include "usage-hist.h"

G_BEGIN_DECLS

#define USAGE_STORE_ERROR (usage_store_error_quark())
GQuark usage_store_error_quark(void);

typedef enum {
    USAGE_STORE_ERROR_OPEN,       /* missing file, not a database, permissions */
    USAGE_STORE_ERROR_CORRUPT,    /* malformed database or roll-up blob */
    USAGE_STORE_ERROR_LOCKED,     /* another connection holds a lock too long */
    USAGE_STORE_ERROR_SCHEMA,     /* schema newer than this build, or not ours */
    USAGE_STORE_ERROR_OLD_SCHEMA, /* read-only open of an older schema: reopen read-write */
    USAGE_STORE_ERROR_WRITE,      /* a write failed (disk full, I/O) */
    USAGE_STORE_ERROR_READ_ONLY,  /* a write call on a read-only store */
    USAGE_STORE_ERROR_INVALID,    /* a bad row or argument */
} usage_store_error;

/* Current schema version; usage-schema.c migrates older files up to it. */
#define USAGE_SCHEMA_VERSION 2

/*
 * One request. Strings are borrowed for the call (append copies them);
 * NULL strings are stored as NULL (optional columns) or "" (required ones).
 */
typedef struct usage_row {
    gint64 start_ms;           /* request start, UTC unix milliseconds */
    const char *caller;        /* API key name, "gui", "cli" or "anonymous" */
    const char *client;        /* User-Agent ("" when none) */
    const char *endpoint;      /* e.g. "/v1/chat/completions" */
    const char *model;         /* model name as requested */
    const char *route;         /* "local" or the upstream's name */
    const char *backend;       /* "cpu" / "cuda"; NULL for upstreams */
    const char *quant;         /* e.g. "Q4_K_M"; NULL for upstreams */
    gint64 prompt_tokens;      /* all prompt tokens, cached ones included */
    gint64 cached_tokens;      /* prompt tokens served from a cache */
    gint64 completion_tokens;
    gint64 ttft_ms;            /* time to first token; -1 = none (error, non-streamed) */
    gint64 total_ms;           /* start to last byte */
    double decode_tps;         /* decode tokens/s; <= 0 = not measured */
    gint http_status;
    const char *error_kind;    /* NULL/"" = no error beyond the status */
    const char *finish_reason; /* "stop", "length", "tool_calls"... or NULL */
    double gpu_power_w;        /* measured average GPU power; < 0 = not measured */
    gint64 busy_ms;            /* time the local engine spent on it (0 upstream) */
} usage_row;

/* Check a row's fields; FALSE with an error naming the field. */
gboolean usage_row_validate(const usage_row *row, GError **error);

/* A request failed if its status is >= 400 or it carries an error kind. */
gboolean usage_row_is_error(const usage_row *row);

/* Sums one roll-up row keeps (and the report adds up). */
typedef struct usage_sums {
    gint64 calls;
    gint64 errors;
    gint64 prompt_tokens;
    gint64 cached_tokens;
    gint64 completion_tokens;
    gint64 busy_ms;             /* every row's busy_ms */
    gint64 busy_ms_unmeasured;  /* busy_ms of rows without gpu_power_w */
    double energy_wms;          /* sum of gpu_power_w * busy_ms (W*ms) where measured */
    gint64 decode_tokens;       /* completion tokens of ok rows with decode_tps > 0 */
    double decode_s;            /* sum of completion_tokens / decode_tps, same rows */
} usage_sums;

/* Add one raw row to sums (the one definition the roll-ups and report share). */
void usage_sums_add_row(usage_sums *sums, const usage_row *row);
void usage_sums_add(usage_sums *into, const usage_sums *from);

typedef struct usage_store usage_store;

typedef enum {
    USAGE_STORE_READ_WRITE = 0,
    /* Never writes the file: no creation, no migration, no writer thread.
     * Opening a file with an older schema fails (USAGE_STORE_ERROR_SCHEMA). */
    USAGE_STORE_READ_ONLY = 1 << 0,
} usage_store_flags;

/*
 * Open (read-write: create if missing) the database at `path`, switch it to
 * WAL and migrate it to USAGE_SCHEMA_VERSION. Errors name `path`; a
 * read-only open of an older file fails with USAGE_STORE_ERROR_OLD_SCHEMA
 * (the caller may reopen read-write to migrate). The store
 * is freed with usage_store_close().
 */
usage_store *usage_store_open(const char *path, usage_store_flags flags, GError **error);

/*
 * Flush every queued row, stop the writer thread, close the database, free
 * the store (even when it returns FALSE, e.g. the final commit failed).
 * NULL is a no-op returning TRUE.
 */
gboolean usage_store_close(usage_store *store, GError **error);

/*
 * Queue a copy of `row` for the writer thread; never blocks on the disk.
 * Returns FALSE (and counts the row as dropped) when the store is read-only
 * or the queue already holds USAGE_STORE_QUEUE_MAX rows because commits keep
 * failing.
 */
#define USAGE_STORE_QUEUE_MAX 65536
gboolean usage_store_append(usage_store *store, const usage_row *row);

/* Wait until every row appended before this call is committed. */
gboolean usage_store_flush(usage_store *store, GError **error);

/* Insert `n` rows synchronously in one transaction (roll-ups included). */
gboolean usage_store_insert_bulk(usage_store *store, const usage_row *rows, gsize n,
                                 GError **error);

typedef struct usage_store_stats {
    guint64 rows_written;   /* committed rows since open */
    guint64 batches;        /* committed transactions */
    guint64 rows_dropped;   /* appends refused (queue full / read-only) */
    guint64 insert_us;      /* time spent inserting raw rows */
    guint64 rollup_us;      /* time spent maintaining roll-ups */
    guint64 commit_us;      /* time spent in COMMIT */
} usage_store_stats;
void usage_store_get_stats(usage_store *store, usage_store_stats *stats);

/* $MOEDESK_DATA_DIR/usage.sqlite3, else <user data dir>/moedesk/usage.sqlite3. */
char *usage_store_default_path(void);

/* The random id this database was given at creation (Postgres export key). */
const char *usage_store_gateway_id(usage_store *store);
const char *usage_store_path(usage_store *store);
int usage_store_schema_version(usage_store *store);

/* ---- reading ---------------------------------------------------------- */

/* One hourly roll-up row; pointers valid only during the callback. */
typedef struct usage_hour_rec {
    gint64 utc_hour;        /* start_ms / 3600000 */
    const char *model, *route, *caller, *client;
    usage_sums sums;
    const usage_hist_pair *ttft;   /* ok rows with a TTFT */
    guint n_ttft;
    const usage_hist_pair *total;  /* ok rows' total latency */
    guint n_total;
} usage_hour_rec;

typedef gboolean (*usage_hour_fn)(const usage_hour_rec *rec, gpointer user_data,
                                  GError **error);
typedef gboolean (*usage_row_fn)(gint64 id, const usage_row *row, gpointer user_data,
                                 GError **error);

/* First and last start_ms of any row; *any FALSE when the table is empty. */
gboolean usage_store_time_range(usage_store *store, gint64 *first_ms, gint64 *last_ms,
                                gboolean *any, GError **error);

/* Hourly roll-ups with from_hour <= utc_hour < to_hour, in hour order. */
gboolean usage_store_each_hour(usage_store *store, gint64 from_hour, gint64 to_hour,
                               usage_hour_fn fn, gpointer user_data, GError **error);

/*
 * Raw rows with from_ms <= start_ms < to_ms; when above_total_ms >= 0 only
 * ok rows with total_ms > above_total_ms. Order unspecified. A callback that
 * returns FALSE stops the walk (and must set `error` to make it a failure).
 */
gboolean usage_store_each_row(usage_store *store, gint64 from_ms, gint64 to_ms,
                              gint64 above_total_ms, usage_row_fn fn, gpointer user_data,
                              GError **error);

/* Rows with id > after_id in id order, at most `limit` (the export's walk). */
gboolean usage_store_each_new_row(usage_store *store, gint64 after_id, guint limit,
                                  usage_row_fn fn, gpointer user_data, GError **error);

/* The `limit` newest rows, newest (highest id) first: the service's
 * recent-requests view. */
gboolean usage_store_each_recent_row(usage_store *store, guint limit, usage_row_fn fn,
                                     gpointer user_data, GError **error);

G_END_DECLS

#endif /* MOEDESK_USAGE_STORE_H */

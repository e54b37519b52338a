/*
 * usage-pg.h — team scale: usage rows of several gateways in one PostgreSQL
 * table, and the same reads the report makes on the SQLite store, answered
 * by Postgres instead (grouped by UTC hour in SQL).
 *
 * Table moedesk_requests: the raw columns plus gateway_id (the store's
 * random id) and local_id (its row id); (gateway_id, local_id) is the
 * primary key, so exporting a row twice updates it in place (idempotent).
 * Two derived columns, ttft_bucket and total_bucket (usage-hist.h buckets,
 * NULL for failed requests), let Postgres count latency histograms.
 *
 * Built without libpq every function fails with a message saying so.
 */
#ifndef MOEDESK_USAGE_PG_H
#define MOEDESK_USAGE_PG_H

#include "usage-store.h"

G_BEGIN_DECLS

typedef struct usage_pg usage_pg;

/* Connect (libpq connection URI or key=value string); creates the table
 * and index if missing. Errors never repeat a password. */
usage_pg *usage_pg_connect(const char *conninfo, GError **error);
void usage_pg_close(usage_pg *pg);

/*
 * Export the store's rows to Postgres: rows newer than the newest this
 * gateway already has there (or every row when `all`), `batch_rows` per
 * transaction, upserted by (gateway_id, local_id). *exported counts rows
 * sent in this call.
 */
gboolean usage_pg_export(usage_pg *pg, usage_store *store, gboolean all, guint batch_rows,
                         guint64 *exported, GError **error);

/* The report's reads (see usage_store_time_range() and friends). */
gboolean usage_pg_time_range(usage_pg *pg, gint64 *first_ms, gint64 *last_ms, gboolean *any,
                             GError **error);
gboolean usage_pg_each_hour(usage_pg *pg, gint64 from_hour, gint64 to_hour, usage_hour_fn fn,
                            gpointer user_data, GError **error);
gboolean usage_pg_each_row(usage_pg *pg, gint64 from_ms, gint64 to_ms, gint64 above_total_ms,
                           usage_row_fn fn, gpointer user_data, GError **error);

/* TRUE when built with libpq. */
gboolean usage_pg_available(void);

G_END_DECLS

#endif /* MOEDESK_USAGE_PG_H */

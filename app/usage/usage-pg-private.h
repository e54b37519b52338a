/*
 * usage-pg-private.h — what usage-pg.c (connect, export) and
 * usage-pg-read.c (the report's reads) share.
 */
#ifndef MOEDESK_USAGE_PG_PRIVATE_H
#define MOEDESK_USAGE_PG_PRIVATE_H

#include "usage-pg.h"

#ifdef HAVE_LIBPQ
#include <libpq-fe.h>

#define PG_N_COLS 23

struct usage_pg {
    PGconn *conn;
};

/* Set `error` from a failed result (cleared here) or the connection. */
gboolean usage_pg_fail(usage_pg *pg, GError **error, const char *doing, PGresult *res);
/* Run a statement that returns no rows. */
gboolean usage_pg_command(usage_pg *pg, const char *sql, const char *doing, GError **error);
#endif

#endif /* MOEDESK_USAGE_PG_PRIVATE_H */

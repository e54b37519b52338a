/*
 * usage-csv.h — import request logs from a CSV file into the usage store
 * (usage-csv.c describes the format).
 */
#ifndef MOEDESK_USAGE_CSV_H
#define MOEDESK_USAGE_CSV_H

#include "usage-store.h"

/* Every row is checked before the first write, so bad input writes
 * nothing; errors name the file, line and column. *n_rows = rows imported. */
gboolean usage_csv_import(usage_store *store, const char *path, guint64 *n_rows, GError **error);

#endif /* MOEDESK_USAGE_CSV_H */

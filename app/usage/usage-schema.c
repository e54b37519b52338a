/*
 * usage-schema.c — the usage database's tables, their versions and the
 * migrations between them. The version lives in a one-row table
 * `schema_version`; every migration runs in its own transaction and bumps
 * it, so a crash mid-way leaves the file at the previous version.
 *
 *   v1  `requests`: the raw request log (first cut, no power data).
 *   v2  `requests` gains gpu_power_w and busy_ms (local rows of v1 get
 *       busy_ms = total_ms, the time the engine was on them); the index
 *       becomes (start_ms, total_ms) so the report's slow-tail query reads
 *       only the index; `meta` holds the gateway id; `hourly` holds the
 *       roll-ups, rebuilt from the raw rows.
 *
 * A fresh file runs v1 then v2, so every open exercises the same path an
 * upgrade does. A file newer than this build is refused untouched.
 */
#include "usage-store-private.h"

static const char schema_v1[] =
    "CREATE TABLE schema_version (version INTEGER NOT NULL);"
    "INSERT INTO schema_version VALUES (0);"
    "CREATE TABLE requests ("
    "  id INTEGER PRIMARY KEY,"
    "  start_ms INTEGER NOT NULL,"          /* UTC unix ms */
    "  caller TEXT NOT NULL,"
    "  client TEXT NOT NULL,"
    "  endpoint TEXT NOT NULL,"
    "  model TEXT NOT NULL,"
    "  route TEXT NOT NULL,"
    "  backend TEXT,"
    "  quant TEXT,"
    "  prompt_tokens INTEGER NOT NULL,"
    "  cached_tokens INTEGER NOT NULL,"
    "  completion_tokens INTEGER NOT NULL,"
    "  ttft_ms INTEGER,"
    "  total_ms INTEGER NOT NULL,"
    "  decode_tps REAL,"
    "  http_status INTEGER NOT NULL,"
    "  error_kind TEXT,"
    "  finish_reason TEXT);"
    "CREATE INDEX requests_start ON requests(start_ms);";

static const char schema_v2[] =
    "ALTER TABLE requests ADD COLUMN gpu_power_w REAL;"
    "ALTER TABLE requests ADD COLUMN busy_ms INTEGER NOT NULL DEFAULT 0;"
    "UPDATE requests SET busy_ms = total_ms WHERE route = 'local';"
    "DROP INDEX requests_start;"
    "CREATE INDEX requests_start_total ON requests(start_ms, total_ms);"
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    /* WITHOUT ROWID: rows are stored in key order, so the report's scan
     * of an hour range reads them sequentially, and a row is small (its two
     * histogram blobs average ~20 bytes). */
    "CREATE TABLE hourly ("
    "  utc_hour INTEGER NOT NULL,"          /* start_ms / 3600000 */
    "  model TEXT NOT NULL,"
    "  route TEXT NOT NULL,"
    "  caller TEXT NOT NULL,"
    "  client TEXT NOT NULL,"
    "  calls INTEGER NOT NULL,"
    "  errors INTEGER NOT NULL,"
    "  prompt_tokens INTEGER NOT NULL,"
    "  cached_tokens INTEGER NOT NULL,"
    "  completion_tokens INTEGER NOT NULL,"
    "  busy_ms INTEGER NOT NULL,"
    "  busy_ms_unmeasured INTEGER NOT NULL,"
    "  energy_wms REAL NOT NULL,"
    "  decode_tokens INTEGER NOT NULL,"
    "  decode_s REAL NOT NULL,"
    "  ttft_hist BLOB,"                     /* usage-hist.h varint pairs */
    "  total_hist BLOB,"
    "  PRIMARY KEY (utc_hour, model, route, caller, client)) WITHOUT ROWID;";

static gboolean read_version(usage_store *store, int *version, GError **error)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(store->db,
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
        -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        usage_store_set_sqlite_error(store, error, rc, "reading the schema");
        sqlite3_finalize(st);
        return FALSE;
    }
    gboolean has_table = sqlite3_column_int(st, 0) > 0;
    sqlite3_finalize(st);
    if (!has_table) {
        *version = -1;
        return TRUE;
    }
    rc = sqlite3_prepare_v2(store->db, "SELECT version FROM schema_version", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        if (rc == SQLITE_DONE)
            g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_CORRUPT,
                        "%s: table schema_version is empty", store->path);
        else
            usage_store_set_sqlite_error(store, error, rc, "reading schema_version");
        sqlite3_finalize(st);
        return FALSE;
    }
    *version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return TRUE;
}

static gboolean count_tables(usage_store *store, int *n, GError **error)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(store->db, "SELECT count(*) FROM sqlite_master", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        usage_store_set_sqlite_error(store, error, rc, "reading the schema");
        sqlite3_finalize(st);
        return FALSE;
    }
    *n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return TRUE;
}

static gboolean migrate_step(usage_store *store, int to, GError **error)
{
    g_autofree char *doing = g_strdup_printf("migrating the schema to version %d", to);
    if (!usage_store_exec(store, "BEGIN IMMEDIATE", doing, error))
        return FALSE;
    gboolean ok;
    if (to == 1) {
        ok = usage_store_exec(store, schema_v1, doing, error);
    } else {
        g_autofree char *uuid = g_uuid_string_random();
        g_autofree char *meta = g_strdup_printf(
            "INSERT INTO meta VALUES ('gateway_id', '%s')", uuid);
        ok = usage_store_exec(store, schema_v2, doing, error) &&
             usage_store_exec(store, meta, doing, error) &&
             usage_store_prepare_writes(store, error) &&
             usage_rollup_rebuild(store, error);
    }
    g_autofree char *bump = g_strdup_printf("UPDATE schema_version SET version = %d", to);
    if (ok)
        ok = usage_store_exec(store, bump, doing, error) &&
             usage_store_exec(store, "COMMIT", doing, error);
    if (!ok) {
        sqlite3_exec(store->db, "ROLLBACK", NULL, NULL, NULL);
        return FALSE;
    }
    return TRUE;
}

static gboolean read_gateway_id(usage_store *store, GError **error)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(store->db,
                                "SELECT value FROM meta WHERE key = 'gateway_id'", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        if (rc == SQLITE_DONE)
            g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_CORRUPT,
                        "%s: meta has no gateway_id", store->path);
        else
            usage_store_set_sqlite_error(store, error, rc, "reading meta");
        sqlite3_finalize(st);
        return FALSE;
    }
    store->gateway_id = g_strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return TRUE;
}

gboolean usage_schema_prepare(usage_store *store, GError **error)
{
    int version, n_tables;
    if (!read_version(store, &version, error))
        return FALSE;
    if (version < 0) {
        if (!count_tables(store, &n_tables, error))
            return FALSE;
        if (n_tables > 0 || store->read_only) {
            g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_SCHEMA,
                        "%s: not a MoeDesk usage database (no schema_version table)",
                        store->path);
            return FALSE;
        }
        version = 0;
    }
    if (version > USAGE_SCHEMA_VERSION) {
        g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_SCHEMA,
                    "%s: schema version %d is newer than this MoeDesk knows (%d); "
                    "upgrade MoeDesk", store->path, version, USAGE_SCHEMA_VERSION);
        return FALSE;
    }
    if (version < USAGE_SCHEMA_VERSION && store->read_only) {
        g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_OLD_SCHEMA,
                    "%s: schema version %d is older than %d; open it read-write to migrate",
                    store->path, version, USAGE_SCHEMA_VERSION);
        return FALSE;
    }
    if (!store->read_only) {
        /* WAL: readers never block the writer; NORMAL sync: a committed
         * transaction survives a process crash (not always a power cut). */
        if (!usage_store_exec(store, "PRAGMA journal_mode=WAL", "switching to WAL", error) ||
            !usage_store_exec(store, "PRAGMA synchronous=NORMAL", "setting synchronous", error))
            return FALSE;
        for (int to = version + 1; to <= USAGE_SCHEMA_VERSION; to++)
            if (!migrate_step(store, to, error))
                return FALSE;
    }
    store->schema_version = USAGE_SCHEMA_VERSION;
    return read_gateway_id(store, error);
}

gboolean usage_store_prepare_writes(usage_store *store, GError **error)
{
    if (store->ins_row)
        return TRUE;
    static const char *const sql[] = {
        "INSERT INTO requests (" USAGE_ROW_COLUMNS ") VALUES "
        "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        "SELECT calls, errors, prompt_tokens, cached_tokens, completion_tokens, "
        "busy_ms, busy_ms_unmeasured, energy_wms, decode_tokens, decode_s, "
        "ttft_hist, total_hist FROM hourly "
        "WHERE utc_hour = ? AND model = ? AND route = ? AND caller = ? AND client = ?",
        "INSERT OR REPLACE INTO hourly (utc_hour, model, route, caller, client, calls, "
        "errors, prompt_tokens, cached_tokens, completion_tokens, busy_ms, "
        "busy_ms_unmeasured, energy_wms, decode_tokens, decode_s, ttft_hist, total_hist) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    };
    sqlite3_stmt **out[] = {&store->ins_row, &store->sel_hour, &store->put_hour};
    for (guint i = 0; i < G_N_ELEMENTS(sql); i++) {
        int rc = sqlite3_prepare_v3(store->db, sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                                    out[i], NULL);
        if (rc != SQLITE_OK) {
            usage_store_set_sqlite_error(store, error, rc, "preparing statements");
            return FALSE;
        }
    }
    return TRUE;
}

/*
 * test-usage-store.c — the usage store's promises: appends are batched off
 * the caller's thread and committed without a flush; flush and close write
 * everything; a process killed with SIGKILL keeps every row appended more
 * than a second before; hourly roll-ups equal the raw rows; the newest
 * rows read back newest first; an older schema
 * is migrated and a newer or corrupt file is refused untouched.
 * Native only (fork, kill); registered in the app suite.
 */
#include "test.h"
#include "usage-store.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

static char *tmp_dir;

static char *tmp_path(const char *name)
{
    char *p = g_build_filename(tmp_dir, name, NULL);
    g_unlink(p);
    char *wal = g_strconcat(p, "-wal", NULL), *shm = g_strconcat(p, "-shm", NULL);
    g_unlink(wal);
    g_unlink(shm);
    g_free(wal);
    g_free(shm);
    return p;
}

static usage_row make_row(gint64 i)
{
    static const char *const models[] = {"qwen3-30b-a3b", "kimi-k2", "deepseek-v3"};
    static const char *const routes[] = {"local", "moonshot", "openrouter"};
    usage_row r = {
        .start_ms = G_GINT64_CONSTANT(1767225600000) + i * 7919,  /* 2026-01-01 */
        .caller = i % 3 ? "gui" : "key-ci",
        .client = "test/1.0",
        .endpoint = "/v1/chat/completions",
        .model = models[i % 3],
        .route = routes[i % 3],
        .backend = i % 3 ? NULL : "cuda",
        .quant = i % 3 ? NULL : "Q4_K_M",
        .prompt_tokens = 100 + i % 50,
        .cached_tokens = i % 7,
        .completion_tokens = 20 + i % 30,
        .ttft_ms = i % 11 == 0 ? -1 : 30 + i % 400,
        .total_ms = 200 + (i * 37) % 5000,
        .decode_tps = i % 5 ? 40.0 + i % 9 : 0.0,
        .http_status = i % 17 == 0 ? 500 : 200,
        .error_kind = i % 23 == 0 ? "disconnected" : NULL,
        .finish_reason = "stop",
        .gpu_power_w = i % 3 ? -1.0 : 250.0 + i % 7,
        .busy_ms = i % 3 ? 0 : 200 + (i * 37) % 5000,
    };
    return r;
}

static gint64 count_rows(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    gint64 n = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            n = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return n;
}

typedef struct recent_walk {
    int n;
    gint64 ids[4], start_ms[4];
} recent_walk;

static gboolean recent_row(gint64 id, const usage_row *row, gpointer data, GError **error)
{
    (void)error;
    recent_walk *w = data;
    if (w->n < 4) {
        w->ids[w->n] = id;
        w->start_ms[w->n] = row->start_ms;
    }
    w->n++;
    return TRUE;
}

static void test_batching(void)
{
    g_autofree char *path = tmp_path("batch.sqlite3");
    GError *err = NULL;
    usage_store *s = usage_store_open(path, USAGE_STORE_READ_WRITE, &err);
    CHECK(s != NULL);
    if (!s)
        return;
    CHECK(usage_store_gateway_id(s) != NULL && strlen(usage_store_gateway_id(s)) == 36);
    /* A few rows wait for the 250 ms batch window, then commit on their own. */
    gint64 t0 = g_get_monotonic_time();
    for (int i = 0; i < 10; i++) {
        usage_row r = make_row(i);
        CHECK(usage_store_append(s, &r));
    }
    usage_store_stats st;
    usage_store_get_stats(s, &st);
    if (g_get_monotonic_time() - t0 < 100000)
        CHECK_EQ_INT(st.batches, 0);
    for (int waited = 0; waited < 100 && st.rows_written < 10; waited++) {
        g_usleep(50000);
        usage_store_get_stats(s, &st);
    }
    CHECK_EQ_INT(st.rows_written, 10);
    CHECK_EQ_INT(st.batches, 1);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM requests"), 10);

    /* A burst is committed in few transactions, not one per row. */
    for (int i = 10; i < 5010; i++) {
        usage_row r = make_row(i);
        usage_store_append(s, &r);
    }
    CHECK(usage_store_flush(s, &err));
    usage_store_get_stats(s, &st);
    CHECK_EQ_INT(st.rows_written, 5010);
    CHECK_MSG(st.batches <= 1 + 5000 / 256 + 5, "%" G_GUINT64_FORMAT " batches", st.batches);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM requests"), 5010);

    /* The newest rows come newest first (the service's recent view). */
    recent_walk rw = {0};
    CHECK(usage_store_each_recent_row(s, 3, recent_row, &rw, &err));
    CHECK_EQ_INT(rw.n, 3);
    CHECK_EQ_INT(rw.ids[0], 5010);
    CHECK_EQ_INT(rw.ids[2], 5008);
    CHECK_EQ_INT(rw.start_ms[0], make_row(5009).start_ms);

    /* Invalid rows are refused, counted, never queued. */
    usage_row bad = make_row(1);
    bad.cached_tokens = bad.prompt_tokens + 1;
    CHECK(!usage_store_append(s, &bad));
    usage_store_get_stats(s, &st);
    CHECK_EQ_INT(st.rows_dropped, 1);
    CHECK(!usage_store_insert_bulk(s, &bad, 1, &err));
    CHECK(err && strstr(err->message, "row 0") && strstr(err->message, "cached_tokens"));
    g_clear_error(&err);
    CHECK(usage_store_close(s, &err));
}

static void test_close_flushes(void)
{
    g_autofree char *path = tmp_path("close.sqlite3");
    GError *err = NULL;
    usage_store *s = usage_store_open(path, USAGE_STORE_READ_WRITE, &err);
    CHECK(s != NULL);
    if (!s)
        return;
    for (int i = 0; i < 777; i++) {
        usage_row r = make_row(i);
        usage_store_append(s, &r);
    }
    CHECK(usage_store_close(s, &err));  /* no flush: close must write them */
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM requests"), 777);
    CHECK_EQ_INT(count_rows(path, "SELECT sum(calls) FROM hourly"), 777);
    /* WAL mode is persistent in the file. */
    sqlite3 *db = NULL;
    sqlite3_open(path, &db);
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK_EQ_STR((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* Child: append a row every ~0.5 ms forever, reporting progress. */
static void kill_child(const char *path, int fd)
{
    usage_store *s = usage_store_open(path, USAGE_STORE_READ_WRITE, NULL);
    if (!s)
        _exit(3);
    for (gint64 i = 0;; i++) {
        usage_row r = make_row(i);
        r.prompt_tokens = i;  /* sequence number */
        r.cached_tokens = 0;
        if (!usage_store_append(s, &r))
            _exit(4);
        if (i % 20 == 19) {
            gint64 rec[2] = {i + 1, g_get_monotonic_time()};
            if (write(fd, rec, sizeof rec) != sizeof rec)
                _exit(5);
        }
        g_usleep(500);
    }
}

static void test_kill9(void)
{
    g_autofree char *path = tmp_path("kill.sqlite3");
    /* Create the file first so the child's open is quick. */
    usage_store_close(usage_store_open(path, USAGE_STORE_READ_WRITE, NULL), NULL);
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        kill_child(path, fds[1]);
    }
    close(fds[1]);
    /* Read progress for ~2 s, remembering (appended, time) pairs. */
    GArray *progress = g_array_new(FALSE, FALSE, sizeof(gint64) * 2);
    gint64 start = g_get_monotonic_time();
    while (g_get_monotonic_time() - start < 2 * G_TIME_SPAN_SECOND) {
        gint64 rec[2];
        if (read(fds[0], rec, sizeof rec) != sizeof rec)
            break;
        g_array_append_vals(progress, rec, 1);
    }
    gint64 killed_at = g_get_monotonic_time();
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(fds[0]);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    /* Rows appended more than a second before the kill must be there. */
    gint64 must_have = 0;
    for (guint i = 0; i < progress->len; i++) {
        const gint64 *rec = &g_array_index(progress, gint64, i * 2);
        if (rec[1] <= killed_at - G_TIME_SPAN_SECOND)
            must_have = rec[0];
    }
    g_array_unref(progress);
    CHECK_MSG(must_have > 100, "child appended only %" G_GINT64_FORMAT, must_have);
    GError *err = NULL;
    usage_store *s = usage_store_open(path, USAGE_STORE_READ_WRITE, &err);
    CHECK(s != NULL);
    usage_store_close(s, NULL);
    gint64 n = count_rows(path, "SELECT count(*) FROM requests");
    gint64 max_seq = count_rows(path, "SELECT max(prompt_tokens) FROM requests");
    fprintf(stderr, "kill -9: %" G_GINT64_FORMAT " rows kept, %" G_GINT64_FORMAT
            " required\n", n, must_have);
    CHECK(n >= must_have);
    CHECK_EQ_INT(max_seq + 1, n);  /* a prefix: no gaps */
    CHECK_EQ_INT(count_rows(path, "SELECT sum(calls) FROM hourly"), n);
}

static const char v1_schema[] =
    "CREATE TABLE schema_version (version INTEGER NOT NULL);"
    "INSERT INTO schema_version VALUES (1);"
    "CREATE TABLE requests (id INTEGER PRIMARY KEY, start_ms INTEGER NOT NULL,"
    " caller TEXT NOT NULL, client TEXT NOT NULL, endpoint TEXT NOT NULL,"
    " model TEXT NOT NULL, route TEXT NOT NULL, backend TEXT, quant TEXT,"
    " prompt_tokens INTEGER NOT NULL, cached_tokens INTEGER NOT NULL,"
    " completion_tokens INTEGER NOT NULL, ttft_ms INTEGER, total_ms INTEGER NOT NULL,"
    " decode_tps REAL, http_status INTEGER NOT NULL, error_kind TEXT, finish_reason TEXT);"
    "CREATE INDEX requests_start ON requests(start_ms);"
    "INSERT INTO requests VALUES (NULL, 1767225600000, 'gui', 'ui', '/v1/chat/completions',"
    " 'qwen3', 'local', 'cuda', 'Q4_K_M', 100, 10, 50, 40, 1500, 45.0, 200, NULL, 'stop');"
    "INSERT INTO requests VALUES (NULL, 1767225660000, 'gui', 'ui', '/v1/chat/completions',"
    " 'qwen3', 'local', 'cuda', 'Q4_K_M', 200, 0, 70, 60, 2500, 40.0, 200, NULL, 'stop');"
    "INSERT INTO requests VALUES (NULL, 1767229300000, 'key-a', 'curl', '/v1/chat/completions',"
    " 'kimi-k2', 'moonshot', NULL, NULL, 300, 0, 0, NULL, 900, NULL, 429, 'rate_limited', NULL);";

static char *file_digest(const char *path)
{
    gchar *data = NULL;
    gsize len = 0;
    if (!g_file_get_contents(path, &data, &len, NULL))
        return g_strdup("missing");
    char *d = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)data, len);
    g_free(data);
    return d;
}

static void test_migrations(void)
{
    g_autofree char *path = tmp_path("v1.sqlite3");
    sqlite3 *db = NULL;
    sqlite3_open(path, &db);
    CHECK(sqlite3_exec(db, v1_schema, NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);

    /* Read-only refuses to migrate and leaves the file alone. */
    g_autofree char *before = file_digest(path);
    GError *err = NULL;
    CHECK(usage_store_open(path, USAGE_STORE_READ_ONLY, &err) == NULL);
    CHECK(err && err->code == USAGE_STORE_ERROR_OLD_SCHEMA && strstr(err->message, path));
    g_clear_error(&err);
    g_autofree char *after = file_digest(path);
    CHECK_EQ_STR(before, after);

    usage_store *s = usage_store_open(path, USAGE_STORE_READ_WRITE, &err);
    CHECK(s != NULL);
    if (!s)
        return;
    CHECK_EQ_INT(usage_store_schema_version(s), USAGE_SCHEMA_VERSION);
    usage_row r = make_row(5);
    CHECK(usage_store_insert_bulk(s, &r, 1, &err));
    CHECK(usage_store_close(s, &err));
    CHECK_EQ_INT(count_rows(path, "SELECT version FROM schema_version"), 2);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM requests"), 4);
    /* v1 local rows: busy = total; upstream rows: 0. */
    CHECK_EQ_INT(count_rows(path, "SELECT sum(busy_ms) FROM requests WHERE id <= 3"), 4000);
    CHECK_EQ_INT(count_rows(path, "SELECT count(*) FROM meta WHERE key = 'gateway_id'"), 1);
    /* Roll-ups rebuilt from the old rows plus the new one. */
    CHECK_EQ_INT(count_rows(path, "SELECT sum(calls) FROM hourly"), 4);
    CHECK_EQ_INT(count_rows(path, "SELECT sum(errors) FROM hourly"), 1);
    CHECK_EQ_INT(count_rows(path, "SELECT sum(prompt_tokens) FROM hourly"),
                 count_rows(path, "SELECT sum(prompt_tokens) FROM requests"));
    CHECK_EQ_INT(count_rows(path, "SELECT calls FROM hourly WHERE utc_hour = 490896"
                                  " AND model = 'qwen3'"), 2);

    /* A newer schema is refused without a write. */
    sqlite3_open(path, &db);
    sqlite3_exec(db, "UPDATE schema_version SET version = 99", NULL, NULL, NULL);
    sqlite3_close(db);
    g_autofree char *newer = file_digest(path);
    CHECK(usage_store_open(path, USAGE_STORE_READ_WRITE, &err) == NULL);
    CHECK(err && err->code == USAGE_STORE_ERROR_SCHEMA && strstr(err->message, "99"));
    g_clear_error(&err);
    g_autofree char *newer_after = file_digest(path);
    CHECK_EQ_STR(newer, newer_after);
}

static void test_bad_files(void)
{
    GError *err = NULL;
    g_autofree char *missing = tmp_path("missing.sqlite3");
    CHECK(usage_store_open(missing, USAGE_STORE_READ_ONLY, &err) == NULL);
    CHECK(err && err->code == USAGE_STORE_ERROR_OPEN && strstr(err->message, missing));
    g_clear_error(&err);
    CHECK(!g_file_test(missing, G_FILE_TEST_EXISTS));

    g_autofree char *junk = tmp_path("junk.sqlite3");
    char garbage[8192];
    for (size_t i = 0; i < sizeof garbage; i++)
        garbage[i] = (char)(i * 131 + 7);
    g_file_set_contents(junk, garbage, sizeof garbage, NULL);
    g_autofree char *before = file_digest(junk);
    for (int ro = 0; ro < 2; ro++) {
        CHECK(usage_store_open(junk, ro ? USAGE_STORE_READ_ONLY : USAGE_STORE_READ_WRITE,
                               &err) == NULL);
        CHECK(err && err->code == USAGE_STORE_ERROR_CORRUPT && strstr(err->message, junk));
        g_clear_error(&err);
    }
    g_autofree char *after = file_digest(junk);
    CHECK_EQ_STR(before, after);

    /* Some other SQLite database is not ours. */
    g_autofree char *other = tmp_path("other.sqlite3");
    sqlite3 *db = NULL;
    sqlite3_open(other, &db);
    sqlite3_exec(db, "CREATE TABLE t (x)", NULL, NULL, NULL);
    sqlite3_close(db);
    CHECK(usage_store_open(other, USAGE_STORE_READ_WRITE, &err) == NULL);
    CHECK(err && strstr(err->message, "not a MoeDesk usage database"));
    g_clear_error(&err);
}

typedef struct hour_check {
    usage_sums sums;
    guint64 *total;
} hour_check;

static gboolean add_hour(const usage_hour_rec *rec, gpointer data, GError **error)
{
    hour_check *c = data;
    usage_sums_add(&c->sums, &rec->sums);
    usage_hist_add_pairs(c->total, rec->total, rec->n_total);
    return TRUE;
}

static gboolean add_raw(gint64 id, const usage_row *row, gpointer data, GError **error)
{
    hour_check *c = data;
    usage_sums_add_row(&c->sums, row);
    if (!usage_row_is_error(row))
        c->total[usage_hist_bucket(row->total_ms)]++;
    return TRUE;
}

static void test_rollups_match_raw(void)
{
    g_autofree char *path = tmp_path("rollup.sqlite3");
    GError *err = NULL;
    usage_store *s = usage_store_open(path, USAGE_STORE_READ_WRITE, &err);
    CHECK(s != NULL);
    if (!s)
        return;
    /* Bulk and queued writes into the same hours. */
    usage_row rows[3000];
    for (int i = 0; i < 3000; i++)
        rows[i] = make_row(i);
    CHECK(usage_store_insert_bulk(s, rows, 1500, &err));
    for (int i = 1500; i < 3000; i++)
        usage_store_append(s, &rows[i]);
    CHECK(usage_store_flush(s, &err));

    hour_check a = {.total = g_new0(guint64, USAGE_HIST_N_BUCKETS)};
    hour_check b = {.total = g_new0(guint64, USAGE_HIST_N_BUCKETS)};
    CHECK(usage_store_each_hour(s, 0, G_MAXINT64, add_hour, &a, &err));
    CHECK(usage_store_each_row(s, 0, G_MAXINT64, -1, add_raw, &b, &err));
    CHECK_EQ_INT(a.sums.calls, 3000);
    CHECK_EQ_INT(a.sums.calls, b.sums.calls);
    CHECK_EQ_INT(a.sums.errors, b.sums.errors);
    CHECK_EQ_INT(a.sums.prompt_tokens, b.sums.prompt_tokens);
    CHECK_EQ_INT(a.sums.cached_tokens, b.sums.cached_tokens);
    CHECK_EQ_INT(a.sums.busy_ms_unmeasured, b.sums.busy_ms_unmeasured);
    CHECK_EQ_INT(a.sums.decode_tokens, b.sums.decode_tokens);
    CHECK_NEAR(a.sums.energy_wms, b.sums.energy_wms, 1e-6 * b.sums.energy_wms);
    CHECK_NEAR(a.sums.decode_s, b.sums.decode_s, 1e-9 * b.sums.decode_s);
    CHECK(memcmp(a.total, b.total, USAGE_HIST_N_BUCKETS * sizeof(guint64)) == 0);
    CHECK_EQ_INT(usage_hist_percentile(a.total, 95), usage_hist_percentile(b.total, 95));

    gint64 first = 0, last = 0;
    gboolean any = FALSE;
    CHECK(usage_store_time_range(s, &first, &last, &any, &err) && any);
    CHECK_EQ_INT(first, rows[0].start_ms);
    CHECK_EQ_INT(last, rows[2999].start_ms);
    g_free(a.total);
    g_free(b.total);
    CHECK(usage_store_close(s, &err));
}

int main(void)
{
    tmp_dir = g_dir_make_tmp("moedesk-usage-XXXXXX", NULL);
    test_kill9();   /* first: fork before this process starts any thread */
    test_batching();
    test_close_flushes();
    test_migrations();
    test_bad_files();
    test_rollups_match_raw();
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp_dir);
    g_free(tmp_dir);
    TEST_DONE();
}

/*
 * test-keys.c — API keys (app/service/keys.h): the key format, names
 * (invalid, reserved, duplicates in any case), verify against exact and
 * near-miss tokens, only the SHA-256 on disk, revocation seen by a second
 * handle (another process, as the CLI is) after the re-check interval, a
 * deleted key file, and bad or newer database files.
 */
#include "keys.h"
#include "test.h"

#include <moe.h>
#include <sqlite3.h>

#include <glib/gstdio.h>
#include <sys/stat.h>

static gboolean token_format_ok(const char *t)
{
    if (!t || strlen(t) != SVC_KEYS_TOKEN_LEN || !g_str_has_prefix(t, "mdk-"))
        return FALSE;
    for (const char *p = t + 4; *p; p++)
        if (!g_ascii_isalnum(*p) && *p != '-' && *p != '_')
            return FALSE;
    return TRUE;
}

static void test_names(void)
{
    static const char *const good[] = {"alice", "ci.bot_2-x", "A", "guix", "cli2"};
    static const char *const bad[] = {"", "a b", "a/b", "ä", "gui", "GUI", "cli", "Anonymous",
                                      "x\n", "a:b"};
    for (size_t i = 0; i < G_N_ELEMENTS(good); i++)
        CHECK_MSG(svc_keys_name_valid(good[i], NULL), "%s refused", good[i]);
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) e = NULL;
        CHECK_MSG(!svc_keys_name_valid(bad[i], &e), "%s accepted", bad[i]);
        CHECK(g_error_matches(e, SVC_KEYS_ERROR, SVC_KEYS_ERROR_NAME));
    }
    CHECK(!svc_keys_name_valid(NULL, NULL));
    char name[SVC_KEYS_NAME_MAX + 2];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    CHECK(!svc_keys_name_valid(name, NULL));
    name[SVC_KEYS_NAME_MAX] = '\0';
    CHECK(svc_keys_name_valid(name, NULL));
}

/* TRUE when `needle` occurs anywhere in the file's bytes. */
static gboolean file_has(const char *path, const char *needle)
{
    g_autofree char *data = NULL;
    gsize len = 0;
    if (!g_file_get_contents(path, &data, &len, NULL))
        return FALSE;
    size_t n = strlen(needle);
    for (gsize i = 0; i + n <= len; i++)
        if (memcmp(data + i, needle, n) == 0)
            return TRUE;
    return FALSE;
}

static void test_store(const char *dir)
{
    g_autofree char *path = g_build_filename(dir, "nested", "keys.sqlite3", NULL);
    g_autoptr(GError) e = NULL;
    svc_keys *k = svc_keys_open(path, &e);
    CHECK_MSG(k != NULL, "%s", e ? e->message : "");
    if (!k)
        return;
    CHECK_EQ_INT(svc_keys_count_active(k), 0);
    g_autofree char *alice = svc_keys_create(k, "alice", &e);
    g_autofree char *bob = svc_keys_create(k, "bob", &e);
    CHECK(token_format_ok(alice) && token_format_ok(bob));
    CHECK(alice && bob && strcmp(alice, bob) != 0);
    CHECK_EQ_INT(svc_keys_count_active(k), 2);

    /* Names are unique in any case; reserved and bad names fail. */
    const char *dups[] = {"alice", "ALICE", "Bob"};
    for (size_t i = 0; i < G_N_ELEMENTS(dups); i++) {
        g_autoptr(GError) de = NULL;
        char *t = svc_keys_create(k, dups[i], &de);
        CHECK(t == NULL);
        g_free(t);
        CHECK(g_error_matches(de, SVC_KEYS_ERROR, SVC_KEYS_ERROR_EXISTS));
        CHECK(de && strstr(de->message, dups[i]));
    }
    CHECK(svc_keys_create(k, "gui", NULL) == NULL);
    CHECK(svc_keys_create(k, "", NULL) == NULL);
    CHECK(svc_keys_create(k, NULL, NULL) == NULL);

    /* Verify: exact tokens only. */
    g_autofree char *who = svc_keys_verify(k, alice);
    CHECK_EQ_STR(who, "alice");
    g_autofree char *who2 = svc_keys_verify(k, bob);
    CHECK_EQ_STR(who2, "bob");
    if (!alice)
        return;
    for (size_t i = 0; i < SVC_KEYS_TOKEN_LEN; i++) {
        g_autofree char *m = g_strdup(alice);
        m[i] = m[i] == 'A' ? 'B' : 'A';
        char *r = svc_keys_verify(k, m);
        CHECK_MSG(r == NULL, "mutated at %zu verified", i);
        g_free(r);
    }
    g_autofree char *longer = g_strconcat(alice, "x", NULL);
    g_autofree char *shorter = g_strndup(alice, SVC_KEYS_TOKEN_LEN - 1);
    g_autofree char *upper = g_ascii_strup(alice, -1);
    g_autofree char *spaced = g_strconcat(" ", alice, NULL);
    const char *nots[] = {"", "mdk-", longer, shorter, upper, spaced, "Bearer x", NULL};
    for (size_t i = 0; i < G_N_ELEMENTS(nots); i++) {
        char *r = svc_keys_verify(k, nots[i]);
        CHECK_MSG(r == NULL, "\"%s\" verified", nots[i] ? nots[i] : "(null)");
        g_free(r);
    }
    CHECK(svc_keys_verify(NULL, alice) == NULL);

    /* Only the hash is stored, in hex, in a 0600 file. */
    uint8_t d[32];
    char hex[65];
    moe_sha256 h;
    moe_sha256_init(&h);
    moe_sha256_update(&h, alice, strlen(alice));
    moe_sha256_final(&h, d);
    moe_sha256_hex(d, hex);
    sqlite3 *db = NULL;
    CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_stmt *st = NULL;
    CHECK(sqlite3_prepare_v2(db, "SELECT hash FROM keys WHERE name = 'alice'", -1, &st, NULL) ==
          SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK_EQ_STR((const char *)sqlite3_column_text(st, 0), hex);
    sqlite3_finalize(st);
    sqlite3_close(db);
    g_autofree char *wal = g_strconcat(path, "-wal", NULL);
    CHECK(!file_has(path, alice + 4) && !file_has(wal, alice + 4));
    GStatBuf sb;
    CHECK(g_stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);

    /* The list: sorted, with times; verify recorded last_used. */
    g_autoptr(GPtrArray) list = svc_keys_list(k, &e);
    CHECK(list && list->len == 2);
    if (list && list->len == 2) {
        svc_key_info *a = g_ptr_array_index(list, 0), *b = g_ptr_array_index(list, 1);
        gint64 now = g_get_real_time() / G_USEC_PER_SEC;
        CHECK_EQ_STR(a->name, "alice");
        CHECK_EQ_STR(b->name, "bob");
        CHECK(a->created > now - 60 && a->created <= now);
        CHECK(a->revoked_at == 0);
        CHECK(a->last_used > now - 60);
    }

    /* A second handle (as the CLI would be) revokes; the first sees it
     * after its re-check interval, never before a check. */
    svc_keys *cli = svc_keys_open(path, &e);
    CHECK(cli != NULL);
    CHECK(svc_keys_revoke(cli, "ALICE", &e)); /* names match in any case */
    char *r = svc_keys_verify(cli, alice);
    CHECK(r == NULL); /* at once in the revoking handle */
    g_free(r);
    g_usleep(G_USEC_PER_SEC + 100000);
    r = svc_keys_verify(k, alice);
    CHECK_MSG(r == NULL, "revoked key still verified after 1.1 s");
    g_free(r);
    CHECK_EQ_INT(svc_keys_count_active(k), 1);
    g_autoptr(GError) re = NULL;
    CHECK(!svc_keys_revoke(k, "alice", &re)); /* already revoked */
    CHECK(g_error_matches(re, SVC_KEYS_ERROR, SVC_KEYS_ERROR_NOT_FOUND));
    g_clear_error(&re);
    CHECK(!svc_keys_revoke(k, "carol", &re));
    CHECK(re && strstr(re->message, "carol"));
    CHECK(!svc_keys_revoke(k, NULL, NULL));
    char *again = svc_keys_create(k, "alice", NULL); /* a revoked key keeps its name */
    CHECK(again == NULL);
    g_free(again);

    /* A key created elsewhere verifies here once re-checked. */
    svc_keys_set_recheck_interval(k, 0);
    g_autofree char *carol = svc_keys_create(cli, "carol", NULL);
    g_autofree char *c1 = svc_keys_verify(k, carol);
    CHECK_EQ_STR(c1, "carol");

    /* The file deleted under a running service: no keys are left. */
    g_unlink(path);
    g_unlink(wal);
    g_autofree char *shm = g_strconcat(path, "-shm", NULL);
    g_unlink(shm);
    char *gone = svc_keys_verify(k, carol);
    CHECK(gone == NULL);
    g_free(gone);
    CHECK_EQ_INT(svc_keys_count_active(k), 0);
    svc_keys_close(cli);
    svc_keys_close(k);
    svc_keys_close(NULL);
    g_unlink(path); /* the reopened, empty file */
    g_unlink(wal);
    g_unlink(shm);
}

static void test_bad_files(const char *dir)
{
    g_autofree char *junk = g_build_filename(dir, "junk.sqlite3", NULL);
    g_autofree char *text = g_strnfill(4096, 'j');
    CHECK(g_file_set_contents(junk, text, -1, NULL));
    g_autoptr(GError) e = NULL;
    svc_keys *k = svc_keys_open(junk, &e);
    CHECK(k == NULL);
    CHECK(g_error_matches(e, SVC_KEYS_ERROR, SVC_KEYS_ERROR_DB));
    CHECK(e && strstr(e->message, "junk.sqlite3"));
    svc_keys_close(k);

    g_autofree char *newer = g_build_filename(dir, "newer.sqlite3", NULL);
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(newer, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "PRAGMA user_version = 7", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    g_clear_error(&e);
    k = svc_keys_open(newer, &e);
    CHECK(k == NULL);
    CHECK(e && strstr(e->message, "newer"));
    svc_keys_close(k);

    /* A folder where the file should be. */
    g_clear_error(&e);
    k = svc_keys_open(dir, &e);
    CHECK(k == NULL && e != NULL);
    svc_keys_close(k);
    g_unlink(junk);
    g_unlink(newer);
}

static void test_bearer(void)
{
    const char *t = "mdk-abc";
    CHECK_EQ_STR(svc_keys_bearer_token("Bearer mdk-abc"), t);
    CHECK_EQ_STR(svc_keys_bearer_token("bearer   mdk-abc"), t);
    CHECK_EQ_STR(svc_keys_bearer_token("  BEARER\tmdk-abc"), t);
    CHECK(svc_keys_bearer_token(NULL) == NULL);
    CHECK(svc_keys_bearer_token("") == NULL);
    CHECK(svc_keys_bearer_token("Bearer") == NULL);
    CHECK(svc_keys_bearer_token("Bearer ") == NULL);
    CHECK(svc_keys_bearer_token("Bearermdk-abc") == NULL);
    CHECK(svc_keys_bearer_token("Basic dXNlcjpwYXNz") == NULL);
    CHECK(svc_keys_bearer_token("Bearer mdk-abc extra") == NULL);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    g_autofree char *dir = g_dir_make_tmp("keys-XXXXXX", NULL);
    CHECK(dir != NULL);
    if (!dir)
        TEST_DONE();
    test_names();
    test_store(dir);
    test_bad_files(dir);
    test_bearer();
    g_autofree char *nested = g_build_filename(dir, "nested", NULL);
    g_rmdir(nested);
    g_rmdir(dir);
    TEST_DONE();
}

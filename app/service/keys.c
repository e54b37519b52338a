/*
 * keys.c — the API key store of keys.h: one SQLite table of names and
 * SHA-256 hashes, an in-memory copy of the active hashes for verify(), and
 * the change check that lets another process (the CLI) create and revoke
 * keys while the service runs.
 *
 *   keys (name TEXT UNIQUE COLLATE NOCASE, hash TEXT UNIQUE  -- 64 hex digits
 *         created INTEGER, revoked_at INTEGER NULL, last_used INTEGER NULL)
 *   PRAGMA user_version = 1
 */
#include "keys.h"

#include <moe.h>
#include <sqlite3.h>

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
#include <bcrypt.h>
#else
#include <unistd.h>
#endif
#ifdef __linux__
#include <sys/random.h>
#endif

G_DEFINE_QUARK(svc-keys-error-quark, svc_keys_error)

#define SCHEMA_VERSION     1
#define RAW_BYTES          32
#define LAST_USED_EVERY_S  60
#define DEFAULT_RECHECK_US G_USEC_PER_SEC
#define BUSY_TIMEOUT_MS    5000

typedef struct cached_key {
    char  *name;
    guint8 hash[32];
    gint64 last_used; /* Unix seconds, as last written */
} cached_key;

struct svc_keys {
    GMutex  lock;
    sqlite3 *db;
    char    *path;
    GArray  *active;      /* cached_key of the active keys           */
    gint64   data_version; /* PRAGMA data_version at the last load   */
    gint64   checked_us;  /* monotonic time of the last change check */
    gint64   interval_us;
    guint64  file_id[2];  /* (st_dev, st_ino) of the open file       */
};

static gboolean db_fail(GError **error, sqlite3 *db, const char *path, const char *what)
{
    g_set_error(error, SVC_KEYS_ERROR, SVC_KEYS_ERROR_DB, "%s: %s: %s", path, what,
                db ? sqlite3_errmsg(db) : "out of memory");
    return FALSE;
}

/* ---- random keys ---- */

static gboolean random_bytes(guint8 *buf, size_t n, GError **error)
{
#ifdef _WIN32
    if (BCryptGenRandom(NULL, buf, (ULONG)n, BCRYPT_USE_SYSTEM_PREFERRED_RNG) == 0)
        return TRUE;
#else
    size_t got = 0;
#ifdef __linux__
    while (got < n) {
        ssize_t r = getrandom(buf + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
#endif
    if (got < n) { /* no getrandom (old kernel, other Unix): the device */
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        while (fd >= 0 && got < n) {
            ssize_t r = read(fd, buf + got, n - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        if (fd >= 0)
            close(fd);
    }
    if (got == n)
        return TRUE;
#endif
    g_set_error(error, SVC_KEYS_ERROR, SVC_KEYS_ERROR_RANDOM,
                "the system's random number source failed");
    return FALSE;
}

static void hash_token(const char *token, guint8 out[32])
{
    moe_sha256 h;
    moe_sha256_init(&h);
    moe_sha256_update(&h, token, strlen(token));
    moe_sha256_final(&h, out);
}

static gboolean parse_hex32(const char *hex, guint8 out[32])
{
    if (!hex || strlen(hex) != 64)
        return FALSE;
    for (int i = 0; i < 32; i++) {
        int hi = g_ascii_xdigit_value(hex[2 * i]), lo = g_ascii_xdigit_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return FALSE;
        out[i] = (guint8)(hi << 4 | lo);
    }
    return TRUE;
}

/* The token's shape is public, so checking it first leaks nothing. */
static gboolean token_shape_ok(const char *t)
{
    if (!t || strlen(t) != SVC_KEYS_TOKEN_LEN || strncmp(t, SVC_KEYS_PREFIX, 4) != 0)
        return FALSE;
    for (const char *p = t + 4; *p; p++)
        if (!g_ascii_isalnum(*p) && *p != '-' && *p != '_')
            return FALSE;
    return TRUE;
}

/* ---- the database ---- */

static gint64 now_s(void)
{
    return g_get_real_time() / G_USEC_PER_SEC;
}

static gboolean exec(svc_keys *k, const char *sql, GError **error)
{
    char *msg = NULL;
    if (sqlite3_exec(k->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        g_set_error(error, SVC_KEYS_ERROR, SVC_KEYS_ERROR_DB, "%s: %s", k->path,
                    msg ? msg : sqlite3_errmsg(k->db));
        sqlite3_free(msg);
        return FALSE;
    }
    return TRUE;
}

static gint64 pragma_int(svc_keys *k, const char *sql, GError **error)
{
    sqlite3_stmt *st = NULL;
    gint64 v = -1;
    if (sqlite3_prepare_v2(k->db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    else
        db_fail(error, k->db, k->path, sql);
    sqlite3_finalize(st);
    return v;
}

static void file_id(const char *path, guint64 id[2])
{
    GStatBuf st;
    id[0] = id[1] = 0;
    if (g_stat(path, &st) == 0) {
        id[0] = (guint64)st.st_dev;
        id[1] = (guint64)st.st_ino;
    }
}

static gboolean db_open(svc_keys *k, GError **error)
{
    g_autofree char *dir = g_path_get_dirname(k->path);
    if (g_mkdir_with_parents(dir, 0700) != 0) {
        int e = errno;
        g_set_error(error, SVC_KEYS_ERROR, SVC_KEYS_ERROR_DB, "%s: %s", dir, g_strerror(e));
        return FALSE;
    }
    if (sqlite3_open_v2(k->path, &k->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        db_fail(error, k->db, k->path, "open");
        sqlite3_close(k->db);
        k->db = NULL;
        return FALSE;
    }
    g_chmod(k->path, 0600);
    sqlite3_busy_timeout(k->db, BUSY_TIMEOUT_MS);
    gint64 ver = pragma_int(k, "PRAGMA user_version", error);
    if (ver < 0)
        return FALSE;
    if (ver > SCHEMA_VERSION) {
        g_set_error(error, SVC_KEYS_ERROR, SVC_KEYS_ERROR_DB,
                    "%s: schema version %" G_GINT64_FORMAT " is newer than this program's (%d)",
                    k->path, ver, SCHEMA_VERSION);
        return FALSE;
    }
    /* WAL: the service reads while the CLI writes. FULL: a revocation
     * survives a power cut. */
    if (!exec(k, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", error))
        return FALSE;
    if (ver == 0 &&
        !exec(k, "BEGIN IMMEDIATE;"
                 "CREATE TABLE IF NOT EXISTS keys ("
                 " name TEXT NOT NULL UNIQUE COLLATE NOCASE,"
                 " hash TEXT NOT NULL UNIQUE,"
                 " created INTEGER NOT NULL,"
                 " revoked_at INTEGER,"
                 " last_used INTEGER);"
                 "PRAGMA user_version = 1;"
                 "COMMIT;", error)) {
        sqlite3_exec(k->db, "ROLLBACK", NULL, NULL, NULL);
        return FALSE;
    }
    file_id(k->path, k->file_id);
    return TRUE;
}

static void cached_key_clear(gpointer p)
{
    g_free(((cached_key *)p)->name);
}

/* Replaces the cache with the active keys now in the file. On error the
 * old cache stays. */
static gboolean cache_load(svc_keys *k, GError **error)
{
    gint64 dv = pragma_int(k, "PRAGMA data_version", error);
    if (dv < 0)
        return FALSE;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(k->db, "SELECT name, hash, last_used FROM keys "
                                  "WHERE revoked_at IS NULL", -1, &st, NULL) != SQLITE_OK)
        return db_fail(error, k->db, k->path, "read keys");
    GArray *a = g_array_new(FALSE, FALSE, sizeof(cached_key));
    g_array_set_clear_func(a, cached_key_clear);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        cached_key c = {0};
        const char *name = (const char *)sqlite3_column_text(st, 0);
        /* A row edited by hand into a bad hash can never verify: skip it. */
        if (!name || !parse_hex32((const char *)sqlite3_column_text(st, 1), c.hash))
            continue;
        c.name = g_strdup(name);
        c.last_used = sqlite3_column_int64(st, 2);
        g_array_append_val(a, c);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        g_array_unref(a);
        return db_fail(error, k->db, k->path, "read keys");
    }
    if (k->active)
        g_array_unref(k->active);
    k->active = a;
    k->data_version = dv;
    return TRUE;
}

/* Reloads when another process committed or the file was replaced; looks
 * at most once per interval. FALSE when the check itself failed. */
static gboolean cache_refresh(svc_keys *k)
{
    gint64 now = g_get_monotonic_time();
    if (k->interval_us > 0 && k->checked_us && now - k->checked_us < k->interval_us)
        return TRUE;
    k->checked_us = now;
    guint64 id[2];
    file_id(k->path, id);
    if (id[0] != k->file_id[0] || id[1] != k->file_id[1]) {
        /* Deleted or replaced: reopen (an empty new file means no keys). */
        sqlite3 *old = k->db;
        k->db = NULL;
        if (!db_open(k, NULL)) {
            sqlite3_close(k->db);
            k->db = old;
            return FALSE;
        }
        sqlite3_close(old);
        return cache_load(k, NULL);
    }
    gint64 dv = pragma_int(k, "PRAGMA data_version", NULL);
    if (dv < 0)
        return FALSE;
    return dv == k->data_version || cache_load(k, NULL);
}

char *svc_keys_default_path(void)
{
    const char *env = g_getenv("MOEDESK_DATA_DIR");
    if (env && env[0])
        return g_build_filename(env, "keys.sqlite3", NULL);
    return g_build_filename(g_get_user_data_dir(), "moedesk", "keys.sqlite3", NULL);
}

svc_keys *svc_keys_open(const char *path, GError **error)
{
    svc_keys *k = g_new0(svc_keys, 1);
    g_mutex_init(&k->lock);
    k->path = path ? g_strdup(path) : svc_keys_default_path();
    k->interval_us = DEFAULT_RECHECK_US;
    if (!db_open(k, error) || !cache_load(k, error)) {
        svc_keys_close(k);
        return NULL;
    }
    k->checked_us = g_get_monotonic_time();
    return k;
}

void svc_keys_close(svc_keys *k)
{
    if (!k)
        return;
    sqlite3_close(k->db);
    if (k->active)
        g_array_unref(k->active);
    g_free(k->path);
    g_mutex_clear(&k->lock);
    g_free(k);
}

void svc_keys_set_recheck_interval(svc_keys *k, gint64 interval_us)
{
    g_return_if_fail(k != NULL);
    g_mutex_lock(&k->lock);
    k->interval_us = interval_us < 0 ? 0 : interval_us;
    g_mutex_unlock(&k->lock);
}

gboolean svc_keys_name_valid(const char *name, GError **error)
{
    static const char *const reserved[] = {"gui", "cli", "anonymous"};
    size_t len = name ? strlen(name) : 0;
    gboolean ok = len >= 1 && len <= SVC_KEYS_NAME_MAX;
    for (size_t i = 0; ok && i < len; i++)
        ok = g_ascii_isalnum(name[i]) || name[i] == '.' || name[i] == '_' || name[i] == '-';
    if (!ok) {
        g_set_error(error, SVC_KEYS_ERROR, SVC_KEYS_ERROR_NAME,
                    "invalid key name: use 1-%d of A-Z a-z 0-9 . _ -", SVC_KEYS_NAME_MAX);
        return FALSE;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(reserved); i++)
        if (!g_ascii_strcasecmp(name, reserved[i])) {
            g_set_error(error, SVC_KEYS_ERROR, SVC_KEYS_ERROR_NAME,
                        "key name '%s' is reserved (gui, cli and anonymous name callers "
                        "without a key)", name);
            return FALSE;
        }
    return TRUE;
}

/* ---- operations ---- */

char *svc_keys_create(svc_keys *k, const char *name, GError **error)
{
    g_return_val_if_fail(k != NULL, NULL);
    if (!svc_keys_name_valid(name, error))
        return NULL;
    guint8 raw[RAW_BYTES];
    if (!random_bytes(raw, sizeof raw, error))
        return NULL;
    /* base64url without padding: 32 bytes -> 43 characters. */
    char *b64 = g_base64_encode(raw, sizeof raw);
    memset(raw, 0, sizeof raw);
    for (char *p = b64; *p; p++)
        *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
    char *eq = strchr(b64, '=');
    if (eq)
        *eq = '\0';
    char *token = g_strconcat(SVC_KEYS_PREFIX, b64, NULL);
    memset(b64, 0, strlen(b64));
    g_free(b64);
    guint8 digest[32];
    char hex[65];
    hash_token(token, digest);
    moe_sha256_hex(digest, hex);

    g_mutex_lock(&k->lock);
    sqlite3_stmt *st = NULL;
    gboolean ok = FALSE;
    if (sqlite3_prepare_v2(k->db, "INSERT INTO keys (name, hash, created) VALUES (?, ?, ?)", -1,
                           &st, NULL) != SQLITE_OK) {
        db_fail(error, k->db, k->path, "add key");
    } else {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, hex, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 3, now_s());
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
            ok = TRUE;
        else if ((rc & 0xff) == SQLITE_CONSTRAINT)
            g_set_error(error, SVC_KEYS_ERROR, SVC_KEYS_ERROR_EXISTS,
                        "an API key named '%s' already exists (revoked keys keep their "
                        "names; choose another)", name);
        else
            db_fail(error, k->db, k->path, "add key");
    }
    sqlite3_finalize(st);
    if (ok)
        cache_load(k, NULL); /* verify() knows the new key at once */
    g_mutex_unlock(&k->lock);
    if (!ok) {
        memset(token, 0, strlen(token));
        g_free(token);
        return NULL;
    }
    return token;
}

void svc_key_info_free(svc_key_info *info)
{
    if (!info)
        return;
    g_free(info->name);
    g_free(info);
}

GPtrArray *svc_keys_list(svc_keys *k, GError **error)
{
    g_return_val_if_fail(k != NULL, NULL);
    g_mutex_lock(&k->lock);
    GPtrArray *list = g_ptr_array_new_with_free_func((GDestroyNotify)svc_key_info_free);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(k->db, "SELECT name, created, revoked_at, last_used FROM keys "
                                       "ORDER BY name", -1, &st, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        svc_key_info *i = g_new0(svc_key_info, 1);
        i->name = g_strdup((const char *)sqlite3_column_text(st, 0));
        i->created = sqlite3_column_int64(st, 1);
        i->revoked_at = sqlite3_column_int64(st, 2);
        i->last_used = sqlite3_column_int64(st, 3);
        g_ptr_array_add(list, i);
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_DONE) {
        db_fail(error, k->db, k->path, "list keys");
        g_clear_pointer(&list, g_ptr_array_unref);
    }
    sqlite3_finalize(st);
    g_mutex_unlock(&k->lock);
    return list;
}

gboolean svc_keys_revoke(svc_keys *k, const char *name, GError **error)
{
    g_return_val_if_fail(k != NULL, FALSE);
    if (!name || !*name) {
        g_set_error(error, SVC_KEYS_ERROR, SVC_KEYS_ERROR_NOT_FOUND, "no key name given");
        return FALSE;
    }
    g_mutex_lock(&k->lock);
    sqlite3_stmt *st = NULL;
    gboolean ok = FALSE;
    if (sqlite3_prepare_v2(k->db, "UPDATE keys SET revoked_at = ? "
                                  "WHERE name = ? AND revoked_at IS NULL", -1, &st, NULL) !=
        SQLITE_OK) {
        db_fail(error, k->db, k->path, "revoke key");
    } else {
        sqlite3_bind_int64(st, 1, now_s());
        sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) != SQLITE_DONE)
            db_fail(error, k->db, k->path, "revoke key");
        else if (sqlite3_changes(k->db) == 0)
            g_set_error(error, SVC_KEYS_ERROR, SVC_KEYS_ERROR_NOT_FOUND,
                        "no active API key named '%s'", name);
        else
            ok = TRUE;
    }
    sqlite3_finalize(st);
    if (ok)
        cache_load(k, NULL);
    g_mutex_unlock(&k->lock);
    return ok;
}

static void touch_last_used(svc_keys *k, cached_key *c)
{
    gint64 now = now_s();
    if (now - c->last_used < LAST_USED_EVERY_S)
        return;
    c->last_used = now; /* also on failure: do not retry on every request */
    sqlite3_stmt *st = NULL;
    /* Best effort on the request path: never wait for another process's
     * write lock (the next try is a minute later). */
    sqlite3_busy_timeout(k->db, 0);
    if (sqlite3_prepare_v2(k->db, "UPDATE keys SET last_used = ? WHERE name = ?", -1, &st,
                           NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, now);
        sqlite3_bind_text(st, 2, c->name, -1, SQLITE_TRANSIENT);
        sqlite3_step(st);
    }
    sqlite3_finalize(st);
    sqlite3_busy_timeout(k->db, BUSY_TIMEOUT_MS);
}

char *svc_keys_verify(svc_keys *k, const char *token)
{
    if (!k || !token_shape_ok(token))
        return NULL;
    guint8 digest[32];
    hash_token(token, digest);
    g_mutex_lock(&k->lock);
    cache_refresh(k);
    /* Every stored hash is compared in full: the time taken does not depend
     * on how many leading bytes matched. */
    gint found = -1;
    for (guint i = 0; i < k->active->len; i++) {
        const cached_key *c = &g_array_index(k->active, cached_key, i);
        guint8 diff = 0;
        for (int b = 0; b < 32; b++)
            diff |= (guint8)(c->hash[b] ^ digest[b]);
        if (diff == 0 && found < 0)
            found = (gint)i;
    }
    char *name = NULL;
    if (found >= 0) {
        cached_key *c = &g_array_index(k->active, cached_key, (guint)found);
        name = g_strdup(c->name);
        touch_last_used(k, c);
    }
    g_mutex_unlock(&k->lock);
    return name;
}

int svc_keys_count_active(svc_keys *k)
{
    g_return_val_if_fail(k != NULL, -1);
    g_mutex_lock(&k->lock);
    int n = cache_refresh(k) ? (int)k->active->len : -1;
    g_mutex_unlock(&k->lock);
    return n;
}

const char *svc_keys_bearer_token(const char *h)
{
    if (!h)
        return NULL;
    while (*h == ' ' || *h == '\t')
        h++;
    if (g_ascii_strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t'))
        return NULL;
    h += 6;
    while (*h == ' ' || *h == '\t')
        h++;
    if (!*h)
        return NULL;
    /* Trailing spaces: hand back only when there are none (a token never
     * holds spaces, so such a header cannot verify anyway). */
    return strpbrk(h, " \t") ? NULL : h;
}

/*
 * keys.h — API keys for moedesk-service: created with a name (the caller in
 * usage rows), shown once in plaintext, stored only as a SHA-256 hash in
 * SQLite: `$MOEDESK_DATA_DIR/keys.sqlite3`, else
 * `g_get_user_data_dir()/moedesk/keys.sqlite3`.
 *
 * A key is `mdk-` followed by 43 base64url characters: 32 bytes from the
 * operating system's CSPRNG (getrandom / BCryptGenRandom). 256 random bits
 * make a salt or a slow hash pointless: SHA-256 of the whole key text is
 * stored, and a stolen database reveals no usable key.
 *
 * The service verifies against an in-memory copy of the active keys'
 * hashes, compared in constant time. The CLI may create or revoke keys
 * while the service runs: verify() looks at SQLite's data_version (and
 * whether the file was replaced) at most once a second and reloads when
 * another process committed, so a revoked key stops working within about
 * a second.
 *
 * Threads: one svc_keys may be used from any thread (a mutex inside).
 */
#ifndef MOEDESK_SVC_KEYS_H
#define MOEDESK_SVC_KEYS_H

#include <glib.h>

G_BEGIN_DECLS

#define SVC_KEYS_ERROR (svc_keys_error_quark())
GQuark svc_keys_error_quark(void);

typedef enum {
    SVC_KEYS_ERROR_DB,        /* SQLite failed, or a newer/foreign database  */
    SVC_KEYS_ERROR_NAME,      /* invalid or reserved key name                */
    SVC_KEYS_ERROR_EXISTS,    /* a key (active or revoked) has that name     */
    SVC_KEYS_ERROR_NOT_FOUND, /* no active key has that name                 */
    SVC_KEYS_ERROR_RANDOM,    /* the system's random source failed           */
} svc_keys_error;

#define SVC_KEYS_PREFIX    "mdk-"
#define SVC_KEYS_TOKEN_LEN 47 /* "mdk-" + 43 base64url characters */
#define SVC_KEYS_NAME_MAX  64

typedef struct svc_keys svc_keys;

typedef struct svc_key_info {
    char  *name;
    gint64 created;    /* Unix seconds (UTC)            */
    gint64 revoked_at; /* Unix seconds; 0 = active      */
    gint64 last_used;  /* Unix seconds; 0 = never; updated at most once a minute */
} svc_key_info;

/* `$MOEDESK_DATA_DIR/keys.sqlite3` or the user data dir's
 * `moedesk/keys.sqlite3`. Caller frees. */
char *svc_keys_default_path(void);

/* Opens (creating folder, file and table as needed, mode 0600) the key
 * database at `path` (NULL = default). */
svc_keys *svc_keys_open(const char *path, GError **error);
void      svc_keys_close(svc_keys *keys);

/* 1-64 characters of [A-Za-z0-9._-]; "gui", "cli" and "anonymous" (any
 * case) are reserved: they are callers in usage rows. */
gboolean svc_keys_name_valid(const char *name, GError **error);

/* Creates a key named `name` and returns its plaintext — the only time it
 * exists outside the caller's hands; show it once and free it. Names are
 * unique regardless of case, and a revoked key keeps its name. */
char *svc_keys_create(svc_keys *keys, const char *name, GError **error);

/* Every key (active and revoked), by name: a GPtrArray of svc_key_info*
 * that frees them. NULL on a database error. */
GPtrArray *svc_keys_list(svc_keys *keys, GError **error);
void       svc_key_info_free(svc_key_info *info);

/* Revokes the active key `name`: it stops verifying at once in this
 * process and within about a second in others. NOT_FOUND when no active
 * key has that name. */
gboolean svc_keys_revoke(svc_keys *keys, const char *name, GError **error);

/* The name of the active key whose plaintext is `token` (a new string,
 * caller frees), or NULL. Never fails loudly: a malformed token, a
 * database error during a reload (the last good copy is used) or NULL all
 * give NULL or the cached answer. Records last_used (at most once a minute
 * per key). */
char *svc_keys_verify(svc_keys *keys, const char *token);

/* Active keys right now (reloading if another process changed the file),
 * or -1 when the database cannot be read. */
int svc_keys_count_active(svc_keys *keys);

/* The token in an "Authorization: Bearer TOKEN" header value (borrowed,
 * points into `authorization`), or NULL. The scheme is matched
 * case-insensitively and spaces before the token are skipped; anything
 * after it (a space and more) gives NULL. */
const char *svc_keys_bearer_token(const char *authorization);

/* How often verify/count look for changes by other processes; default 1 s.
 * 0 = on every call (tests). */
void svc_keys_set_recheck_interval(svc_keys *keys, gint64 interval_us);

G_END_DECLS

#endif /* MOEDESK_SVC_KEYS_H */

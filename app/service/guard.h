/*
 * guard.h — the service's request safety checks as pure functions, so each
 * rule is tested on hostile input without a server: the Host allow-list
 * (the DNS-rebinding defence, Ollama's CVE-2024-28224), the CORS origin
 * match, the "no public bind without an API key" rule, and the model-name
 * and path checks that keep request-supplied names inside the models
 * folder.
 *
 * Rules (app/DESIGN.md, "Guard"):
 * - Host: accepted when it is `localhost`, a strict dotted-quad 127.x.y.z,
 *   `[::1]` (or bare `::1`), each with an optional port 1-65535, or one of
 *   the configured names (exact, case-insensitive, any port). One trailing
 *   dot on a name is ignored (`localhost.` is the same DNS name).
 *   Subdomains of localhost (`app.localhost`) are NOT accepted unless
 *   configured: not every resolver pins them to loopback. Rejected: a
 *   missing or empty Host, user info (`a@localhost`), IPv6 zone ids, bad or
 *   zero ports, spaces, control or non-ASCII bytes, non-canonical IPv4
 *   (`127.1`, `0177.0.0.1`, `2130706433`), `0.0.0.0`, and names that merely
 *   start with an allowed one (`localhost.evil.com`, `127.0.0.1.nip.io`).
 * - CORS: an Origin gets CORS headers only when it equals a configured
 *   origin in scheme, host and port (default ports made explicit); "*"
 *   allows every origin only when configured literally. "null" never
 *   matches.
 * - Bind: a non-loopback bind address needs at least one active API key.
 *
 * Threads: every function is reentrant.
 */
#ifndef MOEDESK_SVC_GUARD_H
#define MOEDESK_SVC_GUARD_H

#include <glib.h>

G_BEGIN_DECLS

#define SVC_GUARD_ERROR (svc_guard_error_quark())
GQuark svc_guard_error_quark(void);

typedef enum {
    SVC_GUARD_ERROR_HOST,   /* Host header refused (answer 403/421)        */
    SVC_GUARD_ERROR_ORIGIN, /* not a valid origin (settings)               */
    SVC_GUARD_ERROR_BIND,   /* bind address refused without a key          */
    SVC_GUARD_ERROR_NAME,   /* model name refused (answer 400)             */
    SVC_GUARD_ERROR_PATH,   /* path outside the folder or not resolvable   */
} svc_guard_error;

#define SVC_GUARD_MODEL_NAME_MAX 256 /* bytes */

/* TRUE when the request's Host header names this machine's loopback or one
 * of `allowed` (NULL-terminated, may be NULL). The error says why not. */
gboolean svc_guard_host_ok(const char *host_header, const char *const *allowed, GError **error);

/* TRUE when the service may send CORS headers for `origin` (the request's
 * Origin header; NULL = none → FALSE): it matches an entry of `configured`
 * (NULL-terminated, may be NULL) in scheme, host and port, or `configured`
 * holds "*". */
gboolean svc_guard_cors_origin_ok(const char *origin, const char *const *configured);

/* TRUE when the service may listen on `address` (an IP literal or a host
 * name): always for loopback (127.0.0.0/8, ::1, "localhost"), otherwise only
 * with n_active_keys >= 1. */
gboolean svc_guard_bind_ok(const char *address, int n_active_keys, GError **error);

/* TRUE when a model name from a request is safe to map into the models
 * folder: 1..SVC_GUARD_MODEL_NAME_MAX bytes of UTF-8, no control
 * characters, not absolute (`/x`, `\x`, `C:...`, `~`), no empty, `.` or
 * `..` component, no component ending in a dot or space (Windows strips
 * them, turning `.. ` into `..`). `org/repo:tag` passes. */
gboolean svc_guard_model_name_ok(const char *name, GError **error);

/* The real path (symlinks resolved) of `candidate` — relative candidates
 * are taken relative to `dir` — when it lies strictly inside `dir`'s real
 * path; else NULL and an error. A candidate that does not exist yet is
 * resolved through its parent folder (which must exist). Open the returned
 * path, not the candidate, so a link swapped in later is not followed.
 * Caller frees. */
char *svc_guard_resolve_inside(const char *dir, const char *candidate, GError **error);
/* svc_guard_resolve_inside without the result. */
gboolean svc_guard_path_inside(const char *dir, const char *candidate, GError **error);

/* Settings checks: a bind address or allowed_hosts entry (an IPv4 or IPv6
 * literal, brackets allowed, or a DNS name of [A-Za-z0-9-] labels), and a
 * cors_origins entry ("*" or scheme://host[:port], nothing after). */
gboolean svc_guard_host_name_valid(const char *name, GError **error);
gboolean svc_guard_origin_valid(const char *origin, GError **error);

G_END_DECLS

#endif /* MOEDESK_SVC_GUARD_H */

/*
 * guard.c — the Host allow-list, the CORS origin match, the bind rule and
 * the model-name and path checks of guard.h. Everything here parses
 * strictly and refuses what it does not understand: a lenient parser is
 * what DNS-rebinding and path tricks exploit.
 */
#include "guard.h"

#include <errno.h>
#include <gio/gio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <direct.h>
#endif

G_DEFINE_QUARK(svc-guard-error-quark, svc_guard_error)

#define HOST_HEADER_MAX 300
#define DNS_NAME_MAX    253
#define DNS_LABEL_MAX   63

/* ---- hosts ---- */

/* Printable ASCII, no space: what a Host header or origin may hold. */
static gboolean printable_ascii(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x21 || *p > 0x7e)
            return FALSE;
    return TRUE;
}

/* A port: 1-5 decimal digits, 1..65535. */
static gboolean port_ok(const char *p, size_t len)
{
    if (len < 1 || len > 5)
        return FALSE;
    unsigned v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!g_ascii_isdigit(p[i]))
            return FALSE;
        v = v * 10 + (unsigned)(p[i] - '0');
    }
    return v >= 1 && v <= 65535;
}

/* Strict dotted quad: four decimal parts 0-255 without leading zeros, so no
 * octal (0177), hex (0x7f), short (127.1) or integer (2130706433) forms. */
static gboolean parse_ipv4(const char *s, guint8 out[4])
{
    for (int i = 0; i < 4; i++) {
        if (!g_ascii_isdigit(*s))
            return FALSE;
        unsigned v = 0;
        int n = 0;
        const char *start = s;
        while (g_ascii_isdigit(*s) && n < 4) {
            v = v * 10 + (unsigned)(*s++ - '0');
            n++;
        }
        if (n > 3 || v > 255 || (n > 1 && *start == '0'))
            return FALSE;
        out[i] = (guint8)v;
        if (i < 3 && *s++ != '.')
            return FALSE;
    }
    return *s == '\0';
}

/* DNS name of [a-z0-9_-] labels (already lowercase, trailing dot removed). */
static gboolean dns_name_ok(const char *s)
{
    size_t len = strlen(s), label = 0;
    if (len == 0 || len > DNS_NAME_MAX)
        return FALSE;
    for (size_t i = 0; i <= len; i++) {
        char c = s[i];
        if (c == '.' || c == '\0') {
            if (label == 0 || label > DNS_LABEL_MAX)
                return FALSE;
            label = 0;
        } else if (g_ascii_isalnum(c) || c == '-' || c == '_') {
            label++;
        } else {
            return FALSE;
        }
    }
    return TRUE;
}

/* The canonical text of a host without port: an IPv6 address as GLib
 * prints it (no brackets), a strict IPv4 address, or a lowercase DNS name
 * without its one optional trailing dot. NULL with *why when malformed.
 * *loopback says whether it is this machine's loopback. */
static char *host_normalize(const char *h, size_t len, gboolean bracketed, gboolean *loopback,
                            const char **why)
{
    *loopback = FALSE;
    if (len == 0 || len > DNS_NAME_MAX + 1) {
        *why = "empty or overlong host";
        return NULL;
    }
    g_autofree char *s = g_ascii_strdown(h, (gssize)len);
    if (strlen(s) != len) {
        *why = "NUL in host";
        return NULL;
    }
    if (bracketed || strchr(s, ':')) {
        /* IPv6: hex digits, colons and dots (an embedded IPv4 tail) only,
         * so zone ids (%eth0) and anything else GLib might accept fail. */
        if (strspn(s, "0123456789abcdef:.") != len) {
            *why = "not an IPv6 address (zone ids are refused)";
            return NULL;
        }
        g_autoptr(GInetAddress) a = g_inet_address_new_from_string(s);
        if (!a || g_inet_address_get_family(a) != G_SOCKET_FAMILY_IPV6) {
            *why = "not an IPv6 address";
            return NULL;
        }
        *loopback = g_inet_address_get_is_loopback(a);
        return g_inet_address_to_string(a);
    }
    if (strspn(s, "0123456789.") == len) {
        guint8 b[4];
        if (!parse_ipv4(s, b)) {
            *why = "not a canonical IPv4 address";
            return NULL;
        }
        *loopback = b[0] == 127;
        return g_steal_pointer(&s);
    }
    if (s[len - 1] == '.')
        s[len - 1] = '\0'; /* "localhost." is the same DNS name as "localhost" */
    if (!dns_name_ok(s)) {
        *why = "not a host name";
        return NULL;
    }
    *loopback = strcmp(s, "localhost") == 0;
    return g_steal_pointer(&s);
}

/* An allowed_hosts entry in the same canonical form (brackets optional). */
static char *entry_normalize(const char *e)
{
    gboolean lb;
    const char *why;
    size_t len = strlen(e);
    if (len >= 2 && e[0] == '[' && e[len - 1] == ']')
        return host_normalize(e + 1, len - 2, TRUE, &lb, &why);
    return host_normalize(e, len, FALSE, &lb, &why);
}

G_GNUC_PRINTF(3, 4)
static gboolean refuse(GError **error, svc_guard_error code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error_literal(error, SVC_GUARD_ERROR, (int)code, msg);
    return FALSE;
}

gboolean svc_guard_host_ok(const char *hh, const char *const *allowed, GError **error)
{
    if (!hh || !*hh)
        return refuse(error, SVC_GUARD_ERROR_HOST, "missing Host header");
    size_t len = strlen(hh);
    if (len > HOST_HEADER_MAX)
        return refuse(error, SVC_GUARD_ERROR_HOST, "Host header over %d bytes", HOST_HEADER_MAX);
    if (!printable_ascii(hh))
        return refuse(error, SVC_GUARD_ERROR_HOST,
                      "Host header holds spaces, control or non-ASCII bytes");
    const char *host = hh, *port = NULL;
    size_t hlen = len;
    gboolean bracketed = FALSE;
    if (hh[0] == '[') {
        const char *close = strchr(hh, ']');
        if (!close)
            return refuse(error, SVC_GUARD_ERROR_HOST, "Host '%s': unclosed '['", hh);
        host = hh + 1;
        hlen = (size_t)(close - host);
        bracketed = TRUE;
        if (close[1] == ':')
            port = close + 2;
        else if (close[1])
            return refuse(error, SVC_GUARD_ERROR_HOST, "Host '%s': junk after ']'", hh);
    } else {
        const char *c1 = strchr(hh, ':');
        /* Two or more colons: a bare IPv6 address (no port possible). */
        if (c1 && !strchr(c1 + 1, ':')) {
            hlen = (size_t)(c1 - hh);
            port = c1 + 1;
        }
    }
    if (port && !port_ok(port, strlen(port)))
        return refuse(error, SVC_GUARD_ERROR_HOST, "Host '%s': bad port", hh);
    gboolean loopback;
    const char *why = NULL;
    g_autofree char *norm = host_normalize(host, hlen, bracketed, &loopback, &why);
    if (!norm)
        return refuse(error, SVC_GUARD_ERROR_HOST, "Host '%s': %s", hh, why);
    if (loopback)
        return TRUE;
    for (const char *const *a = allowed; a && *a; a++) {
        g_autofree char *e = entry_normalize(*a);
        if (e && strcmp(e, norm) == 0)
            return TRUE;
    }
    return refuse(error, SVC_GUARD_ERROR_HOST,
                  "Host '%s' is not this machine's loopback or an allowed host (settings: "
                  "allowed_hosts)", hh);
}

gboolean svc_guard_host_name_valid(const char *name, GError **error)
{
    if (!name || !printable_ascii(name))
        return refuse(error, SVC_GUARD_ERROR_HOST, "expected a host name or IP address");
    g_autofree char *n = entry_normalize(name);
    if (!n)
        return refuse(error, SVC_GUARD_ERROR_HOST, "'%s' is not a host name or IP address", name);
    return TRUE;
}

/* ---- origins ---- */

/* "scheme://host:port" with the default port made explicit, lowercase;
 * NULL unless `s` is exactly scheme://host[:port]. */
static char *origin_canonical(const char *s)
{
    if (!s || !printable_ascii(s))
        return NULL;
    const char *sep = strstr(s, "://");
    if (!sep || sep == s || !g_ascii_isalpha(s[0]))
        return NULL;
    for (const char *p = s; p < sep; p++)
        if (!g_ascii_isalnum(*p) && *p != '+' && *p != '.' && *p != '-')
            return NULL;
    g_autofree char *scheme = g_ascii_strdown(s, sep - s);
    const char *auth = sep + 3, *port = NULL;
    if (strpbrk(auth, "/?#@\\"))
        return NULL; /* a path, query, fragment or user info: not an origin */
    const char *host = auth;
    size_t hlen;
    gboolean bracketed = FALSE;
    if (auth[0] == '[') {
        const char *close = strchr(auth, ']');
        if (!close || (close[1] && close[1] != ':'))
            return NULL;
        host = auth + 1;
        hlen = (size_t)(close - host);
        bracketed = TRUE;
        port = close[1] ? close + 2 : NULL;
    } else {
        const char *c = strchr(auth, ':');
        if (c && strchr(c + 1, ':'))
            return NULL;
        hlen = c ? (size_t)(c - auth) : strlen(auth);
        port = c ? c + 1 : NULL;
    }
    if (port && !port_ok(port, strlen(port)))
        return NULL;
    gboolean lb;
    const char *why;
    g_autofree char *h = host_normalize(host, hlen, bracketed, &lb, &why);
    if (!h)
        return NULL;
    int p = port ? atoi(port) : 0;
    if (!port) {
        if (!strcmp(scheme, "http") || !strcmp(scheme, "ws"))
            p = 80;
        else if (!strcmp(scheme, "https") || !strcmp(scheme, "wss"))
            p = 443;
    }
    gboolean v6 = strchr(h, ':') != NULL;
    return g_strdup_printf("%s://%s%s%s:%d", scheme, v6 ? "[" : "", h, v6 ? "]" : "", p);
}

gboolean svc_guard_origin_valid(const char *origin, GError **error)
{
    if (origin && !strcmp(origin, "*"))
        return TRUE;
    g_autofree char *c = origin_canonical(origin);
    if (!c)
        return refuse(error, SVC_GUARD_ERROR_ORIGIN,
                      "expected \"*\" or an origin such as http://localhost:3000 (no path)");
    return TRUE;
}

gboolean svc_guard_cors_origin_ok(const char *origin, const char *const *configured)
{
    if (!origin || !*origin || !configured)
        return FALSE;
    g_autofree char *want = origin_canonical(origin);
    for (const char *const *c = configured; *c; c++) {
        if (!strcmp(*c, "*"))
            return TRUE;
        g_autofree char *have = origin_canonical(*c);
        if (want && have && !strcmp(want, have))
            return TRUE;
    }
    return FALSE;
}

/* ---- bind ---- */

gboolean svc_guard_bind_ok(const char *address, int n_active_keys, GError **error)
{
    if (!address || !printable_ascii(address))
        return refuse(error, SVC_GUARD_ERROR_BIND, "bind address: expected a host or IP address");
    size_t len = strlen(address);
    const char *a = address;
    gboolean bracketed = len >= 2 && a[0] == '[' && a[len - 1] == ']';
    gboolean loopback;
    const char *why;
    g_autofree char *norm = bracketed ? host_normalize(a + 1, len - 2, TRUE, &loopback, &why)
                                      : host_normalize(a, len, FALSE, &loopback, &why);
    if (!norm)
        return refuse(error, SVC_GUARD_ERROR_BIND, "bind address '%s': %s", address, why);
    if (loopback || n_active_keys >= 1)
        return TRUE;
    return refuse(error, SVC_GUARD_ERROR_BIND,
                  "refusing to listen on %s (beyond loopback) without an API key: create one "
                  "with 'moedesk-cli keys create NAME' first", address);
}

/* ---- model names and paths ---- */

gboolean svc_guard_model_name_ok(const char *name, GError **error)
{
    if (!name || !*name)
        return refuse(error, SVC_GUARD_ERROR_NAME, "model name is empty");
    size_t len = strlen(name);
    if (len > SVC_GUARD_MODEL_NAME_MAX)
        return refuse(error, SVC_GUARD_ERROR_NAME, "model name over %d bytes",
                      SVC_GUARD_MODEL_NAME_MAX);
    if (!g_utf8_validate(name, (gssize)len, NULL))
        return refuse(error, SVC_GUARD_ERROR_NAME, "model name is not UTF-8");
    for (const char *p = name; *p; p = g_utf8_next_char(p))
        if (g_unichar_iscntrl(g_utf8_get_char(p)))
            return refuse(error, SVC_GUARD_ERROR_NAME, "model name holds control characters");
    if (name[0] == '/' || name[0] == '\\' || name[0] == '~' ||
        (g_ascii_isalpha(name[0]) && name[1] == ':'))
        return refuse(error, SVC_GUARD_ERROR_NAME,
                      "model name must not be an absolute path or drive");
    /* Components between / and \ (both separators on Windows). */
    const char *c = name;
    while (TRUE) {
        size_t n = strcspn(c, "/\\");
        if (n == 0)
            return refuse(error, SVC_GUARD_ERROR_NAME, "model name has an empty path component");
        if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return refuse(error, SVC_GUARD_ERROR_NAME, "model name has a '.' or '..' component");
        if (c[n - 1] == '.' || c[n - 1] == ' ')
            return refuse(error, SVC_GUARD_ERROR_NAME,
                          "model name has a component ending in a dot or space");
        if (!c[n])
            break;
        c += n + 1;
    }
    return TRUE;
}

/* realpath(), or on Windows the absolute path (symlinks unresolved there). */
static char *real_path(const char *p)
{
#ifdef _WIN32
    char *r = _fullpath(NULL, p, 0);
#else
    char *r = realpath(p, NULL);
#endif
    if (!r)
        return NULL;
    char *g = g_strdup(r);
    free(r);
    return g;
}

char *svc_guard_resolve_inside(const char *dir, const char *candidate, GError **error)
{
    if (!dir || !*dir || !candidate || !*candidate) {
        refuse(error, SVC_GUARD_ERROR_PATH, "empty path");
        return NULL;
    }
    g_autofree char *rdir = real_path(dir);
    if (!rdir) {
        int e = errno;
        refuse(error, SVC_GUARD_ERROR_PATH, "%s: %s", dir, g_strerror(e));
        return NULL;
    }
    g_autofree char *full = g_path_is_absolute(candidate)
                                ? g_strdup(candidate)
                                : g_build_filename(dir, candidate, NULL);
    g_autofree char *res = real_path(full);
    if (!res && errno == ENOENT) {
        /* Not there yet (a file about to be written): resolve the parent. */
        g_autofree char *parent = g_path_get_dirname(full);
        g_autofree char *base = g_path_get_basename(full);
        g_autofree char *rparent = real_path(parent);
        if (rparent && strcmp(base, ".") && strcmp(base, "..") && strcmp(base, G_DIR_SEPARATOR_S))
            res = g_build_filename(rparent, base, NULL);
    }
    if (!res) {
        refuse(error, SVC_GUARD_ERROR_PATH, "%s: cannot resolve the path", candidate);
        return NULL;
    }
    size_t n = strlen(rdir);
    while (n > 1 && G_IS_DIR_SEPARATOR(rdir[n - 1]))
        n--; /* "/" stays "/" */
#ifdef _WIN32
    gboolean prefix = g_ascii_strncasecmp(res, rdir, n) == 0;
#else
    gboolean prefix = strncmp(res, rdir, n) == 0;
#endif
    gboolean root = n == 1 && G_IS_DIR_SEPARATOR(rdir[0]);
    gboolean inside = prefix && (root ? res[1] != '\0'
                                      : G_IS_DIR_SEPARATOR(res[n]) && res[n + 1] != '\0');
    if (!inside) {
        refuse(error, SVC_GUARD_ERROR_PATH, "%s: outside %s", candidate, dir);
        return NULL;
    }
    return g_steal_pointer(&res);
}

gboolean svc_guard_path_inside(const char *dir, const char *candidate, GError **error)
{
    g_autofree char *r = svc_guard_resolve_inside(dir, candidate, error);
    return r != NULL;
}

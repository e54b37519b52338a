/*
 * settings.c — service.json: defaults, the checked loader (every error names
 * the file and the JSON path), the atomic save, the redacting JSON view and
 * the all-or-nothing patch of the management API.
 *
 * Load and patch share one routine, apply_member(), which writes one
 * top-level member into a settings object after checking it; a patch works
 * on a copy and swaps it in only when every member passed.
 */
#include "settings.h"
#include "guard.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

G_DEFINE_QUARK(svc-settings-error-quark, svc_settings_error)

#define NAME_MAX_LEN    64
#define PATTERN_MAX_LEN 256
#define SECRET_MAX_LEN  4096
#define MODEL_MAX_LEN   4096

/* ---- errors ---- */

G_GNUC_PRINTF(4, 5)
static gboolean fail(GError **error, const char *source, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, SVC_SETTINGS_ERROR, SVC_SETTINGS_ERROR_INVALID, "%s: %s: %s", source,
                path, msg);
    return FALSE;
}

/* ---- typed getters: each checks the node and names `path` on error ---- */

static gboolean is_value(JsonNode *n, GType t)
{
    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == t;
}

static gboolean get_int(JsonNode *n, const char *src, const char *path, gint64 lo, gint64 hi,
                        gint64 *out, GError **error)
{
    gint64 v;
    if (is_value(n, G_TYPE_INT64)) {
        v = json_node_get_int(n);
    } else if (is_value(n, G_TYPE_DOUBLE)) {
        double d = json_node_get_double(n);
        /* 4.0 is an integer; 4.5 and 1e300 are not. */
        if (!(d >= -9.0e15 && d <= 9.0e15) || d != floor(d))
            return fail(error, src, path, "expected an integer from %" G_GINT64_FORMAT
                        " to %" G_GINT64_FORMAT, lo, hi);
        v = (gint64)d;
    } else {
        return fail(error, src, path, "expected an integer from %" G_GINT64_FORMAT
                    " to %" G_GINT64_FORMAT, lo, hi);
    }
    if (v < lo || v > hi)
        return fail(error, src, path, "%" G_GINT64_FORMAT " is out of range (%" G_GINT64_FORMAT
                    " to %" G_GINT64_FORMAT ")", v, lo, hi);
    *out = v;
    return TRUE;
}

static gboolean get_int32(JsonNode *n, const char *src, const char *path, int lo, int hi,
                          int *out, GError **error)
{
    gint64 v;
    if (!get_int(n, src, path, lo, hi, &v, error))
        return FALSE;
    *out = (int)v;
    return TRUE;
}

static gboolean get_bool(JsonNode *n, const char *src, const char *path, gboolean *out,
                         GError **error)
{
    if (!is_value(n, G_TYPE_BOOLEAN))
        return fail(error, src, path, "expected true or false");
    *out = json_node_get_boolean(n);
    return TRUE;
}

static gboolean get_price(JsonNode *n, const char *src, const char *path, double *out,
                          GError **error)
{
    double d;
    if (is_value(n, G_TYPE_INT64))
        d = (double)json_node_get_int(n);
    else if (is_value(n, G_TYPE_DOUBLE))
        d = json_node_get_double(n);
    else
        return fail(error, src, path, "expected a number");
    if (!isfinite(d) || d < 0 || d > 1e9)
        return fail(error, src, path, "expected a price from 0 to 1e9 USD per million tokens");
    *out = d;
    return TRUE;
}

/* No control characters (C0, DEL): they would end up in logs and headers. */
static gboolean text_ok(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return FALSE;
    return TRUE;
}

/* A string (or null when `nullable`) of 1..max bytes of valid UTF-8 without
 * control characters. *out gets a new copy (NULL for null). */
static gboolean get_string(JsonNode *n, const char *src, const char *path, gboolean nullable,
                           size_t max, char **out, GError **error)
{
    if (nullable && n && JSON_NODE_HOLDS_NULL(n)) {
        *out = NULL;
        return TRUE;
    }
    if (!is_value(n, G_TYPE_STRING))
        return fail(error, src, path, nullable ? "expected a string or null" : "expected a string");
    const char *s = json_node_get_string(n);
    size_t len = strlen(s);
    if (len == 0 || len > max)
        return fail(error, src, path, "expected 1 to %zu bytes, got %zu", max, len);
    if (!g_utf8_validate(s, -1, NULL) || !text_ok(s))
        return fail(error, src, path, "contains invalid UTF-8 or control characters");
    *out = g_strdup(s);
    return TRUE;
}

typedef gboolean (*item_check)(const char *item, GError **error);

/* An array of strings, each passing `check` (or plain text rules). */
static gboolean get_strv(JsonNode *n, const char *src, const char *path, item_check check,
                         char ***out, GError **error)
{
    if (!n || !JSON_NODE_HOLDS_ARRAY(n))
        return fail(error, src, path, "expected an array of strings");
    JsonArray *a = json_node_get_array(n);
    guint len = json_array_get_length(a);
    if (len > 1024)
        return fail(error, src, path, "more than 1024 entries");
    g_auto(GStrv) v = g_new0(char *, len + 1);
    for (guint i = 0; i < len; i++) {
        g_autofree char *ipath = g_strdup_printf("%s[%u]", path, i);
        if (!get_string(json_array_get_element(a, i), src, ipath, FALSE, PATTERN_MAX_LEN, &v[i],
                        error))
            return FALSE;
        g_autoptr(GError) why = NULL;
        if (check && !check(v[i], &why))
            return fail(error, src, ipath, "%s", why->message);
    }
    *out = g_steal_pointer(&v);
    return TRUE;
}

/* ---- upstreams ---- */

static void upstream_free(gpointer p)
{
    svc_upstream_cfg *u = p;
    if (!u)
        return;
    g_free(u->name);
    g_free(u->base_url);
    if (u->api_key)
        memset(u->api_key, 0, strlen(u->api_key)); /* do not leave it in freed memory */
    g_free(u->api_key);
    g_free(u->api_key_env);
    g_strfreev(u->models);
    g_free(u);
}

static svc_upstream_cfg *upstream_copy(const svc_upstream_cfg *u)
{
    svc_upstream_cfg *c = g_new0(svc_upstream_cfg, 1);
    c->name = g_strdup(u->name);
    c->base_url = g_strdup(u->base_url);
    c->api_key = g_strdup(u->api_key);
    c->api_key_env = g_strdup(u->api_key_env);
    c->models = g_strdupv(u->models);
    c->fallback = u->fallback;
    c->prices = u->prices;
    return c;
}

static gboolean name_ok(const char *s)
{
    size_t len = strlen(s);
    if (len < 1 || len > NAME_MAX_LEN)
        return FALSE;
    for (size_t i = 0; i < len; i++)
        if (!g_ascii_isalnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
            return FALSE;
    return TRUE;
}

static gboolean env_name_ok(const char *s)
{
    if (!(g_ascii_isalpha(s[0]) || s[0] == '_') || strlen(s) > 128)
        return FALSE;
    for (const char *p = s; *p; p++)
        if (!g_ascii_isalnum(*p) && *p != '_')
            return FALSE;
    return TRUE;
}

/* A key goes into an Authorization header: printable ASCII only, so it can
 * never inject a header line. */
static gboolean secret_ok(const char *s)
{
    for (const char *p = s; *p; p++)
        if (*p < 0x21 || *p > 0x7e)
            return FALSE;
    return *s != '\0';
}

static gboolean base_url_ok(const char *url, GError **error)
{
    g_autoptr(GUri) uri = g_uri_parse(url, G_URI_FLAGS_NONE, NULL);
    const char *scheme = uri ? g_uri_get_scheme(uri) : NULL;
    if (!uri || !scheme || (g_ascii_strcasecmp(scheme, "http") && g_ascii_strcasecmp(scheme, "https"))) {
        g_set_error(error, SVC_SETTINGS_ERROR, SVC_SETTINGS_ERROR_INVALID,
                    "expected an http:// or https:// URL");
        return FALSE;
    }
    if (!g_uri_get_host(uri) || !*g_uri_get_host(uri) || g_uri_get_userinfo(uri) ||
        g_uri_get_query(uri) || g_uri_get_fragment(uri)) {
        g_set_error(error, SVC_SETTINGS_ERROR, SVC_SETTINGS_ERROR_INVALID,
                    "expected a URL with a host and no user info, query or fragment "
                    "(put the key in api_key)");
        return FALSE;
    }
    return TRUE;
}

static gboolean pattern_ok(const char *s, GError **error)
{
    (void)s;
    (void)error;
    return TRUE; /* any text: get_string already bounded it */
}

/* Parses one upstream object. *key_given tells whether it named a key
 * (api_key or api_key_env, even null), for the patch's keep-the-key rule. */
static svc_upstream_cfg *parse_upstream(JsonNode *n, const char *src, const char *path,
                                    gboolean *key_given, GError **error)
{
    if (!n || !JSON_NODE_HOLDS_OBJECT(n)) {
        fail(error, src, path, "expected an object");
        return NULL;
    }
    JsonObject *o = json_node_get_object(n);
    svc_upstream_cfg *u = g_new0(svc_upstream_cfg, 1);
    u->models = g_new0(char *, 1);
    *key_given = FALSE;
    g_autoptr(GList) members = json_object_get_members(o);
    gboolean ok = TRUE;
    for (GList *l = members; ok && l; l = l->next) {
        const char *k = l->data;
        JsonNode *v = json_object_get_member(o, k);
        g_autofree char *p = g_strdup_printf("%s.%s", path, k);
        if (!strcmp(k, "name")) {
            g_free(u->name);
            u->name = NULL;
            ok = get_string(v, src, p, FALSE, NAME_MAX_LEN, &u->name, error);
            if (ok && (!name_ok(u->name) || !strcmp(u->name, "local")))
                ok = fail(error, src, p, "expected 1-64 of A-Z a-z 0-9 . _ - (not \"local\")");
        } else if (!strcmp(k, "base_url")) {
            g_free(u->base_url);
            u->base_url = NULL;
            ok = get_string(v, src, p, FALSE, 2048, &u->base_url, error);
            g_autoptr(GError) why = NULL;
            if (ok && !base_url_ok(u->base_url, &why))
                ok = fail(error, src, p, "%s", why->message);
        } else if (!strcmp(k, "api_key")) {
            *key_given = TRUE;
            g_free(u->api_key);
            u->api_key = NULL;
            ok = get_string(v, src, p, TRUE, SECRET_MAX_LEN, &u->api_key, error);
            if (ok && u->api_key && !secret_ok(u->api_key))
                ok = fail(error, src, p, "expected printable ASCII without spaces");
        } else if (!strcmp(k, "api_key_env")) {
            *key_given = TRUE;
            g_free(u->api_key_env);
            u->api_key_env = NULL;
            ok = get_string(v, src, p, TRUE, 128, &u->api_key_env, error);
            if (ok && u->api_key_env && !env_name_ok(u->api_key_env))
                ok = fail(error, src, p, "expected an environment variable name");
        } else if (!strcmp(k, "models")) {
            g_strfreev(u->models);
            u->models = NULL;
            ok = get_strv(v, src, p, pattern_ok, &u->models, error);
        } else if (!strcmp(k, "fallback")) {
            ok = get_bool(v, src, p, &u->fallback, error);
        } else if (!strcmp(k, "has_api_key")) {
            gboolean ignored;
            ok = get_bool(v, src, p, &ignored, error); /* our own output, sent back */
        } else if (!strcmp(k, "prices")) {
            if (!JSON_NODE_HOLDS_OBJECT(v)) {
                ok = fail(error, src, p, "expected an object");
                break;
            }
            JsonObject *po = json_node_get_object(v);
            g_autoptr(GList) pm = json_object_get_members(po);
            for (GList *m = pm; ok && m; m = m->next) {
                const char *pk = m->data;
                g_autofree char *pp = g_strdup_printf("%s.%s", p, pk);
                JsonNode *pv = json_object_get_member(po, pk);
                if (!strcmp(pk, "input_per_mtok"))
                    ok = get_price(pv, src, pp, &u->prices.input_per_mtok, error);
                else if (!strcmp(pk, "cached_input_per_mtok"))
                    ok = get_price(pv, src, pp, &u->prices.cached_input_per_mtok, error);
                else if (!strcmp(pk, "output_per_mtok"))
                    ok = get_price(pv, src, pp, &u->prices.output_per_mtok, error);
                else {
                    g_autofree char *esc = g_strescape(pk, NULL);
                    ok = fail(error, src, p, "unknown field \"%s\"", esc);
                }
            }
        } else {
            g_autofree char *esc = g_strescape(k, NULL);
            ok = fail(error, src, path, "unknown field \"%s\"", esc);
        }
    }
    if (ok && !u->name)
        ok = fail(error, src, path, "missing \"name\"");
    if (ok && !u->base_url)
        ok = fail(error, src, path, "missing \"base_url\"");
    if (ok && u->api_key && u->api_key_env)
        ok = fail(error, src, path, "set api_key or api_key_env, not both");
    if (!ok) {
        upstream_free(u);
        return NULL;
    }
    return u;
}

static const svc_upstream_cfg *find_upstream(GPtrArray *list, const char *name)
{
    for (guint i = 0; list && i < list->len; i++) {
        const svc_upstream_cfg *u = g_ptr_array_index(list, i);
        if (!strcmp(u->name, name))
            return u;
    }
    return NULL;
}

/* `old` (may be NULL) supplies keys for upstreams that name none. */
static GPtrArray *parse_upstreams(JsonNode *n, const char *src, GPtrArray *old, GError **error)
{
    if (!n || !JSON_NODE_HOLDS_ARRAY(n)) {
        fail(error, src, "upstreams", "expected an array of objects");
        return NULL;
    }
    JsonArray *a = json_node_get_array(n);
    g_autoptr(GPtrArray) list = g_ptr_array_new_with_free_func(upstream_free);
    for (guint i = 0; i < json_array_get_length(a); i++) {
        g_autofree char *p = g_strdup_printf("upstreams[%u]", i);
        gboolean key_given;
        svc_upstream_cfg *u = parse_upstream(json_array_get_element(a, i), src, p, &key_given, error);
        if (!u)
            return NULL;
        g_ptr_array_add(list, u);
        if (find_upstream(list, u->name) != u) {
            fail(error, src, p, "the name \"%s\" is used twice", u->name);
            return NULL;
        }
        const svc_upstream_cfg *prev = key_given ? NULL : find_upstream(old, u->name);
        if (prev) {
            u->api_key = g_strdup(prev->api_key);
            u->api_key_env = g_strdup(prev->api_key_env);
        }
    }
    return g_steal_pointer(&list);
}

/* ---- the settings object ---- */

svc_settings *svc_settings_new(void)
{
    svc_settings *s = g_new0(svc_settings, 1);
    s->host = g_strdup("127.0.0.1");
    s->port = SVC_SETTINGS_DEFAULT_PORT;
    s->n_parallel = 4;
    s->queue_max = 64;
    s->request_timeout_s = 600;
    s->max_body_bytes = 10 * 1024 * 1024;
    s->allowed_hosts = g_new0(char *, 1);
    s->cors_origins = g_new0(char *, 1);
    s->upstreams = g_ptr_array_new_with_free_func(upstream_free);
    s->data_sensitivity = SVC_DATA_SENSITIVITY_NORMAL;
    return s;
}

static void settings_clear(svc_settings *s)
{
    g_free(s->host);
    g_free(s->model);
    g_strfreev(s->allowed_hosts);
    g_strfreev(s->cors_origins);
    if (s->upstreams)
        g_ptr_array_unref(s->upstreams);
}

void svc_settings_free(svc_settings *s)
{
    if (!s)
        return;
    settings_clear(s);
    g_free(s);
}

svc_settings *svc_settings_copy(const svc_settings *s)
{
    svc_settings *c = g_new0(svc_settings, 1);
    *c = *s;
    c->host = g_strdup(s->host);
    c->model = g_strdup(s->model);
    c->allowed_hosts = g_strdupv(s->allowed_hosts);
    c->cors_origins = g_strdupv(s->cors_origins);
    c->upstreams = g_ptr_array_new_with_free_func(upstream_free);
    for (guint i = 0; i < s->upstreams->len; i++)
        g_ptr_array_add(c->upstreams, upstream_copy(g_ptr_array_index(s->upstreams, i)));
    return c;
}

static gboolean host_name_check(const char *s, GError **error)
{
    return svc_guard_host_name_valid(s, error);
}

static gboolean origin_check(const char *s, GError **error)
{
    return svc_guard_origin_valid(s, error);
}

/* Checks one top-level member and stores it in s. */
static gboolean apply_member(svc_settings *s, const char *k, JsonNode *v, const char *src,
                             GError **error)
{
    if (!strcmp(k, "host")) {
        char *h;
        if (!get_string(v, src, k, FALSE, 255, &h, error))
            return FALSE;
        g_autoptr(GError) why = NULL;
        if (!svc_guard_host_name_valid(h, &why)) {
            g_free(h);
            return fail(error, src, k, "%s", why->message);
        }
        g_free(s->host);
        s->host = h;
        return TRUE;
    }
    if (!strcmp(k, "port"))
        return get_int32(v, src, k, 0, 65535, &s->port, error);
    if (!strcmp(k, "model")) {
        char *m;
        if (!get_string(v, src, k, TRUE, MODEL_MAX_LEN, &m, error))
            return FALSE;
        g_free(s->model);
        s->model = m;
        return TRUE;
    }
    if (!strcmp(k, "n_parallel"))
        return get_int32(v, src, k, 1, 64, &s->n_parallel, error);
    if (!strcmp(k, "n_ctx"))
        return get_int32(v, src, k, 0, 1 << 20, &s->n_ctx, error);
    if (!strcmp(k, "n_threads"))
        return get_int32(v, src, k, 0, 1024, &s->n_threads, error);
    if (!strcmp(k, "queue_max"))
        return get_int32(v, src, k, 1, 65536, &s->queue_max, error);
    if (!strcmp(k, "request_timeout_s"))
        return get_int32(v, src, k, 1, 86400, &s->request_timeout_s, error);
    if (!strcmp(k, "idle_unload_s"))
        return get_int32(v, src, k, 0, 30 * 86400, &s->idle_unload_s, error);
    if (!strcmp(k, "max_body_bytes"))
        return get_int(v, src, k, 1024, (gint64)1 << 30, &s->max_body_bytes, error);
    if (!strcmp(k, "allowed_hosts") || !strcmp(k, "cors_origins")) {
        gboolean hosts = k[0] == 'a';
        char **list;
        if (!get_strv(v, src, k, hosts ? host_name_check : origin_check, &list, error))
            return FALSE;
        char ***dst = hosts ? &s->allowed_hosts : &s->cors_origins;
        g_strfreev(*dst);
        *dst = list;
        return TRUE;
    }
    if (!strcmp(k, "upstreams")) {
        GPtrArray *list = parse_upstreams(v, src, s->upstreams, error);
        if (!list)
            return FALSE;
        g_ptr_array_unref(s->upstreams);
        s->upstreams = list;
        return TRUE;
    }
    if (!strcmp(k, "data_sensitivity")) {
        const char *d = is_value(v, G_TYPE_STRING) ? json_node_get_string(v) : NULL;
        if (d && !strcmp(d, "normal"))
            s->data_sensitivity = SVC_DATA_SENSITIVITY_NORMAL;
        else if (d && !strcmp(d, "low"))
            s->data_sensitivity = SVC_DATA_SENSITIVITY_LOW;
        else if (d && !strcmp(d, "high"))
            s->data_sensitivity = SVC_DATA_SENSITIVITY_HIGH;
        else
            return fail(error, src, k, "expected \"low\", \"normal\" or \"high\"");
        return TRUE;
    }
    g_autofree char *esc = g_strescape(k, NULL);
    g_set_error(error, SVC_SETTINGS_ERROR, SVC_SETTINGS_ERROR_INVALID, "%s: unknown field \"%s\"",
                src, esc);
    return FALSE;
}

static gboolean apply_object(svc_settings *s, JsonNode *root, const char *src, GError **error)
{
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, SVC_SETTINGS_ERROR, SVC_SETTINGS_ERROR_INVALID,
                    "%s: expected a JSON object at the top level", src);
        return FALSE;
    }
    JsonObject *o = json_node_get_object(root);
    g_autoptr(GList) members = json_object_get_members(o);
    for (GList *l = members; l; l = l->next)
        if (!apply_member(s, l->data, json_object_get_member(o, l->data), src, error))
            return FALSE;
    return TRUE;
}

svc_settings *svc_settings_load_from_data(const char *data, gssize len, const char *source,
                                          GError **error)
{
    g_return_val_if_fail(data != NULL, NULL);
    const char *src = source ? source : "settings";
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(GError) perr = NULL;
    if (!json_parser_load_from_data(parser, data, len, &perr)) {
        g_set_error(error, SVC_SETTINGS_ERROR, SVC_SETTINGS_ERROR_PARSE, "%s: not valid JSON: %s",
                    src, perr->message);
        return NULL;
    }
    svc_settings *s = svc_settings_new();
    if (!apply_object(s, json_parser_get_root(parser), src, error)) {
        svc_settings_free(s);
        return NULL;
    }
    return s;
}

char *svc_settings_default_path(void)
{
    const char *env = g_getenv("MOEDESK_CONFIG_DIR");
    if (env && env[0])
        return g_build_filename(env, "service.json", NULL);
    return g_build_filename(g_get_user_config_dir(), "moedesk", "service.json", NULL);
}

svc_settings *svc_settings_load(const char *path, GError **error)
{
    g_autofree char *def = path ? NULL : svc_settings_default_path();
    const char *file = path ? path : def;
    g_autofree char *base = g_path_get_basename(file);
    g_autofree char *data = NULL;
    gsize len = 0;
    g_autoptr(GError) rerr = NULL;
    if (!g_file_get_contents(file, &data, &len, &rerr)) {
        if (g_error_matches(rerr, G_FILE_ERROR, G_FILE_ERROR_NOENT))
            return svc_settings_new();
        g_set_error(error, SVC_SETTINGS_ERROR, SVC_SETTINGS_ERROR_READ, "%s: %s", file,
                    rerr->message);
        return NULL;
    }
    if (len > SVC_SETTINGS_FILE_MAX_BYTES) {
        g_set_error(error, SVC_SETTINGS_ERROR, SVC_SETTINGS_ERROR_READ,
                    "%s: %" G_GSIZE_FORMAT " bytes is over the %d-byte limit", file, len,
                    SVC_SETTINGS_FILE_MAX_BYTES);
        return NULL;
    }
    return svc_settings_load_from_data(data, (gssize)len, base, error);
}

gboolean svc_settings_patch(svc_settings *s, JsonObject *patch, GError **error)
{
    g_return_val_if_fail(s != NULL && patch != NULL, FALSE);
    /* Work on a copy so a bad member anywhere leaves `s` untouched. */
    svc_settings *c = svc_settings_copy(s);
    g_autoptr(GList) members = json_object_get_members(patch);
    for (GList *l = members; l; l = l->next) {
        if (!apply_member(c, l->data, json_object_get_member(patch, l->data), "patch", error)) {
            svc_settings_free(c);
            return FALSE;
        }
    }
    settings_clear(s);
    *s = *c;
    g_free(c);
    return TRUE;
}

const char *svc_data_sensitivity_name(svc_data_sensitivity d)
{
    switch (d) {
    case SVC_DATA_SENSITIVITY_LOW:
        return "low";
    case SVC_DATA_SENSITIVITY_HIGH:
        return "high";
    default:
        return "normal";
    }
}

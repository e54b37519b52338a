/*
 * settings-write.c — the settings going out: the JSON view (redacting
 * upstream keys for the management API), the atomic 0600 save, and the
 * lookups the server makes per request (an upstream's key, which upstream
 * a model name routes to, the fallback).
 */
#include "settings.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

static void add_strv(JsonBuilder *b, const char *key, char **v)
{
    json_builder_set_member_name(b, key);
    json_builder_begin_array(b);
    for (char **p = v; p && *p; p++)
        json_builder_add_string_value(b, *p);
    json_builder_end_array(b);
}

static void add_upstream(JsonBuilder *b, const svc_upstream_cfg *u, gboolean redact)
{
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, u->name);
    json_builder_set_member_name(b, "base_url");
    json_builder_add_string_value(b, u->base_url);
    if (redact) {
        /* The key itself never leaves through this path. */
        json_builder_set_member_name(b, "has_api_key");
        json_builder_add_boolean_value(b, svc_upstream_get_api_key(u) != NULL);
    } else if (u->api_key) {
        json_builder_set_member_name(b, "api_key");
        json_builder_add_string_value(b, u->api_key);
    }
    if (u->api_key_env) {
        json_builder_set_member_name(b, "api_key_env");
        json_builder_add_string_value(b, u->api_key_env);
    }
    add_strv(b, "models", u->models);
    json_builder_set_member_name(b, "fallback");
    json_builder_add_boolean_value(b, u->fallback);
    json_builder_set_member_name(b, "prices");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "input_per_mtok");
    json_builder_add_double_value(b, u->prices.input_per_mtok);
    json_builder_set_member_name(b, "cached_input_per_mtok");
    json_builder_add_double_value(b, u->prices.cached_input_per_mtok);
    json_builder_set_member_name(b, "output_per_mtok");
    json_builder_add_double_value(b, u->prices.output_per_mtok);
    json_builder_end_object(b);
    json_builder_end_object(b);
}

static void add_int(JsonBuilder *b, const char *key, gint64 v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_int_value(b, v);
}

JsonNode *svc_settings_to_json(const svc_settings *s, gboolean redact_secrets)
{
    g_return_val_if_fail(s != NULL, NULL);
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "host");
    json_builder_add_string_value(b, s->host);
    add_int(b, "port", s->port);
    json_builder_set_member_name(b, "model");
    if (s->model)
        json_builder_add_string_value(b, s->model);
    else
        json_builder_add_null_value(b);
    add_int(b, "n_parallel", s->n_parallel);
    add_int(b, "n_ctx", s->n_ctx);
    add_int(b, "n_threads", s->n_threads);
    add_int(b, "queue_max", s->queue_max);
    add_int(b, "request_timeout_s", s->request_timeout_s);
    add_int(b, "idle_unload_s", s->idle_unload_s);
    add_int(b, "max_body_bytes", s->max_body_bytes);
    add_strv(b, "allowed_hosts", s->allowed_hosts);
    add_strv(b, "cors_origins", s->cors_origins);
    json_builder_set_member_name(b, "upstreams");
    json_builder_begin_array(b);
    for (guint i = 0; i < s->upstreams->len; i++)
        add_upstream(b, g_ptr_array_index(s->upstreams, i), redact_secrets);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "data_sensitivity");
    json_builder_add_string_value(b, svc_data_sensitivity_name(s->data_sensitivity));
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

gboolean svc_settings_save(const svc_settings *s, const char *path, GError **error)
{
    g_return_val_if_fail(s != NULL, FALSE);
    g_autofree char *def = path ? NULL : svc_settings_default_path();
    const char *file = path ? path : def;
    g_autofree char *dir = g_path_get_dirname(file);
    if (g_mkdir_with_parents(dir, 0700) != 0) {
        int e = errno;
        g_set_error(error, SVC_SETTINGS_ERROR, SVC_SETTINGS_ERROR_WRITE, "%s: %s", dir,
                    g_strerror(e));
        return FALSE;
    }
    g_autoptr(JsonNode) root = svc_settings_to_json(s, FALSE);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_pretty(gen, TRUE);
    json_generator_set_root(gen, root);
    gsize len = 0;
    g_autofree char *text = json_generator_to_data(gen, &len);
    g_autoptr(GError) werr = NULL;
    /* Temporary file + fsync + rename: a crash leaves the old or the new
     * file, never half of one. 0600: the file may hold upstream keys. */
    gboolean ok = g_file_set_contents_full(file, text, (gssize)len,
                                           G_FILE_SET_CONTENTS_CONSISTENT, 0600, &werr);
    memset(text, 0, len);
    if (!ok) {
        g_set_error(error, SVC_SETTINGS_ERROR, SVC_SETTINGS_ERROR_WRITE, "%s: %s", file,
                    werr->message);
        return FALSE;
    }
    return TRUE;
}

const char *svc_upstream_get_api_key(const svc_upstream_cfg *u)
{
    g_return_val_if_fail(u != NULL, NULL);
    if (u->api_key)
        return u->api_key;
    if (!u->api_key_env)
        return NULL;
    const char *v = g_getenv(u->api_key_env);
    if (!v || !*v)
        return NULL;
    /* Same rule as a key in the file: printable ASCII, so the environment
     * cannot inject a header line either. */
    for (const char *p = v; *p; p++)
        if (*p < 0x21 || *p > 0x7e)
            return NULL;
    return v;
}

const svc_upstream_cfg *svc_settings_route_model(const svc_settings *s, const char *model)
{
    g_return_val_if_fail(s != NULL, NULL);
    if (!model || s->data_sensitivity == SVC_DATA_SENSITIVITY_HIGH)
        return NULL;
    for (guint i = 0; i < s->upstreams->len; i++) {
        const svc_upstream_cfg *u = g_ptr_array_index(s->upstreams, i);
        for (char **p = u->models; p && *p; p++)
            if (g_pattern_match_simple(*p, model))
                return u;
    }
    return NULL;
}

const svc_upstream_cfg *svc_settings_fallback_upstream(const svc_settings *s)
{
    g_return_val_if_fail(s != NULL, NULL);
    if (s->data_sensitivity == SVC_DATA_SENSITIVITY_HIGH)
        return NULL;
    for (guint i = 0; i < s->upstreams->len; i++) {
        const svc_upstream_cfg *u = g_ptr_array_index(s->upstreams, i);
        if (u->fallback)
            return u;
    }
    return NULL;
}

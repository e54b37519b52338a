/*
 * api-admin.c — the management API's settings and API-key routes:
 *
 *   GET   /moedesk/v1/settings        the settings, upstream keys redacted
 *   PATCH /moedesk/v1/settings        validate all, save service.json, apply
 *   GET   /moedesk/v1/keys            names and times (never a key or hash)
 *   POST  /moedesk/v1/keys {"name"}   a new key, shown once
 *   DELETE /moedesk/v1/keys/{name}    revoke
 *
 * These change who may use the service and where requests go, so they are
 * answered only to callers on this machine (loopback peers), whatever key
 * a remote caller holds. Settings that the running service can take at
 * once (allowed hosts, CORS origins, upstreams, timeouts, body limit, idle
 * unload, data sensitivity) apply at once; the others (address, port,
 * model, slots, context, threads, queue) are saved and listed in
 * "restart_required".
 */
#include "api.h"
#include "keys.h"
#include "server.h"
#include "settings.h"

#include <string.h>

static gboolean local_only(svc_call *call)
{
    if (svc_call_from_loopback(call))
        return TRUE;
    svc_call_reply_error(call, 403, "permission_error", NULL, "local_only",
                         "settings and API keys can only be managed from this machine");
    return FALSE;
}

static JsonNode *settings_reply(const svc_settings *st, GPtrArray *restart)
{
    JsonNode *n = svc_settings_to_json(st, TRUE);
    if (restart) {
        JsonArray *a = json_array_new();
        for (guint i = 0; i < restart->len; i++)
            json_array_add_string_element(a, g_ptr_array_index(restart, i));
        json_object_set_array_member(json_node_get_object(n), "restart_required", a);
    }
    return n;
}

static void route_settings_get(svc_call *call)
{
    if (!local_only(call))
        return;
    svc_server *srv = svc_call_server(call);
    GError *e = NULL;
    svc_settings *st = svc_settings_load(svc_server_settings_path(srv), &e);
    if (!st) {
        svc_call_reply_error(call, 500, "server_error", NULL, "settings_unreadable", "%s",
                             e->message);
        g_error_free(e);
        return;
    }
    svc_call_reply_json(call, 200, settings_reply(st, NULL));
    svc_settings_free(st);
}

static void note_restart(GPtrArray *r, gboolean changed, const char *field)
{
    if (changed)
        g_ptr_array_add(r, (gpointer)field);
}

static void route_settings_patch(svc_call *call)
{
    if (!local_only(call))
        return;
    svc_server *srv = svc_call_server(call);
    gsize len;
    const char *body = svc_call_body(call, &len);
    GError *e = NULL;
    JsonNode *patch = svc_json_parse(body, (gssize)len, &e);
    if (!patch || !JSON_NODE_HOLDS_OBJECT(patch)) {
        svc_call_reply_error(call, 400, "invalid_request_error", NULL, NULL,
                             "the body must be a JSON object of settings to change%s%s",
                             e ? ": " : "", e ? e->message : "");
        g_clear_error(&e);
        if (patch)
            json_node_unref(patch);
        return;
    }
    svc_settings *st = svc_settings_load(svc_server_settings_path(srv), &e);
    svc_settings *before = st ? svc_settings_copy(st) : NULL;
    if (!st || !svc_settings_patch(st, json_node_get_object(patch), &e)) {
        svc_call_reply_error(call, st ? 400 : 500, st ? "invalid_request_error" : "server_error",
                             NULL, st ? "invalid_setting" : "settings_unreadable", "%s", e->message);
        g_error_free(e);
        svc_settings_free(st);
        svc_settings_free(before);
        json_node_unref(patch);
        return;
    }
    json_node_unref(patch);
    if (!svc_settings_save(st, svc_server_settings_path(srv), &e)) {
        svc_call_reply_error(call, 500, "server_error", NULL, "settings_not_saved", "%s",
                             e->message);
        g_error_free(e);
        svc_settings_free(st);
        svc_settings_free(before);
        return;
    }
    svc_server_apply_settings(srv, st);
    GPtrArray *restart = g_ptr_array_new();
    note_restart(restart, g_strcmp0(before->host, st->host) != 0, "host");
    note_restart(restart, before->port != st->port, "port");
    note_restart(restart, g_strcmp0(before->model, st->model) != 0, "model");
    note_restart(restart, before->n_parallel != st->n_parallel, "n_parallel");
    note_restart(restart, before->n_ctx != st->n_ctx, "n_ctx");
    note_restart(restart, before->n_threads != st->n_threads, "n_threads");
    note_restart(restart, before->queue_max != st->queue_max, "queue_max");
    svc_call_reply_json(call, 200, settings_reply(st, restart));
    g_ptr_array_unref(restart);
    svc_settings_free(st);
    svc_settings_free(before);
}

static void route_keys_get(svc_call *call)
{
    if (!local_only(call))
        return;
    svc_server *srv = svc_call_server(call);
    GError *e = NULL;
    GPtrArray *keys = svc_keys_list(svc_server_keys(srv), &e);
    if (!keys) {
        svc_call_reply_gerror(call, e);
        g_error_free(e);
        return;
    }
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "keys");
    json_builder_begin_array(b);
    for (guint i = 0; i < keys->len; i++) {
        const svc_key_info *k = g_ptr_array_index(keys, i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, k->name);
        json_builder_set_member_name(b, "created");
        json_builder_add_int_value(b, k->created);
        json_builder_set_member_name(b, "revoked_at");
        if (k->revoked_at)
            json_builder_add_int_value(b, k->revoked_at);
        else
            json_builder_add_null_value(b);
        json_builder_set_member_name(b, "last_used");
        if (k->last_used)
            json_builder_add_int_value(b, k->last_used);
        else
            json_builder_add_null_value(b);
        json_builder_set_member_name(b, "active");
        json_builder_add_boolean_value(b, k->revoked_at == 0);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    svc_call_reply_json(call, 200, json_builder_get_root(b));
    g_object_unref(b);
    g_ptr_array_unref(keys);
}

static void route_keys_post(svc_call *call)
{
    if (!local_only(call))
        return;
    svc_server *srv = svc_call_server(call);
    gsize len;
    const char *body = svc_call_body(call, &len);
    JsonNode *n = svc_json_parse(body, (gssize)len, NULL);
    const char *name = NULL;
    if (n && JSON_NODE_HOLDS_OBJECT(n)) {
        JsonNode *v = json_object_get_member(json_node_get_object(n), "name");
        if (v && JSON_NODE_HOLDS_VALUE(v) && json_node_get_value_type(v) == G_TYPE_STRING)
            name = json_node_get_string(v);
    }
    if (!name) {
        svc_call_reply_error(call, 400, "invalid_request_error", "name", NULL,
                             "the body must be {\"name\": \"...\"}: the key's name");
        if (n)
            json_node_unref(n);
        return;
    }
    GError *e = NULL;
    char *key = svc_keys_create(svc_server_keys(srv), name, &e);
    if (!key) {
        guint status = g_error_matches(e, SVC_KEYS_ERROR, SVC_KEYS_ERROR_EXISTS) ? 409
                       : g_error_matches(e, SVC_KEYS_ERROR, SVC_KEYS_ERROR_NAME) ? 400
                                                                                 : 500;
        svc_call_reply_error(call, status, status == 500 ? "server_error" : "invalid_request_error",
                             "name", status == 409 ? "key_exists" : NULL, "%s", e->message);
        g_error_free(e);
        json_node_unref(n);
        return;
    }
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, name);
    json_builder_set_member_name(b, "key");
    json_builder_add_string_value(b, key);
    json_builder_set_member_name(b, "note");
    json_builder_add_string_value(b, "the key is shown only once: store it now");
    json_builder_end_object(b);
    svc_call_reply_json(call, 201, json_builder_get_root(b));
    g_object_unref(b);
    memset(key, 0, strlen(key));
    g_free(key);
    json_node_unref(n);
}

static void route_keys_delete(svc_call *call)
{
    if (!local_only(call))
        return;
    svc_server *srv = svc_call_server(call);
    const char *name = svc_call_path(call) + strlen("/moedesk/v1/keys/");
    GError *e = NULL;
    if (!svc_keys_revoke(svc_server_keys(srv), name, &e)) {
        guint status = g_error_matches(e, SVC_KEYS_ERROR, SVC_KEYS_ERROR_NOT_FOUND) ? 404 : 400;
        svc_call_reply_error(call, status, "invalid_request_error", "name",
                             status == 404 ? "key_not_found" : NULL, "%s", e->message);
        g_error_free(e);
        return;
    }
    svc_call_reply_text(call, 204, "application/json", "", 0);
}

void svc_admin_register(svc_server *srv)
{
    svc_server_add_route(srv, "GET", "/moedesk/v1/settings", 0, SVC_STYLE_OPENAI,
                         route_settings_get);
    svc_server_add_route(srv, "PATCH", "/moedesk/v1/settings", 0, SVC_STYLE_OPENAI,
                         route_settings_patch);
    svc_server_add_route(srv, "GET", "/moedesk/v1/keys", 0, SVC_STYLE_OPENAI, route_keys_get);
    svc_server_add_route(srv, "POST", "/moedesk/v1/keys", 0, SVC_STYLE_OPENAI, route_keys_post);
    svc_server_add_route(srv, "DELETE", "/moedesk/v1/keys/", SVC_ROUTE_PREFIX, SVC_STYLE_OPENAI,
                         route_keys_delete);
}

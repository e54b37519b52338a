/*
 * server.c — moedesk-service's HTTP front: one libsoup server, the checks
 * every request passes before any handler sees it, routing, and start-up
 * and shutdown.
 *
 * Checks, in order (a refused request never reaches a handler, and on a
 * metered route it still gets its usage row):
 *   1. Host must be a loopback name/address or a configured name — a web
 *      page that rebinds its DNS name to 127.0.0.1 cannot talk to us
 *      (Ollama's CVE-2024-28224).
 *   2. A request carrying an Origin must come from a configured origin (a
 *      page in the user's browser cannot drive the service, not even with
 *      "simple" requests that skip the CORS preflight); configured origins
 *      get CORS headers and their preflights are answered.
 *   3. API key: optional on loopback while the service only listens there;
 *      a key that is sent must be valid; beyond loopback a key is required.
 *   4. Body size: Content-Length over the limit gets 413 before the body is
 *      read; a chunked body that grows past it has its connection closed.
 *   5. Slow clients: headers and body must arrive within header_timeout_ms,
 *      else the connection is closed (slow-loris).
 */
#include "svc-private.h"

#include "guard.h"
#include "keys.h"
#include "metrics.h"

#include <string.h>

#define DEFAULT_MAX_BODY (10u << 20)
#define DEFAULT_HEADER_TIMEOUT_MS 30000
#define SVC_LISTEN_BACKLOG 256 /* pending connections (Linux caps it at somaxconn) */

void svc_server_options_init(svc_server_options *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 11435;
    o->n_parallel = 4;
    o->queue_max = 64;
    o->header_timeout_ms = DEFAULT_HEADER_TIMEOUT_MS;
}

const char *svc_server_version(void)
{
    return MOEDESK_VERSION;
}

gint64 svc_server_started_us(svc_server *srv)
{
    return srv->started_us;
}

static gboolean peer_is_loopback(SoupServerMessage *msg);

const char *svc_server_settings_path(svc_server *srv)
{
    return srv->settings_path;
}

struct svc_keys *svc_server_keys(svc_server *srv)
{
    return srv->keys;
}

gint64 svc_server_request_timeout_ms(svc_server *srv)
{
    return srv->request_timeout_ms;
}

usage_store *svc_server_usage(svc_server *srv)
{
    return srv->usage;
}

guint16 svc_server_port(svc_server *srv)
{
    return srv->port;
}

void svc_server_set_data(svc_server *srv, const char *key, gpointer data, GDestroyNotify destroy)
{
    g_datalist_set_data_full(&srv->module_data, key, data, destroy);
}

gpointer svc_server_get_data(svc_server *srv, const char *key)
{
    return g_datalist_get_data(&srv->module_data, key);
}

void svc_server_add_stop_hook(svc_server *srv, svc_stop_hook fn, gpointer data)
{
    svc_stop_hook_entry e = {fn, data};
    g_array_append_val(srv->stop_hooks, e);
}

void svc_server_add_route(svc_server *srv, const char *method, const char *path,
                          svc_route_flags flags, svc_err_style style, svc_handler fn)
{
    for (guint i = 0; i < srv->routes->len; i++) {
        svc_route *r = g_ptr_array_index(srv->routes, i);
        if (!strcmp(r->method, method) && !strcmp(r->path, path)) {
            r->flags = flags;
            r->style = style;
            r->fn = fn;
            return;
        }
    }
    svc_route *r = g_new0(svc_route, 1);
    r->method = g_strdup(method);
    r->path = g_strdup(path);
    r->flags = flags;
    r->style = style;
    r->fn = fn;
    g_ptr_array_add(srv->routes, r);
}

static void route_free(gpointer p)
{
    svc_route *r = p;
    g_free(r->method);
    g_free(r->path);
    g_free(r);
}

/* Exact match first, then the longest prefix route. `*path_known` says
 * whether some route has this path (405 vs 404). */
static const svc_route *route_find(svc_server *srv, const char *method, const char *path,
                                   gboolean *path_known)
{
    const svc_route *best = NULL;
    size_t best_len = 0;
    *path_known = FALSE;
    for (guint i = 0; i < srv->routes->len; i++) {
        const svc_route *r = g_ptr_array_index(srv->routes, i);
        gboolean match;
        if (r->flags & SVC_ROUTE_PREFIX)
            match = g_str_has_prefix(path, r->path);
        else
            match = !strcmp(path, r->path);
        if (!match)
            continue;
        *path_known = TRUE;
        if (strcmp(r->method, method))
            continue;
        size_t len = strlen(r->path);
        if (!(r->flags & SVC_ROUTE_PREFIX))
            return r;
        if (len > best_len) {
            best = r;
            best_len = len;
        }
    }
    return best;
}

/* ---- checks ----------------------------------------------------------------- */

gboolean svc_call_from_loopback(svc_call *call)
{
    return peer_is_loopback(svc_call_msg(call));
}

static gboolean peer_is_loopback(SoupServerMessage *msg)
{
    GSocketAddress *sa = soup_server_message_get_remote_address(msg);
    if (!G_IS_INET_SOCKET_ADDRESS(sa))
        return FALSE;
    GInetAddress *a = g_inet_socket_address_get_address(G_INET_SOCKET_ADDRESS(sa));
    return g_inet_address_get_is_loopback(a);
}

static void refuse(SoupServerMessage *msg, guint status, const char *code, const char *message)
{
    char *esc = g_strescape(message, NULL);
    char *body = g_strdup_printf(
        "{\"error\":{\"message\":\"%s\",\"type\":\"invalid_request_error\",\"param\":null,"
        "\"code\":\"%s\"}}",
        esc, code);
    soup_server_message_set_status(msg, status, NULL);
    soup_server_message_set_response(msg, "application/json", SOUP_MEMORY_TAKE, body,
                                     strlen(body));
    g_free(esc);
}

/* ---- slow clients and big bodies -------------------------------------------- */

static gboolean slow_client_timeout(gpointer data)
{
    SoupServerMessage *msg = data;
    g_object_set_data(G_OBJECT(msg), "svc-slow-timer", NULL);
    GSocket *sock = soup_server_message_get_socket(msg);
    g_message("closing a connection that did not send its request in time");
    if (sock)
        g_socket_shutdown(sock, TRUE, TRUE, NULL);
    return G_SOURCE_REMOVE;
}

static void slow_timer_remove(SoupServerMessage *msg)
{
    guint id = GPOINTER_TO_UINT(g_object_get_data(G_OBJECT(msg), "svc-slow-timer"));
    if (id) {
        g_source_remove(id);
        g_object_set_data(G_OBJECT(msg), "svc-slow-timer", NULL);
    }
}

static void on_request_started(SoupServer *soup, SoupServerMessage *msg, gpointer data)
{
    (void)soup;
    svc_server *srv = data;
    guint id = g_timeout_add_full(G_PRIORITY_DEFAULT, (guint)srv->header_timeout_ms,
                                  slow_client_timeout, g_object_ref(msg), g_object_unref);
    g_object_set_data(G_OBJECT(msg), "svc-slow-timer", GUINT_TO_POINTER(id));
}

static void on_got_chunk(SoupServerMessage *msg, GBytes *chunk, gpointer data)
{
    svc_server *srv = data;
    gsize seen = GPOINTER_TO_SIZE(g_object_get_data(G_OBJECT(msg), "svc-body-seen"));
    seen += g_bytes_get_size(chunk);
    g_object_set_data(G_OBJECT(msg), "svc-body-seen", GSIZE_TO_POINTER(seen));
    if (seen > srv->max_body_bytes) {
        GSocket *sock = soup_server_message_get_socket(msg);
        if (sock)
            g_socket_shutdown(sock, TRUE, TRUE, NULL);
    }
}

static void early_handler(SoupServer *soup, SoupServerMessage *msg, const char *path,
                          GHashTable *query, gpointer data)
{
    (void)soup;
    (void)path;
    (void)query;
    svc_server *srv = data;
    SoupMessageHeaders *h = soup_server_message_get_request_headers(msg);
    if (soup_message_headers_get_encoding(h) == SOUP_ENCODING_CONTENT_LENGTH &&
        (guint64)soup_message_headers_get_content_length(h) > srv->max_body_bytes) {
        char *m = g_strdup_printf("the request body (%" G_GUINT64_FORMAT
                                  " bytes) is over the limit of %" G_GSIZE_FORMAT " bytes",
                                  (guint64)soup_message_headers_get_content_length(h),
                                  srv->max_body_bytes);
        refuse(msg, 413, "request_too_large", m);
        g_free(m);
        soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Connection",
                                     "close");
        return;
    }
    g_signal_connect(msg, "got-chunk", G_CALLBACK(on_got_chunk), srv);
}

/* ---- dispatch ------------------------------------------------------------------ */

static void on_call_done(svc_server *srv, SoupServerMessage *msg, gboolean aborted)
{
    slow_timer_remove(msg);
    svc_call *call = g_object_get_data(G_OBJECT(msg), "svc-call");
    if (!call)
        return;
    svc_call_finished(call, aborted);
    g_object_set_data(G_OBJECT(msg), "svc-call", NULL);
    if (g_hash_table_remove(srv->calls, call))
        svc_call_unref(call);
}

static void on_request_finished(SoupServer *soup, SoupServerMessage *msg, gpointer data)
{
    (void)soup;
    on_call_done(data, msg, FALSE);
}

static void on_request_aborted(SoupServer *soup, SoupServerMessage *msg, gpointer data)
{
    (void)soup;
    on_call_done(data, msg, TRUE);
}

static void on_msg_disconnected(SoupServerMessage *msg, gpointer data)
{
    svc_call *call = g_object_get_data(G_OBJECT(msg), "svc-call");
    (void)data;
    if (call && !call->finished && (call->paused || call->streaming) && !call->stream_ended)
        g_cancellable_cancel(call->cancellable);
}

static const char *bearer_token(SoupMessageHeaders *h)
{
    const char *auth = soup_message_headers_get_one(h, "Authorization");
    if (auth && !g_ascii_strncasecmp(auth, "Bearer ", 7))
        return auth + 7;
    const char *key = soup_message_headers_get_one(h, "x-api-key");
    return key;
}

static void handler(SoupServer *soup, SoupServerMessage *msg, const char *path,
                    GHashTable *query, gpointer data)
{
    (void)soup;
    svc_server *srv = data;
    slow_timer_remove(msg);
    if (soup_server_message_get_status(msg) != 0)
        return; /* refused by the early handler */
    SoupMessageHeaders *req = soup_server_message_get_request_headers(msg);
    SoupMessageHeaders *resp = soup_server_message_get_response_headers(msg);
    const char *method = soup_server_message_get_method(msg);

    gboolean path_known = FALSE;
    const svc_route *route = route_find(srv, method, path, &path_known);
    const svc_route *any_route = route;
    if (!route && !strcmp(method, "OPTIONS"))
        any_route = NULL;

    svc_call *call = svc_call_new(srv, msg, path, query);
    call->route = route;
    call->metered = route && (route->flags & SVC_ROUTE_METERED);
    g_object_set_data(G_OBJECT(msg), "svc-call", call);
    g_hash_table_add(srv->calls, svc_call_ref(call));
    g_signal_connect(msg, "disconnected", G_CALLBACK(on_msg_disconnected), srv);

    const char *host = soup_message_headers_get_one(req, "Host");
    GError *gerr = NULL;
    if (!svc_guard_host_ok(host, (const char *const *)srv->allowed_hosts, &gerr)) {
        svc_call_reply_error(call, 403, "permission_error", NULL, "host_not_allowed",
                             "%s; add the name to allowed_hosts in the settings to serve it",
                             gerr->message);
        g_error_free(gerr);
        svc_call_unref(call);
        return;
    }
    const char *origin = soup_message_headers_get_one(req, "Origin");
    if (origin) {
        if (!svc_guard_cors_origin_ok(origin, (const char *const *)srv->cors_origins)) {
            svc_call_reply_error(call, 403, "permission_error", NULL, "origin_not_allowed",
                                 "requests from the web origin '%s' are not allowed; add it to "
                                 "cors_origins in the settings to allow them",
                                 origin);
            svc_call_unref(call);
            return;
        }
        soup_message_headers_replace(resp, "Access-Control-Allow-Origin", origin);
        soup_message_headers_replace(resp, "Vary", "Origin");
        if (!strcmp(method, "OPTIONS")) {
            soup_message_headers_replace(resp, "Access-Control-Allow-Methods",
                                         "GET, POST, PUT, PATCH, DELETE, OPTIONS");
            soup_message_headers_replace(resp, "Access-Control-Allow-Headers",
                                         "Authorization, Content-Type, x-api-key, "
                                         "anthropic-version, X-MoeDesk-Caller");
            soup_message_headers_replace(resp, "Access-Control-Max-Age", "600");
            svc_call_reply_text(call, 204, "text/plain", "", 0);
            svc_call_unref(call);
            return;
        }
    }
    /* Callers: an API key's name; "gui"/"cli" as our own clients say over
     * loopback; else anonymous. A key that is sent must be valid. */
    const char *token = bearer_token(req);
    const char *who = soup_message_headers_get_one(req, "X-MoeDesk-Caller");
    gboolean loop_peer = peer_is_loopback(msg);
    char *key_name = token && srv->keys ? svc_keys_verify(srv->keys, token) : NULL;
    /* Over loopback keys are optional, and clients that insist on some key
     * ("sk-no-key", "ollama") are anonymous; but one of our own keys that
     * no longer verifies (revoked, mistyped) is refused, so its owner
     * notices. */
    if (token && !key_name && (!loop_peer || g_str_has_prefix(token, SVC_KEYS_PREFIX))) {
        svc_call_reply_error(call, 401, "authentication_error", NULL, "invalid_api_key",
                             "the API key is not valid (revoked, mistyped, or not one of this "
                             "service's keys)");
        svc_call_unref(call);
        return;
    }
    if (key_name) {
        g_free(call->caller);
        call->caller = key_name;
    } else if (who && loop_peer && (!strcmp(who, "gui") || !strcmp(who, "cli"))) {
        g_free(call->caller);
        call->caller = g_strdup(who);
    }
    if (!loop_peer && !key_name) {
        svc_call_reply_error(call, 401, "authentication_error", NULL, "invalid_api_key",
                             "an API key is required for requests from beyond this machine");
        svc_call_unref(call);
        return;
    }

    if (!any_route) {
        if (path_known)
            svc_call_reply_error(call, 405, "invalid_request_error", NULL, "method_not_allowed",
                                 "%s is not allowed on %s", method, path);
        else
            svc_call_reply_error(call, 404, "invalid_request_error", NULL, "not_found",
                                 "there is no endpoint %s %s", method, path);
        svc_call_unref(call);
        return;
    }
    if (srv->stopping) {
        svc_call_reply_error(call, 503, "server_error", NULL, "shutting_down",
                             "the service is shutting down");
        svc_call_unref(call);
        return;
    }
    route->fn(call);
    svc_call_after_handler(call);
    svc_call_unref(call);
}

/* ---- built-in routes ------------------------------------------------------------ */

static void route_root(svc_call *call)
{
    svc_call_reply_text(call, 200, "text/plain", "MoeDesk is running\n", -1);
}

static void route_health(svc_call *call)
{
    svc_server *srv = svc_call_server(call);
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "status");
    json_builder_add_string_value(b, "ok");
    json_builder_set_member_name(b, "version");
    json_builder_add_string_value(b, svc_server_version());
    json_builder_set_member_name(b, "model");
    if (srv->current)
        json_builder_add_string_value(b, srv->current->name);
    else
        json_builder_add_null_value(b);
    if (srv->current) {
        svc_sched_stats st;
        svc_sched_get_stats(srv->current->sched, &st);
        json_builder_set_member_name(b, "slots_idle");
        json_builder_add_int_value(b, st.n_parallel - st.running);
        json_builder_set_member_name(b, "slots_processing");
        json_builder_add_int_value(b, st.running);
        json_builder_set_member_name(b, "queued");
        json_builder_add_int_value(b, st.queued);
    }
    json_builder_set_member_name(b, "uptime_s");
    json_builder_add_int_value(b, (g_get_real_time() - srv->started_us) / G_USEC_PER_SEC);
    json_builder_end_object(b);
    svc_call_reply_json(call, 200, json_builder_get_root(b));
    g_object_unref(b);
}

static void route_metrics(svc_call *call)
{
    svc_server *srv = svc_call_server(call);
    svc_metrics *m = srv->metrics;
    svc_metrics_clear_gauge(m, SVC_METRICS_MODEL_LOADED);
    if (srv->current) {
        svc_sched_stats st;
        svc_sched_get_stats(srv->current->sched, &st);
        svc_metrics_set_gauge(m, SVC_METRICS_QUEUE_DEPTH, NULL, st.queued);
        svc_metrics_set_gauge(m, SVC_METRICS_RUNNING_SEQUENCES, NULL, st.running);
        svc_metrics_set_gauge(m, SVC_METRICS_KV_USED_CELLS, NULL, st.kv_cells_used);
        svc_metrics_set_gauge(m, SVC_METRICS_KV_TOTAL_CELLS, NULL, st.kv_cells_total);
        svc_metrics_set_gauge(m, SVC_METRICS_MODEL_LOADED, srv->current->name, 1);
    } else {
        svc_metrics_set_gauge(m, SVC_METRICS_QUEUE_DEPTH, NULL, 0);
        svc_metrics_set_gauge(m, SVC_METRICS_RUNNING_SEQUENCES, NULL, 0);
        svc_metrics_set_gauge(m, SVC_METRICS_KV_USED_CELLS, NULL, 0);
        svc_metrics_set_gauge(m, SVC_METRICS_KV_TOTAL_CELLS, NULL, 0);
    }
    GString *out = g_string_new(NULL);
    svc_metrics_render(m, out);
    svc_call_reply_text(call, 200, SVC_METRICS_CONTENT_TYPE, out->str, (gssize)out->len);
    g_string_free(out, TRUE);
}

/* ---- life cycle ------------------------------------------------------------------ */

svc_server *svc_server_new(const svc_server_options *o, GError **error)
{
    (void)error;
    svc_server *srv = g_new0(svc_server, 1);
    srv->host = g_strdup(o->host ? o->host : "127.0.0.1");
    srv->port = o->port;
    srv->model_path = g_strdup(o->model_path);
    srv->model_name = g_strdup(o->model_name);
    srv->default_model = g_strdup(o->default_model);
    srv->models_dir = g_strdup(o->models_dir);
    srv->usage_db = g_strdup(o->usage_db);
    srv->keys_db = g_strdup(o->keys_db);
    srv->settings_path = g_strdup(o->settings_path);
    srv->metrics = svc_metrics_new();
    srv->n_parallel = o->n_parallel > 0 ? o->n_parallel : 4;
    srv->n_ctx = o->n_ctx;
    srv->n_threads = o->n_threads;
    srv->queue_max = o->queue_max > 0 ? o->queue_max : 64;
    srv->request_timeout_ms = 600000;
    srv->header_timeout_ms = o->header_timeout_ms > 0 ? o->header_timeout_ms
                                                      : DEFAULT_HEADER_TIMEOUT_MS;
    srv->max_body_bytes = DEFAULT_MAX_BODY;
    srv->up_client = svc_upstream_client_new(NULL);
    srv->routes = g_ptr_array_new_with_free_func(route_free);
    srv->calls = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_datalist_init(&srv->module_data);
    srv->stop_hooks = g_array_new(FALSE, FALSE, sizeof(svc_stop_hook_entry));
    srv->soup = soup_server_new("server-header", "moedesk/" MOEDESK_VERSION " ", NULL);
    soup_server_add_early_handler(srv->soup, NULL, early_handler, srv, NULL);
    soup_server_add_handler(srv->soup, NULL, handler, srv, NULL);
    g_signal_connect(srv->soup, "request-started", G_CALLBACK(on_request_started), srv);
    g_signal_connect(srv->soup, "request-finished", G_CALLBACK(on_request_finished), srv);
    g_signal_connect(srv->soup, "request-aborted", G_CALLBACK(on_request_aborted), srv);

    svc_server_add_route(srv, "GET", "/", 0, SVC_STYLE_OPENAI, route_root);
    svc_server_add_route(srv, "HEAD", "/", 0, SVC_STYLE_OPENAI, route_root);
    svc_server_add_route(srv, "GET", "/health", 0, SVC_STYLE_OPENAI, route_health);
    svc_server_add_route(srv, "GET", "/metrics", 0, SVC_STYLE_OPENAI, route_metrics);
    return srv;
}

static gboolean idle_unload_tick(gpointer data)
{
    svc_server *srv = data;
    svc_model *m = srv->current;
    if (m && srv->idle_unload_s > 0 && g_atomic_int_get(&m->ref_count) == 1 &&
        g_get_monotonic_time() - m->last_used_us > srv->idle_unload_s * G_USEC_PER_SEC)
        svc_server_unload_model(srv);
    return G_SOURCE_CONTINUE;
}

void svc_server_apply_settings(svc_server *srv, const svc_settings *st)
{
    g_strfreev(srv->allowed_hosts);
    srv->allowed_hosts = g_strdupv(st->allowed_hosts);
    g_strfreev(srv->cors_origins);
    srv->cors_origins = g_strdupv(st->cors_origins);
    srv->request_timeout_ms = (gint64)st->request_timeout_s * 1000;
    srv->max_body_bytes = (gsize)st->max_body_bytes;
    srv->idle_unload_s = st->idle_unload_s;
    /* The tick checks idle_unload_s itself, so it may outlive a later 0. */
    if (srv->idle_unload_s > 0 && !srv->idle_source)
        srv->idle_source = g_timeout_add_seconds(1, idle_unload_tick, srv);
    for (size_t i = 0; i < srv->n_upstreams; i++)
        svc_upstream_clear(&srv->upstreams[i]);
    g_free(srv->upstreams);
    srv->upstreams = NULL;
    srv->n_upstreams = 0;
    if (st->data_sensitivity == SVC_DATA_SENSITIVITY_HIGH || st->upstreams->len == 0)
        return;
    srv->n_upstreams = st->upstreams->len;
    srv->upstreams = g_new0(svc_upstream, srv->n_upstreams);
    for (guint i = 0; i < st->upstreams->len; i++) {
        const svc_upstream_cfg *u = g_ptr_array_index(st->upstreams, i);
        svc_upstream *c = &srv->upstreams[i];
        c->name = g_strdup(u->name);
        c->base_url = g_strdup(u->base_url);
        c->api_key = g_strdup(svc_upstream_get_api_key(u));
        c->models = g_strdupv(u->models);
        c->fallback = u->fallback;
        c->price_input_per_mtok = u->prices.input_per_mtok;
        c->price_cached_input_per_mtok = u->prices.cached_input_per_mtok;
        c->price_output_per_mtok = u->prices.output_per_mtok;
    }
}

gboolean svc_server_start(svc_server *srv, GError **error)
{
    if (srv->usage_db) {
        char *dir = g_path_get_dirname(srv->usage_db);
        g_mkdir_with_parents(dir, 0700);
        g_free(dir);
        srv->usage = usage_store_open(srv->usage_db, USAGE_STORE_READ_WRITE, error);
        if (!srv->usage)
            return FALSE;
    }
    srv->keys = svc_keys_open(srv->keys_db, error);
    if (!srv->keys)
        return FALSE;
    if (!svc_guard_bind_ok(srv->host, svc_keys_count_active(srv->keys), error))
        return FALSE;
    if (srv->model_path) {
        srv->current = svc_model_load(srv, srv->model_path, srv->model_name, error);
        if (!srv->current)
            return FALSE;
    }
    GInetAddress *addr = g_inet_address_new_from_string(srv->host);
    if (!addr) {
        g_set_error(error, SVC_ERROR, SVC_ERROR_CONFIG,
                    "the bind address '%s' is not an IP address", srv->host);
        return FALSE;
    }
    GSocketAddress *sa = g_inet_socket_address_new(addr, srv->port);
    g_object_unref(addr);
    GError *e = NULL;
    /* Our own socket for a longer accept queue: soup_server_listen's has
     * GSocket's default backlog of 10, and a burst of connections (64
     * clients at once while the main loop is busy) overflowed it: SYNs
     * dropped (a second's retry) and connections reset. */
    GSocket *sock = g_socket_new(g_socket_address_get_family(sa), G_SOCKET_TYPE_STREAM,
                                 G_SOCKET_PROTOCOL_TCP, &e);
    gboolean ok = sock != NULL;
    if (ok) {
        g_socket_set_listen_backlog(sock, SVC_LISTEN_BACKLOG);
        ok = g_socket_bind(sock, sa, TRUE, &e) && g_socket_listen(sock, &e) &&
             soup_server_listen_socket(srv->soup, sock, 0, &e);
        g_object_unref(sock);
    }
    g_object_unref(sa);
    if (!ok) {
        g_set_error(error, SVC_ERROR, SVC_ERROR_BIND, "cannot listen on %s:%u: %s", srv->host,
                    srv->port, e->message);
        g_error_free(e);
        return FALSE;
    }
    GSList *uris = soup_server_get_uris(srv->soup);
    if (uris)
        srv->port = (guint16)g_uri_get_port(uris->data);
    g_slist_free_full(uris, (GDestroyNotify)g_uri_unref);
    srv->started_us = g_get_real_time();
    return TRUE;
}

void svc_server_stop(svc_server *srv, gint64 grace_ms)
{
    srv->stopping = TRUE;
    for (guint i = 0; i < srv->stop_hooks->len; i++) {
        svc_stop_hook_entry *e = &g_array_index(srv->stop_hooks, svc_stop_hook_entry, i);
        e->fn(srv, e->data);
    }
    if (srv->current)
        svc_sched_shutdown(srv->current->sched, false);
    gint64 deadline = g_get_monotonic_time() + grace_ms * 1000;
    GMainContext *ctx = g_main_context_default();
    while (g_hash_table_size(srv->calls) > 0 && g_get_monotonic_time() < deadline)
        g_main_context_iteration(ctx, FALSE) || (g_usleep(2000), TRUE);
    if (g_hash_table_size(srv->calls) > 0) {
        /* Out of patience: cancel what still runs and let it answer. */
        if (srv->current)
            svc_sched_shutdown(srv->current->sched, true);
        GHashTableIter it;
        gpointer k;
        g_hash_table_iter_init(&it, srv->calls);
        while (g_hash_table_iter_next(&it, &k, NULL))
            g_cancellable_cancel(((svc_call *)k)->cancellable);
        deadline = g_get_monotonic_time() + 2 * G_USEC_PER_SEC;
        while (g_hash_table_size(srv->calls) > 0 && g_get_monotonic_time() < deadline)
            g_main_context_iteration(ctx, FALSE) || (g_usleep(2000), TRUE);
    }
    soup_server_disconnect(srv->soup);
    /* Pending scheduler callbacks hold call references: let them run. */
    for (int i = 0; i < 100 && g_main_context_pending(ctx); i++)
        g_main_context_iteration(ctx, FALSE);
}

void svc_server_free(svc_server *srv)
{
    if (!srv)
        return;
    if (srv->idle_source)
        g_source_remove(srv->idle_source);
    /* Modules' objects may hold calls and models: they go first. */
    g_datalist_clear(&srv->module_data);
    g_array_unref(srv->stop_hooks);
    GHashTableIter it;
    gpointer k;
    g_hash_table_iter_init(&it, srv->calls);
    while (g_hash_table_iter_next(&it, &k, NULL))
        svc_call_unref(k);
    g_hash_table_destroy(srv->calls);
    svc_server_unload_model(srv);
    g_object_unref(srv->soup);
    if (srv->usage) {
        GError *e = NULL;
        if (!usage_store_close(srv->usage, &e)) {
            g_warning("usage database: %s", e->message);
            g_error_free(e);
        }
    }
    g_ptr_array_unref(srv->routes);
    for (size_t i = 0; i < srv->n_upstreams; i++)
        svc_upstream_clear(&srv->upstreams[i]);
    g_free(srv->upstreams);
    svc_upstream_client_free(srv->up_client);
    g_free(srv->host);
    g_free(srv->model_path);
    g_free(srv->model_name);
    g_free(srv->default_model);
    g_free(srv->models_dir);
    g_free(srv->usage_db);
    g_free(srv->keys_db);
    g_free(srv->settings_path);
    svc_keys_close(srv->keys);
    svc_metrics_free(srv->metrics);
    g_strfreev(srv->allowed_hosts);
    g_strfreev(srv->cors_origins);
    g_free(srv);
}

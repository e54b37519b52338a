/*
 * call.c — one HTTP exchange of moedesk-service (svc_call): its answer
 * (JSON, errors in the route's API style, chunked streams), noticing a
 * client that left, and the usage row written when libsoup is done with it.
 *
 * libsoup 3 streams a chunked body by pausing the message when it runs out
 * of chunks; every write here appends a chunk and unpauses. A paused
 * message does not read its socket, so a client that vanished during a
 * long non-streamed answer would go unnoticed until the end: while a call
 * waits, a 250 ms timer peeks at the socket and treats end-of-file as the
 * client leaving (its GCancellable is cancelled, which cancels the
 * scheduler request within one engine step).
 */
#include "svc-private.h"

#include "json-write.h"
#include "metrics.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#ifdef _WIN32
#include <winsock2.h>
#else
#include <sys/socket.h>
#endif

G_DEFINE_QUARK(svc-error-quark, svc_error)

#define LIVENESS_MS 250

static void call_stop_liveness(svc_call *call)
{
    if (call->liveness_source) {
        g_source_remove(call->liveness_source);
        call->liveness_source = 0;
    }
}

static void call_mark_gone(svc_call *call)
{
    if (call->gone)
        return;
    call->gone = TRUE;
    call_stop_liveness(call);
    if (!call->error_kind)
        call->error_kind = g_strdup("client_disconnected");
    g_cancellable_cancel(call->cancellable);
    /* A paused message does not read its socket, so libsoup would never
     * notice the client left: a call waiting for a whole (non-streamed)
     * answer would stay open for good, and its usage row would never be
     * written. End the exchange now (nobody reads the answer). */
    if (!call->finished && call->paused && !call->streaming &&
        soup_server_message_get_status(call->msg) == 0) {
        soup_server_message_set_status(call->msg, 499, "Client Closed Request");
        soup_message_headers_replace(soup_server_message_get_response_headers(call->msg),
                                     "Connection", "close");
        soup_server_message_unpause(call->msg);
    }
}

/* Whether the peer closed its side: nothing pending and no hang-up means
 * it is still there; otherwise a peeked 0-byte read is end-of-file, and
 * pipelined data means it is still there. GSocket's own receive is not used:
 * libsoup leaves its sockets in blocking mode, and a PEEK through
 * g_socket_receive_message reported 0 bytes on an idle open connection, so
 * every answer that took longer than one tick was dropped as "client gone".
 * The OS is asked directly, and only once the socket is readable, so the
 * peek never blocks. */
static gboolean socket_peer_closed(GSocket *sock)
{
    GIOCondition c = g_socket_condition_check(sock, G_IO_IN | G_IO_HUP | G_IO_ERR);
    if (!c)
        return FALSE;
    char byte;
#ifdef _WIN32
    int n = recv((SOCKET)g_socket_get_fd(sock), &byte, 1, MSG_PEEK);
    if (n < 0)
        return WSAGetLastError() != WSAEWOULDBLOCK && WSAGetLastError() != WSAEINTR;
#else
    ssize_t n = recv(g_socket_get_fd(sock), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0)
        return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
#endif
    return n == 0;
}

static gboolean call_liveness_tick(gpointer data)
{
    svc_call *call = data;
    if (call->finished)
        return G_SOURCE_REMOVE;
    GSocket *sock = soup_server_message_get_socket(call->msg);
    if (!sock)
        return G_SOURCE_CONTINUE;
    if (socket_peer_closed(sock)) {
        call->liveness_source = 0;
        call_mark_gone(call);
        return G_SOURCE_REMOVE;
    }
    return G_SOURCE_CONTINUE;
}

svc_call *svc_call_new(svc_server *srv, SoupServerMessage *msg, const char *path,
                       GHashTable *query)
{
    svc_call *call = g_new0(svc_call, 1);
    call->ref_count = 1;
    call->srv = srv;
    call->msg = g_object_ref(msg);
    call->method = g_strdup(soup_server_message_get_method(msg));
    call->path = g_strdup(path);
    if (query) {
        call->query = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
        GHashTableIter it;
        gpointer k, v;
        g_hash_table_iter_init(&it, query);
        while (g_hash_table_iter_next(&it, &k, &v))
            g_hash_table_insert(call->query, g_strdup(k), g_strdup(v));
    }
    SoupMessageBody *body = soup_server_message_get_request_body(msg);
    GBytes *bytes = body ? soup_message_body_flatten(body) : NULL;
    gsize len = 0;
    const char *data = bytes ? g_bytes_get_data(bytes, &len) : NULL;
    call->body = g_malloc(len + 1);
    if (len)
        memcpy(call->body, data, len);
    call->body[len] = '\0';
    call->body_len = len;
    if (bytes)
        g_bytes_unref(bytes);
    SoupMessageHeaders *h = soup_server_message_get_request_headers(msg);
    const char *ua = soup_message_headers_get_one(h, "User-Agent");
    call->client = g_strdup(ua ? ua : "");
    call->caller = g_strdup("anonymous");
    call->cancellable = g_cancellable_new();
    call->start_us = g_get_monotonic_time();
    call->start_ms = g_get_real_time() / 1000;
    call->prompt_tokens = call->cached_tokens = call->completion_tokens = 0;
    return call;
}

static void call_meter(svc_call *call, guint status)
{
    usage_store *store = call->srv->usage;
    if (!call->metered)
        return;
    gint64 now = g_get_monotonic_time();
    svc_metrics_request mr = {
        .model = call->model,
        .route = call->route_name ? call->route_name : "local",
        .endpoint = call->route ? call->route->path : call->path,
        .status = (int)status,
        .prompt_tokens = call->prompt_tokens,
        .cached_tokens = call->cached_tokens,
        .completion_tokens = call->completion_tokens,
        .ttft_s = call->first_token_us ? (call->first_token_us - call->start_us) / 1e6 : -1,
        .duration_s = (now - call->start_us) / 1e6,
    };
    svc_metrics_observe_request(call->srv->metrics, &mr);
    if (!store)
        return;
    usage_row row = {0};
    row.start_ms = call->start_ms;
    row.caller = call->caller;
    row.client = call->client;
    row.endpoint = call->route ? call->route->path : call->path;
    row.model = call->model ? call->model : "";
    row.route = call->route_name ? call->route_name : "local";
    row.backend = call->backend;
    row.quant = call->quant;
    row.prompt_tokens = call->prompt_tokens;
    row.cached_tokens = call->cached_tokens;
    row.completion_tokens = call->completion_tokens;
    row.ttft_ms = call->first_token_us ? (call->first_token_us - call->start_us) / 1000 : -1;
    row.total_ms = (now - call->start_us) / 1000;
    row.decode_tps = call->decode_tps;
    row.http_status = (gint)status;
    row.error_kind = call->error_kind;
    row.finish_reason = call->finish_reason;
    row.gpu_power_w = -1;
    row.busy_ms = call->busy_ms;
    if (!usage_store_append(store, &row))
        g_warning("usage row for %s %s was not recorded", call->method, call->path);
}

svc_call *svc_call_ref(svc_call *call)
{
    g_atomic_int_inc(&call->ref_count);
    return call;
}

void svc_call_unref(svc_call *call)
{
    if (!call || !g_atomic_int_dec_and_test(&call->ref_count))
        return;
    /* The last reference goes when both libsoup and the handler are done,
     * so the row has the handler's token counts even for a client that
     * left mid-stream. */
    call_meter(call, call->final_status ? call->final_status : 499);
    call_stop_liveness(call);
    g_object_unref(call->msg);
    g_free(call->method);
    g_free(call->path);
    if (call->query)
        g_hash_table_unref(call->query);
    g_free(call->body);
    g_free(call->caller);
    g_free(call->client);
    g_object_unref(call->cancellable);
    g_free(call->model);
    g_free(call->route_name);
    g_free(call->backend);
    g_free(call->quant);
    g_free(call->error_kind);
    g_free(call->finish_reason);
    g_free(call);
}

svc_server *svc_call_server(svc_call *call) { return call->srv; }
SoupServerMessage *svc_call_msg(svc_call *call) { return call->msg; }
const char *svc_call_method(svc_call *call) { return call->method; }
const char *svc_call_path(svc_call *call) { return call->path; }
const char *svc_call_caller(svc_call *call) { return call->caller; }
GCancellable *svc_call_cancellable(svc_call *call) { return call->cancellable; }
gboolean svc_call_is_gone(svc_call *call) { return call->gone; }
gint64 svc_call_start_us(svc_call *call) { return call->start_us; }

const char *svc_call_body(svc_call *call, gsize *len)
{
    if (len)
        *len = call->body_len;
    return call->body;
}

const char *svc_call_query(svc_call *call, const char *name)
{
    return call->query ? g_hash_table_lookup(call->query, name) : NULL;
}

static void set_str(char **slot, const char *v)
{
    g_free(*slot);
    *slot = g_strdup(v);
}

void svc_call_set_model(svc_call *call, const char *model) { set_str(&call->model, model); }
void svc_call_set_route(svc_call *call, const char *route) { set_str(&call->route_name, route); }
void svc_call_set_error_kind(svc_call *call, const char *kind) { set_str(&call->error_kind, kind); }
void svc_call_set_finish_reason(svc_call *call, const char *r) { set_str(&call->finish_reason, r); }

void svc_call_set_backend(svc_call *call, const char *backend, const char *quant)
{
    set_str(&call->backend, backend);
    set_str(&call->quant, quant);
}

void svc_call_set_tokens(svc_call *call, gint64 prompt, gint64 cached, gint64 completion)
{
    call->prompt_tokens = prompt;
    call->cached_tokens = cached;
    call->completion_tokens = completion;
}

void svc_call_mark_first_token(svc_call *call)
{
    if (!call->first_token_us)
        call->first_token_us = g_get_monotonic_time();
}

void svc_call_set_decode(svc_call *call, double tokens_per_s, gint64 busy_ms)
{
    call->decode_tps = tokens_per_s;
    call->busy_ms = busy_ms;
}

void svc_call_set_gen_result(svc_call *call, const svc_gen_result *r)
{
    svc_call_set_tokens(call, r->n_prompt, r->n_cached, r->n_completion);
    svc_call_set_decode(call, r->decode_tps, r->busy_us / 1000);
    if (!r->error)
        svc_call_set_finish_reason(call, moe_finish_reason_openai(r->finish));
}

/* ---- answers ------------------------------------------------------------ */

static gboolean call_can_answer(svc_call *call)
{
    return !call->finished && !call->gone;
}

static void call_unpause(svc_call *call)
{
    if (call->paused && !call->finished) {
        soup_server_message_unpause(call->msg);
    }
}

void svc_call_after_handler(svc_call *call)
{
    if (call->finished || call->streaming)
        return;
    if (soup_server_message_get_status(call->msg) == 0) {
        /* The handler answers later (scheduler callback, upstream). */
        soup_server_message_pause(call->msg);
        call->paused = TRUE;
        if (!call->liveness_source)
            call->liveness_source = g_timeout_add(LIVENESS_MS, call_liveness_tick, call);
    }
}

void svc_call_reply_text(svc_call *call, guint status, const char *content_type,
                         const char *data, gssize len)
{
    if (!call_can_answer(call) || call->streaming)
        return;
    call_stop_liveness(call);
    if (len < 0)
        len = (gssize)strlen(data);
    soup_server_message_set_status(call->msg, status, NULL);
    soup_server_message_set_response(call->msg, content_type, SOUP_MEMORY_COPY, data, (gsize)len);
    call_unpause(call);
}

JsonNode *svc_json_take(JsonBuilder *b)
{
    JsonNode *n = json_builder_get_root(b);
    g_object_unref(b);
    return n;
}

char *svc_json_to_string(JsonNode *node)
{
    return svc_json_write(node);
}

JsonNode *svc_json_parse(const char *text, gssize len, GError **error)
{
    JsonParser *p = json_parser_new_immutable();
    if (!json_parser_load_from_data(p, text, len, error)) {
        g_object_unref(p);
        return NULL;
    }
    JsonNode *root = json_parser_steal_root(p);
    g_object_unref(p);
    return root;
}

void svc_call_reply_json(svc_call *call, guint status, JsonNode *node)
{
    char *s = svc_json_to_string(node);
    json_node_unref(node);
    svc_call_reply_text(call, status, "application/json", s, -1);
    g_free(s);
}

static JsonNode *error_node(svc_err_style style, guint status, const char *type,
                            const char *param, const char *code, const char *message)
{
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    if (style == SVC_STYLE_OLLAMA) {
        json_builder_set_member_name(b, "error");
        json_builder_add_string_value(b, message);
    } else if (style == SVC_STYLE_LLAMACPP) {
        /* llama.cpp's server: the HTTP status again as "code". */
        json_builder_set_member_name(b, "error");
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "code");
        json_builder_add_int_value(b, status);
        json_builder_set_member_name(b, "message");
        json_builder_add_string_value(b, message);
        json_builder_set_member_name(b, "type");
        json_builder_add_string_value(b, type);
        json_builder_end_object(b);
    } else if (style == SVC_STYLE_ANTHROPIC) {
        json_builder_set_member_name(b, "type");
        json_builder_add_string_value(b, "error");
        json_builder_set_member_name(b, "error");
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "type");
        json_builder_add_string_value(b, type);
        json_builder_set_member_name(b, "message");
        json_builder_add_string_value(b, message);
        json_builder_end_object(b);
    } else {
        json_builder_set_member_name(b, "error");
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "message");
        json_builder_add_string_value(b, message);
        json_builder_set_member_name(b, "type");
        json_builder_add_string_value(b, type);
        json_builder_set_member_name(b, "param");
        if (param)
            json_builder_add_string_value(b, param);
        else
            json_builder_add_null_value(b);
        json_builder_set_member_name(b, "code");
        if (code)
            json_builder_add_string_value(b, code);
        else
            json_builder_add_null_value(b);
        json_builder_end_object(b);
    }
    json_builder_end_object(b);
    JsonNode *n = json_builder_get_root(b);
    g_object_unref(b);
    return n;
}

/* A stream whose first chunk has not been queued has sent nothing yet
 * (stream_begin holds the message until then): an error that comes first
 * (queue full, prompt too long, shutdown) can still be a plain answer with
 * its own status and headers, as for a non-streamed request, instead of an
 * error event under "200 OK". */
static void call_unstream_if_unsent(svc_call *call)
{
    if (!call->streaming || call->stream_written || call->stream_ended || !call_can_answer(call))
        return;
    SoupMessageHeaders *h = soup_server_message_get_response_headers(call->msg);
    /* Back to what libsoup set up for a new message (the length is filled
     * in from the body when the headers are written). */
    soup_message_headers_set_encoding(h, SOUP_ENCODING_CONTENT_LENGTH);
    soup_message_headers_remove(h, "Content-Type");
    soup_message_headers_remove(h, "Cache-Control");
    soup_message_headers_remove(h, "X-Accel-Buffering");
    call->streaming = FALSE;
    call->is_sse = FALSE;
}

void svc_call_reply_error(svc_call *call, guint status, const char *type, const char *param,
                          const char *code, const char *fmt, ...)
{
    call_unstream_if_unsent(call);
    va_list ap;
    va_start(ap, fmt);
    char *message = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (!call->error_kind || !strcmp(call->error_kind, "client_disconnected"))
        set_str(&call->error_kind, code ? code : type);
    svc_err_style style = call->route ? call->route->style : SVC_STYLE_OPENAI;
    JsonNode *n = error_node(style, status, type, param, code, message);
    if (call->streaming) {
        /* Headers are out: the error goes into the stream as its last event. */
        if (style == SVC_STYLE_ANTHROPIC)
            svc_call_stream_event(call, "error", n);
        else
            svc_call_stream_json(call, n);
        svc_call_stream_end(call);
    } else {
        svc_call_reply_json(call, status, n);
    }
    g_free(message);
}

void svc_call_reply_gerror(svc_call *call, const GError *e)
{
    if (e->domain == SVC_SCHED_ERROR) {
        switch ((svc_sched_error)e->code) {
        case SVC_SCHED_ERROR_QUEUE_FULL:
            call_unstream_if_unsent(call);
            if (!call->streaming)
                soup_message_headers_replace(soup_server_message_get_response_headers(call->msg),
                                             "Retry-After", "1");
            svc_call_reply_error(call, 429, "rate_limit_error", NULL, "queue_full", "%s",
                                 e->message);
            return;
        case SVC_SCHED_ERROR_CONTEXT:
            svc_call_reply_error(call, 400, "invalid_request_error", "messages",
                                 "context_length_exceeded", "%s", e->message);
            return;
        case SVC_SCHED_ERROR_INVALID:
            svc_call_reply_error(call, 400, "invalid_request_error", NULL, NULL, "%s", e->message);
            return;
        case SVC_SCHED_ERROR_TIMEOUT:
            svc_call_reply_error(call, 504, "timeout_error", NULL, "timeout", "%s", e->message);
            return;
        case SVC_SCHED_ERROR_CANCELLED:
            svc_call_reply_error(call, call->srv->stopping ? 503 : 499, "cancelled", NULL,
                                 "cancelled", "%s", e->message);
            return;
        case SVC_SCHED_ERROR_SHUTDOWN:
            svc_call_reply_error(call, 503, "server_error", NULL, "shutting_down", "%s",
                                 e->message);
            return;
        case SVC_SCHED_ERROR_ENGINE:
        default:
            break;
        }
    } else if (e->domain == SVC_ERROR && e->code == SVC_ERROR_MODEL_NAME) {
        svc_call_reply_error(call, 400, "invalid_request_error", "model", "invalid_model_name",
                             "%s", e->message);
        return;
    } else if (e->domain == SVC_ERROR && e->code == SVC_ERROR_MODEL_NOT_FOUND) {
        svc_call_reply_error(call, 404, "invalid_request_error", "model", "model_not_found", "%s",
                             e->message);
        return;
    }
    svc_call_reply_error(call, 500, "server_error", NULL, "internal_error", "%s", e->message);
}

/* ---- streams -------------------------------------------------------------- */

void svc_call_stream_begin(svc_call *call, guint status, const char *content_type)
{
    if (!call_can_answer(call) || call->streaming)
        return;
    call->streaming = TRUE;
    call->is_sse = g_str_has_prefix(content_type, "text/event-stream");
    SoupMessageHeaders *h = soup_server_message_get_response_headers(call->msg);
    soup_message_headers_set_encoding(h, SOUP_ENCODING_CHUNKED);
    soup_message_headers_set_content_type(h, content_type, NULL);
    if (call->is_sse) {
        soup_message_headers_replace(h, "Cache-Control", "no-cache");
        soup_message_headers_replace(h, "X-Accel-Buffering", "no");
    }
    soup_server_message_set_status(call->msg, status, NULL);
    /* Chunks come later, from scheduler callbacks: hold the message until
     * then (every write unpauses it; libsoup pauses it again itself when
     * it runs out of chunks). */
    if (!call->paused) {
        soup_server_message_pause(call->msg);
        call->paused = TRUE;
    }
    /* While streaming, a failed write tells libsoup the client left; the
     * liveness poll covers the gaps between tokens (long prefills). */
    if (!call->liveness_source)
        call->liveness_source = g_timeout_add(LIVENESS_MS, call_liveness_tick, call);
}

gboolean svc_call_stream_write(svc_call *call, const char *data, gssize len)
{
    if (!call->streaming || call->stream_ended || !call_can_answer(call))
        return FALSE;
    if (len < 0)
        len = (gssize)strlen(data);
    if (len == 0)
        return TRUE;
    SoupMessageBody *body = soup_server_message_get_response_body(call->msg);
    soup_message_body_append(body, SOUP_MEMORY_COPY, data, (gsize)len);
    call->stream_written = TRUE;
    call_unpause(call);
    return TRUE;
}

gboolean svc_call_stream_json(svc_call *call, JsonNode *node)
{
    char *s = svc_json_to_string(node);
    json_node_unref(node);
    char *line = call->is_sse ? g_strdup_printf("data: %s\n\n", s) : g_strdup_printf("%s\n", s);
    gboolean ok = svc_call_stream_write(call, line, -1);
    g_free(line);
    g_free(s);
    return ok;
}

gboolean svc_call_stream_event(svc_call *call, const char *event, JsonNode *node)
{
    char *s = svc_json_to_string(node);
    json_node_unref(node);
    char *line = g_strdup_printf("event: %s\ndata: %s\n\n", event, s);
    gboolean ok = svc_call_stream_write(call, line, -1);
    g_free(line);
    g_free(s);
    return ok;
}

void svc_call_stream_end(svc_call *call)
{
    if (!call->streaming || call->stream_ended)
        return;
    call->stream_ended = TRUE;
    call_stop_liveness(call);
    if (call->finished)
        return;
    soup_message_body_complete(soup_server_message_get_response_body(call->msg));
    call_unpause(call);
}

/* ---- end of the exchange -------------------------------------------------- */

void svc_call_finished(svc_call *call, gboolean aborted)
{
    if (call->finished)
        return;
    guint status = soup_server_message_get_status(call->msg);
    if (aborted || (call->streaming && !call->stream_ended))
        call_mark_gone(call);
    call->finished = TRUE;
    call_stop_liveness(call);
    /* The exchange is over: a handler still working must stop. */
    g_cancellable_cancel(call->cancellable);
    call->final_status = status ? status : 499;
}

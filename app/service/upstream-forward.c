/*
 * upstream-forward.c — the shared HTTP client and forwarding one request to
 * an upstream (see upstream.h for the contract).
 *
 * One forwarded request is a `fwd` that lives from svc_upstream_forward to
 * its on_done:
 *
 *   send_async ──► headers ──► 2xx + SSE asked ─► head, then read loop:
 *       │              │                          each whole event → on_data
 *       │              ├─► anything else ───────► read the whole body (capped),
 *       │              │                          then head + one on_data
 *       ▼              ▼
 *   connect/idle timer, client cancel ──► cancel `cancel` ──► finish()
 *
 * Timeouts are ours, not the session's, so they are per upstream and in
 * milliseconds: the connect timer runs until the request headers are
 * written, then the idle timer restarts on every byte that arrives. Either
 * firing cancels the request and reports upstream_timeout. The client's
 * GCancellable is linked to our own, so a disconnect aborts the upstream
 * request at once and the socket is closed.
 */
#include "upstream.h"
#include "json-write.h"
#include "upstream-parse.h"

#include <libsoup/soup.h>
#include <string.h>

#define READ_CHUNK_BYTES (16 * 1024)
#define BODY_MAX_BYTES   (32u * 1024 * 1024) /* non-stream answers       */
#define EVENT_MAX_BYTES  (8u * 1024 * 1024)  /* one SSE event             */
#define ERROR_SNIPPET_MAX 300                /* upstream text in messages */

/* --- the client ------------------------------------------------------ */

struct svc_upstream_client {
    SoupSession *session;
};

svc_upstream_client *svc_upstream_client_new(const svc_upstream_client_params *params)
{
    svc_upstream_client_params p = { 0 };
    if (params)
        p = *params;
    svc_upstream_client *c = g_new0(svc_upstream_client, 1);
    /* timeout 0: our own per-upstream timers replace the session's. */
    c->session = soup_session_new_with_options(
        "max-conns", p.max_conns > 0 ? p.max_conns : 256,
        "max-conns-per-host", p.max_conns_per_host > 0 ? p.max_conns_per_host : 64,
        "user-agent", p.user_agent ? p.user_agent : "moedesk-service",
        "timeout", 0u, "idle-timeout", 60u, NULL);
    return c;
}

void svc_upstream_client_free(svc_upstream_client *client)
{
    if (!client)
        return;
    soup_session_abort(client->session);
    g_object_unref(client->session);
    g_free(client);
}

/* --- one forwarded request ------------------------------------------- */

typedef enum { PHASE_CONNECT, PHASE_IDLE } timer_phase;
typedef enum { MODE_NONE, MODE_SSE, MODE_BODY } read_mode;

typedef struct fwd {
    SoupSession *session;     /* ref */
    SoupMessage *msg;         /* ref */
    GInputStream *stream;     /* the response body, ref */
    GCancellable *cancel;     /* ours, ref */
    GCancellable *outer;      /* the caller's, ref or NULL */
    gulong outer_id;
    GMainContext *ctx;        /* ref */
    svc_upstream_events ev;

    char *name, *url_shown;   /* for messages: name and base URL (no secrets) */
    char *key;                /* to redact with; never printed */
    int64_t connect_ms, idle_ms;
    GSource *timer;
    timer_phase phase;
    bool timed_out;

    bool stream_req, client_usage;
    read_mode mode;
    bool head_sent, saw_done;
    GError *stream_error;     /* an error event inside a 200 stream */
    unsigned client_status;
    svc_sse_splitter sse;
    GByteArray *body;         /* MODE_BODY */
    char *content_type;
    char *retry_after;

    int64_t t0, ttfb, ttft;
    svc_ups_usage usage;
    char *finish_reason;
} fwd;

static void fwd_free(fwd *f)
{
    if (f->timer) {
        g_source_destroy(f->timer);
        g_source_unref(f->timer);
    }
    if (f->outer)
        g_cancellable_disconnect(f->outer, f->outer_id);
    g_clear_object(&f->outer);
    if (f->msg)
        g_signal_handlers_disconnect_by_data(f->msg, f);
    g_clear_object(&f->stream);
    g_clear_object(&f->msg);
    g_clear_object(&f->cancel);
    g_clear_object(&f->session);
    g_main_context_unref(f->ctx);
    g_free(f->name);
    g_free(f->url_shown);
    if (f->key)
        memset(f->key, 0, strlen(f->key));
    g_free(f->key);
    g_clear_error(&f->stream_error);
    svc_sse_splitter_clear(&f->sse);
    if (f->body)
        g_byte_array_unref(f->body);
    g_free(f->content_type);
    g_free(f->retry_after);
    g_free(f->finish_reason);
    g_free(f);
}

static int64_t since(const fwd *f)
{
    return g_get_monotonic_time() - f->t0;
}

static void send_head(fwd *f, unsigned status, const char *content_type, const char *error_kind)
{
    if (f->head_sent)
        return;
    f->head_sent = true;
    f->client_status = status;
    svc_upstream_head h = { status, content_type, f->retry_after, error_kind };
    if (f->ev.on_head)
        f->ev.on_head(&h, f->ev.user);
}

/* Passes bytes to the client with the key redacted. */
static void send_data(fwd *f, GBytes *bytes)
{
    g_autoptr(GBytes) clean = svc_ups_redact_bytes(bytes, f->key);
    if (f->ev.on_data && g_bytes_get_size(clean) > 0)
        f->ev.on_data(clean, f->ev.user);
}

static unsigned status_for(svc_upstream_error code, unsigned upstream_status)
{
    switch (code) {
    case SVC_UPSTREAM_ERROR_TIMEOUT: return 504;
    case SVC_UPSTREAM_ERROR_CANCELLED: return 499;
    case SVC_UPSTREAM_ERROR_STATUS_4XX: return upstream_status;
    case SVC_UPSTREAM_ERROR_STATUS_5XX: return upstream_status == 503 ? 503 : 502;
    default: return 502;
    }
}

/* The OpenAI-style error object for `error`, as compact JSON. */
static char *error_json(const GError *error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "error");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "message");
    json_builder_add_string_value(b, error->message);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "upstream_error");
    json_builder_set_member_name(b, "param");
    json_builder_add_null_value(b);
    json_builder_set_member_name(b, "code");
    json_builder_add_string_value(b, svc_upstream_error_kind((svc_upstream_error)error->code));
    json_builder_end_object(b);
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return svc_json_write(root);
}

/* Ends the request: tells the client about `error` (owned, may be NULL)
 * if it can still be told, then on_done, then frees everything. */
static void finish(fwd *f, GError *error)
{
    if (!error && f->stream_error)
        error = g_steal_pointer(&f->stream_error);
    unsigned upstream_status = f->msg ? soup_message_get_status(f->msg) : 0;
    if (error && error->code != SVC_UPSTREAM_ERROR_CANCELLED) {
        g_autofree char *js = error_json(error);
        if (!f->head_sent) {
            send_head(f, status_for((svc_upstream_error)error->code, upstream_status),
                      "application/json", svc_upstream_error_kind((svc_upstream_error)error->code));
            g_autoptr(GBytes) b = g_bytes_new(js, strlen(js));
            send_data(f, b);
        } else if (f->mode == MODE_SSE && error->code != SVC_UPSTREAM_ERROR_STREAM_ERROR) {
            /* A stream cut or stalled after its head: one error event (the
             * openai SDKs raise on an event with an "error" member). */
            g_autofree char *ev = g_strdup_printf("data: %s\n\n", js);
            g_autoptr(GBytes) b = g_bytes_new_take(g_steal_pointer(&ev), strlen(js) + 8);
            send_data(f, b);
        }
    }
    svc_upstream_result r = {
        .http_status = error && error->code == SVC_UPSTREAM_ERROR_CANCELLED ? 499
                       : f->head_sent ? f->client_status : 502,
        .upstream_status = upstream_status,
        .error = error,
        .error_kind = error ? svc_upstream_error_kind((svc_upstream_error)error->code) : NULL,
        .upstream_name = f->name,
        .prompt_tokens = f->usage.prompt_tokens,
        .cached_tokens = f->usage.cached_tokens,
        .completion_tokens = f->usage.completion_tokens,
        .ttfb_us = f->ttfb,
        .ttft_us = f->ttft,
        .total_us = since(f),
        .finish_reason = f->finish_reason,
    };
    if (f->ev.on_done)
        f->ev.on_done(&r, f->ev.user);
    if (error)
        g_error_free(error);
    fwd_free(f);
}

/* An error naming the upstream; `detail` is redacted here. */
static GError *fwd_error(fwd *f, svc_upstream_error code, const char *detail)
{
    g_autofree char *clean = svc_ups_redact_str(detail, f->key);
    return g_error_new(SVC_UPSTREAM_ERROR, code, "upstream %s (%s): %s", f->name, f->url_shown,
                       clean);
}

/* A transport error (or our cancellation) as the right upstream error. */
static GError *transport_error(fwd *f, const GError *e, const char *doing)
{
    if (g_error_matches(e, G_IO_ERROR, G_IO_ERROR_CANCELLED) && !f->timed_out)
        return fwd_error(f, SVC_UPSTREAM_ERROR_CANCELLED, "the client went away");
    if (f->timed_out || g_error_matches(e, G_IO_ERROR, G_IO_ERROR_TIMED_OUT)) {
        g_autofree char *d = g_strdup_printf(
            "no answer within %" G_GINT64_FORMAT " ms while %s",
            f->phase == PHASE_CONNECT ? f->connect_ms : f->idle_ms,
            f->phase == PHASE_CONNECT ? "connecting" : doing);
        return fwd_error(f, SVC_UPSTREAM_ERROR_TIMEOUT, d);
    }
    g_autofree char *d = g_strdup_printf("%s: %s", doing, e->message);
    return fwd_error(f, f->head_sent || f->mode != MODE_NONE ? SVC_UPSTREAM_ERROR_STREAM_CUT
                                                            : SVC_UPSTREAM_ERROR_UNREACHABLE, d);
}

static gboolean on_timer(gpointer data)
{
    fwd *f = data;
    f->timed_out = true;
    g_source_set_ready_time(f->timer, -1);
    g_cancellable_cancel(f->cancel);
    return G_SOURCE_CONTINUE;
}

static gboolean timer_dispatch(GSource *source, GSourceFunc cb, gpointer data)
{
    (void)source;
    return cb(data);
}

static GSourceFuncs timer_funcs = { .dispatch = timer_dispatch };

/* (Re)starts the timer for `phase`. */
static void arm(fwd *f, timer_phase phase)
{
    f->phase = phase;
    int64_t ms = phase == PHASE_CONNECT ? f->connect_ms : f->idle_ms;
    g_source_set_ready_time(f->timer, g_get_monotonic_time() + ms * 1000);
}

static void on_wrote_headers(SoupMessage *msg, gpointer data)
{
    (void)msg;
    arm(data, PHASE_IDLE);
}

static void on_outer_cancelled(GCancellable *outer, gpointer data)
{
    (void)outer;
    g_cancellable_cancel(data); /* any thread; our callbacks run on ctx */
}

/* --- reading the answer ---------------------------------------------- */

static void read_next(fwd *f);

/* One whole SSE event: note what metering needs, then pass it on unless it
 * is the usage-only chunk the client did not ask for. */
static void handle_event(fwd *f, GBytes *ev)
{
    gsize len;
    const char *raw = g_bytes_get_data(ev, &len);
    g_autofree char *data = svc_sse_event_data(raw, len);
    if (data && strcmp(data, "[DONE]") == 0) {
        f->saw_done = true;
    } else if (data) {
        svc_ups_chunk_info info;
        if (svc_ups_chunk_inspect(data, strlen(data), &info)) {
            if (info.has_usage)
                f->usage = info.usage;
            if (info.finish_reason) {
                g_free(f->finish_reason);
                f->finish_reason = g_steal_pointer(&info.finish_reason);
            }
            if (info.has_content && f->ttft < 0)
                f->ttft = since(f);
            if (info.has_error && !f->stream_error) {
                g_autofree char *d = g_strdup_printf("error in the stream: %s",
                                                     info.error_message ? info.error_message : "?");
                f->stream_error = fwd_error(f, SVC_UPSTREAM_ERROR_STREAM_ERROR, d);
            }
            bool drop = info.usage_only && !f->client_usage;
            svc_ups_chunk_info_clear(&info);
            if (drop)
                return;
        }
    }
    send_data(f, ev);
}

/* A short, valid-UTF-8 account of an error body: error.message when it is
 * OpenAI-style JSON, else its first bytes. Owned; not yet redacted. */
static char *body_snippet(GBytes *body)
{
    gsize len;
    const char *data = g_bytes_get_data(body, &len);
    svc_ups_chunk_info info;
    if (svc_ups_chunk_inspect(data, len, &info) && info.error_message) {
        char *m = g_steal_pointer(&info.error_message);
        svc_ups_chunk_info_clear(&info);
        return m;
    }
    svc_ups_chunk_info_clear(&info);
    if (len == 0)
        return g_strdup("(empty body)");
    g_autofree char *valid = g_utf8_make_valid(data, (gssize)MIN(len, ERROR_SNIPPET_MAX));
    return g_strdup_printf("%s%s", valid, len > ERROR_SNIPPET_MAX ? "..." : "");
}

/* A non-stream answer is complete: pass it through or turn it into an
 * error naming the upstream. */
static void finish_body(fwd *f)
{
    g_autoptr(GBytes) body = g_byte_array_free_to_bytes(g_steal_pointer(&f->body));
    unsigned st = soup_message_get_status(f->msg);
    const char *ct = f->content_type ? f->content_type : "application/json";
    if (st >= 200 && st < 300) {
        gsize len;
        const char *data = g_bytes_get_data(body, &len);
        svc_ups_chunk_info info;
        if (svc_ups_chunk_inspect(data, len, &info)) {
            if (info.has_usage)
                f->usage = info.usage;
            f->finish_reason = g_steal_pointer(&info.finish_reason);
        }
        svc_ups_chunk_info_clear(&info);
        send_head(f, st, ct, NULL);
        send_data(f, body);
        finish(f, NULL);
        return;
    }
    g_autofree char *snip = body_snippet(body);
    if (st == 401 || st == 403 || st == 407) {
        g_autofree char *d = g_strdup_printf("refused the configured API key (HTTP %u): %s", st, snip);
        finish(f, fwd_error(f, SVC_UPSTREAM_ERROR_AUTH, d));
    } else if (st >= 400 && st < 500) {
        /* The client's own mistake (bad parameter, unknown model, rate
         * limit): it gets the upstream's answer as is. */
        g_autofree char *d = g_strdup_printf("answered HTTP %u: %s", st, snip);
        send_head(f, st, ct, NULL);
        send_data(f, body);
        finish(f, fwd_error(f, SVC_UPSTREAM_ERROR_STATUS_4XX, d));
    } else if (st >= 500 && st < 600) {
        g_autofree char *d = g_strdup_printf("answered HTTP %u: %s", st, snip);
        finish(f, fwd_error(f, SVC_UPSTREAM_ERROR_STATUS_5XX, d));
    } else {
        g_autofree char *d = g_strdup_printf(
            "answered HTTP %u (redirects are not followed: set base_url to the final address)", st);
        finish(f, fwd_error(f, SVC_UPSTREAM_ERROR_BAD_RESPONSE, d));
    }
}

static void on_read(GObject *src, GAsyncResult *res, gpointer data)
{
    fwd *f = data;
    GError *e = NULL;
    g_autoptr(GBytes) bytes = g_input_stream_read_bytes_finish(G_INPUT_STREAM(src), res, &e);
    if (!bytes) {
        GError *err = transport_error(f, e, "reading the answer");
        g_error_free(e);
        finish(f, err);
        return;
    }
    gsize n = g_bytes_get_size(bytes);
    if (f->mode == MODE_BODY) {
        if (n == 0) {
            finish_body(f);
            return;
        }
        if (f->body->len + n > BODY_MAX_BYTES) {
            finish(f, fwd_error(f, SVC_UPSTREAM_ERROR_BAD_RESPONSE, "answer larger than 32 MiB"));
            return;
        }
        g_byte_array_append(f->body, g_bytes_get_data(bytes, NULL), (guint)n);
        arm(f, PHASE_IDLE);
        read_next(f);
        return;
    }
    if (n == 0) {
        /* End of the stream: a last event without its blank line still
         * counts; no "data: [DONE]" means the upstream stopped short. */
        if (svc_sse_splitter_pending(&f->sse) > 0) {
            g_autoptr(GBytes) rest = g_bytes_new(f->sse.buf->data, f->sse.buf->len);
            g_byte_array_set_size(f->sse.buf, 0);
            handle_event(f, rest);
        }
        if (!f->saw_done && !f->stream_error)
            finish(f, fwd_error(f, SVC_UPSTREAM_ERROR_STREAM_CUT,
                                "the stream ended without \"data: [DONE]\""));
        else
            finish(f, NULL);
        return;
    }
    arm(f, PHASE_IDLE);
    svc_sse_splitter_push(&f->sse, g_bytes_get_data(bytes, NULL), n);
    /* on_data may cancel (the server saw its client go): stop passing
     * events at once; the next read reports the cancellation. */
    GBytes *ev;
    while (!g_cancellable_is_cancelled(f->cancel) && (ev = svc_sse_splitter_next(&f->sse)) != NULL) {
        handle_event(f, ev);
        g_bytes_unref(ev);
    }
    if (svc_sse_splitter_pending(&f->sse) > EVENT_MAX_BYTES) {
        finish(f, fwd_error(f, SVC_UPSTREAM_ERROR_BAD_RESPONSE, "one stream event over 8 MiB"));
        return;
    }
    read_next(f);
}

static void read_next(fwd *f)
{
    g_input_stream_read_bytes_async(f->stream, READ_CHUNK_BYTES, G_PRIORITY_DEFAULT, f->cancel,
                                    on_read, f);
}

static void on_sent(GObject *src, GAsyncResult *res, gpointer data)
{
    fwd *f = data;
    GError *e = NULL;
    f->stream = soup_session_send_finish(SOUP_SESSION(src), res, &e);
    if (!f->stream) {
        GError *err = transport_error(f, e, "waiting for the answer");
        g_error_free(e);
        finish(f, err);
        return;
    }
    f->ttfb = since(f);
    arm(f, PHASE_IDLE);
    unsigned st = soup_message_get_status(f->msg);
    SoupMessageHeaders *h = soup_message_get_response_headers(f->msg);
    f->content_type = g_strdup(soup_message_headers_get_content_type(h, NULL));
    f->retry_after = g_strdup(soup_message_headers_get_one(h, "Retry-After"));
    if (st >= 200 && st < 300 && f->stream_req && f->content_type &&
        g_ascii_strcasecmp(f->content_type, "text/event-stream") == 0) {
        f->mode = MODE_SSE;
        svc_sse_splitter_init(&f->sse);
        send_head(f, st, "text/event-stream", NULL);
    } else {
        f->mode = MODE_BODY;
        f->body = g_byte_array_new();
    }
    read_next(f);
}

/* --- starting ---------------------------------------------------------- */

static gboolean fail_later_cb(gpointer data)
{
    fwd *f = data;
    finish(f, g_steal_pointer(&f->stream_error));
    return G_SOURCE_REMOVE;
}

/* Reports `error` from the main context, never from inside forward(). */
static void fail_later(fwd *f, GError *error)
{
    f->stream_error = error;
    GSource *s = g_idle_source_new();
    g_source_set_callback(s, fail_later_cb, f, NULL);
    g_source_attach(s, f->ctx);
    g_source_unref(s);
}

/* The body to send: the client's with model, stream and, for a stream,
 * stream_options.include_usage set. Notes whether the client asked for
 * usage itself. NULL when the body is not a JSON object. */
static GBytes *build_body(fwd *f, const svc_upstream_request *req)
{
    if (!JSON_NODE_HOLDS_OBJECT(req->body))
        return NULL;
    g_autoptr(JsonNode) copy = json_node_copy(req->body);
    JsonObject *o = json_node_get_object(copy);
    if (req->model)
        json_object_set_string_member(o, "model", req->model);
    if (req->stream) {
        json_object_set_boolean_member(o, "stream", TRUE);
        JsonNode *so = json_object_get_member(o, "stream_options");
        if (!so || !JSON_NODE_HOLDS_OBJECT(so)) {
            json_object_set_object_member(o, "stream_options", json_object_new());
            so = json_object_get_member(o, "stream_options");
        }
        JsonObject *sopt = json_node_get_object(so);
        JsonNode *iu = json_object_get_member(sopt, "include_usage");
        f->client_usage = iu && JSON_NODE_HOLDS_VALUE(iu) &&
                          json_node_get_value_type(iu) == G_TYPE_BOOLEAN && json_node_get_boolean(iu);
        json_object_set_boolean_member(sopt, "include_usage", TRUE);
    } else if (json_object_has_member(o, "stream")) {
        json_object_set_boolean_member(o, "stream", FALSE);
        json_object_remove_member(o, "stream_options"); /* only valid with stream */
    }
    gsize len;
    char *js = svc_json_write(copy);
    len = strlen(js);
    return g_bytes_new_take(js, len);
}

/* base_url as shown in messages: no user info, query or fragment. */
static char *url_for_display(GUri *uri)
{
    return g_uri_to_string_partial(uri, G_URI_HIDE_USERINFO | G_URI_HIDE_QUERY | G_URI_HIDE_FRAGMENT);
}

void svc_upstream_forward(svc_upstream_client *client, const svc_upstream *ups,
                          const svc_upstream_request *req,
                          const svc_upstream_events *events,
                          GCancellable *cancellable)
{
    g_return_if_fail(client && ups && req && events);
    fwd *f = g_new0(fwd, 1);
    f->t0 = g_get_monotonic_time();
    f->ctx = g_main_context_ref_thread_default();
    f->session = g_object_ref(client->session);
    f->ev = *events;
    f->name = g_strdup(ups->name && ups->name[0] ? ups->name : "(unnamed)");
    f->key = ups->api_key && ups->api_key[0] ? g_strdup(ups->api_key) : NULL;
    f->connect_ms = ups->connect_timeout_ms > 0 ? ups->connect_timeout_ms
                                                 : SVC_UPSTREAM_CONNECT_TIMEOUT_MS;
    f->idle_ms = ups->idle_timeout_ms > 0 ? ups->idle_timeout_ms : SVC_UPSTREAM_IDLE_TIMEOUT_MS;
    f->usage.prompt_tokens = f->usage.cached_tokens = f->usage.completion_tokens = -1;
    f->ttfb = f->ttft = -1;
    f->stream_req = req->stream;
    f->cancel = g_cancellable_new();
    f->timer = g_source_new(&timer_funcs, sizeof(GSource));
    g_source_set_callback(f->timer, on_timer, f, NULL);
    g_source_attach(f->timer, f->ctx);
    if (cancellable) {
        f->outer = g_object_ref(cancellable);
        f->outer_id = g_cancellable_connect(cancellable, G_CALLBACK(on_outer_cancelled), f->cancel,
                                            NULL);
    }

    const char *base = ups->base_url ? ups->base_url : "";
    g_autoptr(GUri) base_uri = g_uri_parse(base, G_URI_FLAGS_NONE, NULL);
    if (base_uri)
        f->url_shown = url_for_display(base_uri);
    else
        f->url_shown = svc_ups_redact_str(base, f->key);
    const char *scheme = base_uri ? g_uri_get_scheme(base_uri) : NULL;
    if (!base_uri || !scheme ||
        (g_ascii_strcasecmp(scheme, "http") != 0 && g_ascii_strcasecmp(scheme, "https") != 0)) {
        fail_later(f, fwd_error(f, SVC_UPSTREAM_ERROR_CONFIG, "base_url is not an http(s) URL"));
        return;
    }
    if (!req->path || req->path[0] != '/') {
        fail_later(f, fwd_error(f, SVC_UPSTREAM_ERROR_CONFIG, "request path must start with '/'"));
        return;
    }
    g_autoptr(GBytes) body = NULL;
    if (req->body && !(body = build_body(f, req))) {
        fail_later(f, fwd_error(f, SVC_UPSTREAM_ERROR_CONFIG, "request body is not a JSON object"));
        return;
    }

    size_t blen = strlen(base);
    while (blen > 0 && base[blen - 1] == '/')
        blen--;
    g_autofree char *url = g_strdup_printf("%.*s%s", (int)blen, base, req->path);
    g_autoptr(GUri) uri = g_uri_parse(url, G_URI_FLAGS_ENCODED, NULL);
    if (!uri) {
        fail_later(f, fwd_error(f, SVC_UPSTREAM_ERROR_CONFIG, "base_url + path is not a valid URL"));
        return;
    }
    f->msg = soup_message_new_from_uri(body ? "POST" : "GET", uri);
    soup_message_add_flags(f->msg, SOUP_MESSAGE_NO_REDIRECT);
    SoupMessageHeaders *h = soup_message_get_request_headers(f->msg);
    if (f->key) {
        g_autofree char *auth = g_strconcat("Bearer ", f->key, NULL);
        soup_message_headers_replace(h, "Authorization", auth);
        memset(auth, 0, strlen(auth));
    }
    soup_message_headers_replace(h, "Accept", req->stream ? "text/event-stream" : "application/json");
    if (body)
        soup_message_set_request_body_from_bytes(f->msg, "application/json", body);
    g_signal_connect(f->msg, "wrote-headers", G_CALLBACK(on_wrote_headers), f);
    arm(f, PHASE_CONNECT);
    soup_session_send_async(f->session, f->msg, G_PRIORITY_DEFAULT, f->cancel, on_sent, f);
}

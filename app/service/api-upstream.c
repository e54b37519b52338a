/*
 * api-upstream.c — sending an OpenAI-style call to a configured upstream
 * (upstream.h does the HTTP) and answering the client with what comes
 * back: the stream passed through event by event, or the whole answer;
 * the usage row filled from the upstream's usage (route = the upstream's
 * name, so the weekly report prices it with the upstream's prices).
 *
 * When: a model name matching an upstream's patterns (or "name/model");
 * or, for an upstream marked fallback, when the local queue is full or
 * the local model cannot be loaded. Only the OpenAI endpoints forward:
 * upstreams speak OpenAI's API, and Anthropic/Ollama clients naming an
 * upstream model get a 400 that says to use /v1/chat/completions.
 */
#include "api.h"
#include "svc-private.h"
#include "upstream.h"

#include <string.h>

typedef struct fwd_state {
    svc_call *call;
    char *upstream;
    gboolean stream;
    guint status;
    char *content_type;
    GByteArray *body;
    gint64 started_us;
} fwd_state;

static void fwd_head(const svc_upstream_head *h, void *user)
{
    fwd_state *f = user;
    f->status = h->status;
    g_free(f->content_type);
    f->content_type = g_strdup(h->content_type ? h->content_type : "application/json");
    SoupServerMessage *msg = svc_call_msg(f->call);
    if (h->retry_after)
        soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Retry-After",
                                     h->retry_after);
    if (h->error_kind)
        svc_call_set_error_kind(f->call, h->error_kind);
    if (g_str_has_prefix(f->content_type, "text/event-stream")) {
        f->stream = TRUE;
        svc_call_stream_begin(f->call, h->status, f->content_type);
    }
}

static void fwd_data(GBytes *bytes, void *user)
{
    fwd_state *f = user;
    gsize n;
    const char *d = g_bytes_get_data(bytes, &n);
    if (f->stream)
        svc_call_stream_write(f->call, d, (gssize)n);
    else
        g_byte_array_append(f->body, (const guint8 *)d, (guint)n);
}

static void fwd_done(const svc_upstream_result *r, void *user)
{
    fwd_state *f = user;
    svc_call *call = f->call;
    svc_call_set_route(call, f->upstream);
    svc_call_set_backend(call, NULL, NULL);
    svc_call_set_tokens(call, r->prompt_tokens > 0 ? r->prompt_tokens : 0,
                        r->cached_tokens > 0 ? r->cached_tokens : 0,
                        r->completion_tokens > 0 ? r->completion_tokens : 0);
    if (r->ttft_us >= 0 && !call->first_token_us)
        call->first_token_us = f->started_us + r->ttft_us;
    if (r->finish_reason)
        svc_call_set_finish_reason(call, r->finish_reason);
    if (r->error_kind && strcmp(r->error_kind, "cancelled"))
        svc_call_set_error_kind(call, r->error_kind);
    if (f->stream) {
        svc_call_stream_end(call);
    } else if (!svc_call_is_gone(call) && f->status) {
        svc_call_reply_text(call, f->status, f->content_type, (const char *)f->body->data,
                            (gssize)f->body->len);
    } else if (!svc_call_is_gone(call)) {
        svc_call_reply_error(call, r->http_status ? r->http_status : 502, "server_error", NULL,
                             r->error_kind, "the upstream '%s' did not answer", f->upstream);
    }
    svc_call_unref(call);
    g_free(f->upstream);
    g_free(f->content_type);
    g_byte_array_unref(f->body);
    g_free(f);
}

static gboolean forward(svc_call *call, const svc_upstream *up, const char *model, svc_api api)
{
    if (api != SVC_API_OPENAI_CHAT && api != SVC_API_OPENAI_COMPLETIONS) {
        svc_call_reply_error(call, 400, "invalid_request_error", "model", "upstream_model",
                             "the model is served by the upstream '%s', which speaks OpenAI's "
                             "API: send this request to /v1/chat/completions",
                             up->name);
        return TRUE;
    }
    gsize len;
    const char *body = svc_call_body(call, &len);
    GError *e = NULL;
    JsonNode *node = svc_json_parse(body, (gssize)len, &e);
    if (!node) { /* cannot happen after svc_request_parse accepted it */
        svc_call_reply_error(call, 400, "invalid_request_error", NULL, NULL, "%s", e->message);
        g_error_free(e);
        return TRUE;
    }
    JsonObject *o = json_node_get_object(node);
    gboolean stream = json_object_has_member(o, "stream") &&
                      json_node_get_value_type(json_object_get_member(o, "stream")) ==
                          G_TYPE_BOOLEAN &&
                      json_object_get_boolean_member(o, "stream");
    fwd_state *f = g_new0(fwd_state, 1);
    f->call = svc_call_ref(call);
    f->upstream = g_strdup(up->name);
    f->body = g_byte_array_new();
    f->started_us = g_get_monotonic_time();
    svc_call_set_route(call, up->name);
    svc_upstream_request req = {
        .path = api == SVC_API_OPENAI_CHAT ? "/chat/completions" : "/completions",
        .body = node,
        .model = model,
        .stream = stream,
    };
    svc_upstream_events ev = {fwd_head, fwd_data, fwd_done, f};
    svc_upstream_forward(call->srv->up_client, up, &req, &ev, svc_call_cancellable(call));
    json_node_unref(node);
    return TRUE;
}

gboolean svc_api_try_upstream(svc_call *call, const svc_request *req, svc_api api)
{
    svc_server *srv = svc_call_server(call);
    if (!srv->n_upstreams || !req->model)
        return FALSE;
    /* A model loaded or installed here is served here. */
    svc_model *cur = srv->current;
    if (cur && !g_ascii_strcasecmp(cur->name, req->model))
        return FALSE;
    const char *send = NULL;
    int i = svc_upstream_match(srv->upstreams, srv->n_upstreams, req->model, &send);
    if (i < 0)
        return FALSE;
    return forward(call, &srv->upstreams[i], send, api);
}

gboolean svc_api_fallback(svc_call *call, const svc_request *req, svc_api api)
{
    svc_server *srv = svc_call_server(call);
    if (!srv->n_upstreams)
        return FALSE;
    int i = svc_upstream_fallback(srv->upstreams, srv->n_upstreams);
    if (i < 0)
        return FALSE;
    const svc_upstream *up = &srv->upstreams[i];
    g_message("forwarding to the fallback upstream '%s'", up->name);
    return forward(call, up, up->fallback_model ? up->fallback_model : req->model, api);
}

/* The scheduler's own admission rule (scheduler.c): requests it has not
 * admitted yet may use the free slots, the queue proper is what waits
 * beyond them. Counting every unadmitted request against queue_max alone
 * forwarded a burst to the fallback while local slots were still free. */
gboolean svc_api_local_queue_full(svc_model *m)
{
    svc_sched_stats st;
    svc_sched_get_stats(m->sched, &st);
    return st.queued >= st.queue_max + (st.n_parallel - st.running);
}

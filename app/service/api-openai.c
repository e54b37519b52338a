/*
 * api-openai.c — the OpenAI-compatible endpoints: GET /v1/models,
 * POST /v1/chat/completions and POST /v1/completions (with `suffix`: fill
 * in the middle through the model's FIM tokens), streamed as SSE chunks
 * ending in `data: [DONE]` or answered as one object, with OpenAI's usage
 * object (prompt_tokens_details.cached_tokens from prefix reuse),
 * logprobs, tool calls and errors.
 *
 * Requests naming a model that is neither loaded nor installed go to a
 * matching upstream when one is configured (upstream.c), else 404.
 */
#include "api.h"
#include "job.h"
#include "prompt.h"

#include <math.h>
#include <string.h>

typedef struct oai_state {
    char *id;
    gint64 created;
    gboolean chat;
    gboolean stream;
    gboolean include_usage;
    gboolean logprobs;
    int32_t top_logprobs;
    gboolean role_sent;
    char *echo_prefix;     /* completions echo: the prompt text            */
    JsonBuilder *lp;       /* non-stream logprobs "content" array          */
} oai_state;

static void oai_state_free(gpointer p)
{
    oai_state *s = p;
    g_free(s->id);
    g_free(s->echo_prefix);
    if (s->lp)
        g_object_unref(s->lp);
    g_free(s);
}

/* ---- pieces of JSON ------------------------------------------------------------ */

static void add_usage(JsonBuilder *b, const svc_gen_result *r)
{
    json_builder_set_member_name(b, "usage");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "prompt_tokens");
    json_builder_add_int_value(b, r->n_prompt);
    json_builder_set_member_name(b, "completion_tokens");
    json_builder_add_int_value(b, r->n_completion);
    json_builder_set_member_name(b, "total_tokens");
    json_builder_add_int_value(b, r->n_prompt + r->n_completion);
    json_builder_set_member_name(b, "prompt_tokens_details");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "cached_tokens");
    json_builder_add_int_value(b, r->n_cached);
    json_builder_end_object(b);
    json_builder_end_object(b);
}

static void begin_chunk(JsonBuilder *b, oai_state *s, const char *model)
{
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "id");
    json_builder_add_string_value(b, s->id);
    json_builder_set_member_name(b, "object");
    json_builder_add_string_value(b, s->chat ? (s->stream ? "chat.completion.chunk"
                                                          : "chat.completion")
                                             : "text_completion");
    json_builder_set_member_name(b, "created");
    json_builder_add_int_value(b, s->created);
    json_builder_set_member_name(b, "model");
    json_builder_add_string_value(b, model);
    json_builder_set_member_name(b, "system_fingerprint");
    json_builder_add_string_value(b, "moedesk-" MOEDESK_VERSION);
}

/* One token's logprob entry: {token, logprob, bytes, top_logprobs}. */
static void add_token_logprob(JsonBuilder *b, const moe_vocab *vocab, int32_t token,
                              const moe_token_prob *probs, size_t n_probs, int32_t top)
{
    char piece[256];
    float p = 0;
    for (size_t i = 0; i < n_probs; i++)
        if (probs[i].token == token)
            p = probs[i].prob;
    int64_t n = moe_token_to_piece(vocab, token, false, piece, sizeof piece - 1);
    if (n < 0)
        n = 0;
    if (n > (int64_t)sizeof piece - 1)
        n = sizeof piece - 1;
    piece[n] = '\0';
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "token");
    char *valid = g_utf8_make_valid(piece, n);
    json_builder_add_string_value(b, valid);
    g_free(valid);
    json_builder_set_member_name(b, "logprob");
    json_builder_add_double_value(b, p > 0 ? log(p) : -9999.0);
    json_builder_set_member_name(b, "bytes");
    json_builder_begin_array(b);
    for (int64_t i = 0; i < n; i++)
        json_builder_add_int_value(b, (unsigned char)piece[i]);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "top_logprobs");
    json_builder_begin_array(b);
    for (size_t i = 0; i < n_probs && (int32_t)i < top; i++) {
        char alt[256];
        int64_t m = moe_token_to_piece(vocab, probs[i].token, false, alt, sizeof alt - 1);
        if (m < 0)
            m = 0;
        if (m > (int64_t)sizeof alt - 1)
            m = sizeof alt - 1;
        alt[m] = '\0';
        char *va = g_utf8_make_valid(alt, m);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "token");
        json_builder_add_string_value(b, va);
        json_builder_set_member_name(b, "logprob");
        json_builder_add_double_value(b, probs[i].prob > 0 ? log(probs[i].prob) : -9999.0);
        json_builder_end_object(b);
        g_free(va);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
}

static void add_tool_calls(JsonBuilder *b, const svc_tool_parse *tp, gboolean with_index)
{
    json_builder_set_member_name(b, "tool_calls");
    json_builder_begin_array(b);
    for (size_t i = 0; i < tp->n_calls; i++) {
        char *id = svc_job_new_id("call_");
        json_builder_begin_object(b);
        if (with_index) {
            json_builder_set_member_name(b, "index");
            json_builder_add_int_value(b, (gint64)i);
        }
        json_builder_set_member_name(b, "id");
        json_builder_add_string_value(b, id);
        json_builder_set_member_name(b, "type");
        json_builder_add_string_value(b, "function");
        json_builder_set_member_name(b, "function");
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, tp->calls[i].name);
        json_builder_set_member_name(b, "arguments");
        json_builder_add_string_value(b, tp->calls[i].arguments);
        json_builder_end_object(b);
        json_builder_end_object(b);
        g_free(id);
    }
    json_builder_end_array(b);
}

/* ---- streaming ---------------------------------------------------------------- */

static void stream_delta(svc_job *job, const char *text, size_t len, int32_t token,
                         const moe_token_prob *probs, size_t n_probs)
{
    oai_state *s = svc_job_user(job);
    svc_call *call = svc_job_call(job);
    svc_model *m = svc_job_model(job);
    if (!s->stream) {
        if (s->logprobs && token >= 0 && probs)
            add_token_logprob(s->lp, moe_model_vocab(m->model), token, probs, n_probs,
                              s->top_logprobs);
        return;
    }
    if (!len && !(s->logprobs && probs) && !s->echo_prefix)
        return;
    JsonBuilder *b = json_builder_new();
    begin_chunk(b, s, svc_job_request(job)->model ? svc_job_request(job)->model : m->name);
    json_builder_set_member_name(b, "choices");
    json_builder_begin_array(b);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "index");
    json_builder_add_int_value(b, 0);
    /* completions echo: the prompt leads the first chunk */
    char *t = g_strndup(text, len);
    if (s->echo_prefix) {
        char *with = g_strconcat(s->echo_prefix, t, NULL);
        g_free(t);
        t = with;
        g_clear_pointer(&s->echo_prefix, g_free);
    }
    if (s->chat) {
        json_builder_set_member_name(b, "delta");
        json_builder_begin_object(b);
        if (!s->role_sent) {
            json_builder_set_member_name(b, "role");
            json_builder_add_string_value(b, "assistant");
            s->role_sent = TRUE;
        }
        json_builder_set_member_name(b, "content");
        json_builder_add_string_value(b, t);
        json_builder_end_object(b);
    } else {
        json_builder_set_member_name(b, "text");
        json_builder_add_string_value(b, t);
    }
    g_free(t);
    if (s->logprobs && token >= 0 && probs) {
        json_builder_set_member_name(b, "logprobs");
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "content");
        json_builder_begin_array(b);
        add_token_logprob(b, moe_model_vocab(m->model), token, probs, n_probs, s->top_logprobs);
        json_builder_end_array(b);
        json_builder_end_object(b);
    }
    json_builder_set_member_name(b, "finish_reason");
    json_builder_add_null_value(b);
    json_builder_end_object(b);
    json_builder_end_array(b);
    json_builder_end_object(b);
    svc_call_stream_json(call, svc_json_take(b));
}

static void stream_done(svc_job *job, const svc_gen_result *r)
{
    oai_state *s = svc_job_user(job);
    svc_call *call = svc_job_call(job);
    svc_model *m = svc_job_model(job);
    const char *model = svc_job_request(job)->model ? svc_job_request(job)->model : m->name;
    if (r->error) {
        if (!svc_call_is_gone(call))
            svc_call_reply_gerror(call, r->error);
        return;
    }
    const svc_tool_parse *tp = svc_job_tools(job);
    JsonBuilder *b = json_builder_new();
    begin_chunk(b, s, model);
    json_builder_set_member_name(b, "choices");
    json_builder_begin_array(b);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "index");
    json_builder_add_int_value(b, 0);
    if (s->chat) {
        json_builder_set_member_name(b, "delta");
        json_builder_begin_object(b);
        if (!s->role_sent) {
            json_builder_set_member_name(b, "role");
            json_builder_add_string_value(b, "assistant");
            s->role_sent = TRUE;
        }
        if (tp->n_calls)
            add_tool_calls(b, tp, TRUE);
        json_builder_end_object(b);
    } else {
        json_builder_set_member_name(b, "text");
        json_builder_add_string_value(b, s->echo_prefix ? s->echo_prefix : ""); /* echo, no text */
    }
    json_builder_set_member_name(b, "finish_reason");
    json_builder_add_string_value(b, svc_job_finish_reason(job, r));
    json_builder_end_object(b);
    json_builder_end_array(b);
    json_builder_end_object(b);
    svc_call_stream_json(call, svc_json_take(b));
    if (s->include_usage) {
        b = json_builder_new();
        begin_chunk(b, s, model);
        json_builder_set_member_name(b, "choices");
        json_builder_begin_array(b);
        json_builder_end_array(b);
        add_usage(b, r);
        json_builder_end_object(b);
        svc_call_stream_json(call, svc_json_take(b));
    }
    svc_call_stream_write(call, "data: [DONE]\n\n", -1);
    svc_call_stream_end(call);
}

/* ---- one object -------------------------------------------------------------------- */

static void whole_done(svc_job *job, const svc_gen_result *r)
{
    oai_state *s = svc_job_user(job);
    svc_call *call = svc_job_call(job);
    svc_model *m = svc_job_model(job);
    if (r->error) {
        if (!svc_call_is_gone(call))
            svc_call_reply_gerror(call, r->error);
        return;
    }
    const svc_tool_parse *tp = svc_job_tools(job);
    gsize len;
    const char *text = svc_job_text(job, &len);
    JsonBuilder *b = json_builder_new();
    begin_chunk(b, s, svc_job_request(job)->model ? svc_job_request(job)->model : m->name);
    json_builder_set_member_name(b, "choices");
    json_builder_begin_array(b);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "index");
    json_builder_add_int_value(b, 0);
    if (s->chat) {
        json_builder_set_member_name(b, "message");
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "role");
        json_builder_add_string_value(b, "assistant");
        json_builder_set_member_name(b, "content");
        if (tp->n_calls && len == 0)
            json_builder_add_null_value(b);
        else {
            char *t = g_strndup(text, len);
            json_builder_add_string_value(b, t);
            g_free(t);
        }
        if (tp->n_calls)
            add_tool_calls(b, tp, FALSE);
        json_builder_end_object(b);
    } else {
        json_builder_set_member_name(b, "text");
        GString *all = g_string_new(s->echo_prefix);
        g_string_append_len(all, text, (gssize)len);
        json_builder_add_string_value(b, all->str);
        g_string_free(all, TRUE);
    }
    json_builder_set_member_name(b, "logprobs");
    if (s->logprobs) {
        json_builder_end_array(s->lp);
        json_builder_end_object(s->lp);
        json_builder_add_value(b, json_builder_get_root(s->lp));
    } else {
        json_builder_add_null_value(b);
    }
    json_builder_set_member_name(b, "finish_reason");
    json_builder_add_string_value(b, svc_job_finish_reason(job, r));
    json_builder_end_object(b);
    json_builder_end_array(b);
    add_usage(b, r);
    json_builder_end_object(b);
    svc_call_reply_json(call, 200, svc_json_take(b));
}

/* ---- handlers ---------------------------------------------------------------------- */

static void reply_request_error(svc_call *call, const svc_request_error *e)
{
    svc_call_reply_error(call, e->status, e->type[0] ? e->type : "invalid_request_error",
                         e->param[0] ? e->param : NULL, e->code[0] ? e->code : NULL, "%s",
                         e->message);
}

static void generate(svc_call *call, svc_api api)
{
    gsize len;
    const char *body = svc_call_body(call, &len);
    svc_request *req = NULL;
    svc_request_error rerr;
    if (!svc_request_parse(api, body, len, &req, &rerr)) {
        reply_request_error(call, &rerr);
        return;
    }
    svc_call_set_model(call, req->model);
    if (svc_api_try_upstream(call, req, api)) {
        svc_request_free(req); /* the forwarder copied what it needs */
        return;
    }
    GError *e = NULL;
    svc_model *m = svc_server_acquire_model(svc_call_server(call), req->model, &e);
    if (!m && g_error_matches(e, SVC_ERROR, SVC_ERROR_MODEL_LOAD) &&
        svc_api_fallback(call, req, api)) {
        g_error_free(e);
        svc_request_free(req);
        return;
    }
    if (m && svc_api_local_queue_full(m) && svc_api_fallback(call, req, api)) {
        svc_model_unref(m);
        svc_request_free(req);
        return;
    }
    if (!m) {
        svc_call_reply_gerror(call, e);
        g_error_free(e);
        svc_request_free(req);
        return;
    }
    svc_prompt_model *pm = svc_prompt_for_model(m, &e);
    GArray *tokens = NULL;
    char *echo = NULL;
    gboolean ok = pm != NULL;
    if (ok && api == SVC_API_OPENAI_CHAT) {
        ok = svc_prompt_chat(pm, req->messages, req->tools, req->template_kwargs, &tokens, NULL,
                             &e);
    } else if (ok && req->suffix) {
        ok = svc_prompt_fim(pm, req->prompt ? req->prompt : "", req->suffix, NULL, &tokens, &e);
    } else if (ok) {
        ok = svc_api_prompt_tokens(pm, req, &tokens, &e);
        if (ok && req->echo)
            echo = g_strdup(req->prompt ? req->prompt : "");
    }
    if (!ok) {
        svc_call_reply_error(call, 400, "invalid_request_error",
                             api == SVC_API_OPENAI_CHAT ? "messages" : "prompt", NULL, "%s",
                             e->message);
        g_error_free(e);
        g_free(echo);
        svc_model_unref(m);
        svc_request_free(req);
        return;
    }
    oai_state *s = g_new0(oai_state, 1);
    s->chat = api == SVC_API_OPENAI_CHAT;
    s->id = svc_job_new_id(s->chat ? "chatcmpl-" : "cmpl-");
    s->created = g_get_real_time() / G_USEC_PER_SEC;
    s->stream = req->stream;
    s->include_usage = req->include_usage;
    s->logprobs = req->logprobs || req->n_probs > 0;
    s->top_logprobs = req->top_logprobs > 0 ? req->top_logprobs : req->n_probs;
    s->echo_prefix = echo;
    if (s->logprobs && !s->stream) {
        s->lp = json_builder_new();
        json_builder_begin_object(s->lp);
        json_builder_set_member_name(s->lp, "content");
        json_builder_begin_array(s->lp);
    }
    if (s->logprobs && req->n_probs <= 0)
        req->n_probs = 1; /* the chosen token's own probability */
    static const svc_job_events stream_ev = {stream_delta, stream_done};
    static const svc_job_events whole_ev = {stream_delta, whole_done};
    gboolean stream = s->stream;
    if (stream)
        svc_call_stream_begin(call, 200, "text/event-stream");
    svc_job_start(call, m, req, tokens, stream ? &stream_ev : &whole_ev, s, oai_state_free);
}

static void route_chat(svc_call *call)
{
    generate(call, SVC_API_OPENAI_CHAT);
}

static void route_completions(svc_call *call)
{
    generate(call, SVC_API_OPENAI_COMPLETIONS);
}

static void route_models(svc_call *call)
{
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "object");
    json_builder_add_string_value(b, "list");
    json_builder_set_member_name(b, "data");
    json_builder_begin_array(b);
    GPtrArray *models = svc_api_list_models(svc_call_server(call));
    for (guint i = 0; i < models->len; i++) {
        const svc_api_model_info *mi = g_ptr_array_index(models, i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "id");
        json_builder_add_string_value(b, mi->name);
        json_builder_set_member_name(b, "object");
        json_builder_add_string_value(b, "model");
        json_builder_set_member_name(b, "created");
        json_builder_add_int_value(b, mi->created);
        json_builder_set_member_name(b, "owned_by");
        json_builder_add_string_value(b, mi->owned_by);
        json_builder_end_object(b);
    }
    g_ptr_array_unref(models);
    json_builder_end_array(b);
    json_builder_end_object(b);
    svc_call_reply_json(call, 200, svc_json_take(b));
}

void svc_openai_register(svc_server *srv)
{
    svc_server_add_route(srv, "GET", "/v1/models", 0, SVC_STYLE_OPENAI, route_models);
    svc_server_add_route(srv, "POST", "/v1/chat/completions", SVC_ROUTE_METERED,
                         SVC_STYLE_OPENAI, route_chat);
    svc_server_add_route(srv, "POST", "/v1/completions", SVC_ROUTE_METERED, SVC_STYLE_OPENAI,
                         route_completions);
    /* llama.cpp's server offers the same under /chat/completions too. */
    svc_server_add_route(srv, "POST", "/chat/completions", SVC_ROUTE_METERED, SVC_STYLE_OPENAI,
                         route_chat);
}

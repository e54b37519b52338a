/*
 * api-ollama.c — Ollama's generation endpoints, for the editor plugins that
 * speak only Ollama (Continue, Copilot Chat BYOK, Cline, Roo, Zed):
 *
 *   POST /api/chat      messages (+ tools) through the chat template
 *   POST /api/generate  a prompt through the chat template as one user turn
 *                       (with `system`), as is with `raw`, or fill in the
 *                       middle with `suffix` (the model's FIM tokens)
 *
 * Both stream NDJSON by default (one object per line, `"done": false`),
 * or answer one object with `"stream": false`; the last object carries
 * done_reason and Ollama's counts and durations in nanoseconds. Tool calls
 * come back as message.tool_calls with `arguments` as a JSON object (not
 * OpenAI's string).
 *
 * Context: `options.num_ctx` narrows the context a request may use (it
 * cannot widen the loaded model's per-request context). A prompt that does
 * not fit is a 400 naming both sizes — never the silent truncation Ollama
 * itself does; num_predict is capped to what is left, so a long answer ends
 * with done_reason "length".
 *
 * Streams begin with the first text, so an error found when the request is
 * submitted (queue full, context) still gets its HTTP status.
 */
#include "api-ollama.h"
#include "job.h"

#include <string.h>

typedef struct oll_state {
    gboolean chat;
    gboolean stream;
    char *model;     /* the name the client sent, echoed in every object */
    gint64 load_ns;  /* time spent loading the model for this request    */
} oll_state;

static void oll_state_free(gpointer p)
{
    oll_state *s = p;
    g_free(s->model);
    g_free(s);
}

char *svc_ollama_time(gint64 unix_us)
{
    GDateTime *t = g_date_time_new_from_unix_utc(unix_us / G_USEC_PER_SEC);
    if (!t)
        return g_strdup("1970-01-01T00:00:00Z");
    char *base = g_date_time_format(t, "%Y-%m-%dT%H:%M:%S");
    g_date_time_unref(t);
    char *s = g_strdup_printf("%s.%06dZ", base, (int)(unix_us % G_USEC_PER_SEC));
    g_free(base);
    return s;
}

gboolean svc_ollama_name_matches(const char *want, const char *have)
{
    if (!want || !have)
        return FALSE;
    if (!g_ascii_strcasecmp(want, have))
        return TRUE;
    size_t n = strlen(have);
    return g_ascii_strncasecmp(want, have, n) == 0 && !g_ascii_strcasecmp(want + n, ":latest");
}

char *svc_ollama_tagged_name(const char *name)
{
    const char *slash = strrchr(name, '/');
    if (strchr(slash ? slash : name, ':'))
        return g_strdup(name);
    return g_strconcat(name, ":latest", NULL);
}

/* {"model": .., "created_at": .., — the caller adds the rest and closes. */
static JsonBuilder *begin_object(const char *model)
{
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "model");
    json_builder_add_string_value(b, model);
    json_builder_set_member_name(b, "created_at");
    char *now = svc_ollama_time(g_get_real_time());
    json_builder_add_string_value(b, now);
    g_free(now);
    return b;
}

/* "message": {"role": "assistant", "content": text[, "tool_calls": [...]]} */
static void add_message(JsonBuilder *b, const char *text, gsize len, const svc_tool_parse *tp)
{
    json_builder_set_member_name(b, "message");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "role");
    json_builder_add_string_value(b, "assistant");
    json_builder_set_member_name(b, "content");
    char *t = g_strndup(text, len);
    json_builder_add_string_value(b, t);
    g_free(t);
    if (tp && tp->n_calls) {
        json_builder_set_member_name(b, "tool_calls");
        json_builder_begin_array(b);
        for (size_t i = 0; i < tp->n_calls; i++) {
            json_builder_begin_object(b);
            char *id = svc_job_new_id("call_");
            json_builder_set_member_name(b, "id");
            json_builder_add_string_value(b, id);
            g_free(id);
            json_builder_set_member_name(b, "function");
            json_builder_begin_object(b);
            json_builder_set_member_name(b, "index");
            json_builder_add_int_value(b, (gint64)i);
            json_builder_set_member_name(b, "name");
            json_builder_add_string_value(b, tp->calls[i].name);
            /* Ollama sends arguments as an object; the parser gives JSON
             * object text, so this only falls back on a broken call. */
            json_builder_set_member_name(b, "arguments");
            JsonNode *args = svc_json_parse(tp->calls[i].arguments, -1, NULL);
            if (args && JSON_NODE_HOLDS_OBJECT(args)) {
                json_builder_add_value(b, args);
            } else {
                if (args)
                    json_node_unref(args);
                json_builder_begin_object(b);
                json_builder_end_object(b);
            }
            json_builder_end_object(b);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
    }
    json_builder_end_object(b);
}

/* done_reason, done and Ollama's counts; durations in nanoseconds. The
 * prompt is timed from admission to the first token, generation from the
 * first token to the end. */
static void add_final(JsonBuilder *b, svc_job *job, const svc_gen_result *r)
{
    oll_state *s = svc_job_user(job);
    svc_call *call = svc_job_call(job);
    gint64 total_us = g_get_monotonic_time() - svc_call_start_us(call);
    int64_t first = r->ttft_us >= 0 ? r->ttft_us : r->total_us;
    int64_t prompt_us = MAX(0, first - r->queue_us);
    int64_t eval_us = MAX(0, r->total_us - first);
    json_builder_set_member_name(b, "done_reason");
    json_builder_add_string_value(b, r->finish == MOE_FINISH_LENGTH ? "length" : "stop");
    json_builder_set_member_name(b, "done");
    json_builder_add_boolean_value(b, TRUE);
    json_builder_set_member_name(b, "total_duration");
    json_builder_add_int_value(b, total_us * 1000);
    json_builder_set_member_name(b, "load_duration");
    json_builder_add_int_value(b, s->load_ns);
    json_builder_set_member_name(b, "prompt_eval_count");
    json_builder_add_int_value(b, r->n_prompt);
    json_builder_set_member_name(b, "prompt_eval_duration");
    json_builder_add_int_value(b, prompt_us * 1000);
    json_builder_set_member_name(b, "eval_count");
    json_builder_add_int_value(b, r->n_completion);
    json_builder_set_member_name(b, "eval_duration");
    json_builder_add_int_value(b, eval_us * 1000);
}

static void ensure_stream(svc_call *call)
{
    svc_call_stream_begin(call, 200, "application/x-ndjson");
}

/* ---- job events ------------------------------------------------------------------- */

static void on_delta(svc_job *job, const char *text, size_t len, int32_t token,
                     const moe_token_prob *probs, size_t n_probs)
{
    (void)token;
    (void)probs;
    (void)n_probs;
    oll_state *s = svc_job_user(job);
    if (!s->stream || !len)
        return;
    svc_call *call = svc_job_call(job);
    ensure_stream(call);
    JsonBuilder *b = begin_object(s->model);
    if (s->chat) {
        add_message(b, text, len, NULL);
    } else {
        json_builder_set_member_name(b, "response");
        char *t = g_strndup(text, len);
        json_builder_add_string_value(b, t);
        g_free(t);
    }
    json_builder_set_member_name(b, "done");
    json_builder_add_boolean_value(b, FALSE);
    json_builder_end_object(b);
    svc_call_stream_json(call, svc_json_take(b));
}

static void on_done(svc_job *job, const svc_gen_result *r)
{
    oll_state *s = svc_job_user(job);
    svc_call *call = svc_job_call(job);
    if (r->error) {
        /* Before the first line: a status and {"error"}; after it: an
         * {"error"} line, which Ollama's clients raise as an error. */
        if (!svc_call_is_gone(call))
            svc_call_reply_gerror(call, r->error);
        return;
    }
    const svc_tool_parse *tp = svc_job_tools(job);
    gsize len = 0;
    const char *text = svc_job_text(job, &len);
    if (s->stream) {
        ensure_stream(call);
        if (s->chat && tp->n_calls) {
            /* Ollama sends the calls in a chunk of their own, then the end. */
            JsonBuilder *b = begin_object(s->model);
            add_message(b, "", 0, tp);
            json_builder_set_member_name(b, "done");
            json_builder_add_boolean_value(b, FALSE);
            json_builder_end_object(b);
            svc_call_stream_json(call, svc_json_take(b));
        }
        text = "";
        len = 0;
        tp = NULL;
    }
    JsonBuilder *b = begin_object(s->model);
    if (s->chat) {
        add_message(b, text, len, tp);
    } else {
        json_builder_set_member_name(b, "response");
        char *t = g_strndup(text, len);
        json_builder_add_string_value(b, t);
        g_free(t);
    }
    add_final(b, job, r);
    json_builder_end_object(b);
    if (s->stream) {
        svc_call_stream_json(call, svc_json_take(b));
        svc_call_stream_end(call);
    } else {
        svc_call_reply_json(call, 200, svc_json_take(b));
    }
}

/* ---- requests ----------------------------------------------------------------------- */

/* An empty chat or prompt loads the model (done_reason "load"); with
 * keep_alive 0 it unloads it instead, without loading it first. */
static void answer_load(svc_call *call, const svc_request *req, gboolean chat, gboolean unload)
{
    svc_server *srv = svc_call_server(call);
    if (unload) {
        svc_model *cur = svc_server_current_model(srv);
        if (cur && (!req->model || svc_ollama_name_matches(req->model, cur->name)))
            svc_server_unload_model(srv);
    }
    svc_call_set_finish_reason(call, unload ? "unload" : "load");
    JsonBuilder *b = begin_object(req->model ? req->model : "");
    if (chat) {
        add_message(b, "", 0, NULL);
    } else {
        json_builder_set_member_name(b, "response");
        json_builder_add_string_value(b, "");
    }
    json_builder_set_member_name(b, "done_reason");
    json_builder_add_string_value(b, unload ? "unload" : "load");
    json_builder_set_member_name(b, "done");
    json_builder_add_boolean_value(b, TRUE);
    json_builder_end_object(b);
    if (req->stream) {
        ensure_stream(call);
        svc_call_stream_json(call, svc_json_take(b));
        svc_call_stream_end(call);
    } else {
        svc_call_reply_json(call, 200, svc_json_take(b));
    }
}

/* Prompt errors: the request's fault, except a tokenizer failure. */
static void reply_prompt_error(svc_call *call, const char *param, const GError *e)
{
    if (e->domain == SVC_PROMPT_ERROR && e->code == SVC_PROMPT_ERROR_TOKENIZE)
        svc_call_reply_error(call, 500, "server_error", param, NULL, "%s", e->message);
    else
        svc_call_reply_error(call, 400, "invalid_request_error", param, NULL, "%s", e->message);
}

/* /api/generate without raw: the prompt (and system) as a one-turn chat. */
static gboolean generate_as_chat(svc_prompt_model *pm, const svc_request *req, GArray **tokens,
                                 GError **e)
{
    JsonArray *msgs = json_array_new();
    if (req->system && *req->system) {
        JsonObject *o = json_object_new();
        json_object_set_string_member(o, "role", "system");
        json_object_set_string_member(o, "content", req->system);
        json_array_add_object_element(msgs, o);
    }
    JsonObject *o = json_object_new();
    json_object_set_string_member(o, "role", "user");
    json_object_set_string_member(o, "content", req->prompt ? req->prompt : "");
    json_array_add_object_element(msgs, o);
    gboolean ok = svc_prompt_chat(pm, msgs, NULL, req->template_kwargs, tokens, NULL, e);
    json_array_unref(msgs);
    return ok;
}

/* Builds the prompt for `api`; FALSE after answering the call. */
static gboolean build_prompt(svc_call *call, svc_model *m, svc_request *req, svc_api api,
                             GArray **tokens)
{
    GError *e = NULL;
    svc_prompt_model *pm = svc_prompt_for_model(m, &e);
    if (!pm) {
        svc_call_reply_error(call, 500, "server_error", NULL, NULL, "%s", e->message);
        g_error_free(e);
        return FALSE;
    }
    gboolean ok;
    const char *param = "prompt";
    if (api == SVC_API_OLLAMA_CHAT) {
        param = "messages";
        if (req->tools && json_array_get_length(req->tools) > 0 &&
            !svc_prompt_supports_tools(pm)) {
            /* As Ollama answers: a client then retries without tools. */
            svc_call_reply_error(call, 400, "invalid_request_error", "tools", "unsupported",
                                 "%s does not support tools (its chat template has no tool-call "
                                 "format MoeDesk can read back)",
                                 req->model ? req->model : m->name);
            return FALSE;
        }
        ok = svc_prompt_chat(pm, req->messages, req->tools, req->template_kwargs, tokens, NULL,
                             &e);
    } else if (req->suffix && *req->suffix) {
        param = "suffix";
        if (!svc_prompt_supports_fim(pm)) {
            char *missing = svc_api_fim_missing(pm);
            svc_call_reply_error(call, 400, "invalid_request_error", "suffix", "unsupported",
                                 "%s does not support insert: its vocabulary has no "
                                 "fill-in-the-middle tokens (missing %s)",
                                 req->model ? req->model : m->name, missing);
            g_free(missing);
            return FALSE;
        }
        ok = svc_prompt_fim(pm, req->prompt ? req->prompt : "", req->suffix, NULL, tokens, &e);
    } else if (req->raw) {
        ok = svc_api_prompt_tokens(pm, req, tokens, &e);
    } else {
        ok = generate_as_chat(pm, req, tokens, &e);
    }
    if (!ok) {
        reply_prompt_error(call, param, e);
        g_error_free(e);
        return FALSE;
    }
    return TRUE;
}

/* options.num_ctx and the loaded context: the prompt must fit with room
 * for one token; num_predict is capped to what is left. FALSE after
 * answering the call. */
static gboolean fit_context(svc_call *call, svc_model *m, svc_request *req, guint n_prompt)
{
    int64_t ctx = m->n_ctx_per_seq;
    gboolean narrowed = req->num_ctx > 0 && req->num_ctx < ctx;
    if (narrowed)
        ctx = req->num_ctx;
    if ((int64_t)n_prompt >= ctx) {
        if (narrowed)
            svc_call_reply_error(call, 400, "invalid_request_error", "options.num_ctx",
                                 "context_length_exceeded",
                                 "the prompt is %u tokens, which does not fit options.num_ctx "
                                 "(%d tokens) with room for an answer; raise num_ctx (up to %d "
                                 "here) or shorten the prompt",
                                 n_prompt, req->num_ctx, m->n_ctx_per_seq);
        else
            svc_call_reply_error(call, 400, "invalid_request_error", NULL,
                                 "context_length_exceeded",
                                 "the prompt is %u tokens, which does not fit the %d-token "
                                 "context the loaded model serves per request%s; shorten the "
                                 "prompt",
                                 n_prompt, m->n_ctx_per_seq,
                                 req->num_ctx > m->n_ctx_per_seq
                                     ? " (options.num_ctx cannot raise it beyond that)"
                                     : "");
        return FALSE;
    }
    int64_t room = ctx - (int64_t)n_prompt;
    if (req->max_tokens < 0 || req->max_tokens > room)
        req->max_tokens = room;
    return TRUE;
}

static void generate(svc_call *call, svc_api api)
{
    gsize body_len;
    const char *body = svc_call_body(call, &body_len);
    svc_request *req = NULL;
    svc_request_error rerr;
    if (!svc_request_parse(api, body, body_len, &req, &rerr)) {
        svc_call_reply_error(call, rerr.status, rerr.type[0] ? rerr.type : "invalid_request_error",
                             rerr.param[0] ? rerr.param : NULL, rerr.code[0] ? rerr.code : NULL,
                             "%s", rerr.message);
        return;
    }
    gboolean chat = api == SVC_API_OLLAMA_CHAT;
    svc_call_set_model(call, req->model);
    gboolean unload = req->has_keep_alive && req->keep_alive_ms == 0;
    if (req->load_only && unload) {
        answer_load(call, req, chat, TRUE);
        svc_request_free(req);
        return;
    }
    /* "NAME:latest" of the loaded model is served here, whatever an
     * upstream's name patterns say. */
    svc_model *cur = svc_server_current_model(svc_call_server(call));
    gboolean local = cur && req->model && svc_ollama_name_matches(req->model, cur->name);
    if (!local && svc_api_try_upstream(call, req, api)) {
        svc_request_free(req);
        return;
    }
    GError *e = NULL;
    gint64 t0 = g_get_monotonic_time();
    svc_model *m = svc_server_acquire_model(svc_call_server(call), req->model, &e);
    gint64 load_ns = (g_get_monotonic_time() - t0) * 1000;
    if (!m) {
        svc_call_reply_gerror(call, e);
        g_error_free(e);
        svc_request_free(req);
        return;
    }
    svc_call_set_model(call, m->name);
    if (req->load_only) {
        answer_load(call, req, chat, FALSE);
        svc_model_unref(m);
        svc_request_free(req);
        return;
    }
    GArray *tokens = NULL;
    if (!build_prompt(call, m, req, api, &tokens) || !fit_context(call, m, req, tokens->len)) {
        if (tokens)
            g_array_unref(tokens);
        svc_model_unref(m);
        svc_request_free(req);
        return;
    }
    oll_state *s = g_new0(oll_state, 1);
    s->chat = chat;
    s->stream = req->stream;
    s->model = g_strdup(req->model ? req->model : m->name);
    s->load_ns = load_ns;
    /* Replies echo the name as sent; the usage row gets the model's own
     * name, so "NAME" and "NAME:latest" add up in the weekly report. */
    g_free(req->model);
    req->model = g_strdup(m->name);
    static const svc_job_events ev = {on_delta, on_done};
    svc_job_start(call, m, req, tokens, &ev, s, oll_state_free);
}

static void route_chat(svc_call *call)
{
    generate(call, SVC_API_OLLAMA_CHAT);
}

static void route_generate(svc_call *call)
{
    generate(call, SVC_API_OLLAMA_GENERATE);
}

void svc_ollama_register(svc_server *srv)
{
    svc_server_add_route(srv, "POST", "/api/chat", SVC_ROUTE_METERED, SVC_STYLE_OLLAMA,
                         route_chat);
    svc_server_add_route(srv, "POST", "/api/generate", SVC_ROUTE_METERED, SVC_STYLE_OLLAMA,
                         route_generate);
    svc_ollama_register_models(srv);
}

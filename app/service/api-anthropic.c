/*
 * api-anthropic.c — the Anthropic Messages API: POST /v1/messages (one
 * message object, or the event stream message_start, content_block_start /
 * _delta / _stop, message_delta, message_stop) and
 * POST /v1/messages/count_tokens. Tool calls come back as tool_use blocks
 * with `input` objects. Usage follows Anthropic's split: input_tokens are
 * the prompt tokens evaluated, cache_read_input_tokens the ones prefix
 * reuse skipped.
 */
#include "api.h"
#include "job.h"

#include <string.h>

typedef struct msg_state {
    char *id;
    gboolean stream;
    gboolean block_open; /* a text content block has been started */
    gint block_index;
} msg_state;

static void msg_state_free(gpointer p)
{
    msg_state *s = p;
    g_free(s->id);
    g_free(s);
}

static const char *stop_reason(svc_job *job, const svc_gen_result *r)
{
    if (svc_job_tools(job)->n_calls)
        return "tool_use";
    if (r->finish == MOE_FINISH_LENGTH)
        return "max_tokens";
    if (r->finish == MOE_FINISH_STOP && r->stop_index >= 0)
        return "stop_sequence";
    return "end_turn";
}

static void add_stop_sequence(JsonBuilder *b, svc_job *job, const svc_gen_result *r)
{
    const svc_request *req = svc_job_request(job);
    json_builder_set_member_name(b, "stop_sequence");
    if (r->finish == MOE_FINISH_STOP && r->stop_index >= 0 &&
        (size_t)r->stop_index < req->n_stops)
        json_builder_add_string_value(b, req->stops[r->stop_index]);
    else
        json_builder_add_null_value(b);
}

static void add_usage(JsonBuilder *b, gint64 prompt, gint64 cached, gint64 output)
{
    json_builder_set_member_name(b, "usage");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "input_tokens");
    json_builder_add_int_value(b, prompt - cached);
    json_builder_set_member_name(b, "cache_creation_input_tokens");
    json_builder_add_int_value(b, 0);
    json_builder_set_member_name(b, "cache_read_input_tokens");
    json_builder_add_int_value(b, cached);
    json_builder_set_member_name(b, "output_tokens");
    json_builder_add_int_value(b, output);
    json_builder_end_object(b);
}

/* A tool_use block; `input` parsed from the call's JSON arguments. */
static void add_tool_use(JsonBuilder *b, const svc_tool_call *c, gboolean empty_input)
{
    char *id = svc_job_new_id("toolu_");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "tool_use");
    json_builder_set_member_name(b, "id");
    json_builder_add_string_value(b, id);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, c->name);
    json_builder_set_member_name(b, "input");
    JsonNode *input = empty_input ? NULL : svc_json_parse(c->arguments, -1, NULL);
    if (input && JSON_NODE_HOLDS_OBJECT(input)) {
        json_builder_add_value(b, input);
    } else {
        if (input)
            json_node_unref(input);
        json_builder_begin_object(b);
        json_builder_end_object(b);
    }
    json_builder_end_object(b);
    g_free(id);
}

/* ---- stream ------------------------------------------------------------------- */

static void open_text_block(svc_call *call, msg_state *s)
{
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "content_block_start");
    json_builder_set_member_name(b, "index");
    json_builder_add_int_value(b, s->block_index);
    json_builder_set_member_name(b, "content_block");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "text");
    json_builder_set_member_name(b, "text");
    json_builder_add_string_value(b, "");
    json_builder_end_object(b);
    json_builder_end_object(b);
    svc_call_stream_event(call, "content_block_start", svc_json_take(b));
    s->block_open = TRUE;
}

static void close_block(svc_call *call, msg_state *s)
{
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "content_block_stop");
    json_builder_set_member_name(b, "index");
    json_builder_add_int_value(b, s->block_index);
    json_builder_end_object(b);
    svc_call_stream_event(call, "content_block_stop", svc_json_take(b));
    s->block_open = FALSE;
    s->block_index++;
}

static void stream_delta(svc_job *job, const char *text, size_t len, int32_t token,
                         const moe_token_prob *probs, size_t n_probs)
{
    (void)token;
    (void)probs;
    (void)n_probs;
    msg_state *s = svc_job_user(job);
    svc_call *call = svc_job_call(job);
    if (!len)
        return;
    if (!s->block_open)
        open_text_block(call, s);
    char *t = g_strndup(text, len);
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "content_block_delta");
    json_builder_set_member_name(b, "index");
    json_builder_add_int_value(b, s->block_index);
    json_builder_set_member_name(b, "delta");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "text_delta");
    json_builder_set_member_name(b, "text");
    json_builder_add_string_value(b, t);
    json_builder_end_object(b);
    json_builder_end_object(b);
    svc_call_stream_event(call, "content_block_delta", svc_json_take(b));
    g_free(t);
}

static void stream_done(svc_job *job, const svc_gen_result *r)
{
    msg_state *s = svc_job_user(job);
    svc_call *call = svc_job_call(job);
    if (r->error) {
        if (!svc_call_is_gone(call))
            svc_call_reply_gerror(call, r->error);
        return;
    }
    if (s->block_open)
        close_block(call, s);
    const svc_tool_parse *tp = svc_job_tools(job);
    for (size_t i = 0; i < tp->n_calls; i++) {
        /* content_block_start with an empty input, the arguments as one
         * input_json_delta, then content_block_stop — as Anthropic streams. */
        JsonBuilder *b = json_builder_new();
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "type");
        json_builder_add_string_value(b, "content_block_start");
        json_builder_set_member_name(b, "index");
        json_builder_add_int_value(b, s->block_index);
        json_builder_set_member_name(b, "content_block");
        add_tool_use(b, &tp->calls[i], TRUE);
        json_builder_end_object(b);
        svc_call_stream_event(call, "content_block_start", svc_json_take(b));
        b = json_builder_new();
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "type");
        json_builder_add_string_value(b, "content_block_delta");
        json_builder_set_member_name(b, "index");
        json_builder_add_int_value(b, s->block_index);
        json_builder_set_member_name(b, "delta");
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "type");
        json_builder_add_string_value(b, "input_json_delta");
        json_builder_set_member_name(b, "partial_json");
        json_builder_add_string_value(b, tp->calls[i].arguments);
        json_builder_end_object(b);
        json_builder_end_object(b);
        svc_call_stream_event(call, "content_block_delta", svc_json_take(b));
        close_block(call, s);
    }
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "message_delta");
    json_builder_set_member_name(b, "delta");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "stop_reason");
    json_builder_add_string_value(b, stop_reason(job, r));
    add_stop_sequence(b, job, r);
    json_builder_end_object(b);
    add_usage(b, r->n_prompt, r->n_cached, r->n_completion);
    json_builder_end_object(b);
    svc_call_stream_event(call, "message_delta", svc_json_take(b));
    b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "message_stop");
    json_builder_end_object(b);
    svc_call_stream_event(call, "message_stop", svc_json_take(b));
    svc_call_stream_end(call);
}

static void begin_message(JsonBuilder *b, const char *id, const char *model)
{
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "id");
    json_builder_add_string_value(b, id);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "message");
    json_builder_set_member_name(b, "role");
    json_builder_add_string_value(b, "assistant");
    json_builder_set_member_name(b, "model");
    json_builder_add_string_value(b, model);
}

static void whole_done(svc_job *job, const svc_gen_result *r)
{
    msg_state *s = svc_job_user(job);
    svc_call *call = svc_job_call(job);
    if (r->error) {
        if (!svc_call_is_gone(call))
            svc_call_reply_gerror(call, r->error);
        return;
    }
    const svc_request *req = svc_job_request(job);
    JsonBuilder *b = json_builder_new();
    begin_message(b, s->id, req->model ? req->model : svc_job_model(job)->name);
    json_builder_set_member_name(b, "content");
    json_builder_begin_array(b);
    gsize len;
    const char *text = svc_job_text(job, &len);
    const svc_tool_parse *tp = svc_job_tools(job);
    if (len || !tp->n_calls) {
        char *t = g_strndup(text, len);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "type");
        json_builder_add_string_value(b, "text");
        json_builder_set_member_name(b, "text");
        json_builder_add_string_value(b, t);
        json_builder_end_object(b);
        g_free(t);
    }
    for (size_t i = 0; i < tp->n_calls; i++)
        add_tool_use(b, &tp->calls[i], FALSE);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "stop_reason");
    json_builder_add_string_value(b, stop_reason(job, r));
    add_stop_sequence(b, job, r);
    add_usage(b, r->n_prompt, r->n_cached, r->n_completion);
    json_builder_end_object(b);
    svc_call_reply_json(call, 200, svc_json_take(b));
}

/* ---- handlers --------------------------------------------------------------------- */

/* Parses, picks the model and builds the prompt; NULL after answering. */
static svc_request *prepare(svc_call *call, svc_model **model, GArray **tokens)
{
    gsize len;
    const char *body = svc_call_body(call, &len);
    svc_request *req = NULL;
    svc_request_error rerr;
    if (!svc_request_parse(SVC_API_ANTHROPIC_MESSAGES, body, len, &req, &rerr)) {
        svc_call_reply_error(call, rerr.status, rerr.type[0] ? rerr.type : "invalid_request_error",
                             rerr.param[0] ? rerr.param : NULL, rerr.code[0] ? rerr.code : NULL,
                             "%s", rerr.message);
        return NULL;
    }
    svc_call_set_model(call, req->model);
    GError *e = NULL;
    svc_model *m = svc_server_acquire_model(svc_call_server(call), req->model, &e);
    if (!m) {
        svc_call_reply_gerror(call, e);
        g_error_free(e);
        svc_request_free(req);
        return NULL;
    }
    svc_prompt_model *pm = svc_prompt_for_model(m, &e);
    if (!pm || !svc_prompt_chat(pm, req->messages, req->tools, req->template_kwargs, tokens, NULL,
                                &e)) {
        svc_call_reply_error(call, 400, "invalid_request_error", "messages", NULL, "%s",
                             e->message);
        g_error_free(e);
        svc_model_unref(m);
        svc_request_free(req);
        return NULL;
    }
    *model = m;
    return req;
}

static void route_messages(svc_call *call)
{
    svc_model *m = NULL;
    GArray *tokens = NULL;
    svc_request *req = prepare(call, &m, &tokens);
    if (!req)
        return;
    msg_state *s = g_new0(msg_state, 1);
    s->id = svc_job_new_id("msg_");
    s->stream = req->stream;
    static const svc_job_events stream_ev = {stream_delta, stream_done};
    static const svc_job_events whole_ev = {NULL, whole_done};
    if (s->stream) {
        svc_call_stream_begin(call, 200, "text/event-stream");
        JsonBuilder *b = json_builder_new();
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "type");
        json_builder_add_string_value(b, "message_start");
        json_builder_set_member_name(b, "message");
        begin_message(b, s->id, req->model ? req->model : m->name);
        json_builder_set_member_name(b, "content");
        json_builder_begin_array(b);
        json_builder_end_array(b);
        json_builder_set_member_name(b, "stop_reason");
        json_builder_add_null_value(b);
        json_builder_set_member_name(b, "stop_sequence");
        json_builder_add_null_value(b);
        add_usage(b, tokens->len, 0, 0);
        json_builder_end_object(b);
        json_builder_end_object(b);
        svc_call_stream_event(call, "message_start", svc_json_take(b));
        svc_call_stream_write(call, "event: ping\ndata: {\"type\": \"ping\"}\n\n", -1);
    }
    svc_job_start(call, m, req, tokens, s->stream ? &stream_ev : &whole_ev, s, msg_state_free);
}

static void route_count_tokens(svc_call *call)
{
    svc_model *m = NULL;
    GArray *tokens = NULL;
    svc_request *req = prepare(call, &m, &tokens);
    if (!req)
        return;
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "input_tokens");
    json_builder_add_int_value(b, tokens->len);
    json_builder_end_object(b);
    svc_call_reply_json(call, 200, svc_json_take(b));
    g_array_unref(tokens);
    svc_model_unref(m);
    svc_request_free(req);
}

void svc_anthropic_register(svc_server *srv)
{
    svc_server_add_route(srv, "POST", "/v1/messages", SVC_ROUTE_METERED, SVC_STYLE_ANTHROPIC,
                         route_messages);
    svc_server_add_route(srv, "POST", "/v1/messages/count_tokens", 0, SVC_STYLE_ANTHROPIC,
                         route_count_tokens);
}

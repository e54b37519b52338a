/*
 * request-openai.c — OpenAI's POST /v1/chat/completions and
 * /v1/completions bodies. Ranges are OpenAI's (temperature 0..2, top_p
 * 0..1, penalties -2..2, logit bias -100..100, top_logprobs 0..20); stop
 * lists may hold SVC_REQUEST_MAX_STOPS strings (OpenAI allows 4). top_k,
 * min_p and repeat_penalty are accepted as extensions, as vLLM and
 * llama.cpp do. Accepted but ignored: user, metadata, store, service_tier,
 * modalities, prediction, audio, web_search_options, safety_identifier,
 * prompt_cache_key, verbosity, functions/function_call (the deprecated
 * form of tools).
 */
#include "request-internal.h"

#include <string.h>

static gboolean response_format(rq_ctx *c, JsonObject *o)
{
    JsonObject *rf = NULL;
    if (!rq_object(c, o, "", "response_format", &rf))
        return FALSE;
    if (!rf)
        return TRUE;
    const char *type = rq_member_string(rf, "type");
    if (!type)
        return rq_fail(c, "response_format.type", "invalid_type",
                       "'response_format.type' must be a string");
    if (strcmp(type, "text") == 0) {
        c->r->response_format = SVC_RESPONSE_TEXT;
    } else if (strcmp(type, "json_object") == 0) {
        c->r->response_format = SVC_RESPONSE_JSON_OBJECT;
    } else if (strcmp(type, "json_schema") == 0) {
        /* The schema is kept for the prompt; the output is held to valid
         * JSON, not to the schema (see DESIGN.md "Request parsing"). */
        JsonObject *js = NULL;
        if (!rq_object(c, rf, "response_format.", "json_schema", &js))
            return FALSE;
        JsonNode *schema = js ? rq_member(js, "schema") : NULL;
        if (schema && !JSON_NODE_HOLDS_OBJECT(schema))
            return rq_fail(c, "response_format.json_schema.schema", "invalid_type",
                           "'response_format.json_schema.schema' must be an object");
        c->r->response_format = schema ? SVC_RESPONSE_JSON_SCHEMA : SVC_RESPONSE_JSON_OBJECT;
        if (schema)
            c->r->json_schema = json_node_copy(schema);
    } else {
        return rq_fail(c, "response_format.type", "invalid_value", "'response_format.type' must"
                       " be \"text\", \"json_object\" or \"json_schema\" (got \"%.32s\")", type);
    }
    return TRUE;
}

/* The fields both endpoints share. */
static gboolean openai_common(rq_ctx *c, JsonObject *o)
{
    svc_request *r = c->r;
    moe_sampler_params *s = &r->sampling;
    int64_t v = 0;
    bool given = false;

    if (!rq_model(c, o, true) || !rq_bool(c, o, "", "stream", &r->stream))
        return FALSE;
    JsonObject *so = NULL;
    if (!rq_object(c, o, "", "stream_options", &so) ||
        !rq_bool(c, so, "stream_options.", "include_usage", &r->include_usage))
        return FALSE;

    if (!rq_float_field(c, o, "", "temperature", 0, 2, &s->temperature) ||
        !rq_float_field(c, o, "", "top_p", 0, 1, &s->top_p) ||
        !rq_float_field(c, o, "", "presence_penalty", -2, 2, &s->presence_penalty) ||
        !rq_float_field(c, o, "", "frequency_penalty", -2, 2, &s->frequency_penalty) ||
        !rq_float_field(c, o, "", "min_p", 0, 1, &s->min_p) ||
        !rq_float_field(c, o, "", "repeat_penalty", 0.0001, 100, &s->repeat_penalty))
        return FALSE;
    if (!rq_int(c, o, "", "top_k", G_MININT32, G_MAXINT32, &v, &given))
        return FALSE;
    if (given)
        s->top_k = (int32_t)v;

    if (!rq_int(c, o, "", "seed", INT64_MIN, INT64_MAX, &v, &r->has_seed))
        return FALSE;
    if (r->has_seed)
        s->seed = (uint64_t)v; /* two's complement: every int64 is a seed */

    if (!rq_int(c, o, "", "n", 1, INT64_MAX, &v, &given))
        return FALSE;
    if (given && v != 1)
        return rq_fail(c, "n", "unsupported_value", "'n' must be 1: one choice per request"
                       " (got %" G_GINT64_FORMAT ")", (gint64)v);

    if (!rq_int(c, o, "", "max_tokens", 1, INT64_MAX, &r->max_tokens, NULL) ||
        !rq_int(c, o, "", "max_completion_tokens", 1, INT64_MAX, &r->max_tokens, NULL))
        return FALSE;
    return rq_stops(c, o, "", "stop") && rq_logit_bias(c, o, "", -100, 100) &&
           response_format(c, o);
}

gboolean rq_parse_openai_chat(rq_ctx *c, JsonObject *o)
{
    svc_request *r = c->r;
    int64_t v = 0;
    bool given = false;
    if (!openai_common(c, o) || !rq_openai_messages(c, o) || !rq_openai_tools(c, o) ||
        !rq_openai_tool_choice(c, o) || !rq_check_tool_choice(c) ||
        !rq_bool(c, o, "", "parallel_tool_calls", &r->parallel_tool_calls) ||
        !rq_template_kwargs(c, o))
        return FALSE;

    if (!rq_bool(c, o, "", "logprobs", &r->logprobs) ||
        !rq_int(c, o, "", "top_logprobs", 0, 20, &v, &given))
        return FALSE;
    if (given)
        r->top_logprobs = (int32_t)v;
    r->n_probs = r->logprobs ? MAX(r->top_logprobs, 1) : 0;

    g_autofree char *effort = NULL;
    if (!rq_string(c, o, "", "reasoning_effort", &effort))
        return FALSE;
    if (effort)
        rq_set_think(r, strcmp(effort, "none") == 0 ? SVC_THINK_OFF : SVC_THINK_ON, effort);
    return TRUE;
}

gboolean rq_parse_openai_completions(rq_ctx *c, JsonObject *o)
{
    svc_request *r = c->r;
    int64_t v = 0;
    bool given = false;
    if (!openai_common(c, o) || !rq_prompt(c, o, "prompt", true) ||
        !rq_string(c, o, "", "suffix", &r->suffix) || !rq_bool(c, o, "", "echo", &r->echo))
        return FALSE;

    /* legacy logprobs: how many alternatives per token (0..5 at OpenAI) */
    if (!rq_int(c, o, "", "logprobs", 0, 20, &v, &given))
        return FALSE;
    if (given) {
        r->logprobs = true;
        r->top_logprobs = (int32_t)v;
        r->n_probs = MAX((int32_t)v, 1);
    }
    if (!rq_int(c, o, "", "best_of", 1, INT64_MAX, &v, &given))
        return FALSE;
    if (given && v != 1)
        return rq_fail(c, "best_of", "unsupported_value", "'best_of' must be 1 (got %"
                       G_GINT64_FORMAT ")", (gint64)v);
    return TRUE;
}

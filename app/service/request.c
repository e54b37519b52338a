/*
 * request.c — the request parser's entry point: checks that the body is
 * UTF-8 and not nested deeper than SVC_REQUEST_MAX_DEPTH (json-glib's
 * parser recurses once per level, so a body of a million '[' would
 * otherwise overflow the stack), parses it with json-glib, sets the API's
 * defaults and hands the top-level object to the API's reader. Also the
 * request's lifetime and its mapping onto svc_gen_params.
 */
#include "request-internal.h"

#include <stdio.h>
#include <string.h>

static const char *const api_names[SVC_API_COUNT] = {
    [SVC_API_OPENAI_CHAT] = "openai.chat",
    [SVC_API_OPENAI_COMPLETIONS] = "openai.completions",
    [SVC_API_ANTHROPIC_MESSAGES] = "anthropic.messages",
    [SVC_API_OLLAMA_CHAT] = "ollama.chat",
    [SVC_API_OLLAMA_GENERATE] = "ollama.generate",
    [SVC_API_LLAMACPP_COMPLETION] = "llamacpp.completion",
    [SVC_API_LLAMACPP_INFILL] = "llamacpp.infill",
};

const char *svc_api_name(svc_api api)
{
    if ((int)api < 0 || (int)api >= SVC_API_COUNT)
        return NULL;
    return api_names[api];
}

/* Each API's documented sampling defaults (app/DESIGN.md lists them):
 * OpenAI and Anthropic: temperature 1, top_p 1, no top-k/min-p;
 * Ollama: 0.8 / top_k 40 / top_p 0.9 / repeat_penalty 1.1 (its
 * DefaultOptions); llama.cpp server: libmoe's defaults, which are
 * llama.cpp's (0.8 / 40 / 0.95 / min_p 0.05 / repeat 1.0). */
static void request_defaults(svc_request *r, svc_api api)
{
    moe_sampler_params *s = &r->sampling;
    *s = moe_sampler_params_default();
    r->api = api;
    r->max_tokens = -1;
    r->cache_prompt = true;
    r->parallel_tool_calls = true;
    switch (api) {
    case SVC_API_OPENAI_CHAT:
    case SVC_API_OPENAI_COMPLETIONS:
    case SVC_API_ANTHROPIC_MESSAGES:
        s->temperature = 1.0f;
        s->top_k = 0;
        s->top_p = 1.0f;
        s->min_p = 0.0f;
        s->repeat_penalty = 1.0f;
        /* OpenAI's legacy completions stop after 16 tokens unless told */
        if (api == SVC_API_OPENAI_COMPLETIONS)
            r->max_tokens = 16;
        break;
    case SVC_API_OLLAMA_CHAT:
    case SVC_API_OLLAMA_GENERATE:
        s->temperature = 0.8f;
        s->top_k = 40;
        s->top_p = 0.9f;
        s->min_p = 0.0f;
        s->repeat_penalty = 1.1f;
        r->stream = true;
        break;
    case SVC_API_LLAMACPP_COMPLETION:
    case SVC_API_LLAMACPP_INFILL:
        break;
    }
}

/* Byte offset of the first byte that nests deeper than `max`, or -1.
 * Brackets inside strings do not count. */
static gssize depth_breach(const char *s, gsize len, int max)
{
    int depth = 0;
    bool in_str = false;
    for (gsize i = 0; i < len; i++) {
        char ch = s[i];
        if (in_str) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_str = false;
        } else if (ch == '"') {
            in_str = true;
        } else if (ch == '[' || ch == '{') {
            if (++depth > max)
                return (gssize)i;
        } else if (ch == ']' || ch == '}') {
            depth--;
        }
    }
    return -1;
}

/* json-glib says "<data>:LINE:COL: Parse error: WHAT"; say "at line LINE,
 * column COL: WHAT" (or pass the text on when it has another form). */
static gboolean json_fail(rq_ctx *c, const GError *e)
{
    const char *m = e && e->message ? e->message : "unknown error";
    unsigned line = 0, col = 0;
    int used = 0;
    if (g_str_has_prefix(m, "<data>:"))
        m += strlen("<data>:");
    if (sscanf(m, "%u:%u: %n", &line, &col, &used) == 2 && used > 0) {
        m += used;
        if (g_str_has_prefix(m, "Parse error: "))
            m += strlen("Parse error: ");
        return rq_fail(c, NULL, NULL, "the request body is not valid JSON at line %u,"
                       " column %u: %s", line, col, m);
    }
    return rq_fail(c, NULL, NULL, "the request body is not valid JSON: %s", m);
}

static gboolean dispatch(rq_ctx *c, svc_api api, JsonObject *o)
{
    switch (api) {
    case SVC_API_OPENAI_CHAT:
        return rq_parse_openai_chat(c, o);
    case SVC_API_OPENAI_COMPLETIONS:
        return rq_parse_openai_completions(c, o);
    case SVC_API_ANTHROPIC_MESSAGES:
        return rq_parse_anthropic(c, o);
    case SVC_API_OLLAMA_CHAT:
        return rq_parse_ollama_chat(c, o);
    case SVC_API_OLLAMA_GENERATE:
        return rq_parse_ollama_generate(c, o);
    case SVC_API_LLAMACPP_COMPLETION:
    case SVC_API_LLAMACPP_INFILL:
        return rq_parse_llamacpp(c, o);
    }
    return rq_fail(c, NULL, NULL, "unknown API %d", (int)api);
}

gboolean svc_request_parse(svc_api api, const char *body, gsize len,
                           svc_request **out, svc_request_error *err)
{
    svc_request_error scratch;
    rq_ctx c = { .r = NULL, .err = err ? err : &scratch };
    g_return_val_if_fail(out != NULL, FALSE);
    *out = NULL;
    memset(c.err, 0, sizeof *c.err);

    if (!svc_api_name(api))
        return rq_fail(&c, NULL, NULL, "unknown API %d", (int)api);
    if (!body || len == 0)
        return rq_fail(&c, NULL, NULL, "the request body is empty: expected a JSON object");
    if (len > G_MAXSSIZE)
        return rq_fail(&c, NULL, NULL, "the request body is too large");
    const char *bad = NULL;
    if (!g_utf8_validate_len(body, len, &bad))
        return rq_fail(&c, NULL, NULL,
                       "the request body is not valid UTF-8 (byte offset %" G_GSIZE_FORMAT ")",
                       (gsize)(bad - body));
    gssize deep = depth_breach(body, len, SVC_REQUEST_MAX_DEPTH);
    if (deep >= 0)
        return rq_fail(&c, NULL, NULL,
                       "the request body nests deeper than %d levels (byte offset %" G_GSSIZE_FORMAT ")",
                       SVC_REQUEST_MAX_DEPTH, deep);

    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(GError) gerr = NULL;
    if (!json_parser_load_from_data(parser, body, (gssize)len, &gerr))
        return json_fail(&c, gerr);
    JsonNode *root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root))
        return rq_fail(&c, NULL, NULL, "the request body must be a JSON object");

    c.r = g_new0(svc_request, 1);
    request_defaults(c.r, api);
    if (!dispatch(&c, api, json_node_get_object(root))) {
        svc_request_free(c.r);
        return FALSE;
    }
    *out = c.r;
    return TRUE;
}

void svc_request_free(svc_request *r)
{
    if (!r)
        return;
    g_free(r->model);
    g_clear_pointer(&r->messages, json_array_unref);
    g_clear_pointer(&r->tools, json_array_unref);
    g_clear_pointer(&r->tool_choice, json_node_unref);
    g_free(r->prompt);
    g_free(r->prompt_tokens);
    g_free(r->suffix);
    g_free(r->prefix);
    g_clear_pointer(&r->extra, json_array_unref);
    g_free(r->system);
    g_clear_pointer(&r->template_kwargs, json_object_unref);
    g_free(r->reasoning_effort);
    g_strfreev(r->stops);
    g_clear_pointer(&r->json_schema, json_node_unref);
    g_free(r->logit_bias);
    g_free(r);
}

void svc_request_gen_params(const svc_request *r, svc_gen_params *p)
{
    g_return_if_fail(r != NULL && p != NULL);
    p->sampling = r->sampling;
    p->sampling.logit_bias = r->n_logit_bias ? r->logit_bias : NULL;
    p->sampling.n_logit_bias = r->n_logit_bias;
    p->stops = (const char *const *)r->stops;
    p->n_stops = r->n_stops;
    p->max_tokens = r->max_tokens;
    p->ignore_eog = r->ignore_eos;
    p->n_probs = r->n_probs;
}

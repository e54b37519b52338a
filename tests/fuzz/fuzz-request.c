/*
 * fuzz-request.c — libFuzzer target for the service's request parsers
 * (app/service/request.h). The first input byte picks the API (byte % 7;
 * the seeds use '1'..'7' for OpenAI chat .. llama.cpp infill), the rest is
 * the body. An accepted body must give a request that keeps the
 * promises request.h makes (messages in the normalised shape, stop list
 * and prompt bounds, sampling that libmoe's sampler accepts); a refused
 * one a 400 with a message, whose four JSON renderings parse back.
 */
#include "request.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A json-glib or GLib critical (API misuse, e.g. a wrong node type) is a
 * bug in the parser: make it a crash the fuzzer reports. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
    return 0;
}

static void check_json(char *text)
{
    JsonParser *p = json_parser_new();
    if (!text || !json_parser_load_from_data(p, text, -1, NULL))
        abort();
    JsonNode *root = json_parser_get_root(p);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root))
        abort();
    g_object_unref(p);
    g_free(text);
}

static const char *string_member(JsonObject *o, const char *key)
{
    JsonNode *n = json_object_get_member(o, key);
    if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING)
        return NULL;
    return json_node_get_string(n);
}

static void check_messages(const svc_request *r)
{
    static const char *const roles[] = { "system", "user", "assistant", "tool" };
    guint n = json_array_get_length(r->messages);
    for (guint i = 0; i < n; i++) {
        JsonNode *e = json_array_get_element(r->messages, i);
        if (!JSON_NODE_HOLDS_OBJECT(e))
            abort();
        JsonObject *m = json_node_get_object(e);
        const char *role = string_member(m, "role");
        bool known = false;
        for (size_t k = 0; role && k < G_N_ELEMENTS(roles); k++)
            known |= strcmp(role, roles[k]) == 0;
        if (!known || !string_member(m, "content"))
            abort();
        JsonNode *calls = json_object_get_member(m, "tool_calls");
        if (!calls)
            continue;
        JsonArray *a = json_node_get_array(calls);
        for (guint j = 0; a && j < json_array_get_length(a); j++) {
            JsonObject *call = json_array_get_object_element(a, j);
            JsonObject *fn = json_object_get_object_member(call, "function");
            if (!string_member(call, "id") || !string_member(fn, "name") ||
                !string_member(fn, "arguments"))
                abort();
        }
    }
    JsonNode *node = json_node_init_array(json_node_alloc(), r->messages);
    g_free(json_to_string(node, FALSE));
    json_node_unref(node);
}

static void check_request(const svc_request *r)
{
    if (r->api != SVC_API_LLAMACPP_COMPLETION && r->api != SVC_API_LLAMACPP_INFILL &&
        (!r->model || !r->model[0]))
        abort();
    if (r->messages)
        check_messages(r);
    if (r->tools)
        for (guint i = 0; i < json_array_get_length(r->tools); i++) {
            JsonObject *t = json_array_get_object_element(r->tools, i);
            if (!string_member(json_object_get_object_member(t, "function"), "name"))
                abort();
        }
    if (r->n_stops > SVC_REQUEST_MAX_STOPS || (r->n_stops && !r->stops))
        abort();
    for (size_t i = 0; i < r->n_stops; i++)
        if (!r->stops[i] || !r->stops[i][0])
            abort();
    if (r->stops && r->stops[r->n_stops])
        abort();
    if (r->prompt && r->prompt_tokens)
        abort();
    for (size_t i = 0; i < r->n_prompt_tokens; i++)
        if (r->prompt_tokens[i] < 0)
            abort();
    if (r->n_probs < 0 || r->n_probs > SVC_REQUEST_MAX_N_PROBS || r->max_tokens < -1 ||
        r->num_ctx < 0)
        abort();

    svc_gen_params gp;
    memset(&gp, 0, sizeof gp);
    svc_request_gen_params(r, &gp);
    for (size_t i = 0; i < gp.sampling.n_logit_bias; i++) {
        float b = gp.sampling.logit_bias[i].bias;
        if (gp.sampling.logit_bias[i].token < 0 || b != b || b == INFINITY)
            abort();
    }
    /* the token range is the scheduler's to check against the vocabulary */
    gp.sampling.n_logit_bias = 0;
    moe_err err = { { 0 } };
    if (moe_sampler_params_check(&gp.sampling, 1 << 20, &err) != MOE_OK)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    svc_api api = (svc_api)(data[0] % SVC_API_COUNT);
    svc_request *r = NULL;
    svc_request_error err;
    if (svc_request_parse(api, (const char *)data + 1, size - 1, &r, &err)) {
        if (!r)
            abort();
        check_request(r);
        svc_request_free(r);
        return 0;
    }
    if (r || err.status != 400 || !err.message[0] || strcmp(err.type, "invalid_request_error"))
        abort();
    check_json(svc_request_error_to_openai_json(&err));
    check_json(svc_request_error_to_anthropic_json(&err));
    check_json(svc_request_error_to_ollama_json(&err));
    check_json(svc_request_error_to_llamacpp_json(&err));
    return 0;
}

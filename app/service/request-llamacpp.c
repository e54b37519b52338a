/*
 * request-llamacpp.c — llama.cpp server's POST /completion and /infill
 * bodies (what llama.vscode, Continue and Tabby send). Defaults are the
 * llama.cpp server's, which libmoe's sampler defaults equal: temperature
 * 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1.0,
 * repeat_last_n 64, n_predict -1 (unlimited), cache_prompt true.
 *
 * /completion needs `prompt` (a string or token ids); /infill takes
 * input_prefix, input_suffix, input_extra [{filename, text}] and an
 * optional prompt (text after the FIM middle token). n_predict 0 is kept:
 * llama.vscode sends it to warm the cache without generating. A negative
 * temperature means greedy (llama.cpp still reports probabilities then).
 *
 * Accepted but ignored: n_indent, n_keep, typical_p, dynatemp_*,
 * mirostat*, dry_*, xtc_*, samplers, id_slot, return_tokens,
 * post_sampling_probs, response_fields, timings_per_token,
 * t_max_prompt_ms, lora. `grammar` is refused (no grammar sampler yet).
 */
#include "request-internal.h"

#include <string.h>

static gboolean input_extra(rq_ctx *c, JsonObject *o)
{
    char p[RQ_PARAM_MAX];
    JsonNode *n = rq_member(o, "input_extra");
    if (!n)
        return TRUE;
    if (!JSON_NODE_HOLDS_ARRAY(n))
        return rq_fail(c, "input_extra", "invalid_type", "'input_extra' must be an array of"
                       " {\"filename\", \"text\"} objects");
    JsonArray *in = json_node_get_array(n);
    g_autoptr(JsonArray) out = json_array_sized_new(json_array_get_length(in));
    for (guint i = 0; i < json_array_get_length(in); i++) {
        JsonNode *e = json_array_get_element(in, i);
        g_snprintf(p, sizeof p, "input_extra[%u]", i);
        if (!JSON_NODE_HOLDS_OBJECT(e))
            return rq_fail(c, p, "invalid_type", "'%s' must be an object", p);
        JsonObject *chunk = json_node_get_object(e);
        g_autofree char *filename = NULL, *text = NULL;
        g_snprintf(p, sizeof p, "input_extra[%u].", i);
        if (!rq_string(c, chunk, p, "filename", &filename) || !rq_string(c, chunk, p, "text", &text))
            return FALSE;
        JsonObject *x = json_object_new();
        json_object_set_string_member(x, "filename", filename ? filename : "");
        json_object_set_string_member(x, "text", text ? text : "");
        json_array_add_object_element(out, x);
    }
    c->r->extra = g_steal_pointer(&out);
    return TRUE;
}

static gboolean json_schema(rq_ctx *c, JsonObject *o)
{
    JsonNode *n = rq_member(o, "json_schema");
    if (n) {
        if (!JSON_NODE_HOLDS_OBJECT(n))
            return rq_fail(c, "json_schema", "invalid_type", "'json_schema' must be an object");
        /* {} is "any JSON" */
        if (json_object_get_size(json_node_get_object(n)) == 0) {
            c->r->response_format = SVC_RESPONSE_JSON_OBJECT;
        } else {
            c->r->response_format = SVC_RESPONSE_JSON_SCHEMA;
            c->r->json_schema = json_node_copy(n);
        }
    }
    JsonNode *g = rq_member(o, "grammar");
    if (g && (!rq_node_is_string(g) || json_node_get_string(g)[0]))
        return rq_fail(c, "grammar", "unsupported_value",
                       "'grammar' is not supported; use 'json_schema' for JSON output");
    return TRUE;
}

gboolean rq_parse_llamacpp(rq_ctx *c, JsonObject *o)
{
    svc_request *r = c->r;
    moe_sampler_params *s = &r->sampling;
    bool infill = r->api == SVC_API_LLAMACPP_INFILL;
    int64_t v = 0;
    bool given = false;

    if (!rq_model(c, o, false) || !rq_prompt(c, o, "prompt", !infill) ||
        !rq_bool(c, o, "", "stream", &r->stream) ||
        !rq_bool(c, o, "", "cache_prompt", &r->cache_prompt) ||
        !rq_bool(c, o, "", "ignore_eos", &r->ignore_eos) || !rq_stops(c, o, "", "stop") ||
        !rq_logit_bias(c, o, "", -G_MAXFLOAT, G_MAXFLOAT) || !json_schema(c, o))
        return FALSE;
    if (infill && (!rq_string(c, o, "", "input_prefix", &r->prefix) ||
                   !rq_string(c, o, "", "input_suffix", &r->suffix) || !input_extra(c, o)))
        return FALSE;

    /* n_predict wins over its OpenAI-style alias; any negative = unlimited */
    if (!rq_int(c, o, "", "max_tokens", INT64_MIN, INT64_MAX, &v, &given))
        return FALSE;
    if (given)
        r->max_tokens = v < 0 ? -1 : v;
    if (!rq_int(c, o, "", "n_predict", INT64_MIN, INT64_MAX, &v, &given))
        return FALSE;
    if (given)
        r->max_tokens = v < 0 ? -1 : v;

    if (!rq_float_field(c, o, "", "temperature", -G_MAXFLOAT, G_MAXFLOAT, &s->temperature) ||
        !rq_float_field(c, o, "", "top_p", 0, 1, &s->top_p) ||
        !rq_float_field(c, o, "", "min_p", 0, 1, &s->min_p) ||
        !rq_float_field(c, o, "", "repeat_penalty", 0, G_MAXFLOAT, &s->repeat_penalty) ||
        !rq_float_field(c, o, "", "presence_penalty", -G_MAXFLOAT, G_MAXFLOAT,
                        &s->presence_penalty) ||
        !rq_float_field(c, o, "", "frequency_penalty", -G_MAXFLOAT, G_MAXFLOAT,
                        &s->frequency_penalty))
        return FALSE;
    if (s->temperature < 0)
        s->temperature = 0;
    if (s->repeat_penalty == 0)
        s->repeat_penalty = 1.0f;

    if (!rq_int(c, o, "", "top_k", G_MININT32, G_MAXINT32, &v, &given))
        return FALSE;
    if (given)
        s->top_k = (int32_t)v;
    /* -1 = the context size: 4096 tokens here (4 bytes each in the sampler) */
    if (!rq_int(c, o, "", "repeat_last_n", -1, 1 << 20, &v, &given))
        return FALSE;
    if (given)
        s->penalty_last_n = v < 0 ? 4096 : (int32_t)v;
    /* -1 and 0xFFFFFFFF (LLAMA_DEFAULT_SEED) ask for a random seed */
    if (!rq_int(c, o, "", "seed", INT64_MIN, INT64_MAX, &v, &given))
        return FALSE;
    if (given && v >= 0 && v != 0xFFFFFFFF) {
        r->has_seed = true;
        s->seed = (uint64_t)v;
    }
    if (!rq_int(c, o, "", "n_probs", 0, SVC_REQUEST_MAX_N_PROBS, &v, &given))
        return FALSE;
    if (given)
        r->n_probs = (int32_t)v;
    if (!rq_int(c, o, "", "t_max_predict_ms", INT64_MIN, INT64_MAX, &v, &given))
        return FALSE;
    if (given)
        r->t_max_predict_ms = v > 0 ? v : 0; /* <= 0: no limit, as in llama.cpp */
    return TRUE;
}

/*
 * request-ollama.c — Ollama's POST /api/chat and /api/generate bodies.
 * Sampling comes from the `options` object with Ollama's defaults
 * (temperature 0.8, top_k 40, top_p 0.9, min_p 0, repeat_penalty 1.1,
 * repeat_last_n 64, num_predict -1); `stream` defaults to true. As in
 * Ollama, a chat with no messages or a generate with no prompt (and no
 * suffix) only loads or unloads the model (load_only).
 *
 * Accepted but ignored: options num_keep, typical_p, mirostat*, tfs_z,
 * penalize_newline, num_batch, num_gpu, main_gpu, num_thread, use_mmap,
 * use_mlock, numa, low_vram; generate's `template` (a Go template: the
 * model's own chat template is used) and `context` (Ollama's deprecated
 * conversation state: send the whole conversation instead).
 */
#include "request-internal.h"

#include <math.h>
#include <string.h>

/* Go's time.ParseDuration syntax ("5m", "1h30m", "-1s", "0"), or a plain
 * number of seconds ("300", "-1") as OLLAMA_KEEP_ALIVE also takes. Returns
 * milliseconds in *ms; FALSE when malformed. */
static gboolean parse_duration(const char *s, double *ms)
{
    double sign = 1, total = 0;
    char *end = NULL;
    if (*s == '-' || *s == '+')
        sign = *s++ == '-' ? -1 : 1;
    if (!*s)
        return FALSE;
    double plain = g_ascii_strtod(s, &end);
    if (end && *end == 0 && end != s && g_ascii_isdigit(*s)) {
        *ms = sign * plain * 1000.0;
        return isfinite(*ms);
    }
    static const struct { const char *unit; double ms; } units[] = {
        { "ns", 1e-6 }, { "us", 1e-3 }, { "\xc2\xb5s", 1e-3 }, { "ms", 1 },
        { "s", 1e3 }, { "m", 60e3 }, { "h", 3600e3 },
    };
    while (*s) {
        if (!g_ascii_isdigit(*s) && *s != '.')
            return FALSE;
        double v = g_ascii_strtod(s, &end);
        if (end == s || !isfinite(v))
            return FALSE;
        s = end;
        size_t best = 0;
        double scale = 0;
        for (size_t i = 0; i < G_N_ELEMENTS(units); i++) {
            size_t n = strlen(units[i].unit);
            if (n > best && strncmp(s, units[i].unit, n) == 0) {
                best = n;
                scale = units[i].ms;
            }
        }
        if (!best)
            return FALSE;
        s += best;
        total += v * scale;
    }
    *ms = sign * total;
    return isfinite(*ms);
}

static gboolean keep_alive(rq_ctx *c, JsonObject *o)
{
    JsonNode *n = rq_member(o, "keep_alive");
    double ms = 0;
    if (!n)
        return TRUE;
    if (rq_node_number(n, &ms))
        ms *= 1000.0; /* a JSON number is seconds */
    else if (!rq_node_is_string(n) || !parse_duration(json_node_get_string(n), &ms))
        return rq_fail(c, "keep_alive", "invalid_value", "'keep_alive' must be a duration such"
                       " as \"5m\" or a number of seconds");
    c->r->has_keep_alive = true;
    /* negative: keep forever; beyond ~292 million years: forever too */
    c->r->keep_alive_ms = ms < 0 || ms > 9e18 ? -1 : (int64_t)ms;
    return TRUE;
}

static gboolean format(rq_ctx *c, JsonObject *o)
{
    JsonNode *n = rq_member(o, "format");
    if (!n)
        return TRUE;
    if (JSON_NODE_HOLDS_OBJECT(n)) {
        c->r->response_format = SVC_RESPONSE_JSON_SCHEMA;
        c->r->json_schema = json_node_copy(n);
        return TRUE;
    }
    const char *f = rq_node_is_string(n) ? json_node_get_string(n) : NULL;
    if (f && !f[0])
        return TRUE;
    if (!f || strcmp(f, "json") != 0)
        return rq_fail(c, "format", "invalid_value",
                       "'format' must be \"json\" or a JSON schema object");
    c->r->response_format = SVC_RESPONSE_JSON_OBJECT;
    return TRUE;
}

static gboolean think(rq_ctx *c, JsonObject *o)
{
    JsonNode *n = rq_member(o, "think");
    if (!n)
        return TRUE;
    if (JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_BOOLEAN) {
        rq_set_think(c->r, json_node_get_boolean(n) ? SVC_THINK_ON : SVC_THINK_OFF, NULL);
        return TRUE;
    }
    const char *s = rq_node_is_string(n) ? json_node_get_string(n) : NULL;
    if (!s || (strcmp(s, "high") != 0 && strcmp(s, "medium") != 0 && strcmp(s, "low") != 0))
        return rq_fail(c, "think", "invalid_value",
                       "'think' must be a boolean or \"high\", \"medium\" or \"low\"");
    rq_set_think(c->r, SVC_THINK_ON, s);
    return TRUE;
}

static gboolean options(rq_ctx *c, JsonObject *o)
{
    svc_request *r = c->r;
    moe_sampler_params *s = &r->sampling;
    JsonObject *opt = NULL;
    int64_t v = 0, last_n = 64;
    bool given = false, last_given = false;
    const char *pre = "options.";
    if (!rq_object(c, o, "", "options", &opt))
        return FALSE;
    if (!opt)
        return TRUE;
    if (!rq_float_field(c, opt, pre, "temperature", 0, G_MAXFLOAT, &s->temperature) ||
        !rq_float_field(c, opt, pre, "top_p", 0, 1, &s->top_p) ||
        !rq_float_field(c, opt, pre, "min_p", 0, 1, &s->min_p) ||
        !rq_float_field(c, opt, pre, "repeat_penalty", 0, G_MAXFLOAT, &s->repeat_penalty) ||
        !rq_float_field(c, opt, pre, "presence_penalty", -G_MAXFLOAT, G_MAXFLOAT,
                        &s->presence_penalty) ||
        !rq_float_field(c, opt, pre, "frequency_penalty", -G_MAXFLOAT, G_MAXFLOAT,
                        &s->frequency_penalty) ||
        !rq_stops(c, opt, pre, "stop"))
        return FALSE;
    if (s->repeat_penalty == 0)
        s->repeat_penalty = 1.0f; /* 0 reads as "off" */

    if (!rq_int(c, opt, pre, "top_k", G_MININT32, G_MAXINT32, &v, &given))
        return FALSE;
    if (given)
        s->top_k = (int32_t)v;
    /* -1: unlimited, -2: until the context is full; both are ours -1 */
    if (!rq_int(c, opt, pre, "num_predict", -2, INT64_MAX, &v, &given))
        return FALSE;
    if (given)
        r->max_tokens = v < 0 ? -1 : v;
    if (!rq_int(c, opt, pre, "num_ctx", 0, G_MAXINT32, &v, &given))
        return FALSE;
    if (given)
        r->num_ctx = (int32_t)v;
    if (!rq_int(c, opt, pre, "seed", INT64_MIN, INT64_MAX, &v, &given))
        return FALSE;
    if (given && v >= 0) { /* Ollama: a negative seed means a random one */
        r->has_seed = true;
        s->seed = (uint64_t)v;
    }
    /* -1 = the whole context: num_ctx when asked, else 4096 tokens (the
     * sampler keeps 4 bytes per history token) */
    if (!rq_int(c, opt, pre, "repeat_last_n", -1, 1 << 20, &last_n, &last_given))
        return FALSE;
    if (last_given)
        s->penalty_last_n = last_n < 0 ? (r->num_ctx > 0 ? MIN(r->num_ctx, 1 << 20) : 4096)
                                       : (int32_t)last_n;
    return TRUE;
}

static gboolean ollama_common(rq_ctx *c, JsonObject *o)
{
    svc_request *r = c->r;
    int64_t v = 0;
    bool given = false;
    if (!rq_model(c, o, true) || !rq_bool(c, o, "", "stream", &r->stream) || !keep_alive(c, o) ||
        !format(c, o) || !think(c, o) || !options(c, o) ||
        !rq_bool(c, o, "", "logprobs", &r->logprobs) ||
        !rq_int(c, o, "", "top_logprobs", 0, 20, &v, &given))
        return FALSE;
    if (given)
        r->top_logprobs = (int32_t)v;
    r->n_probs = r->logprobs ? MAX(r->top_logprobs, 1) : 0;
    JsonNode *images = rq_member(o, "images");
    if (images && (!JSON_NODE_HOLDS_ARRAY(images) ||
                   json_array_get_length(json_node_get_array(images)) > 0))
        return rq_fail(c, "images", "unsupported_content", "'images' are not supported (text only)");
    return TRUE;
}

gboolean rq_parse_ollama_chat(rq_ctx *c, JsonObject *o)
{
    return ollama_common(c, o) && rq_ollama_messages(c, o) && rq_openai_tools(c, o);
}

gboolean rq_parse_ollama_generate(rq_ctx *c, JsonObject *o)
{
    svc_request *r = c->r;
    if (!ollama_common(c, o) || !rq_string(c, o, "", "prompt", &r->prompt) ||
        !rq_string(c, o, "", "suffix", &r->suffix) || !rq_string(c, o, "", "system", &r->system) ||
        !rq_bool(c, o, "", "raw", &r->raw))
        return FALSE;
    r->load_only = (!r->prompt || !r->prompt[0]) && (!r->suffix || !r->suffix[0]);
    return TRUE;
}

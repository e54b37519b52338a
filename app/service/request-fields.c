/*
 * request-fields.c — typed readers for request fields and the fields every
 * API shares (model, stop strings, logit bias, template variables, the
 * prompt of the completion endpoints). Each reader fails with a 400 whose
 * param is the field's full path and whose message says what was expected,
 * e.g. "'temperature' must be a number".
 */
#include "request-internal.h"

#include <math.h>
#include <string.h>

gboolean rq_fail(rq_ctx *c, const char *param, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rq_error_vset(c->err, 400, NULL, param, code, fmt, ap);
    va_end(ap);
    return FALSE;
}

const char *rq_path(char *buf, const char *prefix, const char *key)
{
    g_snprintf(buf, RQ_PARAM_MAX, "%s%s", prefix ? prefix : "", key);
    return buf;
}

JsonNode *rq_member(JsonObject *o, const char *key)
{
    JsonNode *n = o ? json_object_get_member(o, key) : NULL;
    return n && !JSON_NODE_HOLDS_NULL(n) ? n : NULL;
}

gboolean rq_node_is_string(JsonNode *n)
{
    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING;
}

const char *rq_member_string(JsonObject *o, const char *key)
{
    JsonNode *n = rq_member(o, key);
    return rq_node_is_string(n) ? json_node_get_string(n) : NULL;
}

gboolean rq_node_number(JsonNode *n, double *out)
{
    if (!n || !JSON_NODE_HOLDS_VALUE(n))
        return FALSE;
    GType t = json_node_get_value_type(n);
    if (t == G_TYPE_INT64)
        *out = (double)json_node_get_int(n);
    else if (t == G_TYPE_DOUBLE)
        *out = json_node_get_double(n);
    else
        return FALSE;
    return isfinite(*out);
}

gboolean rq_node_int(JsonNode *n, int64_t *out)
{
    if (!n || !JSON_NODE_HOLDS_VALUE(n))
        return FALSE;
    GType t = json_node_get_value_type(n);
    if (t == G_TYPE_INT64) {
        *out = json_node_get_int(n);
        return TRUE;
    }
    if (t != G_TYPE_DOUBLE)
        return FALSE;
    /* 100.0 and 1e3 are integers too; the bounds keep the cast defined */
    double d = json_node_get_double(n);
    if (!isfinite(d) || d != floor(d) || d < -9.2e18 || d > 9.2e18)
        return FALSE;
    *out = (int64_t)d;
    return TRUE;
}

gboolean rq_string(rq_ctx *c, JsonObject *o, const char *prefix, const char *key,
                   char **out)
{
    char p[RQ_PARAM_MAX];
    JsonNode *n = rq_member(o, key);
    if (!n)
        return TRUE;
    if (!rq_node_is_string(n))
        return rq_fail(c, rq_path(p, prefix, key), "invalid_type", "'%s' must be a string",
                       rq_path(p, prefix, key));
    g_free(*out);
    *out = g_strdup(json_node_get_string(n));
    return TRUE;
}

gboolean rq_bool(rq_ctx *c, JsonObject *o, const char *prefix, const char *key, bool *out)
{
    char p[RQ_PARAM_MAX];
    JsonNode *n = rq_member(o, key);
    if (!n)
        return TRUE;
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_BOOLEAN)
        return rq_fail(c, rq_path(p, prefix, key), "invalid_type", "'%s' must be a boolean",
                       rq_path(p, prefix, key));
    *out = json_node_get_boolean(n);
    return TRUE;
}

gboolean rq_number(rq_ctx *c, JsonObject *o, const char *prefix, const char *key,
                   double lo, double hi, double *out, bool *given)
{
    char p[RQ_PARAM_MAX];
    JsonNode *n = rq_member(o, key);
    double v = 0;
    if (given)
        *given = false;
    if (!n)
        return TRUE;
    rq_path(p, prefix, key);
    if (!rq_node_number(n, &v))
        return rq_fail(c, p, "invalid_type", "'%s' must be a number", p);
    if (v < lo || v > hi) {
        if (hi >= G_MAXFLOAT)
            return rq_fail(c, p, "invalid_value", "'%s' must be at least %g (got %g)", p, lo, v);
        return rq_fail(c, p, "invalid_value", "'%s' must be between %g and %g (got %g)",
                       p, lo, hi, v);
    }
    *out = v;
    if (given)
        *given = true;
    return TRUE;
}

gboolean rq_int(rq_ctx *c, JsonObject *o, const char *prefix, const char *key,
                int64_t lo, int64_t hi, int64_t *out, bool *given)
{
    char p[RQ_PARAM_MAX];
    JsonNode *n = rq_member(o, key);
    int64_t v = 0;
    if (given)
        *given = false;
    if (!n)
        return TRUE;
    rq_path(p, prefix, key);
    if (!rq_node_int(n, &v))
        return rq_fail(c, p, "invalid_type", "'%s' must be an integer", p);
    if (v < lo || v > hi) {
        if (hi == INT64_MAX)
            return rq_fail(c, p, "invalid_value", "'%s' must be at least %" G_GINT64_FORMAT
                           " (got %" G_GINT64_FORMAT ")", p, (gint64)lo, (gint64)v);
        return rq_fail(c, p, "invalid_value", "'%s' must be between %" G_GINT64_FORMAT
                       " and %" G_GINT64_FORMAT " (got %" G_GINT64_FORMAT ")",
                       p, (gint64)lo, (gint64)hi, (gint64)v);
    }
    *out = v;
    if (given)
        *given = true;
    return TRUE;
}

gboolean rq_object(rq_ctx *c, JsonObject *o, const char *prefix, const char *key,
                   JsonObject **out)
{
    char p[RQ_PARAM_MAX];
    JsonNode *n = rq_member(o, key);
    *out = NULL;
    if (!n)
        return TRUE;
    if (!JSON_NODE_HOLDS_OBJECT(n))
        return rq_fail(c, rq_path(p, prefix, key), "invalid_type", "'%s' must be an object",
                       rq_path(p, prefix, key));
    *out = json_node_get_object(n);
    return TRUE;
}

gboolean rq_float_field(rq_ctx *c, JsonObject *o, const char *prefix, const char *key,
                        double lo, double hi, float *dst)
{
    double v = 0;
    bool given = false;
    if (!rq_number(c, o, prefix, key, lo, hi, &v, &given))
        return FALSE;
    if (given) {
        /* a finite double past FLT_MAX would become infinity */
        char p[RQ_PARAM_MAX];
        if (fabs(v) > G_MAXFLOAT)
            return rq_fail(c, rq_path(p, prefix, key), "invalid_value",
                           "'%s' is out of range", rq_path(p, prefix, key));
        *dst = (float)v;
    }
    return TRUE;
}

gboolean rq_model(rq_ctx *c, JsonObject *o, bool required)
{
    if (!rq_string(c, o, "", "model", &c->r->model))
        return FALSE;
    if (required && (!c->r->model || !c->r->model[0]))
        return rq_fail(c, "model", "missing_required_parameter",
                       "'model' is required: name the model to use");
    return TRUE;
}

/* A string or an array of strings; empty strings are dropped (they would
 * match at once), at most SVC_REQUEST_MAX_STOPS remain. */
gboolean rq_stops(rq_ctx *c, JsonObject *o, const char *prefix, const char *key)
{
    char p[RQ_PARAM_MAX];
    JsonNode *n = rq_member(o, key);
    if (!n)
        return TRUE;
    rq_path(p, prefix, key);
    g_autoptr(GPtrArray) list = g_ptr_array_new_with_free_func(g_free);
    if (rq_node_is_string(n)) {
        const char *s = json_node_get_string(n);
        if (s[0])
            g_ptr_array_add(list, g_strdup(s));
    } else if (JSON_NODE_HOLDS_ARRAY(n)) {
        JsonArray *a = json_node_get_array(n);
        guint len = json_array_get_length(a);
        if (len > SVC_REQUEST_MAX_STOPS)
            return rq_fail(c, p, "invalid_value", "'%s' has %u entries; at most %d are allowed",
                           p, len, SVC_REQUEST_MAX_STOPS);
        for (guint i = 0; i < len; i++) {
            JsonNode *e = json_array_get_element(a, i);
            if (!rq_node_is_string(e))
                return rq_fail(c, p, "invalid_type", "'%s[%u]' must be a string", p, i);
            const char *s = json_node_get_string(e);
            if (s[0])
                g_ptr_array_add(list, g_strdup(s));
        }
    } else {
        return rq_fail(c, p, "invalid_type", "'%s' must be a string or an array of strings", p);
    }
    g_strfreev(c->r->stops);
    c->r->n_stops = list->len;
    g_ptr_array_add(list, NULL);
    c->r->stops = (char **)g_ptr_array_free(g_steal_pointer(&list), FALSE);
    return TRUE;
}

static gboolean bias_add(rq_ctx *c, const char *p, GArray *out, int64_t token,
                         JsonNode *value, double lo, double hi)
{
    moe_logit_bias b = { 0 };
    double v = 0;
    if (token < 0 || token > G_MAXINT32)
        return rq_fail(c, p, "invalid_value", "'%s': token id %" G_GINT64_FORMAT
                       " is out of range", p, (gint64)token);
    b.token = (int32_t)token;
    if (value && JSON_NODE_HOLDS_VALUE(value) &&
        json_node_get_value_type(value) == G_TYPE_BOOLEAN && !json_node_get_boolean(value)) {
        b.bias = -INFINITY; /* llama.cpp: false bans the token */
    } else if (rq_node_number(value, &v)) {
        if (v < lo || v > hi)
            return rq_fail(c, p, "invalid_value", "'%s': bias %g must be between %g and %g",
                           p, v, lo, hi);
        b.bias = (float)v;
    } else {
        return rq_fail(c, p, "invalid_type", "'%s': each bias must be a number", p);
    }
    g_array_append_val(out, b);
    return TRUE;
}

gboolean rq_logit_bias(rq_ctx *c, JsonObject *o, const char *prefix, double lo, double hi)
{
    char p[RQ_PARAM_MAX];
    JsonNode *n = rq_member(o, "logit_bias");
    if (!n)
        return TRUE;
    rq_path(p, prefix, "logit_bias");
    g_autoptr(GArray) out = g_array_new(FALSE, TRUE, sizeof(moe_logit_bias));
    if (JSON_NODE_HOLDS_OBJECT(n)) {
        JsonObject *m = json_node_get_object(n);
        g_autoptr(GList) keys = json_object_get_members(m);
        for (GList *k = keys; k; k = k->next) {
            const char *key = k->data;
            char *end = NULL;
            gint64 tok = g_ascii_strtoll(key, &end, 10);
            if (!key[0] || !end || *end)
                return rq_fail(c, p, "unsupported_value", "'%s': key \"%.40s\" is not a token id"
                               " (token strings are not supported)", p, key);
            if (!bias_add(c, p, out, tok, json_object_get_member(m, key), lo, hi))
                return FALSE;
        }
    } else if (JSON_NODE_HOLDS_ARRAY(n)) {
        JsonArray *a = json_node_get_array(n);
        for (guint i = 0; i < json_array_get_length(a); i++) {
            JsonNode *e = json_array_get_element(a, i);
            int64_t tok = 0;
            JsonArray *pair = JSON_NODE_HOLDS_ARRAY(e) ? json_node_get_array(e) : NULL;
            if (!pair || json_array_get_length(pair) != 2)
                return rq_fail(c, p, "invalid_type", "'%s[%u]' must be a [token, bias] pair", p, i);
            if (!rq_node_int(json_array_get_element(pair, 0), &tok))
                return rq_fail(c, p, "unsupported_value", "'%s[%u]': the token must be an id"
                               " (token strings are not supported)", p, i);
            if (!bias_add(c, p, out, tok, json_array_get_element(pair, 1), lo, hi))
                return FALSE;
        }
    } else {
        return rq_fail(c, p, "invalid_type", "'%s' must be an object or an array", p);
    }
    g_free(c->r->logit_bias);
    c->r->n_logit_bias = out->len;
    c->r->logit_bias = (moe_logit_bias *)(void *)g_array_free(g_steal_pointer(&out), FALSE);
    c->r->sampling.logit_bias = c->r->n_logit_bias ? c->r->logit_bias : NULL;
    c->r->sampling.n_logit_bias = c->r->n_logit_bias;
    return TRUE;
}

static JsonObject *kwargs(svc_request *r)
{
    if (!r->template_kwargs)
        r->template_kwargs = json_object_new();
    return r->template_kwargs;
}

gboolean rq_template_kwargs(rq_ctx *c, JsonObject *o)
{
    JsonObject *kw = NULL;
    if (!rq_object(c, o, "", "chat_template_kwargs", &kw))
        return FALSE;
    if (!kw)
        return TRUE;
    g_autoptr(GList) keys = json_object_get_members(kw);
    for (GList *k = keys; k; k = k->next)
        json_object_set_member(kwargs(c->r), k->data,
                               json_node_copy(json_object_get_member(kw, k->data)));
    JsonNode *think = json_object_get_member(kw, "enable_thinking");
    if (think && JSON_NODE_HOLDS_VALUE(think) && json_node_get_value_type(think) == G_TYPE_BOOLEAN)
        c->r->think = json_node_get_boolean(think) ? SVC_THINK_ON : SVC_THINK_OFF;
    return TRUE;
}

void rq_set_think(svc_request *r, svc_think think, const char *effort)
{
    r->think = think;
    if (think != SVC_THINK_DEFAULT)
        json_object_set_boolean_member(kwargs(r), "enable_thinking", think == SVC_THINK_ON);
    if (effort) {
        g_free(r->reasoning_effort);
        r->reasoning_effort = g_strdup(effort);
        json_object_set_string_member(kwargs(r), "reasoning_effort", effort);
    }
}

/* One prompt: "text", ["text"], [1, 2, 3] or [[1, 2, 3]] (several prompts
 * or strings mixed with token ids are refused: one request, one answer). */
gboolean rq_prompt(rq_ctx *c, JsonObject *o, const char *key, bool required)
{
    svc_request *r = c->r;
    JsonNode *n = rq_member(o, key);
    if (!n) {
        if (required)
            return rq_fail(c, key, "missing_required_parameter", "'%s' is required", key);
        return TRUE;
    }
    if (JSON_NODE_HOLDS_ARRAY(n) && json_array_get_length(json_node_get_array(n)) == 1) {
        JsonNode *only = json_array_get_element(json_node_get_array(n), 0);
        if (rq_node_is_string(only) || JSON_NODE_HOLDS_ARRAY(only))
            n = only;
    }
    if (rq_node_is_string(n)) {
        r->prompt = g_strdup(json_node_get_string(n));
        return TRUE;
    }
    if (!JSON_NODE_HOLDS_ARRAY(n))
        return rq_fail(c, key, "invalid_type",
                       "'%s' must be a string or an array of token ids", key);
    JsonArray *a = json_node_get_array(n);
    guint len = json_array_get_length(a);
    if (len == 0)
        return rq_fail(c, key, "invalid_value", "'%s' must not be an empty array", key);
    r->prompt_tokens = g_new(int32_t, len);
    r->n_prompt_tokens = len;
    for (guint i = 0; i < len; i++) {
        JsonNode *e = json_array_get_element(a, i);
        int64_t tok = 0;
        if (rq_node_is_string(e) || JSON_NODE_HOLDS_ARRAY(e))
            return rq_fail(c, key, "unsupported_value", "'%s': only one prompt per request,"
                           " given as a string or as token ids (not mixed)", key);
        if (!rq_node_int(e, &tok))
            return rq_fail(c, key, "invalid_type", "'%s[%u]' must be a token id", key, i);
        if (tok < 0 || tok > G_MAXINT32)
            return rq_fail(c, key, "invalid_value", "'%s[%u]': token id %" G_GINT64_FORMAT
                           " is out of range", key, i, (gint64)tok);
        r->prompt_tokens[i] = (int32_t)tok;
    }
    return TRUE;
}

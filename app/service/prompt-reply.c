/*
 * prompt-reply.c — generated text back into API objects: the OpenAI
 * tool_calls array (ids, arguments as JSON strings, parameter types fixed
 * against the request's tool schemas), whole and streamed replies, and the
 * control tokens a detokenizer must render for the tool-call parser.
 *
 * Why the schema pass: XML-style formats (Qwen3-Coder, GLM, Seed-OSS) write
 * every value as bare text, so "42" could be a number or a string; the
 * parser guesses JSON, and here a parameter declared "string" gets its text
 * back as a string, and one declared number/integer/boolean/object/array
 * whose value came out as a string holding that JSON gets the JSON value.
 */
#include "prompt.h"

#include "json-write.h"

#include <string.h>

static char *new_call_id(void)
{
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    char id[5 + 24 + 1] = "call_";
    for (int i = 0; i < 24; i++)
        id[5 + i] = alnum[g_random_int_range(0, (gint32)sizeof alnum - 1)];
    id[29] = 0;
    return g_strdup(id);
}

/* The "properties" object of tool `name`'s parameters schema, or NULL. */
static JsonObject *tool_properties(JsonArray *tools, const char *name)
{
    for (guint i = 0; tools && i < json_array_get_length(tools); i++) {
        JsonNode *t = json_array_get_element(tools, i);
        if (!JSON_NODE_HOLDS_OBJECT(t))
            continue;
        JsonObject *o = json_node_get_object(t);
        JsonNode *fn = json_object_get_member(o, "function");
        JsonObject *f = fn && JSON_NODE_HOLDS_OBJECT(fn) ? json_node_get_object(fn) : o;
        JsonNode *nn = json_object_get_member(f, "name");
        if (!nn || !JSON_NODE_HOLDS_VALUE(nn) || json_node_get_value_type(nn) != G_TYPE_STRING ||
            strcmp(json_node_get_string(nn), name) != 0)
            continue;
        JsonNode *pn = json_object_get_member(f, "parameters");
        if (!pn || !JSON_NODE_HOLDS_OBJECT(pn))
            return NULL;
        JsonNode *props = json_object_get_member(json_node_get_object(pn), "properties");
        return props && JSON_NODE_HOLDS_OBJECT(props) ? json_node_get_object(props) : NULL;
    }
    return NULL;
}

static const char *schema_type(JsonObject *props, const char *key)
{
    JsonNode *s = json_object_get_member(props, key);
    if (!s || !JSON_NODE_HOLDS_OBJECT(s))
        return NULL;
    JsonNode *t = json_object_get_member(json_node_get_object(s), "type");
    if (!t || !JSON_NODE_HOLDS_VALUE(t) || json_node_get_value_type(t) != G_TYPE_STRING)
        return NULL;
    return json_node_get_string(t);
}

static bool node_matches(JsonNode *n, const char *type)
{
    if (JSON_NODE_HOLDS_OBJECT(n))
        return !strcmp(type, "object");
    if (JSON_NODE_HOLDS_ARRAY(n))
        return !strcmp(type, "array");
    if (JSON_NODE_HOLDS_NULL(n))
        return !strcmp(type, "null");
    GType t = json_node_get_value_type(n);
    if (t == G_TYPE_BOOLEAN)
        return !strcmp(type, "boolean");
    if (t == G_TYPE_INT64)
        return !strcmp(type, "integer") || !strcmp(type, "number");
    if (t == G_TYPE_DOUBLE)
        return !strcmp(type, "number");
    return !strcmp(type, "string");
}

static char *node_to_json(JsonNode *n)
{
    return svc_json_write(n);
}

/* Arguments with schema types applied; `args` unchanged when nothing
 * needed changing (so numbers keep their exact spelling). */
static char *typed_arguments(const char *args, JsonObject *props)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!props || !json_parser_load_from_data(parser, args, -1, NULL))
        return g_strdup(args);
    JsonNode *root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root))
        return g_strdup(args);
    JsonObject *o = json_node_get_object(root);
    bool changed = false;
    g_autoptr(GList) keys = json_object_get_members(o);
    for (GList *l = keys; l; l = l->next) {
        const char *k = l->data, *type = schema_type(props, k);
        JsonNode *v = json_object_get_member(o, k);
        if (!type || node_matches(v, type))
            continue;
        if (!strcmp(type, "string") && !JSON_NODE_HOLDS_OBJECT(v) && !JSON_NODE_HOLDS_ARRAY(v)) {
            g_autofree char *text = node_to_json(v);
            json_object_set_string_member(o, k, text);
            changed = true;
        } else if (JSON_NODE_HOLDS_VALUE(v) && json_node_get_value_type(v) == G_TYPE_STRING) {
            g_autoptr(JsonParser) p2 = json_parser_new();
            if (json_parser_load_from_data(p2, json_node_get_string(v), -1, NULL) &&
                json_parser_get_root(p2) && node_matches(json_parser_get_root(p2), type)) {
                json_object_set_member(o, k, json_node_copy(json_parser_get_root(p2)));
                changed = true;
            }
        }
    }
    return changed ? node_to_json(root) : g_strdup(args);
}

JsonArray *svc_prompt_tool_calls_json(const svc_tool_call *calls, size_t n_calls, JsonArray *tools)
{
    JsonArray *a = json_array_new();
    for (size_t i = 0; i < n_calls; i++) {
        JsonObject *c = json_object_new();
        JsonObject *f = json_object_new();
        g_autofree char *id = new_call_id();
        json_object_set_string_member(c, "id", id);
        json_object_set_string_member(c, "type", "function");
        json_object_set_string_member(f, "name", calls[i].name);
        g_autofree char *args =
            typed_arguments(calls[i].arguments, tool_properties(tools, calls[i].name));
        json_object_set_string_member(f, "arguments", args);
        json_object_set_object_member(c, "function", f);
        json_array_add_object_element(a, c);
    }
    return a;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!g_ascii_isspace(s[i]))
            return false;
    return true;
}

/* Moves a parse into `out`. Content is null when there are calls and
 * nothing but whitespace beside them. */
static void reply_from_parse(svc_tool_parse *p, JsonArray *tools, svc_reply *out)
{
    memset(out, 0, sizeof *out);
    if (p->n_calls)
        out->tool_calls = svc_prompt_tool_calls_json(p->calls, p->n_calls, tools);
    bool content_blank = blank(p->content ? p->content : "", p->content_len);
    if (!(p->n_calls && content_blank))
        out->content = g_strndup(p->content ? p->content : "", p->content_len);
    if (p->malformed)
        out->problem = g_strdup(p->problem);
    svc_tool_parse_clear(p);
}

void svc_prompt_parse_reply(const svc_prompt_model *pm, const char *text, gssize len,
                            JsonArray *tools, svc_reply *out)
{
    size_t n = len < 0 ? strlen(text) : (size_t)len;
    svc_tool_parse p;
    if (!svc_tool_parse_text(pm->tool_format, text, n, &p)) {
        /* out of memory in the plain-C parser: the reply as content */
        memset(out, 0, sizeof *out);
        out->content = g_strndup(text, n);
        return;
    }
    reply_from_parse(&p, tools, out);
}

void svc_prompt_finish_stream(svc_tool_stream *s, JsonArray *tools, svc_reply *out)
{
    svc_tool_parse p;
    if (!svc_tool_stream_finish(s, &p)) {
        memset(out, 0, sizeof *out);
        out->problem = g_strdup("out of memory while reading tool calls");
        return;
    }
    reply_from_parse(&p, tools, out);
}

void svc_reply_clear(svc_reply *r)
{
    if (!r)
        return;
    g_free(r->content);
    if (r->tool_calls)
        json_array_unref(r->tool_calls);
    g_free(r->problem);
    memset(r, 0, sizeof *r);
}

GArray *svc_prompt_tool_marker_tokens(const svc_prompt_model *pm)
{
    GArray *a = g_array_new(FALSE, FALSE, sizeof(int32_t));
    const char *const *markers = svc_tool_format_markers(pm->tool_format);
    for (size_t m = 0; markers[m]; m++) {
        int32_t ids[4];
        size_t n = 0;
        moe_err err = {{0}};
        if (moe_tokenize(pm->vocab, markers[m], strlen(markers[m]), MOE_TOKENIZE_PARSE_SPECIAL,
                         ids, G_N_ELEMENTS(ids), &n, &err) == MOE_OK &&
            n == 1 && moe_vocab_token_type(pm->vocab, ids[0]) == MOE_TOKEN_CONTROL)
            g_array_append_val(a, ids[0]);
    }
    return a;
}

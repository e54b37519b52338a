/*
 * request-anthropic.c — Anthropic's POST /v1/messages body, converted to
 * the OpenAI shape the rest of the service uses:
 *
 *   system (string or text blocks)    → a leading {"role":"system"} message
 *   user text blocks                  → one user message (joined with "\n")
 *   user tool_result blocks           → {"role":"tool","tool_call_id",..}
 *                                       messages, placed before the user's
 *                                       text (Anthropic puts results first)
 *   assistant text / tool_use /
 *   thinking blocks                   → content / tool_calls (input as JSON
 *                                       text) / reasoning_content
 *   tools {name, description,
 *          input_schema}              → OpenAI function tools
 *   tool_choice auto/any/tool/none    → "auto"/"required"/{function}/"none"
 *
 * Required: model, max_tokens (>= 1), messages (non-empty). Ranges:
 * temperature 0..1 (default 1), top_p 0..1, top_k >= 0. Ignored: metadata,
 * service_tier, container, mcp_servers, cache_control on blocks.
 * Images, documents and server tools are refused with a 400.
 */
#include "request-internal.h"

#include <string.h>

/* Element i of a block array: an object with a string 'type'. */
static gboolean block(rq_ctx *c, JsonNode *e, const char *p, guint i, JsonObject **out,
                      const char **type_out)
{
    JsonObject *b = JSON_NODE_HOLDS_OBJECT(e) ? json_node_get_object(e) : NULL;
    const char *type = b ? rq_member_string(b, "type") : NULL;
    if (!type)
        return rq_fail(c, p, "invalid_type", "'%s[%u]' must be an object with a 'type'", p, i);
    *out = b;
    *type_out = type;
    return TRUE;
}

static gboolean block_string(rq_ctx *c, JsonObject *b, const char *key, const char *p,
                             guint i, const char **out)
{
    *out = rq_member_string(b, key);
    if (!*out)
        return rq_fail(c, p, "invalid_type", "'%s[%u].%s' must be a string", p, i, key);
    return TRUE;
}

static gboolean unsupported(rq_ctx *c, const char *p, guint i, const char *type)
{
    return rq_fail(c, p, "unsupported_content", "'%s[%u]': content blocks of type '%.32s' are"
                   " not supported", p, i, type);
}

/* A string or an array of text blocks (system, tool_result content). */
static gboolean text_of(rq_ctx *c, JsonNode *n, const char *p, char **out)
{
    if (!n) {
        *out = g_strdup("");
        return TRUE;
    }
    if (rq_node_is_string(n)) {
        *out = g_strdup(json_node_get_string(n));
        return TRUE;
    }
    if (!JSON_NODE_HOLDS_ARRAY(n))
        return rq_fail(c, p, "invalid_type", "'%s' must be a string or an array of blocks", p);
    JsonArray *a = json_node_get_array(n);
    g_autoptr(GString) s = g_string_new(NULL);
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonObject *b = NULL;
        const char *type = NULL, *text = NULL;
        if (!block(c, json_array_get_element(a, i), p, i, &b, &type))
            return FALSE;
        if (strcmp(type, "text") != 0)
            return unsupported(c, p, i, type);
        if (!block_string(c, b, "text", p, i, &text))
            return FALSE;
        if (s->len)
            g_string_append_c(s, '\n');
        g_string_append(s, text);
    }
    *out = g_string_free(g_steal_pointer(&s), FALSE);
    return TRUE;
}

static gboolean user_blocks(rq_ctx *c, JsonArray *a, const char *p, JsonArray *out)
{
    g_autoptr(GString) text = g_string_new(NULL);
    bool any_text = false;
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonObject *b = NULL;
        const char *type = NULL, *str = NULL;
        if (!block(c, json_array_get_element(a, i), p, i, &b, &type))
            return FALSE;
        if (strcmp(type, "text") == 0) {
            if (!block_string(c, b, "text", p, i, &str))
                return FALSE;
            if (any_text)
                g_string_append_c(text, '\n');
            g_string_append(text, str);
            any_text = true;
        } else if (strcmp(type, "tool_result") == 0) {
            char cp[RQ_PARAM_MAX];
            g_autofree char *content = NULL;
            if (!block_string(c, b, "tool_use_id", p, i, &str))
                return FALSE;
            g_snprintf(cp, sizeof cp, "%s[%u].content", p, i);
            if (!text_of(c, rq_member(b, "content"), cp, &content))
                return FALSE;
            JsonObject *m = rq_message_new("tool", content);
            json_object_set_string_member(m, "tool_call_id", str);
            json_array_add_object_element(out, m);
        } else {
            return unsupported(c, p, i, type);
        }
    }
    if (any_text || json_array_get_length(a) == 0)
        json_array_add_object_element(out, rq_message_new("user", text->str));
    return TRUE;
}

static gboolean assistant_blocks(rq_ctx *c, JsonArray *a, const char *p, JsonArray *out)
{
    g_autoptr(GString) text = g_string_new(NULL);
    g_autoptr(GString) thinking = g_string_new(NULL);
    g_autoptr(JsonArray) calls = json_array_new();
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonObject *b = NULL;
        const char *type = NULL, *str = NULL, *name = NULL;
        if (!block(c, json_array_get_element(a, i), p, i, &b, &type))
            return FALSE;
        if (strcmp(type, "text") == 0) {
            if (!block_string(c, b, "text", p, i, &str))
                return FALSE;
            if (text->len)
                g_string_append_c(text, '\n');
            g_string_append(text, str);
        } else if (strcmp(type, "thinking") == 0) {
            if (!block_string(c, b, "thinking", p, i, &str))
                return FALSE;
            g_string_append(thinking, str);
        } else if (strcmp(type, "redacted_thinking") == 0) {
            continue; /* encrypted for Anthropic's models only */
        } else if (strcmp(type, "tool_use") == 0) {
            if (!block_string(c, b, "id", p, i, &str) || !block_string(c, b, "name", p, i, &name))
                return FALSE;
            JsonNode *input = rq_member(b, "input");
            if (input && !JSON_NODE_HOLDS_OBJECT(input))
                return rq_fail(c, p, "invalid_type", "'%s[%u].input' must be an object", p, i);
            g_autofree char *args = input ? json_to_string(input, FALSE) : g_strdup("{}");
            json_array_add_element(calls, rq_tool_call_new(str, name, args));
        } else {
            return unsupported(c, p, i, type);
        }
    }
    JsonObject *m = rq_message_new("assistant", text->str);
    if (thinking->len)
        json_object_set_string_member(m, "reasoning_content", thinking->str);
    if (json_array_get_length(calls))
        json_object_set_array_member(m, "tool_calls", g_steal_pointer(&calls));
    json_array_add_object_element(out, m);
    return TRUE;
}

static gboolean messages(rq_ctx *c, JsonObject *o)
{
    char p[RQ_PARAM_MAX];
    g_autoptr(JsonArray) out = json_array_new();
    g_autofree char *system = NULL;
    if (!text_of(c, rq_member(o, "system"), "system", &system))
        return FALSE;
    if (rq_member(o, "system"))
        json_array_add_object_element(out, rq_message_new("system", system));

    JsonNode *n = rq_member(o, "messages");
    if (!n)
        return rq_fail(c, "messages", "missing_required_parameter", "'messages' is required");
    if (!JSON_NODE_HOLDS_ARRAY(n))
        return rq_fail(c, "messages", "invalid_type", "'messages' must be an array");
    JsonArray *in = json_node_get_array(n);
    if (json_array_get_length(in) == 0)
        return rq_fail(c, "messages", "invalid_value", "'messages' must not be empty");
    for (guint i = 0; i < json_array_get_length(in); i++) {
        JsonNode *e = json_array_get_element(in, i);
        g_snprintf(p, sizeof p, "messages[%u]", i);
        if (!JSON_NODE_HOLDS_OBJECT(e))
            return rq_fail(c, p, "invalid_type", "'%s' must be an object", p);
        JsonObject *m = json_node_get_object(e);
        const char *role = rq_member_string(m, "role");
        g_snprintf(p, sizeof p, "messages[%u].role", i);
        if (!role)
            return rq_fail(c, p, "invalid_type", "'%s' must be a string", p);
        bool user = strcmp(role, "user") == 0;
        if (!user && strcmp(role, "assistant") != 0)
            return rq_fail(c, p, "invalid_value", "'%s': unknown role '%.32s' (expected user or"
                           " assistant; the system prompt goes in 'system')", p, role);
        JsonNode *content = rq_member(m, "content");
        g_snprintf(p, sizeof p, "messages[%u].content", i);
        if (rq_node_is_string(content)) {
            json_array_add_object_element(out, rq_message_new(role, json_node_get_string(content)));
            continue;
        }
        if (!content || !JSON_NODE_HOLDS_ARRAY(content))
            return rq_fail(c, p, "invalid_type", "'%s' must be a string or an array of blocks", p);
        if (!(user ? user_blocks : assistant_blocks)(c, json_node_get_array(content), p, out))
            return FALSE;
    }
    c->r->messages = g_steal_pointer(&out);
    return TRUE;
}

static gboolean tools(rq_ctx *c, JsonObject *o)
{
    char p[RQ_PARAM_MAX];
    JsonNode *n = rq_member(o, "tools");
    if (!n)
        return TRUE;
    if (!JSON_NODE_HOLDS_ARRAY(n))
        return rq_fail(c, "tools", "invalid_type", "'tools' must be an array");
    JsonArray *in = json_node_get_array(n);
    if (json_array_get_length(in) == 0)
        return TRUE;
    g_autoptr(JsonArray) out = json_array_new();
    for (guint i = 0; i < json_array_get_length(in); i++) {
        JsonNode *e = json_array_get_element(in, i);
        g_snprintf(p, sizeof p, "tools[%u]", i);
        JsonObject *t = JSON_NODE_HOLDS_OBJECT(e) ? json_node_get_object(e) : NULL;
        if (!t)
            return rq_fail(c, p, "invalid_type", "'%s' must be an object", p);
        const char *type = rq_member(t, "type") ? rq_member_string(t, "type") : "custom";
        if (!type || strcmp(type, "custom") != 0)
            return rq_fail(c, p, "unsupported_value", "'%s': server tools (type '%.40s') are not"
                           " supported; give name, description and input_schema", p,
                           type ? type : "?");
        const char *name = rq_member_string(t, "name");
        if (!name || !name[0])
            return rq_fail(c, p, "invalid_value", "'%s.name' must be a non-empty string", p);
        JsonNode *desc = rq_member(t, "description");
        if (desc && !rq_node_is_string(desc))
            return rq_fail(c, p, "invalid_type", "'%s.description' must be a string", p);
        JsonNode *schema = rq_member(t, "input_schema");
        if (!schema || !JSON_NODE_HOLDS_OBJECT(schema))
            return rq_fail(c, p, "invalid_type", "'%s.input_schema' must be an object", p);
        JsonObject *f = json_object_new();
        json_object_set_string_member(f, "name", name);
        if (desc)
            json_object_set_string_member(f, "description", json_node_get_string(desc));
        json_object_set_member(f, "parameters", json_node_copy(schema));
        JsonObject *tool = json_object_new();
        json_object_set_string_member(tool, "type", "function");
        json_object_set_object_member(tool, "function", f);
        json_array_add_object_element(out, tool);
    }
    c->r->tools = g_steal_pointer(&out);
    return TRUE;
}

static gboolean tool_choice(rq_ctx *c, JsonObject *o)
{
    JsonObject *tc = NULL;
    if (!rq_object(c, o, "", "tool_choice", &tc))
        return FALSE;
    if (!tc)
        return TRUE;
    const char *type = rq_member_string(tc, "type");
    const char *as = NULL;
    if (!type)
        return rq_fail(c, "tool_choice.type", "invalid_type", "'tool_choice.type' must be a string");
    if (strcmp(type, "auto") == 0)
        as = "auto";
    else if (strcmp(type, "any") == 0)
        as = "required";
    else if (strcmp(type, "none") == 0)
        as = "none";
    if (as) {
        c->r->tool_choice = json_node_init_string(json_node_alloc(), as);
    } else if (strcmp(type, "tool") == 0) {
        const char *name = rq_member_string(tc, "name");
        if (!name)
            return rq_fail(c, "tool_choice.name", "invalid_type",
                           "'tool_choice.name' must be a string");
        JsonObject *fn = json_object_new();
        json_object_set_string_member(fn, "name", name);
        JsonObject *choice = json_object_new();
        json_object_set_string_member(choice, "type", "function");
        json_object_set_object_member(choice, "function", fn);
        c->r->tool_choice = json_node_init_object(json_node_alloc(), choice);
        json_object_unref(choice);
    } else {
        return rq_fail(c, "tool_choice.type", "invalid_value", "'tool_choice.type' must be"
                       " \"auto\", \"any\", \"tool\" or \"none\" (got \"%.32s\")", type);
    }
    bool no_parallel = false;
    if (!rq_bool(c, tc, "tool_choice.", "disable_parallel_tool_use", &no_parallel))
        return FALSE;
    c->r->parallel_tool_calls = !no_parallel;
    return rq_check_tool_choice(c);
}

static gboolean thinking(rq_ctx *c, JsonObject *o)
{
    JsonObject *th = NULL;
    if (!rq_object(c, o, "", "thinking", &th))
        return FALSE;
    if (!th)
        return TRUE;
    const char *type = rq_member_string(th, "type");
    if (!type || (strcmp(type, "enabled") != 0 && strcmp(type, "disabled") != 0))
        return rq_fail(c, "thinking.type", "invalid_value",
                       "'thinking.type' must be \"enabled\" or \"disabled\"");
    int64_t budget = 0;
    if (!rq_int(c, th, "thinking.", "budget_tokens", 1, INT64_MAX, &budget, NULL))
        return FALSE;
    rq_set_think(c->r, strcmp(type, "enabled") == 0 ? SVC_THINK_ON : SVC_THINK_OFF, NULL);
    return TRUE;
}

gboolean rq_parse_anthropic(rq_ctx *c, JsonObject *o)
{
    svc_request *r = c->r;
    moe_sampler_params *s = &r->sampling;
    int64_t v = 0;
    bool given = false;
    if (!rq_model(c, o, true))
        return FALSE;
    if (!rq_int(c, o, "", "max_tokens", 1, INT64_MAX, &r->max_tokens, &given))
        return FALSE;
    if (!given)
        return rq_fail(c, "max_tokens", "missing_required_parameter", "'max_tokens' is required");
    if (!messages(c, o) || !tools(c, o) || !tool_choice(c, o) || !thinking(c, o) ||
        !rq_bool(c, o, "", "stream", &r->stream) ||
        !rq_stops(c, o, "", "stop_sequences") ||
        !rq_float_field(c, o, "", "temperature", 0, 1, &s->temperature) ||
        !rq_float_field(c, o, "", "top_p", 0, 1, &s->top_p) ||
        !rq_int(c, o, "", "top_k", 0, G_MAXINT32, &v, &given))
        return FALSE;
    if (given)
        s->top_k = (int32_t)v;
    return TRUE;
}

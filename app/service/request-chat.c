/*
 * request-chat.c — chat messages and tools in OpenAI's shape, and Ollama's
 * messages converted into it. The prompt builder (prompt.h) then sees one
 * predictable form whatever the client spoke:
 *
 *   {"role": "system"|"user"|"assistant"|"tool",
 *    "content": "text",                          always a string
 *    "name": "...",                              when given
 *    "tool_calls": [{"id", "type": "function",
 *                    "function": {"name", "arguments": "<JSON text>"}}],
 *    "tool_call_id": "...",                      tool results
 *    "reasoning_content": "..."}                 earlier thinking
 *
 * Content parts other than text (images, audio, files) are refused with a
 * 400: the engine is text-only, and dropping them silently would answer a
 * different question than the one asked.
 */
#include "request-internal.h"

#include <string.h>

JsonObject *rq_message_new(const char *role, const char *content)
{
    JsonObject *m = json_object_new();
    json_object_set_string_member(m, "role", role);
    json_object_set_string_member(m, "content", content ? content : "");
    return m;
}

JsonNode *rq_tool_call_new(const char *id, const char *name, const char *args)
{
    JsonObject *fn = json_object_new();
    json_object_set_string_member(fn, "name", name);
    json_object_set_string_member(fn, "arguments", args ? args : "{}");
    JsonObject *call = json_object_new();
    json_object_set_string_member(call, "id", id);
    json_object_set_string_member(call, "type", "function");
    json_object_set_object_member(call, "function", fn);
    JsonNode *n = json_node_new(JSON_NODE_OBJECT);
    json_node_take_object(n, call);
    return n;
}

/* OpenAI content: a string, null, or an array of parts of which only text
 * (and an assistant's refusal) is accepted; parts are joined with "\n". */
static gboolean content_text(rq_ctx *c, JsonNode *n, const char *p, char **out)
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
        return rq_fail(c, p, "invalid_type", "'%s' must be a string or an array of parts", p);
    JsonArray *a = json_node_get_array(n);
    g_autoptr(GString) s = g_string_new(NULL);
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonNode *e = json_array_get_element(a, i);
        JsonObject *part = JSON_NODE_HOLDS_OBJECT(e) ? json_node_get_object(e) : NULL;
        const char *type = rq_member_string(part, "type");
        if (!type)
            return rq_fail(c, p, "invalid_type", "'%s[%u]' must be an object with a 'type'", p, i);
        const char *key = strcmp(type, "text") == 0      ? "text"
                          : strcmp(type, "refusal") == 0 ? "refusal"
                                                         : NULL;
        if (!key)
            return rq_fail(c, p, "unsupported_content", "'%s[%u]': content of type '%.32s' is"
                           " not supported (text only)", p, i, type);
        JsonNode *t = json_object_get_member(part, key);
        if (!rq_node_is_string(t))
            return rq_fail(c, p, "invalid_type", "'%s[%u].%s' must be a string", p, i, key);
        if (s->len)
            g_string_append_c(s, '\n');
        g_string_append(s, json_node_get_string(t));
    }
    *out = g_string_free(g_steal_pointer(&s), FALSE);
    return TRUE;
}

/* A tool call's arguments: OpenAI sends JSON text, Ollama an object. */
static gboolean call_arguments(rq_ctx *c, JsonNode *n, const char *p, char **out)
{
    if (!n)
        *out = g_strdup("{}");
    else if (rq_node_is_string(n))
        *out = g_strdup(json_node_get_string(n));
    else if (JSON_NODE_HOLDS_OBJECT(n))
        *out = json_to_string(n, FALSE);
    else
        return rq_fail(c, p, "invalid_type", "'%s' must be a JSON string or an object", p);
    return TRUE;
}

/* tool_calls of message `mi`: [{id?, type?, function:{name, arguments}}]. */
static gboolean tool_calls(rq_ctx *c, JsonNode *n, guint mi, JsonObject *msg)
{
    char p[RQ_PARAM_MAX];
    g_snprintf(p, sizeof p, "messages[%u].tool_calls", mi);
    if (!JSON_NODE_HOLDS_ARRAY(n))
        return rq_fail(c, p, "invalid_type", "'%s' must be an array", p);
    JsonArray *in = json_node_get_array(n);
    if (json_array_get_length(in) == 0)
        return TRUE;
    g_autoptr(JsonArray) calls = json_array_new();
    for (guint i = 0; i < json_array_get_length(in); i++) {
        JsonNode *e = json_array_get_element(in, i);
        JsonObject *call = JSON_NODE_HOLDS_OBJECT(e) ? json_node_get_object(e) : NULL;
        JsonNode *fnn = call ? rq_member(call, "function") : NULL;
        JsonObject *fn = fnn && JSON_NODE_HOLDS_OBJECT(fnn) ? json_node_get_object(fnn) : NULL;
        if (!fn)
            return rq_fail(c, p, "invalid_type", "'%s[%u]' must be an object with a 'function'",
                           p, i);
        JsonNode *name = rq_member(fn, "name");
        if (!rq_node_is_string(name))
            return rq_fail(c, p, "invalid_type", "'%s[%u].function.name' must be a string", p, i);
        JsonNode *idn = rq_member(call, "id");
        if (idn && !rq_node_is_string(idn))
            return rq_fail(c, p, "invalid_type", "'%s[%u].id' must be a string", p, i);
        g_autofree char *id = idn ? g_strdup(json_node_get_string(idn))
                                  : g_strdup_printf("call_%u_%u", mi, i);
        g_autofree char *args = NULL;
        char ap[RQ_PARAM_MAX];
        g_snprintf(ap, sizeof ap, "%s[%u].function.arguments", p, i);
        if (!call_arguments(c, rq_member(fn, "arguments"), ap, &args))
            return FALSE;
        json_array_add_element(calls, rq_tool_call_new(id, json_node_get_string(name), args));
    }
    json_object_set_array_member(msg, "tool_calls", g_steal_pointer(&calls));
    return TRUE;
}

/* An optional string member copied into the normalised message as `to`. */
static gboolean copy_string(rq_ctx *c, JsonObject *in, const char *key, guint mi,
                            JsonObject *msg, const char *to)
{
    char p[RQ_PARAM_MAX];
    JsonNode *n = rq_member(in, key);
    if (!n)
        return TRUE;
    g_snprintf(p, sizeof p, "messages[%u].%s", mi, key);
    if (!rq_node_is_string(n))
        return rq_fail(c, p, "invalid_type", "'%s' must be a string", p);
    json_object_set_string_member(msg, to, json_node_get_string(n));
    return TRUE;
}

typedef enum { DIALECT_OPENAI, DIALECT_OLLAMA } dialect;

static const char *message_role(const char *role, dialect d)
{
    static const char *const same[] = { "system", "user", "assistant", "tool" };
    for (size_t i = 0; i < G_N_ELEMENTS(same); i++)
        if (strcmp(role, same[i]) == 0)
            return same[i];
    if (d == DIALECT_OPENAI && strcmp(role, "developer") == 0)
        return "system";
    if (d == DIALECT_OPENAI && strcmp(role, "function") == 0)
        return "tool";
    return NULL;
}

static gboolean one_message(rq_ctx *c, JsonNode *e, guint i, dialect d, JsonArray *out)
{
    char p[RQ_PARAM_MAX];
    g_snprintf(p, sizeof p, "messages[%u]", i);
    if (!JSON_NODE_HOLDS_OBJECT(e))
        return rq_fail(c, p, "invalid_type", "'%s' must be an object", p);
    JsonObject *in = json_node_get_object(e);
    JsonNode *rn = rq_member(in, "role");
    g_snprintf(p, sizeof p, "messages[%u].role", i);
    if (!rn)
        return rq_fail(c, p, "missing_required_parameter", "'%s' is required", p);
    if (!rq_node_is_string(rn))
        return rq_fail(c, p, "invalid_type", "'%s' must be a string", p);
    const char *role = message_role(json_node_get_string(rn), d);
    if (!role)
        return rq_fail(c, p, "invalid_value", "'%s': unknown role '%.32s' (expected system,%s"
                       " user, assistant or tool)", p, json_node_get_string(rn),
                       d == DIALECT_OPENAI ? " developer," : "");

    g_autofree char *content = NULL;
    g_snprintf(p, sizeof p, "messages[%u].content", i);
    JsonNode *cn = rq_member(in, "content");
    if (d == DIALECT_OLLAMA && cn && !rq_node_is_string(cn))
        return rq_fail(c, p, "invalid_type", "'%s' must be a string", p);
    if (!content_text(c, cn, p, &content))
        return FALSE;
    JsonNode *images = rq_member(in, "images");
    if (images && (!JSON_NODE_HOLDS_ARRAY(images) ||
                   json_array_get_length(json_node_get_array(images)) > 0)) {
        g_snprintf(p, sizeof p, "messages[%u].images", i);
        return rq_fail(c, p, "unsupported_content", "'%s': images are not supported (text only)", p);
    }

    g_autoptr(JsonObject) msg = rq_message_new(role, content);
    if (!copy_string(c, in, "name", i, msg, "name") ||
        !copy_string(c, in, "tool_call_id", i, msg, "tool_call_id") ||
        !copy_string(c, in, "reasoning_content", i, msg, "reasoning_content"))
        return FALSE;
    if (d == DIALECT_OLLAMA && (!copy_string(c, in, "tool_name", i, msg, "name") ||
                                !copy_string(c, in, "thinking", i, msg, "reasoning_content")))
        return FALSE;
    JsonNode *calls = rq_member(in, "tool_calls");
    if (calls && !tool_calls(c, calls, i, msg))
        return FALSE;
    json_array_add_object_element(out, g_steal_pointer(&msg));
    return TRUE;
}

static gboolean messages(rq_ctx *c, JsonObject *o, dialect d)
{
    JsonNode *n = rq_member(o, "messages");
    if (!n) {
        if (d == DIALECT_OLLAMA) { /* Ollama: no messages = load the model */
            c->r->load_only = true;
            c->r->messages = json_array_new();
            return TRUE;
        }
        return rq_fail(c, "messages", "missing_required_parameter", "'messages' is required");
    }
    if (!JSON_NODE_HOLDS_ARRAY(n))
        return rq_fail(c, "messages", "invalid_type", "'messages' must be an array");
    JsonArray *in = json_node_get_array(n);
    guint len = json_array_get_length(in);
    if (len == 0 && d == DIALECT_OPENAI)
        return rq_fail(c, "messages", "invalid_value", "'messages' must not be empty");
    g_autoptr(JsonArray) out = json_array_sized_new(len);
    for (guint i = 0; i < len; i++)
        if (!one_message(c, json_array_get_element(in, i), i, d, out))
            return FALSE;
    c->r->load_only = len == 0;
    c->r->messages = g_steal_pointer(&out);
    return TRUE;
}

gboolean rq_openai_messages(rq_ctx *c, JsonObject *o)
{
    return messages(c, o, DIALECT_OPENAI);
}

gboolean rq_ollama_messages(rq_ctx *c, JsonObject *o)
{
    return messages(c, o, DIALECT_OLLAMA);
}

/* [{type:"function", function:{name, description?, parameters?}}]. */
gboolean rq_openai_tools(rq_ctx *c, JsonObject *o)
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
        JsonObject *tool = JSON_NODE_HOLDS_OBJECT(e) ? json_node_get_object(e) : NULL;
        if (!tool)
            return rq_fail(c, p, "invalid_type", "'%s' must be an object", p);
        const char *type = rq_member(tool, "type") ? rq_member_string(tool, "type") : "function";
        if (!type || strcmp(type, "function") != 0)
            return rq_fail(c, p, "unsupported_value", "'%s.type' must be \"function\"", p);
        JsonNode *fnn = rq_member(tool, "function");
        if (!fnn || !JSON_NODE_HOLDS_OBJECT(fnn))
            return rq_fail(c, p, "invalid_type", "'%s.function' must be an object", p);
        JsonObject *fn = json_node_get_object(fnn);
        JsonNode *name = rq_member(fn, "name");
        if (!rq_node_is_string(name) || !json_node_get_string(name)[0])
            return rq_fail(c, p, "invalid_value", "'%s.function.name' must be a non-empty string", p);
        JsonNode *desc = rq_member(fn, "description");
        if (desc && !rq_node_is_string(desc))
            return rq_fail(c, p, "invalid_type", "'%s.function.description' must be a string", p);
        JsonNode *params = rq_member(fn, "parameters");
        if (params && !JSON_NODE_HOLDS_OBJECT(params))
            return rq_fail(c, p, "invalid_type", "'%s.function.parameters' must be an object", p);

        JsonObject *f = json_object_new();
        json_object_set_string_member(f, "name", json_node_get_string(name));
        if (desc)
            json_object_set_string_member(f, "description", json_node_get_string(desc));
        if (params)
            json_object_set_member(f, "parameters", json_node_copy(params));
        JsonObject *t = json_object_new();
        json_object_set_string_member(t, "type", "function");
        json_object_set_object_member(t, "function", f);
        json_array_add_object_element(out, t);
    }
    c->r->tools = g_steal_pointer(&out);
    return TRUE;
}

static JsonNode *named_choice(const char *name)
{
    JsonObject *fn = json_object_new();
    json_object_set_string_member(fn, "name", name);
    JsonObject *tc = json_object_new();
    json_object_set_string_member(tc, "type", "function");
    json_object_set_object_member(tc, "function", fn);
    JsonNode *n = json_node_new(JSON_NODE_OBJECT);
    json_node_take_object(n, tc);
    return n;
}

/* "none" | "auto" | "required" | {type:"function", function:{name}}. */
gboolean rq_openai_tool_choice(rq_ctx *c, JsonObject *o)
{
    JsonNode *n = rq_member(o, "tool_choice");
    if (!n)
        return TRUE;
    if (rq_node_is_string(n)) {
        const char *s = json_node_get_string(n);
        if (strcmp(s, "none") != 0 && strcmp(s, "auto") != 0 && strcmp(s, "required") != 0)
            return rq_fail(c, "tool_choice", "invalid_value", "'tool_choice' must be \"none\","
                           " \"auto\", \"required\" or a function object (got \"%.32s\")", s);
        c->r->tool_choice = json_node_copy(n);
        return TRUE;
    }
    JsonObject *tc = JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
    JsonNode *fnn = tc ? rq_member(tc, "function") : NULL;
    JsonObject *fn = fnn && JSON_NODE_HOLDS_OBJECT(fnn) ? json_node_get_object(fnn) : NULL;
    JsonNode *name = fn ? rq_member(fn, "name") : NULL;
    if (!rq_node_is_string(name))
        return rq_fail(c, "tool_choice", "invalid_type", "'tool_choice' must be a string or"
                       " {\"type\": \"function\", \"function\": {\"name\": ...}}");
    c->r->tool_choice = named_choice(json_node_get_string(name));
    return TRUE;
}

gboolean rq_check_tool_choice(rq_ctx *c)
{
    JsonNode *tc = c->r->tool_choice;
    if (!tc)
        return TRUE;
    if (rq_node_is_string(tc)) {
        if (strcmp(json_node_get_string(tc), "required") == 0 && !c->r->tools)
            return rq_fail(c, "tool_choice", "invalid_value",
                           "'tool_choice' is \"required\" but no tools are given");
        return TRUE;
    }
    JsonObject *fn = json_object_get_object_member(json_node_get_object(tc), "function");
    const char *want = json_object_get_string_member(fn, "name");
    guint n = c->r->tools ? json_array_get_length(c->r->tools) : 0;
    for (guint i = 0; i < n; i++) {
        JsonObject *t = json_array_get_object_element(c->r->tools, i);
        JsonObject *tf = json_object_get_object_member(t, "function");
        if (strcmp(json_object_get_string_member(tf, "name"), want) == 0)
            return TRUE;
    }
    return rq_fail(c, "tool_choice", "invalid_value",
                   "'tool_choice' names the function '%.64s', which is not in 'tools'", want);
}

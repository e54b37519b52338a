/*
 * prompt.c — the per-model prompt cache, chat prompts, plain tokenizing,
 * fill-in-the-middle prompts and the capability list (see prompt.h).
 *
 * Chat messages are checked and normalised here (roles, content parts
 * joined, "developer" read as "system") and then rendered by libmoe's
 * template interpreter from JSON, so the prompt is the one transformers
 * would build for the same messages. Tool-call arguments arrive as JSON
 * strings (OpenAI) and are handed to the template as objects, which is what
 * templates index into.
 */
#include "prompt.h"

#include "json-write.h"

#include <string.h>

G_DEFINE_QUARK(svc-prompt-error-quark, svc_prompt_error)

/* Used when the model has no usable template: ChatML, the format most chat
 * models of the last years were tuned on. */
static const char chatml_template[] =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/* ---- the model cache ---------------------------------------------------- */

static char *token_text_dup(const moe_vocab *vocab, int32_t id)
{
    if (id < 0)
        return NULL;
    moe_str s = moe_vocab_token_text(vocab, id);
    return s.ptr ? g_strndup(s.ptr, s.len) : NULL;
}

/* `tools` as a Jinja identifier somewhere in the template (not "tools_x"). */
static bool template_reads(const char *src, const char *ident)
{
    size_t n = strlen(ident);
    for (const char *p = strstr(src, ident); p; p = strstr(p + 1, ident)) {
        bool left = p == src || !(g_ascii_isalnum(p[-1]) || p[-1] == '_' || p[-1] == '\'' ||
                                  p[-1] == '"' || p[-1] == '<' || p[-1] == '/');
        bool right = !(g_ascii_isalnum(p[n]) || p[n] == '_' || p[n] == '\'' || p[n] == '"' ||
                       p[n] == '>');
        if (left && right)
            return true;
    }
    return false;
}

svc_prompt_model *svc_prompt_model_new_for_vocab(const moe_vocab *vocab, const char *template_src,
                                                 const char *name, GError **error)
{
    g_return_val_if_fail(vocab != NULL, NULL);
    g_autoptr(svc_prompt_model) pm = g_new0(svc_prompt_model, 1);
    g_mutex_init(&pm->texts_lock);
    pm->vocab = vocab;
    pm->name = g_strdup(name && *name ? name : "model");
    moe_err err = {{0}};
    if (template_src && *template_src) {
        if (moe_chat_template_parse(template_src, strlen(template_src), &pm->tmpl, &err) == MOE_OK)
            pm->template_src = g_strdup(template_src);
        else
            pm->template_problem = g_strdup_printf("its chat template cannot be used: %s", err.msg);
    } else {
        pm->template_problem = g_strdup("it has no chat template");
    }
    if (!pm->tmpl) {
        pm->template_fallback = true;
        if (moe_chat_template_parse(chatml_template, strlen(chatml_template), &pm->tmpl, &err)) {
            g_set_error(error, SVC_PROMPT_ERROR, SVC_PROMPT_ERROR_TEMPLATE,
                        "built-in ChatML template: %s", err.msg);
            return NULL;
        }
        pm->template_src = g_strdup(chatml_template);
    }
    pm->bos = moe_vocab_special(vocab, MOE_SPECIAL_BOS);
    pm->eos = moe_vocab_special(vocab, MOE_SPECIAL_EOS);
    pm->bos_text = token_text_dup(vocab, pm->bos);
    pm->eos_text = token_text_dup(vocab, pm->eos);
    pm->add_bos = moe_vocab_add_bos(vocab) && pm->bos >= 0;
    pm->template_uses_tools = !pm->template_fallback && template_reads(pm->template_src, "tools");
    pm->tool_format = pm->template_fallback ? SVC_TOOL_FORMAT_NONE
                                            : svc_tool_format_detect(pm->template_src);
    pm->fim_pre = moe_vocab_special(vocab, MOE_SPECIAL_FIM_PRE);
    pm->fim_suf = moe_vocab_special(vocab, MOE_SPECIAL_FIM_SUF);
    pm->fim_mid = moe_vocab_special(vocab, MOE_SPECIAL_FIM_MID);
    pm->fim_rep = moe_vocab_special(vocab, MOE_SPECIAL_FIM_REP);
    pm->fim_sep = moe_vocab_special(vocab, MOE_SPECIAL_FIM_SEP);
    return g_steal_pointer(&pm);
}

svc_prompt_model *svc_prompt_model_new(const moe_model *model, GError **error)
{
    g_return_val_if_fail(model != NULL, NULL);
    return svc_prompt_model_new_for_vocab(moe_model_vocab(model), moe_model_chat_template(model),
                                          moe_model_name(model), error);
}

void svc_token_texts_unref(struct svc_token_texts *t); /* jsonmode.c */

void svc_prompt_model_free(svc_prompt_model *pm)
{
    if (!pm)
        return;
    moe_chat_template_free(pm->tmpl);
    g_free(pm->name);
    g_free(pm->template_src);
    g_free(pm->template_problem);
    g_free(pm->bos_text);
    g_free(pm->eos_text);
    if (pm->texts)
        svc_token_texts_unref(pm->texts);
    g_mutex_clear(&pm->texts_lock);
    g_free(pm);
}

/* ---- tokenizing ----------------------------------------------------------- */

/* Appends the tokens of text[0..len) to `out`. */
static bool tokenize_into(const svc_prompt_model *pm, const char *text, size_t len,
                          bool parse_special, GArray *out, GError **error)
{
    unsigned flags = parse_special ? MOE_TOKENIZE_PARSE_SPECIAL : 0;
    size_t n = 0;
    moe_err err = {{0}};
    moe_status st = moe_tokenize(pm->vocab, text, len, flags, NULL, 0, &n, &err);
    if (st == MOE_ERR_RANGE || st == MOE_OK) {
        guint at = out->len;
        g_array_set_size(out, at + (guint)n);
        st = n ? moe_tokenize(pm->vocab, text, len, flags, &g_array_index(out, int32_t, at), n,
                              &n, &err)
               : MOE_OK;
    }
    if (st != MOE_OK) {
        g_set_error(error, SVC_PROMPT_ERROR, SVC_PROMPT_ERROR_TOKENIZE,
                    "tokenizing for %s: %s", pm->name, err.msg);
        return false;
    }
    return true;
}

static GArray *new_tokens(const svc_prompt_model *pm)
{
    GArray *a = g_array_new(FALSE, FALSE, sizeof(int32_t));
    if (pm->add_bos)
        g_array_append_val(a, pm->bos);
    return a;
}

/* Drops the BOS new_tokens put in when the text brought its own. */
static void drop_double_bos(const svc_prompt_model *pm, GArray *a)
{
    if (pm->add_bos && a->len >= 2 && g_array_index(a, int32_t, 1) == pm->bos)
        g_array_remove_index(a, 0);
}

bool svc_prompt_tokenize(const svc_prompt_model *pm, const char *text, gssize len,
                         bool parse_special, GArray **tokens_out, GError **error)
{
    g_return_val_if_fail(pm && text && tokens_out, false);
    g_autoptr(GArray) a = new_tokens(pm);
    if (!tokenize_into(pm, text, len < 0 ? strlen(text) : (size_t)len, parse_special, a, error))
        return false;
    drop_double_bos(pm, a);
    *tokens_out = g_steal_pointer(&a);
    return true;
}

/* ---- chat --------------------------------------------------------------- */

static bool fail(GError **error, int code, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static bool fail(GError **error, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error_literal(error, SVC_PROMPT_ERROR, code, msg);
    return false;
}

static const char *node_kind(JsonNode *n)
{
    if (!n || JSON_NODE_HOLDS_NULL(n))
        return "null";
    if (JSON_NODE_HOLDS_OBJECT(n))
        return "an object";
    if (JSON_NODE_HOLDS_ARRAY(n))
        return "an array";
    GType t = json_node_get_value_type(n);
    return t == G_TYPE_STRING ? "a string" : t == G_TYPE_BOOLEAN ? "a boolean" : "a number";
}

static bool is_string(JsonNode *n)
{
    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING;
}

/* content: a string; null or absent becomes "" (an assistant turn with
 * only tool calls: most templates test or split content as a string and
 * fail on None, and llama.cpp passes "" too); text parts are joined with
 * "\n" as llama.cpp does for templates that take plain strings. Returns a
 * new node. */
static JsonNode *normalise_content(JsonNode *c, guint i, GError **error)
{
    if (!c || JSON_NODE_HOLDS_NULL(c)) {
        JsonNode *empty = json_node_new(JSON_NODE_VALUE);
        json_node_set_string(empty, "");
        return empty;
    }
    if (is_string(c))
        return json_node_copy(c);
    if (!JSON_NODE_HOLDS_ARRAY(c)) {
        fail(error, SVC_PROMPT_ERROR_INVALID,
             "messages[%u].content: expected a string or a list of parts, got %s", i,
             node_kind(c));
        return NULL;
    }
    JsonArray *parts = json_node_get_array(c);
    g_autoptr(GString) text = g_string_new(NULL);
    for (guint j = 0; j < json_array_get_length(parts); j++) {
        JsonNode *p = json_array_get_element(parts, j);
        if (!JSON_NODE_HOLDS_OBJECT(p)) {
            fail(error, SVC_PROMPT_ERROR_INVALID,
                 "messages[%u].content[%u]: expected a content part object, got %s", i, j,
                 node_kind(p));
            return NULL;
        }
        JsonObject *po = json_node_get_object(p);
        JsonNode *type = json_object_get_member(po, "type");
        const char *t = is_string(type) ? json_node_get_string(type) : NULL;
        if (!t) {
            fail(error, SVC_PROMPT_ERROR_INVALID, "messages[%u].content[%u]: \"type\" must be a string",
                 i, j);
            return NULL;
        }
        if (strcmp(t, "text") != 0) {
            fail(error, SVC_PROMPT_ERROR_UNSUPPORTED,
                 "messages[%u].content[%u]: content parts of type \"%s\" are not supported "
                 "(this model takes text only)", i, j, t);
            return NULL;
        }
        JsonNode *tx = json_object_get_member(po, "text");
        if (!is_string(tx)) {
            fail(error, SVC_PROMPT_ERROR_INVALID,
                 "messages[%u].content[%u].text: expected a string, got %s", i, j, node_kind(tx));
            return NULL;
        }
        if (text->len)
            g_string_append_c(text, '\n');
        g_string_append(text, json_node_get_string(tx));
    }
    JsonNode *out = json_node_new(JSON_NODE_VALUE);
    json_node_set_string(out, text->str);
    return out;
}

static bool check_tool_calls(JsonNode *tc, guint i, GError **error)
{
    if (JSON_NODE_HOLDS_NULL(tc))
        return true;
    if (!JSON_NODE_HOLDS_ARRAY(tc))
        return fail(error, SVC_PROMPT_ERROR_INVALID,
                    "messages[%u].tool_calls: expected an array, got %s", i, node_kind(tc));
    JsonArray *a = json_node_get_array(tc);
    for (guint j = 0; j < json_array_get_length(a); j++) {
        JsonNode *c = json_array_get_element(a, j);
        JsonObject *f = NULL;
        if (JSON_NODE_HOLDS_OBJECT(c)) {
            JsonNode *fn = json_object_get_member(json_node_get_object(c), "function");
            f = fn && JSON_NODE_HOLDS_OBJECT(fn) ? json_node_get_object(fn) : NULL;
        }
        if (!f || !is_string(json_object_get_member(f, "name")))
            return fail(error, SVC_PROMPT_ERROR_INVALID,
                        "messages[%u].tool_calls[%u]: expected {\"function\": {\"name\": string, "
                        "\"arguments\": string}}", i, j);
        JsonNode *args = json_object_get_member(f, "arguments");
        if (args && !is_string(args) && !JSON_NODE_HOLDS_OBJECT(args) && !JSON_NODE_HOLDS_NULL(args))
            return fail(error, SVC_PROMPT_ERROR_INVALID,
                        "messages[%u].tool_calls[%u].function.arguments: expected a JSON string, "
                        "got %s", i, j, node_kind(args));
    }
    return true;
}

/* The messages as the template will see them. */
static JsonArray *normalise_messages(JsonArray *messages, GError **error)
{
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
    g_autoptr(JsonArray) out = json_array_new();
    for (guint i = 0; i < json_array_get_length(messages); i++) {
        JsonNode *m = json_array_get_element(messages, i);
        if (!JSON_NODE_HOLDS_OBJECT(m)) {
            fail(error, SVC_PROMPT_ERROR_INVALID, "messages[%u]: expected an object, got %s", i,
                 node_kind(m));
            return NULL;
        }
        JsonObject *mo = json_node_get_object(m);
        JsonNode *rn = json_object_get_member(mo, "role");
        const char *role = is_string(rn) ? json_node_get_string(rn) : NULL;
        bool known = false;
        for (size_t r = 0; role && r < G_N_ELEMENTS(roles); r++)
            known |= strcmp(role, roles[r]) == 0;
        if (!known) {
            fail(error, SVC_PROMPT_ERROR_INVALID,
                 role ? "messages[%u].role: unknown role \"%s\" (system, developer, user, "
                        "assistant or tool)"
                      : "messages[%u].role: expected a string%s",
                 i, role ? role : "");
            return NULL;
        }
        g_autoptr(JsonObject) nm = json_object_new();
        json_object_set_string_member(nm, "role", strcmp(role, "developer") ? role : "system");
        JsonNode *content = normalise_content(json_object_get_member(mo, "content"), i, error);
        if (!content)
            return NULL;
        json_object_set_member(nm, "content", content);
        g_autoptr(GList) members = json_object_get_members(mo);
        for (GList *l = members; l; l = l->next) {
            const char *k = l->data;
            if (!strcmp(k, "role") || !strcmp(k, "content"))
                continue;
            JsonNode *v = json_object_get_member(mo, k);
            if (!strcmp(k, "tool_calls") && !check_tool_calls(v, i, error))
                return NULL;
            json_object_set_member(nm, k, json_node_copy(v));
        }
        json_array_add_object_element(out, g_steal_pointer(&nm));
    }
    return g_steal_pointer(&out);
}

static char *to_json(JsonNode *node)
{
    return svc_json_write(node);
}

static char *array_to_json(JsonArray *a)
{
    g_autoptr(JsonNode) n = json_node_new(JSON_NODE_ARRAY);
    json_node_set_array(n, a);
    return to_json(n);
}

bool svc_prompt_chat(const svc_prompt_model *pm, JsonArray *messages, JsonArray *tools,
                     JsonObject *template_kwargs, GArray **tokens_out, char **text_out,
                     GError **error)
{
    g_return_val_if_fail(pm && messages, false);
    if (json_array_get_length(messages) == 0)
        return fail(error, SVC_PROMPT_ERROR_INVALID, "messages: must not be empty");
    g_autoptr(JsonArray) norm = normalise_messages(messages, error);
    if (!norm)
        return false;
    g_autofree char *messages_json = array_to_json(norm);
    g_autofree char *tools_json = tools && json_array_get_length(tools) ? array_to_json(tools) : NULL;
    g_autofree char *kwargs_json = NULL;
    if (template_kwargs) {
        g_autoptr(JsonNode) n = json_node_new(JSON_NODE_OBJECT);
        json_node_set_object(n, template_kwargs);
        kwargs_json = to_json(n);
    }
    moe_chat_params p = {
        .add_generation_prompt = true,
        .tools_json = tools_json,
        .bos_token = pm->bos_text,
        .eos_token = pm->eos_text,
        .extra_context_json = kwargs_json,
        .tool_args_as_objects = true,
    };
    char *text = NULL;
    size_t text_len = 0;
    moe_err err = {{0}};
    moe_status st = moe_chat_template_render_json(pm->tmpl, messages_json, &p, &text, &text_len, &err);
    if (st != MOE_OK)
        return fail(error, SVC_PROMPT_ERROR_TEMPLATE, "chat template of %s: %s", pm->name, err.msg);
    if (tokens_out) {
        g_autoptr(GArray) a = new_tokens(pm);
        if (!tokenize_into(pm, text, text_len, true, a, error)) {
            free(text);
            return false;
        }
        drop_double_bos(pm, a);
        *tokens_out = g_steal_pointer(&a);
    }
    if (text_out)
        *text_out = g_strndup(text, text_len);
    free(text);
    return true;
}

/* ---- capabilities -------------------------------------------------------- */

bool svc_prompt_supports_tools(const svc_prompt_model *pm)
{
    return pm->template_uses_tools && pm->tool_format != SVC_TOOL_FORMAT_NONE;
}

bool svc_prompt_supports_fim(const svc_prompt_model *pm)
{
    return pm->fim_pre >= 0 && pm->fim_suf >= 0 && pm->fim_mid >= 0;
}

bool svc_prompt_supports_thinking(const svc_prompt_model *pm)
{
    return !pm->template_fallback &&
           (strstr(pm->template_src, "enable_thinking") || strstr(pm->template_src, "<think>"));
}

JsonArray *svc_prompt_capabilities_json(const svc_prompt_model *pm)
{
    JsonArray *a = json_array_new();
    json_array_add_string_element(a, "completion");
    if (svc_prompt_supports_tools(pm))
        json_array_add_string_element(a, "tools");
    if (svc_prompt_supports_fim(pm))
        json_array_add_string_element(a, "insert");
    if (svc_prompt_supports_thinking(pm))
        json_array_add_string_element(a, "thinking");
    return a;
}

char *svc_prompt_ollama_template(const svc_prompt_model *pm)
{
    GString *t = g_string_new(NULL);
    if (svc_prompt_supports_tools(pm))
        g_string_append(t, "{{- if .Tools }}{{ .Tools }}{{ end }}");
    if (svc_prompt_supports_fim(pm)) {
        g_autofree char *pre = token_text_dup(pm->vocab, pm->fim_pre);
        g_autofree char *suf = token_text_dup(pm->vocab, pm->fim_suf);
        g_autofree char *mid = token_text_dup(pm->vocab, pm->fim_mid);
        g_string_append_printf(t, "{{- if .Suffix }}%s{{ .Prompt }}%s{{ .Suffix }}%s"
                                  "{{- else }}{{ .Prompt }}{{- end }}", pre, suf, mid);
    } else {
        g_string_append(t, "{{ .Prompt }}");
    }
    return g_string_free(t, FALSE);
}

/* ---- fill in the middle --------------------------------------------------- */

static bool add_text(const svc_prompt_model *pm, GArray *a, const char *s, GError **error)
{
    return tokenize_into(pm, s, strlen(s), false, a, error);
}

bool svc_prompt_fim(const svc_prompt_model *pm, const char *prefix, const char *suffix,
                    JsonArray *extra, GArray **tokens_out, GError **error)
{
    g_return_val_if_fail(pm && tokens_out, false);
    if (!svc_prompt_supports_fim(pm))
        return fail(error, SVC_PROMPT_ERROR_UNSUPPORTED,
                    "model %s has no fill-in-the-middle tokens", pm->name);
    g_autoptr(GArray) a = new_tokens(pm);
    guint n_extra = extra ? json_array_get_length(extra) : 0;
    if (n_extra && pm->fim_rep >= 0) {
        g_array_append_val(a, pm->fim_rep);
        if (!add_text(pm, a, "myproject\n", error))
            return false;
    }
    for (guint i = 0; i < n_extra; i++) {
        JsonNode *c = json_array_get_element(extra, i);
        JsonObject *o = JSON_NODE_HOLDS_OBJECT(c) ? json_node_get_object(c) : NULL;
        JsonNode *t = o ? json_object_get_member(o, "text") : NULL;
        JsonNode *f = o ? json_object_get_member(o, "filename") : NULL;
        if (!is_string(t) || (f && !is_string(f)))
            return fail(error, SVC_PROMPT_ERROR_INVALID,
                        "input_extra[%u]: expected {\"filename\": string, \"text\": string}", i);
        if (pm->fim_sep >= 0) {
            g_autofree char *line = g_strconcat(f ? json_node_get_string(f) : "tmp", "\n", NULL);
            g_array_append_val(a, pm->fim_sep);
            if (!add_text(pm, a, line, error))
                return false;
        } else if (!add_text(pm, a, "\n\n--- snippet ---\n\n", error)) {
            return false;
        }
        if (!add_text(pm, a, json_node_get_string(t), error))
            return false;
    }
    if (n_extra && pm->fim_sep >= 0) {
        g_array_append_val(a, pm->fim_sep);
        if (!add_text(pm, a, "filename\n", error))
            return false;
    }
    g_array_append_val(a, pm->fim_pre);
    if (!add_text(pm, a, prefix ? prefix : "", error))
        return false;
    g_array_append_val(a, pm->fim_suf);
    if (!add_text(pm, a, suffix ? suffix : "", error))
        return false;
    g_array_append_val(a, pm->fim_mid);
    *tokens_out = g_steal_pointer(&a);
    return true;
}

/*
 * hf-special.c — the tokenizer keys beyond the vocabulary: special token
 * ids, whether BOS/EOS/SEP are added, the space prefix and the chat
 * template, decided as gguf-py's SpecialVocab does, then every tokenizer.*
 * key written.
 *
 * Special ids, for bos, eos, unk, sep, pad, cls, mask (first source that
 * names a type wins):
 *   1. tokenizer.json's post_processor: a TemplateProcessing "single"
 *      template that starts with a special token adds BOS (and supplies
 *      bos_token when tokenizer_config.json names none); one that ends with
 *      a special token adds EOS (supplies eos_token; when it differs from
 *      the configured eos_token, that one becomes the EOT token and the
 *      template's the EOS, as gguf-py does). RobertaProcessing adds all.
 *   2. tokenizer_config.json: add_<type>_token booleans override 1;
 *      <type>_token (a string or {"content": ...}) is looked up by content
 *      in tokenizer.json's added_tokens.
 *   3. config.json: <type>_token_id integers (a list is ignored).
 * Ids at or past the vocabulary's end are dropped for SentencePiece
 * vocabularies (gguf-py checks n_vocab there only); negative ids are
 * ignored. cls has no GGUF key and is not written.
 *
 * Chat template: tokenizer_config.json's chat_template (a string, or a
 * list of {name, template}: "default" becomes tokenizer.chat_template, the
 * others tokenizer.chat_template.<name> plus the tokenizer.chat_templates
 * list), else chat_template.jinja, else chat_template.json's
 * chat_template. (gguf-py reads the latter two only when
 * tokenizer_config.json exists; we read them regardless.)
 */
#include "import-internal.h"

#include <string.h>

enum { SP_BOS, SP_EOS, SP_UNK, SP_SEP, SP_PAD, SP_CLS, SP_MASK, SP_EOT, SP_COUNT };

static const char *const k_types[SP_COUNT] = {
    "bos", "eos", "unk", "sep", "pad", "cls", "mask", "eot",
};
/* GGUF key per type; NULL: gguf-py has no handler (cls). */
static const char *const k_id_keys[SP_COUNT] = {
    "tokenizer.ggml.bos_token_id",      "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.unknown_token_id",  "tokenizer.ggml.seperator_token_id",
    "tokenizer.ggml.padding_token_id",  NULL,
    "tokenizer.ggml.mask_token_id",     "tokenizer.ggml.eot_token_id",
};

typedef struct specials {
    gint64   id[SP_COUNT];       /* -1: unset                            */
    int      add[SP_COUNT];      /* -1 unset, 0/1                        */
    char    *content[SP_COUNT];  /* token texts from tokenizer_config    */
    gboolean want_eot;           /* the template made eot a known type    */
} specials;

static void specials_clear(specials *s)
{
    for (int i = 0; i < SP_COUNT; i++)
        g_free(s->content[i]);
}

/* tokenizer_config.json's <type>_token as a string. */
static char *config_token(JsonObject *tc, const char *type)
{
    g_autofree char *key = g_strdup_printf("%s_token", type);
    JsonNode *n = hf_json_member(tc, key);
    if (!n)
        return NULL;
    if (JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING)
        return g_strdup(json_node_get_string(n));
    if (JSON_NODE_HOLDS_OBJECT(n)) {
        const char *c = hf_json_string(json_node_get_object(n), "content");
        return c ? g_strdup(c) : NULL;
    }
    return NULL;
}

static const char *template_special(JsonArray *tmpl, guint i)
{
    JsonNode *e = json_array_get_element(tmpl, i);
    JsonObject *o = JSON_NODE_HOLDS_OBJECT(e) ? json_node_get_object(e) : NULL;
    JsonNode *st = hf_json_member(o, "SpecialToken");
    return st && JSON_NODE_HOLDS_OBJECT(st) ? hf_json_string(json_node_get_object(st), "id")
                                            : NULL;
}

static void set_content(specials *s, int type, const char *text)
{
    g_free(s->content[type]);
    s->content[type] = g_strdup(text);
}

static void read_post_processor(JsonObject *tj, JsonObject *tc, specials *s)
{
    JsonNode *pn = hf_json_member(tj, "post_processor");
    if (!pn || !JSON_NODE_HOLDS_OBJECT(pn))
        return;
    JsonObject *pp = json_node_get_object(pn);
    JsonNode *list = hf_json_member(pp, "processors");
    JsonArray *procs = list && JSON_NODE_HOLDS_ARRAY(list) ? json_node_get_array(list) : NULL;
    const guint n = procs ? json_array_get_length(procs) : 1;
    for (guint i = 0; i < n; i++) {
        JsonObject *p = pp;
        if (procs) {
            JsonNode *e = json_array_get_element(procs, i);
            if (!JSON_NODE_HOLDS_OBJECT(e))
                continue;
            p = json_node_get_object(e);
        }
        const char *type = hf_json_string(p, "type");
        if (g_strcmp0(type, "RobertaProcessing") == 0) {
            s->add[SP_BOS] = s->add[SP_EOS] = s->add[SP_SEP] = 1;
            continue;
        }
        if (g_strcmp0(type, "TemplateProcessing") != 0)
            continue;
        JsonNode *sn = hf_json_member(p, "single");
        JsonArray *single = sn && JSON_NODE_HOLDS_ARRAY(sn) ? json_node_get_array(sn) : NULL;
        if (!single || json_array_get_length(single) < 2)
            continue;
        const char *first = template_special(single, 0);
        if (first) {
            if (!s->content[SP_BOS] && !(s->content[SP_CLS] &&
                                         strcmp(first, s->content[SP_CLS]) == 0))
                set_content(s, SP_BOS, first);
            s->add[SP_BOS] = g_strcmp0(first, s->content[SP_BOS]) == 0 ||
                             g_strcmp0(first, s->content[SP_CLS]) == 0;
        }
        const char *last = template_special(single, json_array_get_length(single) - 1);
        if (last) {
            if (tc && s->content[SP_EOS] && strcmp(last, s->content[SP_EOS]) != 0) {
                set_content(s, SP_EOT, s->content[SP_EOS]);
                s->want_eot = TRUE;
            }
            set_content(s, SP_EOS, last);
            s->add[SP_EOS] = 1;
        }
    }
}

/* The first added token whose content is `text`, or -1. */
static gint64 added_id(JsonObject *tj, const char *text)
{
    JsonNode *n = hf_json_member(tj, "added_tokens");
    JsonArray *a = n && JSON_NODE_HOLDS_ARRAY(n) ? json_node_get_array(n) : NULL;
    for (guint i = 0; a && i < json_array_get_length(a); i++) {
        JsonNode *e = json_array_get_element(a, i);
        JsonObject *o = JSON_NODE_HOLDS_OBJECT(e) ? json_node_get_object(e) : NULL;
        gint64 id;
        if (g_strcmp0(hf_json_string(o, "content"), text) == 0 &&
            hf_json_int(o, "id", "tokenizer.json", &id, NULL))
            return id;
    }
    return -1;
}

static void set_id(specials *s, const hf_vocab *v, int type, gint64 id)
{
    if (id < 0 || s->id[type] >= 0)
        return;
    if (v->check_ids && id >= v->n_tokens)
        return;
    s->id[type] = id;
}

static void decide(JsonObject *tj, JsonObject *tc, JsonObject *config, const hf_vocab *v,
                   specials *s)
{
    for (int i = 0; i < SP_COUNT; i++) {
        s->id[i] = -1;
        s->add[i] = -1;
        if (i != SP_EOT && tc)
            s->content[i] = config_token(tc, k_types[i]);
    }
    if (!s->content[SP_BOS] && s->content[SP_CLS])
        set_content(s, SP_BOS, s->content[SP_CLS]);
    if (!s->content[SP_EOS] && s->content[SP_SEP])
        set_content(s, SP_EOS, s->content[SP_SEP]);
    if (tj)
        read_post_processor(tj, tc, s);
    if (tc) {
        for (int i = 0; i < SP_COUNT; i++) {
            if (i == SP_EOT && !s->want_eot)
                continue;
            g_autofree char *key = g_strdup_printf("add_%s_token", k_types[i]);
            JsonNode *a = hf_json_member(tc, key);
            if (a && JSON_NODE_HOLDS_VALUE(a) && json_node_get_value_type(a) == G_TYPE_BOOLEAN)
                s->add[i] = json_node_get_boolean(a);
            if (s->content[i] && tj)
                set_id(s, v, i, added_id(tj, s->content[i]));
        }
    }
    for (int i = 0; i < SP_COUNT; i++) {
        if (i == SP_EOT && !s->want_eot)
            continue;
        g_autofree char *key = g_strdup_printf("%s_token_id", k_types[i]);
        gint64 id;
        if (hf_json_int(config, key, "config.json", &id, NULL))
            set_id(s, v, i, id);
    }
}

/* ---- chat template ---- */

static gboolean write_templates(const char *dir, JsonObject *tc, moe_gguf_writer *w,
                                GError **error)
{
    JsonNode *ct = hf_json_member(tc, "chat_template");
    g_autoptr(JsonParser) parser = NULL;
    if (!ct) {
        g_autofree char *jinja = g_build_filename(dir, "chat_template.jinja", NULL);
        g_autofree char *json = g_build_filename(dir, "chat_template.json", NULL);
        if (g_file_test(jinja, G_FILE_TEST_EXISTS)) {
            g_autofree char *text = NULL;
            g_autoptr(GError) ferr = NULL;
            if (!g_file_get_contents(jinja, &text, NULL, &ferr)) {
                g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT, "%s: %s",
                            jinja, ferr->message);
                return FALSE;
            }
            return moe_gguf_writer_set_str(w, "tokenizer.chat_template", text) == MOE_OK;
        }
        if (g_file_test(json, G_FILE_TEST_EXISTS)) {
            JsonObject *root = hf_json_load(dir, "chat_template.json", &parser, error);
            if (!root)
                return FALSE;
            ct = hf_json_member(root, "chat_template");
        }
    }
    if (!ct)
        return TRUE;
    if (JSON_NODE_HOLDS_VALUE(ct) && json_node_get_value_type(ct) == G_TYPE_STRING)
        return moe_gguf_writer_set_str(w, "tokenizer.chat_template",
                                       json_node_get_string(ct)) == MOE_OK;
    if (!JSON_NODE_HOLDS_ARRAY(ct))
        return TRUE; /* gguf-py ignores a bad type with a warning */
    JsonArray *a = json_node_get_array(ct);
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    const char *def = NULL;
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonNode *e = json_array_get_element(a, i);
        JsonObject *o = JSON_NODE_HOLDS_OBJECT(e) ? json_node_get_object(e) : NULL;
        const char *name = hf_json_string(o, "name"), *tmpl = hf_json_string(o, "template");
        if (!name || !*name || !tmpl)
            continue;
        g_autofree char *clean = g_strdup(name);
        for (char *p = clean; *p; p++)
            if (!g_ascii_isalnum(*p))
                *p = '_';
        if (strcmp(clean, "default") == 0) {
            def = tmpl;
            continue;
        }
        g_autofree char *key = g_strdup_printf("tokenizer.chat_template.%s", clean);
        if (moe_gguf_writer_set_str(w, key, tmpl) != MOE_OK)
            return FALSE;
        gboolean dup = FALSE;
        for (guint k = 0; k < names->len; k++)
            dup |= strcmp(g_ptr_array_index(names, k), clean) == 0;
        if (!dup)
            g_ptr_array_add(names, g_steal_pointer(&clean));
    }
    if (names->len) {
        g_autofree moe_str *strs = g_new(moe_str, names->len);
        for (guint k = 0; k < names->len; k++) {
            strs[k].ptr = g_ptr_array_index(names, k);
            strs[k].len = strlen(strs[k].ptr);
        }
        if (moe_gguf_writer_set_arr_str(w, "tokenizer.chat_templates", strs, names->len) !=
            MOE_OK)
            return FALSE;
    }
    return !def || moe_gguf_writer_set_str(w, "tokenizer.chat_template", def) == MOE_OK;
}

/* ---- all tokenizer keys ---- */

static gboolean write_vocab(const hf_vocab *v, moe_gguf_writer *w)
{
    gboolean ok = moe_gguf_writer_set_str(w, "tokenizer.ggml.model", v->model) == MOE_OK &&
                  moe_gguf_writer_set_str(w, "tokenizer.ggml.pre", v->pre) == MOE_OK;
    g_autofree moe_str *strs = g_new(moe_str, MAX(v->n_tokens, 1));
    for (gint64 i = 0; i < v->n_tokens; i++) {
        strs[i].ptr = v->tokens[i];
        strs[i].len = strlen(v->tokens[i]);
    }
    ok = ok && moe_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", strs,
                                           (uint64_t)v->n_tokens) == MOE_OK;
    if (v->scores)
        ok = ok && moe_gguf_writer_set_arr(w, "tokenizer.ggml.scores", MOE_GGUF_FLOAT32,
                                           v->scores, (uint64_t)v->n_tokens) == MOE_OK;
    ok = ok && moe_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", MOE_GGUF_INT32,
                                       v->types, (uint64_t)v->n_tokens) == MOE_OK;
    if (ok && v->merges && v->merges->len) {
        g_autofree moe_str *ms = g_new(moe_str, v->merges->len);
        for (guint i = 0; i < v->merges->len; i++) {
            ms[i].ptr = g_ptr_array_index(v->merges, i);
            ms[i].len = strlen(ms[i].ptr);
        }
        ok = moe_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", ms, v->merges->len) ==
             MOE_OK;
    }
    return ok;
}

gboolean hf_tokenizer_write_kv(const char *dir, const hf_config *config, const hf_vocab *v,
                               JsonObject *tj, JsonObject *tc, moe_gguf_writer *w,
                               GError **error)
{
    gboolean ok = TRUE;
    JsonNode *asp = hf_json_member(tc, "add_prefix_space");
    if (config->arch == HF_ARCH_MIXTRAL && asp && JSON_NODE_HOLDS_VALUE(asp) &&
        json_node_get_value_type(asp) == G_TYPE_BOOLEAN)
        ok = moe_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix",
                                      json_node_get_boolean(asp)) == MOE_OK;
    ok = ok && write_vocab(v, w);
    specials s;
    memset(&s, 0, sizeof s);
    decide(tj, tc, config->root, v, &s);
    for (int i = 0; ok && i < SP_COUNT; i++)
        if (k_id_keys[i] && s.id[i] >= 0)
            ok = moe_gguf_writer_set_u32(w, k_id_keys[i], (uint32_t)s.id[i]) == MOE_OK;
    static const struct { int type; const char *key; } adds[] = {
        { SP_BOS, "tokenizer.ggml.add_bos_token" },
        { SP_EOS, "tokenizer.ggml.add_eos_token" },
        { SP_SEP, "tokenizer.ggml.add_sep_token" },
    };
    for (size_t i = 0; ok && i < G_N_ELEMENTS(adds); i++)
        if (s.add[adds[i].type] >= 0)
            ok = moe_gguf_writer_set_bool(w, adds[i].key, s.add[adds[i].type] != 0) == MOE_OK;
    specials_clear(&s);
    if (ok) {
        GError *terr = NULL;
        ok = write_templates(dir, tc, w, &terr);
        if (terr) {
            g_propagate_error(error, terr);
            return FALSE;
        }
    }
    if (!ok) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_OUTPUT,
                    "writing the tokenizer keys failed (out of memory?)");
        return FALSE;
    }
    return TRUE;
}

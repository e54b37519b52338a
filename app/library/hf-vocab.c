/*
 * hf-vocab.c — the vocabulary of a Hugging Face tokenizer.json as llama.cpp's
 * converter writes it into GGUF (tokenizer.ggml.tokens/token_type/merges,
 * or tokens/scores/token_type for SentencePiece-style vocabularies).
 *
 * Byte-level BPE ("gpt2"; Qwen, OLMoE): tokens are model.vocab ordered by
 * id plus added_tokens, for ids 0 .. vocab_size-1 of config.json; an id
 * with no token becomes "[PAD<id>]" of type UNUSED. Added tokens are
 * CONTROL when marked special or when they look special ("<|...|>" and a
 * few names, hf_token_looks_special), else USER_DEFINED with "▁" written
 * as a space; the rest NORMAL. Merges come from model.merges in either
 * form: "a b" strings, or [a, b] pairs (transformers >= 4.45), where a
 * space inside a part is written as U+0120 so the pair stays splittable.
 *
 * tokenizer.ggml.pre: llama.cpp names the pre-tokenizer by hashing how the
 * HF tokenizer splits a test string, which needs the tokenizers library.
 * We read the pre_tokenizer's Split regexes instead (searching Sequence
 * nodes) and name the ones whose regexes llama.cpp implements:
 *   qwen2         one Split, the Qwen2 regex (single digits: \p{N})
 *   llama-bpe     one Split, the Llama 3 regex (digit runs: \p{N}{1,3})
 *   deepseek-v3   Splits "\p{N}{1,3}", a CJK/kana class "[一-龥぀-ゟ゠-ヿ]+",
 *                 and the punctuation/letter regex
 *   deepseek-llm  Splits including "\s?[A-Za-zµÀ-..." and "[一-龥ࠀ-一가-퟿]+"
 *   gpt-2         no Split: only ByteLevel with its built-in regex
 *                 (use_regex true), as GPT-2, GPT-NeoX and OLMo(E) use
 * Anything else is refused (llama.cpp refuses unknown hashes too), naming
 * the regexes found.
 *
 * Byte-fallback BPE as SentencePiece ("llama"; Mixtral's tokenizer.json
 * without tokenizer.model): ids below the model vocabulary's size take the
 * model's tokens, "<0xNN>" as BYTE, special added tokens as CONTROL;
 * added tokens above it follow (CONTROL or USER_DEFINED, score -1000).
 * llama.cpp's converter gives every token score -1000 here, which makes
 * llama.cpp's SentencePiece tokenizer merge left to right instead of by
 * priority. We score the k-th distinct token that the merges list produces
 * (in merge order) -k, so llama.cpp merges in the order the BPE merges say;
 * for a vocabulary converted from SentencePiece (merges ranked by piece
 * score) this gives back the original scores -1, -2, ... except where
 * pieces tied. Normal tokens no merge produces score below all of those,
 * -(n_scored + 1 + id); added tokens -1000; byte tokens 0.
 */
#include "import-internal.h"

#include <stdio.h>
#include <string.h>

void hf_vocab_clear(hf_vocab *v)
{
    if (v->tokens)
        for (gint64 i = 0; i < v->n_tokens; i++)
            g_free(v->tokens[i]);
    g_free(v->tokens);
    g_free(v->types);
    g_free(v->scores);
    g_free(v->pre);
    if (v->merges)
        g_ptr_array_free(v->merges, TRUE);
    memset(v, 0, sizeof *v);
}

gboolean hf_token_looks_special(const char *t)
{
    const size_t n = strlen(t);
    if (strcmp(t, "<pad>") == 0 || strcmp(t, "<mask>") == 0 || strcmp(t, "<2mass>") == 0 ||
        strcmp(t, "[@BOS@]") == 0)
        return TRUE;
    if (g_str_has_prefix(t, "<|") && g_str_has_suffix(t, "|>") && n >= 4)
        return TRUE;
    /* fullwidth bars, as in DeepSeek's "<｜begin▁of▁sentence｜>" */
    if (g_str_has_prefix(t, "<\xef\xbd\x9c") && g_str_has_suffix(t, "\xef\xbd\x9c>") && n >= 8)
        return TRUE;
    return g_str_has_prefix(t, "<unused") && g_str_has_suffix(t, ">");
}

/* ---- pre-tokenizer detection ---- */

static const char k_re_qwen2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char k_re_llama3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

typedef struct pre_scan {
    GPtrArray *regexes;    /* borrowed strings */
    gboolean   byte_level; /* a ByteLevel with use_regex on */
} pre_scan;

static void scan_pre(JsonObject *node, pre_scan *s)
{
    if (!node)
        return;
    const char *type = hf_json_string(node, "type");
    if (!type)
        return;
    if (strcmp(type, "Sequence") == 0) {
        JsonNode *list = hf_json_member(node, "pretokenizers");
        if (list && JSON_NODE_HOLDS_ARRAY(list)) {
            JsonArray *a = json_node_get_array(list);
            for (guint i = 0; i < json_array_get_length(a); i++) {
                JsonNode *e = json_array_get_element(a, i);
                if (JSON_NODE_HOLDS_OBJECT(e))
                    scan_pre(json_node_get_object(e), s);
            }
        }
    } else if (strcmp(type, "Split") == 0) {
        JsonNode *pat = hf_json_member(node, "pattern");
        JsonObject *po = pat && JSON_NODE_HOLDS_OBJECT(pat) ? json_node_get_object(pat) : NULL;
        const char *re = hf_json_string(po, "Regex");
        if (!re)
            re = hf_json_string(po, "String");
        if (re)
            g_ptr_array_add(s->regexes, (gpointer)re);
    } else if (strcmp(type, "ByteLevel") == 0) {
        JsonNode *use = hf_json_member(node, "use_regex");
        s->byte_level = !use || !JSON_NODE_HOLDS_VALUE(use) ||
                        json_node_get_value_type(use) != G_TYPE_BOOLEAN ||
                        json_node_get_boolean(use);
    }
}

static gboolean any_regex(const pre_scan *s, const char *part, gboolean whole)
{
    for (guint i = 0; i < s->regexes->len; i++) {
        const char *re = g_ptr_array_index(s->regexes, i);
        if (whole ? strcmp(re, part) == 0 : strstr(re, part) != NULL)
            return TRUE;
    }
    return FALSE;
}

char *hf_vocab_detect_pre(JsonObject *tj, GError **error)
{
    JsonNode *pn = hf_json_member(tj, "pre_tokenizer");
    pre_scan s = { .regexes = g_ptr_array_new() };
    if (pn && JSON_NODE_HOLDS_OBJECT(pn))
        scan_pre(json_node_get_object(pn), &s);
    const char *name = NULL;
    const guint n = s.regexes->len;
    if (n == 0 && s.byte_level)
        name = "gpt-2";
    else if (n == 1 && any_regex(&s, k_re_qwen2, TRUE))
        name = "qwen2";
    else if (n == 1 && any_regex(&s, k_re_llama3, TRUE))
        name = "llama-bpe";
    else if (any_regex(&s, "\\p{N}{1,3}", TRUE) &&
             any_regex(&s, "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f"
                           "\xe3\x82\xa0-\xe3\x83\xbf]+", FALSE))
        name = "deepseek-v3";           /* [一-龥぀-ゟ゠-ヿ]+ */
    else if (any_regex(&s, "\\s?[A-Za-z\xc2\xb5\xc3\x80-", FALSE) &&
             any_regex(&s, "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80"
                           "\xea\xb0\x80-\xed\x9f\xbf]+", FALSE))
        name = "deepseek-llm";          /* \s?[A-Za-zµÀ-... and [一-龥ࠀ-一가-퟿]+ */
    if (!name) {
        GString *list = g_string_new(NULL);
        for (guint i = 0; i < n; i++)
            g_string_append_printf(list, "%s\"%.60s%s\"", i ? ", " : "",
                                   (const char *)g_ptr_array_index(s.regexes, i),
                                   strlen(g_ptr_array_index(s.regexes, i)) > 60 ? "..." : "");
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_UNSUPPORTED,
                    "tokenizer.json: pre-tokenizer not recognised (split regexes: %s%s)",
                    n ? list->str : "none", s.byte_level ? "; ByteLevel" : "");
        g_string_free(list, TRUE);
    }
    g_ptr_array_free(s.regexes, TRUE);
    return name ? g_strdup(name) : NULL;
}

/* ---- shared reading of tokenizer.json ---- */

#define TJ "tokenizer.json"

static JsonObject *model_of(JsonObject *tj, GError **error)
{
    JsonNode *m = hf_json_member(tj, "model");
    if (!m || !JSON_NODE_HOLDS_OBJECT(m)) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    TJ ": no \"model\" object");
        return NULL;
    }
    JsonObject *model = json_node_get_object(m);
    const char *type = hf_json_string(model, "type");
    if (type && strcmp(type, "BPE") != 0) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_UNSUPPORTED,
                    TJ ": tokenizer model \"%s\" is not supported (only BPE)", type);
        return NULL;
    }
    JsonNode *vocab = hf_json_member(model, "vocab");
    if (!vocab || !JSON_NODE_HOLDS_OBJECT(vocab)) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    TJ ": model.vocab is not an object");
        return NULL;
    }
    return model;
}

/* Calls `fn` for each model.vocab entry with its id (checked >= 0). */
typedef gboolean (*vocab_fn)(void *user, const char *text, gint64 id, GError **error);

static gboolean each_vocab(JsonObject *model, vocab_fn fn, void *user, GError **error)
{
    JsonObject *vocab = json_node_get_object(json_object_get_member(model, "vocab"));
    JsonObjectIter it;
    const char *text;
    JsonNode *node;
    json_object_iter_init(&it, vocab);
    while (json_object_iter_next(&it, &text, &node)) {
        if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64 ||
            json_node_get_int(node) < 0) {
            g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                        TJ ": model.vocab[\"%s\"] is not a token id", text);
            return FALSE;
        }
        if (!fn(user, text, json_node_get_int(node), error))
            return FALSE;
    }
    return TRUE;
}

/* One entry of added_tokens: id, content, special. FALSE with an error if
 * malformed. */
static gboolean added_entry(JsonArray *a, guint i, gint64 *id, const char **content,
                            gboolean *special, GError **error)
{
    JsonNode *e = json_array_get_element(a, i);
    JsonObject *o = JSON_NODE_HOLDS_OBJECT(e) ? json_node_get_object(e) : NULL;
    *content = hf_json_string(o, "content");
    if (!o || !*content || !hf_json_int(o, "id", TJ, id, NULL) || *id < 0) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    TJ ": added_tokens[%u] has no id and content", i);
        return FALSE;
    }
    JsonNode *sp = hf_json_member(o, "special");
    *special = sp && JSON_NODE_HOLDS_VALUE(sp) &&
               json_node_get_value_type(sp) == G_TYPE_BOOLEAN && json_node_get_boolean(sp);
    return TRUE;
}

static JsonArray *added_tokens_of(JsonObject *tj)
{
    JsonNode *n = hf_json_member(tj, "added_tokens");
    return n && JSON_NODE_HOLDS_ARRAY(n) ? json_node_get_array(n) : NULL;
}

static void vocab_alloc(hf_vocab *v, gint64 n, gboolean scores)
{
    v->n_tokens = n;
    v->tokens = g_new0(char *, n);
    v->types = g_new0(gint32, n);
    v->scores = scores ? g_new0(float, n) : NULL;
}

static gboolean id_in_range(const hf_vocab *v, const char *text, gint64 id, GError **error)
{
    if (id < v->n_tokens)
        return TRUE;
    g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                TJ ": token \"%s\" has id %" G_GINT64_FORMAT ", not below the vocabulary"
                " size %" G_GINT64_FORMAT " (config.json vocab_size)", text, id, v->n_tokens);
    return FALSE;
}

static gboolean put_vocab_token(void *user, const char *text, gint64 id, GError **error)
{
    hf_vocab *v = user;
    if (!id_in_range(v, text, id, error))
        return FALSE;
    g_free(v->tokens[id]);
    v->tokens[id] = g_strdup(text);
    v->types[id] = MOE_TOKEN_NORMAL;
    return TRUE;
}

char *hf_metaspace_to_spaces(const char *text)
{
    GString *s = g_string_new(NULL);
    for (const char *p = text; *p;) {
        if (strncmp(p, "\xe2\x96\x81", 3) == 0) {
            g_string_append_c(s, ' ');
            p += 3;
        } else {
            g_string_append_c(s, *p++);
        }
    }
    return g_string_free(s, FALSE);
}

/* model.merges in either form into "a b" strings. */
static gboolean load_merges(JsonObject *model, GPtrArray *out, GError **error)
{
    JsonNode *mn = hf_json_member(model, "merges");
    if (!mn)
        return TRUE;
    if (!JSON_NODE_HOLDS_ARRAY(mn)) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    TJ ": model.merges is not a list");
        return FALSE;
    }
    JsonArray *a = json_node_get_array(mn);
    const guint n = json_array_get_length(a);
    for (guint i = 0; i < n; i++) {
        JsonNode *e = json_array_get_element(a, i);
        if (JSON_NODE_HOLDS_VALUE(e) && json_node_get_value_type(e) == G_TYPE_STRING) {
            g_ptr_array_add(out, g_strdup(json_node_get_string(e)));
            continue;
        }
        JsonArray *pair = JSON_NODE_HOLDS_ARRAY(e) ? json_node_get_array(e) : NULL;
        JsonNode *l = pair && json_array_get_length(pair) == 2 ? json_array_get_element(pair, 0)
                                                               : NULL;
        JsonNode *r = l ? json_array_get_element(pair, 1) : NULL;
        if (!l || !r || !JSON_NODE_HOLDS_VALUE(l) || !JSON_NODE_HOLDS_VALUE(r) ||
            json_node_get_value_type(l) != G_TYPE_STRING ||
            json_node_get_value_type(r) != G_TYPE_STRING) {
            g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                        TJ ": model.merges[%u] is neither \"a b\" nor [\"a\", \"b\"]", i);
            return FALSE;
        }
        GString *m = g_string_new(NULL);
        for (int side = 0; side < 2; side++) {
            if (side)
                g_string_append_c(m, ' ');
            for (const char *p = json_node_get_string(side ? r : l); *p; p++) {
                if (*p == ' ')
                    g_string_append(m, "\xc4\xa0"); /* U+0120 */
                else
                    g_string_append_c(m, *p);
            }
        }
        g_ptr_array_add(out, g_string_free(m, FALSE));
    }
    return TRUE;
}

/* ---- byte-level BPE ("gpt2") ---- */

static gboolean load_gpt2(const hf_config *c, JsonObject *tj, hf_vocab *v, GError **error)
{
    JsonObject *model = model_of(tj, error);
    if (!model)
        return FALSE;
    v->model = "gpt2";
    v->source = TJ;
    vocab_alloc(v, c->n_vocab, FALSE);
    if (!each_vocab(model, put_vocab_token, v, error))
        return FALSE;
    JsonArray *added = added_tokens_of(tj);
    for (guint i = 0; added && i < json_array_get_length(added); i++) {
        gint64 id;
        const char *content;
        gboolean special;
        if (!added_entry(added, i, &id, &content, &special, error) ||
            !id_in_range(v, content, id, error))
            return FALSE;
        g_free(v->tokens[id]);
        if (special || hf_token_looks_special(content)) {
            v->tokens[id] = g_strdup(content);
            v->types[id] = MOE_TOKEN_CONTROL;
        } else {
            v->tokens[id] = hf_metaspace_to_spaces(content);
            v->types[id] = MOE_TOKEN_USER_DEFINED;
        }
    }
    for (gint64 i = 0; i < v->n_tokens; i++) {
        if (!v->tokens[i]) {
            v->tokens[i] = g_strdup_printf("[PAD%" G_GINT64_FORMAT "]", i);
            v->types[i] = MOE_TOKEN_UNUSED;
        }
    }
    v->merges = g_ptr_array_new_with_free_func(g_free);
    if (!load_merges(model, v->merges, error))
        return FALSE;
    v->pre = hf_vocab_detect_pre(tj, error);
    return v->pre != NULL;
}

/* ---- byte-fallback BPE as a SentencePiece vocabulary ("llama") ---- */

/* Mixtral-style tokenizer.json: BPE with byte_fallback and a Sequence
 * decoder (llama.cpp's LlamaHfVocab test). */
static gboolean is_spm_like(JsonObject *tj)
{
    JsonNode *m = hf_json_member(tj, "model");
    JsonObject *model = m && JSON_NODE_HOLDS_OBJECT(m) ? json_node_get_object(m) : NULL;
    JsonNode *bf = hf_json_member(model, "byte_fallback");
    JsonNode *d = hf_json_member(tj, "decoder");
    const char *type = hf_json_string(model, "type");
    return type && strcmp(type, "BPE") == 0 && bf && JSON_NODE_HOLDS_VALUE(bf) &&
           json_node_get_value_type(bf) == G_TYPE_BOOLEAN && json_node_get_boolean(bf) &&
           d && JSON_NODE_HOLDS_OBJECT(d) &&
           g_strcmp0(hf_json_string(json_node_get_object(d), "type"), "Sequence") == 0;
}

static gboolean count_vocab(void *user, const char *text, gint64 id, GError **error)
{
    gint64 *max_id = user;
    (void)text;
    (void)error;
    if (id > *max_id)
        *max_id = id;
    return TRUE;
}

static gboolean is_byte_token(const char *t)
{
    return strlen(t) == 6 && strncmp(t, "<0x", 3) == 0 && g_ascii_isxdigit(t[3]) &&
           g_ascii_isxdigit(t[4]) && t[5] == '>';
}

/* Scores from merge ranks (see the file comment): the k-th distinct token
 * the merges list produces scores -k. */
static void scores_from_merges(hf_vocab *v, gint64 n_base, GPtrArray *merges)
{
    g_autoptr(GHashTable) ids = g_hash_table_new(g_str_hash, g_str_equal);
    for (gint64 i = n_base - 1; i >= 0; i--) /* lowest id wins a duplicate */
        g_hash_table_insert(ids, v->tokens[i], GSIZE_TO_POINTER((gsize)i + 1));
    g_autofree gboolean *done = g_new0(gboolean, n_base);
    gint64 n_scored = 0;
    GString *joined = g_string_new(NULL);
    for (guint r = 0; r < merges->len; r++) {
        const char *m = g_ptr_array_index(merges, r);
        const char *sp = strchr(m, ' ');
        if (!sp)
            continue;
        g_string_assign(joined, "");
        g_string_append_len(joined, m, sp - m);
        g_string_append(joined, sp + 1);
        gpointer hit = g_hash_table_lookup(ids, joined->str);
        if (!hit)
            continue;
        gint64 id = (gint64)GPOINTER_TO_SIZE(hit) - 1;
        if (!done[id] && v->types[id] == MOE_TOKEN_NORMAL) {
            v->scores[id] = -(float)(++n_scored);
            done[id] = TRUE;
        }
    }
    g_string_free(joined, TRUE);
    for (gint64 i = 0; i < n_base; i++)
        if (!done[i] && v->types[i] == MOE_TOKEN_NORMAL)
            v->scores[i] = -(float)(n_scored + 1 + i);
}

static gboolean load_spm_like(JsonObject *tj, hf_vocab *v, GError **error)
{
    JsonObject *model = model_of(tj, error);
    if (!model)
        return FALSE;
    gint64 max_base = -1, max_id;
    if (!each_vocab(model, count_vocab, &max_base, error))
        return FALSE;
    const gint64 n_base = max_base + 1;
    max_id = max_base;
    JsonArray *added = added_tokens_of(tj);
    for (guint i = 0; added && i < json_array_get_length(added); i++) {
        gint64 id;
        const char *content;
        gboolean special;
        if (!added_entry(added, i, &id, &content, &special, error))
            return FALSE;
        if (id > max_id)
            max_id = id;
    }
    if (max_id >= (gint64)1 << 24) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    TJ ": token id %" G_GINT64_FORMAT " is too large", max_id);
        return FALSE;
    }
    v->model = "llama";
    v->source = TJ;
    v->pre = g_strdup("default");
    v->check_ids = TRUE;
    vocab_alloc(v, max_id + 1, TRUE);
    if (!each_vocab(model, put_vocab_token, v, error))
        return FALSE;
    for (gint64 i = 0; i < n_base; i++)
        if (v->tokens[i] && is_byte_token(v->tokens[i]))
            v->types[i] = MOE_TOKEN_BYTE;
    for (guint i = 0; added && i < json_array_get_length(added); i++) {
        gint64 id;
        const char *content;
        gboolean special;
        added_entry(added, i, &id, &content, &special, NULL);
        if (id < n_base) {
            if (special)
                v->types[id] = MOE_TOKEN_CONTROL;
            v->scores[id] = -1000.0f;
            continue;
        }
        g_free(v->tokens[id]);
        v->tokens[id] = g_strdup(content);
        v->types[id] = special ? MOE_TOKEN_CONTROL : MOE_TOKEN_USER_DEFINED;
        v->scores[id] = -1000.0f;
    }
    for (gint64 i = 0; i < v->n_tokens; i++) {
        if (!v->tokens[i]) {
            v->tokens[i] = g_strdup_printf("[PAD%" G_GINT64_FORMAT "]", i);
            v->types[i] = MOE_TOKEN_UNUSED;
            v->scores[i] = -1000.0f;
        }
    }
    g_autoptr(GPtrArray) merges = g_ptr_array_new_with_free_func(g_free);
    if (!load_merges(model, merges, error))
        return FALSE;
    scores_from_merges(v, n_base, merges);
    return TRUE;
}

/* ---- entry ---- */

gboolean hf_vocab_load(const char *dir, const hf_config *c, JsonObject *tj,
                       JsonObject *tc, hf_vocab *v, GError **error)
{
    memset(v, 0, sizeof *v);
    gboolean ok;
    g_autofree char *spm = g_build_filename(dir, "tokenizer.model", NULL);
    if (c->arch == HF_ARCH_MIXTRAL && g_file_test(spm, G_FILE_TEST_EXISTS)) {
        ok = hf_spm_load(dir, c->n_vocab, tc, v, error);
    } else if (!tj) {
        g_autofree char *path = g_build_filename(dir, TJ, NULL);
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    "%s: missing (and no tokenizer.model)", path);
        ok = FALSE;
    } else if (c->arch == HF_ARCH_MIXTRAL && is_spm_like(tj)) {
        ok = load_spm_like(tj, v, error);
    } else {
        ok = load_gpt2(c, tj, v, error);
    }
    if (!ok)
        hf_vocab_clear(v);
    return ok;
}

/*
 * vocab-special.c — the rules that decide which tokens are special: the
 * special ids (file keys, else llama.cpp's defaults, else found by their
 * well-known text), the end-of-generation set, the attribute corrections
 * llama.cpp applies by token text and model name, and the trie that finds
 * special-token text inside input. These rules are llama.cpp's, reproduced
 * so a GGUF file behaves the same in both programs.
 */
#include "vocab.h"
#include "util.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static int32_t find_text(const moe_vocab *v, const char *s)
{
    return moe_strmap_get(&v->map, s, strlen(s));
}

static bool text_is(const moe_vocab *v, int32_t id, const char *s)
{
    size_t n = strlen(s);
    return v->len[id] == n && memcmp(v->blob + v->off[id], s, n) == 0;
}

/* The first listed text the vocabulary has: its id, marked control. */
static int32_t detect(moe_vocab *v, const char *const *texts)
{
    for (; *texts; texts++) {
        int32_t id = find_text(v, *texts);
        if (id >= 0) {
            v->attr[id] |= ATTR_CONTROL;
            return id;
        }
    }
    return -1;
}

static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<end_of_utterance>", NULL};
static const char *const eom_texts[] = {"<|eom_id|>", NULL};
static const char *const fim_pre_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
    "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const fim_suf_texts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>",
    "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const fim_mid_texts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
    "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
static const char *const fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                            "[PAD]", NULL};
static const char *const fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                            "<REPO>", "<reponame>", NULL};
static const char *const fim_sep_texts[] = {"<|file_sep|>", NULL};

/* Texts that end generation wherever they appear. */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "[e~[", NULL};

static void eog_add(moe_vocab *v, int32_t id)
{
    if (id < 0)
        return;
    for (size_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id)
            return;
    v->eog[v->n_eog++] = id;
}

static void eog_remove(moe_vocab *v, int32_t id)
{
    for (size_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) {
            v->eog[i] = v->eog[--v->n_eog];
            return;
        }
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static bool contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; hay && *hay; hay++) {
        size_t k = 0;
        while (k < n && hay[k] && tolower((unsigned char)hay[k]) == needle[k])
            k++;
        if (k == n)
            return true;
    }
    return false;
}

static void set_attr_by_text(moe_vocab *v, const char *text, uint16_t bit, bool on)
{
    int32_t id = find_text(v, text);
    if (id < 0)
        return;
    if (on)
        v->attr[id] |= bit;
    else
        v->attr[id] &= (uint16_t)~bit;
}

/* Special ids, EOG set and attribute corrections, in llama.cpp's order.
 * The ids in v->special already hold the file's keys or the defaults. */
moe_status moe_vocab_apply_special_rules(moe_vocab *v, const moe_vocab_desc *d, moe_err *err);
moe_status moe_vocab_apply_special_rules(moe_vocab *v, const moe_vocab_desc *d, moe_err *err)
{
    int32_t n = v->n_tokens;
    int32_t *sp = v->special;

    if (sp[MOE_SPECIAL_EOT] < 0)
        sp[MOE_SPECIAL_EOT] = detect(v, eot_texts);
    if (v->eom < 0)
        v->eom = detect(v, eom_texts);
    if (sp[MOE_SPECIAL_FIM_PRE] < 0)
        sp[MOE_SPECIAL_FIM_PRE] = detect(v, fim_pre_texts);
    if (sp[MOE_SPECIAL_FIM_SUF] < 0)
        sp[MOE_SPECIAL_FIM_SUF] = detect(v, fim_suf_texts);
    if (sp[MOE_SPECIAL_FIM_MID] < 0)
        sp[MOE_SPECIAL_FIM_MID] = detect(v, fim_mid_texts);
    if (sp[MOE_SPECIAL_FIM_PAD] < 0)
        sp[MOE_SPECIAL_FIM_PAD] = detect(v, fim_pad_texts);
    if (sp[MOE_SPECIAL_FIM_REP] < 0)
        sp[MOE_SPECIAL_FIM_REP] = detect(v, fim_rep_texts);
    if (sp[MOE_SPECIAL_FIM_SEP] < 0)
        sp[MOE_SPECIAL_FIM_SEP] = detect(v, fim_sep_texts);

    /* Control tokens named "unused..." are unused. */
    for (int32_t id = 0; id < n; id++) {
        if (!(v->attr[id] & ATTR_CONTROL))
            continue;
        const char *t = v->blob + v->off[id];
        for (uint32_t i = 0; i + 6 <= v->len[id]; i++)
            if (memcmp(t + i, "unused", 6) == 0) {
                v->attr[id] |= ATTR_UNUSED;
                break;
            }
    }

    /* End of generation: FIM pad/repo/sep, every token with an EOG text,
     * then EOS, EOT and EOM. */
    size_t n_texts = sizeof eog_texts / sizeof eog_texts[0];
    v->eog = malloc((n_texts + 8) * sizeof(int32_t));
    if (!v->eog)
        return moe_fail(err, MOE_ERR_NOMEM, "vocabulary: out of memory");
    v->n_eog = 0;
    eog_add(v, sp[MOE_SPECIAL_FIM_PAD]);
    eog_add(v, sp[MOE_SPECIAL_FIM_REP]);
    eog_add(v, sp[MOE_SPECIAL_FIM_SEP]);
    for (const char *const *t = eog_texts; *t; t++) {
        int32_t id = find_text(v, *t);
        if (id >= 0) {
            eog_add(v, id);
            v->attr[id] |= ATTR_CONTROL;
        }
    }
    /* gpt-oss: these chat-format tokens always render. */
    static const char *const always_render[] = {"<|channel|>", "<|message|>", "<|start|>",
                                                "<|constrain|>", NULL};
    for (const char *const *t = always_render; *t; t++) {
        int32_t id = find_text(v, *t);
        if (id >= 0)
            v->attr[id] = ATTR_USER_DEFINED;
    }
    eog_add(v, sp[MOE_SPECIAL_EOS]);
    eog_add(v, sp[MOE_SPECIAL_EOT]);
    eog_add(v, v->eom);

    /* With <|return|>/<|call|> (gpt-oss) or <|calls|>/<|flush|> (Solar
     * Open) present, <|end|> ends a message, not generation. */
    bool has_return = false, has_call = false, has_flush = false;
    int32_t end_id = -1, s_id = -1;
    bool has_tool_response = false;
    for (size_t i = 0; i < v->n_eog; i++) {
        int32_t id = v->eog[i];
        if (text_is(v, id, "<|return|>"))
            has_return = true;
        else if (text_is(v, id, "<|call|>") || text_is(v, id, "<|calls|>"))
            has_call = true;
        else if (text_is(v, id, "<|flush|>"))
            has_flush = true;
        else if (text_is(v, id, "<|end|>"))
            end_id = id;
        if (text_is(v, id, "<|tool_response>"))
            has_tool_response = true;
        else if (text_is(v, id, "</s>"))
            s_id = id;
    }
    if (end_id >= 0 && ((has_return && has_call) || (has_call && has_flush))) {
        eog_remove(v, end_id);
        v->attr[end_id] = ATTR_USER_DEFINED;
    }
    /* Gemma 4: </s> is an ordinary token there. */
    if (has_tool_response && s_id >= 0) {
        eog_remove(v, s_id);
        v->attr[s_id] = ATTR_NORMAL;
    }
    qsort(v->eog, v->n_eog, sizeof(int32_t), cmp_i32);

    /* Whitespace-stripping special tokens, by model and tokenizer name. */
    bool strip_rules_phi3 = contains_ci(d->name, "phi-3") || contains_ci(d->name, "phi3");
    if (d->pre && (strstr(d->pre, "jina-v2-de") || strstr(d->pre, "jina-v2-es") ||
                   strstr(d->pre, "jina-v2-code"))) {
        set_attr_by_text(v, "<mask>", ATTR_LSTRIP, true);
    } else if (strip_rules_phi3) {
        for (int32_t id = 0; id < n; id++)
            if (v->attr[id] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN))
                v->attr[id] |= ATTR_RSTRIP;
        set_attr_by_text(v, "</s>", ATTR_RSTRIP, true);
        set_attr_by_text(v, "<unk>", ATTR_RSTRIP, false);
        set_attr_by_text(v, "<s>", ATTR_RSTRIP, false);
        set_attr_by_text(v, "<|endoftext|>", ATTR_RSTRIP, false);
    } else if (contains_ci(d->name, "modern-bert")) {
        set_attr_by_text(v, "[MASK]", ATTR_LSTRIP, true);
    }
    return MOE_OK;
}

/* ---- special-token candidates and their trie ---------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int32_t trie_child(moe_vocab *v, int32_t node, uint8_t byte, bool create)
{
    int32_t *link = node < 0 ? &v->trie_root[byte] : &v->trie[node].child;
    if (node < 0) {
        if (*link >= 0 || !create)
            return *link;
    } else {
        for (int32_t c = *link; c >= 0; c = v->trie[c].sibling)
            if (v->trie[c].byte == byte)
                return c;
        if (!create)
            return -1;
    }
    int32_t id = (int32_t)v->n_trie++;
    v->trie[id] = (moe_trie_node){.child = -1, .sibling = node < 0 ? -1 : *link,
                                  .cand = -1, .cand_user = -1, .byte = byte};
    *link = id;
    return id;
}

/* Builds the candidate list (control, user-defined and unknown tokens,
 * longest first as llama.cpp tries them) and a byte trie over their texts.
 * Call after every attribute correction. */
moe_status moe_vocab_build_special_trie(moe_vocab *v, moe_err *err);
moe_status moe_vocab_build_special_trie(moe_vocab *v, moe_err *err)
{
    size_t n_cands = 0, n_bytes = 0;
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->attr[id] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)) {
            n_cands++;
            n_bytes += v->len[id];
        }
    for (int b = 0; b < 256; b++)
        v->trie_root[b] = -1;
    v->n_cands = n_cands;
    if (!n_cands)
        return MOE_OK;
    v->cands = malloc(n_cands * sizeof(int32_t));
    v->trie = malloc(n_bytes * sizeof(moe_trie_node));
    uint64_t *keys = malloc(n_cands * sizeof(uint64_t));
    if (!v->cands || !v->trie || !keys) {
        free(keys);
        return moe_fail(err, MOE_ERR_NOMEM, "vocabulary: out of memory for special tokens");
    }
    /* Sort key: longer text first, then lower id. */
    size_t k = 0;
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->attr[id] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN))
            keys[k++] = ((uint64_t)(UINT32_MAX - v->len[id]) << 32) | (uint32_t)id;
    qsort(keys, n_cands, sizeof(uint64_t), cmp_u64);
    for (k = 0; k < n_cands; k++)
        v->cands[k] = (int32_t)(keys[k] & 0xFFFFFFFFu);
    free(keys);

    for (size_t c = 0; c < n_cands; c++) {
        int32_t id = v->cands[c];
        const uint8_t *t = (const uint8_t *)v->blob + v->off[id];
        int32_t node = -1;
        for (uint32_t i = 0; i < v->len[id]; i++)
            node = trie_child(v, node, t[i], true);
        if (node < 0)
            continue;
        /* Candidates arrive in priority order: keep the first per kind. */
        if (v->trie[node].cand < 0)
            v->trie[node].cand = (int32_t)c;
        if (v->trie[node].cand_user < 0 && !(v->attr[id] & (ATTR_CONTROL | ATTR_UNKNOWN)))
            v->trie[node].cand_user = (int32_t)c;
    }
    return MOE_OK;
}

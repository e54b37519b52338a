/*
 * vocab-load.c — moe_vocab_load: reads a GGUF file's tokenizer.ggml.* keys,
 * checks their types and lengths (a bad key is reported by name, never
 * trusted), and hands a moe_vocab_desc to moe_vocab_build. The GGUF handle
 * is only borrowed during the call.
 */
#include "vocab.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

#define KEY_PREFIX "tokenizer.ggml."

static int64_t id_key(const moe_gguf *g, const char *key)
{
    int64_t i = moe_gguf_find_key(g, key);
    uint64_t v;
    if (i < 0 || moe_gguf_get_u64(g, i, &v) != MOE_OK || v > INT32_MAX)
        return -1;
    return (int64_t)v;
}

static int bool_key(const moe_gguf *g, const char *key)
{
    int64_t i = moe_gguf_find_key(g, key);
    bool b;
    if (i < 0 || moe_gguf_get_bool(g, i, &b) != MOE_OK)
        return -1;
    return b ? 1 : 0;
}

/* Index of an array key of element type `elem` (or `elem2`), at least
 * min_len long; -1 if absent; -2 (message written) if malformed. */
static int64_t array_key(const moe_gguf *g, const char *key, moe_gguf_type elem,
                         moe_gguf_type elem2, uint64_t min_len, moe_err *err)
{
    int64_t i = moe_gguf_find_key(g, key);
    if (i < 0)
        return -1;
    moe_gguf_type at = moe_gguf_arr_type(g, i);
    if (moe_gguf_kv_type(g, i) != MOE_GGUF_ARRAY || (at != elem && at != elem2)) {
        moe_fail(err, MOE_ERR_FORMAT, "%s: wrong type (want an array of type %d)", key,
                 (int)elem);
        return -2;
    }
    if (moe_gguf_arr_len(g, i) < min_len) {
        moe_fail(err, MOE_ERR_FORMAT, "%s: %llu entries, need %llu", key,
                 (unsigned long long)moe_gguf_arr_len(g, i), (unsigned long long)min_len);
        return -2;
    }
    return i;
}

static moe_str *read_strings(const moe_gguf *g, int64_t idx, uint64_t n)
{
    moe_str *s = malloc((n ? n : 1) * sizeof(moe_str));
    if (!s)
        return NULL;
    for (uint64_t j = 0; j < n; j++)
        s[j] = moe_gguf_arr_str(g, idx, j);
    return s;
}

moe_status moe_vocab_load(const moe_gguf *g, moe_vocab **out, moe_err *err)
{
    if (!out)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_vocab_load: out is NULL");
    *out = NULL;
    if (!g)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_vocab_load: gguf is NULL");

    moe_vocab_desc d;
    memset(&d, 0, sizeof d);
    moe_str *tokens = NULL, *merges = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    moe_status st = MOE_OK;

    d.model = moe_gguf_str_or(g, KEY_PREFIX "model", NULL);
    if (!d.model)
        return moe_fail(err, MOE_ERR_FORMAT, KEY_PREFIX "model: missing (no tokenizer in file)");
    d.pre = moe_gguf_str_or(g, KEY_PREFIX "pre", NULL);
    d.name = moe_gguf_str_or(g, "general.name", NULL);

    int64_t ti = array_key(g, KEY_PREFIX "tokens", MOE_GGUF_STRING, MOE_GGUF_STRING, 1, err);
    if (ti == -1)
        return moe_fail(err, MOE_ERR_FORMAT, KEY_PREFIX "tokens: missing");
    if (ti < 0)
        return MOE_ERR_FORMAT;
    uint64_t n = moe_gguf_arr_len(g, ti);
    if (n >= (uint64_t)INT32_MAX / 2)
        return moe_fail(err, MOE_ERR_FORMAT, KEY_PREFIX "tokens: %llu tokens is too many",
                        (unsigned long long)n);
    d.n_tokens = (uint32_t)n;

    int64_t si = array_key(g, KEY_PREFIX "scores", MOE_GGUF_FLOAT32, MOE_GGUF_INT32, n, err);
    int64_t yi = array_key(g, KEY_PREFIX "token_type", MOE_GGUF_INT32, MOE_GGUF_INT32, n, err);
    int64_t mi = array_key(g, KEY_PREFIX "merges", MOE_GGUF_STRING, MOE_GGUF_STRING, 0, err);
    if (si == -2 || yi == -2 || mi == -2)
        return MOE_ERR_FORMAT;

    tokens = read_strings(g, ti, n);
    if (!tokens)
        goto nomem;
    d.tokens = tokens;
    if (si >= 0) {
        const unsigned char *raw = moe_gguf_arr_data(g, si);
        bool is_int = moe_gguf_arr_type(g, si) == MOE_GGUF_INT32;
        scores = malloc(n * sizeof(float));
        if (!scores)
            goto nomem;
        for (uint64_t j = 0; j < n; j++) {
            if (is_int) {
                int32_t x;
                memcpy(&x, raw + 4 * j, 4);
                scores[j] = (float)x;
            } else {
                memcpy(&scores[j], raw + 4 * j, 4);
            }
        }
        d.scores = scores;
    }
    if (yi >= 0) {
        types = malloc(n * sizeof(int32_t));
        if (!types)
            goto nomem;
        memcpy(types, moe_gguf_arr_data(g, yi), n * sizeof(int32_t));
        d.types = types;
    }
    if (mi >= 0) {
        d.n_merges = moe_gguf_arr_len(g, mi);
        merges = read_strings(g, mi, d.n_merges);
        if (!merges)
            goto nomem;
        d.merges = merges;
    }

    static const struct { moe_special which; const char *key; } id_keys[] = {
        {MOE_SPECIAL_BOS, KEY_PREFIX "bos_token_id"},
        {MOE_SPECIAL_EOS, KEY_PREFIX "eos_token_id"},
        {MOE_SPECIAL_EOT, KEY_PREFIX "eot_token_id"},
        {MOE_SPECIAL_UNK, KEY_PREFIX "unknown_token_id"},
        {MOE_SPECIAL_PAD, KEY_PREFIX "padding_token_id"},
        {MOE_SPECIAL_SEP, KEY_PREFIX "seperator_token_id"}, /* sic, as in GGUF */
        {MOE_SPECIAL_FIM_PRE, KEY_PREFIX "fim_pre_token_id"},
        {MOE_SPECIAL_FIM_SUF, KEY_PREFIX "fim_suf_token_id"},
        {MOE_SPECIAL_FIM_MID, KEY_PREFIX "fim_mid_token_id"},
        {MOE_SPECIAL_FIM_PAD, KEY_PREFIX "fim_pad_token_id"},
        {MOE_SPECIAL_FIM_REP, KEY_PREFIX "fim_rep_token_id"},
        {MOE_SPECIAL_FIM_SEP, KEY_PREFIX "fim_sep_token_id"},
        /* Older names of the FIM keys; read after, so they win as in llama.cpp. */
        {MOE_SPECIAL_FIM_PRE, KEY_PREFIX "prefix_token_id"},
        {MOE_SPECIAL_FIM_SUF, KEY_PREFIX "suffix_token_id"},
        {MOE_SPECIAL_FIM_MID, KEY_PREFIX "middle_token_id"},
    };
    for (int i = 0; i < MOE_SPECIAL_COUNT; i++)
        d.ids[i] = -1;
    for (size_t k = 0; k < sizeof id_keys / sizeof id_keys[0]; k++) {
        int64_t id = id_key(g, id_keys[k].key);
        if (id >= 0 && id < (int64_t)n)
            d.ids[id_keys[k].which] = id;
        else if (id >= 0 && d.ids[id_keys[k].which] < 0)
            d.ids[id_keys[k].which] = id; /* out of range: build keeps the default */
    }
    d.eom_id = id_key(g, KEY_PREFIX "eom_token_id");
    d.add_bos = bool_key(g, KEY_PREFIX "add_bos_token");
    d.add_eos = bool_key(g, KEY_PREFIX "add_eos_token");
    d.add_space_prefix = bool_key(g, KEY_PREFIX "add_space_prefix");

    st = moe_vocab_build(&d, out, err);
    goto done;
nomem:
    st = moe_fail(err, MOE_ERR_NOMEM, "vocabulary: out of memory reading %llu tokens",
                  (unsigned long long)n);
done:
    free(tokens);
    free(merges);
    free(scores);
    free(types);
    return st;
}

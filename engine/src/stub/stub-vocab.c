/*
 * stub-vocab.c — TEMPORARY stand-in for the tokenizer the "tok" helper is
 * writing: only the token count, special ids and piece text. Reverted
 * before merge.
 */
#include "util.h"

#include <stdlib.h>
#include <string.h>

struct moe_vocab {
    const moe_gguf *gguf;
    int64_t tokens_key;
    int32_t n;
    int32_t special[MOE_SPECIAL_COUNT];
};

moe_status moe_vocab_load(const moe_gguf *gguf, moe_vocab **out, moe_err *err)
{
    int64_t k = moe_gguf_find_key(gguf, "tokenizer.ggml.tokens");
    if (k < 0) return moe_fail(err, MOE_ERR_NOT_FOUND, "tokenizer.ggml.tokens missing");
    moe_vocab *v = calloc(1, sizeof *v);
    v->gguf = gguf;
    v->tokens_key = k;
    v->n = (int32_t)moe_gguf_arr_len(gguf, k);
    for (int i = 0; i < MOE_SPECIAL_COUNT; i++) v->special[i] = -1;
    v->special[MOE_SPECIAL_BOS] = (int32_t)moe_gguf_u64_or(gguf, "tokenizer.ggml.bos_token_id", (uint64_t)-1);
    v->special[MOE_SPECIAL_EOS] = (int32_t)moe_gguf_u64_or(gguf, "tokenizer.ggml.eos_token_id", (uint64_t)-1);
    *out = v;
    return MOE_OK;
}

void moe_vocab_free(moe_vocab *v) { free(v); }
int32_t moe_vocab_n_tokens(const moe_vocab *v) { return v->n; }
int32_t moe_vocab_special(const moe_vocab *v, moe_special w) { return v->special[w]; }
bool moe_vocab_add_bos(const moe_vocab *v) { (void)v; return false; }
bool moe_vocab_is_eog(const moe_vocab *v, int32_t id) { return id >= 0 && id == v->special[MOE_SPECIAL_EOS]; }

int64_t moe_token_to_piece(const moe_vocab *v, int32_t id, bool render_special, char *buf, size_t cap)
{
    (void)render_special;
    if (id < 0 || id >= v->n) return -1;
    moe_str s = moe_gguf_arr_str(v->gguf, v->tokens_key, (uint64_t)id);
    size_t n = s.len < cap ? s.len : cap;
    memcpy(buf, s.ptr, n);
    return (int64_t)s.len;
}

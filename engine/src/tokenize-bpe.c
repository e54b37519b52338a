/*
 * tokenize-bpe.c — byte-level BPE (tokenizer.ggml.model = "gpt2"): decode
 * the fragment, cut it into words with the pre-tokenizer, and merge each
 * word's bytes by rank.
 *
 * A word starts as one symbol per UTF-8 byte (its GPT-2 character's id);
 * the adjacent pair with the lowest merge rank (leftmost on ties) merges,
 * until no pair has a rank — the order llama.cpp's priority queue gives.
 * Symbols are a doubly linked list over arrays:
 *
 *   id[i]    symbol id (token, or extra id for merge-only strings, or -1)
 *   start[i], len[i]   bytes of the word it covers
 *   prev[i], next[i]   neighbours, -1 at the ends; len 0 = merged away
 *
 * Short words rescan a per-pair rank array (cheaper than a heap at that
 * size); long ones (a run of CJK letters can be thousands of bytes) use a
 * binary heap of candidate pairs, dropping entries that went stale.
 */
#include "vocab.h"
#include "unicode.h"
#include "util.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define SMALL_WORD 32

typedef struct pair_cand {
    int32_t rank;
    int32_t left;
    int32_t lid, rid; /* ids when queued: if either side changed, stale */
} pair_cand;

struct moe_bpe_scratch {
    uint32_t      *cps;
    uint8_t       *props;
    size_t         cap_cps;
    moe_pretok_buf pbuf;
    uint8_t       *bytes;  /* the word's bytes */
    int32_t       *id, *prev, *next, *rank, *res;
    uint32_t      *start, *len;
    size_t         cap_syms;
    pair_cand     *heap;
    size_t         cap_heap;
    char          *mapped; /* the word in GPT-2 characters */
    size_t         cap_mapped;
};

moe_bpe_scratch *moe_bpe_scratch_new(void)
{
    return calloc(1, sizeof(moe_bpe_scratch));
}

static void free_syms(moe_bpe_scratch *s)
{
    free(s->bytes);
    free(s->id);
    free(s->prev);
    free(s->next);
    free(s->rank);
    free(s->res);
    free(s->start);
    free(s->len);
}

void moe_bpe_scratch_free(moe_bpe_scratch *s)
{
    if (!s)
        return;
    free(s->cps);
    free(s->props);
    moe_pretok_buf_free(&s->pbuf);
    free_syms(s);
    free(s->heap);
    free(s->mapped);
    free(s);
}

static int reserve_syms(moe_bpe_scratch *s, size_t n)
{
    if (n <= s->cap_syms)
        return 0;
    size_t nc = n < 256 ? 256 : n;
    free_syms(s);
    s->bytes = malloc(nc);
    s->id = malloc(nc * sizeof(int32_t));
    s->prev = malloc(nc * sizeof(int32_t));
    s->next = malloc(nc * sizeof(int32_t));
    s->rank = malloc(nc * sizeof(int32_t));
    s->res = malloc(nc * sizeof(int32_t));
    s->start = malloc(nc * sizeof(uint32_t));
    s->len = malloc(nc * sizeof(uint32_t));
    free(s->mapped);
    free(s->heap);
    s->mapped = malloc(2 * nc);
    /* Pushes: m-1 pairs at first, then at most two per merge. */
    s->heap = malloc(3 * nc * sizeof(pair_cand));
    if (!s->bytes || !s->id || !s->prev || !s->next || !s->rank || !s->res || !s->start ||
        !s->len || !s->mapped || !s->heap) {
        s->cap_syms = 0;
        return -1;
    }
    s->cap_syms = nc;
    s->cap_mapped = 2 * nc;
    s->cap_heap = 3 * nc;
    return 0;
}

/* Rank and result of merging symbols a and b; INT32_MAX if they don't. */
static inline int32_t pair_rank(const moe_vocab *v, int32_t a, int32_t b, int32_t *res)
{
    if (a < 0 || b < 0)
        return INT32_MAX;
    const moe_merge_slot *m = moe_pairmap_get(&v->merges, a, b);
    if (!m)
        return INT32_MAX;
    *res = m->result;
    return m->rank;
}

/* A symbol that is not a token: llama.cpp emits the token of each single
 * byte of its GPT-2 text that has one. */
static void emit_fallback(const moe_vocab *v, const uint8_t *bytes, size_t n, moe_emit *e)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t enc[4];
        size_t k = moe_utf8_encode(moe_gpt2_byte_to_cp(bytes[i]), enc);
        for (size_t j = 0; j < k; j++)
            if (v->byte_tok1[enc[j]] >= 0)
                moe_emit_id(e, v->byte_tok1[enc[j]]);
    }
}

static void merge_at(moe_bpe_scratch *s, int32_t i, int32_t new_id)
{
    int32_t j = s->next[i];
    s->id[i] = new_id;
    s->len[i] += s->len[j];
    s->len[j] = 0;
    s->next[i] = s->next[j];
    if (s->next[j] >= 0)
        s->prev[s->next[j]] = i;
}

static void merge_small(const moe_vocab *v, moe_bpe_scratch *s, size_t m)
{
    for (size_t i = 0; i + 1 < m; i++)
        s->rank[i] = pair_rank(v, s->id[i], s->id[i + 1], &s->res[i]);
    for (;;) {
        int32_t best = -1, best_rank = INT32_MAX;
        for (int32_t i = 0; i >= 0; i = s->next[i])
            if (s->next[i] >= 0 && s->rank[i] < best_rank) {
                best_rank = s->rank[i];
                best = i;
            }
        if (best < 0)
            return;
        merge_at(s, best, s->res[best]);
        if (s->next[best] >= 0)
            s->rank[best] = pair_rank(v, s->id[best], s->id[s->next[best]], &s->res[best]);
        int32_t p = s->prev[best];
        if (p >= 0)
            s->rank[p] = pair_rank(v, s->id[p], s->id[best], &s->res[p]);
    }
}

static inline bool cand_less(const pair_cand *a, const pair_cand *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(pair_cand *h, size_t *n, pair_cand c)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static pair_cand heap_pop(pair_cand *h, size_t *n)
{
    pair_cand top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && cand_less(&h[c + 1], &h[c]))
            c++;
        if (!cand_less(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

static void heap_try(const moe_vocab *v, moe_bpe_scratch *s, size_t *n, int32_t left)
{
    if (left < 0 || s->next[left] < 0)
        return;
    int32_t right = s->next[left], res;
    int32_t r = pair_rank(v, s->id[left], s->id[right], &res);
    if (r != INT32_MAX)
        heap_push(s->heap, n, (pair_cand){r, left, s->id[left], s->id[right]});
}

static void merge_large(const moe_vocab *v, moe_bpe_scratch *s, size_t m)
{
    size_t n = 0;
    for (size_t i = 0; i + 1 < m; i++)
        heap_try(v, s, &n, (int32_t)i);
    while (n > 0) {
        pair_cand c = heap_pop(s->heap, &n);
        int32_t l = c.left, r = s->next[l];
        if (s->len[l] == 0 || r < 0 || s->id[l] != c.lid || s->id[r] != c.rid)
            continue; /* stale: one side merged since */
        int32_t res = 0;
        pair_rank(v, c.lid, c.rid, &res);
        merge_at(s, l, res);
        heap_try(v, s, &n, s->prev[l]);
        heap_try(v, s, &n, l);
    }
}

static void bpe_word(const moe_vocab *v, moe_bpe_scratch *s, size_t m, moe_emit *e)
{
    const uint8_t *b = s->bytes;
    if (v->ignore_merges && m > 1) {
        /* The whole word is a token: take it without merging. */
        size_t k = 0;
        for (size_t i = 0; i < m; i++)
            k += moe_utf8_encode(moe_gpt2_byte_to_cp(b[i]), (uint8_t *)s->mapped + k);
        int32_t id = moe_strmap_get(&v->map, s->mapped, k);
        if (id >= 0) {
            moe_emit_id(e, id);
            return;
        }
    }
    for (size_t i = 0; i < m; i++) {
        s->id[i] = v->byte_sym[b[i]];
        s->start[i] = (uint32_t)i;
        s->len[i] = 1;
        s->prev[i] = (int32_t)i - 1;
        s->next[i] = i + 1 < m ? (int32_t)i + 1 : -1;
    }
    if (m <= SMALL_WORD)
        merge_small(v, s, m);
    else
        merge_large(v, s, m);
    for (int32_t i = 0; i >= 0; i = s->next[i]) {
        int32_t id = s->id[i];
        if (id >= 0 && id < v->n_tokens)
            moe_emit_id(e, id);
        else
            emit_fallback(v, b + s->start[i], s->len[i], e);
    }
}

moe_status moe_bpe_tokenize(const moe_vocab *v, const char *text, size_t len,
                            moe_bpe_scratch *s, moe_emit *e, moe_err *err)
{
    if (len > s->cap_cps) {
        free(s->cps);
        free(s->props);
        s->cps = malloc(len * sizeof(uint32_t));
        s->props = malloc(len);
        s->cap_cps = s->cps && s->props ? len : 0;
        if (!s->cap_cps)
            return moe_fail(err, MOE_ERR_NOMEM, "tokenizer: out of memory for %zu bytes", len);
    }
    size_t n = moe_utf8_decode_all((const uint8_t *)text, len, s->cps);
    for (size_t i = 0; i < n; i++)
        s->props[i] = moe_uprops(s->cps[i]);

    const size_t *lens;
    size_t n_words;
    moe_status st = moe_pretok_split(v->pretok, s->cps, s->props, n, &s->pbuf, &lens, &n_words,
                                     err);
    if (st != MOE_OK)
        return st;
    size_t c = 0;
    for (size_t w = 0; w < n_words; w++) {
        if (lens[w] > INT32_MAX / 4)
            return moe_fail(err, MOE_ERR_UNSUPPORTED,
                            "tokenizer: a %zu-character word is too long", lens[w]);
        if (reserve_syms(s, 4 * lens[w]))
            return moe_fail(err, MOE_ERR_NOMEM, "tokenizer: out of memory for a %zu-character word",
                            lens[w]);
        /* Re-encode the word: invalid input bytes are U+FFFD by now, as in
         * llama.cpp. */
        size_t m = 0;
        for (size_t k = 0; k < lens[w]; k++)
            m += moe_utf8_encode(s->cps[c++], s->bytes + m);
        bpe_word(v, s, m, e);
    }
    return MOE_OK;
}

/*
 * tokenize.c — moe_tokenize: finds special-token text in the input, cuts the
 * input into plain-text fragments around it, runs the vocabulary's tokenizer
 * (tokenize-bpe.c or tokenize-spm.c) on each fragment and adds BOS/EOS.
 *
 * Special tokens are matched as llama.cpp matches them: candidates (control,
 * user-defined and unknown tokens; only user-defined ones unless
 * MOE_TOKENIZE_PARSE_SPECIAL) are taken longest first, each claiming its
 * occurrences left to right in text no earlier candidate claimed. Doing
 * that one token at a time costs a text scan per candidate, so instead one
 * trie walk collects every occurrence of every candidate, and the
 * occurrences are then accepted in (candidate priority, position) order
 * against a byte map of claimed text — the same outcome.
 */
#include "vocab.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

typedef struct occurrence {
    uint32_t cand; /* priority: index into v->cands */
    uint32_t pos;
} occurrence;

static int cmp_occ(const void *a, const void *b)
{
    const occurrence *x = a, *y = b;
    if (x->cand != y->cand)
        return x->cand < y->cand ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static int cmp_occ_pos(const void *a, const void *b)
{
    const occurrence *x = a, *y = b;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static inline bool is_c_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

typedef struct tok_state {
    const moe_vocab *v;
    moe_emit        *emit;
    moe_bpe_scratch *bpe;
    bool             prev_special; /* SPM: a fragment after a special token
                                      (or at the start) gets a space prefix */
} tok_state;

static moe_status run_text(tok_state *ts, const char *text, size_t len, moe_err *err)
{
    moe_status st;
    if (ts->v->kind == MOE_VOCAB_BPE) {
        st = moe_bpe_tokenize(ts->v, text, len, ts->bpe, ts->emit, err);
    } else {
        st = moe_spm_tokenize(ts->v, text, len, ts->v->add_space_prefix && ts->prev_special,
                              ts->emit, err);
    }
    ts->prev_special = false;
    return st;
}

static void run_special(tok_state *ts, int32_t id)
{
    moe_emit_id(ts->emit, id);
    ts->prev_special = true;
}

/* Collects every occurrence of an eligible candidate. Returns the count, or
 * (size_t)-1 when memory runs out. */
static size_t find_occurrences(const moe_vocab *v, const uint8_t *t, size_t len, bool parse,
                               occurrence **out)
{
    size_t n = 0, cap = 0;
    occurrence *occ = NULL;
    for (size_t i = 0; i < len; i++) {
        int32_t node = v->trie_root[t[i]];
        size_t j = i;
        while (node >= 0) {
            const moe_trie_node *nd = &v->trie[node];
            int32_t c = parse ? nd->cand : nd->cand_user;
            if (c >= 0) {
                if (n == cap) {
                    size_t nc = cap ? cap * 2 : 64;
                    occurrence *p = realloc(occ, nc * sizeof *p);
                    if (!p) {
                        free(occ);
                        return (size_t)-1;
                    }
                    occ = p;
                    cap = nc;
                }
                occ[n++] = (occurrence){(uint32_t)c, (uint32_t)i};
            }
            if (++j >= len)
                break;
            int32_t ch = nd->child;
            while (ch >= 0 && v->trie[ch].byte != t[j])
                ch = v->trie[ch].sibling;
            node = ch;
        }
    }
    *out = occ;
    return n;
}

/* Claimed-byte states. */
enum { FREE = 0, TAKEN = 1, STRIPPED = 2 };

static moe_status tokenize_parts(tok_state *ts, const char *text, size_t len, bool parse,
                                 moe_err *err)
{
    const moe_vocab *v = ts->v;
    occurrence *occ = NULL;
    size_t n_occ = 0;
    if (v->n_cands && len > 0) {
        if (len > UINT32_MAX)
            return moe_fail(err, MOE_ERR_UNSUPPORTED, "moe_tokenize: %zu bytes is too long", len);
        n_occ = find_occurrences(v, (const uint8_t *)text, len, parse, &occ);
        if (n_occ == (size_t)-1)
            return moe_fail(err, MOE_ERR_NOMEM, "moe_tokenize: out of memory");
    }
    if (n_occ == 0) {
        free(occ);
        return len ? run_text(ts, text, len, err) : MOE_OK;
    }

    uint8_t *claim = calloc(len, 1);
    if (!claim) {
        free(occ);
        return moe_fail(err, MOE_ERR_NOMEM, "moe_tokenize: out of memory");
    }
    qsort(occ, n_occ, sizeof *occ, cmp_occ);
    size_t n_acc = 0;
    for (size_t k = 0; k < n_occ; k++) {
        int32_t id = v->cands[occ[k].cand];
        size_t p = occ[k].pos, n = v->len[id], i;
        for (i = p; i < p + n && claim[i] == FREE; i++)
            ;
        if (i < p + n)
            continue; /* overlaps text already claimed */
        memset(claim + p, TAKEN, n);
        if (v->attr[id] & ATTR_LSTRIP)
            for (i = p; i > 0 && claim[i - 1] == FREE && is_c_space((uint8_t)text[i - 1]); i--)
                claim[i - 1] = STRIPPED;
        if (v->attr[id] & ATTR_RSTRIP)
            for (i = p + n; i < len && claim[i] == FREE && is_c_space((uint8_t)text[i]); i++)
                claim[i] = STRIPPED;
        occ[n_acc++] = occ[k];
    }
    qsort(occ, n_acc, sizeof *occ, cmp_occ_pos);

    moe_status st = MOE_OK;
    size_t pos = 0, a = 0;
    while (pos < len && st == MOE_OK) {
        if (a < n_acc && occ[a].pos == pos) {
            int32_t id = v->cands[occ[a].cand];
            run_special(ts, id);
            pos += v->len[id];
            a++;
        } else if (claim[pos] == STRIPPED) {
            pos++;
        } else {
            size_t e = pos;
            while (e < len && claim[e] == FREE)
                e++;
            st = run_text(ts, text + pos, e - pos, err);
            pos = e;
        }
    }
    free(claim);
    free(occ);
    return st;
}

moe_status moe_tokenize(const moe_vocab *vocab, const char *text, size_t len, unsigned flags,
                        int32_t *tokens, size_t cap, size_t *n_tokens, moe_err *err)
{
    if (n_tokens)
        *n_tokens = 0;
    if (!vocab || !n_tokens || (!text && len) || (!tokens && cap))
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_tokenize: NULL argument");
    moe_emit emit = {tokens, cap, 0};
    tok_state ts = {vocab, &emit, NULL, true};
    moe_status st = MOE_OK;
    bool add = (flags & MOE_TOKENIZE_ADD_SPECIAL) != 0;

    if (vocab->kind == MOE_VOCAB_BPE) {
        ts.bpe = moe_bpe_scratch_new();
        if (!ts.bpe)
            return moe_fail(err, MOE_ERR_NOMEM, "moe_tokenize: out of memory");
    }
    if (add && vocab->add_bos && vocab->special[MOE_SPECIAL_BOS] >= 0)
        moe_emit_id(&emit, vocab->special[MOE_SPECIAL_BOS]);
    st = tokenize_parts(&ts, text, len, (flags & MOE_TOKENIZE_PARSE_SPECIAL) != 0, err);
    if (st == MOE_OK && add && vocab->add_eos && vocab->special[MOE_SPECIAL_EOS] >= 0)
        moe_emit_id(&emit, vocab->special[MOE_SPECIAL_EOS]);
    moe_bpe_scratch_free(ts.bpe);
    if (st != MOE_OK)
        return st;
    *n_tokens = emit.n;
    if (emit.n > cap)
        return moe_fail(err, MOE_ERR_RANGE, "moe_tokenize: %zu tokens do not fit in %zu",
                        emit.n, cap);
    return MOE_OK;
}

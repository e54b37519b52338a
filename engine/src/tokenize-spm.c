/*
 * tokenize-spm.c — SentencePiece BPE (tokenizer.ggml.model = "llama"), as
 * llama.cpp runs it: spaces become "▁" (U+2581), a fragment at the start or
 * after a special token gets a leading "▁" when add_space_prefix is on, and
 * the text is split into characters by their lead byte (an ill-formed byte
 * run stays one symbol). Then, repeatedly, the adjacent pair whose joined
 * text is a token with the highest score (leftmost on ties) merges. A
 * symbol that is not a token at the end falls back to byte tokens
 * (<0xNN>).
 *
 * There is no pre-tokenizer, so a fragment can be one long sequence. It is
 * cut where no merge can ever join two neighbours (no token's text holds
 * that pair of characters: moe_spm_build_bridges), which gives the same
 * result as merging the whole sequence, since the runs cannot interact.
 * Short runs rescan pair scores; long ones use a max-heap of candidate pairs
 * that drops entries gone stale.
 */
#include "vocab.h"
#include "unicode.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

#define SMALL_TEXT 32

typedef struct spm_cand {
    float   score;
    int32_t left;
    int32_t right;
    uint32_t size; /* bytes of both sides when queued */
} spm_cand;

typedef struct spm_state {
    const moe_vocab *v;
    const char      *text;
    uint32_t        *start, *len;
    int32_t         *prev, *next;
    int32_t         *pid;
    spm_cand        *heap;
    size_t           n_heap;
} spm_state;

/* The token the text of symbols l and r (adjacent) spells, or -1. */
static int32_t pair_token(const spm_state *s, int32_t l, int32_t r)
{
    if (l < 0 || r < 0)
        return -1;
    return moe_strmap_get(&s->v->map, s->text + s->start[l], s->len[l] + s->len[r]);
}

static inline bool cand_before(const spm_cand *a, const spm_cand *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(spm_state *s, spm_cand c)
{
    size_t i = s->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_before(&c, &s->heap[p]))
            break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = c;
}

static spm_cand heap_pop(spm_state *s)
{
    spm_cand top = s->heap[0], last = s->heap[--s->n_heap];
    size_t i = 0, n = s->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && cand_before(&s->heap[c + 1], &s->heap[c]))
            c++;
        if (!cand_before(&s->heap[c], &last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    s->heap[i] = last;
    return top;
}

static void try_pair(spm_state *s, int32_t l, int32_t r)
{
    int32_t id = pair_token(s, l, r);
    if (id >= 0)
        heap_push(s, (spm_cand){s->v->scores[id], l, r, s->len[l] + s->len[r]});
}

static void merge(spm_state *s, int32_t l, int32_t r)
{
    s->len[l] += s->len[r];
    s->len[r] = 0;
    s->next[l] = s->next[r];
    if (s->next[r] >= 0)
        s->prev[s->next[r]] = l;
}

/* Merges within the run starting at symbol `first` (the run's ends have
 * prev/next -1). pid[i] caches the token of the pair (i, next[i]). */
static void merge_small(spm_state *s, int32_t first)
{
    for (int32_t i = first; i >= 0; i = s->next[i])
        s->pid[i] = pair_token(s, i, s->next[i]);
    for (;;) {
        int32_t best = -1;
        float best_score = 0;
        for (int32_t i = first; i >= 0; i = s->next[i]) {
            int32_t id = s->pid[i];
            if (id >= 0 && (best < 0 || s->v->scores[id] > best_score)) {
                best = i;
                best_score = s->v->scores[id];
            }
        }
        if (best < 0)
            return;
        merge(s, best, s->next[best]);
        s->pid[best] = pair_token(s, best, s->next[best]);
        if (s->prev[best] >= 0)
            s->pid[s->prev[best]] = pair_token(s, s->prev[best], best);
    }
}

static void merge_large(spm_state *s, int32_t first, int32_t end)
{
    s->n_heap = 0;
    for (int32_t i = first; i + 1 < end; i++)
        try_pair(s, i, i + 1);
    while (s->n_heap > 0) {
        spm_cand c = heap_pop(s);
        if (s->len[c.left] == 0 || s->len[c.right] == 0 ||
            s->len[c.left] + s->len[c.right] != c.size)
            continue; /* stale */
        merge(s, c.left, c.right);
        try_pair(s, s->prev[c.left], c.left);
        try_pair(s, c.left, s->next[c.left]);
    }
}

/* ---- independent runs ----------------------------------------------------- */

static void bridge_put(uint64_t *set, uint64_t mask, uint64_t h)
{
    for (uint64_t i = h;; i++) {
        uint64_t *slot = &set[i & mask];
        if (*slot == h)
            return;
        if (*slot == 0) {
            *slot = h;
            return;
        }
    }
}

static bool bridge_has(const moe_vocab *v, uint64_t h)
{
    for (uint64_t i = h;; i++) {
        uint64_t e = v->spm_bridges[i & v->spm_bridges_mask];
        if (e == h)
            return true;
        if (e == 0)
            return false;
    }
}

/* Records every pair of adjacent characters (split by lead byte, as the
 * text is) inside every token's text. A merge only ever joins two symbols
 * whose joined text is a token, so it can only cross a character boundary
 * whose pair is recorded here. Hash collisions only make it record more. */
moe_status moe_spm_build_bridges(moe_vocab *v, moe_err *err)
{
    uint64_t pairs = 0;
    for (int32_t id = 0; id < v->n_tokens; id++)
        pairs += v->len[id];
    uint64_t size = 16;
    while (size < 2 * pairs + 16)
        size <<= 1;
    v->spm_bridges = calloc(size, sizeof(uint64_t));
    if (!v->spm_bridges)
        return moe_fail(err, MOE_ERR_NOMEM, "vocabulary: out of memory");
    v->spm_bridges_mask = size - 1;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        const char *t = v->blob + v->off[id];
        size_t n = v->len[id], pos = 0, prev = 0, prev_len = 0;
        while (pos < n) {
            size_t l = moe_utf8_lead_len((uint8_t)t[pos]);
            if (l > n - pos)
                l = n - pos;
            if (pos > 0)
                bridge_put(v->spm_bridges, v->spm_bridges_mask,
                           moe_char_pair_hash(t + prev, prev_len, t + pos, l));
            prev = pos;
            prev_len = l;
            pos += l;
        }
    }
    return MOE_OK;
}

moe_status moe_spm_tokenize(const moe_vocab *v, const char *text, size_t len, bool prefix_space,
                            moe_emit *e, moe_err *err)
{
    size_t spaces = 0;
    for (size_t i = 0; i < len; i++)
        spaces += text[i] == ' ';
    /* Each space grows by two bytes; the prefix adds a whole "▁". */
    size_t n_esc = len + 2 * spaces + (prefix_space ? 3 : 0);
    if (n_esc == 0)
        return MOE_OK;
    if (n_esc >= UINT32_MAX / 2)
        return moe_fail(err, MOE_ERR_UNSUPPORTED, "tokenizer: %zu bytes is too long", len);

    spm_state s = {.v = v};
    char *esc = malloc(n_esc);
    s.start = malloc(n_esc * sizeof(uint32_t));
    s.len = malloc(n_esc * sizeof(uint32_t));
    s.prev = malloc(n_esc * sizeof(int32_t));
    s.next = malloc(n_esc * sizeof(int32_t));
    s.pid = malloc(n_esc * sizeof(int32_t));
    /* Pushes: n-1 pairs at first, then at most two per merge. */
    s.heap = n_esc > SMALL_TEXT ? malloc(3 * n_esc * sizeof(spm_cand)) : NULL;
    moe_status st = MOE_OK;
    if (!esc || !s.start || !s.len || !s.prev || !s.next || !s.pid ||
        (n_esc > SMALL_TEXT && !s.heap)) {
        st = moe_fail(err, MOE_ERR_NOMEM, "tokenizer: out of memory for %zu bytes", len);
        goto done;
    }
    size_t o = 0;
    if (prefix_space) {
        memcpy(esc, "\xe2\x96\x81", 3);
        o = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(esc + o, "\xe2\x96\x81", 3);
            o += 3;
        } else {
            esc[o++] = text[i];
        }
    }
    s.text = esc;

    /* Characters, cut into runs no merge can cross. */
    int32_t n = 0;
    for (size_t pos = 0; pos < n_esc; n++) {
        size_t l = moe_utf8_lead_len((uint8_t)esc[pos]);
        if (l > n_esc - pos)
            l = n_esc - pos;
        s.start[n] = (uint32_t)pos;
        s.len[n] = (uint32_t)l;
        s.prev[n] = n - 1;
        s.next[n] = -1;
        if (n > 0) {
            if (bridge_has(v, moe_char_pair_hash(esc + s.start[n - 1], s.len[n - 1], esc + pos, l)))
                s.next[n - 1] = n;
            else
                s.prev[n] = -1;
        }
        pos += l;
    }
    for (int32_t first = 0; first < n;) {
        int32_t end = first + 1;
        while (end < n && s.prev[end] >= 0)
            end++;
        if (end - first <= SMALL_TEXT)
            merge_small(&s, first);
        else
            merge_large(&s, first, end);
        first = end;
    }

    for (int32_t i = 0; i < n; i++) {
        if (s.len[i] == 0)
            continue; /* merged into the symbol on its left */
        int32_t id = moe_strmap_get(&v->map, esc + s.start[i], s.len[i]);
        if (id >= 0) {
            moe_emit_id(e, id);
            continue;
        }
        for (uint32_t k = 0; k < s.len[i]; k++) {
            int32_t b = v->spm_byte_tok[(uint8_t)esc[s.start[i] + k]];
            if (b < 0)
                b = v->special[MOE_SPECIAL_UNK];
            if (b >= 0)
                moe_emit_id(e, b);
        }
    }
done:
    free(esc);
    free(s.start);
    free(s.len);
    free(s.prev);
    free(s.next);
    free(s.pid);
    free(s.heap);
    return st;
}

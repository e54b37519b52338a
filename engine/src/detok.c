/*
 * detok.c — from ids back to text: moe_token_to_piece (one token's bytes,
 * precomputed when the vocabulary was built) and the streaming
 * detokenizer, which turns a run of pieces into well-formed UTF-8 as tokens
 * arrive: a character split across tokens is held until its last byte
 * comes, and bytes that cannot be part of any character become U+FFFD (one
 * per maximal ill-formed subsequence, the Unicode-recommended practice), so
 * what it emits can go straight into JSON or a terminal.
 */
#include "vocab.h"
#include "unicode.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

static bool piece_of(const moe_vocab *v, int32_t id, bool render_special, const char **p,
                     size_t *n)
{
    if (!v || id < 0 || id >= v->n_tokens)
        return false;
    if (!render_special && (v->attr[id] & (ATTR_CONTROL | ATTR_UNKNOWN))) {
        *p = "";
        *n = 0;
        return true;
    }
    *p = v->pieces + v->piece_off[id];
    *n = v->piece_len[id];
    return true;
}

int64_t moe_token_to_piece(const moe_vocab *vocab, int32_t id, bool render_special, char *buf,
                           size_t cap)
{
    const char *p;
    size_t n;
    if (!piece_of(vocab, id, render_special, &p, &n))
        return -1;
    if (buf)
        memcpy(buf, p, n < cap ? n : cap);
    return (int64_t)n;
}

struct moe_detok {
    const moe_vocab *vocab;
    bool             render_special;
    uint8_t          pending[4]; /* a proper prefix of a character */
    size_t           n_pending;
};

moe_detok *moe_detok_new(const moe_vocab *vocab, bool render_special)
{
    if (!vocab)
        return NULL;
    moe_detok *d = calloc(1, sizeof *d);
    if (d) {
        d->vocab = vocab;
        d->render_special = render_special;
    }
    return d;
}

void moe_detok_free(moe_detok *d)
{
    free(d);
}

/* Appends bytes to out[*o..] keeping room for the NUL; false if full. */
static bool put(char *out, size_t cap, size_t *o, const void *src, size_t n)
{
    if (*o + n + 1 > cap)
        return false;
    memcpy(out + *o, src, n);
    *o += n;
    return true;
}

int64_t moe_detok_push(moe_detok *d, int32_t id, char *out, size_t cap)
{
    const char *piece;
    size_t n;
    if (!d || !out || cap == 0 || !piece_of(d->vocab, id, d->render_special, &piece, &n))
        return -1;
    static const char fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    const uint8_t *p = (const uint8_t *)piece;
    size_t o = 0, i = 0;
    uint8_t pend[4];
    size_t n_pend = d->n_pending;
    memcpy(pend, d->pending, n_pend);

    /* First finish (or give up) the character held from earlier tokens. */
    while (n_pend > 0 && i < n) {
        uint8_t tmp[4];
        memcpy(tmp, pend, n_pend);
        tmp[n_pend] = p[i];
        int r = moe_utf8_check(tmp, n_pend + 1);
        if (r == 0) { /* still a prefix: take the byte */
            pend[n_pend++] = p[i++];
            continue;
        }
        if (r > 0) { /* complete */
            if (!put(out, cap, &o, tmp, (size_t)r))
                return -1;
            i++;
        } else if (!put(out, cap, &o, fffd, 3)) {
            return -1; /* the held bytes were ill-formed after all; p[i] is re-read */
        }
        n_pend = 0;
    }
    while (i < n) {
        int r = moe_utf8_check(p + i, n - i);
        if (r > 0) {
            if (!put(out, cap, &o, p + i, (size_t)r))
                return -1;
            i += (size_t)r;
        } else if (r < 0) {
            if (!put(out, cap, &o, fffd, 3))
                return -1;
            i += (size_t)-r;
        } else {
            memcpy(pend, p + i, n - i); /* fewer than 4 bytes */
            n_pend = n - i;
            i = n;
        }
    }
    out[o] = 0;
    memcpy(d->pending, pend, n_pend);
    d->n_pending = n_pend;
    return (int64_t)o;
}

int64_t moe_detok_flush(moe_detok *d, char *out, size_t cap)
{
    if (!d || !out || cap == 0)
        return -1;
    size_t o = 0;
    if (d->n_pending) {
        if (!put(out, cap, &o, "\xEF\xBF\xBD", 3))
            return -1;
    }
    out[o] = 0;
    d->n_pending = 0;
    return (int64_t)o;
}

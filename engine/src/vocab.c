/*
 * vocab.c — builds a moe_vocab from a GGUF file's tokenizer.ggml.* keys:
 * copies the token texts, scores and types, builds the lookup tables the
 * tokenizers need (text -> id, BPE merge ranks, byte tokens), settles the
 * special ids and flags as llama.cpp does (vocab-special.c), and precomputes
 * every token's detokenized text. Also the read-only accessors.
 *
 * Load is two steps: moe_vocab_load reads and checks the keys into a plain
 * moe_vocab_desc; moe_vocab_build does the rest, so tests can build small
 * vocabularies without a file.
 */
#include "vocab.h"
#include "unicode.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

moe_status moe_vocab_apply_special_rules(moe_vocab *v, const moe_vocab_desc *d, moe_err *err);
moe_status moe_vocab_build_special_trie(moe_vocab *v, moe_err *err);

void moe_vocab_free(moe_vocab *v)
{
    if (!v)
        return;
    free(v->blob);
    free(v->off);
    free(v->len);
    free(v->scores);
    free(v->attr);
    moe_strmap_free(&v->map);
    free(v->pieces);
    free(v->piece_off);
    free(v->piece_len);
    free(v->eog);
    free(v->cands);
    free(v->trie);
    moe_pretok_free(v->pretok);
    moe_pairmap_free(&v->merges);
    free(v->extra_blob);
    free(v->extra_off);
    free(v->extra_len);
    free(v->spm_bridges);
    free(v);
}

static uint16_t attr_of_type(int32_t type)
{
    switch (type) {
    case MOE_TOKEN_NORMAL:       return ATTR_NORMAL;
    case MOE_TOKEN_UNKNOWN:      return ATTR_UNKNOWN;
    case MOE_TOKEN_CONTROL:      return ATTR_CONTROL;
    case MOE_TOKEN_USER_DEFINED: return ATTR_USER_DEFINED;
    case MOE_TOKEN_UNUSED:       return ATTR_UNUSED;
    case MOE_TOKEN_BYTE:         return ATTR_BYTE;
    default:                     return 0; /* undefined */
    }
}

/* Copies token texts into one blob; an empty text becomes "[EMPTY_<id>]"
 * as in llama.cpp, so every token has a findable text. */
static moe_status copy_tokens(moe_vocab *v, const moe_vocab_desc *d, moe_err *err)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < d->n_tokens; i++) {
        uint64_t n = d->tokens[i].len ? d->tokens[i].len : 24;
        if (n > UINT32_MAX / 2)
            return moe_fail(err, MOE_ERR_FORMAT, "tokenizer.ggml.tokens[%u]: text too long", i);
        total += n;
    }
    if (total >= UINT32_MAX)
        return moe_fail(err, MOE_ERR_UNSUPPORTED, "tokenizer.ggml.tokens: %llu bytes of text",
                        (unsigned long long)total);
    v->blob = malloc(total + 1);
    v->off = malloc(d->n_tokens * sizeof(uint32_t));
    v->len = malloc(d->n_tokens * sizeof(uint32_t));
    v->scores = malloc(d->n_tokens * sizeof(float));
    v->attr = malloc(d->n_tokens * sizeof(uint16_t));
    if (!v->blob || !v->off || !v->len || !v->scores || !v->attr)
        return moe_fail(err, MOE_ERR_NOMEM, "vocabulary: out of memory for %u tokens",
                        d->n_tokens);
    uint32_t pos = 0;
    for (uint32_t i = 0; i < d->n_tokens; i++) {
        v->off[i] = pos;
        if (d->tokens[i].len) {
            memcpy(v->blob + pos, d->tokens[i].ptr, d->tokens[i].len);
            v->len[i] = (uint32_t)d->tokens[i].len;
        } else {
            v->len[i] = (uint32_t)snprintf(v->blob + pos, 25, "[EMPTY_%u]", i);
        }
        pos += v->len[i];
        if (v->len[i] > v->max_token_len)
            v->max_token_len = v->len[i];
        v->scores[i] = d->scores ? d->scores[i] : 0.0f;
        v->attr[i] = d->types ? attr_of_type(d->types[i]) : ATTR_NORMAL;
    }
    if (moe_strmap_init(&v->map, d->n_tokens))
        return moe_fail(err, MOE_ERR_NOMEM, "vocabulary: out of memory");
    v->map.blob = v->blob;
    v->map.off = v->off;
    v->map.len = v->len;
    for (uint32_t i = 0; i < d->n_tokens; i++)
        moe_strmap_put(&v->map, (int32_t)i);
    return MOE_OK;
}

/* ---- BPE merges ---------------------------------------------------------- */

typedef struct extra_builder {
    moe_strmap map;
    size_t     cap_blob, cap_ids, used_blob;
} extra_builder;

/* The symbol id of a text: a token id, else an extra id (created on demand
 * when `create`), else -1. */
static int32_t symbol_id(moe_vocab *v, extra_builder *xb, const char *s, size_t n, bool create)
{
    int32_t id = moe_strmap_get(&v->map, s, n);
    if (id >= 0)
        return id;
    if (v->n_extra) {
        id = moe_strmap_get(&xb->map, s, n);
        if (id >= 0)
            return v->n_tokens + id;
    }
    if (!create)
        return -1;
    if (xb->used_blob + n > xb->cap_blob) {
        size_t nc = xb->cap_blob ? xb->cap_blob * 2 : 4096;
        while (nc < xb->used_blob + n)
            nc *= 2;
        char *b = realloc(v->extra_blob, nc);
        if (!b)
            return -2;
        v->extra_blob = b;
        xb->cap_blob = nc;
    }
    if ((size_t)v->n_extra >= xb->cap_ids)
        return -2; /* sized for the worst case up front */
    memcpy(v->extra_blob + xb->used_blob, s, n);
    v->extra_off[v->n_extra] = (uint32_t)xb->used_blob;
    v->extra_len[v->n_extra] = (uint32_t)n;
    xb->used_blob += n;
    xb->map.blob = v->extra_blob;
    moe_strmap_put(&xb->map, v->n_extra);
    return v->n_tokens + v->n_extra++;
}

static moe_status build_merges(moe_vocab *v, const moe_vocab_desc *d, moe_err *err)
{
    extra_builder xb = {0};
    moe_status st = MOE_OK;
    char *cat = NULL;
    size_t cat_cap = 0;
    /* Each merge adds at most three extra strings. */
    xb.cap_ids = 3 * d->n_merges + 1;
    if (xb.cap_ids > (size_t)(INT32_MAX - v->n_tokens))
        return moe_fail(err, MOE_ERR_UNSUPPORTED, "tokenizer.ggml.merges: too many merges");
    v->extra_off = malloc(xb.cap_ids * sizeof(uint32_t));
    v->extra_len = malloc(xb.cap_ids * sizeof(uint32_t));
    if (!v->extra_off || !v->extra_len || moe_strmap_init(&xb.map, xb.cap_ids) ||
        moe_pairmap_init(&v->merges, d->n_merges)) {
        st = moe_fail(err, MOE_ERR_NOMEM, "vocabulary: out of memory for merges");
        goto done;
    }
    xb.map.off = v->extra_off;
    xb.map.len = v->extra_len;
    for (uint64_t r = 0; r < d->n_merges; r++) {
        const char *m = d->merges[r].ptr;
        size_t n = d->merges[r].len, sp = 1;
        /* "left right", split at the first space after the first byte. */
        while (sp < n && m[sp] != ' ')
            sp++;
        if (sp >= n)
            continue; /* no pair: llama.cpp stores ("", ""), which never matches */
        if (n > cat_cap) {
            char *c = realloc(cat, n);
            if (!c) {
                st = moe_fail(err, MOE_ERR_NOMEM, "vocabulary: out of memory for merges");
                goto done;
            }
            cat = c;
            cat_cap = n;
        }
        memcpy(cat, m, sp);
        memcpy(cat + sp, m + sp + 1, n - sp - 1);
        int32_t a = symbol_id(v, &xb, m, sp, true);
        int32_t b = symbol_id(v, &xb, m + sp + 1, n - sp - 1, true);
        int32_t c = symbol_id(v, &xb, cat, n - 1, true);
        if (a == -2 || b == -2 || c == -2) {
            st = moe_fail(err, MOE_ERR_NOMEM, "vocabulary: out of memory for merges");
            goto done;
        }
        moe_pairmap_put(&v->merges, a, b, (int32_t)(r > INT32_MAX ? INT32_MAX : r), c);
    }
    for (int b = 0; b < 256; b++) {
        uint8_t enc[4];
        size_t k = moe_utf8_encode(moe_gpt2_byte_to_cp((uint8_t)b), enc);
        v->byte_sym[b] = symbol_id(v, &xb, (const char *)enc, k, false);
        char one = (char)b;
        v->byte_tok1[b] = moe_strmap_get(&v->map, &one, 1);
    }
done:
    moe_strmap_free(&xb.map);
    free(cat);
    return st;
}

/* ---- pieces -------------------------------------------------------------- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* The byte of a "<0xXX>" token, or -1. */
static int byte_of_text(const char *t, size_t n)
{
    if (n != 6 || memcmp(t, "<0x", 3) != 0 || t[5] != '>')
        return -1;
    int hi = hexval(t[3]), lo = hexval(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* Writes token id's piece (specials rendered) to out (room for 4 * len
 * bytes); returns its length. */
static size_t make_piece(const moe_vocab *v, int32_t id, char *out)
{
    const char *t = v->blob + v->off[id];
    size_t n = v->len[id];
    uint16_t a = v->attr[id];
    if (a & (ATTR_UNKNOWN | ATTR_CONTROL | ATTR_USER_DEFINED)) {
        memcpy(out, t, n);
        return n;
    }
    if (a & ATTR_NORMAL) {
        size_t o = 0;
        if (v->kind == MOE_VOCAB_SPM) {
            for (size_t i = 0; i < n; i++) {
                if (i + 2 < n && memcmp(t + i, "\xe2\x96\x81", 3) == 0) {
                    out[o++] = ' ';
                    i += 2;
                } else {
                    out[o++] = t[i];
                }
            }
            return o;
        }
        /* Byte-level BPE: each character stands for one byte. A character
         * outside GPT-2's alphabet is kept as it is. */
        size_t pos = 0;
        while (pos < n) {
            size_t start = pos;
            uint32_t cp = moe_utf8_decode_lenient((const uint8_t *)t, n, &pos);
            int b = moe_gpt2_cp_to_byte(cp);
            if (b >= 0) {
                out[o++] = (char)b;
            } else {
                memcpy(out + o, t + start, pos - start);
                o += pos - start;
            }
        }
        return o;
    }
    if (a & ATTR_BYTE) {
        int b = byte_of_text(t, n);
        if (b >= 0) {
            out[0] = (char)b;
            return 1;
        }
        memcpy(out, t, n);
        return n;
    }
    return 0; /* unused and undefined tokens render as nothing */
}

static moe_status build_pieces(moe_vocab *v, moe_err *err)
{
    size_t total = 0;
    for (int32_t i = 0; i < v->n_tokens; i++)
        total += v->len[i];
    v->pieces = malloc(total + 1);
    v->piece_off = malloc(v->n_tokens * sizeof(uint32_t));
    v->piece_len = malloc(v->n_tokens * sizeof(uint32_t));
    if (!v->pieces || !v->piece_off || !v->piece_len)
        return moe_fail(err, MOE_ERR_NOMEM, "vocabulary: out of memory for pieces");
    /* A piece is never longer than its text: bytes decode to one byte per
     * character, "▁" shrinks to one space, the rest is copied. */
    size_t pos = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        v->piece_off[i] = (uint32_t)pos;
        v->piece_len[i] = (uint32_t)make_piece(v, i, v->pieces + pos);
        pos += v->piece_len[i];
    }
    return MOE_OK;
}

/* ---- build ---------------------------------------------------------------- */

static int32_t checked_id(const moe_vocab *v, int32_t def, int64_t file_id)
{
    if (def >= v->n_tokens)
        def = -1; /* a default outside the vocabulary is disabled */
    if (file_id >= 0 && file_id < v->n_tokens)
        return (int32_t)file_id;
    return def; /* absent or out of range: keep the default */
}

moe_status moe_vocab_build(const moe_vocab_desc *d, moe_vocab **out, moe_err *err)
{
    *out = NULL;
    moe_vocab *v = calloc(1, sizeof *v);
    if (!v)
        return moe_fail(err, MOE_ERR_NOMEM, "vocabulary: out of memory");
    moe_status st = MOE_OK;
    const char *model = d->model ? d->model : "";
    int32_t def[MOE_SPECIAL_COUNT];
    for (int i = 0; i < MOE_SPECIAL_COUNT; i++)
        def[i] = -1;

    if (strcmp(model, "llama") == 0) {
        v->kind = MOE_VOCAB_SPM;
        def[MOE_SPECIAL_BOS] = 1;
        def[MOE_SPECIAL_EOS] = 2;
        def[MOE_SPECIAL_UNK] = 0;
        v->add_space_prefix = true;
        v->add_bos = true;
    } else if (strcmp(model, "gpt2") == 0) {
        v->kind = MOE_VOCAB_BPE;
        if (!d->merges) {
            st = moe_fail(err, MOE_ERR_FORMAT, "tokenizer.ggml.merges: missing (needed by gpt2)");
            goto fail;
        }
        if ((st = moe_pretok_new(d->pre, 0, &v->pretok, err)) != MOE_OK)
            goto fail;
        /* llama.cpp's defaults for byte-level BPE (Falcon's ids). */
        def[MOE_SPECIAL_BOS] = moe_pretok_no_bos(v->pretok) ? -1 : 11;
        def[MOE_SPECIAL_EOS] = 11;
        v->add_bos = moe_pretok_add_bos(v->pretok);
        v->ignore_merges = moe_pretok_ignore_merges(v->pretok);
    } else {
        st = moe_fail(err, MOE_ERR_UNSUPPORTED,
                      "tokenizer.ggml.model: '%.60s' is not supported (gpt2 and llama are)", model);
        goto fail;
    }
    snprintf(v->pre, sizeof v->pre, "%s", d->pre && d->pre[0] ? d->pre : "default");
    if (d->n_tokens == 0 || d->n_tokens >= (uint32_t)INT32_MAX / 2) {
        st = moe_fail(err, MOE_ERR_FORMAT, "tokenizer.ggml.tokens: %u tokens", d->n_tokens);
        goto fail;
    }
    v->n_tokens = (int32_t)d->n_tokens;
    if ((st = copy_tokens(v, d, err)) != MOE_OK)
        goto fail;

    if (d->add_space_prefix >= 0)
        v->add_space_prefix = d->add_space_prefix != 0;
    for (int i = 0; i < MOE_SPECIAL_COUNT; i++)
        v->special[i] = checked_id(v, def[i], d->ids[i]);
    v->eom = checked_id(v, -1, d->eom_id);
    if (d->add_bos >= 0)
        v->add_bos = d->add_bos != 0;
    if (d->add_eos >= 0)
        v->add_eos = d->add_eos != 0;

    if ((st = moe_vocab_apply_special_rules(v, d, err)) != MOE_OK)
        goto fail;
    if ((st = moe_vocab_build_special_trie(v, err)) != MOE_OK)
        goto fail;
    if (v->kind == MOE_VOCAB_BPE) {
        if ((st = build_merges(v, d, err)) != MOE_OK)
            goto fail;
    } else {
        static const char hex[] = "0123456789ABCDEF";
        for (int b = 0; b < 256; b++) {
            char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
            char one = (char)b;
            int32_t id = moe_strmap_get(&v->map, name, 6);
            v->spm_byte_tok[b] = id >= 0 ? id : moe_strmap_get(&v->map, &one, 1);
        }
        if ((st = moe_spm_build_bridges(v, err)) != MOE_OK)
            goto fail;
    }
    if ((st = build_pieces(v, err)) != MOE_OK)
        goto fail;

    /* The newline token: SPM's byte token for '\n'; for BPE the first id
     * "\n" tokenizes to. Either falls back to the padding id. */
    int32_t nl = -1;
    if (v->kind == MOE_VOCAB_SPM) {
        nl = v->spm_byte_tok['\n'];
    } else {
        int32_t ids[8];
        size_t n_ids = 0;
        if (moe_tokenize(v, "\n", 1, 0, ids, 8, &n_ids, NULL) == MOE_OK && n_ids > 0)
            nl = ids[0];
    }
    v->special[MOE_SPECIAL_NL] = nl >= 0 ? nl : v->special[MOE_SPECIAL_PAD];
    *out = v;
    return MOE_OK;
fail:
    moe_vocab_free(v);
    return st;
}

/* ---- accessors ------------------------------------------------------------ */

moe_vocab_kind moe_vocab_kind_of(const moe_vocab *v)
{
    return v->kind;
}

const char *moe_vocab_pre(const moe_vocab *v)
{
    return v->pre;
}

int32_t moe_vocab_n_tokens(const moe_vocab *v)
{
    return v->n_tokens;
}

int32_t moe_vocab_special(const moe_vocab *v, moe_special which)
{
    if ((int)which < 0 || which >= MOE_SPECIAL_COUNT)
        return -1;
    return v->special[which];
}

bool moe_vocab_add_bos(const moe_vocab *v)
{
    return v->add_bos;
}

bool moe_vocab_add_eos(const moe_vocab *v)
{
    return v->add_eos;
}

moe_token_type moe_vocab_token_type(const moe_vocab *v, int32_t id)
{
    if (id < 0 || id >= v->n_tokens)
        return MOE_TOKEN_UNDEFINED;
    uint16_t a = v->attr[id];
    if (a & ATTR_CONTROL)
        return MOE_TOKEN_CONTROL;
    if (a & ATTR_USER_DEFINED)
        return MOE_TOKEN_USER_DEFINED;
    if (a & ATTR_UNKNOWN)
        return MOE_TOKEN_UNKNOWN;
    if (a & ATTR_BYTE)
        return MOE_TOKEN_BYTE;
    if (a & ATTR_UNUSED)
        return MOE_TOKEN_UNUSED;
    if (a & ATTR_NORMAL)
        return MOE_TOKEN_NORMAL;
    return MOE_TOKEN_UNDEFINED;
}

moe_str moe_vocab_token_text(const moe_vocab *v, int32_t id)
{
    moe_str s = {NULL, 0};
    if (id >= 0 && id < v->n_tokens) {
        s.ptr = v->blob + v->off[id];
        s.len = v->len[id];
    }
    return s;
}

bool moe_vocab_is_eog(const moe_vocab *v, int32_t id)
{
    size_t lo = 0, hi = v->n_eog;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v->eog[mid] == id)
            return true;
        if (v->eog[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/*
 * tok-test-util.h — helpers shared by the tokenizer tests and tok-tool:
 * whole-file reads, llama.cpp's test-case file format (.inp: cases separated
 * by a line "__ggml_vocab_test__", the newline before the separator not part
 * of the case; .out: one line of space-separated ids per case), opening a
 * vocabulary from a GGUF path, and detokenizing a whole id list.
 */
#ifndef MOE_TOK_TEST_UTIL_H
#define MOE_TOK_TEST_UTIL_H

#include "moe.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tt_case {
    const char *ptr;
    size_t      len;
} tt_case;

/* Reads a whole file (NUL-terminated copy); NULL if it cannot be read. */
static inline char *tt_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (!buf) {
            fclose(f);
            return NULL;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        cap *= 2;
        char *nb = realloc(buf, cap + 1);
        if (!nb)
            free(buf);
        buf = nb;
    }
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

/* Splits a .inp buffer into cases (pointing into buf). Returns the count;
 * *cases is malloc'd. */
static inline size_t tt_split_cases(const char *buf, size_t len, tt_case **cases)
{
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    size_t n = 0, cap = 64, pos = 0;
    tt_case *c = malloc(cap * sizeof *c);
    while (c && pos < len) {
        const char *next = NULL;
        for (size_t i = pos; i + sep_len <= len; i++)
            if (buf[i] == '\n' && memcmp(buf + i, sep, sep_len) == 0) {
                next = buf + i;
                break;
            }
        if (n == cap) {
            cap *= 2;
            tt_case *nc = realloc(c, cap * sizeof *c);
            if (!nc) {
                free(c);
                c = NULL;
                break;
            }
            c = nc;
        }
        if (!next) {
            c[n++] = (tt_case){buf + pos, len - pos};
            break;
        }
        c[n++] = (tt_case){buf + pos, (size_t)(next - (buf + pos))};
        pos = (size_t)(next - buf) + sep_len;
    }
    *cases = c;
    return c ? n : 0;
}

/* Parses a line of space-separated ids into ids (cap entries); returns the
 * count and advances *p past the line. */
static inline size_t tt_parse_ids(const char **p, const char *end, int32_t *ids, size_t cap)
{
    size_t n = 0;
    const char *s = *p;
    while (s < end && *s != '\n') {
        while (s < end && *s == ' ')
            s++;
        if (s >= end || *s == '\n' || *s == '\r')
            break;
        char *e;
        long v = strtol(s, &e, 10);
        if (e == s)
            break;
        if (n < cap)
            ids[n] = (int32_t)v;
        n++;
        s = e;
    }
    while (s < end && *s != '\n')
        s++;
    if (s < end)
        s++;
    *p = s;
    return n;
}

/* Opens path and loads its vocabulary; on failure prints why and returns
 * NULL. The GGUF handle is closed before returning. */
static inline moe_vocab *tt_open_vocab(const char *path)
{
    moe_gguf *g = NULL;
    moe_vocab *v = NULL;
    moe_err err = {{0}};
    moe_status st = moe_gguf_open(path, &g, &err);
    if (st == MOE_OK)
        st = moe_vocab_load(g, &v, &err);
    moe_gguf_free(g);
    if (st != MOE_OK)
        fprintf(stderr, "%s: %s: %s\n", path, moe_status_str(st), err.msg);
    return v;
}

/* Concatenates the pieces of ids (specials as text when render) into a
 * malloc'd buffer; *len gets its length. */
static inline char *tt_detok(const moe_vocab *v, const int32_t *ids, size_t n, int render,
                             size_t *len)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t k = moe_token_to_piece(v, ids[i], render != 0, NULL, 0);
        total += k > 0 ? (size_t)k : 0;
    }
    char *out = malloc(total + 1);
    size_t o = 0;
    for (size_t i = 0; out && i < n; i++) {
        int64_t k = moe_token_to_piece(v, ids[i], render != 0, out + o, total - o);
        o += k > 0 ? (size_t)k : 0;
    }
    if (out)
        out[o] = 0;
    *len = o;
    return out;
}

#endif /* MOE_TOK_TEST_UTIL_H */

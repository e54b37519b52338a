/*
 * fuzz-tokenizer.c — libFuzzer target for moe_tokenize and the
 * detokenizers, on two real vocabularies (Qwen2 byte-level BPE and Llama
 * SentencePiece) loaded once in LLVMFuzzerInitialize from
 * $MOE_SHARED_DATA/vocab, else from MOE_FUZZ_VOCAB_DIR baked in at compile
 * time.
 *
 * Every input is tokenized with all four flag combinations, and:
 *   - the call succeeds and every id is in range; a too-small buffer gives
 *     MOE_ERR_RANGE with the same count;
 *   - for well-formed UTF-8 tokenized plainly, the pieces (and the
 *     streaming detokenizer) give back the input bytes, whenever every id is
 *     an ordinary token (SentencePiece: less its one prefix space, and only
 *     for text without a literal "▁", which reads back as a space);
 *   - the input bytes read as ids, streamed through moe_detok, always come
 *     out as well-formed UTF-8;
 *   - the hand-written pre-tokenizer splitters cut the decoded input exactly
 *     as the regex engine running the same patterns does, and every
 *     regex-only pre-tokenizer splits it into non-empty pieces that add up.
 */
#include "moe.h"
#include "pretok.h"
#include "unicode.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MOE_FUZZ_VOCAB_DIR
#define MOE_FUZZ_VOCAB_DIR "."
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static moe_vocab *vocabs[2];

/* Pre-tokenizers with hand-written splitters (checked against the regex
 * engine) and some that only the regex engine runs. */
static const char *const pre_pairs[] = {"gpt-2", "llama-bpe", "qwen2", "qwen35", "default"};
static const char *const pre_regex[] = {"deepseek-llm", "deepseek-v3", "gpt-4o", "tekken",
                                        "exaone-moe", "jais-2", "chameleon", "youtu"};
#define N_PAIRS (sizeof pre_pairs / sizeof pre_pairs[0])
#define N_REGEX (sizeof pre_regex / sizeof pre_regex[0])
static moe_pretok *fast[N_PAIRS], *slow[N_PAIRS], *regex_only[N_REGEX];

static moe_vocab *load(const char *dir, const char *name)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    moe_gguf *g = NULL;
    moe_vocab *v = NULL;
    moe_err err = {{0}};
    if (moe_gguf_open(path, &g, &err) != MOE_OK || moe_vocab_load(g, &v, &err) != MOE_OK) {
        fprintf(stderr, "fuzz-tokenizer: %s: %s\n", path, err.msg);
        abort();
    }
    moe_gguf_free(g);
    return v;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char dir[1024];
    const char *shared = getenv("MOE_SHARED_DATA");
    if (shared)
        snprintf(dir, sizeof dir, "%s/vocab", shared);
    else
        snprintf(dir, sizeof dir, "%s", MOE_FUZZ_VOCAB_DIR);
    vocabs[0] = load(dir, "ggml-vocab-qwen2.gguf");
    vocabs[1] = load(dir, "ggml-vocab-llama-spm.gguf");
    moe_err err = {{0}};
    for (size_t i = 0; i < N_PAIRS; i++)
        if (moe_pretok_new(pre_pairs[i], 0, &fast[i], &err) != MOE_OK ||
            moe_pretok_new(pre_pairs[i], MOE_PRETOK_NO_BUILTIN, &slow[i], &err) != MOE_OK)
            abort();
    for (size_t i = 0; i < N_REGEX; i++)
        if (moe_pretok_new(pre_regex[i], 0, &regex_only[i], &err) != MOE_OK)
            abort();
    return 0;
}

#define FUZZ_ASSERT(cond)                                                            \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz-tokenizer: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                 \
        }                                                                            \
    } while (0)

static bool well_formed(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        int r = moe_utf8_check(s + i, n - i);
        if (r <= 0)
            return false;
        i += (size_t)r;
    }
    return true;
}

static bool has_bytes(const uint8_t *s, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, needle, k) == 0)
            return true;
    return false;
}

/* Streams ids through a detokenizer; returns the text (malloc'd) and its
 * length in *len. */
static char *stream(const moe_vocab *v, const int32_t *ids, size_t n, bool render, size_t *len)
{
    moe_detok *d = moe_detok_new(v, render);
    FUZZ_ASSERT(d != NULL);
    char buf[4096];
    size_t o = 0, cap = 256;
    char *out = malloc(cap);
    FUZZ_ASSERT(out != NULL);
    for (size_t i = 0; i <= n; i++) {
        int64_t k = i < n ? moe_detok_push(d, ids[i], buf, sizeof buf)
                          : moe_detok_flush(d, buf, sizeof buf);
        FUZZ_ASSERT(k >= 0 && (size_t)k < sizeof buf && buf[k] == 0);
        if (o + (size_t)k > cap) {
            cap = 2 * (o + (size_t)k);
            out = realloc(out, cap);
            FUZZ_ASSERT(out != NULL);
        }
        memcpy(out + o, buf, (size_t)k);
        o += (size_t)k;
    }
    moe_detok_free(d);
    *len = o;
    return out;
}

static void check_vocab(const moe_vocab *v, const uint8_t *data, size_t size)
{
    int32_t n_vocab = moe_vocab_n_tokens(v);
    size_t cap = size * 2 + 8;
    int32_t *ids = malloc(cap * sizeof *ids);
    char *text = malloc(4 * size + 64);
    FUZZ_ASSERT(ids && text);
    bool spm = moe_vocab_kind_of(v) == MOE_VOCAB_SPM;

    for (unsigned flags = 0; flags < 4; flags++) {
        size_t n = 0, n2 = 0;
        moe_err err = {{0}};
        moe_status st = moe_tokenize(v, (const char *)data, size, flags, ids, cap, &n, &err);
        FUZZ_ASSERT(st == MOE_OK);
        FUZZ_ASSERT(n <= cap);
        bool ordinary = true;
        for (size_t i = 0; i < n; i++) {
            FUZZ_ASSERT(ids[i] >= 0 && ids[i] < n_vocab);
            moe_token_type t = moe_vocab_token_type(v, ids[i]);
            ordinary &= t == MOE_TOKEN_NORMAL || t == MOE_TOKEN_BYTE;
        }
        if (n > 1) {
            /* One slot short: MOE_ERR_RANGE and the full count. */
            FUZZ_ASSERT(moe_tokenize(v, (const char *)data, size, flags, ids, n - 1, &n2, &err) ==
                        MOE_ERR_RANGE);
            FUZZ_ASSERT(n2 == n);
            FUZZ_ASSERT(moe_tokenize(v, (const char *)data, size, flags, ids, cap, &n2, &err) ==
                        MOE_OK);
        }
        if (flags != 0 || !ordinary || !well_formed(data, size))
            continue;
        if (spm && has_bytes(data, size, "\xe2\x96\x81"))
            continue;

        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
            int64_t k = moe_token_to_piece(v, ids[i], false, text + o, 4 * size + 64 - o);
            FUZZ_ASSERT(k >= 0 && o + (size_t)k <= 4 * size + 64);
            o += (size_t)k;
        }
        size_t so;
        char *streamed = stream(v, ids, n, false, &so);
        FUZZ_ASSERT(so == o && memcmp(streamed, text, o) == 0);
        free(streamed);
        const char *t = text;
        if (spm && size > 0) {
            FUZZ_ASSERT(o > 0 && t[0] == ' ');
            t++;
            o--;
        }
        FUZZ_ASSERT(o == size && memcmp(t, data, size) == 0);
    }

    /* Arbitrary ids: the stream must stay well-formed UTF-8. */
    size_t n_ids = size / 2;
    for (size_t i = 0; i < n_ids; i++)
        ids[i] = (int32_t)(((uint32_t)data[2 * i] << 8 | data[2 * i + 1]) * 37u % (uint32_t)n_vocab);
    size_t so;
    char *streamed = stream(v, ids, n_ids, (size & 1) != 0, &so);
    FUZZ_ASSERT(well_formed((const uint8_t *)streamed, so));
    free(streamed);
    free(ids);
    free(text);
}

/* Splits with pt; returns a malloc'd copy of the piece lengths. */
static size_t *split(const moe_pretok *pt, const uint32_t *cps, const uint8_t *props, size_t n,
                     size_t *n_pieces)
{
    moe_pretok_buf buf = {0};
    const size_t *lens;
    moe_err err = {{0}};
    FUZZ_ASSERT(moe_pretok_split(pt, cps, props, n, &buf, &lens, n_pieces, &err) == MOE_OK);
    size_t *copy = malloc((*n_pieces + 1) * sizeof *copy), sum = 0;
    FUZZ_ASSERT(copy != NULL);
    for (size_t i = 0; i < *n_pieces; i++) {
        FUZZ_ASSERT(lens[i] >= 1);
        sum += lens[i];
        copy[i] = lens[i];
    }
    FUZZ_ASSERT(sum == n);
    moe_pretok_buf_free(&buf);
    return copy;
}

static void check_pretok(const uint8_t *data, size_t size)
{
    uint32_t *cps = malloc((size + 1) * sizeof *cps);
    uint8_t *props = malloc(size + 1);
    FUZZ_ASSERT(cps && props);
    size_t n = moe_utf8_decode_all(data, size, cps);
    for (size_t i = 0; i < n; i++)
        props[i] = moe_uprops(cps[i]);
    for (size_t i = 0; i < N_PAIRS; i++) {
        size_t na, nb;
        size_t *a = split(fast[i], cps, props, n, &na);
        size_t *b = split(slow[i], cps, props, n, &nb);
        FUZZ_ASSERT(na == nb && memcmp(a, b, na * sizeof *a) == 0);
        free(a);
        free(b);
    }
    for (size_t i = 0; i < N_REGEX; i++) {
        size_t np;
        free(split(regex_only[i], cps, props, n, &np));
    }
    free(cps);
    free(props);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    check_vocab(vocabs[0], data, size);
    check_vocab(vocabs[1], data, size);
    check_pretok(data, size);
    return 0;
}

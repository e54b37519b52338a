/*
 * pretok.h — pre-tokenizers for byte-level BPE: the step that cuts text into
 * "words" before merges run, chosen by the GGUF key tokenizer.ggml.pre. Each
 * pre-tokenizer is a list of patterns applied in turn, each one splitting
 * every piece the previous one produced (matches and the gaps between them
 * both become pieces), exactly as llama.cpp does. The four patterns used by
 * the common models (GPT-2, Llama 3, Qwen2, Qwen3.5) run as hand-written
 * splitters; the rest run on the small engine in regex.h. Internal.
 */
#ifndef MOE_PRETOK_H
#define MOE_PRETOK_H

#include "moe.h"
#include "regex.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct moe_pretok moe_pretok;

/* Flags for moe_pretok_new. */
#define MOE_PRETOK_NO_BUILTIN 1u /* run every pattern on the regex engine
                                    (tests compare the two)               */

/* Builds the pre-tokenizer named `pre` ("qwen2", "llama-bpe", ...; NULL or
 * "" mean "default", as in llama.cpp). An unknown name, or one whose
 * tokenizer libmoe does not implement, is MOE_ERR_UNSUPPORTED naming it. */
moe_status moe_pretok_new(const char *pre, unsigned flags, moe_pretok **out, moe_err *err);
void       moe_pretok_free(moe_pretok *pt);

/* Vocabulary defaults that llama.cpp ties to the pre-tokenizer name. */
bool moe_pretok_ignore_merges(const moe_pretok *pt); /* whole-word lookup first */
bool moe_pretok_add_bos(const moe_pretok *pt);       /* add_bos defaults to true */
bool moe_pretok_no_bos(const moe_pretok *pt);        /* default BOS id is none  */

/* Per-call working memory, reusable; zero-initialise, free when done. */
typedef struct moe_pretok_buf {
    uint32_t       *mapped[2]; /* text as regexes see it: raw, collapsed */
    size_t         *lens[2];   /* piece lengths, ping-pong between passes */
    size_t          cap;
    moe_regex_stack stack;
} moe_pretok_buf;

void moe_pretok_buf_free(moe_pretok_buf *buf);

/* Splits cps[0..n) (props[i] = moe_uprops(cps[i])) into pieces. On success
 * *lens points at n_pieces lengths in code points (inside buf, valid until
 * the next call) that sum to n. */
moe_status moe_pretok_split(const moe_pretok *pt, const uint32_t *cps, const uint8_t *props,
                            size_t n, moe_pretok_buf *buf, const size_t **lens,
                            size_t *n_pieces, moe_err *err);

#endif /* MOE_PRETOK_H */

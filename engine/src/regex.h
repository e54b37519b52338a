/*
 * regex.h — a small backtracking regular-expression engine over arrays of
 * code points, for the pre-tokenizer patterns that GGUF vocabularies name
 * (tokenizer.ggml.pre). It reproduces the ECMAScript semantics of the
 * std::regex that llama.cpp runs those patterns with: ordered alternation,
 * greedy quantifiers with backtracking, atomic lookahead, `$` at the end of
 * the searched range. Internal to libmoe.
 *
 * Supported: literals, `.`, classes `[...]` with ranges and negation,
 * `\s \S \d \D \w \W`, `\p{L} \p{N} \p{P} \p{S} \p{M}` (and `\p{Lu}` etc.,
 * which, as in llama.cpp, mean `\p{L}`), `\r \n \t \f \v` and escaped
 * punctuation, groups `(...)` `(?:...)`, lookahead `(?=...)` `(?!...)`,
 * `^ $ | * + ? {n} {n,} {n,m}`. Not supported (compile fails): lazy or
 * possessive quantifiers, back-references, lookbehind, `*`/`+` on a group
 * that can match the empty string.
 *
 * Like llama.cpp, a pattern that uses a `\p{..}` class runs on "collapsed"
 * text, and a pattern without one on the raw code points; moe_regex_collapsed
 * says which, and moe_regex_map_text builds the text a pattern expects.
 */
#ifndef MOE_REGEX_H
#define MOE_REGEX_H

#include "moe.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct moe_regex moe_regex;

/* Compiles a UTF-8 pattern. MOE_ERR_UNSUPPORTED names the construct. */
moe_status moe_regex_compile(const char *pattern, moe_regex **out, moe_err *err);
void       moe_regex_free(moe_regex *re);

/* True if the pattern expects collapsed text (it uses \p{..}). */
bool moe_regex_collapsed(const moe_regex *re);

/* Writes into dst[0..n) the text `re` matches against, from code points
 * cps[0..n): collapsed text keeps ASCII, turns other White_Space into
 * U+000B and other code points into one marker per category class; raw
 * text only turns non-ASCII White_Space into U+000B (std::regex's \s knows
 * ASCII only, so llama.cpp does the same). */
void moe_regex_map_text(bool collapsed, const uint32_t *cps, size_t n, uint32_t *dst);

/* Backtracking state, reusable across calls; one per thread. */
typedef struct moe_regex_stack {
    void  *items;
    size_t cap;
} moe_regex_stack;

void moe_regex_stack_free(moe_regex_stack *st);

/* Finds the leftmost match in text[from..end) that starts at or after
 * `from`, as std::regex_search on [begin, end) would; `begin` is where `^`
 * matches. On success sets *match_begin and *match_end and returns 1; returns
 * 0 if there is none, -1 if memory ran out. */
int moe_regex_search(const moe_regex *re, const uint32_t *text, size_t begin, size_t end,
                     size_t from, size_t *match_begin, size_t *match_end,
                     moe_regex_stack *st);

#endif /* MOE_REGEX_H */

/*
 * vocab.h — the inside of moe_vocab, shared by the files that build it
 * (vocab.c, vocab-map.c) and use it (tokenize*.c, detok.c). Internal.
 *
 * A vocabulary owns copies of everything it needs, so the GGUF file may be
 * closed after moe_vocab_load:
 *
 *   blob     all token texts back to back; token i is blob[off[i]..+len[i]]
 *   map      text -> id (the last id wins for duplicate texts, as llama.cpp)
 *   attr     per-token attribute bits (below), the stored token type plus
 *            the corrections llama.cpp applies by name (EOG tokens become
 *            control, and so on)
 *   pieces   what each token detokenizes to with specials rendered
 *
 * Byte-level BPE adds a merge table keyed by the pair of symbol ids. Merge
 * parts that are not tokens get "extra" ids >= n_tokens (their texts live
 * in extra_blob) so every symbol a merge can produce has an id.
 */
#ifndef MOE_VOCAB_H
#define MOE_VOCAB_H

#include "moe.h"
#include "pretok.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Attribute bits, as llama.cpp keeps them. */
#define ATTR_UNKNOWN      0x001u
#define ATTR_UNUSED       0x002u
#define ATTR_NORMAL       0x004u
#define ATTR_CONTROL      0x008u
#define ATTR_USER_DEFINED 0x010u
#define ATTR_BYTE         0x020u
#define ATTR_LSTRIP       0x080u /* strip whitespace left of a match  */
#define ATTR_RSTRIP       0x100u /* strip whitespace right of a match */

/* Open-addressing map from byte strings to ids. `slots` holds id+1 (0 is
 * empty); texts are looked up through the owner's text accessor. */
typedef struct moe_strmap {
    int32_t *slots;
    uint64_t mask;
    const char *blob;     /* texts of ids < base_id are blob[off[id]..] */
    const uint32_t *off;
    const uint32_t *len;
} moe_strmap;

/* Map from a pair of symbol ids to (rank, merged id). */
typedef struct moe_merge_slot {
    uint64_t key;   /* (left << 32 | right) + 1; 0 is empty */
    int32_t  rank;
    int32_t  result;
} moe_merge_slot;

typedef struct moe_pairmap {
    moe_merge_slot *slots;
    uint64_t        mask;
} moe_pairmap;

/* A byte trie of the texts that tokenize as one special token. */
typedef struct moe_trie_node {
    int32_t child;   /* first child, -1 if none */
    int32_t sibling; /* next sibling, -1 if none */
    int32_t cand;    /* best candidate ending here, -1 if none */
    int32_t cand_user; /* best candidate that is not control/unknown, -1 */
    uint8_t byte;
} moe_trie_node;

struct moe_vocab {
    moe_vocab_kind kind;
    char           pre[64];
    int32_t        n_tokens;

    char     *blob;
    uint32_t *off, *len;
    float    *scores;
    uint16_t *attr;
    moe_strmap map;
    size_t    max_token_len;

    char     *pieces;      /* detokenized text of every token */
    uint32_t *piece_off, *piece_len;

    int32_t special[MOE_SPECIAL_COUNT];
    int32_t eom;
    bool    add_bos, add_eos, add_space_prefix, ignore_merges;
    int32_t *eog; /* sorted */
    size_t   n_eog;

    /* Special-token matching: candidates sorted longest first (then by
     * id); the trie's root children are indexed by first byte. */
    int32_t       *cands;
    size_t         n_cands;
    moe_trie_node *trie;
    size_t         n_trie;
    int32_t        trie_root[256];

    /* Byte-level BPE. */
    moe_pretok *pretok;
    moe_pairmap merges;
    char       *extra_blob;
    uint32_t   *extra_off, *extra_len;
    int32_t     n_extra;
    int32_t     byte_sym[256];  /* symbol id of each byte's GPT-2 char, -1 */
    int32_t     byte_tok1[256]; /* token whose text is that single byte, -1 */

    /* SentencePiece. */
    int32_t spm_byte_tok[256]; /* <0xXX> (or the raw byte) token, -1 */
    /* Hashes of every pair of adjacent characters inside a token's text. A
     * boundary between two characters whose pair is absent can never be
     * merged across, so the text splits there into independent runs. */
    uint64_t *spm_bridges;
    uint64_t  spm_bridges_mask;
};

/* Plain description of a vocabulary, what moe_vocab_load reads from GGUF;
 * tests build small vocabularies from it directly. Absent optional
 * integers are -1, absent booleans -1. */
typedef struct moe_vocab_desc {
    const char    *model;   /* "gpt2" or "llama" */
    const char    *pre;     /* tokenizer.ggml.pre, may be NULL */
    const char    *name;    /* general.name, may be NULL */
    uint32_t       n_tokens;
    const moe_str *tokens;
    const float   *scores;  /* may be NULL */
    const int32_t *types;   /* may be NULL */
    const moe_str *merges;  /* may be NULL */
    uint64_t       n_merges;
    int64_t        ids[MOE_SPECIAL_COUNT]; /* from the *_token_id keys */
    int64_t        eom_id;
    int            add_bos, add_eos, add_space_prefix;
} moe_vocab_desc;

moe_status moe_vocab_build(const moe_vocab_desc *desc, moe_vocab **out, moe_err *err);

/* Maps (vocab-map.c). */
/* Hash of two adjacent characters (byte strings of 1..4 bytes); never 0. */
uint64_t moe_char_pair_hash(const char *a, size_t na, const char *b, size_t nb);
uint64_t moe_hash_bytes(const void *p, size_t n);
int      moe_strmap_init(moe_strmap *m, size_t n_keys);
void     moe_strmap_free(moe_strmap *m);
/* Inserts id (its text read through the map's blob); a later insert of an
 * equal text replaces the id. */
void     moe_strmap_put(moe_strmap *m, int32_t id);
int32_t  moe_strmap_get(const moe_strmap *m, const char *s, size_t n);

int  moe_pairmap_init(moe_pairmap *m, size_t n_keys);
void moe_pairmap_free(moe_pairmap *m);
/* Inserts unless the pair is present (the first, lowest rank wins). */
void moe_pairmap_put(moe_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t result);

static inline const moe_merge_slot *moe_pairmap_get(const moe_pairmap *m, int32_t left,
                                                    int32_t right)
{
    uint64_t key = (((uint64_t)(uint32_t)left << 32) | (uint32_t)right) + 1;
    uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> 17;
    for (;;) {
        const moe_merge_slot *s = &m->slots[h & m->mask];
        if (s->key == key)
            return s;
        if (s->key == 0)
            return NULL;
        h++;
    }
}

/* Tokenizer cores (tokenize-bpe.c, tokenize-spm.c). They append ids through
 * the emitter, which counts past its capacity. */
typedef struct moe_emit {
    int32_t *out;
    size_t   cap, n;
} moe_emit;

static inline void moe_emit_id(moe_emit *e, int32_t id)
{
    if (e->n < e->cap)
        e->out[e->n] = id;
    e->n++;
}

typedef struct moe_bpe_scratch moe_bpe_scratch;
moe_bpe_scratch *moe_bpe_scratch_new(void);
void             moe_bpe_scratch_free(moe_bpe_scratch *s);
moe_status moe_bpe_tokenize(const moe_vocab *v, const char *text, size_t len,
                            moe_bpe_scratch *s, moe_emit *e, moe_err *err);
moe_status moe_spm_build_bridges(moe_vocab *v, moe_err *err);
moe_status moe_spm_tokenize(const moe_vocab *v, const char *text, size_t len, bool prefix_space,
                            moe_emit *e, moe_err *err);

#endif /* MOE_VOCAB_H */

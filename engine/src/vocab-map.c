/*
 * vocab-map.c — the two hash tables a vocabulary looks things up in while
 * tokenizing: token text -> id (SentencePiece tries every adjacent pair's
 * text; BPE looks up whole words and fallback bytes) and BPE merge pair ->
 * (rank, merged id). Both are open addressing with linear probing at most
 * half full, sized once when the vocabulary is built and read-only after,
 * so any number of threads may look up at once.
 */
#include "vocab.h"

#include <stdlib.h>
#include <string.h>

static inline uint64_t load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t mix(uint64_t h)
{
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    return h;
}

uint64_t moe_hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xFF51AFD7ED558CCDull);
    while (n >= 8) {
        h = mix(h ^ load64(s)) * 0x9E3779B97F4A7C15ull;
        s += 8;
        n -= 8;
    }
    if (n) {
        uint64_t t = 0;
        memcpy(&t, s, n);
        h = mix(h ^ t ^ ((uint64_t)n << 59)) * 0x9E3779B97F4A7C15ull;
    }
    return mix(h);
}

static uint64_t table_size(size_t n_keys)
{
    uint64_t size = 16;
    while (size < (uint64_t)n_keys * 2 + 16)
        size <<= 1;
    return size;
}

int moe_strmap_init(moe_strmap *m, size_t n_keys)
{
    uint64_t size = table_size(n_keys);
    memset(m, 0, sizeof *m);
    m->slots = calloc(size, sizeof *m->slots);
    if (!m->slots)
        return -1;
    m->mask = size - 1;
    return 0;
}

void moe_strmap_free(moe_strmap *m)
{
    free(m->slots);
    m->slots = NULL;
}

static inline int text_eq(const moe_strmap *m, int32_t id, const char *s, size_t n)
{
    return m->len[id] == n && memcmp(m->blob + m->off[id], s, n) == 0;
}

void moe_strmap_put(moe_strmap *m, int32_t id)
{
    const char *s = m->blob + m->off[id];
    size_t n = m->len[id];
    uint64_t h = moe_hash_bytes(s, n);
    for (;;) {
        int32_t *slot = &m->slots[h & m->mask];
        if (*slot == 0 || text_eq(m, *slot - 1, s, n)) {
            *slot = id + 1;
            return;
        }
        h++;
    }
}

int32_t moe_strmap_get(const moe_strmap *m, const char *s, size_t n)
{
    uint64_t h = moe_hash_bytes(s, n);
    for (;;) {
        int32_t v = m->slots[h & m->mask];
        if (v == 0)
            return -1;
        if (text_eq(m, v - 1, s, n))
            return v - 1;
        h++;
    }
}

int moe_pairmap_init(moe_pairmap *m, size_t n_keys)
{
    uint64_t size = table_size(n_keys);
    m->slots = calloc(size, sizeof *m->slots);
    if (!m->slots)
        return -1;
    m->mask = size - 1;
    return 0;
}

void moe_pairmap_free(moe_pairmap *m)
{
    free(m->slots);
    m->slots = NULL;
}

void moe_pairmap_put(moe_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t result)
{
    uint64_t key = (((uint64_t)(uint32_t)left << 32) | (uint32_t)right) + 1;
    uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> 17;
    for (;;) {
        moe_merge_slot *s = &m->slots[h & m->mask];
        if (s->key == key)
            return; /* keep the first (lowest) rank, as llama.cpp does */
        if (s->key == 0) {
            s->key = key;
            s->rank = rank;
            s->result = result;
            return;
        }
        h++;
    }
}

uint64_t moe_char_pair_hash(const char *a, size_t na, const char *b, size_t nb)
{
    unsigned char buf[10];
    buf[0] = (unsigned char)na;
    memcpy(buf + 1, a, na);
    buf[1 + na] = (unsigned char)nb;
    memcpy(buf + 2 + na, b, nb);
    uint64_t h = moe_hash_bytes(buf, 2 + na + nb);
    return h ? h : 1;
}

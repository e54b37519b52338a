/*
 * arena.c — the bump allocator declared in arena.h.
 *
 * Layout: a singly linked list of chunks. Small requests are carved from
 * the head chunk; when it is full a new head of MOE_ARENA_CHUNK bytes (or
 * double the previous one, up to 1 MiB) is started. Requests larger than a
 * quarter of a chunk get a chunk of their own on the `big` list, so a large
 * string does not waste the rest of the head chunk.
 */
#include "arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MOE_ARENA_ALIGN 16u
#define MOE_ARENA_MIN_CHUNK (16u * 1024u)
#define MOE_ARENA_MAX_CHUNK (1024u * 1024u)

struct moe_arena_chunk {
    moe_arena_chunk *next;
    size_t           cap;  /* usable bytes after the header */
    size_t           used;
    /* data follows, aligned to MOE_ARENA_ALIGN */
};

/* Header size rounded up so the data that follows is aligned. */
#define CHUNK_HDR ((sizeof(moe_arena_chunk) + MOE_ARENA_ALIGN - 1) & ~(size_t)(MOE_ARENA_ALIGN - 1))

static unsigned char *chunk_data(moe_arena_chunk *c)
{
    return (unsigned char *)c + CHUNK_HDR;
}

static size_t align_up(size_t n)
{
    return (n + MOE_ARENA_ALIGN - 1) & ~(size_t)(MOE_ARENA_ALIGN - 1);
}

void moe_arena_init(moe_arena *a, size_t limit_bytes)
{
    memset(a, 0, sizeof *a);
    a->limit_bytes = limit_bytes;
}

static void free_list(moe_arena_chunk *c)
{
    while (c) {
        moe_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
}

void moe_arena_free(moe_arena *a)
{
    if (!a)
        return;
    free_list(a->head);
    free_list(a->big);
    size_t limit = a->limit_bytes;
    moe_arena_init(a, limit);
}

/* A new chunk with room for `cap` bytes, charged against the budget. */
static moe_arena_chunk *chunk_new(moe_arena *a, size_t cap)
{
    if (cap > SIZE_MAX - CHUNK_HDR) {
        a->over_limit = true;
        return NULL;
    }
    size_t total = CHUNK_HDR + cap;
    if (a->limit_bytes && (total > a->limit_bytes || a->used_bytes > a->limit_bytes - total)) {
        a->over_limit = true;
        return NULL;
    }
    moe_arena_chunk *c = malloc(total);
    if (!c)
        return NULL;
    c->next = NULL;
    c->cap = cap;
    c->used = 0;
    a->used_bytes += total;
    return c;
}

void *moe_arena_alloc(moe_arena *a, size_t size)
{
    size_t need = align_up(size ? size : 1);
    if (need < size)
        return NULL; /* overflow in rounding */
    moe_arena_chunk *h = a->head;
    if (h && h->cap - h->used >= need) {
        void *p = chunk_data(h) + h->used;
        h->used += need;
        a->last = p;
        a->last_size = need;
        return p;
    }
    size_t next_cap = h ? h->cap * 2 : MOE_ARENA_MIN_CHUNK;
    if (next_cap > MOE_ARENA_MAX_CHUNK)
        next_cap = MOE_ARENA_MAX_CHUNK;
    if (need > next_cap / 4) {
        /* Oversized: a chunk of its own, so the head keeps its free room. */
        moe_arena_chunk *c = chunk_new(a, need);
        if (!c)
            return NULL;
        c->used = need;
        c->next = a->big;
        a->big = c;
        a->last = chunk_data(c);
        a->last_size = need;
        return chunk_data(c);
    }
    moe_arena_chunk *c = chunk_new(a, next_cap);
    if (!c)
        return NULL;
    c->next = h;
    a->head = c;
    c->used = need;
    a->last = chunk_data(c);
    a->last_size = need;
    return chunk_data(c);
}

void *moe_arena_calloc(moe_arena *a, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = moe_arena_alloc(a, n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

void *moe_arena_grow(moe_arena *a, void *p, size_t old_size, size_t new_size)
{
    if (!p)
        return moe_arena_alloc(a, new_size);
    if (new_size <= old_size)
        return p;
    /* In place: p is the newest carve of the head chunk and room remains. */
    moe_arena_chunk *h = a->head;
    if (p == a->last && h && (unsigned char *)p >= chunk_data(h) &&
        (unsigned char *)p < chunk_data(h) + h->cap) {
        size_t off = (size_t)((unsigned char *)p - chunk_data(h));
        size_t need = align_up(new_size);
        if (need >= new_size && need <= h->cap - off) {
            h->used = off + need;
            a->last_size = need;
            return p;
        }
    }
    void *q = moe_arena_alloc(a, new_size);
    if (!q)
        return NULL;
    memcpy(q, p, old_size);
    return q;
}

char *moe_arena_strndup(moe_arena *a, const char *s, size_t len)
{
    if (len == SIZE_MAX)
        return NULL;
    char *p = moe_arena_alloc(a, len + 1);
    if (!p)
        return NULL;
    if (len)
        memcpy(p, s, len);
    p[len] = 0;
    return p;
}

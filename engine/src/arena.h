/*
 * arena.h — a bump allocator with a byte budget.
 *
 * The JSON parser and the chat-template interpreter build many small,
 * short-lived objects (tree nodes, strings, lists) whose lifetimes all end
 * together: when the document is freed or the render finishes. An arena
 * makes that one free() per chunk instead of bookkeeping per object, makes
 * cycles harmless (a template can put a list inside itself), and gives one
 * place to enforce a memory ceiling so hostile input fails cleanly instead
 * of exhausting the machine.
 *
 * Allocations are aligned for any C object. Nothing is freed individually;
 * moe_arena_grow() extends the most recent allocation in place when it can,
 * which is how growing buffers stay cheap.
 */
#ifndef MOE_ARENA_H
#define MOE_ARENA_H

#include <stdbool.h>
#include <stddef.h>

typedef struct moe_arena_chunk moe_arena_chunk;

typedef struct moe_arena {
    moe_arena_chunk *head;       /* chunk new allocations come from          */
    moe_arena_chunk *big;        /* chunks holding one oversized allocation  */
    void            *last;       /* most recent allocation (for grow)        */
    size_t           last_size;
    size_t           used_bytes;  /* bytes malloc'd for chunks so far         */
    size_t           limit_bytes; /* 0: no limit                              */
    bool             over_limit;  /* set when a request failed on the limit   */
} moe_arena;

/* An empty arena that may hold up to `limit_bytes` (0 = unlimited). */
void  moe_arena_init(moe_arena *a, size_t limit_bytes);
/* Frees every chunk; the arena is empty again and may be reused. */
void  moe_arena_free(moe_arena *a);
/* `size` bytes (size 0 gives a valid unique pointer), or NULL when malloc
 * fails or the budget would be exceeded (then a->over_limit is set). */
void *moe_arena_alloc(moe_arena *a, size_t size);
/* Zero-filled allocation of n * size bytes, overflow-checked. */
void *moe_arena_calloc(moe_arena *a, size_t n, size_t size);
/* Resizes `p` (of `old_size` bytes, from this arena) to `new_size`,
 * in place when `p` is the latest allocation and its chunk has room, else
 * by copying. Returns NULL on failure (p stays valid). */
void *moe_arena_grow(moe_arena *a, void *p, size_t old_size, size_t new_size);
/* A NUL-terminated copy of `len` bytes. */
char *moe_arena_strndup(moe_arena *a, const char *s, size_t len);

#endif /* MOE_ARENA_H */

/*
 * kv-cache.h — the key/value cache shared by all sequences of a context.
 *
 * The cache is n_ctx cells; a cell holds one token's keys and values for
 * every layer, its position, and the set of sequences that use it (a
 * 64-bit mask, so up to 64 sequences). Cells are not ordered: attention
 * reads a token's visible cells by mask and position (moe_kv_view), so a
 * sequence may be scattered, and copying a sequence only adds its bit to
 * cells (prefix sharing costs no memory). The K/V rows themselves live in
 * backend buffers, one per layer, as F16 or Q8_0.
 */
#ifndef MOE_KV_CACHE_H
#define MOE_KV_CACHE_H

#include "backend.h"

#define MOE_KV_MAX_SEQ 64

typedef struct moe_kv_cache {
    int32_t   n_ctx;
    int32_t   n_seq_max;
    int32_t   n_layer;
    moe_type  type;      /* F16 (default), Q8_0 or F32 (exact, tests)    */
    int64_t   row_elems; /* n_head_kv * head_dim                         */
    size_t    row_bytes; /* of one cell's K (or V) row in one layer      */
    void    **k, **v;    /* [n_layer] backend buffers of n_ctx rows      */
    int32_t  *cell_pos;  /* [n_ctx], -1 = free                           */
    uint64_t *cell_seqs; /* [n_ctx], bit s = sequence s uses the cell    */
    int32_t   n_used;    /* cells with at least one sequence             */
    int32_t   n_high;    /* every cell at or after n_high is free        */
    int32_t   head;      /* where the next free-cell search starts       */
} moe_kv_cache;

moe_status moe_kvc_init(moe_kv_cache *kv, const moe_backend *be, int32_t n_ctx,
                        int32_t n_seq_max, int32_t n_layer, int64_t row_elems,
                        moe_type type, moe_err *err);
/* Releases the buffers; kv may be zeroed or half-initialised. */
void       moe_kvc_free(moe_kv_cache *kv, const moe_backend *be);
uint64_t   moe_kvc_bytes(const moe_kv_cache *kv);

void    moe_kvc_clear(moe_kv_cache *kv);
int32_t moe_kvc_n_free(const moe_kv_cache *kv);
/* Writes n free cells to `cells` without taking them; false if there are
 * fewer than n. */
bool    moe_kvc_find(moe_kv_cache *kv, int32_t n, int32_t *cells);
/* Gives a free cell to (seq, pos) / frees a cell entirely. */
void    moe_kvc_take(moe_kv_cache *kv, int32_t cell, int32_t seq, int32_t pos);
void    moe_kvc_drop(moe_kv_cache *kv, int32_t cell);

/* seq < 0: every sequence; range [p0, p1) with p0 < 0 = 0, p1 < 0 = end. */
void    moe_kvc_seq_rm(moe_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1);
void    moe_kvc_seq_cp(moe_kv_cache *kv, int32_t src, int32_t dst, int32_t p0, int32_t p1);
void    moe_kvc_seq_keep(moe_kv_cache *kv, int32_t seq);
/* Largest / smallest position of each sequence into out[0..n_seq_max)
 * (-1 for an empty sequence), in one scan. */
void    moe_kvc_pos_max_all(const moe_kv_cache *kv, int32_t *out);
void    moe_kvc_pos_min_all(const moe_kv_cache *kv, int32_t *out);

#endif /* MOE_KV_CACHE_H */

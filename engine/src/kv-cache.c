/*
 * kv-cache.c — cell bookkeeping for the shared KV cache (see kv-cache.h).
 * Everything here is O(n_ctx) scans over two small arrays per call at
 * most; the cache rows themselves are only touched by the backend's
 * attention operation.
 */
#include "kv-cache.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

moe_status moe_kvc_init(moe_kv_cache *kv, const moe_backend *be, int32_t n_ctx,
                        int32_t n_seq_max, int32_t n_layer, int64_t row_elems,
                        moe_type type, moe_err *err)
{
    memset(kv, 0, sizeof *kv);
    if (type != MOE_TYPE_F16 && type != MOE_TYPE_Q8_0 && type != MOE_TYPE_F32)
        return moe_fail(err, MOE_ERR_UNSUPPORTED, "KV cache type %s not supported (use f16, q8_0 or f32)",
                        moe_type_name(type) ? moe_type_name(type) : "?");
    size_t row_bytes = moe_type_row_bytes(type, row_elems);
    if (row_bytes == 0)
        return moe_fail(err, MOE_ERR_UNSUPPORTED,
                        "KV cache type %s needs rows that are a multiple of %lld elements, not %lld",
                        moe_type_name(type), (long long)moe_type_block_elems(type),
                        (long long)row_elems);
    kv->n_ctx = n_ctx;
    kv->n_seq_max = n_seq_max;
    kv->n_layer = n_layer;
    kv->type = type;
    kv->row_elems = row_elems;
    kv->row_bytes = row_bytes;
    kv->cell_pos = malloc((size_t)n_ctx * sizeof(int32_t));
    kv->cell_seqs = calloc((size_t)n_ctx, sizeof(uint64_t));
    kv->k = calloc((size_t)n_layer, sizeof(void *));
    kv->v = calloc((size_t)n_layer, sizeof(void *));
    if (!kv->cell_pos || !kv->cell_seqs || !kv->k || !kv->v) {
        moe_kvc_free(kv, be);
        return moe_fail(err, MOE_ERR_NOMEM, "KV cache: out of memory for %d cells", n_ctx);
    }
    for (int32_t il = 0; il < n_layer; il++) {
        kv->k[il] = be->iface.buf_alloc(be->context, (size_t)n_ctx * row_bytes);
        kv->v[il] = be->iface.buf_alloc(be->context, (size_t)n_ctx * row_bytes);
        if (!kv->k[il] || !kv->v[il]) {
            uint64_t total = 2ull * (uint64_t)n_layer * (uint64_t)n_ctx * row_bytes;
            moe_kvc_free(kv, be);
            return moe_fail(err, MOE_ERR_NOMEM,
                            "KV cache: cannot allocate %llu MiB for %d cells x %d layers",
                            (unsigned long long)(total >> 20), n_ctx, n_layer);
        }
    }
    moe_kvc_clear(kv);
    return MOE_OK;
}

void moe_kvc_free(moe_kv_cache *kv, const moe_backend *be)
{
    for (int32_t il = 0; il < kv->n_layer; il++) {
        if (kv->k && kv->k[il])
            be->iface.buf_free(be->context, kv->k[il]);
        if (kv->v && kv->v[il])
            be->iface.buf_free(be->context, kv->v[il]);
    }
    free(kv->k);
    free(kv->v);
    free(kv->cell_pos);
    free(kv->cell_seqs);
    memset(kv, 0, sizeof *kv);
}

uint64_t moe_kvc_bytes(const moe_kv_cache *kv)
{
    return 2ull * (uint64_t)kv->n_layer * (uint64_t)kv->n_ctx * kv->row_bytes;
}

void moe_kvc_clear(moe_kv_cache *kv)
{
    for (int32_t c = 0; c < kv->n_ctx; c++)
        kv->cell_pos[c] = -1;
    memset(kv->cell_seqs, 0, (size_t)kv->n_ctx * sizeof(uint64_t));
    kv->n_used = 0;
    kv->n_high = 0;
    kv->head = 0;
}

int32_t moe_kvc_n_free(const moe_kv_cache *kv)
{
    return kv->n_ctx - kv->n_used;
}

bool moe_kvc_find(moe_kv_cache *kv, int32_t n, int32_t *cells)
{
    if (n > moe_kvc_n_free(kv))
        return false;
    int32_t found = 0;
    for (int32_t i = 0; i < kv->n_ctx && found < n; i++) {
        int32_t c = (kv->head + i) % kv->n_ctx;
        if (kv->cell_seqs[c] == 0)
            cells[found++] = c;
    }
    return found == n;
}

void moe_kvc_take(moe_kv_cache *kv, int32_t cell, int32_t seq, int32_t pos)
{
    if (kv->cell_seqs[cell] == 0)
        kv->n_used++;
    kv->cell_seqs[cell] |= (uint64_t)1 << seq;
    kv->cell_pos[cell] = pos;
    if (cell + 1 > kv->n_high)
        kv->n_high = cell + 1;
    kv->head = (cell + 1) % kv->n_ctx;
}

/* Frees a used cell and pulls n_high back over trailing free cells. */
static void kvc_release(moe_kv_cache *kv, int32_t cell)
{
    kv->cell_seqs[cell] = 0;
    kv->cell_pos[cell] = -1;
    kv->n_used--;
    while (kv->n_high > 0 && kv->cell_seqs[kv->n_high - 1] == 0)
        kv->n_high--;
    if (cell < kv->head)
        kv->head = cell;
}

void moe_kvc_drop(moe_kv_cache *kv, int32_t cell)
{
    if (kv->cell_seqs[cell] != 0)
        kvc_release(kv, cell);
}

static bool in_range(int32_t pos, int32_t p0, int32_t p1)
{
    return pos >= (p0 < 0 ? 0 : p0) && (p1 < 0 || pos < p1);
}

void moe_kvc_seq_rm(moe_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1)
{
    const uint64_t mask = seq < 0 ? ~(uint64_t)0 : (uint64_t)1 << seq;
    for (int32_t c = kv->n_high - 1; c >= 0; c--) {
        if (!(kv->cell_seqs[c] & mask) || !in_range(kv->cell_pos[c], p0, p1))
            continue;
        const uint64_t left = kv->cell_seqs[c] & ~mask;
        if (left)
            kv->cell_seqs[c] = left;
        else
            kvc_release(kv, c);
    }
}

void moe_kvc_seq_cp(moe_kv_cache *kv, int32_t src, int32_t dst, int32_t p0, int32_t p1)
{
    if (src == dst)
        return;
    moe_kvc_seq_rm(kv, dst, p0, p1);
    const uint64_t sbit = (uint64_t)1 << src, dbit = (uint64_t)1 << dst;
    for (int32_t c = 0; c < kv->n_high; c++)
        if ((kv->cell_seqs[c] & sbit) && in_range(kv->cell_pos[c], p0, p1))
            kv->cell_seqs[c] |= dbit;
}

void moe_kvc_seq_keep(moe_kv_cache *kv, int32_t seq)
{
    const uint64_t bit = (uint64_t)1 << seq;
    for (int32_t c = kv->n_high - 1; c >= 0; c--) {
        if (kv->cell_seqs[c] == 0)
            continue;
        if (kv->cell_seqs[c] & bit)
            kv->cell_seqs[c] = bit;
        else
            kvc_release(kv, c);
    }
}

void moe_kvc_pos_max_all(const moe_kv_cache *kv, int32_t *out)
{
    for (int32_t s = 0; s < kv->n_seq_max; s++)
        out[s] = -1;
    for (int32_t c = 0; c < kv->n_high; c++)
        for (uint64_t m = kv->cell_seqs[c]; m; m &= m - 1) {
            int s = __builtin_ctzll(m);
            if (s < kv->n_seq_max && kv->cell_pos[c] > out[s])
                out[s] = kv->cell_pos[c];
        }
}

void moe_kvc_pos_min_all(const moe_kv_cache *kv, int32_t *out)
{
    for (int32_t s = 0; s < kv->n_seq_max; s++)
        out[s] = -1;
    for (int32_t c = 0; c < kv->n_high; c++)
        for (uint64_t m = kv->cell_seqs[c]; m; m &= m - 1) {
            int s = __builtin_ctzll(m);
            if (s < kv->n_seq_max && (out[s] < 0 || kv->cell_pos[c] < out[s]))
                out[s] = kv->cell_pos[c];
        }
}

/*
 * attention.c — the CPU backend's attention operation: store this ubatch's
 * keys and values in their cache cells, then for every token and head
 * softmax(q K^T * scale) V over the cells the token may read (same
 * sequence, position not after its own; see moe_kv_view).
 *
 * Work split: phase 1 (stores) by token, then a barrier, then phase 2 by
 * token, interleaved so later tokens of a prefill (which read more cells)
 * spread over all threads. Each thread first lists the token's visible
 * cells once, then takes the query heads that share a KV head together
 * (grouped-query attention), so every K and V row is read once per group.
 * Two passes (scores, then the weighted sum of V) keep the softmax exact
 * without rescaling. Scratch per thread: n_ctx cells and n_ctx scores per
 * head of a group.
 *
 * K/V rows are F16 (default), Q8_0 (q is quantised to Q8_0 per head and
 * scored with the Q8_0 product kernel, V dequantised block by block) or
 * F32 (exact, for comparisons with reference implementations).
 */
#include "backend-cpu.h"

#include <math.h>
#include <string.h>

typedef struct att_task {
    cpu_backend         *cb;
    const moe_attn_args *a;
    const float         *q, *k, *v;
    float               *out;
} att_task;

static void att_store(const att_task *t, int ith, int nth)
{
    const moe_attn_args *a = t->a;
    const moe_cpu_kernels *k = t->cb->k;
    const int64_t row = (int64_t)a->n_head_kv * a->head_dim;
    for (int64_t i = ith; i < a->view->n_tok; i += nth) {
        const size_t off = (size_t)a->view->tok_cell[i] * a->kv_row_bytes;
        uint8_t *kd = (uint8_t *)a->k_cache + off, *vd = (uint8_t *)a->v_cache + off;
        if (a->kv_type == MOE_TYPE_Q8_0) {
            k->quantize_q8_0(t->k + i * row, kd, row);
            k->quantize_q8_0(t->v + i * row, vd, row);
        } else if (a->kv_type == MOE_TYPE_F32) {
            memcpy(kd, t->k + i * row, (size_t)row * sizeof(float));
            memcpy(vd, t->v + i * row, (size_t)row * sizeof(float));
        } else {
            k->f32_to_f16(t->k + i * row, (uint16_t *)kd, row);
            k->f32_to_f16(t->v + i * row, (uint16_t *)vd, row);
        }
    }
}

/* out += a * (Q8_0 row of n elements) */
static void axpy_q8_0(int64_t n, float a, const moe_block_q8_0 *v, float *out)
{
    for (int64_t b = 0; b < n / MOE_QK8_0; b++) {
        const float d = a * moe_f16_to_f32(v[b].d);
        for (int i = 0; i < MOE_QK8_0; i++)
            out[b * MOE_QK8_0 + i] += d * (float)v[b].qs[i];
    }
}

/* softmax of each of n_q rows of n scores, in place */
static void att_softmax(float *s, int64_t n, int64_t n_q)
{
    for (int64_t g = 0; g < n_q; g++) {
        float *r = s + g * n;
        float mx = -INFINITY;
        for (int64_t i = 0; i < n; i++)
            mx = r[i] > mx ? r[i] : mx;
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) {
            r[i] = expf(r[i] - mx);
            sum += r[i];
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < n; i++)
            r[i] *= inv;
    }
}

/* F16 cache: the query heads that share a KV head go through the group
 * kernels together, so each K and V row is read and converted once. */
static void att_token_f16(const att_task *t, int64_t tok, const int32_t *cells, int64_t n_vis,
                          float *sc)
{
    const moe_attn_args *a = t->a;
    const moe_cpu_kernels *k = t->cb->k;
    const int64_t hd = a->head_dim, group = a->n_head / a->n_head_kv;
    for (int64_t kvh = 0; kvh < a->n_head_kv; kvh++) {
        const size_t hoff = (size_t)kvh * (size_t)hd * sizeof(uint16_t);
        for (int64_t g0 = 0; g0 < group; g0 += MOE_ATTN_MAX_GROUP) {
            const int64_t nq = group - g0 < MOE_ATTN_MAX_GROUP ? group - g0 : MOE_ATTN_MAX_GROUP;
            const int64_t h0 = kvh * group + g0;
            const float *q = t->q + (tok * a->n_head + h0) * hd;
            float *out = t->out + (tok * a->n_head + h0) * hd;
            memset(out, 0, (size_t)(nq * hd) * sizeof(float));
            if (n_vis == 0)
                continue;
            k->attn_scores_f16(hd, (const uint8_t *)a->k_cache + hoff, a->kv_row_bytes, cells,
                               n_vis, q, nq, a->scale, sc);
            att_softmax(sc, n_vis, nq);
            k->attn_values_f16(hd, (const uint8_t *)a->v_cache + hoff, a->kv_row_bytes, cells,
                               n_vis, sc, nq, out);
        }
    }
}

/* Q8_0 cache: q is quantised per head and scored with the Q8_0 product
 * kernel, as llama.cpp does for a quantised cache. */
static void att_token_q8(const att_task *t, int64_t tok, const int32_t *cells, int64_t n_vis,
                         float *sc, uint8_t *qq)
{
    const moe_attn_args *a = t->a;
    const moe_cpu_kernels *k = t->cb->k;
    const int64_t hd = a->head_dim, group = a->n_head / a->n_head_kv;
    const size_t head_bytes = (size_t)(hd / MOE_QK8_0) * sizeof(moe_block_q8_0);
    for (int32_t h = 0; h < a->n_head; h++) {
        const float *qh = t->q + (tok * a->n_head + h) * hd;
        float *oh = t->out + (tok * a->n_head + h) * hd;
        const size_t hoff = (size_t)(h / group) * head_bytes;
        memset(oh, 0, (size_t)hd * sizeof(float));
        if (n_vis == 0)
            continue;
        k->quantize_q8_0(qh, qq, hd);
        for (int64_t i = 0; i < n_vis; i++) {
            const uint8_t *kr = (const uint8_t *)a->k_cache + (size_t)cells[i] * a->kv_row_bytes + hoff;
            float s;
            k->mm_q8_0(hd, kr, 0, 1, qq, 0, 1, &s, 1);
            sc[i] = s * a->scale;
        }
        att_softmax(sc, n_vis, 1);
        for (int64_t i = 0; i < n_vis; i++) {
            const uint8_t *vr = (const uint8_t *)a->v_cache + (size_t)cells[i] * a->kv_row_bytes + hoff;
            axpy_q8_0(hd, sc[i], (const moe_block_q8_0 *)vr, oh);
        }
    }
}

/* F32 cache (exact, for comparisons with references): plain per-head
 * loops with the F32 product kernel. */
static void att_token_f32(const att_task *t, int64_t tok, const int32_t *cells, int64_t n_vis,
                          float *sc)
{
    const moe_attn_args *a = t->a;
    const moe_cpu_kernels *k = t->cb->k;
    const int64_t hd = a->head_dim, group = a->n_head / a->n_head_kv;
    for (int32_t h = 0; h < a->n_head; h++) {
        const float *qh = t->q + (tok * a->n_head + h) * hd;
        float *oh = t->out + (tok * a->n_head + h) * hd;
        const size_t hoff = (size_t)(h / group) * (size_t)hd * sizeof(float);
        memset(oh, 0, (size_t)hd * sizeof(float));
        if (n_vis == 0)
            continue;
        for (int64_t i = 0; i < n_vis; i++) {
            const uint8_t *kr = (const uint8_t *)a->k_cache + (size_t)cells[i] * a->kv_row_bytes + hoff;
            float s;
            k->mm_f32(hd, kr, 0, 1, qh, 0, 1, &s, 1);
            sc[i] = s * a->scale;
        }
        att_softmax(sc, n_vis, 1);
        for (int64_t i = 0; i < n_vis; i++) {
            const float *vr = (const float *)(const void *)((const uint8_t *)a->v_cache +
                                                            (size_t)cells[i] * a->kv_row_bytes + hoff);
            for (int64_t d = 0; d < hd; d++)
                oh[d] += sc[i] * vr[d];
        }
    }
}

static void att_token(const att_task *t, int64_t tok, int ith)
{
    const moe_kv_view *view = t->a->view;
    cpu_backend *cb = t->cb;
    int32_t *cells = cb->att_cells + (size_t)ith * cb->lim.n_ctx;
    float *sc = cb->att_scores + (size_t)ith * cb->att_scores_stride;

    const uint64_t bit = (uint64_t)1 << view->tok_seq[tok];
    const int32_t pos = view->tok_pos[tok];
    int64_t n_vis = 0;
    for (int32_t c = 0; c < view->n_cells; c++)
        if ((view->cell_seqs[c] & bit) && view->cell_pos[c] >= 0 && view->cell_pos[c] <= pos)
            cells[n_vis++] = c;

    if (t->a->kv_type == MOE_TYPE_Q8_0)
        att_token_q8(t, tok, cells, n_vis, sc, cb->att_q8 + (size_t)ith * cb->att_q8_stride);
    else if (t->a->kv_type == MOE_TYPE_F32)
        att_token_f32(t, tok, cells, n_vis, sc);
    else
        att_token_f16(t, tok, cells, n_vis, sc);
}

static void att_task_fn(void *arg, int ith, int nth)
{
    att_task *t = arg;
    att_store(t, ith, nth);
    moe_threadpool_barrier(t->cb->pool);
    for (int64_t tok = ith; tok < t->a->view->n_tok; tok += nth)
        att_token(t, tok, ith);
}

void cpu_attention(void *ctx, const moe_attn_args *a, const float *q, const float *k,
                   const float *v, float *out)
{
    cpu_backend *cb = ctx;
    att_task t = {.cb = cb, .a = a, .q = q, .k = k, .v = v, .out = out};
    moe_threadpool_run(cb->pool, att_task_fn, &t);
}

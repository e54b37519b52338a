/*
 * matmul.c — the CPU backend's matrix products: planning a product into
 * items (rows x columns) that threads claim, running a phase of items,
 * quantising activations into the weight type's format, and the two
 * product operations of the table, mul_mat (y = W x + b) and ffn (dense
 * SwiGLU: gate and up in one pass over the quantised input, then down).
 * The expert products of a MoE layer reuse cpu_mm_plan / cpu_mm_phase
 * (moe-ffn.c).
 */
#include "backend-cpu.h"

#include <stdlib.h>
#include <string.h>

/* ---- parallel helpers ------------------------------------------------- */

void cpu_phase_wait(cpu_phase *ph, int64_t n)
{
    for (unsigned spins = 0; atomic_load_explicit(&ph->done, memory_order_acquire) < n; spins++)
        moe_threadpool_relax(spins);
}

int64_t cpu_mm_plan(cpu_mm_job *jobs, int n_jobs, int nth)
{
    int64_t total = 0;
    for (int j = 0; j < n_jobs; j++) {
        cpu_mm_job *jb = &jobs[j];
        /* Few columns (decode): the weights stream once, in chunks of up
         * to 256 rows (about 280 KB at n_embd 1024 in Q8_0): two threads
         * streaming finer interleaved chunks reach only half the memory
         * bandwidth of two long streams (measured: 15 vs 29 GB/s). Many
         * columns: blocks of 48 tokens (a multiple of every tile width)
         * keep the activations in L2 while a chunk of rows meets them. */
        jb->cols_per_item = jb->nc <= 48 ? (jb->nc > 0 ? jb->nc : 1) : 48;
        int64_t rows = jb->nc < 8 ? 256 : 32;
        int64_t col_blocks = (jb->nc + jb->cols_per_item - 1) / jb->cols_per_item;
        /* keep at least ~4 items per thread when the job is small */
        while (rows > 4 && ((jb->nr + rows - 1) / rows) * col_blocks < 4 * nth)
            rows /= 2;
        jb->rows_per_item = rows;
        jb->n_items = jb->nc > 0 ? ((jb->nr + rows - 1) / rows) * col_blocks : 0;
        jb->first_item = total;
        total += jb->n_items;
    }
    return total;
}

void cpu_mm_phase(const cpu_mm_job *jobs, int n_jobs, int64_t n_items, cpu_phase *ph)
{
    int j = 0;
    int64_t it;
    while (cpu_phase_claim(ph, n_items, &it)) {
        while (j < n_jobs - 1 && it >= jobs[j].first_item + jobs[j].n_items)
            j++;
        while (j > 0 && it < jobs[j].first_item)
            j--;
        const cpu_mm_job *jb = &jobs[j];
        int64_t local = it - jb->first_item;
        int64_t row_chunks = (jb->nr + jb->rows_per_item - 1) / jb->rows_per_item;
        int64_t r0 = (local % row_chunks) * jb->rows_per_item;
        int64_t c0 = (local / row_chunks) * jb->cols_per_item;
        int64_t nr = jb->nr - r0 < jb->rows_per_item ? jb->nr - r0 : jb->rows_per_item;
        int64_t nc = jb->nc - c0 < jb->cols_per_item ? jb->nc - c0 : jb->cols_per_item;
        float *y = jb->y + c0 * jb->ys + r0;
        jb->mm(jb->n, jb->w + r0 * jb->ws, jb->ws, nr, jb->x + c0 * jb->xs, jb->xs, nc, y, jb->ys);
        if (jb->w2)
            jb->mm(jb->n, jb->w2 + r0 * jb->ws, jb->ws, nr, jb->x + c0 * jb->xs, jb->xs, nc,
                   jb->y2 + c0 * jb->ys + r0, jb->ys);
        if (jb->bias)
            for (int64_t c = 0; c < nc; c++)
                for (int64_t r = 0; r < nr; r++)
                    y[c * jb->ys + r] += jb->bias[r0 + r];
        cpu_phase_done(ph);
    }
    cpu_phase_wait(ph, n_items);
}

void cpu_quantize_phase(cpu_backend *cb, moe_type t, const float *x, int64_t x_stride,
                        int64_t row_len, int64_t n, uint8_t *dst, size_t dst_stride,
                        cpu_phase *ph)
{
    int64_t i;
    while (cpu_phase_claim(ph, n, &i)) {
        moe_cpu_quantize_vec(cb->k, t, x + i * x_stride, dst + (size_t)i * dst_stride, row_len);
        cpu_phase_done(ph);
    }
    cpu_phase_wait(ph, n);
}

/* ---- products ----------------------------------------------------------- */

/* Activations with at most this many rows are quantised on the caller
 * before the workers start (one phase less for decode). */
#define CPU_QUANT_INLINE_ROWS 4

typedef struct mm_task {
    cpu_backend      *cb;
    const moe_tensor *w, *w2, *w3;
    const float      *x;
    float            *y;
    int64_t           n_tok;
    bool              quant_in_task;
    cpu_mm_job        job, down;
    cpu_phase         ph[4];
} mm_task;

/* Sets up the job for x (n_tok rows of w->ne[0]) times w into y; the
 * activations are quantised into `xq` unless w is a float type. */
static void mm_job_init(cpu_mm_job *jb, const cpu_backend *cb, const moe_tensor *w,
                        const moe_tensor *w2, const float *x, uint8_t *xq, int64_t n_tok,
                        float *y, float *y2)
{
    const bool quant = moe_cpu_vec_type(w->type) != MOE_TYPE_F32;
    *jb = (cpu_mm_job){
        .mm = moe_cpu_mm_for(cb->k, w->type),
        .n = w->ne[0],
        .w = w->data,
        .w2 = w2 ? w2->data : NULL,
        .ws = w->nb1,
        .nr = w->ne[1],
        .x = quant ? xq : (const uint8_t *)x,
        .xs = quant ? moe_cpu_vec_row_bytes(w->type, w->ne[0]) : (size_t)w->ne[0] * sizeof(float),
        .nc = n_tok,
        .y = y,
        .y2 = y2,
        .ys = (size_t)w->ne[1],
    };
}

/* Quantises the activations of a product on the caller if they are few,
 * else leaves it to the task; returns whether the task must do it. */
static bool mm_prequantize(cpu_backend *cb, const moe_tensor *w, const float *x, int64_t n_tok,
                           const cpu_mm_job *jb)
{
    if (moe_cpu_vec_type(w->type) == MOE_TYPE_F32)
        return false;
    if (n_tok > CPU_QUANT_INLINE_ROWS)
        return true;
    for (int64_t i = 0; i < n_tok; i++)
        moe_cpu_quantize_vec(cb->k, w->type, x + i * w->ne[0], cb->xq + (size_t)i * jb->xs, w->ne[0]);
    return false;
}

static void mul_mat_task(void *arg, int ith, int nth)
{
    (void)ith;
    (void)nth;
    mm_task *t = arg;
    if (t->quant_in_task)
        cpu_quantize_phase(t->cb, t->w->type, t->x, t->w->ne[0], t->w->ne[0], t->n_tok, t->cb->xq,
                           t->job.xs, &t->ph[0]);
    cpu_mm_phase(&t->job, 1, t->job.n_items, &t->ph[1]);
}

void cpu_mul_mat(void *ctx, const moe_tensor *w, const moe_tensor *bias, const float *x,
                        int64_t n_tok, float *out)
{
    cpu_backend *cb = ctx;
    mm_task t = {.cb = cb, .w = w, .x = x, .y = out, .n_tok = n_tok};
    mm_job_init(&t.job, cb, w, NULL, x, cb->xq, n_tok, out, NULL);
    t.job.bias = bias ? bias->data : NULL;
    cpu_mm_plan(&t.job, 1, cb->n_threads);
    t.quant_in_task = mm_prequantize(cb, w, x, n_tok, &t.job);
    moe_threadpool_run(cb->pool, mul_mat_task, &t);
}

/* Dense SwiGLU: gate and up share one pass over the quantised input, the
 * hidden activations are quantised per token, then down. */
static void ffn_task(void *arg, int ith, int nth)
{
    (void)ith;
    (void)nth;
    mm_task *t = arg;
    cpu_backend *cb = t->cb;
    const moe_tensor *gate = t->w, *down = t->w3;
    const int64_t n_ff = gate->ne[1];
    if (t->quant_in_task)
        cpu_quantize_phase(cb, gate->type, t->x, gate->ne[0], gate->ne[0], t->n_tok, cb->xq,
                           t->job.xs, &t->ph[0]);
    cpu_mm_phase(&t->job, 1, t->job.n_items, &t->ph[1]);

    const bool quant = moe_cpu_vec_type(down->type) != MOE_TYPE_F32;
    int64_t tok;
    while (cpu_phase_claim(&t->ph[2], t->n_tok, &tok)) {
        cpu_swiglu(cb->ffn_gate + tok * n_ff, cb->ffn_up + tok * n_ff, n_ff);
        if (quant)
            moe_cpu_quantize_vec(cb->k, down->type, cb->ffn_gate + tok * n_ff,
                                 cb->ffn_hq + (size_t)tok * t->down.xs, n_ff);
        cpu_phase_done(&t->ph[2]);
    }
    cpu_phase_wait(&t->ph[2], t->n_tok);
    cpu_mm_phase(&t->down, 1, t->down.n_items, &t->ph[3]);
}

void cpu_ffn(void *ctx, const moe_tensor *gate, const moe_tensor *up,
                    const moe_tensor *down, const float *x, int64_t n_tok, float *out)
{
    cpu_backend *cb = ctx;
    mm_task t = {.cb = cb, .w = gate, .w2 = up, .w3 = down, .x = x, .y = out, .n_tok = n_tok};
    mm_job_init(&t.job, cb, gate, up, x, cb->xq, n_tok, cb->ffn_gate, cb->ffn_up);
    cpu_mm_plan(&t.job, 1, cb->n_threads);
    mm_job_init(&t.down, cb, down, NULL, cb->ffn_gate, cb->ffn_hq, n_tok, out, NULL);
    cpu_mm_plan(&t.down, 1, cb->n_threads);
    t.quant_in_task = mm_prequantize(cb, gate, x, n_tok, &t.job);
    moe_threadpool_run(cb->pool, ffn_task, &t);
}


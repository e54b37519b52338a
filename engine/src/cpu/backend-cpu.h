/*
 * backend-cpu.h — internals shared by the CPU backend's files:
 * backend-cpu.c (the table, buffers, small operations, products),
 * attention.c and moe-ffn.c. Not used outside engine/src/cpu/.
 *
 * Every operation runs as one task on the thread pool. A task is a
 * sequence of phases; each phase's work is a number of items that the
 * threads present claim from an atomic counter, and a phase ends when all
 * its items are done (cpu_phase). No step waits for a particular thread,
 * because the pool does not promise that every worker joins (threadpool.h):
 * a thread descheduled by another process costs at most the item it holds.
 * Tiny operations (one decode token) run on the caller without waking the
 * workers. All scratch is allocated by reserve() from the context's
 * limits; operations never allocate.
 */
#ifndef MOE_CPU_BACKEND_CPU_H
#define MOE_CPU_BACKEND_CPU_H

#include "backend.h"
#include "kernels.h"
#include "threadpool.h"

#include <stdatomic.h>

/* A phase of a task: items [0, n) are claimed through `next`; `done`
 * counts finished ones. Zero-initialise before the task runs. */
typedef struct cpu_phase {
    atomic_long next, done;
} cpu_phase;

/* Claims the next item; false when none are left. */
static inline bool cpu_phase_claim(cpu_phase *ph, int64_t n, int64_t *item)
{
    *item = atomic_fetch_add_explicit(&ph->next, 1, memory_order_relaxed);
    return *item < n;
}

static inline void cpu_phase_done(cpu_phase *ph)
{
    atomic_fetch_add_explicit(&ph->done, 1, memory_order_release);
}

/* Waits until all n items of the phase are done (by whichever threads). */
void cpu_phase_wait(cpu_phase *ph, int64_t n);

/* One matrix product job: y (+ y2) = rows of w (and w2) times columns of
 * x, with the layout of moe_mm_fn, plus bias[row] when bias is set.
 * Several jobs (one per expert) can run in one parallel phase. */
typedef struct cpu_mm_job {
    moe_mm_fn      mm;
    int64_t        n;        /* row length in elements           */
    const uint8_t *w, *w2;   /* w2 optional, same shape and type */
    size_t         ws;
    int64_t        nr;
    const uint8_t *x;
    size_t         xs;
    int64_t        nc;
    float         *y, *y2;
    size_t         ys;
    const float   *bias;     /* optional, [nr]                  */
    /* set by cpu_mm_plan: */
    int64_t        rows_per_item, cols_per_item, n_items, first_item;
} cpu_mm_job;

typedef struct cpu_backend {
    moe_threadpool        *pool;
    int                    n_threads;
    const moe_cpu_kernels *k;
    moe_backend_limits     lim;
    bool                   reserved;

    /* products: activations in the weight type's format, [n_batch] rows */
    uint8_t *xq;
    size_t   xq_row_cap;  /* bytes reserved per row */

    /* dense FFN (shared expert): [n_batch][n_ff] each */
    float   *ffn_gate, *ffn_up;
    uint8_t *ffn_hq;

    /* routed experts; "pairs" are (token, slot) in expert-grouped order */
    float   *router;     /* [n_batch][n_expert]                */
    int32_t *sel;        /* [n_batch][n_expert_used] expert    */
    float   *sel_w;      /* [n_batch][n_expert_used] weight    */
    int32_t *exp_off;    /* [n_expert + 1] pair offsets        */
    int32_t *exp_cur;    /* [n_expert] fill cursors            */
    int32_t *pair_tok;   /* [n_pairs] token of each pair       */
    int32_t *pair_of;    /* [n_batch][n_expert_used] its pair  */
    uint8_t *moe_xq;     /* [n_pairs] quantised (or float)
                            inputs, moe_xq_stride bytes each   */
    size_t   moe_xq_stride;
    float   *moe_gate;   /* [n_pairs][n_ff_exp]                */
    float   *moe_up;     /* [n_pairs][n_ff_exp]                */
    uint8_t *moe_hq;     /* [n_pairs] quantised hidden         */
    float   *moe_out;    /* [n_pairs][n_embd]                  */
    cpu_mm_job *jobs;    /* [2 * n_expert]                     */

    /* attention, per thread: visible cells, their scores, q as Q8_0 */
    int32_t *att_cells;  /* [n_threads][n_ctx]              */
    float   *att_scores; /* [n_threads] x att_scores_stride  */
    size_t   att_scores_stride; /* n_ctx x group heads       */
    uint8_t *att_q8;     /* [n_threads] x att_q8_stride     */
    size_t   att_q8_stride;
} cpu_backend;

/* Fills rows_per_item etc. of each job and returns the total item count. */
int64_t cpu_mm_plan(cpu_mm_job *jobs, int n_jobs, int nth);
/* Runs the phase's items (claimed from ph) until none are left, then waits
 * for the phase to finish. */
void    cpu_mm_phase(const cpu_mm_job *jobs, int n_jobs, int64_t n_items, cpu_phase *ph);

/* Quantises rows [0, n) of x (row_len floats, stride x_stride floats) into
 * dst (dst_stride bytes) for weights of type t, as a phase over rows. */
void cpu_quantize_phase(cpu_backend *cb, moe_type t, const float *x, int64_t x_stride,
                        int64_t row_len, int64_t n, uint8_t *dst, size_t dst_stride,
                        cpu_phase *ph);

/* Operations implemented in their own files: matmul.c, attention.c,
 * moe-ffn.c. */
void cpu_mul_mat(void *ctx, const moe_tensor *w, const moe_tensor *bias, const float *x,
                 int64_t n_tok, float *out);
void cpu_ffn(void *ctx, const moe_tensor *gate, const moe_tensor *up, const moe_tensor *down,
             const float *x, int64_t n_tok, float *out);
void cpu_attention(void *ctx, const moe_attn_args *a, const float *q, const float *k,
                   const float *v, float *out);
void cpu_moe_ffn(void *ctx, const moe_moe_args *a, const float *x, int64_t n_tok,
                 float *out);

/* silu(g) * u, in place on g. */
void cpu_swiglu(float *g, const float *u, int64_t n);

#endif /* MOE_CPU_BACKEND_CPU_H */

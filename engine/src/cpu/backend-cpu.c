/*
 * backend-cpu.c — the CPU backend: fills the moe_backend table (see
 * backend.h) with operations that run on the persistent thread pool using
 * the kernel table cpuid picked. This file holds the table, buffers,
 * scratch reservation, the element-wise operations and the matrix
 * products; attention.c and moe-ffn.c hold the two big operations.
 *
 * Products quantise the activations once per call into the weight type's
 * activation format (Q8_0 for Q8_0/Q4_0, Q8_K for K-quants, none for
 * float weights), then split the output into items of rows x columns that
 * threads claim one at a time.
 */
#include "backend-cpu.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <malloc.h>
#include <windows.h>
#else
#include <unistd.h>
#endif

/* ---- buffers ------------------------------------------------------------ */

static void *cpu_aligned_alloc(size_t size)
{
    if (size == 0)
        size = 64;
    size = (size + 63) & ~(size_t)63;
#ifdef _WIN32
    void *p = _aligned_malloc(size, 64);
#else
    void *p = NULL;
    if (posix_memalign(&p, 64, size) != 0)
        p = NULL;
#endif
    if (p)
        memset(p, 0, size);
    return p;
}

static void cpu_aligned_free(void *p)
{
#ifdef _WIN32
    _aligned_free(p);
#else
    free(p);
#endif
}

static void *cpu_buf_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return cpu_aligned_alloc(size);
}

static void cpu_buf_free(void *ctx, void *buf)
{
    (void)ctx;
    cpu_aligned_free(buf);
}

static void *cpu_buf_host(void *ctx, void *buf)
{
    (void)ctx;
    return buf;
}

static void cpu_buf_download(void *ctx, void *dst, const void *src, size_t size)
{
    (void)ctx;
    if (dst != src)
        memcpy(dst, src, size);
}

/* ---- table basics ------------------------------------------------------- */

static const char *cpu_get_name(void *ctx)
{
    (void)ctx;
    return "CPU";
}

static bool cpu_supports_op(void *ctx, moe_op op, moe_type type)
{
    (void)ctx;
    if (op >= MOE_OP_COUNT)
        return false;
    switch (type) {
    case MOE_TYPE_F32:
        return true;
    case MOE_TYPE_F16:
    case MOE_TYPE_BF16:
    case MOE_TYPE_Q8_0:
    case MOE_TYPE_Q4_0:
    case MOE_TYPE_Q4_K:
    case MOE_TYPE_Q6_K:
        return op == MOE_OP_GET_ROWS || op == MOE_OP_MUL_MAT || op == MOE_OP_FFN ||
               op == MOE_OP_MOE_FFN || op == MOE_OP_ATTENTION;
    default:
        return false;
    }
}

static void cpu_get_memory(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes)
{
    (void)ctx;
#ifdef _WIN32
    MEMORYSTATUSEX ms;
    ms.dwLength = sizeof ms;
    if (GlobalMemoryStatusEx(&ms)) {
        *free_bytes = ms.ullAvailPhys;
        *total_bytes = ms.ullTotalPhys;
        return;
    }
    *free_bytes = *total_bytes = 0;
#else
    long page = sysconf(_SC_PAGESIZE);
    long total = sysconf(_SC_PHYS_PAGES);
#ifdef _SC_AVPHYS_PAGES
    long avail = sysconf(_SC_AVPHYS_PAGES);
#else
    long avail = total;
#endif
    *total_bytes = page > 0 && total > 0 ? (uint64_t)page * (uint64_t)total : 0;
    *free_bytes = page > 0 && avail > 0 ? (uint64_t)page * (uint64_t)avail : 0;
#endif
}

static moe_status cpu_synchronize(void *ctx, moe_err *err)
{
    (void)ctx;
    (void)err;
    return MOE_OK;
}

/* ---- scratch ------------------------------------------------------------ */

static void cpu_release_scratch(cpu_backend *cb)
{
    void *bufs[] = {cb->xq, cb->ffn_gate, cb->ffn_up, cb->ffn_hq, cb->router, cb->sel,
                    cb->sel_w, cb->exp_off, cb->exp_cur, cb->pair_tok, cb->pair_of, cb->moe_xq,
                    cb->moe_gate, cb->moe_up, cb->moe_hq, cb->moe_out, cb->jobs,
                    cb->att_cells, cb->att_scores, cb->att_q8};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        cpu_aligned_free(bufs[i]);
    cb->xq = NULL;
    cb->ffn_hq = NULL;
    cb->ffn_gate = cb->ffn_up = cb->router = cb->sel_w = NULL;
    cb->moe_gate = cb->moe_up = cb->moe_out = cb->att_scores = NULL;
    cb->sel = cb->exp_off = cb->exp_cur = cb->pair_tok = cb->pair_of = cb->att_cells = NULL;
    cb->moe_xq = cb->moe_hq = cb->att_q8 = NULL;
    cb->jobs = NULL;
    cb->reserved = false;
}

/* Bytes of one activation row of n elements in the largest quantised
 * activation format (Q8_0 or Q8_K), rounded up. */
static size_t cpu_q_row_cap(int64_t n)
{
    size_t a = (size_t)((n + MOE_QK8_0 - 1) / MOE_QK8_0) * sizeof(moe_block_q8_0);
    size_t b = (size_t)((n + MOE_QK_K - 1) / MOE_QK_K) * sizeof(moe_block_q8_k);
    return a > b ? a : b;
}

static moe_status cpu_reserve(void *ctx, const moe_backend_limits *lim, moe_err *err)
{
    cpu_backend *cb = ctx;
    cpu_release_scratch(cb);
    cb->lim = *lim;
    const uint64_t nb = (uint64_t)lim->n_batch, nth = (uint64_t)cb->n_threads;
    const uint64_t npairs = nb * (uint64_t)(lim->n_expert_used > 0 ? lim->n_expert_used : 1);
    const uint64_t nexp = (uint64_t)(lim->n_expert > 0 ? lim->n_expert : 1);
    const uint64_t ff = (uint64_t)(lim->n_ff > 0 ? lim->n_ff : 1);
    const uint64_t ffe = (uint64_t)(lim->n_ff_exp > 0 ? lim->n_ff_exp : 1);

    cb->xq_row_cap = cpu_q_row_cap(lim->max_row);
    cb->att_q8_stride = cpu_q_row_cap(lim->head_dim);
    {
        int64_t group = lim->n_head_kv > 0 ? lim->n_head / lim->n_head_kv : 1;
        group = group < 1 ? 1 : group > MOE_ATTN_MAX_GROUP ? MOE_ATTN_MAX_GROUP : group;
        cb->att_scores_stride = (size_t)(lim->n_ctx * group);
    }
    /* float experts take their inputs unquantised */
    cb->moe_xq_stride = cpu_q_row_cap(lim->n_embd);
    if (cb->moe_xq_stride < (size_t)lim->n_embd * sizeof(float))
        cb->moe_xq_stride = (size_t)lim->n_embd * sizeof(float);
    struct {
        void   **p;
        uint64_t n, size;
    } plan[] = {
        {(void **)&cb->xq, nb, cb->xq_row_cap},
        {(void **)&cb->ffn_gate, nb * ff, sizeof(float)},
        {(void **)&cb->ffn_up, nb * ff, sizeof(float)},
        {(void **)&cb->ffn_hq, nb, cpu_q_row_cap((int64_t)ff)},
        {(void **)&cb->router, nb * nexp, sizeof(float)},
        {(void **)&cb->sel, npairs, sizeof(int32_t)},
        {(void **)&cb->sel_w, npairs, sizeof(float)},
        {(void **)&cb->exp_off, nexp + 1, sizeof(int32_t)},
        {(void **)&cb->exp_cur, nexp, sizeof(int32_t)},
        {(void **)&cb->pair_tok, npairs, sizeof(int32_t)},
        {(void **)&cb->pair_of, npairs, sizeof(int32_t)},
        {(void **)&cb->moe_xq, npairs, cb->moe_xq_stride},
        {(void **)&cb->moe_gate, npairs * ffe, sizeof(float)},
        {(void **)&cb->moe_up, npairs * ffe, sizeof(float)},
        {(void **)&cb->moe_hq, npairs, cpu_q_row_cap((int64_t)ffe)},
        {(void **)&cb->moe_out, npairs * (uint64_t)lim->n_embd, sizeof(float)},
        {(void **)&cb->jobs, 2 * nexp, sizeof(cpu_mm_job)},
        {(void **)&cb->att_cells, nth * (uint64_t)lim->n_ctx, sizeof(int32_t)},
        {(void **)&cb->att_scores, nth * (uint64_t)cb->att_scores_stride, sizeof(float)},
        {(void **)&cb->att_q8, nth, cb->att_q8_stride},
    };
    for (size_t i = 0; i < sizeof plan / sizeof plan[0]; i++) {
        uint64_t bytes;
        if (!moe_mul_u64(plan[i].n, plan[i].size, &bytes) || bytes > (uint64_t)SIZE_MAX / 2 ||
            !(*plan[i].p = cpu_aligned_alloc((size_t)bytes))) {
            cpu_release_scratch(cb);
            return moe_fail(err, MOE_ERR_NOMEM, "CPU backend: cannot allocate %llu bytes of scratch",
                            (unsigned long long)(plan[i].n * plan[i].size));
        }
    }
    cb->reserved = true;
    return MOE_OK;
}

/* ---- parallel helpers ------------------------------------------------- */

/* [*lo, *hi) = this thread's share of [0, n). */
static void cpu_split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi)
{
    int64_t per = (n + nth - 1) / nth;
    *lo = per * ith < n ? per * ith : n;
    *hi = *lo + per < n ? *lo + per : n;
}

int64_t cpu_mm_plan(cpu_mm_job *jobs, int n_jobs, int nth)
{
    int64_t total = 0;
    for (int j = 0; j < n_jobs; j++) {
        cpu_mm_job *jb = &jobs[j];
        /* Few columns (decode): the weights stream once, so cut rows
         * finely for balance. Many columns: blocks of 64 tokens keep the
         * activations in L2 while a chunk of rows meets them. */
        jb->cols_per_item = jb->nc <= 64 ? (jb->nc > 0 ? jb->nc : 1) : 64;
        int64_t rows = jb->nc < 8 ? 16 : 32;
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

void cpu_mm_work(const cpu_mm_job *jobs, int n_jobs, int64_t n_items, atomic_long *next)
{
    int j = 0;
    for (;;) {
        int64_t it = atomic_fetch_add_explicit(next, 1, memory_order_relaxed);
        if (it >= n_items)
            return;
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
        jb->mm(jb->n, jb->w + r0 * jb->ws, jb->ws, nr, jb->x + c0 * jb->xs, jb->xs, nc,
               jb->y + c0 * jb->ys + r0, jb->ys);
        if (jb->w2)
            jb->mm(jb->n, jb->w2 + r0 * jb->ws, jb->ws, nr, jb->x + c0 * jb->xs, jb->xs, nc,
                   jb->y2 + c0 * jb->ys + r0, jb->ys);
    }
}

void cpu_quantize_rows(cpu_backend *cb, moe_type t, const float *x, int64_t x_stride,
                       int64_t row_len, int64_t n, uint8_t *dst, size_t dst_stride,
                       int ith, int nth)
{
    for (int64_t i = ith; i < n; i += nth)
        moe_cpu_quantize_vec(cb->k, t, x + i * x_stride, dst + (size_t)i * dst_stride, row_len);
}

void cpu_swiglu(float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* ---- element-wise operations ---------------------------------------- */

typedef struct rows_task {
    cpu_backend      *cb;
    const moe_tensor *w;
    const int32_t    *ids;
    const float      *x;
    float            *y;
    const float      *g;
    int64_t           n, row_len;
    float             eps;
} rows_task;

static void get_rows_task(void *arg, int ith, int nth)
{
    rows_task *t = arg;
    const int64_t ne0 = t->w->ne[0];
    for (int64_t i = ith; i < t->n; i += nth)
        moe_dequantize_row(t->w->type, (const uint8_t *)t->w->data + (size_t)t->ids[i] * t->w->nb1,
                           t->y + i * ne0, ne0);
}

static void cpu_get_rows(void *ctx, const moe_tensor *w, const int32_t *ids, int32_t n, float *out)
{
    cpu_backend *cb = ctx;
    rows_task t = {.cb = cb, .w = w, .ids = ids, .y = out, .n = n};
    moe_threadpool_run(cb->pool, get_rows_task, &t);
}

static void cpu_gather(void *ctx, const float *x, int64_t row_len, const int32_t *rows,
                       int32_t n, float *out)
{
    (void)ctx;
    for (int32_t i = 0; i < n; i++)
        if (out + i * row_len != x + rows[i] * row_len)
            memmove(out + i * row_len, x + rows[i] * row_len, (size_t)row_len * sizeof(float));
}

static void rms_norm_task(void *arg, int ith, int nth)
{
    rows_task *t = arg;
    const float *w = t->w->data;
    int64_t lo, hi;
    cpu_split(t->n, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const float *x = t->x + r * t->row_len;
        float *y = t->y + r * t->row_len;
        double ss = 0.0;
        for (int64_t i = 0; i < t->row_len; i++)
            ss += (double)x[i] * x[i];
        float scale = 1.0f / sqrtf((float)(ss / (double)t->row_len) + t->eps);
        for (int64_t i = 0; i < t->row_len; i++)
            y[i] = x[i] * scale * w[i];
    }
}

static void cpu_rms_norm(void *ctx, const float *x, const moe_tensor *w, int64_t n_rows,
                         int64_t row_len, float eps, float *out)
{
    cpu_backend *cb = ctx;
    rows_task t = {.cb = cb, .w = w, .x = x, .y = out, .n = n_rows, .row_len = row_len, .eps = eps};
    moe_threadpool_run(cb->pool, rms_norm_task, &t);
}

typedef struct rope_task {
    float               *x;
    int64_t              n_tok;
    const moe_rope_args *a;
} rope_task;

static void rope_task_fn(void *arg, int ith, int nth)
{
    rope_task *t = arg;
    const moe_rope_args *a = t->a;
    const int64_t half = a->n_rot / 2;
    for (int64_t tok = ith; tok < t->n_tok; tok += nth) {
        const float *cs = a->cos_sin + tok * a->n_rot;
        for (int32_t h = 0; h < a->n_head; h++) {
            float *v = t->x + (tok * a->n_head + h) * a->head_dim;
            for (int64_t i = 0; i < half; i++) {
                const float c = cs[2 * i], s = cs[2 * i + 1];
                float *p0, *p1;
                if (a->mode == MOE_ROPE_NEOX) {
                    p0 = &v[i];
                    p1 = &v[i + half];
                } else {
                    p0 = &v[2 * i];
                    p1 = &v[2 * i + 1];
                }
                const float x0 = *p0, x1 = *p1;
                *p0 = x0 * c - x1 * s;
                *p1 = x0 * s + x1 * c;
            }
        }
    }
}

static void cpu_rope(void *ctx, float *x, int64_t n_tok, const moe_rope_args *a)
{
    cpu_backend *cb = ctx;
    rope_task t = {.x = x, .n_tok = n_tok, .a = a};
    moe_threadpool_run(cb->pool, rope_task_fn, &t);
}

static void add_task(void *arg, int ith, int nth)
{
    rows_task *t = arg;
    int64_t lo, hi;
    cpu_split(t->n, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++)
        t->y[i] += t->x[i];
}

static void cpu_add(void *ctx, float *y, const float *x, int64_t n)
{
    cpu_backend *cb = ctx;
    rows_task t = {.x = x, .y = y, .n = n};
    if (n < 4096) {
        add_task(&t, 0, 1);
        return;
    }
    moe_threadpool_run(cb->pool, add_task, &t);
}

static void cpu_add_gated(void *ctx, float *y, const float *x, const float *g, int64_t n_tok,
                          int64_t row_len)
{
    (void)ctx;
    for (int64_t t = 0; t < n_tok; t++) {
        const float s = 1.0f / (1.0f + expf(-g[t]));
        for (int64_t i = 0; i < row_len; i++)
            y[t * row_len + i] += s * x[t * row_len + i];
    }
}

/* ---- products ----------------------------------------------------------- */

typedef struct mm_task {
    cpu_backend      *cb;
    const moe_tensor *w, *w2, *w3, *bias;
    const float      *x;
    float            *y;
    int64_t           n_tok;
    cpu_mm_job        job;
    atomic_long       next[2];
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

static void mul_mat_task(void *arg, int ith, int nth)
{
    mm_task *t = arg;
    cpu_backend *cb = t->cb;
    const moe_tensor *w = t->w;
    if (moe_cpu_vec_type(w->type) != MOE_TYPE_F32) {
        cpu_quantize_rows(cb, w->type, t->x, w->ne[0], w->ne[0], t->n_tok, cb->xq, t->job.xs,
                          ith, nth);
        moe_threadpool_barrier(cb->pool);
    }
    cpu_mm_work(&t->job, 1, t->job.n_items, &t->next[0]);
    if (t->bias) {
        moe_threadpool_barrier(cb->pool);
        const float *b = t->bias->data;
        for (int64_t tok = ith; tok < t->n_tok; tok += nth)
            for (int64_t r = 0; r < w->ne[1]; r++)
                t->y[tok * w->ne[1] + r] += b[r];
    }
}

static void cpu_mul_mat(void *ctx, const moe_tensor *w, const moe_tensor *bias, const float *x,
                        int64_t n_tok, float *out)
{
    cpu_backend *cb = ctx;
    mm_task t = {.cb = cb, .w = w, .bias = bias, .x = x, .y = out, .n_tok = n_tok};
    atomic_init(&t.next[0], 0);
    atomic_init(&t.next[1], 0);
    mm_job_init(&t.job, cb, w, NULL, x, cb->xq, n_tok, out, NULL);
    cpu_mm_plan(&t.job, 1, cb->n_threads);
    moe_threadpool_run(cb->pool, mul_mat_task, &t);
}

/* Dense SwiGLU: gate and up share one pass over the quantised input, the
 * hidden activations are quantised per token, then down. */
static void ffn_task(void *arg, int ith, int nth)
{
    mm_task *t = arg;
    cpu_backend *cb = t->cb;
    const moe_tensor *gate = t->w, *down = t->w3;
    const int64_t n_ff = gate->ne[1];
    if (moe_cpu_vec_type(gate->type) != MOE_TYPE_F32) {
        cpu_quantize_rows(cb, gate->type, t->x, gate->ne[0], gate->ne[0], t->n_tok, cb->xq,
                          t->job.xs, ith, nth);
        moe_threadpool_barrier(cb->pool);
    }
    cpu_mm_work(&t->job, 1, t->job.n_items, &t->next[0]);
    moe_threadpool_barrier(cb->pool);

    const bool quant = moe_cpu_vec_type(down->type) != MOE_TYPE_F32;
    const size_t hs = quant ? moe_cpu_vec_row_bytes(down->type, n_ff) : (size_t)n_ff * sizeof(float);
    for (int64_t tok = ith; tok < t->n_tok; tok += nth) {
        cpu_swiglu(cb->ffn_gate + tok * n_ff, cb->ffn_up + tok * n_ff, n_ff);
        if (quant)
            moe_cpu_quantize_vec(cb->k, down->type, cb->ffn_gate + tok * n_ff,
                                 cb->ffn_hq + (size_t)tok * hs, n_ff);
    }
    moe_threadpool_barrier(cb->pool);
    /* The down job is planned identically on every thread (same inputs). */
    cpu_mm_job dj;
    mm_job_init(&dj, cb, down, NULL, cb->ffn_gate, cb->ffn_hq, t->n_tok, t->y, NULL);
    cpu_mm_plan(&dj, 1, nth);
    cpu_mm_work(&dj, 1, dj.n_items, &t->next[1]);
}

static void cpu_ffn(void *ctx, const moe_tensor *gate, const moe_tensor *up,
                    const moe_tensor *down, const float *x, int64_t n_tok, float *out)
{
    cpu_backend *cb = ctx;
    mm_task t = {.cb = cb, .w = gate, .w2 = up, .w3 = down, .x = x, .y = out, .n_tok = n_tok};
    atomic_init(&t.next[0], 0);
    atomic_init(&t.next[1], 0);
    mm_job_init(&t.job, cb, gate, up, x, cb->xq, n_tok, cb->ffn_gate, cb->ffn_up);
    cpu_mm_plan(&t.job, 1, cb->n_threads);
    moe_threadpool_run(cb->pool, ffn_task, &t);
}

/* ---- construction ------------------------------------------------------- */

static void cpu_free(void *ctx)
{
    cpu_backend *cb = ctx;
    if (!cb)
        return;
    cpu_release_scratch(cb);
    moe_threadpool_free(cb->pool);
    free(cb);
}

static const moe_backend_iface cpu_iface = {
    .api_version = MOE_BACKEND_API_VERSION,
    .get_name = cpu_get_name,
    .free = cpu_free,
    .supports_op = cpu_supports_op,
    .get_memory = cpu_get_memory,
    .reserve = cpu_reserve,
    .buf_alloc = cpu_buf_alloc,
    .buf_free = cpu_buf_free,
    .buf_host = cpu_buf_host,
    .buf_download = cpu_buf_download,
    .get_rows = cpu_get_rows,
    .gather = cpu_gather,
    .rms_norm = cpu_rms_norm,
    .mul_mat = cpu_mul_mat,
    .rope = cpu_rope,
    .attention = cpu_attention,
    .add = cpu_add,
    .ffn = cpu_ffn,
    .moe_ffn = cpu_moe_ffn,
    .add_gated = cpu_add_gated,
    .synchronize = cpu_synchronize,
};

moe_status moe_backend_cpu_new(int n_threads, const char *isa, moe_backend **out, moe_err *err)
{
    *out = NULL;
    const moe_cpu_kernels *k = moe_cpu_kernels_select(isa);
    if (!k)
        return moe_fail(err, MOE_ERR_UNSUPPORTED, "CPU kernels '%s' are not available on this machine",
                        isa ? isa : getenv("MOE_CPU_ISA") ? getenv("MOE_CPU_ISA") : "?");
    moe_backend *be = calloc(1, sizeof *be);
    cpu_backend *cb = calloc(1, sizeof *cb);
    if (!be || !cb) {
        free(be);
        free(cb);
        return moe_fail(err, MOE_ERR_NOMEM, "CPU backend: out of memory");
    }
    moe_status st = moe_threadpool_new(n_threads, &cb->pool, err);
    if (st != MOE_OK) {
        free(be);
        free(cb);
        return st;
    }
    cb->n_threads = n_threads;
    cb->k = k;
    be->iface = cpu_iface;
    be->context = cb;
    *out = be;
    return MOE_OK;
}

const char *moe_backend_cpu_isa(const moe_backend *be)
{
    const cpu_backend *cb = be->context;
    return cb->k->name;
}

void moe_backend_free(moe_backend *be)
{
    if (!be)
        return;
    if (be->iface.free)
        be->iface.free(be->context);
    free(be);
}

/*
 * backend-cpu.c — the CPU backend: fills the moe_backend table (see
 * backend.h) with operations that run on the persistent thread pool using
 * the kernel table cpuid picked. This file holds the table, buffers,
 * scratch reservation and the element-wise operations; matmul.c holds the
 * matrix products, attention.c and moe-ffn.c the two big operations.
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

/* ---- element-wise helpers ----------------------------------------------- */

/* Below this many floats of work an element-wise operation runs on the
 * caller: waking the workers would cost more than the work (decode). */
#define CPU_INLINE_FLOATS 16384

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
    int64_t           n, row_len, rows_per_item;
    float             eps;
    cpu_phase         ph;
} rows_task;

static void get_rows_task(void *arg, int ith, int nth)
{
    (void)ith;
    (void)nth;
    rows_task *t = arg;
    const int64_t ne0 = t->w->ne[0];
    int64_t i;
    while (cpu_phase_claim(&t->ph, t->n, &i)) {
        moe_dequantize_row(t->w->type, (const uint8_t *)t->w->data + (size_t)t->ids[i] * t->w->nb1,
                           t->y + i * ne0, ne0);
        cpu_phase_done(&t->ph);
    }
    cpu_phase_wait(&t->ph, t->n);
}

static void cpu_get_rows(void *ctx, const moe_tensor *w, const int32_t *ids, int32_t n, float *out)
{
    cpu_backend *cb = ctx;
    rows_task t = {.cb = cb, .w = w, .ids = ids, .y = out, .n = n};
    if ((int64_t)n * w->ne[0] < CPU_INLINE_FLOATS)
        get_rows_task(&t, 0, 1);
    else
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

static void rms_norm_rows(const rows_task *t, int64_t r0, int64_t r1)
{
    const float *w = t->w->data;
    for (int64_t r = r0; r < r1; r++) {
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

static void rms_norm_task(void *arg, int ith, int nth)
{
    (void)ith;
    (void)nth;
    rows_task *t = arg;
    const int64_t n_items = (t->n + t->rows_per_item - 1) / t->rows_per_item;
    int64_t i;
    while (cpu_phase_claim(&t->ph, n_items, &i)) {
        const int64_t r0 = i * t->rows_per_item;
        rms_norm_rows(t, r0, r0 + t->rows_per_item < t->n ? r0 + t->rows_per_item : t->n);
        cpu_phase_done(&t->ph);
    }
    cpu_phase_wait(&t->ph, n_items);
}

static void cpu_rms_norm(void *ctx, const float *x, const moe_tensor *w, int64_t n_rows,
                         int64_t row_len, float eps, float *out)
{
    cpu_backend *cb = ctx;
    rows_task t = {.cb = cb, .w = w, .x = x, .y = out, .n = n_rows, .row_len = row_len, .eps = eps};
    if (n_rows * row_len < CPU_INLINE_FLOATS) {
        rms_norm_rows(&t, 0, n_rows);
        return;
    }
    t.rows_per_item = 4096 / row_len > 1 ? 4096 / row_len : 1;
    moe_threadpool_run(cb->pool, rms_norm_task, &t);
}

typedef struct rope_task {
    float               *x;
    int64_t              n_tok;
    const moe_rope_args *a;
    cpu_phase            ph;
} rope_task;

static void rope_token(const rope_task *t, int64_t tok)
{
    const moe_rope_args *a = t->a;
    const int64_t half = a->n_rot / 2;
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

static void rope_task_fn(void *arg, int ith, int nth)
{
    (void)ith;
    (void)nth;
    rope_task *t = arg;
    int64_t tok;
    while (cpu_phase_claim(&t->ph, t->n_tok, &tok)) {
        rope_token(t, tok);
        cpu_phase_done(&t->ph);
    }
    cpu_phase_wait(&t->ph, t->n_tok);
}

static void cpu_rope(void *ctx, float *x, int64_t n_tok, const moe_rope_args *a)
{
    cpu_backend *cb = ctx;
    rope_task t = {.x = x, .n_tok = n_tok, .a = a};
    if (n_tok * a->n_head * a->head_dim < CPU_INLINE_FLOATS) {
        for (int64_t tok = 0; tok < n_tok; tok++)
            rope_token(&t, tok);
        return;
    }
    moe_threadpool_run(cb->pool, rope_task_fn, &t);
}

#define ADD_CHUNK 8192

static void add_task(void *arg, int ith, int nth)
{
    (void)ith;
    (void)nth;
    rows_task *t = arg;
    const int64_t n_items = (t->n + ADD_CHUNK - 1) / ADD_CHUNK;
    int64_t c;
    while (cpu_phase_claim(&t->ph, n_items, &c)) {
        const int64_t hi = (c + 1) * ADD_CHUNK < t->n ? (c + 1) * ADD_CHUNK : t->n;
        for (int64_t i = c * ADD_CHUNK; i < hi; i++)
            t->y[i] += t->x[i];
        cpu_phase_done(&t->ph);
    }
    cpu_phase_wait(&t->ph, n_items);
}

static void cpu_add(void *ctx, float *y, const float *x, int64_t n)
{
    cpu_backend *cb = ctx;
    if (n < 4 * CPU_INLINE_FLOATS) {
        for (int64_t i = 0; i < n; i++)
            y[i] += x[i];
        return;
    }
    rows_task t = {.x = x, .y = y, .n = n};
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

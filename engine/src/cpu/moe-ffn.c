/*
 * moe-ffn.c — the CPU backend's routed-experts operation, the heart of a
 * Mixture-of-Experts layer:
 *
 *   router logits = gate_inp x          [n_tok][n_expert]
 *   p = softmax(logits); pick the top n_expert_used of p per token;
 *   weights = the picked p (divided by their sum when norm_weights),
 *             times weights_scale
 *   out[t] = sum over picked e of weight * down_e(silu(gate_e x) * up_e x)
 *
 * The order softmax -> top-k -> renormalise is the one Qwen3-MoE, Mixtral
 * and (without renormalising) Qwen2-MoE and OLMoE use.
 *
 * The batch's (token, slot) pairs are grouped by expert (a counting sort),
 * so each expert's weights stream through the cache once per step, meeting
 * all the tokens that chose it as the columns of one matrix product. One
 * task on the thread pool, phases separated by barriers:
 *   0 router product          3 gate and up products (both per item)
 *   1 routing + grouping      4 SwiGLU and quantise the hidden rows
 *     (thread 0, cheap)       5 down products
 *   2 quantise grouped inputs 6 weighted sum per token
 */
#include "backend-cpu.h"

#include <math.h>
#include <string.h>

typedef struct moe_task {
    cpu_backend        *cb;
    const moe_moe_args *a;
    const float        *x;
    int64_t             n_tok;
    float              *out;

    int64_t     n_embd, n_ff, n_expert, n_used;
    size_t      xs, hs; /* grouped input / hidden row bytes */
    bool        x_quant, h_quant;
    cpu_mm_job  router;
    int         n_jobs;  /* active experts */
    int64_t     items_gu, items_down;
    atomic_long next[3];
} moe_task;

/* Softmax over the experts, top-k (ties to the lower index), weights. */
static void moe_route_token(const moe_task *t, int64_t tok)
{
    cpu_backend *cb = t->cb;
    const int64_t ne = t->n_expert, k = t->n_used;
    float *p = cb->router + tok * ne;
    float mx = -INFINITY;
    for (int64_t e = 0; e < ne; e++)
        mx = p[e] > mx ? p[e] : mx;
    double sum = 0.0;
    for (int64_t e = 0; e < ne; e++) {
        p[e] = expf(p[e] - mx);
        sum += p[e];
    }
    for (int64_t e = 0; e < ne; e++)
        p[e] = (float)(p[e] / sum);

    int32_t *sel = cb->sel + tok * k;
    float *w = cb->sel_w + tok * k;
    float wsum = 0.0f;
    for (int64_t s = 0; s < k; s++) {
        int64_t best = -1;
        for (int64_t e = 0; e < ne; e++) {
            bool taken = false;
            for (int64_t j = 0; j < s; j++)
                taken |= sel[j] == e;
            if (!taken && (best < 0 || p[e] > p[best]))
                best = e;
        }
        sel[s] = (int32_t)best;
        w[s] = p[best];
        wsum += w[s];
    }
    if (t->a->norm_weights) {
        /* as llama.cpp: never divide by less than the smallest normal half */
        wsum = wsum < 6.103515625e-5f ? 6.103515625e-5f : wsum;
        for (int64_t s = 0; s < k; s++)
            w[s] /= wsum;
    }
    for (int64_t s = 0; s < k; s++)
        w[s] *= t->a->weights_scale;
}

/* Routes every token, groups the pairs by expert, plans the products. */
static void moe_route_and_plan(moe_task *t, int nth)
{
    cpu_backend *cb = t->cb;
    const moe_moe_args *a = t->a;
    const int64_t ne = t->n_expert, k = t->n_used;
    for (int64_t tok = 0; tok < t->n_tok; tok++)
        moe_route_token(t, tok);

    memset(cb->exp_cur, 0, (size_t)ne * sizeof(int32_t));
    for (int64_t i = 0; i < t->n_tok * k; i++)
        cb->exp_cur[cb->sel[i]]++;
    cb->exp_off[0] = 0;
    for (int64_t e = 0; e < ne; e++) {
        cb->exp_off[e + 1] = cb->exp_off[e] + cb->exp_cur[e];
        cb->exp_cur[e] = cb->exp_off[e];
    }
    for (int64_t tok = 0; tok < t->n_tok; tok++)
        for (int64_t s = 0; s < k; s++) {
            int32_t p = cb->exp_cur[cb->sel[tok * k + s]]++;
            cb->pair_tok[p] = (int32_t)tok;
            cb->pair_of[tok * k + s] = p;
        }

    const moe_mm_fn mm_gu = moe_cpu_mm_for(cb->k, a->gate_exps->type);
    const moe_mm_fn mm_dn = moe_cpu_mm_for(cb->k, a->down_exps->type);
    cpu_mm_job *gu = cb->jobs, *dn = cb->jobs + ne;
    int n = 0;
    for (int64_t e = 0; e < ne; e++) {
        const int64_t off = cb->exp_off[e], cnt = cb->exp_off[e + 1] - off;
        if (cnt == 0)
            continue;
        gu[n] = (cpu_mm_job){
            .mm = mm_gu, .n = t->n_embd,
            .w = (const uint8_t *)a->gate_exps->data + (size_t)e * a->gate_exps->nb2,
            .w2 = (const uint8_t *)a->up_exps->data + (size_t)e * a->up_exps->nb2,
            .ws = a->gate_exps->nb1, .nr = t->n_ff,
            .x = cb->moe_xq + (size_t)off * t->xs, .xs = t->xs, .nc = cnt,
            .y = cb->moe_gate + off * t->n_ff, .y2 = cb->moe_up + off * t->n_ff,
            .ys = (size_t)t->n_ff,
        };
        dn[n] = (cpu_mm_job){
            .mm = mm_dn, .n = t->n_ff,
            .w = (const uint8_t *)a->down_exps->data + (size_t)e * a->down_exps->nb2,
            .ws = a->down_exps->nb1, .nr = t->n_embd,
            .x = t->h_quant ? cb->moe_hq + (size_t)off * t->hs
                            : (const uint8_t *)(cb->moe_gate + off * t->n_ff),
            .xs = t->hs, .nc = cnt,
            .y = cb->moe_out + off * t->n_embd, .ys = (size_t)t->n_embd,
        };
        n++;
    }
    t->n_jobs = n;
    t->items_gu = cpu_mm_plan(gu, n, nth);
    t->items_down = cpu_mm_plan(dn, n, nth);
}

static void moe_ffn_task(void *arg, int ith, int nth)
{
    moe_task *t = arg;
    cpu_backend *cb = t->cb;
    const moe_moe_args *a = t->a;
    const int64_t k = t->n_used, n_pairs = t->n_tok * t->n_used;

    /* 0: router logits */
    if (moe_cpu_vec_type(a->gate_inp->type) != MOE_TYPE_F32) {
        cpu_quantize_rows(cb, a->gate_inp->type, t->x, t->n_embd, t->n_embd, t->n_tok, cb->xq,
                          t->router.xs, ith, nth);
        moe_threadpool_barrier(cb->pool);
    }
    cpu_mm_work(&t->router, 1, t->router.n_items, &t->next[0]);
    moe_threadpool_barrier(cb->pool);

    /* 1: routing and grouping */
    if (ith == 0)
        moe_route_and_plan(t, nth);
    moe_threadpool_barrier(cb->pool);

    /* 2: grouped inputs */
    for (int64_t p = ith; p < n_pairs; p += nth) {
        const float *src = t->x + cb->pair_tok[p] * t->n_embd;
        uint8_t *dst = cb->moe_xq + (size_t)p * t->xs;
        if (t->x_quant)
            moe_cpu_quantize_vec(cb->k, a->gate_exps->type, src, dst, t->n_embd);
        else
            memcpy(dst, src, (size_t)t->n_embd * sizeof(float));
    }
    moe_threadpool_barrier(cb->pool);

    /* 3: gate and up */
    cpu_mm_work(cb->jobs, t->n_jobs, t->items_gu, &t->next[1]);
    moe_threadpool_barrier(cb->pool);

    /* 4: SwiGLU, hidden rows quantised for down */
    for (int64_t p = ith; p < n_pairs; p += nth) {
        float *g = cb->moe_gate + p * t->n_ff;
        cpu_swiglu(g, cb->moe_up + p * t->n_ff, t->n_ff);
        if (t->h_quant)
            moe_cpu_quantize_vec(cb->k, a->down_exps->type, g, cb->moe_hq + (size_t)p * t->hs,
                                 t->n_ff);
    }
    moe_threadpool_barrier(cb->pool);

    /* 5: down */
    cpu_mm_work(cb->jobs + t->n_expert, t->n_jobs, t->items_down, &t->next[2]);
    moe_threadpool_barrier(cb->pool);

    /* 6: weighted sum, slots in routing order */
    for (int64_t tok = ith; tok < t->n_tok; tok += nth) {
        float *o = t->out + tok * t->n_embd;
        memset(o, 0, (size_t)t->n_embd * sizeof(float));
        for (int64_t s = 0; s < k; s++) {
            const float w = cb->sel_w[tok * k + s];
            const float *src = cb->moe_out + (int64_t)cb->pair_of[tok * k + s] * t->n_embd;
            for (int64_t i = 0; i < t->n_embd; i++)
                o[i] += w * src[i];
        }
    }
}

void cpu_moe_ffn(void *ctx, const moe_moe_args *a, const float *x, int64_t n_tok, float *out)
{
    cpu_backend *cb = ctx;
    moe_task t = {
        .cb = cb, .a = a, .x = x, .n_tok = n_tok, .out = out,
        .n_embd = a->gate_exps->ne[0],
        .n_ff = a->gate_exps->ne[1],
        .n_expert = a->gate_exps->ne[2],
        .n_used = a->n_expert_used,
    };
    for (int i = 0; i < 3; i++)
        atomic_init(&t.next[i], 0);
    t.x_quant = moe_cpu_vec_type(a->gate_exps->type) != MOE_TYPE_F32;
    t.h_quant = moe_cpu_vec_type(a->down_exps->type) != MOE_TYPE_F32;
    t.xs = t.x_quant ? moe_cpu_vec_row_bytes(a->gate_exps->type, t.n_embd)
                     : (size_t)t.n_embd * sizeof(float);
    t.hs = t.h_quant ? moe_cpu_vec_row_bytes(a->down_exps->type, t.n_ff)
                     : (size_t)t.n_ff * sizeof(float);

    const moe_tensor *gi = a->gate_inp;
    const bool gq = moe_cpu_vec_type(gi->type) != MOE_TYPE_F32;
    t.router = (cpu_mm_job){
        .mm = moe_cpu_mm_for(cb->k, gi->type), .n = gi->ne[0],
        .w = gi->data, .ws = gi->nb1, .nr = gi->ne[1],
        .x = gq ? cb->xq : (const uint8_t *)x,
        .xs = gq ? moe_cpu_vec_row_bytes(gi->type, gi->ne[0]) : (size_t)gi->ne[0] * sizeof(float),
        .nc = n_tok, .y = cb->router, .ys = (size_t)gi->ne[1],
    };
    cpu_mm_plan(&t.router, 1, cb->n_threads);
    moe_threadpool_run(cb->pool, moe_ffn_task, &t);
}

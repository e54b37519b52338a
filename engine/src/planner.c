/*
 * planner.c — the memory planner: for a model (planner-model.c) and a
 * machine (hwprobe*.c) it estimates, for every quantisation variant,
 * placement and context, the GPU and host bytes needed, and chooses the
 * best quality that fits under the utilisation ceiling. The formulas and
 * the choice rule are documented once, above the Memory planner section of
 * moe.h; this file implements exactly that text.
 *
 * Arithmetic saturates at UINT64_MAX instead of wrapping, so an absurd
 * model (or context) simply does not fit; the inputs were bounded by
 * moe_plan_model_check, so ordinary models never come near the limit.
 */
#include "moe.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct moe_plan {
    size_t           n_options;
    moe_plan_option *options;      /* owned                               */
    int64_t          chosen;       /* index into options, or -1           */
    size_t           n_variants;
    int64_t          n_ctx[MOE_PLAN_MAX_CTX];
    size_t           n_n_ctx;
    char             reason[640];
};

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    uint64_t r;
    return moe_add_u64(a, b, &r) ? r : UINT64_MAX;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    uint64_t r;
    return moe_mul_u64(a, b, &r) ? r : UINT64_MAX;
}

static uint64_t sat_sub(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

static double gib(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0 * 1024.0);
}

/* ---- The estimate's parts --------------------------------------------- */

/* Bytes of `elems` cache elements of one row in kv_type: f16 2 bytes,
 * q8_0 34 per 32 (rows not a multiple of 32 stay f16, as the engine does). */
static uint64_t kv_row_bytes(int64_t elems, moe_type kv_type)
{
    if (kv_type == MOE_TYPE_Q8_0 && elems % 32 == 0)
        return (uint64_t)(elems / 32) * 34;
    return (uint64_t)elems * 2;
}

static uint64_t kv_bytes(const moe_plan_model *m, int64_t n_ctx, int32_t n_batch, moe_type kv_type)
{
    const int64_t n_kv = m->n_layer_kv > 0 ? m->n_layer_kv : m->n_layer - m->n_layer_linear;
    uint64_t per_cell; /* one token in one layer */
    if (m->kv_lora_rank > 0) {
        per_cell = kv_row_bytes(m->kv_lora_rank + m->qk_rope_head_dim, kv_type);
    } else {
        const int64_t hkv = m->n_head_kv > 0 ? m->n_head_kv : m->n_head;
        const int64_t dk = m->head_dim_k > 0 ? m->head_dim_k : m->n_embd / m->n_head;
        const int64_t dv = m->head_dim_v > 0 ? m->head_dim_v : dk;
        per_cell = kv_row_bytes(hkv * dk, kv_type) + kv_row_bytes(hkv * dv, kv_type);
    }
    const int64_t n_swa_layers = m->n_swa > 0 ? (m->n_layer_swa < n_kv ? m->n_layer_swa : n_kv) : 0;
    int64_t swa_cells = m->n_swa + n_batch;
    if (swa_cells > n_ctx)
        swa_cells = n_ctx;
    uint64_t total = sat_mul(sat_mul((uint64_t)(n_kv - n_swa_layers), (uint64_t)n_ctx), per_cell);
    total = sat_add(total, sat_mul(sat_mul((uint64_t)n_swa_layers, (uint64_t)swa_cells), per_cell));
    /* linear attention: a head_dim x head_dim f32 state per head */
    const uint64_t state = sat_mul(sat_mul((uint64_t)m->n_layer_linear, (uint64_t)m->linear_n_head),
                                   sat_mul(sat_mul((uint64_t)m->linear_head_dim,
                                                   (uint64_t)m->linear_head_dim), 4));
    return sat_add(total, state);
}

static uint64_t expert_act_elems(const moe_plan_model *m)
{
    return sat_mul(2, sat_mul((uint64_t)m->n_expert_used, (uint64_t)m->n_ff_expert));
}

/* Per GPU (or on the CPU when everything is there). */
static uint64_t compute_bytes(const moe_plan_model *m, int64_t n_ctx, int32_t n_batch)
{
    uint64_t row = sat_add((uint64_t)m->n_vocab, sat_mul(8, (uint64_t)m->n_embd));
    row = sat_add(row, expert_act_elems(m));
    const uint64_t act = sat_mul(sat_mul(4, (uint64_t)n_batch), row);
    const uint64_t att = sat_mul(sat_mul(4 * 32, (uint64_t)m->n_head), (uint64_t)n_ctx);
    return sat_add(act, att);
}

/* CPU placement: the CPU backend holds logits only for the rows a batch
 * asks for, and one sequence asks for one (its last token), so the
 * n_batch x n_vocab logits of compute_bytes shrink to one row. */
static uint64_t compute_bytes_cpu(const moe_plan_model *m, int64_t n_ctx, int32_t n_batch)
{
    const uint64_t row = sat_add(sat_mul(8, (uint64_t)m->n_embd), expert_act_elems(m));
    const uint64_t act = sat_add(sat_mul(sat_mul(4, (uint64_t)n_batch), row),
                                 sat_mul(4, (uint64_t)m->n_vocab));
    const uint64_t att = sat_mul(sat_mul(4 * 32, (uint64_t)m->n_head), (uint64_t)n_ctx);
    return sat_add(act, att);
}

/* Host overhead: a fixed part plus the tokenizer, which grows with the
 * vocabulary (about 23 MiB resident for Qwen2's 151,936 tokens with their
 * merges, measured by test-plan-fit). */
static uint64_t host_overhead_bytes(const moe_plan_model *m)
{
    return sat_add(MOE_PLAN_HOST_OVERHEAD_BYTES,
                   sat_mul(MOE_PLAN_VOCAB_TOKEN_BYTES, (uint64_t)m->n_vocab));
}

/* Host side of HYBRID: expert inputs and outputs. */
static uint64_t compute_host_hybrid(const moe_plan_model *m, int32_t n_batch)
{
    const uint64_t row = sat_add(sat_mul(2, (uint64_t)m->n_embd), expert_act_elems(m));
    return sat_mul(sat_mul(4, (uint64_t)n_batch), row);
}

static uint64_t variant_bytes(const moe_plan_variant *v)
{
    uint64_t s = 0;
    for (int g = 0; g < MOE_GROUP_COUNT; g++)
        s = sat_add(s, v->group_bytes[g]);
    return s;
}

/* ---- Placements -------------------------------------------------------- */

typedef struct gpu_budget {
    uint64_t bytes[MOE_HW_MAX_GPUS]; /* largest first */
    int      n;
} gpu_budget;

static uint64_t budget_of(uint64_t total, uint64_t free_bytes, double ceiling)
{
    const double capped = (double)total * ceiling;
    const uint64_t c = capped >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)capped;
    return c < free_bytes ? c : free_bytes;
}

static int cmp_desc(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Puts `weights` + `kv` on the fewest GPUs that hold them (each paying
 * `fixed` bytes, each after the first losing `layer` bytes to the split);
 * fills the GPU fields of `o` for that count, or for all GPUs if none
 * suffices. */
static void place_on_gpus(const gpu_budget *gb, uint64_t weights, uint64_t kv, uint64_t compute,
                          uint64_t layer, moe_plan_option *o)
{
    const uint64_t fixed = sat_add(MOE_PLAN_CUDA_OVERHEAD_BYTES, compute);
    uint64_t room = 0;
    for (int k = 1; k <= gb->n; k++) {
        /* A further GPU that cannot hold its fixed part and one layer adds
         * nothing (the GPUs are sorted, so neither would the next). */
        if (k > 1 && gb->bytes[k - 1] < sat_add(fixed, layer))
            return;
        room = sat_add(room, gb->bytes[k - 1]);
        const uint64_t reserve = sat_mul((uint64_t)(k - 1), layer);
        o->n_gpus = k;
        o->weights_gpu_bytes = weights;
        o->kv_bytes = kv;
        o->compute_gpu_bytes = sat_mul((uint64_t)k, compute);
        o->overhead_gpu_bytes = sat_mul((uint64_t)k, MOE_PLAN_CUDA_OVERHEAD_BYTES);
        o->gpu_bytes = sat_add(sat_add(weights, kv), sat_mul((uint64_t)k, fixed));
        o->gpu_budget_bytes = sat_sub(room, reserve);
        if (o->gpu_bytes <= o->gpu_budget_bytes)
            return;
    }
}

static void finish_option(moe_plan_option *o, uint64_t host_budget)
{
    o->host_bytes = sat_add(sat_add(o->weights_host_bytes, o->compute_host_bytes),
                            o->overhead_host_bytes);
    if (o->placement == MOE_PLACE_CPU)
        o->host_bytes = sat_add(o->host_bytes, o->kv_bytes);
    o->host_budget_bytes = host_budget;
    o->fits = o->host_bytes <= host_budget &&
              (o->placement == MOE_PLACE_CPU || o->gpu_bytes <= o->gpu_budget_bytes);
}

/* ---- Parameters -------------------------------------------------------- */

moe_plan_params moe_plan_default_params(void)
{
    moe_plan_params p;
    memset(&p, 0, sizeof p);
    p.n_batch = MOE_PLAN_DEFAULT_N_BATCH;
    p.kv_type = MOE_TYPE_F16;
    p.ceiling = MOE_PLAN_DEFAULT_CEILING;
    return p;
}

static moe_status normalise_params(const moe_plan_model *m, const moe_plan_params *in,
                                   moe_plan_params *p, moe_err *err)
{
    *p = in ? *in : moe_plan_default_params();
    if (p->n_batch == 0)
        p->n_batch = MOE_PLAN_DEFAULT_N_BATCH;
    if (p->kv_type == 0)
        p->kv_type = MOE_TYPE_F16;
    if (p->ceiling == 0.0)
        p->ceiling = MOE_PLAN_DEFAULT_CEILING;
    if (p->n_batch < 1 || p->n_batch > 65536)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "plan: n_batch %d outside 1..65536", p->n_batch);
    if (p->kv_type != MOE_TYPE_F16 && p->kv_type != MOE_TYPE_Q8_0)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "plan: KV cache type must be f16 or q8_0");
    if (!(p->ceiling > 0.0 && p->ceiling <= 1.0))
        return moe_fail(err, MOE_ERR_INVALID_ARG, "plan: ceiling %g outside (0, 1]", p->ceiling);
    if (p->n_n_ctx > MOE_PLAN_MAX_CTX)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "plan: more than %d contexts", MOE_PLAN_MAX_CTX);
    if (p->n_n_ctx == 0) {
        int64_t c = MOE_PLAN_DEFAULT_N_CTX;
        if (m->n_ctx_train > 0 && m->n_ctx_train < c)
            c = m->n_ctx_train;
        p->n_ctx[0] = c;
        p->n_n_ctx = 1;
    }
    for (size_t i = 0; i < p->n_n_ctx; i++)
        if (p->n_ctx[i] < 1 || p->n_ctx[i] > (INT64_C(1) << 24))
            return moe_fail(err, MOE_ERR_INVALID_ARG, "plan: context %lld outside 1..16777216",
                            (long long)p->n_ctx[i]);
    return MOE_OK;
}

/* ---- Choosing ---------------------------------------------------------- */

static const moe_plan_option *find_option(const moe_plan *p, size_t variant, int64_t n_ctx,
                                          moe_placement placement)
{
    for (size_t i = 0; i < p->n_options; i++) {
        const moe_plan_option *o = &p->options[i];
        if (o->variant == variant && o->n_ctx == n_ctx && o->placement == placement)
            return o;
    }
    return NULL;
}

/* Smallest need of a placement at a context (for "would need X"). */
static const moe_plan_option *smallest(const moe_plan *p, int64_t n_ctx, moe_placement placement)
{
    const moe_plan_option *best = NULL;
    for (size_t i = 0; i < p->n_options; i++) {
        const moe_plan_option *o = &p->options[i];
        if (o->n_ctx != n_ctx || o->placement != placement)
            continue;
        const uint64_t need = placement == MOE_PLACE_CPU ? o->host_bytes : o->gpu_bytes;
        if (!best || need < (placement == MOE_PLACE_CPU ? best->host_bytes : best->gpu_bytes))
            best = o;
    }
    return best;
}

static void explain(moe_plan *p, const moe_plan_model *m, const moe_machine *mach)
{
    const size_t cap = sizeof p->reason;
    char *r = p->reason;
    if (p->chosen < 0) {
        const int64_t ctx = p->n_ctx[p->n_n_ctx - 1];
        const moe_plan_option *cpu = smallest(p, ctx, MOE_PLACE_CPU);
        const moe_plan_option *gpu = smallest(p, ctx, MOE_PLACE_GPU);
        if (MOE_NEVER(!cpu)) {
            snprintf(r, cap, "does not fit");
            return;
        }
        int n = snprintf(r, cap,
                         "does not fit: the smallest option, %s at %lld tokens, needs %.1f GiB of RAM "
                         "on the CPU (this machine allows %.1f GiB)",
                         m->variants[cpu->variant].name, (long long)ctx, gib(cpu->host_bytes),
                         gib(cpu->host_budget_bytes));
        if (gpu && n > 0 && (size_t)n < cap)
            snprintf(r + n, cap - (size_t)n, "; all on GPU it needs %.1f GiB of VRAM (allowed %.1f GiB)",
                     gib(gpu->gpu_bytes), gib(gpu->gpu_budget_bytes));
        return;
    }
    const moe_plan_option *o = &p->options[p->chosen];
    const moe_plan_variant *v = &m->variants[o->variant];
    char ctx_note[96] = "";
    if (o->n_ctx != p->n_ctx[0])
        snprintf(ctx_note, sizeof ctx_note, " (%lld tokens do not fit)", (long long)p->n_ctx[0]);
    if (o->placement == MOE_PLACE_GPU) {
        /* the next better variant, if any, and what it would need */
        const moe_plan_option *better = NULL;
        for (size_t i = 0; i < p->n_options; i++) {
            const moe_plan_option *q = &p->options[i];
            if (q == o)
                break;
            if (q->n_ctx == o->n_ctx && q->placement == MOE_PLACE_GPU &&
                m->variants[q->variant].quality > v->quality)
                better = q;
        }
        int n = snprintf(r, cap, "%s fits all on GPU at %lld tokens%s: %.1f of %.1f GiB VRAM on %d GPU%s",
                         v->name, (long long)o->n_ctx, ctx_note, gib(o->gpu_bytes),
                         gib(o->gpu_budget_bytes), o->n_gpus, o->n_gpus == 1 ? "" : "s");
        if (n > 0 && (size_t)n < cap) {
            if (better)
                snprintf(r + n, cap - (size_t)n, "; the better %s needs %.1f GiB",
                         m->variants[better->variant].name, gib(better->gpu_bytes));
            else
                snprintf(r + n, cap - (size_t)n, "; the best quantisation on offer");
        }
    } else if (o->placement == MOE_PLACE_HYBRID) {
        const moe_plan_option *g = smallest(p, o->n_ctx, MOE_PLACE_GPU);
        const int64_t n_moe = m->n_layer_moe > 0 ? m->n_layer_moe : m->n_layer;
        int n = snprintf(r, cap,
                         "%s with routed experts in RAM at %lld tokens%s: %.1f of %.1f GiB VRAM, %.1f of "
                         "%.1f GiB RAM (%d of %lld expert layers would also fit on the GPU)",
                         v->name, (long long)o->n_ctx, ctx_note, gib(o->gpu_bytes),
                         gib(o->gpu_budget_bytes), gib(o->host_bytes), gib(o->host_budget_bytes),
                         o->n_expert_layers_gpu, (long long)n_moe);
        if (g && n > 0 && (size_t)n < cap)
            snprintf(r + n, cap - (size_t)n, "; all on GPU needs at least %.1f GiB VRAM (%s)",
                     gib(g->gpu_bytes), m->variants[g->variant].name);
    } else {
        int n = snprintf(r, cap, "%s on the CPU at %lld tokens%s: %.1f of %.1f GiB RAM", v->name,
                         (long long)o->n_ctx, ctx_note, gib(o->host_bytes), gib(o->host_budget_bytes));
        const moe_plan_option *h = smallest(p, o->n_ctx, MOE_PLACE_HYBRID);
        const moe_plan_option *g = smallest(p, o->n_ctx, MOE_PLACE_GPU);
        const moe_plan_option *need = h ? h : g;
        if (n > 0 && (size_t)n < cap) {
            if (moe_machine_n_compute_gpus(mach) == 0)
                snprintf(r + n, cap - (size_t)n, " (no usable GPU)");
            else if (need)
                snprintf(r + n, cap - (size_t)n, " (nothing fits on the GPU: %s %s needs %.1f GiB VRAM)",
                         m->variants[need->variant].name, moe_placement_str(need->placement),
                         gib(need->gpu_bytes));
        }
    }
}

static void choose(moe_plan *p)
{
    p->chosen = -1;
    for (size_t c = 0; c < p->n_n_ctx && p->chosen < 0; c++)
        for (int pl = MOE_PLACE_GPU; pl <= MOE_PLACE_CPU && p->chosen < 0; pl++)
            /* options are in quality order within a context */
            for (size_t i = 0; i < p->n_options; i++) {
                const moe_plan_option *o = &p->options[i];
                if (o->n_ctx == p->n_ctx[c] && (int)o->placement == pl && o->fits) {
                    p->chosen = (int64_t)i;
                    break;
                }
            }
}

/* ---- Entry points ------------------------------------------------------ */

/* Variant indices, best quality first, ties: larger first. */
static void order_variants(const moe_plan_model *m, size_t *order)
{
    for (size_t i = 0; i < m->n_variants; i++)
        order[i] = i;
    for (size_t i = 1; i < m->n_variants; i++) /* insertion sort: n <= 32 */
        for (size_t j = i; j > 0; j--) {
            const moe_plan_variant *a = &m->variants[order[j - 1]], *b = &m->variants[order[j]];
            const bool swap = b->quality > a->quality ||
                              (b->quality == a->quality && variant_bytes(b) > variant_bytes(a));
            if (!swap)
                break;
            const size_t t = order[j - 1];
            order[j - 1] = order[j];
            order[j] = t;
        }
}

moe_status moe_plan_make(const moe_plan_model *m, const moe_machine *mach,
                         const moe_plan_params *params, moe_plan **out, moe_err *err)
{
    if (out)
        *out = NULL;
    if (!m || !mach || !out)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_plan_make: NULL argument");
    moe_status st = moe_plan_model_check(m, err);
    if (st != MOE_OK)
        return st;
    moe_plan_params prm;
    if ((st = normalise_params(m, params, &prm, err)) != MOE_OK)
        return st;

    gpu_budget gb = {{0}, 0};
    for (int i = 0; i < mach->n_gpus && i < MOE_HW_MAX_GPUS; i++)
        if (mach->gpus[i].compute)
            gb.bytes[gb.n++] = budget_of(mach->gpus[i].vram_total_bytes,
                                         mach->gpus[i].vram_free_bytes, prm.ceiling);
    qsort(gb.bytes, (size_t)gb.n, sizeof gb.bytes[0], cmp_desc);
    const uint64_t host_budget = budget_of(mach->ram_total_bytes, mach->ram_free_bytes, prm.ceiling);

    moe_plan *p = calloc(1, sizeof *p);
    const size_t max_options = prm.n_n_ctx * m->n_variants * 3;
    if (!p || !(p->options = calloc(max_options, sizeof *p->options))) {
        free(p);
        return moe_fail(err, MOE_ERR_NOMEM, "plan: out of memory");
    }
    p->n_variants = m->n_variants;
    p->n_n_ctx = prm.n_n_ctx;
    memcpy(p->n_ctx, prm.n_ctx, sizeof p->n_ctx);

    size_t order[MOE_PLAN_MAX_VARIANTS];
    order_variants(m, order);
    const bool has_experts = m->n_expert > 0;
    const int64_t n_moe = m->n_layer_moe > 0 ? m->n_layer_moe : m->n_layer;
    for (size_t c = 0; c < prm.n_n_ctx; c++) {
        const int64_t ctx = prm.n_ctx[c];
        const uint64_t kv = kv_bytes(m, ctx, prm.n_batch, prm.kv_type);
        const uint64_t comp = compute_bytes(m, ctx, prm.n_batch);
        const uint64_t comp_cpu = compute_bytes_cpu(m, ctx, prm.n_batch);
        for (size_t vi = 0; vi < m->n_variants; vi++) {
            const moe_plan_variant *v = &m->variants[order[vi]];
            const uint64_t all = variant_bytes(v);
            const uint64_t routed = v->group_bytes[MOE_GROUP_ROUTED_EXPERTS];
            const uint64_t rest = sat_sub(all, routed);
            moe_plan_option base;
            memset(&base, 0, sizeof base);
            base.variant = order[vi];
            base.n_ctx = ctx;
            base.overhead_host_bytes = host_overhead_bytes(m);
            if (gb.n > 0) {
                moe_plan_option o = base;
                o.placement = MOE_PLACE_GPU;
                place_on_gpus(&gb, all, kv, comp, sat_add(all, kv) / (uint64_t)m->n_layer, &o);
                finish_option(&o, host_budget);
                p->options[p->n_options++] = o;
            }
            if (gb.n > 0 && has_experts && routed > 0) {
                moe_plan_option o = base;
                o.placement = MOE_PLACE_HYBRID;
                place_on_gpus(&gb, rest, kv, comp, sat_add(rest, kv) / (uint64_t)m->n_layer, &o);
                o.weights_host_bytes = routed;
                o.compute_host_bytes = compute_host_hybrid(m, prm.n_batch);
                const uint64_t per_layer = routed / (uint64_t)n_moe;
                const uint64_t spare = sat_sub(o.gpu_budget_bytes, o.gpu_bytes);
                const uint64_t fit = per_layer ? spare / per_layer : 0;
                o.n_expert_layers_gpu = (int32_t)(fit < (uint64_t)n_moe ? fit : (uint64_t)n_moe);
                finish_option(&o, host_budget);
                p->options[p->n_options++] = o;
            }
            moe_plan_option o = base;
            o.placement = MOE_PLACE_CPU;
            o.weights_host_bytes = all;
            o.kv_bytes = kv;
            o.compute_host_bytes = comp_cpu;
            o.gpu_budget_bytes = 0;
            finish_option(&o, host_budget);
            p->options[p->n_options++] = o;
        }
    }
    choose(p);
    explain(p, m, mach);
    *out = p;
    return MOE_OK;
}

void moe_plan_free(moe_plan *p)
{
    if (!p)
        return;
    free(p->options);
    free(p);
}

size_t moe_plan_n_options(const moe_plan *p)
{
    return p ? p->n_options : 0;
}

const moe_plan_option *moe_plan_option_at(const moe_plan *p, size_t i)
{
    return p && i < p->n_options ? &p->options[i] : NULL;
}

int64_t moe_plan_chosen(const moe_plan *p)
{
    return p ? p->chosen : -1;
}

const char *moe_plan_reason(const moe_plan *p)
{
    return p ? p->reason : "";
}

const char *moe_placement_str(moe_placement placement)
{
    switch (placement) {
    case MOE_PLACE_GPU: return "all on GPU";
    case MOE_PLACE_HYBRID: return "experts in RAM";
    case MOE_PLACE_CPU: return "CPU only";
    }
    return "?";
}

const char *moe_verdict_str(moe_verdict verdict)
{
    switch (verdict) {
    case MOE_VERDICT_FITS_GPU: return "fits on GPU";
    case MOE_VERDICT_PARTIAL: return "partial offload";
    case MOE_VERDICT_CPU_ONLY: return "CPU only";
    case MOE_VERDICT_WONT_FIT: return "won't fit";
    }
    return "?";
}

moe_verdict moe_plan_verdict(const moe_plan *p, size_t variant, int64_t n_ctx)
{
    if (!p)
        return MOE_VERDICT_WONT_FIT;
    static const moe_verdict by_place[] = {MOE_VERDICT_FITS_GPU, MOE_VERDICT_PARTIAL,
                                           MOE_VERDICT_CPU_ONLY};
    for (int pl = MOE_PLACE_GPU; pl <= MOE_PLACE_CPU; pl++) {
        const moe_plan_option *o = find_option(p, variant, n_ctx, (moe_placement)pl);
        if (o && o->fits)
            return by_place[pl];
    }
    return MOE_VERDICT_WONT_FIT;
}

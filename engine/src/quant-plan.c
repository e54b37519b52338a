/*
 * quant-plan.c — the per-tensor type policy of whole-model quantisation.
 * It follows llama.cpp's llama-quantize (src/llama-quant.cpp) so a model
 * quantised here has the same mixture, and the same general.file_type
 * label, as one made there:
 *
 *   - Only tensors whose names end in "weight", have 2+ dimensions and are
 *     not on llama.cpp's keep list (norms, the MoE router ffn_gate_inp,
 *     conv1d, small RWKV/T5/vision tensors...) are quantised. The rest are
 *     written as F32: llama.cpp keeps their source type, but converters
 *     write them as F32 anyway and our engine reads F32 norms directly.
 *   - Float targets (F32/F16/BF16) apply to every quantisable tensor.
 *   - Quantised targets: output.weight (and token_embd.weight when the
 *     model has no output.weight, i.e. tied embeddings) gets Q6_K unless
 *     the target is Q8_0; Q4_K follows llama.cpp's Q4_K_M mixture: attn_v
 *     (and attn_qkv / attn_kv_b) and ffn_down get Q6_K on the layers
 *     use_more_bits() picks (the first and last eighth and every third in
 *     between); 8-expert models (Mixtral) get Q8_0 attn_v/attn_k.
 *     llama.cpp uses Q5_K for Mixtral's attn_output, which libmoe cannot
 *     write: it gets Q6_K (never fewer bits than llama.cpp).
 *   - A row length that is not a multiple of the chosen block size falls
 *     back: 256-element types to Q8_0 (llama.cpp: Q5_0/Q8_0), 32-element
 *     types to F16.
 *
 * moe_quant_policy (at the end) is the same plan behind an opaque public
 * handle, for writers outside the engine such as the Hugging Face importer.
 */
#include "quant-plan.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool moe_quant_plan_init(moe_quant_plan *plan, moe_type target, int n_layer, int n_expert)
{
    memset(plan, 0, sizeof *plan);
    switch (target) {
    case MOE_TYPE_F32: case MOE_TYPE_F16: case MOE_TYPE_BF16:
    case MOE_TYPE_Q8_0: case MOE_TYPE_Q4_0: case MOE_TYPE_Q4_K: case MOE_TYPE_Q6_K:
        break;
    default:
        return false;
    }
    plan->target = target;
    plan->n_layer = n_layer > 0 ? n_layer : 1;
    plan->n_expert = n_expert > 0 ? n_expert : 0;
    return true;
}

uint32_t moe_quant_plan_ftype(const moe_quant_plan *plan)
{
    switch (plan->target) {
    case MOE_TYPE_F32:  return 0;  /* LLAMA_FTYPE_ALL_F32       */
    case MOE_TYPE_F16:  return 1;  /* LLAMA_FTYPE_MOSTLY_F16    */
    case MOE_TYPE_Q4_0: return 2;  /* LLAMA_FTYPE_MOSTLY_Q4_0   */
    case MOE_TYPE_Q8_0: return 7;  /* LLAMA_FTYPE_MOSTLY_Q8_0   */
    case MOE_TYPE_Q4_K: return 15; /* LLAMA_FTYPE_MOSTLY_Q4_K_M */
    case MOE_TYPE_Q6_K: return 18; /* LLAMA_FTYPE_MOSTLY_Q6_K   */
    case MOE_TYPE_BF16: return 32; /* LLAMA_FTYPE_MOSTLY_BF16   */
    default:            return 0;
    }
}

static bool contains(const char *s, const char *part)
{
    return strstr(s, part) != NULL;
}

static bool ends_with(const char *s, const char *tail)
{
    const size_t n = strlen(s), m = strlen(tail);
    return n >= m && memcmp(s + n - m, tail, m) == 0;
}

/* Dimensions as ggml counts them: trailing 1s do not count. */
static int n_dims_of(const int64_t ne[MOE_GGUF_MAX_DIMS])
{
    for (int i = MOE_GGUF_MAX_DIMS - 1; i > 0; i--)
        if (ne[i] > 1)
            return i + 1;
    return 1;
}

/* Name parts llama.cpp never quantises (small or precision-critical). */
static const char *const k_keep[] = {
    "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight",
    "altup", "laurel", "per_layer_model_proj", "ssm_conv1d",
    "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
    "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
    "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
    "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
    "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
    "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd",
    "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
    ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
};

static bool allows_quantization(const char *name, const int64_t ne[MOE_GGUF_MAX_DIMS])
{
    if (n_dims_of(ne) < 2 || !ends_with(name, "weight"))
        return false;
    if (strcmp(name, "position_embd.weight") == 0 || strcmp(name, "token_types.weight") == 0)
        return false;
    for (size_t i = 0; i < sizeof k_keep / sizeof k_keep[0]; i++)
        if (contains(name, k_keep[i]))
            return false;
    return true;
}

typedef enum category {
    CAT_OTHER, CAT_OUTPUT, CAT_TOKEN_EMBD, CAT_ATTN_V, CAT_ATTN_K,
    CAT_ATTN_Q, CAT_ATTN_OUTPUT, CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN,
} category;

/* Broad kind of a tensor, tested in llama.cpp's order (it matters: e.g.
 * "ffn_gate" also matches the router, which is kept F32 earlier). */
static category category_of(const char *name)
{
    if (strcmp(name, "output.weight") == 0)
        return CAT_OUTPUT;
    if (strcmp(name, "token_embd.weight") == 0 || strcmp(name, "per_layer_token_embd.weight") == 0)
        return CAT_TOKEN_EMBD;
    if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") ||
        contains(name, "attn_v.weight"))
        return CAT_ATTN_V;
    if (contains(name, "attn_k.weight"))
        return CAT_ATTN_K;
    if (contains(name, "attn_q.weight"))
        return CAT_ATTN_Q;
    if (contains(name, "attn_output.weight"))
        return CAT_ATTN_OUTPUT;
    if (contains(name, "ffn_up"))
        return CAT_FFN_UP;
    if (contains(name, "ffn_gate"))
        return CAT_FFN_GATE;
    if (contains(name, "ffn_down"))
        return CAT_FFN_DOWN;
    return CAT_OTHER;
}

void moe_quant_plan_count(moe_quant_plan *plan, const char *name)
{
    category c = category_of(name);
    if (c == CAT_ATTN_V)
        plan->n_attn_v++;
    if (c == CAT_OUTPUT)
        plan->has_output = true;
}

/* llama.cpp's choice of layers that keep more bits: the first and last
 * eighth of the stack and every third layer in between. */
static bool use_more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static int layer_of(const char *name)
{
    int layer = -1;
    if (sscanf(name, "blk.%d.", &layer) != 1)
        return -1;
    return layer;
}

/* The Q4_K_M mixture's upgrades for one tensor. */
static moe_type q4_k_m_type(moe_quant_plan *plan, category c, const char *name)
{
    moe_type t = MOE_TYPE_Q4_K;
    switch (c) {
    case CAT_ATTN_V:
        if (use_more_bits(plan->i_attn_v, plan->n_attn_v))
            t = MOE_TYPE_Q6_K;
        if (plan->n_expert == 8)
            t = MOE_TYPE_Q8_0;
        plan->i_attn_v++;
        break;
    case CAT_ATTN_K:
        if (plan->n_expert == 8)
            t = MOE_TYPE_Q8_0;
        break;
    case CAT_ATTN_OUTPUT:
        if (plan->n_expert == 8)
            t = MOE_TYPE_Q6_K; /* llama.cpp: Q5_K */
        break;
    case CAT_FFN_DOWN: {
        const int layer = layer_of(name);
        if (layer >= 0 && layer < plan->n_layer && use_more_bits(layer, plan->n_layer))
            t = MOE_TYPE_Q6_K;
        break;
    }
    default:
        break;
    }
    return t;
}

moe_type moe_quant_plan_pick(moe_quant_plan *plan, const char *name,
                             const int64_t ne[MOE_GGUF_MAX_DIMS])
{
    const moe_type target = plan->target;
    if (!allows_quantization(name, ne))
        return MOE_TYPE_F32;
    if (target == MOE_TYPE_F32 || target == MOE_TYPE_F16 || target == MOE_TYPE_BF16)
        return target;

    const category c = category_of(name);
    moe_type t = target;
    if (c == CAT_OUTPUT || (c == CAT_TOKEN_EMBD && !plan->has_output)) {
        if (ne[0] % moe_type_block_elems(target) != 0)
            t = MOE_TYPE_Q8_0;
        else if (target != MOE_TYPE_Q8_0)
            t = MOE_TYPE_Q6_K;
    } else if (target == MOE_TYPE_Q4_K) {
        t = q4_k_m_type(plan, c, name);
    } else if (c == CAT_ATTN_V) {
        plan->i_attn_v++;
    }

    /* Row length must be whole blocks. */
    if (ne[0] % moe_type_block_elems(t) != 0)
        t = moe_type_block_elems(t) > 32 ? MOE_TYPE_Q8_0 : t;
    if (ne[0] % moe_type_block_elems(t) != 0)
        t = MOE_TYPE_F16;
    return t;
}

/* ---- the public handle: moe_quant_policy wraps one moe_quant_plan ---- */

struct moe_quant_policy {
    moe_quant_plan plan;
};

moe_status moe_quant_policy_new(moe_type target, int n_layer, int n_expert,
                                moe_quant_policy **out, moe_err *err)
{
    if (!out)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_quant_policy_new: NULL out");
    *out = NULL;
    moe_quant_policy *p = malloc(sizeof *p);
    if (!p)
        return moe_fail(err, MOE_ERR_NOMEM, "moe_quant_policy_new: out of memory");
    if (!moe_quant_plan_init(&p->plan, target, n_layer, n_expert)) {
        free(p);
        const char *name = moe_type_name(target);
        return moe_fail(err, MOE_ERR_UNSUPPORTED, "models cannot be quantised to type %s",
                        name ? name : "(unknown)");
    }
    *out = p;
    return MOE_OK;
}

void moe_quant_policy_free(moe_quant_policy *policy)
{
    free(policy);
}

void moe_quant_policy_count(moe_quant_policy *policy, const char *name)
{
    if (policy && name)
        moe_quant_plan_count(&policy->plan, name);
}

moe_type moe_quant_policy_pick(moe_quant_policy *policy, const char *name,
                               const int64_t ne[MOE_GGUF_MAX_DIMS])
{
    if (!policy || !name || !ne)
        return MOE_TYPE_F32;
    return moe_quant_plan_pick(&policy->plan, name, ne);
}

uint32_t moe_quant_policy_ftype(const moe_quant_policy *policy)
{
    return policy ? moe_quant_plan_ftype(&policy->plan) : 0;
}

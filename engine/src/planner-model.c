/*
 * planner-model.c — the memory planner's view of a model: which tensor
 * group a GGUF tensor belongs to, what a quantisation name means (bits per
 * weight, quality rank), a moe_plan_model filled from a GGUF file's
 * metadata and tensor list, and variants added from a catalog entry's file
 * sizes. planner.c turns such a model and a machine into a plan.
 *
 * Why groups: the placements differ only in where each group lives (with
 * experts in RAM, the routed experts stay on the host and everything else
 * goes to the GPU), so the planner needs bytes per group, not per tensor.
 */
#include "moe.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- Tensor groups ----------------------------------------------------- */

static const char *const k_group_names[MOE_GROUP_COUNT] = {
    "embd_output", "attention", "router", "shared_experts", "routed_experts",
};

const char *moe_tensor_group_name(moe_tensor_group group)
{
    return (unsigned)group < MOE_GROUP_COUNT ? k_group_names[group] : NULL;
}

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Order matters: "ffn_gate_inp_shexp" is a router, "ffn_down_shexp" a
 * shared expert, "ffn_norm" a norm (attention group, like every per-layer
 * norm), "ffn_gate" of a dense layer a shared (always active) FFN. */
moe_tensor_group moe_tensor_group_of(const char *name)
{
    if (!name)
        return MOE_GROUP_ATTENTION;
    if (starts_with(name, "token_embd") || starts_with(name, "output.") ||
        starts_with(name, "output_"))
        return MOE_GROUP_EMBD_OUTPUT;
    if (strstr(name, "_exps"))
        return MOE_GROUP_ROUTED_EXPERTS;
    if (strstr(name, "ffn_gate_inp") || strstr(name, "exp_probs_b"))
        return MOE_GROUP_ROUTER;
    if (strstr(name, "_shexp"))
        return MOE_GROUP_SHARED_EXPERTS;
    if (strstr(name, "norm"))
        return MOE_GROUP_ATTENTION;
    if (strstr(name, "ffn_"))
        return MOE_GROUP_SHARED_EXPERTS;
    return MOE_GROUP_ATTENTION;
}

/* ---- Quantisation names ------------------------------------------------ */

typedef struct quant_family {
    const char *prefix;  /* upper case, as llama.cpp spells file types */
    double      bpw;     /* of the family's main block type            */
    int32_t     quality; /* rank: higher is better                     */
} quant_family;

/* bpw from the ggml block sizes: q8_0 34 B / 32, q6_k 210 / 256, q5_k
 * 176 / 256, q4_k 144 / 256, q4_0 18 / 32, mxfp4 17 / 32, q3_k 110 / 256,
 * q2_k 84 / 256, iq* from their block layouts. */
static const quant_family k_quants[] = {
    {"F32", 32.0, 100},   {"BF16", 16.0, 90},     {"F16", 16.0, 90},
    {"Q8_K", 8.5, 80},    {"Q8_0", 8.5, 80},      {"Q6_K", 6.5625, 70},
    {"Q5_K", 5.5, 60},    {"Q5_1", 6.0, 58},      {"Q5_0", 5.5, 57},
    {"Q4_K", 4.5, 50},    {"MXFP4", 4.25, 48},    {"IQ4_NL", 4.5, 47},
    {"IQ4_XS", 4.25, 47}, {"Q4_1", 5.0, 46},      {"Q4_0", 4.5, 45},
    {"Q3_K", 3.4375, 35}, {"IQ3_M", 3.4375, 34},  {"IQ3_S", 3.4375, 34},
    {"IQ3_XS", 3.3, 33},  {"IQ3_XXS", 3.0625, 32}, {"Q2_K", 2.625, 25},
    {"IQ2_M", 2.5, 24},   {"IQ2_S", 2.5, 23},     {"IQ2_XS", 2.3125, 22},
    {"IQ2_XXS", 2.0625, 21}, {"TQ2_0", 2.0625, 20}, {"IQ1_M", 1.75, 12},
    {"TQ1_0", 1.6875, 11}, {"IQ1_S", 1.5625, 10},
};

bool moe_plan_quant_info(const char *quant, double *bpw, int32_t *quality)
{
    if (!quant)
        return false;
    char up[32];
    size_t n = 0;
    for (; quant[n] && n + 1 < sizeof up; n++) {
        char ch = quant[n];
        up[n] = (ch >= 'a' && ch <= 'z') ? (char)(ch - 'a' + 'A') : ch;
    }
    if (quant[n])
        return false;
    up[n] = '\0';
    const char *s = starts_with(up, "UD-") ? up + 3 : up;
    const quant_family *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < sizeof k_quants / sizeof k_quants[0]; i++) {
        size_t len = strlen(k_quants[i].prefix);
        /* the family, then the end or a size suffix ("_M", "_K_XL"...) */
        if (strncmp(s, k_quants[i].prefix, len) == 0 && (s[len] == '\0' || s[len] == '_') &&
            len > best_len) {
            best = &k_quants[i];
            best_len = len;
        }
    }
    if (!best)
        return false;
    if (bpw)
        *bpw = best->bpw;
    if (quality)
        *quality = best->quality;
    return true;
}

/* llama.cpp's general.file_type numbers (LLAMA_FTYPE_*) as names. */
static const char *ftype_name(uint64_t ftype)
{
    static const struct { uint32_t id; const char *name; } names[] = {
        {0, "F32"},      {1, "F16"},      {2, "Q4_0"},     {3, "Q4_1"},     {7, "Q8_0"},
        {8, "Q5_0"},     {9, "Q5_1"},     {10, "Q2_K"},    {11, "Q3_K_S"},  {12, "Q3_K_M"},
        {13, "Q3_K_L"},  {14, "Q4_K_S"},  {15, "Q4_K_M"},  {16, "Q5_K_S"},  {17, "Q5_K_M"},
        {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"},  {21, "Q2_K_S"},  {22, "IQ3_XS"},
        {23, "IQ3_XXS"}, {24, "IQ1_S"},   {25, "IQ4_NL"},  {26, "IQ3_S"},   {27, "IQ3_M"},
        {28, "IQ2_S"},   {29, "IQ2_M"},   {30, "IQ4_XS"},  {31, "IQ1_M"},   {32, "BF16"},
        {36, "TQ1_0"},   {37, "TQ2_0"},   {38, "MXFP4"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].id == ftype)
            return names[i].name;
    return NULL;
}

/* ---- Variants ---------------------------------------------------------- */

/* Weights per group for `params` stored at `bpw`: routers stay F32 in
 * every llama.cpp quantisation, everything else at bpw. When the file size
 * is known, the estimate is scaled to it, so a Q4_K_M file's Q6_K tensors
 * (and its metadata) are accounted for in proportion. */
static void split_bytes(const uint64_t params[MOE_GROUP_COUNT], double bpw, uint64_t file_bytes,
                        uint64_t out[MOE_GROUP_COUNT])
{
    double est[MOE_GROUP_COUNT], sum = 0.0;
    for (int g = 0; g < MOE_GROUP_COUNT; g++) {
        const double b = g == MOE_GROUP_ROUTER ? 32.0 : bpw;
        est[g] = (double)params[g] * b / 8.0;
        sum += est[g];
    }
    const double scale = (file_bytes > 0 && sum > 0.0) ? (double)file_bytes / sum : 1.0;
    uint64_t total = 0;
    int largest = 0;
    for (int g = 0; g < MOE_GROUP_COUNT; g++) {
        out[g] = (uint64_t)llround(est[g] * scale);
        total += out[g];
        if (out[g] > out[largest])
            largest = g;
    }
    /* Rounding leftovers go to the largest group so the sum is the file. */
    if (file_bytes > 0) {
        if (total > file_bytes && out[largest] >= total - file_bytes)
            out[largest] -= total - file_bytes;
        else if (total < file_bytes)
            out[largest] += file_bytes - total;
    }
}

moe_status moe_plan_model_add_variant(moe_plan_model *m, const char *name, const char *quant,
                                      uint64_t file_bytes, bool size_estimated, moe_err *err)
{
    if (!m || !quant)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_plan_model_add_variant: NULL argument");
    if (m->n_variants >= MOE_PLAN_MAX_VARIANTS)
        return moe_fail(err, MOE_ERR_RANGE, "%s: more than %d variants", m->name,
                        MOE_PLAN_MAX_VARIANTS);
    double bpw;
    int32_t quality;
    if (!moe_plan_quant_info(quant, &bpw, &quality))
        return moe_fail(err, MOE_ERR_NOT_FOUND, "%s: unknown quantisation \"%s\"", m->name, quant);
    uint64_t params = 0;
    for (int g = 0; g < MOE_GROUP_COUNT; g++)
        if (!moe_add_u64(params, m->group_params[g], &params))
            return moe_fail(err, MOE_ERR_RANGE, "%s: parameter counts overflow", m->name);
    if (params == 0)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "%s: set group_params before adding variants",
                        m->name);
    if (params > (UINT64_C(1) << 50) || file_bytes > (UINT64_C(1) << 56))
        return moe_fail(err, MOE_ERR_RANGE, "%s: parameter count or file size out of range",
                        m->name);
    moe_plan_variant *v = &m->variants[m->n_variants];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name ? name : quant);
    snprintf(v->quant, sizeof v->quant, "%s", quant);
    v->bpw = bpw;
    v->quality = quality;
    v->file_bytes = file_bytes;
    v->size_estimated = size_estimated || file_bytes == 0;
    split_bytes(m->group_params, bpw, file_bytes, v->group_bytes);
    m->n_variants++;
    return MOE_OK;
}

/* ---- From a GGUF file -------------------------------------------------- */

static uint64_t arch_u64(const moe_gguf *g, const char *arch, const char *key, uint64_t def)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    return moe_gguf_u64_or(g, full, def);
}

/* Highest "blk.N." layer number of the routed-expert tensors, + 1 each
 * distinct layer: counted with a bitmap over at most 4096 layers. */
static int64_t count_moe_layers(const moe_gguf *g, int64_t n_layer)
{
    unsigned char seen[4096 / 8];
    memset(seen, 0, sizeof seen);
    int64_t count = 0;
    for (int64_t i = 0; i < moe_gguf_n_tensors(g); i++) {
        const moe_gguf_tensor *t = moe_gguf_tensor_at(g, i);
        int layer = -1;
        if (!t || !strstr(t->name, "_exps") || sscanf(t->name, "blk.%d.", &layer) != 1)
            continue;
        if (layer < 0 || layer >= n_layer || layer >= 4096 || (seen[layer / 8] & (1u << (layer % 8))))
            continue;
        seen[layer / 8] |= (unsigned char)(1u << (layer % 8));
        count++;
    }
    return count;
}

moe_status moe_plan_model_from_gguf(const moe_gguf *g, moe_plan_model *m, moe_err *err)
{
    if (!g || !m)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_plan_model_from_gguf: NULL argument");
    memset(m, 0, sizeof *m);
    const char *arch = moe_gguf_str_or(g, "general.architecture", NULL);
    if (!arch || !arch[0])
        return moe_fail(err, MOE_ERR_FORMAT, "GGUF: missing general.architecture");
    snprintf(m->arch, sizeof m->arch, "%s", arch);
    snprintf(m->name, sizeof m->name, "%s", moe_gguf_str_or(g, "general.name", arch));

    static const char *const required[] = {"block_count", "embedding_length",
                                           "attention.head_count"};
    for (size_t i = 0; i < 3; i++)
        if (arch_u64(g, arch, required[i], 0) == 0)
            return moe_fail(err, MOE_ERR_FORMAT, "GGUF: missing or zero %s.%s", arch, required[i]);
    const uint64_t lim = UINT64_C(1) << 24;
#define CLAMPED(key, def) (int64_t)(arch_u64(g, arch, key, def) > lim ? lim : arch_u64(g, arch, key, def))
    m->n_layer = CLAMPED("block_count", 0);
    m->n_embd = CLAMPED("embedding_length", 0);
    m->n_head = CLAMPED("attention.head_count", 0);
    m->n_head_kv = CLAMPED("attention.head_count_kv", (uint64_t)m->n_head);
    m->head_dim_k = CLAMPED("attention.key_length", (uint64_t)(m->n_embd / m->n_head));
    m->head_dim_v = CLAMPED("attention.value_length", (uint64_t)m->head_dim_k);
    m->kv_lora_rank = CLAMPED("attention.kv_lora_rank", 0);
    m->qk_rope_head_dim = m->kv_lora_rank ? CLAMPED("rope.dimension_count", 0) : 0;
    m->n_expert = CLAMPED("expert_count", 0);
    m->n_expert_used = CLAMPED("expert_used_count", 0);
    m->n_ff_expert = CLAMPED("expert_feed_forward_length", 0);
    m->n_ctx_train = CLAMPED("context_length", 0);
    m->n_swa = CLAMPED("attention.sliding_window", 0);
#undef CLAMPED
    /* gpt-oss alternates sliding-window and full layers. */
    if (m->n_swa > 0 && strcmp(arch, "gpt-oss") == 0)
        m->n_layer_swa = m->n_layer / 2;

    const moe_gguf_tensor *embd = moe_gguf_find_tensor(g, "token_embd.weight");
    if (embd && embd->n_dims >= 2)
        m->n_vocab = embd->ne[1];
    else {
        int64_t k = moe_gguf_find_key(g, "tokenizer.ggml.tokens");
        m->n_vocab = k >= 0 ? (int64_t)moe_gguf_arr_len(g, k) : 0;
    }
    if (m->n_vocab <= 0)
        return moe_fail(err, MOE_ERR_FORMAT,
                        "GGUF: no token_embd.weight or tokenizer.ggml.tokens to size the vocabulary");

    if (moe_gguf_n_tensors(g) == 0)
        return moe_fail(err, MOE_ERR_FORMAT, "GGUF: no weight tensors (a vocabulary-only file?)");
    moe_plan_variant *v = &m->variants[0];
    moe_type dominant = MOE_TYPE_F32;
    uint64_t type_bytes[MOE_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < moe_gguf_n_tensors(g); i++) {
        const moe_gguf_tensor *t = moe_gguf_tensor_at(g, i);
        if (!t)
            continue;
        const moe_tensor_group grp = moe_tensor_group_of(t->name);
        uint64_t n = 1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            n *= (uint64_t)t->ne[d]; /* the reader checked these against the file */
        m->group_params[grp] += n;
        v->group_bytes[grp] += t->size_bytes;
        if ((unsigned)t->type < MOE_TYPE_COUNT) {
            type_bytes[t->type] += t->size_bytes;
            if (type_bytes[t->type] > type_bytes[dominant])
                dominant = t->type;
        }
    }
    m->n_layer_moe = m->n_expert > 0 ? count_moe_layers(g, m->n_layer) : 0;

    const char *quant = ftype_name(moe_gguf_u64_or(g, "general.file_type", UINT64_MAX));
    if (!quant || !moe_plan_quant_info(quant, &v->bpw, &v->quality))
        quant = moe_type_name(dominant);
    if (!quant || !moe_plan_quant_info(quant, &v->bpw, &v->quality)) {
        quant = "mixed";
        v->quality = 0;
    }
    uint64_t params = 0, bytes = 0;
    for (int grp = 0; grp < MOE_GROUP_COUNT; grp++) {
        params += m->group_params[grp];
        bytes += v->group_bytes[grp];
    }
    if (params > 0)
        v->bpw = (double)bytes * 8.0 / (double)params; /* the file's own */
    snprintf(v->quant, sizeof v->quant, "%s", quant);
    for (char *c = v->quant; *c; c++) /* type names are lower case, file types upper */
        if (*c >= 'a' && *c <= 'z')
            *c = (char)(*c - 'a' + 'A');
    snprintf(v->name, sizeof v->name, "%s (file)", v->quant);
    v->file_bytes = moe_gguf_file_bytes(g);
    v->size_estimated = false;
    v->exact_groups = true;
    m->n_variants = 1;
    return moe_plan_model_check(m, err);
}

/* ---- Checks ------------------------------------------------------------ */

moe_status moe_plan_model_check(const moe_plan_model *m, moe_err *err)
{
    if (!m)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_plan_model_check: NULL model");
    const char *who = m->name[0] ? m->name : "model";
    const int64_t dim_max = INT64_C(1) << 24;
    const struct { const char *field; int64_t v, lo, hi; } f[] = {
        {"n_layer", m->n_layer, 1, 4096},
        {"n_embd", m->n_embd, 1, dim_max},
        {"n_vocab", m->n_vocab, 1, dim_max},
        {"n_head", m->n_head, 1, 65536},
        {"n_head_kv", m->n_head_kv, 0, 65536},
        {"head_dim_k", m->head_dim_k, 0, 65536},
        {"head_dim_v", m->head_dim_v, 0, 65536},
        {"kv_lora_rank", m->kv_lora_rank, 0, 65536},
        {"qk_rope_head_dim", m->qk_rope_head_dim, 0, 65536},
        {"n_layer_kv", m->n_layer_kv, 0, m->n_layer},
        {"n_layer_swa", m->n_layer_swa, 0, m->n_layer},
        {"n_swa", m->n_swa, 0, dim_max},
        {"n_layer_linear", m->n_layer_linear, 0, m->n_layer},
        {"linear_n_head", m->linear_n_head, 0, 65536},
        {"linear_head_dim", m->linear_head_dim, 0, 65536},
        {"n_expert", m->n_expert, 0, 65536},
        {"n_expert_used", m->n_expert_used, 0, m->n_expert},
        {"n_ff_expert", m->n_ff_expert, 0, dim_max},
        {"n_layer_moe", m->n_layer_moe, 0, m->n_layer},
        {"n_ctx_train", m->n_ctx_train, 0, dim_max},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < f[i].lo || f[i].v > f[i].hi)
            return moe_fail(err, MOE_ERR_INVALID_ARG, "%s: %s = %lld is outside %lld..%lld", who,
                            f[i].field, (long long)f[i].v, (long long)f[i].lo, (long long)f[i].hi);
    if (m->n_expert > 0 && m->n_expert_used == 0)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "%s: n_expert_used is 0 with %lld experts", who,
                        (long long)m->n_expert);
    if (m->n_variants == 0 || m->n_variants > MOE_PLAN_MAX_VARIANTS)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "%s: no variants (quantisations) to plan", who);
    for (size_t i = 0; i < m->n_variants; i++) {
        uint64_t sum = 0;
        for (int g = 0; g < MOE_GROUP_COUNT; g++)
            if (m->variants[i].group_bytes[g] > (UINT64_C(1) << 56) ||
                !moe_add_u64(sum, m->variants[i].group_bytes[g], &sum))
                return moe_fail(err, MOE_ERR_RANGE, "%s: variant %s: sizes out of range", who,
                                m->variants[i].name);
        if (sum == 0)
            return moe_fail(err, MOE_ERR_INVALID_ARG, "%s: variant %s has no weights", who,
                            m->variants[i].name);
    }
    return MOE_OK;
}

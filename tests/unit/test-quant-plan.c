/*
 * test-quant-plan.c — the per-tensor type policy of model quantisation
 * (quant-plan.c) on tensor names and shapes of real architectures: what
 * stays F32, what gets the Q4_K_M upgrades, tied embeddings, row-length
 * fallbacks and the general.file_type numbers.
 */
#include "quant-plan.h"
#include "test.h"

static moe_type pick(moe_quant_plan *p, const char *name, int64_t ne0, int64_t ne1, int64_t ne2)
{
    const int64_t ne[MOE_GGUF_MAX_DIMS] = { ne0, ne1, ne2, 1 };
    return moe_quant_plan_pick(p, name, ne);
}

/* A qwen3moe-shaped model: 48 layers, 128 experts, untied output. */
static void test_q4_k_m_moe(void)
{
    moe_quant_plan p;
    CHECK(moe_quant_plan_init(&p, MOE_TYPE_Q4_K, 48, 128));
    CHECK_EQ_INT(moe_quant_plan_ftype(&p), 15);
    char name[64];
    moe_quant_plan_count(&p, "token_embd.weight");
    for (int l = 0; l < 48; l++) {
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        moe_quant_plan_count(&p, name);
    }
    moe_quant_plan_count(&p, "output.weight");
    CHECK_EQ_INT(p.n_attn_v, 48);
    CHECK(p.has_output);

    CHECK_EQ_INT(pick(&p, "token_embd.weight", 2048, 151936, 1), MOE_TYPE_Q4_K);
    int n_q6 = 0;
    for (int l = 0; l < 48; l++) {
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", l);
        CHECK_EQ_INT(pick(&p, name, 2048, 1, 1), MOE_TYPE_F32);
        snprintf(name, sizeof name, "blk.%d.attn_q_norm.weight", l);
        CHECK_EQ_INT(pick(&p, name, 128, 1, 1), MOE_TYPE_F32);
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", l);
        CHECK_EQ_INT(pick(&p, name, 2048, 4096, 1), MOE_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.attn_k.weight", l);
        CHECK_EQ_INT(pick(&p, name, 2048, 512, 1), MOE_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        const moe_type v = pick(&p, name, 2048, 512, 1);
        /* use_more_bits: first/last eighth (0-5, 42-47) and (l-6)%3 == 2 */
        const bool more = l < 6 || l >= 42 || (l - 6) % 3 == 2;
        CHECK_MSG(v == (more ? MOE_TYPE_Q6_K : MOE_TYPE_Q4_K), "attn_v layer %d", l);
        snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", l);
        CHECK_EQ_INT(pick(&p, name, 2048, 128, 1), MOE_TYPE_F32);
        snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", l);
        CHECK_EQ_INT(pick(&p, name, 2048, 768, 128), MOE_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", l);
        CHECK_EQ_INT(pick(&p, name, 2048, 768, 128), MOE_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", l);
        const moe_type d = pick(&p, name, 768, 2048, 128);
        CHECK_MSG(d == (more ? MOE_TYPE_Q6_K : MOE_TYPE_Q4_K), "ffn_down layer %d", l);
        n_q6 += d == MOE_TYPE_Q6_K;
    }
    CHECK_EQ_INT(n_q6, 6 + 6 + 12); /* 0-5, 42-47, 8,11,...,41 */
    CHECK_EQ_INT(pick(&p, "output_norm.weight", 2048, 1, 1), MOE_TYPE_F32);
    CHECK_EQ_INT(pick(&p, "output.weight", 2048, 151936, 1), MOE_TYPE_Q6_K);
    /* 2-D but stored [n, 1]: one dimension as ggml counts, so F32 */
    CHECK_EQ_INT(pick(&p, "blk.0.ffn_gate_inp_shexp.weight", 2048, 1, 1), MOE_TYPE_F32);
    CHECK_EQ_INT(pick(&p, "blk.0.attn_q.bias", 4096, 1, 1), MOE_TYPE_F32);
    CHECK_EQ_INT(pick(&p, "rope_freqs.weight", 64, 1, 1), MOE_TYPE_F32);
    CHECK_EQ_INT(pick(&p, "blk.0.ssm_conv1d.weight", 4, 1536, 1), MOE_TYPE_F32);
}

static void test_tied_and_fallbacks(void)
{
    moe_quant_plan p;
    CHECK(moe_quant_plan_init(&p, MOE_TYPE_Q4_K, 2, 0));
    moe_quant_plan_count(&p, "token_embd.weight");
    CHECK(!p.has_output);
    /* tied embeddings take output's type */
    CHECK_EQ_INT(pick(&p, "token_embd.weight", 1024, 32000, 1), MOE_TYPE_Q6_K);
    /* rows not a multiple of 256: Q8_0; not of 32 either: F16 */
    CHECK_EQ_INT(pick(&p, "blk.0.ffn_up.weight", 96, 64, 1), MOE_TYPE_Q8_0);
    CHECK_EQ_INT(pick(&p, "blk.0.ffn_up.weight", 100, 64, 1), MOE_TYPE_F16);
    CHECK_EQ_INT(pick(&p, "token_embd.weight", 96, 64, 1), MOE_TYPE_Q8_0);

    CHECK(moe_quant_plan_init(&p, MOE_TYPE_Q8_0, 2, 0));
    CHECK_EQ_INT(moe_quant_plan_ftype(&p), 7);
    CHECK_EQ_INT(pick(&p, "output.weight", 1024, 32000, 1), MOE_TYPE_Q8_0);
    CHECK_EQ_INT(pick(&p, "blk.0.ffn_down.weight", 1024, 64, 1), MOE_TYPE_Q8_0);
    CHECK_EQ_INT(pick(&p, "blk.0.ffn_down.weight", 48, 64, 1), MOE_TYPE_F16);

    CHECK(moe_quant_plan_init(&p, MOE_TYPE_Q4_0, 2, 0));
    CHECK_EQ_INT(moe_quant_plan_ftype(&p), 2);
    moe_quant_plan_count(&p, "output.weight");
    CHECK_EQ_INT(pick(&p, "output.weight", 1024, 32000, 1), MOE_TYPE_Q6_K);
    CHECK_EQ_INT(pick(&p, "output.weight", 96, 32000, 1), MOE_TYPE_Q8_0); /* Q6_K won't fit */
    CHECK_EQ_INT(pick(&p, "token_embd.weight", 1024, 32000, 1), MOE_TYPE_Q4_0);
    CHECK_EQ_INT(pick(&p, "blk.0.attn_v.weight", 1024, 256, 1), MOE_TYPE_Q4_0);

    CHECK(moe_quant_plan_init(&p, MOE_TYPE_Q6_K, 2, 0));
    CHECK_EQ_INT(moe_quant_plan_ftype(&p), 18);
    CHECK_EQ_INT(pick(&p, "blk.1.ffn_down.weight", 512, 64, 1), MOE_TYPE_Q6_K);
}

static void test_float_targets(void)
{
    moe_quant_plan p;
    const moe_type t[] = { MOE_TYPE_F32, MOE_TYPE_F16, MOE_TYPE_BF16 };
    const uint32_t ftype[] = { 0, 1, 32 };
    for (int i = 0; i < 3; i++) {
        CHECK(moe_quant_plan_init(&p, t[i], 2, 0));
        CHECK_EQ_INT(moe_quant_plan_ftype(&p), ftype[i]);
        CHECK_EQ_INT(pick(&p, "output.weight", 100, 7, 1), t[i]); /* any row length */
        CHECK_EQ_INT(pick(&p, "blk.0.ffn_down_exps.weight", 100, 7, 8), t[i]);
        CHECK_EQ_INT(pick(&p, "blk.0.ffn_norm.weight", 100, 1, 1), MOE_TYPE_F32);
        CHECK_EQ_INT(pick(&p, "blk.0.ffn_gate_inp.weight", 64, 8, 1), MOE_TYPE_F32);
    }
    CHECK(!moe_quant_plan_init(&p, (moe_type)3, 2, 0));
    CHECK(!moe_quant_plan_init(&p, MOE_TYPE_COUNT, 2, 0));
}

/* Mixtral: 8 experts bump attn_v/attn_k to Q8_0 and attn_output up. */
static void test_eight_experts(void)
{
    moe_quant_plan p;
    CHECK(moe_quant_plan_init(&p, MOE_TYPE_Q4_K, 32, 8));
    moe_quant_plan_count(&p, "blk.0.attn_v.weight");
    CHECK_EQ_INT(pick(&p, "blk.0.attn_v.weight", 4096, 1024, 1), MOE_TYPE_Q8_0);
    CHECK_EQ_INT(pick(&p, "blk.0.attn_k.weight", 4096, 1024, 1), MOE_TYPE_Q8_0);
    CHECK_EQ_INT(pick(&p, "blk.0.attn_output.weight", 4096, 4096, 1), MOE_TYPE_Q6_K);
    CHECK_EQ_INT(pick(&p, "blk.0.attn_q.weight", 4096, 4096, 1), MOE_TYPE_Q4_K);
}

/* The public handle gives the plan's answers. */
static void test_policy_handle(void)
{
    moe_err err = { { 0 } };
    moe_quant_policy *p = NULL;
    CHECK(moe_quant_policy_new((moe_type)3, 2, 0, &p, &err) == MOE_ERR_UNSUPPORTED);
    CHECK(p == NULL && strstr(err.msg, "quantised") != NULL);
    CHECK(moe_quant_policy_new(MOE_TYPE_Q4_K, 8, 8, &p, &err) == MOE_OK && p);
    moe_quant_policy_count(p, "output.weight");
    moe_quant_policy_count(p, "blk.0.attn_v.weight");
    CHECK_EQ_INT(moe_quant_policy_ftype(p), 15);
    const int64_t out[4] = { 256, 1000, 1, 1 }, v[4] = { 256, 64, 1, 1 };
    const int64_t norm[4] = { 256, 1, 1, 1 }, shexp_gate[4] = { 256, 1, 1, 1 };
    CHECK_EQ_INT(moe_quant_policy_pick(p, "token_embd.weight", out), MOE_TYPE_Q4_K);
    CHECK_EQ_INT(moe_quant_policy_pick(p, "blk.0.attn_v.weight", v), MOE_TYPE_Q8_0);
    CHECK_EQ_INT(moe_quant_policy_pick(p, "blk.0.attn_norm.weight", norm), MOE_TYPE_F32);
    CHECK_EQ_INT(moe_quant_policy_pick(p, "blk.0.ffn_gate_inp_shexp.weight", shexp_gate),
                 MOE_TYPE_F32);
    CHECK_EQ_INT(moe_quant_policy_pick(p, "output.weight", out), MOE_TYPE_Q6_K);
    CHECK_EQ_INT(moe_quant_policy_pick(NULL, "output.weight", out), MOE_TYPE_F32);
    moe_quant_policy_free(p);
    moe_quant_policy_free(NULL);
}

int main(void)
{
    test_q4_k_m_moe();
    test_tied_and_fallbacks();
    test_float_targets();
    test_eight_experts();
    test_policy_handle();
    TEST_DONE();
}

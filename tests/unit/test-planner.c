/*
 * test-planner.c — the memory planner against hand-computed expectations:
 * the tier machines of tests/data/machines (1x RTX 4090, 2x RTX 4090,
 * RTX A6000, 4x A100 80 GB, a 64 GB machine without GPU) and catalog models
 * (numbers copied from resources/catalog.json, whose own consistency
 * tests/scripts/test_catalog.py checks). Every expected figure is worked
 * out in the comments from the formulas written above the Memory planner
 * section of moe.h, so a change of formula shows up here as arithmetic to
 * redo, not as a silently moved number. Also: tensor groups, quantisation
 * names, a plan from a real (tiny) GGUF file, KV formulas for MLA,
 * sliding-window and linear-attention models, verdicts, and bad input.
 *
 * Units: GiB = 2^30, MiB = 2^20. Budgets are min(total x 0.90, free),
 * rounded down to whole bytes.
 */
#include "gguf-test-util.h"
#include "moe.h"
#include "test.h"

#include <string.h>

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

static moe_machine load_machine(const char *file)
{
    char rel[128], path[1024];
    snprintf(rel, sizeof rel, "tests/data/machines/%s", file);
    test_src_path(path, sizeof path, rel);
    moe_machine m;
    moe_err err = {{0}};
    if (moe_machine_load(path, &m, &err) != MOE_OK) {
        fprintf(stderr, "%s\n", err.msg);
        memset(&m, 0, sizeof m);
    }
    return m;
}

static void set_groups(moe_plan_model *m, uint64_t embd, uint64_t attn, uint64_t router,
                       uint64_t shared, uint64_t routed)
{
    m->group_params[MOE_GROUP_EMBD_OUTPUT] = embd;
    m->group_params[MOE_GROUP_ATTENTION] = attn;
    m->group_params[MOE_GROUP_ROUTER] = router;
    m->group_params[MOE_GROUP_SHARED_EXPERTS] = shared;
    m->group_params[MOE_GROUP_ROUTED_EXPERTS] = routed;
}

static void add(moe_plan_model *m, const char *name, const char *quant, uint64_t bytes)
{
    moe_err err = {{0}};
    CHECK_MSG(moe_plan_model_add_variant(m, name, quant, bytes, bytes == 0, &err) == MOE_OK, "%s",
              err.msg);
}

/* resources/catalog.json "qwen3-30b-a3b-instruct-2507" (config.json:
 * 48 layers, n_embd 2048, 32 heads, 4 KV heads of 128, 128 experts, 8
 * used, expert FFN 768, vocab 151936) with the unsloth files' real sizes
 * and a BF16 import of the safetensors. */
static void qwen3_30b(moe_plan_model *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "Qwen3-30B-A3B-Instruct-2507");
    snprintf(m->arch, sizeof m->arch, "qwen3moe");
    m->n_layer = 48;
    m->n_embd = 2048;
    m->n_vocab = 151936;
    m->n_head = 32;
    m->n_head_kv = 4;
    m->head_dim_k = m->head_dim_v = 128;
    m->n_expert = 128;
    m->n_expert_used = 8;
    m->n_ff_expert = 768;
    m->n_ctx_train = 262144;
    set_groups(m, 622331904, 906178560, 12582912, 0, 28991029248);
    add(m, "Q4_K_M", "Q4_K_M", 18556686752);
    add(m, "UD-Q4_K_XL", "UD-Q4_K_XL", 17690497440);
    add(m, "Q6_K", "Q6_K", 25092532640);
    add(m, "Q8_0", "Q8_0", 32483932576);
    add(m, "BF16 (import)", "BF16", 0);
}

static moe_plan *make(const moe_plan_model *m, const moe_machine *mach, int64_t n_ctx)
{
    moe_plan_params p = moe_plan_default_params();
    p.n_ctx[0] = n_ctx;
    p.n_n_ctx = 1;
    moe_plan *plan = NULL;
    moe_err err = {{0}};
    CHECK_MSG(moe_plan_make(m, mach, &p, &plan, &err) == MOE_OK, "%s", err.msg);
    return plan;
}

static const moe_plan_option *chosen(const moe_plan *p)
{
    const int64_t i = moe_plan_chosen(p);
    return i >= 0 ? moe_plan_option_at(p, (size_t)i) : NULL;
}

static const char *chosen_name(const moe_plan *p, const moe_plan_model *m)
{
    const moe_plan_option *o = chosen(p);
    return o ? m->variants[o->variant].name : "(none)";
}

static void test_groups_and_quants(void)
{
    CHECK_EQ_INT(moe_tensor_group_of("token_embd.weight"), MOE_GROUP_EMBD_OUTPUT);
    CHECK_EQ_INT(moe_tensor_group_of("output.weight"), MOE_GROUP_EMBD_OUTPUT);
    CHECK_EQ_INT(moe_tensor_group_of("output_norm.weight"), MOE_GROUP_EMBD_OUTPUT);
    CHECK_EQ_INT(moe_tensor_group_of("blk.3.attn_q.weight"), MOE_GROUP_ATTENTION);
    CHECK_EQ_INT(moe_tensor_group_of("blk.3.attn_kv_a_mqa.weight"), MOE_GROUP_ATTENTION);
    CHECK_EQ_INT(moe_tensor_group_of("blk.3.ffn_norm.weight"), MOE_GROUP_ATTENTION);
    CHECK_EQ_INT(moe_tensor_group_of("blk.3.ffn_gate_inp.weight"), MOE_GROUP_ROUTER);
    CHECK_EQ_INT(moe_tensor_group_of("blk.3.ffn_gate_inp_shexp.weight"), MOE_GROUP_ROUTER);
    CHECK_EQ_INT(moe_tensor_group_of("blk.3.exp_probs_b.bias"), MOE_GROUP_ROUTER);
    CHECK_EQ_INT(moe_tensor_group_of("blk.3.ffn_down_shexp.weight"), MOE_GROUP_SHARED_EXPERTS);
    CHECK_EQ_INT(moe_tensor_group_of("blk.0.ffn_down.weight"), MOE_GROUP_SHARED_EXPERTS);
    CHECK_EQ_INT(moe_tensor_group_of("blk.3.ffn_up_exps.weight"), MOE_GROUP_ROUTED_EXPERTS);
    CHECK_EQ_INT(moe_tensor_group_of("blk.3.ffn_gate_up_exps.bias"), MOE_GROUP_ROUTED_EXPERTS);
    CHECK_EQ_STR(moe_tensor_group_name(MOE_GROUP_SHARED_EXPERTS), "shared_experts");
    CHECK(moe_tensor_group_name(MOE_GROUP_COUNT) == NULL);

    double bpw = 0;
    int32_t q8 = 0, q6 = 0, q4k = 0, q4 = 0, bf = 0, xl = 0, iq1 = 0, mx = 0;
    CHECK(moe_plan_quant_info("Q8_0", &bpw, &q8) && bpw == 8.5);
    CHECK(moe_plan_quant_info("q6_k", &bpw, &q6) && bpw == 6.5625);
    CHECK(moe_plan_quant_info("Q4_K_M", &bpw, &q4k) && bpw == 4.5);
    CHECK(moe_plan_quant_info("Q4_0", &bpw, &q4) && bpw == 4.5);
    CHECK(moe_plan_quant_info("bf16", &bpw, &bf) && bpw == 16.0);
    CHECK(moe_plan_quant_info("UD-Q4_K_XL", &bpw, &xl) && xl == q4k);
    CHECK(moe_plan_quant_info("UD-IQ1_S", &bpw, &iq1) && bpw == 1.5625);
    CHECK(moe_plan_quant_info("MXFP4", &bpw, &mx) && bpw == 4.25);
    CHECK(bf > q8 && q8 > q6 && q6 > q4k && q4k > mx && mx > q4 && q4 > iq1);
    CHECK(!moe_plan_quant_info("Q4", NULL, NULL));     /* a prefix is not a name */
    CHECK(!moe_plan_quant_info("Q4_KM", NULL, NULL));
    CHECK(!moe_plan_quant_info("GGUF", NULL, NULL));
    CHECK(!moe_plan_quant_info(NULL, NULL, NULL));
    CHECK_EQ_STR(moe_placement_str(MOE_PLACE_HYBRID), "experts in RAM");
    CHECK_EQ_STR(moe_verdict_str(MOE_VERDICT_PARTIAL), "partial offload");
    CHECK_EQ_STR(moe_verdict_str(MOE_VERDICT_WONT_FIT), "won't fit");
}

/* Qwen3-30B-A3B on one RTX 4090 at 32768 tokens (n_batch 512, f16 KV):
 *   KV       48 layers x 2 x 4 heads x 128 x 32768 x 2 B   =  3,221,225,472
 *   compute  4 x 512 x (151936 + 8 x 2048 + 2 x 8 x 768)
 *            = 4 x 512 x 180608                            =    369,885,184
 *          + 4 x 32 x 32 heads x 32768                     =    134,217,728
 *                                                          =    504,102,912
 *   CUDA overhead 400 MiB                                  =    419,430,400
 *   Q4_K_M weights (the file)                              = 18,556,686,752
 *   all on GPU                                             = 22,701,445,536 (21.1 GiB)
 *   budget: min(24564 MiB x 0.9, 24000 MiB)
 *         = min(23,181,498,777.6, 25,165,824,000)          = 23,181,498,777
 *   host: 2 MiB + 160 B x 151936 vocab tokens               =     26,406,912
 *   => Q4_K_M fits, 480 MB to spare. Q6_K: 25,092,532,640 + 3,221,225,472
 *      + 504,102,912 + 419,430,400 = 29,237,291,424 does not. UD-Q4_K_XL has
 *      Q4_K_M's rank but the smaller file, so Q4_K_M comes first. */
static void test_qwen3_rtx4090(void)
{
    moe_plan_model m;
    qwen3_30b(&m);
    moe_machine mach = load_machine("rtx4090-1x.json");
    moe_plan *p = make(&m, &mach, 32768);
    const moe_plan_option *o = chosen(p);
    CHECK(o != NULL);
    if (o) {
        CHECK_EQ_STR(m.variants[o->variant].name, "Q4_K_M");
        CHECK_EQ_INT(o->placement, MOE_PLACE_GPU);
        CHECK_EQ_INT(o->n_gpus, 1);
        CHECK_EQ_INT(o->kv_bytes, 3221225472LL);
        CHECK_EQ_INT(o->compute_gpu_bytes, 504102912);
        CHECK_EQ_INT(o->overhead_gpu_bytes, 419430400);
        CHECK_EQ_INT(o->weights_gpu_bytes, 18556686752LL);
        CHECK_EQ_INT(o->gpu_bytes, 22701445536LL);
        CHECK_EQ_INT(o->gpu_budget_bytes, 23181498777LL);
        CHECK_EQ_INT(o->host_bytes, 26406912); /* host overhead only */
        CHECK(o->fits);
    }
    CHECK(strstr(moe_plan_reason(p), "Q4_K_M fits all on GPU") != NULL);
    CHECK(strstr(moe_plan_reason(p), "Q6_K needs 27.2 GiB") != NULL); /* 29,237,291,424 B */
    /* verdicts: Q6_K would still go with experts in RAM; Q4_K_M on GPU */
    CHECK_EQ_INT(moe_plan_verdict(p, 0, 32768), MOE_VERDICT_FITS_GPU);
    CHECK_EQ_INT(moe_plan_verdict(p, 2, 32768), MOE_VERDICT_PARTIAL);
    CHECK_EQ_INT(moe_plan_verdict(p, 0, 4096), MOE_VERDICT_WONT_FIT); /* not planned */
    CHECK_EQ_INT(moe_plan_verdict(p, 99, 32768), MOE_VERDICT_WONT_FIT);
    /* options: 5 variants x (GPU, HYBRID, CPU) */
    CHECK_EQ_INT(moe_plan_n_options(p), 15);
    CHECK(moe_plan_option_at(p, 15) == NULL);
    /* best quality first: the first option is BF16's */
    CHECK_EQ_STR(m.variants[moe_plan_option_at(p, 0)->variant].name, "BF16 (import)");
    moe_plan_free(p);
}

/* Two RTX 4090s, 32768 tokens. Both budgets 23,181,498,777 (24000 and
 * 24200 MiB free exceed 90% of 24564 MiB).
 *   BF16 import: routers at 4 B, the rest at 2 B per parameter:
 *     (622,331,904 + 906,178,560 + 28,991,029,248) x 2 + 12,582,912 x 4
 *     = 61,089,411,072
 *     need 61,089,411,072 + 3,221,225,472 + 2 x (504,102,912 + 419,430,400)
 *        = 66,157,703,168 > 46,362,997,554 - reserve: does not fit.
 *   Q8_0 on one GPU: 32,483,932,576 + 3,221,225,472 + 923,533,312
 *     = 36,628,691,360 > 23,181,498,777; on two:
 *     need 32,483,932,576 + 3,221,225,472 + 2 x 923,533,312 = 37,552,224,672
 *     reserve one layer: (32,483,932,576 + 3,221,225,472) / 48 = 743,857,459
 *     room 2 x 23,181,498,777 - 743,857,459 = 45,619,140,095  => fits. */
static void test_qwen3_two_4090(void)
{
    moe_plan_model m;
    qwen3_30b(&m);
    CHECK_EQ_INT(m.variants[4].group_bytes[MOE_GROUP_ROUTED_EXPERTS], 57982058496LL);
    CHECK_EQ_INT(m.variants[4].group_bytes[MOE_GROUP_ROUTER], 50331648);
    moe_machine mach = load_machine("rtx4090-2x.json");
    moe_plan *p = make(&m, &mach, 32768);
    const moe_plan_option *o = chosen(p);
    CHECK(o != NULL);
    if (o) {
        CHECK_EQ_STR(m.variants[o->variant].name, "Q8_0");
        CHECK_EQ_INT(o->placement, MOE_PLACE_GPU);
        CHECK_EQ_INT(o->n_gpus, 2);
        CHECK_EQ_INT(o->gpu_bytes, 37552224672LL);
        CHECK_EQ_INT(o->gpu_budget_bytes, 45619140095LL);
    }
    const moe_plan_option *bf = moe_plan_option_at(p, 0);
    CHECK(bf && bf->placement == MOE_PLACE_GPU && !bf->fits);
    if (bf)
        CHECK_EQ_INT(bf->gpu_bytes, 66157703168LL);
    moe_plan_free(p);
}

/* RTX A6000 (49140 MiB, 48500 free): budget min(46,374,322,176.0,
 * 50,855,936,000) = 46,374,322,176. Q8_0 needs 36,628,691,360 (above):
 * fits on the one GPU; BF16 needs 61,089,411,072 + 3,221,225,472 +
 * 923,533,312 = 65,234,169,856: does not. */
static void test_qwen3_a6000(void)
{
    moe_plan_model m;
    qwen3_30b(&m);
    moe_machine mach = load_machine("rtx-a6000.json");
    moe_plan *p = make(&m, &mach, 32768);
    const moe_plan_option *o = chosen(p);
    CHECK_EQ_STR(chosen_name(p, &m), "Q8_0");
    if (o) {
        CHECK_EQ_INT(o->n_gpus, 1);
        CHECK_EQ_INT(o->gpu_bytes, 36628691360LL);
        CHECK_EQ_INT(o->gpu_budget_bytes, 46374322176LL);
    }
    CHECK(strstr(moe_plan_reason(p), "the better BF16 (import) needs 60.8 GiB") != NULL);
    moe_plan_free(p);
}

/* 4x A100 80 GB (81920 MiB, 81000 free): budget min(77,309,411,328,
 * 84,934,656,000) = 77,309,411,328 each. BF16 needs 65,234,169,856 on
 * one GPU: fits there, so one GPU is used. */
static void test_qwen3_a100(void)
{
    moe_plan_model m;
    qwen3_30b(&m);
    moe_machine mach = load_machine("a100-80g-4x.json");
    moe_plan *p = make(&m, &mach, 32768);
    const moe_plan_option *o = chosen(p);
    CHECK_EQ_STR(chosen_name(p, &m), "BF16 (import)");
    if (o) {
        CHECK_EQ_INT(o->placement, MOE_PLACE_GPU);
        CHECK_EQ_INT(o->n_gpus, 1);
        CHECK_EQ_INT(o->gpu_bytes, 65234169856LL);
        CHECK_EQ_INT(o->gpu_budget_bytes, 77309411328LL);
    }
    CHECK(strstr(moe_plan_reason(p), "the best quantisation on offer") != NULL);
    moe_plan_free(p);
}

/* 64 GB without GPU: host budget min(64 GiB x 0.9, 58 GiB)
 * = min(61,847,529,062.4, 62,277,025,792) = 61,847,529,062.
 * CPU compute keeps one row of logits: 4 x 512 x (8 x 2048 + 2 x 8 x 768)
 * + 4 x 151936 + 134,217,728 = 193,545,728; host overhead 2 MiB + 160 x
 * 151936 = 26,406,912.
 *   BF16 on the CPU: 61,089,411,072 + 3,221,225,472 + 193,545,728
 *                    + 26,406,912 = 64,530,589,184: no
 *   Q8_0:            32,483,932,576 + 3,221,225,472 + 193,545,728
 *                    + 26,406,912 = 35,925,110,688: yes. */
static void test_qwen3_cpu(void)
{
    moe_plan_model m;
    qwen3_30b(&m);
    moe_machine mach = load_machine("cpu-64g.json");
    moe_plan *p = make(&m, &mach, 32768);
    const moe_plan_option *o = chosen(p);
    CHECK_EQ_STR(chosen_name(p, &m), "Q8_0");
    if (o) {
        CHECK_EQ_INT(o->placement, MOE_PLACE_CPU);
        CHECK_EQ_INT(o->n_gpus, 0);
        CHECK_EQ_INT(o->host_bytes, 35925110688LL);
        CHECK_EQ_INT(o->host_budget_bytes, 61847529062LL);
        CHECK_EQ_INT(o->gpu_bytes, 0);
    }
    CHECK(strstr(moe_plan_reason(p), "(no usable GPU)") != NULL);
    /* no GPU: only CPU options, one per variant */
    CHECK_EQ_INT(moe_plan_n_options(p), 5);
    CHECK_EQ_INT(moe_plan_verdict(p, 3, 32768), MOE_VERDICT_CPU_ONLY);
    CHECK_EQ_INT(moe_plan_verdict(p, 4, 32768), MOE_VERDICT_WONT_FIT);
    moe_plan_free(p);
}

/* Mixtral-8x7B-Instruct on one RTX 4090 at 32768 tokens: experts in RAM.
 *   KV 32 x 2 x 8 x 128 x 32768 x 2 B = 4,294,967,296
 *   compute 4 x 512 x (32000 + 8 x 4096 + 2 x 2 x 14336) = 250,085,376
 *           + 4 x 32 x 32 x 32768 = 134,217,728  -> 384,303,104
 *   Q3_K_M all on GPU: 20,363,356,096 + 4,294,967,296 + 384,303,104
 *     + 419,430,400 = 25,462,056,896 > 23,181,498,777: no GPU option fits.
 *   Q8_0 (TheBloke's 49.62 GB) split by params x bpw (routers at 32 bpw):
 *     estimates: embd 262,148,096 x 8.5/8 = 278,532,352; attention
 *     1,342,439,424 x 8.5/8 = 1,426,341,888; router 1,048,576 x 4 =
 *     4,194,304; routed 45,097,156,608 x 8.5/8 = 47,915,728,896; sum
 *     49,624,797,440; scaled by 49,620,000,000 / 49,624,797,440:
 *     routed 47,911,096,679, the rest 1,708,903,321.
 *   GPU: 1,708,903,321 + 4,294,967,296 + 384,303,104 + 419,430,400
 *      = 6,807,604,121 <= 23,181,498,777
 *   host: 47,911,096,679 + 4 x 512 x (2 x 4096 + 2 x 2 x 14336) [134,217,728]
 *       + 2 MiB + 160 x 32000 [7,217,152] = 48,052,531,559 <= min(64 GiB x 0.9, 56 GiB) =
 *       60,129,542,144
 *   expert layers that would also fit: (23,181,498,777 - 6,807,604,121)
 *       / (47,911,096,679 / 32 = 1,497,221,771) = 10 */
static void test_mixtral_hybrid(void)
{
    moe_plan_model m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "Mixtral-8x7B-Instruct-v0.1");
    m.n_layer = 32;
    m.n_embd = 4096;
    m.n_vocab = 32000;
    m.n_head = 32;
    m.n_head_kv = 8;
    m.head_dim_k = m.head_dim_v = 128;
    m.n_expert = 8;
    m.n_expert_used = 2;
    m.n_ff_expert = 14336;
    m.n_ctx_train = 32768;
    set_groups(&m, 262148096, 1342439424, 1048576, 0, 45097156608);
    add(&m, "Q3_K_M", "Q3_K_M", 20363356096);
    add(&m, "Q4_K_M", "Q4_K_M", 26440000000);
    add(&m, "Q8_0", "Q8_0", 49620000000);
    CHECK_EQ_INT(m.variants[2].group_bytes[MOE_GROUP_ROUTED_EXPERTS], 47911096679LL);
    moe_machine mach = load_machine("rtx4090-1x.json");
    moe_plan *p = make(&m, &mach, 32768);
    const moe_plan_option *o = chosen(p);
    CHECK_EQ_STR(chosen_name(p, &m), "Q8_0");
    if (o) {
        CHECK_EQ_INT(o->placement, MOE_PLACE_HYBRID);
        CHECK_EQ_INT(o->kv_bytes, 4294967296LL);
        CHECK_EQ_INT(o->compute_gpu_bytes, 384303104);
        CHECK_EQ_INT(o->weights_gpu_bytes, 1708903321LL);
        CHECK_EQ_INT(o->gpu_bytes, 6807604121LL);
        CHECK_EQ_INT(o->weights_host_bytes, 47911096679LL);
        CHECK_EQ_INT(o->compute_host_bytes, 134217728);
        CHECK_EQ_INT(o->host_bytes, 48052531559LL);
        CHECK_EQ_INT(o->host_budget_bytes, 60129542144LL);
        CHECK_EQ_INT(o->n_expert_layers_gpu, 10);
    }
    /* the smallest all-on-GPU need is Q3_K_M's 25,462,056,896 = 23.7 GiB */
    CHECK(strstr(moe_plan_reason(p), "all on GPU needs at least 23.7 GiB VRAM (Q3_K_M)") != NULL);
    CHECK_EQ_INT(moe_plan_verdict(p, 0, 32768), MOE_VERDICT_PARTIAL);

    /* At 8192 tokens Q3_K_M fits on the GPU: KV 1,073,741,824; compute
     * 250,085,376 + 4 x 32 x 32 x 8192 [33,554,432] = 283,639,808;
     * 20,363,356,096 + 1,073,741,824 + 283,639,808 + 419,430,400 =
     * 22,140,168,128 <= 23,181,498,777. Tried after 32768 it loses to the
     * hybrid option there; tried first it wins. */
    moe_plan_params prm = moe_plan_default_params();
    prm.n_ctx[0] = 8192;
    prm.n_ctx[1] = 32768;
    prm.n_n_ctx = 2;
    moe_plan *p2 = NULL;
    moe_err err = {{0}};
    CHECK_EQ_INT(moe_plan_make(&m, &mach, &prm, &p2, &err), MOE_OK);
    o = chosen(p2);
    CHECK_EQ_STR(chosen_name(p2, &m), "Q3_K_M");
    if (o) {
        CHECK_EQ_INT(o->placement, MOE_PLACE_GPU);
        CHECK_EQ_INT(o->n_ctx, 8192);
        CHECK_EQ_INT(o->gpu_bytes, 22140168128LL);
    }
    CHECK_EQ_INT(moe_plan_n_options(p2), 18); /* 2 contexts x 3 variants x 3 */
    moe_plan_free(p2);
    moe_plan_free(p);
}

/* Kimi K3 (catalog "kimi-k3": 93 layers, 24 MLA and 69 KDA linear-attention
 * layers, 896 experts, 16 used, expert FFN 3072, n_embd 7168, 96 heads,
 * vocab 163840) on the 1x RTX 4090 desktop: nothing fits.
 *   KV 24 x (512 + 64) x 32768 x 2 B = 905,969,664; KDA state 69 x 96 x
 *   128 x 128 x 4 = 434,110,464; together 1,340,080,128
 *   compute 4 x 512 x (163840 + 8 x 7168 + 2 x 16 x 3072) = 654,311,424
 *           + 4 x 32 x 96 x 32768 = 402,653,184 -> 1,056,964,608
 *   on the CPU one row of logits: 4 x 512 x (8 x 7168 + 2 x 16 x 3072)
 *           + 4 x 163840 + 402,653,184 = 722,075,648
 *   host overhead 2 MiB + 160 x 163840 = 28,311,552
 *   smallest, UD-IQ1_S (594 GB) on the CPU: 594,000,000,000 + 1,340,080,128
 *     + 722,075,648 + 28,311,552 = 596,090,467,328 (555.2 GiB) against
 *     60,129,542,144 (56.0 GiB). */
static void test_kimi_k3_wont_fit(void)
{
    moe_plan_model m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "Kimi-K3");
    m.n_layer = 93;
    m.n_embd = 7168;
    m.n_vocab = 163840;
    m.n_head = 96;
    m.kv_lora_rank = 512;
    m.qk_rope_head_dim = 64;
    m.n_layer_kv = 24;
    m.n_layer_linear = 69;
    m.linear_n_head = 96;
    m.linear_head_dim = 128;
    m.n_expert = 896;
    m.n_expert_used = 16;
    m.n_ff_expert = 3072;
    m.n_layer_moe = 92;
    m.n_ctx_train = 1048576;
    set_groups(&m, 2348831744, 36194794752, 590955008, 17609066496, 2722740830208);
    add(&m, "UD-IQ1_S", "UD-IQ1_S", 594000000000);
    add(&m, "BF16 (import)", "BF16", 0);
    moe_machine mach = load_machine("rtx4090-1x.json");
    moe_plan *p = make(&m, &mach, 32768);
    CHECK_EQ_INT(moe_plan_chosen(p), -1);
    const moe_plan_option *cpu = NULL;
    for (size_t i = 0; i < moe_plan_n_options(p); i++) {
        const moe_plan_option *o = moe_plan_option_at(p, i);
        CHECK(!o->fits);
        if (o->placement == MOE_PLACE_CPU && o->variant == 0)
            cpu = o;
    }
    CHECK(cpu != NULL);
    if (cpu) {
        CHECK_EQ_INT(cpu->kv_bytes, 1340080128LL);
        CHECK_EQ_INT(cpu->compute_host_bytes, 722075648LL);
        CHECK_EQ_INT(cpu->host_bytes, 596090467328LL);
    }
    const char *r = moe_plan_reason(p);
    CHECK_MSG(strstr(r, "does not fit: the smallest option, UD-IQ1_S at 32768 tokens, needs 555.2 GiB "
                        "of RAM") != NULL, "%s", r);
    CHECK_EQ_INT(moe_plan_verdict(p, 0, 32768), MOE_VERDICT_WONT_FIT);
    moe_plan_free(p);

    /* the 4x A100 server (960 GiB free, 1 TiB x 0.9 = 989,560,464,998 host
     * budget) takes UD-IQ1_S with the experts in RAM */
    mach = load_machine("a100-80g-4x.json");
    p = make(&m, &mach, 32768);
    CHECK_EQ_STR(chosen_name(p, &m), "UD-IQ1_S");
    if (chosen(p))
        CHECK_EQ_INT(chosen(p)->placement, MOE_PLACE_HYBRID);
    CHECK_EQ_INT(moe_plan_verdict(p, 0, 32768), MOE_VERDICT_PARTIAL);
    moe_plan_free(p);
}

/* KV formulas on their own: MLA, q8_0 cache, sliding window. */
static void test_kv_formulas(void)
{
    moe_machine mach = load_machine("cpu-64g.json");
    moe_plan_model m;

    /* DeepSeek-V2-Lite: MLA, 27 layers x (512 + 64) x 32768 x 2 B
     * = 1,019,215,872 */
    memset(&m, 0, sizeof m);
    m.n_layer = 27;
    m.n_embd = 2048;
    m.n_vocab = 102400;
    m.n_head = 16;
    m.kv_lora_rank = 512;
    m.qk_rope_head_dim = 64;
    m.n_expert = 64;
    m.n_expert_used = 6;
    m.n_ff_expert = 1408;
    m.n_layer_moe = 26;
    set_groups(&m, 419432448, 371713536, 3407872, 517079040, 14394851328);
    add(&m, NULL, "Q4_K_M", 0);
    CHECK_EQ_STR(m.variants[0].name, "Q4_K_M");
    CHECK(m.variants[0].size_estimated);
    moe_plan *p = make(&m, &mach, 32768);
    CHECK_EQ_INT(moe_plan_option_at(p, 0)->kv_bytes, 1019215872LL);
    moe_plan_free(p);

    /* Qwen3-30B with a q8_0 cache: each 512-element K or V row is 16 blocks
     * of 34 B; 48 x 2 x 544 x 32768 = 1,711,276,032 */
    qwen3_30b(&m);
    moe_plan_params prm = moe_plan_default_params();
    prm.kv_type = MOE_TYPE_Q8_0;
    prm.n_ctx[0] = 32768;
    prm.n_n_ctx = 1;
    moe_err err = {{0}};
    CHECK_EQ_INT(moe_plan_make(&m, &mach, &prm, &p, &err), MOE_OK);
    CHECK_EQ_INT(moe_plan_option_at(p, 0)->kv_bytes, 1711276032LL);
    moe_plan_free(p);

    /* gpt-oss-20b at 8192: 12 full layers x 8 x (64 + 64) x 2 B x 8192 =
     * 201,326,592; 12 sliding-window layers keep min(8192, 128 + 512) = 640
     * cells: 15,728,640; total 217,055,232 */
    memset(&m, 0, sizeof m);
    m.n_layer = 24;
    m.n_embd = 2880;
    m.n_vocab = 201088;
    m.n_head = 64;
    m.n_head_kv = 8;
    m.head_dim_k = m.head_dim_v = 64;
    m.n_swa = 128;
    m.n_layer_swa = 12;
    m.n_expert = 32;
    m.n_expert_used = 4;
    m.n_ff_expert = 2880;
    set_groups(&m, 1158269760, 637341696, 2212608, 0, 19116933120);
    add(&m, "MXFP4", "MXFP4", 12109566624);
    p = make(&m, &mach, 8192);
    CHECK_EQ_INT(moe_plan_option_at(p, 0)->kv_bytes, 217055232LL);
    moe_plan_free(p);
}

/* A plan from a GGUF file: a tiny qwen3moe-shaped model written with the
 * GGUF writer; group sizes must be the tensors' own. */
static void test_from_gguf(void)
{
    test_tmp_init("planner");
    const char *path = test_tmp_path("tiny-moe.gguf");
    moe_gguf_writer *w = moe_gguf_writer_new();
    moe_gguf_writer_set_str(w, "general.architecture", "qwen3moe");
    moe_gguf_writer_set_str(w, "general.name", "tiny moe");
    moe_gguf_writer_set_u32(w, "general.file_type", 7); /* Q8_0 */
    moe_gguf_writer_set_u32(w, "qwen3moe.block_count", 2);
    moe_gguf_writer_set_u32(w, "qwen3moe.embedding_length", 64);
    moe_gguf_writer_set_u32(w, "qwen3moe.attention.head_count", 4);
    moe_gguf_writer_set_u32(w, "qwen3moe.attention.head_count_kv", 2);
    moe_gguf_writer_set_u32(w, "qwen3moe.attention.key_length", 32);
    moe_gguf_writer_set_u32(w, "qwen3moe.attention.value_length", 32);
    moe_gguf_writer_set_u32(w, "qwen3moe.expert_count", 4);
    moe_gguf_writer_set_u32(w, "qwen3moe.expert_used_count", 2);
    moe_gguf_writer_set_u32(w, "qwen3moe.expert_feed_forward_length", 32);
    moe_gguf_writer_set_u32(w, "qwen3moe.context_length", 4096);
    static uint8_t zeros[64 * 128 * 4];
    const int64_t e[] = {64, 128}, q[] = {64, 128}, kvd[] = {64, 64}, o[] = {128, 64},
                  norm[] = {64}, router[] = {64, 4}, up[] = {64, 32, 4}, down[] = {32, 64, 4};
    moe_gguf_writer_add_tensor(w, "token_embd.weight", MOE_TYPE_Q8_0, 2, e, zeros);
    moe_gguf_writer_add_tensor(w, "output_norm.weight", MOE_TYPE_F32, 1, norm, zeros);
    moe_gguf_writer_add_tensor(w, "output.weight", MOE_TYPE_Q8_0, 2, e, zeros);
    for (int l = 0; l < 2; l++) {
        char name[64];
#define T(suffix, type, nd, ne)                                                          \
    snprintf(name, sizeof name, "blk.%d.%s", l, suffix);                                 \
    moe_gguf_writer_add_tensor(w, name, type, nd, ne, zeros)
        T("attn_norm.weight", MOE_TYPE_F32, 1, norm);
        T("attn_q.weight", MOE_TYPE_Q8_0, 2, q);
        T("attn_k.weight", MOE_TYPE_Q8_0, 2, kvd);
        T("attn_v.weight", MOE_TYPE_Q8_0, 2, kvd);
        T("attn_output.weight", MOE_TYPE_Q8_0, 2, o);
        T("ffn_norm.weight", MOE_TYPE_F32, 1, norm);
        T("ffn_gate_inp.weight", MOE_TYPE_F32, 2, router);
        T("ffn_gate_exps.weight", MOE_TYPE_Q8_0, 3, up);
        T("ffn_up_exps.weight", MOE_TYPE_Q8_0, 3, up);
        T("ffn_down_exps.weight", MOE_TYPE_Q8_0, 3, down);
#undef T
    }
    moe_err err = {{0}};
    CHECK_MSG(moe_gguf_writer_write_file(w, path, &err) == MOE_OK, "%s", err.msg);
    moe_gguf_writer_free(w);

    moe_gguf *g = NULL;
    CHECK_MSG(moe_gguf_open(path, &g, &err) == MOE_OK, "%s", err.msg);
    moe_plan_model m;
    CHECK_MSG(moe_plan_model_from_gguf(g, &m, &err) == MOE_OK, "%s", err.msg);
    CHECK_EQ_STR(m.arch, "qwen3moe");
    CHECK_EQ_STR(m.name, "tiny moe");
    CHECK_EQ_INT(m.n_layer, 2);
    CHECK_EQ_INT(m.n_vocab, 128);
    CHECK_EQ_INT(m.n_head_kv, 2);
    CHECK_EQ_INT(m.head_dim_k, 32);
    CHECK_EQ_INT(m.n_layer_moe, 2);
    CHECK_EQ_INT(m.n_ctx_train, 4096);
    CHECK_EQ_INT(m.n_variants, 1);
    CHECK_EQ_STR(m.variants[0].name, "Q8_0 (file)");
    CHECK(m.variants[0].exact_groups && !m.variants[0].size_estimated);
    /* Q8_0 rows: 64 elements = 2 blocks = 68 B.
     *   embd_output: token_embd 128 rows x 68 + output 128 x 68 + norm 256 B
     *              = 8704 + 8704 + 256 = 17,664
     *   attention per layer: q 128 x 68 + k 64 x 68 + v 64 x 68 + output
     *     (rows of 128 = 4 blocks = 136 B) 64 x 136 + 2 norms x 256
     *     = 8704 + 4352 + 4352 + 8704 + 512 = 26,624; x 2 = 53,248
     *   router: 64 x 4 x 4 B = 1024 per layer; 2,048
     *   routed: gate/up 32 x 4 rows x 68 = 8704 each, down (rows of 32 = 1
     *     block = 34 B) 64 x 4 x 34 = 8704; 26,112 per layer; 52,224 */
    CHECK_EQ_INT(m.variants[0].group_bytes[MOE_GROUP_EMBD_OUTPUT], 17664);
    CHECK_EQ_INT(m.variants[0].group_bytes[MOE_GROUP_ATTENTION], 53248);
    CHECK_EQ_INT(m.variants[0].group_bytes[MOE_GROUP_ROUTER], 2048);
    CHECK_EQ_INT(m.variants[0].group_bytes[MOE_GROUP_SHARED_EXPERTS], 0);
    CHECK_EQ_INT(m.variants[0].group_bytes[MOE_GROUP_ROUTED_EXPERTS], 52224);
    CHECK_EQ_INT(m.group_params[MOE_GROUP_ROUTED_EXPERTS], 2 * 3 * 64 * 32 * 4);
    CHECK(m.variants[0].file_bytes == moe_gguf_file_bytes(g));

    /* default context: min(32768, 4096); KV 2 x 2 x 2 x 32 x 4096 x 2 B */
    moe_machine mach = load_machine("cpu-64g.json");
    moe_plan *p = NULL;
    CHECK_EQ_INT(moe_plan_make(&m, &mach, NULL, &p, &err), MOE_OK);
    CHECK_EQ_INT(moe_plan_option_at(p, 0)->n_ctx, 4096);
    CHECK_EQ_INT(moe_plan_option_at(p, 0)->kv_bytes, 2 * 2 * 2 * 32 * 4096 * 2);
    CHECK_EQ_INT(moe_plan_chosen(p), 0);
    moe_plan_free(p);
    moe_gguf_free(g);

    /* a file without general.architecture is named as at fault */
    w = moe_gguf_writer_new();
    moe_gguf_writer_set_u32(w, "x.block_count", 2);
    moe_gguf_writer_write_file(w, path, &err);
    moe_gguf_writer_free(w);
    CHECK_EQ_INT(moe_gguf_open(path, &g, &err), MOE_OK);
    CHECK_EQ_INT(moe_plan_model_from_gguf(g, &m, &err), MOE_ERR_FORMAT);
    CHECK(strstr(err.msg, "general.architecture") != NULL);
    moe_gguf_free(g);
    test_tmp_cleanup();
}

static void test_bad_input(void)
{
    moe_plan_model m;
    moe_machine mach = load_machine("cpu-64g.json");
    moe_plan *p = (moe_plan *)&m; /* must be reset to NULL on failure */
    moe_err err = {{0}};
    qwen3_30b(&m);

    moe_plan_params prm = moe_plan_default_params();
    prm.ceiling = 1.5;
    CHECK_EQ_INT(moe_plan_make(&m, &mach, &prm, &p, &err), MOE_ERR_INVALID_ARG);
    CHECK(p == NULL && strstr(err.msg, "ceiling") != NULL);
    prm = moe_plan_default_params();
    prm.kv_type = MOE_TYPE_Q4_K;
    CHECK_EQ_INT(moe_plan_make(&m, &mach, &prm, &p, &err), MOE_ERR_INVALID_ARG);
    prm = moe_plan_default_params();
    prm.n_ctx[0] = 0;
    prm.n_n_ctx = 1;
    CHECK_EQ_INT(moe_plan_make(&m, &mach, &prm, &p, &err), MOE_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "context") != NULL);
    prm.n_n_ctx = MOE_PLAN_MAX_CTX + 1;
    CHECK_EQ_INT(moe_plan_make(&m, &mach, &prm, &p, &err), MOE_ERR_INVALID_ARG);
    CHECK_EQ_INT(moe_plan_make(NULL, &mach, NULL, &p, &err), MOE_ERR_INVALID_ARG);

    m.n_expert_used = 200;
    CHECK_EQ_INT(moe_plan_make(&m, &mach, NULL, &p, &err), MOE_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "n_expert_used") != NULL);
    qwen3_30b(&m);
    m.n_layer = 0;
    CHECK_EQ_INT(moe_plan_model_check(&m, &err), MOE_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "n_layer") != NULL && strstr(err.msg, "Qwen3-30B") != NULL);
    qwen3_30b(&m);
    m.n_variants = 0;
    CHECK_EQ_INT(moe_plan_model_check(&m, &err), MOE_ERR_INVALID_ARG);

    qwen3_30b(&m);
    CHECK_EQ_INT(moe_plan_model_add_variant(&m, "x", "Q9_K", 1, false, &err), MOE_ERR_NOT_FOUND);
    CHECK(strstr(err.msg, "Q9_K") != NULL);
    while (m.n_variants < MOE_PLAN_MAX_VARIANTS)
        add(&m, NULL, "Q4_0", 0);
    CHECK_EQ_INT(moe_plan_model_add_variant(&m, NULL, "Q4_0", 0, true, &err), MOE_ERR_RANGE);
    memset(&m, 0, sizeof m);
    CHECK_EQ_INT(moe_plan_model_add_variant(&m, NULL, "Q4_0", 0, true, &err), MOE_ERR_INVALID_ARG);

    /* absurd sizes saturate instead of wrapping: nothing fits */
    qwen3_30b(&m);
    m.n_layer = 4096;
    m.n_head = 65536;
    m.n_head_kv = 65536;
    m.head_dim_k = m.head_dim_v = 65536;
    prm = moe_plan_default_params();
    prm.n_ctx[0] = INT64_C(1) << 24;
    prm.n_n_ctx = 1;
    CHECK_EQ_INT(moe_plan_make(&m, &mach, &prm, &p, &err), MOE_OK);
    CHECK_EQ_INT(moe_plan_chosen(p), -1);
    CHECK(moe_plan_option_at(p, 0)->kv_bytes == UINT64_MAX);
    moe_plan_free(p);
    moe_plan_free(NULL);
    CHECK_EQ_INT(moe_plan_n_options(NULL), 0);
    CHECK_EQ_INT(moe_plan_chosen(NULL), -1);
}

int main(void)
{
    test_groups_and_quants();
    test_qwen3_rtx4090();
    test_qwen3_two_4090();
    test_qwen3_a6000();
    test_qwen3_a100();
    test_qwen3_cpu();
    test_mixtral_hybrid();
    test_kimi_k3_wont_fit();
    test_kv_formulas();
    test_from_gguf();
    test_bad_input();
    TEST_DONE();
}

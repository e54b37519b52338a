/*
 * test-model-load.c — loading models of each architecture, and refusing
 * broken ones with a clear message: an unknown architecture, a missing
 * tensor, a tensor of the wrong shape, a norm weight of the wrong type,
 * a missing hyperparameter, a file that is not GGUF. Each message must
 * name the thing at fault.
 */
#include "gguf-test-util.h"
#include "tiny-model.h"

static const char *archs[] = {"qwen3moe", "qwen2moe", "llama", "olmoe"};

static void load_ok(const char *arch, moe_type type)
{
    char fname[64];
    snprintf(fname, sizeof fname, "%s-%d.gguf", arch, (int)type);
    const char *path = test_tmp_path(fname);
    tiny_opts o = {.arch = arch, .type = type};
    CHECK(tiny_model_write(path, &o) == 0);
    moe_err err = {{0}};
    moe_model *m = NULL;
    CHECK_MSG(moe_model_load(path, NULL, &m, &err) == MOE_OK, "%s: %s", arch, err.msg);
    if (!m)
        return;
    CHECK_EQ_STR(moe_model_arch(m), arch);
    CHECK_EQ_STR(moe_model_name(m), "tiny test model");
    CHECK_EQ_INT(moe_model_n_vocab(m), TINY_VOCAB);
    CHECK_EQ_INT(moe_model_n_ctx_train(m), 4096);
    CHECK_EQ_INT(moe_model_n_embd(m), TINY_EMBD);
    CHECK_EQ_INT(moe_model_n_layer(m), TINY_LAYER);
    CHECK_EQ_INT(moe_model_n_expert(m), TINY_EXP);
    CHECK_EQ_INT(moe_model_n_expert_used(m), TINY_USED);
    CHECK(moe_model_n_params(m) > 0);
    CHECK(moe_model_size_bytes(m) > 0);
    CHECK(moe_model_vocab(m) != NULL);
    CHECK(moe_model_chat_template(m) == NULL);
    CHECK(moe_model_gguf(m) != NULL);
    moe_model_free(m);
}

/* Writes a broken model and checks the status and that the message
 * contains `needle`. */
static void load_bad(const char *fname, tiny_opts o, moe_status want, const char *needle)
{
    const char *path = test_tmp_path(fname);
    CHECK(tiny_model_write(path, &o) == 0);
    moe_err err = {{0}};
    moe_model *m = (moe_model *)(uintptr_t)1;
    moe_status st = moe_model_load(path, NULL, &m, &err);
    CHECK_MSG(st == want, "%s: status %s, want %s (%s)", fname, moe_status_str(st),
              moe_status_str(want), err.msg);
    CHECK(m == NULL);
    CHECK_MSG(strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", fname, err.msg, needle);
    CHECK_MSG(strstr(err.msg, fname) != NULL, "%s: message '%s' does not name the file", fname, err.msg);
}

int main(void)
{
    test_tmp_init("model-load");
    moe_model_free(NULL);
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        load_ok(archs[i], MOE_TYPE_F32);
        load_ok(archs[i], MOE_TYPE_Q8_0);
    }
    load_ok("qwen3moe", MOE_TYPE_Q4_0);

    load_bad("wrong-arch.gguf", (tiny_opts){.arch = "qwen3moe", .arch_name = "gpt2"},
             MOE_ERR_UNSUPPORTED, "architecture 'gpt2' is not supported");
    load_bad("missing-expert.gguf",
             (tiny_opts){.arch = "qwen3moe", .omit = "blk.1.ffn_up_exps.weight"},
             MOE_ERR_NOT_FOUND, "blk.1.ffn_up_exps.weight");
    load_bad("missing-qnorm.gguf",
             (tiny_opts){.arch = "qwen3moe", .omit = "blk.0.attn_q_norm.weight"},
             MOE_ERR_NOT_FOUND, "blk.0.attn_q_norm.weight");
    load_bad("missing-bias.gguf", (tiny_opts){.arch = "qwen2moe", .omit = "blk.0.attn_k.bias"},
             MOE_ERR_NOT_FOUND, "blk.0.attn_k.bias");
    load_bad("missing-shexp.gguf",
             (tiny_opts){.arch = "qwen2moe", .omit = "blk.1.ffn_down_shexp.weight"},
             MOE_ERR_NOT_FOUND, "blk.1.ffn_down_shexp.weight");
    load_bad("missing-output.gguf", (tiny_opts){.arch = "olmoe", .omit = "output.weight"},
             MOE_ERR_NOT_FOUND, "output.weight");
    load_bad("missing-embd.gguf", (tiny_opts){.arch = "llama", .omit = "token_embd.weight"},
             MOE_ERR_NOT_FOUND, "token_embd.weight");
    load_bad("shape-q.gguf", (tiny_opts){.arch = "qwen3moe", .bad_shape = "blk.0.attn_q.weight"},
             MOE_ERR_FORMAT, "'blk.0.attn_q.weight' has shape [128, 129");
    load_bad("shape-exps.gguf",
             (tiny_opts){.arch = "llama", .bad_shape = "blk.1.ffn_down_exps.weight"},
             MOE_ERR_FORMAT, "blk.1.ffn_down_exps.weight");
    load_bad("shape-norm.gguf",
             (tiny_opts){.arch = "olmoe", .bad_shape = "blk.0.attn_k_norm.weight"},
             MOE_ERR_FORMAT, "blk.0.attn_k_norm.weight");

    /* A model without the tied output is fine for qwen3moe and llama. */
    {
        const char *path = test_tmp_path("tied.gguf");
        tiny_opts o = {.arch = "qwen3moe", .omit = "output.weight"};
        CHECK(tiny_model_write(path, &o) == 0);
        moe_model *m = NULL;
        moe_err err = {{0}};
        CHECK_MSG(moe_model_load(path, NULL, &m, &err) == MOE_OK, "%s", err.msg);
        moe_model_free(m);
    }

    /* Not a file / not GGUF. */
    {
        moe_model *m = NULL;
        moe_err err = {{0}};
        CHECK(moe_model_load(test_tmp_path("does-not-exist.gguf"), NULL, &m, &err) != MOE_OK);
        CHECK(strstr(err.msg, "does-not-exist.gguf") != NULL);
        const char *junk = test_tmp_path("junk.gguf");
        FILE *f = fopen(junk, "wb");
        fputs("this is not a model", f);
        fclose(f);
        CHECK(moe_model_load(junk, NULL, &m, &err) == MOE_ERR_FORMAT);
        CHECK(m == NULL);
        CHECK(moe_model_load(NULL, NULL, &m, &err) == MOE_ERR_INVALID_ARG);
    }
    test_tmp_cleanup();
    TEST_DONE();
}

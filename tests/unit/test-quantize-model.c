/*
 * test-quantize-model.c — whole-model quantisation (quantize-model.c) on a
 * small MoE-shaped model built with the GGUF writer: every target type,
 * reopened and checked for copied metadata, the llama.cpp file type, the
 * per-tensor types of the plan, dequantised values within each format's
 * error, progress reports, thread-count independence, byte copies of
 * tensors already in their type, in-place conversion, and errors that must
 * leave no output file behind. Files are created in the working directory
 * under relative names, which also works under wine.
 */
#include "moe.h"
#include "test.h"

#define N_EMBD 256
#define N_VOCAB 64
#define N_EXPERT 4

typedef struct model_tensor {
    const char *name;
    moe_type    type;   /* stored type in the source model */
    uint32_t    n_dims;
    int64_t     ne[4];
} model_tensor;

static const model_tensor k_tensors[] = {
    { "token_embd.weight",          MOE_TYPE_F32,  2, { N_EMBD, N_VOCAB, 1, 1 } },
    { "output_norm.weight",         MOE_TYPE_F32,  1, { N_EMBD, 1, 1, 1 } },
    { "output.weight",              MOE_TYPE_F32,  2, { N_EMBD, N_VOCAB, 1, 1 } },
    { "blk.0.attn_norm.weight",     MOE_TYPE_F32,  1, { N_EMBD, 1, 1, 1 } },
    { "blk.0.attn_q.weight",        MOE_TYPE_F16,  2, { N_EMBD, N_EMBD, 1, 1 } },
    { "blk.0.attn_k.weight",        MOE_TYPE_BF16, 2, { N_EMBD, 64, 1, 1 } },
    { "blk.0.attn_v.weight",        MOE_TYPE_F32,  2, { N_EMBD, 64, 1, 1 } },
    { "blk.0.ffn_gate_inp.weight",  MOE_TYPE_F32,  2, { N_EMBD, N_EXPERT, 1, 1 } },
    { "blk.0.ffn_down_exps.weight", MOE_TYPE_F32,  3, { N_EMBD, N_EMBD, N_EXPERT, 1 } },
    { "blk.1.ffn_up_exps.weight",   MOE_TYPE_F32,  3, { N_EMBD, 128, N_EXPERT, 1 } },
    { "blk.1.ffn_down_exps.weight", MOE_TYPE_Q8_0, 3, { N_EMBD, N_EMBD, N_EXPERT, 1 } },
    { "blk.1.odd32.weight",         MOE_TYPE_F32,  2, { 96, 8, 1, 1 } },
    { "blk.1.odd.weight",           MOE_TYPE_F32,  2, { 100, 3, 1, 1 } },
};
#define N_TENSORS ((int)(sizeof k_tensors / sizeof k_tensors[0]))

static int64_t n_elems(const model_tensor *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* The source values of tensor i (before its storage rounding). */
static void fill_values(int i, float *x, int64_t n)
{
    uint64_t s = 0x2545f4914f6cdd1dull * (uint64_t)(i + 1);
    for (int64_t k = 0; k < n; k++) {
        float v = 0;
        for (int j = 0; j < 4; j++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            v += (float)(s >> 40) / (float)(1 << 24) - 0.5f;
        }
        x[k] = v * 0.05f + (strstr(k_tensors[i].name, "norm") ? 1.0f : 0.0f);
    }
}

static float *source_values[N_TENSORS]; /* as stored: after F16/BF16/Q8_0 rounding */

static bool file_exists(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

static void write_source_model(const char *path)
{
    moe_err err = {{0}};
    moe_gguf_writer *w = moe_gguf_writer_new();
    CHECK(w != NULL);
    CHECK(moe_gguf_writer_set_str(w, "general.architecture", "qwen3moe") == MOE_OK);
    CHECK(moe_gguf_writer_set_str(w, "general.name", "tiny test model") == MOE_OK);
    CHECK(moe_gguf_writer_set_u32(w, "qwen3moe.block_count", 2) == MOE_OK);
    CHECK(moe_gguf_writer_set_u32(w, "qwen3moe.expert_count", N_EXPERT) == MOE_OK);
    CHECK(moe_gguf_writer_set_u32(w, "general.file_type", 0) == MOE_OK);
    const moe_str toks[3] = { { "a", 1 }, { "bc", 2 }, { "<s>", 3 } };
    CHECK(moe_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3) == MOE_OK);
    const int32_t ids[4] = { 1, -2, 3, 40000 };
    CHECK(moe_gguf_writer_set_arr(w, "test.ints", MOE_GGUF_INT32, ids, 4) == MOE_OK);
    CHECK(moe_gguf_writer_set_u16(w, "split.no", 0) == MOE_OK);

    void *data[N_TENSORS];
    for (int i = 0; i < N_TENSORS; i++) {
        const model_tensor *t = &k_tensors[i];
        const int64_t n = n_elems(t);
        float *x = malloc((size_t)n * sizeof *x);
        data[i] = malloc(moe_type_row_bytes(t->type, n));
        source_values[i] = malloc((size_t)n * sizeof(float));
        fill_values(i, x, n);
        CHECK(moe_quantize_row(t->type, x, data[i], n) == MOE_OK);
        CHECK(moe_dequantize_row(t->type, data[i], source_values[i], n) == MOE_OK);
        free(x);
        CHECK(moe_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, data[i]) == MOE_OK);
    }
    CHECK_MSG(moe_gguf_writer_write_file(w, path, &err) == MOE_OK, "%s", err.msg);
    moe_gguf_writer_free(w);
    for (int i = 0; i < N_TENSORS; i++)
        free(data[i]);
}

typedef struct progress_log {
    int64_t last_done, total;
    int     calls;
    bool    monotone;
} progress_log;

static void on_progress(void *user, int64_t done, int64_t total)
{
    progress_log *log = user;
    if (done < log->last_done || (log->calls > 0 && total != log->total) || done > total)
        log->monotone = false;
    log->last_done = done;
    log->total = total;
    log->calls++;
}

/* The type the plan should give tensor i for target t (see quant-plan.c). */
static moe_type expected_type(int i, moe_type target)
{
    const char *name = k_tensors[i].name;
    if (k_tensors[i].n_dims < 2 || strstr(name, "norm") || strstr(name, "ffn_gate_inp"))
        return MOE_TYPE_F32;
    if (target == MOE_TYPE_F16 || target == MOE_TYPE_BF16 || target == MOE_TYPE_F32)
        return target;
    if (strcmp(name, "blk.1.odd.weight") == 0)
        return MOE_TYPE_F16;
    if (strcmp(name, "blk.1.odd32.weight") == 0)
        return target == MOE_TYPE_Q4_0 ? MOE_TYPE_Q4_0 : MOE_TYPE_Q8_0;
    if (strcmp(name, "output.weight") == 0)
        return target == MOE_TYPE_Q8_0 ? MOE_TYPE_Q8_0 : MOE_TYPE_Q6_K;
    /* Q4_K_M's use_more_bits(i, n): i < n/8 || i >= 7n/8 || (i - n/8) % 3
     * == 2. The one attn_v (0 of 1) qualifies; of the 2 layers' ffn_down
     * only layer 1 (1 >= 7*2/8). */
    if (target == MOE_TYPE_Q4_K &&
        (strstr(name, "attn_v") || strcmp(name, "blk.1.ffn_down_exps.weight") == 0))
        return MOE_TYPE_Q6_K;
    return target;
}

/* RMSE bound relative to the data's spread (0.05 * unit-variance sums):
 * generous multiples of what each format reaches on such data. */
static double rel_bound(moe_type t)
{
    switch (t) {
    case MOE_TYPE_F32:  return 1e-7;
    case MOE_TYPE_F16:  return 1e-3;
    case MOE_TYPE_BF16: return 5e-3;
    case MOE_TYPE_Q8_0: return 1e-2;
    case MOE_TYPE_Q6_K: return 2.5e-2;
    case MOE_TYPE_Q4_K: return 0.1;
    case MOE_TYPE_Q4_0: return 0.15;
    default:            return 0;
    }
}

/* Reopens `path` and checks it is the source model converted to `target`. */
static void check_model(const char *path, moe_type target)
{
    moe_err err = {{0}};
    moe_gguf *g = NULL;
    CHECK_MSG(moe_gguf_open(path, &g, &err) == MOE_OK, "%s", err.msg);
    if (g == NULL)
        return;
    const uint32_t ftype = target == MOE_TYPE_F32 ? 0 : target == MOE_TYPE_F16 ? 1
                         : target == MOE_TYPE_Q4_0 ? 2 : target == MOE_TYPE_Q8_0 ? 7
                         : target == MOE_TYPE_Q4_K ? 15 : target == MOE_TYPE_Q6_K ? 18 : 32;
    CHECK_EQ_INT(moe_gguf_u64_or(g, "general.file_type", 999), ftype);
    CHECK_EQ_INT(moe_gguf_u64_or(g, "general.quantization_version", 0), 2);
    CHECK_EQ_STR(moe_gguf_str_or(g, "general.name", NULL), "tiny test model");
    CHECK_EQ_INT(moe_gguf_u64_or(g, "qwen3moe.expert_count", 0), N_EXPERT);
    CHECK(moe_gguf_find_key(g, "split.no") < 0);
    const int64_t ki = moe_gguf_find_key(g, "tokenizer.ggml.tokens");
    CHECK(ki >= 0 && moe_gguf_arr_len(g, ki) == 3);
    if (ki >= 0) {
        moe_str s = moe_gguf_arr_str(g, ki, 2);
        CHECK(s.len == 3 && memcmp(s.ptr, "<s>", 3) == 0);
    }
    const int64_t ii = moe_gguf_find_key(g, "test.ints");
    CHECK(ii >= 0 && moe_gguf_arr_type(g, ii) == MOE_GGUF_INT32 && moe_gguf_arr_len(g, ii) == 4);
    if (ii >= 0) {
        int32_t v[4];
        memcpy(v, moe_gguf_arr_data(g, ii), sizeof v);
        CHECK(v[0] == 1 && v[1] == -2 && v[3] == 40000);
    }

    CHECK_EQ_INT(moe_gguf_n_tensors(g), N_TENSORS);
    for (int i = 0; i < N_TENSORS && i < moe_gguf_n_tensors(g); i++) {
        const model_tensor *want = &k_tensors[i];
        const moe_gguf_tensor *t = moe_gguf_tensor_at(g, i);
        CHECK_EQ_STR(t->name, want->name);
        CHECK_EQ_INT(t->n_dims, want->n_dims);
        for (int d = 0; d < 4; d++)
            CHECK_EQ_INT(t->ne[d], want->ne[d]);
        /* A Q8_0 source tensor whose chosen type is Q8_0 is copied. */
        moe_type exp = expected_type(i, target);
        CHECK_MSG(t->type == exp, "%s: %s, expected %s", t->name,
                  moe_type_name(t->type), moe_type_name(exp));
        const int64_t n = n_elems(want);
        float *y = malloc((size_t)n * sizeof *y);
        CHECK(moe_dequantize_row(t->type, t->data, y, n) == MOE_OK);
        double se = 0;
        for (int64_t k = 0; k < n; k++)
            se += ((double)y[k] - source_values[i][k]) * ((double)y[k] - source_values[i][k]);
        const double rmse = sqrt(se / (double)n);
        /* the data's spread is 0.05 * sqrt(4/12) ~ 0.029 */
        CHECK_MSG(rmse <= rel_bound(t->type) * 0.029 + 1e-12, "%s as %s: rmse %g",
                  t->name, moe_type_name(t->type), rmse);
        free(y);
    }
    moe_gguf_free(g);
}

static void test_targets(void)
{
    const moe_type targets[] = { MOE_TYPE_Q8_0, MOE_TYPE_Q4_0, MOE_TYPE_Q4_K, MOE_TYPE_Q6_K,
                                 MOE_TYPE_F16, MOE_TYPE_BF16, MOE_TYPE_F32 };
    for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++) {
        moe_err err = {{0}};
        moe_quantize_params params;
        moe_quantize_params_init(&params, targets[k]);
        progress_log log = { .monotone = true };
        params.progress = on_progress;
        params.progress_user = &log;
        params.n_threads = k % 2 ? 3 : 1;
        CHECK_MSG(moe_model_quantize_ex("tqm-src.gguf", "tqm-out.gguf", &params, &err) == MOE_OK,
                  "%s: %s", moe_type_name(targets[k]), err.msg);
        CHECK(log.monotone && log.calls >= N_TENSORS && log.last_done == log.total);
        CHECK(log.total > 0);
        CHECK(!file_exists("tqm-out.gguf.part") && !file_exists("tqm-out.gguf.part.tmp"));
        check_model("tqm-out.gguf", targets[k]);
    }
}

static bool same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

static void test_threads_and_copies(void)
{
    moe_err err = {{0}};
    moe_quantize_params params;
    moe_quantize_params_init(&params, MOE_TYPE_Q4_K);
    params.n_threads = 1;
    CHECK(moe_model_quantize_ex("tqm-src.gguf", "tqm-a.gguf", &params, &err) == MOE_OK);
    params.n_threads = 4;
    CHECK(moe_model_quantize_ex("tqm-src.gguf", "tqm-b.gguf", &params, &err) == MOE_OK);
    CHECK(same_file("tqm-a.gguf", "tqm-b.gguf")); /* threads change nothing */

    /* Q4_K -> Q4_K: every tensor already has its type: a byte copy, apart
     * from general.file_type (15 both times). */
    CHECK(moe_model_quantize("tqm-a.gguf", "tqm-c.gguf", MOE_TYPE_Q4_K, &err) == MOE_OK);
    CHECK(same_file("tqm-a.gguf", "tqm-c.gguf"));
    /* In place: the result replaces the input. */
    CHECK_MSG(moe_model_quantize("tqm-c.gguf", "tqm-c.gguf", MOE_TYPE_Q8_0, &err) == MOE_OK,
              "%s", err.msg);
    moe_gguf *g = NULL;
    CHECK(moe_gguf_open("tqm-c.gguf", &g, &err) == MOE_OK);
    CHECK(g && moe_gguf_u64_or(g, "general.file_type", 0) == 7);
    const moe_gguf_tensor *t = g ? moe_gguf_find_tensor(g, "blk.0.attn_q.weight") : NULL;
    CHECK(t && t->type == MOE_TYPE_Q8_0);
    moe_gguf_free(g);
    remove("tqm-a.gguf");
    remove("tqm-b.gguf");
    remove("tqm-c.gguf");
}

static void test_errors(void)
{
    moe_err err = {{0}};
    /* An existing output survives every failure untouched. */
    FILE *f = fopen("tqm-keep.gguf", "wb");
    CHECK(f != NULL);
    if (f) {
        fputs("old", f);
        fclose(f);
    }
    CHECK(moe_model_quantize("tqm-missing.gguf", "tqm-keep.gguf", MOE_TYPE_Q8_0, &err) != MOE_OK);
    CHECK(strstr(err.msg, "tqm-missing.gguf") != NULL);
    CHECK(moe_model_quantize("tqm-src.gguf", "tqm-keep.gguf", (moe_type)3, &err) ==
          MOE_ERR_UNSUPPORTED);
    CHECK(moe_model_quantize("tqm-src.gguf", "tqm-keep.gguf", (moe_type)99, &err) ==
          MOE_ERR_UNSUPPORTED);
    CHECK(!file_exists("tqm-keep.gguf.part") && !file_exists("tqm-keep.gguf.part.tmp"));
    f = fopen("tqm-keep.gguf", "rb");
    char buf[8] = { 0 };
    CHECK(f && fread(buf, 1, sizeof buf, f) == 3 && strcmp(buf, "old") == 0);
    if (f)
        fclose(f);
    remove("tqm-keep.gguf");
    /* A garbage input is rejected by the reader, nothing written. */
    f = fopen("tqm-bad.gguf", "wb");
    if (f) {
        fputs("GGUF but not really", f);
        fclose(f);
    }
    CHECK(moe_model_quantize("tqm-bad.gguf", "tqm-x.gguf", MOE_TYPE_Q8_0, &err) != MOE_OK);
    CHECK(!file_exists("tqm-x.gguf") && !file_exists("tqm-x.gguf.part"));
    remove("tqm-bad.gguf");
    /* An output directory that does not exist. */
    CHECK(moe_model_quantize("tqm-src.gguf", "tqm-no-such-dir/x.gguf", MOE_TYPE_Q8_0, &err) ==
          MOE_ERR_IO);
    CHECK(moe_model_quantize(NULL, "x", MOE_TYPE_Q8_0, &err) == MOE_ERR_INVALID_ARG);
    CHECK(moe_model_quantize_ex("tqm-src.gguf", "x", NULL, &err) == MOE_ERR_INVALID_ARG);
}

int main(void)
{
    write_source_model("tqm-src.gguf");
    test_targets();
    test_threads_and_copies();
    test_errors();
    remove("tqm-src.gguf");
    remove("tqm-out.gguf");
    for (int i = 0; i < N_TENSORS; i++)
        free(source_values[i]);
    TEST_DONE();
}

/*
 * test-decode.c — decoding through the public API on tiny random models of
 * every architecture:
 *   - eight different sequences decoded together, in batches that mix
 *     prefill chunks and single decode tokens of several sequences, give
 *     the logits each sequence gives alone;
 *   - a sequence copied and truncated continues exactly like a fresh one
 *     fed the same tokens (prefix reuse), and so does a truncated one;
 *   - thread counts, kernel sets (scalar vs. the best this CPU has) and
 *     the Q8_0 KV cache change logits only within rounding;
 *   - bad batches (empty, too long, bad ids, positions that go backwards,
 *     a full context) fail with a clear message and leave the cache as it
 *     was.
 */
#include "gguf-test-util.h"
#include "tiny-model.h"

#define N_SEQ   8
#define MAX_LEN 24

static uint64_t rng = 42;

static int32_t rand_token(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (int32_t)(rng % TINY_VOCAB);
}

static moe_context *new_ctx(const moe_model *m, int n_seq, int n_ctx, int n_batch, int threads,
                            moe_type kv)
{
    moe_context_params p = moe_context_default_params();
    p.n_seq_max = n_seq;
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.n_threads = threads;
    p.kv_type = kv;
    moe_context *c = NULL;
    moe_err err = {{0}};
    CHECK_MSG(moe_context_new(m, &p, &c, &err) == MOE_OK, "%s", err.msg);
    return c;
}

/* Decodes tokens [0, n) of one sequence starting at position pos0 in
 * chunks of `chunk`, storing every position's logits in out. */
static void run_seq(moe_context *c, int32_t seq, const int32_t *toks, int n, int pos0, int chunk,
                    float *out)
{
    moe_batch *b = moe_batch_new(chunk);
    for (int i0 = 0; i0 < n; i0 += chunk) {
        moe_batch_clear(b);
        for (int i = i0; i < n && i < i0 + chunk; i++)
            moe_batch_add(b, toks[i], pos0 + i, seq, true);
        moe_err err = {{0}};
        CHECK_MSG(moe_decode(c, b, &err) == MOE_OK, "%s", err.msg);
        for (int j = 0; j < b->n_tokens; j++) {
            const float *l = moe_get_logits(c, j);
            CHECK(l != NULL);
            if (l)
                memcpy(out + (size_t)(i0 + j) * TINY_VOCAB, l, TINY_VOCAB * sizeof(float));
        }
    }
    moe_batch_free(b);
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* Largest difference of softmax probabilities over n rows. */
static double max_prob_diff(const float *a, const float *b, int rows)
{
    double d = 0;
    for (int r = 0; r < rows; r++) {
        const float *x = a + (size_t)r * TINY_VOCAB, *y = b + (size_t)r * TINY_VOCAB;
        double mx = x[0], my = y[0], sx = 0, sy = 0;
        for (int i = 1; i < TINY_VOCAB; i++) {
            mx = fmax(mx, x[i]);
            my = fmax(my, y[i]);
        }
        for (int i = 0; i < TINY_VOCAB; i++) {
            sx += exp(x[i] - mx);
            sy += exp(y[i] - my);
        }
        for (int i = 0; i < TINY_VOCAB; i++)
            d = fmax(d, fabs(exp(x[i] - mx) / sx - exp(y[i] - my) / sy));
    }
    return d;
}

static int argmax(const float *v)
{
    int best = 0;
    for (int i = 1; i < TINY_VOCAB; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

static void test_batched(const moe_model *m, const char *arch)
{
    static int32_t toks[N_SEQ][MAX_LEN];
    static float alone[N_SEQ][MAX_LEN * TINY_VOCAB], mixed[N_SEQ][MAX_LEN * TINY_VOCAB];
    int len[N_SEQ];
    for (int s = 0; s < N_SEQ; s++) {
        len[s] = 3 + (s * 5) % (MAX_LEN - 3);
        for (int i = 0; i < len[s]; i++)
            toks[s][i] = rand_token();
    }
    moe_context *c1 = new_ctx(m, 1, 64, 32, 2, MOE_TYPE_F16);
    for (int s = 0; s < N_SEQ && c1; s++) {
        moe_kv_clear(c1);
        run_seq(c1, 0, toks[s], len[s], 0, 7, alone[s]);
    }
    moe_context_free(c1);

    /* All eight at once: each step takes a chunk of 1..4 tokens from every
     * unfinished sequence (prefill chunks next to single tokens). */
    moe_context *c = new_ctx(m, N_SEQ, 256, 32, 2, MOE_TYPE_F16);
    if (!c)
        return;
    moe_batch *b = moe_batch_new(32);
    int done[N_SEQ] = {0};
    int32_t where_s[32], where_i[32];
    for (int step = 0;; step++) {
        moe_batch_clear(b);
        for (int s = 0; s < N_SEQ; s++) {
            int take = 1 + (s + step) % 4;
            for (int k = 0; k < take && done[s] < len[s]; k++, done[s]++) {
                where_s[b->n_tokens] = s;
                where_i[b->n_tokens] = done[s];
                moe_batch_add(b, toks[s][done[s]], done[s], s, true);
            }
        }
        if (b->n_tokens == 0)
            break;
        moe_err err = {{0}};
        CHECK_MSG(moe_decode(c, b, &err) == MOE_OK, "%s", err.msg);
        for (int j = 0; j < b->n_tokens; j++) {
            const float *l = moe_get_logits(c, j);
            if (l)
                memcpy(mixed[where_s[j]] + (size_t)where_i[j] * TINY_VOCAB, l, TINY_VOCAB * sizeof(float));
        }
    }
    for (int s = 0; s < N_SEQ; s++) {
        double d = max_diff(alone[s], mixed[s], (size_t)len[s] * TINY_VOCAB);
        CHECK_MSG(d < 2e-3, "%s: sequence %d batched differs from alone by %g", arch, s, d);
        CHECK_EQ_INT(moe_kv_seq_pos_max(c, s), len[s] - 1);
        CHECK_EQ_INT(moe_kv_seq_pos_min(c, s), 0);
    }
    int total = 0;
    for (int s = 0; s < N_SEQ; s++)
        total += len[s];
    CHECK_EQ_INT(moe_kv_n_used(c), total);

    /* Only some logits asked for: the others are NULL. */
    moe_batch_clear(b);
    moe_batch_add(b, 5, len[0], 0, false);
    moe_batch_add(b, 6, len[1], 1, true);
    moe_err err = {{0}};
    CHECK(moe_decode(c, b, &err) == MOE_OK);
    CHECK(moe_get_logits(c, 0) == NULL);
    CHECK(moe_get_logits(c, 1) != NULL);
    CHECK(moe_get_logits(c, 2) == NULL);
    CHECK(moe_get_logits(c, -1) == NULL);
    moe_batch_free(b);
    moe_context_free(c);
}

/* Prefix reuse: seq 0 holds P (16 tokens). Copy its first 10 to seq 1,
 * continue seq 1 with Q; truncate seq 0 to 12 and continue with R. Both
 * must match fresh runs of P[0:10]+Q and P[0:12]+R. */
static void test_copy_truncate(const moe_model *m, const char *arch)
{
    int32_t P[16], Q[6], R[5], PQ[16], PR[17];
    for (int i = 0; i < 16; i++) P[i] = rand_token();
    for (int i = 0; i < 6; i++) Q[i] = rand_token();
    for (int i = 0; i < 5; i++) R[i] = rand_token();
    memcpy(PQ, P, 10 * sizeof(int32_t));
    memcpy(PQ + 10, Q, 6 * sizeof(int32_t));
    memcpy(PR, P, 12 * sizeof(int32_t));
    memcpy(PR + 12, R, 5 * sizeof(int32_t));
    static float fresh_q[16 * TINY_VOCAB], fresh_r[17 * TINY_VOCAB], got[17 * TINY_VOCAB];

    moe_context *c = new_ctx(m, 4, 128, 16, 2, MOE_TYPE_F16);
    if (!c)
        return;
    run_seq(c, 0, PQ, 16, 0, 16, fresh_q);
    moe_kv_clear(c);
    CHECK_EQ_INT(moe_kv_n_used(c), 0);
    run_seq(c, 0, PR, 17, 0, 5, fresh_r);
    moe_kv_clear(c);

    run_seq(c, 0, P, 16, 0, 8, got);
    moe_kv_seq_copy(c, 0, 1, 0, 10);
    CHECK_EQ_INT(moe_kv_seq_pos_max(c, 1), 9);
    CHECK_EQ_INT(moe_kv_n_used(c), 16); /* shared, not copied */
    run_seq(c, 1, Q, 6, 10, 4, got);
    CHECK_MSG(max_diff(got, fresh_q + 10 * TINY_VOCAB, 6 * TINY_VOCAB) < 2e-3,
              "%s: copied prefix continues differently", arch);
    CHECK(moe_kv_seq_rm(c, 0, 12, -1));
    CHECK_EQ_INT(moe_kv_seq_pos_max(c, 0), 11);
    run_seq(c, 0, R, 5, 12, 5, got);
    CHECK_MSG(max_diff(got, fresh_r + 12 * TINY_VOCAB, 5 * TINY_VOCAB) < 2e-3,
              "%s: truncated sequence continues differently", arch);
    /* Sequence 1 is untouched by the truncation of 0. */
    CHECK_EQ_INT(moe_kv_seq_pos_max(c, 1), 15);
    moe_kv_seq_keep(c, 1);
    CHECK_EQ_INT(moe_kv_seq_pos_max(c, 0), -1);
    CHECK_EQ_INT(moe_kv_n_used(c), 16);
    CHECK(moe_kv_seq_rm(c, -1, -1, -1));
    CHECK_EQ_INT(moe_kv_n_used(c), 0);
    CHECK(!moe_kv_seq_rm(c, 4, -1, -1));
    moe_context_free(c);
}

/* Threads, kernel sets and the Q8_0 cache only change rounding. With
 * quantised weights the activations are re-quantised after every product,
 * so a rounding difference can move an int8 by one step: compare
 * probabilities there instead of raw logits. */
static void test_variants(const moe_model *m, const char *arch, bool quantised)
{
    int32_t t[20];
    for (int i = 0; i < 20; i++)
        t[i] = rand_token();
    static float base[20 * TINY_VOCAB], other[20 * TINY_VOCAB];
    moe_context *c = new_ctx(m, 1, 64, 8, 2, MOE_TYPE_F16);
    if (!c)
        return;
    run_seq(c, 0, t, 20, 0, 8, base);
    moe_context_free(c);

    c = new_ctx(m, 1, 64, 8, 3, MOE_TYPE_F16);
    run_seq(c, 0, t, 20, 0, 3, other);
    CHECK_MSG(max_diff(base, other, 20 * TINY_VOCAB) < 2e-3, "%s: 3 threads differ by %g", arch,
              max_diff(base, other, 20 * TINY_VOCAB));
    moe_context_free(c);

    c = new_ctx(m, 1, 64, 8, 2, MOE_TYPE_Q8_0);
    run_seq(c, 0, t, 20, 0, 8, other);
    int same = 0;
    for (int i = 0; i < 20; i++)
        same += argmax(base + i * TINY_VOCAB) == argmax(other + i * TINY_VOCAB);
    CHECK_MSG(same >= 19, "%s: Q8_0 KV cache changes the top token at %d of 20", arch, 20 - same);
    CHECK_MSG(max_prob_diff(base, other, 20) < 0.25, "%s: Q8_0 KV cache: probabilities differ by %g",
              arch, max_prob_diff(base, other, 20));
    moe_context_free(c);

    c = new_ctx(m, 1, 64, 8, 2, MOE_TYPE_F32);
    run_seq(c, 0, t, 20, 0, 8, other);
    CHECK_MSG(max_prob_diff(base, other, 20) < 0.05, "%s: F32 KV cache: probabilities differ by %g",
              arch, max_prob_diff(base, other, 20));
    moe_context_free(c);

#ifdef _WIN32
    _putenv("MOE_CPU_ISA=scalar");
#else
    setenv("MOE_CPU_ISA", "scalar", 1);
#endif
    c = new_ctx(m, 1, 64, 8, 2, MOE_TYPE_F16);
    CHECK_EQ_STR(moe_context_cpu_isa(c), "scalar");
    run_seq(c, 0, t, 20, 0, 8, other);
    if (quantised)
        CHECK_MSG(max_prob_diff(base, other, 20) < 0.02, "%s: scalar kernels: probabilities differ by %g",
                  arch, max_prob_diff(base, other, 20));
    else
        CHECK_MSG(max_diff(base, other, 20 * TINY_VOCAB) < 2e-3, "%s: scalar kernels differ by %g",
                  arch, max_diff(base, other, 20 * TINY_VOCAB));
    moe_context_free(c);
#ifdef _WIN32
    _putenv("MOE_CPU_ISA=");
#else
    unsetenv("MOE_CPU_ISA");
#endif
}

static void expect_fail(moe_context *c, moe_batch *b, moe_status want, const char *needle)
{
    int32_t used = moe_kv_n_used(c);
    moe_err err = {{0}};
    moe_status st = moe_decode(c, b, &err);
    CHECK_MSG(st == want, "status %s (%s), want %s", moe_status_str(st), err.msg,
              moe_status_str(want));
    CHECK_MSG(strstr(err.msg, needle) != NULL, "message '%s' lacks '%s'", err.msg, needle);
    CHECK_EQ_INT(moe_kv_n_used(c), used);
}

static void test_bad_batches(const moe_model *m)
{
    moe_context *c = new_ctx(m, 2, 16, 8, 2, MOE_TYPE_F16);
    if (!c)
        return;
    moe_batch *b = moe_batch_new(32);
    expect_fail(c, b, MOE_ERR_INVALID_ARG, "empty");
    for (int i = 0; i < 20; i++)
        moe_batch_add(b, 3, i, 0, true);
    expect_fail(c, b, MOE_ERR_RANGE, "longer than the context");
    b->n_tokens = 9;
    expect_fail(c, b, MOE_ERR_INVALID_ARG, "exceeds n_batch");

    moe_batch_clear(b);
    moe_batch_add(b, 3, 0, 0, true);
    moe_batch_add(b, TINY_VOCAB, 1, 0, true);
    expect_fail(c, b, MOE_ERR_INVALID_ARG, "outside the vocabulary");
    b->token[1] = -1;
    expect_fail(c, b, MOE_ERR_INVALID_ARG, "id -1");
    b->token[1] = 4;
    b->seq_id[1] = 2;
    expect_fail(c, b, MOE_ERR_INVALID_ARG, "sequence id 2");
    b->seq_id[1] = 0;
    b->pos[1] = 0;
    expect_fail(c, b, MOE_ERR_INVALID_ARG, "does not follow");
    b->pos[1] = -5;
    expect_fail(c, b, MOE_ERR_INVALID_ARG, "position -5");
    b->pos[1] = 1;
    moe_err err = {{0}};
    CHECK(moe_decode(c, b, &err) == MOE_OK);
    CHECK_EQ_INT(moe_kv_n_used(c), 2);
    /* repeating a position already in the cache */
    moe_batch_clear(b);
    moe_batch_add(b, 3, 1, 0, true);
    expect_fail(c, b, MOE_ERR_INVALID_ARG, "does not follow its previous position 1");

    /* fill the context, then one more token */
    moe_batch_clear(b);
    for (int i = 0; i < 8; i++)
        moe_batch_add(b, 7, 2 + i, 0, false);
    CHECK(moe_decode(c, b, &err) == MOE_OK);
    moe_batch_clear(b);
    for (int i = 0; i < 6; i++)
        moe_batch_add(b, 7, i, 1, i == 5);
    CHECK(moe_decode(c, b, &err) == MOE_OK);
    CHECK_EQ_INT(moe_kv_n_used(c), 16);
    moe_batch_clear(b);
    moe_batch_add(b, 7, 6, 1, true);
    expect_fail(c, b, MOE_ERR_RANGE, "context full");
    /* freeing cells makes room again */
    CHECK(moe_kv_seq_rm(c, 0, 5, -1));
    CHECK(moe_decode(c, b, &err) == MOE_OK);
    CHECK(moe_decode(NULL, b, &err) == MOE_ERR_INVALID_ARG);
    CHECK(moe_decode(c, NULL, &err) == MOE_ERR_INVALID_ARG);
    moe_batch_free(b);
    moe_context_free(c);

    /* bad context parameters */
    moe_context_params p = moe_context_default_params();
    p.n_seq_max = 65;
    CHECK(moe_context_new(m, &p, &c, &err) == MOE_ERR_INVALID_ARG);
    CHECK(c == NULL);
    p = moe_context_default_params();
    p.kv_type = MOE_TYPE_Q4_K;
    CHECK(moe_context_new(m, &p, &c, &err) == MOE_ERR_UNSUPPORTED);
    CHECK(moe_context_new(NULL, &p, &c, &err) == MOE_ERR_INVALID_ARG);
    moe_context_free(NULL);
    moe_batch_free(NULL);
    CHECK(moe_batch_new(0) == NULL);
}

int main(void)
{
    test_tmp_init("decode");
    static const char *archs[] = {"qwen3moe", "qwen2moe", "llama", "olmoe"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        char fname[64];
        snprintf(fname, sizeof fname, "%s.gguf", archs[i]);
        const char *path = test_tmp_path(fname);
        tiny_opts o = {.arch = archs[i], .type = i % 2 ? MOE_TYPE_Q8_0 : MOE_TYPE_F32, .seed = 7 + i};
        CHECK(tiny_model_write(path, &o) == 0);
        moe_model *m = NULL;
        moe_err err = {{0}};
        CHECK_MSG(moe_model_load(path, NULL, &m, &err) == MOE_OK, "%s", err.msg);
        if (!m)
            continue;
        fprintf(stderr, "%s (%s)\n", archs[i], moe_type_name(o.type));
        test_batched(m, archs[i]);
        test_copy_truncate(m, archs[i]);
        test_variants(m, archs[i], o.type != MOE_TYPE_F32);
        if (i == 0)
            test_bad_batches(m);
        moe_model_free(m);
    }
    test_tmp_cleanup();
    TEST_DONE();
}

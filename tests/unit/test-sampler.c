/*
 * test-sampler.c — the sampler's contract (moe.h, "Sampling"): parameter
 * checks, greedy and its ties, each filter on hand-computed cases, the
 * penalty formulas, logit bias, NaN/inf logits, determinism of the seeded
 * draw, and a chi-square test that 100k draws follow the softmax of the
 * processed logits. Expected values are computed here from the documented
 * formulas in double precision, never copied from a run, so the same file
 * passes natively and under wine. Also checks the private kernels: SSE2 and
 * scalar exp agree bit for bit (the reason results match across platforms)
 * and exp/log are accurate against libm.
 */
#include "moe.h"
#include "sampler-kernels.h"
#include "test.h"

#include <float.h>

/* Test-side PRNG for making logits (independent of the sampler's). */
static uint64_t t_state = 88172645463325252ull;
static double t_uniform(void)
{
    t_state ^= t_state << 13;
    t_state ^= t_state >> 7;
    t_state ^= t_state << 17;
    return (double)(t_state >> 11) / 9007199254740992.0;
}
/* Roughly normal (sum of 4 uniforms), scaled. */
static float t_logit(double scale)
{
    return (float)((t_uniform() + t_uniform() + t_uniform() + t_uniform() - 2.0) * scale);
}

static moe_sampler_params plain(float temperature)
{
    moe_sampler_params p = moe_sampler_params_default();
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    return p;
}

static moe_sampler *mk(int32_t n_vocab, const moe_sampler_params *p)
{
    moe_sampler *s = NULL;
    moe_err err = {{0}};
    moe_status st = moe_sampler_new(n_vocab, p, &s, &err);
    CHECK_MSG(st == MOE_OK && s, "%s", err.msg);
    return s;
}

static void expect_invalid(int32_t n_vocab, moe_sampler_params p, const char *word)
{
    moe_sampler *s = (moe_sampler *)1;
    moe_err err = {{0}};
    CHECK_EQ_INT(moe_sampler_new(n_vocab, &p, &s, &err), MOE_ERR_INVALID_ARG);
    CHECK(s == NULL);
    CHECK_MSG(strstr(err.msg, word) != NULL, "message \"%s\" lacks \"%s\"", err.msg, word);
}

static void test_params(void)
{
    moe_sampler_params d = moe_sampler_params_default();
    CHECK_NEAR(d.temperature, 0.8, 1e-7);
    CHECK_EQ_INT(d.top_k, 40);
    CHECK_NEAR(d.top_p, 0.95, 1e-7);
    CHECK_NEAR(d.min_p, 0.05, 1e-7);
    CHECK_NEAR(d.repeat_penalty, 1.0, 0);
    CHECK_EQ_INT(d.penalty_last_n, 64);
    CHECK(d.presence_penalty == 0.0f && d.frequency_penalty == 0.0f);
    CHECK(d.seed == MOE_SAMPLER_DEFAULT_SEED && d.n_logit_bias == 0);

    moe_sampler_params p = d;
    p.temperature = -0.1f;
    expect_invalid(10, p, "temperature");
    p.temperature = NAN;
    expect_invalid(10, p, "temperature");
    p = d, p.top_p = 1.5f;
    expect_invalid(10, p, "top_p");
    p = d, p.top_p = -0.01f;
    expect_invalid(10, p, "top_p");
    p = d, p.min_p = 2.0f;
    expect_invalid(10, p, "min_p");
    p = d, p.repeat_penalty = 0.0f;
    expect_invalid(10, p, "repeat_penalty");
    p = d, p.penalty_last_n = -1;
    expect_invalid(10, p, "penalty_last_n");
    p = d, p.presence_penalty = INFINITY;
    expect_invalid(10, p, "presence_penalty");
    p = d, p.frequency_penalty = NAN;
    expect_invalid(10, p, "frequency_penalty");
    expect_invalid(0, d, "n_vocab");
    expect_invalid(-5, d, "n_vocab");
    moe_logit_bias b[2] = {{3, 1.0f}, {10, 1.0f}};
    p = d, p.logit_bias = b, p.n_logit_bias = 2;
    expect_invalid(10, p, "token 10");
    b[1].token = 4, b[1].bias = NAN;
    expect_invalid(10, p, "bias");
    b[1].bias = INFINITY;
    expect_invalid(10, p, "bias");
    p.logit_bias = NULL;
    expect_invalid(10, p, "logit_bias");
    moe_err err = {{0}};
    CHECK_EQ_INT(moe_sampler_params_check(NULL, 10, &err), MOE_ERR_INVALID_ARG);
    CHECK_EQ_INT(moe_sampler_new(10, &d, NULL, &err), MOE_ERR_INVALID_ARG);
    moe_sampler_free(NULL);
}

static int32_t argmax_first(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

static void test_greedy(void)
{
    enum { N = 1000 };
    static float logits[N];
    moe_sampler_params p = moe_sampler_params_default();
    p.temperature = 0.0f;
    moe_sampler *s = mk(N, &p);
    moe_err err = {{0}};
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < N; i++)
            logits[i] = t_logit(4.0);
        CHECK_EQ_INT(moe_sampler_sample(s, logits, NULL, 0, &err), argmax_first(logits, N));
    }
    /* Ties go to the lowest id. */
    for (int i = 0; i < N; i++)
        logits[i] = 0.0f;
    logits[700] = logits[300] = logits[999] = 5.0f;
    CHECK_EQ_INT(moe_sampler_sample(s, logits, NULL, 0, &err), 300);
    moe_token_prob tp[4];
    size_t n_total = 0;
    CHECK_EQ_INT(moe_sampler_probs(s, logits, NULL, 0, tp, 4, &n_total, &err), MOE_OK);
    CHECK_EQ_INT(n_total, 1);
    CHECK_EQ_INT(tp[0].token, 300);
    CHECK_NEAR(tp[0].prob, 1.0, 0);
    moe_sampler_free(s);

    /* Temperature 0 with penalties: the penalised token loses its lead. */
    float l4[4] = {1.0f, 2.0f, 1.5f, -1.0f};
    int32_t recent[1] = {1};
    p.repeat_penalty = 2.0f;
    s = mk(4, &p);
    CHECK_EQ_INT(moe_sampler_sample(s, l4, recent, 1, &err), 2); /* 2/2 = 1 < 1.5 */
    CHECK_EQ_INT(moe_sampler_sample(s, l4, recent, 0, &err), 1); /* empty window */
    moe_sampler_free(s);
    p.repeat_penalty = 1.0f;
    p.presence_penalty = 0.6f; /* 2 - 0.6 = 1.4 < 1.5 */
    s = mk(4, &p);
    CHECK_EQ_INT(moe_sampler_sample(s, l4, recent, 1, &err), 2);
    moe_sampler_free(s);

    /* top_k = 1 at any temperature is greedy. */
    p = plain(1.3f);
    p.top_k = 1;
    s = mk(N, &p);
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < N; i++)
            logits[i] = t_logit(1.0);
        if (round == 0)
            logits[17] = logits[900] = 50.0f;
        int32_t want = argmax_first(logits, N);
        CHECK_EQ_INT(moe_sampler_sample(s, logits, NULL, 0, &err), want);
    }
    moe_sampler_free(s);
}

/* Returns the candidate probabilities of a run as a dense vector. */
static size_t probs_dense(moe_sampler *s, const float *logits, int32_t n, const int32_t *recent,
                          size_t n_recent, double *dense)
{
    moe_token_prob tp[64];
    size_t n_total = 0;
    moe_err err = {{0}};
    CHECK_MSG(moe_sampler_probs(s, logits, recent, n_recent, tp, 64, &n_total, &err) == MOE_OK,
              "%s", err.msg);
    for (int32_t i = 0; i < n; i++)
        dense[i] = 0.0;
    for (size_t j = 0; j < n_total && j < 64; j++)
        dense[tp[j].token] = tp[j].prob;
    return n_total;
}

static void softmax(const double *l, int n, double *out)
{
    double mx = -INFINITY, z = 0.0;
    for (int i = 0; i < n; i++)
        mx = l[i] > mx ? l[i] : mx;
    for (int i = 0; i < n; i++)
        z += out[i] = l[i] == -INFINITY ? 0.0 : exp(l[i] - mx);
    for (int i = 0; i < n; i++)
        out[i] /= z;
}

static void test_penalties(void)
{
    float logits[5] = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
    int32_t recent[8] = {0, 1, 1, 3, 3, 3, 4, 77 /* outside the vocab: ignored */};
    moe_sampler_params p = plain(1.0f);
    p.repeat_penalty = 1.5f;
    p.presence_penalty = 0.25f;
    p.frequency_penalty = 0.125f;
    p.penalty_last_n = 64;
    moe_sampler *s = mk(5, &p);
    /* By hand: t0 c=1: 2/1.5 - (0.125 + 0.25); t1 c=2: -1*1.5 - (0.25 + 0.25);
     * t2 untouched; t3 c=3: 3/1.5 - (0.375 + 0.25); t4 c=1: 0*1.5 - 0.375. */
    double want_l[5] = {2.0 / 1.5 - 0.375, -2.0, 0.5, 1.375, -0.375}, want[5], got[5];
    softmax(want_l, 5, want);
    CHECK_EQ_INT(probs_dense(s, logits, 5, recent, 8, got), 5);
    for (int i = 0; i < 5; i++)
        CHECK_NEAR(got[i], want[i], 1e-6);
    /* The same history through accept(). */
    for (int i = 0; i < 8; i++)
        moe_sampler_accept(s, recent[i]);
    probs_dense(s, logits, 5, NULL, 0, got);
    for (int i = 0; i < 5; i++)
        CHECK_NEAR(got[i], want[i], 1e-6);
    moe_sampler_reset(s); /* forgets the history */
    probs_dense(s, logits, 5, NULL, 0, got);
    double plain_l[5] = {2.0, -1.0, 0.5, 3.0, 0.0};
    softmax(plain_l, 5, want);
    for (int i = 0; i < 5; i++)
        CHECK_NEAR(got[i], want[i], 1e-6);
    moe_sampler_free(s);

    /* Bias comes after the penalties: 2/2 + 1 = 2.0 (bias first would give
     * (2+1)/2 = 1.5). */
    moe_logit_bias bias1[1] = {{0, 1.0f}};
    p.repeat_penalty = 2.0f;
    p.presence_penalty = p.frequency_penalty = 0.0f;
    p.logit_bias = bias1;
    p.n_logit_bias = 1;
    s = mk(5, &p);
    int32_t r1[1] = {0};
    double wb[5] = {2.0, -1.0, 0.5, 3.0, 0.0};
    softmax(wb, 5, want);
    probs_dense(s, logits, 5, r1, 1, got);
    for (int i = 0; i < 5; i++)
        CHECK_NEAR(got[i], want[i], 1e-6);
    moe_sampler_free(s);
    p.logit_bias = NULL;
    p.n_logit_bias = 0;
    p.repeat_penalty = 1.5f;

    /* Only the last penalty_last_n tokens count, for both history sources. */
    p.penalty_last_n = 2;
    p.presence_penalty = p.frequency_penalty = 0.0f;
    s = mk(5, &p);
    int32_t r2[3] = {0, 3, 3};
    double w2[5] = {2.0, -1.0, 0.5, 2.0, 0.0};
    softmax(w2, 5, want);
    probs_dense(s, logits, 5, r2, 3, got);
    for (int i = 0; i < 5; i++)
        CHECK_NEAR(got[i], want[i], 1e-6);
    for (int i = 0; i < 3; i++)
        moe_sampler_accept(s, r2[i]);
    probs_dense(s, logits, 5, NULL, 0, got);
    for (int i = 0; i < 5; i++)
        CHECK_NEAR(got[i], want[i], 1e-6);
    moe_sampler_free(s);
}

static void test_filters(void)
{
    /* Probabilities 0.5, 0.3, 0.15, 0.05 (logits are their logs). */
    float l4[4] = {(float)log(0.3), (float)log(0.05), (float)log(0.5), (float)log(0.15)};
    double got[4];
    moe_sampler_params p = plain(1.0f);
    struct { int top_k; float top_p; float min_p; size_t n; } cases[] = {
        {0, 0.45f, 0.0f, 1}, {0, 0.75f, 0.0f, 2}, {0, 0.85f, 0.0f, 3}, {0, 0.99f, 0.0f, 4},
        {0, 0.0f, 0.0f, 1},
        /* top-p is taken after top-k renormalises: 0.8/0.95 = 0.842 >= 0.83 */
        {3, 0.83f, 0.0f, 2}, {0, 0.83f, 0.0f, 3}, {2, 1.0f, 0.0f, 2},
        /* min-p keeps p >= min_p * 0.5 */
        {0, 1.0f, 0.2f, 3}, {0, 1.0f, 0.5f, 2}, {0, 1.0f, 0.61f, 1}, {4, 1.0f, 0.2f, 3},
        {0, 0.75f, 0.2f, 2}, {3, 1.0f, 0.05f, 3},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        p.top_k = cases[c].top_k;
        p.top_p = cases[c].top_p;
        p.min_p = cases[c].min_p;
        moe_sampler *s = mk(4, &p);
        size_t n = probs_dense(s, l4, 4, NULL, 0, got);
        CHECK_MSG(n == cases[c].n, "case %zu: %zu tokens kept, want %zu", c, n, cases[c].n);
        /* The kept ones are the most probable, renormalised. */
        static const int order[4] = {2, 0, 3, 1};
        static const double prob[4] = {0.5, 0.3, 0.15, 0.05};
        double z = 0.0;
        for (size_t j = 0; j < cases[c].n; j++)
            z += prob[j];
        for (size_t j = 0; j < 4; j++)
            CHECK_NEAR(got[order[j]], j < cases[c].n ? prob[j] / z : 0.0, 1e-6);
        moe_sampler_free(s);
    }

    /* Temperature reshapes the survivors: p ~ p0^(1/T). */
    p = plain(0.5f);
    p.top_k = 3;
    moe_sampler *s = mk(4, &p);
    probs_dense(s, l4, 4, NULL, 0, got);
    double z = 0.25 + 0.09 + 0.0225;
    CHECK_NEAR(got[2], 0.25 / z, 1e-6);
    CHECK_NEAR(got[0], 0.09 / z, 1e-6);
    CHECK_NEAR(got[3], 0.0225 / z, 1e-6);
    CHECK_NEAR(got[1], 0.0, 0);
    moe_sampler_free(s);
}

/* The large-vocabulary paths (histogram top-p, heap top-k) against a
 * brute-force sort done here. */
typedef struct { double l; int32_t id; } ref_cand;
static int ref_cmp(const void *a, const void *b)
{
    const ref_cand *x = a, *y = b;
    if (x->l != y->l)
        return x->l > y->l ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static void test_large_vs_bruteforce(void)
{
    enum { N = 6000, CAP = N };
    static float logits[N];
    static ref_cand rc[N];
    static moe_token_prob tp[CAP];
    static double want[N];
    moe_err err = {{0}};
    for (int round = 0; round < 40; round++) {
        double scale = round % 4 == 0 ? 0.5 : round % 4 == 1 ? 3.0 : round % 4 == 2 ? 12.0 : 40.0;
        for (int i = 0; i < N; i++)
            logits[i] = t_logit(scale);
        if (round % 5 == 0) /* ties across the cut */
            for (int i = 0; i < N; i += 7)
                logits[i] = logits[0];
        moe_sampler_params p = plain((float)(0.3 + t_uniform() * 1.5));
        p.top_k = round % 3 == 0 ? (int)(1 + t_uniform() * 300) : 0;
        p.top_p = round % 2 ? (float)t_uniform() : 1.0f;
        p.min_p = round % 4 == 3 ? 0.0f : (float)(t_uniform() * 0.2);
        moe_sampler *s = mk(N, &p);
        size_t n_total = 0;
        CHECK_EQ_INT(moe_sampler_probs(s, logits, NULL, 0, tp, CAP, &n_total, &err), MOE_OK);

        for (int i = 0; i < N; i++)
            rc[i].l = logits[i], rc[i].id = i;
        qsort(rc, N, sizeof rc[0], ref_cmp);
        size_t m = p.top_k > 0 && p.top_k < N ? (size_t)p.top_k : N;
        if (p.top_p < 1.0f) {
            double z = 0.0, cum = 0.0;
            for (size_t j = 0; j < m; j++)
                z += exp(rc[j].l - rc[0].l);
            size_t j = 0;
            while (j < m) {
                cum += exp(rc[j].l - rc[0].l);
                j++;
                if (cum >= (double)p.top_p * z)
                    break;
            }
            m = j;
        }
        size_t k = 1;
        while (k < m && rc[k].l >= rc[0].l + log((double)p.min_p))
            k++;
        m = k;
        double z = 0.0;
        for (size_t j = 0; j < m; j++)
            z += want[j] = exp((rc[j].l - rc[0].l) / p.temperature);
        size_t nz = m;
        while (nz > 1 && want[nz - 1] / z < 1e-30)
            nz--;
        CHECK_MSG(n_total >= nz && n_total <= m, "round %d: %zu kept, want %zu", round, n_total, m);
        size_t bad = 0;
        for (size_t j = 0; j < n_total && j < m; j++)
            if (tp[j].token != rc[j].id || fabs(tp[j].prob - want[j] / z) > 2e-6)
                bad++;
        CHECK_MSG(bad == 0, "round %d: %zu of %zu candidates differ", round, bad, m);
        moe_sampler_free(s);
    }
}

/* 100k draws against the softmax of the processed logits, computed here. */
static void test_chi_square(void)
{
    enum { N = 10, DRAWS = 100000 };
    float logits[N] = {1.0f, 0.2f, -0.5f, 2.0f, 1.7f, 0.9f, -3.0f, 1.1f, 0.0f, 0.4f};
    int32_t recent[3] = {3, 3, 5};
    moe_sampler_params p = plain(0.7f);
    p.top_k = 7;
    p.top_p = 0.9f;
    p.min_p = 0.3f;
    p.repeat_penalty = 1.3f;
    p.presence_penalty = 0.1f;
    p.frequency_penalty = 0.05f;
    moe_logit_bias bias[2] = {{0, 0.3f}, {9, -INFINITY}};
    p.logit_bias = bias;
    p.n_logit_bias = 2;
    moe_sampler *s = mk(N, &p);

    /* Expected, step by step. */
    double l[N];
    for (int i = 0; i < N; i++)
        l[i] = logits[i];
    l[3] = 2.0 / 1.3 - (2 * 0.05 + 0.1);
    l[5] = 0.9 / 1.3 - (1 * 0.05 + 0.1);
    l[0] += 0.3;
    l[9] = -INFINITY;
    ref_cand rc[N];
    for (int i = 0; i < N; i++)
        rc[i].l = l[i], rc[i].id = i;
    qsort(rc, N, sizeof rc[0], ref_cmp);
    size_t m = 7;
    double z = 0.0, cum = 0.0;
    for (size_t j = 0; j < m; j++)
        z += exp(rc[j].l - rc[0].l);
    size_t j = 0;
    while (j < m) {
        cum += exp(rc[j].l - rc[0].l);
        j++;
        if (cum >= (double)0.9f * z)
            break;
    }
    m = j;
    while (m > 1 && rc[m - 1].l < rc[0].l + log((double)0.3f))
        m--;
    double want[N] = {0};
    double zt = 0.0;
    for (size_t k = 0; k < m; k++)
        zt += want[rc[k].id] = exp((rc[k].l - rc[0].l) / 0.7);
    for (int i = 0; i < N; i++)
        want[i] /= zt;
    /* Bias bans 9, top-k drops 2 and 6, top-p drops 8, min-p drops 1. */
    CHECK_MSG(m == 5, "the case should exercise every filter (m = %zu)", m);

    double got[N];
    probs_dense(s, logits, N, recent, 3, got);
    for (int i = 0; i < N; i++)
        CHECK_NEAR(got[i], want[i], 1e-6);

    long counts[N] = {0};
    moe_err err = {{0}};
    for (int d = 0; d < DRAWS; d++) {
        int32_t t = moe_sampler_sample(s, logits, recent, 3, &err);
        CHECK(t >= 0 && t < N);
        if (t >= 0 && t < N)
            counts[t]++;
    }
    double chi2 = 0.0;
    int df = -1;
    for (int i = 0; i < N; i++) {
        if (want[i] == 0.0) {
            CHECK_MSG(counts[i] == 0, "token %d was filtered out but drawn %ld times", i, counts[i]);
            continue;
        }
        double e = want[i] * DRAWS;
        chi2 += (counts[i] - e) * (counts[i] - e) / e;
        df++;
    }
    /* The 99.9th percentile of chi-square with df = 1..8. */
    static const double crit[9] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12};
    CHECK(df >= 1 && df <= 8);
    if (df >= 1 && df <= 8)
        CHECK_MSG(chi2 < crit[df], "chi-square %.2f with %d degrees of freedom", chi2, df);
    fprintf(stderr, "chi-square %.2f, df %d\n", chi2, df);
    moe_sampler_free(s);
}

/* Many survivors: the draw walks blocks of weights; 100k draws grouped
 * into 20 bins of ids must still follow the distribution. */
static void test_chi_square_wide(void)
{
    enum { N = 2000, BINS = 20, DRAWS = 100000 };
    static float logits[N];
    double want[BINS] = {0}, z = 0.0;
    long counts[BINS] = {0};
    for (int i = 0; i < N; i++) {
        logits[i] = t_logit(0.8);
        z += exp((double)logits[i] / 1.2);
    }
    for (int i = 0; i < N; i++)
        want[i * BINS / N] += exp((double)logits[i] / 1.2) / z;
    moe_sampler_params p = plain(1.2f);
    moe_sampler *s = mk(N, &p);
    moe_err err = {{0}};
    for (int d = 0; d < DRAWS; d++) {
        int32_t t = moe_sampler_sample(s, logits, NULL, 0, &err);
        CHECK(t >= 0 && t < N);
        if (t >= 0 && t < N)
            counts[t * BINS / N]++;
    }
    double chi2 = 0.0;
    for (int b = 0; b < BINS; b++) {
        double e = want[b] * DRAWS;
        chi2 += (counts[b] - e) * (counts[b] - e) / e;
    }
    /* 99.9th percentile of chi-square with 19 degrees of freedom. */
    CHECK_MSG(chi2 < 43.82, "chi-square %.2f with 19 degrees of freedom", chi2);
    fprintf(stderr, "wide chi-square %.2f, df 19\n", chi2);
    moe_sampler_free(s);
}

static void test_determinism(void)
{
    enum { N = 3000, DRAWS = 300 };
    static float logits[N];
    static int32_t a[DRAWS], b[DRAWS], c[DRAWS];
    for (int i = 0; i < N; i++)
        logits[i] = t_logit(2.0);
    moe_sampler_params p = plain(1.0f);
    p.seed = 12345;
    moe_sampler *s1 = mk(N, &p), *s2 = mk(N, &p);
    p.seed = 12346;
    moe_sampler *s3 = mk(N, &p);
    moe_err err = {{0}};
    for (int d = 0; d < DRAWS; d++) {
        a[d] = moe_sampler_sample(s1, logits, NULL, 0, &err);
        if (d % 10 == 0) { /* probs() must not advance the PRNG */
            moe_token_prob tp[1];
            size_t nt;
            moe_sampler_probs(s2, logits, NULL, 0, tp, 1, &nt, &err);
        }
        b[d] = moe_sampler_sample(s2, logits, NULL, 0, &err);
        c[d] = moe_sampler_sample(s3, logits, NULL, 0, &err);
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    int same = 0;
    for (int d = 0; d < DRAWS; d++)
        same += a[d] == c[d];
    CHECK_MSG(same < DRAWS / 4, "seeds 12345 and 12346 agree on %d of %d draws", same, DRAWS);
    /* reset() restarts the sequence. */
    moe_sampler_reset(s1);
    for (int d = 0; d < DRAWS; d++)
        b[d] = moe_sampler_sample(s1, logits, NULL, 0, &err);
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* Without AVX2 the draws are the same, also through the histogram. */
    p.seed = 777;
    p.top_p = 0.9f;
    p.temperature = 0.9f;
    moe_sampler *s4 = mk(N, &p);
    for (int d = 0; d < DRAWS; d++)
        c[d] = moe_sampler_sample(s4, logits, NULL, 0, &err);
    moe_kernels_use_avx2(false);
    moe_sampler_reset(s4);
    moe_sampler_reset(s1);
    for (int d = 0; d < DRAWS; d++) {
        CHECK(moe_sampler_sample(s4, logits, NULL, 0, &err) == c[d]);
        CHECK(moe_sampler_sample(s1, logits, NULL, 0, &err) == a[d]);
    }
    moe_kernels_use_avx2(true);
    moe_sampler_free(s4);
    /* A digest of the draws, for comparing a native log with a wine log. */
    uint64_t h = 1469598103934665603ull;
    for (int d = 0; d < DRAWS; d++)
        h = (h ^ (uint64_t)a[d]) * 1099511628211ull;
    fprintf(stderr, "draw digest (seed 12345): %016llx\n", (unsigned long long)h);
    moe_sampler_free(s1);
    moe_sampler_free(s2);
    moe_sampler_free(s3);
}

static void test_bias_and_bad_logits(void)
{
    enum { N = 50 };
    float logits[N];
    for (int i = 0; i < N; i++)
        logits[i] = (float)i * 0.01f;
    logits[20] = 10.0f;
    moe_err err = {{0}};

    /* -inf bans the favourite; duplicate entries add up. */
    moe_logit_bias bias[3] = {{20, -INFINITY}, {5, 0.25f}, {5, 0.25f}};
    moe_sampler_params p = plain(0.0f);
    p.logit_bias = bias;
    p.n_logit_bias = 3;
    moe_sampler *s = mk(N, &p);
    CHECK_EQ_INT(moe_sampler_sample(s, logits, NULL, 0, &err), 5); /* 0.05 + 0.5 > 0.49 */
    moe_sampler_free(s);
    p.temperature = 5.0f;
    p.n_logit_bias = 1;
    s = mk(N, &p);
    int hits = 0;
    for (int d = 0; d < 5000; d++)
        hits += moe_sampler_sample(s, logits, NULL, 0, &err) == 20;
    CHECK_EQ_INT(hits, 0);
    moe_sampler_free(s);

    /* NaN is never drawn; results stay in range. */
    for (int i = 0; i < N; i++)
        logits[i] = i % 2 ? NAN : (float)i * 0.1f;
    int32_t pos_inf_check;
    p = plain(1.0f);
    s = mk(N, &p);
    for (int d = 0; d < 2000; d++) {
        int32_t t = moe_sampler_sample(s, logits, NULL, 0, &err);
        CHECK(t >= 0 && t < N && t % 2 == 0);
    }
    /* All NaN: a clear error, not a token. */
    for (int i = 0; i < N; i++)
        logits[i] = NAN;
    err.msg[0] = 0;
    CHECK_EQ_INT(moe_sampler_sample(s, logits, NULL, 0, &err), -1);
    CHECK(strstr(err.msg, "NaN") != NULL);
    size_t nt = 7;
    moe_token_prob tp[2];
    CHECK_EQ_INT(moe_sampler_probs(s, logits, NULL, 0, tp, 2, &nt, &err), MOE_ERR_INVALID_ARG);
    CHECK_EQ_INT(nt, 0);
    CHECK_EQ_INT(moe_sampler_sample(s, NULL, NULL, 0, &err), -1);
    /* +inf is the largest finite value: always drawn. */
    for (int i = 0; i < N; i++)
        logits[i] = -INFINITY;
    logits[33] = INFINITY;
    logits[3] = 1.0f;
    pos_inf_check = moe_sampler_sample(s, logits, NULL, 0, &err);
    CHECK_EQ_INT(pos_inf_check, 33);
    moe_sampler_free(s);

    /* Every token banned. */
    moe_logit_bias ban[1] = {{0, -INFINITY}};
    p.logit_bias = ban;
    p.n_logit_bias = 1;
    s = mk(1, &p);
    float one = 3.0f;
    CHECK_EQ_INT(moe_sampler_sample(s, &one, NULL, 0, &err), -1);
    moe_sampler_free(s);
    p.n_logit_bias = 0;
    s = mk(1, &p);
    CHECK_EQ_INT(moe_sampler_sample(s, &one, NULL, 0, &err), 0);
    moe_sampler_free(s);
}

static void test_kernels(void)
{
    /* SSE2 and scalar exp agree bit for bit; both are close to libm. */
    enum { N = 4099 };
    static float x[N], a[N], b[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(-100.0 + 190.0 * i / (N - 1));
    x[0] = -INFINITY;
    moe_exp_shift_f32(a, x, N, 0.0f, 1.0f);
    moe_exp_shift_f32_scalar(b, x, N, 0.0f, 1.0f);
    CHECK(memcmp(a, b, sizeof a) == 0);
    moe_exp_shift_f32(a, x, N, 1.5f, 0.7f);
    moe_exp_shift_f32_scalar(b, x, N, 1.5f, 0.7f);
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* The same with the SSE2 body alone (where AVX2 was in use above). */
    bool had_avx2 = moe_kernels_use_avx2(false);
    moe_exp_shift_f32(a, x, N, 0.0f, 1.0f);
    moe_exp_shift_f32_scalar(b, x, N, 0.0f, 1.0f);
    CHECK(memcmp(a, b, sizeof a) == 0);
    moe_exp_shift_f32(a, x, N, 1.5f, 0.7f);
    moe_exp_shift_f32_scalar(b, x, N, 1.5f, 0.7f);
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* Histograms agree whichever body built them. */
    static double h1[64], h2[64];
    moe_mass_histogram_f32(x, N, 90.0f, 0.5f, h1, 64);
    moe_kernels_use_avx2(true);
    moe_mass_histogram_f32(x, N, 90.0f, 0.5f, h2, 64);
    CHECK(memcmp(h1, h2, sizeof h1) == 0);
    fprintf(stderr, "AVX2 bodies: %s\n", had_avx2 ? "compared" : "not available here");
    double worst = 0.0;
    for (int i = 0; i < N; i++) {
        double xi = x[i];
        double want = xi < -87.0 ? 0.0 : exp(xi > 88.0 ? 88.0 : xi);
        float got = moe_exp_f32(x[i]);
        if (want == 0.0) {
            CHECK(got == 0.0f);
            continue;
        }
        double rel = fabs(got - want) / want;
        worst = rel > worst ? rel : worst;
    }
    CHECK_MSG(worst < 2.5e-7, "exp relative error %g", worst);
    CHECK(moe_exp_f32(0.0f) == 1.0f);
    for (double v = 1e-30; v < 1e30; v *= 3.7)
        CHECK_NEAR(moe_log_f64(v), log(v), 1e-15 * fabs(log(v)) + 1e-16);
    CHECK(moe_log_f64(0.0) == -INFINITY);
    CHECK(moe_log_f64(1.0) == 0.0);

    /* The RNG is uniform enough and seeds differ. */
    moe_rng r;
    moe_rng_seed(&r, 0);
    double sum = 0.0;
    for (int i = 0; i < 100000; i++) {
        double u = moe_rng_next_f64(&r);
        CHECK(u >= 0.0 && u < 1.0);
        sum += u;
    }
    CHECK_NEAR(sum / 100000, 0.5, 0.005);
    moe_rng r2;
    moe_rng_seed(&r, 1);
    moe_rng_seed(&r2, 2);
    CHECK(moe_rng_next_u64(&r) != moe_rng_next_u64(&r2));

    float y[7] = {1, 5, NAN, 3, INFINITY, -2, 5};
    float c[7];
    float mx = moe_logits_clean_max_f32(c, y, 7);
    CHECK(mx == FLT_MAX && c[2] == -INFINITY && c[4] == FLT_MAX && c[6] == 5.0f);
    CHECK_EQ_INT(moe_find_f32(c, 7, 5.0f), 1);
    CHECK(moe_max_f32(c, 4) == 5.0f);
}

int main(void)
{
    test_params();
    test_greedy();
    test_penalties();
    test_filters();
    test_large_vs_bruteforce();
    test_chi_square();
    test_chi_square_wide();
    test_determinism();
    test_bias_and_bad_logits();
    test_kernels();
    TEST_DONE();
}

/*
 * bench-scheduler.c — what continuous batching buys on this machine: the
 * service's scheduler (app/service/scheduler.h) over a model file, driven
 * through its public API exactly as the HTTP layer drives it.
 *
 *   1. Concurrency 1, 4 and 16: that many requests (random prompts, no
 *      shared prefix, greedy, a fixed number of tokens each) submitted at
 *      once into as many slots; generated tokens per second of wall time
 *      (prompt evaluation included) and while all requests decode, time to
 *      first token (mean and worst), the per-request decode rate the
 *      scheduler reports (slowed by other requests' prompt chunks sharing
 *      its steps), and the engine steps taken.
 *   2. A multi-turn chat: turn N+1 re-sends turns 1..N plus a new user
 *      message. Once with prefix reuse (the slot keeps the conversation's
 *      cells: only the new message is evaluated) and once cold (the same
 *      prompts after a short request evicted the slot's cells): time to
 *      first token and total time per turn, and the speed-up.
 *
 * Built with the tests so it never rots; not run by `meson test` (numbers
 * go to docs/benchmarks.md with the command that made them).
 *
 *   3. The engine alone: one moe_decode of 1, 2, 3, 4, 8 and 16 sequences'
 *      next tokens, to tell the scheduler's cost from the engine's.
 *
 * usage: bench-scheduler MODEL [-t THREADS] [-p PROMPT<=512] [-n TOKENS]
 *                              [-r ROUNDS] [--turns N] [--kv f16|q8_0]
 *                              [--only batching|engine|chat]
 */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static GMainContext *mctx;
static const moe_model *model;
static int n_threads = 2, n_prompt = 128, n_gen = 64, n_rounds = 3, n_turns = 6;
static const char *only = ""; /* --only batching|chat|engine */
static moe_type kv_type = MOE_TYPE_F16;

typedef struct req {
    svc_gen *gen;
    int64_t  t_first_text, t_last_text; /* main-thread arrival times */
    GArray  *times;  /* arrival time of each token, or NULL */
    bool     done;
    bool     failed;
    int64_t  ttft_us, total_us, n_completion, n_cached;
    double   decode_tps;
    GArray  *tokens; /* may be NULL */
} req;

static int n_done;

static void on_text(svc_gen *g, const char *t, size_t len, int32_t tok,
                    const moe_token_prob *p, size_t np, void *user)
{
    (void)g, (void)t, (void)len, (void)p, (void)np;
    req *r = user;
    if (r->tokens)
        g_array_append_val(r->tokens, tok);
    if (r->times) {
        int64_t now = g_get_monotonic_time();
        g_array_append_val(r->times, now);
    }
}

static void on_done(svc_gen *g, const svc_gen_result *res, void *user)
{
    (void)g;
    req *r = user;
    r->done = true;
    r->failed = res->error != NULL;
    if (res->error)
        fprintf(stderr, "request failed: %s\n", res->error->message);
    r->ttft_us = res->ttft_us;
    r->total_us = res->total_us;
    r->n_completion = res->n_completion;
    r->n_cached = res->n_cached;
    r->decode_tps = res->decode_tps;
    n_done++;
}

static void wait_all(int want)
{
    while (n_done < want)
        g_main_context_iteration(mctx, TRUE);
}

static svc_sched *new_sched(int n_parallel, int n_ctx)
{
    svc_sched_params p;
    svc_sched_params_init(&p);
    p.n_parallel = n_parallel;
    p.n_ctx_per_seq = n_ctx;
    p.n_threads = n_threads;
    p.kv_type = kv_type;
    p.main_context = mctx;
    GError *e = NULL;
    svc_sched *s = svc_sched_new(model, &p, &e);
    if (!s) {
        fprintf(stderr, "bench-scheduler: %s\n", e->message);
        exit(1);
    }
    return s;
}

static void submit(svc_sched *s, req *r, const int32_t *prompt, size_t n, int max_tokens)
{
    svc_gen_params gp;
    svc_gen_params_init(&gp);
    gp.prompt = prompt;
    gp.n_prompt = n;
    gp.max_tokens = max_tokens;
    gp.ignore_eog = true;
    svc_gen_events ev = {on_text, on_done, r};
    GError *e = NULL;
    r->gen = svc_sched_submit(s, &gp, &ev, &e);
    if (!r->gen) {
        fprintf(stderr, "bench-scheduler: submit: %s\n", e->message);
        exit(1);
    }
}

/* Random ids in [0, n_vocab), the same for the same seed. */
static void random_tokens(int32_t *out, int n, uint32_t seed)
{
    int32_t n_vocab = moe_model_n_vocab(model);
    uint32_t x = seed * 2654435761u + 1;
    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out[i] = (int32_t)(x % (uint32_t)n_vocab);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double best(const double *v, int n)
{
    double b = v[0];
    for (int i = 1; i < n; i++)
        b = MAX(b, v[i]);
    return b;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Tokens per second while every request is decoding: from the last
 * request's first token to the first request's last token, so prompt
 * evaluation (which shares steps with decoding) is left out. */
static double steady_decode_rate(const req *rs, int c)
{
    int64_t a = 0, b = INT64_MAX;
    for (int i = 0; i < c; i++) {
        const GArray *t = rs[i].times;
        a = MAX(a, g_array_index(t, int64_t, 0));
        b = MIN(b, g_array_index(t, int64_t, t->len - 1));
    }
    if (b <= a)
        return 0;
    int64_t n = 0;
    for (int i = 0; i < c; i++)
        for (guint k = 0; k < rs[i].times->len; k++) {
            int64_t x = g_array_index(rs[i].times, int64_t, k);
            n += x > a && x <= b;
        }
    return (double)n * 1e6 / (double)(b - a);
}

static void bench_concurrency(int c)
{
    double agg[16], ttft_mean[16], ttft_max[16], tps[16], steady[16];
    svc_sched *s = new_sched(c, n_prompt + n_gen + 8);
    int32_t *prompts = g_new(int32_t, (size_t)c * n_prompt);
    req *rs = g_new0(req, c);
    /* warm-up: pages the weights in */
    random_tokens(prompts, n_prompt, 999);
    n_done = 0;
    submit(s, &rs[0], prompts, (size_t)n_prompt, 8);
    wait_all(1);
    svc_gen_unref(rs[0].gen);
    svc_sched_stats st0;
    svc_sched_get_stats(s, &st0);
    for (int round = 0; round < n_rounds; round++) {
        for (int i = 0; i < c; i++)
            random_tokens(prompts + (size_t)i * n_prompt, n_prompt,
                          (uint32_t)(1000 * round + i + 1));
        memset(rs, 0, sizeof(req) * (size_t)c);
        for (int i = 0; i < c; i++)
            rs[i].times = g_array_new(FALSE, FALSE, sizeof(int64_t));
        n_done = 0;
        int64_t t0 = g_get_monotonic_time();
        for (int i = 0; i < c; i++)
            submit(s, &rs[i], prompts + (size_t)i * n_prompt, (size_t)n_prompt, n_gen);
        wait_all(c);
        int64_t t1 = g_get_monotonic_time();
        int64_t tokens = 0;
        double tsum = 0, tmax = 0, rate = 0;
        for (int i = 0; i < c; i++) {
            tokens += rs[i].n_completion;
            tsum += (double)rs[i].ttft_us;
            tmax = MAX(tmax, (double)rs[i].ttft_us);
            rate += rs[i].decode_tps;
            svc_gen_unref(rs[i].gen);
        }
        agg[round] = (double)tokens * 1e6 / (double)(t1 - t0);
        steady[round] = steady_decode_rate(rs, c);
        for (int i = 0; i < c; i++)
            g_array_unref(rs[i].times);
        ttft_mean[round] = tsum / c / 1000.0;
        ttft_max[round] = tmax / 1000.0;
        tps[round] = rate / c;
    }
    svc_sched_stats st;
    svc_sched_get_stats(s, &st);
    double agg_best = best(agg, n_rounds), steady_best = best(steady, n_rounds);
    printf("| %d | %.1f / %.1f | %.1f / %.1f | %.0f | %.0f | %.1f | %llu |\n", c,
           median(agg, n_rounds), agg_best, median(steady, n_rounds), steady_best,
           median(ttft_mean, n_rounds), median(ttft_max, n_rounds),
           median(tps, n_rounds), (unsigned long long)((st.steps - st0.steps) / (uint64_t)n_rounds));
    fflush(stdout);
    g_free(prompts);
    g_free(rs);
    svc_sched_free(s);
}

/* A short request whose first token differs from `avoid`: pages the
 * weights in, and evicts the only slot's cached conversation. */
static void run_other(svc_sched *s, int32_t avoid, uint32_t seed)
{
    int32_t toks[8];
    random_tokens(toks, 8, seed);
    toks[0] = (avoid + 1) % moe_model_n_vocab(model);
    req e = {0};
    n_done = 0;
    submit(s, &e, toks, 8, 2);
    wait_all(1);
    svc_gen_unref(e.gen);
}

/* One chat: turn k's prompt is the system prompt, then for every earlier
 * turn its user message and the answer, then turn k's message. */
static void bench_multiturn(void)
{
    const int n_sys = n_prompt, n_user = 32;
    int n_ctx = n_sys + n_turns * (n_user + n_gen) + 8;
    GArray *conv = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_array_set_size(conv, (guint)n_sys);
    random_tokens((int32_t *)conv->data, n_sys, 7);
    GPtrArray *prompts = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    double warm_ttft[64], warm_total[64], cold_ttft[64], cold_total[64];
    int64_t cached[64];

    svc_sched *s = new_sched(1, n_ctx);
    run_other(s, g_array_index(conv, int32_t, 0), 499);
    for (int t = 0; t < n_turns; t++) {
        int32_t user[64];
        random_tokens(user, n_user, (uint32_t)(100 + t));
        g_array_append_vals(conv, user, (guint)n_user);
        GArray *p = g_array_copy(conv);
        g_ptr_array_add(prompts, p);
        req r = {0};
        r.tokens = g_array_new(FALSE, FALSE, sizeof(int32_t));
        n_done = 0;
        submit(s, &r, (const int32_t *)p->data, p->len, n_gen);
        wait_all(1);
        warm_ttft[t] = (double)r.ttft_us / 1000.0;
        warm_total[t] = (double)r.total_us / 1000.0;
        cached[t] = r.n_cached;
        g_array_append_vals(conv, r.tokens->data, r.tokens->len);
        g_array_unref(r.tokens);
        svc_gen_unref(r.gen);
    }
    svc_sched_free(s);
    /* Cold: the same prompts on a warm scheduler whose only slot first
     * serves a short request with another first token, which evicts the
     * conversation's cells (the slot's common prefix is then empty). */
    s = new_sched(1, n_ctx);
    for (int t = 0; t < n_turns; t++) {
        GArray *p = g_ptr_array_index(prompts, t);
        run_other(s, g_array_index(p, int32_t, 0), (uint32_t)(500 + t));
        req r = {0};
        n_done = 0;
        submit(s, &r, (const int32_t *)p->data, p->len, n_gen);
        wait_all(1);
        if (r.n_cached != 0)
            fprintf(stderr, "bench-scheduler: the cold turn %d found %lld tokens cached\n", t + 1,
                    (long long)r.n_cached);
        cold_ttft[t] = (double)r.ttft_us / 1000.0;
        cold_total[t] = (double)r.total_us / 1000.0;
        svc_gen_unref(r.gen);
    }
    svc_sched_free(s);
    double sw = 0, sc = 0;
    printf("\n| turn | prompt | cached | TTFT warm ms | TTFT cold ms | total warm ms | total cold ms |\n"
           "|---|---|---|---|---|---|---|\n");
    for (int t = 0; t < n_turns; t++) {
        GArray *p = g_ptr_array_index(prompts, t);
        printf("| %d | %u | %lld | %.1f | %.1f | %.1f | %.1f |\n", t + 1, p->len,
               (long long)cached[t], warm_ttft[t], cold_ttft[t], warm_total[t], cold_total[t]);
        sw += warm_total[t];
        sc += cold_total[t];
    }
    printf("\nchat of %d turns: %.0f ms with prefix reuse, %.0f ms cold: %.2fx; last turn's "
           "TTFT %.2fx\n", n_turns, sw, sc, sc / sw,
           cold_ttft[n_turns - 1] / warm_ttft[n_turns - 1]);
    g_ptr_array_unref(prompts);
    g_array_unref(conv);
}

/* The engine alone, no scheduler: one moe_decode of n sequences' next
 * tokens, for n = 1..16, so the scheduler's own cost and the engine's
 * batched-decode scaling can be told apart. */
static void bench_engine_steps(void)
{
    static const int sizes[] = {1, 2, 3, 4, 8, 16};
    const int n_sizes = (int)(sizeof sizes / sizeof sizes[0]), n_seq = 16, steps = 16;
    moe_context_params cp = moe_context_default_params();
    cp.n_ctx = n_seq * (n_prompt + n_rounds * n_sizes * steps + 8);
    cp.n_seq_max = n_seq;
    cp.n_threads = n_threads;
    cp.kv_type = kv_type;
    moe_context *ctx = NULL;
    moe_err err = {{0}};
    if (moe_context_new(model, &cp, &ctx, &err) != MOE_OK) {
        fprintf(stderr, "bench-scheduler: %s\n", err.msg);
        exit(1);
    }
    moe_batch *b = moe_batch_new(512);
    int32_t pos[16] = {0}, toks[512];
    for (int q = 0; q < n_seq; q++) { /* each sequence gets a prompt first */
        random_tokens(toks, n_prompt, (uint32_t)(3000 + q));
        for (int i = 0; i < n_prompt;) {
            moe_batch_clear(b);
            for (; i < n_prompt && b->n_tokens < 512; i++)
                moe_batch_add(b, toks[i], pos[q]++, q, false);
            moe_decode(ctx, b, &err);
        }
    }
    printf("\n| sequences per step | ms per step (median / best) | tok/s (median / best) |\n"
           "|---|---|---|\n");
    for (int k = 0; k < n_sizes; k++) {
        double ms[16];
        for (int round = 0; round < n_rounds; round++) {
            int64_t t0 = g_get_monotonic_time();
            for (int st = 0; st < steps; st++) {
                moe_batch_clear(b);
                random_tokens(toks, sizes[k], (uint32_t)(round * 100 + st));
                for (int q = 0; q < sizes[k]; q++)
                    moe_batch_add(b, toks[q], pos[q]++, q, true);
                if (moe_decode(ctx, b, &err) != MOE_OK) {
                    fprintf(stderr, "bench-scheduler: %s\n", err.msg);
                    exit(1);
                }
            }
            ms[round] = (double)(g_get_monotonic_time() - t0) / 1000.0 / steps;
        }
        double lo = ms[0];
        for (int i = 1; i < n_rounds; i++)
            lo = MIN(lo, ms[i]);
        double med = median(ms, n_rounds);
        printf("| %d | %.1f / %.1f | %.1f / %.1f |\n", sizes[k], med, lo,
               sizes[k] * 1000.0 / med, sizes[k] * 1000.0 / lo);
        fflush(stdout);
    }
    moe_batch_free(b);
    moe_context_free(ctx);
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-t") && v)
            n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "-p") && v)
            n_prompt = atoi(argv[++i]);
        else if (!strcmp(a, "-n") && v)
            n_gen = atoi(argv[++i]);
        else if (!strcmp(a, "-r") && v)
            n_rounds = atoi(argv[++i]);
        else if (!strcmp(a, "--turns") && v)
            n_turns = atoi(argv[++i]);
        else if (!strcmp(a, "--only") && v)
            only = argv[++i];
        else if (!strcmp(a, "--kv") && v)
            kv_type = !strcmp(argv[++i], "q8_0") ? MOE_TYPE_Q8_0 : MOE_TYPE_F16;
        else if (a[0] != '-' && !path)
            path = a;
        else {
            path = NULL;
            break;
        }
    }
    if (!path || n_threads < 1 || n_prompt < 1 || n_prompt > 512 || n_gen < 2 || n_rounds < 1 || n_rounds > 16 ||
        n_turns < 1 || n_turns > 64) {
        fprintf(stderr, "usage: bench-scheduler MODEL [-t THREADS] [-p PROMPT] [-n TOKENS] "
                        "[-r ROUNDS<=16] [--turns N<=64] [--kv f16|q8_0]\n"
                        "                       [--only batching|engine|chat]\n");
        return 2;
    }
    moe_err err = {{0}};
    moe_model *m = NULL;
    if (moe_model_load(path, NULL, &m, &err) != MOE_OK) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 1;
    }
    model = m;
    mctx = g_main_context_new();
    printf("model %s (%s), %d threads, prompt %d, %d tokens each, median of %d rounds\n\n",
           path, moe_model_name(m), n_threads, n_prompt, n_gen, n_rounds);
    if (!only[0] || !strcmp(only, "batching")) {
        printf("| concurrency | tok/s overall (median / best) | tok/s decoding (median / best) | "
               "TTFT mean ms | TTFT max ms | "
               "decode tok/s per request | steps per round |\n|---|---|---|---|---|---|---|\n");
        bench_concurrency(1);
        bench_concurrency(4);
        bench_concurrency(16);
    }
    if (!only[0] || !strcmp(only, "engine"))
        bench_engine_steps();
    if (!only[0] || !strcmp(only, "chat"))
        bench_multiturn();
    g_main_context_unref(mctx);
    moe_model_free(m);
    return 0;
}

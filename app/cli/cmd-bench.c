/*
 * cmd-bench.c — `moedesk-cli bench`: prefill and decode speed of a model
 * on this machine. Each repetition clears the cache, evaluates a prompt of
 * -p random tokens (in n_batch chunks, logits only for the last), then
 * decodes -n tokens greedily one at a time. Prints mean and spread over
 * -r repetitions, the peak resident memory, and a decode roofline: the
 * bytes of weights one decoded token reads (attention, router, the chosen
 * share of the experts, output head) against the memory read bandwidth
 * measured by streaming over the model's own mapped weights.
 */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
#include <psapi.h>
#endif

/* Peak resident set size in bytes (0 if unknown). */
static uint64_t peak_rss_bytes(void)
{
#ifdef _WIN32
    PROCESS_MEMORY_COUNTERS pmc;
    if (GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc))
        return pmc.PeakWorkingSetSize;
    return 0;
#else
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = strtoull(line + 6, NULL, 10);
    fclose(f);
    return kb * 1024;
#endif
}

/* Bytes of weights one decode step reads: every tensor except the
 * embedding table (one row) and the routed experts (their used share). */
static double weight_bytes_per_token(const moe_model *m)
{
    const moe_gguf *g = moe_model_gguf(m);
    const double share = (double)moe_model_n_expert_used(m) / moe_model_n_expert(m);
    bool tied = moe_gguf_find_tensor(g, "output.weight") == NULL;
    double total = 0;
    for (int64_t i = 0; i < moe_gguf_n_tensors(g); i++) {
        const moe_gguf_tensor *t = moe_gguf_tensor_at(g, i);
        double b = (double)t->size_bytes;
        if (strcmp(t->name, "token_embd.weight") == 0 && !tied)
            b = b / (double)t->ne[1];
        else if (strstr(t->name, "_exps."))
            b *= share;
        total += b;
    }
    return total;
}

typedef struct bw_job {
    const uint8_t *p;
    size_t         n;
    uint64_t       sum;
} bw_job;

static gpointer bw_read(gpointer arg)
{
    bw_job *j = arg;
    const uint64_t *w = (const uint64_t *)(const void *)j->p;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t n = j->n / 32;
    for (size_t i = 0; i < n; i++) {
        s0 += w[4 * i];
        s1 += w[4 * i + 1];
        s2 += w[4 * i + 2];
        s3 += w[4 * i + 3];
    }
    j->sum = s0 + s1 + s2 + s3;
    return NULL;
}

/* Read bandwidth (bytes/s) streaming `n` bytes with `threads` threads;
 * best of three passes. */
static double read_bandwidth(const uint8_t *p, size_t n, int threads)
{
    double best = 0;
    bw_job jobs[64];
    if (threads > 64)
        threads = 64;
    for (int pass = 0; pass < 3; pass++) {
        GThread *th[64];
        int64_t t0 = g_get_monotonic_time();
        for (int i = 0; i < threads; i++) {
            size_t lo = n / (size_t)threads * (size_t)i & ~(size_t)63;
            size_t hi = i == threads - 1 ? n : (n / (size_t)threads * (size_t)(i + 1) & ~(size_t)63);
            jobs[i] = (bw_job){p + lo, hi - lo, 0};
            th[i] = g_thread_new("bw", bw_read, &jobs[i]);
        }
        for (int i = 0; i < threads; i++)
            g_thread_join(th[i]);
        double s = (double)(g_get_monotonic_time() - t0) / 1e6;
        if (s > 0 && (double)n / s > best)
            best = (double)n / s;
    }
    return best;
}

/* Copy bandwidth (bytes read + written per second), one thread. */
static double copy_bandwidth(size_t n)
{
    uint8_t *a = g_malloc(n), *b = g_malloc(n);
    memset(a, 1, n);
    memset(b, 2, n);
    double best = 0;
    for (int pass = 0; pass < 3; pass++) {
        int64_t t0 = g_get_monotonic_time();
        memcpy(b, a, n);
        double s = (double)(g_get_monotonic_time() - t0) / 1e6;
        if (s > 0 && 2.0 * (double)n / s > best)
            best = 2.0 * (double)n / s;
    }
    g_free(a);
    g_free(b);
    return best;
}

static void mean_sd(const double *v, int n, double *mean, double *sd)
{
    double s = 0, q = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++)
        q += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

static int argmax(const float *v, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

int cli_cmd_bench(int argc, char **argv)
{
    cli_engine_opts eo;
    cli_engine_opts_init(&eo);
    int n_prompt = 512, n_gen = 128, reps = 3;
    gboolean json = FALSE, no_bw = FALSE;
    GOptionEntry entries[] = {
        {"n-prompt", 'p', 0, G_OPTION_ARG_INT, &n_prompt, "prompt tokens (default 512)", "N"},
        {"n-gen", 'n', 0, G_OPTION_ARG_INT, &n_gen, "decoded tokens (default 128)", "N"},
        {"reps", 'r', 0, G_OPTION_ARG_INT, &reps, "repetitions (default 3)", "N"},
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "print one JSON object", NULL},
        {"no-bandwidth", 0, 0, G_OPTION_ARG_NONE, &no_bw, "skip the memory bandwidth test", NULL},
        G_OPTION_ENTRY_NULL,
    };
    GOptionContext *oc = g_option_context_new("- prefill and decode speed");
    g_option_context_add_main_entries(oc, entries, NULL);
    g_option_context_add_group(oc, cli_engine_opts_group(&eo));
    GError *gerr = NULL;
    moe_model *model = NULL;
    moe_context *ctx = NULL;
    moe_batch *batch = NULL;
    int rc = 0;
    double *pp = NULL, *tg = NULL;

    if (!g_option_context_parse(oc, &argc, &argv, &gerr)) {
        fprintf(stderr, "moedesk-cli bench: %s\n", gerr->message);
        rc = 2;
        goto done;
    }
    if (n_prompt < 1 || n_gen < 0 || reps < 1) {
        fprintf(stderr, "moedesk-cli bench: -p must be >= 1, -n >= 0, -r >= 1\n");
        rc = 2;
        goto done;
    }
    if (eo.n_ctx == 0)
        eo.n_ctx = n_prompt + n_gen + 1;
    if ((rc = cli_engine_open(&eo, "bench", &model, &ctx)) != 0)
        goto done;
    if (n_prompt + n_gen > moe_context_n_ctx(ctx)) {
        fprintf(stderr, "moedesk-cli bench: -p + -n = %d exceeds the context (%d)\n", n_prompt + n_gen,
                moe_context_n_ctx(ctx));
        rc = 1;
        goto done;
    }
    const int nb = moe_context_n_batch(ctx), n_vocab = moe_model_n_vocab(model);
    batch = moe_batch_new(nb);
    pp = g_new0(double, reps);
    tg = g_new0(double, reps);
    GRand *rand = g_rand_new_with_seed(1234);
    for (int r = 0; r < reps && rc == 0; r++) {
        moe_kv_clear(ctx);
        moe_err err = {{0}};
        int64_t t0 = g_get_monotonic_time();
        for (int i0 = 0; i0 < n_prompt && rc == 0; i0 += nb) {
            moe_batch_clear(batch);
            for (int i = i0; i < n_prompt && i < i0 + nb; i++)
                moe_batch_add(batch, (int32_t)g_rand_int_range(rand, 0, n_vocab), i, 0,
                              i == n_prompt - 1);
            if (moe_decode(ctx, batch, &err) != MOE_OK)
                rc = 1;
        }
        int64_t t1 = g_get_monotonic_time();
        int32_t tok = rc == 0 ? argmax(moe_get_logits(ctx, batch->n_tokens - 1), n_vocab) : 0;
        for (int i = 0; i < n_gen && rc == 0; i++) {
            moe_batch_clear(batch);
            moe_batch_add(batch, tok, n_prompt + i, 0, true);
            if (moe_decode(ctx, batch, &err) != MOE_OK)
                rc = 1;
            else
                tok = argmax(moe_get_logits(ctx, 0), n_vocab);
        }
        int64_t t2 = g_get_monotonic_time();
        if (rc != 0) {
            fprintf(stderr, "moedesk-cli bench: %s\n", err.msg);
            break;
        }
        pp[r] = n_prompt / ((double)(t1 - t0) / 1e6);
        tg[r] = n_gen > 0 ? n_gen / ((double)(t2 - t1) / 1e6) : 0;
        if (!json)
            fprintf(stderr, "rep %d: prefill %.2f tok/s, decode %.2f tok/s\n", r + 1, pp[r], tg[r]);
    }
    g_rand_free(rand);
    if (rc != 0)
        goto done;

    const uint64_t rss = peak_rss_bytes();
    const uint64_t file = moe_gguf_file_bytes(moe_model_gguf(model));
    const uint64_t kv = moe_context_kv_bytes(ctx);
    const double per_tok = weight_bytes_per_token(model);
    double bw = 0, cbw = 0;
    if (!no_bw) {
        /* Stream over the mapped weights: the tensors are contiguous in
         * the data section, so read from the first to the end of the last. */
        const moe_gguf *g = moe_model_gguf(model);
        const uint8_t *lo = NULL, *hi = NULL;
        for (int64_t i = 0; i < moe_gguf_n_tensors(g); i++) {
            const moe_gguf_tensor *t = moe_gguf_tensor_at(g, i);
            const uint8_t *p = t->data;
            if (t->split != 0)
                continue;
            if (!lo || p < lo)
                lo = p;
            if (!hi || p + t->size_bytes > hi)
                hi = p + t->size_bytes;
        }
        if (lo && hi > lo)
            bw = read_bandwidth(lo, (size_t)(hi - lo), moe_context_n_threads(ctx));
        cbw = copy_bandwidth((size_t)256 << 20);
    }
    double pm, ps, tm, ts;
    mean_sd(pp, reps, &pm, &ps);
    mean_sd(tg, reps, &tm, &ts);
    if (json) {
        printf("{\"model\": \"%s\", \"arch\": \"%s\", \"file_bytes\": %llu, \"n_params\": %llu, "
               "\"threads\": %d, \"isa\": \"%s\", \"n_prompt\": %d, \"n_gen\": %d, \"reps\": %d, "
               "\"prefill_tok_s\": %.3f, \"prefill_sd\": %.3f, \"decode_tok_s\": %.3f, "
               "\"decode_sd\": %.3f, \"peak_rss_bytes\": %llu, \"kv_bytes\": %llu, "
               "\"weight_bytes_per_token\": %.0f, \"read_bandwidth_bytes_s\": %.0f, "
               "\"copy_bandwidth_bytes_s\": %.0f, \"decode_roofline_tok_s\": %.3f}\n",
               eo.model, moe_model_arch(model), (unsigned long long)file,
               (unsigned long long)moe_model_n_params(model), moe_context_n_threads(ctx),
               moe_context_cpu_isa(ctx), n_prompt, n_gen, reps, pm, ps, tm, ts,
               (unsigned long long)rss, (unsigned long long)kv, per_tok, bw, cbw,
               bw > 0 ? bw / per_tok : 0.0);
    } else {
        printf("model      %s (%s, %.2f GB, %.2f B parameters)\n", eo.model, moe_model_arch(model),
               (double)file / 1e9, (double)moe_model_n_params(model) / 1e9);
        printf("threads    %d, kernels %s, %d repetitions\n", moe_context_n_threads(ctx),
               moe_context_cpu_isa(ctx), reps);
        printf("prefill    %d tokens: %.2f +- %.2f tok/s\n", n_prompt, pm, ps);
        printf("decode     %d tokens: %.2f +- %.2f tok/s\n", n_gen, tm, ts);
        printf("peak RSS   %.3f GB (file %.3f GB + KV cache %.1f MB = %.3f GB)\n", (double)rss / 1e9,
               (double)file / 1e9, (double)kv / 1e6, (double)(file + kv) / 1e9);
        if (bw > 0)
            printf("bandwidth  read %.2f GB/s (%d threads), copy %.2f GB/s\n"
                   "roofline   %.1f MB of weights per decoded token -> %.1f tok/s at most "
                   "(decode reaches %.0f%%)\n",
                   bw / 1e9, moe_context_n_threads(ctx), cbw / 1e9, per_tok / 1e6, bw / per_tok,
                   100.0 * tm / (bw / per_tok));
    }

done:
    g_clear_error(&gerr);
    g_option_context_free(oc);
    g_free(pp);
    g_free(tg);
    moe_batch_free(batch);
    moe_context_free(ctx);
    moe_model_free(model);
    cli_engine_opts_clear(&eo);
    return rc;
}

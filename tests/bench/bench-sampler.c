/*
 * bench-sampler.c — microseconds per moe_sampler_sample call at a real
 * vocabulary size (Qwen3: 151936) for the configurations a server uses:
 * greedy, the defaults (top-k 40), top-p 0.95 without top-k, and the whole
 * vocabulary (no filters). Built with the tests, never run by them; the
 * numbers go to docs/benchmarks.md, "Sampling".
 *
 * Usage: bench-sampler [n_vocab] [iterations]
 * Two kinds of rows, a new row every call:
 *   flat:   a wide normal background (sd 4.3) that holds most of the mass,
 *           so top-p keeps thousands of tokens (the slow case);
 *   peaked: a language model's usual shape, background sd 2 and a few tens
 *           of strong candidates 10-18 logits up, so top-p keeps a handful.
 */
#include "moe.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef _WIN32
#include <windows.h>
static double now_us(void)
{
    LARGE_INTEGER f, c;
    QueryPerformanceFrequency(&f);
    QueryPerformanceCounter(&c);
    return (double)c.QuadPart * 1e6 / (double)f.QuadPart;
}
#else
#include <time.h>
static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}
#endif

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static double uniform(void)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (double)(rs >> 11) / 9007199254740992.0;
}

/* Sum of four uniforms, scaled to standard deviation sd. */
static double normalish(double sd)
{
    return (uniform() + uniform() + uniform() + uniform() - 2.0) * 1.732 * sd;
}

static void make_row(float *row, int n, bool peaked)
{
    for (int i = 0; i < n; i++)
        row[i] = (float)normalish(peaked ? 2.0 : 4.3);
    for (int j = 0; j < 30; j++)
        row[(int)(uniform() * n)] = (float)((peaked ? 10.0 : 8.0) + uniform() * 8.0);
}

typedef struct {
    const char        *name;
    moe_sampler_params p;
} bench_cfg;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Times `iters` calls per configuration on ROWS rows of one kind; prints
 * the median (robust against other processes) and the best. */
static int bench_kind(const float *rows, int n_rows, int n, int iters, const bench_cfg *cfg,
                      int n_cfg, const int32_t *recent, double *times)
{
    for (int c = 0; c < n_cfg; c++) {
        moe_sampler *s = NULL;
        moe_err err = {{0}};
        if (moe_sampler_new(n, &cfg[c].p, &s, &err) != MOE_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        long sum = 0;
        for (int w = 0; w < 10; w++)
            sum += moe_sampler_sample(s, rows, recent, 64, &err);
        for (int i = 0; i < iters; i++) {
            const float *row = rows + (size_t)(i % n_rows) * (size_t)n;
            double t0 = now_us();
            sum += moe_sampler_sample(s, row, recent, 64, &err);
            times[i] = now_us() - t0;
        }
        qsort(times, (size_t)iters, sizeof *times, cmp_double);
        printf("  %-48s median %7.1f us  best %7.1f us  (checksum %ld)\n", cfg[c].name,
               times[iters / 2], times[0], sum);
        moe_sampler_free(s);
    }
    return 0;
}

int main(int argc, char **argv)
{
    enum { ROWS = 8 };
    int n = argc > 1 ? atoi(argv[1]) : 151936;
    int iters = argc > 2 ? atoi(argv[2]) : 300;
    if (n < 1 || iters < 1) {
        fprintf(stderr, "usage: bench-sampler [n_vocab] [iterations]\n");
        return 2;
    }
    float *rows = malloc((size_t)n * ROWS * sizeof *rows);
    double *times = malloc((size_t)iters * sizeof *times);
    if (!rows || !times)
        return 1;
    int32_t recent[64];
    for (int i = 0; i < 64; i++)
        recent[i] = (int32_t)(uniform() * n);

    moe_sampler_params d = moe_sampler_params_default();
    bench_cfg cfg[5] = {
        {"greedy", d},
        {"top-k 40 (defaults: top-p 0.95, min-p 0.05)", d},
        {"top-p 0.95, no top-k, no min-p", d},
        {"top-p 0.95 + repeat/presence penalties, 64", d},
        {"whole vocabulary (T 1, no filters)", d},
    };
    cfg[0].p.temperature = 0.0f;
    cfg[2].p.top_k = 0;
    cfg[2].p.min_p = 0.0f;
    cfg[3].p = cfg[2].p;
    cfg[3].p.repeat_penalty = 1.1f;
    cfg[3].p.presence_penalty = 0.5f;
    cfg[4].p.temperature = 1.0f;
    cfg[4].p.top_k = 0;
    cfg[4].p.top_p = 1.0f;
    cfg[4].p.min_p = 0.0f;

    int rc = 0;
    for (int kind = 0; kind < 2 && rc == 0; kind++) {
        for (int r = 0; r < ROWS; r++)
            make_row(rows + (size_t)r * (size_t)n, n, kind == 1);
        printf("n_vocab %d, %s rows, %d calls each\n", n, kind ? "peaked" : "flat", iters);
        rc = bench_kind(rows, ROWS, n, iters, cfg, 5, recent, times);
    }
    free(rows);
    free(times);
    return rc;
}

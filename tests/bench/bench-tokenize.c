/*
 * bench-tokenize.c — tokenizer throughput: how many megabytes of text per
 * second moe_tokenize turns into ids (docs/benchmarks.md, "Tokenizer
 * throughput", has the figures and llama.cpp's for the same text).
 *
 *   bench-tokenize VOCAB.gguf TEXT [RUNS] [FLAGS]
 *
 * Loads the vocabulary (timed), tokenizes TEXT once to warm up, then RUNS
 * times (default 7) and prints the median and best run. FLAGS are
 * moe_tokenize's (default 0: no BOS/EOS, special-token text as text).
 */
#include "moe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
static double now_s(void)
{
    LARGE_INTEGER f, c;
    QueryPerformanceFrequency(&f);
    QueryPerformanceCounter(&c);
    return (double)c.QuadPart / (double)f.QuadPart;
}
#else
#include <time.h>
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
#endif

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench-tokenize VOCAB.gguf TEXT [RUNS] [FLAGS]\n");
        return 2;
    }
    int runs = argc > 3 ? atoi(argv[3]) : 7;
    unsigned flags = argc > 4 ? (unsigned)atoi(argv[4]) : 0;
    if (runs < 1 || runs > 1000)
        runs = 7;

    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        fprintf(stderr, "bench-tokenize: cannot open %s\n", argv[2]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc(len > 0 ? (size_t)len : 1);
    if (!text || fread(text, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "bench-tokenize: cannot read %s\n", argv[2]);
        return 1;
    }
    fclose(f);

    moe_err err = {{0}};
    moe_gguf *g = NULL;
    moe_vocab *v = NULL;
    double t0 = now_s();
    if (moe_gguf_open(argv[1], &g, &err) != MOE_OK || moe_vocab_load(g, &v, &err) != MOE_OK) {
        fprintf(stderr, "bench-tokenize: %s\n", err.msg);
        return 1;
    }
    double t_load = now_s() - t0;
    moe_gguf_free(g);

    size_t cap = (size_t)len + 16, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    double *times = malloc((size_t)runs * sizeof *times);
    if (!ids || !times)
        return 1;
    if (moe_tokenize(v, text, (size_t)len, flags, ids, cap, &n, &err) != MOE_OK) {
        fprintf(stderr, "bench-tokenize: %s\n", err.msg);
        return 1;
    }
    for (int r = 0; r < runs; r++) {
        t0 = now_s();
        moe_tokenize(v, text, (size_t)len, flags, ids, cap, &n, &err);
        times[r] = now_s() - t0;
    }
    qsort(times, (size_t)runs, sizeof *times, cmp_double);
    double med = times[runs / 2], best = times[0];
    printf("vocabulary load: %.1f ms (%d tokens, pre-tokenizer %s)\n", t_load * 1e3,
           moe_vocab_n_tokens(v), moe_vocab_pre(v));
    printf("text: %ld bytes -> %zu tokens (%.2f bytes/token)\n", len, n, (double)len / (double)n);
    printf("tokenize: median %.1f ms = %.2f MB/s (best %.1f ms = %.2f MB/s) over %d runs\n",
           med * 1e3, (double)len / med / 1e6, best * 1e3, (double)len / best / 1e6, runs);
    free(ids);
    free(times);
    free(text);
    moe_vocab_free(v);
    return 0;
}

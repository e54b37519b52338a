/*
 * bench-quant.c — throughput of libmoe's scalar quantisers and
 * dequantisers, one thread, per type. Not a test: run it by hand and paste
 * the table into docs/benchmarks.md ("Quantisation").
 *
 *   build/tests/bench/bench-quant [MIB]   (MIB of f32 input per type, default 16)
 *
 * MB/s counts f32 bytes (input when quantising, output when dequantising),
 * so rows of different types compare like for like. Each figure is the
 * best of three runs to damp noise from other processes.
 */
#include "moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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

/* Weight-like data: a sum of uniforms (near normal) with per-block scale
 * variation and a few outliers, from a fixed LCG so runs compare. */
static void fill(float *x, int64_t n)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < n; i++) {
        float v = 0;
        for (int k = 0; k < 4; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            v += (float)(s >> 40) / (float)(1 << 24) - 0.5f;
        }
        float scale = 0.02f * (float)(1 + (i / 256) % 5);
        if ((s >> 20) % 1000 == 0)
            scale *= 20;
        x[i] = v * scale;
    }
}

int main(int argc, char **argv)
{
    const long mib = argc > 1 ? strtol(argv[1], NULL, 10) : 16;
    if (mib <= 0 || mib > 4096) {
        fprintf(stderr, "usage: %s [MIB of f32 per type, 1..4096]\n", argv[0]);
        return 1;
    }
    const int64_t n = (int64_t)mib * 1024 * 1024 / 4; /* multiple of 256 */
    float *x = malloc((size_t)n * sizeof(float));
    float *y = malloc((size_t)n * sizeof(float));
    void *q = malloc((size_t)n * sizeof(float)); /* largest row: f32 */
    if (x == NULL || y == NULL || q == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    fill(x, n);
    const moe_type types[] = { MOE_TYPE_F16, MOE_TYPE_BF16, MOE_TYPE_Q8_0,
                               MOE_TYPE_Q4_0, MOE_TYPE_Q4_K, MOE_TYPE_Q6_K };
    const double mb = (double)n * 4 / 1e6;
    printf("| type | quantise MB/s | dequantise MB/s | RMSE |\n|---|---:|---:|---:|\n");
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        double best_q = 1e30, best_d = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            double t0 = now_s();
            if (moe_quantize_row(types[t], x, q, n) != MOE_OK)
                return 1;
            double t1 = now_s();
            if (moe_dequantize_row(types[t], q, y, n) != MOE_OK)
                return 1;
            double t2 = now_s();
            best_q = t1 - t0 < best_q ? t1 - t0 : best_q;
            best_d = t2 - t1 < best_d ? t2 - t1 : best_d;
        }
        double se = 0;
        for (int64_t i = 0; i < n; i++)
            se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        printf("| %s | %.1f | %.1f | %.3g |\n", moe_type_name(types[t]),
               mb / best_q, mb / best_d, sqrt(se / (double)n));
        fflush(stdout);
    }
    free(q);
    free(y);
    free(x);
    return 0;
}

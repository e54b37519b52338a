/*
 * bench-cpu.c — engine-only prefill and decode speed for one model file and
 * thread count, for machines without the app layer (the lent GPU machine:
 * tests/gpu/run.sh). Prefill: one 256-token chunk (best of 3); decode: 64
 * tokens one at a time after it (best of 3). Prints tokens per second.
 *
 *   bench-cpu MODEL.gguf THREADS
 */
#include <moe.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bench-cpu MODEL.gguf THREADS\n");
        return 2;
    }
    moe_model *m = NULL;
    moe_err e = {{0}};
    if (moe_model_load(argv[1], NULL, &m, &e) != MOE_OK) {
        fprintf(stderr, "%s: %s\n", argv[1], e.msg);
        return 1;
    }
    moe_context_params p = moe_context_default_params();
    p.n_ctx = 512;
    p.n_batch = 256;
    p.n_threads = atoi(argv[2]);
    int nv = moe_model_n_vocab(m);
    double best_pp = 1e9, best_tg = 1e9;
    const char *isa = "?";
    for (int rep = 0; rep < 3; rep++) {
        moe_context *c = NULL;
        if (moe_context_new(m, &p, &c, &e) != MOE_OK) {
            fprintf(stderr, "context: %s\n", e.msg);
            return 1;
        }
        isa = moe_context_cpu_isa(c);
        moe_batch *b = moe_batch_new(256);
        for (int i = 0; i < 256; i++)
            moe_batch_add(b, (i * 7 + 3) % nv, i, 0, i == 255);
        double t0 = now_s();
        if (moe_decode(c, b, &e) != MOE_OK) {
            fprintf(stderr, "prefill: %s\n", e.msg);
            return 1;
        }
        double t1 = now_s();
        for (int i = 0; i < 64; i++) {
            moe_batch_clear(b);
            moe_batch_add(b, (i * 13 + 5) % nv, 256 + i, 0, true);
            if (moe_decode(c, b, &e) != MOE_OK) {
                fprintf(stderr, "decode: %s\n", e.msg);
                return 1;
            }
        }
        double t2 = now_s();
        if (t1 - t0 < best_pp)
            best_pp = t1 - t0;
        if (t2 - t1 < best_tg)
            best_tg = t2 - t1;
        moe_batch_free(b);
        moe_context_free(c);
    }
    printf("%s: %s kernels, %d threads: prefill %.1f tok/s, decode %.1f tok/s\n", argv[1], isa,
           p.n_threads, 256 / best_pp, 64 / best_tg);
    moe_model_free(m);
    return 0;
}

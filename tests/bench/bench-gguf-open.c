/*
 * bench-gguf-open.c — how long moe_gguf_open takes on a model-sized file,
 * and proof that opening reads only the header (resident memory stays
 * near the header size, not the file size).
 *
 * Writes a ~1.1 GB GGUF through the streaming writer: the key/values of a
 * real vocabulary (Qwen2: ~150k tokens and merges, so the header is
 * realistic, ~6 MB) plus 8 Q8_0 [4096, 30720] "expert" tensors and 1000
 * small F32 norms. Then times moe_gguf_open + a walk over every tensor
 * info (name, shape, type, size; no data touched): once with the file
 * evicted from the page cache (Linux: posix_fadvise DONTNEED) and then
 * warm, best and median of 20. Reports VmRSS (Linux) around the open.
 *   usage: bench-gguf-open [DIR [VOCAB.gguf]]
 *   DIR defaults to MOE_BUILD_ROOT or "."; VOCAB to
 *   $MOE_SHARED_DATA/vocab/ggml-vocab-qwen2.gguf (skipped if absent).
 * Not a test: it writes a gigabyte. Results go to docs/benchmarks.md.
 */
#include "gguf-internal.h" /* for the header size only */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
#else
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
#endif

#define N_EXPERTS 8
#define N_NORMS   1000
#define N_RUNS    20

static double now_ms(void)
{
#ifdef _WIN32
    LARGE_INTEGER f, c;
    QueryPerformanceFrequency(&f);
    QueryPerformanceCounter(&c);
    return 1000.0 * (double)c.QuadPart / (double)f.QuadPart;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
#endif
}

/* Resident set size in MiB, or -1 where /proc is not available. */
static double rss_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib < 0 ? -1.0 : kib / 1024.0;
}

/* Drops the file's pages from the page cache so the next open is cold. */
static int evict_from_cache(const char *path)
{
#if defined(_WIN32) || !defined(POSIX_FADV_DONTNEED)
    (void)path;
    return 0;
#else
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    fdatasync(fd);
    int ok = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
    close(fd);
    return ok;
#endif
}

static int write_model(const char *path, const char *vocab, double *seconds)
{
    moe_err err = { { 0 } };
    moe_gguf *v = NULL;
    moe_gguf_writer *w = moe_gguf_writer_new();
    if (vocab && moe_gguf_open(vocab, &v, &err) == MOE_OK)
        for (int64_t i = 0; i < moe_gguf_n_kv(v); i++)
            moe_gguf_writer_copy_kv(w, v, i);
    moe_gguf_writer_set_str(w, "general.name", "bench-gguf-open");
    const int64_t ne_expert[2] = { 4096, 30720 }, ne_norm[1] = { 4096 };
    char name[64];
    for (int i = 0; i < N_EXPERTS; i++) {
        snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", i);
        moe_gguf_writer_add_tensor(w, name, MOE_TYPE_Q8_0, 2, ne_expert, NULL);
    }
    for (int i = 0; i < N_NORMS; i++) {
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", i);
        moe_gguf_writer_add_tensor(w, name, MOE_TYPE_F32, 1, ne_norm, NULL);
    }
    size_t expert_bytes = moe_type_row_bytes(MOE_TYPE_Q8_0, ne_expert[0]) * (size_t)ne_expert[1];
    uint8_t *zeros = calloc(1, expert_bytes);
    double t0 = now_ms();
    moe_status st = zeros ? moe_gguf_writer_begin(w, path, &err) : MOE_ERR_NOMEM;
    for (int64_t i = 0; st == MOE_OK && i < N_EXPERTS + N_NORMS; i++)
        st = moe_gguf_writer_write_tensor_data(w, i, zeros, &err);
    if (st == MOE_OK)
        st = moe_gguf_writer_finish(w, &err);
    *seconds = (now_ms() - t0) / 1000.0;
    if (st != MOE_OK)
        fprintf(stderr, "bench-gguf-open: %s\n", err.msg);
    free(zeros);
    moe_gguf_writer_free(w);
    moe_gguf_free(v);
    return st == MOE_OK;
}

/* One open plus a walk over every tensor info; returns milliseconds and,
 * if rss is not NULL, the resident set size while the file is open. */
static double open_and_walk(const char *path, uint64_t *sum, double *rss)
{
    moe_err err = { { 0 } };
    moe_gguf *g = NULL;
    double t0 = now_ms();
    if (moe_gguf_open(path, &g, &err) != MOE_OK) {
        fprintf(stderr, "bench-gguf-open: %s\n", err.msg);
        return -1;
    }
    for (int64_t i = 0; i < moe_gguf_n_tensors(g); i++) {
        const moe_gguf_tensor *t = moe_gguf_tensor_at(g, i);
        *sum += t->size_bytes + (uint64_t)t->ne[0] + t->type + (uint8_t)t->name[0];
    }
    double ms = now_ms() - t0;
    if (rss)
        *rss = rss_mib();
    moe_gguf_free(g);
    return ms;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : getenv("MOE_BUILD_ROOT");
    char path[1024], vocab[1024];
    const char *shared = getenv("MOE_SHARED_DATA");
    snprintf(path, sizeof path, "%s/bench-gguf-open.gguf", dir ? dir : ".");
    snprintf(vocab, sizeof vocab, "%s/vocab/ggml-vocab-qwen2.gguf", shared ? shared : ".");
    double write_s = 0;
    if (!write_model(path, argc > 2 ? argv[2] : vocab, &write_s))
        return 1;

    moe_err err = { { 0 } };
    moe_gguf *g = NULL;
    if (moe_gguf_open(path, &g, &err) != MOE_OK)
        return fprintf(stderr, "bench-gguf-open: %s\n", err.msg), 1;
    double gb = moe_gguf_file_bytes(g) / 1e9;
    printf("file: %s\n  %.2f GB, %lld tensors, %lld key/values, header %.1f MB\n", path, gb,
           (long long)moe_gguf_n_tensors(g), (long long)moe_gguf_n_kv(g),
           g->parts[0].data_offset / 1e6);
    moe_gguf_free(g);
    printf("write (streaming writer): %.1f s, %.0f MB/s\n", write_s, gb * 1000 / write_s);

    uint64_t sum = 0;
    int cold = evict_from_cache(path);
    double rss0 = rss_mib(), rss1 = -1;
    double cold_ms = open_and_walk(path, &sum, &rss1);
    printf("open + walk, %s: %.1f ms\n", cold ? "page cache evicted (cold)" : "first run", cold_ms);
    double runs[N_RUNS];
    for (int i = 0; i < N_RUNS; i++)
        runs[i] = open_and_walk(path, &sum, NULL);
    qsort(runs, N_RUNS, sizeof runs[0], cmp_double);
    printf("open + walk, warm: best %.1f ms, median %.1f ms (%d runs)\n", runs[0],
           runs[N_RUNS / 2], N_RUNS);
    if (rss0 >= 0)
        printf("VmRSS: %.1f MiB before the cold open, %.1f MiB while open; file is %.0f MiB\n",
               rss0, rss1, gb * 1e9 / (1024.0 * 1024.0));
    printf("(checksum %llu)\n", (unsigned long long)sum);
    remove(path);
    return 0;
}

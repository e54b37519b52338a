/*
 * sampler-kernels.h — the numeric pieces the sampler is built from: a seeded
 * PRNG, exp/log that give the same bits on every platform, and the passes
 * over a whole row of logits (copy-and-clean with max, max, find, exp) that
 * dominate sampling time and so have SSE2 versions.
 *
 * Why not libm: expf/logf differ in the last bit between glibc and the
 * mingw-w64 runtime, and one bit at a top-p boundary changes which token is
 * drawn. Everything here uses IEEE +, -, *, / and integer bit operations
 * only, in a fixed order, and the SSE2 and scalar versions of each pass do
 * the same operations per element, so their results are bit-identical
 * (test-sampler checks that). Not part of the public API.
 */
#ifndef MOE_SAMPLER_KERNELS_H
#define MOE_SAMPLER_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Lets tests switch the AVX2 bodies off (to compare them with SSE2 and
 * scalar) and back on; returns whether this build and CPU have them at all.
 * Not thread-safe: call it only while no sampler runs. */
bool moe_kernels_use_avx2(bool allow);

/* xoshiro256** state (Blackman & Vigna), seeded through splitmix64 so any
 * 64-bit seed, 0 included, gives a good non-zero state. */
typedef struct moe_rng {
    uint64_t s[4];
} moe_rng;

void     moe_rng_seed(moe_rng *rng, uint64_t seed);
uint64_t moe_rng_next_u64(moe_rng *rng);
/* Uniform in [0, 1), 53 random bits. */
double   moe_rng_next_f64(moe_rng *rng);

/* e^x in single precision, within 2 ulp for -87 <= x <= 88. Below -87 it
 * returns 0 (never a subnormal, so flush-to-zero modes cannot change the
 * result); above 88 it returns e^88. x must not be NaN. */
float  moe_exp_f32(float x);
/* Natural logarithm for x > 0 finite, to about 1 ulp; -INFINITY for 0. */
double moe_log_f64(double x);

/* dst[i] = exp((src[i] - shift) / temp) for i < n (moe_exp_f32 per element).
 * dst may equal src. */
void moe_exp_shift_f32(float *dst, const float *src, size_t n, float shift, float temp);
/* The same pass without SSE2, for the bit-identity test. */
void moe_exp_shift_f32_scalar(float *dst, const float *src, size_t n, float shift,
                              float temp);

/* Copies n logits, turning NaN into -INFINITY and +INFINITY into FLT_MAX;
 * returns the largest value copied (-INFINITY if n == 0 or none is finite). */
float moe_logits_clean_max_f32(float *dst, const float *src, size_t n);
/* Largest of x[0..n) (no NaN allowed); -INFINITY for n == 0. */
float moe_max_f32(const float *x, size_t n);
/* First i with x[i] == v, or n. */
size_t moe_find_f32(const float *x, size_t n, float v);
/* First i >= from with x[i] > v, or n. */
size_t moe_find_gt_f32(const float *x, size_t from, size_t n, float v);
/* Writes i and x[i], in increasing i, for every i whose distance below the
 * top, d = top - x[i], satisfies d < d_lt and d <= d_le (pass +INFINITY to
 * drop a bound; -INFINITY entries never pass since d is then +INFINITY).
 * Returns how many were written; ids/vals need room for n. */
size_t moe_select_near_f32(const float *x, size_t n, float top, float d_lt, float d_le,
                           int32_t *ids, float *vals);
/* Adds exp(x[i] - top) into mass[b] for b = (top - x[i]) * buckets_per_unit
 * truncated, the last bucket taking everything beyond; zero weights are
 * skipped. Adds in increasing i, so the sums are reproducible. */
void moe_mass_histogram_f32(const float *x, size_t n, float top, float buckets_per_unit,
                            double *mass, size_t n_buckets);

#endif /* MOE_SAMPLER_KERNELS_H */

/*
 * sampler-kernels.c — PRNG, platform-independent exp/log and the whole-row
 * passes the sampler spends its time in (see sampler-kernels.h for why the
 * math is our own).
 *
 * Each row pass has an SSE2 body (x86-64 always has SSE2, and so does every
 * Windows x64 machine) and a scalar remainder that performs the same IEEE
 * operations in the same order per element, so the two agree bit for bit.
 * The exp passes, which dominate top-p over a whole vocabulary, also have an
 * AVX2 body chosen at run time; it is built without FMA, so it too rounds
 * every operation exactly as the scalar code does. Reductions are either
 * exact (max, find) or stay scalar and sequential (sums), never
 * reassociated, so no ISA choice changes a result.
 */
#include "sampler-kernels.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#define MOE_HAVE_SSE2 1
#endif
#if MOE_HAVE_SSE2 && (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>
#define MOE_HAVE_AVX2 1
#define MOE_TARGET_AVX2 __attribute__((target("avx2")))
#endif

/* a*b+c must round twice, as the SSE2 body does; never fuse. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- PRNG ------------------------------------------------------------- */

static uint64_t splitmix64_next(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static inline uint64_t rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void moe_rng_seed(moe_rng *rng, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64_next(&x);
}

uint64_t moe_rng_next_u64(moe_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t out = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return out;
}

double moe_rng_next_f64(moe_rng *rng)
{
    /* The top 53 bits scaled by 2^-53: every value is exact in a double. */
    return (double)(moe_rng_next_u64(rng) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- exp and log ------------------------------------------------------ */

/* e^x = 2^n * e^r with n = round(x / ln2) and |r| <= ln2/2 (a little more
 * after rounding). n is rounded by adding 1.5 * 2^23, which leaves the
 * integer in the low mantissa bits. ln2 is split so n * LN2_HI is exact for
 * |n| < 2^11. e^r is its Taylor series to r^7: the first omitted term is
 * below 6e-9 relative for |r| < 0.35, under half an ulp. */
#define EXP_X_MIN   (-87.0f) /* e^-87 > FLT_MIN: results are never subnormal */
#define EXP_X_MAX   88.0f    /* e^88 < FLT_MAX                               */
#define EXP_LOG2E   1.44269504088896341f
#define EXP_ROUND   12582912.0f            /* 1.5 * 2^23                     */
#define EXP_LN2_HI  0.693115234375f        /* ln 2 to 12 bits                */
#define EXP_LN2_LO  3.19461832987e-05f     /* ln 2 - EXP_LN2_HI              */
#define EXP_C7      (1.0f / 5040.0f)
#define EXP_C6      (1.0f / 720.0f)
#define EXP_C5      (1.0f / 120.0f)
#define EXP_C4      (1.0f / 24.0f)
#define EXP_C3      (1.0f / 6.0f)
#define EXP_C2      0.5f

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float moe_exp_f32(float x)
{
    if (!(x >= EXP_X_MIN))
        return 0.0f;
    if (x > EXP_X_MAX)
        x = EXP_X_MAX;
    float t = x * EXP_LOG2E;
    t = t + EXP_ROUND;
    float n = t - EXP_ROUND;
    int32_t ni = (int32_t)(f32_bits(t) - f32_bits(EXP_ROUND));
    float r = x - n * EXP_LN2_HI;
    r = r - n * EXP_LN2_LO;
    float p = EXP_C7;
    p = p * r + EXP_C6;
    p = p * r + EXP_C5;
    p = p * r + EXP_C4;
    p = p * r + EXP_C3;
    p = p * r + EXP_C2;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    return p * f32_from_bits((uint32_t)(ni + 127) << 23);
}

double moe_log_f64(double x)
{
    if (!(x > 0.0))
        return x == 0.0 ? -INFINITY : NAN;
    if (x == INFINITY)
        return INFINITY;
    /* x = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(s) with
     * s = (m-1)/(m+1), |s| < 0.172, so s^2 < 0.0295 and 12 terms of the
     * odd series reach below 1e-18. frexp is exact on every libc. */
    int e;
    double m = frexp(x, &e);
    if (m < 0.70710678118654752) {
        m *= 2.0;
        e -= 1;
    }
    double s = (m - 1.0) / (m + 1.0);
    double z = s * s;
    double sum = 0.0;
    for (int k = 23; k >= 3; k -= 2)
        sum = (sum + 1.0 / k) * z;
    double ln_m = 2.0 * s * (1.0 + sum);
    return (double)e * 0.69314718055994530942 + ln_m;
}

#ifdef MOE_HAVE_SSE2
static inline __m128 exp_ps(__m128 x)
{
    /* Same steps as moe_exp_f32; out-of-range lanes are clamped first so no
     * lane computes with infinities, then zeroed by the mask. */
    __m128 too_small = _mm_cmplt_ps(x, _mm_set1_ps(EXP_X_MIN));
    x = _mm_max_ps(x, _mm_set1_ps(EXP_X_MIN));
    x = _mm_min_ps(x, _mm_set1_ps(EXP_X_MAX));
    __m128 t = _mm_mul_ps(x, _mm_set1_ps(EXP_LOG2E));
    t = _mm_add_ps(t, _mm_set1_ps(EXP_ROUND));
    __m128 n = _mm_sub_ps(t, _mm_set1_ps(EXP_ROUND));
    __m128i ni = _mm_sub_epi32(_mm_castps_si128(t),
                               _mm_set1_epi32((int32_t)f32_bits(EXP_ROUND)));
    __m128 r = _mm_sub_ps(x, _mm_mul_ps(n, _mm_set1_ps(EXP_LN2_HI)));
    r = _mm_sub_ps(r, _mm_mul_ps(n, _mm_set1_ps(EXP_LN2_LO)));
    __m128 p = _mm_set1_ps(EXP_C7);
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_C6));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_C5));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_C4));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_C3));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_C2));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f));
    __m128i e = _mm_slli_epi32(_mm_add_epi32(ni, _mm_set1_epi32(127)), 23);
    __m128 y = _mm_mul_ps(p, _mm_castsi128_ps(e));
    return _mm_andnot_ps(too_small, y);
}
#endif

#ifdef MOE_HAVE_AVX2
/* exp_ps, eight lanes at a time; same operations in the same order. */
MOE_TARGET_AVX2 static inline __m256 exp_ps8(__m256 x)
{
    __m256 too_small = _mm256_cmp_ps(x, _mm256_set1_ps(EXP_X_MIN), _CMP_LT_OQ);
    x = _mm256_max_ps(x, _mm256_set1_ps(EXP_X_MIN));
    x = _mm256_min_ps(x, _mm256_set1_ps(EXP_X_MAX));
    __m256 t = _mm256_mul_ps(x, _mm256_set1_ps(EXP_LOG2E));
    t = _mm256_add_ps(t, _mm256_set1_ps(EXP_ROUND));
    __m256 n = _mm256_sub_ps(t, _mm256_set1_ps(EXP_ROUND));
    __m256i ni = _mm256_sub_epi32(_mm256_castps_si256(t),
                                  _mm256_set1_epi32((int32_t)f32_bits(EXP_ROUND)));
    __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(EXP_LN2_HI)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(EXP_LN2_LO)));
    __m256 p = _mm256_set1_ps(EXP_C7);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(EXP_C6));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(EXP_C5));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(EXP_C4));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(EXP_C3));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(EXP_C2));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(too_small, y);
}

/* Handles the multiple-of-8 prefix; returns how many were done. */
MOE_TARGET_AVX2 static size_t exp_shift_avx2(float *dst, const float *src, size_t n,
                                             float shift, float temp)
{
    size_t i = 0;
    __m256 vs = _mm256_set1_ps(shift), vt = _mm256_set1_ps(temp);
    if (temp == 1.0f) { /* x / 1 == x exactly: skip the slow divide */
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, exp_ps8(_mm256_sub_ps(_mm256_loadu_ps(src + i), vs)));
    } else {
        for (; i + 8 <= n; i += 8) {
            __m256 v = _mm256_div_ps(_mm256_sub_ps(_mm256_loadu_ps(src + i), vs), vt);
            _mm256_storeu_ps(dst + i, exp_ps8(v));
        }
    }
    return i;
}

/* Bucket indices: (top - x) * per_unit clamped to [0, last], truncated
 * (x above top, outside the contract, lands in bucket 0 instead of out of
 * bounds). */
MOE_TARGET_AVX2 static size_t bucket_avx2(int32_t *idx, const float *x, size_t n, float top,
                                          float per_unit, float last)
{
    size_t i = 0;
    __m256 vt = _mm256_set1_ps(top), vp = _mm256_set1_ps(per_unit), vl = _mm256_set1_ps(last);
    for (; i + 8 <= n; i += 8) {
        __m256 b = _mm256_mul_ps(_mm256_sub_ps(vt, _mm256_loadu_ps(x + i)), vp);
        b = _mm256_max_ps(_mm256_min_ps(b, vl), _mm256_setzero_ps());
        _mm256_storeu_si256((__m256i *)(idx + i), _mm256_cvttps_epi32(b));
    }
    return i;
}

static int avx2_allowed = 1; /* only tests change it */

/* libgcc fills the CPU model from a constructor, so this is a read of
 * constant data after start-up: no lock, no cache of our own. */
static int cpu_has_avx2(void)
{
    return avx2_allowed && __builtin_cpu_supports("avx2");
}
#endif

bool moe_kernels_use_avx2(bool allow)
{
#ifdef MOE_HAVE_AVX2
    avx2_allowed = allow;
    return __builtin_cpu_supports("avx2") != 0;
#else
    (void)allow;
    return false;
#endif
}

void moe_exp_shift_f32_scalar(float *dst, const float *src, size_t n, float shift,
                              float temp)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = moe_exp_f32((src[i] - shift) / temp);
}

void moe_exp_shift_f32(float *dst, const float *src, size_t n, float shift, float temp)
{
    size_t i = 0;
#ifdef MOE_HAVE_AVX2
    if (cpu_has_avx2())
        i = exp_shift_avx2(dst, src, n, shift, temp);
#endif
#ifdef MOE_HAVE_SSE2
    __m128 vs = _mm_set1_ps(shift), vt = _mm_set1_ps(temp);
    if (temp == 1.0f) {
        for (; i + 4 <= n; i += 4)
            _mm_storeu_ps(dst + i, exp_ps(_mm_sub_ps(_mm_loadu_ps(src + i), vs)));
    }
    for (; i + 4 <= n; i += 4) {
        __m128 v = _mm_div_ps(_mm_sub_ps(_mm_loadu_ps(src + i), vs), vt);
        _mm_storeu_ps(dst + i, exp_ps(v));
    }
#endif
    moe_exp_shift_f32_scalar(dst + i, src + i, n - i, shift, temp);
}

void moe_mass_histogram_f32(const float *x, size_t n, float top, float buckets_per_unit,
                            double *mass, size_t n_buckets)
{
    /* Blocks keep the weights and bucket numbers in L1 between the SIMD
     * passes and the scalar scatter. */
    enum { BLOCK = 512 };
    float e[BLOCK];
    int32_t idx[BLOCK];
    const float last = (float)(n_buckets - 1);
    for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
        size_t nb = n - i0 < BLOCK ? n - i0 : BLOCK;
        const float *xb = x + i0;
        moe_exp_shift_f32(e, xb, nb, top, 1.0f);
        size_t j = 0;
#ifdef MOE_HAVE_AVX2
        if (cpu_has_avx2())
            j = bucket_avx2(idx, xb, nb, top, buckets_per_unit, last);
#endif
        for (; j < nb; j++) {
            float b = (top - xb[j]) * buckets_per_unit;
            b = b < last ? b : last;
            idx[j] = (int32_t)(b > 0.0f ? b : 0.0f);
        }
        for (j = 0; j < nb; j++)
            mass[idx[j]] += e[j];
    }
}

/* ---- row passes ------------------------------------------------------- */

static inline float clean_f32(float v)
{
    if (v != v)
        return -INFINITY;
    return v > FLT_MAX ? FLT_MAX : v;
}

float moe_logits_clean_max_f32(float *dst, const float *src, size_t n)
{
    float mx = -INFINITY;
    size_t i = 0;
#ifdef MOE_HAVE_SSE2
    __m128 vmax = _mm_set1_ps(-INFINITY);
    const __m128 ninf = _mm_set1_ps(-INFINITY), big = _mm_set1_ps(FLT_MAX);
    for (; i + 4 <= n; i += 4) {
        __m128 v = _mm_loadu_ps(src + i);
        __m128 ord = _mm_cmpord_ps(v, v);
        v = _mm_or_ps(_mm_and_ps(ord, v), _mm_andnot_ps(ord, ninf));
        v = _mm_min_ps(v, big);
        _mm_storeu_ps(dst + i, v);
        vmax = _mm_max_ps(vmax, v);
    }
    float lanes[4];
    _mm_storeu_ps(lanes, vmax);
    for (int k = 0; k < 4; k++)
        mx = lanes[k] > mx ? lanes[k] : mx;
#endif
    for (; i < n; i++) {
        dst[i] = clean_f32(src[i]);
        mx = dst[i] > mx ? dst[i] : mx;
    }
    return mx;
}

float moe_max_f32(const float *x, size_t n)
{
    float mx = -INFINITY;
    size_t i = 0;
#ifdef MOE_HAVE_SSE2
    __m128 vmax = _mm_set1_ps(-INFINITY);
    for (; i + 4 <= n; i += 4)
        vmax = _mm_max_ps(vmax, _mm_loadu_ps(x + i));
    float lanes[4];
    _mm_storeu_ps(lanes, vmax);
    for (int k = 0; k < 4; k++)
        mx = lanes[k] > mx ? lanes[k] : mx;
#endif
    for (; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    return mx;
}

size_t moe_find_f32(const float *x, size_t n, float v)
{
    size_t i = 0;
#ifdef MOE_HAVE_SSE2
    __m128 vv = _mm_set1_ps(v);
    for (; i + 4 <= n; i += 4) {
        int mask = _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(x + i), vv));
        if (mask) {
            for (int k = 0; k < 4; k++)
                if (mask & (1 << k))
                    return i + (size_t)k;
        }
    }
#endif
    for (; i < n; i++)
        if (x[i] == v)
            return i;
    return n;
}

size_t moe_find_gt_f32(const float *x, size_t from, size_t n, float v)
{
    size_t i = from;
#ifdef MOE_HAVE_SSE2
    __m128 vv = _mm_set1_ps(v);
    for (; i + 4 <= n; i += 4) {
        int mask = _mm_movemask_ps(_mm_cmpgt_ps(_mm_loadu_ps(x + i), vv));
        if (mask) {
            for (int k = 0; k < 4; k++)
                if (mask & (1 << k))
                    return i + (size_t)k;
        }
    }
#endif
    for (; i < n; i++)
        if (x[i] > v)
            return i;
    return n;
}

size_t moe_select_near_f32(const float *x, size_t n, float top, float d_lt, float d_le,
                           int32_t *ids, float *vals)
{
    size_t m = 0, i = 0;
#ifdef MOE_HAVE_SSE2
    __m128 vtop = _mm_set1_ps(top), vlt = _mm_set1_ps(d_lt), vle = _mm_set1_ps(d_le);
    for (; i + 4 <= n; i += 4) {
        __m128 v = _mm_loadu_ps(x + i);
        __m128 d = _mm_sub_ps(vtop, v);
        int mask = _mm_movemask_ps(_mm_and_ps(_mm_cmplt_ps(d, vlt), _mm_cmple_ps(d, vle)));
        if (!mask)
            continue;
        /* Branch-free compaction: write every lane at m, advance m only
         * for the kept ones (m <= i + k, so the writes stay in bounds). */
        for (int k = 0; k < 4; k++) {
            ids[m] = (int32_t)(i + (size_t)k);
            vals[m] = x[i + (size_t)k];
            m += (size_t)((mask >> k) & 1);
        }
    }
#endif
    for (; i < n; i++) {
        float d = top - x[i];
        if (d < d_lt && d <= d_le) {
            ids[m] = (int32_t)i;
            vals[m] = x[i];
            m++;
        }
    }
    return m;
}

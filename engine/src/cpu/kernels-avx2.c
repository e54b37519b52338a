/*
 * kernels-avx2.c — the AVX2 + FMA + F16C kernel table (x86-64 since
 * Haswell/Zen). Compiled alone with -mavx2 -mfma -mf16c; chosen at run time
 * only when cpuid says so. The AVX-512 table reuses the quantisers and
 * attention helpers from here (every AVX-512 CPU has AVX2), exported under
 * moe_avx2_* names through kernels-x86.h; the K-quant products come from
 * kernels-x86-kq.h, compiled into both files.
 *
 * Int8 products use the sign trick: maddubs needs one unsigned operand, so
 * |w| meets sign(w) * x; the int16 pair sums stay within range because
 * |w| <= 128 and |x| <= 127.
 */
#include "kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include "kernels-x86.h"

#include <immintrin.h>
#include <string.h>

/* ---- shared helpers --------------------------------------------------- */

static void quantize_q8_0(const float *x, void *vy, int64_t n)
{
    moe_block_q8_0 *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / MOE_QK8_0; b++, x += MOE_QK8_0) {
        __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
        __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        float amax = moe_x86_hmax(m);
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = moe_f32_to_f16(d);
        __m256 vid = _mm256_set1_ps(id);
        __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vid));
        __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vid));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vid));
        __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vid));
        _mm256_storeu_si256((__m256i *)y[b].qs, moe_x86_pack_i32_to_i8(i0, i1, i2, i3));
    }
}

static void quantize_q8_k(const float *x, void *vy, int64_t n)
{
    moe_block_q8_k *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / MOE_QK_K; b++, x += MOE_QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < MOE_QK_K; i += 8)
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
        float amax = moe_x86_hmax(m);
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[b].d = amax != 0.0f ? 1.0f / id : 0.0f;
        __m256 vid = _mm256_set1_ps(id);
        for (int i = 0; i < MOE_QK_K; i += 32) {
            __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), vid));
            __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), vid));
            __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 16), vid));
            __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 24), vid));
            __m256i q = moe_x86_pack_i32_to_i8(i0, i1, i2, i3);
            /* 127/amax * x may round to 128 only through float error;
             * clamp like the scalar table. */
            q = _mm256_max_epi8(q, _mm256_set1_epi8(-127));
            _mm256_storeu_si256((__m256i *)(y[b].qs + i), q);
            __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
            /* s16 lanes hold pair sums; 8 of them make one 16-sum. */
            __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
            int32_t t[8];
            _mm256_storeu_si256((__m256i *)t, s32);
            y[b].bsums[i / 16] = (int16_t)(t[0] + t[1] + t[2] + t[3]);
            y[b].bsums[i / 16 + 1] = (int16_t)(t[4] + t[5] + t[6] + t[7]);
        }
    }
}

/* ---- float weights ---------------------------------------------------- */

/* Loads 8 weights of the given float format as F32. */
#define LOAD_F32(p)  _mm256_loadu_ps((const float *)(p))
#define LOAD_F16(p)  _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define LOAD_BF16(p) _mm256_castsi256_ps(_mm256_slli_epi32(                     \
                         _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))

static inline float f16s(uint16_t h) { return _cvtsh_ss(h); }
static inline float bf16s(uint16_t h) { return moe_bf16_to_f32(h); }
static inline float f32s(float f) { return f; }

/* One row times up to four columns of F32 activations. */
#define FLOAT_MM(name, wtype, LOAD, SCAL)                                          \
    static void name(int64_t n, const void *w, size_t ws, int64_t nr,              \
                     const void *x, size_t xs, int64_t nc, float *y, size_t ys)    \
    {                                                                              \
        const int64_t n8 = n & ~(int64_t)7;                                        \
        for (int64_t r = 0; r < nr; r++) {                                         \
            const wtype *wr = (const wtype *)((const char *)w + r * ws);           \
            for (int64_t c0 = 0; c0 < nc; c0 += 4) {                               \
                const int64_t m = nc - c0 < 4 ? nc - c0 : 4;                       \
                const float *xc[4];                                                \
                for (int64_t j = 0; j < 4; j++)                                    \
                    xc[j] = (const float *)((const char *)x +                      \
                                            (c0 + (j < m ? j : 0)) * xs);          \
                __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;        \
                for (int64_t i = 0; i < n8; i += 8) {                              \
                    __m256 wv = LOAD(wr + i);                                      \
                    a0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xc[0] + i), a0);      \
                    a1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xc[1] + i), a1);      \
                    a2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xc[2] + i), a2);      \
                    a3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xc[3] + i), a3);      \
                }                                                                  \
                float s[4] = {moe_x86_hsum(a0), moe_x86_hsum(a1),                  \
                              moe_x86_hsum(a2), moe_x86_hsum(a3)};                 \
                for (int64_t i = n8; i < n; i++)                                   \
                    for (int64_t j = 0; j < 4; j++)                                \
                        s[j] += SCAL(wr[i]) * xc[j][i];                            \
                for (int64_t j = 0; j < m; j++)                                    \
                    y[(c0 + j) * ys + r] = s[j];                                   \
            }                                                                      \
        }                                                                          \
    }

FLOAT_MM(mm_f32, float, LOAD_F32, f32s)
FLOAT_MM(mm_f16, uint16_t, LOAD_F16, f16s)
FLOAT_MM(mm_bf16, uint16_t, LOAD_BF16, bf16s)

/* ---- Q8_0 / Q4_0 ------------------------------------------------------ */

/* sum of w[i] * x[i] over 32 int8 pairs, as 8 int32 lanes in floats;
 * aw = |w| is passed in so a tile computes it once per weight block */
static inline __m256 dot32_i8a(__m256i aw, __m256i w, __m256i x)
{
    __m256i sx = _mm256_sign_epi8(x, w);
    __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), _mm256_set1_epi16(1));
    return _mm256_cvtepi32_ps(p);
}

static inline __m256 dot32_i8(__m256i w, __m256i x)
{
    return dot32_i8a(_mm256_sign_epi8(w, w), w, x);
}

static inline __m256i load_q8_0(const moe_block_q8_0 *b)
{
    return _mm256_loadu_si256((const __m256i *)b->qs);
}

static inline __m256i load_q4_0(const moe_block_q4_0 *b)
{
    __m128i v = _mm_loadu_si128((const __m128i *)b->qs);
    __m128i lo = _mm_and_si128(v, _mm_set1_epi8(15));
    __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(15));
    return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
}

/* Q8_0/Q4_0 products in two shapes:
 *  - up to 3 columns (decode): one row at a time, two blocks per step, so
 *    each thread streams its rows sequentially (interleaving several rows
 *    halves the bandwidth on some machines);
 *  - 4 columns at a time (prefill): a 2 x 4 register tile, each weight
 *    block loaded and |w| computed once for four tokens, each activation
 *    block once for two rows.
 * Both add each (row, column)'s blocks into ONE accumulator in block order,
 * so a token's result does not depend on how many tokens share the call:
 * the service's batched requests then give exactly what they give alone
 * (two chains in the decode shape summed in another order, and greedy
 * requests diverged once they ran 4+ at a time). */
#define Q0_MM(name, btype, LOADW)                                                  \
    static void name##_cols(int64_t nb, const btype *wr, const moe_block_q8_0 *const *xc, \
                            int64_t m, float *out)                                 \
    {                                                                              \
        __m256 a[3][2];                                                            \
        for (int64_t j = 0; j < 3; j++)                                            \
            a[j][0] = a[j][1] = _mm256_setzero_ps();                               \
        int64_t b = 0;                                                             \
        for (; b + 2 <= nb; b += 2) {                                              \
            const __m256i w0 = LOADW(&wr[b]), w1 = LOADW(&wr[b + 1]);              \
            const float d0 = f16s(wr[b].d), d1 = f16s(wr[b + 1].d);                \
            for (int64_t j = 0; j < m; j++) {                                      \
                a[j][0] = _mm256_fmadd_ps(dot32_i8(w0, load_q8_0(&xc[j][b])),      \
                                          _mm256_set1_ps(d0 * f16s(xc[j][b].d)), a[j][0]); \
                a[j][0] = _mm256_fmadd_ps(dot32_i8(w1, load_q8_0(&xc[j][b + 1])),  \
                                          _mm256_set1_ps(d1 * f16s(xc[j][b + 1].d)), a[j][0]); \
            }                                                                      \
        }                                                                          \
        for (; b < nb; b++) {                                                      \
            const __m256i w0 = LOADW(&wr[b]);                                      \
            const float d0 = f16s(wr[b].d);                                        \
            for (int64_t j = 0; j < m; j++)                                        \
                a[j][0] = _mm256_fmadd_ps(dot32_i8(w0, load_q8_0(&xc[j][b])),      \
                                          _mm256_set1_ps(d0 * f16s(xc[j][b].d)), a[j][0]); \
        }                                                                          \
        for (int64_t j = 0; j < m; j++)                                            \
            out[j] = moe_x86_hsum(_mm256_add_ps(a[j][0], a[j][1]));                \
    }                                                                              \
                                                                                   \
    static void name(int64_t n, const void *w, size_t ws, int64_t nr,              \
                     const void *x, size_t xs, int64_t nc, float *y, size_t ys)    \
    {                                                                              \
        const int64_t nb = n / MOE_QK8_0;                                          \
        int64_t c0 = 0;                                                            \
        for (; c0 + 4 <= nc; c0 += 4) {                                            \
            const moe_block_q8_0 *x0 = (const void *)((const char *)x + c0 * xs);  \
            const moe_block_q8_0 *x1 = (const void *)((const char *)x0 + xs);      \
            const moe_block_q8_0 *x2 = (const void *)((const char *)x1 + xs);      \
            const moe_block_q8_0 *x3 = (const void *)((const char *)x2 + xs);      \
            int64_t r = 0;                                                         \
            for (; r + 2 <= nr; r += 2) {                                          \
                const btype *wa = (const void *)((const char *)w + r * ws);        \
                const btype *wb = (const void *)((const char *)wa + ws);           \
                __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;        \
                __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;                         \
                for (int64_t b = 0; b < nb; b++) {                                 \
                    const __m256i va = LOADW(&wa[b]), vb = LOADW(&wb[b]);          \
                    const __m256i aa = _mm256_sign_epi8(va, va), ab = _mm256_sign_epi8(vb, vb); \
                    const __m256 da = _mm256_set1_ps(f16s(wa[b].d));               \
                    const __m256 db = _mm256_set1_ps(f16s(wb[b].d));               \
                    __m256i xv;                                                    \
                    __m256 dx;                                                     \
                    xv = load_q8_0(&x0[b]); dx = _mm256_set1_ps(f16s(x0[b].d));    \
                    a0 = _mm256_fmadd_ps(dot32_i8a(aa, va, xv), _mm256_mul_ps(da, dx), a0); \
                    b0 = _mm256_fmadd_ps(dot32_i8a(ab, vb, xv), _mm256_mul_ps(db, dx), b0); \
                    xv = load_q8_0(&x1[b]); dx = _mm256_set1_ps(f16s(x1[b].d));    \
                    a1 = _mm256_fmadd_ps(dot32_i8a(aa, va, xv), _mm256_mul_ps(da, dx), a1); \
                    b1 = _mm256_fmadd_ps(dot32_i8a(ab, vb, xv), _mm256_mul_ps(db, dx), b1); \
                    xv = load_q8_0(&x2[b]); dx = _mm256_set1_ps(f16s(x2[b].d));    \
                    a2 = _mm256_fmadd_ps(dot32_i8a(aa, va, xv), _mm256_mul_ps(da, dx), a2); \
                    b2 = _mm256_fmadd_ps(dot32_i8a(ab, vb, xv), _mm256_mul_ps(db, dx), b2); \
                    xv = load_q8_0(&x3[b]); dx = _mm256_set1_ps(f16s(x3[b].d));    \
                    a3 = _mm256_fmadd_ps(dot32_i8a(aa, va, xv), _mm256_mul_ps(da, dx), a3); \
                    b3 = _mm256_fmadd_ps(dot32_i8a(ab, vb, xv), _mm256_mul_ps(db, dx), b3); \
                }                                                                  \
                y[(c0 + 0) * ys + r] = moe_x86_hsum(a0);                           \
                y[(c0 + 1) * ys + r] = moe_x86_hsum(a1);                           \
                y[(c0 + 2) * ys + r] = moe_x86_hsum(a2);                           \
                y[(c0 + 3) * ys + r] = moe_x86_hsum(a3);                           \
                y[(c0 + 0) * ys + r + 1] = moe_x86_hsum(b0);                       \
                y[(c0 + 1) * ys + r + 1] = moe_x86_hsum(b1);                       \
                y[(c0 + 2) * ys + r + 1] = moe_x86_hsum(b2);                       \
                y[(c0 + 3) * ys + r + 1] = moe_x86_hsum(b3);                       \
            }                                                                      \
            for (; r < nr; r++) {                                                  \
                const moe_block_q8_0 *xc[3] = {x0, x1, x2};                        \
                float out[3];                                                      \
                name##_cols(nb, (const void *)((const char *)w + r * ws), xc, 3, out); \
                for (int j = 0; j < 3; j++)                                        \
                    y[(c0 + j) * ys + r] = out[j];                                 \
                const moe_block_q8_0 *x3c[3] = {x3, x3, x3};                       \
                name##_cols(nb, (const void *)((const char *)w + r * ws), x3c, 1, out); \
                y[(c0 + 3) * ys + r] = out[0];                                     \
            }                                                                      \
        }                                                                          \
        if (c0 < nc) {                                                             \
            const int64_t m = nc - c0;                                             \
            const moe_block_q8_0 *xc[3];                                           \
            for (int64_t j = 0; j < 3; j++)                                        \
                xc[j] = (const void *)((const char *)x + (c0 + (j < m ? j : 0)) * xs); \
            for (int64_t r = 0; r < nr; r++) {                                     \
                float out[3];                                                      \
                name##_cols(nb, (const void *)((const char *)w + r * ws), xc, m, out); \
                for (int64_t j = 0; j < m; j++)                                    \
                    y[(c0 + j) * ys + r] = out[j];                                 \
            }                                                                      \
        }                                                                          \
    }

Q0_MM(mm_q8_0, moe_block_q8_0, load_q8_0)
Q0_MM(mm_q4_0, moe_block_q4_0, load_q4_0)

/* ---- K-quants: see kernels-x86-kq.h ----------------------------------- */

#include "kernels-x86-kq.h"

/* ---- attention helpers -------------------------------------------------- */

float moe_avx2_dot_f16_f32(int64_t n, const uint16_t *k, const float *q)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(LOAD_F16(k + i), _mm256_loadu_ps(q + i), a0);
        a1 = _mm256_fmadd_ps(LOAD_F16(k + i + 8), _mm256_loadu_ps(q + i + 8), a1);
    }
    float s = moe_x86_hsum(_mm256_add_ps(a0, a1));
    for (; i < n; i++)
        s += f16s(k[i]) * q[i];
    return s;
}

void moe_avx2_axpy_f16(int64_t n, float a, const uint16_t *v, float *out)
{
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_fmadd_ps(va, LOAD_F16(v + i), _mm256_loadu_ps(out + i)));
    for (; i < n; i++)
        out[i] += a * f16s(v[i]);
}

/* Scores: each K row is converted 8 floats at a time and meets every query
 * head of the group; rows whose length is not a multiple of 8 take the
 * scalar tail. */
void moe_avx2_attn_scores_f16(int64_t hd, const uint8_t *base, size_t row_bytes,
                              const int32_t *cells, int64_t n, const float *q, int64_t n_q,
                              float scale, float *s)
{
    const int64_t hd8 = hd & ~(int64_t)7;
    for (int64_t i = 0; i < n; i++) {
        const uint16_t *k = (const uint16_t *)(const void *)(base + (size_t)cells[i] * row_bytes);
        if (i + 2 < n)
            _mm_prefetch((const char *)(base + (size_t)cells[i + 2] * row_bytes), _MM_HINT_T0);
        __m256 acc[MOE_ATTN_MAX_GROUP];
        for (int64_t g = 0; g < n_q; g++)
            acc[g] = _mm256_setzero_ps();
        for (int64_t d = 0; d < hd8; d += 8) {
            const __m256 kv = LOAD_F16(k + d);
            for (int64_t g = 0; g < n_q; g++)
                acc[g] = _mm256_fmadd_ps(kv, _mm256_loadu_ps(q + g * hd + d), acc[g]);
        }
        for (int64_t g = 0; g < n_q; g++) {
            float t = moe_x86_hsum(acc[g]);
            for (int64_t d = hd8; d < hd; d++)
                t += f16s(k[d]) * q[g * hd + d];
            s[g * n + i] = scale * t;
        }
    }
}

/* Values: 16 output floats per head at a time stay in registers while
 * every visible cell is added in. */
void moe_avx2_attn_values_f16(int64_t hd, const uint8_t *base, size_t row_bytes,
                              const int32_t *cells, int64_t n, const float *p, int64_t n_q,
                              float *out)
{
    const int64_t hd16 = hd & ~(int64_t)15;
    for (int64_t d0 = 0; d0 < hd16; d0 += 16) {
        __m256 acc[MOE_ATTN_MAX_GROUP][2];
        for (int64_t g = 0; g < n_q; g++) {
            acc[g][0] = _mm256_loadu_ps(out + g * hd + d0);
            acc[g][1] = _mm256_loadu_ps(out + g * hd + d0 + 8);
        }
        for (int64_t i = 0; i < n; i++) {
            const uint16_t *v = (const uint16_t *)(const void *)(base + (size_t)cells[i] * row_bytes) + d0;
            const __m256 v0 = LOAD_F16(v), v1 = LOAD_F16(v + 8);
            for (int64_t g = 0; g < n_q; g++) {
                const __m256 pg = _mm256_broadcast_ss(p + g * n + i);
                acc[g][0] = _mm256_fmadd_ps(pg, v0, acc[g][0]);
                acc[g][1] = _mm256_fmadd_ps(pg, v1, acc[g][1]);
            }
        }
        for (int64_t g = 0; g < n_q; g++) {
            _mm256_storeu_ps(out + g * hd + d0, acc[g][0]);
            _mm256_storeu_ps(out + g * hd + d0 + 8, acc[g][1]);
        }
    }
    for (int64_t i = 0; hd16 < hd && i < n; i++) {
        const uint16_t *v = (const uint16_t *)(const void *)(base + (size_t)cells[i] * row_bytes);
        for (int64_t g = 0; g < n_q; g++)
            for (int64_t d = hd16; d < hd; d++)
                out[g * hd + d] += p[g * n + i] * f16s(v[d]);
    }
}

void moe_avx2_f32_to_f16(const float *x, uint16_t *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        y[i] = moe_f32_to_f16(x[i]);
}

void moe_avx2_quantize_q8_0(const float *x, void *y, int64_t n)
{
    quantize_q8_0(x, y, n);
}

void moe_avx2_quantize_q8_k(const float *x, void *y, int64_t n)
{
    quantize_q8_k(x, y, n);
}

const moe_cpu_kernels moe_cpu_kernels_avx2 = {
    .name = "avx2",
    .quantize_q8_0 = quantize_q8_0,
    .quantize_q8_k = quantize_q8_k,
    .mm_f32 = mm_f32,
    .mm_f16 = mm_f16,
    .mm_bf16 = mm_bf16,
    .mm_q8_0 = mm_q8_0,
    .mm_q4_0 = mm_q4_0,
    .mm_q4_k = kq_mm_q4_k,
    .mm_q6_k = kq_mm_q6_k,
    .dot_f16_f32 = moe_avx2_dot_f16_f32,
    .axpy_f16 = moe_avx2_axpy_f16,
    .attn_scores_f16 = moe_avx2_attn_scores_f16,
    .attn_values_f16 = moe_avx2_attn_values_f16,
    .f32_to_f16 = moe_avx2_f32_to_f16,
};

#else

const moe_cpu_kernels moe_cpu_kernels_avx2 = {.name = NULL};

#endif

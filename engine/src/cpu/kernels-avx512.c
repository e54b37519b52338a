/*
 * kernels-avx512.c — the AVX-512 (F, BW, VL) + VNNI kernel table (Zen 4,
 * Ice Lake and later). Compiled alone with the matching -m flags and
 * chosen at run time only when cpuid reports all of them. VNNI's dpbusd
 * does the int8 multiply-add that AVX2 needs two instructions for; float
 * weights use 16-wide FMAs. K-quant kernels are borrowed from the AVX2
 * table.
 */
#include "kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include "kernels-x86.h"

#include <immintrin.h>

static inline float f16s(uint16_t h) { return _cvtsh_ss(h); }

static inline float hsum512(__m512 v)
{
    return _mm512_reduce_add_ps(v);
}

/* ---- float weights ---------------------------------------------------- */

#define LOAD_F32(p)  _mm512_loadu_ps((const float *)(p))
#define LOAD_F16(p)  _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define LOAD_BF16(p) _mm512_castsi512_ps(_mm512_slli_epi32(                     \
                         _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))

static inline float f32s(float f) { return f; }
static inline float bf16s(uint16_t h) { return moe_bf16_to_f32(h); }

#define FLOAT_MM(name, wtype, LOAD, SCAL)                                          \
    static void name(int64_t n, const void *w, size_t ws, int64_t nr,              \
                     const void *x, size_t xs, int64_t nc, float *y, size_t ys)    \
    {                                                                              \
        const int64_t n16 = n & ~(int64_t)15;                                      \
        for (int64_t r = 0; r < nr; r++) {                                         \
            const wtype *wr = (const wtype *)((const char *)w + r * ws);           \
            for (int64_t c0 = 0; c0 < nc; c0 += 4) {                               \
                const int64_t m = nc - c0 < 4 ? nc - c0 : 4;                       \
                const float *xc[4];                                                \
                for (int64_t j = 0; j < 4; j++)                                    \
                    xc[j] = (const float *)((const char *)x +                      \
                                            (c0 + (j < m ? j : 0)) * xs);          \
                __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;        \
                for (int64_t i = 0; i < n16; i += 16) {                            \
                    __m512 wv = LOAD(wr + i);                                      \
                    a0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xc[0] + i), a0);      \
                    a1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xc[1] + i), a1);      \
                    a2 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xc[2] + i), a2);      \
                    a3 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xc[3] + i), a3);      \
                }                                                                  \
                float s[4] = {hsum512(a0), hsum512(a1), hsum512(a2), hsum512(a3)}; \
                for (int64_t i = n16; i < n; i++)                                  \
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

static inline __m256 dot32_i8(__m256i w, __m256i x)
{
    __m256i aw = _mm256_abs_epi8(w);
    __m256i sx = _mm256_sign_epi8(x, w);
    return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, sx));
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

#define Q0_MM(name, btype, LOADW)                                                  \
    static void name(int64_t n, const void *w, size_t ws, int64_t nr,              \
                     const void *x, size_t xs, int64_t nc, float *y, size_t ys)    \
    {                                                                              \
        const int64_t nb = n / MOE_QK8_0;                                          \
        for (int64_t c0 = 0; c0 + 4 <= nc; c0 += 4) {                              \
            const moe_block_q8_0 *x0 = (const void *)((const char *)x + c0 * xs);  \
            const moe_block_q8_0 *x1 = (const void *)((const char *)x0 + xs);      \
            const moe_block_q8_0 *x2 = (const void *)((const char *)x1 + xs);      \
            const moe_block_q8_0 *x3 = (const void *)((const char *)x2 + xs);      \
            for (int64_t r = 0; r < nr; r++) {                                     \
                const btype *wr = (const void *)((const char *)w + r * ws);        \
                __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;        \
                for (int64_t b = 0; b < nb; b++) {                                 \
                    __m256i wv = LOADW(&wr[b]);                                    \
                    float dw = f16s(wr[b].d);                                      \
                    a0 = _mm256_fmadd_ps(dot32_i8(wv, load_q8_0(&x0[b])),          \
                                         _mm256_set1_ps(dw * f16s(x0[b].d)), a0);  \
                    a1 = _mm256_fmadd_ps(dot32_i8(wv, load_q8_0(&x1[b])),          \
                                         _mm256_set1_ps(dw * f16s(x1[b].d)), a1);  \
                    a2 = _mm256_fmadd_ps(dot32_i8(wv, load_q8_0(&x2[b])),          \
                                         _mm256_set1_ps(dw * f16s(x2[b].d)), a2);  \
                    a3 = _mm256_fmadd_ps(dot32_i8(wv, load_q8_0(&x3[b])),          \
                                         _mm256_set1_ps(dw * f16s(x3[b].d)), a3);  \
                }                                                                  \
                y[(c0 + 0) * ys + r] = moe_x86_hsum(a0);                           \
                y[(c0 + 1) * ys + r] = moe_x86_hsum(a1);                           \
                y[(c0 + 2) * ys + r] = moe_x86_hsum(a2);                           \
                y[(c0 + 3) * ys + r] = moe_x86_hsum(a3);                           \
            }                                                                      \
        }                                                                          \
        for (int64_t c = nc & ~(int64_t)3; c < nc; c++) {                          \
            const moe_block_q8_0 *xc = (const void *)((const char *)x + c * xs);   \
            int64_t r = 0;                                                         \
            for (; r + 4 <= nr; r += 4) {                                          \
                const btype *w0 = (const void *)((const char *)w + r * ws);        \
                const btype *w1 = (const void *)((const char *)w0 + ws);           \
                const btype *w2 = (const void *)((const char *)w1 + ws);           \
                const btype *w3 = (const void *)((const char *)w2 + ws);           \
                __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;        \
                for (int64_t b = 0; b < nb; b++) {                                 \
                    __m256i xv = load_q8_0(&xc[b]);                                \
                    float dx = f16s(xc[b].d);                                      \
                    a0 = _mm256_fmadd_ps(dot32_i8(LOADW(&w0[b]), xv),              \
                                         _mm256_set1_ps(dx * f16s(w0[b].d)), a0);  \
                    a1 = _mm256_fmadd_ps(dot32_i8(LOADW(&w1[b]), xv),              \
                                         _mm256_set1_ps(dx * f16s(w1[b].d)), a1);  \
                    a2 = _mm256_fmadd_ps(dot32_i8(LOADW(&w2[b]), xv),              \
                                         _mm256_set1_ps(dx * f16s(w2[b].d)), a2);  \
                    a3 = _mm256_fmadd_ps(dot32_i8(LOADW(&w3[b]), xv),              \
                                         _mm256_set1_ps(dx * f16s(w3[b].d)), a3);  \
                }                                                                  \
                y[c * ys + r + 0] = moe_x86_hsum(a0);                              \
                y[c * ys + r + 1] = moe_x86_hsum(a1);                              \
                y[c * ys + r + 2] = moe_x86_hsum(a2);                              \
                y[c * ys + r + 3] = moe_x86_hsum(a3);                              \
            }                                                                      \
            for (; r < nr; r++) {                                                  \
                const btype *wr = (const void *)((const char *)w + r * ws);        \
                __m256 a0 = _mm256_setzero_ps();                                   \
                for (int64_t b = 0; b < nb; b++)                                   \
                    a0 = _mm256_fmadd_ps(dot32_i8(LOADW(&wr[b]), load_q8_0(&xc[b])), \
                                         _mm256_set1_ps(f16s(xc[b].d) * f16s(wr[b].d)), a0); \
                y[c * ys + r] = moe_x86_hsum(a0);                                  \
            }                                                                      \
        }                                                                          \
    }

Q0_MM(mm_q8_0, moe_block_q8_0, load_q8_0)
Q0_MM(mm_q4_0, moe_block_q4_0, load_q4_0)

const moe_cpu_kernels moe_cpu_kernels_avx512 = {
    .name = "avx512",
    .quantize_q8_0 = moe_avx2_quantize_q8_0,
    .quantize_q8_k = moe_avx2_quantize_q8_k,
    .mm_f32 = mm_f32,
    .mm_f16 = mm_f16,
    .mm_bf16 = mm_bf16,
    .mm_q8_0 = mm_q8_0,
    .mm_q4_0 = mm_q4_0,
    .mm_q4_k = moe_avx2_mm_q4_k,
    .mm_q6_k = moe_avx2_mm_q6_k,
    .dot_f16_f32 = moe_avx2_dot_f16_f32,
    .axpy_f16 = moe_avx2_axpy_f16,
    .f32_to_f16 = moe_avx2_f32_to_f16,
};

#else

const moe_cpu_kernels moe_cpu_kernels_avx512 = {.name = NULL};

#endif

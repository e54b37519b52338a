/*
 * kernels-avx512.c — the AVX-512 (F, BW, VL) + VNNI kernel table (Zen 4,
 * Ice Lake and later). Compiled alone with the matching -m flags and
 * chosen at run time only when cpuid reports all of them. VNNI's dpbusd
 * does the int8 multiply-add that AVX2 needs two instructions for; float
 * weights use 16-wide FMAs. The K-quant products are the ones of
 * kernels-x86-kq.h, compiled here with VNNI's dpwssd.
 */
#include "kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include "kernels-x86.h"
#include "kernels-x86-kq.h"

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

/* sum of w[i] * x[i] over 32 int8 pairs as 8 int32 lanes: |w| meets x
 * negated where w < 0 (mask from the sign bits). */
static inline __m256i dot32_i8m(__m256i aw, __mmask32 neg, __m256i x)
{
    const __m256i sx = _mm256_mask_sub_epi8(x, neg, _mm256_setzero_si256(), x);
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, sx);
}

static inline __m256 dot32_i8(__m256i w, __m256i x)
{
    return _mm256_cvtepi32_ps(dot32_i8m(_mm256_abs_epi8(w), _mm256_movepi8_mask(w), x));
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

/* Two shapes, as in the AVX2 table: up to 3 columns one row at a time
 * (sequential streaming for decode), and for prefill register tiles of
 * TILE_R rows x 6 columns (2 x 6 measured best on Zen 4: 12 accumulators,
 * the weights' signs kept in mask registers), 2 x 3 for leftover columns.
 * Both shapes add each (row, column)'s blocks into one accumulator in block
 * order, so a token's result does not depend on how many tokens share the
 * call (batched service requests equal the same requests alone). */
#define TILE_R 2

#define Q0_COLS(name, btype, LOADW)                                                \
    static void name##_cols(int64_t nb, const btype *wr, const moe_block_q8_0 *const *xc, \
                            int64_t m, float *out)                                 \
    {                                                                              \
        __m256 a[3][2];                                                            \
        for (int64_t j = 0; j < 3; j++)                                            \
            a[j][0] = a[j][1] = _mm256_setzero_ps();                               \
        int64_t b = 0;                                                             \
        for (; b + 2 <= nb; b += 2) {                                              \
            const __m256i w0 = LOADW(&wr[b]), w1 = LOADW(&wr[b + 1]);              \
            const __m256i a0 = _mm256_abs_epi8(w0), a1 = _mm256_abs_epi8(w1);      \
            const __mmask32 n0 = _mm256_movepi8_mask(w0), n1 = _mm256_movepi8_mask(w1); \
            const float d0 = f16s(wr[b].d), d1 = f16s(wr[b + 1].d);                \
            for (int64_t j = 0; j < m; j++) {                                      \
                a[j][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot32_i8m(a0, n0, load_q8_0(&xc[j][b]))), \
                                          _mm256_set1_ps(d0 * f16s(xc[j][b].d)), a[j][0]); \
                a[j][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot32_i8m(a1, n1, load_q8_0(&xc[j][b + 1]))), \
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
    }

#define Q0_TILE(name, btype, LOADW, TC)                                            \
    static void name##_tile##TC(int64_t nb, const btype *const *wr,                \
                                const moe_block_q8_0 *const *xc, float *y, size_t ys) \
    {                                                                              \
        __m256 acc[TILE_R][TC];                                                    \
        _Pragma("GCC unroll 8") for (int i = 0; i < TILE_R; i++)                   \
            _Pragma("GCC unroll 8") for (int j = 0; j < TC; j++)                   \
                acc[i][j] = _mm256_setzero_ps();                                   \
        for (int64_t b = 0; b < nb; b++) {                                         \
            __m256i aw[TILE_R];                                                    \
            __mmask32 neg[TILE_R];                                                 \
            float dw[TILE_R];                                                      \
            _Pragma("GCC unroll 8") for (int i = 0; i < TILE_R; i++) {             \
                const __m256i v = LOADW(&wr[i][b]);                                \
                aw[i] = _mm256_abs_epi8(v);                                        \
                neg[i] = _mm256_movepi8_mask(v);                                   \
                dw[i] = f16s(wr[i][b].d);                                          \
            }                                                                      \
            _Pragma("GCC unroll 8") for (int j = 0; j < TC; j++) {                 \
                const __m256i xv = load_q8_0(&xc[j][b]);                           \
                const float dx = f16s(xc[j][b].d);                                 \
                _Pragma("GCC unroll 8") for (int i = 0; i < TILE_R; i++)           \
                    acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot32_i8m(aw[i], neg[i], xv)), \
                                                _mm256_set1_ps(dw[i] * dx), acc[i][j]); \
            }                                                                      \
        }                                                                          \
        for (int j = 0; j < TC; j++)                                               \
            for (int i = 0; i < TILE_R; i++)                                       \
                y[j * ys + i] = moe_x86_hsum(acc[i][j]);                           \
    }                                                                              \
                                                                                   \
    /* Columns [c0, c0 + TC) of every row: tiles, then odd rows by _cols. */       \
    static void name##_band##TC(int64_t nb, const void *w, size_t ws, int64_t nr,  \
                                const moe_block_q8_0 *const *xc, float *y, size_t ys) \
    {                                                                              \
        int64_t r = 0;                                                             \
        for (; r + TILE_R <= nr; r += TILE_R) {                                    \
            const btype *wr[TILE_R];                                               \
            for (int i = 0; i < TILE_R; i++)                                       \
                wr[i] = (const void *)((const char *)w + (r + i) * ws);            \
            name##_tile##TC(nb, wr, xc, y + r, ys);                                \
        }                                                                          \
        for (; r < nr; r++)                                                        \
            for (int j0 = 0; j0 < TC; j0 += 3) {                                   \
                float out[3];                                                      \
                name##_cols(nb, (const void *)((const char *)w + r * ws), xc + j0, 3, out); \
                for (int j = 0; j < 3; j++)                                        \
                    y[(j0 + j) * ys + r] = out[j];                                 \
            }                                                                      \
    }

#define Q0_MM(name, btype, LOADW)                                                  \
    static void name(int64_t n, const void *w, size_t ws, int64_t nr,              \
                     const void *x, size_t xs, int64_t nc, float *y, size_t ys)    \
    {                                                                              \
        const int64_t nb = n / MOE_QK8_0;                                          \
        const moe_block_q8_0 *xc[6];                                               \
        int64_t c0 = 0;                                                            \
        for (; c0 + 6 <= nc; c0 += 6) {                                            \
            for (int j = 0; j < 6; j++)                                            \
                xc[j] = (const void *)((const char *)x + (c0 + j) * xs);           \
            name##_band6(nb, w, ws, nr, xc, y + c0 * ys, ys);                      \
        }                                                                          \
        if (c0 + 3 <= nc) {                                                        \
            for (int j = 0; j < 3; j++)                                            \
                xc[j] = (const void *)((const char *)x + (c0 + j) * xs);           \
            name##_band3(nb, w, ws, nr, xc, y + c0 * ys, ys);                      \
            c0 += 3;                                                               \
        }                                                                          \
        if (c0 < nc) {                                                             \
            const int64_t m = nc - c0;                                             \
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

Q0_COLS(mm_q8_0, moe_block_q8_0, load_q8_0)
Q0_TILE(mm_q8_0, moe_block_q8_0, load_q8_0, 6)
Q0_TILE(mm_q8_0, moe_block_q8_0, load_q8_0, 3)
Q0_MM(mm_q8_0, moe_block_q8_0, load_q8_0)
Q0_COLS(mm_q4_0, moe_block_q4_0, load_q4_0)
Q0_TILE(mm_q4_0, moe_block_q4_0, load_q4_0, 6)
Q0_TILE(mm_q4_0, moe_block_q4_0, load_q4_0, 3)
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
    .mm_q4_k = kq_mm_q4_k,
    .mm_q6_k = kq_mm_q6_k,
    .dot_f16_f32 = moe_avx2_dot_f16_f32,
    .axpy_f16 = moe_avx2_axpy_f16,
    .attn_scores_f16 = moe_avx2_attn_scores_f16,
    .attn_values_f16 = moe_avx2_attn_values_f16,
    .f32_to_f16 = moe_avx2_f32_to_f16,
};

#else

const moe_cpu_kernels moe_cpu_kernels_avx512 = {.name = NULL};

#endif

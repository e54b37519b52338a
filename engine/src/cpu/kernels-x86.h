/*
 * kernels-x86.h — inline helpers shared by the x86 kernel files (AVX2 and
 * AVX-512), and the AVX2 kernels the AVX-512 table borrows. Include only
 * from files compiled with at least -mavx2 -mfma -mf16c.
 */
#ifndef MOE_CPU_KERNELS_X86_H
#define MOE_CPU_KERNELS_X86_H

#include "kernels.h"

#include <immintrin.h>
#include <string.h>

static inline float moe_x86_hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float moe_x86_hmax(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Four vectors of 8 int32 (elements 0..31 in order) to 32 saturated int8
 * in order: the packs work per 128-bit lane, so undo their interleave. */
static inline __m256i moe_x86_pack_i32_to_i8(__m256i a, __m256i b, __m256i c, __m256i d)
{
    __m256i ab = _mm256_packs_epi32(a, b);
    __m256i cd = _mm256_packs_epi32(c, d);
    __m256i q = _mm256_packs_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

void  moe_avx2_quantize_q8_0(const float *x, void *y, int64_t n);
void  moe_avx2_quantize_q8_k(const float *x, void *y, int64_t n);
float moe_avx2_dot_f16_f32(int64_t n, const uint16_t *k, const float *q);
void  moe_avx2_axpy_f16(int64_t n, float a, const uint16_t *v, float *out);
void  moe_avx2_f32_to_f16(const float *x, uint16_t *y, int64_t n);
void  moe_avx2_attn_scores_f16(int64_t hd, const uint8_t *base, size_t row_bytes,
                               const int32_t *cells, int64_t n, const float *q, int64_t n_q,
                               float scale, float *s);
void  moe_avx2_attn_values_f16(int64_t hd, const uint8_t *base, size_t row_bytes,
                               const int32_t *cells, int64_t n, const float *p, int64_t n_q,
                               float *out);

#endif /* MOE_CPU_KERNELS_X86_H */

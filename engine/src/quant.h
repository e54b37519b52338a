/*
 * quant.h — internal entry points of the block formats, shared by quant.c
 * (dispatch, float types, Q8_0, Q4_0), quant-q4k.c and quant-q6k.c (the
 * 256-element "K" super-blocks), plus the small rounding helpers the
 * K quantisers share. Not part of the public API: callers use
 * moe_quantize_row / moe_dequantize_row, which check their arguments.
 *
 * Every function here works on whole blocks: `n_blocks` blocks of
 * MOE_QK_K elements, `src`/`dst` packed with no alignment requirement
 * (blocks are read and written byte by byte), little-endian on disk.
 */
#ifndef MOE_QUANT_H
#define MOE_QUANT_H

#include "moe.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define MOE_QK_K 256 /* elements per K super-block */

void moe_q4k_dequantize_blocks(const uint8_t *src, float *dst, int64_t n_blocks);
void moe_q6k_dequantize_blocks(const uint8_t *src, float *dst, int64_t n_blocks);
void moe_q4k_quantize_blocks(const float *src, uint8_t *dst, int64_t n_blocks);
void moe_q6k_quantize_blocks(const float *src, uint8_t *dst, int64_t n_blocks);

/* Little-endian 16-bit loads and stores at any address. */
static inline uint16_t moe_load_u16le(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline void moe_store_u16le(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xffu);
    p[1] = (uint8_t)(v >> 8);
}

/* v rounded to the nearest integer (ties to even) as a float, for
 * |v| <= 2^22: adding 1.5 * 2^23 pushes the fraction out of the mantissa,
 * where the FPU rounds it; subtracting back is exact. */
static inline float moe_round_float(float v)
{
    return (v + 0x1.8p23f) - 0x1.8p23f;
}

/* Nearest integer to v (ties to even) clamped to [lo, hi], which must lie
 * within +-2^22. Branch-free (max, min, round) because it sits in the
 * quantisers' inner loops; NaN clamps to lo, so the conversion to int is
 * always defined. lrintf would be slower: GCC does not inline it while
 * math functions may set errno. */
static inline int moe_round_clamp(float v, int lo, int hi)
{
    v = v > (float)lo ? v : (float)lo;
    v = v < (float)hi ? v : (float)hi;
    return (int)moe_round_float(v);
}

/* f16 of a super-block scale, saturating at +-65504 instead of rounding to
 * inf (an inf scale would make 0 * inf = NaN on dequantisation); NaN -> 0. */
static inline uint16_t moe_scale_to_f16(float v)
{
    if (!(fabsf(v) <= 65504.0f))
        v = isnan(v) ? 0.0f : copysignf(65504.0f, v);
    return moe_f32_to_f16(v);
}

#endif /* MOE_QUANT_H */

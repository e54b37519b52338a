/*
 * quant.c — scalar reference (de)quantisation: the float types (F32, F16,
 * BF16) and the 32-element block formats Q8_0 and Q4_0, plus the two public
 * entry points that check arguments and dispatch per type. The K formats
 * (Q4_K, Q6_K) live in quant-k.c.
 *
 * Block layouts, byte for byte as ggml packs them (little-endian):
 *
 *   Q8_0, 34 bytes per 32 values       Q4_0, 18 bytes per 32 values
 *   +--------+------------------+      +--------+----------------------+
 *   | d  f16 | q[0..31]  int8   |      | d  f16 | 16 bytes: byte j low  |
 *   +--------+------------------+      |        | nibble = value j, high|
 *   value i = q[i] * d                 |        | nibble = value j + 16 |
 *                                      +--------+----------------------+
 *                                      value = (nibble - 8) * d
 *
 * Quantising Q8_0 and Q4_0 must give the same bytes as llama.cpp's reference
 * quantisers, because a file we write should be indistinguishable from one
 * llama-quantize writes: the scale comes from the largest magnitude in the
 * block exactly as there, and the per-value rounding follows the same float
 * steps (round-half-away for Q8_0; add 8.5 and truncate for Q4_0). That
 * needs plain IEEE single precision without fused multiply-add, which is
 * what baseline x86-64 and mingw-w64 compile to; do not build this file
 * with -ffp-contract=fast on an FMA-capable -march.
 * Non-finite inputs never reach an out-of-range float-to-int conversion:
 * they produce some defined block instead.
 */
#include "quant.h"
#include "util.h"

#include <math.h>

#define QK8_0 32
#define QK4_0 32
#define Q8_0_BYTES 34
#define Q4_0_BYTES 18

/* (int)v for a v that should lie in [lo, hi]; NaN and overflow clamp, so
 * the conversion is always defined. Truncates toward zero like a C cast. */
static int trunc_clamp(float v, int lo, int hi)
{
    if (!(v > (float)lo))
        return lo;
    if (v >= (float)hi)
        return hi;
    return (int)v;
}

/* ---- Q8_0 --------------------------------------------------------------- */

static void q8_0_quantize(const float *x, uint8_t *y, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, x += QK8_0, y += Q8_0_BYTES) {
        float amax = 0.0f;
        for (int i = 0; i < QK8_0; i++) {
            float a = fabsf(x[i]);
            amax = amax > a ? amax : a;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        moe_store_u16le(y, moe_f32_to_f16(d));
        for (int i = 0; i < QK8_0; i++) {
            /* |x*id| <= 127 up to rounding, so roundf stays in int8. */
            int q = trunc_clamp(roundf(x[i] * id), -128, 127);
            y[2 + i] = (uint8_t)(int8_t)q;
        }
    }
}

static void q8_0_dequantize(const uint8_t *x, float *y, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, x += Q8_0_BYTES, y += QK8_0) {
        const float d = moe_f16_to_f32(moe_load_u16le(x));
        for (int i = 0; i < QK8_0; i++)
            y[i] = (float)(int8_t)x[2 + i] * d;
    }
}

/* ---- Q4_0 --------------------------------------------------------------- */

static void q4_0_quantize(const float *x, uint8_t *y, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, x += QK4_0, y += Q4_0_BYTES) {
        /* The signed value of largest magnitude (the first one on a tie)
         * maps to -8, the end of the asymmetric range [-8, 7] with room. */
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < QK4_0; i++) {
            if (amax < fabsf(x[i])) {
                amax = fabsf(x[i]);
                max = x[i];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        moe_store_u16le(y, moe_f32_to_f16(d));
        for (int j = 0; j < QK4_0 / 2; j++) {
            /* v*id lies in [-8, 8]; +8.5 then truncation rounds half up
             * into 0..16, and 16 (only the +8 end) clamps to 15. */
            int lo = trunc_clamp(x[j] * id + 8.5f, 0, 15);
            int hi = trunc_clamp(x[j + QK4_0 / 2] * id + 8.5f, 0, 15);
            y[2 + j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

static void q4_0_dequantize(const uint8_t *x, float *y, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, x += Q4_0_BYTES, y += QK4_0) {
        const float d = moe_f16_to_f32(moe_load_u16le(x));
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int lo = (x[2 + j] & 0x0f) - 8;
            const int hi = (x[2 + j] >> 4) - 8;
            y[j] = (float)lo * d;
            y[j + QK4_0 / 2] = (float)hi * d;
        }
    }
}

/* ---- dispatch ------------------------------------------------------------ */

/* Checks what both entry points require; on success *n_blocks is the
 * number of blocks in n_elems. */
static moe_status check_row(moe_type type, const void *a, const void *b,
                            int64_t n_elems, int64_t *n_blocks)
{
    if (!moe_type_can_dequantize(type))
        return MOE_ERR_UNSUPPORTED;
    const int64_t blk = moe_type_block_elems(type);
    if (n_elems < 0 || n_elems % blk != 0)
        return MOE_ERR_INVALID_ARG;
    if (n_elems > 0 && (a == NULL || b == NULL))
        return MOE_ERR_INVALID_ARG;
    *n_blocks = n_elems / blk;
    return MOE_OK;
}

moe_status moe_dequantize_row(moe_type type, const void *src, float *dst,
                              int64_t n_elems)
{
    int64_t nb = 0;
    moe_status st = check_row(type, src, dst, n_elems, &nb);
    if (st != MOE_OK)
        return st;
    const uint8_t *s = src;
    switch (type) {
    case MOE_TYPE_F32:
        memmove(dst, s, (size_t)nb * sizeof(float));
        break;
    case MOE_TYPE_F16:
        for (int64_t i = 0; i < nb; i++)
            dst[i] = moe_f16_to_f32(moe_load_u16le(s + 2 * i));
        break;
    case MOE_TYPE_BF16:
        for (int64_t i = 0; i < nb; i++)
            dst[i] = moe_bf16_to_f32(moe_load_u16le(s + 2 * i));
        break;
    case MOE_TYPE_Q8_0: q8_0_dequantize(s, dst, nb); break;
    case MOE_TYPE_Q4_0: q4_0_dequantize(s, dst, nb); break;
    case MOE_TYPE_Q4_K: moe_q4k_dequantize_blocks(s, dst, nb); break;
    case MOE_TYPE_Q6_K: moe_q6k_dequantize_blocks(s, dst, nb); break;
    default:
        return MOE_ERR_UNSUPPORTED;
    }
    return MOE_OK;
}

moe_status moe_quantize_row(moe_type type, const float *src, void *dst,
                            int64_t n_elems)
{
    int64_t nb = 0;
    moe_status st = check_row(type, src, dst, n_elems, &nb);
    if (st != MOE_OK)
        return st;
    if (!moe_type_can_quantize(type))
        return MOE_ERR_UNSUPPORTED;
    uint8_t *d = dst;
    switch (type) {
    case MOE_TYPE_F32:
        memmove(d, src, (size_t)nb * sizeof(float));
        break;
    case MOE_TYPE_F16:
        for (int64_t i = 0; i < nb; i++)
            moe_store_u16le(d + 2 * i, moe_f32_to_f16(src[i]));
        break;
    case MOE_TYPE_BF16:
        for (int64_t i = 0; i < nb; i++)
            moe_store_u16le(d + 2 * i, moe_f32_to_bf16(src[i]));
        break;
    case MOE_TYPE_Q8_0: q8_0_quantize(src, d, nb); break;
    case MOE_TYPE_Q4_0: q4_0_quantize(src, d, nb); break;
    case MOE_TYPE_Q4_K: moe_q4k_quantize_blocks(src, d, nb); break;
    case MOE_TYPE_Q6_K: moe_q6k_quantize_blocks(src, d, nb); break;
    default:
        return MOE_ERR_UNSUPPORTED;
    }
    return MOE_OK;
}

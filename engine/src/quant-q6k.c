/*
 * quant-q6k.c — the Q6_K super-block format: dequantisation that
 * reproduces llama.cpp's float results exactly, and a quantiser of our own.
 * Q6_K is the "keep more bits" type of llama.cpp's Q4_K_M mixture (output
 * matrix, some attn_v / ffn_down layers), which is why libmoe writes it.
 *
 * Q6_K, 210 bytes per 256 values (16 sub-blocks of 16):
 *
 *   0            128         192           208   210
 *   +------------+-----------+-------------+-----+
 *   | ql[128]    | qh[64]    | sc[16] int8 | d   |
 *   |            |           |             | f16 |
 *   +------------+-----------+-------------+-----+
 *   Two halves of 128 values; half h uses ql + 64h, qh + 32h, sc + 8h. For
 *   l in 0..31 its values l, l+32, l+64, l+96 take their low 4 bits from
 *   ql[l] low, ql[l+32] low, ql[l] high, ql[l+32] high nibble and their top
 *   2 bits from qh[l] bits 0-1, 2-3, 4-5, 6-7.
 *   value = (d * sc_j) * (q - 32),  q in 0..63, j = index / 16.
 *
 * Quantiser: per 16-value sub-block a signed float scale is searched (the
 * largest-magnitude value is tried at both ends of the asymmetric range
 * [-32, 31] over a spread of spacings, each refit by least squares and the
 * winner refined by re-rounding). The super-block scale d starts so that the
 * largest sub-block scale gets code -128, is then refit by least squares
 * over all 256 values and tried with its f16 neighbours; for each candidate
 * the 8-bit codes are re-picked among the nearest three by exact error, and
 * the smallest total squared error wins.
 */
#include "quant.h"
#include "util.h"

#include <math.h>

#define Q6K_BYTES 210

void moe_q6k_dequantize_blocks(const uint8_t *src, float *dst, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, src += Q6K_BYTES) {
        const float d = moe_f16_to_f32(moe_load_u16le(src + 208));
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = src + 64 * h, *qh = src + 128 + 32 * h;
            const int8_t *sc = (const int8_t *)(src + 192 + 8 * h);
            float *y = dst + 128 * h;
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
        dst += MOE_QK_K;
    }
}

/* Least-squares scale for fixed codes q; returns the squared error. */
static double q6k_fit(const float *x, const int8_t *q, double sxx, float *s_out)
{
    double sxq = 0, sqq = 0;
    for (int i = 0; i < 16; i++) {
        sxq += (double)x[i] * q[i];
        sqq += (double)q[i] * q[i];
    }
    if (sqq == 0) {
        *s_out = 0;
        return sxx;
    }
    *s_out = (float)(sxq / sqq);
    const double err = sxx - sxq * sxq / sqq;
    return err > 0 ? err : 0;
}

/* Best signed float scale for one 16-value sub-block. */
static float q6k_search_sub(const float *x)
{
    float xm = 0, amax = 0;
    double sxx = 0;
    for (int i = 0; i < 16; i++) {
        sxx += (double)x[i] * x[i];
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            xm = x[i];
        }
    }
    if (!(amax > 0) || !isfinite(amax))
        return 0;
    int8_t q[16];
    double best = INFINITY;
    float bs = xm / -32.0f;
    for (int side = 0; side < 2; side++) {
        for (int step = -3; step <= 3; step++) {
            const float k = side == 0 ? -(32.0f + 0.3f * (float)step) : 31.0f + 0.3f * (float)step;
            const float iscale = k / xm;
            for (int i = 0; i < 16; i++)
                q[i] = (int8_t)moe_round_clamp(iscale * x[i], -32, 31);
            float s;
            const double e = q6k_fit(x, q, sxx, &s);
            if (e < best) { best = e; bs = s; }
        }
    }
    for (int iter = 0; iter < 3 && bs != 0; iter++) {
        const float inv = 1.0f / bs;
        for (int i = 0; i < 16; i++)
            q[i] = (int8_t)moe_round_clamp(x[i] * inv, -32, 31);
        float s;
        const double e = q6k_fit(x, q, sxx, &s);
        if (!(e < best))
            break;
        best = e; bs = s;
    }
    return bs;
}

/* Squared error of sub-block x under effective scale dj; codes (0..63,
 * offset by 32) written to q when q != NULL. Branch-free inner loop like
 * q4k_sub_error's (a float code, clamped, NaN to -32, then rounded). */
static float q6k_sub_error(const float *x, float dj, uint8_t *q)
{
    const float inv = dj != 0 ? 1.0f / dj : 0.0f;
    float e0 = 0, e1 = 0;
    for (int i = 0; i < 16; i += 2) {
        float v0 = x[i] * inv, v1 = x[i + 1] * inv;
        v0 = v0 > -32.0f ? v0 : -32.0f;
        v1 = v1 > -32.0f ? v1 : -32.0f;
        v0 = moe_round_float(v0 < 31.0f ? v0 : 31.0f);
        v1 = moe_round_float(v1 < 31.0f ? v1 : 31.0f);
        const float d0 = dj * v0 - x[i], d1 = dj * v1 - x[i + 1];
        e0 += d0 * d0;
        e1 += d1 * d1;
        if (q) {
            q[i] = (uint8_t)((int)v0 + 32);
            q[i + 1] = (uint8_t)((int)v1 + 32);
        }
    }
    return e0 + e1;
}

typedef struct q6k_enc {
    uint16_t d;
    int8_t sc[16];
    uint8_t q[MOE_QK_K]; /* 0..63 */
    float err;
} q6k_enc;

static void q6k_encode(const float *x, const float *s, q6k_enc *e)
{
    const float d = moe_f16_to_f32(e->d);
    e->err = 0;
    for (int j = 0; j < 16; j++) {
        const float *xj = x + 16 * j;
        const int c0 = d != 0 ? moe_round_clamp(s[j] / d, -128, 127) : 0;
        float best = INFINITY;
        int bc = c0;
        for (int c = c0 - 1; c <= c0 + 1; c++) {
            if (c < -128 || c > 127 || (d == 0 && c != 0))
                continue;
            const float err = q6k_sub_error(xj, d * (float)c, NULL);
            if (err < best) { best = err; bc = c; }
        }
        e->sc[j] = (int8_t)bc;
        e->err += q6k_sub_error(xj, d * (float)bc, e->q + 16 * j);
    }
    if (!(e->err == e->err))
        e->err = INFINITY;
}

static void q6k_quantize_block(const float *x, uint8_t *y)
{
    float s[16], ms = 0;
    for (int j = 0; j < 16; j++) {
        s[j] = q6k_search_sub(x + 16 * j);
        if (fabsf(s[j]) > fabsf(ms))
            ms = s[j];
    }
    q6k_enc best, cand;
    best.d = moe_scale_to_f16(ms / -128.0f);
    q6k_encode(x, s, &best);
    /* Tiny blocks: below 2^-20, ms/128 is an f16 subnormal with at most 4
     * significant bits, or rounds to zero; a larger super-scale with
     * smaller codes then does better, so try the powers of two from f16's
     * smallest subnormal up (signed like ms/-128). Real weights (~1e-2) do
     * not come here. */
    if (fabsf(ms / 128.0f) < 0x1p-20f) {
        for (int e = -24; e <= -18; e++) {
            cand.d = moe_scale_to_f16(copysignf(ldexpf(1.0f, e), -ms));
            q6k_encode(x, s, &cand);
            if (cand.err < best.err)
                best = cand;
        }
    }
    /* Refit d to the chosen codes, re-pick the codes, repeat while that
     * helps (measured: trying d's f16 neighbours as well gains ~0.1% RMSE
     * for a third of the speed). */
    for (int round = 0; round < 2; round++) {
        double xa = 0, aa = 0;
        for (int i = 0; i < MOE_QK_K; i++) {
            const double a = (double)best.sc[i / 16] * ((int)best.q[i] - 32);
            xa += x[i] * a;
            aa += a * a;
        }
        if (!(aa > 0))
            break;
        cand.d = moe_scale_to_f16((float)(xa / aa));
        q6k_encode(x, s, &cand);
        if (!(cand.err < best.err))
            break;
        best = cand;
    }

    uint8_t *ql = y, *qh = y + 128;
    for (int h = 0; h < 2; h++) {
        const uint8_t *L = best.q + 128 * h;
        for (int l = 0; l < 32; l++) {
            ql[64 * h + l] = (uint8_t)((L[l] & 0x0f) | ((L[l + 64] & 0x0f) << 4));
            ql[64 * h + l + 32] = (uint8_t)((L[l + 32] & 0x0f) | ((L[l + 96] & 0x0f) << 4));
            qh[32 * h + l] = (uint8_t)((L[l] >> 4) | ((L[l + 32] >> 4) << 2) |
                                       ((L[l + 64] >> 4) << 4) | ((L[l + 96] >> 4) << 6));
        }
    }
    for (int j = 0; j < 16; j++)
        y[192 + j] = (uint8_t)best.sc[j];
    moe_store_u16le(y + 208, best.d);
}

void moe_q6k_quantize_blocks(const float *src, uint8_t *dst, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++)
        q6k_quantize_block(src + b * MOE_QK_K, dst + b * Q6K_BYTES);
}

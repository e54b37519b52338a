/*
 * kernels-scalar.c — the portable kernel table: plain C, one dot product
 * per (row, column) pair. It is the fallback on CPUs without the vector
 * extensions the other tables need, and the shape every faster table must
 * reproduce (tests compare them). kernels-neon.c compiles this same file
 * a second time under another table name (see MOE_KERNELS_TABLE), so an ARM
 * build gets these loops auto-vectorised plus its own NEON overrides.
 */
#include "kernels.h"

#ifndef MOE_KERNELS_TABLE
#define MOE_KERNELS_TABLE moe_cpu_kernels_scalar
#define MOE_KERNELS_NAME  "scalar"
#endif
#ifndef MOE_KERNELS_DOT_F16_F32
#define MOE_KERNELS_DOT_F16_F32 dot_f16_f32
#define MOE_KERNELS_OWN_DOT_F16_F32 1
#endif

#include <math.h>
#include <string.h>

static inline float f16(uint16_t h)
{
    return moe_f16_to_f32(h);
}

static void quantize_q8_0(const float *x, void *vy, int64_t n)
{
    moe_block_q8_0 *y = vy;
    for (int64_t b = 0; b < n / MOE_QK8_0; b++, x += MOE_QK8_0) {
        float amax = 0.0f;
        for (int i = 0; i < MOE_QK8_0; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = moe_f32_to_f16(d);
        for (int i = 0; i < MOE_QK8_0; i++)
            y[b].qs[i] = (int8_t)lrintf(x[i] * id);
    }
}

static void quantize_q8_k(const float *x, void *vy, int64_t n)
{
    moe_block_q8_k *y = vy;
    for (int64_t b = 0; b < n / MOE_QK_K; b++, x += MOE_QK_K) {
        float amax = 0.0f;
        for (int i = 0; i < MOE_QK_K; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[b].d = amax != 0.0f ? 1.0f / id : 0.0f;
        for (int i = 0; i < MOE_QK_K; i++) {
            long q = lrintf(x[i] * id);
            y[b].qs[i] = (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
        }
        for (int j = 0; j < MOE_QK_K / 16; j++) {
            int s = 0;
            for (int i = 0; i < 16; i++)
                s += y[b].qs[16 * j + i];
            y[b].bsums[j] = (int16_t)s;
        }
    }
}

static float dot_f32(int64_t n, const void *vw, const void *vx)
{
    const float *w = vw, *x = vx;
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++)
        s += w[i] * x[i];
    return s;
}

static float dot_f16(int64_t n, const void *vw, const void *vx)
{
    const uint16_t *w = vw;
    const float *x = vx;
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++)
        s += f16(w[i]) * x[i];
    return s;
}

static float dot_bf16(int64_t n, const void *vw, const void *vx)
{
    const uint16_t *w = vw;
    const float *x = vx;
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++)
        s += moe_bf16_to_f32(w[i]) * x[i];
    return s;
}

static float dot_q8_0(int64_t n, const void *vw, const void *vx)
{
    const moe_block_q8_0 *w = vw, *x = vx;
    float s = 0.0f;
    for (int64_t b = 0; b < n / MOE_QK8_0; b++) {
        int sum = 0;
        for (int i = 0; i < MOE_QK8_0; i++)
            sum += w[b].qs[i] * x[b].qs[i];
        s += f16(w[b].d) * f16(x[b].d) * (float)sum;
    }
    return s;
}

static float dot_q4_0(int64_t n, const void *vw, const void *vx)
{
    const moe_block_q4_0 *w = vw;
    const moe_block_q8_0 *x = vx;
    float s = 0.0f;
    for (int64_t b = 0; b < n / MOE_QK8_0; b++) {
        int sum = 0;
        for (int i = 0; i < MOE_QK8_0 / 2; i++) {
            sum += ((w[b].qs[i] & 15) - 8) * x[b].qs[i];
            sum += ((w[b].qs[i] >> 4) - 8) * x[b].qs[i + 16];
        }
        s += f16(w[b].d) * f16(x[b].d) * (float)sum;
    }
    return s;
}

/* Q4_K packs 8 scales and 8 mins of 6 bits into 12 bytes: the first four
 * of each in the low 6 bits of bytes 0..3 / 4..7, the last four split
 * between the low/high nibbles of bytes 8..11 and the top 2 bits of
 * bytes 0..7. */
static void q4_k_scales(const uint8_t *q, uint8_t sc[8], uint8_t mn[8])
{
    for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        mn[j] = q[j + 4] & 63;
        sc[j + 4] = (uint8_t)((q[j + 8] & 15) | ((q[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
    }
}

static float dot_q4_k(int64_t n, const void *vw, const void *vx)
{
    const moe_block_q4_k *w = vw;
    const moe_block_q8_k *x = vx;
    float s = 0.0f;
    for (int64_t b = 0; b < n / MOE_QK_K; b++) {
        uint8_t sc[8], mn[8];
        q4_k_scales(w[b].scales, sc, mn);
        int sumi = 0, summ = 0;
        for (int j = 0; j < 8; j++) {
            const uint8_t *q = w[b].qs + 32 * (j / 2);
            const int8_t *xq = x[b].qs + 32 * j;
            int shift = (j & 1) * 4, isum = 0;
            for (int l = 0; l < 32; l++)
                isum += ((q[l] >> shift) & 15) * xq[l];
            sumi += sc[j] * isum;
            summ += mn[j] * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
        }
        s += x[b].d * (f16(w[b].d) * (float)sumi - f16(w[b].dmin) * (float)summ);
    }
    return s;
}

/* Q6_K element e of a block (0..255): half h = e / 128, l = e % 32,
 * quarter k = (e % 128) / 32; low nibble from ql[64h + l + 32(k&1)]
 * (high half of the byte when k >= 2), two high bits from
 * qh[32h + l] >> 2k; value q - 32 times scales[e / 16]. */
static float dot_q6_k(int64_t n, const void *vw, const void *vx)
{
    const moe_block_q6_k *w = vw;
    const moe_block_q8_k *x = vx;
    float s = 0.0f;
    for (int64_t b = 0; b < n / MOE_QK_K; b++) {
        int sums[16] = {0};
        for (int e = 0; e < MOE_QK_K; e++) {
            int h = e / 128, l = e % 32, k = (e % 128) / 32;
            int lo = w[b].ql[64 * h + l + 32 * (k & 1)];
            lo = k >= 2 ? lo >> 4 : lo & 15;
            int hi = (w[b].qh[32 * h + l] >> (2 * k)) & 3;
            sums[e / 16] += ((lo | hi << 4) - 32) * x[b].qs[e];
        }
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += w[b].scales[j] * sums[j];
        s += f16(w[b].d) * x[b].d * (float)sumi;
    }
    return s;
}

#define SCALAR_MM(name, dot)                                                        \
    static void name(int64_t n, const void *w, size_t ws, int64_t nr, const void *x, \
                     size_t xs, int64_t nc, float *y, size_t ys)                   \
    {                                                                              \
        for (int64_t c = 0; c < nc; c++)                                           \
            for (int64_t r = 0; r < nr; r++)                                       \
                y[c * ys + r] = dot(n, (const char *)w + r * ws,                   \
                                    (const char *)x + c * xs);                     \
    }

SCALAR_MM(mm_f32, dot_f32)
SCALAR_MM(mm_f16, dot_f16)
SCALAR_MM(mm_bf16, dot_bf16)
SCALAR_MM(mm_q8_0, dot_q8_0)
SCALAR_MM(mm_q4_0, dot_q4_0)
SCALAR_MM(mm_q4_k, dot_q4_k)
SCALAR_MM(mm_q6_k, dot_q6_k)

#ifdef MOE_KERNELS_OWN_DOT_F16_F32
static float dot_f16_f32(int64_t n, const uint16_t *k, const float *q)
{
    return dot_f16(n, k, q);
}
#endif

static void axpy_f16(int64_t n, float a, const uint16_t *v, float *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] += a * f16(v[i]);
}

static void attn_scores_f16(int64_t hd, const uint8_t *base, size_t row_bytes,
                            const int32_t *cells, int64_t n, const float *q, int64_t n_q,
                            float scale, float *s)
{
    for (int64_t i = 0; i < n; i++) {
        const uint16_t *k = (const uint16_t *)(const void *)(base + (size_t)cells[i] * row_bytes);
        for (int64_t g = 0; g < n_q; g++)
            s[g * n + i] = scale * dot_f16(hd, k, q + g * hd);
    }
}

static void attn_values_f16(int64_t hd, const uint8_t *base, size_t row_bytes,
                            const int32_t *cells, int64_t n, const float *p, int64_t n_q,
                            float *out)
{
    for (int64_t i = 0; i < n; i++) {
        const uint16_t *v = (const uint16_t *)(const void *)(base + (size_t)cells[i] * row_bytes);
        for (int64_t g = 0; g < n_q; g++)
            axpy_f16(hd, p[g * n + i], v, out + g * hd);
    }
}

static void f32_to_f16(const float *x, uint16_t *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = moe_f32_to_f16(x[i]);
}

const moe_cpu_kernels MOE_KERNELS_TABLE = {
    .name = MOE_KERNELS_NAME,
    .quantize_q8_0 = quantize_q8_0,
    .quantize_q8_k = quantize_q8_k,
    .mm_f32 = mm_f32,
    .mm_f16 = mm_f16,
    .mm_bf16 = mm_bf16,
    .mm_q8_0 = mm_q8_0,
    .mm_q4_0 = mm_q4_0,
    .mm_q4_k = mm_q4_k,
    .mm_q6_k = mm_q6_k,
    .dot_f16_f32 = MOE_KERNELS_DOT_F16_F32,
    .axpy_f16 = axpy_f16,
    .attn_scores_f16 = attn_scores_f16,
    .attn_values_f16 = attn_values_f16,
    .f32_to_f16 = f32_to_f16,
};

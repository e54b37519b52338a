/*
 * quant-q4k.c — the Q4_K super-block format: dequantisation that
 * reproduces llama.cpp's float results exactly, and a quantiser of our own
 * that searches for scales minimising squared error.
 *
 * Q4_K, 144 bytes per 256 values (8 sub-blocks of 32):
 *
 *   0     2       4                16                          144
 *   +-----+-------+----------------+---------------------------+
 *   | d   | dmin  | scales[12]     | qs[128]: 4 chunks of 32   |
 *   | f16 | f16   | 8x(6-bit sc,   | bytes; chunk c byte l low |
 *   |     |       |    6-bit min)  | nibble = value 64c+l, high|
 *   +-----+-------+----------------+ nibble = value 64c+32+l   |
 *                                    +---------------------------+
 *   value = (d * sc_j) * q - (dmin * m_j),  q in 0..15, j = sub-block.
 *   scales[]: for j < 4, sc_j = s[j] & 63 and m_j = s[j+4] & 63; for j >= 4
 *   the low 4 bits sit in s[j+4] (sc low nibble, m high nibble) and the top
 *   2 bits in the spare top bits of s[j-4] (sc) and s[j] (m).
 *
 * The quantiser (ours; only the layout is llama.cpp's) works in two
 * levels. First each sub-block gets its best float (scale, min) by trying a
 * spread of grid spacings around "range / 15", refitting each by least
 * squares on the integer codes it produced (and once more after
 * re-rounding), and refining the winner the same way. Then the f16
 * super-scales: a start from the largest sub-block scale and min over 63,
 * then rounds of least-squares refit over all 256 values given the integer
 * codes. For every candidate the 6-bit sub-block codes are re-picked among
 * the 3 x 3 nearest by exact error, and the candidate whose total squared
 * error (computed exactly as the dequantiser reconstructs) is smallest
 * wins. Plain squared error is the quantity RMSE measures; measured on
 * Gaussian, Laplace and t data it is 2-3% below llama.cpp's reference
 * quantiser, at about half its speed (docs/benchmarks.md).
 */
#include "quant.h"
#include "util.h"

#include <math.h>

#define Q4K_BYTES 144

static void q4k_get_codes(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

void moe_q4k_dequantize_blocks(const uint8_t *src, float *dst, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, src += Q4K_BYTES) {
        const float d = moe_f16_to_f32(moe_load_u16le(src));
        const float dmin = moe_f16_to_f32(moe_load_u16le(src + 2));
        const uint8_t *scales = src + 4, *qs = src + 16;
        for (int j = 0; j < 8; j++) {
            int sc, m;
            q4k_get_codes(scales, j, &sc, &m);
            const float dj = d * (float)sc, mj = dmin * (float)m;
            /* sub-block j lives in chunk j/2, low nibbles for even j */
            const uint8_t *q = qs + 32 * (j / 2);
            const int shift = (j & 1) ? 4 : 0;
            for (int l = 0; l < 32; l++)
                *dst++ = dj * (float)((q[l] >> shift) & 0x0f) - mj;
        }
    }
}

/* Least-squares x ~ s*q - m over one sub-block with s >= 0, m >= 0 (the
 * format subtracts an unsigned min). Returns the squared error. */
static double q4k_fit(const float *x, const uint8_t *q, int n, float *s_out, float *m_out)
{
    double sq = 0, sqq = 0, sx = 0, sxq = 0, sxx = 0;
    for (int i = 0; i < n; i++) {
        sq += q[i];
        sqq += (double)q[i] * q[i];
        sx += x[i];
        sxq += (double)x[i] * q[i];
        sxx += (double)x[i] * x[i];
    }
    double s = 0, b = 0; /* x ~ s*q + b, b = -m */
    const double det = n * sqq - sq * sq;
    if (det > 0) {
        s = (n * sxq - sx * sq) / det;
        b = (sqq * sx - sq * sxq) / det;
    }
    if (det <= 0 || b > 0 || s < 0) {
        /* Degenerate or outside the format: try the two boundary fits
         * (b = 0, and s = 0) and keep the feasible better one. */
        double s0 = sqq > 0 ? sxq / sqq : 0, e0;
        if (s0 < 0)
            s0 = 0;
        e0 = sxx - 2 * s0 * sxq + s0 * s0 * sqq;
        double b1 = sx / n < 0 ? sx / n : 0;
        double e1 = sxx - 2 * b1 * sx + n * b1 * b1;
        if (e0 <= e1) { s = s0; b = 0; } else { s = 0; b = b1; }
    }
    double err = sxx - 2 * s * sxq - 2 * b * sx + s * s * sqq + 2 * s * b * sq + n * b * b;
    *s_out = (float)s;
    *m_out = (float)-b;
    return err > 0 ? err : 0;
}

/* Codes for sub-block x under scale s and min m (x ~ s*q - m). */
static void q4k_round_sub(const float *x, float s, float m, uint8_t *q)
{
    const float inv = s > 0 ? 1.0f / s : 0.0f;
    for (int i = 0; i < 32; i++)
        q[i] = (uint8_t)moe_round_clamp((x[i] + m) * inv, 0, 15);
}

/* Best float (scale, min) for one 32-value sub-block. Starting points:
 * the grid anchored at min(x, 0) with spacings around range/15; each is
 * refit by least squares, then re-rounded and refit once more (that second
 * step is what lets a start clip an outlier at either end, which a single
 * fit rarely finds), and the best is refined further. */
static void q4k_search_sub(const float *x, float *s_out, float *m_out)
{
    float lo = x[0], hi = x[0];
    for (int i = 1; i < 32; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    if (lo > 0)
        lo = 0;
    if (!(hi > lo)) { /* constant non-positive block, or NaN */
        *s_out = 0;
        *m_out = isfinite(lo) ? -lo : 0;
        return;
    }
    uint8_t q[32];
    double best = INFINITY;
    float bs = (hi - lo) / 15.0f, bm = -lo;
    for (int step = -3; step <= 3; step++) {
        const float iscale = (15.0f + (float)step / 3.0f) / (hi - lo);
        for (int i = 0; i < 32; i++)
            q[i] = (uint8_t)moe_round_clamp(iscale * (x[i] - lo), 0, 15);
        float s, m, s2, m2;
        double e = q4k_fit(x, q, 32, &s, &m);
        if (s > 0) {
            q4k_round_sub(x, s, m, q);
            const double e2 = q4k_fit(x, q, 32, &s2, &m2);
            if (e2 < e) { e = e2; s = s2; m = m2; }
        }
        if (e < best) { best = e; bs = s; bm = m; }
    }
    for (int iter = 0; iter < 3 && bs > 0; iter++) {
        q4k_round_sub(x, bs, bm, q);
        float s, m;
        const double e = q4k_fit(x, q, 32, &s, &m);
        if (!(e < best))
            break;
        best = e; bs = s; bm = m;
    }
    *s_out = bs;
    *m_out = bm;
}

/* Squared error of sub-block x under effective scale dj and min mj, with
 * the codes the dequantiser would need (q written when q != NULL). This is
 * the quantiser's inner loop, so it stays branch-free: the code is kept as
 * a float, clamped (NaN falls to 0) and rounded with moe_round_float. */
static float q4k_sub_error(const float *x, float dj, float mj, uint8_t *q)
{
    const float inv = dj > 0 ? 1.0f / dj : 0.0f;
    float e0 = 0, e1 = 0;
    for (int i = 0; i < 32; i += 2) {
        float v0 = (x[i] + mj) * inv, v1 = (x[i + 1] + mj) * inv;
        v0 = v0 > 0.0f ? v0 : 0.0f;
        v1 = v1 > 0.0f ? v1 : 0.0f;
        v0 = moe_round_float(v0 < 15.0f ? v0 : 15.0f);
        v1 = moe_round_float(v1 < 15.0f ? v1 : 15.0f);
        const float d0 = dj * v0 - mj - x[i], d1 = dj * v1 - mj - x[i + 1];
        e0 += d0 * d0;
        e1 += d1 * d1;
        if (q) {
            q[i] = (uint8_t)v0;
            q[i + 1] = (uint8_t)v1;
        }
    }
    return e0 + e1;
}

/* One candidate super-block encoding. */
typedef struct q4k_enc {
    uint16_t d, dmin;
    uint8_t ls[8], lm[8];
    uint8_t q[MOE_QK_K];
    float err;
} q4k_enc;

/* Given f16 super-scales, picks each sub-block's 6-bit codes: the nearest
 * to the float targets, or with `polish` the best of the 3 x 3 around them
 * by exact error (costly: 9 passes over the values). Fills in q and the
 * total error. */
static void q4k_encode(const float *x, const float *s, const float *m, q4k_enc *e, bool polish)
{
    const float d = moe_f16_to_f32(e->d), dmin = moe_f16_to_f32(e->dmin);
    const int span = polish ? 1 : 0;
    e->err = 0;
    for (int j = 0; j < 8; j++) {
        const float *xj = x + 32 * j;
        const int ls0 = d > 0 ? moe_round_clamp(s[j] / d, 0, 63) : 0;
        const int lm0 = dmin > 0 ? moe_round_clamp(m[j] / dmin, 0, 63) : 0;
        float best = INFINITY;
        int bls = ls0, blm = lm0;
        for (int a = ls0 - span; span && a <= ls0 + span; a++) {
            if (a < 0 || a > 63 || (d == 0 && a != 0))
                continue;
            for (int c = lm0 - span; c <= lm0 + span; c++) {
                if (c < 0 || c > 63 || (dmin == 0 && c != 0))
                    continue;
                const float err = q4k_sub_error(xj, d * (float)a, dmin * (float)c, NULL);
                if (err < best) { best = err; bls = a; blm = c; }
            }
        }
        e->ls[j] = (uint8_t)bls;
        e->lm[j] = (uint8_t)blm;
        e->err += q4k_sub_error(xj, d * (float)bls, dmin * (float)blm, e->q + 32 * j);
    }
    if (!(e->err == e->err))
        e->err = INFINITY;
}

/* Least-squares super-scales given e's codes: x ~ d*(ls*q) - dmin*lm. */
static void q4k_refit(const float *x, const q4k_enc *e, float *d, float *dmin)
{
    double aa = 0, ab = 0, bb = 0, xa = 0, xb = 0;
    for (int i = 0; i < MOE_QK_K; i++) {
        const double a = (double)e->ls[i / 32] * e->q[i], b = -(double)e->lm[i / 32];
        aa += a * a; ab += a * b; bb += b * b;
        xa += x[i] * a; xb += x[i] * b;
    }
    const double det = aa * bb - ab * ab;
    double rd = aa > 0 ? xa / aa : 0, rm = 0;
    if (det > 0) {
        rd = (xa * bb - xb * ab) / det;
        rm = (aa * xb - ab * xa) / det;
        if (rm < 0 || rd < 0) { rd = aa > 0 ? xa / aa : 0; rm = 0; }
    }
    *d = rd > 0 ? (float)rd : 0.0f;
    *dmin = (float)rm;
}

static void q4k_quantize_block(const float *x, uint8_t *y)
{
    float s[8], m[8], max_s = 0, max_m = 0;
    for (int j = 0; j < 8; j++) {
        q4k_search_sub(x + 32 * j, &s[j], &m[j]);
        max_s = s[j] > max_s ? s[j] : max_s;
        max_m = m[j] > max_m ? m[j] : max_m;
    }
    q4k_enc best, cand;
    best.d = moe_scale_to_f16(max_s / 63.0f);
    best.dmin = moe_scale_to_f16(max_m / 63.0f);
    q4k_encode(x, s, m, &best, true);
    /* Tiny blocks: below 2^-20, max/63 is an f16 subnormal with at most 4
     * significant bits, or zero; a coarser super-scale with smaller codes
     * can do better there. Real weights (~1e-2) do not come here. */
    if (max_s / 63.0f < 0x1p-20f || max_m / 63.0f < 0x1p-20f) {
        for (int k = 15; k <= 31; k += 16) {
            cand.d = moe_scale_to_f16(max_s / (float)k);
            cand.dmin = moe_scale_to_f16(max_m / (float)k);
            q4k_encode(x, s, m, &cand, true);
            if (cand.err < best.err)
                best = cand;
        }
    }
    /* Refit the super-scales to the chosen codes, re-pick the codes, and
     * repeat while that helps (measured: two rounds take nearly all of the
     * gain; a wider f16 neighbourhood adds little for its cost). */
    for (int round = 0; round < 2; round++) {
        float d, dmin;
        q4k_refit(x, &best, &d, &dmin);
        cand.d = moe_scale_to_f16(d);
        cand.dmin = moe_scale_to_f16(dmin);
        q4k_encode(x, s, m, &cand, true);
        if (!(cand.err < best.err))
            break;
        best = cand;
    }

    memset(y, 0, Q4K_BYTES);
    moe_store_u16le(y, best.d);
    moe_store_u16le(y + 2, best.dmin);
    uint8_t *sc = y + 4, *qs = y + 16;
    for (int j = 0; j < 8; j++) {
        const uint8_t ls = best.ls[j], lm = best.lm[j];
        if (j < 4) {
            sc[j] |= ls;
            sc[j + 4] |= lm;
        } else {
            sc[j + 4] = (uint8_t)((ls & 0x0f) | ((lm & 0x0f) << 4));
            sc[j - 4] |= (uint8_t)((ls >> 4) << 6);
            sc[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            qs[32 * c + l] = (uint8_t)(best.q[64 * c + l] | (best.q[64 * c + 32 + l] << 4));
}

void moe_q4k_quantize_blocks(const float *src, uint8_t *dst, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++)
        q4k_quantize_block(src + b * MOE_QK_K, dst + b * Q4K_BYTES);
}

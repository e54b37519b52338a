/*
 * stub-types.c — TEMPORARY stand-in for the tensor-type tables and scalar
 * (de)quantisers the "quant" helper is writing. Reverted before merge.
 */
#include "util.h"

#include <math.h>
#include <string.h>

bool moe_type_is_known(int t)
{
    return t == MOE_TYPE_F32 || t == MOE_TYPE_F16 || t == MOE_TYPE_Q4_0 || t == MOE_TYPE_Q8_0 ||
           t == MOE_TYPE_Q4_K || t == MOE_TYPE_Q6_K || t == MOE_TYPE_BF16;
}

const char *moe_type_name(moe_type t)
{
    switch (t) {
    case MOE_TYPE_F32: return "f32";
    case MOE_TYPE_F16: return "f16";
    case MOE_TYPE_BF16: return "bf16";
    case MOE_TYPE_Q8_0: return "q8_0";
    case MOE_TYPE_Q4_0: return "q4_0";
    case MOE_TYPE_Q4_K: return "q4_k";
    case MOE_TYPE_Q6_K: return "q6_k";
    default: return NULL;
    }
}

bool moe_type_from_name(const char *name, moe_type *out)
{
    static const moe_type all[] = {MOE_TYPE_F32, MOE_TYPE_F16, MOE_TYPE_BF16, MOE_TYPE_Q8_0,
                                   MOE_TYPE_Q4_0, MOE_TYPE_Q4_K, MOE_TYPE_Q6_K};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *n = moe_type_name(all[i]);
        size_t k = 0;
        while (n[k] && name[k] && (name[k] | 32) == n[k]) k++;
        if (!n[k] && !name[k]) { *out = all[i]; return true; }
    }
    return false;
}

int64_t moe_type_block_elems(moe_type t)
{
    switch (t) {
    case MOE_TYPE_Q8_0: case MOE_TYPE_Q4_0: return 32;
    case MOE_TYPE_Q4_K: case MOE_TYPE_Q6_K: return 256;
    default: return 1;
    }
}

size_t moe_type_block_bytes(moe_type t)
{
    switch (t) {
    case MOE_TYPE_F32: return 4;
    case MOE_TYPE_F16: case MOE_TYPE_BF16: return 2;
    case MOE_TYPE_Q8_0: return 34;
    case MOE_TYPE_Q4_0: return 18;
    case MOE_TYPE_Q4_K: return 144;
    case MOE_TYPE_Q6_K: return 210;
    default: return 0;
    }
}

size_t moe_type_row_bytes(moe_type t, int64_t n)
{
    if (!moe_type_is_known(t) || n < 0 || n % moe_type_block_elems(t)) return 0;
    return (size_t)(n / moe_type_block_elems(t)) * moe_type_block_bytes(t);
}

bool moe_type_can_quantize(moe_type t)
{
    return t == MOE_TYPE_F32 || t == MOE_TYPE_F16 || t == MOE_TYPE_BF16 || t == MOE_TYPE_Q8_0 || t == MOE_TYPE_Q4_0;
}

float moe_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023, bits;
    if (exp == 0) {
        float f = ldexpf((float)man, -24);
        return sign ? -f : f;
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t moe_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    float a = fabsf(f);
    if (isnan(f)) return (uint16_t)(sign | 0x7e00);
    if (a >= 65520.0f) return (uint16_t)(sign | 0x7c00);
    if (a < 6.103515625e-05f) { /* subnormal: units of 2^-24, round to nearest even */
        float q = a * 16777216.0f;
        return (uint16_t)(sign | (uint32_t)nearbyintf(q));
    }
    uint32_t ax;
    memcpy(&ax, &a, 4);
    uint32_t e = (ax >> 23) - 112, m = ax & 0x7fffff;
    uint32_t h = (e << 10) | (m >> 13);
    uint32_t rest = m & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

float moe_bf16_to_f32(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

uint16_t moe_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 64);
    return (uint16_t)((x + (0x7fff + ((x >> 16) & 1))) >> 16);
}

static float rd_f16(const uint8_t *p) { return moe_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static void k_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) { *d = q[j] & 63; *m = q[j + 4] & 63; }
    else { *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4); *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
}

moe_status moe_dequantize_row(moe_type type, const void *src, float *dst, int64_t n)
{
    const uint8_t *s = src;
    switch (type) {
    case MOE_TYPE_F32: memcpy(dst, src, (size_t)n * 4); return MOE_OK;
    case MOE_TYPE_F16: for (int64_t i = 0; i < n; i++) dst[i] = rd_f16(s + 2 * i); return MOE_OK;
    case MOE_TYPE_BF16: for (int64_t i = 0; i < n; i++) dst[i] = moe_bf16_to_f32((uint16_t)(s[2*i] | s[2*i+1] << 8)); return MOE_OK;
    case MOE_TYPE_Q8_0:
        for (int64_t b = 0; b < n / 32; b++, s += 34) {
            float d = rd_f16(s);
            for (int i = 0; i < 32; i++) dst[b * 32 + i] = d * (int8_t)s[2 + i];
        }
        return MOE_OK;
    case MOE_TYPE_Q4_0:
        for (int64_t b = 0; b < n / 32; b++, s += 18) {
            float d = rd_f16(s);
            for (int i = 0; i < 16; i++) {
                dst[b * 32 + i] = d * ((s[2 + i] & 15) - 8);
                dst[b * 32 + 16 + i] = d * ((s[2 + i] >> 4) - 8);
            }
        }
        return MOE_OK;
    case MOE_TYPE_Q4_K:
        for (int64_t b = 0; b < n / 256; b++, s += 144) {
            float d = rd_f16(s), dmin = rd_f16(s + 2);
            const uint8_t *sc = s + 4, *q = s + 16;
            float *y = dst + b * 256;
            for (int j = 0; j < 4; j++) {
                uint8_t d1, m1, d2, m2;
                k_scale_min(2 * j, sc, &d1, &m1);
                k_scale_min(2 * j + 1, sc, &d2, &m2);
                for (int l = 0; l < 32; l++) y[64 * j + l] = d * d1 * (q[32 * j + l] & 15) - dmin * m1;
                for (int l = 0; l < 32; l++) y[64 * j + 32 + l] = d * d2 * (q[32 * j + l] >> 4) - dmin * m2;
            }
        }
        return MOE_OK;
    case MOE_TYPE_Q6_K:
        for (int64_t b = 0; b < n / 256; b++, s += 210) {
            const uint8_t *ql = s, *qh = s + 128;
            const int8_t *sc = (const int8_t *)(s + 192);
            float d = rd_f16(s + 208);
            float *y = dst + b * 256;
            for (int h = 0; h < 2; h++) {
                for (int l = 0; l < 32; l++) {
                    int is = l / 16;
                    int q1 = (int)((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32;
                    int q2 = (int)((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32;
                    int q3 = (int)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                    int q4 = (int)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                    y[l] = d * sc[is] * q1;
                    y[l + 32] = d * sc[is + 2] * q2;
                    y[l + 64] = d * sc[is + 4] * q3;
                    y[l + 96] = d * sc[is + 6] * q4;
                }
                y += 128; ql += 64; qh += 32; sc += 8;
            }
        }
        return MOE_OK;
    default:
        return MOE_ERR_UNSUPPORTED;
    }
}

moe_status moe_quantize_row(moe_type type, const float *x, void *dst, int64_t n)
{
    uint8_t *s = dst;
    switch (type) {
    case MOE_TYPE_F32: memcpy(dst, x, (size_t)n * 4); return MOE_OK;
    case MOE_TYPE_F16: for (int64_t i = 0; i < n; i++) { uint16_t h = moe_f32_to_f16(x[i]); s[2*i] = h & 255; s[2*i+1] = h >> 8; } return MOE_OK;
    case MOE_TYPE_BF16: for (int64_t i = 0; i < n; i++) { uint16_t h = moe_f32_to_bf16(x[i]); s[2*i] = h & 255; s[2*i+1] = h >> 8; } return MOE_OK;
    case MOE_TYPE_Q8_0:
        for (int64_t b = 0; b < n / 32; b++, s += 34) {
            float amax = 0;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[b * 32 + i]));
            float d = amax / 127, id = d ? 1 / d : 0;
            uint16_t h = moe_f32_to_f16(d);
            s[0] = h & 255; s[1] = h >> 8;
            for (int i = 0; i < 32; i++) s[2 + i] = (uint8_t)(int8_t)roundf(x[b * 32 + i] * id);
        }
        return MOE_OK;
    case MOE_TYPE_Q4_0:
        for (int64_t b = 0; b < n / 32; b++, s += 18) {
            float amax = 0, mx = 0;
            for (int i = 0; i < 32; i++) if (fabsf(x[b*32+i]) > amax) { amax = fabsf(x[b*32+i]); mx = x[b*32+i]; }
            float d = mx / -8, id = d ? 1 / d : 0;
            uint16_t h = moe_f32_to_f16(d);
            s[0] = h & 255; s[1] = h >> 8;
            for (int i = 0; i < 16; i++) {
                int a = (int)(x[b*32+i] * id + 8.5f), c = (int)(x[b*32+16+i] * id + 8.5f);
                a = a > 15 ? 15 : a; c = c > 15 ? 15 : c;
                s[2 + i] = (uint8_t)(a | c << 4);
            }
        }
        return MOE_OK;
    default:
        return MOE_ERR_UNSUPPORTED;
    }
}

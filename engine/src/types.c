/*
 * types.c — what libmoe knows about each tensor type: its name, how many
 * elements one block holds and how many bytes it takes, and the scalar
 * IEEE half / bfloat16 conversions every block format builds on.
 *
 * The numbers are ggml's (they are stored in GGUF files) and the byte sizes
 * are those of ggml's packed block structs, so a size computed here matches
 * the tensor extents llama.cpp writes. The half conversion rounds to nearest
 * even and turns every NaN into the quiet NaN 0x7e00 (sign kept), which is
 * what ggml's reference conversion produces; that matters because Q8_0/Q4_0
 * must come out byte-identical to llama.cpp's, scale bytes included.
 */
#include "util.h"

#include <string.h>

/* One row per known type; unknown numbers have name == NULL. */
typedef struct type_traits {
    const char *name;
    int64_t     block_elems;
    size_t      block_bytes;
    bool        can_quantize;
    bool        can_compute; /* dequantise and run; false: sized only */
} type_traits;

/* Byte sizes spelled out from the block layouts (see quant.c):
 *   Q8_0: f16 d + 32 x int8                          =   2 + 32       =  34
 *   Q4_0: f16 d + 16 bytes of nibbles                =   2 + 16       =  18
 *   Q4_K: f16 d, f16 dmin, 12 bytes of 6-bit scales
 *         and mins, 128 bytes of nibbles             = 4 + 12 + 128   = 144
 *   Q6_K: 128 bytes low nibbles, 64 bytes high 2-bit
 *         pairs, 16 int8 scales, f16 d               = 128+64+16+2    = 210 */
static const type_traits k_traits[MOE_TYPE_COUNT] = {
    [MOE_TYPE_F32]  = { "f32",  1,   4,   true, true },
    [MOE_TYPE_F16]  = { "f16",  1,   2,   true, true },
    [MOE_TYPE_Q4_0] = { "q4_0", 32,  18,  true, true },
    [MOE_TYPE_Q8_0] = { "q8_0", 32,  34,  true, true },
    [MOE_TYPE_Q4_K] = { "q4_k", 256, 144, true, true },
    [MOE_TYPE_Q6_K] = { "q6_k", 256, 210, true, true },
    [MOE_TYPE_BF16] = { "bf16", 1,   2,   true, true },
    /* Sized only: real downloads mix these in (a Q4_K_M file holds Q5_0 or
     * Q5_K tensors where rows do not fit, an IQ file holds IQ blocks), so
     * the reader must size them to open the file, list it and plan it,
     * while loading it for inference says which tensor has which type. The
     * byte counts are ggml's block structs (GGUF's published sizes). */
    [3]  = { "q4_1",    32,  20,  false, false },
    [6]  = { "q5_0",    32,  22,  false, false },
    [7]  = { "q5_1",    32,  24,  false, false },
    [9]  = { "q8_1",    32,  36,  false, false },
    [10] = { "q2_k",    256, 84,  false, false },
    [11] = { "q3_k",    256, 110, false, false },
    [13] = { "q5_k",    256, 176, false, false },
    [15] = { "q8_k",    256, 292, false, false },
    [16] = { "iq2_xxs", 256, 66,  false, false },
    [17] = { "iq2_xs",  256, 74,  false, false },
    [18] = { "iq3_xxs", 256, 98,  false, false },
    [19] = { "iq1_s",   256, 50,  false, false },
    [20] = { "iq4_nl",  32,  18,  false, false },
    [21] = { "iq3_s",   256, 110, false, false },
    [22] = { "iq2_s",   256, 82,  false, false },
    [23] = { "iq4_xs",  256, 136, false, false },
    [24] = { "i8",      1,   1,   false, false },
    [25] = { "i16",     1,   2,   false, false },
    [26] = { "i32",     1,   4,   false, false },
    [27] = { "i64",     1,   8,   false, false },
    [28] = { "f64",     1,   8,   false, false },
    [29] = { "iq1_m",   256, 56,  false, false },
    [34] = { "tq1_0",   256, 54,  false, false },
    [35] = { "tq2_0",   256, 66,  false, false },
    [39] = { "mxfp4",   32,  17,  false, false },
};

static const type_traits *traits_of(int type)
{
    if (type < 0 || type >= MOE_TYPE_COUNT || k_traits[type].name == NULL)
        return NULL;
    return &k_traits[type];
}

bool moe_type_is_known(int type)
{
    return traits_of(type) != NULL;
}

const char *moe_type_name(moe_type type)
{
    const type_traits *t = traits_of((int)type);
    return t ? t->name : NULL;
}

/* ASCII-only case folding: names are plain ASCII and the C locale's
 * tolower() would make the result depend on setlocale(). */
static int fold_ascii(int c)
{
    return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

bool moe_type_from_name(const char *name, moe_type *out)
{
    if (name == NULL)
        return false;
    for (int i = 0; i < MOE_TYPE_COUNT; i++) {
        const char *known = k_traits[i].name;
        if (known == NULL)
            continue;
        size_t j = 0;
        while (known[j] != '\0' && fold_ascii((unsigned char)name[j]) == known[j])
            j++;
        if (known[j] == '\0' && name[j] == '\0') {
            if (out)
                *out = (moe_type)i;
            return true;
        }
    }
    return false;
}

int64_t moe_type_block_elems(moe_type type)
{
    const type_traits *t = traits_of((int)type);
    return t ? t->block_elems : 0;
}

size_t moe_type_block_bytes(moe_type type)
{
    const type_traits *t = traits_of((int)type);
    return t ? t->block_bytes : 0;
}

size_t moe_type_row_bytes(moe_type type, int64_t n_elems)
{
    const type_traits *t = traits_of((int)type);
    if (t == NULL || n_elems < 0 || n_elems % t->block_elems != 0)
        return 0;
    uint64_t bytes;
    if (!moe_mul_u64((uint64_t)(n_elems / t->block_elems), t->block_bytes, &bytes) ||
        bytes > SIZE_MAX)
        return 0; /* does not fit in size_t: report like any unusable size */
    return (size_t)bytes;
}

bool moe_type_can_dequantize(moe_type type)
{
    const type_traits *t = traits_of((int)type);
    return t != NULL && t->can_compute;
}

bool moe_type_can_quantize(moe_type type)
{
    const type_traits *t = traits_of((int)type);
    return t != NULL && t->can_quantize;
}

/* ---- half precision ------------------------------------------------------ */

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float moe_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) {
        /* inf or NaN: keep the payload, and quieten a NaN the way an x86
         * float operation would, so results match ggml's bit for bit. */
        uint32_t u = sign | 0x7f800000u | (mant << 13);
        if (mant != 0)
            u |= 0x00400000u;
        return float_of(u);
    }
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24 is exact in float. */
        float v = (float)mant * 0x1p-24f;
        return float_of(sign | bits_of(v));
    }
    return float_of(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t moe_f32_to_f16(float f)
{
    uint32_t x = bits_of(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;

    if (x > 0x7f800000u)
        return sign | 0x7e00u;              /* any NaN -> quiet NaN */
    if (x >= 0x477ff000u)
        return sign | 0x7c00u;              /* >= 65520 rounds to inf */
    if (x >= 0x38800000u) {
        /* normal half: rebias the exponent (127 -> 15) and round the 13
         * dropped mantissa bits to nearest even; a carry out of the
         * mantissa correctly bumps the exponent. */
        uint32_t h = (x >> 13) - (112u << 10);
        uint32_t rest = x & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
            h++;
        return sign | (uint16_t)h;
    }
    if (x <= 0x33000000u)
        return sign;                        /* <= 2^-25: ties to even zero */
    /* subnormal half: value * 2^24 rounded to nearest even. The float is
     * (1.m) * 2^(e-127) = m24 * 2^(e-150), so value * 2^24 = m24 >> (126-e). */
    uint32_t e = x >> 23;                   /* 102..112 here */
    uint32_t m24 = (x & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;              /* 14..24 */
    uint32_t h = m24 >> shift;
    uint32_t rest = m24 & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (h & 1u)))
        h++;                                /* may become 0x400: smallest normal */
    return sign | (uint16_t)h;
}

float moe_bf16_to_f32(uint16_t h)
{
    return float_of((uint32_t)h << 16);
}

uint16_t moe_f32_to_bf16(float f)
{
    uint32_t x = bits_of(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u); /* NaN: keep sign, force quiet */
    /* Round to nearest even on the low 16 bits; a carry may run into the
     * exponent, which is the correct rounding up to the next binade/inf. */
    uint32_t lsb = (x >> 16) & 1u;
    return (uint16_t)((x + 0x7fffu + lsb) >> 16);
}

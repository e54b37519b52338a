/*
 * test-quant.c — tensor types and block formats (types.c, quant*.c):
 * half/bfloat16 conversion edge cases, type names and sizes, argument
 * checks, hand-built blocks of every format decoded by the layout rules,
 * and quantise/dequantise round trips held to each format's error bound.
 * Runs under wine too; the bit-exact comparison with llama.cpp itself is
 * tests/scripts/test_quant_vs_llama.py.
 */
#include "moe.h"
#include "test.h"

#include <float.h>
#include <stdint.h>

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Deterministic normal-ish numbers (sum of 4 uniforms, variance 1). */
static uint64_t rng_state = 88172645463325252ull;
static float rnd_uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)(rng_state >> 40) / (float)(1 << 24);
}
static float rnd_normal(void)
{
    float s = 0;
    for (int i = 0; i < 4; i++)
        s += rnd_uniform();
    return (s - 2.0f) * 1.7320508f;
}

static void test_f16(void)
{
    CHECK_EQ_INT(moe_f32_to_f16(1.0f), 0x3c00);
    CHECK_EQ_INT(moe_f32_to_f16(-2.0f), 0xc000);
    CHECK_EQ_INT(moe_f32_to_f16(0.0f), 0x0000);
    CHECK_EQ_INT(moe_f32_to_f16(-0.0f), 0x8000);
    CHECK_EQ_INT(moe_f32_to_f16(65504.0f), 0x7bff);
    CHECK_EQ_INT(moe_f32_to_f16(65519.99f), 0x7bff);  /* below the tie */
    CHECK_EQ_INT(moe_f32_to_f16(65520.0f), 0x7c00);   /* tie, odd -> inf */
    CHECK_EQ_INT(moe_f32_to_f16(1e10f), 0x7c00);
    CHECK_EQ_INT(moe_f32_to_f16(-1e10f), 0xfc00);
    CHECK_EQ_INT(moe_f32_to_f16(INFINITY), 0x7c00);
    CHECK_EQ_INT(moe_f32_to_f16(-INFINITY), 0xfc00);
    CHECK_EQ_INT(moe_f32_to_f16(NAN), 0x7e00);
    CHECK_EQ_INT(moe_f32_to_f16(u2f(0xff800001u)), 0xfe00); /* -sNaN -> -qNaN */
    /* ties to even in the normal range: 1 + 2^-11 sits halfway */
    CHECK_EQ_INT(moe_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    CHECK_EQ_INT(moe_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
    CHECK_EQ_INT(moe_f32_to_f16(u2f(f2u(1.0f + 0x1p-11f) + 1)), 0x3c01);
    /* carry out of the mantissa bumps the exponent */
    CHECK_EQ_INT(moe_f32_to_f16(2.0f - 0x1p-12f), 0x4000);
    /* subnormals: 2^-24 is the smallest; 2^-25 ties to even zero */
    CHECK_EQ_INT(moe_f32_to_f16(0x1p-24f), 0x0001);
    CHECK_EQ_INT(moe_f32_to_f16(0x1p-25f), 0x0000);
    CHECK_EQ_INT(moe_f32_to_f16(u2f(f2u(0x1p-25f) + 1)), 0x0001);
    CHECK_EQ_INT(moe_f32_to_f16(3 * 0x1p-25f), 0x0002);     /* 1.5 -> 2 */
    CHECK_EQ_INT(moe_f32_to_f16(5 * 0x1p-25f), 0x0002);     /* 2.5 -> 2 */
    CHECK_EQ_INT(moe_f32_to_f16(-0x1p-30f), 0x8000);
    CHECK_EQ_INT(moe_f32_to_f16(0x1p-14f), 0x0400);          /* smallest normal */
    CHECK_EQ_INT(moe_f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400); /* tie rounds up (even) */
    CHECK_EQ_INT(moe_f32_to_f16(1023 * 0x1p-24f), 0x03ff);
    CHECK_EQ_INT(moe_f32_to_f16(FLT_MIN), 0x0000);

    CHECK(moe_f16_to_f32(0x3c00) == 1.0f);
    CHECK(moe_f16_to_f32(0x0001) == 0x1p-24f);
    CHECK(moe_f16_to_f32(0x03ff) == 1023 * 0x1p-24f);
    CHECK(f2u(moe_f16_to_f32(0x8000)) == 0x80000000u);
    CHECK(moe_f16_to_f32(0x7c00) == INFINITY);
    CHECK(moe_f16_to_f32(0xfc00) == -INFINITY);
    CHECK(isnan(moe_f16_to_f32(0x7e00)) && isnan(moe_f16_to_f32(0x7c01)));

    /* Every half survives the round trip (NaNs become the quiet one). */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const uint16_t back = moe_f32_to_f16(moe_f16_to_f32((uint16_t)h));
        const int is_nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
        const uint16_t want = is_nan ? (uint16_t)((h & 0x8000u) | 0x7e00u) : (uint16_t)h;
        bad += back != want;
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_bf16(void)
{
    CHECK_EQ_INT(moe_f32_to_bf16(1.0f), 0x3f80);
    CHECK_EQ_INT(moe_f32_to_bf16(-0.0f), 0x8000);
    CHECK_EQ_INT(moe_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);     /* tie to even */
    CHECK_EQ_INT(moe_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82); /* tie to even */
    CHECK_EQ_INT(moe_f32_to_bf16(u2f(0x3f808001u)), 0x3f81);   /* above the tie */
    CHECK_EQ_INT(moe_f32_to_bf16(INFINITY), 0x7f80);
    CHECK_EQ_INT(moe_f32_to_bf16(FLT_MAX), 0x7f80);            /* rounds to inf */
    CHECK_EQ_INT(moe_f32_to_bf16(u2f(0x00010000u)), 0x0001);   /* subnormal kept */
    CHECK_EQ_INT(moe_f32_to_bf16(u2f(0x7f800001u)), 0x7fc0);   /* sNaN quietened */
    CHECK_EQ_INT(moe_f32_to_bf16(u2f(0xffc00000u)), 0xffc0);
    CHECK(moe_bf16_to_f32(0x3f80) == 1.0f);
    CHECK(moe_bf16_to_f32(0xc040) == -3.0f);
    CHECK(isnan(moe_bf16_to_f32(0x7fc0)));
}

static void test_traits(void)
{
    static const struct { moe_type t; const char *name; int64_t be; size_t bb; } k[] = {
        { MOE_TYPE_F32, "f32", 1, 4 },       { MOE_TYPE_F16, "f16", 1, 2 },
        { MOE_TYPE_BF16, "bf16", 1, 2 },     { MOE_TYPE_Q8_0, "q8_0", 32, 34 },
        { MOE_TYPE_Q4_0, "q4_0", 32, 18 },   { MOE_TYPE_Q4_K, "q4_k", 256, 144 },
        { MOE_TYPE_Q6_K, "q6_k", 256, 210 },
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        CHECK(moe_type_is_known(k[i].t));
        CHECK_EQ_STR(moe_type_name(k[i].t), k[i].name);
        CHECK_EQ_INT(moe_type_block_elems(k[i].t), k[i].be);
        CHECK_EQ_INT(moe_type_block_bytes(k[i].t), k[i].bb);
        CHECK(moe_type_can_quantize(k[i].t));
        moe_type parsed = MOE_TYPE_COUNT;
        CHECK(moe_type_from_name(k[i].name, &parsed) && parsed == k[i].t);
        CHECK_EQ_INT(moe_type_row_bytes(k[i].t, 4096), 4096 / k[i].be * (int64_t)k[i].bb);
        CHECK_EQ_INT(moe_type_row_bytes(k[i].t, 0), 0);
        CHECK_EQ_INT(moe_type_row_bytes(k[i].t, -k[i].be), 0);
    }
    moe_type t = MOE_TYPE_COUNT;
    CHECK(moe_type_from_name("Q4_K", &t) && t == MOE_TYPE_Q4_K);
    CHECK(moe_type_from_name("BF16", &t) && t == MOE_TYPE_BF16);
    CHECK(!moe_type_from_name("q4_k_m", &t));
    CHECK(!moe_type_from_name("q4_", &t));
    CHECK(!moe_type_from_name("", &t));
    CHECK(!moe_type_from_name("f322", &t));
    CHECK(!moe_type_from_name(NULL, &t));
    CHECK(moe_type_from_name("q8_0", NULL));
    /* 4 and 5 were ggml's removed Q4_2/Q4_3: no such type. */
    CHECK(!moe_type_is_known(4) && !moe_type_is_known(-1) && !moe_type_is_known(40));
    CHECK(!moe_type_is_known(MOE_TYPE_COUNT) && !moe_type_is_known(31));
    CHECK(moe_type_name((moe_type)5) == NULL);
    CHECK_EQ_INT(moe_type_block_bytes((moe_type)5), 0);
    CHECK_EQ_INT(moe_type_row_bytes((moe_type)5, 32), 0);
    CHECK_EQ_INT(moe_type_row_bytes(MOE_TYPE_Q8_0, 33), 0);  /* not a multiple */
    CHECK_EQ_INT(moe_type_row_bytes(MOE_TYPE_Q4_K, 128), 0);
    CHECK_EQ_INT(moe_type_row_bytes(MOE_TYPE_Q8_0, 3 * 32), 3 * 34);
    if (sizeof(size_t) == 8)
        CHECK_EQ_INT(moe_type_row_bytes(MOE_TYPE_F32, INT64_C(1) << 62), 0); /* overflow */
}

/* Types a real download may mix in are sized (so the file opens and plans)
 * but not computed: dequantising one is MOE_ERR_UNSUPPORTED, quantising to
 * it is refused, and a GGUF holding one round-trips through the writer and
 * reader. Sizes: ggml's block structs. */
static void test_sized_only(void)
{
    static const struct { int t; const char *name; int64_t be; size_t bb; } k[] = {
        { 3, "q4_1", 32, 20 },   { 6, "q5_0", 32, 22 },   { 7, "q5_1", 32, 24 },
        { 10, "q2_k", 256, 84 }, { 11, "q3_k", 256, 110 }, { 13, "q5_k", 256, 176 },
        { 23, "iq4_xs", 256, 136 }, { 39, "mxfp4", 32, 17 },
    };
    float out[256];
    uint8_t blk[512] = {0};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        moe_type t = (moe_type)k[i].t;
        CHECK(moe_type_is_known(k[i].t));
        CHECK(!moe_type_can_dequantize(t) && !moe_type_can_quantize(t));
        CHECK_EQ_STR(moe_type_name(t), k[i].name);
        CHECK_EQ_INT(moe_type_row_bytes(t, k[i].be * 2), 2 * (int64_t)k[i].bb);
        CHECK(moe_dequantize_row(t, blk, out, k[i].be) == MOE_ERR_UNSUPPORTED);
    }
    for (int t = 0; t < MOE_TYPE_COUNT; t++)
        if (moe_type_can_dequantize((moe_type)t))
            CHECK(moe_type_is_known(t));

    /* a file with a q5_k tensor opens and keeps its type */
    const char *root = getenv("MOE_BUILD_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/test-quant-q5k.gguf", root ? root : ".");
    moe_gguf_writer *w = moe_gguf_writer_new();
    const int64_t ne[2] = {256, 2};
    moe_err err = {{0}};
    CHECK(moe_gguf_writer_add_tensor(w, "w", (moe_type)13, 2, ne, blk) == MOE_OK);
    CHECK(moe_gguf_writer_write_file(w, path, &err) == MOE_OK);
    moe_gguf_writer_free(w);
    moe_gguf *g = NULL;
    CHECK_MSG(moe_gguf_open(path, &g, &err) == MOE_OK, "%s", err.msg);
    if (g) {
        const moe_gguf_tensor *ti = moe_gguf_find_tensor(g, "w");
        CHECK(ti && (int)ti->type == 13 && ti->size_bytes == 2 * 176);
        moe_gguf_free(g);
    }
    remove(path);
}

static void test_args(void)
{
    float x[64] = { 0 };
    uint8_t buf[256];
    CHECK(moe_quantize_row(MOE_TYPE_Q8_0, x, buf, 31) == MOE_ERR_INVALID_ARG);
    CHECK(moe_quantize_row(MOE_TYPE_Q8_0, x, buf, -32) == MOE_ERR_INVALID_ARG);
    CHECK(moe_quantize_row(MOE_TYPE_Q8_0, NULL, buf, 32) == MOE_ERR_INVALID_ARG);
    CHECK(moe_quantize_row((moe_type)7, x, buf, 32) == MOE_ERR_UNSUPPORTED);
    CHECK(moe_quantize_row(MOE_TYPE_Q4_K, NULL, NULL, 0) == MOE_OK);
    CHECK(moe_dequantize_row(MOE_TYPE_Q4_K, buf, x, 32) == MOE_ERR_INVALID_ARG);
    CHECK(moe_dequantize_row((moe_type)99, buf, x, 32) == MOE_ERR_UNSUPPORTED);
    CHECK(moe_dequantize_row(MOE_TYPE_F16, NULL, x, 2) == MOE_ERR_INVALID_ARG);
}

/* Hand-built blocks decoded by the documented layouts. */
static void test_layouts(void)
{
    uint8_t b[1 + 210]; /* +1: decode from an odd address too */
    float y[256];

    uint8_t *q8 = b + 1; /* Q8_0: d = 0.5, q_i = i - 16 */
    q8[0] = 0x00; q8[1] = 0x38;
    for (int i = 0; i < 32; i++)
        q8[2 + i] = (uint8_t)(int8_t)(i - 16);
    CHECK(moe_dequantize_row(MOE_TYPE_Q8_0, q8, y, 32) == MOE_OK);
    for (int i = 0; i < 32; i++)
        CHECK(y[i] == 0.5f * (float)(i - 16));

    uint8_t *q4 = b + 1; /* Q4_0: d = 2, byte j = (j) | (15 - j) << 4 */
    q4[0] = 0x00; q4[1] = 0x40;
    for (int j = 0; j < 16; j++)
        q4[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    CHECK(moe_dequantize_row(MOE_TYPE_Q4_0, q4, y, 32) == MOE_OK);
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == 2.0f * (float)(j - 8));
        CHECK(y[16 + j] == 2.0f * (float)(7 - j));
    }

    /* Q4_K: d = 1, dmin = 0.25, sc_j = 9 + 7j (crosses 16, so high bits
     * are used), m_j = 60 - 5j, value i's code = i % 16. */
    uint8_t *k4 = b + 1;
    memset(k4, 0, 144);
    k4[0] = 0x00; k4[1] = 0x3c; k4[2] = 0x00; k4[3] = 0x34;
    for (int j = 0; j < 8; j++) {
        const int sc = 9 + 7 * j, m = 60 - 5 * j;
        if (j < 4) {
            k4[4 + j] |= (uint8_t)sc;
            k4[4 + j + 4] |= (uint8_t)m;
        } else {
            k4[4 + j + 4] = (uint8_t)((sc & 15) | ((m & 15) << 4));
            k4[4 + j - 4] |= (uint8_t)((sc >> 4) << 6);
            k4[4 + j] |= (uint8_t)((m >> 4) << 6);
        }
    }
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            k4[16 + 32 * c + l] = (uint8_t)((l % 16) | (((32 + l) % 16) << 4));
    CHECK(moe_dequantize_row(MOE_TYPE_Q4_K, k4, y, 256) == MOE_OK);
    int bad = 0;
    for (int i = 0; i < 256; i++) {
        const int j = i / 32;
        bad += y[i] != (float)(9 + 7 * j) * (float)(i % 16) - 0.25f * (float)(60 - 5 * j);
    }
    CHECK_EQ_INT(bad, 0);

    /* Q6_K: d = 0.5, sc_j = j - 8 (negative ones too), value i's code =
     * (i * 7) % 64. */
    uint8_t *k6 = b + 1;
    memset(k6, 0, 210);
    uint8_t code[256];
    for (int i = 0; i < 256; i++)
        code[i] = (uint8_t)((i * 7) % 64);
    for (int h = 0; h < 2; h++) {
        for (int l = 0; l < 32; l++) {
            const uint8_t *L = code + 128 * h;
            k6[64 * h + l] = (uint8_t)((L[l] & 15) | ((L[l + 64] & 15) << 4));
            k6[64 * h + l + 32] = (uint8_t)((L[l + 32] & 15) | ((L[l + 96] & 15) << 4));
            k6[128 + 32 * h + l] = (uint8_t)((L[l] >> 4) | ((L[l + 32] >> 4) << 2) |
                                             ((L[l + 64] >> 4) << 4) | ((L[l + 96] >> 4) << 6));
        }
    }
    for (int j = 0; j < 16; j++)
        k6[192 + j] = (uint8_t)(int8_t)(j - 8);
    k6[208] = 0x00; k6[209] = 0x38;
    CHECK(moe_dequantize_row(MOE_TYPE_Q6_K, k6, y, 256) == MOE_OK);
    bad = 0;
    for (int i = 0; i < 256; i++)
        bad += y[i] != 0.5f * (float)(i / 16 - 8) * (float)(code[i] - 32);
    CHECK_EQ_INT(bad, 0);

    /* F16 / BF16 rows from odd addresses. */
    const uint8_t h[5] = { 0xff, 0x00, 0x3c, 0x00, 0xc0 };
    CHECK(moe_dequantize_row(MOE_TYPE_F16, h + 1, y, 2) == MOE_OK);
    CHECK(y[0] == 1.0f && y[1] == -2.0f);
    CHECK(moe_dequantize_row(MOE_TYPE_BF16, h + 1, y, 2) == MOE_OK);
    CHECK(y[0] == moe_bf16_to_f32(0x3c00) && y[1] == -2.0f);
}

#define N_RT 4096

/* Quantise and dequantise x; returns the RMSE, writes the result to y. */
static double round_trip(moe_type t, const float *x, float *y)
{
    static uint8_t q[N_RT * 4], q2[N_RT * 4];
    CHECK(moe_quantize_row(t, x, q, N_RT) == MOE_OK);
    CHECK(moe_quantize_row(t, x, q2, N_RT) == MOE_OK);
    CHECK(memcmp(q, q2, moe_type_row_bytes(t, N_RT)) == 0); /* deterministic */
    CHECK(moe_dequantize_row(t, q, y, N_RT) == MOE_OK);
    double se = 0;
    for (int i = 0; i < N_RT; i++)
        se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
    return sqrt(se / N_RT);
}

static void test_round_trips(void)
{
    static float x[N_RT], y[N_RT];
    for (int dist = 0; dist < 4; dist++) {
        for (int i = 0; i < N_RT; i++) {
            float v = rnd_normal();
            if (dist == 1)
                v *= 1e-3f;
            if (dist == 2 && i % 97 == 0)
                v *= 50.0f;                        /* outliers */
            if (dist == 3)
                v = (i / 32) % 3 == 0 ? 1.25f : v; /* constant blocks */
            x[i] = v;
        }
        double scale = dist == 1 ? 1e-3 : 1.0;

        /* Q8_0 / Q4_0: every value within half a step (one step for the
         * clamped +8 end of Q4_0), plus what the f16 rounding of the scale
         * can add times the largest code: 2^-11 relative for a normal f16,
         * 2^-25 absolute for a subnormal one (the 1e-3 data lands there). */
        round_trip(MOE_TYPE_Q8_0, x, y);
        int bad8 = 0, bad4 = 0;
        for (int b = 0; b < N_RT / 32; b++) {
            float amax = 0;
            for (int i = 0; i < 32; i++)
                amax = fmaxf(amax, fabsf(x[32 * b + i]));
            const double d = amax / 127.0, f16_err = fmax(d * 0x1p-11, 0x1p-25);
            for (int i = 0; i < 32; i++)
                bad8 += fabs(y[32 * b + i] - x[32 * b + i]) > d / 2 + 127 * f16_err + amax * 1e-6;
        }
        round_trip(MOE_TYPE_Q4_0, x, y);
        for (int b = 0; b < N_RT / 32; b++) {
            float amax = 0;
            for (int i = 0; i < 32; i++)
                amax = fmaxf(amax, fabsf(x[32 * b + i]));
            const double d = amax / 8.0, f16_err = fmax(d * 0x1p-11, 0x1p-25);
            for (int i = 0; i < 32; i++)
                bad4 += fabs(y[32 * b + i] - x[32 * b + i]) > d + 8 * f16_err + amax * 1e-6;
        }
        CHECK_EQ_INT(bad8, 0);
        CHECK_EQ_INT(bad4, 0);

        /* K formats: RMSE bounds measured for unit-variance data with
         * margin (Q4_K ~0.07, Q6_K ~0.017; with the x50 outliers ~0.42 and
         * ~0.18), relative to the data scale. */
        const double r4k = round_trip(MOE_TYPE_Q4_K, x, y) / scale;
        const double r6k = round_trip(MOE_TYPE_Q6_K, x, y) / scale;
        CHECK_MSG(r4k < (dist == 2 ? 0.5 : 0.085), "dist %d q4_k rmse %g", dist, r4k);
        CHECK_MSG(r6k < (dist == 2 ? 0.22 : 0.02), "dist %d q6_k rmse %g", dist, r6k);

        /* Float types: f16/bf16 relative error within half an ulp. */
        round_trip(MOE_TYPE_F16, x, y);
        int badf = 0;
        for (int i = 0; i < N_RT; i++)
            badf += fabsf(y[i] - x[i]) > fabsf(x[i]) * 0x1p-11f + 0x1p-25f;
        round_trip(MOE_TYPE_BF16, x, y);
        for (int i = 0; i < N_RT; i++)
            badf += fabsf(y[i] - x[i]) > fabsf(x[i]) * 0x1p-8f;
        CHECK(round_trip(MOE_TYPE_F32, x, y) == 0.0);
        CHECK_EQ_INT(badf, 0);
    }
    /* All zeros stay exactly zero in every format. */
    memset(x, 0, sizeof x);
    const moe_type all[] = { MOE_TYPE_Q8_0, MOE_TYPE_Q4_0, MOE_TYPE_Q4_K, MOE_TYPE_Q6_K };
    for (size_t t = 0; t < 4; t++)
        CHECK(round_trip(all[t], x, y) == 0.0);
    /* A constant super-block is reproduced to within f16 precision. */
    for (int i = 0; i < N_RT; i++)
        x[i] = -3.0f;
    CHECK(round_trip(MOE_TYPE_Q4_K, x, y) <= 3.0 * 0x1p-11);
    CHECK(round_trip(MOE_TYPE_Q6_K, x, y) <= 3.0 * 0x1p-10);
}

/* NaN/inf inputs must not trip UBSan or crash; output is unspecified. */
static void test_non_finite(void)
{
    static float x[512], y[512];
    static uint8_t q[2048];
    for (int i = 0; i < 512; i++)
        x[i] = rnd_normal();
    x[3] = NAN;
    x[40] = INFINITY;
    x[300] = -INFINITY;
    x[301] = 1e38f;
    const moe_type all[] = { MOE_TYPE_F16, MOE_TYPE_BF16, MOE_TYPE_Q8_0,
                             MOE_TYPE_Q4_0, MOE_TYPE_Q4_K, MOE_TYPE_Q6_K };
    for (size_t t = 0; t < sizeof all / sizeof all[0]; t++) {
        CHECK(moe_quantize_row(all[t], x, q, 512) == MOE_OK);
        CHECK(moe_dequantize_row(all[t], q, y, 512) == MOE_OK);
    }
}

int main(void)
{
    test_f16();
    test_bf16();
    test_traits();
    test_sized_only();
    test_args();
    test_layouts();
    test_round_trips();
    test_non_finite();
    TEST_DONE();
}

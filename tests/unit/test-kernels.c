/*
 * test-kernels.c — every CPU kernel table this machine can run (scalar,
 * AVX2, AVX-512/VNNI, forced one by one) against the scalar reference:
 * weights dequantised with moe_dequantize_row, activations with the block
 * formats' definition, products summed in double. Quantised weights are
 * random bytes with sane scales, so every bit pattern of the blocks is
 * exercised, not only what a quantiser happens to produce.
 */
#include "cpu/kernels.h"
#include "test.h"

#include <stdint.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static float frnd(void) /* uniform in [-1, 1) */
{
    return (float)(rnd() % 2000001) / 1000000.0f - 1.0f;
}

static void put_f16(uint8_t *p, float f)
{
    uint16_t h = moe_f32_to_f16(f);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* Fills one row of `type` with random content whose values stay near 1. */
static void random_row(moe_type type, uint8_t *row, int64_t n)
{
    size_t bytes = moe_type_row_bytes(type, n);
    for (size_t i = 0; i < bytes; i++)
        row[i] = (uint8_t)rnd();
    int64_t nb = n / moe_type_block_elems(type);
    size_t bb = moe_type_block_bytes(type);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = row + b * bb;
        switch (type) {
        case MOE_TYPE_F32:
            for (int i = 0; i < 1; i++) {
                float f = frnd();
                memcpy(blk, &f, 4);
            }
            break;
        case MOE_TYPE_F16: put_f16(blk, frnd()); break;
        case MOE_TYPE_BF16: {
            uint16_t h = moe_f32_to_bf16(frnd());
            blk[0] = (uint8_t)h;
            blk[1] = (uint8_t)(h >> 8);
            break;
        }
        case MOE_TYPE_Q8_0: put_f16(blk, frnd() / 127.0f); break;
        case MOE_TYPE_Q4_0: put_f16(blk, frnd() / 8.0f); break;
        case MOE_TYPE_Q4_K:
            put_f16(blk, frnd() / 512.0f);
            put_f16(blk + 2, frnd() / 512.0f);
            break;
        case MOE_TYPE_Q6_K: put_f16(blk + 208, frnd() / 2048.0f); break;
        default: break;
        }
    }
}

/* The activations a table's quantiser produced, back as floats. */
static void dequant_vec(moe_type wtype, const void *q, float *out, int64_t n)
{
    moe_type vt = moe_cpu_vec_type(wtype);
    if (vt == MOE_TYPE_F32) {
        memcpy(out, q, (size_t)n * 4);
    } else if (vt == MOE_TYPE_Q8_0) {
        CHECK(moe_dequantize_row(MOE_TYPE_Q8_0, q, out, n) == MOE_OK);
    } else {
        const moe_block_q8_k *b = q;
        for (int64_t i = 0; i < n; i++)
            out[i] = b[i / MOE_QK_K].d * b[i / MOE_QK_K].qs[i % MOE_QK_K];
    }
}

static void check_q8_k_sums(const void *q, int64_t n, const char *isa)
{
    const moe_block_q8_k *b = q;
    for (int64_t i = 0; i < n / MOE_QK_K; i++)
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++)
                s += b[i].qs[16 * j + l];
            CHECK_MSG(s == b[i].bsums[j], "%s: q8_k bsums block %lld sub %d", isa, (long long)i, j);
        }
}

#define N_ELEMS 512
#define N_ROWS  9
#define N_COLS  13

static void test_mm(const moe_cpu_kernels *k, moe_type type)
{
    const int64_t n = N_ELEMS;
    size_t wrow = moe_type_row_bytes(type, n);
    size_t xrow = moe_cpu_vec_row_bytes(type, n);
    uint8_t *w = malloc(wrow * N_ROWS);
    uint8_t *xq = malloc(xrow * N_COLS);
    float *xf = malloc(sizeof(float) * n * N_COLS);
    float *wd = malloc(sizeof(float) * n * N_ROWS);
    float *xd = malloc(sizeof(float) * n);
    float y[N_COLS * (N_ROWS + 3)];

    for (int r = 0; r < N_ROWS; r++) {
        random_row(type, w + r * wrow, n);
        CHECK(moe_dequantize_row(type, w + r * wrow, wd + r * n, n) == MOE_OK);
    }
    for (int c = 0; c < N_COLS; c++) {
        for (int64_t i = 0; i < n; i++)
            xf[c * n + i] = frnd() * (1 + (i % 7));
        moe_cpu_quantize_vec(k, type, xf + c * n, xq + c * xrow, n);
        if (moe_cpu_vec_type(type) == MOE_CPU_TYPE_Q8_K)
            check_q8_k_sums(xq + c * xrow, n, k->name);
    }
    /* Every tile shape: 13, 9, 5, 2 columns at once (full tiles and each
     * kind of leftover), then column by column; an output stride wider
     * than the row count; columns past the count stay untouched. */
    const size_t ys = N_ROWS + 3;
    moe_mm_fn mm = moe_cpu_mm_for(k, type);
    static const int counts[] = {N_COLS, 9, 5, 2, 1};
    for (size_t pass = 0; pass < sizeof counts / sizeof counts[0] + 1; pass++) {
        const int ncols = pass < sizeof counts / sizeof counts[0] ? counts[pass] : N_COLS;
        for (size_t i = 0; i < sizeof y / sizeof y[0]; i++)
            y[i] = -12345.0f;
        if (pass < sizeof counts / sizeof counts[0]) {
            mm(n, w, wrow, N_ROWS, xq, xrow, ncols, y, ys);
        } else {
            for (int c = 0; c < N_COLS; c++)
                mm(n, w, wrow, N_ROWS, xq + c * xrow, xrow, 1, y + c * ys, ys);
        }
        for (int c = 0; c < N_COLS; c++) {
            if (c >= ncols) {
                for (size_t r = 0; r < ys; r++)
                    CHECK_MSG(y[c * ys + r] == -12345.0f, "%s mm %s wrote column %d of %d", k->name,
                              moe_type_name(type), c, ncols);
                continue;
            }
            dequant_vec(type, xq + c * xrow, xd, n);
            for (int r = 0; r < N_ROWS; r++) {
                double ref = 0, mag = 0;
                for (int64_t i = 0; i < n; i++) {
                    ref += (double)wd[r * n + i] * xd[i];
                    mag += fabs((double)wd[r * n + i] * xd[i]);
                }
                double tol = 2e-5 * mag + 1e-6;
                CHECK_MSG(fabs(y[c * ys + r] - ref) <= tol,
                          "%s mm %s cols %d r %d c %d: %.7g vs %.7g", k->name,
                          moe_type_name(type), ncols, r, c, y[c * ys + r], ref);
            }
            for (size_t r = N_ROWS; r < ys; r++)
                CHECK_MSG(y[c * ys + r] == -12345.0f, "%s mm %s wrote past nr", k->name,
                          moe_type_name(type));
        }
    }
    free(w);
    free(xq);
    free(xf);
    free(wd);
    free(xd);
}

/* The activation quantisers must agree byte for byte with the scalar
 * table's (same arithmetic, same rounding), so changing ISA never changes
 * which int8 an activation becomes. */
static void test_quantizers(const moe_cpu_kernels *k)
{
    const int64_t n = 1024;
    float x[1024];
    for (int64_t i = 0; i < n; i++)
        x[i] = frnd() * (i % 97 == 0 ? 50.0f : 1.0f);
    x[5] = 0.0f;
    for (int i = 256; i < 512; i++) /* an all-zero Q8_K block */
        x[i] = 0.0f;
    uint8_t a[2048], b[2048];
    size_t q8_0_bytes = moe_cpu_vec_row_bytes(MOE_TYPE_Q8_0, n);
    size_t q8_k_bytes = moe_cpu_vec_row_bytes(MOE_TYPE_Q4_K, n);
    k->quantize_q8_0(x, a, n);
    moe_cpu_kernels_scalar.quantize_q8_0(x, b, n);
    CHECK_MSG(memcmp(a, b, q8_0_bytes) == 0, "%s: q8_0 quantiser differs from scalar", k->name);
    CHECK(q8_k_bytes <= sizeof a);
    k->quantize_q8_k(x, a, n);
    moe_cpu_kernels_scalar.quantize_q8_k(x, b, n);
    CHECK_MSG(memcmp(a, b, q8_k_bytes) == 0, "%s: q8_k quantiser differs from scalar", k->name);
}

static void test_attention_helpers(const moe_cpu_kernels *k)
{
    float x[133], q[133], out[133], ref[133];
    uint16_t h[133], h2[133];
    for (int i = 0; i < 133; i++) {
        x[i] = frnd() * 3;
        q[i] = frnd();
        out[i] = ref[i] = frnd();
    }
    k->f32_to_f16(x, h, 133);
    for (int i = 0; i < 133; i++)
        h2[i] = moe_f32_to_f16(x[i]);
    CHECK_MSG(memcmp(h, h2, sizeof h) == 0, "%s: f32_to_f16", k->name);
    for (int n = 0; n <= 133; n += 19) {
        double d = 0, mag = 0;
        for (int i = 0; i < n; i++) {
            d += (double)moe_f16_to_f32(h[i]) * q[i];
            mag += fabs((double)moe_f16_to_f32(h[i]) * q[i]);
        }
        CHECK_NEAR(k->dot_f16_f32(n, h, q), d, 1e-5 * mag + 1e-6);
    }
    k->axpy_f16(133, 0.75f, h, out);
    for (int i = 0; i < 133; i++)
        CHECK_NEAR(out[i], ref[i] + 0.75 * moe_f16_to_f32(h[i]), 1e-5);
}

/* The grouped-query attention kernels against double sums, with a cell
 * list that skips and repeats cells, head sizes with and without a tail. */
static void test_attention_group(const moe_cpu_kernels *k)
{
    enum { N_CELLS = 50, N_VIS = 37 };
    static const int64_t hds[] = {64, 40, 128};
    for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++) {
        const int64_t hd = hds[hi];
        const size_t row_bytes = (size_t)(hd * 3) * sizeof(uint16_t); /* 3 KV heads per cell */
        uint16_t *kc = malloc(row_bytes * N_CELLS), *vc = malloc(row_bytes * N_CELLS);
        for (size_t i = 0; i < row_bytes * N_CELLS / 2; i++) {
            kc[i] = moe_f32_to_f16(frnd());
            vc[i] = moe_f32_to_f16(frnd());
        }
        int32_t cells[N_VIS];
        for (int i = 0; i < N_VIS; i++)
            cells[i] = (i * 7 + 3) % N_CELLS;
        float q[MOE_ATTN_MAX_GROUP * 128], p[MOE_ATTN_MAX_GROUP * N_VIS], s[MOE_ATTN_MAX_GROUP * N_VIS];
        float out[MOE_ATTN_MAX_GROUP * 128];
        for (int i = 0; i < MOE_ATTN_MAX_GROUP * 128; i++)
            q[i] = frnd();
        for (int i = 0; i < MOE_ATTN_MAX_GROUP * N_VIS; i++)
            p[i] = frnd();
        const size_t hoff = (size_t)hd * sizeof(uint16_t); /* KV head 1 */
        const uint8_t *kb = (const uint8_t *)kc + hoff, *vb = (const uint8_t *)vc + hoff;
        for (int64_t nq = 1; nq <= MOE_ATTN_MAX_GROUP; nq++) {
            k->attn_scores_f16(hd, kb, row_bytes, cells, N_VIS, q, nq, 0.125f, s);
            for (int i = 0; i < MOE_ATTN_MAX_GROUP * 128; i++)
                out[i] = 0.5f;
            k->attn_values_f16(hd, vb, row_bytes, cells, N_VIS, p, nq, out);
            for (int64_t g = 0; g < nq; g++) {
                for (int i = 0; i < N_VIS; i++) {
                    const uint16_t *kr = (const uint16_t *)(const void *)(kb + (size_t)cells[i] * row_bytes);
                    double ref = 0, mag = 0;
                    for (int64_t d = 0; d < hd; d++) {
                        ref += (double)moe_f16_to_f32(kr[d]) * q[g * hd + d];
                        mag += fabs((double)moe_f16_to_f32(kr[d]) * q[g * hd + d]);
                    }
                    CHECK_MSG(fabs(s[g * N_VIS + i] - 0.125 * ref) <= 1e-5 * mag + 1e-6,
                              "%s scores hd %lld nq %lld g %lld i %d", k->name, (long long)hd,
                              (long long)nq, (long long)g, i);
                }
                for (int64_t d = 0; d < hd; d++) {
                    double ref = 0.5, mag = 0.5;
                    for (int i = 0; i < N_VIS; i++) {
                        const uint16_t *vr = (const uint16_t *)(const void *)(vb + (size_t)cells[i] * row_bytes);
                        ref += (double)p[g * N_VIS + i] * moe_f16_to_f32(vr[d]);
                        mag += fabs((double)p[g * N_VIS + i] * moe_f16_to_f32(vr[d]));
                    }
                    CHECK_MSG(fabs(out[g * hd + d] - ref) <= 1e-5 * mag + 1e-6,
                              "%s values hd %lld nq %lld g %lld d %lld", k->name, (long long)hd,
                              (long long)nq, (long long)g, (long long)d);
                }
            }
            /* heads past nq are untouched */
            for (int64_t i = nq * hd; i < MOE_ATTN_MAX_GROUP * 128; i++)
                if (out[i] != 0.5f) {
                    CHECK_MSG(0, "%s values wrote past head %lld", k->name, (long long)nq);
                    break;
                }
        }
        free(kc);
        free(vc);
    }
}

int main(void)
{
    const moe_cpu_kernels *tables[8];
    int nt = moe_cpu_kernels_all(tables, 8);
    CHECK(nt >= 1);
    CHECK_EQ_STR(tables[0]->name, "scalar");
    CHECK(moe_cpu_kernels_select("scalar") == &moe_cpu_kernels_scalar);
    CHECK(moe_cpu_kernels_select("no-such-isa") == NULL);
    CHECK(moe_cpu_kernels_select("") == tables[nt - 1]);

    static const moe_type types[] = {MOE_TYPE_F32, MOE_TYPE_F16, MOE_TYPE_BF16, MOE_TYPE_Q8_0,
                                     MOE_TYPE_Q4_0, MOE_TYPE_Q4_K, MOE_TYPE_Q6_K};
    for (int t = 0; t < nt; t++) {
        fprintf(stderr, "kernel table: %s\n", tables[t]->name);
        test_quantizers(tables[t]);
        test_attention_helpers(tables[t]);
        test_attention_group(tables[t]);
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            test_mm(tables[t], types[i]);
    }
    TEST_DONE();
}

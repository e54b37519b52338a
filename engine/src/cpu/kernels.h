/*
 * kernels.h — the CPU backend's compute kernels as a table of function
 * pointers, one table per instruction set (scalar, AVX2, AVX-512/VNNI,
 * NEON), so the backend picks the best one once at start-up (cpuid) and
 * tests can force each in turn. Each ISA lives in its own file compiled
 * with its own -m flags; nothing outside that file may call its
 * intrinsics, so the binary still runs on older CPUs.
 *
 * Products follow llama.cpp's scheme: float weights meet float activations;
 * Q8_0/Q4_0 weights meet activations quantised on the fly to Q8_0 (32 per
 * block); Q4_K/Q6_K weights meet Q8_K activations (256 per block with
 * 16-element sums). Block layouts are ggml's, as stored in GGUF files.
 */
#ifndef MOE_CPU_KERNELS_H
#define MOE_CPU_KERNELS_H

#include "moe.h"

#include <stddef.h>
#include <stdint.h>

#define MOE_QK8_0 32
#define MOE_ATTN_MAX_GROUP 8
#define MOE_QK_K  256

/* ggml block layouts (little-endian; `d` fields are IEEE half). */
typedef struct moe_block_q8_0 {
    uint16_t d;
    int8_t   qs[MOE_QK8_0];
} moe_block_q8_0; /* 34 bytes */

typedef struct moe_block_q4_0 {
    uint16_t d;
    uint8_t  qs[MOE_QK8_0 / 2]; /* element i: low nibble of qs[i],
                                   element 16+i: high nibble; value q - 8 */
} moe_block_q4_0; /* 18 bytes */

typedef struct moe_block_q4_k {
    uint16_t d, dmin;
    uint8_t  scales[12]; /* 8 six-bit scales and 8 six-bit mins */
    uint8_t  qs[MOE_QK_K / 2];
} moe_block_q4_k; /* 144 bytes */

typedef struct moe_block_q6_k {
    uint8_t  ql[MOE_QK_K / 2]; /* low 4 bits  */
    uint8_t  qh[MOE_QK_K / 4]; /* high 2 bits */
    int8_t   scales[MOE_QK_K / 16];
    uint16_t d;
} moe_block_q6_k; /* 210 bytes */

typedef struct moe_block_q8_k {
    float   d;
    int8_t  qs[MOE_QK_K];
    int16_t bsums[MOE_QK_K / 16]; /* sum of each 16 consecutive qs */
} moe_block_q8_k; /* 292 bytes */

/* A matrix product tile: for r < nr, c < nc
 *     y[c * y_stride + r] = dot(row r of w, column c of x)
 * where row r starts at (char *)w + r * w_stride and column c (one token's
 * activations, already in the weight type's activation format) at
 * (char *)x + c * x_stride; n is the row length in elements (a multiple of
 * the block size). Kernels may use any accumulation order, so results agree
 * with the scalar reference to rounding, not bit for bit. */
typedef void (*moe_mm_fn)(int64_t n, const void *w, size_t w_stride, int64_t nr,
                          const void *x, size_t x_stride, int64_t nc,
                          float *y, size_t y_stride);

typedef struct moe_cpu_kernels {
    const char *name; /* "scalar", "avx2", "avx512", "neon" */

    /* Activation quantisers; n a multiple of 32 (Q8_0) or 256 (Q8_K). */
    void (*quantize_q8_0)(const float *x, void *y, int64_t n);
    void (*quantize_q8_k)(const float *x, void *y, int64_t n);

    /* Products, indexed by weight type. */
    moe_mm_fn mm_f32, mm_f16, mm_bf16, mm_q8_0, mm_q4_0, mm_q4_k, mm_q6_k;

    /* Attention helpers over F16 cache rows: dot(k, q) and out += a * v. */
    float (*dot_f16_f32)(int64_t n, const uint16_t *k, const float *q);
    void  (*axpy_f16)(int64_t n, float a, const uint16_t *v, float *out);
    /* Grouped-query attention over F16 cache rows: g < n_q (at most
     * MOE_ATTN_MAX_GROUP) query heads of hd floats (q + g * hd) share one KV
     * head whose slice of cell c starts at base + c * row_bytes.
     *   scores: s[g * n + i] = scale * dot(q_g, K(cells[i]))
     *   values: out[g * hd + d] += sum_i p[g * n + i] * V(cells[i])[d]
     * Each K/V row is converted once for the whole group. */
    void  (*attn_scores_f16)(int64_t hd, const uint8_t *base, size_t row_bytes,
                             const int32_t *cells, int64_t n, const float *q, int64_t n_q,
                             float scale, float *s);
    void  (*attn_values_f16)(int64_t hd, const uint8_t *base, size_t row_bytes,
                             const int32_t *cells, int64_t n, const float *p, int64_t n_q,
                             float *out);
    /* Converting activations into the F16 cache (round to nearest even). */
    void  (*f32_to_f16)(const float *x, uint16_t *y, int64_t n);
} moe_cpu_kernels;

/* The tables each ISA file exports. A table whose ISA the compiler could
 * not target has name NULL. */
extern const moe_cpu_kernels moe_cpu_kernels_scalar;
extern const moe_cpu_kernels moe_cpu_kernels_avx2;
extern const moe_cpu_kernels moe_cpu_kernels_avx512;
extern const moe_cpu_kernels moe_cpu_kernels_neon;

/* True if this CPU can run the table's instructions. */
bool moe_cpu_kernels_usable(const moe_cpu_kernels *k);

/* The best usable table, or the one named by `force` ("scalar", "avx2",
 * "avx512", "neon"; NULL or "" = best; the environment variable MOE_CPU_ISA
 * is read when force is NULL). Returns NULL if `force` names a table this
 * CPU or build cannot use. */
const moe_cpu_kernels *moe_cpu_kernels_select(const char *force);

/* Every usable table, best last, for tests; returns the count (<= cap). */
int moe_cpu_kernels_all(const moe_cpu_kernels **out, int cap);

/* The activation format a weight type is multiplied with (F32 for float
 * weights, Q8_0, or the internal Q8_K), and the kernel for it. */
moe_type  moe_cpu_vec_type(moe_type weight_type);
moe_mm_fn moe_cpu_mm_for(const moe_cpu_kernels *k, moe_type weight_type);

/* Bytes of one activation row of n elements in moe_cpu_vec_type(t)'s
 * format (Q8_K is not a GGUF type, so moe_type_row_bytes cannot say). */
size_t moe_cpu_vec_row_bytes(moe_type weight_type, int64_t n);

/* Quantises (or copies) one activation row for weight type t. */
void moe_cpu_quantize_vec(const moe_cpu_kernels *k, moe_type weight_type,
                          const float *x, void *y, int64_t n);

/* Pseudo type tag for Q8_K activations (not stored in files). */
#define MOE_CPU_TYPE_Q8_K ((moe_type)15)

#endif /* MOE_CPU_KERNELS_H */

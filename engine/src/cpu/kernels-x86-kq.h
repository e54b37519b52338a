/*
 * kernels-x86-kq.h — the K-quant products (Q4_K and Q6_K weights times
 * Q8_K activations) for x86, written once and compiled twice: by
 * kernels-avx2.c (madd + add) and kernels-avx512.c (VNNI's dpwssd, one
 * instruction for both). Each file gets static copies: include once.
 *
 * Per weight block the 4- or 6-bit values are unpacked into eight vectors
 * of 32 unsigned bytes and the sub-block scales into eight vectors of
 * int16 (one shuffle each); then every activation column costs eight
 * maddubs + scale steps, one multiply-add of the 16-element sums for the
 * Q4_K minimums / the Q6_K -32 offset, and two FMAs. Tiles: one row times
 * KQ_C columns (the unpacking is shared by the columns), rows in order so
 * decode streams its weights sequentially.
 */
#ifndef MOE_CPU_KERNELS_X86_KQ_H
#define MOE_CPU_KERNELS_X86_KQ_H

#include "kernels-x86.h"

#define KQ_C 4

static inline __m256i kq_madd_scale(__m256i acc, __m256i p16, __m256i sc)
{
#ifdef __AVX512VNNI__
    return _mm256_dpwssd_epi32(acc, p16, sc);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, sc));
#endif
}

/* vpshufb masks: KQ_LANE(lo, hi) fills the low 128-bit half with int16
 * lane `lo` and the high half with lane `hi` (lanes of each half). */
#define KQ_B2(k) (char)(2 * (k)), (char)(2 * (k) + 1)
#define KQ_HALF(k) KQ_B2(k), KQ_B2(k), KQ_B2(k), KQ_B2(k), KQ_B2(k), KQ_B2(k), KQ_B2(k), KQ_B2(k)
#define KQ_LANE(lo, hi) {KQ_HALF(lo), KQ_HALF(hi)}

static const char kq_same_lane[8][32] __attribute__((aligned(32))) = {
    KQ_LANE(0, 0), KQ_LANE(1, 1), KQ_LANE(2, 2), KQ_LANE(3, 3),
    KQ_LANE(4, 4), KQ_LANE(5, 5), KQ_LANE(6, 6), KQ_LANE(7, 7),
};
static const char kq_pair_lane[4][32] __attribute__((aligned(32))) = {
    KQ_LANE(0, 1), KQ_LANE(2, 3), KQ_LANE(4, 5), KQ_LANE(6, 7),
};

static inline __m256i kq_mask(const char (*t)[32], int i)
{
    return _mm256_load_si256((const __m256i *)t[i]);
}

/* ---- Q4_K ---------------------------------------------------------------- */

typedef struct kq_q4k {
    __m256i q[8];   /* sub-block s: 32 values 0..15                          */
    __m256i sc[8];  /* sub-block s: its 6-bit scale in every int16 lane     */
    __m256i mins;   /* int16 lanes 2s, 2s+1: min of sub-block s (for bsums) */
    float   d, dmin;
} kq_q4k;

/* Scales: with u0, u1, u2 the three 32-bit words of the 12 bytes,
 * scales 0..3 = u0 & 0x3f.., mins 0..3 = u1 & 0x3f.., scales 4..7 = low
 * nibbles of u2 | top bits of u0 moved to bits 4-5, mins 4..7 = high
 * nibbles of u2 | top bits of u1 (see kernels-scalar.c). */
static inline void kq_unpack_q4k(const moe_block_q4_k *b, kq_q4k *u)
{
    uint32_t w[3];
    memcpy(w, b->scales, 12);
    const uint32_t sc_lo = w[0] & 0x3f3f3f3fu, mn_lo = w[1] & 0x3f3f3f3fu;
    const uint32_t sc_hi = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 2) & 0x30303030u);
    const uint32_t mn_hi = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 2) & 0x30303030u);
    const __m128i sc8 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)sc_hi, (int)sc_lo));
    const __m256i sc16 = _mm256_broadcastsi128_si256(sc8);
    for (int s = 0; s < 8; s++)
        u->sc[s] = _mm256_shuffle_epi8(sc16, kq_mask(kq_same_lane, s));
    const __m256i mn32 = _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, (int)mn_hi, (int)mn_lo));
    u->mins = _mm256_or_si256(mn32, _mm256_slli_epi32(mn32, 16));
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int k = 0; k < 4; k++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * k));
        u->q[2 * k] = _mm256_and_si256(v, m4);
        u->q[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
    u->d = _cvtsh_ss(b->d);
    u->dmin = _cvtsh_ss(b->dmin);
}

static inline void kq_q4k_col(const kq_q4k *u, const moe_block_q8_k *xb, __m256 *acc, __m256 *accm)
{
    __m256i sumi = _mm256_setzero_si256();
    for (int s = 0; s < 8; s++) {
        const __m256i p = _mm256_maddubs_epi16(u->q[s], _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * s)));
        sumi = kq_madd_scale(sumi, p, u->sc[s]);
    }
    const __m256i mm = _mm256_madd_epi16(u->mins, _mm256_loadu_si256((const __m256i *)xb->bsums));
    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(u->d * xb->d), *acc);
    *accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mm), _mm256_set1_ps(u->dmin * xb->d), *accm);
}

/* ---- Q6_K ---------------------------------------------------------------- */

typedef struct kq_q6k {
    __m256i q[8];  /* 32 values 0..63 per step (half h, quarter k: 4h + k)    */
    __m256i sc[8]; /* step s: scale 2s in lanes 0-7, 2s+1 in lanes 8-15     */
    __m256i sc16;  /* the 16 scales as int16, for the -32 offset           */
    float   d;
} kq_q6k;

static inline void kq_unpack_q6k(const moe_block_q6_k *b, kq_q6k *u)
{
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m256i qla = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
        const __m256i qlb = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        u->q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(qla, m4),
                                          _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
        u->q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(qlb, m4),
                                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
        u->q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qla, 4), m4),
                                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
        u->q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qlb, 4), m4),
                                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
    }
    /* sc16 lanes: scales 0..7 in the low half, 8..15 in the high half;
     * lo/hi duplicate one half into both so a per-half shuffle can reach
     * scales 2s (low lanes) and 2s + 1 (high lanes). */
    u->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    const __m256i lo = _mm256_permute4x64_epi64(u->sc16, 0x44);
    const __m256i hi = _mm256_permute4x64_epi64(u->sc16, 0xee);
    for (int s = 0; s < 4; s++)
        u->sc[s] = _mm256_shuffle_epi8(lo, kq_mask(kq_pair_lane, s));
    for (int s = 4; s < 8; s++)
        u->sc[s] = _mm256_shuffle_epi8(hi, kq_mask(kq_pair_lane, s - 4));
    u->d = _cvtsh_ss(b->d);
}

static inline void kq_q6k_col(const kq_q6k *u, const moe_block_q8_k *xb, __m256 *acc, __m256 *accc)
{
    __m256i sumi = _mm256_setzero_si256();
    for (int s = 0; s < 8; s++) {
        const __m256i p = _mm256_maddubs_epi16(u->q[s], _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * s)));
        sumi = kq_madd_scale(sumi, p, u->sc[s]);
    }
    const __m256i corr = _mm256_madd_epi16(u->sc16, _mm256_loadu_si256((const __m256i *)xb->bsums));
    const __m256 dd = _mm256_set1_ps(u->d * xb->d);
    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), dd, *acc);
    *accc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(corr), dd, *accc);
}

/* ---- the products ------------------------------------------------------- */

/* Decode has too much work per block for out-of-order execution alone to
 * run ahead of memory, so fetch the weights KQ_PF_BYTES ahead (rows are
 * contiguous, so ahead crosses into the next rows). */
#ifndef KQ_PF_BYTES
#define KQ_PF_BYTES 2048
#endif
#define KQ_PREFETCH(p)                                                           \
    do {                                                                         \
        _mm_prefetch((const char *)(p) + KQ_PF_BYTES, _MM_HINT_T0);              \
        _mm_prefetch((const char *)(p) + KQ_PF_BYTES + 64, _MM_HINT_T0);         \
        _mm_prefetch((const char *)(p) + KQ_PF_BYTES + 128, _MM_HINT_T0);        \
    } while (0)

/* One row times m <= KQ_C columns; `acc - 32 * accc` for Q6_K,
 * `acc - accm` for Q4_K. */
#define KQ_MM(name, wtype, utype, UNPACK, COL, OFFSET)                               \
    static void name(int64_t n, const void *w, size_t ws, int64_t nr,                \
                     const void *x, size_t xs, int64_t nc, float *y, size_t ys)      \
    {                                                                                \
        const int64_t nb = n / MOE_QK_K;                                             \
        for (int64_t r = 0; r < nr; r++) {                                           \
            const wtype *wr = (const void *)((const char *)w + r * ws);              \
            int64_t c0 = 0;                                                          \
            for (; c0 + KQ_C <= nc; c0 += KQ_C) {                                    \
                const moe_block_q8_k *xc[KQ_C];                                      \
                __m256 acc[KQ_C], acc2[KQ_C];                                        \
                _Pragma("GCC unroll 4") for (int j = 0; j < KQ_C; j++) {             \
                    xc[j] = (const void *)((const char *)x + (c0 + j) * xs);         \
                    acc[j] = acc2[j] = _mm256_setzero_ps();                          \
                }                                                                    \
                for (int64_t b = 0; b < nb; b++) {                                   \
                    utype u;                                                         \
                    UNPACK(&wr[b], &u);                                              \
                    _Pragma("GCC unroll 4") for (int j = 0; j < KQ_C; j++)           \
                        COL(&u, &xc[j][b], &acc[j], &acc2[j]);                       \
                }                                                                    \
                for (int j = 0; j < KQ_C; j++)                                       \
                    y[(c0 + j) * ys + r] = moe_x86_hsum(acc[j]) - OFFSET * moe_x86_hsum(acc2[j]); \
            }                                                                        \
            for (; c0 < nc; c0++) {                                                  \
                const moe_block_q8_k *xb = (const void *)((const char *)x + c0 * xs);\
                __m256 acc = _mm256_setzero_ps(), acc2 = acc;                        \
                for (int64_t b = 0; b < nb; b++) {                                   \
                    utype u;                                                         \
                    KQ_PREFETCH(&wr[b]);                                             \
                    UNPACK(&wr[b], &u);                                              \
                    COL(&u, &xb[b], &acc, &acc2);                                    \
                }                                                                    \
                y[c0 * ys + r] = moe_x86_hsum(acc) - OFFSET * moe_x86_hsum(acc2);    \
            }                                                                        \
        }                                                                            \
    }

KQ_MM(kq_mm_q4_k, moe_block_q4_k, kq_q4k, kq_unpack_q4k, kq_q4k_col, 1.0f)
KQ_MM(kq_mm_q6_k, moe_block_q6_k, kq_q6k, kq_unpack_q6k, kq_q6k_col, 32.0f)

#endif /* MOE_CPU_KERNELS_X86_KQ_H */

/*
 * sha256.c — SHA-256 (FIPS 180-4) for checking downloads and installed
 * models (moe.h's "Hashing" section). Model files are tens of gigabytes, so
 * the hash must keep up with a fast disk or network: on x86-64 CPUs with the
 * SHA extensions (Intel since Goldmont/Ice Lake, AMD since Zen) the block
 * function uses SHA-NI (about 1.5-2 GB/s per core); elsewhere a portable C
 * block function (about 200 MB/s). The choice is made once per context at
 * init from CPUID; both give identical digests (the unit test runs both).
 */
#include "util.h"

#include <string.h>

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define MOE_HAVE_SHANI 1
#define MOE_TARGET_SHANI __attribute__((target("sha,sse4.1,ssse3")))
#endif

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* ---- portable block function ---- */

static inline uint32_t rotr32(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void blocks_portable(uint32_t h[8], const uint8_t *p, size_t n_blocks)
{
    for (; n_blocks > 0; n_blocks--, p += 64) {
        uint32_t w[64];
        for (int i = 0; i < 16; i++)
            w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
                   (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
        for (int i = 16; i < 64; i++) {
            uint32_t s0 = rotr32(w[i - 15], 7) ^ rotr32(w[i - 15], 18) ^ (w[i - 15] >> 3);
            uint32_t s1 = rotr32(w[i - 2], 17) ^ rotr32(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int i = 0; i < 64; i++) {
            uint32_t t1 = hh + (rotr32(e, 6) ^ rotr32(e, 11) ^ rotr32(e, 25)) +
                          ((e & f) ^ (~e & g)) + sha256_k[i] + w[i];
            uint32_t t2 = (rotr32(a, 2) ^ rotr32(a, 13) ^ rotr32(a, 22)) +
                          ((a & b) ^ (a & c) ^ (b & c));
            hh = g; g = f; f = e; e = d + t1;
            d = c; c = b; b = a; a = t1 + t2;
        }
        h[0] += a; h[1] += b; h[2] += c; h[3] += d;
        h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
    }
}

/* ---- SHA-NI block function ----
 * The rounds instruction works on the state split in two registers, dword 3
 * first: ABEF = {A, B, E, F} and CDGH = {C, D, G, H}. Each call does two
 * rounds with W[i]+K[i] in the low two dwords of its third operand, and its
 * result is the new ABEF while the old ABEF becomes the new CDGH, so two
 * calls with the registers swapped advance four rounds and restore the
 * layout. The schedule keeps a window of four registers m0..m3 holding
 * W[t-16..t-1]; msg1 adds sigma0, alignr supplies W[t-7], msg2 adds sigma1. */
#ifdef MOE_HAVE_SHANI
MOE_TARGET_SHANI
static void blocks_shani(uint32_t h[8], const uint8_t *p, size_t n_blocks)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i dcba = _mm_loadu_si128((const __m128i *)&h[0]); /* dword 0 = A */
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&h[4]); /* dword 0 = E */
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);           /* {B,A,D,C} from dword 0 */
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);           /* {H,G,F,E} from dword 0 */
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);          /* {F,E,B,A} */
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);       /* {H,G,D,C} */

/* Four rounds with message words `w` (W[4g..4g+3]). */
#define SHANI_ROUNDS4(w, g)                                                           \
    do {                                                                              \
        __m128i wk_ = _mm_add_epi32((w), _mm_loadu_si128((const __m128i *)&sha256_k[4 * (g)])); \
        cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk_);                                \
        abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk_, 0x0E));       \
    } while (0)
/* W[4g..4g+3] into m0 from the window m0..m3 = W[4g-16..4g-1]; the window
 * then rotates by renaming (the caller passes the registers in order). */
#define SHANI_SCHED(m0, m1, m2, m3) \
    (m0) = _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32((m0), (m1)), \
                                              _mm_alignr_epi8((m3), (m2), 4)), (m3))
    for (; n_blocks > 0; n_blocks--, p += 64) {
        __m128i abef0 = abef, cdgh0 = cdgh;
        __m128i m0 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 0)), bswap);
        __m128i m1 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16)), bswap);
        __m128i m2 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 32)), bswap);
        __m128i m3 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 48)), bswap);
        SHANI_ROUNDS4(m0, 0);
        SHANI_ROUNDS4(m1, 1);
        SHANI_ROUNDS4(m2, 2);
        SHANI_ROUNDS4(m3, 3);
        for (int g = 4; g < 16; g += 4) {
            SHANI_SCHED(m0, m1, m2, m3);
            SHANI_ROUNDS4(m0, g);
            SHANI_SCHED(m1, m2, m3, m0);
            SHANI_ROUNDS4(m1, g + 1);
            SHANI_SCHED(m2, m3, m0, m1);
            SHANI_ROUNDS4(m2, g + 2);
            SHANI_SCHED(m3, m0, m1, m2);
            SHANI_ROUNDS4(m3, g + 3);
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
#undef SHANI_ROUNDS4
#undef SHANI_SCHED
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);  /* {A,B,E,F} from dword 0 */
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);  /* {G,H,C,D} from dword 0 */
    _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(dchg, feba, 8));
}

static int cpu_has_shani(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 9)) || !(c & (1u << 19)))
        return 0; /* SSSE3, SSE4.1 */
    if (__get_cpuid_max(0, NULL) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (b >> 29) & 1; /* SHA */
}
#endif

static int shani_allowed = 1; /* only tests change it */

bool moe_sha256_use_hw(bool allow)
{
    shani_allowed = allow;
#ifdef MOE_HAVE_SHANI
    return cpu_has_shani() != 0;
#else
    return false;
#endif
}

static void process(moe_sha256 *ctx, const uint8_t *p, size_t n_blocks)
{
#ifdef MOE_HAVE_SHANI
    if (ctx->hw) {
        blocks_shani(ctx->state, p, n_blocks);
        return;
    }
#endif
    blocks_portable(ctx->state, p, n_blocks);
}

void moe_sha256_init(moe_sha256 *ctx)
{
    static const uint32_t iv[8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    };
    memcpy(ctx->state, iv, sizeof iv);
    ctx->n_bytes = 0;
    ctx->buf_len = 0;
#ifdef MOE_HAVE_SHANI
    ctx->hw = shani_allowed && cpu_has_shani();
#else
    ctx->hw = 0;
#endif
}

void moe_sha256_update(moe_sha256 *ctx, const void *data, size_t len)
{
    const uint8_t *p = data;
    ctx->n_bytes += len;
    if (ctx->buf_len) {
        size_t take = 64 - ctx->buf_len < len ? 64 - ctx->buf_len : len;
        memcpy(ctx->buf + ctx->buf_len, p, take);
        ctx->buf_len += take;
        p += take;
        len -= take;
        if (ctx->buf_len < 64)
            return;
        process(ctx, ctx->buf, 1);
        ctx->buf_len = 0;
    }
    if (len >= 64) {
        process(ctx, p, len / 64);
        p += len / 64 * 64;
        len %= 64;
    }
    memcpy(ctx->buf, p, len);
    ctx->buf_len = len;
}

void moe_sha256_final(moe_sha256 *ctx, uint8_t out[32])
{
    uint64_t bits = ctx->n_bytes * 8;
    uint8_t pad[72] = { 0x80 };
    size_t pad_len = (ctx->buf_len < 56 ? 56 : 120) - ctx->buf_len;
    for (int i = 0; i < 8; i++)
        pad[pad_len + i] = (uint8_t)(bits >> (56 - 8 * i));
    uint64_t n = ctx->n_bytes; /* the padding is not message */
    moe_sha256_update(ctx, pad, pad_len + 8);
    ctx->n_bytes = n;
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(ctx->state[i] >> 24);
        out[4 * i + 1] = (uint8_t)(ctx->state[i] >> 16);
        out[4 * i + 2] = (uint8_t)(ctx->state[i] >> 8);
        out[4 * i + 3] = (uint8_t)ctx->state[i];
    }
}

void moe_sha256_hex(const uint8_t digest[32], char out[65])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 15];
    }
    out[64] = '\0';
}

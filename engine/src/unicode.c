/*
 * unicode.c — UTF-8 decoding (the lenient, llama.cpp-compatible kind the
 * tokenizer splits with, and a strict check the detokenizer uses so it never
 * emits half a character or ill-formed bytes), UTF-8 encoding, and GPT-2's
 * byte <-> code point alphabet. The property tables live in unicode-data.c.
 */
#include "unicode.h"

static inline int is_cont(uint8_t b)
{
    return (b & 0xC0) == 0x80;
}

uint32_t moe_utf8_decode_lenient(const uint8_t *s, size_t len, size_t *pos)
{
    size_t i = *pos;
    uint8_t b0 = s[i];
    uint32_t cp;

    if (b0 < 0x80) {
        *pos = i + 1;
        return b0;
    }
    if ((b0 & 0x40) == 0)
        goto invalid; /* stray continuation byte */
    if ((b0 & 0x20) == 0) {
        if (i + 1 >= len || !is_cont(s[i + 1]))
            goto invalid;
        cp = ((uint32_t)(b0 & 0x1F) << 6) | (s[i + 1] & 0x3F);
        *pos = i + 2;
        return cp;
    }
    if ((b0 & 0x10) == 0) {
        if (i + 2 >= len || !is_cont(s[i + 1]) || !is_cont(s[i + 2]))
            goto invalid;
        cp = ((uint32_t)(b0 & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) |
             (s[i + 2] & 0x3F);
        *pos = i + 3;
        return cp;
    }
    if ((b0 & 0x08) == 0) {
        if (i + 3 >= len || !is_cont(s[i + 1]) || !is_cont(s[i + 2]) || !is_cont(s[i + 3]))
            goto invalid;
        cp = ((uint32_t)(b0 & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) |
             ((uint32_t)(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
        if (cp >= MOE_UNICODE_MAX)
            goto invalid; /* cannot be re-encoded: treat the lead byte as bad */
        *pos = i + 4;
        return cp;
    }
invalid:
    *pos = i + 1;
    return MOE_UNICODE_REPLACEMENT;
}

size_t moe_utf8_decode_all(const uint8_t *s, size_t len, uint32_t *cps)
{
    size_t n = 0, pos = 0;
    while (pos < len) {
        if (s[pos] < 0x80) {
            cps[n++] = s[pos++];
            continue;
        }
        cps[n++] = moe_utf8_decode_lenient(s, len, &pos);
    }
    return n;
}

size_t moe_utf8_encode(uint32_t cp, uint8_t out[4])
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | ((cp >> 18) & 0x07));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

int moe_utf8_check(const uint8_t *s, size_t len)
{
    uint8_t b0 = s[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */

    if (b0 < 0x80)
        return 1;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        if (b0 == 0xE0)
            lo = 0xA0; /* no overlong forms */
        else if (b0 == 0xED)
            hi = 0x9F; /* no surrogates */
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        if (b0 == 0xF0)
            lo = 0x90;
        else if (b0 == 0xF4)
            hi = 0x8F; /* nothing above U+10FFFF */
    } else {
        return -1;
    }
    for (size_t k = 1; k < need; k++) {
        if (k >= len)
            return 0; /* a proper prefix so far: wait for more */
        uint8_t b = s[k];
        uint8_t klo = k == 1 ? lo : 0x80, khi = k == 1 ? hi : 0xBF;
        if (b < klo || b > khi)
            return -(int)k;
    }
    return (int)need;
}

/* The bytes GPT-2 keeps as themselves: '!'..'~', U+00A1..U+00AC and
 * U+00AE..U+00FF. The rest (0x00-0x20, 0x7F-0xA0, 0xAD) are numbered in
 * byte order from U+0100. */
static inline int gpt2_self(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t moe_gpt2_byte_to_cp(uint8_t byte)
{
    unsigned b = byte;
    if (gpt2_self(b))
        return b;
    if (b <= 0x20)
        return 0x100 + b;        /* 33 bytes: U+0100..U+0120 */
    if (b <= 0xA0)
        return 0x100 + 33 + (b - 0x7F); /* 34 bytes: U+0121..U+0142 */
    return 0x100 + 67;           /* 0xAD: U+0143 */
}

int moe_gpt2_cp_to_byte(uint32_t cp)
{
    if (cp < 0x100)
        return gpt2_self(cp) ? (int)cp : -1;
    if (cp < 0x100 + 33)
        return (int)(cp - 0x100);
    if (cp < 0x100 + 67)
        return (int)(cp - 0x100 - 33 + 0x7F);
    if (cp == 0x100 + 67)
        return 0xAD;
    return -1;
}

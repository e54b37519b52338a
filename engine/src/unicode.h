/*
 * unicode.h — the Unicode facts the tokenizer needs: UTF-8 decoding and
 * encoding, a general-category class and White_Space bit per code point
 * (tables generated into unicode-data.c by engine/tools/gen-unicode.py), and
 * GPT-2's byte <-> code point map that byte-level BPE vocabularies are
 * written in. Internal to libmoe.
 *
 * Decoding follows llama.cpp's lenient decoder on purpose, because the
 * tokenizer must split and merge exactly as llama.cpp does on any input: a
 * sequence's length comes from its lead byte, only the continuation bytes'
 * top bits are checked (overlong forms and surrogates decode), and each byte
 * that cannot start a well-formed sequence becomes U+FFFD on its own. Code
 * points above U+10FFFF (which llama.cpp cannot re-encode) are rejected too.
 */
#ifndef MOE_UNICODE_H
#define MOE_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* General category classes, as stored in the low three bits of a property
 * byte (the generator writes these numbers). */
enum moe_ucat {
    MOE_UCAT_UNASSIGNED = 0, /* Cn                                  */
    MOE_UCAT_NUMBER     = 1, /* Nd Nl No       \p{N}                */
    MOE_UCAT_LETTER     = 2, /* Lu Ll Lt Lm Lo \p{L}                */
    MOE_UCAT_SEPARATOR  = 3, /* Zs Zl Zp       \p{Z}                */
    MOE_UCAT_MARK       = 4, /* Mn Mc Me       \p{M}                */
    MOE_UCAT_PUNCT      = 5, /* Pc Pd Ps Pe Pi Pf Po \p{P}          */
    MOE_UCAT_SYMBOL     = 6, /* Sm Sc Sk So    \p{S}                */
    MOE_UCAT_OTHER      = 7, /* Cc Cf Cs Co    \p{C}                */
};

#define MOE_UCAT_MASK   0x07u
#define MOE_UPROP_SPACE 0x08u /* White_Space (PropList.txt)          */

#define MOE_UNICODE_MAX 0x110000u
#define MOE_UNICODE_REPLACEMENT 0xFFFDu

extern const uint8_t moe_ucd_stage1[MOE_UNICODE_MAX >> 8];
extern const uint8_t moe_ucd_stage2[];

/* Property byte of a code point (class | MOE_UPROP_SPACE); 0 above U+10FFFF. */
static inline uint8_t moe_uprops(uint32_t cp)
{
    if (cp >= MOE_UNICODE_MAX)
        return 0;
    return moe_ucd_stage2[((size_t)moe_ucd_stage1[cp >> 8] << 8) | (cp & 0xFF)];
}

static inline unsigned moe_ucat_of(uint32_t cp)
{
    return moe_uprops(cp) & MOE_UCAT_MASK;
}

static inline int moe_is_space(uint32_t cp)
{
    return (moe_uprops(cp) & MOE_UPROP_SPACE) != 0;
}

/* Length of the sequence a byte starts, judged by its high nibble only, as
 * SentencePiece-style splitting does: 1 for ASCII and stray continuation
 * bytes, 2 for 0xC0-0xDF, 3 for 0xE0-0xEF, 4 for 0xF0-0xFF. */
static inline size_t moe_utf8_lead_len(uint8_t byte)
{
    static const uint8_t len_of_nibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len_of_nibble[byte >> 4];
}

/* Decodes one code point at s[*pos] (requires *pos < len) the lenient way
 * described above and advances *pos by the bytes consumed (1 for U+FFFD). */
uint32_t moe_utf8_decode_lenient(const uint8_t *s, size_t len, size_t *pos);

/* Decodes all of s into cps (which must hold len entries); returns the count. */
size_t moe_utf8_decode_all(const uint8_t *s, size_t len, uint32_t *cps);

/* Encodes cp (< 0x110000) into out; returns 1..4. */
size_t moe_utf8_encode(uint32_t cp, uint8_t out[4]);

/* Strict validation for output: the length of the well-formed sequence at
 * s[0..len) (1..4), 0 if s holds only a proper prefix of one (more bytes
 * could complete it), or -k if the first k bytes (k >= 1) are ill-formed and
 * stand for one U+FFFD (the "maximal subpart" rule of Unicode ch. 3). */
int moe_utf8_check(const uint8_t *s, size_t len);

/* GPT-2's byte-level alphabet: bytes that are printable Latin-1 map to
 * themselves, the other 68 to U+0100.. in byte order. */
uint32_t moe_gpt2_byte_to_cp(uint8_t byte);
/* The byte a code point stands for, or -1 if it is not in the alphabet. */
int      moe_gpt2_cp_to_byte(uint32_t cp);

#endif /* MOE_UNICODE_H */

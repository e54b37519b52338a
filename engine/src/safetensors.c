/*
 * safetensors.c — reading Hugging Face `.safetensors` files (moe.h's
 * "Safetensors" section). The file is mapped read-only; only the JSON header
 * is parsed, by the small strict scanner below, because the engine has no
 * general JSON library and the header grammar is tiny: one object of
 * objects with "dtype", "shape" and "data_offsets", plus "__metadata__"
 * (strings only). Every byte the scanner looks at is bounds-checked against
 * the header length; strings are decoded into heap copies owned by the
 * handle; numbers are unsigned integers checked for overflow. After open the
 * handle is read-only, so threads may share it.
 */
#include "platform.h"
#include "util.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The reference implementation refuses headers above this many bytes. */
#define ST_MAX_HEADER_BYTES UINT64_C(100000000)

struct moe_safetensors {
    moe_platform_map        map;   /* zeroed when opened from memory        */
    const uint8_t          *base;  /* the whole file                        */
    uint64_t                size;
    uint64_t                data_offset;
    char                   *path;  /* for messages                          */
    moe_safetensors_tensor *tensors;
    int64_t                 n_tensors, cap_tensors;
    int64_t                *by_name; /* tensor indices sorted by name      */
    char                  **meta;    /* key, value, key, value, ...         */
    int64_t                 n_meta, cap_meta;
    bool                    has_meta;
};

/* ---- dtypes ---- */

static const struct { const char *name; size_t size; } st_dtypes[MOE_ST_DTYPE_COUNT] = {
    [MOE_ST_BOOL] = {"BOOL", 1},        [MOE_ST_U8] = {"U8", 1},
    [MOE_ST_I8] = {"I8", 1},            [MOE_ST_F8_E5M2] = {"F8_E5M2", 1},
    [MOE_ST_F8_E4M3] = {"F8_E4M3", 1},  [MOE_ST_F8_E8M0] = {"F8_E8M0", 1},
    [MOE_ST_I16] = {"I16", 2},          [MOE_ST_U16] = {"U16", 2},
    [MOE_ST_F16] = {"F16", 2},          [MOE_ST_BF16] = {"BF16", 2},
    [MOE_ST_I32] = {"I32", 4},          [MOE_ST_U32] = {"U32", 4},
    [MOE_ST_F32] = {"F32", 4},          [MOE_ST_F64] = {"F64", 8},
    [MOE_ST_I64] = {"I64", 8},          [MOE_ST_U64] = {"U64", 8},
};

const char *moe_st_dtype_name(moe_st_dtype dtype)
{
    return (unsigned)dtype < MOE_ST_DTYPE_COUNT ? st_dtypes[dtype].name : NULL;
}

size_t moe_st_dtype_size(moe_st_dtype dtype)
{
    return (unsigned)dtype < MOE_ST_DTYPE_COUNT ? st_dtypes[dtype].size : 0;
}

bool moe_st_dtype_from_name(const char *name, moe_st_dtype *out)
{
    for (int i = 0; name && i < MOE_ST_DTYPE_COUNT; i++) {
        if (strcmp(name, st_dtypes[i].name) == 0) {
            *out = (moe_st_dtype)i;
            return true;
        }
    }
    return false;
}

/* ---- the scanner: [p, end) is the rest of the header ---- */

typedef struct st_scan {
    const char *start, *p, *end;
    const char *path;
    moe_err    *err;
} st_scan;

static moe_status scan_fail(const st_scan *s, const char *fmt, ...) MOE_PRINTF(2, 3);

/* "<path>: safetensors header: <what> (byte <file offset>)" */
static moe_status scan_fail(const st_scan *s, const char *fmt, ...)
{
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return moe_fail(s->err, MOE_ERR_FORMAT, "%s: safetensors header: %s (byte %" PRIu64 ")",
                    s->path, what, (uint64_t)(8 + (s->p - s->start)));
}

static void scan_ws(st_scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

/* Skips whitespace, then consumes `c` or fails. */
static moe_status scan_expect(st_scan *s, char c)
{
    scan_ws(s);
    if (s->p >= s->end)
        return scan_fail(s, "expected '%c' but the header ended", c);
    if (*s->p != c)
        return scan_fail(s, "expected '%c'", c);
    s->p++;
    return MOE_OK;
}

/* Skips whitespace and returns the next byte without consuming it, or 0. */
static char scan_peek(st_scan *s)
{
    scan_ws(s);
    return s->p < s->end ? *s->p : 0;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads the 4 hex digits after "\u" at s->p; -1 if malformed. */
static long scan_hex4(st_scan *s)
{
    if (s->end - s->p < 4)
        return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_value(s->p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    s->p += 4;
    return v;
}

static size_t utf8_put(char *out, uint32_t cp)
{
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence at p (at most `avail` bytes), or 0 for
 * an invalid one: overlong forms, surrogates and code points past U+10FFFF
 * are invalid. */
static size_t utf8_valid(const unsigned char *p, size_t avail)
{
    unsigned char c = p[0];
    size_t n;
    uint32_t cp, min;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) { n = 2; cp = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { n = 3; cp = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { n = 4; cp = c & 0x07; min = 0x10000; }
    else return 0;
    if (avail < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

/* Parses a JSON string at s->p (after whitespace) into a NUL-terminated heap
 * copy. Decoded text is never longer than the raw text, so the copy is
 * sized by the raw span. NUL characters (\u0000) are refused: names and
 * values are handed out as C strings. */
static moe_status scan_string(st_scan *s, char **out)
{
    *out = NULL;
    if (scan_peek(s) != '"')
        return scan_fail(s, s->p < s->end ? "expected a string" : "expected a string but the"
                         " header ended");
    s->p++;
    const char *q = s->p;
    while (q < s->end && *q != '"')
        q += (*q == '\\' && q + 1 < s->end) ? 2 : 1;
    if (q >= s->end)
        return scan_fail(s, "unterminated string");
    char *buf = malloc((size_t)(q - s->p) + 1);
    if (!buf)
        return moe_fail(s->err, MOE_ERR_NOMEM, "%s: out of memory reading the header", s->path);
    size_t n = 0;
    while (*s->p != '"') {
        unsigned char c = (unsigned char)*s->p;
        if (c < 0x20) {
            free(buf);
            return scan_fail(s, "control character in a string");
        }
        if (c != '\\') {
            size_t len = utf8_valid((const unsigned char *)s->p, (size_t)(q - s->p));
            if (len == 0) {
                free(buf);
                return scan_fail(s, "invalid UTF-8 in a string");
            }
            memcpy(buf + n, s->p, len);
            n += len;
            s->p += len;
            continue;
        }
        s->p++; /* the loop above guarantees a byte after the backslash */
        char e = *s->p++;
        const char *simple = e ? strchr("\"\\/bfnrt", e) : NULL;
        if (simple) {
            static const char decoded[] = "\"\\/\b\f\n\r\t";
            buf[n++] = decoded[simple - "\"\\/bfnrt"];
            continue;
        }
        if (e != 'u') {
            s->p--;
            free(buf);
            return scan_fail(s, "invalid escape in a string");
        }
        long cp = scan_hex4(s);
        if (cp >= 0xD800 && cp <= 0xDBFF) { /* a high surrogate needs its low half */
            long lo = -1;
            if (s->end - s->p >= 2 && s->p[0] == '\\' && s->p[1] == 'u') {
                s->p += 2;
                lo = scan_hex4(s);
            }
            cp = (lo >= 0xDC00 && lo <= 0xDFFF) ? 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                                                : -1;
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            cp = -1;
        }
        if (cp <= 0) {
            free(buf);
            return scan_fail(s, cp == 0 ? "NUL character (\\u0000) in a string"
                                        : "invalid \\u escape in a string");
        }
        n += utf8_put(buf + n, (uint32_t)cp);
    }
    s->p++; /* the closing quote */
    buf[n] = '\0';
    *out = buf;
    return MOE_OK;
}

/* A JSON number that must be a non-negative integer <= `max`. */
static moe_status scan_uint(st_scan *s, uint64_t max, const char *what, uint64_t *out)
{
    char c = scan_peek(s);
    if (c < '0' || c > '9')
        return scan_fail(s, "%s: expected a non-negative integer", what);
    uint64_t v = 0;
    if (c == '0') {
        s->p++;
    } else {
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
            uint64_t d = (uint64_t)(*s->p - '0');
            if (v > (max - d) / 10)
                return scan_fail(s, "%s: integer too large", what);
            v = v * 10 + d;
            s->p++;
        }
    }
    if (s->p < s->end && (*s->p == '.' || *s->p == 'e' || *s->p == 'E' ||
                          (*s->p >= '0' && *s->p <= '9')))
        return scan_fail(s, "%s: expected a non-negative integer", what);
    *out = v;
    return MOE_OK;
}

/* After an element: ',' (returns 1) or the closing bracket (returns 0). */
static int scan_next(st_scan *s, char close, moe_status *st)
{
    char c = scan_peek(s);
    if (c == ',' || c == close) {
        s->p++;
        *st = MOE_OK;
        return c == ',';
    }
    *st = scan_fail(s, "expected ',' or '%c'", close);
    return 0;
}

/* ---- building the handle ---- */

static moe_status add_meta(moe_safetensors *st, st_scan *s, char *key, char *value)
{
    for (int64_t i = 0; i < st->n_meta; i++) {
        if (strcmp(st->meta[2 * i], key) == 0) {
            moe_status r = scan_fail(s, "duplicate __metadata__ key '%.100s'", key);
            free(key);
            free(value);
            return r;
        }
    }
    if (st->n_meta == st->cap_meta) {
        int64_t cap = st->cap_meta ? 2 * st->cap_meta : 8;
        char **m = realloc(st->meta, (size_t)cap * 2 * sizeof *m);
        if (!m) {
            free(key);
            free(value);
            return moe_fail(s->err, MOE_ERR_NOMEM, "%s: out of memory reading metadata", s->path);
        }
        st->meta = m;
        st->cap_meta = cap;
    }
    st->meta[2 * st->n_meta] = key;
    st->meta[2 * st->n_meta + 1] = value;
    st->n_meta++;
    return MOE_OK;
}

static moe_status parse_metadata(moe_safetensors *st, st_scan *s)
{
    if (st->has_meta)
        return scan_fail(s, "__metadata__ appears twice");
    st->has_meta = true;
    moe_status r = scan_expect(s, '{');
    if (r != MOE_OK)
        return r;
    if (scan_peek(s) == '}') {
        s->p++;
        return MOE_OK;
    }
    do {
        char *key = NULL, *value = NULL;
        if ((r = scan_string(s, &key)) != MOE_OK)
            return r;
        if ((r = scan_expect(s, ':')) != MOE_OK) {
            free(key);
            return r;
        }
        if (scan_peek(s) != '"') {
            r = scan_fail(s, "__metadata__ value of '%.100s' must be a string", key);
            free(key);
            return r;
        }
        if ((r = scan_string(s, &value)) != MOE_OK) {
            free(key);
            return r;
        }
        if ((r = add_meta(st, s, key, value)) != MOE_OK)
            return r;
    } while (scan_next(s, '}', &r));
    return r;
}

/* Field "shape": up to MOE_SAFETENSORS_MAX_DIMS integers. */
static moe_status parse_shape(st_scan *s, moe_safetensors_tensor *t)
{
    moe_status r = scan_expect(s, '[');
    if (r != MOE_OK)
        return r;
    if (scan_peek(s) == ']') {
        s->p++;
        return MOE_OK;
    }
    do {
        if (t->n_dims == MOE_SAFETENSORS_MAX_DIMS)
            return scan_fail(s, "tensor '%.100s' has more than %d dimensions", t->name,
                             MOE_SAFETENSORS_MAX_DIMS);
        uint64_t d;
        if ((r = scan_uint(s, INT64_MAX, "shape", &d)) != MOE_OK)
            return r;
        t->shape[t->n_dims++] = (int64_t)d;
    } while (scan_next(s, ']', &r));
    return r;
}

/* Field "data_offsets": exactly [begin, end] with begin <= end. */
static moe_status parse_offsets(st_scan *s, moe_safetensors_tensor *t, uint64_t *end)
{
    moe_status r;
    uint64_t begin;
    if ((r = scan_expect(s, '[')) != MOE_OK ||
        (r = scan_uint(s, UINT64_MAX, "data_offsets", &begin)) != MOE_OK ||
        (r = scan_expect(s, ',')) != MOE_OK ||
        (r = scan_uint(s, UINT64_MAX, "data_offsets", end)) != MOE_OK ||
        (r = scan_expect(s, ']')) != MOE_OK)
        return r == MOE_ERR_FORMAT ? scan_fail(s, "data_offsets of tensor '%.100s' must be"
                                               " [begin, end]", t->name) : r;
    if (*end < begin)
        return scan_fail(s, "tensor '%.100s' ends (%" PRIu64 ") before it begins (%" PRIu64 ")",
                         t->name, *end, begin);
    t->offset = begin;
    return MOE_OK;
}

/* One tensor's object; t->name is already set (owned by the handle). */
static moe_status parse_tensor(st_scan *s, moe_safetensors_tensor *t)
{
    bool seen_dtype = false, seen_shape = false, seen_offsets = false;
    uint64_t end = 0;
    moe_status r = scan_expect(s, '{');
    if (r != MOE_OK)
        return r == MOE_ERR_FORMAT && s->p < s->end
                   ? scan_fail(s, "tensor '%.100s' must be an object", t->name) : r;
    for (int i = 0; i < MOE_SAFETENSORS_MAX_DIMS; i++)
        t->shape[i] = 1;
    if (scan_peek(s) != '}') {
        do {
            char *field = NULL;
            if ((r = scan_string(s, &field)) != MOE_OK)
                return r;
            bool *seen = strcmp(field, "dtype") == 0 ? &seen_dtype
                       : strcmp(field, "shape") == 0 ? &seen_shape
                       : strcmp(field, "data_offsets") == 0 ? &seen_offsets : NULL;
            if (!seen || *seen) {
                r = scan_fail(s, "%s field '%.60s' in tensor '%.100s'",
                              seen ? "duplicate" : "unknown", field, t->name);
                free(field);
                return r;
            }
            *seen = true;
            if ((r = scan_expect(s, ':')) != MOE_OK) {
                free(field);
                return r;
            }
            if (seen == &seen_dtype) {
                char *dtype = NULL;
                if ((r = scan_string(s, &dtype)) == MOE_OK &&
                    !moe_st_dtype_from_name(dtype, &t->dtype))
                    r = scan_fail(s, "tensor '%.100s' has unknown dtype '%.40s'", t->name, dtype);
                free(dtype);
            } else if (seen == &seen_shape) {
                r = parse_shape(s, t);
            } else {
                r = parse_offsets(s, t, &end);
            }
            free(field);
            if (r != MOE_OK)
                return r;
        } while (scan_next(s, '}', &r));
        if (r != MOE_OK)
            return r;
    } else {
        s->p++;
    }
    if (!seen_dtype || !seen_shape || !seen_offsets)
        return scan_fail(s, "tensor '%.100s' lacks '%s'", t->name,
                         !seen_dtype ? "dtype" : !seen_shape ? "shape" : "data_offsets");
    t->dtype_name = moe_st_dtype_name(t->dtype);
    uint64_t bytes = moe_st_dtype_size(t->dtype);
    for (uint32_t i = 0; i < t->n_dims; i++)
        if (!moe_mul_u64(bytes, (uint64_t)t->shape[i], &bytes))
            return scan_fail(s, "tensor '%.100s': size overflows", t->name);
    if (bytes != end - t->offset)
        return scan_fail(s, "tensor '%.100s': shape and dtype give %" PRIu64 " bytes but"
                         " data_offsets span %" PRIu64, t->name, bytes, end - t->offset);
    t->size_bytes = bytes;
    return MOE_OK;
}

static moe_status add_tensor(moe_safetensors *st, st_scan *s, char *name)
{
    if (name[0] == '\0') {
        free(name);
        return scan_fail(s, "empty tensor name");
    }
    if (st->n_tensors == st->cap_tensors) {
        int64_t cap = st->cap_tensors ? 2 * st->cap_tensors : 64;
        moe_safetensors_tensor *t = realloc(st->tensors, (size_t)cap * sizeof *t);
        if (!t) {
            free(name);
            return moe_fail(s->err, MOE_ERR_NOMEM, "%s: out of memory reading tensors", s->path);
        }
        st->tensors = t;
        st->cap_tensors = cap;
    }
    moe_safetensors_tensor *t = &st->tensors[st->n_tensors++];
    memset(t, 0, sizeof *t);
    t->name = name;
    return parse_tensor(s, t);
}

static moe_status parse_header(moe_safetensors *st, st_scan *s)
{
    if (s->p >= s->end || *s->p != '{')
        return scan_fail(s, "the header must start with '{'");
    s->p++;
    moe_status r = MOE_OK;
    if (scan_peek(s) == '}') {
        s->p++;
    } else {
        do {
            char *key = NULL;
            if ((r = scan_string(s, &key)) != MOE_OK)
                return r;
            if ((r = scan_expect(s, ':')) != MOE_OK) {
                free(key);
                return r;
            }
            if (strcmp(key, "__metadata__") == 0) {
                free(key);
                r = parse_metadata(st, s);
            } else {
                r = add_tensor(st, s, key);
            }
            if (r != MOE_OK)
                return r;
        } while (scan_next(s, '}', &r));
        if (r != MOE_OK)
            return r;
    }
    scan_ws(s);
    if (s->p != s->end)
        return scan_fail(s, "unexpected bytes after the header object");
    return MOE_OK;
}

/* ---- whole-file checks: names unique, tensors tile the data section ---- */

/* What the sorts below compare: a copy of each tensor's key fields, so
 * qsort needs no context pointer. */
typedef struct st_key {
    const char *name;
    uint64_t    offset, size_bytes;
    int64_t     index; /* into st->tensors */
} st_key;

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const st_key *)a)->name, ((const st_key *)b)->name);
}

static int cmp_offset(const void *a, const void *b)
{
    const st_key *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    if (x->size_bytes != y->size_bytes) /* zero-size tensors first */
        return x->size_bytes < y->size_bytes ? -1 : 1;
    return 0;
}

static moe_status check_layout(moe_safetensors *st, moe_err *err)
{
    int64_t n = st->n_tensors;
    uint64_t data_bytes = st->size - st->data_offset;
    st_key *keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
    st->by_name = malloc((size_t)(n ? n : 1) * sizeof *st->by_name);
    if (!keys || !st->by_name) {
        free(keys);
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory indexing tensors", st->path);
    }
    for (int64_t i = 0; i < n; i++)
        keys[i] = (st_key){ st->tensors[i].name, st->tensors[i].offset,
                            st->tensors[i].size_bytes, i };

    /* Names: sorted for moe_safetensors_find; equal neighbours are duplicates. */
    qsort(keys, (size_t)n, sizeof *keys, cmp_name);
    moe_status r = MOE_OK;
    for (int64_t i = 0; i < n; i++)
        st->by_name[i] = keys[i].index;
    for (int64_t i = 1; i < n && r == MOE_OK; i++)
        if (strcmp(keys[i - 1].name, keys[i].name) == 0)
            r = moe_fail(err, MOE_ERR_FORMAT, "%s: duplicate tensor '%.200s'", st->path,
                         keys[i].name);

    /* Extents: in offset order each tensor starts where the last ended and
     * the last ends at the end of the file. */
    qsort(keys, (size_t)n, sizeof *keys, cmp_offset);
    uint64_t covered = 0;
    for (int64_t i = 0; i < n && r == MOE_OK; i++) {
        const st_key *t = &keys[i];
        if (t->offset != covered)
            r = moe_fail(err, MOE_ERR_FORMAT, "%s: tensor '%.200s' starts at data offset %"
                         PRIu64 " but the previous tensor ends at %" PRIu64 " (%s)", st->path,
                         t->name, t->offset, covered, t->offset > covered ? "gap" : "overlap");
        covered = t->offset + t->size_bytes; /* no overflow: end was parsed as a u64 */
        if (r == MOE_OK && covered > data_bytes)
            r = moe_fail(err, MOE_ERR_FORMAT, "%s: tensor '%.200s' ends at data offset %" PRIu64
                         " past the end of the file's %" PRIu64 " data bytes", st->path,
                         t->name, covered, data_bytes);
    }
    if (r == MOE_OK && covered != data_bytes)
        r = moe_fail(err, MOE_ERR_FORMAT, "%s: the data section has %" PRIu64 " bytes but the"
                     " tensors cover %" PRIu64, st->path, data_bytes, covered);
    for (int64_t i = 0; i < n && r == MOE_OK; i++)
        st->tensors[i].data = st->base + st->data_offset + st->tensors[i].offset;
    free(keys);
    return r;
}

/* ---- open/free ---- */

static moe_status st_parse(moe_safetensors *st, moe_err *err)
{
    if (st->size < 8)
        return moe_fail(err, MOE_ERR_FORMAT, "%s: %" PRIu64 " bytes is too short for a"
                        " safetensors file (8-byte header length)", st->path, st->size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | st->base[i];
    if (n > ST_MAX_HEADER_BYTES)
        return moe_fail(err, MOE_ERR_FORMAT, "%s: header length %" PRIu64 " exceeds the"
                        " format's limit of %" PRIu64 " bytes", st->path, n, ST_MAX_HEADER_BYTES);
    if (n > st->size - 8)
        return moe_fail(err, MOE_ERR_FORMAT, "%s: header length %" PRIu64 " runs past the end"
                        " of the %" PRIu64 "-byte file", st->path, n, st->size);
    st->data_offset = 8 + n;
    st_scan s = {
        .start = (const char *)st->base + 8, .p = (const char *)st->base + 8,
        .end = (const char *)st->base + 8 + n, .path = st->path, .err = err,
    };
    moe_status r = parse_header(st, &s);
    return r != MOE_OK ? r : check_layout(st, err);
}

static moe_status st_new(const char *name, moe_safetensors **out, moe_err *err)
{
    *out = calloc(1, sizeof **out);
    size_t len = strlen(name) + 1;
    if (*out && ((*out)->path = malloc(len)))
        memcpy((*out)->path, name, len);
    if (!*out || !(*out)->path) {
        free(*out);
        *out = NULL;
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory", name);
    }
    return MOE_OK;
}

moe_status moe_safetensors_open(const char *path, moe_safetensors **out, moe_err *err)
{
    if (!out || !path)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_safetensors_open: NULL argument");
    *out = NULL;
    moe_safetensors *st;
    moe_status r = st_new(path, &st, err);
    if (r != MOE_OK)
        return r;
    if ((r = moe_platform_map_file(path, &st->map, err)) == MOE_OK) {
        st->base = st->map.data;
        st->size = st->map.size;
        r = st_parse(st, err);
    }
    if (r != MOE_OK) {
        moe_safetensors_free(st);
        return r;
    }
    *out = st;
    return MOE_OK;
}

moe_status moe_safetensors_open_memory(const void *data, size_t size, const char *name,
                                       moe_safetensors **out, moe_err *err)
{
    if (!out || (!data && size))
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_safetensors_open_memory: NULL argument");
    *out = NULL;
    moe_safetensors *st;
    moe_status r = st_new(name ? name : "(memory)", &st, err);
    if (r != MOE_OK)
        return r;
    st->base = data;
    st->size = size;
    if ((r = st_parse(st, err)) != MOE_OK) {
        moe_safetensors_free(st);
        return r;
    }
    *out = st;
    return MOE_OK;
}

void moe_safetensors_free(moe_safetensors *st)
{
    if (!st)
        return;
    for (int64_t i = 0; i < st->n_tensors; i++)
        free((char *)st->tensors[i].name);
    for (int64_t i = 0; i < 2 * st->n_meta; i++)
        free(st->meta[i]);
    free(st->tensors);
    free(st->by_name);
    free(st->meta);
    free(st->path);
    moe_platform_unmap_file(&st->map);
    free(st);
}

/* ---- accessors ---- */

int64_t moe_safetensors_n_tensors(const moe_safetensors *st)
{
    return st ? st->n_tensors : 0;
}

const moe_safetensors_tensor *moe_safetensors_tensor_at(const moe_safetensors *st, int64_t i)
{
    return st && i >= 0 && i < st->n_tensors ? &st->tensors[i] : NULL;
}

const moe_safetensors_tensor *moe_safetensors_find(const moe_safetensors *st, const char *name)
{
    if (!st || !name)
        return NULL;
    int64_t lo = 0, hi = st->n_tensors; /* binary search over by_name */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->tensors[st->by_name[mid]].name, name);
        if (c == 0)
            return &st->tensors[st->by_name[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int64_t moe_safetensors_n_metadata(const moe_safetensors *st)
{
    return st ? st->n_meta : 0;
}

bool moe_safetensors_metadata_at(const moe_safetensors *st, int64_t i,
                                 const char **key, const char **value)
{
    if (!st || i < 0 || i >= st->n_meta)
        return false;
    if (key)
        *key = st->meta[2 * i];
    if (value)
        *value = st->meta[2 * i + 1];
    return true;
}

const char *moe_safetensors_metadata(const moe_safetensors *st, const char *key)
{
    for (int64_t i = 0; st && key && i < st->n_meta; i++)
        if (strcmp(st->meta[2 * i], key) == 0)
            return st->meta[2 * i + 1];
    return NULL;
}

uint64_t moe_safetensors_file_bytes(const moe_safetensors *st)
{
    return st ? st->size : 0;
}

uint64_t moe_safetensors_data_offset(const moe_safetensors *st)
{
    return st ? st->data_offset : 0;
}

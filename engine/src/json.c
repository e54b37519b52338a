/*
 * json.c — the strict JSON reader declared in json.h, plus the shared
 * locale-independent number conversions.
 *
 * A recursive-descent parser over a byte range. Nodes and strings go into
 * the document's arena. Array elements and object members are collected on
 * one malloc'd scratch stack while their container is open and copied into
 * the arena when it closes, so a container costs one exact-size block
 * however it grew. Recursion depth is bounded by MOE_JSON_MAX_DEPTH.
 */
#include "json.h"

#include "arena.h"
#include "util.h"

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct moe_json_doc {
    moe_arena arena;
    moe_json *root;
};

typedef struct json_parser {
    const unsigned char *s;
    size_t               len;
    size_t               pos;
    moe_arena           *arena;
    /* scratch stack of pending children: pointers for arrays, members for
     * objects (kept as two stacks so each stays typed) */
    moe_json           **items;
    size_t               n_items, cap_items;
    moe_json_member     *mems;
    size_t               n_mems, cap_mems;
    moe_err             *err;
    moe_status           status;
} json_parser;

/* ---- errors ---------------------------------------------------------- */

static moe_status jp_fail(json_parser *p, const char *what)
{
    if (p->status != MOE_OK)
        return p->status;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < p->pos && i < p->len; i++) {
        if (p->s[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    p->status = moe_fail(p->err, MOE_ERR_FORMAT, "JSON: %s at byte %zu (line %zu:%zu)",
                         what, p->pos, line, col);
    return p->status;
}

static moe_status jp_nomem(json_parser *p)
{
    if (p->status != MOE_OK)
        return p->status;
    p->status = moe_fail(p->err, MOE_ERR_NOMEM, "JSON: out of memory at byte %zu", p->pos);
    return p->status;
}

/* ---- helpers ----------------------------------------------------------- */

static void skip_ws(json_parser *p)
{
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static moe_json *new_node(json_parser *p, moe_json_type t)
{
    moe_json *n = moe_arena_alloc(p->arena, sizeof *n);
    if (!n) {
        jp_nomem(p);
        return NULL;
    }
    memset(n, 0, sizeof *n);
    n->type = t;
    return n;
}

static bool literal(json_parser *p, const char *word)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return false;
    p->pos += n;
    return true;
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool read_hex4(json_parser *p, unsigned *out)
{
    if (p->len - p->pos < 4)
        return false;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p->s[p->pos + (size_t)i]);
        if (h < 0)
            return false;
        v = (v << 4) | (unsigned)h;
    }
    p->pos += 4;
    *out = v;
    return true;
}

static size_t put_utf8(unsigned char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF), or 0 if it is not one. */
static size_t utf8_valid_len(const unsigned char *s, size_t avail)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;
        if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (avail < n)
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return n;
}

/* ---- strings ----------------------------------------------------------- */

/* Parses a string starting at the opening quote. The decoded text is never
 * longer than the source, so one arena block of the source length fits. */
static bool parse_string(json_parser *p, const char **out, size_t *out_len)
{
    p->pos++; /* opening quote */
    size_t start = p->pos;
    size_t end = start;
    while (end < p->len && p->s[end] != '"') {
        if (p->s[end] == '\\') {
            end++;
        }
        end++;
    }
    if (end >= p->len) {
        jp_fail(p, "unterminated string");
        return false;
    }
    size_t cap = end - start;
    unsigned char *buf = moe_arena_alloc(p->arena, cap + 1);
    if (!buf) {
        jp_nomem(p);
        return false;
    }
    size_t n = 0;
    while (p->s[p->pos] != '"') {
        unsigned char c = p->s[p->pos];
        if (c < 0x20) {
            jp_fail(p, "control character in string");
            return false;
        }
        if (c != '\\') {
            size_t k = utf8_valid_len(p->s + p->pos, p->len - p->pos);
            if (k == 0) {
                jp_fail(p, "invalid UTF-8 in string");
                return false;
            }
            memcpy(buf + n, p->s + p->pos, k);
            n += k;
            p->pos += k;
            continue;
        }
        p->pos++;
        unsigned char e = p->s[p->pos++];
        switch (e) {
        case '"': buf[n++] = '"'; break;
        case '\\': buf[n++] = '\\'; break;
        case '/': buf[n++] = '/'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'n': buf[n++] = '\n'; break;
        case 'r': buf[n++] = '\r'; break;
        case 't': buf[n++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (!read_hex4(p, &cp)) {
                jp_fail(p, "bad \\u escape");
                return false;
            }
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                jp_fail(p, "lone low surrogate in \\u escape");
                return false;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (p->len - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
                    jp_fail(p, "lone high surrogate in \\u escape");
                    return false;
                }
                p->pos += 2;
                if (!read_hex4(p, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                    jp_fail(p, "bad surrogate pair in \\u escape");
                    return false;
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            /* \uXXXX is 6 source bytes and decodes to at most 3 (a pair is
             * 12 bytes for 4), so the buffer cannot overflow. */
            n += put_utf8(buf + n, cp);
            break;
        }
        default:
            p->pos--;
            jp_fail(p, "bad escape in string");
            return false;
        }
    }
    p->pos++; /* closing quote */
    buf[n] = 0;
    *out = (const char *)buf;
    *out_len = n;
    return true;
}

/* ---- numbers ----------------------------------------------------------- */

bool moe_json_strtod(const char *s, size_t len, double *out)
{
    char tmp[512];
    if (len == 0 || len >= sizeof tmp)
        return false;
    /* strtod honours LC_NUMERIC; swap '.' for the locale's decimal point. */
    const struct lconv *lc = localeconv();
    char dp = (lc && lc->decimal_point && lc->decimal_point[0]) ? lc->decimal_point[0] : '.';
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '.')
            c = dp;
        else if (c == dp && dp != '.')
            return false;
        tmp[i] = c;
    }
    tmp[len] = 0;
    char *end = NULL;
    double v = strtod(tmp, &end);
    if (end != tmp + len)
        return false;
    *out = v;
    return true;
}

static moe_json *parse_number(json_parser *p)
{
    size_t start = p->pos;
    bool is_float = false;
    if (p->pos < p->len && p->s[p->pos] == '-')
        p->pos++;
    if (p->pos >= p->len)
        goto bad;
    if (p->s[p->pos] == '0') {
        p->pos++;
    } else if (p->s[p->pos] >= '1' && p->s[p->pos] <= '9') {
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            p->pos++;
    } else {
        goto bad;
    }
    if (p->pos < p->len && p->s[p->pos] == '.') {
        is_float = true;
        p->pos++;
        if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
            goto bad;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            p->pos++;
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        is_float = true;
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
            p->pos++;
        if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
            goto bad;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            p->pos++;
    }
    const char *txt = (const char *)p->s + start;
    size_t n = p->pos - start;
    if (!is_float) {
        /* Accumulate as a negative number so INT64_MIN fits. */
        bool neg = txt[0] == '-';
        int64_t v = 0;
        bool overflow = false;
        for (size_t i = neg ? 1 : 0; i < n; i++) {
            int d = txt[i] - '0';
            if (v < (INT64_MIN + d) / 10) {
                overflow = true;
                break;
            }
            v = v * 10 - d;
        }
        if (!overflow && (neg || v != INT64_MIN)) {
            moe_json *node = new_node(p, MOE_JSON_INT);
            if (node)
                node->u.i = neg ? v : -v;
            return node;
        }
    }
    double d;
    if (!moe_json_strtod(txt, n, &d)) {
        p->pos = start;
        jp_fail(p, "number too long");
        return NULL;
    }
    if (!isfinite(d)) {
        p->pos = start;
        jp_fail(p, "number out of range");
        return NULL;
    }
    moe_json *node = new_node(p, MOE_JSON_FLOAT);
    if (node)
        node->u.f = d;
    return node;
bad:
    jp_fail(p, "malformed number");
    return NULL;
}

/* ---- containers -------------------------------------------------------- */

static bool push_item(json_parser *p, moe_json *v)
{
    if (p->n_items == p->cap_items) {
        size_t cap = p->cap_items ? p->cap_items * 2 : 64;
        moe_json **q = realloc(p->items, cap * sizeof *q);
        if (!q) {
            jp_nomem(p);
            return false;
        }
        p->items = q;
        p->cap_items = cap;
    }
    p->items[p->n_items++] = v;
    return true;
}

static bool push_member(json_parser *p, const char *k, size_t klen, moe_json *v)
{
    if (p->n_mems == p->cap_mems) {
        size_t cap = p->cap_mems ? p->cap_mems * 2 : 64;
        moe_json_member *q = realloc(p->mems, cap * sizeof *q);
        if (!q) {
            jp_nomem(p);
            return false;
        }
        p->mems = q;
        p->cap_mems = cap;
    }
    p->mems[p->n_mems].key = k;
    p->mems[p->n_mems].key_len = klen;
    p->mems[p->n_mems].value = v;
    p->n_mems++;
    return true;
}

static moe_json *parse_value(json_parser *p, int depth);

static moe_json *parse_array(json_parser *p, int depth)
{
    p->pos++; /* [ */
    size_t base = p->n_items;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == ']') {
        p->pos++;
    } else {
        for (;;) {
            moe_json *v = parse_value(p, depth + 1);
            if (!v || !push_item(p, v))
                return NULL;
            skip_ws(p);
            if (p->pos < p->len && p->s[p->pos] == ',') {
                p->pos++;
                continue;
            }
            if (p->pos < p->len && p->s[p->pos] == ']') {
                p->pos++;
                break;
            }
            jp_fail(p, "expected ',' or ']' in array");
            return NULL;
        }
    }
    moe_json *node = new_node(p, MOE_JSON_ARRAY);
    if (!node)
        return NULL;
    size_t n = p->n_items - base;
    if (n) {
        node->u.arr.items = moe_arena_alloc(p->arena, n * sizeof(moe_json *));
        if (!node->u.arr.items) {
            jp_nomem(p);
            return NULL;
        }
        memcpy(node->u.arr.items, p->items + base, n * sizeof(moe_json *));
    }
    node->u.arr.n = n;
    p->n_items = base;
    return node;
}

static moe_json *parse_object(json_parser *p, int depth)
{
    p->pos++; /* { */
    size_t base = p->n_mems;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == '}') {
        p->pos++;
    } else {
        for (;;) {
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != '"') {
                jp_fail(p, "expected a string key in object");
                return NULL;
            }
            const char *k;
            size_t klen;
            if (!parse_string(p, &k, &klen))
                return NULL;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                jp_fail(p, "expected ':' after object key");
                return NULL;
            }
            p->pos++;
            moe_json *v = parse_value(p, depth + 1);
            if (!v || !push_member(p, k, klen, v))
                return NULL;
            skip_ws(p);
            if (p->pos < p->len && p->s[p->pos] == ',') {
                p->pos++;
                continue;
            }
            if (p->pos < p->len && p->s[p->pos] == '}') {
                p->pos++;
                break;
            }
            jp_fail(p, "expected ',' or '}' in object");
            return NULL;
        }
    }
    moe_json *node = new_node(p, MOE_JSON_OBJECT);
    if (!node)
        return NULL;
    size_t n = p->n_mems - base;
    if (n) {
        node->u.obj.members = moe_arena_alloc(p->arena, n * sizeof(moe_json_member));
        if (!node->u.obj.members) {
            jp_nomem(p);
            return NULL;
        }
        memcpy(node->u.obj.members, p->mems + base, n * sizeof(moe_json_member));
    }
    node->u.obj.n = n;
    p->n_mems = base;
    return node;
}

static moe_json *parse_value(json_parser *p, int depth)
{
    if (depth > MOE_JSON_MAX_DEPTH) {
        jp_fail(p, "nesting deeper than 256 levels");
        return NULL;
    }
    skip_ws(p);
    if (p->pos >= p->len) {
        jp_fail(p, "unexpected end of input");
        return NULL;
    }
    unsigned char c = p->s[p->pos];
    switch (c) {
    case '{':
        return parse_object(p, depth);
    case '[':
        return parse_array(p, depth);
    case '"': {
        moe_json *node = new_node(p, MOE_JSON_STRING);
        if (!node || !parse_string(p, &node->u.str.ptr, &node->u.str.len))
            return NULL;
        return node;
    }
    case 't':
    case 'f':
        if (literal(p, "true") || literal(p, "false")) {
            moe_json *node = new_node(p, MOE_JSON_BOOL);
            if (node)
                node->u.b = c == 't';
            return node;
        }
        break;
    case 'n':
        if (literal(p, "null"))
            return new_node(p, MOE_JSON_NULL);
        break;
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return parse_number(p);
        break;
    }
    jp_fail(p, "unexpected character");
    return NULL;
}

moe_status moe_json_parse(const char *text, size_t len, moe_json_doc **out, moe_err *err)
{
    if (!out || (!text && len))
        return moe_fail(err, MOE_ERR_INVALID_ARG, "JSON: NULL argument");
    *out = NULL;
    moe_json_doc *doc = calloc(1, sizeof *doc);
    if (!doc)
        return moe_fail(err, MOE_ERR_NOMEM, "JSON: out of memory");
    moe_arena_init(&doc->arena, 0);
    json_parser p = {
        .s = (const unsigned char *)(text ? text : ""),
        .len = len,
        .arena = &doc->arena,
        .err = err,
        .status = MOE_OK,
    };
    doc->root = parse_value(&p, 1);
    if (doc->root) {
        skip_ws(&p);
        if (p.pos != p.len)
            jp_fail(&p, "trailing characters after the JSON value");
    }
    free(p.items);
    free(p.mems);
    if (p.status != MOE_OK) {
        moe_json_doc_free(doc);
        return p.status;
    }
    *out = doc;
    return MOE_OK;
}

void moe_json_doc_free(moe_json_doc *doc)
{
    if (!doc)
        return;
    moe_arena_free(&doc->arena);
    free(doc);
}

const moe_json *moe_json_doc_root(const moe_json_doc *doc)
{
    return doc ? doc->root : NULL;
}

const moe_json *moe_json_get(const moe_json *obj, const char *key)
{
    if (!obj || obj->type != MOE_JSON_OBJECT || !key)
        return NULL;
    size_t klen = strlen(key);
    for (size_t i = obj->u.obj.n; i-- > 0;) {
        const moe_json_member *m = &obj->u.obj.members[i];
        if (m->key_len == klen && memcmp(m->key, key, klen) == 0)
            return m->value;
    }
    return NULL;
}

/* ---- shortest round-trip double formatting ----------------------------- */

size_t moe_json_format_double(double v, char *buf)
{
    if (isnan(v))
        return (size_t)snprintf(buf, MOE_JSON_DOUBLE_BUF, "nan");
    if (isinf(v))
        return (size_t)snprintf(buf, MOE_JSON_DOUBLE_BUF, v < 0 ? "-inf" : "inf");
    if (v == 0)
        return (size_t)snprintf(buf, MOE_JSON_DOUBLE_BUF, signbit(v) ? "-0.0" : "0.0");

    /* Fewest significant digits (1..17) that read back exactly. */
    char sci[48];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(sci, sizeof sci, "%.*e", prec - 1, v);
        /* %e may use the locale's decimal point; strtod then reads it back
         * with the same locale, so the round-trip check holds either way. */
        if (strtod(sci, NULL) == v)
            break;
    }
    /* Split "-d.ddde+XX" into sign, digits and exponent, locale-free. */
    const char *q = sci;
    bool neg = false;
    if (*q == '-') {
        neg = true;
        q++;
    }
    char digits[24];
    int nd = 0;
    while (*q && *q != 'e' && *q != 'E') {
        if (*q >= '0' && *q <= '9' && nd < 20)
            digits[nd++] = *q;
        q++;
    }
    int exp10 = (*q == 'e' || *q == 'E') ? atoi(q + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;

    char *o = buf;
    if (neg)
        *o++ = '-';
    int decpt = exp10 + 1; /* digits before the decimal point */
    if (decpt > 16 || decpt < -3) {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)nd - 1);
            o += nd - 1;
        }
        o += snprintf(o, 8, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    } else if (decpt <= 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -decpt; i++)
            *o++ = '0';
        memcpy(o, digits, (size_t)nd);
        o += nd;
    } else {
        for (int i = 0; i < decpt; i++)
            *o++ = i < nd ? digits[i] : '0';
        *o++ = '.';
        if (nd > decpt) {
            memcpy(o, digits + decpt, (size_t)(nd - decpt));
            o += nd - decpt;
        } else {
            *o++ = '0';
        }
    }
    *o = 0;
    return (size_t)(o - buf);
}

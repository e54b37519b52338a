/*
 * jsonguard.c — the incremental JSON validator behind JSON mode and the
 * span helpers of the tool-call parser (see jsonguard.h for the contract).
 *
 * The machine reads one byte per step and never looks back. Containers are
 * one bit each in a 64-bit stack (object or array), so the whole state fits
 * in a copyable 16-byte struct; every other state is a scalar: where we are
 * in a string (escape, \u digits, UTF-8 continuation bytes), in a number
 * (RFC 8259's number grammar as eight states) or in a literal. A number has
 * no closing byte: the byte after it ends it and is then read again as
 * structure, which is why a top-level number is "complete" without being
 * "closed".
 */
#include "jsonguard.h"

#include <string.h>

enum {
    ST_DEAD = 0,
    ST_START,          /* before the top-level value                     */
    ST_VALUE,          /* after ':' or an array's ','                    */
    ST_VALUE_OR_CLOSE, /* after '['                                      */
    ST_KEY_OR_CLOSE,   /* after '{'                                      */
    ST_KEY,            /* after an object's ','                          */
    ST_COLON,          /* after a key                                    */
    ST_AFTER,          /* after a value inside a container               */
    ST_DONE,           /* after the top-level value: whitespace only     */
    ST_STR,
    ST_STR_ESC,        /* after '\'                                      */
    ST_STR_HEX,        /* aux = \u digits read, aux2 = the first digit   */
    ST_STR_UTF8,       /* aux = continuation bytes left, aux2 = range    */
    ST_STR_LOW_BS,     /* a high surrogate was read: '\' must follow     */
    ST_STR_LOW_U,      /* ... then 'u'                                   */
    ST_NUM_MINUS,
    ST_NUM_ZERO,
    ST_NUM_INT,
    ST_NUM_DOT,
    ST_NUM_FRAC,
    ST_NUM_E,
    ST_NUM_ESIGN,
    ST_NUM_EXP,
    ST_LIT,            /* aux2 = literal id, aux = bytes matched         */
};

enum {
    F_KEY = 1,     /* the string being read is an object key            */
    F_LOW_REQ = 2, /* the \u escape being read must be a low surrogate  */
    F_HIGH = 4,    /* the \u escape being read is a high surrogate      */
};

/* The first continuation byte's range after a lead byte (UTF-8 table 3-7):
 * 0: 80..BF, 1: A0..BF (after E0), 2: 80..9F (ED), 3: 90..BF (F0),
 * 4: 80..8F (F4). Later continuation bytes are always 80..BF. */
static const uint8_t utf8_lo[5] = {0x80, 0xA0, 0x80, 0x90, 0x80};
static const uint8_t utf8_hi[5] = {0xBF, 0xBF, 0x9F, 0xBF, 0x8F};

static const char *const literals[3] = {"true", "false", "null"};

void svc_json_guard_init(svc_json_guard *g, bool object_only, unsigned max_ws)
{
    memset(g, 0, sizeof *g);
    g->state = ST_START;
    g->max_ws = (uint8_t)(max_ws > 255 ? 255 : max_ws);
    g->any_top = object_only ? 0 : 1;
}

static bool is_ws(unsigned c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int hex_value(unsigned c)
{
    if (c >= '0' && c <= '9')
        return (int)(c - '0');
    if (c >= 'a' && c <= 'f')
        return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F')
        return (int)(c - 'A' + 10);
    return -1;
}

static bool take_ws(svc_json_guard *g)
{
    if (g->max_ws && g->ws_run >= g->max_ws)
        return false;
    g->ws_run++;
    return true;
}

static bool value_done(svc_json_guard *g)
{
    g->state = g->depth ? ST_AFTER : ST_DONE;
    return true;
}

static bool open_container(svc_json_guard *g, bool object)
{
    if (g->depth >= SVC_JSON_GUARD_MAX_DEPTH)
        return false;
    if (object)
        g->stack |= (uint64_t)1 << g->depth;
    else
        g->stack &= ~((uint64_t)1 << g->depth);
    g->depth++;
    g->state = object ? ST_KEY_OR_CLOSE : ST_VALUE_OR_CLOSE;
    return true;
}

static bool close_container(svc_json_guard *g, unsigned c)
{
    if (g->depth == 0)
        return false;
    bool object = (g->stack >> (g->depth - 1)) & 1;
    if (object != (c == '}'))
        return false;
    g->depth--;
    return value_done(g);
}

static bool begin_value(svc_json_guard *g, unsigned c)
{
    switch (c) {
    case '{': return open_container(g, true);
    case '[': return open_container(g, false);
    case '"': g->state = ST_STR; g->flags = 0; return true;
    case '-': g->state = ST_NUM_MINUS; return true;
    case '0': g->state = ST_NUM_ZERO; return true;
    case 't': case 'f': case 'n':
        g->state = ST_LIT;
        g->aux2 = c == 't' ? 0 : c == 'f' ? 1 : 2;
        g->aux = 1;
        return true;
    default:
        if (c >= '1' && c <= '9') {
            g->state = ST_NUM_INT;
            return true;
        }
        return false;
    }
}

static bool string_byte(svc_json_guard *g, unsigned c)
{
    if (c == '"') {
        if (g->flags & F_KEY) {
            g->state = ST_COLON;
            return true;
        }
        return value_done(g);
    }
    if (c == '\\') {
        g->state = ST_STR_ESC;
        return true;
    }
    if (c < 0x20)
        return false;
    if (c < 0x80)
        return true;
    /* a lead byte: how many continuation bytes, and the first one's range */
    if (c >= 0xC2 && c <= 0xDF) {
        g->aux = 1, g->aux2 = 0;
    } else if (c >= 0xE0 && c <= 0xEF) {
        g->aux = 2, g->aux2 = c == 0xE0 ? 1 : c == 0xED ? 2 : 0;
    } else if (c >= 0xF0 && c <= 0xF4) {
        g->aux = 3, g->aux2 = c == 0xF0 ? 3 : c == 0xF4 ? 4 : 0;
    } else {
        return false;
    }
    g->state = ST_STR_UTF8;
    return true;
}

/* One digit of a \uXXXX escape. Surrogates are decided by the first two
 * digits: D8..DB is a high surrogate, DC..DF a low one. */
static bool hex_digit(svc_json_guard *g, unsigned c)
{
    int d = hex_value(c);
    if (d < 0)
        return false;
    bool low_req = g->flags & F_LOW_REQ;
    if (g->aux == 0) {
        if (low_req && d != 0xD)
            return false;
        g->aux2 = (uint8_t)d;
    } else if (g->aux == 1) {
        bool surrogate = g->aux2 == 0xD && d >= 8;
        bool low = surrogate && d >= 0xC;
        if (low_req != low)
            return false;
        if (surrogate && !low)
            g->flags |= F_HIGH;
    }
    if (++g->aux < 4)
        return true;
    if (g->flags & F_HIGH) {
        g->flags = (uint8_t)((g->flags & ~F_HIGH) | F_LOW_REQ);
        g->state = ST_STR_LOW_BS;
    } else {
        g->flags &= (uint8_t)~F_LOW_REQ;
        g->state = ST_STR;
    }
    return true;
}

static bool step(svc_json_guard *g, unsigned c);

/* The byte after a number that cannot continue it: the number is a whole
 * value, and the byte is read again as structure. */
static bool end_number(svc_json_guard *g, unsigned c)
{
    value_done(g);
    return step(g, c);
}

static bool step(svc_json_guard *g, unsigned c)
{
    bool ws = is_ws(c);
    if (!ws)
        g->ws_run = 0;
    switch (g->state) {
    case ST_START:
        if (ws)
            return take_ws(g);
        if (!g->any_top && c != '{')
            return false;
        return begin_value(g, c);
    case ST_VALUE:
        return ws ? take_ws(g) : begin_value(g, c);
    case ST_VALUE_OR_CLOSE:
        if (ws)
            return take_ws(g);
        return c == ']' ? close_container(g, c) : begin_value(g, c);
    case ST_KEY_OR_CLOSE:
        if (ws)
            return take_ws(g);
        if (c == '}')
            return close_container(g, c);
        /* a key follows, as after ',' */
        /* fall through */
    case ST_KEY:
        if (ws)
            return take_ws(g);
        if (c != '"')
            return false;
        g->state = ST_STR;
        g->flags = F_KEY;
        return true;
    case ST_COLON:
        if (ws)
            return take_ws(g);
        if (c != ':')
            return false;
        g->state = ST_VALUE;
        return true;
    case ST_AFTER:
        if (ws)
            return take_ws(g);
        if (c == ',') {
            bool object = (g->stack >> (g->depth - 1)) & 1;
            g->state = object ? ST_KEY : ST_VALUE;
            return true;
        }
        if (c == '}' || c == ']')
            return close_container(g, c);
        return false;
    case ST_DONE:
        return ws && take_ws(g);
    case ST_STR:
        return string_byte(g, c);
    case ST_STR_ESC:
        if (c == 'u') {
            g->state = ST_STR_HEX;
            g->aux = 0;
            return true;
        }
        if (!strchr("\"\\/bfnrt", (int)c) || c == 0)
            return false;
        g->state = ST_STR;
        return true;
    case ST_STR_HEX:
        return hex_digit(g, c);
    case ST_STR_LOW_BS:
        if (c != '\\')
            return false;
        g->state = ST_STR_LOW_U;
        return true;
    case ST_STR_LOW_U:
        if (c != 'u')
            return false;
        g->state = ST_STR_HEX;
        g->aux = 0;
        return true;
    case ST_STR_UTF8:
        if (c < utf8_lo[g->aux2] || c > utf8_hi[g->aux2])
            return false;
        g->aux2 = 0;
        if (--g->aux == 0)
            g->state = ST_STR;
        return true;
    case ST_NUM_MINUS:
        if (c == '0')
            g->state = ST_NUM_ZERO;
        else if (c >= '1' && c <= '9')
            g->state = ST_NUM_INT;
        else
            return false;
        return true;
    case ST_NUM_ZERO:
    case ST_NUM_INT:
        if (c >= '0' && c <= '9' && g->state == ST_NUM_INT)
            return true;
        if (c == '.')
            g->state = ST_NUM_DOT;
        else if (c == 'e' || c == 'E')
            g->state = ST_NUM_E;
        else
            return end_number(g, c);
        return true;
    case ST_NUM_DOT:
        if (c < '0' || c > '9')
            return false;
        g->state = ST_NUM_FRAC;
        return true;
    case ST_NUM_FRAC:
        if (c >= '0' && c <= '9')
            return true;
        if (c == 'e' || c == 'E') {
            g->state = ST_NUM_E;
            return true;
        }
        return end_number(g, c);
    case ST_NUM_E:
        if (c == '+' || c == '-') {
            g->state = ST_NUM_ESIGN;
            return true;
        }
        /* fall through */
    case ST_NUM_ESIGN:
        if (c < '0' || c > '9')
            return false;
        g->state = ST_NUM_EXP;
        return true;
    case ST_NUM_EXP:
        if (c >= '0' && c <= '9')
            return true;
        return end_number(g, c);
    case ST_LIT: {
        const char *lit = literals[g->aux2];
        if (c != (unsigned char)lit[g->aux])
            return false;
        if (lit[++g->aux] == 0)
            return value_done(g);
        return true;
    }
    default:
        return false;
    }
}

bool svc_json_guard_feed(svc_json_guard *g, const char *bytes, size_t len)
{
    for (size_t i = 0; i < len && g->state != ST_DEAD; i++)
        if (!step(g, (unsigned char)bytes[i]))
            g->state = ST_DEAD;
    return g->state != ST_DEAD;
}

static bool number_can_end(unsigned state)
{
    return state == ST_NUM_ZERO || state == ST_NUM_INT || state == ST_NUM_FRAC ||
           state == ST_NUM_EXP;
}

bool svc_json_guard_complete(const svc_json_guard *g)
{
    return g->state == ST_DONE || (g->depth == 0 && number_can_end(g->state));
}

bool svc_json_guard_alive(const svc_json_guard *g)
{
    return g->state != ST_DEAD;
}

bool svc_json_guard_closed(const svc_json_guard *g)
{
    return g->state == ST_DONE;
}

bool svc_json_guard_in_plain_string(const svc_json_guard *g)
{
    return g->state == ST_STR;
}

/* The next byte of the shortest completion (see the header). */
static unsigned completion_byte(const svc_json_guard *g)
{
    bool object = g->depth && ((g->stack >> (g->depth - 1)) & 1);
    switch (g->state) {
    case ST_START: return g->any_top ? '0' : '{';
    case ST_VALUE: return '0';
    case ST_VALUE_OR_CLOSE: return ']';
    case ST_KEY_OR_CLOSE: return '}';
    case ST_KEY: return '"';
    case ST_COLON: return ':';
    case ST_AFTER: return object ? '}' : ']';
    case ST_STR: return '"';
    case ST_STR_ESC: return 'n';
    case ST_STR_HEX:
        if (g->flags & F_LOW_REQ)
            return g->aux == 0 ? 'd' : g->aux == 1 ? 'c' : '0';
        return '0';
    case ST_STR_LOW_BS: return '\\';
    case ST_STR_LOW_U: return 'u';
    case ST_STR_UTF8: return utf8_lo[g->aux2];
    case ST_NUM_MINUS: case ST_NUM_DOT: case ST_NUM_E: case ST_NUM_ESIGN: return '0';
    case ST_NUM_ZERO: case ST_NUM_INT: case ST_NUM_FRAC: case ST_NUM_EXP:
        return object ? '}' : ']'; /* depth > 0 here: a top-level number is complete */
    case ST_LIT: return (unsigned char)literals[g->aux2][g->aux];
    default: return 0;
    }
}

size_t svc_json_guard_completion(const svc_json_guard *g, char *out, size_t cap)
{
    svc_json_guard t = *g;
    size_t n = 0;
    t.max_ws = 0; /* the completion writes no whitespace */
    while (t.state != ST_DEAD && !svc_json_guard_complete(&t) && n < 16 + 8 * SVC_JSON_GUARD_MAX_DEPTH) {
        unsigned b = completion_byte(&t);
        if (!step(&t, b))
            return 0;
        if (n < cap)
            out[n] = (char)b;
        n++;
    }
    return t.state == ST_DEAD ? 0 : n;
}

size_t svc_json_value_span(const char *s, size_t len)
{
    svc_json_guard g;
    svc_json_guard_init(&g, false, 0);
    for (size_t i = 0; i < len; i++) {
        /* a top-level number ends before the byte that ends it; inside a
         * container that byte is the container's own */
        bool top_number = g.depth == 0 && number_can_end(g.state);
        if (!step(&g, (unsigned char)s[i]))
            return top_number ? i : 0;
        if (g.state == ST_DONE)
            return top_number ? i : i + 1;
    }
    return svc_json_guard_complete(&g) ? len : 0;
}

static size_t skip_ws(const char *s, size_t len, size_t i)
{
    while (i < len && is_ws((unsigned char)s[i]))
        i++;
    return i;
}

bool svc_json_object_get(const char *s, size_t len, const char *key,
                         const char **val, size_t *val_len)
{
    size_t key_len = strlen(key);
    size_t i = skip_ws(s, len, 0);
    if (i >= len || s[i] != '{')
        return false;
    i = skip_ws(s, len, i + 1);
    if (i < len && s[i] == '}')
        return false;
    while (i < len) {
        if (s[i] != '"')
            return false;
        size_t kn = svc_json_value_span(s + i, len - i);
        if (kn == 0)
            return false;
        char kbuf[128];
        long kd = svc_json_string_decode(s + i, kn, kbuf, sizeof kbuf);
        bool match = kd >= 0 && (size_t)kd == key_len && key_len < sizeof kbuf &&
                     memcmp(kbuf, key, key_len) == 0;
        i = skip_ws(s, len, i + kn);
        if (i >= len || s[i] != ':')
            return false;
        i++;
        size_t vn = svc_json_value_span(s + i, len - i);
        if (vn == 0)
            return false;
        size_t v0 = skip_ws(s, len, i);
        if (match) {
            *val = s + v0;
            *val_len = i + vn - v0;
            return true;
        }
        i = skip_ws(s, len, i + vn);
        if (i >= len || s[i] != ',')
            return false;
        i = skip_ws(s, len, i + 1);
    }
    return false;
}

static size_t put_utf8(char *out, size_t cap, size_t n, uint32_t cp)
{
    char b[4];
    size_t k;
    if (cp < 0x80) {
        b[0] = (char)cp, k = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6)), b[1] = (char)(0x80 | (cp & 0x3F)), k = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12)), b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F)), k = 3;
    } else {
        b[0] = (char)(0xF0 | (cp >> 18)), b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), b[3] = (char)(0x80 | (cp & 0x3F)), k = 4;
    }
    for (size_t j = 0; j < k; j++)
        if (n + j < cap)
            out[n + j] = b[j];
    return n + k;
}

static uint32_t hex4(const char *p)
{
    uint32_t v = 0;
    for (int j = 0; j < 4; j++)
        v = v * 16 + (uint32_t)hex_value((unsigned char)p[j]);
    return v;
}

long svc_json_string_decode(const char *s, size_t len, char *out, size_t cap)
{
    /* validate first, so the decoder below may trust every escape */
    if (len < 2 || s[0] != '"' || svc_json_value_span(s, len) != len)
        return -1;
    size_t n = 0;
    for (size_t i = 1; i + 1 < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c != '\\') {
            if (n < cap)
                out[n] = (char)c;
            n++;
            continue;
        }
        char e = s[++i];
        uint32_t cp;
        switch (e) {
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            cp = hex4(s + i + 1);
            i += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) { /* the guard saw the low half */
                cp = 0x10000 + ((cp - 0xD800) << 10) + (hex4(s + i + 3) - 0xDC00);
                i += 6;
            }
            break;
        default: cp = (unsigned char)e; break;
        }
        n = put_utf8(out, cap, n, cp);
    }
    if (n < cap)
        out[n] = 0;
    return (long)n;
}

/* Length of the well-formed UTF-8 sequence at s (1..4), 0 if ill-formed. */
static size_t utf8_seq(const unsigned char *s, size_t len)
{
    unsigned c = s[0];
    size_t k;
    unsigned r;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        k = 2, r = 0;
    else if (c >= 0xE0 && c <= 0xEF)
        k = 3, r = c == 0xE0 ? 1 : c == 0xED ? 2 : 0;
    else if (c >= 0xF0 && c <= 0xF4)
        k = 4, r = c == 0xF0 ? 3 : c == 0xF4 ? 4 : 0;
    else
        return 0;
    if (len < k || s[1] < utf8_lo[r] || s[1] > utf8_hi[r])
        return 0;
    for (size_t j = 2; j < k; j++)
        if (s[j] < 0x80 || s[j] > 0xBF)
            return 0;
    return k;
}

size_t svc_json_string_encode(const char *s, size_t len, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
#define PUT(ch) do { if (n < cap) out[n] = (char)(ch); n++; } while (0)
    PUT('"');
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            PUT('\\');
            PUT(c);
            i++;
        } else if (c < 0x20) {
            const char *short_esc = c == '\n' ? "n" : c == '\t' ? "t" : c == '\r' ? "r" :
                                    c == '\b' ? "b" : c == '\f' ? "f" : NULL;
            PUT('\\');
            if (short_esc) {
                PUT(short_esc[0]);
            } else {
                PUT('u');
                PUT('0');
                PUT('0');
                PUT(hex[c >> 4]);
                PUT(hex[c & 15]);
            }
            i++;
        } else {
            size_t k = utf8_seq((const unsigned char *)s + i, len - i);
            if (k == 0) {
                PUT(0xEF);
                PUT(0xBF);
                PUT(0xBD);
                i++;
            } else {
                for (size_t j = 0; j < k; j++)
                    PUT(s[i + j]);
                i += k;
            }
        }
    }
    PUT('"');
#undef PUT
    return n;
}

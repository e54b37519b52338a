/*
 * jinja-lex.c — template source to tokens, with Jinja2's whitespace rules.
 *
 * The prompt a model sees depends on every space and newline, so this file
 * follows Python Jinja2's lexer exactly as transformers configures it:
 *   - "\r\n" and "\r" become "\n"; one trailing newline is dropped;
 *   - `{%-`/`{{-`/`{#-` strip all whitespace before the tag, `-%}`/`-}}`/
 *     `-#}` all whitespace after it;
 *   - trim_blocks: a block or comment tag eats the one "\n" right after it
 *     (not `}}`), unless written `+%}`;
 *   - lstrip_blocks: spaces and tabs between the start of a line and a
 *     block or comment tag are dropped, unless written `{%+`;
 *   - inside brackets `}}` and `%}` are operators, not tag ends;
 *   - string literals unescape like Python's unicode-escape codec.
 * Comments vanish here; {% raw %}...{% endraw %} becomes one text token.
 * Every token carries its line:column for error messages.
 */
#include "jinja.h"

#include "json.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

typedef struct lexer {
    moe_arena  *arena;
    const char *s;      /* normalised source */
    size_t      len;
    size_t      pos;
    bool        line_starting; /* last tag match ended with "\n" */
    /* line/column cursor (columns count code points, 1-based) */
    size_t      loc_pos;
    uint32_t    loc_line, loc_col;
    jj_token   *toks;   /* malloc'd while lexing, copied to the arena */
    size_t      n, cap;
    moe_err    *err;
} lexer;

static void locate(lexer *lx, size_t pos, uint32_t *line, uint32_t *col)
{
    if (pos < lx->loc_pos) {
        lx->loc_pos = 0;
        lx->loc_line = 1;
        lx->loc_col = 1;
    }
    while (lx->loc_pos < pos && lx->loc_pos < lx->len) {
        unsigned char c = (unsigned char)lx->s[lx->loc_pos++];
        if (c == '\n') {
            lx->loc_line++;
            lx->loc_col = 1;
        } else if ((c & 0xC0) != 0x80) {
            lx->loc_col++;
        }
    }
    *line = lx->loc_line;
    *col = lx->loc_col;
}

static moe_status lex_fail(lexer *lx, size_t pos, moe_status st, const char *what)
{
    uint32_t line, col;
    locate(lx, pos, &line, &col);
    return moe_fail(lx->err, st, "template line %u:%u: %s", line, col, what);
}

static jj_token *push(lexer *lx, jj_tok_kind kind, size_t pos)
{
    if (lx->n == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 256;
        jj_token *t = realloc(lx->toks, cap * sizeof *t);
        if (!t)
            return NULL;
        lx->toks = t;
        lx->cap = cap;
    }
    jj_token *t = &lx->toks[lx->n++];
    memset(t, 0, sizeof *t);
    t->kind = (uint8_t)kind;
    locate(lx, pos, &t->line, &t->col);
    return t;
}

static bool starts(const lexer *lx, size_t pos, const char *lit)
{
    size_t n = strlen(lit);
    return pos <= lx->len && lx->len - pos >= n && memcmp(lx->s + pos, lit, n) == 0;
}

/* Python's \s: one whitespace code point at pos; returns its byte length
 * or 0. */
static size_t space_at(const lexer *lx, size_t pos)
{
    if (pos >= lx->len)
        return 0;
    unsigned char c = (unsigned char)lx->s[pos];
    if (c < 0x80)
        return (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F)) ? 1 : 0;
    size_t adv;
    uint32_t cp = jj_utf8_decode(lx->s + pos, lx->len - pos, &adv);
    return jj_is_space(cp) ? adv : 0;
}

static size_t skip_spaces(const lexer *lx, size_t pos, bool *ended_nl)
{
    size_t k;
    while ((k = space_at(lx, pos)) > 0) {
        if (ended_nl)
            *ended_nl = lx->s[pos] == '\n';
        pos += k;
    }
    return pos;
}

/* Emits text [a, b) after applying the left-hand whitespace control of the
 * tag that follows it: sign '-' strips all trailing whitespace; otherwise,
 * for block and comment tags with lstrip_blocks, spaces between the last
 * newline (or a line start) and the tag go. */
static moe_status emit_text(lexer *lx, size_t a, size_t b, char sign, bool lstrip_ok)
{
    if (sign == '-') {
        size_t end = a, p = a;
        while (p < b) {
            size_t k = space_at(lx, p);
            if (k) {
                p += k;
            } else {
                size_t adv;
                jj_utf8_decode(lx->s + p, b - p, &adv);
                p += adv;
                end = p;
            }
        }
        b = end;
    } else if (sign != '+' && lstrip_ok) {
        size_t l_pos = a;
        for (size_t p = b; p > a; p--) {
            if (lx->s[p - 1] == '\n') {
                l_pos = p;
                break;
            }
        }
        if (l_pos > a || lx->line_starting) {
            size_t p = l_pos, k;
            while (p < b && (k = space_at(lx, p)) > 0)
                p += k;
            if (p == b && b > l_pos)
                b = l_pos;
        }
    }
    if (b > a) {
        jj_token *t = push(lx, JT_TEXT, a);
        if (!t)
            return moe_fail(lx->err, MOE_ERR_NOMEM, "template: out of memory");
        t->s = lx->s + a;
        t->n = b - a;
    }
    return MOE_OK;
}

/* ---- literals ------------------------------------------------------------ */

static int hexdig(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static size_t utf8_put(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A quoted string at lx->pos. Escapes follow Python's unicode-escape:
 * unknown ones keep their backslash; \N{...} is not supported. */
static moe_status lex_string(lexer *lx)
{
    size_t start = lx->pos;
    char q = lx->s[lx->pos++];
    size_t p = lx->pos;
    while (p < lx->len && lx->s[p] != q) {
        if (lx->s[p] == '\\')
            p++;
        p++;
    }
    if (p >= lx->len)
        return lex_fail(lx, start, MOE_ERR_FORMAT, "unterminated string literal");
    size_t end = p;
    /* Decoded text is never longer than the source (\U........ is 10 bytes
     * for 4, \x.. 4 for at most 2). */
    char *buf = moe_arena_alloc(lx->arena, end - lx->pos + 1);
    if (!buf)
        return moe_fail(lx->err, MOE_ERR_NOMEM, "template: out of memory");
    size_t n = 0;
    p = lx->pos;
    while (p < end) {
        char c = lx->s[p];
        if (c != '\\') {
            buf[n++] = c;
            p++;
            continue;
        }
        char e = lx->s[p + 1];
        p += 2;
        uint32_t cp;
        int digits = 0;
        switch (e) {
        case '\n': continue;
        case '\\': buf[n++] = '\\'; continue;
        case '\'': buf[n++] = '\''; continue;
        case '"': buf[n++] = '"'; continue;
        case 'a': buf[n++] = '\a'; continue;
        case 'b': buf[n++] = '\b'; continue;
        case 'f': buf[n++] = '\f'; continue;
        case 'n': buf[n++] = '\n'; continue;
        case 'r': buf[n++] = '\r'; continue;
        case 't': buf[n++] = '\t'; continue;
        case 'v': buf[n++] = '\v'; continue;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        case 'N':
            return lex_fail(lx, p - 2, MOE_ERR_UNSUPPORTED,
                            "unsupported construct: \\N{...} escape in a string literal");
        default:
            if (e >= '0' && e <= '7') {
                cp = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && p < end && lx->s[p] >= '0' && lx->s[p] <= '7'; k++)
                    cp = cp * 8 + (uint32_t)(lx->s[p++] - '0');
                n += utf8_put(buf + n, cp);
                continue;
            }
            /* Unknown escape: Python keeps it verbatim. */
            buf[n++] = '\\';
            p--;
            continue;
        }
        cp = 0;
        for (int k = 0; k < digits; k++) {
            int h = p < end ? hexdig(lx->s[p]) : -1;
            if (h < 0)
                return lex_fail(lx, p, MOE_ERR_FORMAT, "truncated \\x, \\u or \\U escape");
            cp = cp * 16 + (uint32_t)h;
            p++;
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return lex_fail(lx, p, MOE_ERR_FORMAT, "escape is not a valid Unicode scalar value");
        n += utf8_put(buf + n, cp);
    }
    jj_token *t = push(lx, JT_STRING, start);
    if (!t)
        return moe_fail(lx->err, MOE_ERR_NOMEM, "template: out of memory");
    t->s = buf;
    t->n = n;
    lx->pos = end + 1;
    return MOE_OK;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_name_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}

static bool is_name_char(unsigned char c)
{
    return is_name_start(c) || is_digit((char)c);
}

/* Digits with single '_' separators, as Jinja2 allows; appends them to
 * `out` (without underscores). Returns the new position. */
static size_t scan_digits(const lexer *lx, size_t p, char *out, size_t *n, size_t cap)
{
    while (p < lx->len) {
        if (is_digit(lx->s[p])) {
            if (*n + 1 < cap)
                out[(*n)++] = lx->s[p];
            else
                (*n) = cap; /* marks "too long" */
            p++;
        } else if (lx->s[p] == '_' && p + 1 < lx->len && is_digit(lx->s[p + 1]) &&
                   p > 0 && is_digit(lx->s[p - 1])) {
            p++;
        } else {
            break;
        }
    }
    return p;
}

static moe_status lex_number(lexer *lx, bool after_dot)
{
    size_t start = lx->pos;
    char txt[400];
    size_t n = 0;
    const size_t cap = sizeof txt;

    /* 0x / 0o / 0b integers */
    if (lx->s[start] == '0' && start + 2 < lx->len + 1 && start + 1 < lx->len) {
        char k = lx->s[start + 1];
        int base = (k == 'x' || k == 'X') ? 16 : (k == 'o' || k == 'O') ? 8 : (k == 'b' || k == 'B') ? 2 : 0;
        if (base) {
            size_t p = start + 2;
            uint64_t v = 0;
            bool any = false;
            while (p < lx->len) {
                char c = lx->s[p];
                if (c == '_') {
                    p++;
                    continue;
                }
                int d = hexdig(c);
                if (d < 0 || d >= base)
                    break;
                if (v > (uint64_t)INT64_MAX / (uint64_t)base)
                    return lex_fail(lx, start, MOE_ERR_UNSUPPORTED, "integer literal does not fit 64 bits");
                v = v * (uint64_t)base + (uint64_t)d;
                if (v > (uint64_t)INT64_MAX)
                    return lex_fail(lx, start, MOE_ERR_UNSUPPORTED, "integer literal does not fit 64 bits");
                any = true;
                p++;
            }
            if (!any)
                return lex_fail(lx, start, MOE_ERR_FORMAT, "malformed integer literal");
            jj_token *t = push(lx, JT_INT, start);
            if (!t)
                return moe_fail(lx->err, MOE_ERR_NOMEM, "template: out of memory");
            t->i = (int64_t)v;
            lx->pos = p;
            return MOE_OK;
        }
    }

    size_t p = scan_digits(lx, start, txt, &n, cap);
    bool is_float = false;
    if (!after_dot) {
        size_t q = p;
        size_t n2 = n;
        if (q + 1 < lx->len && lx->s[q] == '.' && is_digit(lx->s[q + 1])) {
            if (n2 + 1 < cap)
                txt[n2++] = '.';
            q = scan_digits(lx, q + 1, txt, &n2, cap);
            is_float = true;
            p = q;
            n = n2;
        }
        if (p < lx->len && (lx->s[p] == 'e' || lx->s[p] == 'E')) {
            size_t r = p + 1;
            size_t n3 = n;
            if (n3 + 1 < cap)
                txt[n3++] = 'e';
            if (r < lx->len && (lx->s[r] == '+' || lx->s[r] == '-')) {
                if (n3 + 1 < cap)
                    txt[n3++] = lx->s[r];
                r++;
            }
            if (r < lx->len && is_digit(lx->s[r])) {
                p = scan_digits(lx, r, txt, &n3, cap);
                n = n3;
                is_float = true;
            }
        }
    }
    if (n >= cap)
        return lex_fail(lx, start, MOE_ERR_UNSUPPORTED, "number literal too long");
    txt[n] = 0;
    jj_token *t = push(lx, is_float ? JT_FLOAT : JT_INT, start);
    if (!t)
        return moe_fail(lx->err, MOE_ERR_NOMEM, "template: out of memory");
    if (is_float) {
        if (!moe_json_strtod(txt, n, &t->f))
            return lex_fail(lx, start, MOE_ERR_FORMAT, "malformed number literal");
    } else {
        if (n > 1 && txt[0] == '0')
            return lex_fail(lx, start, MOE_ERR_FORMAT, "integer literal with a leading zero");
        int64_t v = 0;
        for (size_t i = 0; i < n; i++) {
            int d = txt[i] - '0';
            if (v > (INT64_MAX - d) / 10)
                return lex_fail(lx, start, MOE_ERR_UNSUPPORTED, "integer literal does not fit 64 bits");
            v = v * 10 + d;
        }
        t->i = v;
    }
    lx->pos = p;
    return MOE_OK;
}

/* ---- tags ---------------------------------------------------------------- */

static const struct {
    const char *text;
    jj_op       op;
} k_ops[] = {
    {"//", JO_FLOORDIV}, {"**", JO_POW}, {"==", JO_EQ}, {"!=", JO_NE},
    {"<=", JO_LE}, {">=", JO_GE},
    {"+", JO_ADD}, {"-", JO_SUB}, {"*", JO_MUL}, {"/", JO_DIV}, {"%", JO_MOD},
    {"~", JO_TILDE}, {"<", JO_LT}, {">", JO_GT}, {"=", JO_ASSIGN}, {".", JO_DOT},
    {",", JO_COMMA}, {":", JO_COLON}, {"|", JO_PIPE}, {";", JO_SEMICOLON},
    {"(", JO_LPAREN}, {")", JO_RPAREN}, {"[", JO_LBRACKET}, {"]", JO_RBRACKET},
    {"{", JO_LBRACE}, {"}", JO_RBRACE},
};

/* Lexes the inside of a {% %} (block) or {{ }} tag up to and including its
 * end, applying the end's whitespace control. */
static moe_status lex_tag(lexer *lx, bool block, size_t tag_pos)
{
    int balance = 0;
    for (;;) {
        lx->pos = skip_spaces(lx, lx->pos, NULL);
        if (lx->pos >= lx->len)
            return lex_fail(lx, tag_pos, MOE_ERR_FORMAT,
                            block ? "unexpected end of template: '{%' is never closed with '%}'"
                                  : "unexpected end of template: '{{' is never closed with '}}'");
        size_t here = lx->pos;
        if (balance == 0) {
            const char *end = block ? "%}" : "}}";
            if (lx->s[here] == '-' && starts(lx, here + 1, end)) {
                if (!push(lx, block ? JT_BLOCK_END : JT_VAR_END, here))
                    return moe_fail(lx->err, MOE_ERR_NOMEM, "template: out of memory");
                bool nl = false;
                lx->pos = skip_spaces(lx, here + 3, &nl);
                lx->line_starting = nl;
                return MOE_OK;
            }
            if (block && lx->s[here] == '+' && starts(lx, here + 1, end)) {
                if (!push(lx, JT_BLOCK_END, here))
                    return moe_fail(lx->err, MOE_ERR_NOMEM, "template: out of memory");
                lx->pos = here + 3;
                lx->line_starting = false;
                return MOE_OK;
            }
            if (starts(lx, here, end)) {
                if (!push(lx, block ? JT_BLOCK_END : JT_VAR_END, here))
                    return moe_fail(lx->err, MOE_ERR_NOMEM, "template: out of memory");
                lx->pos = here + 2;
                lx->line_starting = false;
                if (block && lx->pos < lx->len && lx->s[lx->pos] == '\n') { /* trim_blocks */
                    lx->pos++;
                    lx->line_starting = true;
                }
                return MOE_OK;
            }
        }
        char c = lx->s[here];
        moe_status st;
        if (is_digit(c)) {
            bool after_dot = here > 0 && lx->s[here - 1] == '.';
            if ((st = lex_number(lx, after_dot)) != MOE_OK)
                return st;
            continue;
        }
        if (is_name_start((unsigned char)c)) {
            size_t p = here;
            while (p < lx->len && is_name_char((unsigned char)lx->s[p]))
                p++;
            jj_token *t = push(lx, JT_NAME, here);
            if (!t)
                return moe_fail(lx->err, MOE_ERR_NOMEM, "template: out of memory");
            t->s = lx->s + here;
            t->n = p - here;
            lx->pos = p;
            continue;
        }
        if (c == '\'' || c == '"') {
            if ((st = lex_string(lx)) != MOE_OK)
                return st;
            continue;
        }
        size_t k;
        for (k = 0; k < sizeof k_ops / sizeof k_ops[0]; k++)
            if (starts(lx, here, k_ops[k].text))
                break;
        if (k == sizeof k_ops / sizeof k_ops[0])
            return lex_fail(lx, here, MOE_ERR_FORMAT, "unexpected character in tag");
        jj_op op = k_ops[k].op;
        if (op == JO_LPAREN || op == JO_LBRACKET || op == JO_LBRACE) {
            balance++;
        } else if (op == JO_RPAREN || op == JO_RBRACKET || op == JO_RBRACE) {
            if (balance == 0)
                return lex_fail(lx, here, MOE_ERR_FORMAT, "unbalanced closing bracket");
            balance--;
        }
        jj_token *t = push(lx, JT_OP, here);
        if (!t)
            return moe_fail(lx->err, MOE_ERR_NOMEM, "template: out of memory");
        t->op = (uint8_t)op;
        lx->pos = here + strlen(k_ops[k].text);
    }
}

/* If the block tag at `pos` (just after "{%" and its sign) is `raw`,
 * returns the position after its closing "%}"; else 0. */
static size_t raw_begin_end(const lexer *lx, size_t pos, bool *nl)
{
    size_t p = skip_spaces(lx, pos, NULL);
    if (!starts(lx, p, "raw") || (p + 3 < lx->len && is_name_char((unsigned char)lx->s[p + 3])))
        return 0;
    p = skip_spaces(lx, p + 3, NULL);
    *nl = false;
    if (starts(lx, p, "-%}"))
        return skip_spaces(lx, p + 3, nl);
    if (starts(lx, p, "%}"))
        return p + 2; /* Jinja2 applies no trim_blocks after {% raw %} */
    return 0;
}

/* Finds {% endraw %} from `pos`; emits the raw text and moves past it. */
static moe_status lex_raw(lexer *lx, size_t pos, size_t tag_pos)
{
    for (size_t p = pos; p + 1 < lx->len; p++) {
        if (lx->s[p] != '{' || lx->s[p + 1] != '%')
            continue;
        size_t q = p + 2;
        char sign = 0;
        if (q < lx->len && (lx->s[q] == '-' || lx->s[q] == '+'))
            sign = lx->s[q++];
        q = skip_spaces(lx, q, NULL);
        if (!starts(lx, q, "endraw"))
            continue;
        q = skip_spaces(lx, q + 6, NULL);
        bool nl = false;
        size_t after;
        if (starts(lx, q, "+%}")) {
            after = q + 3;
        } else if (starts(lx, q, "-%}")) {
            after = skip_spaces(lx, q + 3, &nl);
        } else if (starts(lx, q, "%}")) {
            after = q + 2;
            if (after < lx->len && lx->s[after] == '\n') {
                after++;
                nl = true;
            }
        } else {
            continue;
        }
        moe_status st = emit_text(lx, pos, p, sign, true);
        if (st != MOE_OK)
            return st;
        lx->pos = after;
        lx->line_starting = nl;
        return MOE_OK;
    }
    return lex_fail(lx, tag_pos, MOE_ERR_FORMAT, "'{% raw %}' is never closed with '{% endraw %}'");
}

/* Skips a comment whose "{#" is at tag_pos and body starts at pos. */
static moe_status lex_comment(lexer *lx, size_t pos, size_t tag_pos)
{
    for (size_t p = pos; p + 1 < lx->len; p++) {
        if (lx->s[p] != '#' || lx->s[p + 1] != '}')
            continue;
        char sign = p > pos ? lx->s[p - 1] : 0;
        size_t after = p + 2;
        bool nl = false;
        if (sign == '-') {
            after = skip_spaces(lx, after, &nl);
        } else if (sign != '+' && after < lx->len && lx->s[after] == '\n') {
            after++;
            nl = true;
        }
        lx->pos = after;
        lx->line_starting = nl;
        return MOE_OK;
    }
    return lex_fail(lx, tag_pos, MOE_ERR_FORMAT, "comment '{#' is never closed with '#}'");
}

static moe_status lex_all(lexer *lx)
{
    lx->line_starting = true;
    while (lx->pos < lx->len) {
        /* Next tag opener. */
        size_t p = lx->pos;
        while (p + 1 < lx->len && !(lx->s[p] == '{' &&
                                    (lx->s[p + 1] == '{' || lx->s[p + 1] == '%' || lx->s[p + 1] == '#')))
            p++;
        if (p + 1 >= lx->len) {
            /* Only text remains. */
            moe_status st = emit_text(lx, lx->pos, lx->len, 0, false);
            lx->pos = lx->len;
            return st;
        }
        char kind = lx->s[p + 1];
        size_t body = p + 2;
        char sign = 0;
        if (body < lx->len && (lx->s[body] == '-' || lx->s[body] == '+'))
            sign = lx->s[body++];
        moe_status st = emit_text(lx, lx->pos, p, sign, kind != '{');
        if (st != MOE_OK)
            return st;
        if (kind == '#') {
            st = lex_comment(lx, body, p);
        } else if (kind == '%') {
            bool nl = false;
            size_t raw_end = raw_begin_end(lx, body, &nl);
            if (raw_end) {
                lx->line_starting = nl;
                st = lex_raw(lx, raw_end, p);
            } else {
                if (!push(lx, JT_BLOCK_BEGIN, p))
                    return moe_fail(lx->err, MOE_ERR_NOMEM, "template: out of memory");
                lx->pos = body;
                st = lex_tag(lx, true, p);
            }
        } else {
            if (!push(lx, JT_VAR_BEGIN, p))
                return moe_fail(lx->err, MOE_ERR_NOMEM, "template: out of memory");
            lx->pos = body;
            st = lex_tag(lx, false, p);
        }
        if (st != MOE_OK)
            return st;
    }
    return MOE_OK;
}

moe_status jj_lex(moe_arena *arena, const char *src, size_t len,
                  jj_token **out, size_t *n_out, moe_err *err)
{
    *out = NULL;
    *n_out = 0;
    /* Normalise newlines into an arena copy, then drop one trailing "\n". */
    char *s = moe_arena_alloc(arena, len + 1);
    if (!s)
        return moe_fail(err, MOE_ERR_NOMEM, "template: out of memory");
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        char c = src[i];
        if (c == '\r') {
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
            c = '\n';
        }
        s[n++] = c;
    }
    if (n > 0 && s[n - 1] == '\n')
        n--;
    s[n] = 0;

    lexer lx = {
        .arena = arena, .s = s, .len = n, .loc_line = 1, .loc_col = 1, .err = err,
    };
    moe_status st = lex_all(&lx);
    if (st == MOE_OK) {
        jj_token *t = push(&lx, JT_EOF, lx.len);
        if (!t) {
            st = moe_fail(err, MOE_ERR_NOMEM, "template: out of memory");
        } else {
            *out = moe_arena_alloc(arena, lx.n * sizeof(jj_token));
            if (!*out)
                st = moe_fail(err, MOE_ERR_NOMEM, "template: out of memory");
            else {
                memcpy(*out, lx.toks, lx.n * sizeof(jj_token));
                *n_out = lx.n;
            }
        }
    }
    free(lx.toks);
    return st;
}

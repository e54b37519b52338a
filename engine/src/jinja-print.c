/*
 * jinja-print.c — turning template values into text: the output buffer,
 * str() (what {{ v }} prints), repr() (how items print inside a list or
 * dict) and JSON (the `tojson` filter).
 *
 * These follow Python, because Python rendered the prompts a model was
 * trained on: None/True/False print capitalised, floats print as repr()
 * does (1.0, 0.1, 1e-05), a list prints as ['a', 1], and tojson is
 * json.dumps with ensure_ascii=False and Python's separators (", " and
 * ": ", or "," when indenting), as transformers' own tojson filter does.
 * Every recursive walk is depth-limited; every buffer respects the output
 * limit.
 */
#include "jinja.h"

#include "json.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PRINT_MAX_DEPTH 256

moe_status jj_buf_append(jj_ctx *ctx, jj_buf *b, const char *p, size_t n)
{
    if (n == 0)
        return MOE_OK;
    if (n > ctx->lim.max_output_bytes || b->n > ctx->lim.max_output_bytes - n)
        return jj_fail(ctx, MOE_ERR_RANGE, "rendered text exceeds the %zu-byte output limit",
                       ctx->lim.max_output_bytes);
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        char *q = moe_arena_grow(ctx->arena, b->p, b->cap, cap);
        if (!q)
            return jj_oom(ctx);
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    return MOE_OK;
}

static moe_status put(jj_ctx *ctx, jj_buf *b, const char *lit)
{
    return jj_buf_append(ctx, b, lit, strlen(lit));
}

jj_value jj_buf_value(jj_buf *b)
{
    return jj_str(b->p ? b->p : "", b->n);
}

moe_status jj_buf_put_cp(jj_ctx *ctx, jj_buf *b, uint32_t cp)
{
    char o[4];
    size_t n;
    if (cp >= 0xDC80 && cp <= 0xDCFF) { /* an invalid input byte, kept as is */
        o[0] = (char)(cp - 0xDC00);
        n = 1;
    } else if (cp < 0x80) {
        o[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        o[0] = (char)(0xF0 | (cp >> 18));
        o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return jj_buf_append(ctx, b, o, n);
}

static moe_status put_int(jj_ctx *ctx, jj_buf *b, int64_t i)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)i);
    return jj_buf_append(ctx, b, tmp, (size_t)n);
}

static moe_status put_float(jj_ctx *ctx, jj_buf *b, double f)
{
    char tmp[MOE_JSON_DOUBLE_BUF];
    size_t n = moe_json_format_double(f, tmp);
    return jj_buf_append(ctx, b, tmp, n);
}

/* Python's str.isprintable, approximately: control characters, format
 * characters and line/paragraph separators are escaped in repr(). */
static bool printable(uint32_t c)
{
    if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD)
        return false;
    if ((c >= 0x200B && c <= 0x200F) || (c >= 0x2028 && c <= 0x202E) || (c >= 0x2060 && c <= 0x206F) ||
        c == 0xFEFF || (c >= 0xD800 && c <= 0xDFFF) || (c >= 0xE000 && c <= 0xF8FF) ||
        (c >= 0xFFF0 && c <= 0xFFFF) || c >= 0xF0000)
        return false;
    if (jj_is_space(c) && c != ' ')
        return false;
    return true;
}

static moe_status put_str_repr(jj_ctx *ctx, jj_buf *b, const char *p, size_t n)
{
    bool has_sq = memchr(p, '\'', n) != NULL, has_dq = memchr(p, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    moe_status st = jj_buf_append(ctx, b, &q, 1);
    size_t i = 0;
    while (st == MOE_OK && i < n) {
        size_t adv;
        uint32_t c = jj_utf8_decode(p + i, n - i, &adv);
        char tmp[16];
        if (c == (uint32_t)q || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            st = jj_buf_append(ctx, b, tmp, 2);
        } else if (c == '\n') {
            st = put(ctx, b, "\\n");
        } else if (c == '\r') {
            st = put(ctx, b, "\\r");
        } else if (c == '\t') {
            st = put(ctx, b, "\\t");
        } else if (c >= 0xDC80 && c <= 0xDCFF) {
            snprintf(tmp, sizeof tmp, "\\x%02x", (unsigned)(c - 0xDC00));
            st = put(ctx, b, tmp);
        } else if (!printable(c)) {
            if (c < 0x100)
                snprintf(tmp, sizeof tmp, "\\x%02x", (unsigned)c);
            else if (c < 0x10000)
                snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)c);
            else
                snprintf(tmp, sizeof tmp, "\\U%08x", (unsigned)c);
            st = put(ctx, b, tmp);
        } else {
            st = jj_buf_append(ctx, b, p + i, adv);
        }
        i += adv;
    }
    if (st == MOE_OK)
        st = jj_buf_append(ctx, b, &q, 1);
    return st;
}

static moe_status put_container(jj_ctx *ctx, jj_buf *b, jj_value v, int depth);

moe_status jj_buf_put_repr(jj_ctx *ctx, jj_buf *b, jj_value v, int depth)
{
    switch (v.type) {
    case JJ_UNDEF: return put(ctx, b, "Undefined");
    case JJ_STR: return put_str_repr(ctx, b, v.u.s.p, v.u.s.n);
    default: break;
    }
    if ((v.type == JJ_LIST && !(v.flags & JJ_F_GEN)) || v.type == JJ_DICT)
        return put_container(ctx, b, v, depth);
    return jj_buf_put_str(ctx, b, v);
}

static moe_status put_container(jj_ctx *ctx, jj_buf *b, jj_value v, int depth)
{
    if (v.type == JJ_LIST && (v.flags & JJ_F_RANGE))
        return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: printing a range() object (use |list)");
    if (depth > PRINT_MAX_DEPTH)
        return jj_fail(ctx, MOE_ERR_RANGE, "value nested more than %d levels deep", PRINT_MAX_DEPTH);
    moe_status st;
    if (v.type == JJ_LIST) {
        bool tuple = (v.flags & JJ_F_TUPLE) != 0;
        if ((st = put(ctx, b, tuple ? "(" : "[")) != MOE_OK)
            return st;
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i && (st = put(ctx, b, ", ")) != MOE_OK)
                return st;
            if ((st = jj_buf_put_repr(ctx, b, v.u.l->items[i], depth + 1)) != MOE_OK)
                return st;
        }
        if (tuple && v.u.l->n == 1 && (st = put(ctx, b, ",")) != MOE_OK)
            return st;
        return put(ctx, b, tuple ? ")" : "]");
    }
    if ((st = put(ctx, b, "{")) != MOE_OK)
        return st;
    for (size_t i = 0; i < v.u.d->n; i++) {
        if (i && (st = put(ctx, b, ", ")) != MOE_OK)
            return st;
        if ((st = jj_buf_put_repr(ctx, b, v.u.d->keys[i], depth + 1)) != MOE_OK ||
            (st = put(ctx, b, ": ")) != MOE_OK ||
            (st = jj_buf_put_repr(ctx, b, v.u.d->vals[i], depth + 1)) != MOE_OK)
            return st;
    }
    return put(ctx, b, "}");
}

moe_status jj_buf_put_str(jj_ctx *ctx, jj_buf *b, jj_value v)
{
    switch (v.type) {
    case JJ_UNDEF: return MOE_OK;
    case JJ_NONE: return put(ctx, b, "None");
    case JJ_BOOL: return put(ctx, b, v.u.b ? "True" : "False");
    case JJ_INT: return put_int(ctx, b, v.u.i);
    case JJ_FLOAT: return put_float(ctx, b, v.u.f);
    case JJ_STR: return jj_buf_append(ctx, b, v.u.s.p, v.u.s.n);
    case JJ_LIST:
        if (v.flags & JJ_F_GEN)
            return put(ctx, b, "<generator object>");
        return put_container(ctx, b, v, 0);
    case JJ_DICT: return put_container(ctx, b, v, 0);
    case JJ_NS: {
        moe_status st = put(ctx, b, "<Namespace ");
        if (st == MOE_OK)
            st = put_container(ctx, b, (jj_value){.type = JJ_DICT, .u.d = v.u.d}, 0);
        return st == MOE_OK ? put(ctx, b, ">") : st;
    }
    case JJ_FUNC:
        if (v.u.fn->kind == JF_MACRO && v.u.fn->node) {
            moe_status st = put(ctx, b, "<Macro '");
            if (st == MOE_OK)
                st = jj_buf_append(ctx, b, v.u.fn->node->s, v.u.fn->node->n);
            return st == MOE_OK ? put(ctx, b, "'>") : st;
        }
        return put(ctx, b, "<function>");
    case JJ_LOOP: {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "<LoopContext %zu/%zu>", v.u.loop->i + 1, v.u.loop->n);
        return put(ctx, b, tmp);
    }
    }
    return MOE_OK;
}

moe_status jj_to_str(jj_ctx *ctx, jj_value v, jj_value *out)
{
    if (v.type == JJ_STR) {
        *out = v;
        return MOE_OK;
    }
    if (v.type == JJ_UNDEF) {
        *out = jj_str("", 0);
        return MOE_OK;
    }
    jj_buf b = {0};
    moe_status st = jj_buf_put_str(ctx, &b, v);
    if (st != MOE_OK)
        return st;
    *out = jj_buf_value(&b);
    return MOE_OK;
}

moe_status jj_html_escape(jj_ctx *ctx, jj_value v, jj_value *out)
{
    if (v.type == JJ_STR && (v.flags & JJ_F_SAFE)) {
        *out = v;
        return MOE_OK;
    }
    jj_value s;
    moe_status st = jj_to_str(ctx, v, &s);
    if (st != MOE_OK)
        return st;
    jj_buf b = {0};
    size_t run = 0;
    for (size_t i = 0; i < s.u.s.n && st == MOE_OK; i++) {
        const char *rep = NULL;
        switch (s.u.s.p[i]) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&#34;"; break;
        case '\'': rep = "&#39;"; break;
        default: break;
        }
        if (rep) {
            st = jj_buf_append(ctx, &b, s.u.s.p + run, i - run);
            if (st == MOE_OK)
                st = put(ctx, &b, rep);
            run = i + 1;
        }
    }
    if (st == MOE_OK)
        st = jj_buf_append(ctx, &b, s.u.s.p + run, s.u.s.n - run);
    *out = jj_buf_value(&b);
    out->flags = JJ_F_SAFE;
    return st;
}

/* ---- JSON ------------------------------------------------------------------ */

static moe_status json_string(jj_ctx *ctx, jj_buf *b, const char *p, size_t n, bool ascii)
{
    moe_status st = put(ctx, b, "\"");
    size_t i = 0, run = 0; /* bytes [run, i) are pending verbatim */
    while (st == MOE_OK && i < n) {
        unsigned char c = (unsigned char)p[i];
        const char *esc = NULL;
        char tmp[16];
        size_t adv = 1;
        if (c == '"')
            esc = "\\\"";
        else if (c == '\\')
            esc = "\\\\";
        else if (c == '\n')
            esc = "\\n";
        else if (c == '\r')
            esc = "\\r";
        else if (c == '\t')
            esc = "\\t";
        else if (c == '\b')
            esc = "\\b";
        else if (c == '\f')
            esc = "\\f";
        else if (c < 0x20 || (ascii && c == 0x7F)) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            esc = tmp;
        } else if (c >= 0x80 && ascii) {
            uint32_t cp = jj_utf8_decode(p + i, n - i, &adv);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (unsigned)(cp >> 10),
                         0xDC00 + (unsigned)(cp & 0x3FF));
            } else {
                snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)cp);
            }
            esc = tmp;
        }
        if (esc) {
            st = jj_buf_append(ctx, b, p + run, i - run);
            if (st == MOE_OK)
                st = put(ctx, b, esc);
            i += adv;
            run = i;
        } else {
            i++;
        }
    }
    if (st == MOE_OK)
        st = jj_buf_append(ctx, b, p + run, i - run);
    return st == MOE_OK ? put(ctx, b, "\"") : st;
}

static moe_status json_newline(jj_ctx *ctx, jj_buf *b, const jj_json_opts *o, int level)
{
    moe_status st = put(ctx, b, "\n");
    for (int k = 0; st == MOE_OK && k < level * o->indent; k++)
        st = put(ctx, b, " ");
    return st;
}

static moe_status json_number(jj_ctx *ctx, jj_buf *b, jj_value v)
{
    if (v.type == JJ_FLOAT) {
        if (isnan(v.u.f))
            return put(ctx, b, "NaN");
        if (isinf(v.u.f))
            return put(ctx, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        return put_float(ctx, b, v.u.f);
    }
    if (v.type == JJ_BOOL)
        return put(ctx, b, v.u.b ? "true" : "false");
    return put_int(ctx, b, v.u.i);
}

/* A dict key as json.dumps writes it: strings as they are, numbers, bools
 * and None converted to their JSON text. */
static moe_status json_key(jj_ctx *ctx, jj_buf *b, jj_value k, const jj_json_opts *o)
{
    if (k.type == JJ_STR)
        return json_string(ctx, b, k.u.s.p, k.u.s.n, o->ensure_ascii);
    jj_buf tmp = {0};
    moe_status st;
    if (k.type == JJ_NONE)
        st = put(ctx, &tmp, "null");
    else if (k.type == JJ_INT || k.type == JJ_FLOAT || k.type == JJ_BOOL)
        st = json_number(ctx, &tmp, k);
    else
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "tojson: keys must be str, int, float, bool or None, not %s",
                       jj_type_name(k));
    if (st != MOE_OK)
        return st;
    return json_string(ctx, b, tmp.p, tmp.n, false);
}

static int key_order(const void *x, const void *y)
{
    const jj_value *a = x, *b = y;
    /* Non-string keys sort after strings; they are rare in templates. */
    if (a->type != JJ_STR || b->type != JJ_STR)
        return (a->type != JJ_STR) - (b->type != JJ_STR);
    size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
    int c = memcmp(a->u.s.p, b->u.s.p, n);
    if (c)
        return c;
    return a->u.s.n < b->u.s.n ? -1 : a->u.s.n > b->u.s.n;
}

static moe_status json_value(jj_ctx *ctx, jj_buf *b, jj_value v, const jj_json_opts *o, int level)
{
    if (level > PRINT_MAX_DEPTH)
        return jj_fail(ctx, MOE_ERR_RANGE, "tojson: value nested more than %d levels deep", PRINT_MAX_DEPTH);
    moe_status st = jj_step(ctx, 1);
    if (st != MOE_OK)
        return st;
    const char *isep = o->item_sep ? o->item_sep : (o->indent >= 0 ? "," : ", ");
    size_t isep_n = o->item_sep ? o->item_sep_n : strlen(isep);
    const char *ksep = o->key_sep ? o->key_sep : ": ";
    size_t ksep_n = o->key_sep ? o->key_sep_n : 2;
    switch (v.type) {
    case JJ_NONE:
        return put(ctx, b, "null");
    case JJ_BOOL:
    case JJ_INT:
    case JJ_FLOAT:
        return json_number(ctx, b, v);
    case JJ_STR:
        return json_string(ctx, b, v.u.s.p, v.u.s.n, o->ensure_ascii);
    case JJ_LIST: {
        if (v.flags & (JJ_F_GEN | JJ_F_RANGE))
            break;
        if (v.u.l->n == 0)
            return put(ctx, b, "[]");
        if ((st = put(ctx, b, "[")) != MOE_OK)
            return st;
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i && (st = jj_buf_append(ctx, b, isep, isep_n)) != MOE_OK)
                return st;
            if (o->indent >= 0 && (st = json_newline(ctx, b, o, level + 1)) != MOE_OK)
                return st;
            if ((st = json_value(ctx, b, v.u.l->items[i], o, level + 1)) != MOE_OK)
                return st;
        }
        if (o->indent >= 0 && (st = json_newline(ctx, b, o, level)) != MOE_OK)
            return st;
        return put(ctx, b, "]");
    }
    case JJ_DICT: {
        const jj_dict *d = v.u.d;
        if (d->n == 0)
            return put(ctx, b, "{}");
        size_t *order = jj_alloc(ctx, d->n * sizeof(size_t));
        if (!order)
            return ctx->status;
        for (size_t i = 0; i < d->n; i++)
            order[i] = i;
        if (o->sort_keys) {
            /* Sort a copy of the keys, then map back by position. */
            jj_value *keys = jj_alloc(ctx, d->n * sizeof(jj_value));
            if (!keys)
                return ctx->status;
            for (size_t i = 0; i < d->n; i++) {
                keys[i] = d->keys[i];
                keys[i].flags = 0;
            }
            qsort(keys, d->n, sizeof(jj_value), key_order);
            for (size_t i = 0; i < d->n; i++) {
                long j = jj_dict_find(d, keys[i]);
                order[i] = j >= 0 ? (size_t)j : i;
            }
        }
        if ((st = put(ctx, b, "{")) != MOE_OK)
            return st;
        for (size_t k = 0; k < d->n; k++) {
            size_t i = order[k];
            if (k && (st = jj_buf_append(ctx, b, isep, isep_n)) != MOE_OK)
                return st;
            if (o->indent >= 0 && (st = json_newline(ctx, b, o, level + 1)) != MOE_OK)
                return st;
            if ((st = json_key(ctx, b, d->keys[i], o)) != MOE_OK ||
                (st = jj_buf_append(ctx, b, ksep, ksep_n)) != MOE_OK ||
                (st = json_value(ctx, b, d->vals[i], o, level + 1)) != MOE_OK)
                return st;
        }
        if (o->indent >= 0 && (st = json_newline(ctx, b, o, level)) != MOE_OK)
            return st;
        return put(ctx, b, "}");
    }
    default:
        break;
    }
    return jj_fail(ctx, MOE_ERR_INVALID_ARG, "tojson: Object of type %s is not JSON serializable",
                   jj_type_name(v));
}

moe_status jj_to_json(jj_ctx *ctx, jj_value v, const jj_json_opts *opts, jj_value *out)
{
    jj_buf b = {0};
    moe_status st = json_value(ctx, &b, v, opts, 0);
    if (st != MOE_OK)
        return st;
    *out = jj_buf_value(&b);
    return MOE_OK;
}

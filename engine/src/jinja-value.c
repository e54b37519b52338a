/*
 * jinja-value.c — template values: constructors, lists and dicts,
 * truthiness, Python equality and ordering, UTF-8 helpers, iteration,
 * len(), and attribute/item/slice access with Jinja2's rules.
 *
 * Values are small structs passed by copy; strings, lists and dicts point
 * into the render arena (or the template's, for literals) and are never
 * freed individually. Lists and dicts are mutable and shared, as in
 * Python, so `ns.items.append(x)` is seen by every holder.
 *
 * Access follows Jinja2's sandboxed getattr/getitem: `d.key` tries a dict
 * method of that name first, then the key; `d['key']` tries the key first;
 * a missing key or index gives Undefined; touching an attribute of
 * Undefined is an error ("'x' is undefined").
 */
#include "jinja.h"

#include "util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- context helpers ----------------------------------------------------- */

moe_status jj_fail(jj_ctx *ctx, moe_status status, const char *fmt, ...)
{
    if (ctx->status != MOE_OK)
        return ctx->status;
    char msg[420];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctx->status = moe_fail(ctx->err, status, "template line %u:%u: %s", ctx->line, ctx->col, msg);
    return ctx->status;
}

moe_status jj_oom(jj_ctx *ctx)
{
    if (ctx->arena->over_limit)
        return jj_fail(ctx, MOE_ERR_RANGE, "rendering needs more than the %zu MiB memory limit",
                       ctx->lim.max_memory_bytes >> 20);
    return jj_fail(ctx, MOE_ERR_NOMEM, "out of memory");
}

moe_status jj_step(jj_ctx *ctx, uint64_t n)
{
    ctx->steps += n;
    if (ctx->steps > ctx->lim.max_steps)
        return jj_fail(ctx, MOE_ERR_RANGE, "rendering takes more than %llu steps (runaway loop?)",
                       (unsigned long long)ctx->lim.max_steps);
    return MOE_OK;
}

void *jj_alloc(jj_ctx *ctx, size_t size)
{
    void *p = moe_arena_alloc(ctx->arena, size);
    if (!p)
        jj_oom(ctx);
    return p;
}

/* ---- constructors -------------------------------------------------------- */

jj_value jj_undef(const char *name, size_t n)
{
    jj_value v = {.type = JJ_UNDEF};
    v.u.s.p = name;
    v.u.s.n = name ? n : 0;
    return v;
}

jj_value jj_none(void)
{
    jj_value v = {.type = JJ_NONE};
    return v;
}

jj_value jj_bool(bool b)
{
    jj_value v = {.type = JJ_BOOL};
    v.u.b = b;
    return v;
}

jj_value jj_int(int64_t i)
{
    jj_value v = {.type = JJ_INT};
    v.u.i = i;
    return v;
}

jj_value jj_float(double f)
{
    jj_value v = {.type = JJ_FLOAT};
    v.u.f = f;
    return v;
}

jj_value jj_str(const char *p, size_t n)
{
    jj_value v = {.type = JJ_STR};
    v.u.s.p = p ? p : "";
    v.u.s.n = p ? n : 0;
    return v;
}

jj_value jj_new_list(jj_ctx *ctx, size_t cap)
{
    jj_value v = {.type = JJ_UNDEF};
    jj_list *l = jj_alloc(ctx, sizeof *l);
    if (!l)
        return v;
    memset(l, 0, sizeof *l);
    if (cap) {
        l->items = jj_alloc(ctx, cap * sizeof(jj_value));
        if (!l->items)
            return v;
        l->cap = cap;
    }
    v.type = JJ_LIST;
    v.u.l = l;
    return v;
}

jj_value jj_new_dict(jj_ctx *ctx)
{
    jj_value v = {.type = JJ_UNDEF};
    jj_dict *d = jj_alloc(ctx, sizeof *d);
    if (!d)
        return v;
    memset(d, 0, sizeof *d);
    v.type = JJ_DICT;
    v.u.d = d;
    return v;
}

jj_value jj_new_ns(jj_ctx *ctx)
{
    jj_value v = jj_new_dict(ctx);
    if (v.type == JJ_DICT)
        v.type = JJ_NS;
    return v;
}

moe_status jj_list_push(jj_ctx *ctx, jj_list *l, jj_value v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        jj_value *q = moe_arena_grow(ctx->arena, l->items, l->cap * sizeof(jj_value), cap * sizeof(jj_value));
        if (!q)
            return jj_oom(ctx);
        l->items = q;
        l->cap = cap;
    }
    l->items[l->n++] = v;
    return MOE_OK;
}

/* ---- dicts ------------------------------------------------------------- */

#define DICT_LINEAR_MAX 8

static bool hashable(jj_value k, uint64_t *h)
{
    uint64_t x;
    switch (k.type) {
    case JJ_STR: {
        x = 1469598103934665603ull;
        for (size_t i = 0; i < k.u.s.n; i++) {
            x ^= (unsigned char)k.u.s.p[i];
            x *= 1099511628211ull;
        }
        break;
    }
    case JJ_BOOL:
        x = (uint64_t)k.u.b * 0x9E3779B97F4A7C15ull;
        break;
    case JJ_INT:
        x = (uint64_t)k.u.i * 0x9E3779B97F4A7C15ull;
        break;
    case JJ_FLOAT:
        /* 1.0 and 1 are the same key in Python. */
        if (k.u.f == floor(k.u.f) && fabs(k.u.f) < 9.2e18)
            x = (uint64_t)(int64_t)k.u.f * 0x9E3779B97F4A7C15ull;
        else
            x = (uint64_t)(k.u.f * 1e6) ^ 0xABCDEFull;
        break;
    case JJ_NONE:
        x = 0x12345678ull;
        break;
    case JJ_LIST:
        if (!(k.flags & JJ_F_TUPLE))
            return false;
        x = 0x7777ull ^ k.u.l->n;
        for (size_t i = 0; i < k.u.l->n; i++) {
            uint64_t hi;
            if (!hashable(k.u.l->items[i], &hi))
                return false;
            x = (x ^ hi) * 1099511628211ull;
        }
        break;
    default:
        return false;
    }
    *h = x ^ (x >> 29);
    return true;
}

static moe_status dict_reindex(jj_ctx *ctx, jj_dict *d)
{
    size_t n_slots = 16;
    while (n_slots < d->n * 2 + 2)
        n_slots *= 2;
    uint32_t *slots = moe_arena_calloc(ctx->arena, n_slots, sizeof *slots);
    if (!slots)
        return jj_oom(ctx);
    for (size_t i = 0; i < d->n; i++) {
        uint64_t h;
        if (!hashable(d->keys[i], &h))
            continue;
        size_t s = (size_t)h & (n_slots - 1);
        while (slots[s])
            s = (s + 1) & (n_slots - 1);
        slots[s] = (uint32_t)(i + 1);
    }
    d->slots = slots;
    d->n_slots = n_slots;
    return MOE_OK;
}

long jj_dict_find(const jj_dict *d, jj_value key)
{
    uint64_t h;
    if (d->n_slots && hashable(key, &h)) {
        size_t s = (size_t)h & (d->n_slots - 1);
        while (d->slots[s]) {
            size_t i = d->slots[s] - 1;
            if (jj_equal(d->keys[i], key))
                return (long)i;
            s = (s + 1) & (d->n_slots - 1);
        }
        return -1;
    }
    for (size_t i = 0; i < d->n; i++)
        if (jj_equal(d->keys[i], key))
            return (long)i;
    return -1;
}

long jj_dict_find_str(const jj_dict *d, const char *k, size_t kn)
{
    if (d->n_slots)
        return jj_dict_find(d, jj_str(k, kn));
    for (size_t i = 0; i < d->n; i++) {
        const jj_value *key = &d->keys[i];
        if (key->type == JJ_STR && key->u.s.n == kn && memcmp(key->u.s.p, k, kn) == 0)
            return (long)i;
    }
    return -1;
}

moe_status jj_dict_set(jj_ctx *ctx, jj_dict *d, jj_value key, jj_value v)
{
    uint64_t h;
    if (!hashable(key, &h))
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "unhashable dict key of type '%s'", jj_type_name(key));
    long i = jj_dict_find(d, key);
    if (i >= 0) {
        d->vals[i] = v;
        return MOE_OK;
    }
    if (d->n >= UINT32_MAX - 1)
        return jj_fail(ctx, MOE_ERR_RANGE, "dict too large");
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jj_value *k2 = moe_arena_grow(ctx->arena, d->keys, d->cap * sizeof(jj_value), cap * sizeof(jj_value));
        if (!k2)
            return jj_oom(ctx);
        d->keys = k2;
        jj_value *v2 = moe_arena_grow(ctx->arena, d->vals, d->cap * sizeof(jj_value), cap * sizeof(jj_value));
        if (!v2)
            return jj_oom(ctx);
        d->vals = v2;
        d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n] = v;
    d->n++;
    if (d->n > DICT_LINEAR_MAX) {
        if (!d->n_slots || d->n * 2 + 2 > d->n_slots)
            return dict_reindex(ctx, d);
        size_t s = (size_t)h & (d->n_slots - 1);
        while (d->slots[s])
            s = (s + 1) & (d->n_slots - 1);
        d->slots[s] = (uint32_t)d->n;
    }
    return MOE_OK;
}

moe_status jj_dict_set_str(jj_ctx *ctx, jj_dict *d, const char *k, size_t kn, jj_value v)
{
    return jj_dict_set(ctx, d, jj_str(k, kn), v);
}

moe_status jj_dict_remove(jj_ctx *ctx, jj_dict *d, size_t idx)
{
    if (idx >= d->n)
        return MOE_OK;
    memmove(d->keys + idx, d->keys + idx + 1, (d->n - idx - 1) * sizeof(jj_value));
    memmove(d->vals + idx, d->vals + idx + 1, (d->n - idx - 1) * sizeof(jj_value));
    d->n--;
    if (d->n_slots)
        return dict_reindex(ctx, d);
    return MOE_OK;
}

/* ---- truth, types, equality, order ------------------------------------- */

bool jj_truthy(jj_value v)
{
    switch (v.type) {
    case JJ_UNDEF:
    case JJ_NONE: return false;
    case JJ_BOOL: return v.u.b;
    case JJ_INT: return v.u.i != 0;
    case JJ_FLOAT: return v.u.f != 0;
    case JJ_STR: return v.u.s.n != 0;
    case JJ_LIST: return (v.flags & JJ_F_GEN) || v.u.l->n != 0;
    case JJ_DICT: return v.u.d->n != 0;
    default: return true;
    }
}

const char *jj_type_name(jj_value v)
{
    switch (v.type) {
    case JJ_UNDEF: return "Undefined";
    case JJ_NONE: return "NoneType";
    case JJ_BOOL: return "bool";
    case JJ_INT: return "int";
    case JJ_FLOAT: return "float";
    case JJ_STR: return "str";
    case JJ_LIST:
        return (v.flags & JJ_F_GEN) ? "generator" : (v.flags & JJ_F_RANGE) ? "range"
                                  : (v.flags & JJ_F_TUPLE) ? "tuple" : "list";
    case JJ_DICT: return "dict";
    case JJ_NS: return "Namespace";
    case JJ_FUNC: return "function";
    case JJ_LOOP: return "LoopContext";
    }
    return "?";
}

bool jj_is_str(jj_value v, const char *lit)
{
    size_t n = strlen(lit);
    return v.type == JJ_STR && v.u.s.n == n && memcmp(v.u.s.p, lit, n) == 0;
}

static bool is_number(jj_value v)
{
    return v.type == JJ_BOOL || v.type == JJ_INT || v.type == JJ_FLOAT;
}

static double num_f(jj_value v)
{
    return v.type == JJ_FLOAT ? v.u.f : v.type == JJ_INT ? (double)v.u.i : (double)v.u.b;
}

static int64_t num_i(jj_value v)
{
    return v.type == JJ_INT ? v.u.i : (int64_t)v.u.b;
}

static bool equal_depth(jj_value a, jj_value b, int depth)
{
    if (depth > 256)
        return false;
    if (is_number(a) && is_number(b)) {
        if (a.type == JJ_FLOAT || b.type == JJ_FLOAT)
            return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a.type != b.type)
        return false;
    switch (a.type) {
    case JJ_UNDEF:
    case JJ_NONE:
        return true;
    case JJ_STR:
        return a.u.s.n == b.u.s.n && memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0;
    case JJ_LIST:
        if ((a.flags & JJ_F_GEN) || (b.flags & JJ_F_GEN))
            return a.u.l == b.u.l;
        if ((a.flags & (JJ_F_TUPLE | JJ_F_RANGE)) != (b.flags & (JJ_F_TUPLE | JJ_F_RANGE)) || a.u.l->n != b.u.l->n)
            return false;
        if (a.u.l == b.u.l)
            return true;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal_depth(a.u.l->items[i], b.u.l->items[i], depth + 1))
                return false;
        return true;
    case JJ_DICT:
        if (a.u.d == b.u.d)
            return true;
        if (a.u.d->n != b.u.d->n)
            return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            long j = jj_dict_find(b.u.d, a.u.d->keys[i]);
            if (j < 0 || !equal_depth(a.u.d->vals[i], b.u.d->vals[j], depth + 1))
                return false;
        }
        return true;
    case JJ_NS:
        return a.u.d == b.u.d;
    case JJ_FUNC:
        return a.u.fn == b.u.fn;
    case JJ_LOOP:
        return a.u.loop == b.u.loop;
    }
    return false;
}

bool jj_equal(jj_value a, jj_value b)
{
    return equal_depth(a, b, 0);
}

static int cmp_str(jj_value a, jj_value b, bool fold_case)
{
    if (!fold_case) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int c = memcmp(a.u.s.p, b.u.s.p, n);
        if (c)
            return c < 0 ? -1 : 1;
        return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n ? 1 : 0;
    }
    size_t i = 0, j = 0;
    while (i < a.u.s.n && j < b.u.s.n) {
        size_t da, db;
        uint32_t ca = jj_lower_cp(jj_utf8_decode(a.u.s.p + i, a.u.s.n - i, &da));
        uint32_t cb = jj_lower_cp(jj_utf8_decode(b.u.s.p + j, b.u.s.n - j, &db));
        if (ca != cb)
            return ca < cb ? -1 : 1;
        i += da;
        j += db;
    }
    return (i < a.u.s.n) ? 1 : (j < b.u.s.n) ? -1 : 0;
}

static moe_status compare_depth(jj_ctx *ctx, jj_value a, jj_value b, bool fold_case, int *out, int depth)
{
    if (depth > 256)
        return jj_fail(ctx, MOE_ERR_RANGE, "comparison nested too deeply");
    if (is_number(a) && is_number(b)) {
        if (a.type == JJ_FLOAT || b.type == JJ_FLOAT) {
            double x = num_f(a), y = num_f(b);
            *out = x < y ? -1 : x > y ? 1 : 0;
        } else {
            int64_t x = num_i(a), y = num_i(b);
            *out = x < y ? -1 : x > y ? 1 : 0;
        }
        return MOE_OK;
    }
    if (a.type == JJ_STR && b.type == JJ_STR) {
        *out = cmp_str(a, b, fold_case);
        return MOE_OK;
    }
    if (a.type == JJ_LIST && b.type == JJ_LIST && (a.flags & JJ_F_TUPLE) == (b.flags & JJ_F_TUPLE)) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (jj_equal(a.u.l->items[i], b.u.l->items[i]))
                continue;
            return compare_depth(ctx, a.u.l->items[i], b.u.l->items[i], fold_case, out, depth + 1);
        }
        *out = a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n ? 1 : 0;
        return MOE_OK;
    }
    return jj_fail(ctx, MOE_ERR_INVALID_ARG, "'<' not supported between instances of '%s' and '%s'",
                   jj_type_name(a), jj_type_name(b));
}

moe_status jj_compare(jj_ctx *ctx, jj_value a, jj_value b, bool fold_case, int *out)
{
    return compare_depth(ctx, a, b, fold_case, out, 0);
}

/* ---- UTF-8 --------------------------------------------------------------- */

uint32_t jj_utf8_decode(const char *p, size_t n, size_t *adv)
{
    const unsigned char *s = (const unsigned char *)p;
    unsigned char c = s[0];
    *adv = 1;
    if (c < 0x80)
        return c;
    size_t len;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1F;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0F;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07;
        min = 0x10000;
    } else {
        return 0xDC00u + c; /* invalid byte: carried through as itself */
    }
    if (n < len)
        return 0xDC00u + c;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0xDC00u + c;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0xDC00u + c;
    *adv = len;
    return cp;
}

size_t jj_utf8_len(const char *p, size_t n)
{
    size_t count = 0, i = 0;
    while (i < n) {
        size_t adv = 1;
        if ((unsigned char)p[i] >= 0x80)
            jj_utf8_decode(p + i, n - i, &adv);
        i += adv;
        count++;
    }
    return count;
}

size_t jj_utf8_offset(const char *p, size_t n, size_t k)
{
    size_t i = 0;
    while (k > 0 && i < n) {
        size_t adv = 1;
        if ((unsigned char)p[i] >= 0x80)
            jj_utf8_decode(p + i, n - i, &adv);
        i += adv;
        k--;
    }
    return i;
}

bool jj_is_space(uint32_t cp)
{
    return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F) || cp == 0x85 ||
           cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

uint32_t jj_upper_cp(uint32_t c)
{
    if (c >= 'a' && c <= 'z')
        return c - 32;
    if (c < 0x80)
        return c;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7))
        return c - 32;
    if (c == 0xFF)
        return 0x178;
    if (c == 0xB5)
        return 0x39C;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
        bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_upper)
            return (c % 2 == 0) ? c - 1 : c;
        return (c % 2 == 1) ? c - 1 : c;
    }
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2)
        return c - 32;
    if (c == 0x3C2)
        return 0x3A3;
    if (c >= 0x430 && c <= 0x44F)
        return c - 32;
    if (c >= 0x450 && c <= 0x45F)
        return c - 80;
    return c;
}

uint32_t jj_lower_cp(uint32_t c)
{
    if (c >= 'A' && c <= 'Z')
        return c + 32;
    if (c < 0x80)
        return c;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7)
        return c + 32;
    if (c == 0x178)
        return 0xFF;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
        bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_upper)
            return (c % 2 == 1) ? c + 1 : c;
        return (c % 2 == 0) ? c + 1 : c;
    }
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2)
        return c + 32;
    if (c >= 0x410 && c <= 0x42F)
        return c + 32;
    if (c >= 0x400 && c <= 0x40F)
        return c + 80;
    return c;
}

bool jj_is_alnum_cp(uint32_t c)
{
    if (c < 0x80)
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (c >= 0xDC80 && c <= 0xDCFF)
        return false;
    /* Beyond ASCII: letters of the scripts above, CJK and most others are
     * word characters; punctuation blocks and spaces are not. */
    if (jj_is_space(c) || (c >= 0x2000 && c <= 0x206F) || (c >= 0x3000 && c <= 0x303F) ||
        (c >= 0xFF00 && c <= 0xFF0F) || c == 0xD7 || c == 0xF7 || (c >= 0xA1 && c <= 0xBF))
        return false;
    return true;
}

/* ---- iteration and length -------------------------------------------------- */

moe_status jj_iterate(jj_ctx *ctx, jj_value v, jj_value **items, size_t *n)
{
    static jj_value empty;
    switch (v.type) {
    case JJ_UNDEF:
        *items = &empty;
        *n = 0;
        return MOE_OK;
    case JJ_LIST:
        *items = v.u.l->items ? v.u.l->items : &empty;
        *n = v.u.l->n;
        return MOE_OK;
    case JJ_DICT:
        *items = v.u.d->keys ? v.u.d->keys : &empty;
        *n = v.u.d->n;
        return MOE_OK;
    case JJ_STR: {
        size_t count = jj_utf8_len(v.u.s.p, v.u.s.n);
        jj_value *arr = count ? jj_alloc(ctx, count * sizeof(jj_value)) : &empty;
        if (!arr)
            return ctx->status;
        size_t i = 0;
        for (size_t k = 0; k < count; k++) {
            size_t adv = 1;
            if ((unsigned char)v.u.s.p[i] >= 0x80)
                jj_utf8_decode(v.u.s.p + i, v.u.s.n - i, &adv);
            arr[k] = jj_str(v.u.s.p + i, adv);
            i += adv;
        }
        *items = arr;
        *n = count;
        return jj_step(ctx, count);
    }
    default:
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "'%s' object is not iterable", jj_type_name(v));
    }
}

moe_status jj_length(jj_ctx *ctx, jj_value v, int64_t *out)
{
    switch (v.type) {
    case JJ_UNDEF: *out = 0; return MOE_OK;
    case JJ_STR: *out = (int64_t)jj_utf8_len(v.u.s.p, v.u.s.n); return MOE_OK;
    case JJ_LIST:
        if (v.flags & JJ_F_GEN)
            break;
        *out = (int64_t)v.u.l->n;
        return MOE_OK;
    case JJ_DICT: *out = (int64_t)v.u.d->n; return MOE_OK;
    default:
        break;
    }
    return jj_fail(ctx, MOE_ERR_INVALID_ARG, "object of type '%s' has no len()", jj_type_name(v));
}

/* ---- access ---------------------------------------------------------------- */

static moe_status undefined_access(jj_ctx *ctx, jj_value obj, const char *what, size_t n)
{
    if (obj.u.s.p)
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "'%.*s' is undefined (reading '%.*s' of it)",
                       (int)(obj.u.s.n > 80 ? 80 : obj.u.s.n), obj.u.s.p, (int)(n > 80 ? 80 : n), what);
    return jj_fail(ctx, MOE_ERR_INVALID_ARG, "cannot read '%.*s' of an undefined value",
                   (int)(n > 80 ? 80 : n), what);
}

static moe_status bound_method(jj_ctx *ctx, jj_value obj, const char *name, size_t n, jj_value *out)
{
    jj_func *fn = jj_alloc(ctx, sizeof *fn);
    if (!fn)
        return ctx->status;
    memset(fn, 0, sizeof *fn);
    fn->kind = JF_METHOD;
    fn->self = obj;
    fn->name = name;
    fn->name_len = n;
    out->type = JJ_FUNC;
    out->flags = 0;
    out->u.fn = fn;
    return MOE_OK;
}

static moe_status loop_attr(jj_ctx *ctx, const jj_loop *lp, const char *name, size_t n, jj_value *out)
{
#define IS(lit) (n == sizeof(lit) - 1 && memcmp(name, lit, n) == 0)
    int64_t len = (int64_t)lp->n, i = (int64_t)lp->i;
    if (IS("index"))
        *out = jj_int(i + 1);
    else if (IS("index0"))
        *out = jj_int(i);
    else if (IS("revindex"))
        *out = jj_int(len - i);
    else if (IS("revindex0"))
        *out = jj_int(len - i - 1);
    else if (IS("first"))
        *out = jj_bool(i == 0);
    else if (IS("last"))
        *out = jj_bool(i == len - 1);
    else if (IS("length"))
        *out = jj_int(len);
    else if (IS("depth"))
        *out = jj_int(1);
    else if (IS("depth0"))
        *out = jj_int(0);
    else if (IS("previtem"))
        *out = i > 0 ? lp->items[i - 1] : jj_undef("previtem", 8);
    else if (IS("nextitem"))
        *out = i + 1 < len ? lp->items[i + 1] : jj_undef("nextitem", 8);
    else if (IS("cycle") || IS("changed"))
        return bound_method(ctx, (jj_value){.type = JJ_LOOP, .u.loop = (jj_loop *)lp}, name, n, out);
    else
        *out = jj_undef(name, n);
    return MOE_OK;
#undef IS
}

moe_status jj_getattr(jj_ctx *ctx, jj_value obj, const char *name, size_t n, jj_value *out)
{
    long i;
    switch (obj.type) {
    case JJ_UNDEF:
        return undefined_access(ctx, obj, name, n);
    case JJ_DICT:
        if (jj_has_method(obj, name, n))
            return bound_method(ctx, obj, name, n, out);
        i = jj_dict_find_str(obj.u.d, name, n);
        *out = i >= 0 ? obj.u.d->vals[i] : jj_undef(name, n);
        return MOE_OK;
    case JJ_NS:
        i = jj_dict_find_str(obj.u.d, name, n);
        *out = i >= 0 ? obj.u.d->vals[i] : jj_undef(name, n);
        return MOE_OK;
    case JJ_LOOP:
        return loop_attr(ctx, obj.u.loop, name, n, out);
    case JJ_STR:
    case JJ_LIST:
        if (jj_has_method(obj, name, n))
            return bound_method(ctx, obj, name, n, out);
        *out = jj_undef(name, n);
        return MOE_OK;
    default:
        *out = jj_undef(name, n);
        return MOE_OK;
    }
}

/* Python index normalisation: negative counts from the end. */
static bool norm_index(int64_t idx, size_t len, size_t *out)
{
    if (idx < 0)
        idx += (int64_t)len;
    if (idx < 0 || (uint64_t)idx >= len)
        return false;
    *out = (size_t)idx;
    return true;
}

moe_status jj_getitem(jj_ctx *ctx, jj_value obj, jj_value key, jj_value *out)
{
    size_t k;
    switch (obj.type) {
    case JJ_UNDEF:
        if (key.type == JJ_STR)
            return undefined_access(ctx, obj, key.u.s.p, key.u.s.n);
        return undefined_access(ctx, obj, "[...]", 5);
    case JJ_DICT: {
        long i = jj_dict_find(obj.u.d, key);
        if (i >= 0) {
            *out = obj.u.d->vals[i];
            return MOE_OK;
        }
        if (key.type == JJ_STR && jj_has_method(obj, key.u.s.p, key.u.s.n))
            return bound_method(ctx, obj, key.u.s.p, key.u.s.n, out);
        *out = key.type == JJ_STR ? jj_undef(key.u.s.p, key.u.s.n) : jj_undef(NULL, 0);
        return MOE_OK;
    }
    case JJ_LIST:
        if (obj.flags & JJ_F_GEN) {
            *out = jj_undef(NULL, 0);
            return MOE_OK;
        }
        if (key.type == JJ_INT || key.type == JJ_BOOL) {
            int64_t idx = key.type == JJ_INT ? key.u.i : key.u.b;
            *out = norm_index(idx, obj.u.l->n, &k) ? obj.u.l->items[k] : jj_undef(NULL, 0);
            return MOE_OK;
        }
        break;
    case JJ_STR:
        if (key.type == JJ_INT || key.type == JJ_BOOL) {
            int64_t idx = key.type == JJ_INT ? key.u.i : key.u.b;
            size_t len = jj_utf8_len(obj.u.s.p, obj.u.s.n);
            if (!norm_index(idx, len, &k)) {
                *out = jj_undef(NULL, 0);
                return MOE_OK;
            }
            size_t a = jj_utf8_offset(obj.u.s.p, obj.u.s.n, k);
            size_t b = jj_utf8_offset(obj.u.s.p + a, obj.u.s.n - a, 1);
            *out = jj_str(obj.u.s.p + a, b);
            out->flags = obj.flags & JJ_F_SAFE;
            return MOE_OK;
        }
        break;
    case JJ_NS:
    case JJ_LOOP:
        break;
    default:
        *out = jj_undef(NULL, 0);
        return MOE_OK;
    }
    if (key.type == JJ_STR)
        return jj_getattr(ctx, obj, key.u.s.p, key.u.s.n, out);
    *out = jj_undef(NULL, 0);
    return MOE_OK;
}

static moe_status slice_bound(jj_ctx *ctx, jj_value v, bool *given, int64_t *out)
{
    *given = false;
    if (v.type == JJ_NONE || v.type == JJ_UNDEF)
        return MOE_OK;
    if (v.type != JJ_INT && v.type != JJ_BOOL)
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "slice indices must be integers or None, not '%s'",
                       jj_type_name(v));
    *given = true;
    *out = v.type == JJ_INT ? v.u.i : v.u.b;
    return MOE_OK;
}

moe_status jj_slice(jj_ctx *ctx, jj_value obj, jj_value start, jj_value stop, jj_value step,
                    jj_value *out)
{
    if (obj.type == JJ_UNDEF)
        return undefined_access(ctx, obj, "[:]", 3);
    if ((obj.type != JJ_LIST && obj.type != JJ_STR) || (obj.flags & JJ_F_GEN)) {
        *out = jj_undef(NULL, 0);
        return MOE_OK;
    }
    bool has_a, has_b, has_s;
    int64_t a = 0, b = 0, s = 1;
    moe_status st;
    if ((st = slice_bound(ctx, start, &has_a, &a)) != MOE_OK ||
        (st = slice_bound(ctx, stop, &has_b, &b)) != MOE_OK ||
        (st = slice_bound(ctx, step, &has_s, &s)) != MOE_OK)
        return st;
    if (!has_s)
        s = 1;
    if (s == 0)
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "slice step cannot be zero");
    if (s == INT64_MIN)
        s = -INT64_MAX;

    /* Elements: list items, or the code points of the string. */
    jj_value *items;
    size_t len;
    if (obj.type == JJ_LIST) {
        items = obj.u.l->items;
        len = obj.u.l->n;
    } else if ((st = jj_iterate(ctx, obj, &items, &len)) != MOE_OK) {
        return st;
    }
    int64_t n = (int64_t)len;
    /* CPython's PySlice_AdjustIndices. */
    if (!has_a)
        a = s < 0 ? n - 1 : 0;
    else if (a < 0)
        a = (a + n < 0) ? (s < 0 ? -1 : 0) : a + n;
    else if (a >= n)
        a = s < 0 ? n - 1 : n;
    if (!has_b)
        b = s < 0 ? -1 : n;
    else if (b < 0)
        b = (b + n < 0) ? (s < 0 ? -1 : 0) : b + n;
    else if (b >= n)
        b = s < 0 ? n - 1 : n;
    size_t count = 0;
    if (s > 0 && a < b)
        count = (size_t)((b - a - 1) / s + 1);
    else if (s < 0 && b < a)
        count = (size_t)((a - b - 1) / (-s) + 1);
    if ((st = jj_step(ctx, count)) != MOE_OK)
        return st;

    if (obj.type == JJ_LIST) {
        jj_value r = jj_new_list(ctx, count);
        if (r.type != JJ_LIST)
            return ctx->status;
        for (size_t k = 0; k < count; k++)
            r.u.l->items[k] = items[a + (int64_t)k * s];
        r.u.l->n = count;
        r.flags = obj.flags;
        *out = r;
        return MOE_OK;
    }
    size_t bytes = 0;
    for (size_t k = 0; k < count; k++)
        bytes += items[a + (int64_t)k * s].u.s.n;
    char *buf = jj_alloc(ctx, bytes + 1);
    if (!buf)
        return ctx->status;
    size_t off = 0;
    for (size_t k = 0; k < count; k++) {
        const jj_value *c = &items[a + (int64_t)k * s];
        memcpy(buf + off, c->u.s.p, c->u.s.n);
        off += c->u.s.n;
    }
    *out = jj_str(buf, off);
    out->flags = obj.flags & JJ_F_SAFE;
    return MOE_OK;
}

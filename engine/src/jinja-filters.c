/*
 * jinja-filters.c — the `|filter` functions (tests are in jinja-tests.c).
 *
 * Names resolve to ids when the template is parsed (an unknown filter is
 * an error there, as in Jinja2). Behaviour is Jinja2 3.1's with
 * transformers' tojson: case-insensitive sort/unique/min/max/dictsort by
 * default, `default` replacing only Undefined unless boolean=true, `int`
 * reading "42.5" as 42, `safe` and `string` making strings. Filters that
 * are generators in Jinja2 (map, select*, reject*, items, unique, batch)
 * return lists flagged JJ_F_GEN, which keep the generator's observable
 * behaviour: always true in `if`, no len(), printed as a generator.
 * Anything not listed is MOE_ERR_UNSUPPORTED naming the filter.
 */
#include "jinja.h"

#include "json.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    F_ABS, F_ATTR, F_BATCH, F_CAPITALIZE, F_COUNT, F_DEFAULT, F_DICTSORT, F_ESCAPE, F_FORCEESCAPE, F_FIRST, F_FLOAT,
    F_FORMAT, F_FROM_JSON, F_INDENT, F_INT, F_ITEMS, F_JOIN, F_LAST, F_LENGTH, F_LIST, F_LOWER, F_MAP,
    F_MAX, F_MIN, F_REJECT, F_REJECTATTR, F_REPLACE, F_REVERSE, F_ROUND, F_SAFE, F_SELECT,
    F_SELECTATTR, F_SORT, F_STRING, F_SUM, F_TITLE, F_TOJSON, F_TRIM, F_UNIQUE, F_UPPER, F_WORDCOUNT,
    F_CENTER, F_TRUNCATE, F_SLICE,
};

static const struct {
    const char *name;
    int         id;
} k_filters[] = {
    {"abs", F_ABS}, {"attr", F_ATTR}, {"batch", F_BATCH}, {"capitalize", F_CAPITALIZE},
    {"count", F_COUNT}, {"d", F_DEFAULT}, {"default", F_DEFAULT}, {"dictsort", F_DICTSORT},
    {"e", F_ESCAPE}, {"escape", F_ESCAPE}, {"forceescape", F_FORCEESCAPE}, {"first", F_FIRST},
    {"float", F_FLOAT}, {"format", F_FORMAT}, {"from_json", F_FROM_JSON}, {"indent", F_INDENT},
    {"int", F_INT}, {"items", F_ITEMS}, {"join", F_JOIN}, {"last", F_LAST}, {"length", F_LENGTH},
    {"list", F_LIST}, {"lower", F_LOWER}, {"map", F_MAP}, {"max", F_MAX}, {"min", F_MIN},
    {"reject", F_REJECT}, {"rejectattr", F_REJECTATTR}, {"replace", F_REPLACE},
    {"reverse", F_REVERSE}, {"round", F_ROUND}, {"safe", F_SAFE}, {"select", F_SELECT},
    {"selectattr", F_SELECTATTR}, {"sort", F_SORT}, {"string", F_STRING}, {"sum", F_SUM},
    {"title", F_TITLE}, {"tojson", F_TOJSON}, {"trim", F_TRIM}, {"unique", F_UNIQUE},
    {"upper", F_UPPER}, {"wordcount", F_WORDCOUNT}, {"center", F_CENTER}, {"truncate", F_TRUNCATE},
    {"slice", F_SLICE},
};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

int jj_filter_lookup(const char *name, size_t n)
{
    for (size_t i = 0; i < COUNT_OF(k_filters); i++)
        if (strlen(k_filters[i].name) == n && memcmp(k_filters[i].name, name, n) == 0)
            return k_filters[i].id;
    return -1;
}

const char *jj_filter_name(int id)
{
    for (size_t i = 0; i < COUNT_OF(k_filters); i++)
        if (k_filters[i].id == id)
            return k_filters[i].name;
    return "?";
}

/* ---- helpers ------------------------------------------------------------------- */

static const jj_args k_no_args;

static bool is_num(jj_value v)
{
    return v.type == JJ_INT || v.type == JJ_FLOAT || v.type == JJ_BOOL;
}

static moe_status bool_arg(jj_ctx *ctx, const jj_args *a, size_t i, const char *kw, bool def, bool *out)
{
    jj_value v;
    *out = def;
    if (jj_arg(a, i, kw, &v))
        *out = jj_truthy(v);
    (void)ctx;
    return MOE_OK;
}

/* Jinja2's make_attrgetter: "a.b.0" walks item[a][b][0] with getitem
 * rules; integer parts index lists. */
static moe_status get_path(jj_ctx *ctx, jj_value item, jj_value attr, jj_value *out)
{
    if (attr.type == JJ_INT)
        return jj_getitem(ctx, item, attr, out);
    if (attr.type != JJ_STR)
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "attribute must be a string, not %s", jj_type_name(attr));
    const char *p = attr.u.s.p;
    size_t n = attr.u.s.n, i = 0;
    jj_value cur = item;
    for (;;) {
        size_t j = i;
        while (j < n && p[j] != '.')
            j++;
        jj_value key = jj_str(p + i, j - i);
        bool digits = j > i;
        int64_t idx = 0;
        for (size_t k = i; k < j && digits; k++) {
            if (p[k] < '0' || p[k] > '9' || idx > 100000000)
                digits = false;
            else
                idx = idx * 10 + (p[k] - '0');
        }
        if (digits)
            key = jj_int(idx);
        moe_status st = jj_getitem(ctx, cur, key, &cur);
        if (st != MOE_OK)
            return st;
        if (j >= n)
            break;
        i = j + 1;
    }
    *out = cur;
    return MOE_OK;
}

static jj_value gen_list(jj_value l)
{
    l.flags |= JJ_F_GEN;
    return l;
}

static moe_status new_list(jj_ctx *ctx, size_t cap, jj_value *out)
{
    *out = jj_new_list(ctx, cap);
    return out->type == JJ_LIST ? MOE_OK : ctx->status;
}

/* Stable merge sort of `items` by `keys` (parallel arrays), with Python's
 * comparison; errors (unorderable types) propagate. */
static moe_status merge_sort(jj_ctx *ctx, jj_value *items, jj_value *keys, size_t n, bool fold, bool reverse)
{
    if (n < 2)
        return MOE_OK;
    jj_value *ti = jj_alloc(ctx, n * sizeof(jj_value)), *tk = jj_alloc(ctx, n * sizeof(jj_value));
    if (!ti || !tk)
        return ctx->status;
    moe_status st = jj_step(ctx, n * 4);
    for (size_t width = 1; st == MOE_OK && width < n; width *= 2) {
        for (size_t lo = 0; lo < n && st == MOE_OK; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int c;
                if ((st = jj_compare(ctx, keys[j], keys[i], fold, &c)) != MOE_OK)
                    return st;
                if (reverse)
                    c = -c;
                /* take from the right only when strictly smaller: stable */
                if (c < 0) {
                    ti[k] = items[j];
                    tk[k++] = keys[j++];
                } else {
                    ti[k] = items[i];
                    tk[k++] = keys[i++];
                }
            }
            while (i < mid) {
                ti[k] = items[i];
                tk[k++] = keys[i++];
            }
            while (j < hi) {
                ti[k] = items[j];
                tk[k++] = keys[j++];
            }
        }
        memcpy(items, ti, n * sizeof(jj_value));
        memcpy(keys, tk, n * sizeof(jj_value));
    }
    return st;
}

/* Keys for sort/unique/min/max: the item or its attribute, lowercased
 * when the comparison ignores case. */
static moe_status make_keys(jj_ctx *ctx, const jj_value *items, size_t n, const jj_value *attr, bool fold,
                            jj_value **out)
{
    jj_value *keys = jj_alloc(ctx, (n ? n : 1) * sizeof(jj_value));
    if (!keys)
        return ctx->status;
    for (size_t i = 0; i < n; i++) {
        moe_status st;
        keys[i] = items[i];
        if (attr && (st = get_path(ctx, items[i], *attr, &keys[i])) != MOE_OK)
            return st;
        if (fold && keys[i].type == JJ_STR && (st = jj_case(ctx, keys[i], 1, &keys[i])) != MOE_OK)
            return st;
    }
    *out = keys;
    return MOE_OK;
}

static moe_status copy_items(jj_ctx *ctx, jj_value v, jj_value **items, size_t *n)
{
    jj_value *src;
    moe_status st = jj_iterate(ctx, v, &src, n);
    if (st != MOE_OK)
        return st;
    *items = jj_alloc(ctx, (*n ? *n : 1) * sizeof(jj_value));
    if (!*items)
        return ctx->status;
    memcpy(*items, src, *n * sizeof(jj_value));
    return jj_step(ctx, *n);
}

static jj_value list_from(jj_ctx *ctx, jj_value *items, size_t n)
{
    jj_value l = jj_new_list(ctx, 0);
    if (l.type == JJ_LIST) {
        l.u.l->items = items;
        l.u.l->n = n;
        l.u.l->cap = n;
    }
    return l;
}

/* A test applied by name (select, reject, selectattr, rejectattr). */
static moe_status test_by_name(jj_ctx *ctx, jj_value name, jj_value v, const jj_args *targs, bool *out)
{
    if (name.type != JJ_STR)
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "test name must be a string");
    int id = jj_test_lookup(name.u.s.p, name.u.s.n);
    if (id < 0)
        return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: test '%.*s'",
                       (int)(name.u.s.n > 60 ? 60 : name.u.s.n), name.u.s.p);
    return jj_apply_test(ctx, id, v, targs, out);
}

static moe_status select_reject(jj_ctx *ctx, jj_value v, const jj_args *a, bool by_attr, bool keep_if,
                                jj_value *out)
{
    jj_value *items;
    size_t n = 0;
    moe_status st = MOE_OK;
    /* Jinja2 tests `if value:` before iterating, so None gives nothing. */
    if (jj_truthy(v) && (st = jj_iterate(ctx, v, &items, &n)) != MOE_OK)
        return st;
    size_t first = by_attr ? 1 : 0;
    jj_value attr;
    if (by_attr && !jj_arg(a, 0, NULL, &attr))
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "selectattr/rejectattr need an attribute name");
    jj_value test_name = jj_none();
    bool has_test = a->n_pos > first;
    if (has_test)
        test_name = a->pos[first];
    jj_args targs = {0};
    if (a->n_pos > first + 1) {
        targs.pos = a->pos + first + 1;
        targs.n_pos = a->n_pos - first - 1;
    }
    if ((st = new_list(ctx, 0, out)) != MOE_OK || (st = jj_step(ctx, n)) != MOE_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        jj_value x = items[i];
        if (by_attr && (st = get_path(ctx, items[i], attr, &x)) != MOE_OK)
            return st;
        bool r;
        if (has_test) {
            if ((st = test_by_name(ctx, test_name, x, &targs, &r)) != MOE_OK)
                return st;
        } else {
            r = jj_truthy(x);
        }
        if (r == keep_if && (st = jj_list_push(ctx, out->u.l, items[i])) != MOE_OK)
            return st;
    }
    *out = gen_list(*out);
    return MOE_OK;
}

static moe_status do_map(jj_ctx *ctx, jj_value v, const jj_args *a, jj_value *out)
{
    jj_value *items;
    size_t n;
    moe_status st;
    if (!jj_truthy(v)) { /* Jinja2: `if value:` before iterating */
        if ((st = new_list(ctx, 0, out)) != MOE_OK)
            return st;
        *out = gen_list(*out);
        return MOE_OK;
    }
    if ((st = jj_iterate(ctx, v, &items, &n)) != MOE_OK || (st = new_list(ctx, n, out)) != MOE_OK ||
        (st = jj_step(ctx, n)) != MOE_OK)
        return st;
    jj_value attr, def;
    if (a->n_pos == 0 && jj_arg(a, SIZE_MAX, "attribute", &attr)) {
        bool has_def = jj_arg(a, SIZE_MAX, "default", &def) && def.type != JJ_NONE;
        for (size_t i = 0; i < n; i++) {
            jj_value x;
            if ((st = get_path(ctx, items[i], attr, &x)) != MOE_OK)
                return st;
            if (x.type == JJ_UNDEF && has_def)
                x = def;
            out->u.l->items[out->u.l->n++] = x;
        }
    } else if (a->n_pos >= 1 && a->pos[0].type == JJ_STR) {
        int id = jj_filter_lookup(a->pos[0].u.s.p, a->pos[0].u.s.n);
        if (id < 0)
            return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: filter '%.*s' in map()",
                           (int)(a->pos[0].u.s.n > 60 ? 60 : a->pos[0].u.s.n), a->pos[0].u.s.p);
        jj_args fa = *a;
        fa.pos++;
        fa.n_pos--;
        for (size_t i = 0; i < n; i++) {
            jj_value x;
            if ((st = jj_apply_filter(ctx, id, items[i], &fa, &x)) != MOE_OK)
                return st;
            out->u.l->items[out->u.l->n++] = x;
        }
    } else {
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "map() needs a filter name or attribute=");
    }
    *out = gen_list(*out);
    return MOE_OK;
}

static moe_status do_indent(jj_ctx *ctx, jj_value s, const jj_args *a, jj_value *out)
{
    jj_value w;
    jj_value ind = jj_str("    ", 4);
    moe_status st;
    if (jj_arg(a, 0, "width", &w)) {
        if (w.type == JJ_STR) {
            ind = w;
        } else if (w.type == JJ_INT) {
            if (w.u.i < 0 || w.u.i > 4096)
                return jj_fail(ctx, MOE_ERR_RANGE, "indent width %lld out of range", (long long)w.u.i);
            char *sp = jj_alloc(ctx, (size_t)w.u.i + 1);
            if (!sp)
                return ctx->status;
            memset(sp, ' ', (size_t)w.u.i);
            ind = jj_str(sp, (size_t)w.u.i);
        } else {
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "indent width must be an int or a string");
        }
    }
    bool first, blank;
    bool_arg(ctx, a, 1, "first", false, &first);
    bool_arg(ctx, a, 2, "blank", false, &blank);
    /* Jinja2: s += "\n"; lines = s.splitlines(); first line untouched
     * (unless first=True); empty lines untouched (unless blank=True). */
    jj_buf b = {0};
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, i = 0;
    bool line0 = true;
    if (first && (st = jj_buf_append(ctx, &b, ind.u.s.p, ind.u.s.n)) != MOE_OK)
        return st;
    while (i <= n) {
        size_t j = i;
        while (j < n && p[j] != '\n' && p[j] != '\r')
            j++;
        if (i == n && !line0)
            break; /* the "\n" Jinja2 appends makes no extra line */
        if (!line0) {
            if ((st = jj_buf_append(ctx, &b, "\n", 1)) != MOE_OK)
                return st;
            if ((j > i || blank) && (st = jj_buf_append(ctx, &b, ind.u.s.p, ind.u.s.n)) != MOE_OK)
                return st;
        }
        if ((st = jj_buf_append(ctx, &b, p + i, j - i)) != MOE_OK)
            return st;
        line0 = false;
        if (j >= n)
            break;
        i = j + 1;
        if (p[j] == '\r' && i < n && p[i] == '\n')
            i++;
        if (i == n) {
            /* text ended with a newline: Jinja2 keeps one empty last line */
            if ((st = jj_buf_append(ctx, &b, "\n", 1)) != MOE_OK)
                return st;
            if (blank && (st = jj_buf_append(ctx, &b, ind.u.s.p, ind.u.s.n)) != MOE_OK)
                return st;
            break;
        }
    }
    *out = jj_buf_value(&b);
    return MOE_OK;
}

/* Python int(str): optional sign, digits with single underscores,
 * surrounding whitespace. */
static bool parse_int_str(jj_value s, int64_t base, int64_t *out)
{
    jj_value t = s;
    size_t a = 0, b = t.u.s.n;
    while (a < b && jj_is_space((unsigned char)t.u.s.p[a]))
        a++;
    while (b > a && jj_is_space((unsigned char)t.u.s.p[b - 1]))
        b--;
    bool neg = false;
    if (a < b && (t.u.s.p[a] == '+' || t.u.s.p[a] == '-'))
        neg = t.u.s.p[a++] == '-';
    if (a >= b || base < 2 || base > 36)
        return false;
    int64_t v = 0;
    bool prev_digit = false;
    for (size_t i = a; i < b; i++) {
        char c = t.u.s.p[i];
        if (c == '_' && prev_digit && i + 1 < b) {
            prev_digit = false;
            continue;
        }
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10
                                                 : (c >= 'A' && c <= 'Z') ? c - 'A' + 10 : 99;
        if (d >= base || v > (INT64_MAX - d) / base)
            return false;
        v = v * base + d;
        prev_digit = true;
    }
    if (!prev_digit)
        return false;
    *out = neg ? -v : v;
    return true;
}

static bool parse_float_str(jj_value s, double *out)
{
    size_t a = 0, b = s.u.s.n;
    while (a < b && jj_is_space((unsigned char)s.u.s.p[a]))
        a++;
    while (b > a && jj_is_space((unsigned char)s.u.s.p[b - 1]))
        b--;
    if (a >= b)
        return false;
    char tmp[64];
    size_t n = 0;
    for (size_t i = a; i < b; i++) {
        char c = s.u.s.p[i];
        if (n + 1 >= sizeof tmp || !((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
            return false;
        tmp[n++] = c;
    }
    return moe_json_strtod(tmp, n, out);
}

static moe_status binop_concat_str(jj_ctx *ctx, jj_value a, jj_value b, jj_value *out)
{
    jj_buf buf = {0};
    moe_status st = jj_buf_append(ctx, &buf, a.u.s.p, a.u.s.n);
    if (st == MOE_OK)
        st = jj_buf_append(ctx, &buf, b.u.s.p, b.u.s.n);
    *out = jj_buf_value(&buf);
    return st;
}

/* ---- filters --------------------------------------------------------------------- */

moe_status jj_apply_filter(jj_ctx *ctx, int id, jj_value v, const jj_args *a, jj_value *out)
{
    moe_status st = MOE_OK;
    jj_value x, y, s;
    jj_value *items;
    size_t n;
    if (!a)
        a = &k_no_args;
    switch (id) {
    case F_ABS:
        if (v.type == JJ_FLOAT)
            *out = jj_float(fabs(v.u.f));
        else if (v.type == JJ_INT || v.type == JJ_BOOL) {
            int64_t i = v.type == JJ_INT ? v.u.i : v.u.b;
            if (i == INT64_MIN)
                return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: integer beyond 64 bits");
            *out = jj_int(i < 0 ? -i : i);
        } else
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "bad operand type for abs(): '%s'", jj_type_name(v));
        return MOE_OK;
    case F_ATTR:
        if (!jj_arg(a, 0, "name", &x) || x.type != JJ_STR)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "attr() needs a name");
        if (v.type == JJ_DICT) {
            *out = jj_undef(x.u.s.p, x.u.s.n);
            if (jj_has_method(v, x.u.s.p, x.u.s.n))
                return jj_getattr(ctx, v, x.u.s.p, x.u.s.n, out);
            return MOE_OK;
        }
        return jj_getattr(ctx, v, x.u.s.p, x.u.s.n, out);
    case F_BATCH: {
        if (!jj_arg(a, 0, "linecount", &x) || x.type != JJ_INT || x.u.i <= 0)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "batch() needs a positive line count");
        bool fill = jj_arg(a, 1, "fill_with", &y) && y.type != JJ_NONE;
        if ((st = jj_iterate(ctx, v, &items, &n)) != MOE_OK || (st = new_list(ctx, 0, out)) != MOE_OK)
            return st;
        size_t per = (size_t)x.u.i;
        for (size_t i = 0; i < n; i += per) {
            jj_value row;
            if ((st = new_list(ctx, per < n - i ? per : n - i, &row)) != MOE_OK)
                return st;
            for (size_t k = i; k < i + per && k < n; k++)
                row.u.l->items[row.u.l->n++] = items[k];
            while (fill && row.u.l->n < per && st == MOE_OK)
                st = jj_list_push(ctx, row.u.l, y);
            if (st == MOE_OK)
                st = jj_list_push(ctx, out->u.l, row);
            if (st != MOE_OK)
                return st;
        }
        *out = gen_list(*out);
        return jj_step(ctx, n);
    }
    case F_CAPITALIZE:
    case F_LOWER:
    case F_UPPER:
        if ((st = jj_to_str(ctx, v, &s)) != MOE_OK || (st = jj_case(ctx, s, id == F_UPPER ? 0 : id == F_LOWER ? 1 : 3, out)) != MOE_OK)
            return st;
        out->flags = s.flags & JJ_F_SAFE; /* Markup.upper() is Markup */
        return MOE_OK;
    case F_TITLE: {
        /* Jinja2's do_title: split on runs of [-\s({[<], capitalise each
         * piece (first character upper, the rest lower). */
        if ((st = jj_to_str(ctx, v, &s)) != MOE_OK)
            return st;
        jj_buf b = {0};
        bool word_start = true;
        size_t i = 0;
        while (i < s.u.s.n && st == MOE_OK) {
            size_t adv;
            uint32_t cp = jj_utf8_decode(s.u.s.p + i, s.u.s.n - i, &adv);
            bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || jj_is_space(cp);
            st = jj_buf_put_cp(ctx, &b, word_start ? jj_upper_cp(cp) : jj_lower_cp(cp));
            word_start = sep;
            i += adv;
        }
        *out = jj_buf_value(&b);
        return st;
    }
    case F_COUNT:
    case F_LENGTH: {
        int64_t len;
        if (v.type == JJ_LIST && (v.flags & JJ_F_GEN))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "object of type 'generator' has no len() (add |list)");
        if ((st = jj_length(ctx, v, &len)) != MOE_OK)
            return st;
        *out = jj_int(len);
        return MOE_OK;
    }
    case F_DEFAULT: {
        bool boolean;
        if (!jj_arg(a, 0, "default_value", &x))
            x = jj_str("", 0);
        bool_arg(ctx, a, 1, "boolean", false, &boolean);
        *out = (v.type == JJ_UNDEF || (boolean && !jj_truthy(v))) ? x : v;
        return MOE_OK;
    }
    case F_DICTSORT: {
        bool fold, reverse;
        jj_value by = jj_str("key", 3);
        bool_arg(ctx, a, 0, "case_sensitive", false, &fold);
        fold = !fold;
        jj_arg(a, 1, "by", &by);
        bool_arg(ctx, a, 2, "reverse", false, &reverse);
        int pos = jj_is_str(by, "key") ? 0 : jj_is_str(by, "value") ? 1 : -1;
        if (pos < 0)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "dictsort: 'by' must be 'key' or 'value'");
        if (v.type != JJ_DICT)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "dictsort: expected a dict, got %s", jj_type_name(v));
        n = v.u.d->n;
        jj_value *pairs = jj_alloc(ctx, (n ? n : 1) * sizeof(jj_value)), *keys;
        if (!pairs)
            return ctx->status;
        for (size_t i = 0; i < n; i++) {
            jj_value pr;
            if ((st = new_list(ctx, 2, &pr)) != MOE_OK)
                return st;
            pr.flags = JJ_F_TUPLE;
            pr.u.l->items[0] = v.u.d->keys[i];
            pr.u.l->items[1] = v.u.d->vals[i];
            pr.u.l->n = 2;
            pairs[i] = pr;
        }
        jj_value *raw = jj_alloc(ctx, (n ? n : 1) * sizeof(jj_value));
        if (!raw)
            return ctx->status;
        for (size_t i = 0; i < n; i++)
            raw[i] = pos == 0 ? v.u.d->keys[i] : v.u.d->vals[i];
        if ((st = make_keys(ctx, raw, n, NULL, fold, &keys)) != MOE_OK ||
            (st = merge_sort(ctx, pairs, keys, n, false, reverse)) != MOE_OK)
            return st;
        *out = list_from(ctx, pairs, n);
        return out->type == JJ_LIST ? MOE_OK : ctx->status;
    }
    case F_ESCAPE:
        return jj_html_escape(ctx, v, out);
    case F_FORCEESCAPE:
        if (v.type == JJ_STR)
            v.flags &= (uint8_t)~JJ_F_SAFE;
        return jj_html_escape(ctx, v, out);
    case F_FIRST:
        if (v.type == JJ_LIST) {
            *out = v.u.l->n ? v.u.l->items[0] : jj_undef(NULL, 0);
            return MOE_OK;
        }
        if ((st = jj_iterate(ctx, v, &items, &n)) != MOE_OK)
            return st;
        *out = n ? items[0] : jj_undef(NULL, 0);
        return MOE_OK;
    case F_LAST:
        if (v.type == JJ_LIST && (v.flags & JJ_F_GEN))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "'generator' object is not reversible (add |list)");
        if (v.type == JJ_DICT)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "last: 'dict' object is not reversible");
        if ((st = jj_iterate(ctx, v, &items, &n)) != MOE_OK)
            return st;
        *out = n ? items[n - 1] : jj_undef(NULL, 0);
        return MOE_OK;
    case F_FLOAT: {
        double d;
        if (!jj_arg(a, 0, "default", &x))
            x = jj_float(0.0);
        if (v.type == JJ_FLOAT || v.type == JJ_INT || v.type == JJ_BOOL)
            *out = jj_float(v.type == JJ_FLOAT ? v.u.f : v.type == JJ_INT ? (double)v.u.i : (double)v.u.b);
        else if (v.type == JJ_STR && parse_float_str(v, &d))
            *out = jj_float(d);
        else
            *out = x;
        return MOE_OK;
    }
    case F_INT: {
        int64_t i = 0, base = 10;
        double d;
        if (!jj_arg(a, 0, "default", &x))
            x = jj_int(0);
        if (jj_arg(a, 1, "base", &y) && y.type == JJ_INT)
            base = y.u.i;
        if (v.type == JJ_INT || v.type == JJ_BOOL)
            *out = jj_int(v.type == JJ_INT ? v.u.i : v.u.b);
        else if (v.type == JJ_FLOAT && isfinite(v.u.f) && fabs(v.u.f) < 9.2e18)
            *out = jj_int((int64_t)v.u.f);
        else if (v.type == JJ_STR && parse_int_str(v, base, &i))
            *out = jj_int(i);
        else if (v.type == JJ_STR && parse_float_str(v, &d) && isfinite(d) && fabs(d) < 9.2e18)
            *out = jj_int((int64_t)d);
        else
            *out = x;
        return MOE_OK;
    }
    case F_FORMAT:
        if ((st = jj_to_str(ctx, v, &s)) != MOE_OK)
            return st;
        if (a->n_kw && a->n_pos)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "format: cannot mix positional and keyword arguments");
        if (a->n_kw) {
            jj_value d = jj_new_dict(ctx);
            if (d.type != JJ_DICT)
                return ctx->status;
            for (size_t i = 0; i < a->n_kw && st == MOE_OK; i++)
                st = jj_dict_set_str(ctx, d.u.d, a->kw_names[i], a->kw_lens[i], a->kw_vals[i]);
            if (st != MOE_OK)
                return st;
            return jj_format_percent(ctx, s, d, out);
        } else {
            jj_value t;
            if ((st = new_list(ctx, a->n_pos, &t)) != MOE_OK)
                return st;
            if (a->n_pos)
                memcpy(t.u.l->items, a->pos, a->n_pos * sizeof(jj_value));
            t.u.l->n = a->n_pos;
            t.flags = JJ_F_TUPLE;
            return jj_format_percent(ctx, s, t, out);
        }
    case F_FROM_JSON: {
        if (v.type != JJ_STR)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "from_json: expected a string, got %s", jj_type_name(v));
        moe_json_doc *doc;
        moe_err jerr = {{0}};
        if (moe_json_parse(v.u.s.p, v.u.s.n, &doc, &jerr) != MOE_OK)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "from_json: %s", jerr.msg);
        st = jj_value_from_json(ctx, moe_json_doc_root(doc), out);
        moe_json_doc_free(doc);
        return st;
    }
    case F_INDENT:
        if ((st = jj_to_str(ctx, v, &s)) != MOE_OK || (st = do_indent(ctx, s, a, out)) != MOE_OK)
            return st;
        out->flags = s.flags & JJ_F_SAFE;
        return MOE_OK;
    case F_ITEMS: {
        if (v.type == JJ_UNDEF) {
            if ((st = new_list(ctx, 0, out)) == MOE_OK)
                *out = gen_list(*out);
            return st;
        }
        if (v.type != JJ_DICT)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "items: can only get item pairs from a mapping, not %s",
                           jj_type_name(v));
        if ((st = jj_call_method(ctx, v, "items", 5, &k_no_args, out)) != MOE_OK)
            return st;
        *out = gen_list(*out);
        return MOE_OK;
    }
    case F_JOIN: {
        jj_value sep = jj_str("", 0), attr;
        bool has_attr = jj_arg(a, 1, "attribute", &attr) && attr.type != JJ_NONE;
        if (jj_arg(a, 0, "d", &x) && (st = jj_to_str(ctx, x, &sep)) != MOE_OK)
            return st;
        if ((st = jj_iterate(ctx, v, &items, &n)) != MOE_OK || (st = jj_step(ctx, n)) != MOE_OK)
            return st;
        jj_buf b = {0};
        for (size_t i = 0; i < n && st == MOE_OK; i++) {
            jj_value it = items[i];
            if (has_attr && (st = get_path(ctx, it, attr, &it)) != MOE_OK)
                return st;
            if (i)
                st = jj_buf_append(ctx, &b, sep.u.s.p, sep.u.s.n);
            if (st == MOE_OK)
                st = jj_buf_put_str(ctx, &b, it);
        }
        *out = jj_buf_value(&b);
        return st;
    }
    case F_LIST:
        if ((st = copy_items(ctx, v, &items, &n)) != MOE_OK)
            return st;
        *out = list_from(ctx, items, n);
        return out->type == JJ_LIST ? MOE_OK : ctx->status;
    case F_MAP:
        return do_map(ctx, v, a, out);
    case F_MAX:
    case F_MIN: {
        bool fold;
        jj_value attr, *keys;
        bool has_attr = jj_arg(a, 1, "attribute", &attr) && attr.type != JJ_NONE;
        bool_arg(ctx, a, 0, "case_sensitive", false, &fold);
        fold = !fold;
        if ((st = jj_iterate(ctx, v, &items, &n)) != MOE_OK)
            return st;
        if (n == 0) {
            *out = jj_undef(NULL, 0);
            return MOE_OK;
        }
        if ((st = make_keys(ctx, items, n, has_attr ? &attr : NULL, fold, &keys)) != MOE_OK ||
            (st = jj_step(ctx, n)) != MOE_OK)
            return st;
        size_t best = 0;
        for (size_t i = 1; i < n; i++) {
            int c;
            if ((st = jj_compare(ctx, keys[i], keys[best], false, &c)) != MOE_OK)
                return st;
            if ((id == F_MIN && c < 0) || (id == F_MAX && c > 0))
                best = i;
        }
        *out = items[best];
        return MOE_OK;
    }
    case F_REJECT:
    case F_SELECT:
        return select_reject(ctx, v, a, false, id == F_SELECT, out);
    case F_REJECTATTR:
    case F_SELECTATTR:
        return select_reject(ctx, v, a, true, id == F_SELECTATTR, out);
    case F_REPLACE: {
        jj_value c, so, sn;
        int64_t count = -1;
        if (!jj_arg(a, 0, "old", &x) || !jj_arg(a, 1, "new", &y))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "replace() needs old and new");
        if (jj_arg(a, 2, "count", &c) && c.type == JJ_INT)
            count = c.u.i;
        if ((st = jj_to_str(ctx, v, &s)) != MOE_OK || (st = jj_to_str(ctx, x, &so)) != MOE_OK ||
            (st = jj_to_str(ctx, y, &sn)) != MOE_OK)
            return st;
        return jj_str_replace(ctx, s, so, sn, count, out);
    }
    case F_REVERSE:
        if (v.type == JJ_STR)
            return jj_slice(ctx, v, jj_none(), jj_none(), jj_int(-1), out);
        if ((st = copy_items(ctx, v, &items, &n)) != MOE_OK)
            return st;
        for (size_t i = 0, j = n; i + 1 < j; i++, j--) {
            jj_value t = items[i];
            items[i] = items[j - 1];
            items[j - 1] = t;
        }
        *out = list_from(ctx, items, n);
        return out->type == JJ_LIST ? MOE_OK : ctx->status;
    case F_ROUND: {
        int64_t prec = 0;
        jj_value method = jj_str("common", 6);
        if (jj_arg(a, 0, "precision", &x)) {
            if (x.type != JJ_INT)
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "round: precision must be an integer");
            prec = x.u.i;
        }
        jj_arg(a, 1, "method", &method);
        if (!is_num(v))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "round: expected a number, got %s", jj_type_name(v));
        if (v.type != JJ_FLOAT && jj_is_str(method, "common")) {
            /* int: round(i, p) stays an int; p < 0 rounds to 10**-p,
             * halves to even as Python does */
            int64_t i = v.type == JJ_INT ? v.u.i : v.u.b;
            if (prec < 0) {
                int64_t unit = 1;
                for (int64_t k = 0; k < -prec && unit <= INT64_MAX / 10; k++)
                    unit *= 10;
                if (-prec > 18) {
                    i = 0;
                } else {
                    int64_t q = i / unit, r = i % unit;
                    if (r < 0) {
                        q--;
                        r += unit;
                    }
                    if (2 * r > unit || (2 * r == unit && (q & 1)))
                        q++;
                    if (__builtin_mul_overflow(q, unit, &i))
                        return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: integer beyond 64 bits");
                }
            }
            *out = jj_int(i);
            return MOE_OK;
        }
        double d = v.type == JJ_FLOAT ? v.u.f : v.type == JJ_INT ? (double)v.u.i : (double)v.u.b;
        if (prec < -300 || prec > 300)
            return jj_fail(ctx, MOE_ERR_RANGE, "round: precision out of range");
        double scale = pow(10.0, (double)prec);
        if (jj_is_str(method, "common") && prec >= 0 && prec <= 40 && isfinite(d)) {
            /* Python rounds the exact binary value, halves to even (so
             * 2.675 -> 2.67): printf's correctly rounded %.Nf does that. */
            char tmp[400];
            int w = snprintf(tmp, sizeof tmp, "%.*f", (int)prec, d);
            for (int k = 0; k < w && k < (int)sizeof tmp; k++)
                if (tmp[k] == ',')
                    tmp[k] = '.';
            if (w <= 0 || (size_t)w >= sizeof tmp || !moe_json_strtod(tmp, (size_t)w, &d))
                return jj_fail(ctx, MOE_ERR_RANGE, "round: value out of range");
        } else if (jj_is_str(method, "common"))
            d = nearbyint(d * scale) / scale;
        else if (jj_is_str(method, "ceil"))
            d = ceil(d * scale) / scale;
        else if (jj_is_str(method, "floor"))
            d = floor(d * scale) / scale;
        else
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "round: method must be common, ceil or floor");
        *out = jj_float(d);
        return MOE_OK;
    }
    case F_SAFE:
        if ((st = jj_to_str(ctx, v, out)) == MOE_OK)
            out->flags = JJ_F_SAFE;
        return st;
    case F_STRING:
        return jj_to_str(ctx, v, out);
    case F_SORT: {
        bool reverse, fold;
        jj_value attr, *keys;
        bool_arg(ctx, a, 0, "reverse", false, &reverse);
        bool_arg(ctx, a, 1, "case_sensitive", false, &fold);
        fold = !fold;
        bool has_attr = jj_arg(a, 2, "attribute", &attr) && attr.type != JJ_NONE;
        if ((st = copy_items(ctx, v, &items, &n)) != MOE_OK ||
            (st = make_keys(ctx, items, n, has_attr ? &attr : NULL, fold, &keys)) != MOE_OK ||
            (st = merge_sort(ctx, items, keys, n, false, reverse)) != MOE_OK)
            return st;
        *out = list_from(ctx, items, n);
        return out->type == JJ_LIST ? MOE_OK : ctx->status;
    }
    case F_SUM: {
        jj_value attr, acc = jj_int(0);
        bool has_attr = jj_arg(a, 0, "attribute", &attr) && attr.type != JJ_NONE;
        jj_arg(a, 1, "start", &acc);
        if ((st = jj_iterate(ctx, v, &items, &n)) != MOE_OK || (st = jj_step(ctx, n)) != MOE_OK)
            return st;
        for (size_t i = 0; i < n; i++) {
            jj_value it = items[i];
            if (has_attr && (st = get_path(ctx, it, attr, &it)) != MOE_OK)
                return st;
            if (!is_num(it) || !is_num(acc))
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "sum: unsupported operand types '%s' and '%s'",
                               jj_type_name(acc), jj_type_name(it));
            if (acc.type == JJ_FLOAT || it.type == JJ_FLOAT) {
                double fa = acc.type == JJ_FLOAT ? acc.u.f : acc.type == JJ_INT ? (double)acc.u.i : acc.u.b;
                double fb = it.type == JJ_FLOAT ? it.u.f : it.type == JJ_INT ? (double)it.u.i : it.u.b;
                acc = jj_float(fa + fb);
            } else {
                int64_t r, ia = acc.type == JJ_INT ? acc.u.i : acc.u.b, ib = it.type == JJ_INT ? it.u.i : it.u.b;
                if (__builtin_add_overflow(ia, ib, &r))
                    return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: integer beyond 64 bits");
                acc = jj_int(r);
            }
        }
        *out = acc;
        return MOE_OK;
    }
    case F_TOJSON: {
        /* transformers: tojson(x, ensure_ascii=False, indent=None,
         * separators=None, sort_keys=False) */
        jj_json_opts o = {.indent = -1};
        if (jj_arg(a, 0, "ensure_ascii", &x))
            o.ensure_ascii = jj_truthy(x);
        if (jj_arg(a, 1, "indent", &x) && x.type != JJ_NONE) {
            if (x.type != JJ_INT || x.u.i < 0 || x.u.i > 64)
                return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: tojson indent other than 0..64");
            o.indent = (int)x.u.i;
        }
        if (jj_arg(a, 2, "separators", &x) && x.type != JJ_NONE) {
            if (x.type != JJ_LIST || x.u.l->n != 2 || x.u.l->items[0].type != JJ_STR ||
                x.u.l->items[1].type != JJ_STR)
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "tojson: separators must be a pair of strings");
            o.item_sep = x.u.l->items[0].u.s.p;
            o.item_sep_n = x.u.l->items[0].u.s.n;
            o.key_sep = x.u.l->items[1].u.s.p;
            o.key_sep_n = x.u.l->items[1].u.s.n;
        }
        if (jj_arg(a, 3, "sort_keys", &x))
            o.sort_keys = jj_truthy(x);
        if (v.type == JJ_LIST && (v.flags & JJ_F_GEN))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "tojson: Object of type generator is not JSON serializable (add |list)");
        return jj_to_json(ctx, v, &o, out);
    }
    case F_TRIM: {
        if ((st = jj_to_str(ctx, v, &s)) != MOE_OK)
            return st;
        jj_args sa = {0};
        if (jj_arg(a, 0, "chars", &x) && x.type != JJ_NONE) {
            sa.pos = &x;
            sa.n_pos = 1;
        }
        return jj_call_method(ctx, s, "strip", 5, &sa, out);
    }
    case F_UNIQUE: {
        bool fold;
        jj_value attr, *keys;
        bool_arg(ctx, a, 0, "case_sensitive", false, &fold);
        fold = !fold;
        bool has_attr = jj_arg(a, 1, "attribute", &attr) && attr.type != JJ_NONE;
        if ((st = jj_iterate(ctx, v, &items, &n)) != MOE_OK ||
            (st = make_keys(ctx, items, n, has_attr ? &attr : NULL, fold, &keys)) != MOE_OK ||
            (st = jj_step(ctx, n)) != MOE_OK || (st = new_list(ctx, 0, out)) != MOE_OK)
            return st;
        jj_value seen = jj_new_dict(ctx);
        if (seen.type != JJ_DICT)
            return ctx->status;
        for (size_t i = 0; i < n; i++) {
            if (jj_dict_find(seen.u.d, keys[i]) >= 0)
                continue;
            if ((st = jj_dict_set(ctx, seen.u.d, keys[i], jj_none())) != MOE_OK ||
                (st = jj_list_push(ctx, out->u.l, items[i])) != MOE_OK)
                return st;
        }
        *out = gen_list(*out);
        return MOE_OK;
    }
    case F_CENTER: {
        /* Python's str.center: the odd space goes left when width is odd */
        int64_t width = 80;
        if (jj_arg(a, 0, "width", &x) && x.type == JJ_INT)
            width = x.u.i;
        if ((st = jj_to_str(ctx, v, &s)) != MOE_OK)
            return st;
        int64_t len = (int64_t)jj_utf8_len(s.u.s.p, s.u.s.n);
        if (width <= len) {
            *out = s;
            return MOE_OK;
        }
        if (width > 1 << 20)
            return jj_fail(ctx, MOE_ERR_RANGE, "center: width %lld too large", (long long)width);
        int64_t marg = width - len, left = marg / 2 + (marg & width & 1);
        jj_buf b = {0};
        for (int64_t k = 0; k < marg && st == MOE_OK; k++) {
            if (k == left)
                st = jj_buf_append(ctx, &b, s.u.s.p, s.u.s.n);
            if (st == MOE_OK)
                st = jj_buf_append(ctx, &b, " ", 1);
        }
        if (st == MOE_OK && left == marg)
            st = jj_buf_append(ctx, &b, s.u.s.p, s.u.s.n);
        *out = jj_buf_value(&b);
        return st;
    }
    case F_TRUNCATE: {
        /* Jinja2: keep s when len(s) <= length + leeway (5); else cut to
         * length - len(end), at a word boundary unless killwords. */
        int64_t length = 255, leeway = 5;
        bool killwords;
        jj_value end = jj_str("...", 3);
        if (jj_arg(a, 0, "length", &x) && x.type == JJ_INT)
            length = x.u.i;
        bool_arg(ctx, a, 1, "killwords", false, &killwords);
        if (jj_arg(a, 2, "end", &y) && (st = jj_to_str(ctx, y, &end)) != MOE_OK)
            return st;
        if (jj_arg(a, 3, "leeway", &x) && x.type == JJ_INT)
            leeway = x.u.i;
        if ((st = jj_to_str(ctx, v, &s)) != MOE_OK)
            return st;
        int64_t end_len = (int64_t)jj_utf8_len(end.u.s.p, end.u.s.n);
        if (length < end_len || leeway < 0)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "truncate: length must be >= len(end), leeway >= 0");
        if ((int64_t)jj_utf8_len(s.u.s.p, s.u.s.n) <= length + leeway) {
            *out = s;
            return MOE_OK;
        }
        size_t cut = jj_utf8_offset(s.u.s.p, s.u.s.n, (size_t)(length - end_len));
        if (!killwords) {
            for (size_t k = cut; k-- > 0;)
                if (s.u.s.p[k] == ' ') {
                    cut = k;
                    break;
                }
        }
        jj_value head = jj_str(s.u.s.p, cut);
        return binop_concat_str(ctx, head, end, out);
    }
    case F_SLICE: {
        /* Jinja2's slice: `slices` columns, the first len % slices one
         * longer, the rest padded with fill_with when given. */
        if (!jj_arg(a, 0, "slices", &x) || x.type != JJ_INT || x.u.i <= 0 || x.u.i > 1000000)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "slice() needs a positive number of slices");
        bool fill = jj_arg(a, 1, "fill_with", &y) && y.type != JJ_NONE;
        if ((st = jj_iterate(ctx, v, &items, &n)) != MOE_OK || (st = new_list(ctx, 0, out)) != MOE_OK ||
            (st = jj_step(ctx, n + (size_t)x.u.i)) != MOE_OK)
            return st;
        size_t slices = (size_t)x.u.i, per = n / slices, extra = n % slices, offset = 0;
        for (size_t k = 0; k < slices; k++) {
            size_t start = offset + k * per;
            if (k < extra)
                offset++;
            size_t stop = offset + (k + 1) * per;
            jj_value col;
            if ((st = new_list(ctx, stop - start + 1, &col)) != MOE_OK)
                return st;
            for (size_t i = start; i < stop; i++)
                col.u.l->items[col.u.l->n++] = items[i];
            if (fill && k >= extra)
                col.u.l->items[col.u.l->n++] = y;
            if ((st = jj_list_push(ctx, out->u.l, col)) != MOE_OK)
                return st;
        }
        *out = gen_list(*out);
        return MOE_OK;
    }
    case F_WORDCOUNT: {
        if ((st = jj_to_str(ctx, v, &s)) != MOE_OK)
            return st;
        int64_t words = 0;
        bool in_word = false;
        size_t i = 0;
        while (i < s.u.s.n) {
            size_t adv;
            uint32_t cp = jj_utf8_decode(s.u.s.p + i, s.u.s.n - i, &adv);
            bool w = cp == '_' || jj_is_alnum_cp(cp);
            if (w && !in_word)
                words++;
            in_word = w;
            i += adv;
        }
        *out = jj_int(words);
        return MOE_OK;
    }
    default:
        break;
    }
    return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: filter '%s'", jj_filter_name(id));
}

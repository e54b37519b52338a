/*
 * jinja-tests.c — the `is test` functions (defined, string, mapping,
 * divisibleby, equalto...), and JSON documents as template values (for
 * the `from_json` filter and the chat API's messages, tools and extras).
 *
 * Tests follow Jinja2 3.1, including its Python corners: True is a
 * number, Undefined is iterable and a sequence, `sameas` is identity.
 */
#include "jinja.h"

#include "json.h"
#include "util.h"

#include <math.h>
#include <string.h>

enum {
    T_BOOLEAN, T_CALLABLE, T_DEFINED, T_DIVISIBLEBY, T_EQ, T_ESCAPED, T_EVEN, T_FALSE, T_FILTER,
    T_FLOAT, T_GE, T_GT, T_IN, T_INTEGER, T_ITERABLE, T_LE, T_LOWER, T_LT, T_MAPPING, T_NE, T_NONE,
    T_NUMBER, T_ODD, T_SAMEAS, T_SEQUENCE, T_STRING, T_TEST, T_TRUE, T_UNDEFINED, T_UPPER,
};

static const struct {
    const char *name;
    int         id;
} k_tests[] = {
    {"boolean", T_BOOLEAN}, {"callable", T_CALLABLE}, {"defined", T_DEFINED},
    {"divisibleby", T_DIVISIBLEBY}, {"eq", T_EQ}, {"equalto", T_EQ}, {"==", T_EQ},
    {"escaped", T_ESCAPED}, {"even", T_EVEN}, {"false", T_FALSE}, {"filter", T_FILTER},
    {"float", T_FLOAT}, {"ge", T_GE}, {">=", T_GE}, {"gt", T_GT}, {">", T_GT},
    {"greaterthan", T_GT}, {"in", T_IN}, {"integer", T_INTEGER}, {"iterable", T_ITERABLE},
    {"le", T_LE}, {"<=", T_LE}, {"lower", T_LOWER}, {"lt", T_LT}, {"<", T_LT},
    {"lessthan", T_LT}, {"mapping", T_MAPPING}, {"ne", T_NE}, {"!=", T_NE}, {"none", T_NONE},
    {"number", T_NUMBER}, {"odd", T_ODD}, {"sameas", T_SAMEAS}, {"sequence", T_SEQUENCE},
    {"string", T_STRING}, {"test", T_TEST}, {"true", T_TRUE}, {"undefined", T_UNDEFINED},
    {"upper", T_UPPER},
};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

static const jj_args k_no_args;

static moe_status new_list(jj_ctx *ctx, size_t cap, jj_value *out)
{
    *out = jj_new_list(ctx, cap);
    return out->type == JJ_LIST ? MOE_OK : ctx->status;
}

static bool is_num(jj_value v)
{
    return v.type == JJ_INT || v.type == JJ_FLOAT || v.type == JJ_BOOL;
}

int jj_test_lookup(const char *name, size_t n)
{
    for (size_t i = 0; i < COUNT_OF(k_tests); i++)
        if (strlen(k_tests[i].name) == n && memcmp(k_tests[i].name, name, n) == 0)
            return k_tests[i].id;
    return -1;
}

/* ---- tests ------------------------------------------------------------------------ */

moe_status jj_apply_test(jj_ctx *ctx, int id, jj_value v, const jj_args *a, bool *out)
{
    jj_value x;
    moe_status st = MOE_OK;
    int c;
    if (!a)
        a = &k_no_args;
    switch (id) {
    case T_BOOLEAN: *out = v.type == JJ_BOOL; return MOE_OK;
    case T_CALLABLE: *out = v.type == JJ_FUNC; return MOE_OK;
    case T_DEFINED: *out = v.type != JJ_UNDEF; return MOE_OK;
    case T_UNDEFINED: *out = v.type == JJ_UNDEF; return MOE_OK;
    case T_ESCAPED: *out = false; return MOE_OK;
    case T_FALSE: *out = v.type == JJ_BOOL && !v.u.b; return MOE_OK;
    case T_TRUE: *out = v.type == JJ_BOOL && v.u.b; return MOE_OK;
    case T_FLOAT: *out = v.type == JJ_FLOAT; return MOE_OK;
    case T_INTEGER: *out = v.type == JJ_INT; return MOE_OK;
    case T_NUMBER: *out = is_num(v); return MOE_OK;
    case T_NONE: *out = v.type == JJ_NONE; return MOE_OK;
    case T_STRING: *out = v.type == JJ_STR; return MOE_OK;
    case T_MAPPING: *out = v.type == JJ_DICT; return MOE_OK;
    case T_ITERABLE:
        *out = v.type == JJ_STR || v.type == JJ_LIST || v.type == JJ_DICT || v.type == JJ_UNDEF ||
               v.type == JJ_LOOP;
        return MOE_OK;
    case T_SEQUENCE:
        *out = v.type == JJ_STR || (v.type == JJ_LIST && !(v.flags & JJ_F_GEN)) || v.type == JJ_DICT ||
               v.type == JJ_UNDEF;
        return MOE_OK;
    case T_LOWER:
    case T_UPPER: {
        jj_value s;
        if ((st = jj_to_str(ctx, v, &s)) != MOE_OK)
            return st;
        *out = id == T_LOWER ? jj_str_is_lower(s) : jj_str_is_upper(s);
        return MOE_OK;
    }
    case T_EVEN:
    case T_ODD:
    case T_DIVISIBLEBY: {
        jj_value d = jj_int(2);
        if (id == T_DIVISIBLEBY && !jj_arg(a, 0, "num", &d))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "divisibleby needs a number");
        if (!is_num(v) || !is_num(d))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "%s test needs numbers, got %s",
                           id == T_DIVISIBLEBY ? "divisibleby" : id == T_EVEN ? "even" : "odd", jj_type_name(v));
        if (v.type == JJ_FLOAT || d.type == JJ_FLOAT) {
            double fv = v.type == JJ_FLOAT ? v.u.f : v.type == JJ_INT ? (double)v.u.i : v.u.b;
            double fd = d.type == JJ_FLOAT ? d.u.f : d.type == JJ_INT ? (double)d.u.i : d.u.b;
            if (fd == 0)
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "float modulo by zero");
            double m = fmod(fv, fd);
            *out = id == T_ODD ? fabs(m) == 1 : m == 0;
            return MOE_OK;
        }
        int64_t iv = v.type == JJ_INT ? v.u.i : v.u.b, id_ = d.type == JJ_INT ? d.u.i : d.u.b;
        if (id_ == 0)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "integer division or modulo by zero");
        int64_t m = id_ == -1 ? 0 : iv % id_;
        *out = id == T_ODD ? m != 0 : m == 0;
        return MOE_OK;
    }
    case T_EQ:
    case T_NE:
        if (!jj_arg(a, 0, "other", &x))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "comparison test needs an argument");
        *out = jj_equal(v, x) == (id == T_EQ);
        return MOE_OK;
    case T_LT:
    case T_LE:
    case T_GT:
    case T_GE:
        if (!jj_arg(a, 0, "other", &x))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "comparison test needs an argument");
        if ((st = jj_compare(ctx, v, x, false, &c)) != MOE_OK)
            return st;
        *out = id == T_LT ? c < 0 : id == T_LE ? c <= 0 : id == T_GT ? c > 0 : c >= 0;
        return MOE_OK;
    case T_IN: {
        if (!jj_arg(a, 0, "seq", &x))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "'in' test needs a sequence");
        jj_value *items;
        size_t n;
        if (x.type == JJ_STR) {
            if (v.type != JJ_STR)
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "'in <string>' requires string as left operand");
            *out = v.u.s.n == 0;
            for (size_t i = 0; !*out && i + v.u.s.n <= x.u.s.n; i++)
                *out = memcmp(x.u.s.p + i, v.u.s.p, v.u.s.n) == 0;
            return MOE_OK;
        }
        if (x.type == JJ_DICT) {
            *out = jj_dict_find(x.u.d, v) >= 0;
            return MOE_OK;
        }
        if ((st = jj_iterate(ctx, x, &items, &n)) != MOE_OK)
            return st;
        *out = false;
        for (size_t i = 0; i < n && !*out; i++)
            *out = jj_equal(items[i], v);
        return jj_step(ctx, n);
    }
    case T_SAMEAS:
        if (!jj_arg(a, 0, "other", &x))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "sameas needs an argument");
        if (v.type != x.type)
            *out = false;
        else if (v.type == JJ_LIST || v.type == JJ_DICT || v.type == JJ_NS || v.type == JJ_FUNC)
            *out = v.u.l == x.u.l;
        else
            *out = jj_equal(v, x);
        return MOE_OK;
    case T_FILTER:
    case T_TEST:
        *out = v.type == JJ_STR && (id == T_FILTER ? jj_filter_lookup(v.u.s.p, v.u.s.n) >= 0
                                                   : jj_test_lookup(v.u.s.p, v.u.s.n) >= 0);
        return MOE_OK;
    default:
        break;
    }
    return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: test #%d", id);
}

/* ---- JSON to values -------------------------------------------------------------- */

static moe_status from_json(jj_ctx *ctx, const moe_json *j, jj_value *out, int depth)
{
    moe_status st = MOE_OK;
    if (depth > MOE_JSON_MAX_DEPTH + 1)
        return jj_fail(ctx, MOE_ERR_RANGE, "JSON nested too deeply");
    switch (j->type) {
    case MOE_JSON_NULL: *out = jj_none(); return MOE_OK;
    case MOE_JSON_BOOL: *out = jj_bool(j->u.b); return MOE_OK;
    case MOE_JSON_INT: *out = jj_int(j->u.i); return MOE_OK;
    case MOE_JSON_FLOAT: *out = jj_float(j->u.f); return MOE_OK;
    case MOE_JSON_STRING: {
        char *p = jj_alloc(ctx, j->u.str.len + 1);
        if (!p)
            return ctx->status;
        memcpy(p, j->u.str.ptr, j->u.str.len);
        *out = jj_str(p, j->u.str.len);
        return MOE_OK;
    }
    case MOE_JSON_ARRAY: {
        jj_value l;
        if ((st = new_list(ctx, j->u.arr.n, &l)) != MOE_OK)
            return st;
        for (size_t i = 0; i < j->u.arr.n; i++)
            if ((st = from_json(ctx, j->u.arr.items[i], &l.u.l->items[l.u.l->n++], depth + 1)) != MOE_OK)
                return st;
        *out = l;
        return jj_step(ctx, j->u.arr.n);
    }
    case MOE_JSON_OBJECT: {
        jj_value d = jj_new_dict(ctx);
        if (d.type != JJ_DICT)
            return ctx->status;
        for (size_t i = 0; i < j->u.obj.n; i++) {
            const moe_json_member *m = &j->u.obj.members[i];
            jj_value k, val;
            if ((st = from_json(ctx, &(moe_json){.type = MOE_JSON_STRING,
                                                 .u.str = {m->key, m->key_len}}, &k, depth + 1)) != MOE_OK ||
                (st = from_json(ctx, m->value, &val, depth + 1)) != MOE_OK ||
                (st = jj_dict_set(ctx, d.u.d, k, val)) != MOE_OK)
                return st;
        }
        *out = d;
        return jj_step(ctx, j->u.obj.n);
    }
    }
    return jj_fail(ctx, MOE_ERR_INVALID_ARG, "bad JSON value");
}

moe_status jj_value_from_json(jj_ctx *ctx, const struct moe_json *j, jj_value *out)
{
    return from_json(ctx, j, out, 0);
}

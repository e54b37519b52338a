/*
 * jinja-eval.c — executing the AST: statements, expressions, scopes,
 * macros and call blocks.
 *
 * Scoping follows Jinja2: a for loop, a macro call, a call block and
 * `with` each open a new scope whose `set`s vanish when it ends (hence
 * namespace() for carrying state out of loops); `if` opens none. A macro
 * sees the scope it was defined in, at call time. Output goes to ctx->out,
 * which macro calls, block sets and filter blocks swap for a capture
 * buffer.
 *
 * Every node evaluated costs one step against ctx->lim.max_steps and one
 * level of ctx->depth while it runs, so runaway loops and recursion end in
 * an error, not a hang or a stack overflow. Errors carry the line:column
 * of the innermost node being evaluated.
 */
#include "jinja.h"

#include "util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SMALL_ARGS 6

static moe_status eval(jj_ctx *ctx, const jj_node *n, jj_scope *sc, jj_value *out);
static moe_status exec_body(jj_ctx *ctx, jj_node *const *kids, size_t n, jj_scope *sc);

void jj_limits_default(jj_limits *lim)
{
    lim->max_output_bytes = 16u << 20;
    lim->max_memory_bytes = 256u << 20;
    lim->max_steps = 20000000;
    lim->max_depth = 300;
}

static void at(jj_ctx *ctx, const jj_node *n)
{
    ctx->line = n->line;
    ctx->col = n->col;
}

static moe_status enter(jj_ctx *ctx, const jj_node *n)
{
    at(ctx, n);
    if (++ctx->depth > ctx->lim.max_depth)
        return jj_fail(ctx, MOE_ERR_RANGE, "evaluation nested deeper than %d levels (runaway recursion?)",
                       ctx->lim.max_depth);
    return jj_step(ctx, 1);
}

/* ---- scopes -------------------------------------------------------------- */

static jj_scope *scope_new(jj_ctx *ctx, jj_scope *parent)
{
    jj_scope *s = jj_alloc(ctx, sizeof *s);
    if (!s)
        return NULL;
    memset(s, 0, sizeof *s);
    s->parent = parent;
    return s;
}

static bool scope_lookup(const jj_scope *sc, const char *name, size_t n, jj_value *out)
{
    for (; sc; sc = sc->parent) {
        long i = jj_dict_find_str(&sc->vars, name, n);
        if (i >= 0) {
            *out = sc->vars.vals[i];
            return true;
        }
    }
    return false;
}

static moe_status scope_set(jj_ctx *ctx, jj_scope *sc, const char *name, size_t n, jj_value v)
{
    return jj_dict_set_str(ctx, &sc->vars, name, n, v);
}

/* Binds a for/set target (a name or a tuple of names) to `v`. */
static moe_status bind_target(jj_ctx *ctx, const jj_node *t, jj_value v, jj_scope *sc)
{
    if (t->kind == JN_NAME)
        return scope_set(ctx, sc, t->s, t->n, v);
    jj_value *items;
    size_t n;
    moe_status st = jj_iterate(ctx, v, &items, &n);
    if (st != MOE_OK)
        return st;
    at(ctx, t);
    if (v.type == JJ_UNDEF || n != t->n_kids)
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "cannot unpack %zu value(s) into %zu name(s)", n, t->n_kids);
    for (size_t i = 0; i < n; i++)
        if ((st = scope_set(ctx, sc, t->kids[i]->s, t->kids[i]->n, items[i])) != MOE_OK)
            return st;
    return MOE_OK;
}

/* ---- calls ----------------------------------------------------------------- */

bool jj_arg(const jj_args *args, size_t i, const char *name, jj_value *out)
{
    if (i < args->n_pos) {
        *out = args->pos[i];
        return true;
    }
    if (name) {
        size_t n = strlen(name);
        for (size_t k = 0; k < args->n_kw; k++)
            if (args->kw_lens[k] == n && memcmp(args->kw_names[k], name, n) == 0) {
                *out = args->kw_vals[k];
                return true;
            }
    }
    return false;
}

/* Storage for evaluated arguments: on the stack when few. */
typedef struct argbuf {
    jj_args      a;
    jj_value     pos[SMALL_ARGS];
    const char  *names[SMALL_ARGS];
    size_t       lens[SMALL_ARGS];
    jj_value     vals[SMALL_ARGS];
} argbuf;

static moe_status eval_args(jj_ctx *ctx, jj_node *const *kids, size_t n, jj_scope *sc, argbuf *ab)
{
    memset(&ab->a, 0, sizeof ab->a);
    size_t n_kw = 0;
    for (size_t i = 0; i < n; i++)
        if (kids[i]->kind == JN_KWARG)
            n_kw++;
    size_t n_pos = n - n_kw;
    ab->a.pos = ab->pos;
    ab->a.kw_names = ab->names;
    ab->a.kw_lens = ab->lens;
    ab->a.kw_vals = ab->vals;
    if (n_pos > SMALL_ARGS && !(ab->a.pos = jj_alloc(ctx, n_pos * sizeof(jj_value))))
        return ctx->status;
    if (n_kw > SMALL_ARGS) {
        ab->a.kw_names = jj_alloc(ctx, n_kw * sizeof(const char *));
        ab->a.kw_lens = jj_alloc(ctx, n_kw * sizeof(size_t));
        ab->a.kw_vals = jj_alloc(ctx, n_kw * sizeof(jj_value));
        if (!ab->a.kw_names || !ab->a.kw_lens || !ab->a.kw_vals)
            return ctx->status;
    }
    for (size_t i = 0; i < n; i++) {
        moe_status st;
        if (kids[i]->kind == JN_KWARG) {
            size_t k = ab->a.n_kw++;
            ab->a.kw_names[k] = kids[i]->s;
            ab->a.kw_lens[k] = kids[i]->n;
            st = eval(ctx, kids[i]->a, sc, &ab->a.kw_vals[k]);
        } else {
            st = eval(ctx, kids[i], sc, &ab->a.pos[ab->a.n_pos++]);
        }
        if (st != MOE_OK)
            return st;
    }
    return MOE_OK;
}

/* Runs `body` in `sc` with output captured into a new string. */
static moe_status capture(jj_ctx *ctx, jj_node *const *body, size_t n, jj_scope *sc, jj_value *out)
{
    jj_buf buf = {0};
    jj_buf *saved = ctx->out;
    ctx->out = &buf;
    moe_status st = exec_body(ctx, body, n, sc);
    ctx->out = saved;
    if (st != MOE_OK)
        return st;
    *out = jj_buf_value(&buf);
    return MOE_OK;
}

/* Binds macro or caller parameters; leftovers go to varargs/kwargs. */
static moe_status bind_params(jj_ctx *ctx, jj_node *const *params, size_t n_params,
                              const jj_args *args, jj_scope *msc)
{
    moe_status st;
    bool *used_kw = NULL;
    if (args->n_kw && !(used_kw = jj_alloc(ctx, args->n_kw)))
        return ctx->status;
    for (size_t i = 0; i < args->n_kw; i++)
        used_kw[i] = false;
    for (size_t i = 0; i < n_params; i++) {
        const jj_node *p = params[i];
        jj_value v;
        bool have = false;
        if (i < args->n_pos) {
            v = args->pos[i];
            have = true;
        } else {
            for (size_t k = 0; k < args->n_kw; k++)
                if (args->kw_lens[k] == p->n && memcmp(args->kw_names[k], p->s, p->n) == 0) {
                    v = args->kw_vals[k];
                    used_kw[k] = true;
                    have = true;
                }
        }
        if (!have) {
            if (p->a) {
                /* Defaults see the parameters bound before them. */
                if ((st = eval(ctx, p->a, msc, &v)) != MOE_OK)
                    return st;
            } else {
                v = jj_undef(p->s, p->n);
            }
        }
        if ((st = scope_set(ctx, msc, p->s, p->n, v)) != MOE_OK)
            return st;
    }
    jj_value varargs = jj_new_list(ctx, 0), kwargs = jj_new_dict(ctx);
    if (varargs.type != JJ_LIST || kwargs.type != JJ_DICT)
        return ctx->status;
    for (size_t i = n_params; i < args->n_pos; i++)
        if ((st = jj_list_push(ctx, varargs.u.l, args->pos[i])) != MOE_OK)
            return st;
    for (size_t k = 0; k < args->n_kw; k++)
        if (!used_kw[k] && (st = jj_dict_set_str(ctx, kwargs.u.d, args->kw_names[k], args->kw_lens[k],
                                                 args->kw_vals[k])) != MOE_OK)
            return st;
    varargs.flags = JJ_F_TUPLE;
    if ((st = scope_set(ctx, msc, "varargs", 7, varargs)) != MOE_OK)
        return st;
    return scope_set(ctx, msc, "kwargs", 6, kwargs);
}

static moe_status call_macro(jj_ctx *ctx, const jj_func *fn, const jj_args *args,
                             const jj_value *caller, jj_value *out)
{
    const jj_node *m = fn->node;
    jj_scope *msc = scope_new(ctx, fn->closure);
    if (!msc)
        return ctx->status;
    if (++ctx->depth > ctx->lim.max_depth)
        return jj_fail(ctx, MOE_ERR_RANGE, "macro calls nested deeper than %d levels (runaway recursion?)",
                       ctx->lim.max_depth);
    moe_status st = bind_params(ctx, m->kids2, m->n_kids2, args, msc);
    if (st == MOE_OK && caller)
        st = scope_set(ctx, msc, "caller", 6, *caller);
    int saved_ctl = ctx->ctl;
    if (st == MOE_OK)
        st = capture(ctx, m->kids, m->n_kids, msc, out);
    ctx->ctl = saved_ctl;
    ctx->depth--;
    return st;
}

moe_status jj_call_value(jj_ctx *ctx, jj_value fnv, const jj_args *args, jj_value *out)
{
    if (fnv.type != JJ_FUNC) {
        if (fnv.type == JJ_UNDEF && fnv.u.s.p)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "'%.*s' is undefined and cannot be called",
                           (int)(fnv.u.s.n > 80 ? 80 : fnv.u.s.n), fnv.u.s.p);
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "'%s' object is not callable", jj_type_name(fnv));
    }
    const jj_func *fn = fnv.u.fn;
    switch (fn->kind) {
    case JF_MACRO:
        return call_macro(ctx, fn, args, NULL, out);
    case JF_CALLER: {
        const jj_node *cb = fn->node;
        jj_scope *csc = scope_new(ctx, fn->closure);
        if (!csc)
            return ctx->status;
        moe_status st = bind_params(ctx, cb->kids2, cb->n_kids2, args, csc);
        if (st != MOE_OK)
            return st;
        int saved_ctl = ctx->ctl;
        st = capture(ctx, cb->kids, cb->n_kids, csc, out);
        ctx->ctl = saved_ctl;
        return st;
    }
    case JF_GLOBAL:
        return jj_call_global(ctx, fn->id, args, out);
    case JF_METHOD:
        return jj_call_method(ctx, fn->self, fn->name, fn->name_len, args, out);
    }
    return jj_fail(ctx, MOE_ERR_INVALID_ARG, "not callable");
}

static moe_status eval_call(jj_ctx *ctx, const jj_node *n, jj_scope *sc, const jj_value *caller,
                            jj_value *out)
{
    moe_status st;
    jj_value fn;
    const jj_node *callee = n->a;
    argbuf ab;
    /* obj.method(...) on str/list/dict/loop: call without a bound object. */
    if (callee->kind == JN_GETATTR) {
        jj_value obj;
        if ((st = eval(ctx, callee->a, sc, &obj)) != MOE_OK)
            return st;
        if ((obj.type == JJ_STR || obj.type == JJ_LIST || obj.type == JJ_DICT || obj.type == JJ_LOOP) &&
            jj_has_method(obj, callee->s, callee->n)) {
            if ((st = eval_args(ctx, n->kids, n->n_kids, sc, &ab)) != MOE_OK)
                return st;
            at(ctx, n);
            return jj_call_method(ctx, obj, callee->s, callee->n, &ab.a, out);
        }
        at(ctx, callee);
        if ((st = jj_getattr(ctx, obj, callee->s, callee->n, &fn)) != MOE_OK)
            return st;
    } else if ((st = eval(ctx, callee, sc, &fn)) != MOE_OK) {
        return st;
    }
    if ((st = eval_args(ctx, n->kids, n->n_kids, sc, &ab)) != MOE_OK)
        return st;
    at(ctx, n);
    if (caller) {
        if (fn.type != JJ_FUNC || fn.u.fn->kind != JF_MACRO)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "'call' block needs a macro");
        return call_macro(ctx, fn.u.fn, &ab.a, caller, out);
    }
    return jj_call_value(ctx, fn, &ab.a, out);
}

/* ---- operators --------------------------------------------------------------- */

static bool is_num(jj_value v)
{
    return v.type == JJ_INT || v.type == JJ_FLOAT || v.type == JJ_BOOL;
}

static int64_t as_i(jj_value v)
{
    return v.type == JJ_INT ? v.u.i : v.type == JJ_BOOL ? (int64_t)v.u.b : 0;
}

static double as_f(jj_value v)
{
    return v.type == JJ_FLOAT ? v.u.f : (double)as_i(v);
}

static const char *op_text(int op)
{
    switch (op) {
    case JO_ADD: return "+";
    case JO_SUB: return "-";
    case JO_MUL: return "*";
    case JO_DIV: return "/";
    case JO_FLOORDIV: return "//";
    case JO_MOD: return "%";
    case JO_POW: return "**";
    case JO_LT: return "<";
    case JO_LE: return "<=";
    case JO_GT: return ">";
    case JO_GE: return ">=";
    default: return "?";
    }
}

static moe_status type_error(jj_ctx *ctx, int op, jj_value a, jj_value b)
{
    const jj_value *u = a.type == JJ_UNDEF ? &a : b.type == JJ_UNDEF ? &b : NULL;
    if (u && u->u.s.p)
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "'%.*s' is undefined (used with '%s')",
                       (int)(u->u.s.n > 80 ? 80 : u->u.s.n), u->u.s.p, op_text(op));
    if (a.type == JJ_STR && op == JO_ADD)
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "can only concatenate str (not \"%s\") to str", jj_type_name(b));
    return jj_fail(ctx, MOE_ERR_INVALID_ARG, "unsupported operand type(s) for %s: '%s' and '%s'",
                   op_text(op), jj_type_name(a), jj_type_name(b));
}

static moe_status int_overflow(jj_ctx *ctx)
{
    return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: integer result beyond 64 bits");
}

static moe_status concat_seq(jj_ctx *ctx, jj_value a, jj_value b, jj_value *out)
{
    if (a.type == JJ_STR) {
        char *p = jj_alloc(ctx, a.u.s.n + b.u.s.n + 1);
        if (!p)
            return ctx->status;
        memcpy(p, a.u.s.p, a.u.s.n);
        memcpy(p + a.u.s.n, b.u.s.p, b.u.s.n);
        *out = jj_str(p, a.u.s.n + b.u.s.n);
        if (a.u.s.n + b.u.s.n > ctx->lim.max_output_bytes)
            return jj_fail(ctx, MOE_ERR_RANGE, "string exceeds the %zu-byte output limit", ctx->lim.max_output_bytes);
        return jj_step(ctx, (a.u.s.n + b.u.s.n) / 4096);
    }
    jj_value r = jj_new_list(ctx, a.u.l->n + b.u.l->n);
    if (r.type != JJ_LIST)
        return ctx->status;
    if (a.u.l->n) /* items is NULL for an empty list */
        memcpy(r.u.l->items, a.u.l->items, a.u.l->n * sizeof(jj_value));
    if (b.u.l->n)
        memcpy(r.u.l->items + a.u.l->n, b.u.l->items, b.u.l->n * sizeof(jj_value));
    r.u.l->n = a.u.l->n + b.u.l->n;
    r.flags = a.flags;
    *out = r;
    return jj_step(ctx, r.u.l->n);
}

static moe_status repeat_seq(jj_ctx *ctx, jj_value s, int64_t times, jj_value *out)
{
    if (times < 0)
        times = 0;
    size_t unit = s.type == JJ_STR ? s.u.s.n : s.u.l->n * sizeof(jj_value);
    if (unit && (uint64_t)times > ctx->lim.max_output_bytes / unit)
        return jj_fail(ctx, MOE_ERR_RANGE, "repetition exceeds the %zu-byte output limit", ctx->lim.max_output_bytes);
    moe_status st = jj_step(ctx, (uint64_t)times);
    if (st != MOE_OK)
        return st;
    if (s.type == JJ_STR) {
        size_t total = unit * (size_t)times;
        char *p = jj_alloc(ctx, total + 1);
        if (!p)
            return ctx->status;
        for (int64_t k = 0; k < times; k++)
            memcpy(p + (size_t)k * unit, s.u.s.p, unit);
        *out = jj_str(p, total);
        return MOE_OK;
    }
    size_t n = s.u.l->n * (size_t)times;
    jj_value r = jj_new_list(ctx, n);
    if (r.type != JJ_LIST)
        return ctx->status;
    for (int64_t k = 0; k < times && s.u.l->n; k++)
        memcpy(r.u.l->items + (size_t)k * s.u.l->n, s.u.l->items, s.u.l->n * sizeof(jj_value));
    r.u.l->n = n;
    r.flags = s.flags;
    *out = r;
    return MOE_OK;
}

static moe_status binop(jj_ctx *ctx, int op, jj_value a, jj_value b, jj_value *out)
{
    if (op == JO_TILDE) {
        jj_value sa, sb;
        moe_status st;
        if ((st = jj_to_str(ctx, a, &sa)) != MOE_OK || (st = jj_to_str(ctx, b, &sb)) != MOE_OK)
            return st;
        return concat_seq(ctx, sa, sb, out);
    }
    if (is_num(a) && is_num(b)) {
        bool fl = a.type == JJ_FLOAT || b.type == JJ_FLOAT;
        int64_t x = as_i(a), y = as_i(b), r;
        double fx = as_f(a), fy = as_f(b);
        switch (op) {
        case JO_ADD:
            if (fl) { *out = jj_float(fx + fy); return MOE_OK; }
            if (__builtin_add_overflow(x, y, &r)) return int_overflow(ctx);
            *out = jj_int(r);
            return MOE_OK;
        case JO_SUB:
            if (fl) { *out = jj_float(fx - fy); return MOE_OK; }
            if (__builtin_sub_overflow(x, y, &r)) return int_overflow(ctx);
            *out = jj_int(r);
            return MOE_OK;
        case JO_MUL:
            if (fl) { *out = jj_float(fx * fy); return MOE_OK; }
            if (__builtin_mul_overflow(x, y, &r)) return int_overflow(ctx);
            *out = jj_int(r);
            return MOE_OK;
        case JO_DIV:
            if (fy == 0)
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "division by zero");
            *out = jj_float(fx / fy);
            return MOE_OK;
        case JO_FLOORDIV:
        case JO_MOD:
            if (fl) {
                if (fy == 0)
                    return jj_fail(ctx, MOE_ERR_INVALID_ARG, "float division by zero");
                double m = fmod(fx, fy);
                if (m != 0 && ((m < 0) != (fy < 0)))
                    m += fy;
                *out = jj_float(op == JO_MOD ? m : floor((fx - m) / fy + 0.5));
                return MOE_OK;
            }
            if (y == 0)
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1)
                return op == JO_MOD ? (*out = jj_int(0), MOE_OK) : int_overflow(ctx);
            {
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                *out = jj_int(op == JO_MOD ? m : q);
            }
            return MOE_OK;
        case JO_POW:
            if (!fl && y >= 0) {
                int64_t acc = 1, base = x;
                int64_t e = y;
                while (e > 0) {
                    if (e & 1) {
                        if (__builtin_mul_overflow(acc, base, &acc))
                            return int_overflow(ctx);
                    }
                    e >>= 1;
                    if (e && __builtin_mul_overflow(base, base, &base))
                        return int_overflow(ctx);
                }
                *out = jj_int(acc);
                return MOE_OK;
            }
            if (fx == 0 && fy < 0)
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "0.0 cannot be raised to a negative power");
            *out = jj_float(pow(fx, fy));
            return MOE_OK;
        default:
            break;
        }
    }
    if (op == JO_ADD && a.type == JJ_STR && b.type == JJ_STR && ((a.flags | b.flags) & JJ_F_SAFE)) {
        /* Markup + str and str + Markup escape the plain side. */
        moe_status st;
        if ((st = jj_html_escape(ctx, a, &a)) != MOE_OK || (st = jj_html_escape(ctx, b, &b)) != MOE_OK ||
            (st = concat_seq(ctx, a, b, out)) != MOE_OK)
            return st;
        out->flags = JJ_F_SAFE;
        return MOE_OK;
    }
    if (op == JO_ADD && ((a.type == JJ_STR && b.type == JJ_STR) ||
                         (a.type == JJ_LIST && b.type == JJ_LIST && a.flags == b.flags &&
                          !(a.flags & (JJ_F_GEN | JJ_F_RANGE)))))
        return concat_seq(ctx, a, b, out);
    if (op == JO_MUL) {
        const uint8_t lazy = JJ_F_GEN | JJ_F_RANGE;
        if ((a.type == JJ_STR || (a.type == JJ_LIST && !(a.flags & lazy))) && (b.type == JJ_INT || b.type == JJ_BOOL))
            return repeat_seq(ctx, a, as_i(b), out);
        if ((b.type == JJ_STR || (b.type == JJ_LIST && !(b.flags & lazy))) && (a.type == JJ_INT || a.type == JJ_BOOL))
            return repeat_seq(ctx, b, as_i(a), out);
    }
    if (op == JO_MOD && a.type == JJ_STR)
        return jj_format_percent(ctx, a, b, out);
    return type_error(ctx, op, a, b);
}

static moe_status contains(jj_ctx *ctx, jj_value item, jj_value seq, bool *out)
{
    switch (seq.type) {
    case JJ_UNDEF:
        *out = false;
        return MOE_OK;
    case JJ_STR:
        if (item.type != JJ_STR)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "'in <string>' requires string as left operand, not %s",
                           jj_type_name(item));
        if (item.u.s.n == 0) {
            *out = true;
            return MOE_OK;
        }
        *out = false;
        for (size_t i = 0; i + item.u.s.n <= seq.u.s.n; i++)
            if (memcmp(seq.u.s.p + i, item.u.s.p, item.u.s.n) == 0) {
                *out = true;
                break;
            }
        return jj_step(ctx, seq.u.s.n / 64);
    case JJ_LIST:
        *out = false;
        for (size_t i = 0; i < seq.u.l->n; i++)
            if (jj_equal(seq.u.l->items[i], item)) {
                *out = true;
                break;
            }
        return jj_step(ctx, seq.u.l->n);
    case JJ_DICT:
        *out = jj_dict_find(seq.u.d, item) >= 0;
        return MOE_OK;
    default:
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "argument of type '%s' is not iterable", jj_type_name(seq));
    }
}

static moe_status compare_op(jj_ctx *ctx, int op, jj_value a, jj_value b, bool *out)
{
    moe_status st;
    int c;
    switch (op) {
    case JO_EQ: *out = jj_equal(a, b); return MOE_OK;
    case JO_NE: *out = !jj_equal(a, b); return MOE_OK;
    case JO_IN: return contains(ctx, a, b, out);
    case JO_NOTIN:
        st = contains(ctx, a, b, out);
        *out = !*out;
        return st;
    default:
        break;
    }
    if (a.type == JJ_UNDEF || b.type == JJ_UNDEF)
        return type_error(ctx, op, a, b);
    if ((st = jj_compare(ctx, a, b, false, &c)) != MOE_OK)
        return st;
    /* NaN compares false both ways in Python. */
    if ((a.type == JJ_FLOAT && isnan(a.u.f)) || (b.type == JJ_FLOAT && isnan(b.u.f))) {
        *out = false;
        return MOE_OK;
    }
    switch (op) {
    case JO_LT: *out = c < 0; break;
    case JO_LE: *out = c <= 0; break;
    case JO_GT: *out = c > 0; break;
    default: *out = c >= 0; break;
    }
    return MOE_OK;
}

/* ---- expressions ----------------------------------------------------------- */

static moe_status eval_inner(jj_ctx *ctx, const jj_node *n, jj_scope *sc, jj_value *out)
{
    moe_status st;
    jj_value a, b;
    switch (n->kind) {
    case JN_CONST:
        *out = n->lit;
        return MOE_OK;
    case JN_NAME:
        if (!scope_lookup(sc, n->s, n->n, out))
            *out = jj_undef(n->s, n->n);
        return MOE_OK;
    case JN_LIST:
    case JN_TUPLE: {
        jj_value l = jj_new_list(ctx, n->n_kids);
        if (l.type != JJ_LIST)
            return ctx->status;
        for (size_t i = 0; i < n->n_kids; i++)
            if ((st = eval(ctx, n->kids[i], sc, &l.u.l->items[l.u.l->n++])) != MOE_OK)
                return st;
        if (n->kind == JN_TUPLE)
            l.flags = JJ_F_TUPLE;
        *out = l;
        return MOE_OK;
    }
    case JN_DICT: {
        jj_value d = jj_new_dict(ctx);
        if (d.type != JJ_DICT)
            return ctx->status;
        for (size_t i = 0; i < n->n_kids; i++) {
            if ((st = eval(ctx, n->kids[i]->a, sc, &a)) != MOE_OK ||
                (st = eval(ctx, n->kids[i]->b, sc, &b)) != MOE_OK)
                return st;
            at(ctx, n->kids[i]);
            if ((st = jj_dict_set(ctx, d.u.d, a, b)) != MOE_OK)
                return st;
        }
        *out = d;
        return MOE_OK;
    }
    case JN_GETATTR:
        if ((st = eval(ctx, n->a, sc, &a)) != MOE_OK)
            return st;
        at(ctx, n);
        return jj_getattr(ctx, a, n->s, n->n, out);
    case JN_GETITEM:
        if ((st = eval(ctx, n->a, sc, &a)) != MOE_OK || (st = eval(ctx, n->b, sc, &b)) != MOE_OK)
            return st;
        at(ctx, n);
        return jj_getitem(ctx, a, b, out);
    case JN_SLICE: {
        jj_value parts[3] = {jj_none(), jj_none(), jj_none()};
        const jj_node *pn[3] = {n->b, n->c, n->d};
        if ((st = eval(ctx, n->a, sc, &a)) != MOE_OK)
            return st;
        for (int k = 0; k < 3; k++)
            if (pn[k] && (st = eval(ctx, pn[k], sc, &parts[k])) != MOE_OK)
                return st;
        at(ctx, n);
        return jj_slice(ctx, a, parts[0], parts[1], parts[2], out);
    }
    case JN_CALL:
        return eval_call(ctx, n, sc, NULL, out);
    case JN_FILTER: {
        argbuf ab;
        if ((st = eval(ctx, n->a, sc, &a)) != MOE_OK || (st = eval_args(ctx, n->kids, n->n_kids, sc, &ab)) != MOE_OK)
            return st;
        at(ctx, n);
        return jj_apply_filter(ctx, n->id, a, &ab.a, out);
    }
    case JN_TEST: {
        argbuf ab;
        bool r;
        if ((st = eval(ctx, n->a, sc, &a)) != MOE_OK || (st = eval_args(ctx, n->kids, n->n_kids, sc, &ab)) != MOE_OK)
            return st;
        at(ctx, n);
        if ((st = jj_apply_test(ctx, n->id, a, &ab.a, &r)) != MOE_OK)
            return st;
        *out = jj_bool((n->flags & 1) ? !r : r);
        return MOE_OK;
    }
    case JN_NOT:
        if ((st = eval(ctx, n->a, sc, &a)) != MOE_OK)
            return st;
        *out = jj_bool(!jj_truthy(a));
        return MOE_OK;
    case JN_NEG:
    case JN_POS:
        if ((st = eval(ctx, n->a, sc, &a)) != MOE_OK)
            return st;
        at(ctx, n);
        if (!is_num(a))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "bad operand type for unary %s: '%s'",
                           n->kind == JN_NEG ? "-" : "+", jj_type_name(a));
        if (n->kind == JN_POS)
            *out = a.type == JJ_FLOAT ? a : jj_int(as_i(a));
        else if (a.type == JJ_FLOAT)
            *out = jj_float(-a.u.f);
        else if (as_i(a) == INT64_MIN)
            return int_overflow(ctx);
        else
            *out = jj_int(-as_i(a));
        return MOE_OK;
    case JN_BINOP:
        if ((st = eval(ctx, n->a, sc, &a)) != MOE_OK || (st = eval(ctx, n->b, sc, &b)) != MOE_OK)
            return st;
        at(ctx, n);
        return binop(ctx, n->op, a, b, out);
    case JN_COMPARE: {
        if ((st = eval(ctx, n->a, sc, &a)) != MOE_OK)
            return st;
        bool r = true;
        for (size_t i = 0; i < n->n_kids && r; i++) {
            if ((st = eval(ctx, n->kids[i]->a, sc, &b)) != MOE_OK)
                return st;
            at(ctx, n->kids[i]);
            if ((st = compare_op(ctx, n->kids[i]->op, a, b, &r)) != MOE_OK)
                return st;
            a = b;
        }
        *out = jj_bool(r);
        return MOE_OK;
    }
    case JN_AND:
    case JN_OR:
        if ((st = eval(ctx, n->a, sc, &a)) != MOE_OK)
            return st;
        if (jj_truthy(a) == (n->kind == JN_OR)) {
            *out = a;
            return MOE_OK;
        }
        return eval(ctx, n->b, sc, out);
    case JN_CONDEXPR:
        if ((st = eval(ctx, n->a, sc, &a)) != MOE_OK)
            return st;
        if (jj_truthy(a))
            return eval(ctx, n->b, sc, out);
        if (n->c)
            return eval(ctx, n->c, sc, out);
        *out = jj_undef(NULL, 0);
        return MOE_OK;
    default:
        return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct in expression");
    }
}

static moe_status eval(jj_ctx *ctx, const jj_node *n, jj_scope *sc, jj_value *out)
{
    moe_status st = enter(ctx, n);
    if (st == MOE_OK)
        st = eval_inner(ctx, n, sc, out);
    ctx->depth--;
    return st;
}

/* ---- statements -------------------------------------------------------------- */

static moe_status apply_filter_list(jj_ctx *ctx, jj_node *const *filters, size_t n, jj_scope *sc, jj_value *v)
{
    for (size_t i = 0; i < n; i++) {
        argbuf ab;
        moe_status st = eval_args(ctx, filters[i]->kids, filters[i]->n_kids, sc, &ab);
        if (st != MOE_OK)
            return st;
        at(ctx, filters[i]);
        if ((st = jj_apply_filter(ctx, filters[i]->id, *v, &ab.a, v)) != MOE_OK)
            return st;
    }
    return MOE_OK;
}

static moe_status assign(jj_ctx *ctx, const jj_node *target, jj_value v, jj_scope *sc)
{
    if (target->kind == JN_GETATTR) {
        jj_value ns;
        if (!scope_lookup(sc, target->a->s, target->a->n, &ns) || ns.type != JJ_NS) {
            at(ctx, target);
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "cannot assign attribute '%.*s': '%.*s' is not a namespace()",
                           (int)(target->n > 60 ? 60 : target->n), target->s,
                           (int)(target->a->n > 60 ? 60 : target->a->n), target->a->s);
        }
        return jj_dict_set_str(ctx, ns.u.d, target->s, target->n, v);
    }
    return bind_target(ctx, target, v, sc);
}

/* Empties an iteration scope for reuse: Jinja2 starts every iteration of a
 * loop body afresh, so a `set` in one iteration is not seen by the next
 * (the outer value is), and nothing set in the body survives the loop. */
static void scope_reset(jj_scope *s)
{
    s->vars.n = 0;
    s->vars.slots = NULL;
    s->vars.n_slots = 0;
}

static moe_status exec_for(jj_ctx *ctx, const jj_node *n, jj_scope *sc)
{
    jj_value seq;
    moe_status st = eval(ctx, n->b, sc, &seq);
    if (st != MOE_OK)
        return st;
    at(ctx, n);
    jj_value *items;
    size_t count;
    if ((st = jj_iterate(ctx, seq, &items, &count)) != MOE_OK)
        return st;
    jj_scope *lsc = scope_new(ctx, sc);
    if (!lsc)
        return ctx->status;
    if (n->c) {
        /* `for x in xs if cond`: filter first, so loop.length and
         * loop.last count only the kept items, as Jinja2 does. */
        jj_value *kept = count ? jj_alloc(ctx, count * sizeof(jj_value)) : items;
        if (!kept)
            return ctx->status;
        size_t k = 0;
        for (size_t i = 0; i < count; i++) {
            jj_value c;
            scope_reset(lsc);
            if ((st = jj_step(ctx, 1)) != MOE_OK || (st = bind_target(ctx, n->a, items[i], lsc)) != MOE_OK ||
                (st = eval(ctx, n->c, lsc, &c)) != MOE_OK)
                return st;
            if (jj_truthy(c))
                kept[k++] = items[i];
        }
        items = kept;
        count = k;
    }
    jj_loop *lp = jj_alloc(ctx, sizeof *lp);
    if (!lp)
        return ctx->status;
    memset(lp, 0, sizeof *lp);
    lp->items = items;
    lp->n = count;
    jj_value loopv = {.type = JJ_LOOP};
    loopv.u.loop = lp;
    for (size_t i = 0; i < count; i++) {
        lp->i = i;
        scope_reset(lsc);
        if ((st = jj_step(ctx, 1)) != MOE_OK || (st = scope_set(ctx, lsc, "loop", 4, loopv)) != MOE_OK ||
            (st = bind_target(ctx, n->a, items[i], lsc)) != MOE_OK)
            return st;
        st = exec_body(ctx, n->kids, n->n_kids, lsc);
        if (st != MOE_OK)
            return st;
        if (ctx->ctl == JJ_CTL_BREAK) {
            ctx->ctl = JJ_CTL_NONE;
            break;
        }
        ctx->ctl = JJ_CTL_NONE;
    }
    if (count == 0 && n->n_kids2) {
        scope_reset(lsc);
        return exec_body(ctx, n->kids2, n->n_kids2, lsc);
    }
    return MOE_OK;
}

static moe_status exec_stmt_inner(jj_ctx *ctx, const jj_node *n, jj_scope *sc)
{
    moe_status st;
    jj_value v;
    switch (n->kind) {
    case JN_TEXT:
        return jj_buf_append(ctx, ctx->out, n->s, n->n);
    case JN_OUTPUT:
        if ((st = eval(ctx, n->a, sc, &v)) != MOE_OK)
            return st;
        at(ctx, n);
        return jj_buf_put_str(ctx, ctx->out, v);
    case JN_IF:
        if ((st = eval(ctx, n->a, sc, &v)) != MOE_OK)
            return st;
        if (jj_truthy(v))
            return exec_body(ctx, n->kids, n->n_kids, sc);
        return exec_body(ctx, n->kids2, n->n_kids2, sc);
    case JN_FOR:
        return exec_for(ctx, n, sc);
    case JN_SET:
        if ((st = eval(ctx, n->b, sc, &v)) != MOE_OK)
            return st;
        return assign(ctx, n->a, v, sc);
    case JN_SET_BLOCK:
        if ((st = capture(ctx, n->kids, n->n_kids, sc, &v)) != MOE_OK ||
            (st = apply_filter_list(ctx, n->kids2, n->n_kids2, sc, &v)) != MOE_OK)
            return st;
        return assign(ctx, n->a, v, sc);
    case JN_FILTER_BLOCK:
        if ((st = capture(ctx, n->kids, n->n_kids, sc, &v)) != MOE_OK ||
            (st = apply_filter_list(ctx, n->kids2, n->n_kids2, sc, &v)) != MOE_OK)
            return st;
        at(ctx, n);
        return jj_buf_put_str(ctx, ctx->out, v);
    case JN_MACRO:
    case JN_CALL_BLOCK: {
        jj_func *fn = jj_alloc(ctx, sizeof *fn);
        if (!fn)
            return ctx->status;
        memset(fn, 0, sizeof *fn);
        fn->kind = n->kind == JN_MACRO ? JF_MACRO : JF_CALLER;
        fn->node = n;
        fn->closure = sc;
        v.type = JJ_FUNC;
        v.flags = 0;
        v.u.fn = fn;
        if (n->kind == JN_MACRO)
            return scope_set(ctx, sc, n->s, n->n, v);
        jj_value out;
        if ((st = eval_call(ctx, n->a, sc, &v, &out)) != MOE_OK)
            return st;
        return jj_buf_put_str(ctx, ctx->out, out);
    }
    case JN_BREAK:
        ctx->ctl = JJ_CTL_BREAK;
        return MOE_OK;
    case JN_CONTINUE:
        ctx->ctl = JJ_CTL_CONTINUE;
        return MOE_OK;
    case JN_DO:
        return eval(ctx, n->a, sc, &v);
    case JN_WITH: {
        jj_scope *wsc = scope_new(ctx, sc);
        if (!wsc)
            return ctx->status;
        for (size_t i = 0; i < n->n_kids2; i++) {
            if ((st = eval(ctx, n->kids2[i]->b, wsc, &v)) != MOE_OK ||
                (st = bind_target(ctx, n->kids2[i]->a, v, wsc)) != MOE_OK)
                return st;
        }
        return exec_body(ctx, n->kids, n->n_kids, wsc);
    }
    default:
        return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: statement");
    }
}

static moe_status exec_body(jj_ctx *ctx, jj_node *const *kids, size_t n, jj_scope *sc)
{
    for (size_t i = 0; i < n; i++) {
        moe_status st = enter(ctx, kids[i]);
        if (st == MOE_OK)
            st = exec_stmt_inner(ctx, kids[i], sc);
        ctx->depth--;
        if (st != MOE_OK)
            return st;
        if (ctx->ctl != JJ_CTL_NONE)
            return MOE_OK;
    }
    return MOE_OK;
}

moe_status jj_render(jj_ctx *ctx, const jj_template *tpl, jj_buf *out)
{
    ctx->out = out;
    ctx->ctl = JJ_CTL_NONE;
    return exec_body(ctx, tpl->body, tpl->n_body, ctx->root);
}

/*
 * jinja-methods.c — Python methods templates call on values (dict.get,
 * list.append, loop.cycle...; str methods are in jinja-str.c), and the
 * global functions (range, namespace, dict, raise_exception, strftime_now).
 *
 * Transformers' sandbox forbids mutating lists and dicts; templates
 * written for other runtimes (llama.cpp, vLLM) use append/pop, and
 * allowing them cannot produce a wrong prompt for a template transformers
 * accepts, so they are supported. strftime_now formats with English names
 * regardless of the C locale.
 */
#include "jinja.h"

#include "util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define NAME_IS(name, n, lit) ((n) == sizeof(lit) - 1 && memcmp((name), (lit), (n)) == 0)

/* Every Python method of each type is listed, so `s.zfill` is a method
 * here as in Python; the ones after the blank line are not implemented and
 * calling them is MOE_ERR_UNSUPPORTED naming the method. */
static const char *const k_str_methods[] = {
    "upper", "lower", "strip", "lstrip", "rstrip", "split", "rsplit", "startswith",
    "endswith", "replace", "find", "rfind", "index", "count", "format", "title",
    "capitalize", "join", "isdigit", "isalpha", "isalnum", "isspace", "isupper",
    "islower", "splitlines", "removeprefix", "removesuffix", "casefold",

    "center", "ljust", "rjust", "zfill", "expandtabs", "swapcase", "partition",
    "rpartition", "translate", "maketrans", "encode", "isnumeric", "isdecimal",
    "isidentifier", "isprintable", "istitle", "isascii", "rindex", "format_map", NULL,
};
static const char *const k_dict_methods[] = {
    "items", "keys", "values", "get", "pop", "update", "copy", "setdefault", "clear",

    "popitem", "fromkeys", NULL,
};
static const char *const k_list_methods[] = {
    "append", "pop", "extend", "insert", "index", "count", "remove", "reverse", "copy", "clear",

    "sort", NULL,
};

static bool in_table(const char *const *t, const char *name, size_t n)
{
    for (size_t i = 0; t[i]; i++)
        if (strlen(t[i]) == n && memcmp(t[i], name, n) == 0)
            return true;
    return false;
}

bool jj_has_method(jj_value obj, const char *name, size_t n)
{
    switch (obj.type) {
    case JJ_STR: return in_table(k_str_methods, name, n);
    case JJ_DICT: return in_table(k_dict_methods, name, n);
    case JJ_LIST: return in_table(k_list_methods, name, n);
    case JJ_LOOP: return NAME_IS(name, n, "cycle") || NAME_IS(name, n, "changed");
    default: return false;
    }
}

static moe_status dict_method(jj_ctx *ctx, jj_value d, const char *name, size_t n, const jj_args *a, jj_value *out)
{
    moe_status st = MOE_OK;
    jj_value k, v;
    jj_dict *dd = d.u.d;
#define M(lit) NAME_IS(name, n, lit)
    if (M("items") || M("keys") || M("values")) {
        jj_value list = jj_new_list(ctx, dd->n);
        if (list.type != JJ_LIST)
            return ctx->status;
        for (size_t i = 0; i < dd->n; i++) {
            if (M("items")) {
                jj_value pair = jj_new_list(ctx, 2);
                if (pair.type != JJ_LIST)
                    return ctx->status;
                pair.flags = JJ_F_TUPLE;
                pair.u.l->items[0] = dd->keys[i];
                pair.u.l->items[1] = dd->vals[i];
                pair.u.l->n = 2;
                list.u.l->items[i] = pair;
            } else {
                list.u.l->items[i] = M("keys") ? dd->keys[i] : dd->vals[i];
            }
        }
        list.u.l->n = dd->n;
        *out = list;
        return jj_step(ctx, dd->n);
    }
    if (M("get") || M("pop") || M("setdefault")) {
        if (!jj_arg(a, 0, "key", &k))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "%.*s() takes at least 1 argument", (int)n, name);
        bool has_def = jj_arg(a, 1, "default", &v);
        long i = jj_dict_find(dd, k);
        if (i >= 0) {
            *out = dd->vals[i];
            if (M("pop"))
                return jj_dict_remove(ctx, dd, (size_t)i);
            return MOE_OK;
        }
        if (M("pop") && !has_def)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "pop(): key not found");
        *out = has_def ? v : jj_none();
        if (M("setdefault"))
            return jj_dict_set(ctx, dd, k, *out);
        return MOE_OK;
    }
    if (M("update")) {
        if (jj_arg(a, 0, NULL, &v)) {
            if (v.type != JJ_DICT)
                return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: update() from a non-dict");
            for (size_t i = 0; i < v.u.d->n && st == MOE_OK; i++)
                st = jj_dict_set(ctx, dd, v.u.d->keys[i], v.u.d->vals[i]);
        }
        for (size_t i = 0; i < a->n_kw && st == MOE_OK; i++)
            st = jj_dict_set_str(ctx, dd, a->kw_names[i], a->kw_lens[i], a->kw_vals[i]);
        *out = jj_none();
        return st;
    }
    if (M("copy")) {
        jj_value c = jj_new_dict(ctx);
        if (c.type != JJ_DICT)
            return ctx->status;
        for (size_t i = 0; i < dd->n && st == MOE_OK; i++)
            st = jj_dict_set(ctx, c.u.d, dd->keys[i], dd->vals[i]);
        *out = c;
        return st;
    }
    if (M("clear")) {
        memset(dd, 0, sizeof *dd);
        *out = jj_none();
        return MOE_OK;
    }
#undef M
    return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: dict method '%.*s'", (int)n, name);
}

static moe_status list_method(jj_ctx *ctx, jj_value l, const char *name, size_t n, const jj_args *a, jj_value *out)
{
    jj_list *ll = l.u.l;
    jj_value x, y;
    moe_status st = MOE_OK;
    bool tuple = (l.flags & (JJ_F_TUPLE | JJ_F_RANGE)) != 0; /* immutable */
#define M(lit) NAME_IS(name, n, lit)
    bool mutating = M("append") || M("pop") || M("extend") || M("insert") || M("remove") || M("reverse") || M("clear");
    if (tuple && mutating)
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "'%s' object has no attribute '%.*s'", jj_type_name(l), (int)n,
                       name);
    *out = jj_none();
    if (M("append")) {
        if (!jj_arg(a, 0, NULL, &x))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "append() takes exactly one argument");
        return jj_list_push(ctx, ll, x);
    }
    if (M("extend")) {
        jj_value *items;
        size_t cnt;
        if (!jj_arg(a, 0, NULL, &x))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "extend() takes exactly one argument");
        if ((st = jj_iterate(ctx, x, &items, &cnt)) != MOE_OK)
            return st;
        /* items may alias ll->items (l.extend(l)): copy the count first. */
        for (size_t k = 0; k < cnt && st == MOE_OK; k++)
            st = jj_list_push(ctx, ll, items[k]);
        return st;
    }
    if (M("pop")) {
        int64_t idx = -1;
        if (jj_arg(a, 0, NULL, &x)) {
            if (x.type != JJ_INT)
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "pop(): index must be an integer");
            idx = x.u.i;
        }
        if (ll->n == 0)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "pop from empty list");
        if (idx < 0)
            idx += (int64_t)ll->n;
        if (idx < 0 || (uint64_t)idx >= ll->n)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "pop index out of range");
        *out = ll->items[idx];
        memmove(ll->items + idx, ll->items + idx + 1, (ll->n - (size_t)idx - 1) * sizeof(jj_value));
        ll->n--;
        return jj_step(ctx, ll->n);
    }
    if (M("insert")) {
        if (!jj_arg(a, 0, NULL, &x) || !jj_arg(a, 1, NULL, &y) || x.type != JJ_INT)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "insert() takes an index and a value");
        int64_t idx = x.u.i;
        if (idx < 0)
            idx += (int64_t)ll->n;
        if (idx < 0)
            idx = 0;
        if ((uint64_t)idx > ll->n)
            idx = (int64_t)ll->n;
        if ((st = jj_list_push(ctx, ll, y)) != MOE_OK)
            return st;
        memmove(ll->items + idx + 1, ll->items + idx, (ll->n - 1 - (size_t)idx) * sizeof(jj_value));
        ll->items[idx] = y;
        return jj_step(ctx, ll->n);
    }
    if (M("index") || M("count") || M("remove")) {
        if (!jj_arg(a, 0, NULL, &x))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "%.*s() takes exactly one argument", (int)n, name);
        if ((st = jj_step(ctx, ll->n)) != MOE_OK)
            return st;
        int64_t c = 0;
        for (size_t k = 0; k < ll->n; k++) {
            if (!jj_equal(ll->items[k], x))
                continue;
            if (M("index")) {
                *out = jj_int((int64_t)k);
                return MOE_OK;
            }
            if (M("remove")) {
                memmove(ll->items + k, ll->items + k + 1, (ll->n - k - 1) * sizeof(jj_value));
                ll->n--;
                return MOE_OK;
            }
            c++;
        }
        if (M("count")) {
            *out = jj_int(c);
            return MOE_OK;
        }
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "%.*s(x): x not in list", (int)n, name);
    }
    if (M("reverse")) {
        for (size_t i = 0, j = ll->n; i + 1 < j; i++, j--) {
            jj_value t = ll->items[i];
            ll->items[i] = ll->items[j - 1];
            ll->items[j - 1] = t;
        }
        return MOE_OK;
    }
    if (M("copy")) {
        jj_value c = jj_new_list(ctx, ll->n);
        if (c.type != JJ_LIST)
            return ctx->status;
        if (ll->n)
            memcpy(c.u.l->items, ll->items, ll->n * sizeof(jj_value));
        c.u.l->n = ll->n;
        *out = c;
        return jj_step(ctx, ll->n);
    }
    if (M("clear")) {
        ll->n = 0;
        return MOE_OK;
    }
#undef M
    return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: list method '%.*s'", (int)n, name);
}

moe_status jj_call_method(jj_ctx *ctx, jj_value obj, const char *name, size_t n,
                          const jj_args *args, jj_value *out)
{
    switch (obj.type) {
    case JJ_STR:
        return jj_str_method(ctx, obj, name, n, args, out);
    case JJ_DICT:
        return dict_method(ctx, obj, name, n, args, out);
    case JJ_LIST:
        return list_method(ctx, obj, name, n, args, out);
    case JJ_LOOP:
        if (NAME_IS(name, n, "changed")) {
            /* True when the arguments differ from the previous call's. */
            jj_value t = jj_new_list(ctx, args->n_pos);
            if (t.type != JJ_LIST)
                return ctx->status;
            if (args->n_pos)
                memcpy(t.u.l->items, args->pos, args->n_pos * sizeof(jj_value));
            t.u.l->n = args->n_pos;
            t.flags = JJ_F_TUPLE;
            jj_loop *lp = obj.u.loop;
            bool changed = !lp->has_changed || !jj_equal(lp->last_changed, t);
            lp->last_changed = t;
            lp->has_changed = true;
            *out = jj_bool(changed);
            return MOE_OK;
        }
        if (NAME_IS(name, n, "cycle")) {
            if (args->n_pos == 0)
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "loop.cycle() needs at least one argument");
            *out = args->pos[obj.u.loop->i % args->n_pos];
            return MOE_OK;
        }
        break;
    default:
        break;
    }
    return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: method '%.*s' of %s",
                   (int)(n > 40 ? 40 : n), name, jj_type_name(obj));
}

/* ---- globals ------------------------------------------------------------------ */

static const char *const k_globals[JG_COUNT] = {
    [JG_RANGE] = "range",
    [JG_NAMESPACE] = "namespace",
    [JG_DICT] = "dict",
    [JG_RAISE] = "raise_exception",
    [JG_STRFTIME] = "strftime_now",
};

const char *jj_global_name(int id)
{
    return id >= 0 && id < JG_COUNT ? k_globals[id] : NULL;
}

static const char *const k_months[] = {"January", "February", "March", "April", "May", "June", "July",
                                       "August", "September", "October", "November", "December"};
static const char *const k_days[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};

/* strftime for the codes chat templates use, with English names. */
static moe_status strftime_en(jj_ctx *ctx, jj_value fmt, jj_value *out)
{
    struct tm tmv;
    time_t now = ctx->now;
#ifdef _WIN32
    if (localtime_s(&tmv, &now) != 0)
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "strftime_now: cannot read the local time");
#else
    if (!localtime_r(&now, &tmv))
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "strftime_now: cannot read the local time");
#endif
    jj_buf b = {0};
    moe_status st = MOE_OK;
    const char *p = fmt.u.s.p;
    size_t n = fmt.u.s.n;
    for (size_t i = 0; i < n && st == MOE_OK; i++) {
        if (p[i] != '%' || i + 1 >= n) {
            st = jj_buf_append(ctx, &b, p + i, 1);
            continue;
        }
        char c = p[++i], tmp[32];
        int mon = tmv.tm_mon >= 0 && tmv.tm_mon < 12 ? tmv.tm_mon : 0;
        int wd = tmv.tm_wday >= 0 && tmv.tm_wday < 7 ? tmv.tm_wday : 0;
        switch (c) {
        case 'Y': snprintf(tmp, sizeof tmp, "%d", tmv.tm_year + 1900); break;
        case 'y': snprintf(tmp, sizeof tmp, "%02d", (tmv.tm_year + 1900) % 100); break;
        case 'm': snprintf(tmp, sizeof tmp, "%02d", tmv.tm_mon + 1); break;
        case 'd': snprintf(tmp, sizeof tmp, "%02d", tmv.tm_mday); break;
        case 'e': snprintf(tmp, sizeof tmp, "%2d", tmv.tm_mday); break;
        case 'j': snprintf(tmp, sizeof tmp, "%03d", tmv.tm_yday + 1); break;
        case 'H': snprintf(tmp, sizeof tmp, "%02d", tmv.tm_hour); break;
        case 'I': snprintf(tmp, sizeof tmp, "%02d", tmv.tm_hour % 12 ? tmv.tm_hour % 12 : 12); break;
        case 'M': snprintf(tmp, sizeof tmp, "%02d", tmv.tm_min); break;
        case 'S': snprintf(tmp, sizeof tmp, "%02d", tmv.tm_sec); break;
        case 'p': snprintf(tmp, sizeof tmp, "%s", tmv.tm_hour < 12 ? "AM" : "PM"); break;
        case 'b': snprintf(tmp, sizeof tmp, "%.3s", k_months[mon]); break;
        case 'B': snprintf(tmp, sizeof tmp, "%s", k_months[mon]); break;
        case 'a': snprintf(tmp, sizeof tmp, "%.3s", k_days[wd]); break;
        case 'A': snprintf(tmp, sizeof tmp, "%s", k_days[wd]); break;
        case '%': snprintf(tmp, sizeof tmp, "%%"); break;
        default:
            return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: strftime code %%%c", c);
        }
        st = jj_buf_append(ctx, &b, tmp, strlen(tmp));
    }
    *out = jj_buf_value(&b);
    return st;
}

static moe_status int_arg(jj_ctx *ctx, jj_value v, int64_t *out)
{
    if (v.type == JJ_INT || v.type == JJ_BOOL) {
        *out = v.type == JJ_INT ? v.u.i : v.u.b;
        return MOE_OK;
    }
    return jj_fail(ctx, MOE_ERR_INVALID_ARG, "range(): '%s' object cannot be interpreted as an integer",
                   jj_type_name(v));
}

moe_status jj_call_global(jj_ctx *ctx, int id, const jj_args *a, jj_value *out)
{
    moe_status st = MOE_OK;
    switch (id) {
    case JG_RANGE: {
        int64_t start = 0, stop = 0, step = 1;
        if (a->n_pos < 1 || a->n_pos > 3 || a->n_kw)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "range() takes 1 to 3 positional arguments");
        if (a->n_pos == 1) {
            if ((st = int_arg(ctx, a->pos[0], &stop)) != MOE_OK)
                return st;
        } else {
            if ((st = int_arg(ctx, a->pos[0], &start)) != MOE_OK || (st = int_arg(ctx, a->pos[1], &stop)) != MOE_OK)
                return st;
            if (a->n_pos == 3 && (st = int_arg(ctx, a->pos[2], &step)) != MOE_OK)
                return st;
        }
        if (step == 0)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "range() arg 3 must not be zero");
        /* Count in floating point to dodge overflow, then bound it. */
        double cnt_f = step > 0 ? ((double)stop - (double)start) / (double)step
                                : ((double)start - (double)stop) / (double)-step;
        uint64_t cnt = 0;
        if (cnt_f > 0) {
            if (cnt_f > (double)ctx->lim.max_steps)
                return jj_fail(ctx, MOE_ERR_RANGE, "range() of more than %llu items",
                               (unsigned long long)ctx->lim.max_steps);
            cnt = (uint64_t)cnt_f;
            if ((double)cnt < cnt_f)
                cnt++;
        }
        if ((st = jj_step(ctx, cnt)) != MOE_OK)
            return st;
        jj_value l = jj_new_list(ctx, (size_t)cnt);
        if (l.type != JJ_LIST)
            return ctx->status;
        for (uint64_t k = 0; k < cnt; k++)
            l.u.l->items[k] = jj_int(start + (int64_t)k * step);
        l.u.l->n = (size_t)cnt;
        l.flags = JJ_F_RANGE;
        *out = l;
        return MOE_OK;
    }
    case JG_NAMESPACE:
    case JG_DICT: {
        jj_value d = id == JG_NAMESPACE ? jj_new_ns(ctx) : jj_new_dict(ctx);
        if (d.type == JJ_UNDEF)
            return ctx->status;
        if (a->n_pos > 1)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "%s() takes at most 1 positional argument",
                           k_globals[id]);
        if (a->n_pos == 1) {
            jj_value src = a->pos[0];
            if (src.type == JJ_DICT || src.type == JJ_NS) {
                for (size_t i = 0; i < src.u.d->n && st == MOE_OK; i++)
                    st = jj_dict_set(ctx, d.u.d, src.u.d->keys[i], src.u.d->vals[i]);
            } else if (src.type == JJ_LIST) {
                for (size_t i = 0; i < src.u.l->n && st == MOE_OK; i++) {
                    jj_value pr = src.u.l->items[i];
                    if (pr.type != JJ_LIST || pr.u.l->n != 2)
                        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "%s(): sequence items must be pairs", k_globals[id]);
                    st = jj_dict_set(ctx, d.u.d, pr.u.l->items[0], pr.u.l->items[1]);
                }
            } else {
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "%s(): '%s' object is not iterable", k_globals[id],
                               jj_type_name(src));
            }
        }
        for (size_t i = 0; i < a->n_kw && st == MOE_OK; i++)
            st = jj_dict_set_str(ctx, d.u.d, a->kw_names[i], a->kw_lens[i], a->kw_vals[i]);
        *out = d;
        return st;
    }
    case JG_RAISE: {
        jj_value msg = jj_str("", 0);
        if (a->n_pos >= 1 && (st = jj_to_str(ctx, a->pos[0], &msg)) != MOE_OK)
            return st;
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "raise_exception: %.*s",
                       (int)(msg.u.s.n > 380 ? 380 : msg.u.s.n), msg.u.s.p);
    }
    case JG_STRFTIME: {
        jj_value fmt;
        if (!jj_arg(a, 0, NULL, &fmt) || fmt.type != JJ_STR)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "strftime_now() needs a format string");
        return strftime_en(ctx, fmt, out);
    }
    default:
        return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: global function");
    }
}

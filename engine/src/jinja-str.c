/*
 * jinja-str.c — Python's str methods for templates (split, strip,
 * replace, find, format, startswith...), Python's `%` formatting, case
 * mapping, and Markup (|safe) strings' escaping variants of them.
 *
 * Semantics are Python's: split() without a separator splits on runs of
 * whitespace, strip() without arguments strips Unicode whitespace, find()
 * and index() count code points, replace('') inserts between characters.
 * Methods Python has but this file does not implement are listed in
 * jinja-methods.c so that calling one is MOE_ERR_UNSUPPORTED naming it.
 */
#include "jinja.h"

#include "util.h"

#include <stdio.h>
#include <string.h>

#define NAME_IS(name, n, lit) ((n) == sizeof(lit) - 1 && memcmp((name), (lit), (n)) == 0)

static bool in_table(const char *const *t, const char *name, size_t n)
{
    for (size_t i = 0; t[i]; i++)
        if (strlen(t[i]) == n && memcmp(t[i], name, n) == 0)
            return true;
    return false;
}

static bool str_arg(jj_ctx *ctx, const jj_args *a, size_t i, const char *kw, jj_value *out,
                    const char *what, moe_status *st)
{
    if (!jj_arg(a, i, kw, out) || out->type == JJ_NONE)
        return false;
    if (out->type != JJ_STR) {
        *st = jj_fail(ctx, MOE_ERR_INVALID_ARG, "%s: expected a string argument, got %s", what,
                      jj_type_name(*out));
        return false;
    }
    return true;
}

static bool in_chars(uint32_t cp, jj_value chars)
{
    size_t i = 0;
    while (i < chars.u.s.n) {
        size_t adv;
        if (jj_utf8_decode(chars.u.s.p + i, chars.u.s.n - i, &adv) == cp)
            return true;
        i += adv;
    }
    return false;
}

/* strip / lstrip / rstrip with an optional set of characters. */
static jj_value strip(jj_value s, bool left, bool right, const jj_value *chars)
{
    const char *p = s.u.s.p;
    size_t a = 0, b = s.u.s.n;
    if (left) {
        while (a < b) {
            size_t adv;
            uint32_t cp = jj_utf8_decode(p + a, b - a, &adv);
            if (chars ? !in_chars(cp, *chars) : !jj_is_space(cp))
                break;
            a += adv;
        }
    }
    if (right) {
        /* Walk forward, remembering the end of the last kept character. */
        size_t i = a, end = a;
        while (i < b) {
            size_t adv;
            uint32_t cp = jj_utf8_decode(p + i, b - i, &adv);
            i += adv;
            if (chars ? !in_chars(cp, *chars) : !jj_is_space(cp))
                end = i;
        }
        b = end;
    }
    return jj_str(p + a, b - a);
}

static const char *find_sub(const char *h, size_t hn, const char *nd, size_t nn)
{
    if (nn == 0)
        return h;
    if (nn > hn)
        return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && memcmp(h + i, nd, nn) == 0)
            return h + i;
    return NULL;
}

static const char *rfind_sub(const char *h, size_t hn, const char *nd, size_t nn)
{
    if (nn > hn)
        return NULL;
    for (size_t i = hn - nn + 1; i-- > 0;)
        if (memcmp(h + i, nd, nn) == 0)
            return h + i;
    return NULL;
}

static moe_status push_str(jj_ctx *ctx, jj_value list, const char *p, size_t n)
{
    return jj_list_push(ctx, list.u.l, jj_str(p, n));
}

/* Python's str.split / str.rsplit. */
static moe_status split(jj_ctx *ctx, jj_value s, const jj_args *a, bool from_right, jj_value *out)
{
    moe_status st = MOE_OK;
    jj_value sep, maxv;
    bool has_sep = str_arg(ctx, a, 0, "sep", &sep, "split", &st);
    if (st != MOE_OK)
        return st;
    int64_t maxsplit = -1;
    if (jj_arg(a, 1, "maxsplit", &maxv)) {
        if (maxv.type != JJ_INT)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "split: maxsplit must be an integer");
        maxsplit = maxv.u.i;
    }
    jj_value list = jj_new_list(ctx, 0);
    if (list.type != JJ_LIST)
        return ctx->status;
    const char *p = s.u.s.p;
    size_t n = s.u.s.n;
    if ((st = jj_step(ctx, n / 16 + 1)) != MOE_OK)
        return st;
    if (has_sep) {
        if (sep.u.s.n == 0)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "split: empty separator");
        if (!from_right) {
            size_t start = 0;
            int64_t done = 0;
            const char *hit;
            while ((maxsplit < 0 || done < maxsplit) &&
                   (hit = find_sub(p + start, n - start, sep.u.s.p, sep.u.s.n)) != NULL) {
                if ((st = push_str(ctx, list, p + start, (size_t)(hit - (p + start)))) != MOE_OK)
                    return st;
                start = (size_t)(hit - p) + sep.u.s.n;
                done++;
            }
            st = push_str(ctx, list, p + start, n - start);
        } else {
            size_t end = n;
            int64_t done = 0;
            const char *hit;
            while ((maxsplit < 0 || done < maxsplit) && (hit = rfind_sub(p, end, sep.u.s.p, sep.u.s.n)) != NULL) {
                size_t after = (size_t)(hit - p) + sep.u.s.n;
                if ((st = push_str(ctx, list, p + after, end - after)) != MOE_OK)
                    return st;
                end = (size_t)(hit - p);
                done++;
            }
            if ((st = push_str(ctx, list, p, end)) != MOE_OK)
                return st;
            /* Collected right to left: reverse. */
            jj_value *it = list.u.l->items;
            for (size_t i = 0, j = list.u.l->n - 1; i < j; i++, j--) {
                jj_value t = it[i];
                it[i] = it[j];
                it[j] = t;
            }
        }
        *out = list;
        return st;
    }
    /* Whitespace runs. */
    if (!from_right) {
        size_t i = 0;
        int64_t done = 0;
        for (;;) {
            while (i < n) {
                size_t adv;
                if (!jj_is_space(jj_utf8_decode(p + i, n - i, &adv)))
                    break;
                i += adv;
            }
            if (i >= n)
                break;
            if (maxsplit >= 0 && done >= maxsplit) {
                st = push_str(ctx, list, p + i, n - i);
                break;
            }
            size_t w = i;
            while (i < n) {
                size_t adv;
                if (jj_is_space(jj_utf8_decode(p + i, n - i, &adv)))
                    break;
                i += adv;
            }
            if ((st = push_str(ctx, list, p + w, i - w)) != MOE_OK)
                return st;
            done++;
        }
    } else {
        /* rsplit(None): words from the right; the rest keeps its left
         * part verbatim (right-stripped). Collect word spans first. */
        jj_value all = jj_new_list(ctx, 0);
        if (all.type != JJ_LIST)
            return ctx->status;
        size_t i = 0;
        while (i < n) {
            size_t adv;
            while (i < n && jj_is_space(jj_utf8_decode(p + i, n - i, &adv)))
                i += adv;
            if (i >= n)
                break;
            size_t w = i;
            while (i < n && !jj_is_space(jj_utf8_decode(p + i, n - i, &adv)))
                i += adv;
            if ((st = push_str(ctx, all, p + w, i - w)) != MOE_OK)
                return st;
        }
        size_t words = all.u.l->n;
        size_t keep = (maxsplit < 0 || (uint64_t)maxsplit >= words) ? words : (size_t)maxsplit;
        if (keep < words) {
            jj_value first = all.u.l->items[words - keep - 1];
            size_t end = (size_t)(first.u.s.p - p) + first.u.s.n;
            if ((st = push_str(ctx, list, p + (size_t)(all.u.l->items[0].u.s.p - p),
                               end - (size_t)(all.u.l->items[0].u.s.p - p))) != MOE_OK)
                return st;
        }
        for (size_t k = words - keep; k < words && st == MOE_OK; k++)
            st = jj_list_push(ctx, list.u.l, all.u.l->items[k]);
    }
    *out = list;
    return st;
}

static moe_status replace(jj_ctx *ctx, jj_value s, jj_value old, jj_value rep, int64_t count, jj_value *out)
{
    jj_buf b = {0};
    moe_status st = MOE_OK;
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, i = 0;
    int64_t done = 0;
    if (old.u.s.n == 0) {
        /* Python inserts `rep` before every character and at the end. */
        while (st == MOE_OK && (count < 0 || done < count)) {
            st = jj_buf_append(ctx, &b, rep.u.s.p, rep.u.s.n);
            done++;
            if (i >= n)
                break;
            size_t adv;
            jj_utf8_decode(p + i, n - i, &adv);
            if (st == MOE_OK)
                st = jj_buf_append(ctx, &b, p + i, adv);
            i += adv;
        }
        if (st == MOE_OK && i < n)
            st = jj_buf_append(ctx, &b, p + i, n - i);
    } else {
        const char *hit;
        while (st == MOE_OK && (count < 0 || done < count) &&
               (hit = find_sub(p + i, n - i, old.u.s.p, old.u.s.n)) != NULL) {
            size_t k = (size_t)(hit - p);
            st = jj_buf_append(ctx, &b, p + i, k - i);
            if (st == MOE_OK)
                st = jj_buf_append(ctx, &b, rep.u.s.p, rep.u.s.n);
            i = k + old.u.s.n;
            done++;
        }
        if (st == MOE_OK)
            st = jj_buf_append(ctx, &b, p + i, n - i);
    }
    if (st == MOE_OK)
        st = jj_step(ctx, n / 64 + 1);
    *out = jj_buf_value(&b);
    return st;
}

moe_status jj_str_replace(jj_ctx *ctx, jj_value s, jj_value old, jj_value rep, int64_t count, jj_value *out)
{
    return replace(ctx, s, old, rep, count, out);
}

/* Maps every code point through `f`; `title` capitalises word starts
 * (Python's str.title: a letter after a non-letter starts a word). */
static moe_status map_case(jj_ctx *ctx, jj_value s, int mode, jj_value *out)
{
    jj_buf b = {0};
    moe_status st = MOE_OK;
    size_t i = 0;
    bool prev_cased = false, first = true;
    while (st == MOE_OK && i < s.u.s.n) {
        size_t adv;
        uint32_t cp = jj_utf8_decode(s.u.s.p + i, s.u.s.n - i, &adv);
        uint32_t r;
        switch (mode) {
        case 0: r = jj_upper_cp(cp); break;
        case 1: r = jj_lower_cp(cp); break;
        case 2: r = prev_cased ? jj_lower_cp(cp) : jj_upper_cp(cp); break;
        default: r = first ? jj_upper_cp(cp) : jj_lower_cp(cp); break;
        }
        prev_cased = jj_upper_cp(cp) != cp || jj_lower_cp(cp) != cp;
        first = false;
        st = jj_buf_put_cp(ctx, &b, r);
        i += adv;
    }
    *out = jj_buf_value(&b);
    return st;
}

moe_status jj_case(jj_ctx *ctx, jj_value s, int mode, jj_value *out)
{
    return map_case(ctx, s, mode, out);
}

/* Python's str.format with {} / {0} / {name} fields and {{ }} escapes;
 * format specs and conversions other than !s and !r are not supported. */
static moe_status str_format(jj_ctx *ctx, jj_value fmt, const jj_args *a, jj_value *out)
{
    jj_buf b = {0};
    moe_status st = MOE_OK;
    const char *p = fmt.u.s.p;
    size_t n = fmt.u.s.n, i = 0, auto_idx = 0;
    while (st == MOE_OK && i < n) {
        char c = p[i];
        if (c == '}' ) {
            if (i + 1 < n && p[i + 1] == '}') {
                st = jj_buf_append(ctx, &b, "}", 1);
                i += 2;
                continue;
            }
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "format: single '}' encountered in format string");
        }
        if (c != '{') {
            st = jj_buf_append(ctx, &b, p + i, 1);
            i++;
            continue;
        }
        if (i + 1 < n && p[i + 1] == '{') {
            st = jj_buf_append(ctx, &b, "{", 1);
            i += 2;
            continue;
        }
        size_t j = i + 1;
        while (j < n && p[j] != '}' && p[j] != '!' && p[j] != ':')
            j++;
        const char *field = p + i + 1;
        size_t flen = j - i - 1;
        bool repr = false;
        if (j < n && p[j] == '!') {
            if (j + 2 < n && (p[j + 1] == 'r' || p[j + 1] == 's') && p[j + 2] == '}') {
                repr = p[j + 1] == 'r';
                j += 2;
            } else {
                return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: str.format conversion");
            }
        }
        if (j >= n || p[j] != '}')
            return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: str.format field spec");
        jj_value v;
        bool ok;
        if (flen == 0) {
            ok = auto_idx < a->n_pos;
            if (ok)
                v = a->pos[auto_idx++];
        } else if (field[0] >= '0' && field[0] <= '9') {
            size_t idx = 0;
            for (size_t k = 0; k < flen; k++) {
                if (field[k] < '0' || field[k] > '9' || idx > 100000)
                    return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: str.format field");
                idx = idx * 10 + (size_t)(field[k] - '0');
            }
            ok = idx < a->n_pos;
            if (ok)
                v = a->pos[idx];
        } else {
            ok = false;
            for (size_t k = 0; k < a->n_kw; k++)
                if (a->kw_lens[k] == flen && memcmp(a->kw_names[k], field, flen) == 0) {
                    v = a->kw_vals[k];
                    ok = true;
                }
        }
        if (!ok)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "format: no argument for field {%.*s}",
                           (int)(flen > 40 ? 40 : flen), field);
        st = repr ? jj_buf_put_repr(ctx, &b, v, 0) : jj_buf_put_str(ctx, &b, v);
        i = j + 1;
    }
    *out = jj_buf_value(&b);
    return st;
}

/* value % args, for %s %r %d %i %f %e %g %x %X %o %c %% with flags, width
 * and precision; %(name)s takes a dict. The printf spec handed to snprintf
 * is assembled here from flag, digit and conversion characters checked
 * one by one, hence the local -Wformat-nonliteral exemption. */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#endif
moe_status jj_format_percent(jj_ctx *ctx, jj_value fmt, jj_value args, jj_value *out)
{
    jj_buf b = {0};
    moe_status st = MOE_OK;
    const char *p = fmt.u.s.p;
    size_t n = fmt.u.s.n, i = 0, argi = 0;
    bool tuple = args.type == JJ_LIST && (args.flags & JJ_F_TUPLE);
    bool safe = (fmt.flags & JJ_F_SAFE) != 0;
    while (st == MOE_OK && i < n) {
        if (p[i] != '%') {
            st = jj_buf_append(ctx, &b, p + i, 1);
            i++;
            continue;
        }
        i++;
        if (i < n && p[i] == '%') {
            st = jj_buf_append(ctx, &b, "%", 1);
            i++;
            continue;
        }
        jj_value v;
        bool have = false;
        if (i < n && p[i] == '(') {
            size_t j = i + 1;
            while (j < n && p[j] != ')')
                j++;
            if (j >= n || args.type != JJ_DICT)
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "format: %%(name) needs a dict argument");
            long k = jj_dict_find_str(args.u.d, p + i + 1, j - i - 1);
            if (k < 0)
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "format: missing key '%.*s'", (int)(j - i - 1), p + i + 1);
            v = args.u.d->vals[k];
            have = true;
            i = j + 1;
        }
        char spec[32];
        size_t sn = 0;
        spec[sn++] = '%';
        while (i < n && strchr("-+ #0", p[i]) && sn < 8)
            spec[sn++] = p[i++];
        while (i < n && p[i] >= '0' && p[i] <= '9' && sn < 12)
            spec[sn++] = p[i++];
        if (i < n && p[i] == '.') {
            spec[sn++] = p[i++];
            while (i < n && p[i] >= '0' && p[i] <= '9' && sn < 16)
                spec[sn++] = p[i++];
        }
        if (i >= n)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "format: incomplete format");
        char conv = p[i++];
        if (!have) {
            if (tuple) {
                if (argi >= args.u.l->n)
                    return jj_fail(ctx, MOE_ERR_INVALID_ARG, "format: not enough arguments for format string");
                v = args.u.l->items[argi++];
            } else {
                if (argi++ > 0)
                    return jj_fail(ctx, MOE_ERR_INVALID_ARG, "format: not enough arguments for format string");
                v = args;
            }
        }
        char tmp[128];
        switch (conv) {
        case 's':
        case 'r': {
            jj_buf sb = {0};
            st = conv == 's' ? jj_buf_put_str(ctx, &sb, v) : jj_buf_put_repr(ctx, &sb, v, 0);
            if (st != MOE_OK)
                return st;
            if (safe) { /* Markup % x escapes x */
                jj_value e;
                if ((st = jj_html_escape(ctx, jj_buf_value(&sb), &e)) != MOE_OK)
                    return st;
                sb.p = (char *)e.u.s.p;
                sb.n = sb.cap = e.u.s.n;
            }
            /* width/precision for strings: pad with spaces (rare; ASCII). */
            spec[sn++] = 's';
            spec[sn] = 0;
            if (sn == 2) {
                st = jj_buf_append(ctx, &b, sb.p, sb.n);
            } else {
                char *z = jj_alloc(ctx, sb.n + 1);
                if (!z)
                    return ctx->status;
                memcpy(z, sb.p ? sb.p : "", sb.n);
                z[sb.n] = 0;
                int w = snprintf(tmp, sizeof tmp, spec, z);
                if (w < 0 || (size_t)w >= sizeof tmp)
                    st = jj_buf_append(ctx, &b, sb.p, sb.n);
                else
                    st = jj_buf_append(ctx, &b, tmp, (size_t)w);
            }
            break;
        }
        case 'd': case 'i': case 'x': case 'X': case 'o': case 'c': {
            int64_t iv;
            if (v.type == JJ_INT || v.type == JJ_BOOL)
                iv = v.type == JJ_INT ? v.u.i : v.u.b;
            else if (v.type == JJ_FLOAT && v.u.f > -9.2e18 && v.u.f < 9.2e18)
                iv = (int64_t)v.u.f;
            else
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "format: %%%c requires a number, not %s", conv,
                               jj_type_name(v));
            if (conv == 'c') {
                if (iv < 0 || iv > 0x10FFFF)
                    return jj_fail(ctx, MOE_ERR_INVALID_ARG, "format: %%c arg not in range");
                st = jj_buf_put_cp(ctx, &b, (uint32_t)iv);
                break;
            }
            spec[sn++] = 'l';
            spec[sn++] = 'l';
            spec[sn++] = conv == 'i' ? 'd' : conv;
            spec[sn] = 0;
            int w = snprintf(tmp, sizeof tmp, spec, (long long)iv);
            st = jj_buf_append(ctx, &b, tmp, w > 0 && (size_t)w < sizeof tmp ? (size_t)w : 0);
            break;
        }
        case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': {
            if (v.type != JJ_INT && v.type != JJ_FLOAT && v.type != JJ_BOOL)
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "format: %%%c requires a number, not %s", conv,
                               jj_type_name(v));
            double dv = v.type == JJ_FLOAT ? v.u.f : v.type == JJ_INT ? (double)v.u.i : (double)v.u.b;
            spec[sn++] = conv;
            spec[sn] = 0;
            int w = snprintf(tmp, sizeof tmp, spec, dv);
            /* The C library may write the locale's decimal comma. */
            for (int k = 0; k < w && (size_t)k < sizeof tmp; k++)
                if (tmp[k] == ',')
                    tmp[k] = '.';
            st = jj_buf_append(ctx, &b, tmp, w > 0 && (size_t)w < sizeof tmp ? (size_t)w : 0);
            break;
        }
        default:
            return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: %%%c in string formatting", conv);
        }
    }
    if (st == MOE_OK && tuple && argi < args.u.l->n)
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "format: not all arguments converted during string formatting");
    *out = jj_buf_value(&b);
    if (safe)
        out->flags = JJ_F_SAFE;
    return st;
}

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif

static bool str_pred(jj_value s, int kind)
{
    if (s.u.s.n == 0)
        return false;
    bool any_cased = false;
    size_t i = 0;
    while (i < s.u.s.n) {
        size_t adv;
        uint32_t cp = jj_utf8_decode(s.u.s.p + i, s.u.s.n - i, &adv);
        i += adv;
        bool upper = jj_lower_cp(cp) != cp, lower = jj_upper_cp(cp) != cp;
        switch (kind) {
        case 0: if (!(cp >= '0' && cp <= '9')) return false; break;
        case 1: if (!(upper || lower || (cp >= 0x80 && jj_is_alnum_cp(cp)))) return false; break;
        case 2: if (!jj_is_alnum_cp(cp)) return false; break;
        case 3: if (!jj_is_space(cp)) return false; break;
        case 4: if (lower) return false; any_cased |= upper; break;
        default: if (upper) return false; any_cased |= lower; break;
        }
    }
    return kind < 4 ? true : any_cased;
}

bool jj_str_is_lower(jj_value s)
{
    return str_pred(s, 5);
}

bool jj_str_is_upper(jj_value s)
{
    return str_pred(s, 4);
}

static moe_status affix_match(jj_ctx *ctx, jj_value s, const jj_args *a, bool end, jj_value *out)
{
    jj_value what;
    if (!jj_arg(a, 0, NULL, &what))
        return jj_fail(ctx, MOE_ERR_INVALID_ARG, "%s() takes at least 1 argument", end ? "endswith" : "startswith");
    if (a->n_pos > 1)
        return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: start/end arguments of %s()",
                       end ? "endswith" : "startswith");
    const jj_value *cands = &what;
    size_t nc = 1;
    if (what.type == JJ_LIST) {
        cands = what.u.l->items;
        nc = what.u.l->n;
    }
    for (size_t k = 0; k < nc; k++) {
        jj_value c = cands[k];
        if (c.type != JJ_STR)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "%s first arg must be str or a tuple of str, not %s",
                           end ? "endswith" : "startswith", jj_type_name(c));
        if (c.u.s.n <= s.u.s.n &&
            memcmp(s.u.s.p + (end ? s.u.s.n - c.u.s.n : 0), c.u.s.p, c.u.s.n) == 0) {
            *out = jj_bool(true);
            return MOE_OK;
        }
    }
    *out = jj_bool(false);
    return MOE_OK;
}

static moe_status str_method(jj_ctx *ctx, jj_value s, const char *name, size_t n, const jj_args *a, jj_value *out)
{
    moe_status st = MOE_OK;
    jj_value x, y;
#define M(lit) NAME_IS(name, n, lit)
    if (M("upper") || M("lower") || M("title") || M("capitalize") || M("casefold"))
        return map_case(ctx, s, M("upper") ? 0 : (M("lower") || M("casefold")) ? 1 : M("title") ? 2 : 3, out);
    if (M("strip") || M("lstrip") || M("rstrip")) {
        bool has = str_arg(ctx, a, 0, "chars", &x, "strip", &st);
        if (st != MOE_OK)
            return st;
        *out = strip(s, !M("rstrip"), !M("lstrip"), has ? &x : NULL);
        return MOE_OK;
    }
    if (M("split") || M("rsplit"))
        return split(ctx, s, a, M("rsplit"), out);
    if (M("startswith") || M("endswith"))
        return affix_match(ctx, s, a, M("endswith"), out);
    if (M("replace")) {
        jj_value c;
        if (!jj_arg(a, 0, "old", &x) || !jj_arg(a, 1, "new", &y) || x.type != JJ_STR || y.type != JJ_STR)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "replace() needs two string arguments");
        int64_t count = -1;
        if (jj_arg(a, 2, "count", &c) && c.type == JJ_INT)
            count = c.u.i;
        return replace(ctx, s, x, y, count, out);
    }
    if (M("find") || M("rfind") || M("index") || M("count")) {
        if (!jj_arg(a, 0, "sub", &x) || x.type != JJ_STR)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "%.*s() needs a string argument", (int)n, name);
        if (a->n_pos > 1)
            return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: start/end arguments of %.*s()",
                           (int)n, name);
        if ((st = jj_step(ctx, s.u.s.n / 64 + 1)) != MOE_OK)
            return st;
        if (M("count")) {
            int64_t c = 0;
            if (x.u.s.n == 0) {
                c = (int64_t)jj_utf8_len(s.u.s.p, s.u.s.n) + 1;
            } else {
                size_t i = 0;
                const char *hit;
                while ((hit = find_sub(s.u.s.p + i, s.u.s.n - i, x.u.s.p, x.u.s.n)) != NULL) {
                    c++;
                    i = (size_t)(hit - s.u.s.p) + x.u.s.n;
                }
            }
            *out = jj_int(c);
            return MOE_OK;
        }
        const char *hit = M("rfind") ? rfind_sub(s.u.s.p, s.u.s.n, x.u.s.p, x.u.s.n)
                                     : find_sub(s.u.s.p, s.u.s.n, x.u.s.p, x.u.s.n);
        if (!hit) {
            if (M("index"))
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "index(): substring not found");
            *out = jj_int(-1);
            return MOE_OK;
        }
        *out = jj_int((int64_t)jj_utf8_len(s.u.s.p, (size_t)(hit - s.u.s.p)));
        return MOE_OK;
    }
    if (M("format"))
        return str_format(ctx, s, a, out);
    if (M("join")) {
        jj_value *items;
        size_t cnt;
        jj_buf b = {0};
        if (!jj_arg(a, 0, "iterable", &x))
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "join() takes exactly one argument");
        if ((st = jj_iterate(ctx, x, &items, &cnt)) != MOE_OK)
            return st;
        for (size_t k = 0; k < cnt && st == MOE_OK; k++) {
            if (items[k].type != JJ_STR)
                return jj_fail(ctx, MOE_ERR_INVALID_ARG, "sequence item %zu: expected str instance, %s found", k,
                               jj_type_name(items[k]));
            if (k)
                st = jj_buf_append(ctx, &b, s.u.s.p, s.u.s.n);
            if (st == MOE_OK)
                st = jj_buf_append(ctx, &b, items[k].u.s.p, items[k].u.s.n);
        }
        *out = jj_buf_value(&b);
        return st;
    }
    if (M("isdigit") || M("isalpha") || M("isalnum") || M("isspace") || M("isupper") || M("islower")) {
        int kind = M("isdigit") ? 0 : M("isalpha") ? 1 : M("isalnum") ? 2 : M("isspace") ? 3 : M("isupper") ? 4 : 5;
        *out = jj_bool(str_pred(s, kind));
        return MOE_OK;
    }
    if (M("splitlines")) {
        jj_value list = jj_new_list(ctx, 0);
        if (list.type != JJ_LIST)
            return ctx->status;
        size_t i = 0, start = 0;
        while (i < s.u.s.n && st == MOE_OK) {
            char c = s.u.s.p[i];
            if (c == '\n' || c == '\r') {
                st = push_str(ctx, list, s.u.s.p + start, i - start);
                if (c == '\r' && i + 1 < s.u.s.n && s.u.s.p[i + 1] == '\n')
                    i++;
                start = i + 1;
            }
            i++;
        }
        if (st == MOE_OK && start < s.u.s.n)
            st = push_str(ctx, list, s.u.s.p + start, s.u.s.n - start);
        *out = list;
        return st;
    }
    if (M("removeprefix") || M("removesuffix")) {
        if (!jj_arg(a, 0, NULL, &x) || x.type != JJ_STR)
            return jj_fail(ctx, MOE_ERR_INVALID_ARG, "%.*s() needs a string argument", (int)n, name);
        *out = s;
        if (x.u.s.n <= s.u.s.n) {
            if (M("removeprefix") && memcmp(s.u.s.p, x.u.s.p, x.u.s.n) == 0)
                *out = jj_str(s.u.s.p + x.u.s.n, s.u.s.n - x.u.s.n);
            else if (M("removesuffix") && memcmp(s.u.s.p + s.u.s.n - x.u.s.n, x.u.s.p, x.u.s.n) == 0)
                *out = jj_str(s.u.s.p, s.u.s.n - x.u.s.n);
        }
        return MOE_OK;
    }
#undef M
    return jj_fail(ctx, MOE_ERR_UNSUPPORTED, "unsupported construct: str method '%.*s'", (int)n, name);
}

/* Methods of a Markup string: markupsafe escapes the string arguments of
 * most methods (and format's fields, and join's items) and returns Markup
 * from them; split() gives Markup pieces. */
static moe_status safe_str_method(jj_ctx *ctx, jj_value s, const char *name, size_t n, const jj_args *a,
                                  jj_value *out)
{
    static const char *const escaping[] = {
        "capitalize", "title", "lower", "upper", "replace", "lstrip", "rstrip", "strip", "format", "join", NULL,
    };
    static const char *const splitting[] = {"split", "rsplit", "splitlines", NULL};
    bool escapes = in_table(escaping, name, n);
    jj_args ea = *a;
    moe_status st;
    s.flags &= (uint8_t)~JJ_F_SAFE;
    if (escapes && (a->n_pos || a->n_kw)) {
        jj_value *pos = jj_alloc(ctx, (a->n_pos + 1) * sizeof(jj_value));
        jj_value *kw = jj_alloc(ctx, (a->n_kw + 1) * sizeof(jj_value));
        if (!pos || !kw)
            return ctx->status;
        for (size_t i = 0; i < a->n_pos; i++) {
            pos[i] = a->pos[i];
            if (NAME_IS(name, n, "join")) {
                /* join escapes every item of its iterable */
                jj_value *items;
                size_t cnt;
                jj_value l;
                if ((st = jj_iterate(ctx, a->pos[i], &items, &cnt)) != MOE_OK)
                    return st;
                l = jj_new_list(ctx, cnt);
                if (l.type != JJ_LIST)
                    return ctx->status;
                for (size_t k = 0; k < cnt; k++)
                    if ((st = jj_html_escape(ctx, items[k], &l.u.l->items[l.u.l->n++])) != MOE_OK)
                        return st;
                pos[i] = l;
            } else if (a->pos[i].type == JJ_STR || NAME_IS(name, n, "format")) {
                if ((st = jj_html_escape(ctx, a->pos[i], &pos[i])) != MOE_OK)
                    return st;
            }
        }
        for (size_t i = 0; i < a->n_kw; i++) {
            kw[i] = a->kw_vals[i];
            if ((kw[i].type == JJ_STR || NAME_IS(name, n, "format")) &&
                (st = jj_html_escape(ctx, a->kw_vals[i], &kw[i])) != MOE_OK)
                return st;
        }
        ea.pos = pos;
        ea.kw_vals = kw;
    }
    if ((st = str_method(ctx, s, name, n, &ea, out)) != MOE_OK)
        return st;
    if (escapes && out->type == JJ_STR)
        out->flags |= JJ_F_SAFE;
    if (in_table(splitting, name, n) && out->type == JJ_LIST)
        for (size_t i = 0; i < out->u.l->n; i++)
            out->u.l->items[i].flags |= JJ_F_SAFE;
    return MOE_OK;
}

moe_status jj_str_method(jj_ctx *ctx, jj_value s, const char *name, size_t n, const jj_args *a, jj_value *out)
{
    if (s.flags & JJ_F_SAFE)
        return safe_str_method(ctx, s, name, n, a, out);
    return str_method(ctx, s, name, n, a, out);
}

/*
 * jinja-parse-expr.c — the expression half of the template parser, Python
 * Jinja2's grammar and precedence (lowest first):
 *   `a if c else b` > or > and > not > comparisons, `in`, `not in`
 *   (chained like Python) > + - > ~ > * / // % > ** (left-associative, as
 *   in Jinja2) > unary - + > postfix .attr [index] [a:b:c] (call) > filters
 *   `|f(...)` and tests `is [not] t [arg]`, which bind to the unary
 *   expression before them (so `-x|abs` is abs(-x)).
 * Literals: strings (adjacent ones concatenate), integers, floats, true/
 * false/none (any case Jinja2 accepts), lists, tuples, dicts. Filter and
 * test names resolve here; unknown ones are MOE_ERR_UNSUPPORTED with the
 * line:column. Recursion is bounded by jp_enter().
 */
#include "jinja-parse.h"

#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- expressions ------------------------------------------------------- */

static jj_node *parse_unary(parser *p, bool with_filter);
static jj_node *parse_or(parser *p);

/* Call arguments after '(' : positional, then name=value keywords. */
static bool parse_call_args(parser *p, nodevec *args)
{
    if (!jp_expect_op(p, JO_LPAREN, "("))
        return false;
    bool seen_kw = false;
    while (!jp_is_op(p, JO_RPAREN)) {
        if (args->n > 0 && !jp_expect_op(p, JO_COMMA, ","))
            return false;
        if (jp_is_op(p, JO_RPAREN))
            break;
        if (jp_is_op(p, JO_MUL) || jp_is_op(p, JO_POW)) {
            jp_fail(p, jp_cur(p), MOE_ERR_UNSUPPORTED,
                     "unsupported construct: '*args' / '**kwargs' unpacking in a call");
            return false;
        }
        const jj_token *t = jp_cur(p);
        if (t->kind == JT_NAME && jp_peek(p, 1)->kind == JT_OP && jp_peek(p, 1)->op == JO_ASSIGN) {
            jj_node *kw = jp_new_node(p, JN_KWARG, t);
            if (!kw)
                return false;
            kw->s = t->s;
            kw->n = t->n;
            jp_advance(p);
            jp_advance(p);
            kw->a = jp_parse_expression(p, true);
            if (!kw->a || !jp_nv_push(p, args, kw))
                return false;
            seen_kw = true;
        } else {
            if (seen_kw) {
                jp_fail(p, t, MOE_ERR_FORMAT, "positional argument after a keyword argument");
                return false;
            }
            if (!jp_nv_push(p, args, jp_parse_expression(p, true)))
                return false;
        }
    }
    jp_advance(p); /* ) */
    return true;
}

static jj_node *parse_call(parser *p, jj_node *callee)
{
    jj_node *n = jp_new_node(p, JN_CALL, jp_cur(p));
    if (!n)
        return NULL;
    n->a = callee;
    nodevec args = {0};
    if (!parse_call_args(p, &args))
        return NULL;
    n->kids = args.v;
    n->n_kids = args.n;
    return n;
}

/* `|name(args)` repeated; `operand` may be NULL for filter blocks. When
 * `inline_first` the first name comes without a pipe. */
jj_node *jp_parse_filter(parser *p, jj_node *operand, bool inline_first)
{
    while (jp_is_op(p, JO_PIPE) || inline_first) {
        if (!inline_first)
            jp_advance(p);
        inline_first = false;
        const jj_token *t = jp_cur(p);
        if (t->kind != JT_NAME) {
            jp_fail(p, t, MOE_ERR_FORMAT, "expected a filter name, got %s", jp_tok_desc(t));
            return NULL;
        }
        jj_node *f = jp_new_node(p, JN_FILTER, t);
        if (!f)
            return NULL;
        f->s = t->s;
        f->n = t->n;
        f->id = jj_filter_lookup(t->s, t->n);
        if (f->id < 0) {
            jp_fail(p, t, MOE_ERR_UNSUPPORTED, "unsupported construct: filter '%.*s'",
                     (int)(t->n > 60 ? 60 : t->n), t->s);
            return NULL;
        }
        jp_advance(p);
        if (jp_is_op(p, JO_DOT)) {
            jp_fail(p, jp_cur(p), MOE_ERR_UNSUPPORTED, "unsupported construct: dotted filter name");
            return NULL;
        }
        if (jp_is_op(p, JO_LPAREN)) {
            nodevec args = {0};
            if (!parse_call_args(p, &args))
                return NULL;
            f->kids = args.v;
            f->n_kids = args.n;
        }
        f->a = operand;
        operand = f;
    }
    return operand;
}

static jj_node *parse_postfix(parser *p, jj_node *node);

static jj_node *parse_test(parser *p, jj_node *operand)
{
    const jj_token *is_tok = jp_cur(p);
    jp_advance(p); /* is */
    bool negated = false;
    if (jp_is_name(p, "not")) {
        negated = true;
        jp_advance(p);
    }
    const jj_token *t = jp_cur(p);
    if (t->kind != JT_NAME) {
        jp_fail(p, t, MOE_ERR_FORMAT, "expected a test name after 'is', got %s", jp_tok_desc(t));
        return NULL;
    }
    jj_node *n = jp_new_node(p, JN_TEST, is_tok);
    if (!n)
        return NULL;
    n->s = t->s;
    n->n = t->n;
    n->flags = negated ? 1 : 0;
    n->a = operand;
    n->id = jj_test_lookup(t->s, t->n);
    if (n->id < 0) {
        jp_fail(p, t, MOE_ERR_UNSUPPORTED, "unsupported construct: test '%.*s'",
                 (int)(t->n > 60 ? 60 : t->n), t->s);
        return NULL;
    }
    jp_advance(p);
    const jj_token *c = jp_cur(p);
    if (jp_is_op(p, JO_LPAREN)) {
        nodevec args = {0};
        if (!parse_call_args(p, &args))
            return NULL;
        n->kids = args.v;
        n->n_kids = args.n;
    } else if ((c->kind == JT_NAME || c->kind == JT_STRING || c->kind == JT_INT ||
                c->kind == JT_FLOAT || (c->kind == JT_OP && (c->op == JO_LBRACKET || c->op == JO_LBRACE))) &&
               !jp_tok_is_name(c, "else") && !jp_tok_is_name(c, "or") && !jp_tok_is_name(c, "and")) {
        /* One bare argument: `x is divisibleby 3`, `x is sameas none`. */
        if (jp_tok_is_name(c, "is")) {
            jp_fail(p, c, MOE_ERR_FORMAT, "tests cannot be chained with 'is'");
            return NULL;
        }
        jj_node *arg = parse_unary(p, false);
        if (!arg)
            return NULL;
        n->kids = moe_arena_alloc(p->arena, sizeof(jj_node *));
        if (!n->kids) {
            jp_fail(p, c, MOE_ERR_NOMEM, "out of memory");
            return NULL;
        }
        n->kids[0] = arg;
        n->n_kids = 1;
    }
    return n;
}

static jj_node *parse_list_literal(parser *p)
{
    jj_node *n = jp_new_node(p, JN_LIST, jp_cur(p));
    if (!n)
        return NULL;
    jp_advance(p); /* [ */
    nodevec items = {0};
    while (!jp_is_op(p, JO_RBRACKET)) {
        if (items.n > 0 && !jp_expect_op(p, JO_COMMA, ","))
            return NULL;
        if (jp_is_op(p, JO_RBRACKET))
            break;
        if (!jp_nv_push(p, &items, jp_parse_expression(p, true)))
            return NULL;
    }
    jp_advance(p);
    n->kids = items.v;
    n->n_kids = items.n;
    return n;
}

static jj_node *parse_dict_literal(parser *p)
{
    jj_node *n = jp_new_node(p, JN_DICT, jp_cur(p));
    if (!n)
        return NULL;
    jp_advance(p); /* { */
    nodevec items = {0};
    while (!jp_is_op(p, JO_RBRACE)) {
        if (items.n > 0 && !jp_expect_op(p, JO_COMMA, ","))
            return NULL;
        if (jp_is_op(p, JO_RBRACE))
            break;
        jj_node *pair = jp_new_node(p, JN_PAIR, jp_cur(p));
        if (!pair)
            return NULL;
        pair->a = jp_parse_expression(p, true);
        if (!pair->a || !jp_expect_op(p, JO_COLON, ":"))
            return NULL;
        pair->b = jp_parse_expression(p, true);
        if (!jp_nv_push(p, &items, pair->b ? pair : NULL))
            return NULL;
    }
    jp_advance(p);
    n->kids = items.v;
    n->n_kids = items.n;
    return n;
}

static jj_node *parse_primary(parser *p)
{
    const jj_token *t = jp_cur(p);
    jj_node *n;
    switch (t->kind) {
    case JT_NAME:
        n = jp_new_node(p, JN_CONST, t);
        if (!n)
            return NULL;
        if (jp_tok_is_name(t, "true") || jp_tok_is_name(t, "True")) {
            n->lit = jj_bool(true);
        } else if (jp_tok_is_name(t, "false") || jp_tok_is_name(t, "False")) {
            n->lit = jj_bool(false);
        } else if (jp_tok_is_name(t, "none") || jp_tok_is_name(t, "None")) {
            n->lit = jj_none();
        } else {
            n->kind = JN_NAME;
            n->s = t->s;
            n->n = t->n;
        }
        jp_advance(p);
        return n;
    case JT_STRING: {
        n = jp_new_node(p, JN_CONST, t);
        if (!n)
            return NULL;
        /* Adjacent literals concatenate: 'a' "b" is 'ab'. */
        size_t total = 0, k = p->i;
        while (k < p->n && p->t[k].kind == JT_STRING)
            total += p->t[k++].n;
        if (k == p->i + 1) {
            n->lit = jj_str(t->s, t->n);
            jp_advance(p);
            return n;
        }
        char *buf = moe_arena_alloc(p->arena, total + 1);
        if (!buf) {
            jp_fail(p, t, MOE_ERR_NOMEM, "out of memory");
            return NULL;
        }
        size_t off = 0;
        while (jp_cur(p)->kind == JT_STRING) {
            memcpy(buf + off, jp_cur(p)->s, jp_cur(p)->n);
            off += jp_cur(p)->n;
            jp_advance(p);
        }
        n->lit = jj_str(buf, off);
        return n;
    }
    case JT_INT:
    case JT_FLOAT:
        n = jp_new_node(p, JN_CONST, t);
        if (!n)
            return NULL;
        n->lit = t->kind == JT_INT ? jj_int(t->i) : jj_float(t->f);
        jp_advance(p);
        return n;
    case JT_OP:
        if (t->op == JO_LPAREN) {
            jp_advance(p);
            n = jp_parse_tuple(p, false, true, NULL, true);
            if (!n || !jp_expect_op(p, JO_RPAREN, ")"))
                return NULL;
            return n;
        }
        if (t->op == JO_LBRACKET)
            return parse_list_literal(p);
        if (t->op == JO_LBRACE)
            return parse_dict_literal(p);
        break;
    default:
        break;
    }
    jp_fail(p, t, MOE_ERR_FORMAT, "unexpected %s in an expression", jp_tok_desc(t));
    return NULL;
}

/* One subscript: an expression or a slice a:b:c with parts optional. */
static jj_node *parse_subscribed(parser *p, jj_node *obj, const jj_token *at)
{
    jj_node *start = NULL;
    if (!jp_is_op(p, JO_COLON)) {
        start = jp_parse_expression(p, true);
        if (!start)
            return NULL;
        if (!jp_is_op(p, JO_COLON)) {
            jj_node *n = jp_new_node(p, JN_GETITEM, at);
            if (!n)
                return NULL;
            n->a = obj;
            n->b = start;
            return n;
        }
    }
    jp_advance(p); /* : */
    jj_node *n = jp_new_node(p, JN_SLICE, at);
    if (!n)
        return NULL;
    n->a = obj;
    n->b = start;
    if (!jp_is_op(p, JO_COLON) && !jp_is_op(p, JO_RBRACKET) && !jp_is_op(p, JO_COMMA)) {
        n->c = jp_parse_expression(p, true);
        if (!n->c)
            return NULL;
    }
    if (jp_is_op(p, JO_COLON)) {
        jp_advance(p);
        if (!jp_is_op(p, JO_RBRACKET) && !jp_is_op(p, JO_COMMA)) {
            n->d = jp_parse_expression(p, true);
            if (!n->d)
                return NULL;
        }
    }
    return n;
}

static jj_node *parse_postfix(parser *p, jj_node *node)
{
    while (node) {
        const jj_token *t = jp_cur(p);
        if (jp_is_op(p, JO_DOT)) {
            jp_advance(p);
            const jj_token *a = jp_cur(p);
            if (a->kind == JT_NAME) {
                jj_node *n = jp_new_node(p, JN_GETATTR, t);
                if (!n)
                    return NULL;
                n->a = node;
                n->s = a->s;
                n->n = a->n;
                jp_advance(p);
                node = n;
            } else if (a->kind == JT_INT) {
                jj_node *n = jp_new_node(p, JN_GETITEM, t);
                jj_node *k = jp_new_node(p, JN_CONST, a);
                if (!n || !k)
                    return NULL;
                k->lit = jj_int(a->i);
                n->a = node;
                n->b = k;
                jp_advance(p);
                node = n;
            } else {
                jp_fail(p, a, MOE_ERR_FORMAT, "expected a name or number after '.'");
                return NULL;
            }
        } else if (jp_is_op(p, JO_LBRACKET)) {
            jp_advance(p);
            node = parse_subscribed(p, node, t);
            if (!node)
                return NULL;
            if (jp_is_op(p, JO_COMMA)) {
                jp_fail(p, jp_cur(p), MOE_ERR_UNSUPPORTED, "unsupported construct: tuple subscript x[a, b]");
                return NULL;
            }
            if (!jp_expect_op(p, JO_RBRACKET, "]"))
                return NULL;
        } else if (jp_is_op(p, JO_LPAREN)) {
            node = parse_call(p, node);
        } else {
            break;
        }
    }
    return node;
}

static jj_node *parse_filter_expr(parser *p, jj_node *node)
{
    while (node) {
        if (jp_is_op(p, JO_PIPE))
            node = jp_parse_filter(p, node, false);
        else if (jp_is_name(p, "is"))
            node = parse_test(p, node);
        else if (jp_is_op(p, JO_LPAREN))
            node = parse_call(p, node);
        else
            break;
    }
    return node;
}

static jj_node *parse_unary(parser *p, bool with_filter)
{
    if (!jp_enter(p))
        return NULL;
    const jj_token *t = jp_cur(p);
    jj_node *node;
    if (jp_is_op(p, JO_SUB) || jp_is_op(p, JO_ADD)) {
        node = jp_new_node(p, t->op == JO_SUB ? JN_NEG : JN_POS, t);
        jp_advance(p);
        if (node) {
            node->a = parse_unary(p, false);
            if (!node->a)
                node = NULL;
        }
    } else {
        node = parse_primary(p);
    }
    node = parse_postfix(p, node);
    if (with_filter)
        node = parse_filter_expr(p, node);
    jp_leave(p);
    return node;
}

static jj_node *binop(parser *p, jj_node_kind kind, jj_op op, const jj_token *at,
                      jj_node *a, jj_node *b)
{
    if (!a || !b)
        return NULL;
    jj_node *n = jp_new_node(p, kind, at);
    if (!n)
        return NULL;
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static jj_node *parse_pow(parser *p)
{
    jj_node *left = parse_unary(p, true);
    while (left && jp_is_op(p, JO_POW)) {
        const jj_token *t = jp_cur(p);
        jp_advance(p);
        left = binop(p, JN_BINOP, JO_POW, t, left, parse_unary(p, true));
    }
    return left;
}

static jj_node *parse_math2(parser *p)
{
    jj_node *left = parse_pow(p);
    while (left && (jp_is_op(p, JO_MUL) || jp_is_op(p, JO_DIV) || jp_is_op(p, JO_FLOORDIV) || jp_is_op(p, JO_MOD))) {
        const jj_token *t = jp_cur(p);
        jp_advance(p);
        left = binop(p, JN_BINOP, (jj_op)t->op, t, left, parse_pow(p));
    }
    return left;
}

static jj_node *parse_concat(parser *p)
{
    jj_node *left = parse_math2(p);
    while (left && jp_is_op(p, JO_TILDE)) {
        const jj_token *t = jp_cur(p);
        jp_advance(p);
        left = binop(p, JN_BINOP, JO_TILDE, t, left, parse_math2(p));
    }
    return left;
}

static jj_node *parse_math1(parser *p)
{
    jj_node *left = parse_concat(p);
    while (left && (jp_is_op(p, JO_ADD) || jp_is_op(p, JO_SUB))) {
        const jj_token *t = jp_cur(p);
        jp_advance(p);
        left = binop(p, JN_BINOP, (jj_op)t->op, t, left, parse_concat(p));
    }
    return left;
}

static jj_node *parse_compare(parser *p)
{
    const jj_token *start = jp_cur(p);
    jj_node *expr = parse_math1(p);
    if (!expr)
        return NULL;
    nodevec ops = {0};
    for (;;) {
        const jj_token *t = jp_cur(p);
        jj_op op;
        if (t->kind == JT_OP && (t->op == JO_EQ || t->op == JO_NE || t->op == JO_LT ||
                                 t->op == JO_LE || t->op == JO_GT || t->op == JO_GE)) {
            op = (jj_op)t->op;
            jp_advance(p);
        } else if (jp_tok_is_name(t, "in")) {
            op = JO_IN;
            jp_advance(p);
        } else if (jp_tok_is_name(t, "not") && jp_tok_is_name(jp_peek(p, 1), "in")) {
            op = JO_NOTIN;
            jp_advance(p);
            jp_advance(p);
        } else {
            break;
        }
        jj_node *o = jp_new_node(p, JN_OPERAND, t);
        if (!o)
            return NULL;
        o->op = (uint8_t)op;
        o->a = parse_math1(p);
        if (!jp_nv_push(p, &ops, o->a ? o : NULL))
            return NULL;
    }
    if (ops.n == 0)
        return expr;
    jj_node *n = jp_new_node(p, JN_COMPARE, start);
    if (!n)
        return NULL;
    n->a = expr;
    n->kids = ops.v;
    n->n_kids = ops.n;
    return n;
}

static jj_node *parse_not(parser *p)
{
    if (jp_is_name(p, "not")) {
        if (!jp_enter(p))
            return NULL;
        const jj_token *t = jp_cur(p);
        jp_advance(p);
        jj_node *n = jp_new_node(p, JN_NOT, t);
        if (n) {
            n->a = parse_not(p);
            if (!n->a)
                n = NULL;
        }
        jp_leave(p);
        return n;
    }
    return parse_compare(p);
}

static jj_node *parse_and(parser *p)
{
    jj_node *left = parse_not(p);
    while (left && jp_is_name(p, "and")) {
        const jj_token *t = jp_cur(p);
        jp_advance(p);
        left = binop(p, JN_AND, JO_NONE, t, left, parse_not(p));
    }
    return left;
}

static jj_node *parse_or(parser *p)
{
    jj_node *left = parse_and(p);
    while (left && jp_is_name(p, "or")) {
        const jj_token *t = jp_cur(p);
        jp_advance(p);
        left = binop(p, JN_OR, JO_NONE, t, left, parse_and(p));
    }
    return left;
}

static jj_node *parse_condexpr(parser *p)
{
    if (!jp_enter(p))
        return NULL;
    const jj_token *start = jp_cur(p);
    jj_node *expr1 = parse_or(p);
    while (expr1 && jp_is_name(p, "if")) {
        jp_advance(p);
        jj_node *n = jp_new_node(p, JN_CONDEXPR, start);
        if (!n) {
            expr1 = NULL;
            break;
        }
        n->b = expr1;
        n->a = parse_or(p);
        if (!n->a) {
            expr1 = NULL;
            break;
        }
        if (jp_is_name(p, "else")) {
            jp_advance(p);
            n->c = parse_condexpr(p);
            if (!n->c) {
                expr1 = NULL;
                break;
            }
        }
        expr1 = n;
        start = jp_cur(p);
    }
    jp_leave(p);
    return expr1;
}

jj_node *jp_parse_expression(parser *p, bool with_condexpr)
{
    return with_condexpr ? parse_condexpr(p) : parse_or(p);
}

static bool is_tuple_end(const parser *p, const char *extra_end)
{
    const jj_token *t = jp_cur(p);
    if (t->kind == JT_VAR_END || t->kind == JT_BLOCK_END || t->kind == JT_EOF)
        return true;
    if (t->kind == JT_OP && t->op == JO_RPAREN)
        return true;
    return extra_end && jp_tok_is_name(t, extra_end);
}

/* Comma-separated expressions; a tuple node when there is a comma. */
jj_node *jp_parse_tuple(parser *p, bool simplified, bool with_condexpr,
                            const char *extra_end, bool explicit_parens)
{
    const jj_token *start = jp_cur(p);
    nodevec items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.n > 0 && !jp_expect_op(p, JO_COMMA, ","))
            return NULL;
        if (is_tuple_end(p, extra_end))
            break;
        jj_node *e = simplified ? parse_primary(p) : jp_parse_expression(p, with_condexpr);
        if (!jp_nv_push(p, &items, e))
            return NULL;
        if (jp_is_op(p, JO_COMMA))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (items.n > 0)
            return items.v[0];
        if (!explicit_parens) {
            jp_fail(p, start, MOE_ERR_FORMAT, "expected an expression, got %s", jp_tok_desc(start));
            return NULL;
        }
    }
    jj_node *n = jp_new_node(p, JN_TUPLE, start);
    if (!n)
        return NULL;
    n->kids = items.v;
    n->n_kids = items.n;
    return n;
}

/*
 * jinja-parse.c — tokens to an AST, by recursive descent.
 *
 * The grammar and operator precedence are Python Jinja2's (lowest first):
 *   conditional `a if c else b` > or > and > not > comparisons and `in`
 *   (chained) > + - > ~ > * / // % > ** (left-associative) > unary - +
 *   > postfix (.attr [index] [a:b:c] (call)) > filters `|f` and tests
 *   `is t`, which bind to the unary expression before them.
 * Statements: if/elif/else, for (with `if` filter and else), set (also
 * `ns.attr =`, tuple targets and block form with filters), macro, call,
 * filter, with, do, break/continue, and transformers' generation tag.
 * include/import/extends/block and the like are rejected with
 * MOE_ERR_UNSUPPORTED naming the construct and its line:column, as are
 * filters and tests this interpreter does not have (Jinja2 also checks
 * those when compiling). Nesting is bounded by JJ_MAX_PARSE_DEPTH.
 */
#include "jinja.h"

#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct parser {
    moe_arena      *arena;
    const jj_token *t;
    size_t          n;
    size_t          i;
    moe_err        *err;
    moe_status      status;
    int             depth;
    int             loop_depth;  /* break/continue are valid when > 0 */
} parser;

typedef struct nodevec {
    jj_node **v;
    size_t    n, cap;
} nodevec;

/* ---- plumbing ------------------------------------------------------------ */

static const jj_token *cur(const parser *p)
{
    return &p->t[p->i < p->n ? p->i : p->n - 1];
}

static const jj_token *peek(const parser *p, size_t k)
{
    size_t j = p->i + k;
    return &p->t[j < p->n ? j : p->n - 1];
}

static void advance(parser *p)
{
    if (p->i + 1 < p->n)
        p->i++;
}

static moe_status pfail_at(parser *p, const jj_token *tok, moe_status st, const char *fmt, ...)
    MOE_PRINTF(4, 5);

static moe_status pfail_at(parser *p, const jj_token *tok, moe_status st, const char *fmt, ...)
{
    if (p->status != MOE_OK)
        return p->status;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->status = moe_fail(p->err, st, "template line %u:%u: %s", tok->line, tok->col, msg);
    return p->status;
}

static const char *const k_op_text[] = {
    [JO_ADD] = "'+'", [JO_SUB] = "'-'", [JO_MUL] = "'*'", [JO_DIV] = "'/'", [JO_FLOORDIV] = "'//'",
    [JO_MOD] = "'%'", [JO_POW] = "'**'", [JO_TILDE] = "'~'", [JO_EQ] = "'=='", [JO_NE] = "'!='",
    [JO_LT] = "'<'", [JO_LE] = "'<='", [JO_GT] = "'>'", [JO_GE] = "'>='", [JO_ASSIGN] = "'='",
    [JO_DOT] = "'.'", [JO_COMMA] = "','", [JO_COLON] = "':'", [JO_PIPE] = "'|'", [JO_SEMICOLON] = "';'",
    [JO_LPAREN] = "'('", [JO_RPAREN] = "')'", [JO_LBRACKET] = "'['", [JO_RBRACKET] = "']'",
    [JO_LBRACE] = "'{'", [JO_RBRACE] = "'}'",
};

static const char *tok_desc(const jj_token *t)
{
    if (t->kind == JT_OP && t->op < sizeof k_op_text / sizeof k_op_text[0] && k_op_text[t->op])
        return k_op_text[t->op];
    switch (t->kind) {
    case JT_EOF: return "end of template";
    case JT_TEXT: return "template text";
    case JT_BLOCK_BEGIN: return "'{%'";
    case JT_BLOCK_END: return "'%}'";
    case JT_VAR_BEGIN: return "'{{'";
    case JT_VAR_END: return "'}}'";
    case JT_NAME: return "a name";
    case JT_STRING: return "a string";
    case JT_INT: return "an integer";
    case JT_FLOAT: return "a number";
    default: return "an operator";
    }
}

static bool is_op(const parser *p, jj_op op)
{
    const jj_token *t = cur(p);
    return t->kind == JT_OP && t->op == op;
}

static bool tok_is_name(const jj_token *t, const char *name)
{
    return t->kind == JT_NAME && t->n == strlen(name) && memcmp(t->s, name, t->n) == 0;
}

static bool is_name(const parser *p, const char *name)
{
    return tok_is_name(cur(p), name);
}

static bool expect_op(parser *p, jj_op op, const char *text)
{
    if (is_op(p, op)) {
        advance(p);
        return true;
    }
    pfail_at(p, cur(p), MOE_ERR_FORMAT, "expected '%s', got %s", text, tok_desc(cur(p)));
    return false;
}

static bool expect_kind(parser *p, jj_tok_kind kind, const char *text)
{
    if (cur(p)->kind == kind) {
        advance(p);
        return true;
    }
    pfail_at(p, cur(p), MOE_ERR_FORMAT, "expected %s, got %s", text, tok_desc(cur(p)));
    return false;
}

static jj_node *new_node(parser *p, jj_node_kind kind, const jj_token *at)
{
    jj_node *n = moe_arena_alloc(p->arena, sizeof *n);
    if (!n) {
        if (p->status == MOE_OK)
            p->status = moe_fail(p->err, MOE_ERR_NOMEM, "template: out of memory");
        return NULL;
    }
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = at->line;
    n->col = at->col;
    return n;
}

static bool nv_push(parser *p, nodevec *v, jj_node *node)
{
    if (!node)
        return false;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        jj_node **q = moe_arena_grow(p->arena, v->v, v->cap * sizeof *q, cap * sizeof *q);
        if (!q) {
            if (p->status == MOE_OK)
                p->status = moe_fail(p->err, MOE_ERR_NOMEM, "template: out of memory");
            return false;
        }
        v->v = q;
        v->cap = cap;
    }
    v->v[v->n++] = node;
    return true;
}

static bool enter(parser *p)
{
    if (++p->depth > JJ_MAX_PARSE_DEPTH) {
        pfail_at(p, cur(p), MOE_ERR_RANGE, "nesting deeper than %d levels", JJ_MAX_PARSE_DEPTH);
        return false;
    }
    return true;
}

static void leave(parser *p)
{
    p->depth--;
}

/* ---- expressions ------------------------------------------------------- */

static jj_node *parse_expression(parser *p, bool with_condexpr);
static jj_node *parse_tuple(parser *p, bool simplified, bool with_condexpr,
                            const char *extra_end, bool explicit_parens);
static jj_node *parse_unary(parser *p, bool with_filter);
static jj_node *parse_or(parser *p);

/* Call arguments after '(' : positional, then name=value keywords. */
static bool parse_call_args(parser *p, nodevec *args)
{
    if (!expect_op(p, JO_LPAREN, "("))
        return false;
    bool seen_kw = false;
    while (!is_op(p, JO_RPAREN)) {
        if (args->n > 0 && !expect_op(p, JO_COMMA, ","))
            return false;
        if (is_op(p, JO_RPAREN))
            break;
        if (is_op(p, JO_MUL) || is_op(p, JO_POW)) {
            pfail_at(p, cur(p), MOE_ERR_UNSUPPORTED,
                     "unsupported construct: '*args' / '**kwargs' unpacking in a call");
            return false;
        }
        const jj_token *t = cur(p);
        if (t->kind == JT_NAME && peek(p, 1)->kind == JT_OP && peek(p, 1)->op == JO_ASSIGN) {
            jj_node *kw = new_node(p, JN_KWARG, t);
            if (!kw)
                return false;
            kw->s = t->s;
            kw->n = t->n;
            advance(p);
            advance(p);
            kw->a = parse_expression(p, true);
            if (!kw->a || !nv_push(p, args, kw))
                return false;
            seen_kw = true;
        } else {
            if (seen_kw) {
                pfail_at(p, t, MOE_ERR_FORMAT, "positional argument after a keyword argument");
                return false;
            }
            if (!nv_push(p, args, parse_expression(p, true)))
                return false;
        }
    }
    advance(p); /* ) */
    return true;
}

static jj_node *parse_call(parser *p, jj_node *callee)
{
    jj_node *n = new_node(p, JN_CALL, cur(p));
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
static jj_node *parse_filter(parser *p, jj_node *operand, bool inline_first)
{
    while (is_op(p, JO_PIPE) || inline_first) {
        if (!inline_first)
            advance(p);
        inline_first = false;
        const jj_token *t = cur(p);
        if (t->kind != JT_NAME) {
            pfail_at(p, t, MOE_ERR_FORMAT, "expected a filter name, got %s", tok_desc(t));
            return NULL;
        }
        jj_node *f = new_node(p, JN_FILTER, t);
        if (!f)
            return NULL;
        f->s = t->s;
        f->n = t->n;
        f->id = jj_filter_lookup(t->s, t->n);
        if (f->id < 0) {
            pfail_at(p, t, MOE_ERR_UNSUPPORTED, "unsupported construct: filter '%.*s'",
                     (int)(t->n > 60 ? 60 : t->n), t->s);
            return NULL;
        }
        advance(p);
        if (is_op(p, JO_DOT)) {
            pfail_at(p, cur(p), MOE_ERR_UNSUPPORTED, "unsupported construct: dotted filter name");
            return NULL;
        }
        if (is_op(p, JO_LPAREN)) {
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
    const jj_token *is_tok = cur(p);
    advance(p); /* is */
    bool negated = false;
    if (is_name(p, "not")) {
        negated = true;
        advance(p);
    }
    const jj_token *t = cur(p);
    if (t->kind != JT_NAME) {
        pfail_at(p, t, MOE_ERR_FORMAT, "expected a test name after 'is', got %s", tok_desc(t));
        return NULL;
    }
    jj_node *n = new_node(p, JN_TEST, is_tok);
    if (!n)
        return NULL;
    n->s = t->s;
    n->n = t->n;
    n->flags = negated ? 1 : 0;
    n->a = operand;
    n->id = jj_test_lookup(t->s, t->n);
    if (n->id < 0) {
        pfail_at(p, t, MOE_ERR_UNSUPPORTED, "unsupported construct: test '%.*s'",
                 (int)(t->n > 60 ? 60 : t->n), t->s);
        return NULL;
    }
    advance(p);
    const jj_token *c = cur(p);
    if (is_op(p, JO_LPAREN)) {
        nodevec args = {0};
        if (!parse_call_args(p, &args))
            return NULL;
        n->kids = args.v;
        n->n_kids = args.n;
    } else if ((c->kind == JT_NAME || c->kind == JT_STRING || c->kind == JT_INT ||
                c->kind == JT_FLOAT || (c->kind == JT_OP && (c->op == JO_LBRACKET || c->op == JO_LBRACE))) &&
               !tok_is_name(c, "else") && !tok_is_name(c, "or") && !tok_is_name(c, "and")) {
        /* One bare argument: `x is divisibleby 3`, `x is sameas none`. */
        if (tok_is_name(c, "is")) {
            pfail_at(p, c, MOE_ERR_FORMAT, "tests cannot be chained with 'is'");
            return NULL;
        }
        jj_node *arg = parse_unary(p, false);
        if (!arg)
            return NULL;
        n->kids = moe_arena_alloc(p->arena, sizeof(jj_node *));
        if (!n->kids) {
            pfail_at(p, c, MOE_ERR_NOMEM, "out of memory");
            return NULL;
        }
        n->kids[0] = arg;
        n->n_kids = 1;
    }
    return n;
}

static jj_node *parse_list_literal(parser *p)
{
    jj_node *n = new_node(p, JN_LIST, cur(p));
    if (!n)
        return NULL;
    advance(p); /* [ */
    nodevec items = {0};
    while (!is_op(p, JO_RBRACKET)) {
        if (items.n > 0 && !expect_op(p, JO_COMMA, ","))
            return NULL;
        if (is_op(p, JO_RBRACKET))
            break;
        if (!nv_push(p, &items, parse_expression(p, true)))
            return NULL;
    }
    advance(p);
    n->kids = items.v;
    n->n_kids = items.n;
    return n;
}

static jj_node *parse_dict_literal(parser *p)
{
    jj_node *n = new_node(p, JN_DICT, cur(p));
    if (!n)
        return NULL;
    advance(p); /* { */
    nodevec items = {0};
    while (!is_op(p, JO_RBRACE)) {
        if (items.n > 0 && !expect_op(p, JO_COMMA, ","))
            return NULL;
        if (is_op(p, JO_RBRACE))
            break;
        jj_node *pair = new_node(p, JN_PAIR, cur(p));
        if (!pair)
            return NULL;
        pair->a = parse_expression(p, true);
        if (!pair->a || !expect_op(p, JO_COLON, ":"))
            return NULL;
        pair->b = parse_expression(p, true);
        if (!nv_push(p, &items, pair->b ? pair : NULL))
            return NULL;
    }
    advance(p);
    n->kids = items.v;
    n->n_kids = items.n;
    return n;
}

static jj_node *parse_primary(parser *p)
{
    const jj_token *t = cur(p);
    jj_node *n;
    switch (t->kind) {
    case JT_NAME:
        n = new_node(p, JN_CONST, t);
        if (!n)
            return NULL;
        if (tok_is_name(t, "true") || tok_is_name(t, "True")) {
            n->lit = jj_bool(true);
        } else if (tok_is_name(t, "false") || tok_is_name(t, "False")) {
            n->lit = jj_bool(false);
        } else if (tok_is_name(t, "none") || tok_is_name(t, "None")) {
            n->lit = jj_none();
        } else {
            n->kind = JN_NAME;
            n->s = t->s;
            n->n = t->n;
        }
        advance(p);
        return n;
    case JT_STRING: {
        n = new_node(p, JN_CONST, t);
        if (!n)
            return NULL;
        /* Adjacent literals concatenate: 'a' "b" is 'ab'. */
        size_t total = 0, k = p->i;
        while (k < p->n && p->t[k].kind == JT_STRING)
            total += p->t[k++].n;
        if (k == p->i + 1) {
            n->lit = jj_str(t->s, t->n);
            advance(p);
            return n;
        }
        char *buf = moe_arena_alloc(p->arena, total + 1);
        if (!buf) {
            pfail_at(p, t, MOE_ERR_NOMEM, "out of memory");
            return NULL;
        }
        size_t off = 0;
        while (cur(p)->kind == JT_STRING) {
            memcpy(buf + off, cur(p)->s, cur(p)->n);
            off += cur(p)->n;
            advance(p);
        }
        n->lit = jj_str(buf, off);
        return n;
    }
    case JT_INT:
    case JT_FLOAT:
        n = new_node(p, JN_CONST, t);
        if (!n)
            return NULL;
        n->lit = t->kind == JT_INT ? jj_int(t->i) : jj_float(t->f);
        advance(p);
        return n;
    case JT_OP:
        if (t->op == JO_LPAREN) {
            advance(p);
            n = parse_tuple(p, false, true, NULL, true);
            if (!n || !expect_op(p, JO_RPAREN, ")"))
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
    pfail_at(p, t, MOE_ERR_FORMAT, "unexpected %s in an expression", tok_desc(t));
    return NULL;
}

/* One subscript: an expression or a slice a:b:c with parts optional. */
static jj_node *parse_subscribed(parser *p, jj_node *obj, const jj_token *at)
{
    jj_node *start = NULL;
    if (!is_op(p, JO_COLON)) {
        start = parse_expression(p, true);
        if (!start)
            return NULL;
        if (!is_op(p, JO_COLON)) {
            jj_node *n = new_node(p, JN_GETITEM, at);
            if (!n)
                return NULL;
            n->a = obj;
            n->b = start;
            return n;
        }
    }
    advance(p); /* : */
    jj_node *n = new_node(p, JN_SLICE, at);
    if (!n)
        return NULL;
    n->a = obj;
    n->b = start;
    if (!is_op(p, JO_COLON) && !is_op(p, JO_RBRACKET) && !is_op(p, JO_COMMA)) {
        n->c = parse_expression(p, true);
        if (!n->c)
            return NULL;
    }
    if (is_op(p, JO_COLON)) {
        advance(p);
        if (!is_op(p, JO_RBRACKET) && !is_op(p, JO_COMMA)) {
            n->d = parse_expression(p, true);
            if (!n->d)
                return NULL;
        }
    }
    return n;
}

static jj_node *parse_postfix(parser *p, jj_node *node)
{
    while (node) {
        const jj_token *t = cur(p);
        if (is_op(p, JO_DOT)) {
            advance(p);
            const jj_token *a = cur(p);
            if (a->kind == JT_NAME) {
                jj_node *n = new_node(p, JN_GETATTR, t);
                if (!n)
                    return NULL;
                n->a = node;
                n->s = a->s;
                n->n = a->n;
                advance(p);
                node = n;
            } else if (a->kind == JT_INT) {
                jj_node *n = new_node(p, JN_GETITEM, t);
                jj_node *k = new_node(p, JN_CONST, a);
                if (!n || !k)
                    return NULL;
                k->lit = jj_int(a->i);
                n->a = node;
                n->b = k;
                advance(p);
                node = n;
            } else {
                pfail_at(p, a, MOE_ERR_FORMAT, "expected a name or number after '.'");
                return NULL;
            }
        } else if (is_op(p, JO_LBRACKET)) {
            advance(p);
            node = parse_subscribed(p, node, t);
            if (!node)
                return NULL;
            if (is_op(p, JO_COMMA)) {
                pfail_at(p, cur(p), MOE_ERR_UNSUPPORTED, "unsupported construct: tuple subscript x[a, b]");
                return NULL;
            }
            if (!expect_op(p, JO_RBRACKET, "]"))
                return NULL;
        } else if (is_op(p, JO_LPAREN)) {
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
        if (is_op(p, JO_PIPE))
            node = parse_filter(p, node, false);
        else if (is_name(p, "is"))
            node = parse_test(p, node);
        else if (is_op(p, JO_LPAREN))
            node = parse_call(p, node);
        else
            break;
    }
    return node;
}

static jj_node *parse_unary(parser *p, bool with_filter)
{
    if (!enter(p))
        return NULL;
    const jj_token *t = cur(p);
    jj_node *node;
    if (is_op(p, JO_SUB) || is_op(p, JO_ADD)) {
        node = new_node(p, t->op == JO_SUB ? JN_NEG : JN_POS, t);
        advance(p);
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
    leave(p);
    return node;
}

static jj_node *binop(parser *p, jj_node_kind kind, jj_op op, const jj_token *at,
                      jj_node *a, jj_node *b)
{
    if (!a || !b)
        return NULL;
    jj_node *n = new_node(p, kind, at);
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
    while (left && is_op(p, JO_POW)) {
        const jj_token *t = cur(p);
        advance(p);
        left = binop(p, JN_BINOP, JO_POW, t, left, parse_unary(p, true));
    }
    return left;
}

static jj_node *parse_math2(parser *p)
{
    jj_node *left = parse_pow(p);
    while (left && (is_op(p, JO_MUL) || is_op(p, JO_DIV) || is_op(p, JO_FLOORDIV) || is_op(p, JO_MOD))) {
        const jj_token *t = cur(p);
        advance(p);
        left = binop(p, JN_BINOP, (jj_op)t->op, t, left, parse_pow(p));
    }
    return left;
}

static jj_node *parse_concat(parser *p)
{
    jj_node *left = parse_math2(p);
    while (left && is_op(p, JO_TILDE)) {
        const jj_token *t = cur(p);
        advance(p);
        left = binop(p, JN_BINOP, JO_TILDE, t, left, parse_math2(p));
    }
    return left;
}

static jj_node *parse_math1(parser *p)
{
    jj_node *left = parse_concat(p);
    while (left && (is_op(p, JO_ADD) || is_op(p, JO_SUB))) {
        const jj_token *t = cur(p);
        advance(p);
        left = binop(p, JN_BINOP, (jj_op)t->op, t, left, parse_concat(p));
    }
    return left;
}

static jj_node *parse_compare(parser *p)
{
    const jj_token *start = cur(p);
    jj_node *expr = parse_math1(p);
    if (!expr)
        return NULL;
    nodevec ops = {0};
    for (;;) {
        const jj_token *t = cur(p);
        jj_op op;
        if (t->kind == JT_OP && (t->op == JO_EQ || t->op == JO_NE || t->op == JO_LT ||
                                 t->op == JO_LE || t->op == JO_GT || t->op == JO_GE)) {
            op = (jj_op)t->op;
            advance(p);
        } else if (tok_is_name(t, "in")) {
            op = JO_IN;
            advance(p);
        } else if (tok_is_name(t, "not") && tok_is_name(peek(p, 1), "in")) {
            op = JO_NOTIN;
            advance(p);
            advance(p);
        } else {
            break;
        }
        jj_node *o = new_node(p, JN_OPERAND, t);
        if (!o)
            return NULL;
        o->op = (uint8_t)op;
        o->a = parse_math1(p);
        if (!nv_push(p, &ops, o->a ? o : NULL))
            return NULL;
    }
    if (ops.n == 0)
        return expr;
    jj_node *n = new_node(p, JN_COMPARE, start);
    if (!n)
        return NULL;
    n->a = expr;
    n->kids = ops.v;
    n->n_kids = ops.n;
    return n;
}

static jj_node *parse_not(parser *p)
{
    if (is_name(p, "not")) {
        if (!enter(p))
            return NULL;
        const jj_token *t = cur(p);
        advance(p);
        jj_node *n = new_node(p, JN_NOT, t);
        if (n) {
            n->a = parse_not(p);
            if (!n->a)
                n = NULL;
        }
        leave(p);
        return n;
    }
    return parse_compare(p);
}

static jj_node *parse_and(parser *p)
{
    jj_node *left = parse_not(p);
    while (left && is_name(p, "and")) {
        const jj_token *t = cur(p);
        advance(p);
        left = binop(p, JN_AND, JO_NONE, t, left, parse_not(p));
    }
    return left;
}

static jj_node *parse_or(parser *p)
{
    jj_node *left = parse_and(p);
    while (left && is_name(p, "or")) {
        const jj_token *t = cur(p);
        advance(p);
        left = binop(p, JN_OR, JO_NONE, t, left, parse_and(p));
    }
    return left;
}

static jj_node *parse_condexpr(parser *p)
{
    if (!enter(p))
        return NULL;
    const jj_token *start = cur(p);
    jj_node *expr1 = parse_or(p);
    while (expr1 && is_name(p, "if")) {
        advance(p);
        jj_node *n = new_node(p, JN_CONDEXPR, start);
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
        if (is_name(p, "else")) {
            advance(p);
            n->c = parse_condexpr(p);
            if (!n->c) {
                expr1 = NULL;
                break;
            }
        }
        expr1 = n;
        start = cur(p);
    }
    leave(p);
    return expr1;
}

static jj_node *parse_expression(parser *p, bool with_condexpr)
{
    return with_condexpr ? parse_condexpr(p) : parse_or(p);
}

static bool is_tuple_end(const parser *p, const char *extra_end)
{
    const jj_token *t = cur(p);
    if (t->kind == JT_VAR_END || t->kind == JT_BLOCK_END || t->kind == JT_EOF)
        return true;
    if (t->kind == JT_OP && t->op == JO_RPAREN)
        return true;
    return extra_end && tok_is_name(t, extra_end);
}

/* Comma-separated expressions; a tuple node when there is a comma. */
static jj_node *parse_tuple(parser *p, bool simplified, bool with_condexpr,
                            const char *extra_end, bool explicit_parens)
{
    const jj_token *start = cur(p);
    nodevec items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.n > 0 && !expect_op(p, JO_COMMA, ","))
            return NULL;
        if (is_tuple_end(p, extra_end))
            break;
        jj_node *e = simplified ? parse_primary(p) : parse_expression(p, with_condexpr);
        if (!nv_push(p, &items, e))
            return NULL;
        if (is_op(p, JO_COMMA))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (items.n > 0)
            return items.v[0];
        if (!explicit_parens) {
            pfail_at(p, start, MOE_ERR_FORMAT, "expected an expression, got %s", tok_desc(start));
            return NULL;
        }
    }
    jj_node *n = new_node(p, JN_TUPLE, start);
    if (!n)
        return NULL;
    n->kids = items.v;
    n->n_kids = items.n;
    return n;
}

/* ---- statements ---------------------------------------------------------- */

static bool parse_body(parser *p, const char *const *ends, nodevec *out);

static bool at_block_end(parser *p)
{
    return expect_kind(p, JT_BLOCK_END, "'%}'");
}

/* True when the current tokens are `{% name` for a name in `ends`. */
static bool at_end_tag(const parser *p, const char *const *ends)
{
    if (cur(p)->kind != JT_BLOCK_BEGIN || !ends)
        return false;
    const jj_token *t = peek(p, 1);
    for (size_t k = 0; ends[k]; k++)
        if (tok_is_name(t, ends[k]))
            return true;
    return false;
}

/* Consumes `{% name %}` (the end of a block statement). */
static bool end_tag(parser *p, const char *name)
{
    advance(p); /* {% */
    if (!is_name(p, name)) {
        pfail_at(p, cur(p), MOE_ERR_FORMAT, "expected '%s'", name);
        return false;
    }
    advance(p);
    return at_block_end(p);
}

static bool check_target(parser *p, const jj_node *t, bool allow_ns)
{
    if (t->kind == JN_NAME)
        return true;
    if (t->kind == JN_TUPLE) {
        for (size_t k = 0; k < t->n_kids; k++)
            if (t->kids[k]->kind != JN_NAME)
                goto bad;
        return t->n_kids > 0;
    }
    if (allow_ns && t->kind == JN_GETATTR && t->a->kind == JN_NAME)
        return true;
bad:
    pfail_at(p, &(jj_token){.line = t->line, .col = t->col}, MOE_ERR_FORMAT, "cannot assign to this expression");
    return false;
}

static jj_node *parse_assign_target(parser *p, const char *extra_end, bool with_ns)
{
    if (with_ns && cur(p)->kind == JT_NAME && peek(p, 1)->kind == JT_OP && peek(p, 1)->op == JO_DOT &&
        peek(p, 2)->kind == JT_NAME) {
        const jj_token *ns = cur(p);
        jj_node *name = new_node(p, JN_NAME, ns);
        jj_node *attr = new_node(p, JN_GETATTR, peek(p, 1));
        if (!name || !attr)
            return NULL;
        name->s = ns->s;
        name->n = ns->n;
        attr->a = name;
        attr->s = peek(p, 2)->s;
        attr->n = peek(p, 2)->n;
        advance(p);
        advance(p);
        advance(p);
        return attr;
    }
    jj_node *t = parse_tuple(p, true, false, extra_end, false);
    if (!t || !check_target(p, t, false))
        return NULL;
    return t;
}

static jj_node *parse_for(parser *p, const jj_token *at)
{
    jj_node *n = new_node(p, JN_FOR, at);
    if (!n)
        return NULL;
    n->a = parse_assign_target(p, "in", false);
    if (!n->a)
        return NULL;
    if (!is_name(p, "in")) {
        pfail_at(p, cur(p), MOE_ERR_FORMAT, "expected 'in' in for loop");
        return NULL;
    }
    advance(p);
    n->b = parse_tuple(p, false, false, "recursive", false);
    if (!n->b)
        return NULL;
    if (is_name(p, "if")) {
        advance(p);
        n->c = parse_expression(p, true);
        if (!n->c)
            return NULL;
    }
    if (is_name(p, "recursive")) {
        pfail_at(p, cur(p), MOE_ERR_UNSUPPORTED, "unsupported construct: recursive for loop");
        return NULL;
    }
    if (!at_block_end(p))
        return NULL;
    static const char *const body_ends[] = {"endfor", "else", NULL};
    static const char *const else_ends[] = {"endfor", NULL};
    nodevec body = {0}, alt = {0};
    p->loop_depth++;
    bool ok = parse_body(p, body_ends, &body);
    p->loop_depth--;
    if (!ok)
        return NULL;
    if (tok_is_name(peek(p, 1), "else")) {
        advance(p);
        advance(p);
        if (!at_block_end(p) || !parse_body(p, else_ends, &alt))
            return NULL;
    }
    if (!end_tag(p, "endfor"))
        return NULL;
    n->kids = body.v;
    n->n_kids = body.n;
    n->kids2 = alt.v;
    n->n_kids2 = alt.n;
    return n;
}

static jj_node *parse_if(parser *p, const jj_token *at)
{
    jj_node *n = new_node(p, JN_IF, at);
    if (!n)
        return NULL;
    n->a = parse_tuple(p, false, false, NULL, false);
    if (!n->a || !at_block_end(p))
        return NULL;
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    static const char *const else_ends[] = {"endif", NULL};
    nodevec body = {0};
    if (!parse_body(p, ends, &body))
        return NULL;
    n->kids = body.v;
    n->n_kids = body.n;
    const jj_token *kw = peek(p, 1);
    if (tok_is_name(kw, "elif")) {
        advance(p);
        advance(p);
        /* elif is an if nested in the else branch; it consumes the endif. */
        jj_node *inner = parse_if(p, kw);
        if (!inner)
            return NULL;
        n->kids2 = moe_arena_alloc(p->arena, sizeof(jj_node *));
        if (!n->kids2) {
            pfail_at(p, kw, MOE_ERR_NOMEM, "out of memory");
            return NULL;
        }
        n->kids2[0] = inner;
        n->n_kids2 = 1;
        return n;
    }
    if (tok_is_name(kw, "else")) {
        advance(p);
        advance(p);
        nodevec alt = {0};
        if (!at_block_end(p) || !parse_body(p, else_ends, &alt))
            return NULL;
        n->kids2 = alt.v;
        n->n_kids2 = alt.n;
    }
    if (!end_tag(p, "endif"))
        return NULL;
    return n;
}

static jj_node *parse_set(parser *p, const jj_token *at)
{
    jj_node *target = parse_assign_target(p, NULL, true);
    if (!target)
        return NULL;
    if (is_op(p, JO_ASSIGN)) {
        advance(p);
        jj_node *n = new_node(p, JN_SET, at);
        if (!n)
            return NULL;
        n->a = target;
        n->b = parse_tuple(p, false, true, NULL, false);
        if (!n->b || !at_block_end(p))
            return NULL;
        return n;
    }
    /* Block set: {% set x [| filters] %}...{% endset %} */
    jj_node *n = new_node(p, JN_SET_BLOCK, at);
    if (!n)
        return NULL;
    n->a = target;
    if (target->kind == JN_TUPLE) {
        pfail_at(p, at, MOE_ERR_FORMAT, "a block set needs a single name");
        return NULL;
    }
    nodevec filters = {0};
    if (is_op(p, JO_PIPE)) {
        jj_node *f = parse_filter(p, NULL, false);
        if (!f)
            return NULL;
        /* The chain is nested innermost-first through `a`; flatten it. */
        for (jj_node *q = f; q; q = q->a)
            if (!nv_push(p, &filters, q))
                return NULL;
        for (size_t k = 0; k < filters.n / 2; k++) {
            jj_node *tmp = filters.v[k];
            filters.v[k] = filters.v[filters.n - 1 - k];
            filters.v[filters.n - 1 - k] = tmp;
        }
    }
    if (!at_block_end(p))
        return NULL;
    static const char *const ends[] = {"endset", NULL};
    nodevec body = {0};
    if (!parse_body(p, ends, &body) || !end_tag(p, "endset"))
        return NULL;
    n->kids = body.v;
    n->n_kids = body.n;
    n->kids2 = filters.v;
    n->n_kids2 = filters.n;
    return n;
}

/* Macro or caller parameters: (a, b=default, ...). */
static bool parse_params(parser *p, nodevec *params)
{
    if (!expect_op(p, JO_LPAREN, "("))
        return false;
    bool seen_default = false;
    while (!is_op(p, JO_RPAREN)) {
        if (params->n > 0 && !expect_op(p, JO_COMMA, ","))
            return false;
        if (is_op(p, JO_RPAREN))
            break;
        const jj_token *t = cur(p);
        if (t->kind != JT_NAME) {
            pfail_at(p, t, MOE_ERR_FORMAT, "expected a parameter name");
            return false;
        }
        jj_node *prm = new_node(p, JN_PARAM, t);
        if (!prm)
            return false;
        prm->s = t->s;
        prm->n = t->n;
        advance(p);
        if (is_op(p, JO_ASSIGN)) {
            advance(p);
            prm->a = parse_expression(p, true);
            if (!prm->a)
                return false;
            seen_default = true;
        } else if (seen_default) {
            pfail_at(p, t, MOE_ERR_FORMAT, "parameter without a default after one with a default");
            return false;
        }
        if (!nv_push(p, params, prm))
            return false;
    }
    advance(p);
    return true;
}

static jj_node *parse_macro(parser *p, const jj_token *at)
{
    const jj_token *name = cur(p);
    if (name->kind != JT_NAME) {
        pfail_at(p, name, MOE_ERR_FORMAT, "expected a macro name");
        return NULL;
    }
    jj_node *n = new_node(p, JN_MACRO, at);
    if (!n)
        return NULL;
    n->s = name->s;
    n->n = name->n;
    advance(p);
    nodevec params = {0}, body = {0};
    if (!parse_params(p, &params) || !at_block_end(p))
        return NULL;
    static const char *const ends[] = {"endmacro", NULL};
    int saved = p->loop_depth;
    p->loop_depth = 0; /* a loop outside the macro is not the macro's */
    bool ok = parse_body(p, ends, &body);
    p->loop_depth = saved;
    if (!ok || !end_tag(p, "endmacro"))
        return NULL;
    n->kids = body.v;
    n->n_kids = body.n;
    n->kids2 = params.v;
    n->n_kids2 = params.n;
    return n;
}

static jj_node *parse_call_block(parser *p, const jj_token *at)
{
    jj_node *n = new_node(p, JN_CALL_BLOCK, at);
    if (!n)
        return NULL;
    nodevec params = {0}, body = {0};
    if (is_op(p, JO_LPAREN) && !parse_params(p, &params))
        return NULL;
    n->a = parse_expression(p, true);
    if (!n->a)
        return NULL;
    if (n->a->kind != JN_CALL) {
        pfail_at(p, at, MOE_ERR_FORMAT, "'call' needs a macro call");
        return NULL;
    }
    if (!at_block_end(p))
        return NULL;
    static const char *const ends[] = {"endcall", NULL};
    int saved = p->loop_depth;
    p->loop_depth = 0;
    bool ok = parse_body(p, ends, &body);
    p->loop_depth = saved;
    if (!ok || !end_tag(p, "endcall"))
        return NULL;
    n->kids = body.v;
    n->n_kids = body.n;
    n->kids2 = params.v;
    n->n_kids2 = params.n;
    return n;
}

static jj_node *parse_filter_block(parser *p, const jj_token *at)
{
    jj_node *n = new_node(p, JN_FILTER_BLOCK, at);
    if (!n)
        return NULL;
    jj_node *f = parse_filter(p, NULL, true);
    if (!f || !at_block_end(p))
        return NULL;
    nodevec filters = {0}, body = {0};
    for (jj_node *q = f; q; q = q->a)
        if (!nv_push(p, &filters, q))
            return NULL;
    for (size_t k = 0; k < filters.n / 2; k++) {
        jj_node *tmp = filters.v[k];
        filters.v[k] = filters.v[filters.n - 1 - k];
        filters.v[filters.n - 1 - k] = tmp;
    }
    static const char *const ends[] = {"endfilter", NULL};
    if (!parse_body(p, ends, &body) || !end_tag(p, "endfilter"))
        return NULL;
    n->kids = body.v;
    n->n_kids = body.n;
    n->kids2 = filters.v;
    n->n_kids2 = filters.n;
    return n;
}

/* {% with a = 1, b = 2 %} ... {% endwith %}, and transformers'
 * {% generation %} ... {% endgeneration %} (no assignments). */
static jj_node *parse_with(parser *p, const jj_token *at, const char *end)
{
    jj_node *n = new_node(p, JN_WITH, at);
    if (!n)
        return NULL;
    nodevec sets = {0}, body = {0};
    while (cur(p)->kind != JT_BLOCK_END) {
        if (sets.n > 0 && !expect_op(p, JO_COMMA, ","))
            return NULL;
        const jj_token *t = cur(p);
        jj_node *s = new_node(p, JN_SET, t);
        if (!s)
            return NULL;
        s->a = parse_assign_target(p, NULL, false);
        if (!s->a || !expect_op(p, JO_ASSIGN, "="))
            return NULL;
        s->b = parse_expression(p, true);
        if (!nv_push(p, &sets, s->b ? s : NULL))
            return NULL;
    }
    advance(p);
    const char *ends[] = {end, NULL};
    if (!parse_body(p, ends, &body) || !end_tag(p, end))
        return NULL;
    n->kids = body.v;
    n->n_kids = body.n;
    n->kids2 = sets.v;
    n->n_kids2 = sets.n;
    return n;
}

static const char *const k_unsupported_tags[] = {
    "include", "import", "from", "extends", "block", "autoescape", "trans",
    "pluralize", "endtrans", "debug", NULL,
};

static jj_node *parse_statement(parser *p)
{
    const jj_token *open = cur(p);
    advance(p); /* {% */
    const jj_token *kw = cur(p);
    if (kw->kind != JT_NAME) {
        pfail_at(p, kw, MOE_ERR_FORMAT, "expected a tag name after '{%%'");
        return NULL;
    }
    advance(p);
    if (tok_is_name(kw, "if"))
        return parse_if(p, open);
    if (tok_is_name(kw, "for"))
        return parse_for(p, open);
    if (tok_is_name(kw, "set"))
        return parse_set(p, open);
    if (tok_is_name(kw, "macro"))
        return parse_macro(p, open);
    if (tok_is_name(kw, "call"))
        return parse_call_block(p, open);
    if (tok_is_name(kw, "filter"))
        return parse_filter_block(p, open);
    if (tok_is_name(kw, "with"))
        return parse_with(p, open, "endwith");
    if (tok_is_name(kw, "generation")) {
        if (cur(p)->kind != JT_BLOCK_END) {
            pfail_at(p, cur(p), MOE_ERR_FORMAT, "'generation' takes no arguments");
            return NULL;
        }
        return parse_with(p, open, "endgeneration");
    }
    if (tok_is_name(kw, "do")) {
        jj_node *n = new_node(p, JN_DO, open);
        if (!n)
            return NULL;
        n->a = parse_tuple(p, false, true, NULL, false);
        if (!n->a || !at_block_end(p))
            return NULL;
        return n;
    }
    if (tok_is_name(kw, "break") || tok_is_name(kw, "continue")) {
        if (p->loop_depth == 0) {
            pfail_at(p, kw, MOE_ERR_FORMAT, "'%.*s' outside of a for loop", (int)kw->n, kw->s);
            return NULL;
        }
        jj_node *n = new_node(p, tok_is_name(kw, "break") ? JN_BREAK : JN_CONTINUE, open);
        if (!n || !at_block_end(p))
            return NULL;
        return n;
    }
    for (size_t k = 0; k_unsupported_tags[k]; k++)
        if (tok_is_name(kw, k_unsupported_tags[k])) {
            pfail_at(p, kw, MOE_ERR_UNSUPPORTED, "unsupported construct: '%s' tag", k_unsupported_tags[k]);
            return NULL;
        }
    pfail_at(p, kw, MOE_ERR_FORMAT, "unexpected tag '%.*s'", (int)(kw->n > 40 ? 40 : kw->n), kw->s);
    return NULL;
}

/* Statements until an end tag in `ends` (not consumed) or, with ends ==
 * NULL, the end of the template. */
static bool parse_body(parser *p, const char *const *ends, nodevec *out)
{
    if (!enter(p))
        return false;
    bool ok = true;
    for (;;) {
        const jj_token *t = cur(p);
        if (t->kind == JT_EOF) {
            if (ends) {
                /* Name the tag that closes the block (endif, endfor...). */
                const char *closer = ends[0];
                for (size_t k = 0; ends[k]; k++)
                    if (strncmp(ends[k], "end", 3) == 0)
                        closer = ends[k];
                pfail_at(p, t, MOE_ERR_FORMAT, "unexpected end of template: expected '{%% %s %%}'", closer);
                ok = false;
            }
            break;
        }
        if (at_end_tag(p, ends))
            break;
        jj_node *n = NULL;
        if (t->kind == JT_TEXT) {
            n = new_node(p, JN_TEXT, t);
            if (n) {
                n->s = t->s;
                n->n = t->n;
            }
            advance(p);
        } else if (t->kind == JT_VAR_BEGIN) {
            advance(p);
            n = new_node(p, JN_OUTPUT, t);
            if (n) {
                n->a = parse_tuple(p, false, true, NULL, false);
                if (!n->a || !expect_kind(p, JT_VAR_END, "'}}'"))
                    n = NULL;
            }
        } else if (t->kind == JT_BLOCK_BEGIN) {
            n = parse_statement(p);
        } else {
            pfail_at(p, t, MOE_ERR_FORMAT, "unexpected %s", tok_desc(t));
        }
        if (!nv_push(p, out, n)) {
            ok = false;
            break;
        }
    }
    leave(p);
    return ok && p->status == MOE_OK;
}

moe_status jj_parse(jj_template *tpl, const jj_token *toks, size_t n_toks, moe_err *err)
{
    parser p = {
        .arena = &tpl->arena, .t = toks, .n = n_toks, .err = err, .status = MOE_OK,
    };
    nodevec body = {0};
    if (!parse_body(&p, NULL, &body))
        return p.status != MOE_OK ? p.status : moe_fail(err, MOE_ERR_FORMAT, "template: parse error");
    tpl->body = body.v;
    tpl->n_body = body.n;
    return MOE_OK;
}

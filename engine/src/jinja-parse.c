/*
 * jinja-parse.c — tokens to an AST, by recursive descent: token plumbing,
 * statements and jj_parse(); expressions are in jinja-parse-expr.c.
 *
 * Statements, as Python Jinja2 parses them: if/elif/else, for (with `if` filter and else), set (also
 * `ns.attr =`, tuple targets and block form with filters), macro, call,
 * filter, with, do, break/continue, and transformers' generation tag.
 * include/import/extends/block and the like are rejected with
 * MOE_ERR_UNSUPPORTED naming the construct and its line:column. Syntax
 * errors are MOE_ERR_FORMAT with the line:column of the offending token.
 * Nesting is bounded by JJ_MAX_PARSE_DEPTH.
 */
#include "jinja-parse.h"

#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- plumbing ------------------------------------------------------------ */

const jj_token *jp_cur(const parser *p)
{
    return &p->t[p->i < p->n ? p->i : p->n - 1];
}

const jj_token *jp_peek(const parser *p, size_t k)
{
    size_t j = p->i + k;
    return &p->t[j < p->n ? j : p->n - 1];
}

void jp_advance(parser *p)
{
    if (p->i + 1 < p->n)
        p->i++;
}

moe_status jp_fail(parser *p, const jj_token *tok, moe_status st, const char *fmt, ...)
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

const char *jp_tok_desc(const jj_token *t)
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

bool jp_is_op(const parser *p, jj_op op)
{
    const jj_token *t = jp_cur(p);
    return t->kind == JT_OP && t->op == op;
}

bool jp_tok_is_name(const jj_token *t, const char *name)
{
    return t->kind == JT_NAME && t->n == strlen(name) && memcmp(t->s, name, t->n) == 0;
}

bool jp_is_name(const parser *p, const char *name)
{
    return jp_tok_is_name(jp_cur(p), name);
}

bool jp_expect_op(parser *p, jj_op op, const char *text)
{
    if (jp_is_op(p, op)) {
        jp_advance(p);
        return true;
    }
    jp_fail(p, jp_cur(p), MOE_ERR_FORMAT, "expected '%s', got %s", text, jp_tok_desc(jp_cur(p)));
    return false;
}

bool jp_expect_kind(parser *p, jj_tok_kind kind, const char *text)
{
    if (jp_cur(p)->kind == kind) {
        jp_advance(p);
        return true;
    }
    jp_fail(p, jp_cur(p), MOE_ERR_FORMAT, "expected %s, got %s", text, jp_tok_desc(jp_cur(p)));
    return false;
}

jj_node *jp_new_node(parser *p, jj_node_kind kind, const jj_token *at)
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

bool jp_nv_push(parser *p, nodevec *v, jj_node *node)
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

bool jp_enter(parser *p)
{
    if (++p->depth > JJ_MAX_PARSE_DEPTH) {
        jp_fail(p, jp_cur(p), MOE_ERR_RANGE, "nesting deeper than %d levels", JJ_MAX_PARSE_DEPTH);
        return false;
    }
    return true;
}

void jp_leave(parser *p)
{
    p->depth--;
}

/* ---- statements ---------------------------------------------------------- */

static bool parse_body(parser *p, const char *const *ends, nodevec *out);

static bool at_block_end(parser *p)
{
    return jp_expect_kind(p, JT_BLOCK_END, "'%}'");
}

/* True when the current tokens are `{% name` for a name in `ends`. */
static bool at_end_tag(const parser *p, const char *const *ends)
{
    if (jp_cur(p)->kind != JT_BLOCK_BEGIN || !ends)
        return false;
    const jj_token *t = jp_peek(p, 1);
    for (size_t k = 0; ends[k]; k++)
        if (jp_tok_is_name(t, ends[k]))
            return true;
    return false;
}

/* Consumes `{% name %}` (the end of a block statement). */
static bool end_tag(parser *p, const char *name)
{
    jp_advance(p); /* {% */
    if (!jp_is_name(p, name)) {
        jp_fail(p, jp_cur(p), MOE_ERR_FORMAT, "expected '%s'", name);
        return false;
    }
    jp_advance(p);
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
    jp_fail(p, &(jj_token){.line = t->line, .col = t->col}, MOE_ERR_FORMAT, "cannot assign to this expression");
    return false;
}

static jj_node *parse_assign_target(parser *p, const char *extra_end, bool with_ns)
{
    if (with_ns && jp_cur(p)->kind == JT_NAME && jp_peek(p, 1)->kind == JT_OP && jp_peek(p, 1)->op == JO_DOT &&
        jp_peek(p, 2)->kind == JT_NAME) {
        const jj_token *ns = jp_cur(p);
        jj_node *name = jp_new_node(p, JN_NAME, ns);
        jj_node *attr = jp_new_node(p, JN_GETATTR, jp_peek(p, 1));
        if (!name || !attr)
            return NULL;
        name->s = ns->s;
        name->n = ns->n;
        attr->a = name;
        attr->s = jp_peek(p, 2)->s;
        attr->n = jp_peek(p, 2)->n;
        jp_advance(p);
        jp_advance(p);
        jp_advance(p);
        return attr;
    }
    jj_node *t = jp_parse_tuple(p, true, false, extra_end, false);
    if (!t || !check_target(p, t, false))
        return NULL;
    return t;
}

static jj_node *parse_for(parser *p, const jj_token *at)
{
    jj_node *n = jp_new_node(p, JN_FOR, at);
    if (!n)
        return NULL;
    n->a = parse_assign_target(p, "in", false);
    if (!n->a)
        return NULL;
    if (!jp_is_name(p, "in")) {
        jp_fail(p, jp_cur(p), MOE_ERR_FORMAT, "expected 'in' in for loop");
        return NULL;
    }
    jp_advance(p);
    n->b = jp_parse_tuple(p, false, false, "recursive", false);
    if (!n->b)
        return NULL;
    if (jp_is_name(p, "if")) {
        jp_advance(p);
        n->c = jp_parse_expression(p, true);
        if (!n->c)
            return NULL;
    }
    if (jp_is_name(p, "recursive")) {
        jp_fail(p, jp_cur(p), MOE_ERR_UNSUPPORTED, "unsupported construct: recursive for loop");
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
    if (jp_tok_is_name(jp_peek(p, 1), "else")) {
        jp_advance(p);
        jp_advance(p);
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
    jj_node *n = jp_new_node(p, JN_IF, at);
    if (!n)
        return NULL;
    n->a = jp_parse_tuple(p, false, false, NULL, false);
    if (!n->a || !at_block_end(p))
        return NULL;
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    static const char *const else_ends[] = {"endif", NULL};
    nodevec body = {0};
    if (!parse_body(p, ends, &body))
        return NULL;
    n->kids = body.v;
    n->n_kids = body.n;
    const jj_token *kw = jp_peek(p, 1);
    if (jp_tok_is_name(kw, "elif")) {
        jp_advance(p);
        jp_advance(p);
        /* elif is an if nested in the else branch; it consumes the endif. */
        jj_node *inner = parse_if(p, kw);
        if (!inner)
            return NULL;
        n->kids2 = moe_arena_alloc(p->arena, sizeof(jj_node *));
        if (!n->kids2) {
            jp_fail(p, kw, MOE_ERR_NOMEM, "out of memory");
            return NULL;
        }
        n->kids2[0] = inner;
        n->n_kids2 = 1;
        return n;
    }
    if (jp_tok_is_name(kw, "else")) {
        jp_advance(p);
        jp_advance(p);
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
    if (jp_is_op(p, JO_ASSIGN)) {
        jp_advance(p);
        jj_node *n = jp_new_node(p, JN_SET, at);
        if (!n)
            return NULL;
        n->a = target;
        n->b = jp_parse_tuple(p, false, true, NULL, false);
        if (!n->b || !at_block_end(p))
            return NULL;
        return n;
    }
    /* Block set: {% set x [| filters] %}...{% endset %} */
    jj_node *n = jp_new_node(p, JN_SET_BLOCK, at);
    if (!n)
        return NULL;
    n->a = target;
    if (target->kind == JN_TUPLE) {
        jp_fail(p, at, MOE_ERR_FORMAT, "a block set needs a single name");
        return NULL;
    }
    nodevec filters = {0};
    if (jp_is_op(p, JO_PIPE)) {
        jj_node *f = jp_parse_filter(p, NULL, false);
        if (!f)
            return NULL;
        /* The chain is nested innermost-first through `a`; flatten it. */
        for (jj_node *q = f; q; q = q->a)
            if (!jp_nv_push(p, &filters, q))
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
    if (!jp_expect_op(p, JO_LPAREN, "("))
        return false;
    bool seen_default = false;
    while (!jp_is_op(p, JO_RPAREN)) {
        if (params->n > 0 && !jp_expect_op(p, JO_COMMA, ","))
            return false;
        if (jp_is_op(p, JO_RPAREN))
            break;
        const jj_token *t = jp_cur(p);
        if (t->kind != JT_NAME) {
            jp_fail(p, t, MOE_ERR_FORMAT, "expected a parameter name");
            return false;
        }
        jj_node *prm = jp_new_node(p, JN_PARAM, t);
        if (!prm)
            return false;
        prm->s = t->s;
        prm->n = t->n;
        jp_advance(p);
        if (jp_is_op(p, JO_ASSIGN)) {
            jp_advance(p);
            prm->a = jp_parse_expression(p, true);
            if (!prm->a)
                return false;
            seen_default = true;
        } else if (seen_default) {
            jp_fail(p, t, MOE_ERR_FORMAT, "parameter without a default after one with a default");
            return false;
        }
        if (!jp_nv_push(p, params, prm))
            return false;
    }
    jp_advance(p);
    return true;
}

static jj_node *parse_macro(parser *p, const jj_token *at)
{
    const jj_token *name = jp_cur(p);
    if (name->kind != JT_NAME) {
        jp_fail(p, name, MOE_ERR_FORMAT, "expected a macro name");
        return NULL;
    }
    jj_node *n = jp_new_node(p, JN_MACRO, at);
    if (!n)
        return NULL;
    n->s = name->s;
    n->n = name->n;
    jp_advance(p);
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
    jj_node *n = jp_new_node(p, JN_CALL_BLOCK, at);
    if (!n)
        return NULL;
    nodevec params = {0}, body = {0};
    if (jp_is_op(p, JO_LPAREN) && !parse_params(p, &params))
        return NULL;
    n->a = jp_parse_expression(p, true);
    if (!n->a)
        return NULL;
    if (n->a->kind != JN_CALL) {
        jp_fail(p, at, MOE_ERR_FORMAT, "'call' needs a macro call");
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
    jj_node *n = jp_new_node(p, JN_FILTER_BLOCK, at);
    if (!n)
        return NULL;
    jj_node *f = jp_parse_filter(p, NULL, true);
    if (!f || !at_block_end(p))
        return NULL;
    nodevec filters = {0}, body = {0};
    for (jj_node *q = f; q; q = q->a)
        if (!jp_nv_push(p, &filters, q))
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
    jj_node *n = jp_new_node(p, JN_WITH, at);
    if (!n)
        return NULL;
    nodevec sets = {0}, body = {0};
    while (jp_cur(p)->kind != JT_BLOCK_END) {
        if (sets.n > 0 && !jp_expect_op(p, JO_COMMA, ","))
            return NULL;
        const jj_token *t = jp_cur(p);
        jj_node *s = jp_new_node(p, JN_SET, t);
        if (!s)
            return NULL;
        s->a = parse_assign_target(p, NULL, false);
        if (!s->a || !jp_expect_op(p, JO_ASSIGN, "="))
            return NULL;
        s->b = jp_parse_expression(p, true);
        if (!jp_nv_push(p, &sets, s->b ? s : NULL))
            return NULL;
    }
    jp_advance(p);
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
    const jj_token *open = jp_cur(p);
    jp_advance(p); /* {% */
    const jj_token *kw = jp_cur(p);
    if (kw->kind != JT_NAME) {
        jp_fail(p, kw, MOE_ERR_FORMAT, "expected a tag name after '{%%'");
        return NULL;
    }
    jp_advance(p);
    if (jp_tok_is_name(kw, "if"))
        return parse_if(p, open);
    if (jp_tok_is_name(kw, "for"))
        return parse_for(p, open);
    if (jp_tok_is_name(kw, "set"))
        return parse_set(p, open);
    if (jp_tok_is_name(kw, "macro"))
        return parse_macro(p, open);
    if (jp_tok_is_name(kw, "call"))
        return parse_call_block(p, open);
    if (jp_tok_is_name(kw, "filter"))
        return parse_filter_block(p, open);
    if (jp_tok_is_name(kw, "with"))
        return parse_with(p, open, "endwith");
    if (jp_tok_is_name(kw, "generation")) {
        if (jp_cur(p)->kind != JT_BLOCK_END) {
            jp_fail(p, jp_cur(p), MOE_ERR_FORMAT, "'generation' takes no arguments");
            return NULL;
        }
        return parse_with(p, open, "endgeneration");
    }
    if (jp_tok_is_name(kw, "do")) {
        jj_node *n = jp_new_node(p, JN_DO, open);
        if (!n)
            return NULL;
        n->a = jp_parse_tuple(p, false, true, NULL, false);
        if (!n->a || !at_block_end(p))
            return NULL;
        return n;
    }
    if (jp_tok_is_name(kw, "break") || jp_tok_is_name(kw, "continue")) {
        if (p->loop_depth == 0) {
            jp_fail(p, kw, MOE_ERR_FORMAT, "'%.*s' outside of a for loop", (int)kw->n, kw->s);
            return NULL;
        }
        jj_node *n = jp_new_node(p, jp_tok_is_name(kw, "break") ? JN_BREAK : JN_CONTINUE, open);
        if (!n || !at_block_end(p))
            return NULL;
        return n;
    }
    for (size_t k = 0; k_unsupported_tags[k]; k++)
        if (jp_tok_is_name(kw, k_unsupported_tags[k])) {
            jp_fail(p, kw, MOE_ERR_UNSUPPORTED, "unsupported construct: '%s' tag", k_unsupported_tags[k]);
            return NULL;
        }
    jp_fail(p, kw, MOE_ERR_FORMAT, "unexpected tag '%.*s'", (int)(kw->n > 40 ? 40 : kw->n), kw->s);
    return NULL;
}

/* Statements until an end tag in `ends` (not consumed) or, with ends ==
 * NULL, the end of the template. */
static bool parse_body(parser *p, const char *const *ends, nodevec *out)
{
    if (!jp_enter(p))
        return false;
    bool ok = true;
    for (;;) {
        const jj_token *t = jp_cur(p);
        if (t->kind == JT_EOF) {
            if (ends) {
                /* Name the tag that closes the block (endif, endfor...). */
                const char *closer = ends[0];
                for (size_t k = 0; ends[k]; k++)
                    if (strncmp(ends[k], "end", 3) == 0)
                        closer = ends[k];
                jp_fail(p, t, MOE_ERR_FORMAT, "unexpected end of template: expected '{%% %s %%}'", closer);
                ok = false;
            }
            break;
        }
        if (at_end_tag(p, ends))
            break;
        jj_node *n = NULL;
        if (t->kind == JT_TEXT) {
            n = jp_new_node(p, JN_TEXT, t);
            if (n) {
                n->s = t->s;
                n->n = t->n;
            }
            jp_advance(p);
        } else if (t->kind == JT_VAR_BEGIN) {
            jp_advance(p);
            n = jp_new_node(p, JN_OUTPUT, t);
            if (n) {
                n->a = jp_parse_tuple(p, false, true, NULL, false);
                if (!n->a || !jp_expect_kind(p, JT_VAR_END, "'}}'"))
                    n = NULL;
            }
        } else if (t->kind == JT_BLOCK_BEGIN) {
            n = parse_statement(p);
        } else {
            jp_fail(p, t, MOE_ERR_FORMAT, "unexpected %s", jp_tok_desc(t));
        }
        if (!jp_nv_push(p, out, n)) {
            ok = false;
            break;
        }
    }
    jp_leave(p);
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

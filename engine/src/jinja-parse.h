/*
 * jinja-parse.h — what the two halves of the template parser share:
 * jinja-parse.c (token plumbing, statements, the entry point jj_parse) and
 * jinja-parse-expr.c (the expression grammar). Internal to them.
 */
#ifndef MOE_JINJA_PARSE_H
#define MOE_JINJA_PARSE_H

#include "jinja.h"

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

/* Token access; jp_fail records the first error at `tok` and returns the
 * status (MOE_ERR_FORMAT for syntax, MOE_ERR_UNSUPPORTED, ...). */
const jj_token *jp_cur(const parser *p);
const jj_token *jp_peek(const parser *p, size_t k);
void jp_advance(parser *p);
moe_status jp_fail(parser *p, const jj_token *tok, moe_status st, const char *fmt, ...) MOE_PRINTF(4, 5);
const char *jp_tok_desc(const jj_token *t);
bool jp_is_op(const parser *p, jj_op op);
bool jp_tok_is_name(const jj_token *t, const char *name);
bool jp_is_name(const parser *p, const char *name);
bool jp_expect_op(parser *p, jj_op op, const char *text);
bool jp_expect_kind(parser *p, jj_tok_kind kind, const char *text);
/* A zeroed node at `at`'s position, in the template arena. */
jj_node *jp_new_node(parser *p, jj_node_kind kind, const jj_token *at);
/* Appends `node` (false, error recorded, if it is NULL or memory ran out). */
bool jp_nv_push(parser *p, nodevec *v, jj_node *node);
/* Nesting guard around recursive productions (JJ_MAX_PARSE_DEPTH). */
bool jp_enter(parser *p);
void jp_leave(parser *p);

/* Expressions (jinja-parse-expr.c). */
jj_node *jp_parse_expression(parser *p, bool with_condexpr);
/* Comma-separated expressions; a JN_TUPLE when there is a comma.
 * `simplified`: primaries only (assignment targets); `extra_end`: a name
 * that also ends the list ("in", "recursive"). */
jj_node *jp_parse_tuple(parser *p, bool simplified, bool with_condexpr, const char *extra_end,
                        bool explicit_parens);
/* `|name(args)` chain; `operand` may be NULL (filter blocks, block set);
 * `inline_first`: the first name comes without a pipe. */
jj_node *jp_parse_filter(parser *p, jj_node *operand, bool inline_first);

#endif /* MOE_JINJA_PARSE_H */

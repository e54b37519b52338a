/*
 * jinja.h — internal interface of libmoe's chat-template interpreter.
 *
 * Models ship their prompt format as a Jinja2 template
 * (tokenizer.chat_template). This is a from-scratch interpreter for the
 * subset of Jinja2 those templates use, following Python Jinja2 as
 * Hugging Face transformers configures it (trim_blocks, lstrip_blocks,
 * loopcontrols, a `tojson` that keeps non-ASCII text). Pipeline:
 *
 *   source --jj_lex--> tokens --jj_parse--> AST (jj_node) --jj_render--> text
 *
 * Files: jinja-lex.c (tokens, whitespace control), jinja-parse.c and
 * jinja-parse-expr.c (AST; shared in jinja-parse.h), jinja-value.c
 * (values, containers, equality, access), jinja-print.c (str, repr, JSON,
 * Markup escaping), jinja-eval.c (statements, expressions, scopes,
 * macros), jinja-filters.c, jinja-tests.c, jinja-str.c (str methods,
 * % formatting), jinja-methods.c (dict/list/loop methods, globals),
 * chat.c (the public moe_chat_* API).
 *
 * Memory: a parsed template lives in one arena (tokens, nodes, literal
 * strings); each render has its own arena for every value it creates, freed
 * in one go, with a byte budget. Values never own memory.
 *
 * Internal names use the short prefix `jj_`; none of them is public.
 */
#ifndef MOE_JINJA_H
#define MOE_JINJA_H

#include "moe.h"
#include "arena.h"
#include "util.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* ---- limits ------------------------------------------------------------ */

/* Bounds that keep a hostile template from hanging or exhausting memory.
 * Each one, when hit, is a MOE_ERR_RANGE naming the limit. */
typedef struct jj_limits {
    size_t   max_output_bytes; /* any one rendered string (output, capture) */
    size_t   max_memory_bytes; /* the render arena                          */
    uint64_t max_steps;        /* evaluation steps: nodes, loop iterations,
                                  items touched by filters                   */
    int      max_depth;        /* nested evaluation: template nesting times
                                  macro calls                               */
} jj_limits;

/* Defaults: 16 MiB output, 256 MiB memory, 20M steps, depth 400. */
void jj_limits_default(jj_limits *lim);

/* Deepest expression/statement nesting the parser accepts. */
#define JJ_MAX_PARSE_DEPTH 128

/* ---- tokens ------------------------------------------------------------ */

typedef enum jj_tok_kind {
    JT_EOF = 0,
    JT_TEXT,        /* literal template text                               */
    JT_BLOCK_BEGIN, /* {%                                                  */
    JT_BLOCK_END,   /* %}                                                  */
    JT_VAR_BEGIN,   /* {{                                                  */
    JT_VAR_END,     /* }}                                                  */
    JT_NAME,
    JT_STRING,      /* s/n hold the unescaped UTF-8 value                  */
    JT_INT,
    JT_FLOAT,
    JT_OP,
} jj_tok_kind;

typedef enum jj_op {
    JO_NONE = 0,
    JO_ADD, JO_SUB, JO_MUL, JO_DIV, JO_FLOORDIV, JO_MOD, JO_POW, JO_TILDE,
    JO_EQ, JO_NE, JO_LT, JO_LE, JO_GT, JO_GE,
    JO_ASSIGN, JO_DOT, JO_COMMA, JO_COLON, JO_PIPE, JO_SEMICOLON,
    JO_LPAREN, JO_RPAREN, JO_LBRACKET, JO_RBRACKET, JO_LBRACE, JO_RBRACE,
    /* only in the AST: */
    JO_IN, JO_NOTIN,
} jj_op;

typedef struct jj_token {
    uint8_t     kind;  /* jj_tok_kind */
    uint8_t     op;    /* jj_op for JT_OP */
    uint32_t    line, col;
    const char *s;     /* text, name or string value (not NUL-terminated) */
    size_t      n;
    int64_t     i;
    double      f;
} jj_token;

/* Tokenizes `len` bytes of template source into an array in `arena`.
 * Applies Jinja2's newline normalisation, trailing-newline removal,
 * trim_blocks, lstrip_blocks and the -/+ whitespace markers; drops
 * comments; turns {% raw %} blocks into text. */
moe_status jj_lex(moe_arena *arena, const char *src, size_t len,
                  jj_token **out, size_t *n_out, moe_err *err);

/* ---- values ------------------------------------------------------------ */

typedef enum jj_type {
    JJ_UNDEF = 0, /* Jinja2's Undefined; u.s may name what was missing */
    JJ_NONE,
    JJ_BOOL,
    JJ_INT,
    JJ_FLOAT,
    JJ_STR,
    JJ_LIST,      /* also tuples (flag JJ_F_TUPLE)                      */
    JJ_DICT,
    JJ_NS,        /* namespace(): a dict with attribute assignment      */
    JJ_FUNC,      /* macro, caller, builtin function or bound method    */
    JJ_LOOP,      /* the `loop` object of a for loop                    */
} jj_type;

#define JJ_F_TUPLE 1u
/* A list standing in for a Python generator (what map, select*, reject*,
 * items, unique and batch return in Jinja2): iterable, always true, no
 * len(), no indexing, prints as a generator. `|list` makes a real list. */
#define JJ_F_GEN 2u
/* A string that is Python's markupsafe.Markup (made by |safe or |escape).
 * Even with autoescaping off, Markup + str, str + Markup and Markup % x
 * HTML-escape the plain operand, and Markup's string methods return
 * Markup; `~`, join, macros and tojson give plain strings. */
#define JJ_F_SAFE 4u
/* A list made by range(): Python's range object, which is not equal to a
 * list, cannot be added or serialised, and prints as "range(a, b)" (which
 * this interpreter reports as unsupported rather than guess). Slicing
 * keeps the flag; |list and other copies drop it. */
#define JJ_F_RANGE 8u

typedef struct jj_list jj_list;
typedef struct jj_dict jj_dict;
typedef struct jj_func jj_func;
typedef struct jj_loop jj_loop;
typedef struct jj_node jj_node;
typedef struct jj_scope jj_scope;

typedef struct jj_value {
    uint8_t type;  /* jj_type */
    uint8_t flags;
    union {
        bool    b;
        int64_t i;
        double  f;
        struct { const char *p; size_t n; } s; /* UTF-8, not NUL-terminated */
        jj_list *l;
        jj_dict *d;
        jj_func *fn;
        jj_loop *loop;
    } u;
} jj_value;

struct jj_list {
    jj_value *items;
    size_t    n, cap;
};

/* Insertion-ordered map. Keys are any hashable value (strings in
 * practice); a hash index is built once a dict outgrows a linear scan. */
struct jj_dict {
    jj_value *keys;
    jj_value *vals;
    size_t    n, cap;
    uint32_t *slots;   /* open addressing: entry index + 1, 0 = empty */
    size_t    n_slots; /* power of two, or 0 while linear              */
};

typedef enum jj_func_kind {
    JF_MACRO,   /* node: the JN_MACRO; closure: defining scope           */
    JF_CALLER,  /* node: the JN_CALL_BLOCK; closure: its scope           */
    JF_GLOBAL,  /* id: a jj_global_id                                    */
    JF_METHOD,  /* self + name: a method looked up when called           */
} jj_func_kind;

struct jj_func {
    uint8_t        kind;
    int            id;
    const jj_node *node;
    jj_scope      *closure;
    jj_value       self;
    const char    *name;
    size_t         name_len;
};

struct jj_loop {
    const jj_value *items;
    size_t          n;
    size_t          i;            /* current index0                      */
    jj_value        last_changed; /* loop.changed()'s memory (a tuple)   */
    bool            has_changed;
};

/* ---- AST --------------------------------------------------------------- */

typedef enum jj_node_kind {
    /* statements */
    JN_TEXT, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SET_BLOCK, JN_MACRO,
    JN_CALL_BLOCK, JN_FILTER_BLOCK, JN_BREAK, JN_CONTINUE, JN_DO, JN_WITH,
    /* expressions */
    JN_CONST, JN_NAME, JN_LIST, JN_TUPLE, JN_DICT, JN_GETATTR, JN_GETITEM,
    JN_SLICE, JN_CALL, JN_FILTER, JN_TEST, JN_NOT, JN_NEG, JN_POS,
    JN_BINOP, JN_COMPARE, JN_AND, JN_OR, JN_CONDEXPR,
    /* parts */
    JN_KWARG,   /* s = name, a = value (call arguments)                   */
    JN_PARAM,   /* s = name, a = default or NULL (macro parameters)       */
    JN_OPERAND, /* op + a: one link of a comparison chain                 */
    JN_PAIR,    /* a = key, b = value (dict literal)                      */
} jj_node_kind;

/* One node shape for everything; fields per kind:
 *   TEXT s/n | OUTPUT a | IF a cond, kids then, kids2 else
 *   FOR a target (NAME/TUPLE), b iterable, c filter or NULL, kids body,
 *       kids2 else | SET a target, b value | SET_BLOCK a target, kids body,
 *       kids2 filters (FILTER nodes with a == NULL)
 *   MACRO s name, kids body, kids2 PARAMs | CALL_BLOCK a CALL, kids body,
 *       kids2 PARAMs | FILTER_BLOCK kids body, kids2 filters | DO a
 *   WITH kids2 SETs, kids body
 *   CONST lit | NAME s | LIST/TUPLE kids | DICT kids PAIRs
 *   GETATTR a, s | GETITEM a, b | SLICE a, b start, c stop, d step
 *   CALL a callee, kids args (KWARG for keywords)
 *   FILTER a operand, s name, id filter, kids args
 *   TEST a operand, s name, id test, kids args, flags 1 = negated
 *   NOT/NEG/POS a | BINOP op, a, b | COMPARE a, kids OPERANDs
 *   AND/OR a, b | CONDEXPR a cond, b then, c else or NULL */
struct jj_node {
    uint8_t   kind;
    uint8_t   op;
    uint16_t  flags;
    int       id;
    uint32_t  line, col;
    const char *s;
    size_t    n;
    jj_node  *a, *b, *c, *d;
    jj_node **kids;
    size_t    n_kids;
    jj_node **kids2;
    size_t    n_kids2;
    jj_value  lit;
};

typedef struct jj_template {
    moe_arena arena;  /* tokens, nodes, literals                    */
    jj_node **body;   /* top-level statements                        */
    size_t    n_body;
} jj_template;

/* Parses tokens into `tpl` (whose arena must already hold the tokens). */
moe_status jj_parse(jj_template *tpl, const jj_token *toks, size_t n_toks, moe_err *err);

/* ---- evaluation context ------------------------------------------------ */

/* A growable output string in the render arena. */
typedef struct jj_buf {
    char  *p;
    size_t n, cap;
} jj_buf;

typedef struct jj_ctx {
    moe_arena      *arena;
    jj_limits       lim;
    uint64_t        steps;
    int             depth;
    jj_buf         *out;       /* where text currently goes            */
    moe_err        *err;
    moe_status      status;    /* first error, sticky                   */
    uint32_t        line, col; /* location reported by jj_fail          */
    int             ctl;       /* JJ_CTL_* after break/continue         */
    time_t          now;       /* strftime_now's clock (tests pin it)   */
    jj_scope       *root;
} jj_ctx;

#define JJ_CTL_NONE 0
#define JJ_CTL_BREAK 1
#define JJ_CTL_CONTINUE 2

struct jj_scope {
    jj_scope *parent;
    jj_dict   vars;
};

/* Records an error at ctx->line:col (first one wins) and returns status. */
moe_status jj_fail(jj_ctx *ctx, moe_status status, const char *fmt, ...) MOE_PRINTF(3, 4);
/* MOE_ERR_NOMEM, or MOE_ERR_RANGE when the arena budget ran out. */
moe_status jj_oom(jj_ctx *ctx);
/* Counts `n` steps against the budget. */
moe_status jj_step(jj_ctx *ctx, uint64_t n);
void *jj_alloc(jj_ctx *ctx, size_t size);

/* Renders the template with `root` holding the context variables. */
moe_status jj_render(jj_ctx *ctx, const jj_template *tpl, jj_buf *out);

/* ---- values (jinja-value.c) -------------------------------------------- */

jj_value jj_undef(const char *name, size_t n);
jj_value jj_none(void);
jj_value jj_bool(bool b);
jj_value jj_int(int64_t i);
jj_value jj_float(double f);
jj_value jj_str(const char *p, size_t n);
jj_value jj_new_list(jj_ctx *ctx, size_t cap); /* type UNDEF on failure */
jj_value jj_new_dict(jj_ctx *ctx);
jj_value jj_new_ns(jj_ctx *ctx);

moe_status jj_list_push(jj_ctx *ctx, jj_list *l, jj_value v);
/* Sets key -> value (replacing an existing key in place). */
moe_status jj_dict_set(jj_ctx *ctx, jj_dict *d, jj_value key, jj_value v);
moe_status jj_dict_set_str(jj_ctx *ctx, jj_dict *d, const char *k, size_t kn, jj_value v);
/* Index of key, or -1. */
long jj_dict_find(const jj_dict *d, jj_value key);
long jj_dict_find_str(const jj_dict *d, const char *k, size_t kn);
moe_status jj_dict_remove(jj_ctx *ctx, jj_dict *d, size_t idx);

bool jj_truthy(jj_value v);
const char *jj_type_name(jj_value v);
bool jj_is_str(jj_value v, const char *lit);

/* Python equality (1 == 1.0 == True, deep for lists and dicts). */
bool jj_equal(jj_value a, jj_value b);
/* Python ordering: -1/0/1 in *out, or an error for unorderable types.
 * `fold_case` compares strings case-insensitively (Jinja's sort, dictsort,
 * unique, min and max default). */
moe_status jj_compare(jj_ctx *ctx, jj_value a, jj_value b, bool fold_case, int *out);

/* str(): how {{ v }} prints (Python: None, True, [1, 'a'], {'k': 2}). */
moe_status jj_to_str(jj_ctx *ctx, jj_value v, jj_value *out);
moe_status jj_buf_put_str(jj_ctx *ctx, jj_buf *b, jj_value v);     /* str(v)  */
moe_status jj_buf_put_repr(jj_ctx *ctx, jj_buf *b, jj_value v, int depth);
moe_status jj_buf_append(jj_ctx *ctx, jj_buf *b, const char *p, size_t n);
jj_value   jj_buf_value(jj_buf *b);

/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) as
 * transformers' tojson calls it. indent < 0: none. NULL separators:
 * Python's defaults. */
typedef struct jj_json_opts {
    bool        ensure_ascii;
    int         indent;
    const char *item_sep;
    size_t      item_sep_n;
    const char *key_sep;
    size_t      key_sep_n;
    bool        sort_keys;
} jj_json_opts;
/* markupsafe.escape: & < > " ' as entities; a safe string is returned as
 * it is; the result is safe. */
moe_status jj_html_escape(jj_ctx *ctx, jj_value v, jj_value *out);

moe_status jj_to_json(jj_ctx *ctx, jj_value v, const jj_json_opts *opts, jj_value *out);

/* Number of code points in a UTF-8 string (invalid bytes count as one). */
size_t jj_utf8_len(const char *p, size_t n);
/* Byte offset of code point `k` (k <= length). */
size_t jj_utf8_offset(const char *p, size_t n, size_t k);
/* Decodes one code point at p (n > 0 bytes left); *adv gets its length. */
uint32_t jj_utf8_decode(const char *p, size_t n, size_t *adv);
/* Python's str.isspace for one code point. */
bool jj_is_space(uint32_t cp);
/* Simple case mapping (ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic). */
uint32_t jj_upper_cp(uint32_t cp);
uint32_t jj_lower_cp(uint32_t cp);
bool jj_is_alnum_cp(uint32_t cp);
/* Appends cp as UTF-8. */
moe_status jj_buf_put_cp(jj_ctx *ctx, jj_buf *b, uint32_t cp);

/* Converts a value for iteration (list, tuple, dict keys, string chars;
 * undefined as empty); errors for the rest. */
moe_status jj_iterate(jj_ctx *ctx, jj_value v, jj_value **items, size_t *n);
/* len() or an error. */
moe_status jj_length(jj_ctx *ctx, jj_value v, int64_t *out);

/* Attribute and item access with Jinja2's sandbox rules. */
moe_status jj_getattr(jj_ctx *ctx, jj_value obj, const char *name, size_t n, jj_value *out);
moe_status jj_getitem(jj_ctx *ctx, jj_value obj, jj_value key, jj_value *out);
moe_status jj_slice(jj_ctx *ctx, jj_value obj, jj_value start, jj_value stop, jj_value step,
                    jj_value *out);

/* ---- calls (jinja-eval.c, jinja-methods.c, jinja-filters.c) ------------ */

typedef struct jj_args {
    jj_value    *pos;
    size_t       n_pos;
    const char **kw_names;
    size_t      *kw_lens;
    jj_value    *kw_vals;
    size_t       n_kw;
} jj_args;

/* Argument `i` by position, else keyword `name`; false if neither. */
bool jj_arg(const jj_args *args, size_t i, const char *name, jj_value *out);

/* Calls any callable value. */
moe_status jj_call_value(jj_ctx *ctx, jj_value fn, const jj_args *args, jj_value *out);

/* Methods of str, dict, list, namespace and loop objects. found = false
 * when `obj` has no such method. */
bool jj_has_method(jj_value obj, const char *name, size_t n);
moe_status jj_call_method(jj_ctx *ctx, jj_value obj, const char *name, size_t n,
                          const jj_args *args, jj_value *out);

typedef enum jj_global_id {
    JG_RANGE, JG_NAMESPACE, JG_DICT, JG_RAISE, JG_STRFTIME, JG_COUNT
} jj_global_id;
const char *jj_global_name(int id);
moe_status jj_call_global(jj_ctx *ctx, int id, const jj_args *args, jj_value *out);

/* Filters and tests, resolved by name when the template is parsed. */
int jj_filter_lookup(const char *name, size_t n); /* -1 if unknown */
const char *jj_filter_name(int id);
int jj_test_lookup(const char *name, size_t n);
moe_status jj_apply_filter(jj_ctx *ctx, int id, jj_value v, const jj_args *args, jj_value *out);
moe_status jj_apply_test(jj_ctx *ctx, int id, jj_value v, const jj_args *args, bool *out);

/* str methods (jinja-str.c); Markup strings get markupsafe's escaping. */
moe_status jj_str_method(jj_ctx *ctx, jj_value s, const char *name, size_t n, const jj_args *a,
                         jj_value *out);
/* String helpers shared by methods and filters (jinja-str.c). */
moe_status jj_str_replace(jj_ctx *ctx, jj_value s, jj_value old, jj_value rep, int64_t count,
                          jj_value *out);
/* mode 0 upper, 1 lower, 2 str.title(), 3 str.capitalize() */
moe_status jj_case(jj_ctx *ctx, jj_value s, int mode, jj_value *out);
/* Python's `fmt % args`. */
moe_status jj_format_percent(jj_ctx *ctx, jj_value fmt, jj_value args, jj_value *out);
bool jj_str_is_lower(jj_value s);
bool jj_str_is_upper(jj_value s);

/* A parsed JSON value as a template value (jinja-filters.c); `from_json`
 * and the chat API use it. */
struct moe_json;
moe_status jj_value_from_json(jj_ctx *ctx, const struct moe_json *j, jj_value *out);

/* The render behind moe_chat_template_render(_json) (chat.c), with
 * explicit limits so tests and the fuzzer can shrink them. messages_json
 * NULL: take p->messages. */
moe_status jj_chat_render(const moe_chat_template *t, const char *messages_json,
                          const moe_chat_params *p, const jj_limits *lim, char **out,
                          size_t *out_len, moe_err *err);

#endif /* MOE_JINJA_H */

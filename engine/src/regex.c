/*
 * regex.c — parser, compiler and backtracking matcher behind regex.h.
 *
 * A pattern is parsed into a small tree, then compiled into instructions for
 * a backtracking machine:
 *
 *   SET  s,min,max   consume min..max code points of set s, greedily; on
 *                    backtrack give one back at a time
 *   SPLIT x,y        try x; on failure resume at y
 *   JMP  x
 *   LOOK neg,x,y     run the sub-program at x (ends in MATCH) at the current
 *                    position without consuming; continue at y if it
 *                    matched (or, for neg, did not)
 *   BOL / EOL        `^` / `$`
 *   MATCH
 *
 * Backtrack points live on an explicit heap stack (moe_regex_stack), so a
 * long run of text costs memory, never C stack; a greedy single-set loop
 * keeps one entry however many code points it took. Recursion happens only
 * for lookahead, bounded by the pattern's nesting.
 */
#include "regex.h"
#include "unicode.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

/* Collapsed text stands for a non-ASCII code point by a marker above the
 * Unicode range, one per class llama.cpp distinguishes (N L P M S, and one
 * "other" for the rest); White_Space becomes U+000B instead. */
#define MARK_BASE 0x110000u
#define MARK_OTHER (MARK_BASE + MOE_UCAT_UNASSIGNED)
#define VALUE_MAX (MARK_BASE + 8u) /* one past the largest text value */
#define REP_INF UINT32_MAX
#define MAX_NODES 4096

enum { N_SET, N_CAT, N_ALT, N_REP, N_LOOK, N_BOL, N_EOL, N_EMPTY };
enum { OP_SET, OP_SPLIT, OP_JMP, OP_LOOK, OP_BOL, OP_EOL, OP_MATCH };

typedef struct range {
    uint32_t lo, hi;
} range;

typedef struct cset {
    uint64_t ascii[2];     /* bit c set: code point c (< 128) is in the set */
    uint32_t first, count; /* ranges[first..first+count) for values >= 128 */
    bool     neg;
} cset;

typedef struct node {
    uint8_t  kind;
    bool     neg;   /* N_LOOK */
    int32_t  set;   /* N_SET */
    int32_t  child; /* N_CAT, N_ALT: first of a `next` list; N_REP, N_LOOK */
    int32_t  next;
    uint32_t min, max;
} node;

typedef struct inst {
    uint8_t  op;
    bool     neg;
    int32_t  set;
    int32_t  x, y;
    uint32_t min, max;
} inst;

struct moe_regex {
    bool   collapsed;
    cset  *sets;
    size_t n_sets;
    range *ranges;
    size_t n_ranges;
    inst  *code;
    size_t n_code;
};

/* ---- parsing ----------------------------------------------------------- */

typedef struct parser {
    const uint32_t *p;    /* pattern code points */
    size_t          n, i;
    moe_regex      *re;
    node           *nodes;
    size_t          n_nodes;
    size_t          cap_sets, cap_ranges, cap_code;
    moe_err        *err;
    moe_status      status;
    const char     *src;
    bool            non_ascii_literal; /* llama.cpp rejects these with \\p */
} parser;

static int fail(parser *ps, moe_status st, const char *what)
{
    if (ps->status == MOE_OK)
        ps->status = moe_fail(ps->err, st, "regex \"%.120s\": %s at pattern offset %zu",
                              ps->src, what, ps->i);
    return -1;
}

static int new_node(parser *ps, uint8_t kind)
{
    if (ps->n_nodes >= MAX_NODES)
        return fail(ps, MOE_ERR_UNSUPPORTED, "pattern too large");
    node *nd = &ps->nodes[ps->n_nodes];
    memset(nd, 0, sizeof *nd);
    nd->kind = kind;
    nd->child = nd->next = nd->set = -1;
    nd->min = nd->max = 1;
    return (int)ps->n_nodes++;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need)
        nc *= 2;
    void *p = realloc(*arr, nc * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

static int new_set(parser *ps)
{
    moe_regex *re = ps->re;
    if (grow((void **)&re->sets, &ps->cap_sets, re->n_sets + 1, sizeof(cset)))
        return fail(ps, MOE_ERR_NOMEM, "out of memory");
    cset *s = &re->sets[re->n_sets];
    memset(s, 0, sizeof *s);
    s->first = (uint32_t)re->n_ranges;
    return (int)re->n_sets++;
}

/* Adds [lo, hi] to the set being built (always the last one). */
static int set_add(parser *ps, uint32_t lo, uint32_t hi)
{
    moe_regex *re = ps->re;
    cset *s = &re->sets[re->n_sets - 1];
    for (; lo <= hi && lo < 128; lo++)
        s->ascii[lo >> 6] |= 1ull << (lo & 63);
    if (lo > hi)
        return 0;
    if (grow((void **)&re->ranges, &ps->cap_ranges, re->n_ranges + 1, sizeof(range)))
        return fail(ps, MOE_ERR_NOMEM, "out of memory");
    re->ranges[re->n_ranges++] = (range){lo, hi};
    s->count++;
    return 0;
}

static int set_add_space(parser *ps)
{
    /* std::regex \s in the C locale: \t \n \v \f \r and space. */
    return set_add(ps, 0x09, 0x0D) | set_add(ps, ' ', ' ');
}

static int set_add_digit(parser *ps)
{
    return set_add(ps, '0', '9');
}

static int set_add_word(parser *ps)
{
    return set_add(ps, '0', '9') | set_add(ps, 'A', 'Z') | set_add(ps, 'a', 'z') |
           set_add(ps, '_', '_');
}

/* \p{X} on collapsed text: the ASCII members of class X plus its marker. */
static int set_add_class(parser *ps, unsigned cls)
{
    for (uint32_t c = 0; c < 128; c++)
        if (moe_ucat_of(c) == cls && !(moe_uprops(c) & MOE_UPROP_SPACE))
            if (set_add(ps, c, c))
                return -1;
    return set_add(ps, MARK_BASE + cls, MARK_BASE + cls);
}

/* Adds the complement of what `add` adds (for \S \D \W \P inside classes). */
static int set_add_complement(parser *ps, int (*add)(parser *), unsigned cls, bool is_class)
{
    moe_regex *re = ps->re;
    size_t mark = re->n_ranges;
    cset *s = &re->sets[re->n_sets - 1];
    uint64_t a0 = s->ascii[0], a1 = s->ascii[1];
    uint32_t cnt = s->count;
    s->ascii[0] = s->ascii[1] = 0;
    if (is_class ? set_add_class(ps, cls) : add(ps))
        return -1;
    s = &re->sets[re->n_sets - 1];
    uint64_t c0 = ~s->ascii[0], c1 = ~s->ascii[1];
    /* Invert the ranges just added (they are sorted and disjoint). */
    size_t nr = re->n_ranges - mark;
    range tmp[4];
    if (nr > 4)
        return fail(ps, MOE_ERR_UNSUPPORTED, "complex negated class");
    memcpy(tmp, re->ranges + mark, nr * sizeof(range));
    re->n_ranges = mark;
    s->count = cnt;
    s->ascii[0] = a0 | c0;
    s->ascii[1] = a1 | c1;
    uint32_t lo = 128;
    for (size_t k = 0; k < nr; k++) {
        if (tmp[k].lo > lo && set_add(ps, lo, tmp[k].lo - 1))
            return -1;
        lo = tmp[k].hi + 1;
    }
    return set_add(ps, lo, VALUE_MAX - 1);
}

static int parse_uint(parser *ps, uint32_t *out)
{
    uint32_t v = 0;
    size_t start = ps->i;
    while (ps->i < ps->n && ps->p[ps->i] >= '0' && ps->p[ps->i] <= '9') {
        v = v * 10 + (ps->p[ps->i++] - '0');
        if (v > 100000)
            return fail(ps, MOE_ERR_UNSUPPORTED, "repeat count too large");
    }
    if (ps->i == start)
        return fail(ps, MOE_ERR_UNSUPPORTED, "expected a number");
    *out = v;
    return 0;
}

/* \p{...}: returns the class, or -1. Lu/Ll/Lt/Lm/Lo mean L, as in llama.cpp. */
static int parse_prop(parser *ps)
{
    static const struct { const char *name; unsigned cls; } props[] = {
        {"N", MOE_UCAT_NUMBER}, {"L", MOE_UCAT_LETTER}, {"P", MOE_UCAT_PUNCT},
        {"M", MOE_UCAT_MARK},   {"S", MOE_UCAT_SYMBOL}, {"Lu", MOE_UCAT_LETTER},
        {"Ll", MOE_UCAT_LETTER}, {"Lt", MOE_UCAT_LETTER}, {"Lm", MOE_UCAT_LETTER},
        {"Lo", MOE_UCAT_LETTER},
    };
    if (ps->i >= ps->n || ps->p[ps->i] != '{')
        return fail(ps, MOE_ERR_UNSUPPORTED, "expected { after \\p");
    char name[8];
    size_t k = 0;
    ps->i++;
    while (ps->i < ps->n && ps->p[ps->i] != '}' && k < sizeof name - 1)
        name[k++] = (char)ps->p[ps->i++];
    name[k] = 0;
    if (ps->i >= ps->n || ps->p[ps->i] != '}')
        return fail(ps, MOE_ERR_UNSUPPORTED, "unknown \\p class");
    ps->i++;
    for (size_t j = 0; j < sizeof props / sizeof props[0]; j++)
        if (strcmp(props[j].name, name) == 0)
            return (int)props[j].cls;
    return fail(ps, MOE_ERR_UNSUPPORTED, "unknown \\p class");
}

/* One escape after the backslash. Literal escapes return the code point
 * (>= 0); class escapes add to the current set and return -2. */
static int64_t parse_escape(parser *ps)
{
    if (ps->i >= ps->n)
        return fail(ps, MOE_ERR_UNSUPPORTED, "trailing backslash");
    uint32_t c = ps->p[ps->i++];
    switch (c) {
    case 'r': return '\r';
    case 'n': return '\n';
    case 't': return '\t';
    case 'f': return '\f';
    case 'v': return '\v';
    case 's': return set_add_space(ps) ? -1 : -2;
    case 'd': return set_add(ps, '0', '9') ? -1 : -2;
    case 'w': return set_add_word(ps) ? -1 : -2;
    case 'S': return set_add_complement(ps, set_add_space, 0, false) ? -1 : -2;
    case 'D': return set_add_complement(ps, set_add_digit, 0, false) ? -1 : -2;
    case 'W': return set_add_complement(ps, set_add_word, 0, false) ? -1 : -2;
    case 'p':
    case 'P': {
        int cls = parse_prop(ps);
        if (cls < 0)
            return -1;
        ps->re->collapsed = true;
        if (c == 'p')
            return set_add_class(ps, (unsigned)cls) ? -1 : -2;
        return set_add_complement(ps, NULL, (unsigned)cls, true) ? -1 : -2;
    }
    default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
            return fail(ps, MOE_ERR_UNSUPPORTED, "unsupported escape");
        return c; /* escaped punctuation is itself */
    }
}

static int parse_alt(parser *ps);

/* [...] after the '['. */
static int parse_class(parser *ps)
{
    int s = new_set(ps);
    if (s < 0)
        return -1;
    if (ps->i < ps->n && ps->p[ps->i] == '^') {
        ps->re->sets[s].neg = true;
        ps->i++;
    }
    bool first = true;
    for (;;) {
        if (ps->i >= ps->n)
            return fail(ps, MOE_ERR_FORMAT, "unterminated [");
        uint32_t c = ps->p[ps->i];
        if (c == ']' && !first) {
            ps->i++;
            break;
        }
        first = false;
        ps->i++;
        int64_t lo = c;
        if (c == '\\') {
            lo = parse_escape(ps);
            if (lo == -1)
                return -1;
            if (lo == -2)
                continue; /* a class escape was added */
        } else if (c == '[') {
            return fail(ps, MOE_ERR_UNSUPPORTED, "nested [");
        }
        int64_t hi = lo;
        if (ps->i + 1 < ps->n && ps->p[ps->i] == '-' && ps->p[ps->i + 1] != ']') {
            ps->i++;
            uint32_t c2 = ps->p[ps->i++];
            hi = c2;
            if (c2 == '\\') {
                hi = parse_escape(ps);
                if (hi < 0)
                    return hi == -1 ? -1 : fail(ps, MOE_ERR_UNSUPPORTED, "class in range");
            }
            if (hi < lo)
                return fail(ps, MOE_ERR_FORMAT, "range out of order");
        }
        if (hi >= 128)
            ps->non_ascii_literal = true;
        if (set_add(ps, (uint32_t)lo, (uint32_t)hi))
            return -1;
    }
    int nd = new_node(ps, N_SET);
    if (nd >= 0)
        ps->nodes[nd].set = s;
    return nd;
}

static int single_set_node(parser *ps, uint32_t lo, uint32_t hi, bool neg)
{
    int s = new_set(ps);
    if (s < 0 || set_add(ps, lo, hi))
        return -1;
    ps->re->sets[s].neg = neg;
    int nd = new_node(ps, N_SET);
    if (nd >= 0)
        ps->nodes[nd].set = s;
    return nd;
}

static int parse_atom(parser *ps)
{
    uint32_t c = ps->p[ps->i++];
    switch (c) {
    case '(': {
        int kind = -1; /* -1 group, 0 lookahead, 1 negative lookahead */
        if (ps->i < ps->n && ps->p[ps->i] == '?') {
            if (ps->i + 1 >= ps->n)
                return fail(ps, MOE_ERR_FORMAT, "truncated group");
            uint32_t k = ps->p[ps->i + 1];
            if (k == ':')
                kind = -1;
            else if (k == '=')
                kind = 0;
            else if (k == '!')
                kind = 1;
            else
                return fail(ps, MOE_ERR_UNSUPPORTED, "group kind");
            ps->i += 2;
        }
        int inner = parse_alt(ps);
        if (inner < 0)
            return -1;
        if (ps->i >= ps->n || ps->p[ps->i] != ')')
            return fail(ps, MOE_ERR_FORMAT, "missing )");
        ps->i++;
        if (kind < 0)
            return inner;
        int nd = new_node(ps, N_LOOK);
        if (nd >= 0) {
            ps->nodes[nd].child = inner;
            ps->nodes[nd].neg = kind == 1;
        }
        return nd;
    }
    case '[':
        return parse_class(ps);
    case '.':
        /* ECMAScript '.': anything but \n and \r. */
        {
            int nd = single_set_node(ps, '\n', '\n', true);
            if (nd >= 0 && set_add(ps, '\r', '\r'))
                return -1;
            return nd;
        }
    case '^':
        return new_node(ps, N_BOL);
    case '$':
        return new_node(ps, N_EOL);
    case '\\': {
        int s = new_set(ps);
        if (s < 0)
            return -1;
        int64_t e = parse_escape(ps);
        if (e == -1)
            return -1;
        if (e >= 0) {
            if (e >= 128)
                ps->non_ascii_literal = true;
            if (set_add(ps, (uint32_t)e, (uint32_t)e))
                return -1;
        }
        int nd = new_node(ps, N_SET);
        if (nd >= 0)
            ps->nodes[nd].set = s;
        return nd;
    }
    case '*': case '+': case '?': case '{': case ')': case '|':
        ps->i--;
        return fail(ps, MOE_ERR_FORMAT, "misplaced operator");
    default:
        if (c >= 128)
            ps->non_ascii_literal = true;
        return single_set_node(ps, c, c, false);
    }
}

static int parse_term(parser *ps)
{
    int atom = parse_atom(ps);
    if (atom < 0 || ps->i >= ps->n)
        return atom;
    uint32_t c = ps->p[ps->i], min, max;
    switch (c) {
    case '*': min = 0; max = REP_INF; ps->i++; break;
    case '+': min = 1; max = REP_INF; ps->i++; break;
    case '?': min = 0; max = 1; ps->i++; break;
    case '{':
        ps->i++;
        if (parse_uint(ps, &min))
            return -1;
        max = min;
        if (ps->i < ps->n && ps->p[ps->i] == ',') {
            ps->i++;
            max = REP_INF;
            if (ps->i < ps->n && ps->p[ps->i] != '}' && parse_uint(ps, &max))
                return -1;
        }
        if (ps->i >= ps->n || ps->p[ps->i] != '}' || max < min)
            return fail(ps, MOE_ERR_FORMAT, "bad {n,m}");
        ps->i++;
        break;
    default:
        return atom;
    }
    if (ps->i < ps->n && (ps->p[ps->i] == '?' || ps->p[ps->i] == '+'))
        return fail(ps, MOE_ERR_UNSUPPORTED, "lazy or possessive quantifier");
    int nd = new_node(ps, N_REP);
    if (nd >= 0) {
        ps->nodes[nd].child = atom;
        ps->nodes[nd].min = min;
        ps->nodes[nd].max = max;
    }
    return nd;
}

static int parse_seq(parser *ps)
{
    int cat = new_node(ps, N_CAT);
    int last = -1;
    if (cat < 0)
        return -1;
    while (ps->i < ps->n && ps->p[ps->i] != '|' && ps->p[ps->i] != ')') {
        int t = parse_term(ps);
        if (t < 0)
            return -1;
        if (last < 0)
            ps->nodes[cat].child = t;
        else
            ps->nodes[last].next = t;
        last = t;
    }
    return cat;
}

static int parse_alt(parser *ps)
{
    int alt = new_node(ps, N_ALT);
    int last = -1;
    if (alt < 0)
        return -1;
    for (;;) {
        int s = parse_seq(ps);
        if (s < 0)
            return -1;
        if (last < 0)
            ps->nodes[alt].child = s;
        else
            ps->nodes[last].next = s;
        last = s;
        if (ps->i < ps->n && ps->p[ps->i] == '|') {
            ps->i++;
            continue;
        }
        return alt;
    }
}

/* ---- compiling ---------------------------------------------------------- */

static bool nullable(const parser *ps, int n)
{
    const node *nd = &ps->nodes[n];
    switch (nd->kind) {
    case N_SET:
        return false;
    case N_CAT:
        for (int c = nd->child; c >= 0; c = ps->nodes[c].next)
            if (!nullable(ps, c))
                return false;
        return true;
    case N_ALT:
        for (int c = nd->child; c >= 0; c = ps->nodes[c].next)
            if (nullable(ps, c))
                return true;
        return false;
    case N_REP:
        return nd->min == 0 || nullable(ps, nd->child);
    default:
        return true;
    }
}

static int emit(parser *ps, uint8_t op)
{
    moe_regex *re = ps->re;
    if (re->n_code >= 65536)
        return fail(ps, MOE_ERR_UNSUPPORTED, "pattern too large");
    if (grow((void **)&re->code, &ps->cap_code, re->n_code + 1, sizeof(inst)))
        return fail(ps, MOE_ERR_NOMEM, "out of memory");
    inst *in = &re->code[re->n_code];
    memset(in, 0, sizeof *in);
    in->op = op;
    in->min = in->max = 1;
    return (int)re->n_code++;
}

static int gen(parser *ps, int n)
{
    const node nd = ps->nodes[n];
    int pc;
    switch (nd.kind) {
    case N_SET:
        if ((pc = emit(ps, OP_SET)) < 0)
            return -1;
        ps->re->code[pc].set = nd.set;
        return 0;
    case N_CAT:
        for (int c = nd.child; c >= 0; c = ps->nodes[c].next)
            if (gen(ps, c))
                return -1;
        return 0;
    case N_ALT: {
        /* SPLIT a1, next; a1; JMP end; next: SPLIT a2, ...; last alternative */
        int jumps[256], n_jumps = 0;
        for (int c = nd.child; c >= 0; c = ps->nodes[c].next) {
            int split = -1;
            if (ps->nodes[c].next >= 0) {
                if ((split = emit(ps, OP_SPLIT)) < 0)
                    return -1;
                ps->re->code[split].x = split + 1;
            }
            if (gen(ps, c))
                return -1;
            if (split >= 0) {
                if (n_jumps == 256)
                    return fail(ps, MOE_ERR_UNSUPPORTED, "too many alternatives");
                if ((jumps[n_jumps++] = emit(ps, OP_JMP)) < 0)
                    return -1;
                ps->re->code[split].y = (int32_t)ps->re->n_code;
            }
        }
        for (int j = 0; j < n_jumps; j++)
            ps->re->code[jumps[j]].x = (int32_t)ps->re->n_code;
        return 0;
    }
    case N_REP: {
        if (ps->nodes[nd.child].kind == N_SET) {
            if ((pc = emit(ps, OP_SET)) < 0)
                return -1;
            ps->re->code[pc].set = ps->nodes[nd.child].set;
            ps->re->code[pc].min = nd.min;
            ps->re->code[pc].max = nd.max;
            return 0;
        }
        if (nd.max == REP_INF && nullable(ps, nd.child))
            return fail(ps, MOE_ERR_UNSUPPORTED, "repeated group that can match empty");
        if (nd.min > 64 || (nd.max != REP_INF && nd.max > 64))
            return fail(ps, MOE_ERR_UNSUPPORTED, "group repeat count too large");
        for (uint32_t k = 0; k < nd.min; k++)
            if (gen(ps, nd.child))
                return -1;
        if (nd.max == REP_INF) {
            int loop = emit(ps, OP_SPLIT);
            if (loop < 0 || gen(ps, nd.child))
                return -1;
            int back = emit(ps, OP_JMP);
            if (back < 0)
                return -1;
            ps->re->code[back].x = loop;
            ps->re->code[loop].x = loop + 1;
            ps->re->code[loop].y = (int32_t)ps->re->n_code;
            return 0;
        }
        int splits[64], n_splits = 0;
        for (uint32_t k = nd.min; k < nd.max; k++) {
            if ((splits[n_splits] = emit(ps, OP_SPLIT)) < 0)
                return -1;
            ps->re->code[splits[n_splits]].x = splits[n_splits] + 1;
            n_splits++;
            if (gen(ps, nd.child))
                return -1;
        }
        for (int k = 0; k < n_splits; k++)
            ps->re->code[splits[k]].y = (int32_t)ps->re->n_code;
        return 0;
    }
    case N_LOOK: {
        if ((pc = emit(ps, OP_LOOK)) < 0)
            return -1;
        ps->re->code[pc].neg = nd.neg;
        ps->re->code[pc].x = pc + 1;
        if (gen(ps, nd.child) || emit(ps, OP_MATCH) < 0)
            return -1;
        ps->re->code[pc].y = (int32_t)ps->re->n_code;
        return 0;
    }
    case N_BOL:
        return emit(ps, OP_BOL) < 0 ? -1 : 0;
    case N_EOL:
        return emit(ps, OP_EOL) < 0 ? -1 : 0;
    default:
        return 0;
    }
}

void moe_regex_free(moe_regex *re)
{
    if (!re)
        return;
    free(re->sets);
    free(re->ranges);
    free(re->code);
    free(re);
}

moe_status moe_regex_compile(const char *pattern, moe_regex **out, moe_err *err)
{
    *out = NULL;
    size_t len = strlen(pattern);
    parser ps = {0};
    ps.src = pattern;
    ps.err = err;
    ps.re = calloc(1, sizeof *ps.re);
    ps.nodes = malloc(MAX_NODES * sizeof(node));
    uint32_t *cps = malloc((len + 1) * sizeof(uint32_t));
    if (!ps.re || !ps.nodes || !cps) {
        moe_regex_free(ps.re);
        free(ps.nodes);
        free(cps);
        return moe_fail(err, MOE_ERR_NOMEM, "regex: out of memory");
    }
    ps.n = moe_utf8_decode_all((const uint8_t *)pattern, len, cps);
    ps.p = cps;
    int root = parse_alt(&ps);
    if (root >= 0 && ps.i < ps.n)
        root = fail(&ps, MOE_ERR_FORMAT, "unbalanced )");
    if (root >= 0 && nullable(&ps, root))
        root = fail(&ps, MOE_ERR_UNSUPPORTED, "pattern can match the empty string");
    if (root >= 0 && ps.re->collapsed && ps.non_ascii_literal)
        root = fail(&ps, MOE_ERR_UNSUPPORTED, "\\p{..} together with non-ASCII literals");
    if (root >= 0 && (gen(&ps, root) || emit(&ps, OP_MATCH) < 0))
        root = -1;
    free(ps.nodes);
    free(cps);
    if (root < 0) {
        moe_regex_free(ps.re);
        return ps.status != MOE_OK ? ps.status : MOE_ERR_FORMAT;
    }
    *out = ps.re;
    return MOE_OK;
}

bool moe_regex_collapsed(const moe_regex *re)
{
    return re->collapsed;
}

void moe_regex_map_text(bool collapsed, const uint32_t *cps, size_t n, uint32_t *dst)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cps[i];
        if (c < 128) {
            dst[i] = c;
            continue;
        }
        uint8_t pr = moe_uprops(c);
        if (pr & MOE_UPROP_SPACE) {
            dst[i] = 0x0B;
        } else if (collapsed) {
            unsigned cls = pr & MOE_UCAT_MASK;
            bool kept = cls == MOE_UCAT_NUMBER || cls == MOE_UCAT_LETTER ||
                        cls == MOE_UCAT_PUNCT || cls == MOE_UCAT_MARK || cls == MOE_UCAT_SYMBOL;
            dst[i] = kept ? MARK_BASE + cls : MARK_OTHER;
        } else {
            dst[i] = c;
        }
    }
}

/* ---- matching ----------------------------------------------------------- */

enum { BT_PC, BT_SET };

typedef struct bt {
    uint32_t pc;
    uint32_t kind;
    size_t   pos;
    size_t   count; /* BT_SET: how many the loop may still keep */
} bt;

static inline bool set_has(const moe_regex *re, const cset *s, uint32_t v)
{
    bool in;
    if (v < 128) {
        in = (s->ascii[v >> 6] >> (v & 63)) & 1;
    } else {
        in = false;
        for (uint32_t k = 0; k < s->count; k++) {
            const range *r = &re->ranges[s->first + k];
            if (v >= r->lo && v <= r->hi) {
                in = true;
                break;
            }
        }
    }
    return in != s->neg;
}

static int push(moe_regex_stack *st, size_t *sp, bt e)
{
    if (*sp >= st->cap) {
        size_t nc = st->cap ? st->cap * 2 : 64;
        void *p = realloc(st->items, nc * sizeof(bt));
        if (!p)
            return -1;
        st->items = p;
        st->cap = nc;
    }
    ((bt *)st->items)[(*sp)++] = e;
    return 0;
}

/* Runs from pc at pos; 1 with *out_end on a match, 0 on none, -1 on OOM.
 * Backtrack entries above `base` belong to this run and are dropped. */
static int run(const moe_regex *re, const uint32_t *text, size_t begin, size_t end,
               uint32_t pc, size_t pos, moe_regex_stack *st, size_t base, size_t *out_end)
{
    size_t sp = base;
    for (;;) {
        const inst *in = &re->code[pc];
        switch (in->op) {
        case OP_SET: {
            const cset *s = &re->sets[in->set];
            size_t k = 0, lim = end - pos;
            if (in->max < lim)
                lim = in->max;
            while (k < lim && set_has(re, s, text[pos + k]))
                k++;
            if (k < in->min)
                goto backtrack;
            if (k > in->min && push(st, &sp, (bt){pc, BT_SET, pos, k - 1}))
                return -1;
            pos += k;
            pc++;
            continue;
        }
        case OP_SPLIT:
            if (push(st, &sp, (bt){(uint32_t)in->y, BT_PC, pos, 0}))
                return -1;
            pc = (uint32_t)in->x;
            continue;
        case OP_JMP:
            pc = (uint32_t)in->x;
            continue;
        case OP_LOOK: {
            size_t dummy;
            int r = run(re, text, begin, end, (uint32_t)in->x, pos, st, sp, &dummy);
            if (r < 0)
                return -1;
            if ((r == 1) == in->neg)
                goto backtrack;
            pc = (uint32_t)in->y;
            continue;
        }
        case OP_BOL:
            if (pos != begin)
                goto backtrack;
            pc++;
            continue;
        case OP_EOL:
            if (pos != end)
                goto backtrack;
            pc++;
            continue;
        case OP_MATCH:
            *out_end = pos;
            return 1;
        }
    backtrack:
        if (sp == base)
            return 0;
        {
            bt *top = &((bt *)st->items)[sp - 1];
            if (top->kind == BT_PC) {
                pc = top->pc;
                pos = top->pos;
                sp--;
            } else {
                pc = top->pc + 1;
                pos = top->pos + top->count;
                if (top->count > re->code[top->pc].min)
                    top->count--;
                else
                    sp--;
            }
        }
    }
}

int moe_regex_search(const moe_regex *re, const uint32_t *text, size_t begin, size_t end,
                     size_t from, size_t *match_begin, size_t *match_end,
                     moe_regex_stack *st)
{
    for (size_t pos = from; pos < end; pos++) {
        size_t e;
        int r = run(re, text, begin, end, 0, pos, st, 0, &e);
        if (r != 0) {
            if (r < 0)
                return -1;
            *match_begin = pos;
            *match_end = e;
            return 1;
        }
    }
    return 0;
}

void moe_regex_stack_free(moe_regex_stack *st)
{
    if (!st)
        return;
    free(st->items);
    st->items = NULL;
    st->cap = 0;
}

/*
 * pretok.c — the pre-tokenizer table (which patterns each
 * tokenizer.ggml.pre name means, as llama.cpp defines them), the splitters
 * that run the common patterns without the regex engine, and the pass
 * runner that applies a pattern list.
 *
 * The patterns are the ones in the models' tokenizer.json files, in the form
 * llama.cpp runs them ((?i:...) spelled out as [sS] classes). Matching them
 * the way llama.cpp does is the point: ids must agree with llama.cpp's on any
 * text. The hand-written splitters are checked against the regex engine by
 * tests/unit/test-pretok.c.
 */
#include "pretok.h"
#include "unicode.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

/* The patterns that have hand-written splitters. */
#define RE_GPT2 \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}" \
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_CJK_DEEPSEEK "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+"
#define RE_PORO " ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c)]+"
#define RE_UPPER_LOWER \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"

enum { ENG_REGEX, ENG_GPT2, ENG_LLAMA3, ENG_QWEN2, ENG_QWEN35 };

#define PF_IGNORE_MERGES 1u
#define PF_ADD_BOS       2u
#define PF_NO_BOS        4u
#define MAX_PASSES       6

typedef struct pre_def {
    const char *names[20]; /* NULL-terminated */
    unsigned    flags;
    const char *patterns[MAX_PASSES + 1];
} pre_def;

static const pre_def pre_defs[] = {
    {{"default", "", NULL}, 0,
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL}},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
      "lfm2", "jina-v5-nano", NULL},
     PF_IGNORE_MERGES | PF_ADD_BOS, {RE_LLAMA3, NULL}},
    {{"dbrx", "smaug-bpe", NULL}, 0, {RE_LLAMA3, NULL}},
    {{"glm4", "chatglm-bpe", NULL}, PF_NO_BOS, {RE_LLAMA3, NULL}},
    {{"jais-2", NULL}, 0,
     {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
      "|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)"
      "|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
      NULL}},
    {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan",
      "solar-open", "grok-2", NULL},
     0, {RE_QWEN2, NULL}},
    {{"qwen35", NULL}, 0, {RE_QWEN35, NULL}},
    {{"laguna", NULL}, 0, {"[^\\n]+|[\\n]+", RE_QWEN2, NULL}},
    {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
      "a.x-4.0", "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe",
      "exaone4", "mpt", "olmo", "jais", "trillion", "granite-docling", NULL},
     0, {RE_GPT2, NULL}},
    {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b",
      "mellum2", NULL},
     0, {"\\p{N}", RE_GPT2, NULL}},
    {{"falcon", NULL}, 0, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]", NULL}},
    {{"deepseek-llm", NULL}, 0,
     {"[\r\n]",
      "\\s?[A-Za-z\xc2\xb5\xc3\x80-\xc3\x96\xc3\x98-\xc3\xb6\xc3\xb8-\xc6\xba\xc6\xbc-\xc6\xbf\xc7\x84-\xca\x93\xca\x95-\xca\xaf\xcd\xb0-\xcd\xb3\xcd\xb6\xcd\xb7\xcd\xbb-\xcd\xbd\xcd\xbf\xce\x86\xce\x88-\xce\x8a\xce\x8c\xce\x8e-\xce\xa1\xce\xa3-\xcf\xb5\xcf\xb7-\xd2\x81\xd2\x8a-\xd4\xaf\xd4\xb1-\xd5\x96\xe1\x82\xa0-\xe1\x83\x85\xe1\x8e\xa0-\xe1\x8f\xb5\xe1\x8f\xb8-\xe1\x8f\xbd\xe1\xb2\x90-\xe1\xb2\xba\xe1\xb2\xbd-\xe1\xb2\xbf\xe1\xb4\x80-\xe1\xb4\xab\xe1\xb5\xab-\xe1\xb5\xb7\xe1\xb5\xb9-\xe1\xb6\x9a\xe1\xb8\x80-\xe1\xbc\x95\xe1\xbc\x98-\xe1\xbc\x9d\xe1\xbc\xa0-\xe1\xbd\x85\xe1\xbd\x88-\xe1\xbd\x8d\xe1\xbd\x90-\xe1\xbd\x97\xe1\xbd\x99\xe1\xbd\x9b\xe1\xbd\x9d\xe1\xbd\x9f-\xe1\xbd\xbd\xe1\xbe\x80-\xe1\xbe\xb4\xe1\xbe\xb6-\xe1\xbe\xbc\xe1\xbe\xbe\xe1\xbf\x82-\xe1\xbf\x84\xe1\xbf\x86-\xe1\xbf\x8c\xe1\xbf\x90-\xe1\xbf\x93\xe1\xbf\x96-\xe1\xbf\x9b\xe1\xbf\xa0-\xe1\xbf\xac\xe1\xbf\xb2-\xe1\xbf\xb4\xe1\xbf\xb6-\xe1\xbf\xbc\xe2\x84\x82\xe2\x84\x87\xe2\x84\x8a-\xe2\x84\x93\xe2\x84\x95\xe2\x84\x99-\xe2\x84\x9d\xe2\x84\xa4\xe2\x84\xa6\xe2\x84\xa8\xe2\x84\xaa-\xe2\x84\xad\xe2\x84\xaf-\xe2\x84\xb4\xe2\x84\xb9\xe2\x84\xbc-\xe2\x84\xbf\xe2\x85\x85-\xe2\x85\x89\xe2\x85\x8e\xe2\x86\x83\xe2\x86\x84\xe2\xb0\x80-\xe2\xb1\xbb\xe2\xb1\xbe-\xe2\xb3\xa4\xe2\xb3\xab-\xe2\xb3\xae\xe2\xb3\xb2\xe2\xb3\xb3\xea\x99\x80-\xea\x99\xad\xea\x9a\x80-\xea\x9a\x9b\xea\x9c\xa2-\xea\x9d\xaf\xea\x9d\xb1-\xea\x9e\x87\xea\x9e\x8b-\xea\x9e\x8e\xea\xad\xb0-\xea\xae\xbf\xef\xac\x80-\xef\xac\x86\xef\xac\x93-\xef\xac\x97\xef\xbc\xa1-\xef\xbc\xba\xef\xbd\x81-\xef\xbd\x9a\xf0\x90\x90\x80-\xf0\x90\x91\x8f\xf0\x90\x92\xb0-\xf0\x90\x93\x93\xf0\x90\x93\x98-\xf0\x90\x93\xbb\xf0\x90\xb2\x80-\xf0\x90\xb2\xb2\xf0\x90\xb3\x80-\xf0\x90\xb3\xb2\xf0\x91\xa2\xa0-\xf0\x91\xa3\x9f\xf0\x9e\xa4\x80-\xf0\x9e\xa5\x83]+",
      "\\s?[!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80\x98-\xe2\x80\x9f\xe3\x80\x80-\xe3\x80\x82]+", "\\s+$", RE_CJK_DEEPSEEK, "\\p{N}+", NULL}},
    {{"deepseek-coder", NULL}, 0,
     {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK_DEEPSEEK, "\\p{N}", NULL}},
    {{"deepseek-v3", "hunyuan-dense", "joyai-llm", NULL}, 0,
     {"\\p{N}{1,3}", "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
      "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {{"youtu", NULL}, PF_IGNORE_MERGES,
     {"[\xea\xb0\x80-\xed\x9e\xa3\xe3\x84\xb1-\xe3\x86\x8e]+|[\xef\xbc\x81\xe2\x80\xa6\xe2\x80\x9c\xe2\x80\x9d\xe2\x80\x98\xe2\x80\x99\xe2\x80\x94\xef\xbc\x9a\xef\xbc\x9b\xef\xbc\x8c\xe3\x80\x81-\xe3\x80\xbf\xef\xb8\xb0-\xef\xb9\x8f]+|[\xe3\x84\x85-\xe3\x84\xaf]+|[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
      RE_CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
      "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" RE_CONTRACTIONS "?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*"
      "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {{"poro-chat", "bloom", "gpt3-finnish", NULL}, 0, {RE_PORO, NULL}},
    {{"viking", NULL}, 0, {RE_PORO, "\\p{N}", NULL}},
    {{"tekken", NULL}, PF_IGNORE_MERGES | PF_ADD_BOS,
     {RE_UPPER_LOWER "|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"
      "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2", NULL}, 0,
     {RE_UPPER_LOWER RE_CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+"
      "((?=[\\p{L}])([^A-Z]))*" RE_CONTRACTIONS "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*"
      "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {{"granite-embed-multi-97m", NULL}, PF_IGNORE_MERGES,
     {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+"
      RE_CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+"
      "((?=[\\p{L}\\p{M}])([^A-Z]))*" RE_CONTRACTIONS "?|\\p{N}{1,3}"
      "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {{"chameleon", NULL}, PF_ADD_BOS,
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )",
      "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2, NULL}},
    {{"bailingmoe", "bailingmoe2", "llada-moe", NULL}, 0,
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
      "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
      NULL}},
    {{"seed-coder", NULL}, 0,
     {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+"
      "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {{"exaone-moe", NULL}, 0,
     {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}"
      "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
      NULL}},
    {{"minicpm5", NULL}, PF_IGNORE_MERGES,
     {"\\p{N}{1,3}",
      RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
      "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
};

typedef struct pass {
    int        engine;
    moe_regex *re; /* ENG_REGEX */
} pass;

struct moe_pretok {
    unsigned flags;
    int      n_passes;
    pass     passes[MAX_PASSES];
    bool     need_mapped[2]; /* raw, collapsed */
};

void moe_pretok_free(moe_pretok *pt)
{
    if (!pt)
        return;
    for (int i = 0; i < pt->n_passes; i++)
        moe_regex_free(pt->passes[i].re);
    free(pt);
}

moe_status moe_pretok_new(const char *pre, unsigned flags, moe_pretok **out, moe_err *err)
{
    *out = NULL;
    if (!pre)
        pre = "";
    const pre_def *def = NULL;
    for (size_t d = 0; d < sizeof pre_defs / sizeof pre_defs[0] && !def; d++)
        for (const char *const *nm = pre_defs[d].names; *nm; nm++)
            if (strcmp(*nm, pre) == 0) {
                def = &pre_defs[d];
                break;
            }
    if (!def)
        return moe_fail(err, MOE_ERR_UNSUPPORTED,
                        "tokenizer.ggml.pre: unknown or unsupported pre-tokenizer type '%.100s'",
                        pre);
    moe_pretok *pt = calloc(1, sizeof *pt);
    if (!pt)
        return moe_fail(err, MOE_ERR_NOMEM, "pre-tokenizer '%.100s': out of memory", pre);
    pt->flags = def->flags;
    for (const char *const *p = def->patterns; *p; p++) {
        pass *ps = &pt->passes[pt->n_passes++];
        ps->engine = ENG_REGEX;
        if (!(flags & MOE_PRETOK_NO_BUILTIN)) {
            if (strcmp(*p, RE_GPT2) == 0)
                ps->engine = ENG_GPT2;
            else if (strcmp(*p, RE_LLAMA3) == 0)
                ps->engine = ENG_LLAMA3;
            else if (strcmp(*p, RE_QWEN2) == 0)
                ps->engine = ENG_QWEN2;
            else if (strcmp(*p, RE_QWEN35) == 0)
                ps->engine = ENG_QWEN35;
        }
        if (ps->engine != ENG_REGEX)
            continue;
        moe_status st = moe_regex_compile(*p, &ps->re, err);
        if (st != MOE_OK) {
            moe_pretok_free(pt);
            return st;
        }
        pt->need_mapped[moe_regex_collapsed(ps->re)] = true;
    }
    *out = pt;
    return MOE_OK;
}

bool moe_pretok_ignore_merges(const moe_pretok *pt)
{
    return (pt->flags & PF_IGNORE_MERGES) != 0;
}

bool moe_pretok_add_bos(const moe_pretok *pt)
{
    return (pt->flags & PF_ADD_BOS) != 0;
}

bool moe_pretok_no_bos(const moe_pretok *pt)
{
    return (pt->flags & PF_NO_BOS) != 0;
}

void moe_pretok_buf_free(moe_pretok_buf *buf)
{
    if (!buf)
        return;
    for (int i = 0; i < 2; i++) {
        free(buf->mapped[i]);
        free(buf->lens[i]);
        buf->mapped[i] = NULL;
        buf->lens[i] = NULL;
    }
    buf->cap = 0;
    moe_regex_stack_free(&buf->stack);
}

/* ---- hand-written splitters -------------------------------------------- */

#define CAT(i) (props[i] & MOE_UCAT_MASK)
#define IS_SPACE(i) ((props[i] & MOE_UPROP_SPACE) != 0)
#define IS_LETTER(i) (CAT(i) == MOE_UCAT_LETTER)
#define IS_NUMBER(i) (CAT(i) == MOE_UCAT_NUMBER)

static inline uint32_t ascii_lower(uint32_t c)
{
    return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

/* Length of an English contraction ('s 't 'm 'd 're 've 'll) at pos, or 0. */
static size_t contraction_len(const uint32_t *cps, size_t pos, size_t end, bool any_case)
{
    if (cps[pos] != '\'' || pos + 1 >= end)
        return 0;
    uint32_t a = any_case ? ascii_lower(cps[pos + 1]) : cps[pos + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if (pos + 2 >= end)
        return 0;
    uint32_t b = any_case ? ascii_lower(cps[pos + 2]) : cps[pos + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    return 0;
}

/* The whitespace alternatives shared by every pattern here:
 * [\s*[\r\n]+ |] \s+(?!\S) | \s+  — returns the match length at pos. */
static size_t space_run(const uint32_t *cps, const uint8_t *props, size_t pos, size_t end,
                        bool newline_alt)
{
    size_t k = pos, last_nl = 0;
    while (k < end && IS_SPACE(k)) {
        if (cps[k] == '\r' || cps[k] == '\n')
            last_nl = k + 1;
        k++;
    }
    if (newline_alt && last_nl)
        return last_nl - pos;
    if (k - pos > 1 && k < end)
        return k - pos - 1; /* leave one space to lead the next word */
    return k - pos;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
 * A code point no alternative matches (a lone non-space whitespace before
 * a non-space) is a piece of its own, which is what \s+ gives. */
static size_t next_gpt2(const uint32_t *cps, const uint8_t *props, size_t pos, size_t end)
{
    size_t n = contraction_len(cps, pos, end, false);
    if (n)
        return n;
    size_t q = pos + (cps[pos] == ' ' && pos + 1 < end);
    size_t k = q;
    if (IS_LETTER(q)) {
        while (k < end && IS_LETTER(k))
            k++;
        return k - pos;
    }
    if (IS_NUMBER(q)) {
        while (k < end && IS_NUMBER(k))
            k++;
        return k - pos;
    }
    if (!IS_SPACE(q)) {
        while (k < end && !IS_SPACE(k) && !IS_LETTER(k) && !IS_NUMBER(k))
            k++;
        return k - pos;
    }
    return space_run(cps, props, pos, end, false);
}

/* (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])
 * |[^\r\n\p{L}\p{N}]?W+ |\p{N}{1,max_digits} | ?[^\s\p{N}W]+[\r\n]*
 * |\s*[\r\n]+|\s+(?!\S)|\s+
 * where W is \p{L} (Llama 3, Qwen2) or [\p{L}\p{M}] (Qwen3.5). */
static size_t next_llama3(const uint32_t *cps, const uint8_t *props, size_t pos, size_t end,
                          size_t max_digits, bool marks)
{
#define IS_WORD(i) (IS_LETTER(i) || (marks && CAT(i) == MOE_UCAT_MARK))
    size_t n = contraction_len(cps, pos, end, true);
    if (n)
        return n;
    uint32_t c = cps[pos];
    size_t k;
    if (IS_WORD(pos) ||
        (c != '\r' && c != '\n' && !IS_NUMBER(pos) && pos + 1 < end && IS_WORD(pos + 1))) {
        k = pos + 1;
        while (k < end && IS_WORD(k))
            k++;
        return k - pos;
    }
    if (IS_NUMBER(pos)) {
        k = pos + 1;
        while (k < end && k - pos < max_digits && IS_NUMBER(k))
            k++;
        return k - pos;
    }
    size_t q = pos + (c == ' ' && pos + 1 < end);
    if (!IS_SPACE(q) && !IS_NUMBER(q) && !IS_WORD(q)) {
        k = q + 1;
        while (k < end && !IS_SPACE(k) && !IS_NUMBER(k) && !IS_WORD(k))
            k++;
        while (k < end && (cps[k] == '\r' || cps[k] == '\n'))
            k++;
        return k - pos;
    }
    return space_run(cps, props, pos, end, true);
#undef IS_WORD
}

/* ---- pass runner -------------------------------------------------------- */

static int reserve(moe_pretok_buf *buf, size_t n, bool mapped0, bool mapped1)
{
    if (n > buf->cap) {
        size_t nc = n < 256 ? 256 : n;
        for (int i = 0; i < 2; i++) {
            void *l = realloc(buf->lens[i], nc * sizeof(size_t));
            if (!l)
                return -1;
            buf->lens[i] = l;
            if (buf->mapped[i]) {
                free(buf->mapped[i]);
                buf->mapped[i] = NULL;
            }
        }
        buf->cap = nc;
    }
    bool want[2] = {mapped0, mapped1};
    for (int i = 0; i < 2; i++)
        if (want[i] && !buf->mapped[i]) {
            buf->mapped[i] = malloc(buf->cap * sizeof(uint32_t));
            if (!buf->mapped[i])
                return -1;
        }
    return 0;
}

moe_status moe_pretok_split(const moe_pretok *pt, const uint32_t *cps, const uint8_t *props,
                            size_t n, moe_pretok_buf *buf, const size_t **lens,
                            size_t *n_pieces, moe_err *err)
{
    *lens = NULL;
    *n_pieces = 0;
    if (n == 0)
        return MOE_OK;
    if (reserve(buf, n, pt->need_mapped[0], pt->need_mapped[1]))
        return moe_fail(err, MOE_ERR_NOMEM, "pre-tokenizer: out of memory for %zu code points", n);
    for (int m = 0; m < 2; m++)
        if (pt->need_mapped[m])
            moe_regex_map_text(m == 1, cps, n, buf->mapped[m]);

    size_t *in = buf->lens[0], *outl = buf->lens[1];
    size_t n_in = 1;
    in[0] = n;
    for (int p = 0; p < pt->n_passes; p++) {
        const pass *ps = &pt->passes[p];
        size_t n_out = 0, start = 0;
        for (size_t f = 0; f < n_in; f++) {
            size_t end = start + in[f], pos = start;
            if (ps->engine == ENG_REGEX) {
                const uint32_t *text = buf->mapped[moe_regex_collapsed(ps->re)];
                while (pos < end) {
                    size_t mb, me;
                    int r = moe_regex_search(ps->re, text, start, end, pos, &mb, &me, &buf->stack);
                    if (r < 0)
                        return moe_fail(err, MOE_ERR_NOMEM, "pre-tokenizer: out of memory");
                    if (r == 0)
                        break;
                    if (mb > pos)
                        outl[n_out++] = mb - pos;
                    outl[n_out++] = me - mb;
                    pos = me;
                }
                if (pos < end)
                    outl[n_out++] = end - pos;
            } else {
                while (pos < end) {
                    size_t len;
                    switch (ps->engine) {
                    case ENG_GPT2:   len = next_gpt2(cps, props, pos, end); break;
                    case ENG_LLAMA3: len = next_llama3(cps, props, pos, end, 3, false); break;
                    case ENG_QWEN2:  len = next_llama3(cps, props, pos, end, 1, false); break;
                    default:         len = next_llama3(cps, props, pos, end, 1, true); break;
                    }
                    if (MOE_NEVER(len == 0))
                        len = 1;
                    outl[n_out++] = len;
                    pos += len;
                }
            }
            start = end;
        }
        size_t *t = in;
        in = outl;
        outl = t;
        n_in = n_out;
    }
    *lens = in;
    *n_pieces = n_in;
    return MOE_OK;
}

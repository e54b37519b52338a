/*
 * test-pretok.c — the pre-tokenizers and the regex engine under them:
 * every supported tokenizer.ggml.pre name builds, unknown names are refused
 * by name, known texts split as llama.cpp splits them, and the hand-written
 * splitters (GPT-2, Llama 3, Qwen2, Qwen3.5 patterns) agree with the regex
 * engine running the same patterns on many random strings.
 */
#include "moe.h"
#include "pretok.h"
#include "regex.h"
#include "unicode.h"
#include "test.h"

static const char *const all_pre[] = {
    "default", "", "llama3", "llama-bpe", "dbrx", "glm4", "jais-2", "qwen2", "stablelm2",
    "qwen35", "laguna", "gpt-2", "mpt", "olmo", "starcoder", "refact", "command-r", "falcon",
    "deepseek-llm", "deepseek-coder", "deepseek-v3", "youtu", "poro-chat", "viking", "tekken",
    "gpt-4o", "chameleon", "bailingmoe", "seed-coder", "exaone-moe", "minicpm5",
};

/* Splits UTF-8 `s` and joins the pieces with '|' into out. */
static void split_str(const moe_pretok *pt, const char *s, size_t len, char *out, size_t cap)
{
    uint32_t cps[4096];
    uint8_t props[4096];
    size_t n = moe_utf8_decode_all((const uint8_t *)s, len, cps);
    for (size_t i = 0; i < n; i++)
        props[i] = moe_uprops(cps[i]);
    moe_pretok_buf buf = {0};
    const size_t *lens;
    size_t n_pieces, o = 0, c = 0;
    moe_err err = {{0}};
    out[0] = 0;
    if (moe_pretok_split(pt, cps, props, n, &buf, &lens, &n_pieces, &err) != MOE_OK) {
        snprintf(out, cap, "ERROR %s", err.msg);
        moe_pretok_buf_free(&buf);
        return;
    }
    for (size_t p = 0; p < n_pieces; p++) {
        if (p && o + 1 < cap)
            out[o++] = '|';
        for (size_t k = 0; k < lens[p]; k++, c++) {
            uint8_t b[4];
            size_t m = moe_utf8_encode(cps[c], b);
            for (size_t j = 0; j < m && o + 1 < cap; j++)
                out[o++] = (char)b[j];
        }
    }
    out[o] = 0;
    moe_pretok_buf_free(&buf);
}

static void check_split(const char *pre, const char *text, const char *want)
{
    moe_pretok *pt = NULL;
    moe_err err = {{0}};
    CHECK_MSG(moe_pretok_new(pre, 0, &pt, &err) == MOE_OK, "%s: %s", pre, err.msg);
    if (!pt)
        return;
    char got[4096];
    split_str(pt, text, strlen(text), got, sizeof got);
    CHECK_MSG(strcmp(got, want) == 0, "%s: \"%s\" split as \"%s\", want \"%s\"", pre, text,
              got, want);
    moe_pretok_free(pt);
}

/* xorshift: deterministic random strings. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static void compare_engines(const char *pre)
{
    static const uint32_t alphabet[] = {
        ' ', ' ', ' ', '\t', '\n', '\r', 'a', 'B', 'e', 's', 'S', 't', 'l', 'L', 'r', 'v',
        'm', 'D', '\'', '\'', '1', '2', '!', '.', ',', '$', '<', '-', '/', 0xE9, 0x4E2D,
        0x3042, 0x0663, 0x0301, 0x00A0, 0x3000, 0x2028, 0x0085, 0x1F600, 0xE000, 0x0378,
        0xFFFD, 0x0410, 0x00BD, 0x2160, 0x0E01, 0x0E31,
    };
    moe_pretok *fast = NULL, *slow = NULL;
    moe_err err = {{0}};
    CHECK(moe_pretok_new(pre, 0, &fast, &err) == MOE_OK);
    CHECK(moe_pretok_new(pre, MOE_PRETOK_NO_BUILTIN, &slow, &err) == MOE_OK);
    if (!fast || !slow)
        goto done;
    int bad = 0;
    for (int iter = 0; iter < 3000 && bad < 5; iter++) {
        char s[256];
        size_t len = 0, n = 1 + rnd() % 24;
        for (size_t i = 0; i < n; i++) {
            uint8_t b[4];
            size_t m = moe_utf8_encode(alphabet[rnd() % (sizeof alphabet / sizeof alphabet[0])], b);
            memcpy(s + len, b, m);
            len += m;
        }
        char a[2048], b[2048];
        split_str(fast, s, len, a, sizeof a);
        split_str(slow, s, len, b, sizeof b);
        if (strcmp(a, b) != 0) {
            bad++;
            CHECK_MSG(0, "%s: builtin \"%s\" vs regex \"%s\"", pre, a, b);
        }
    }
    CHECK_EQ_INT(bad, 0);
done:
    moe_pretok_free(fast);
    moe_pretok_free(slow);
}

int main(void)
{
    moe_err err = {{0}};
    for (size_t i = 0; i < sizeof all_pre / sizeof all_pre[0]; i++) {
        moe_pretok *pt = NULL;
        CHECK_MSG(moe_pretok_new(all_pre[i], 0, &pt, &err) == MOE_OK, "%s: %s", all_pre[i],
                  err.msg);
        moe_pretok_free(pt);
        pt = NULL;
        CHECK_MSG(moe_pretok_new(all_pre[i], MOE_PRETOK_NO_BUILTIN, &pt, &err) == MOE_OK,
                  "%s (regex only): %s", all_pre[i], err.msg);
        moe_pretok_free(pt);
    }
    moe_pretok *pt = NULL;
    CHECK(moe_pretok_new("no-such-pre", 0, &pt, &err) == MOE_ERR_UNSUPPORTED);
    CHECK(pt == NULL);
    CHECK(strstr(err.msg, "'no-such-pre'") != NULL);
    CHECK(moe_pretok_new("kimi-k2", 0, &pt, &err) == MOE_ERR_UNSUPPORTED);
    moe_pretok_free(NULL);

    /* Splits as llama.cpp makes them. */
    check_split("qwen2", "Hello world", "Hello| world");
    check_split("qwen2", "I'm 12345 ok!!\n\n  x", "I|'m| |1|2|3|4|5| ok|!!\n\n| | x");
    check_split("llama-bpe", "12345 ABC's", "123|45| ABC|'s");
    check_split("llama-bpe", "a  \n\n b", "a|  \n\n| b");
    check_split("gpt-2", "Hello,  world's\t\tend ", "Hello|,| | world|'s|\t|\t|end| ");
    check_split("gpt-2", "I'M", "I|'|M");
    check_split("qwen35", "e\xcc\x81t\xc3\xa9", "e\xcc\x81t\xc3\xa9");
    check_split("qwen2", "e\xcc\x81t", "e|\xcc\x81t");
    check_split("default", "a+b=12345", "a|+|b|=|123|45");
    check_split("starcoder", "x 123", "x| |1|2|3");
    check_split("deepseek-llm", "Hello 世界 123\n", "Hello| |世界| |123|\n");
    check_split("deepseek-v3", "ab12345世界", "ab|123|45|世界");
    check_split("deepseek-coder", "ab 12", "ab| |1|2");

    /* The hand-written splitters agree with the regex engine. */
    compare_engines("gpt-2");
    compare_engines("llama-bpe");
    compare_engines("qwen2");
    compare_engines("qwen35");
    compare_engines("default");
    compare_engines("laguna");

    /* Regex engine details. */
    moe_regex *re = NULL;
    CHECK(moe_regex_compile("a*?", &re, &err) == MOE_ERR_UNSUPPORTED);
    CHECK(moe_regex_compile("(a*)*b", &re, &err) == MOE_ERR_UNSUPPORTED);
    CHECK(moe_regex_compile("x|", &re, &err) == MOE_ERR_UNSUPPORTED);
    CHECK(moe_regex_compile("\\p{L}é", &re, &err) == MOE_ERR_UNSUPPORTED);
    CHECK(moe_regex_compile("[a-", &re, &err) == MOE_ERR_FORMAT);
    CHECK(moe_regex_compile("(ab", &re, &err) == MOE_ERR_FORMAT);
    CHECK(moe_regex_compile("\\q", &re, &err) == MOE_ERR_UNSUPPORTED);
    CHECK(re == NULL);
    CHECK(moe_regex_compile("(?:ab|a)(?!c)c?|z{2,3}", &re, &err) == MOE_OK);
    if (re) {
        uint32_t t[] = {'a', 'b', 'c', 'z', 'z', 'z', 'z'};
        moe_regex_stack st = {0};
        size_t mb, me;
        CHECK(moe_regex_search(re, t, 0, 7, 0, &mb, &me, &st) == 1);
        CHECK(mb == 0 && me == 1); /* "ab" is followed by c: backtrack to "a" */
        CHECK(moe_regex_search(re, t, 0, 7, 1, &mb, &me, &st) == 1);
        CHECK(mb == 3 && me == 6);
        CHECK(moe_regex_search(re, t, 0, 7, 6, &mb, &me, &st) == 0);
        moe_regex_stack_free(&st);
        moe_regex_free(re);
    }
    /* A very long run does not recurse. */
    {
        moe_pretok *p2 = NULL;
        CHECK(moe_pretok_new("deepseek-v3", 0, &p2, &err) == MOE_OK);
        size_t n = 200000;
        uint32_t *cps = malloc(n * sizeof *cps);
        uint8_t *props = malloc(n);
        for (size_t i = 0; i < n; i++) {
            cps[i] = i == 10 ? '\n' : i == n - 1 ? 'x' : ' ';
            props[i] = moe_uprops(cps[i]);
        }
        moe_pretok_buf buf = {0};
        const size_t *lens;
        size_t np = 0, sum = 0;
        CHECK(moe_pretok_split(p2, cps, props, n, &buf, &lens, &np, &err) == MOE_OK);
        for (size_t i = 0; i < np; i++)
            sum += lens[i];
        CHECK(sum == n && np == 3);
        moe_pretok_buf_free(&buf);
        moe_pretok_free(p2);
        free(cps);
        free(props);
    }
    TEST_DONE();
}

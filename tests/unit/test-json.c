/*
 * test-json.c — the strict JSON reader (engine/src/json.c): values and
 * escapes, what RFC 8259 forbids (and must be rejected with the byte
 * offset), the nesting limit, duplicate keys, and the shared number
 * helpers (locale-free strtod, Python-style double formatting).
 */
#include "json.h"
#include "test.h"

#include <locale.h>

static const moe_json *parse_ok(const char *text, moe_json_doc **doc)
{
    moe_err err = {{0}};
    moe_status st = moe_json_parse(text, strlen(text), doc, &err);
    CHECK_MSG(st == MOE_OK, "[%s]: %s", text, err.msg);
    return st == MOE_OK ? moe_json_doc_root(*doc) : NULL;
}

static void parse_bad(const char *text, size_t len, const char *frag)
{
    moe_err err = {{0}};
    moe_json_doc *doc = (moe_json_doc *)1;
    moe_status st = moe_json_parse(text, len, &doc, &err);
    CHECK_MSG(st == MOE_ERR_FORMAT, "[%.*s] accepted", (int)len, text);
    CHECK(doc == NULL);
    CHECK_MSG(!frag || strstr(err.msg, frag), "[%.*s]: message [%s] lacks [%s]", (int)len, text, err.msg, frag);
}

static void check_values(void)
{
    moe_json_doc *doc;
    const moe_json *v = parse_ok(" {\"a\": [1, -2, 3.5, 1e2, true, false, null, \"s\"], \"b\": {}, \"c\": []} ", &doc);
    CHECK(v && v->type == MOE_JSON_OBJECT && v->u.obj.n == 3);
    const moe_json *a = moe_json_get(v, "a");
    CHECK(a && a->type == MOE_JSON_ARRAY && a->u.arr.n == 8);
    if (a && a->u.arr.n == 8) {
        CHECK(a->u.arr.items[0]->type == MOE_JSON_INT && a->u.arr.items[0]->u.i == 1);
        CHECK(a->u.arr.items[1]->type == MOE_JSON_INT && a->u.arr.items[1]->u.i == -2);
        CHECK(a->u.arr.items[2]->type == MOE_JSON_FLOAT && a->u.arr.items[2]->u.f == 3.5);
        CHECK(a->u.arr.items[3]->type == MOE_JSON_FLOAT && a->u.arr.items[3]->u.f == 100.0);
        CHECK(a->u.arr.items[4]->type == MOE_JSON_BOOL && a->u.arr.items[4]->u.b);
        CHECK(a->u.arr.items[5]->type == MOE_JSON_BOOL && !a->u.arr.items[5]->u.b);
        CHECK(a->u.arr.items[6]->type == MOE_JSON_NULL);
        CHECK(a->u.arr.items[7]->type == MOE_JSON_STRING && strcmp(a->u.arr.items[7]->u.str.ptr, "s") == 0);
    }
    CHECK(moe_json_get(v, "b")->type == MOE_JSON_OBJECT && moe_json_get(v, "b")->u.obj.n == 0);
    CHECK(moe_json_get(v, "c")->type == MOE_JSON_ARRAY && moe_json_get(v, "c")->u.arr.n == 0);
    CHECK(moe_json_get(v, "zz") == NULL);
    CHECK(moe_json_get(a, "a") == NULL);
    moe_json_doc_free(doc);

    /* Escapes, including a surrogate pair and \u0000 inside a string. */
    v = parse_ok("\"q\\\"b\\\\s\\/n\\nt\\tu\\u00e9\\ud83d\\ude00z\\u0000!\"", &doc);
    const char want[] = "q\"b\\s/n\nt\tu\xc3\xa9\xf0\x9f\x98\x80z\0!";
    CHECK(v && v->type == MOE_JSON_STRING && v->u.str.len == sizeof want - 1 &&
          memcmp(v->u.str.ptr, want, sizeof want - 1) == 0);
    moe_json_doc_free(doc);

    /* Raw UTF-8 passes through. */
    v = parse_ok("[\"h\xc3\xa9 \xe4\xbd\xa0 \xf0\x9f\x9a\x80\"]", &doc);
    CHECK(v && strcmp(v->u.arr.items[0]->u.str.ptr, "h\xc3\xa9 \xe4\xbd\xa0 \xf0\x9f\x9a\x80") == 0);
    moe_json_doc_free(doc);

    /* Integer range: INT64 limits stay integers, beyond becomes float. */
    v = parse_ok("[9223372036854775807, -9223372036854775808, 9223372036854775808, -0, 0.0]", &doc);
    CHECK(v && v->u.arr.items[0]->type == MOE_JSON_INT && v->u.arr.items[0]->u.i == INT64_MAX);
    CHECK(v && v->u.arr.items[1]->type == MOE_JSON_INT && v->u.arr.items[1]->u.i == INT64_MIN);
    CHECK(v && v->u.arr.items[2]->type == MOE_JSON_FLOAT && v->u.arr.items[2]->u.f == 9223372036854775808.0);
    CHECK(v && v->u.arr.items[3]->type == MOE_JSON_INT && v->u.arr.items[3]->u.i == 0);
    CHECK(v && v->u.arr.items[4]->type == MOE_JSON_FLOAT);
    moe_json_doc_free(doc);

    /* Duplicate keys: all kept, the last one wins in lookups. */
    v = parse_ok("{\"k\": 1, \"k\": 2}", &doc);
    CHECK(v && v->u.obj.n == 2 && moe_json_get(v, "k")->u.i == 2);
    moe_json_doc_free(doc);

    /* Nesting up to the limit is fine. */
    char deep[2 * MOE_JSON_MAX_DEPTH + 1];
    memset(deep, '[', MOE_JSON_MAX_DEPTH);
    memset(deep + MOE_JSON_MAX_DEPTH, ']', MOE_JSON_MAX_DEPTH);
    deep[2 * MOE_JSON_MAX_DEPTH] = 0;
    v = parse_ok(deep, &doc);
    CHECK(v && v->type == MOE_JSON_ARRAY);
    moe_json_doc_free(doc);
    moe_json_doc_free(NULL);
}

static void check_rejects(void)
{
    parse_bad("", 0, "end of input");
    parse_bad("   ", 3, "byte 3");
    parse_bad("[1,]", 4, "byte 3");
    parse_bad("{\"a\":1,}", 8, "string key");
    parse_bad("[1 2]", 5, "byte 3");
    parse_bad("01", 2, "trailing");
    parse_bad("1.", 2, "malformed number");
    parse_bad(".5", 2, "unexpected character");
    parse_bad("-", 1, "malformed number");
    parse_bad("1e", 2, "malformed number");
    parse_bad("+1", 2, NULL);
    parse_bad("NaN", 3, NULL);
    parse_bad("Infinity", 8, NULL);
    parse_bad("1e999", 5, "out of range");
    parse_bad("tru", 3, NULL);
    parse_bad("nul", 3, NULL);
    parse_bad("{'a': 1}", 8, "string key");
    parse_bad("{\"a\" 1}", 7, "':'");
    parse_bad("\"abc", 4, "unterminated");
    parse_bad("\"a\nb\"", 5, "control character");
    parse_bad("\"\\x41\"", 6, "bad escape");
    parse_bad("\"\\u12\"", 6, "\\u");
    parse_bad("\"\\ud800\"", 8, "lone high surrogate");
    parse_bad("\"\\udc00\"", 8, "lone low surrogate");
    parse_bad("\"\\ud800\\u0041\"", 14, "surrogate pair");
    parse_bad("\"\xff\"", 3, "UTF-8");
    parse_bad("\"\xc0\xaf\"", 4, "UTF-8");           /* overlong */
    parse_bad("\"\xed\xa0\x80\"", 5, "UTF-8");       /* encoded surrogate */
    parse_bad("\"\xf4\x90\x80\x80\"", 6, "UTF-8");   /* above U+10FFFF */
    parse_bad("\"\xe4\xbd\"", 4, "UTF-8");           /* truncated */
    parse_bad("\xef\xbb\xbf{}", 5, NULL);            /* BOM */
    parse_bad("{} x", 4, "trailing");
    parse_bad("[1]\0", 4, "trailing");
    parse_bad("/* c */ 1", 9, NULL);

    char deep[2 * MOE_JSON_MAX_DEPTH + 3];
    memset(deep, '[', MOE_JSON_MAX_DEPTH + 1);
    memset(deep + MOE_JSON_MAX_DEPTH + 1, ']', MOE_JSON_MAX_DEPTH + 1);
    parse_bad(deep, sizeof deep - 1, "nesting");
    /* Very deep input fails at the limit, not by running out of stack. */
    size_t huge = 1u << 20;
    char *h = malloc(huge);
    memset(h, '[', huge);
    parse_bad(h, huge, "nesting");
    memset(h, '{', huge);
    parse_bad(h, huge, "string key");
    free(h);

    moe_err err = {{0}};
    moe_json_doc *doc;
    CHECK(moe_json_parse(NULL, 3, &doc, &err) == MOE_ERR_INVALID_ARG);
    CHECK(moe_json_parse("1", 1, NULL, &err) == MOE_ERR_INVALID_ARG);
    /* Error positions carry line:column. */
    CHECK(moe_json_parse("{\n  \"a\": tru\n}", 14, &doc, &err) == MOE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "line 2:8") != NULL, "msg [%s]", err.msg);
}

static void check_numbers(void)
{
    struct {
        double v;
        const char *want;
    } cases[] = {
        {1.0, "1.0"}, {0.1, "0.1"}, {-2.5, "-2.5"}, {0.1 + 0.2, "0.30000000000000004"},
        {1e16, "1e+16"}, {1e15, "1000000000000000.0"}, {9999999999999998.0, "9999999999999998.0"},
        {1e-4, "0.0001"}, {1e-5, "1e-05"}, {1.5e-7, "1.5e-07"}, {1e100, "1e+100"},
        {123456789.125, "123456789.125"}, {-0.0, "-0.0"}, {0.0, "0.0"}, {5e-324, "5e-324"},
        {1.7976931348623157e308, "1.7976931348623157e+308"}, {2.0 / 3.0, "0.6666666666666666"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[MOE_JSON_DOUBLE_BUF];
        size_t n = moe_json_format_double(cases[i].v, buf);
        CHECK_MSG(strcmp(buf, cases[i].want) == 0 && n == strlen(buf), "%.17g: got %s, want %s", cases[i].v,
                  buf, cases[i].want);
    }
    char buf[MOE_JSON_DOUBLE_BUF];
    moe_json_format_double(1.0 / 0.0, buf);
    CHECK_EQ_STR(buf, "inf");
    moe_json_format_double(-1.0 / 0.0, buf);
    CHECK_EQ_STR(buf, "-inf");

    double d = 0;
    CHECK(moe_json_strtod("2.5e3", 5, &d) && d == 2500.0);
    CHECK(!moe_json_strtod("2.5x", 4, &d));
    CHECK(!moe_json_strtod("", 0, &d));
    /* A locale with a decimal comma changes nothing. */
    if (setlocale(LC_NUMERIC, "de_DE.UTF-8") || setlocale(LC_NUMERIC, "fr_FR.UTF-8") ||
        setlocale(LC_NUMERIC, "German_Germany.1252")) {
        CHECK(moe_json_strtod("0.25", 4, &d) && d == 0.25);
        moe_json_format_double(1234.5, buf);
        CHECK_EQ_STR(buf, "1234.5");
        moe_json_doc *doc;
        const moe_json *v = parse_ok("[0.75]", &doc);
        CHECK(v && v->u.arr.items[0]->u.f == 0.75);
        moe_json_doc_free(doc);
        setlocale(LC_NUMERIC, "C");
    }
}

int main(void)
{
    check_values();
    check_rejects();
    check_numbers();
    TEST_DONE();
}

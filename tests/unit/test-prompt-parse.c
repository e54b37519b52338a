/*
 * test-prompt-parse.c — the service prompt module's plain-C parts
 * (app/service/jsonguard.h, toolcall.h): the JSON guard on a table of
 * prefixes (valid, invalid, nested, escapes and Unicode, number edge
 * cases), its limits and shortest completions, the span and string
 * helpers, tool-call parsing for every format with malformed replies and
 * streaming split at every byte, format detection on the shared templates,
 * and each template's own tool-call rendering read back.
 *
 * Templates come from $MOE_SHARED_DATA/templates. argv[1] (the demo model
 * every service test gets) is not used.
 */
#include "jsonguard.h"
#include "toolcall.h"

#include "test.h"

#include <glib.h>
#include <json-glib/json-glib.h>
#include <moe.h>

/* ---- JSON guard ---------------------------------------------------------- */

typedef struct guard_case {
    const char *text;
    bool object_only;
    bool alive;     /* a prefix of some valid document          */
    bool complete;  /* a whole document                         */
} guard_case;

static const guard_case guard_cases[] = {
    {"", true, true, false},
    {"   ", true, true, false},
    {"{", true, true, false},
    {"{}", true, true, true},
    {" { } \n", true, true, true},
    {"[]", true, false, false},
    {"[]", false, true, true},
    {"1", true, false, false},
    {"{\"a\":1}", true, true, true},
    {"{\"a\":1,}", true, false, false},
    {"{\"a\" 1}", true, false, false},
    {"{a:1}", true, false, false},
    {"{\"a\":[1,2,{\"b\":null}],\"c\":true,\"d\":false}", true, true, true},
    {"{\"a\":[1,2,", true, true, false},
    {"{\"a\":[1,2,]", true, false, false},
    {"{\"a\":[1 2]}", true, false, false},
    {"{\"a\":{\"b\":{\"c\":{}}}}", true, true, true},
    {"{\"a\":]", true, false, false},
    {"{\"a\":[}", true, false, false},
    {"{}}", true, false, false},
    {"{} {}", true, false, false},
    {"{\"a\":tru", true, true, false},
    {"{\"a\":tru}", true, false, false},
    {"{\"a\":nul", true, true, false},
    {"{\"a\":nulll", true, false, false},
    {"{\"a\":True}", true, false, false},
    /* strings and escapes */
    {"{\"a\\\"b\":\"c\\\\d\\/e\\b\\f\\n\\r\\t\"}", true, true, true},
    {"{\"a\":\"\\x\"}", true, false, false},
    {"{\"a\":\"\\u00e9\\u20AC\"}", true, true, true},
    {"{\"a\":\"\\u00g\"}", true, false, false},
    {"{\"a\":\"\\ud83d\\ude00\"}", true, true, true},
    {"{\"a\":\"\\ud83d", true, true, false},
    {"{\"a\":\"\\ud83d\"}", true, false, false},
    {"{\"a\":\"\\ud83d\\u0041\"}", true, false, false},
    {"{\"a\":\"\\ude00\"}", true, false, false},
    {"{\"a\":\"\\uDBFF\\uDFFF\"}", true, true, true},
    {"{\"a\":\"tab\there\"}", true, false, false},
    {"{\"a\":\"line\nbreak\"}", true, false, false},
    {"{\"é\":\"日本語 😀\"}", true, true, true},
    {"{\"a\":\"\xc3\"}", true, false, false},       /* truncated 2-byte sequence */
    {"{\"a\":\"\xc3", true, true, false},           /* ... but a prefix so far   */
    {"{\"a\":\"\xc0\xaf\"}", true, false, false},   /* overlong                  */
    {"{\"a\":\"\xed\xa0\x80\"}", true, false, false}, /* UTF-8 surrogate         */
    {"{\"a\":\"\xf4\x90\x80\x80\"}", true, false, false}, /* above U+10FFFF     */
    {"{\"a\":\"\xe0\x80\"", true, false, false},    /* overlong 3-byte           */
    {"{\"a\":\"\xff\"}", true, false, false},
    /* numbers */
    {"{\"n\":0}", true, true, true},
    {"{\"n\":-0}", true, true, true},
    {"{\"n\":01}", true, false, false},
    {"{\"n\":-}", true, false, false},
    {"{\"n\":1.}", true, false, false},
    {"{\"n\":.5}", true, false, false},
    {"{\"n\":1.5e}", true, false, false},
    {"{\"n\":1.5e+}", true, false, false},
    {"{\"n\":1.5e+10}", true, true, true},
    {"{\"n\":1E-3,\"m\":-12.25}", true, true, true},
    {"{\"n\":+1}", true, false, false},
    {"{\"n\":1e5.5}", true, false, false},
    {"{\"n\":-", true, true, false},
    {"{\"n\":12", true, true, false},
    {"12", false, true, true},
    {"12.", false, true, false},
    {"-", false, true, false},
    {"0e", false, true, false},
    {"\"s\"", false, true, true},
    {"null", false, true, true},
    {"nul", false, true, false},
};

static void test_guard_table(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(guard_cases); i++) {
        const guard_case *c = &guard_cases[i];
        svc_json_guard g;
        svc_json_guard_init(&g, c->object_only, 0);
        bool alive = svc_json_guard_feed(&g, c->text, strlen(c->text));
        CHECK_MSG(alive == c->alive, "case %zu '%s': alive %d", i, c->text, alive);
        CHECK_MSG(svc_json_guard_complete(&g) == c->complete, "case %zu '%s': complete %d", i,
                  c->text, svc_json_guard_complete(&g));
        /* byte by byte gives the same answer */
        svc_json_guard h;
        svc_json_guard_init(&h, c->object_only, 0);
        for (size_t k = 0; c->text[k]; k++)
            svc_json_guard_feed(&h, c->text + k, 1);
        CHECK_MSG(svc_json_guard_alive(&h) == alive, "case %zu bytewise", i);
        /* a living prefix has a completion that json-glib accepts */
        if (alive && !c->complete) {
            char buf[1024];
            size_t n = svc_json_guard_completion(&g, buf, sizeof buf);
            CHECK_MSG(n > 0 && n < sizeof buf, "case %zu: completion length %zu", i, n);
            svc_json_guard t = g;
            CHECK(svc_json_guard_feed(&t, buf, n) && svc_json_guard_complete(&t));
            g_autofree char *doc = g_strdup_printf("%s%.*s", c->text, (int)n, buf);
            g_autoptr(JsonParser) p = json_parser_new();
            CHECK_MSG(json_parser_load_from_data(p, doc, -1, NULL), "completed '%s'", doc);
        }
        if (c->complete && c->object_only) {
            g_autoptr(JsonParser) p = json_parser_new();
            CHECK_MSG(json_parser_load_from_data(p, c->text, -1, NULL), "json-glib '%s'", c->text);
        }
    }
}

static void test_guard_limits(void)
{
    svc_json_guard g;
    /* whitespace bound: 4 in a row are fine, a 5th is not */
    svc_json_guard_init(&g, true, 4);
    const char *spaced = "    {    \"a\"    :    1    }    ";
    CHECK(svc_json_guard_feed(&g, spaced, strlen(spaced)));
    CHECK(svc_json_guard_complete(&g));
    svc_json_guard_init(&g, true, 4);
    CHECK(!svc_json_guard_feed(&g, "{     \"a\":1}", 12));
    svc_json_guard_init(&g, true, 4);
    CHECK(svc_json_guard_feed(&g, "{\"a\":\"         \"}", 17)); /* in strings: not counted */
    /* depth bound */
    char deep[SVC_JSON_GUARD_MAX_DEPTH + 2];
    memset(deep, '[', sizeof deep);
    svc_json_guard_init(&g, false, 0);
    CHECK(svc_json_guard_feed(&g, deep, SVC_JSON_GUARD_MAX_DEPTH));
    CHECK(!svc_json_guard_feed(&g, deep, 1));
    /* a dead guard stays dead */
    svc_json_guard_init(&g, true, 0);
    CHECK(!svc_json_guard_feed(&g, "x", 1));
    CHECK(!svc_json_guard_feed(&g, "{}", 2));
    CHECK(svc_json_guard_completion(&g, NULL, 0) == 0);
    /* a completion grows by at most 8 bytes per byte fed (jsonmode.c relies on it) */
    GRand *r = g_rand_new_with_seed(5);
    static const char alphabet[] = "{}[]\":,\\u0123dDeEfF89.-+tnl \xc3\xa9\xf0\x9f";
    for (int run = 0; run < 2000; run++) {
        svc_json_guard_init(&g, run & 1, 0);
        size_t prev = svc_json_guard_completion(&g, NULL, 0);
        for (int k = 0; k < 40; k++) {
            char c = alphabet[g_rand_int_range(r, 0, sizeof alphabet - 1)];
            svc_json_guard t = g;
            if (!svc_json_guard_feed(&t, &c, 1))
                continue;
            g = t;
            size_t now = svc_json_guard_completion(&g, NULL, 0);
            CHECK_MSG(now <= prev + 8, "completion grew %zu -> %zu", prev, now);
            prev = now;
        }
    }
    g_rand_free(r);
}

static void test_json_helpers(void)
{
    const char *obj = " {\"x\" : [1, {\"name\":2}], \"na\\u006de\" : \"v\\n\" , \"n\":-1.5e3 } ";
    const char *v;
    size_t vn;
    CHECK(svc_json_object_get(obj, strlen(obj), "name", &v, &vn));
    CHECK(vn == 5 && memcmp(v, "\"v\\n\"", 5) == 0);
    CHECK(svc_json_object_get(obj, strlen(obj), "n", &v, &vn) && vn == 6);
    CHECK(svc_json_object_get(obj, strlen(obj), "x", &v, &vn) && v[0] == '[');
    CHECK(!svc_json_object_get(obj, strlen(obj), "y", &v, &vn));
    CHECK(!svc_json_object_get("[1]", 3, "x", &v, &vn));
    char buf[64];
    const char *esc = "\"a\\u00e9\\ud83d\\ude00\\t\"";
    CHECK_EQ_INT(svc_json_string_decode(esc, strlen(esc), buf, sizeof buf), 8);
    CHECK(memcmp(buf, "a\xc3\xa9\xf0\x9f\x98\x80\t", 8) == 0);
    CHECK(svc_json_string_decode("\"a", 2, buf, sizeof buf) < 0);
    size_t n = svc_json_string_encode("q\"\\\n\x01\xff", 6, buf, sizeof buf);
    CHECK(n < sizeof buf && memcmp(buf, "\"q\\\"\\\\\\n\\u0001\xef\xbf\xbd\"", n) == 0);
    CHECK_EQ_INT(svc_json_value_span("  12 ,", 6), 4);
    CHECK_EQ_INT(svc_json_value_span("{\"a\":1}xyz", 10), 7);
    CHECK_EQ_INT(svc_json_value_span("{\"a\":1", 6), 0);
}

/* ---- tool calls ----------------------------------------------------------- */

typedef struct tool_case {
    svc_tool_format format;
    const char *text;
    const char *content;   /* expected content (whole reply)            */
    size_t n_calls;
    const char *calls[3];  /* "name|arguments"                          */
    bool malformed;
} tool_case;

#define DS_CALL "<\xef\xbd\x9c" "tool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS "<\xef\xbd\x9c" "tool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9c" "tool\xe2\x96\x81" "sep\xef\xbd\x9c>"
#define DS_END "<\xef\xbd\x9c" "tool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9c" "tool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"

static const tool_case tool_cases[] = {
    /* Hermes / Qwen */
    {SVC_TOOL_FORMAT_HERMES, "Hello there", "Hello there", 0, {NULL}, false},
    {SVC_TOOL_FORMAT_HERMES,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
     "", 1, {"get_weather|{\"city\": \"Paris\"}"}, false},
    {SVC_TOOL_FORMAT_HERMES,
     "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
     "<tool_call>\n{\"name\": \"b\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>",
     "Let me check.\n", 2, {"a|{}", "b|{\"x\": 1}"}, false},
    {SVC_TOOL_FORMAT_HERMES, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}", "", 1,
     {"a|{\"x\": 1}"}, false}, /* closing tag missing at the very end: forgiven */
    {SVC_TOOL_FORMAT_HERMES, "<tool_call>\n{\"name\": \"a\", \"argum",
     "<tool_call>\n{\"name\": \"a\", \"argum", 0, {NULL}, true},
    {SVC_TOOL_FORMAT_HERMES, "<tool_call>{\"arguments\": {}}</tool_call>",
     "<tool_call>{\"arguments\": {}}</tool_call>", 0, {NULL}, true},
    {SVC_TOOL_FORMAT_HERMES, "x <tool_call>{\"name\":\"a\"}</tool_call> after", "x  after", 1,
     {"a|{}"}, false},
    {SVC_TOOL_FORMAT_HERMES, "a < b and <tool_ca", "a < b and <tool_ca", 0, {NULL}, false},
    /* Qwen3-Coder XML */
    {SVC_TOOL_FORMAT_QWEN3_CODER,
     "<tool_call>\n<function=search>\n<parameter=query>\ncats and dogs\n</parameter>\n"
     "<parameter=limit>\n5\n</parameter>\n<parameter=opts>\n{\"a\": [1]}\n</parameter>\n"
     "</function>\n</tool_call>",
     "", 1, {"search|{\"query\":\"cats and dogs\",\"limit\":5,\"opts\":{\"a\": [1]}}"}, false},
    {SVC_TOOL_FORMAT_QWEN3_CODER, "<tool_call>\n<function=f>\n<parameter=x>\nunterminated",
     "<tool_call>\n<function=f>\n<parameter=x>\nunterminated", 0, {NULL}, true},
    {SVC_TOOL_FORMAT_SEED_OSS,
     "<seed:tool_call><function=f><parameter=p>a \"q\"</parameter></function></seed:tool_call>",
     "", 1, {"f|{\"p\":\"a \\\"q\\\"\"}"}, false},
    /* GLM */
    {SVC_TOOL_FORMAT_GLM,
     "ok<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
     "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
     "ok", 1, {"get_weather|{\"city\":\"Beijing\",\"days\":3}"}, false},
    {SVC_TOOL_FORMAT_GLM, "<tool_call>f\n<arg_key>k</arg_key><arg_value>v",
     "<tool_call>f\n<arg_key>k</arg_key><arg_value>v", 0, {NULL}, true},
    /* Mistral */
    {SVC_TOOL_FORMAT_MISTRAL,
     "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {}}]",
     "", 2, {"f|{\"a\": 1}", "g|{}"}, false},
    {SVC_TOOL_FORMAT_MISTRAL, "[TOOL_CALLS]f[ARGS]{\"a\": 1}[TOOL_CALLS]g[CALL_ID]abcdefghi[ARGS]{}",
     "", 2, {"f|{\"a\": 1}", "g|{}"}, false},
    {SVC_TOOL_FORMAT_MISTRAL, "[TOOL_CALLS]f[ARGS]{\"a\": ", "[TOOL_CALLS]f[ARGS]{\"a\": ", 0,
     {NULL}, true},
    {SVC_TOOL_FORMAT_MISTRAL, "Use [brackets] freely [TOOL", "Use [brackets] freely [TOOL", 0,
     {NULL}, false},
    /* Llama 3 */
    {SVC_TOOL_FORMAT_LLAMA3, "  {\"name\": \"f\", \"parameters\": {\"x\": \"y\"}}", "", 1,
     {"f|{\"x\": \"y\"}"}, false},
    {SVC_TOOL_FORMAT_LLAMA3, "{\"type\": \"function\", \"name\": \"f\", \"parameters\": {}}", "",
     1, {"f|{}"}, false},
    {SVC_TOOL_FORMAT_LLAMA3, "{\"answer\": 42}", "{\"answer\": 42}", 0, {NULL}, false},
    {SVC_TOOL_FORMAT_LLAMA3, "  \n ", "  \n ", 0, {NULL}, false},
    {SVC_TOOL_FORMAT_LLAMA3, "{\"nam", "{\"nam", 0, {NULL}, false},
    {SVC_TOOL_FORMAT_LLAMA3, "The answer {\"name\": 1}", "The answer {\"name\": 1}", 0, {NULL},
     false},
    {SVC_TOOL_FORMAT_LLAMA3, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", "", 1,
     {"f|{}"}, false},
    {SVC_TOOL_FORMAT_LLAMA3, "{\"name\": \"f\", \"parameters\": {\"x\"",
     "{\"name\": \"f\", \"parameters\": {\"x\"", 0, {NULL}, true},
    /* DeepSeek R1 and V3.1 */
    {SVC_TOOL_FORMAT_DEEPSEEK,
     "Sure." DS_CALLS DS_CALL "function" DS_SEP "get_time\n```json\n{\"tz\": \"UTC\"}\n```" DS_END
     DS_CALLS_END, "Sure.", 1, {"get_time|{\"tz\": \"UTC\"}"}, false},
    {SVC_TOOL_FORMAT_DEEPSEEK,
     DS_CALLS DS_CALL "f" DS_SEP "{\"a\": 1}" DS_END DS_CALL "g" DS_SEP "{}" DS_END DS_CALLS_END,
     "", 2, {"f|{\"a\": 1}", "g|{}"}, false},
    {SVC_TOOL_FORMAT_DEEPSEEK, DS_CALLS DS_CALL "f" DS_SEP "{\"a\"", DS_CALLS DS_CALL "f" DS_SEP
     "{\"a\"", 0, {NULL}, true},
    /* Kimi K2 */
    {SVC_TOOL_FORMAT_KIMI,
     "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
     "<|tool_call_argument_begin|>{\"city\": \"Oslo\"}<|tool_call_end|><|tool_calls_section_end|>",
     "", 1, {"get_weather|{\"city\": \"Oslo\"}"}, false},
    /* JSON lists */
    {SVC_TOOL_FORMAT_JSON_LIST,
     "<tool_calls>[{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {\"k\": [1]}}]"
     "</tool_calls>", "", 2, {"f|{}", "g|{\"k\": [1]}"}, false},
    {SVC_TOOL_FORMAT_JSON_LIST,
     "<tool_calls>\n{\"name\": \"f\", \"arguments\": {}}\n{\"name\": \"g\", \"arguments\": {}}\n"
     "</tool_calls>", "", 2, {"f|{}", "g|{}"}, false},
    {SVC_TOOL_FORMAT_FIREFUNCTION, " functools[{\"name\": \"f\", \"arguments\": {\"q\": 1}}]", " ", 1,
     {"f|{\"q\": 1}"}, false},
    {SVC_TOOL_FORMAT_COMMAND_R,
     "<|START_ACTION|>[{\"tool_name\": \"search\", \"parameters\": {\"q\": \"x\"}}]<|END_ACTION|>",
     "", 1, {"search|{\"q\": \"x\"}"}, false},
    /* no format: everything is content */
    {SVC_TOOL_FORMAT_NONE, "<tool_call>{\"name\":\"f\"}</tool_call>",
     "<tool_call>{\"name\":\"f\"}</tool_call>", 0, {NULL}, false},
};

static bool same_parse(const svc_tool_parse *a, const char *a_head, const svc_tool_parse *b)
{
    g_autofree char *ac = g_strconcat(a_head, a->content, NULL);
    if (strcmp(ac, b->content) != 0 || a->n_calls != b->n_calls || a->malformed != b->malformed)
        return false;
    for (size_t i = 0; i < a->n_calls; i++)
        if (strcmp(a->calls[i].name, b->calls[i].name) ||
            strcmp(a->calls[i].arguments, b->calls[i].arguments))
            return false;
    return true;
}

/* Feeds text in the pieces cut at `cuts` (sorted, n_cuts of them). */
static void stream_parse(svc_tool_format f, const char *text, const size_t *cuts, size_t n_cuts,
                         GString *emitted, svc_tool_parse *out)
{
    svc_tool_stream *s = svc_tool_stream_new(f);
    size_t at = 0, len = strlen(text);
    for (size_t k = 0; k <= n_cuts; k++) {
        size_t end = k < n_cuts ? cuts[k] : len;
        size_t n = 0;
        const char *o = svc_tool_stream_feed(s, text + at, end - at, &n);
        g_string_append_len(emitted, o, (gssize)n);
        at = end;
    }
    CHECK(svc_tool_stream_finish(s, out));
    svc_tool_stream_free(s);
}

static void test_tool_cases(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(tool_cases); i++) {
        const tool_case *c = &tool_cases[i];
        svc_tool_parse p;
        CHECK(svc_tool_parse_text(c->format, c->text, strlen(c->text), &p));
        CHECK_MSG(strcmp(p.content, c->content) == 0, "case %zu: content '%s' want '%s'", i,
                  p.content, c->content);
        CHECK_MSG(p.n_calls == c->n_calls, "case %zu: %zu calls (%s)", i, p.n_calls, p.problem);
        CHECK_MSG(p.malformed == c->malformed, "case %zu: malformed %d", i, p.malformed);
        if (c->malformed)
            CHECK_MSG(strstr(p.problem, "at byte") != NULL, "case %zu: problem '%s'", i, p.problem);
        for (size_t k = 0; k < p.n_calls && k < c->n_calls; k++) {
            g_autofree char *got = g_strdup_printf("%s|%s", p.calls[k].name, p.calls[k].arguments);
            CHECK_MSG(strcmp(got, c->calls[k]) == 0, "case %zu call %zu: '%s' want '%s'", i, k,
                      got, c->calls[k]);
            g_autoptr(JsonParser) jp = json_parser_new();
            CHECK_MSG(json_parser_load_from_data(jp, p.calls[k].arguments, -1, NULL),
                      "case %zu: arguments are not JSON", i);
        }
        /* streamed in two pieces cut at every byte, and one byte at a time */
        size_t len = strlen(c->text);
        const char *const *markers = svc_tool_format_markers(c->format);
        for (size_t cut = 0; cut <= len + 1; cut++) {
            g_autoptr(GString) emitted = g_string_new(NULL);
            svc_tool_parse q;
            size_t *cuts = NULL, n_cuts = 0;
            if (cut <= len) {
                cuts = g_new(size_t, 1);
                cuts[0] = cut, n_cuts = 1;
            } else {
                cuts = g_new(size_t, len ? len - 1 : 1);
                for (size_t b = 1; b < len; b++)
                    cuts[n_cuts++] = b;
            }
            stream_parse(c->format, c->text, cuts, n_cuts, emitted, &q);
            g_free(cuts);
            CHECK_MSG(same_parse(&q, emitted->str, &p), "case %zu split %zu differs", i, cut);
            if (p.n_calls)
                for (size_t m = 0; markers[m]; m++)
                    CHECK_MSG(!strstr(emitted->str, markers[m]), "case %zu: marker streamed", i);
            svc_tool_parse_clear(&q);
        }
        svc_tool_parse_clear(&p);
    }
}

typedef struct detect_case {
    const char *file;
    svc_tool_format format;
} detect_case;

static void test_tool_detect(const char *data)
{
    static const detect_case cases[] = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", SVC_TOOL_FORMAT_HERMES},
        {"Qwen-Qwen3-0.6B.jinja", SVC_TOOL_FORMAT_HERMES},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", SVC_TOOL_FORMAT_HERMES},
        {"Qwen3-Coder.jinja", SVC_TOOL_FORMAT_QWEN3_CODER},
        {"ByteDance-Seed-OSS.jinja", SVC_TOOL_FORMAT_SEED_OSS},
        {"GLM-4.6.jinja", SVC_TOOL_FORMAT_GLM},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", SVC_TOOL_FORMAT_MISTRAL},
        {"Mistral-Small-3.2-24B-Instruct-2506.jinja", SVC_TOOL_FORMAT_MISTRAL},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", SVC_TOOL_FORMAT_LLAMA3},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", SVC_TOOL_FORMAT_LLAMA3},
        {"llama-cpp-deepseek-r1.jinja", SVC_TOOL_FORMAT_DEEPSEEK},
        {"deepseek-ai-DeepSeek-V3.1.jinja", SVC_TOOL_FORMAT_DEEPSEEK},
        {"moonshotai-Kimi-K2.jinja", SVC_TOOL_FORMAT_KIMI},
        {"unsloth-Apriel-1.5.jinja", SVC_TOOL_FORMAT_JSON_LIST},
        {"MiniMax-M1.jinja", SVC_TOOL_FORMAT_JSON_LIST},
        {"fireworks-ai-llama-3-firefunction-v2.jinja", SVC_TOOL_FORMAT_FIREFUNCTION},
        {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", SVC_TOOL_FORMAT_COMMAND_R},
        {"google-gemma-2-2b-it.jinja", SVC_TOOL_FORMAT_NONE},
        {"MiniMax-M3.jinja", SVC_TOOL_FORMAT_NONE}, /* <invoke> XML: not read */
        {"MiniMax-M2.jinja", SVC_TOOL_FORMAT_NONE},
        {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", SVC_TOOL_FORMAT_QWEN3_CODER},
        {"unsloth-mistral-Devstral-Small-2507.jinja", SVC_TOOL_FORMAT_MISTRAL},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *path = g_build_filename(data, "templates", cases[i].file, NULL);
        g_autofree char *src = NULL;
        CHECK_MSG(g_file_get_contents(path, &src, NULL, NULL), "read %s", path);
        svc_tool_format f = svc_tool_format_detect(src);
        CHECK_MSG(f == cases[i].format, "%s: %s", cases[i].file, svc_tool_format_name(f));
    }
}

static char *read_template(const char *data, const char *file)
{
    g_autofree char *path = g_build_filename(data, "templates", file, NULL);
    char *src = NULL;
    if (!g_file_get_contents(path, &src, NULL, NULL))
        return NULL;
    return src;
}

/* What a template writes for an assistant turn with a tool call is what
 * its model emits: render [user] with the generation prompt and [user,
 * assistant+tool_calls] without, take the difference as the "reply", and
 * the parser must read the call back. */
static void test_tool_roundtrip(const char *data)
{
    static const char *const files[] = {
        "Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja", "Qwen-QwQ-32B.jinja",
        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "ibm-granite-granite-4.0.jinja",
        "Qwen3-Coder.jinja", "Qwen3.5-4B.jinja", "ByteDance-Seed-OSS.jinja", "GLM-4.6.jinja",
        "mistralai-Mistral-Nemo-Instruct-2407.jinja", "unsloth-mistral-Devstral-Small-2507.jinja",
        "mistralai-Ministral-3-14B-Reasoning-2512.jinja", "meta-llama-Llama-3.2-3B-Instruct.jinja",
        "moonshotai-Kimi-K2.jinja", "MiniMax-M1.jinja", "unsloth-Apriel-1.5.jinja",
        "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
        /* not here: llama.cpp's deepseek-r1 template (tojson of a generator)
         * and firefunction (needs a `functions` variable) do not render
         * without their own callers' variables; their formats are covered
         * by the hand-written cases above */
    };
    const char *calls = "[{\"id\":\"abcdefghi\",\"type\":\"function\",\"function\":{\"name\":"
                        "\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}]";
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                        "\"description\":\"Weather\",\"parameters\":{\"type\":\"object\","
                        "\"properties\":{\"city\":{\"type\":\"string\"}}}}}]";
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
        g_autofree char *src = read_template(data, files[i]);
        moe_chat_template *t = NULL;
        moe_err err = {{0}};
        CHECK_MSG(src && moe_chat_template_parse(src, strlen(src), &t, &err) == MOE_OK, "%s: %s",
                  files[i], err.msg);
        if (!t)
            continue;
        moe_chat_msg m[] = {{.role = "user", .content = "Weather in Paris?"},
                            {.role = "assistant", .content = "", .tool_calls_json = calls}};
        moe_chat_params p = {.messages = m, .n_messages = 1, .add_generation_prompt = true,
                             .tools_json = tools, .bos_token = "<s>", .eos_token = "</s>",
                             .tool_args_as_objects = true};
        char *head = NULL, *full = NULL;
        CHECK_MSG(moe_chat_template_render(t, &p, &head, NULL, &err) == MOE_OK, "%s: %s",
                  files[i], err.msg);
        p.n_messages = 2;
        p.add_generation_prompt = false;
        CHECK_MSG(moe_chat_template_render(t, &p, &full, NULL, &err) == MOE_OK, "%s: %s",
                  files[i], err.msg);
        if (head && full) {
            size_t hn = strlen(head);
            /* some templates write the generation prompt differently from
             * the start of a finished turn (e.g. a <think> block): compare
             * from where they diverge */
            size_t common = 0;
            while (head[common] && head[common] == full[common])
                common++;
            while (common > 0 && common < hn && full[common - 1] != '\n' && full[common - 1] != '>')
                common--; /* not into the middle of a tag ("<t" of <think> / <tool_call>) */
            CHECK_MSG(common + 64 >= hn, "%s: reply does not follow the prompt", files[i]);
            svc_tool_format f = svc_tool_format_detect(src);
            svc_tool_parse r;
            CHECK(svc_tool_parse_text(f, full + common, strlen(full + common), &r));
            CHECK_MSG(r.n_calls == 1 && !strcmp(r.calls[0].name, "get_weather"),
                      "%s (%s): %zu calls in '%s' (%s)", files[i], svc_tool_format_name(f),
                      r.n_calls, full + common, r.problem);
            if (r.n_calls == 1) {
                const char *v;
                size_t vn;
                CHECK_MSG(svc_json_object_get(r.calls[0].arguments, strlen(r.calls[0].arguments),
                                              "city", &v, &vn) &&
                              vn == 7 && !memcmp(v, "\"Paris\"", 7),
                          "%s: arguments %s", files[i], r.calls[0].arguments);
            }
            svc_tool_parse_clear(&r);
        }
        free(head);
        free(full);
        moe_chat_template_free(t);
    }
}

int main(void)
{
    test_guard_table();
    test_guard_limits();
    test_json_helpers();
    test_tool_cases();
    const char *data = getenv("MOE_SHARED_DATA");
    CHECK_MSG(data != NULL, "MOE_SHARED_DATA is not set");
    if (data) {
        test_tool_detect(data);
        test_tool_roundtrip(data);
    }
    TEST_DONE();
}

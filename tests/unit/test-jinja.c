/*
 * test-jinja.c — the chat-template interpreter: expressions, filters,
 * tests, loops, macros, namespaces and whitespace control against outputs
 * Python Jinja2 produces (test-jinja-cases.inc); errors that must name the
 * construct and its line:column; raise_exception; hostile templates that
 * must end in an error, not a hang or a crash; the public moe_chat_* API.
 */
#include "moe.h"
#include "jinja.h"
#include "test.h"

#define PINNED_NOW 1721995200 /* 2024-07-26 12:00:00 UTC */

typedef struct jcase {
    const char *name;
    const char *tpl;
    const char *ctx;
    const char *want;
} jcase;

static const jcase k_cases[] = {
#include "test-jinja-cases.inc"
};

/* Renders `tpl` with `ctx` (a JSON object of variables) under `lim`
 * (NULL: defaults). Returns the status; *out is malloc'd on success. */
static moe_status render_lim(const char *tpl, const char *ctx, const jj_limits *lim, char **out, moe_err *err)
{
    moe_chat_template *t = NULL;
    *out = NULL;
    moe_status st = moe_chat_template_parse(tpl, strlen(tpl), &t, err);
    if (st != MOE_OK)
        return st;
    jj_limits def;
    jj_limits_default(&def);
    moe_chat_params p = {0};
    p.extra_context_json = ctx ? ctx : "{}";
    p.now_unix = PINNED_NOW;
    st = jj_chat_render(t, "[]", &p, lim ? lim : &def, out, NULL, err);
    moe_chat_template_free(t);
    return st;
}

static moe_status render(const char *tpl, const char *ctx, char **out, moe_err *err)
{
    return render_lim(tpl, ctx, NULL, out, err);
}

static void check_cases(void)
{
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const jcase *c = &k_cases[i];
        moe_err err = {{0}};
        char *out = NULL;
        moe_status st = render(c->tpl, c->ctx, &out, &err);
        CHECK_MSG(st == MOE_OK, "case %s: %s", c->name, err.msg);
        if (st == MOE_OK)
            CHECK_MSG(strcmp(out, c->want) == 0, "case %s:\n  got  [%s]\n  want [%s]", c->name, out, c->want);
        free(out);
    }
}

/* Expects failure with `status` and a message containing every fragment. */
static void expect_error(const char *tpl, const char *ctx, moe_status status, const char *frag1, const char *frag2)
{
    moe_err err = {{0}};
    char *out = NULL;
    moe_status st = render(tpl, ctx, &out, &err);
    CHECK_MSG(st == status, "template [%.80s]: status %s, want %s (%s)", tpl, moe_status_str(st),
              moe_status_str(status), err.msg);
    CHECK_MSG(!frag1 || strstr(err.msg, frag1), "template [%.80s]: message [%s] lacks [%s]", tpl, err.msg, frag1);
    CHECK_MSG(!frag2 || strstr(err.msg, frag2), "template [%.80s]: message [%s] lacks [%s]", tpl, err.msg, frag2);
    CHECK(out == NULL);
    free(out);
}

static void check_errors(void)
{
    /* Unsupported constructs name themselves and their position. */
    expect_error("a\n  {% include 'x.jinja' %}", NULL, MOE_ERR_UNSUPPORTED, "line 2:6", "'include'");
    expect_error("{% extends 'base' %}", NULL, MOE_ERR_UNSUPPORTED, "line 1:4", "extends");
    expect_error("{% import 'm' as m %}", NULL, MOE_ERR_UNSUPPORTED, "line 1:4", "import");
    expect_error("{% block body %}{% endblock %}", NULL, MOE_ERR_UNSUPPORTED, "line 1:4", "block");
    expect_error("x\n\n{{ y | nosuchfilter }}", NULL, MOE_ERR_UNSUPPORTED, "line 3:8", "filter 'nosuchfilter'");
    expect_error("{% if x is nosuchtest %}{% endif %}", NULL, MOE_ERR_UNSUPPORTED, "line 1:12", "test 'nosuchtest'");
    expect_error("{% for x in y recursive %}{% endfor %}", NULL, MOE_ERR_UNSUPPORTED, "line 1:15", "recursive");
    expect_error("{{ f(*args) }}", NULL, MOE_ERR_UNSUPPORTED, "line 1:6", "unpacking");
    expect_error("{{ 'abc'.zfill(5) }}", NULL, MOE_ERR_UNSUPPORTED, "line 1:", "str method 'zfill'");
    expect_error("{% if 'abc'.center %}{{ 'abc'.center(9) }}{% endif %}", NULL, MOE_ERR_UNSUPPORTED, "line 1:", "center");
    expect_error("{{ 'abc'.nosuchmethod() }}", NULL, MOE_ERR_INVALID_ARG, "line 1:", "'nosuchmethod' is undefined");
    expect_error("{{ '{:>5}'.format(1) }}", NULL, MOE_ERR_UNSUPPORTED, "line 1:", "str.format");
    expect_error("{{ strftime_now('%Z') }}", NULL, MOE_ERR_UNSUPPORTED, "line 1:", "strftime code %Z");
    expect_error("{{ '\\N{BULLET}' }}", NULL, MOE_ERR_UNSUPPORTED, "line 1:5", "\\N");
    expect_error("{{ 99999999999999999999 }}", NULL, MOE_ERR_UNSUPPORTED, "line 1:4", "64 bits");
    expect_error("{{ 9223372036854775807 + 1 }}", NULL, MOE_ERR_UNSUPPORTED, "line 1:", "64 bits");

    /* Syntax errors. */
    expect_error("{% if x %}never closed", NULL, MOE_ERR_FORMAT, "line 1:", "endif");
    expect_error("{% for x in y %}{% endif %}", NULL, MOE_ERR_FORMAT, "line 1:20", "endif");
    expect_error("{{ 1 + }}", NULL, MOE_ERR_FORMAT, "line 1:8", NULL);
    expect_error("text {{ x ", NULL, MOE_ERR_FORMAT, "line 1:6", "never closed");
    expect_error("{# open comment", NULL, MOE_ERR_FORMAT, "line 1:1", "comment");
    expect_error("{{ 'unterminated }}", NULL, MOE_ERR_FORMAT, "line 1:4", "unterminated");
    expect_error("{% break %}", NULL, MOE_ERR_FORMAT, "line 1:4", "outside of a for loop");
    expect_error("{% macro m() %}{% break %}{% endmacro %}", NULL, MOE_ERR_FORMAT, NULL, "outside");
    expect_error("{% frobnicate %}", NULL, MOE_ERR_FORMAT, "line 1:4", "frobnicate");
    expect_error("{{ ) }}", NULL, MOE_ERR_FORMAT, "line 1:4", NULL);
    expect_error("{{ x is }}", NULL, MOE_ERR_FORMAT, "line 1:", "test name");

    /* raise_exception carries the template's message. */
    expect_error("{% if messages|length == 0 %}{{ raise_exception('Conversation roles must alternate') }}{% endif %}",
                 "{\"messages\": []}", MOE_ERR_INVALID_ARG, "Conversation roles must alternate", "line 1:");

    /* Runtime errors: Python's, with the position of the expression. */
    expect_error("{{ 'a' + none }}", NULL, MOE_ERR_INVALID_ARG, "can only concatenate str", "line 1:8");
    expect_error("\n {{ x.y }}", NULL, MOE_ERR_INVALID_ARG, "'x' is undefined", "line 2:6");
    expect_error("{{ x + 1 }}", NULL, MOE_ERR_INVALID_ARG, "'x' is undefined", NULL);
    expect_error("{{ 1 / 0 }}", NULL, MOE_ERR_INVALID_ARG, "division by zero", NULL);
    expect_error("{{ 1 < 'a' }}", NULL, MOE_ERR_INVALID_ARG, "not supported between", NULL);
    expect_error("{% for x in 5 %}{% endfor %}", NULL, MOE_ERR_INVALID_ARG, "not iterable", NULL);
    expect_error("{{ none|length }}", NULL, MOE_ERR_INVALID_ARG, "has no len()", NULL);
    expect_error("{{ [1]|map('upper')|length }}", NULL, MOE_ERR_INVALID_ARG, "generator", NULL);
    expect_error("{{ x|tojson }}", NULL, MOE_ERR_INVALID_ARG, "Undefined is not JSON serializable", NULL);
    expect_error("{% set ns = 1 %}{% set ns.a = 2 %}", NULL, MOE_ERR_INVALID_ARG, "not a namespace", NULL);
    expect_error("{{ nosuchfunction() }}", NULL, MOE_ERR_INVALID_ARG, "'nosuchfunction' is undefined", NULL);
    expect_error("{% set a, b = [1] %}", NULL, MOE_ERR_INVALID_ARG, "unpack", NULL);
    expect_error("{{ (1, 2).append(3) }}", NULL, MOE_ERR_INVALID_ARG, "tuple", NULL);
}

/* Hostile templates end with MOE_ERR_RANGE quickly and cleanly. */
static void check_limits(void)
{
    /* expression nesting, statement nesting, unary chains, not chains */
    static const struct {
        const char *pre, *rep, *mid, *rep2, *post;
        int count;
    } deep[] = {
        {"{{ ", "(", "1", ")", " }}", 5000},
        {"", "{% if 1 %}", "", "", "", 1000},
        {"{{ ", "-", "1", "", " }}", 3000},
        {"{{ ", "not ", "1", "", " }}", 3000},
        {"{{ ", "[", "1", "]", " }}", 3000},
        {"{{ ", "f(", "1", ")", " }}", 3000},
        {"{{ ", "x[", "1", "]", " }}", 3000},
        {"{{ ", "{'a': ", "1", "}", " }}", 3000},
        {"", "{% for x in y %}", "", "", "", 1000},
        {"", "{% macro m() %}", "", "", "", 1000},
    };
    for (size_t k = 0; k < sizeof deep / sizeof deep[0]; k++) {
        size_t cap = 64 + (size_t)deep[k].count * (strlen(deep[k].rep) + strlen(deep[k].rep2));
        char *big = malloc(cap);
        char *p = big;
        p += sprintf(p, "%s", deep[k].pre);
        for (int i = 0; i < deep[k].count; i++)
            p += sprintf(p, "%s", deep[k].rep);
        p += sprintf(p, "%s", deep[k].mid);
        for (int i = 0; i < deep[k].count; i++)
            p += sprintf(p, "%s", deep[k].rep2);
        sprintf(p, "%s", deep[k].post);
        expect_error(big, NULL, MOE_ERR_RANGE, "nesting deeper", NULL);
        free(big);
    }

    jj_limits lim;
    jj_limits_default(&lim);
    lim.max_steps = 1000000;
    lim.max_output_bytes = 1u << 20;
    lim.max_memory_bytes = 32u << 20;
    struct {
        const char *tpl, *frag;
    } hostile[] = {
        {"{% for i in range(100000000000) %}{% endfor %}", "range()"},
        {"{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", "steps"},
        {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "deeper"},
        {"{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}", "deeper"},
        {"{% set s = 'x' * 1000 %}{% for i in range(100000) %}{{ s }}{% endfor %}", "output limit"},
        {"{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "limit"},
        {"{{ 'x' * 10000000000 }}", "limit"},
        {"{{ [1, 2] * 10000000000 }}", "limit"},
        {"{% set l = [] %}{% set _ = l.append(l) %}{{ l }}", "nested"},
        {"{% set l = [] %}{% set _ = l.append(l) %}{{ l|tojson }}", "nested"},
        {"{% set d = {} %}{% set _ = d.update({'d': d}) %}{{ d|string }}", "nested"},
        {"{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}",
         "nested"},
        {"{% set ns = namespace(l=[]) %}{% for i in range(1000000) %}{% set ns.l = ns.l + [i] %}{% endfor %}",
         NULL},
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        moe_err err = {{0}};
        char *out = NULL;
        moe_status st = render_lim(hostile[i].tpl, NULL, &lim, &out, &err);
        CHECK_MSG(st == MOE_ERR_RANGE, "hostile %zu: %s (%s)", i, moe_status_str(st), err.msg);
        CHECK_MSG(!hostile[i].frag || strstr(err.msg, hostile[i].frag), "hostile %zu: message [%s]", i, err.msg);
        free(out);
    }
    /* Appending to the list being iterated does not extend the loop (the
     * loop walks the items present when it started), so it terminates. */
    moe_err err = {{0}};
    char *out = NULL;
    CHECK(render("{% set l = [1, 2] %}{% for x in l %}{% set _ = l.append(x) %}{% endfor %}{{ l }}", NULL, &out,
                 &err) == MOE_OK);
    CHECK(out && strcmp(out, "[1, 2, 1, 2]") == 0);
    free(out);
    /* The default limits stop runaway recursion too. */
    expect_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", NULL, MOE_ERR_RANGE, "deeper", NULL);
}

static const char *k_chatml =
    "{%- for m in messages %}<|im_start|>{{ m.role + '\\n' }}"
    "{%- if m.content is none %}(none){% else %}{{ m.content }}{% endif %}"
    "{%- if m.reasoning_content is defined %}[think:{{ m.reasoning_content }}]{% endif %}"
    "{%- if m.tool_calls is defined %}{% for c in m.tool_calls %}[call {{ c.function.name }} "
    "{{ c.function.arguments is mapping }} {{ c.function.arguments|tojson }}]{% endfor %}{% endif %}"
    "{%- if m.tool_call_id is defined %}[id {{ m.tool_call_id }}]{% endif %}"
    "{%- if m.name is defined %}[name {{ m.name }}]{% endif %}"
    "<|im_end|>\n{% endfor %}"
    "{%- if tools %}tools={{ tools|map(attribute='function.name')|join(',') }}{% endif %}"
    "{%- if tools is none %}no tools{% endif %}"
    "{{ bos_token }}{{ eos_token }}{{ extra }}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

static void check_api(void)
{
    moe_err err = {{0}};
    moe_chat_template *t = NULL;
    CHECK(moe_chat_template_parse(k_chatml, strlen(k_chatml), &t, &err) == MOE_OK);
    moe_chat_msg msgs[] = {
        {.role = "system", .content = "Be brief."},
        {.role = "user", .content = "Weather in Oslo? æøå"},
        {.role = "assistant", .content = NULL, .reasoning_content = "Need the tool.",
         .tool_calls_json = "[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"weather\","
                            "\"arguments\":\"{\\\"city\\\": \\\"Oslo\\\"}\"}}]"},
        {.role = "tool", .content = "{\"t\": 3}", .tool_call_id = "c1", .name = "weather"},
    };
    moe_chat_params p = {0};
    p.messages = msgs;
    p.n_messages = 4;
    p.add_generation_prompt = true;
    p.bos_token = "<s>";
    p.eos_token = "</s>";
    p.extra_context_json = "{\"extra\": \"X\"}";
    char *out = NULL;
    size_t len = 0;
    CHECK(moe_chat_template_render(t, &p, &out, &len, &err) == MOE_OK);
    const char *want =
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nWeather in Oslo? \303\246\303\270\303\245<|im_end|>\n"
        "<|im_start|>assistant\n(none)[think:Need the tool.][call weather False \"{\\\"city\\\": \\\"Oslo\\\"}\"]<|im_end|>\n"
        "<|im_start|>tool\n{\"t\": 3}[id c1][name weather]<|im_end|>\n"
        "no tools<s></s>X<|im_start|>assistant\n";
    CHECK_MSG(out && strcmp(out, want) == 0, "got [%s]", out ? out : "(null)");
    CHECK(out && len == strlen(want));
    free(out);

    /* Arguments as objects, tools, no generation prompt. */
    p.tool_args_as_objects = true;
    p.add_generation_prompt = false;
    p.tools_json = "[{\"type\":\"function\",\"function\":{\"name\":\"weather\"}},"
                   "{\"type\":\"function\",\"function\":{\"name\":\"time\"}}]";
    out = NULL;
    CHECK(moe_chat_template_render(t, &p, &out, NULL, &err) == MOE_OK);
    CHECK_MSG(out && strstr(out, "[call weather True {\"city\": \"Oslo\"}]"), "got [%s]", out ? out : "");
    CHECK_MSG(out && strstr(out, "tools=weather,time<s>"), "got [%s]", out ? out : "");
    CHECK(out && !strstr(out, "<|im_start|>assistant\n<"));
    free(out);

    /* The same conversation given as JSON. */
    const char *json =
        "[{\"role\":\"user\",\"content\":\"hi\"},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"type\":\"function\",\"function\":"
        "{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]}]";
    out = NULL;
    CHECK(moe_chat_template_render_json(t, json, &p, &out, NULL, &err) == MOE_OK);
    CHECK_MSG(out && strstr(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n(none)[call f True {\"a\": 1}]"),
              "got [%s]", out ? out : "");
    free(out);

    /* Bad JSON inputs are reported with what was wrong. */
    out = NULL;
    moe_chat_params bad = p;
    bad.tools_json = "[{\"type\": }]";
    CHECK(moe_chat_template_render(t, &bad, &out, NULL, &err) == MOE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "tools") && strstr(err.msg, "byte 10"), "msg [%s]", err.msg);
    CHECK(out == NULL);
    bad = p;
    bad.extra_context_json = "[1]";
    CHECK(moe_chat_template_render(t, &bad, &out, NULL, &err) == MOE_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "extra_context_json") != NULL);
    CHECK(moe_chat_template_render_json(t, "{\"role\":\"user\"}", &p, &out, NULL, &err) == MOE_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "array") != NULL);
    CHECK(moe_chat_template_render_json(t, "[", &p, &out, NULL, &err) == MOE_ERR_FORMAT);
    CHECK(moe_chat_template_render_json(t, NULL, &p, &out, NULL, &err) == MOE_ERR_INVALID_ARG);
    msgs[2].tool_calls_json = "not json";
    CHECK(moe_chat_template_render(t, &p, &out, NULL, &err) == MOE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "messages[2].tool_calls") != NULL, "msg [%s]", err.msg);
    CHECK(out == NULL);
    moe_chat_template_free(t);

    /* Empty template, NULL arguments, free(NULL). */
    CHECK(moe_chat_template_parse("", 0, &t, &err) == MOE_OK);
    moe_chat_params empty = {0};
    CHECK(moe_chat_template_render(t, &empty, &out, &len, &err) == MOE_OK);
    CHECK(out && out[0] == 0 && len == 0);
    free(out);
    CHECK(moe_chat_template_render(t, NULL, &out, &len, &err) == MOE_ERR_INVALID_ARG);
    moe_chat_template_free(t);
    moe_chat_template_free(NULL);
    CHECK(moe_chat_template_parse(NULL, 5, &t, &err) == MOE_ERR_INVALID_ARG);
    CHECK(moe_chat_template_parse("x", 1, NULL, &err) == MOE_ERR_INVALID_ARG);

    /* Every template in the shared folder parses (they are the formats
     * the engine has to load). */
    const char *data = getenv("MOE_SHARED_DATA");
    static const char *const names[] = {
        "Qwen-Qwen3-0.6B.jinja", "Qwen3-Coder.jinja", "mistralai-Mistral-Nemo-Instruct-2407.jinja",
        "mistralai-Ministral-3-14B-Reasoning-2512.jinja", "unsloth-mistral-Devstral-Small-2507.jinja",
        "Mistral-Small-3.2-24B-Instruct-2506.jinja", "deepseek-ai-DeepSeek-V3.1.jinja",
        "deepseek-ai-DeepSeek-V3.2.jinja", "moonshotai-Kimi-K2.jinja", "Kimi-K2-Instruct.jinja",
        "Kimi-K2-Thinking.jinja", "openai-gpt-oss-120b.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
        "Kimi-K3.jinja", "MiniMax-M2.jinja", "GLM-4.6.jinja",
    };
    for (size_t i = 0; data && i < sizeof names / sizeof names[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/templates/%s", data, names[i]);
        FILE *f = fopen(path, "rb");
        CHECK_MSG(f != NULL, "cannot open %s", path);
        if (!f)
            continue;
        static char buf[1 << 17];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        moe_chat_template *tt = NULL;
        CHECK_MSG(moe_chat_template_parse(buf, n, &tt, &err) == MOE_OK, "%s: %s", names[i], err.msg);
        moe_chat_msg m = {.role = "user", .content = "Hello"};
        moe_chat_params pp = {0};
        pp.messages = &m;
        pp.n_messages = 1;
        pp.add_generation_prompt = true;
        pp.bos_token = "<s>";
        pp.eos_token = "</s>";
        pp.now_unix = PINNED_NOW;
        out = NULL;
        CHECK_MSG(tt && moe_chat_template_render(tt, &pp, &out, NULL, &err) == MOE_OK, "%s: %s", names[i], err.msg);
        CHECK_MSG(out && strstr(out, "Hello"), "%s: prompt lacks the message", names[i]);
        free(out);
        moe_chat_template_free(tt);
    }
    CHECK_MSG(data != NULL, "MOE_SHARED_DATA is not set");
}

int main(void)
{
    check_cases();
    check_errors();
    check_limits();
    check_api();
    TEST_DONE();
}

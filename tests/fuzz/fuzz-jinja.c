/*
 * fuzz-jinja.c — libFuzzer target for the chat-template interpreter: the
 * input is parsed as a template and, when it parses, rendered with a small
 * fixed conversation (messages with tool calls and reasoning, tools, bos
 * and eos tokens). Tight limits (steps, output, memory) keep every input
 * bounded in time and space; anything but a clean status is a bug.
 */
#include "jinja.h"

#include <stdlib.h>
#include <string.h>

static const char *k_messages =
    "[{\"role\":\"system\",\"content\":\"You are helpful.\"},"
    "{\"role\":\"user\",\"content\":\"Hi <b>&amp; \\u00e9\\ud83d\\ude80\"},"
    "{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"think\","
    "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\","
    "\"arguments\":{\"a\":1,\"b\":[true,null,2.5]}}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"part\"},{\"type\":\"image\"}]}]";

static const char *k_tools =
    "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"array\","
    "\"items\":{\"type\":\"string\"}}},\"required\":[\"a\"]}}}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    moe_err err = {{0}};
    moe_chat_template *t = NULL;
    if (moe_chat_template_parse((const char *)data, size, &t, &err) != MOE_OK)
        return 0;
    jj_limits lim;
    jj_limits_default(&lim);
    lim.max_steps = 200000;
    lim.max_output_bytes = 256u << 10;
    lim.max_memory_bytes = 64u << 20;
    lim.max_depth = 200;
    moe_chat_params p = {0};
    p.add_generation_prompt = true;
    p.tools_json = k_tools;
    p.bos_token = "<s>";
    p.eos_token = "</s>";
    p.extra_context_json = "{\"enable_thinking\":false,\"n\":3,\"f\":0.5}";
    p.now_unix = 1721995200;
    char *out = NULL;
    size_t len = 0;
    if (jj_chat_render(t, k_messages, &p, &lim, &out, &len, &err) == MOE_OK) {
        if (!out || strlen(out) > len)
            abort(); /* the prompt must be NUL-terminated at out_len */
    }
    free(out);
    moe_chat_template_free(t);
    return 0;
}

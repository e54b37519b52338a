/*
 * test-request.c — the request parser (app/service/request.h) against
 * bodies shaped like the ones real clients send (the openai and ollama npm
 * packages, Anthropic's SDK, llama.vscode, Continue) and against a table
 * of bad bodies, each with the status, param and code it must produce.
 * Also the four error shapes and the mapping onto svc_gen_params.
 */
#include "request.h"
#include "test.h"

#include <math.h>
#include <string.h>

static svc_request *parse_ok(svc_api api, const char *body)
{
    svc_request *r = NULL;
    svc_request_error err;
    gboolean ok = svc_request_parse(api, body, strlen(body), &r, &err);
    CHECK_MSG(ok && r, "%s: %s (param %s)", svc_api_name(api), err.message, err.param);
    return r;
}

/* message i's string member, or NULL */
static const char *msg_str(const svc_request *r, guint i, const char *key)
{
    if (!r || !r->messages || i >= json_array_get_length(r->messages))
        return NULL;
    JsonObject *m = json_array_get_object_element(r->messages, i);
    JsonNode *n = json_object_get_member(m, key);
    return n && JSON_NODE_HOLDS_VALUE(n) ? json_node_get_string(n) : NULL;
}

/* message i's tool call j, member of "function" */
static const char *call_str(const svc_request *r, guint i, guint j, const char *key)
{
    JsonObject *m = json_array_get_object_element(r->messages, i);
    if (!json_object_has_member(m, "tool_calls"))
        return NULL;
    JsonArray *calls = json_object_get_array_member(m, "tool_calls");
    if (j >= json_array_get_length(calls))
        return NULL;
    JsonObject *call = json_array_get_object_element(calls, j);
    if (strcmp(key, "id") == 0)
        return json_object_get_string_member(call, "id");
    return json_object_get_string_member(json_object_get_object_member(call, "function"), key);
}

static guint n_messages(const svc_request *r)
{
    return r && r->messages ? json_array_get_length(r->messages) : 0;
}

static void test_openai_chat(void)
{
    /* openai npm: chat.completions.create with tools and a tool round trip */
    svc_request *r = parse_ok(SVC_API_OPENAI_CHAT,
        "{\"model\":\"gpt-4o\",\"messages\":["
        "{\"role\":\"system\",\"content\":\"You are helpful.\"},"
        "{\"role\":\"user\",\"content\":\"What's the weather in Paris?\"},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_abc\","
        "\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
        "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_abc\",\"content\":\"18C\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
        "\"description\":\"Get the weather\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]},"
        "\"strict\":true}}],\"tool_choice\":\"auto\",\"temperature\":0.2}");
    if (!r)
        return;
    CHECK_EQ_STR(r->model, "gpt-4o");
    CHECK(!r->stream && !r->include_usage);
    CHECK_EQ_INT(n_messages(r), 4);
    CHECK_EQ_STR(msg_str(r, 2, "role"), "assistant");
    CHECK_EQ_STR(msg_str(r, 2, "content"), "");
    CHECK_EQ_STR(call_str(r, 2, 0, "id"), "call_abc");
    CHECK_EQ_STR(call_str(r, 2, 0, "name"), "get_weather");
    CHECK_EQ_STR(call_str(r, 2, 0, "arguments"), "{\"city\":\"Paris\"}");
    CHECK_EQ_STR(msg_str(r, 3, "tool_call_id"), "call_abc");
    CHECK(r->tools && json_array_get_length(r->tools) == 1);
    CHECK(r->tool_choice && strcmp(json_node_get_string(r->tool_choice), "auto") == 0);
    CHECK_NEAR(r->sampling.temperature, 0.2, 1e-6);
    CHECK_NEAR(r->sampling.top_p, 1.0, 0);
    CHECK_EQ_INT(r->sampling.top_k, 0);
    CHECK_EQ_INT(r->max_tokens, -1);
    CHECK(!r->has_seed && r->n_stops == 0 && r->n_probs == 0);
    svc_request_free(r);

    /* streaming with stream_options, parts, developer role, the extras */
    r = parse_ok(SVC_API_OPENAI_CHAT,
        "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":[{\"type\":\"text\","
        "\"text\":\"Be brief.\"}]},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
        "\"Hi\"},{\"type\":\"text\",\"text\":\"there\"}]}],\"stream\":true,\"stream_options\":"
        "{\"include_usage\":true},\"max_tokens\":10,\"max_completion_tokens\":64,\"stop\":"
        "[\"\\n\\n\",\"END\",\"\"],\"seed\":42,\"presence_penalty\":0.5,\"frequency_penalty\":"
        "-0.5,\"logprobs\":true,\"top_logprobs\":3,\"response_format\":{\"type\":"
        "\"json_object\"},\"n\":1,\"user\":\"u1\",\"metadata\":{\"a\":\"b\"},\"store\":false,"
        "\"logit_bias\":{\"50256\":-100},\"top_p\":null,\"chat_template_kwargs\":"
        "{\"enable_thinking\":false}}");
    if (!r)
        return;
    CHECK(r->stream && r->include_usage);
    CHECK_EQ_STR(msg_str(r, 0, "role"), "system");
    CHECK_EQ_STR(msg_str(r, 1, "content"), "Hi\nthere");
    CHECK_EQ_INT(r->max_tokens, 64);
    CHECK_EQ_INT(r->n_stops, 2);
    CHECK_EQ_STR(r->stops[1], "END");
    CHECK(r->stops[2] == NULL);
    CHECK(r->has_seed && r->sampling.seed == 42);
    CHECK_NEAR(r->sampling.presence_penalty, 0.5, 0);
    CHECK_NEAR(r->sampling.frequency_penalty, -0.5, 0);
    CHECK(r->logprobs && r->top_logprobs == 3 && r->n_probs == 3);
    CHECK_EQ_INT(r->response_format, SVC_RESPONSE_JSON_OBJECT);
    CHECK_EQ_INT(r->n_logit_bias, 1);
    CHECK(r->sampling.logit_bias == r->logit_bias && r->sampling.n_logit_bias == 1);
    CHECK(r->logit_bias && r->logit_bias[0].token == 50256 && r->logit_bias[0].bias == -100);
    CHECK_EQ_INT(r->think, SVC_THINK_OFF);
    CHECK(r->template_kwargs &&
          !json_object_get_boolean_member(r->template_kwargs, "enable_thinking"));
    /* svc_gen_params_init lives in the scheduler; zeroed is enough here */
    svc_gen_params gp = { 0 };
    svc_request_gen_params(r, &gp);
    CHECK(gp.n_stops == 2 && strcmp(gp.stops[0], "\n\n") == 0);
    CHECK(gp.max_tokens == 64 && gp.n_probs == 3 && gp.sampling.seed == 42);
    CHECK(gp.sampling.n_logit_bias == 1 && gp.sampling.logit_bias == r->logit_bias);
    moe_err me = { { 0 } };
    CHECK_MSG(moe_sampler_params_check(&gp.sampling, 151936, &me) == MOE_OK, "%s", me.msg);
    svc_request_free(r);

    /* json_schema is kept and generated as JSON */
    r = parse_ok(SVC_API_OPENAI_CHAT,
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
        "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\","
        "\"schema\":{\"type\":\"object\"},\"strict\":true}},\"reasoning_effort\":\"low\","
        "\"tool_choice\":\"none\"}");
    if (r) {
        CHECK_EQ_INT(r->response_format, SVC_RESPONSE_JSON_SCHEMA);
        CHECK(r->json_schema && JSON_NODE_HOLDS_OBJECT(r->json_schema));
        CHECK_EQ_STR(r->reasoning_effort, "low");
        CHECK_EQ_INT(r->think, SVC_THINK_ON);
    }
    svc_request_free(r);
}

static void test_openai_completions(void)
{
    /* openai npm: completions.create with suffix (fill in the middle) */
    svc_request *r = parse_ok(SVC_API_OPENAI_COMPLETIONS,
        "{\"model\":\"m\",\"prompt\":\"def add(a, b):\\n\",\"suffix\":\"\\n\\nprint(add(1, 2))\","
        "\"max_tokens\":32,\"temperature\":0,\"stream\":false}");
    if (r) {
        CHECK_EQ_STR(r->prompt, "def add(a, b):\n");
        CHECK_EQ_STR(r->suffix, "\n\nprint(add(1, 2))");
        CHECK_EQ_INT(r->max_tokens, 32);
        CHECK(r->sampling.temperature == 0 && r->messages == NULL);
    }
    svc_request_free(r);

    r = parse_ok(SVC_API_OPENAI_COMPLETIONS,
        "{\"model\":\"m\",\"prompt\":[[1,2,3.0]],\"logprobs\":2,\"echo\":true,\"best_of\":1}");
    if (r) {
        CHECK_EQ_INT(r->max_tokens, 16); /* OpenAI's default for completions */
        CHECK(r->prompt == NULL && r->n_prompt_tokens == 3);
        CHECK(r->prompt_tokens && r->prompt_tokens[2] == 3);
        CHECK(r->echo && r->logprobs && r->n_probs == 2);
    }
    svc_request_free(r);
}

static void test_anthropic(void)
{
    /* @anthropic-ai/sdk: messages.create with system blocks and a tool round trip */
    svc_request *r = parse_ok(SVC_API_ANTHROPIC_MESSAGES,
        "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":1024,\"system\":[{\"type\":\"text\","
        "\"text\":\"You are a coding assistant.\",\"cache_control\":{\"type\":\"ephemeral\"}}],"
        "\"messages\":[{\"role\":\"user\",\"content\":\"List files\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Let me check.\"},"
        "{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"ls\",\"input\":{\"path\":\".\"}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_01\","
        "\"content\":\"a.c\\nb.c\"},{\"type\":\"text\",\"text\":\"Thanks\"}]}],"
        "\"tools\":[{\"name\":\"ls\",\"description\":\"List a folder\",\"input_schema\":"
        "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}}],"
        "\"tool_choice\":{\"type\":\"any\"},\"stream\":true,\"temperature\":0.5,\"top_k\":20,"
        "\"stop_sequences\":[\"</answer>\"],\"metadata\":{\"user_id\":\"x\"}}");
    if (!r)
        return;
    CHECK_EQ_INT(n_messages(r), 5);
    CHECK_EQ_STR(msg_str(r, 0, "role"), "system");
    CHECK_EQ_STR(msg_str(r, 0, "content"), "You are a coding assistant.");
    CHECK_EQ_STR(msg_str(r, 2, "content"), "Let me check.");
    CHECK_EQ_STR(call_str(r, 2, 0, "id"), "toolu_01");
    CHECK_EQ_STR(call_str(r, 2, 0, "arguments"), "{\"path\":\".\"}");
    CHECK_EQ_STR(msg_str(r, 3, "role"), "tool");
    CHECK_EQ_STR(msg_str(r, 3, "tool_call_id"), "toolu_01");
    CHECK_EQ_STR(msg_str(r, 3, "content"), "a.c\nb.c");
    CHECK_EQ_STR(msg_str(r, 4, "role"), "user");
    CHECK_EQ_STR(msg_str(r, 4, "content"), "Thanks");
    CHECK(r->tools && json_array_get_length(r->tools) == 1);
    if (r->tools) {
        JsonObject *fn = json_object_get_object_member(
            json_array_get_object_element(r->tools, 0), "function");
        CHECK_EQ_STR(json_object_get_string_member(fn, "name"), "ls");
        CHECK(json_object_has_member(fn, "parameters"));
    }
    CHECK(r->tool_choice && strcmp(json_node_get_string(r->tool_choice), "required") == 0);
    CHECK(r->stream && r->max_tokens == 1024 && r->sampling.top_k == 20);
    CHECK_NEAR(r->sampling.temperature, 0.5, 0);
    CHECK(r->n_stops == 1 && strcmp(r->stops[0], "</answer>") == 0);
    svc_request_free(r);

    r = parse_ok(SVC_API_ANTHROPIC_MESSAGES,
        "{\"model\":\"m\",\"max_tokens\":2048,\"thinking\":{\"type\":\"enabled\","
        "\"budget_tokens\":1024},\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
        "\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"}}],"
        "\"tool_choice\":{\"type\":\"tool\",\"name\":\"f\",\"disable_parallel_tool_use\":true}}");
    if (r) {
        CHECK_EQ_INT(r->think, SVC_THINK_ON);
        CHECK(r->template_kwargs &&
              json_object_get_boolean_member(r->template_kwargs, "enable_thinking"));
        CHECK_NEAR(r->sampling.temperature, 1.0, 0);
        CHECK(!r->parallel_tool_calls);
        CHECK(r->tool_choice && JSON_NODE_HOLDS_OBJECT(r->tool_choice));
    }
    svc_request_free(r);
}

static void test_ollama(void)
{
    /* ollama npm: ollama.chat with tools, options and a tool round trip */
    svc_request *r = parse_ok(SVC_API_OLLAMA_CHAT,
        "{\"model\":\"qwen3:30b-a3b\",\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"thinking\":\"hmm\",\"tool_calls\":"
        "[{\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}]},"
        "{\"role\":\"tool\",\"content\":\"18C\",\"tool_name\":\"get_weather\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
        "\"description\":\"d\",\"parameters\":{\"type\":\"object\",\"properties\":"
        "{\"city\":{\"type\":\"string\"}}}}}],\"options\":{\"temperature\":0.7,\"num_ctx\":8192,"
        "\"num_predict\":128,\"top_k\":20,\"top_p\":0.8,\"min_p\":0.0,\"stop\":[\"<|im_end|>\"],"
        "\"seed\":7,\"repeat_penalty\":1.05,\"repeat_last_n\":-1,\"presence_penalty\":0.1,"
        "\"frequency_penalty\":0.2,\"num_gpu\":99,\"mirostat\":0},\"stream\":false,"
        "\"keep_alive\":\"10m\",\"think\":false,\"format\":\"json\"}");
    if (!r)
        return;
    CHECK(!r->stream && !r->load_only);
    CHECK_EQ_INT(r->num_ctx, 8192);
    CHECK_EQ_INT(r->max_tokens, 128);
    CHECK_EQ_INT(r->sampling.penalty_last_n, 8192);
    CHECK_EQ_INT(r->sampling.top_k, 20);
    CHECK_NEAR(r->sampling.repeat_penalty, 1.05, 1e-6);
    CHECK(r->has_seed && r->sampling.seed == 7);
    CHECK_EQ_STR(call_str(r, 1, 0, "arguments"), "{\"city\":\"Paris\"}");
    CHECK_EQ_STR(call_str(r, 1, 0, "id"), "call_1_0");
    CHECK_EQ_STR(msg_str(r, 1, "reasoning_content"), "hmm");
    CHECK_EQ_STR(msg_str(r, 2, "name"), "get_weather");
    CHECK(r->has_keep_alive && r->keep_alive_ms == 600000);
    CHECK_EQ_INT(r->think, SVC_THINK_OFF);
    CHECK_EQ_INT(r->response_format, SVC_RESPONSE_JSON_OBJECT);
    CHECK(r->tools && json_array_get_length(r->tools) == 1);
    svc_request_free(r);

    /* Ollama's defaults */
    r = parse_ok(SVC_API_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                 "\"content\":\"hi\"}],\"keep_alive\":300}");
    if (r) {
        CHECK(r->stream && r->max_tokens == -1 && r->sampling.top_k == 40);
        CHECK_NEAR(r->sampling.temperature, 0.8, 1e-6);
        CHECK_NEAR(r->sampling.top_p, 0.9, 1e-6);
        CHECK_NEAR(r->sampling.repeat_penalty, 1.1, 1e-6);
        CHECK(r->keep_alive_ms == 300000);
    }
    svc_request_free(r);

    /* load / unload requests */
    r = parse_ok(SVC_API_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[],\"keep_alive\":0}");
    if (r)
        CHECK(r->load_only && r->has_keep_alive && r->keep_alive_ms == 0);
    svc_request_free(r);
    r = parse_ok(SVC_API_OLLAMA_GENERATE, "{\"model\":\"m\",\"keep_alive\":\"-1\"}");
    if (r)
        CHECK(r->load_only && r->keep_alive_ms == -1);
    svc_request_free(r);

    /* ollama npm: generate with suffix, raw, system */
    r = parse_ok(SVC_API_OLLAMA_GENERATE,
        "{\"model\":\"codellama:7b-code\",\"prompt\":\"def compute_gcd(a, b):\",\"suffix\":"
        "\"    return result\",\"options\":{\"temperature\":0,\"seed\":-1,\"num_predict\":-2},"
        "\"stream\":false,\"raw\":true,\"system\":\"sys\",\"keep_alive\":\"1h30m\","
        "\"think\":\"high\",\"format\":{\"type\":\"object\"},\"images\":[]}");
    if (r) {
        CHECK_EQ_STR(r->prompt, "def compute_gcd(a, b):");
        CHECK_EQ_STR(r->suffix, "    return result");
        CHECK_EQ_STR(r->system, "sys");
        CHECK(r->raw && !r->load_only && !r->has_seed && r->max_tokens == -1);
        CHECK(r->keep_alive_ms == 5400000);
        CHECK(r->think == SVC_THINK_ON && r->reasoning_effort &&
              strcmp(r->reasoning_effort, "high") == 0);
        CHECK(r->response_format == SVC_RESPONSE_JSON_SCHEMA && r->json_schema);
    }
    svc_request_free(r);
}

static void test_llamacpp(void)
{
    /* llama.vscode: /infill with extra context */
    svc_request *r = parse_ok(SVC_API_LLAMACPP_INFILL,
        "{\"id_slot\":0,\"input_prefix\":\"def f():\\n    \",\"input_suffix\":\"\\n\\nf()\\n\","
        "\"input_extra\":[{\"filename\":\"util.py\",\"text\":\"def g(): pass\\n\"}],"
        "\"prompt\":\"    \",\"n_predict\":128,\"top_k\":40,\"top_p\":0.99,\"stream\":false,"
        "\"n_indent\":4,\"samplers\":[\"top_k\",\"top_p\",\"infill\"],\"cache_prompt\":true,"
        "\"t_max_prompt_ms\":500,\"t_max_predict_ms\":1000}");
    if (!r)
        return;
    CHECK(r->model == NULL);
    CHECK_EQ_STR(r->prefix, "def f():\n    ");
    CHECK_EQ_STR(r->suffix, "\n\nf()\n");
    CHECK_EQ_STR(r->prompt, "    ");
    CHECK(r->extra && json_array_get_length(r->extra) == 1);
    if (r->extra)
        CHECK_EQ_STR(json_object_get_string_member(json_array_get_object_element(r->extra, 0),
                                                   "filename"), "util.py");
    CHECK_EQ_INT(r->max_tokens, 128);
    CHECK_NEAR(r->sampling.top_p, 0.99, 1e-6);
    CHECK_NEAR(r->sampling.temperature, 0.8, 1e-6);
    CHECK_NEAR(r->sampling.min_p, 0.05, 1e-6);
    CHECK(r->cache_prompt && r->t_max_predict_ms == 1000);
    svc_request_free(r);

    /* llama.vscode's cache warm-up: generate nothing */
    r = parse_ok(SVC_API_LLAMACPP_INFILL,
        "{\"input_extra\":[{\"filename\":\"a.py\",\"text\":\"x = 1\\n\"}],\"input_prefix\":\"\","
        "\"input_suffix\":\"\",\"prompt\":\"\",\"n_predict\":0,\"samplers\":[],"
        "\"cache_prompt\":true,\"t_max_prompt_ms\":1,\"t_max_predict_ms\":1}");
    if (r)
        CHECK_EQ_INT(r->max_tokens, 0);
    svc_request_free(r);

    /* Continue's llama.cpp provider: /completion */
    r = parse_ok(SVC_API_LLAMACPP_COMPLETION,
        "{\"prompt\":\"<PRE> int main() { <SUF> } <MID>\",\"n_predict\":256,"
        "\"frequency_penalty\":0,\"presence_penalty\":0,\"min_p\":0.05,\"mirostat\":0,"
        "\"stop\":[\"<EOT>\"],\"top_k\":40,\"top_p\":0.95,\"temperature\":0.01,"
        "\"stream\":true,\"cache_prompt\":true}");
    if (r) {
        CHECK(r->stream && r->max_tokens == 256 && r->n_stops == 1);
        CHECK_NEAR(r->sampling.temperature, 0.01, 1e-6);
    }
    svc_request_free(r);

    r = parse_ok(SVC_API_LLAMACPP_COMPLETION,
        "{\"prompt\":[1,2,3],\"seed\":-1,\"n_probs\":5,\"logit_bias\":[[15,false],[16,1.5]],"
        "\"temperature\":-1,\"ignore_eos\":true,\"json_schema\":{},\"repeat_last_n\":-1}");
    if (r) {
        CHECK(r->n_prompt_tokens == 3 && r->prompt_tokens[0] == 1);
        CHECK(!r->has_seed && r->n_probs == 5 && r->ignore_eos);
        CHECK(r->n_logit_bias == 2 && isinf(r->logit_bias[0].bias) && r->logit_bias[1].bias == 1.5f);
        CHECK(r->sampling.temperature == 0);
        CHECK_EQ_INT(r->response_format, SVC_RESPONSE_JSON_OBJECT);
        CHECK_EQ_INT(r->sampling.penalty_last_n, 4096);
        svc_gen_params gp = { 0 };
        svc_request_gen_params(r, &gp);
        CHECK(gp.ignore_eog && gp.n_probs == 5 && gp.max_tokens == -1);
    }
    svc_request_free(r);
}

/* One bad body and what it must produce. */
typedef struct bad_case {
    svc_api api;
    const char *body;
    const char *param;   /* "" = null */
    const char *code;    /* NULL = don't care */
    const char *needle;  /* in the message */
} bad_case;

#define MSGS "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
#define CHAT SVC_API_OPENAI_CHAT

static const bad_case bad_cases[] = {
    { CHAT, "{\"model\": \"m\", \"messages\": [}", "", NULL, "not valid JSON" },
    { CHAT, "{\"model\": \"m\",\n \"messages\": [1,]}", "", NULL, "at line 2, column 16: unexpected" },
    { CHAT, "", "", NULL, "empty" },
    { CHAT, "[1, 2]", "", NULL, "must be a JSON object" },
    { CHAT, "\"text\"", "", NULL, "must be a JSON object" },
    { CHAT, "{\"model\":\"\xff\"}", "", NULL, "UTF-8 (byte offset 10)" },
    { CHAT, "{\"model\":\"m\",\"temperature\":\"hot\"," MSGS "}", "temperature", "invalid_type",
      "'temperature' must be a number" },
    { CHAT, "{\"model\":\"m\",\"temperature\":2.5," MSGS "}", "temperature", "invalid_value",
      "between 0 and 2" },
    { CHAT, "{\"model\":\"m\",\"temperature\":-0.1," MSGS "}", "temperature", "invalid_value", NULL },
    { CHAT, "{\"model\":\"m\",\"top_p\":1.5," MSGS "}", "top_p", "invalid_value", NULL },
    { CHAT, "{\"model\":\"m\",\"presence_penalty\":3," MSGS "}", "presence_penalty", NULL, NULL },
    { CHAT, "{\"model\":\"m\",\"max_tokens\":0," MSGS "}", "max_tokens", "invalid_value", NULL },
    { CHAT, "{\"model\":\"m\",\"max_tokens\":1.5," MSGS "}", "max_tokens", "invalid_type",
      "must be an integer" },
    { CHAT, "{\"model\":\"m\",\"max_completion_tokens\":-5," MSGS "}", "max_completion_tokens",
      NULL, NULL },
    { CHAT, "{" MSGS "}", "model", "missing_required_parameter", "'model' is required" },
    { CHAT, "{\"model\":7," MSGS "}", "model", "invalid_type", NULL },
    { CHAT, "{\"model\":\"m\",\"messages\":[]}", "messages", NULL, "must not be empty" },
    { CHAT, "{\"model\":\"m\"}", "messages", NULL, "required" },
    { CHAT, "{\"model\":\"m\",\"messages\":{}}", "messages", "invalid_type", NULL },
    { CHAT, "{\"model\":\"m\",\"messages\":[\"hi\"]}", "messages[0]", NULL, NULL },
    { CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
      "{\"role\":\"wizard\",\"content\":\"b\"}]}", "messages[1].role", "invalid_value",
      "unknown role 'wizard'" },
    { CHAT, "{\"model\":\"m\",\"messages\":[{\"content\":\"b\"}]}", "messages[0].role", NULL, NULL },
    { CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
      "\"image_url\",\"image_url\":{\"url\":\"data:\"}}]}]}", "messages[0].content",
      "unsupported_content", "image_url" },
    { CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":5}]}",
      "messages[0].content", "invalid_type", NULL },
    { CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":"
      "\"c\",\"function\":{\"arguments\":\"{}\"}}]}]}", "messages[0].tool_calls", NULL, "name" },
    { CHAT, "{\"model\":\"m\",\"n\":2," MSGS "}", "n", "unsupported_value", "'n' must be 1" },
    { CHAT, "{\"model\":\"m\",\"stop\":5," MSGS "}", "stop", "invalid_type", NULL },
    { CHAT, "{\"model\":\"m\",\"stop\":[\"a\",3]," MSGS "}", "stop", "invalid_type", "stop[1]" },
    { CHAT, "{\"model\":\"m\",\"stream\":\"yes\"," MSGS "}", "stream", "invalid_type",
      "must be a boolean" },
    { CHAT, "{\"model\":\"m\",\"stream_options\":{\"include_usage\":1}," MSGS "}",
      "stream_options.include_usage", "invalid_type", NULL },
    { CHAT, "{\"model\":\"m\",\"response_format\":{\"type\":\"xml\"}," MSGS "}",
      "response_format.type", "invalid_value", NULL },
    { CHAT, "{\"model\":\"m\",\"tools\":[{\"type\":\"function\",\"function\":{}}]," MSGS "}",
      "tools[0]", NULL, "name" },
    { CHAT, "{\"model\":\"m\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
      "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}," MSGS "}",
      "tool_choice", "invalid_value", "'g'" },
    { CHAT, "{\"model\":\"m\",\"tool_choice\":\"required\"," MSGS "}", "tool_choice", NULL, NULL },
    { CHAT, "{\"model\":\"m\",\"logit_bias\":{\"hello\":1}," MSGS "}", "logit_bias",
      "unsupported_value", NULL },
    { CHAT, "{\"model\":\"m\",\"logit_bias\":{\"5\":101}," MSGS "}", "logit_bias",
      "invalid_value", NULL },
    { CHAT, "{\"model\":\"m\",\"top_logprobs\":21," MSGS "}", "top_logprobs", NULL, NULL },
    { CHAT, "{\"model\":\"m\",\"chat_template_kwargs\":[]," MSGS "}", "chat_template_kwargs",
      NULL, NULL },
    { SVC_API_OPENAI_COMPLETIONS, "{\"model\":\"m\"}", "prompt", "missing_required_parameter",
      NULL },
    { SVC_API_OPENAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[\"a\",\"b\"]}", "prompt",
      "unsupported_value", "one prompt" },
    { SVC_API_OPENAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":\"a\",\"best_of\":3}", "best_of",
      NULL, NULL },
    { SVC_API_ANTHROPIC_MESSAGES, "{\"model\":\"m\"," MSGS "}", "max_tokens",
      "missing_required_parameter", NULL },
    { SVC_API_ANTHROPIC_MESSAGES, "{\"model\":\"m\",\"max_tokens\":5,\"temperature\":1.5," MSGS
      "}", "temperature", "invalid_value", "between 0 and 1" },
    { SVC_API_ANTHROPIC_MESSAGES, "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":"
      "\"system\",\"content\":\"x\"}]}", "messages[0].role", NULL, NULL },
    { SVC_API_ANTHROPIC_MESSAGES, "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":"
      "\"user\",\"content\":[{\"type\":\"image\",\"source\":{}}]}]}", "messages[0].content",
      "unsupported_content", "'image'" },
    { SVC_API_ANTHROPIC_MESSAGES, "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[]}",
      "messages", NULL, NULL },
    { SVC_API_ANTHROPIC_MESSAGES, "{\"model\":\"m\",\"max_tokens\":5,\"tools\":[{\"type\":"
      "\"web_search_20250305\",\"name\":\"web_search\"}]," MSGS "}", "tools[0]",
      "unsupported_value", NULL },
    { SVC_API_ANTHROPIC_MESSAGES, "{\"model\":\"m\",\"max_tokens\":5,\"tool_choice\":{\"type\":"
      "\"tool\",\"name\":\"nope\"}," MSGS "}", "tool_choice", NULL, NULL },
    { SVC_API_ANTHROPIC_MESSAGES, "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":"
      "\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\","
      "\"input\":\"x\"}]}]}", "messages[0].content", "invalid_type", "input" },
    { SVC_API_OLLAMA_CHAT, "{" MSGS "}", "model", "missing_required_parameter", NULL },
    { SVC_API_OLLAMA_CHAT, "{\"model\":\"m\",\"options\":{\"top_p\":\"x\"}," MSGS "}",
      "options.top_p", "invalid_type", "'options.top_p' must be a number" },
    { SVC_API_OLLAMA_CHAT, "{\"model\":\"m\",\"options\":{\"num_ctx\":-1}," MSGS "}",
      "options.num_ctx", "invalid_value", NULL },
    { SVC_API_OLLAMA_CHAT, "{\"model\":\"m\",\"options\":[]," MSGS "}", "options", NULL, NULL },
    { SVC_API_OLLAMA_CHAT, "{\"model\":\"m\",\"format\":\"yaml\"," MSGS "}", "format", NULL, NULL },
    { SVC_API_OLLAMA_CHAT, "{\"model\":\"m\",\"keep_alive\":\"5 minutes\"," MSGS "}",
      "keep_alive", NULL, NULL },
    { SVC_API_OLLAMA_CHAT, "{\"model\":\"m\",\"think\":\"max\"," MSGS "}", "think", NULL, NULL },
    { SVC_API_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\","
      "\"images\":[\"iVBOR\"]}]}", "messages[0].images", "unsupported_content", NULL },
    { SVC_API_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":"
      "\"x\"}]}", "messages[0].role", NULL, NULL },
    { SVC_API_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[]}]}",
      "messages[0].content", "invalid_type", NULL },
    { SVC_API_OLLAMA_GENERATE, "{\"model\":\"m\",\"prompt\":5}", "prompt", "invalid_type", NULL },
    { SVC_API_LLAMACPP_COMPLETION, "{\"n_predict\":5}", "prompt", NULL, NULL },
    { SVC_API_LLAMACPP_COMPLETION, "{\"prompt\":[1,\"a\"]}", "prompt", "unsupported_value", NULL },
    { SVC_API_LLAMACPP_COMPLETION, "{\"prompt\":[1,-2]}", "prompt", "invalid_value", NULL },
    { SVC_API_LLAMACPP_COMPLETION, "{\"prompt\":\"x\",\"n_probs\":1000}", "n_probs", NULL, NULL },
    { SVC_API_LLAMACPP_COMPLETION, "{\"prompt\":\"x\",\"grammar\":\"root ::= x\"}", "grammar",
      "unsupported_value", NULL },
    { SVC_API_LLAMACPP_COMPLETION, "{\"prompt\":\"x\",\"stop\":[" /* 65 stops */
      "\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\","
      "\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\","
      "\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\","
      "\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\","
      "\"a\",\"a\",\"a\",\"a\",\"a\"]}", "stop", "invalid_value", "at most 64" },
    { SVC_API_LLAMACPP_INFILL, "{\"input_extra\":[{\"filename\":1}]}", "input_extra[0].filename",
      "invalid_type", NULL },
    { SVC_API_LLAMACPP_INFILL, "{\"input_extra\":\"x\"}", "input_extra", NULL, NULL },
    { SVC_API_LLAMACPP_INFILL, "{\"logit_bias\":[[1]]}", "logit_bias", NULL, NULL },
};

static void test_bad_bodies(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
        const bad_case *t = &bad_cases[i];
        svc_request *r = (svc_request *)&r; /* must be reset to NULL */
        svc_request_error err;
        gboolean ok = svc_request_parse(t->api, t->body, strlen(t->body), &r, &err);
        CHECK_MSG(!ok && r == NULL, "case %zu (%s) parsed", i, t->body);
        if (ok) {
            svc_request_free(r);
            continue;
        }
        CHECK_MSG(err.status == 400, "case %zu: status %u", i, err.status);
        CHECK_MSG(strcmp(err.type, "invalid_request_error") == 0, "case %zu: %s", i, err.type);
        CHECK_MSG(strcmp(err.param, t->param) == 0, "case %zu: param \"%s\", want \"%s\" (%s)",
                  i, err.param, t->param, err.message);
        CHECK_MSG(!t->code || strcmp(err.code, t->code) == 0, "case %zu: code \"%s\", want \"%s\"",
                  i, err.code, t->code);
        CHECK_MSG(!t->needle || strstr(err.message, t->needle), "case %zu: \"%s\" lacks \"%s\"",
                  i, err.message, t->needle);
        CHECK_MSG(err.message[0], "case %zu: empty message", i);
    }

    /* nesting past the limit is refused before json-glib recurses */
    GString *deep = g_string_new("{\"model\":\"m\",\"x\":");
    for (int i = 0; i < 100000; i++)
        g_string_append_c(deep, '[');
    svc_request *r = NULL;
    svc_request_error err;
    CHECK(!svc_request_parse(CHAT, deep->str, deep->len, &r, &err));
    CHECK(strstr(err.message, "deeper than") != NULL);
    g_string_free(deep, TRUE);
    /* an embedded NUL is not UTF-8 text */
    CHECK(!svc_request_parse(CHAT, "{\"a\":\"\0\"}", 9, &r, &err));
    CHECK(strstr(err.message, "UTF-8") != NULL);
    /* a quoted value cut inside a character still gives UTF-8 text */
    const char *split = "{\"model\":\"m\",\"messages\":[{\"role\":\"a\u00e9\u00e9\u00e9\u00e9"
                        "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\"}]}";
    CHECK(!svc_request_parse(CHAT, split, strlen(split), &r, &err));
    CHECK(strstr(err.message, "unknown role") && g_utf8_validate(err.message, -1, NULL));
    /* err may be NULL */
    CHECK(!svc_request_parse(CHAT, "{", 1, &r, NULL) && r == NULL);
}

static JsonObject *parse_obj(JsonParser *p, const char *text)
{
    if (!text || !json_parser_load_from_data(p, text, -1, NULL))
        return NULL;
    JsonNode *root = json_parser_get_root(p);
    return root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
}

static void test_error_json(void)
{
    svc_request *r = NULL;
    svc_request_error err;
    const char *body = "{\"model\":\"m\",\"temperature\":\"x\"," MSGS "}";
    CHECK(!svc_request_parse(CHAT, body, strlen(body), &r, &err));
    JsonParser *p = json_parser_new();

    char *text = svc_request_error_to_json(&err, CHAT);
    JsonObject *o = parse_obj(p, text);
    JsonObject *e = o && json_object_has_member(o, "error")
                    ? json_object_get_object_member(o, "error") : NULL;
    CHECK(e != NULL);
    if (e) {
        CHECK_EQ_STR(json_object_get_string_member(e, "type"), "invalid_request_error");
        CHECK_EQ_STR(json_object_get_string_member(e, "param"), "temperature");
        CHECK_EQ_STR(json_object_get_string_member(e, "code"), "invalid_type");
        CHECK(strstr(json_object_get_string_member(e, "message"), "must be a number") != NULL);
    }
    g_free(text);

    /* param/code null */
    svc_request_error_set(&err, 404, NULL, NULL, "model_not_found", "model '%s' not found", "x");
    text = svc_request_error_to_openai_json(&err);
    o = parse_obj(p, text);
    e = o ? json_object_get_object_member(o, "error") : NULL;
    CHECK(e && json_object_get_null_member(e, "param"));
    CHECK(e && strcmp(json_object_get_string_member(e, "message"), "model 'x' not found") == 0);
    g_free(text);

    text = svc_request_error_to_json(&err, SVC_API_ANTHROPIC_MESSAGES);
    o = parse_obj(p, text);
    CHECK(o && strcmp(json_object_get_string_member(o, "type"), "error") == 0);
    e = o ? json_object_get_object_member(o, "error") : NULL;
    CHECK(e && strcmp(json_object_get_string_member(e, "type"), "not_found_error") == 0);
    g_free(text);

    text = svc_request_error_to_json(&err, SVC_API_OLLAMA_GENERATE);
    o = parse_obj(p, text);
    CHECK(o && strcmp(json_object_get_string_member(o, "error"), "model 'x' not found") == 0);
    g_free(text);

    text = svc_request_error_to_json(&err, SVC_API_LLAMACPP_INFILL);
    o = parse_obj(p, text);
    e = o ? json_object_get_object_member(o, "error") : NULL;
    CHECK(e && json_object_get_int_member(e, "code") == 404);
    g_free(text);
    g_object_unref(p);

    CHECK_EQ_STR(svc_api_name(SVC_API_LLAMACPP_INFILL), "llamacpp.infill");
    CHECK(svc_api_name((svc_api)99) == NULL);
    CHECK(!svc_request_parse((svc_api)99, "{}", 2, &r, &err) && err.status == 400);
    svc_request_free(NULL);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    /* a GLib/json-glib critical means the parser misused an API */
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
    test_openai_chat();
    test_openai_completions();
    test_anthropic();
    test_ollama();
    test_llamacpp();
    test_bad_bodies();
    test_error_json();
    TEST_DONE();
}

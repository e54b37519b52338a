/*
 * test-prompt.c — the service's prompt module (app/service/prompt.h; its
 * plain-C parts are in test-prompt-parse.c): chat prompts against the
 * engine's own rendering and known strings, request errors, the fallback
 * template, FIM token order, replies with tool calls (ids, schema types,
 * streaming), and JSON mode on the demo model (argv[1], random weights)
 * producing JSON that json-glib parses within its token budget, with the
 * mask's cost on a 151k vocabulary.
 *
 * Real templates and vocabularies come from $MOE_SHARED_DATA (templates/,
 * vocab/ggml-vocab-qwen2.gguf).
 */
#include "prompt.h"

#include "test.h"
#include "tok-test-util.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <time.h>
#include <json-glib/json-glib.h>

static char *read_template(const char *data, const char *file)
{
    g_autofree char *path = g_build_filename(data, "templates", file, NULL);
    char *src = NULL;
    if (!g_file_get_contents(path, &src, NULL, NULL))
        return NULL;
    return src;
}

/* ---- chat ---------------------------------------------------------------- */

static JsonArray *parse_array(const char *json)
{
    g_autoptr(JsonParser) p = json_parser_new();
    if (!json_parser_load_from_data(p, json, -1, NULL))
        return NULL;
    return json_array_ref(json_node_get_array(json_parser_get_root(p)));
}

static JsonObject *parse_object(const char *json)
{
    g_autoptr(JsonParser) p = json_parser_new();
    if (!json_parser_load_from_data(p, json, -1, NULL))
        return NULL;
    return json_object_ref(json_node_get_object(json_parser_get_root(p)));
}

static char *detok_ids(const moe_vocab *v, const int32_t *ids, size_t n)
{
    size_t len = 0;
    return tt_detok(v, ids, n, 1, &len);
}

static char *detok_all(const moe_vocab *v, GArray *a)
{
    return detok_ids(v, (const int32_t *)(void *)a->data, a->len);
}

static void test_chat_demo(const moe_model *model)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(svc_prompt_model) pm = svc_prompt_model_new(model, &error);
    CHECK(pm != NULL);
    if (!pm)
        return;
    CHECK(!pm->template_fallback);
    CHECK(!svc_prompt_supports_tools(pm));
    CHECK(!svc_prompt_supports_fim(pm));
    g_autoptr(JsonArray) caps = svc_prompt_capabilities_json(pm);
    CHECK_EQ_INT(json_array_get_length(caps), 1);
    CHECK_EQ_STR(json_array_get_string_element(caps, 0), "completion");
    g_autofree char *otpl = svc_prompt_ollama_template(pm);
    CHECK_EQ_STR(otpl, "{{ .Prompt }}");

    g_autoptr(JsonArray) msgs = parse_array(
        "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hi\"},"
        "{\"type\":\"text\",\"text\":\"there\"}]}]");
    GArray *tokens = NULL;
    char *text = NULL;
    CHECK(svc_prompt_chat(pm, msgs, NULL, NULL, &tokens, &text, &error));
    /* the engine's own rendering of the same messages */
    moe_chat_msg em[] = {{.role = "system", .content = "Be brief."},
                         {.role = "user", .content = "Hi\nthere"}};
    moe_chat_params p = {.messages = em, .n_messages = 2, .add_generation_prompt = true,
                         .bos_token = pm->bos_text, .eos_token = pm->eos_text};
    char *want = NULL;
    moe_err err = {{0}};
    CHECK(moe_chat_template_render(pm->tmpl, &p, &want, NULL, &err) == MOE_OK);
    CHECK_EQ_STR(text, want);
    CHECK_EQ_STR(text, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi\nthere"
                       "<|im_end|>\n<|im_start|>assistant\n");
    if (tokens) {
        int32_t im_start = -1;
        size_t n = 0;
        moe_tokenize(pm->vocab, "<|im_start|>", 12, MOE_TOKENIZE_PARSE_SPECIAL, &im_start, 1, &n,
                     &err);
        CHECK(tokens->len > 10 && g_array_index(tokens, int32_t, 0) == im_start);
        g_autofree char *back = detok_all(pm->vocab, tokens);
        CHECK_EQ_STR(back, text);
        g_array_unref(tokens);
    }
    free(want);
    g_free(text);

    /* errors name the message and part */
    static const struct {
        const char *json;
        int code;
        const char *needle;
    } bad[] = {
        {"[]", SVC_PROMPT_ERROR_INVALID, "must not be empty"},
        {"[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"wizard\",\"content\":\"b\"}]",
         SVC_PROMPT_ERROR_INVALID, "messages[1].role: unknown role \"wizard\""},
        {"[{\"role\":5,\"content\":\"a\"}]", SVC_PROMPT_ERROR_INVALID, "messages[0].role"},
        {"[{\"role\":\"user\",\"content\":7}]", SVC_PROMPT_ERROR_INVALID,
         "messages[0].content: expected a string or a list of parts, got a number"},
        {"[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
         "{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]",
         SVC_PROMPT_ERROR_UNSUPPORTED, "messages[0].content[1]: content parts of type \"image_url\""},
        {"[\"hello\"]", SVC_PROMPT_ERROR_INVALID, "messages[0]: expected an object, got a string"},
        {"[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"function\":{}}]}]",
         SVC_PROMPT_ERROR_INVALID, "messages[0].tool_calls[0]"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(JsonArray) m = parse_array(bad[i].json);
        g_autoptr(GError) e = NULL;
        GArray *t = NULL;
        CHECK_MSG(!svc_prompt_chat(pm, m, NULL, NULL, &t, NULL, &e), "bad %zu accepted", i);
        CHECK_MSG(e && e->domain == SVC_PROMPT_ERROR && e->code == bad[i].code &&
                      strstr(e->message, bad[i].needle),
                  "bad %zu: %s", i, e ? e->message : "(none)");
        CHECK(t == NULL);
    }
}

static void test_chat_real(const char *data, const moe_vocab *qwen)
{
    g_autoptr(GError) error = NULL;
    /* Qwen2.5: the default system prompt, tools, a known string */
    g_autofree char *q25 = read_template(data, "Qwen-Qwen2.5-7B-Instruct.jinja");
    CHECK(q25 != NULL);
    g_autoptr(svc_prompt_model) pm = svc_prompt_model_new_for_vocab(qwen, q25, "qwen2.5", &error);
    CHECK(pm && !pm->template_fallback);
    if (!pm)
        return;
    CHECK(svc_prompt_supports_tools(pm));
    CHECK(pm->tool_format == SVC_TOOL_FORMAT_HERMES);
    g_autoptr(JsonArray) msgs = parse_array("[{\"role\":\"user\",\"content\":\"Hi\"}]");
    GArray *tokens = NULL;
    char *text = NULL;
    CHECK(svc_prompt_chat(pm, msgs, NULL, NULL, &tokens, &text, &error));
    CHECK_EQ_STR(text, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a "
                       "helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                       "<|im_start|>assistant\n");
    if (tokens) {
        CHECK_EQ_INT(g_array_index(tokens, int32_t, 0), 151644); /* <|im_start|> */
        g_autofree char *back = detok_all(qwen, tokens);
        CHECK_EQ_STR(back, text);
        g_array_unref(tokens);
    }
    g_free(text);

    /* a tool round trip renders as the engine renders it */
    g_autoptr(JsonArray) tools = parse_array(
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather\","
        "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}]");
    g_autoptr(JsonArray) turn = parse_array(
        "[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":"
        "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": "
        "\\\"Paris\\\"}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"18C\"}]");
    g_autofree char *q3 = read_template(data, "Qwen-Qwen3-0.6B.jinja");
    g_autoptr(svc_prompt_model) pm3 = svc_prompt_model_new_for_vocab(qwen, q3, "qwen3", &error);
    CHECK(pm3 != NULL);
    const svc_prompt_model *both[] = {pm, pm3};
    for (size_t b = 0; b < 2 && pm3; b++) {
        text = NULL;
        CHECK_MSG(svc_prompt_chat(both[b], turn, tools, NULL, NULL, &text, &error), "%s",
                  error ? error->message : "");
        g_clear_error(&error);
        moe_chat_msg em[] = {
            {.role = "user", .content = "Weather in Paris?"},
            {.role = "assistant",
             .content = "",
             .tool_calls_json = "[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":"
                                "\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}]"},
            {.role = "tool", .content = "18C", .tool_call_id = "call_1"},
        };
        g_autofree char *tools_json = NULL;
        {
            g_autoptr(JsonNode) n = json_node_new(JSON_NODE_ARRAY);
            json_node_set_array(n, tools);
            g_autoptr(JsonGenerator) gen = json_generator_new();
            json_generator_set_root(gen, n);
            tools_json = json_generator_to_data(gen, NULL);
        }
        moe_chat_params p = {.messages = em, .n_messages = 3, .add_generation_prompt = true,
                             .tools_json = tools_json, .bos_token = both[b]->bos_text,
                             .eos_token = both[b]->eos_text, .tool_args_as_objects = true};
        char *want = NULL;
        moe_err err = {{0}};
        CHECK_MSG(moe_chat_template_render(both[b]->tmpl, &p, &want, NULL, &err) == MOE_OK, "%s",
                  err.msg);
        CHECK_EQ_STR(text, want);
        CHECK(text && strstr(text, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                   "{\"city\": \"Paris\"}}\n</tool_call>"));
        CHECK(text && strstr(text, "\"name\": \"get_weather\""));
        free(want);
        g_free(text);
    }

    /* template kwargs: Qwen3 without thinking */
    if (pm3) {
        g_autoptr(JsonObject) kw = parse_object("{\"enable_thinking\": false}");
        text = NULL;
        CHECK(svc_prompt_chat(pm3, msgs, NULL, kw, NULL, &text, &error));
        CHECK_EQ_STR(text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
                           "<think>\n\n</think>\n\n");
        g_free(text);
        CHECK(svc_prompt_supports_thinking(pm3));
    }

    /* a template that raises: the error carries the template's text */
    g_autoptr(svc_prompt_model) raising = svc_prompt_model_new_for_vocab(
        qwen, "{{ raise_exception('Conversation roles must alternate') }}", "r", &error);
    CHECK(raising != NULL);
    if (raising) {
        g_autoptr(GError) e = NULL;
        CHECK(!svc_prompt_chat(raising, msgs, NULL, NULL, NULL, NULL, &e));
        CHECK(e && e->code == SVC_PROMPT_ERROR_TEMPLATE && strstr(e->message, "must alternate"));
    }

    /* no template: ChatML, and said so */
    g_autoptr(svc_prompt_model) bare = svc_prompt_model_new_for_vocab(qwen, NULL, "bare", &error);
    CHECK(bare && bare->template_fallback && bare->template_problem);
    if (bare) {
        text = NULL;
        CHECK(svc_prompt_chat(bare, msgs, NULL, NULL, NULL, &text, &error));
        CHECK_EQ_STR(text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
        g_free(text);
        CHECK(!svc_prompt_supports_tools(bare));
    }
    /* a template that does not parse falls back too, with the reason */
    g_autoptr(svc_prompt_model) broken = svc_prompt_model_new_for_vocab(qwen, "{% for %}", "b", &error);
    CHECK(broken && broken->template_fallback && strstr(broken->template_problem, "cannot be used"));
}

/* ---- fill in the middle -------------------------------------------------- */

/* GPT-2's byte-level symbol for byte b, as UTF-8. */
static void byte_symbol(unsigned b, char out[4])
{
#define PRINTABLE(c) (((c) >= 33 && (c) <= 126) || ((c) >= 161 && (c) <= 172) || ((c) >= 174 && (c) <= 255))
    unsigned cp = b;
    if (!PRINTABLE(b)) {
        unsigned n = 0;
        for (unsigned c = 0; c < b; c++)
            n += !PRINTABLE(c);
        cp = 256 + n;
    }
#undef PRINTABLE
    if (cp < 0x80) {
        out[0] = (char)cp, out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
    }
}

/* A byte-level vocabulary with Qwen2.5-Coder's FIM and repo tokens and a
 * Mistral-style control marker, written to `path` and loaded (the shared
 * qwen2 vocabulary has no FIM tokens). */
static moe_vocab *make_fim_vocab(const char *path)
{
    static const char *const specials[] = {
        "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|fim_prefix|>", "<|fim_middle|>",
        "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "[TOOL_CALLS]",
    };
    enum { N = 256 + G_N_ELEMENTS(specials) };
    static char sym[256][4];
    moe_str toks[N];
    int32_t types[N];
    for (unsigned b = 0; b < 256; b++) {
        byte_symbol(b, sym[b]);
        toks[b] = (moe_str){sym[b], strlen(sym[b])};
        types[b] = MOE_TOKEN_NORMAL;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(specials); i++) {
        toks[256 + i] = (moe_str){specials[i], strlen(specials[i])};
        types[256 + i] = MOE_TOKEN_CONTROL;
    }
    moe_gguf_writer *w = moe_gguf_writer_new();
    moe_err err = {{0}};
    moe_status st = moe_gguf_writer_set_str(w, "general.architecture", "qwen2");
    if (!st) st = moe_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (!st) st = moe_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2");
    if (!st) st = moe_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, N);
    if (!st) st = moe_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", MOE_GGUF_INT32, types, N);
    if (!st) st = moe_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", NULL, 0);
    if (!st) st = moe_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 256);
    if (!st) st = moe_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 256);
    if (!st) st = moe_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);
    if (!st) st = moe_gguf_writer_write_file(w, path, &err);
    moe_gguf_writer_free(w);
    CHECK_MSG(st == MOE_OK, "writing %s: %s", path, err.msg);
    return st == MOE_OK ? tt_open_vocab(path) : NULL;
}

static void test_fim(const moe_vocab *qwen, const moe_model *demo)
{
    /* the shared qwen2 vocabulary has no FIM tokens: an error naming it */
    {
        g_autoptr(GError) e = NULL;
        g_autoptr(svc_prompt_model) q = svc_prompt_model_new_for_vocab(qwen, NULL, "qwen2", &e);
        GArray *t = NULL;
        CHECK(q && !svc_prompt_supports_fim(q) && !svc_prompt_fim(q, "a", "b", NULL, &t, &e));
        CHECK(e && !strcmp(e->message, "model qwen2 has no fill-in-the-middle tokens"));
    }
    g_autofree char *dir = g_dir_make_tmp("test-prompt-XXXXXX", NULL);
    g_autofree char *vpath = g_build_filename(dir, "fim-vocab.gguf", NULL);
    moe_vocab *fv = make_fim_vocab(vpath);
    g_unlink(vpath);
    g_rmdir(dir);
    if (!fv)
        return;
    qwen = fv;
    g_autoptr(GError) error = NULL;
    g_autoptr(svc_prompt_model) pm = svc_prompt_model_new_for_vocab(qwen, NULL, "qwen", &error);
    CHECK(pm && svc_prompt_supports_fim(pm));
    if (!pm)
        return;
    g_autoptr(JsonArray) caps = svc_prompt_capabilities_json(pm);
    bool insert = false;
    for (guint i = 0; i < json_array_get_length(caps); i++)
        insert |= !strcmp(json_array_get_string_element(caps, i), "insert");
    CHECK(insert);
    g_autofree char *otpl = svc_prompt_ollama_template(pm);
    CHECK_EQ_STR(otpl, "{{- if .Suffix }}<|fim_prefix|>{{ .Prompt }}<|fim_suffix|>{{ .Suffix }}"
                       "<|fim_middle|>{{- else }}{{ .Prompt }}{{- end }}");

    GArray *t = NULL;
    CHECK(svc_prompt_fim(pm, "def f(x):\n    ", "\n    return y\n", NULL, &t, &error));
    if (t) {
        /* PSM: FIM_PRE prefix FIM_SUF suffix FIM_MID */
        CHECK_EQ_INT(g_array_index(t, int32_t, 0), pm->fim_pre);
        CHECK_EQ_INT(g_array_index(t, int32_t, t->len - 1), pm->fim_mid);
        guint suf = 0;
        for (guint i = 0; i < t->len; i++)
            if (g_array_index(t, int32_t, i) == pm->fim_suf)
                suf = i;
        CHECK(suf > 1 && suf < t->len - 2);
        g_autofree char *pre = detok_ids(qwen, (int32_t *)(void *)t->data + 1, suf - 1);
        g_autofree char *sfx = detok_ids(qwen, (int32_t *)(void *)t->data + suf + 1,
                                         t->len - suf - 2);
        CHECK_EQ_STR(pre, "def f(x):\n    ");
        CHECK_EQ_STR(sfx, "\n    return y\n");
        g_array_unref(t);
    }
    /* special-token text in user code stays text */
    t = NULL;
    CHECK(svc_prompt_fim(pm, "<|fim_middle|>", "", NULL, &t, &error));
    if (t) {
        guint mids = 0;
        for (guint i = 0; i < t->len; i++)
            mids += g_array_index(t, int32_t, i) == pm->fim_mid;
        CHECK_EQ_INT(mids, 1);
        g_array_unref(t);
    }
    /* extra context: repo-level format when the vocabulary has the tokens */
    g_autoptr(JsonArray) extra = parse_array(
        "[{\"filename\":\"util.py\",\"text\":\"def g(): pass\\n\"},{\"text\":\"# notes\\n\"}]");
    t = NULL;
    CHECK(svc_prompt_fim(pm, "a", "b", extra, &t, &error));
    if (t) {
        g_autofree char *all = detok_all(qwen, t);
        if (pm->fim_rep >= 0 && pm->fim_sep >= 0)
            CHECK_EQ_STR(all, "<|repo_name|>myproject\n<|file_sep|>util.py\ndef g(): pass\n"
                              "<|file_sep|>tmp\n# notes\n<|file_sep|>filename\n"
                              "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>");
        else
            CHECK_MSG(false, "qwen2 vocabulary without repo/file tokens");
        g_array_unref(t);
    }
    g_autoptr(JsonArray) bad_extra = parse_array("[{\"filename\":\"x\"}]");
    g_autoptr(GError) e1 = NULL;
    t = NULL;
    CHECK(!svc_prompt_fim(pm, "a", "b", bad_extra, &t, &e1));
    CHECK(e1 && strstr(e1->message, "input_extra[0]"));

    /* the demo model has none */
    g_autoptr(svc_prompt_model) dm = svc_prompt_model_new(demo, &error);
    g_autoptr(GError) e2 = NULL;
    t = NULL;
    CHECK(dm && !svc_prompt_fim(dm, "a", "b", NULL, &t, &e2));
    CHECK(e2 && e2->code == SVC_PROMPT_ERROR_UNSUPPORTED &&
          strstr(e2->message, "has no fill-in-the-middle tokens"));

    /* a control-token marker is listed for the detokenizer */
    g_autoptr(svc_prompt_model) mm = svc_prompt_model_new_for_vocab(
        fv, "{% if tools %}{% endif %}{{ '[TOOL_CALLS]' }}", "m", &error);
    CHECK(mm && mm->tool_format == SVC_TOOL_FORMAT_MISTRAL && svc_prompt_supports_tools(mm));
    if (mm) {
        g_autoptr(GArray) marks = svc_prompt_tool_marker_tokens(mm);
        CHECK(marks->len == 1 && g_array_index(marks, int32_t, 0) == 256 + 9);
    }
    g_clear_pointer(&mm, svc_prompt_model_free);
    g_clear_pointer(&pm, svc_prompt_model_free);
    moe_vocab_free(fv);
}

/* ---- replies (GLib layer) ---------------------------------------------- */

static void test_reply(const moe_vocab *qwen, const char *data)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *coder = read_template(data, "Qwen3-Coder.jinja");
    g_autoptr(svc_prompt_model) pm = svc_prompt_model_new_for_vocab(qwen, coder, "coder", &error);
    CHECK(pm && pm->tool_format == SVC_TOOL_FORMAT_QWEN3_CODER);
    if (!pm)
        return;
    g_autoptr(JsonArray) tools = parse_array(
        "[{\"type\":\"function\",\"function\":{\"name\":\"set\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"zip\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"},"
        "\"flag\":{\"type\":\"boolean\"}}}}}]");
    const char *out = "<tool_call>\n<function=set>\n<parameter=zip>\n02139\n</parameter>\n"
                      "<parameter=n>\n7\n</parameter>\n<parameter=flag>\ntrue\n</parameter>\n"
                      "</function>\n</tool_call>";
    svc_reply r;
    svc_prompt_parse_reply(pm, out, -1, tools, &r);
    CHECK(r.content == NULL && r.problem == NULL);
    CHECK(r.tool_calls && json_array_get_length(r.tool_calls) == 1);
    if (r.tool_calls) {
        JsonObject *c = json_array_get_object_element(r.tool_calls, 0);
        CHECK(g_str_has_prefix(json_object_get_string_member(c, "id"), "call_"));
        CHECK_EQ_STR(json_object_get_string_member(c, "type"), "function");
        JsonObject *f = json_object_get_object_member(c, "function");
        CHECK_EQ_STR(json_object_get_string_member(f, "name"), "set");
        /* "02139" is not JSON, so a string; 7 stays an integer, true a boolean */
        CHECK_EQ_STR(json_object_get_string_member(f, "arguments"),
                     "{\"zip\":\"02139\",\"n\":7,\"flag\":true}");
    }
    svc_reply_clear(&r);
    /* a "string" parameter that reads like a number stays a string */
    const char *out2 = "<tool_call>\n<function=set>\n<parameter=zip>\n12345\n</parameter>\n"
                       "</function>\n</tool_call>";
    svc_prompt_parse_reply(pm, out2, -1, tools, &r);
    if (r.tool_calls) {
        JsonObject *f = json_object_get_object_member(
            json_array_get_object_element(r.tool_calls, 0), "function");
        CHECK_EQ_STR(json_object_get_string_member(f, "arguments"), "{\"zip\":\"12345\"}");
    }
    CHECK(r.tool_calls != NULL);
    svc_reply_clear(&r);
    /* malformed: content, with a problem to log */
    svc_prompt_parse_reply(pm, "<tool_call>\n<function=set>\n", -1, tools, &r);
    CHECK(r.tool_calls == NULL && r.content && r.problem);
    CHECK_EQ_STR(r.content, "<tool_call>\n<function=set>\n");
    svc_reply_clear(&r);
    /* plain text: content, even when empty */
    svc_prompt_parse_reply(pm, "", 0, NULL, &r);
    CHECK(r.content && r.content[0] == 0 && !r.tool_calls);
    svc_reply_clear(&r);
    /* streaming through the GLib finish */
    svc_tool_stream *s = svc_tool_stream_new(pm->tool_format);
    size_t n = 0;
    const char *o = svc_tool_stream_feed(s, "Checking. <tool_", 16, &n);
    CHECK(n == 10 && memcmp(o, "Checking. ", 10) == 0);
    svc_tool_stream_feed(s, out + 6, strlen(out) - 6, &n);
    CHECK(n == 0 && svc_tool_stream_in_call(s));
    svc_prompt_finish_stream(s, tools, &r);
    svc_tool_stream_free(s);
    CHECK(r.content == NULL && r.tool_calls && json_array_get_length(r.tool_calls) == 1);
    svc_reply_clear(&r);

    /* the Qwen vocabulary writes <tool_call> as a plain added token: no
     * control tokens to render; Mistral-style markers would be listed */
    g_autoptr(GArray) marks = svc_prompt_tool_marker_tokens(pm);
    CHECK(marks->len == 0 || moe_vocab_token_type(qwen, g_array_index(marks, int32_t, 0)) ==
                                 MOE_TOKEN_CONTROL);
}

/* ---- JSON mode ----------------------------------------------------------- */

typedef struct json_run {
    GString *text;
    int64_t n_tokens;
    bool complete;
} json_run;

/* Generates with the constraint on the demo model: prompt, then decode up
 * to `budget` tokens, sampling with `seed` (0: greedy). */
static json_run run_json_mode(const moe_model *model, svc_prompt_model *pm, int64_t budget,
                              uint64_t seed)
{
    json_run r = {g_string_new(NULL), 0, false};
    moe_err err = {{0}};
    moe_context_params cp = moe_context_default_params();
    cp.n_ctx = 1024;
    cp.n_threads = 2;
    moe_context *ctx = NULL;
    if (moe_context_new(model, &cp, &ctx, &err) != MOE_OK) {
        CHECK_MSG(false, "context: %s", err.msg);
        return r;
    }
    int32_t n_vocab = moe_model_n_vocab(model);
    moe_sampler_params sp = moe_sampler_params_default();
    sp.temperature = seed ? 1.0f : 0.0f;
    sp.seed = seed;
    moe_sampler *smp = NULL;
    CHECK(moe_sampler_new(n_vocab, &sp, &smp, &err) == MOE_OK);
    svc_gen_constraint c;
    g_autoptr(GError) error = NULL;
    CHECK(svc_prompt_json_constraint(pm, budget, &c, &error));
    g_autoptr(JsonArray) msgs = parse_array(
        "[{\"role\":\"user\",\"content\":\"Reply with a JSON object.\"}]");
    GArray *prompt = NULL;
    CHECK(svc_prompt_chat(pm, msgs, NULL, NULL, &prompt, NULL, &error));
    moe_batch *b = moe_batch_new(512);
    for (guint i = 0; prompt && i < prompt->len; i++)
        moe_batch_add(b, g_array_index(prompt, int32_t, i), (int32_t)i, 0, i + 1 == prompt->len);
    int32_t pos = prompt ? (int32_t)prompt->len : 0;
    float *logits = g_new(float, n_vocab);
    moe_detok *dt = moe_detok_new(pm->vocab, false);
    bool ok = moe_decode(ctx, b, &err) == MOE_OK;
    while (ok && r.n_tokens < budget) {
        memcpy(logits, moe_get_logits(ctx, b->n_tokens - 1), n_vocab * sizeof *logits);
        c.mask(c.user, logits, n_vocab);
        int32_t tok = moe_sampler_sample(smp, logits, NULL, 0, &err);
        CHECK_MSG(tok >= 0, "no token left: %s", err.msg);
        if (tok < 0)
            break;
        c.accept(c.user, tok);
        r.n_tokens++;
        if (moe_vocab_is_eog(pm->vocab, tok))
            break;
        char piece[512];
        int64_t k = moe_detok_push(dt, tok, piece, sizeof piece);
        if (k > 0)
            g_string_append_len(r.text, piece, k);
        if (c.complete(c.user)) {
            r.complete = true;
            break;
        }
        moe_batch_clear(b);
        moe_batch_add(b, tok, pos++, 0, true);
        ok = moe_decode(ctx, b, &err) == MOE_OK;
        CHECK_MSG(ok, "decode: %s", err.msg);
    }
    char piece[64];
    int64_t k = moe_detok_flush(dt, piece, sizeof piece);
    if (k > 0)
        g_string_append_len(r.text, piece, k);
    moe_detok_free(dt);
    g_free(logits);
    moe_batch_free(b);
    if (prompt)
        g_array_unref(prompt);
    c.free_user(c.user);
    moe_sampler_free(smp);
    moe_context_free(ctx);
    return r;
}

static void test_json_mode(const moe_model *model)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(svc_prompt_model) pm = svc_prompt_model_new(model, &error);
    if (!pm)
        return;
    static const struct {
        int64_t budget;
        uint64_t seed;
    } runs[] = {{48, 0}, {64, 1}, {64, 2}, {96, 3}, {24, 4}, {12, 5}};
    for (size_t i = 0; i < G_N_ELEMENTS(runs); i++) {
        json_run r = run_json_mode(model, pm, runs[i].budget, runs[i].seed);
        CHECK_MSG(r.complete, "run %zu: not complete after %" PRId64 " tokens: %s", i, r.n_tokens,
                  r.text->str);
        CHECK(r.n_tokens <= runs[i].budget);
        g_autoptr(JsonParser) p = json_parser_new();
        g_autoptr(GError) pe = NULL;
        CHECK_MSG(json_parser_load_from_data(p, r.text->str, -1, &pe), "run %zu: %s: %s", i,
                  r.text->str, pe ? pe->message : "");
        CHECK(json_parser_get_root(p) && JSON_NODE_HOLDS_OBJECT(json_parser_get_root(p)));
        fprintf(stderr, "json mode run %zu (%" PRId64 " tokens): %s\n", i, r.n_tokens, r.text->str);
        g_string_free(r.text, TRUE);
    }
}

/* The mask's cost on a 151k vocabulary, in a structural state and inside a
 * string (printed; checked only against a generous bound). */
static void test_json_mask_cost(const moe_vocab *qwen)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(svc_prompt_model) pm = svc_prompt_model_new_for_vocab(qwen, NULL, "qwen", &error);
    int32_t n_vocab = moe_vocab_n_tokens(qwen);
    float *logits = g_new(float, n_vocab);
    static const char *const states[] = {"", "{\"key\": \"some text", "{\"a\": [1, 2, {\"b\": "};
    for (size_t s = 0; s < G_N_ELEMENTS(states); s++) {
        svc_gen_constraint c;
        CHECK(svc_prompt_json_constraint(pm, 4096, &c, &error));
        /* bring the guard to the state by accepting single-byte tokens */
        for (const char *p = states[s]; *p; p++) {
            int32_t id;
            size_t n = 0;
            moe_err err = {{0}};
            moe_tokenize(qwen, p, 1, 0, &id, 1, &n, &err);
            c.accept(c.user, id);
        }
        /* CPU time, not wall time: test machines run many jobs at once */
        int reps = 20;
        double us = 0;
        size_t alive = 0;
        for (int r = 0; r < reps; r++) {
            for (int32_t i = 0; i < n_vocab; i++)
                logits[i] = (float)(i % 7);
            clock_t t0 = clock();
            c.mask(c.user, logits, n_vocab);
            us += (double)(clock() - t0) * 1e6 / CLOCKS_PER_SEC / reps;
        }
        for (int32_t i = 0; i < n_vocab; i++)
            alive += logits[i] != -INFINITY;
        fprintf(stderr, "json mask after '%s': %.0f us per step (%.1f ns/token), %zu allowed\n",
                states[s], us, us * 1000 / n_vocab, alive);
        CHECK(alive > 0);
        CHECK_MSG(us < 200000, "mask too slow: %.0f us", us);
        c.free_user(c.user);
    }
    g_free(logits);
}

int main(int argc, char **argv)
{
    const char *data = getenv("MOE_SHARED_DATA");
    CHECK_MSG(data != NULL, "MOE_SHARED_DATA is not set");
    CHECK_MSG(argc > 1, "usage: test-prompt DEMO-MODEL.gguf");
    if (!data || argc < 2)
        TEST_DONE();
    g_autofree char *qpath = g_build_filename(data, "vocab", "ggml-vocab-qwen2.gguf", NULL);
    moe_vocab *qwen = tt_open_vocab(qpath);
    CHECK_MSG(qwen != NULL, "cannot open %s", qpath);
    moe_model *model = NULL;
    moe_err err = {{0}};
    CHECK_MSG(moe_model_load(argv[1], NULL, &model, &err) == MOE_OK, "%s", err.msg);
    if (model)
        test_chat_demo(model);
    if (qwen) {
        test_chat_real(data, qwen);
        test_reply(qwen, data);
        test_json_mask_cost(qwen);
        if (model)
            test_fim(qwen, model);
    }
    if (model)
        test_json_mode(model);
    moe_model_free(model);
    moe_vocab_free(qwen);
    TEST_DONE();
}

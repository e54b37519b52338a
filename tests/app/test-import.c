/*
 * test-import.c — the Hugging Face importer's mapping logic on its own,
 * without safetensors: Mixtral's Q/K row permutation against llama.cpp's
 * reshape/swapaxes definition, the tokenizer.ggml.pre detection rule on
 * each known pre-tokenizer (and a refusal naming the unknown one), the
 * control-token heuristic, config.json checks with messages naming the
 * key, tokenizer.json vocabularies in both merges forms, a corrupt
 * tokenizer.model, and the planner's type choice for a Qwen3-30B-A3B-sized
 * model on machine files. The end-to-end comparison with converter output
 * is tests/scripts/test_import.py.
 */
#include "import-internal.h"
#include "test.h"

#include <glib/gstdio.h>

/* llama.cpp's converter: w.reshape(n_head, 2, d/2, ...).swapaxes(1, 2),
 * i.e. the output row (h, i, j) holds input row (h, j, i). */
static void test_permutation(void)
{
    const gint64 n_rows = 24, heads[] = { 1, 2, 3 };
    for (size_t k = 0; k < G_N_ELEMENTS(heads); k++) {
        const gint64 H = heads[k], d = n_rows / H;
        gboolean seen[24] = { 0 };
        for (gint64 h = 0; h < H; h++)
            for (gint64 i = 0; i < d / 2; i++)
                for (gint64 j = 0; j < 2; j++) {
                    gint64 out = h * d + i * 2 + j, in = h * d + j * (d / 2) + i;
                    CHECK_EQ_INT(hf_plan_permuted_source_row(out, n_rows, H), in);
                    seen[in] = TRUE;
                }
        for (int r = 0; r < 24; r++)
            CHECK(seen[r]);
    }
    /* Two heads of 4: rows 0 2 1 3 | 4 6 5 7 */
    const gint64 want[] = { 0, 2, 1, 3, 4, 6, 5, 7 };
    for (gint64 r = 0; r < 8; r++)
        CHECK_EQ_INT(hf_plan_permuted_source_row(r, 8, 2), want[r]);
}

static JsonObject *parse(JsonParser **p, const char *text)
{
    *p = json_parser_new();
    GError *e = NULL;
    CHECK_MSG(json_parser_load_from_data(*p, text, -1, &e), "%s", e ? e->message : "");
    g_clear_error(&e);
    return json_node_get_object(json_parser_get_root(*p));
}

static void check_pre(const char *pre_tokenizer_json, const char *want)
{
    g_autofree char *text = g_strdup_printf("{\"pre_tokenizer\": %s}", pre_tokenizer_json);
    JsonParser *p = NULL;
    JsonObject *o = parse(&p, text);
    GError *e = NULL;
    g_autofree char *got = hf_vocab_detect_pre(o, &e);
    if (want) {
        CHECK_MSG(got && strcmp(got, want) == 0, "want %s, got %s (%s)", want,
                  got ? got : "NULL", e ? e->message : "");
    } else {
        CHECK(!got && e && strstr(e->message, "not recognised"));
    }
    g_clear_error(&e);
    g_object_unref(p);
}

#define SPLIT(re) "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"" re "\"},\"behavior\":\"Isolated\"}"
#define BYTELEVEL(b) "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":" b "}"
#define SEQ(...) "{\"type\":\"Sequence\",\"pretokenizers\":[" __VA_ARGS__ "]}"

static void test_pre_detection(void)
{
    /* As the regexes appear in tokenizer.json (JSON-escaped backslashes). */
    const char *qwen2 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|"
                        "\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|"
                        "\\\\s+(?!\\\\S)|\\\\s+";
    const char *llama3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|"
                         "\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|"
                         "\\\\s+(?!\\\\S)|\\\\s+";
    g_autofree char *q = g_strdup_printf(SEQ(SPLIT("%s") "," BYTELEVEL("false")), qwen2);
    g_autofree char *l = g_strdup_printf(SEQ(SPLIT("%s") "," BYTELEVEL("false")), llama3);
    check_pre(q, "qwen2");
    check_pre(l, "llama-bpe");
    check_pre(BYTELEVEL("true"), "gpt-2");
    check_pre("{\"type\":\"ByteLevel\",\"add_prefix_space\":false}", "gpt-2");
    check_pre(SEQ(SPLIT("\\\\p{N}{1,3}") "," SPLIT("[一-龥぀-ゟ゠-ヿ]+") ","
                  SPLIT("[!\\\"#$%&'()*+,\\\\-./:;<=>?@\\\\[\\\\\\\\\\\\]^_`{|}~][A-Za-z]+|"
                        "[^\\r\\n\\\\p{L}\\\\p{P}\\\\p{S}]?[\\\\p{L}\\\\p{M}]+| ?[\\\\p{P}\\\\p{S}]+"
                        "[\\r\\n]*|\\\\s*[\\r\\n]+|\\\\s+(?!\\\\S)|\\\\s+") ","
                  BYTELEVEL("false")),
              "deepseek-v3");
    check_pre(SEQ(SPLIT("[\\r\\n]") "," SPLIT("\\\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯ]+") ","
                  SPLIT("\\\\s?[!-/:-~！-／：-～‘-‟　-。]+") "," SPLIT("\\\\s+$") ","
                  SPLIT("[一-龥ࠀ-一가-퟿]+") "," SPLIT("\\\\p{N}+") "," BYTELEVEL("false")),
              "deepseek-llm");
    /* Unknown: a GPT-2 style split regex spelled out, or nothing at all. */
    check_pre(SEQ(SPLIT("'s|'t| ?\\\\p{L}+") "," BYTELEVEL("false")), NULL);
    check_pre("null", NULL);
    check_pre(BYTELEVEL("false"), NULL);
}

static void test_looks_special(void)
{
    CHECK(hf_token_looks_special("<|im_start|>"));
    CHECK(hf_token_looks_special("<pad>"));
    CHECK(hf_token_looks_special("<unused12>"));
    CHECK(hf_token_looks_special("<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence"
                                 "\xef\xbd\x9c>"));
    CHECK(!hf_token_looks_special("<think>"));
    CHECK(!hf_token_looks_special("<|"));
    CHECK(!hf_token_looks_special("hello"));
    g_autofree char *s = hf_metaspace_to_spaces("\xe2\x96\x81" "a\xe2\x96\x81\xe2\x96\x81" "b");
    CHECK_EQ_STR(s, " a  b");
}

static char *write_dir(const char *const *files)
{
    char *dir = g_dir_make_tmp("test-import-XXXXXX", NULL);
    for (size_t i = 0; files[i]; i += 2) {
        g_autofree char *path = g_build_filename(dir, files[i], NULL);
        CHECK(g_file_set_contents(path, files[i + 1], -1, NULL));
    }
    return dir;
}

static void remove_dir(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        g_remove(path);
    }
    if (d)
        g_dir_close(d);
    g_rmdir(dir);
}

/* config.json faults name the key or the architecture. */
static void test_config(void)
{
    static const struct {
        const char *json, *want;
    } cases[] = {
        { "{\"architectures\": [\"GPT2LMHeadModel\"]}", "\"GPT2LMHeadModel\" is not supported" },
        { "{}", "architectures" },
        { "{\"architectures\": [\"OlmoeForCausalLM\"], \"num_hidden_layers\": 2}",
          "\"hidden_size\" is missing" },
        { "{\"architectures\": [\"OlmoeForCausalLM\"], \"num_hidden_layers\": \"2\"}",
          "\"num_hidden_layers\" is not an integer" },
        { "{\"architectures\": [\"Qwen2MoeForCausalLM\"], \"num_hidden_layers\": 2, "
          "\"hidden_size\": 64, \"num_attention_heads\": 4, \"vocab_size\": 10, "
          "\"num_experts_per_tok\": 2}", "\"num_local_experts\" or \"num_experts\" is missing" },
        { "[1]", "not a JSON object" },
        { "{\"architectures\": [\"OlmoeForCausalLM\"], \"num_hidden_layers\": 2, "
          "\"hidden_size\": 64, \"num_attention_heads\": 4, \"num_key_value_heads\": 3, "
          "\"vocab_size\": 10, \"num_experts\": 4, \"num_experts_per_tok\": 2, "
          "\"intermediate_size\": 32}", "not a multiple" },
        { "{\"architectures\": [\"OlmoeForCausalLM\"], \"num_hidden_layers\": 2, "
          "\"hidden_size\": 64, \"num_attention_heads\": 4, \"vocab_size\": 2000000000, "
          "\"num_experts\": 4, \"num_experts_per_tok\": 2, \"intermediate_size\": 32}",
          "beyond what the importer takes" },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        const char *files[] = { "config.json", cases[i].json, NULL };
        g_autofree char *dir = write_dir(files);
        GError *e = NULL;
        hf_config *c = hf_config_load(dir, &e);
        CHECK_MSG(!c && e && strstr(e->message, cases[i].want), "case %zu: %s", i,
                  e ? e->message : "loaded");
        g_clear_error(&e);
        hf_config_free(c);
        remove_dir(dir);
    }
}

static const char k_olmoe_config[] =
    "{\"architectures\": [\"OlmoeForCausalLM\"], \"num_hidden_layers\": 2, \"hidden_size\": 64,"
    " \"num_attention_heads\": 4, \"vocab_size\": 8, \"num_experts\": 4,"
    " \"num_experts_per_tok\": 2, \"intermediate_size\": 32, \"eos_token_id\": 5}";

/* A byte-level BPE vocabulary with pair-form merges (one part holding a
 * space), an added control token and an added user token. */
static void test_gpt2_vocab(void)
{
    const char *tokenizer =
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"c d\": 3},"
        " \"merges\": [[\"a\", \"b\"], [\"c\", \" d\"]]},"
        " \"added_tokens\": [{\"id\": 5, \"content\": \"<|end|>\", \"special\": false},"
        "  {\"id\": 6, \"content\": \"\xe2\x96\x81x\", \"special\": false}],"
        " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}";
    const char *files[] = { "config.json", k_olmoe_config, "tokenizer.json", tokenizer, NULL };
    g_autofree char *dir = write_dir(files);
    GError *e = NULL;
    g_autoptr(hf_config) c = hf_config_load(dir, &e);
    JsonParser *p = NULL;
    JsonObject *tj = hf_json_load(dir, "tokenizer.json", &p, &e);
    hf_vocab v;
    CHECK_MSG(c && tj && hf_vocab_load(dir, c, tj, NULL, &v, &e), "%s", e ? e->message : "");
    if (!e) {
        CHECK_EQ_STR(v.model, "gpt2");
        CHECK_EQ_STR(v.pre, "gpt-2");
        CHECK_EQ_INT(v.n_tokens, 8);
        const gint32 types[8] = { 1, 1, 1, 1, 5, 3, 4, 5 };
        for (int i = 0; i < 8; i++)
            CHECK_EQ_INT(v.types[i], types[i]);
        CHECK_EQ_STR(v.tokens[4], "[PAD4]");
        CHECK_EQ_STR(v.tokens[6], " x");
        CHECK_EQ_INT(v.merges->len, 2);
        CHECK_EQ_STR(g_ptr_array_index(v.merges, 0), "a b");
        CHECK_EQ_STR(g_ptr_array_index(v.merges, 1), "c \xc4\xa0" "d");
        hf_vocab_clear(&v);
    }
    g_clear_error(&e);
    g_clear_object(&p);
    remove_dir(dir);
}

/* A token id beyond vocab_size and a truncated tokenizer.model. */
static void test_vocab_faults(void)
{
    const char *tokenizer = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 9}},"
                            " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}";
    const char *files[] = { "config.json", k_olmoe_config, "tokenizer.json", tokenizer, NULL };
    g_autofree char *dir = write_dir(files);
    GError *e = NULL;
    g_autoptr(hf_config) c = hf_config_load(dir, &e);
    JsonParser *p = NULL;
    JsonObject *tj = hf_json_load(dir, "tokenizer.json", &p, &e);
    hf_vocab v;
    CHECK(c && tj && !hf_vocab_load(dir, c, tj, NULL, &v, &e));
    CHECK_MSG(e && strstr(e->message, "\"a\" has id 9"), "%s", e ? e->message : "");
    g_clear_error(&e);
    g_clear_object(&p);
    remove_dir(dir);

    /* piece "ab" (score 0.5), then a piece whose length runs past the end */
    static const char spm[] = "\x0a\x09\x0a\x02" "ab\x15\x00\x00\x00\x3f"
                              "\x0a\x09\x0a\x07" "cd";
    g_autofree char *sdir = g_dir_make_tmp("test-import-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(sdir, "tokenizer.model", NULL);
    CHECK(g_file_set_contents(path, spm, sizeof spm - 1, NULL));
    CHECK(!hf_spm_load(sdir, 0, NULL, &v, &e));
    CHECK_MSG(e && strstr(e->message, "malformed SentencePiece model near byte"), "%s",
              e ? e->message : "");
    g_clear_error(&e);
    CHECK(g_file_set_contents(path, spm, 11, NULL)); /* just the first piece */
    CHECK_MSG(hf_spm_load(sdir, 3, NULL, &v, &e), "%s", e ? e->message : "");
    if (!e) {
        CHECK_EQ_INT(v.n_tokens, 3);
        CHECK_EQ_STR(v.tokens[0], "ab");
        CHECK(v.scores[0] == 0.5f && v.types[0] == MOE_TOKEN_NORMAL);
        CHECK_EQ_STR(v.tokens[2], "[PAD2]");
        CHECK(v.scores[2] == -10000.0f && v.types[2] == MOE_TOKEN_UNUSED);
        hf_vocab_clear(&v);
    }
    g_clear_error(&e);
    remove_dir(sdir);
}

/* Qwen3-30B-A3B's shape: Q4_K_M on one 24 GB GPU, Q8_0 on a 64 GB
 * CPU-only machine (BF16's 61 GB does not fit under its ceiling). */
static void test_choose_type(void)
{
    moe_plan_model m;
    memset(&m, 0, sizeof m);
    g_strlcpy(m.arch, "qwen3moe", sizeof m.arch);
    m.n_layer = 48;
    m.n_embd = 2048;
    m.n_vocab = 151936;
    m.n_head = 32;
    m.n_head_kv = 4;
    m.head_dim_k = m.head_dim_v = 128;
    m.n_expert = 128;
    m.n_expert_used = 8;
    m.n_ff_expert = 768;
    m.n_ctx_train = 40960;
    m.group_params[MOE_GROUP_EMBD_OUTPUT] = 2 * 151936ull * 2048;
    m.group_params[MOE_GROUP_ATTENTION] = 48ull * (2048 * 4096 * 2 + 2048 * 512 * 2);
    m.group_params[MOE_GROUP_ROUTER] = 48ull * 128 * 2048;
    m.group_params[MOE_GROUP_ROUTED_EXPERTS] = 48ull * 128 * 3 * 768 * 2048;
    static const struct {
        const char *machine;
        moe_type    want;
    } cases[] = { { "tests/data/machines/rtx4090-1x.json", MOE_TYPE_Q4_K },
                  { "tests/data/machines/cpu-64g.json", MOE_TYPE_Q8_0 },
                  { "tests/data/machines/a100-80g-4x.json", MOE_TYPE_BF16 } };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        char path[1024];
        moe_machine mach;
        moe_err err = { { 0 } };
        CHECK_MSG(moe_machine_load(test_src_path(path, sizeof path, cases[i].machine), &mach,
                                   &err) == MOE_OK, "%s", err.msg);
        g_autofree char *reason = NULL;
        moe_type t = moedesk_import_choose_type(&m, &mach, &reason);
        CHECK_MSG(t == cases[i].want, "%s: %s (%s)", cases[i].machine, moe_type_name(t),
                  reason ? reason : "");
        CHECK(reason && *reason);
    }
}

int main(void)
{
    test_permutation();
    test_pre_detection();
    test_looks_special();
    test_config();
    test_gpt2_vocab();
    test_vocab_faults();
    test_choose_type();
    TEST_DONE();
}

/*
 * hf-config.c — reads a Hugging Face config.json and writes the GGUF
 * hyperparameter keys llama.cpp's convert_hf_to_gguf.py writes for it.
 *
 * The rules, per key (all <arch>.* keys; first config name found wins):
 *   block_count                    num_hidden_layers
 *   context_length                 max_position_embeddings (if present)
 *   embedding_length               hidden_size
 *   feed_forward_length            prefix_dense_intermediate_size,
 *                                  dense_intermediate_size, intermediate_size
 *   attention.head_count           num_attention_heads
 *   attention.head_count_kv        num_key_value_heads (if present)
 *   rope.scaling.*                 rope_parameters / rope_scaling of type
 *                                  "linear" or "yarn" with a factor
 *   rope.freq_base                 rope_theta (rope_parameters' own first)
 *   attention.layer_norm_rms_epsilon  rms_norm_eps; olmoe: always 1e-5
 *   expert_count                   num_local_experts, num_experts
 *   expert_used_count              num_experts_per_tok
 *   expert_gating_func             scoring_func (softmax 1, sigmoid 2)
 *   attention.key_length, .value_length  head_dim (if present)
 *   qwen2moe/qwen3moe: expert_feed_forward_length = moe_intermediate_size,
 *                      expert_shared_feed_forward_length =
 *                      shared_expert_intermediate_size
 *   llama: vocab_size, rope.dimension_count = head_dim or hidden/heads
 * Integers are uint32 and reals float32, as gguf-py writes them.
 *
 * It also holds the small JSON helpers the other import files share.
 */
#include "import-internal.h"

#include <math.h>
#include <string.h>

/* ---- JSON helpers ---- */

JsonObject *hf_json_load(const char *dir, const char *file, JsonParser **parser,
                         GError **error)
{
    g_autofree char *path = g_build_filename(dir, file, NULL);
    *parser = NULL;
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    "%s: missing", path);
        return NULL;
    }
    g_autoptr(JsonParser) p = json_parser_new_immutable();
    g_autoptr(GError) jerr = NULL;
    if (!json_parser_load_from_mapped_file(p, path, &jerr)) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    "%s: not valid JSON: %s", path, jerr->message);
        return NULL;
    }
    JsonNode *root = json_parser_get_root(p);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    "%s: the top level is not a JSON object", path);
        return NULL;
    }
    *parser = g_steal_pointer(&p);
    return json_node_get_object(root);
}

JsonNode *hf_json_member(JsonObject *obj, const char *key)
{
    JsonNode *n = obj ? json_object_get_member(obj, key) : NULL;
    return n && !JSON_NODE_HOLDS_NULL(n) ? n : NULL;
}

const char *hf_json_string(JsonObject *obj, const char *key)
{
    JsonNode *n = hf_json_member(obj, key);
    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
               ? json_node_get_string(n) : NULL;
}

gboolean hf_json_int(JsonObject *obj, const char *key, const char *file, gint64 *out,
                     GError **error)
{
    JsonNode *n = hf_json_member(obj, key);
    if (!n)
        return FALSE;
    if (JSON_NODE_HOLDS_VALUE(n)) {
        GType t = json_node_get_value_type(n);
        if (t == G_TYPE_INT64) {
            *out = json_node_get_int(n);
            return TRUE;
        }
        if (t == G_TYPE_DOUBLE) { /* "32.0" */
            double d = json_node_get_double(n);
            if (d == floor(d) && fabs(d) < 9e15) {
                *out = (gint64)d;
                return TRUE;
            }
        }
    }
    g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                "%s: \"%s\" is not an integer", file, key);
    return FALSE;
}

gboolean hf_json_double(JsonObject *obj, const char *key, double *out)
{
    JsonNode *n = hf_json_member(obj, key);
    if (!n || !JSON_NODE_HOLDS_VALUE(n))
        return FALSE;
    GType t = json_node_get_value_type(n);
    if (t != G_TYPE_INT64 && t != G_TYPE_DOUBLE)
        return FALSE;
    *out = json_node_get_double(n);
    return TRUE;
}

/* ---- config.json ---- */

static const struct {
    const char *hf_name;
    const char *gguf_arch;
    hf_arch     arch;
} k_arches[] = {
    { "Qwen3MoeForCausalLM", "qwen3moe", HF_ARCH_QWEN3MOE },
    { "Qwen2MoeForCausalLM", "qwen2moe", HF_ARCH_QWEN2MOE },
    { "MixtralForCausalLM", "llama", HF_ARCH_MIXTRAL },
    { "OlmoeForCausalLM", "olmoe", HF_ARCH_OLMOE },
};

#define CONFIG_FILE "config.json"

/* The first of `keys` (NULL-terminated) that is present; FALSE if none (or
 * on a type error, which is then set). */
static gboolean find_int(JsonObject *o, const char *const *keys, gint64 *out,
                         const char **found, GError **error)
{
    for (; *keys; keys++) {
        if (hf_json_int(o, *keys, CONFIG_FILE, out, error)) {
            if (found)
                *found = *keys;
            return TRUE;
        }
        if (error && *error)
            return FALSE;
    }
    return FALSE;
}

/* A required positive integer, from the first of `keys` present. */
static gboolean need_positive(JsonObject *o, const char *const *keys, gint64 *out,
                              GError **error)
{
    const char *found = NULL;
    GError *err = NULL;
    if (!find_int(o, keys, out, &found, &err)) {
        if (err) {
            g_propagate_error(error, err);
        } else {
            g_autofree char *names = g_strjoinv("\" or \"", (char **)keys);
            g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                        CONFIG_FILE ": \"%s\" is missing", names);
        }
        return FALSE;
    }
    if (*out <= 0 || *out > G_MAXINT32) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    CONFIG_FILE ": \"%s\" is %" G_GINT64_FORMAT ", not a positive 32-bit"
                    " integer", found, *out);
        return FALSE;
    }
    return TRUE;
}

#define KEYS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static gboolean config_read_arch(hf_config *c, GError **error)
{
    JsonNode *archs = hf_json_member(c->root, "architectures");
    const char *name = NULL;
    if (archs && JSON_NODE_HOLDS_ARRAY(archs) &&
        json_array_get_length(json_node_get_array(archs)) > 0) {
        JsonNode *first = json_array_get_element(json_node_get_array(archs), 0);
        if (JSON_NODE_HOLDS_VALUE(first) && json_node_get_value_type(first) == G_TYPE_STRING)
            name = json_node_get_string(first);
    }
    if (!name) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    CONFIG_FILE ": no \"architectures\" list naming the model class");
        return FALSE;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(k_arches); i++) {
        if (strcmp(name, k_arches[i].hf_name) == 0) {
            c->arch = k_arches[i].arch;
            c->hf_name = k_arches[i].hf_name;
            c->gguf_arch = k_arches[i].gguf_arch;
            return TRUE;
        }
    }
    g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_UNSUPPORTED,
                CONFIG_FILE ": architecture \"%s\" is not supported (supported: "
                "Qwen3MoeForCausalLM, Qwen2MoeForCausalLM, MixtralForCausalLM, "
                "OlmoeForCausalLM)", name);
    return FALSE;
}

static gboolean config_read_shapes(hf_config *c, GError **error)
{
    JsonObject *o = c->root;
    if (!need_positive(o, KEYS("num_hidden_layers"), &c->n_layer, error) ||
        !need_positive(o, KEYS("hidden_size"), &c->n_embd, error) ||
        !need_positive(o, KEYS("num_attention_heads"), &c->n_head, error) ||
        !need_positive(o, KEYS("vocab_size"), &c->n_vocab, error) ||
        !need_positive(o, KEYS("num_local_experts", "num_experts"), &c->n_expert, error) ||
        !need_positive(o, KEYS("num_experts_per_tok"), &c->n_expert_used, error))
        return FALSE;
    if (hf_json_member(o, "num_key_value_heads")) {
        if (!need_positive(o, KEYS("num_key_value_heads"), &c->n_head_kv, error))
            return FALSE;
    } else {
        c->n_head_kv = c->n_head;
    }
    if (hf_json_member(o, "head_dim")) {
        if (!need_positive(o, KEYS("head_dim"), &c->head_dim, error))
            return FALSE;
    } else {
        c->head_dim = c->n_embd / c->n_head;
    }
    if (c->arch == HF_ARCH_QWEN2MOE || c->arch == HF_ARCH_QWEN3MOE) {
        if (!need_positive(o, KEYS("moe_intermediate_size"), &c->n_ff_exp, error))
            return FALSE;
    } else if (!need_positive(o, KEYS("intermediate_size"), &c->n_ff_exp, error)) {
        return FALSE;
    }
    if (c->arch == HF_ARCH_QWEN2MOE &&
        !need_positive(o, KEYS("shared_expert_intermediate_size"), &c->n_ff_shexp, error))
        return FALSE;
    /* Far beyond any real model, but small enough that the plan and
     * vocabulary tables sized from these stay modest for a bad file. */
    if (c->n_layer > 4096 || c->n_expert > 4096 || c->n_layer * c->n_expert > (1 << 20) ||
        c->n_vocab > (1 << 24)) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_UNSUPPORTED,
                    CONFIG_FILE ": %" G_GINT64_FORMAT " layers, %" G_GINT64_FORMAT
                    " experts and a vocabulary of %" G_GINT64_FORMAT " are beyond what the"
                    " importer takes (4096 layers, 4096 experts, 2^20 expert matrices per"
                    " kind, 2^24 tokens)", c->n_layer, c->n_expert, c->n_vocab);
        return FALSE;
    }
    if (c->n_head % c->n_head_kv != 0 || c->n_head_kv > c->n_head) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    CONFIG_FILE ": num_attention_heads %" G_GINT64_FORMAT " is not a multiple"
                    " of num_key_value_heads %" G_GINT64_FORMAT, c->n_head, c->n_head_kv);
        return FALSE;
    }
    if (c->head_dim <= 0 || c->head_dim % 2 != 0) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    CONFIG_FILE ": head dimension %" G_GINT64_FORMAT " is not a positive even"
                    " number", c->head_dim);
        return FALSE;
    }
    if (c->n_expert_used > c->n_expert) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    CONFIG_FILE ": num_experts_per_tok %" G_GINT64_FORMAT " exceeds the %"
                    G_GINT64_FORMAT " experts", c->n_expert_used, c->n_expert);
        return FALSE;
    }
    JsonNode *tie = hf_json_member(o, "tie_word_embeddings");
    c->tie_embeddings = tie && JSON_NODE_HOLDS_VALUE(tie) &&
                        json_node_get_value_type(tie) == G_TYPE_BOOLEAN &&
                        json_node_get_boolean(tie);
    return TRUE;
}

hf_config *hf_config_load(const char *dir, GError **error)
{
    g_autoptr(hf_config) c = g_new0(hf_config, 1);
    c->root = hf_json_load(dir, CONFIG_FILE, &c->parser, error);
    if (!c->root || !config_read_arch(c, error) || !config_read_shapes(c, error))
        return NULL;
    return g_steal_pointer(&c);
}

void hf_config_free(hf_config *config)
{
    if (!config)
        return;
    g_clear_object(&config->parser);
    g_free(config);
}

/* ---- GGUF keys ---- */

typedef struct kv_ctx {
    moe_gguf_writer *w;
    const char      *arch;
    moe_status       st;
} kv_ctx;

static void put_u32(kv_ctx *k, const char *suffix, gint64 v)
{
    g_autofree char *key = g_strdup_printf("%s.%s", k->arch, suffix);
    if (k->st == MOE_OK)
        k->st = moe_gguf_writer_set_u32(k->w, key, (guint32)v);
}

static void put_f32(kv_ctx *k, const char *suffix, double v)
{
    g_autofree char *key = g_strdup_printf("%s.%s", k->arch, suffix);
    if (k->st == MOE_OK)
        k->st = moe_gguf_writer_set_f32(k->w, key, (float)v);
}

static void put_str(kv_ctx *k, const char *suffix, const char *v)
{
    g_autofree char *key = g_strdup_printf("%s.%s", k->arch, suffix);
    if (k->st == MOE_OK)
        k->st = moe_gguf_writer_set_str(k->w, key, v);
}

/* Optional non-negative integer: written when present. */
static gboolean opt_u32(kv_ctx *k, JsonObject *o, const char *const *keys, const char *suffix,
                        GError **error)
{
    gint64 v = 0;
    const char *found = NULL;
    GError *err = NULL;
    if (find_int(o, keys, &v, &found, &err)) {
        if (v < 0 || v > G_MAXUINT32) {
            g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                        CONFIG_FILE ": \"%s\" is %" G_GINT64_FORMAT ", out of range", found, v);
            return FALSE;
        }
        put_u32(k, suffix, v);
    } else if (err) {
        g_propagate_error(error, err);
        return FALSE;
    }
    return TRUE;
}

/* rope_parameters (transformers 5) or rope_scaling: linear and YaRN
 * scaling as llama.cpp reads them; other kinds are refused, since the
 * engine would run them wrong. */
static gboolean write_rope(kv_ctx *k, const hf_config *c, GError **error)
{
    JsonNode *rn = hf_json_member(c->root, "rope_parameters");
    if (!rn)
        rn = hf_json_member(c->root, "rope_scaling");
    JsonObject *rp = rn && JSON_NODE_HOLDS_OBJECT(rn) ? json_node_get_object(rn) : NULL;
    const char *type = hf_json_string(rp, "rope_type");
    if (!type)
        type = hf_json_string(rp, "type");
    double factor = 0.0;
    gboolean has_factor = hf_json_double(rp, "factor", &factor);
    if (type && strcmp(type, "linear") == 0 && has_factor) {
        put_str(k, "rope.scaling.type", "linear");
        put_f32(k, "rope.scaling.factor", factor);
    } else if (type && strcmp(type, "yarn") == 0 && has_factor) {
        gint64 orig = 0;
        if (!hf_json_int(rp, "original_max_position_embeddings", CONFIG_FILE, &orig, error)) {
            if (error && !*error)
                g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                            CONFIG_FILE ": YaRN rope scaling without "
                            "\"original_max_position_embeddings\"");
            return FALSE;
        }
        double v;
        put_str(k, "rope.scaling.type", "yarn");
        put_f32(k, "rope.scaling.factor", factor);
        put_u32(k, "rope.scaling.original_context_length", orig);
        if (hf_json_double(rp, "extrapolation_factor", &v))
            put_f32(k, "rope.scaling.yarn_ext_factor", v);
        if (hf_json_double(rp, "attention_factor", &v) || hf_json_double(rp, "attn_factor", &v))
            put_f32(k, "rope.scaling.yarn_attn_factor", v);
        if (hf_json_double(rp, "beta_fast", &v))
            put_f32(k, "rope.scaling.yarn_beta_fast", v);
        if (hf_json_double(rp, "beta_slow", &v))
            put_f32(k, "rope.scaling.yarn_beta_slow", v);
    } else if (type && strcmp(type, "default") != 0 && strcmp(type, "linear") != 0 &&
               strcmp(type, "yarn") != 0) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_UNSUPPORTED,
                    CONFIG_FILE ": rope scaling type \"%s\" is not supported", type);
        return FALSE;
    }
    double theta;
    if (hf_json_double(rp, "rope_theta", &theta) || hf_json_double(c->root, "rope_theta", &theta))
        put_f32(k, "rope.freq_base", theta);
    return TRUE;
}

gboolean hf_config_write_kv(const hf_config *c, moe_gguf_writer *w, GError **error)
{
    kv_ctx k = { .w = w, .arch = c->gguf_arch, .st = MOE_OK };
    JsonObject *o = c->root;
    put_u32(&k, "block_count", c->n_layer);
    if (!opt_u32(&k, o, KEYS("max_position_embeddings"), "context_length", error))
        return FALSE;
    put_u32(&k, "embedding_length", c->n_embd);
    if (!opt_u32(&k, o, KEYS("prefix_dense_intermediate_size", "dense_intermediate_size",
                             "intermediate_size"), "feed_forward_length", error))
        return FALSE;
    put_u32(&k, "attention.head_count", c->n_head);
    if (hf_json_member(o, "num_key_value_heads"))
        put_u32(&k, "attention.head_count_kv", c->n_head_kv);
    if (!write_rope(&k, c, error))
        return FALSE;
    double eps;
    if (hf_json_double(o, "rms_norm_eps", &eps))
        put_f32(&k, "attention.layer_norm_rms_epsilon", eps);
    put_u32(&k, "expert_count", c->n_expert);
    put_u32(&k, "expert_used_count", c->n_expert_used);
    const char *score = hf_json_string(o, "scoring_func");
    if (score && strcmp(score, "softmax") == 0)
        put_u32(&k, "expert_gating_func", 1);
    else if (score && strcmp(score, "sigmoid") == 0)
        put_u32(&k, "expert_gating_func", 2);
    else if (score) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_UNSUPPORTED,
                    CONFIG_FILE ": scoring_func \"%s\" is not supported", score);
        return FALSE;
    }
    if (hf_json_member(o, "head_dim")) {
        put_u32(&k, "attention.key_length", c->head_dim);
        put_u32(&k, "attention.value_length", c->head_dim);
    }
    switch (c->arch) {
    case HF_ARCH_QWEN2MOE:
    case HF_ARCH_QWEN3MOE:
        put_u32(&k, "expert_feed_forward_length", c->n_ff_exp);
        if (!opt_u32(&k, o, KEYS("shared_expert_intermediate_size"),
                     "expert_shared_feed_forward_length", error))
            return FALSE;
        break;
    case HF_ARCH_MIXTRAL:
        put_u32(&k, "vocab_size", c->n_vocab);
        put_u32(&k, "rope.dimension_count", c->head_dim);
        break;
    case HF_ARCH_OLMOE:
        put_f32(&k, "attention.layer_norm_rms_epsilon", 1e-5);
        break;
    }
    if (k.st != MOE_OK) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_OUTPUT,
                    "writing the %s hyperparameters: %s", c->gguf_arch, moe_status_str(k.st));
        return FALSE;
    }
    return TRUE;
}

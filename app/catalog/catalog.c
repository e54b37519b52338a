/*
 * catalog.c — reads resources/catalog.json with json-glib and maps an
 * entry onto the planner's moe_plan_model (see catalog.h). Every field is
 * type-checked before use: a malformed catalog is an error naming the entry
 * and the field, never a GLib critical or a crash.
 */
#include "catalog.h"

#include <stdio.h>
#include <string.h>

#ifndef MOEDESK_CATALOG_INSTALLED
#define MOEDESK_CATALOG_INSTALLED "/usr/local/share/moedesk/catalog.json"
#endif
#ifndef MOEDESK_CATALOG_SOURCE
#define MOEDESK_CATALOG_SOURCE "resources/catalog.json"
#endif

struct cli_catalog {
    char       *path;
    JsonParser *parser;
    JsonArray  *models; /* borrowed from the parser's tree */
};

G_DEFINE_QUARK(moedesk-catalog-error-quark, cli_catalog_error)

const char *cli_catalog_default_path(void)
{
    const char *env = g_getenv("MOEDESK_CATALOG");
    if (env && env[0])
        return env;
    if (g_file_test(MOEDESK_CATALOG_INSTALLED, G_FILE_TEST_IS_REGULAR))
        return MOEDESK_CATALOG_INSTALLED;
    return MOEDESK_CATALOG_SOURCE;
}

const char *cli_catalog_path(const cli_catalog *c)
{
    return c ? c->path : NULL;
}

void cli_catalog_free(cli_catalog *c)
{
    if (!c)
        return;
    g_clear_object(&c->parser);
    g_free(c->path);
    g_free(c);
}

cli_catalog *cli_catalog_load(const char *path, GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) local = NULL;
    if (!json_parser_load_from_file(parser, path, &local)) {
        g_set_error(error, CLI_CATALOG_ERROR, 1, "%s: %s", path, local->message);
        return NULL;
    }
    JsonNode *root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, CLI_CATALOG_ERROR, 1, "%s: the catalog is not a JSON object", path);
        return NULL;
    }
    JsonObject *top = json_node_get_object(root);
    JsonNode *ver = json_object_get_member(top, "schema_version");
    if (!ver || !JSON_NODE_HOLDS_VALUE(ver) || json_node_get_value_type(ver) != G_TYPE_INT64 ||
        json_node_get_int(ver) != 1) {
        g_set_error(error, CLI_CATALOG_ERROR, 1, "%s: schema_version is not 1", path);
        return NULL;
    }
    JsonNode *models = json_object_get_member(top, "models");
    if (!models || !JSON_NODE_HOLDS_ARRAY(models)) {
        g_set_error(error, CLI_CATALOG_ERROR, 1, "%s: no \"models\" array", path);
        return NULL;
    }
    cli_catalog *c = g_new0(cli_catalog, 1);
    c->path = g_strdup(path);
    c->models = json_node_get_array(models);
    c->parser = g_steal_pointer(&parser);
    return c;
}

guint cli_catalog_n_entries(const cli_catalog *c)
{
    return c ? json_array_get_length(c->models) : 0;
}

JsonObject *cli_catalog_entry_at(const cli_catalog *c, guint i)
{
    if (!c || i >= json_array_get_length(c->models))
        return NULL;
    JsonNode *n = json_array_get_element(c->models, i);
    return JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
}

/* ---- Typed member access ----------------------------------------------- */

static const char *member_str(JsonObject *o, const char *key)
{
    JsonNode *n = o ? json_object_get_member(o, key) : NULL;
    if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING)
        return NULL;
    return json_node_get_string(n);
}

static JsonObject *member_obj(JsonObject *o, const char *key)
{
    JsonNode *n = o ? json_object_get_member(o, key) : NULL;
    return n && JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
}

static JsonArray *member_arr(JsonObject *o, const char *key)
{
    JsonNode *n = o ? json_object_get_member(o, key) : NULL;
    return n && JSON_NODE_HOLDS_ARRAY(n) ? json_node_get_array(n) : NULL;
}

/* An integer member: absent gives `def`; present but not a non-negative
 * integer is an error. */
static gboolean member_int(JsonObject *o, const char *key, gint64 def, gint64 *out,
                           const char *entry, GError **error)
{
    JsonNode *n = json_object_get_member(o, key);
    if (!n) {
        *out = def;
        return TRUE;
    }
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64 ||
        json_node_get_int(n) < 0) {
        g_set_error(error, CLI_CATALOG_ERROR, 1, "catalog entry %s: %s is not a non-negative integer",
                    entry, key);
        return FALSE;
    }
    *out = json_node_get_int(n);
    return TRUE;
}

static gboolean member_bool(JsonObject *o, const char *key)
{
    JsonNode *n = o ? json_object_get_member(o, key) : NULL;
    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_BOOLEAN &&
           json_node_get_boolean(n);
}

/* ---- Lookup ------------------------------------------------------------ */

static gboolean same(const char *a, const char *b)
{
    return a && b && g_ascii_strcasecmp(a, b) == 0;
}

static gboolean entry_has_repo(JsonObject *e, const char *name)
{
    JsonObject *src = member_obj(e, "sources");
    if (same(member_str(member_obj(src, "safetensors"), "repo"), name))
        return TRUE;
    JsonArray *gg = member_arr(src, "gguf");
    for (guint i = 0; gg && i < json_array_get_length(gg); i++) {
        JsonNode *r = json_array_get_element(gg, i);
        if (JSON_NODE_HOLDS_OBJECT(r) && same(member_str(json_node_get_object(r), "repo"), name))
            return TRUE;
    }
    return FALSE;
}

JsonObject *cli_catalog_find(cli_catalog *c, const char *name)
{
    if (!c || !name)
        return NULL;
    for (guint i = 0; i < json_array_get_length(c->models); i++) {
        JsonNode *n = json_array_get_element(c->models, i);
        if (!JSON_NODE_HOLDS_OBJECT(n))
            continue;
        JsonObject *e = json_node_get_object(n);
        if (same(member_str(e, "id"), name) || same(member_str(e, "name"), name) ||
            entry_has_repo(e, name))
            return e;
        JsonArray *aliases = member_arr(e, "aliases");
        for (guint k = 0; aliases && k < json_array_get_length(aliases); k++) {
            JsonNode *a = json_array_get_element(aliases, k);
            if (JSON_NODE_HOLDS_VALUE(a) && json_node_get_value_type(a) == G_TYPE_STRING &&
                same(json_node_get_string(a), name))
                return e;
        }
    }
    return NULL;
}

/* ---- Entry -> plan model ----------------------------------------------- */

static gboolean fill_hparams(JsonObject *e, const char *id, moe_plan_model *m, GError **error)
{
    JsonObject *hp = member_obj(e, "hparams");
    if (!hp) {
        g_set_error(error, CLI_CATALOG_ERROR, 1, "catalog entry %s: no hparams object", id);
        return FALSE;
    }
    gint64 v[20];
    static const char *const keys[] = {
        "n_layer", "n_embd", "n_vocab", "n_head", "n_head_kv", "head_dim", "kv_lora_rank",
        "qk_rope_head_dim", "n_expert", "n_expert_used", "n_ff_expert", "n_layer_dense_lead",
        "sliding_window", "n_layer_swa",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++)
        if (!member_int(hp, keys[i], 0, &v[i], id, error))
            return FALSE;
    m->n_layer = v[0];
    m->n_embd = v[1];
    m->n_vocab = v[2];
    m->n_head = v[3];
    m->n_head_kv = v[4];
    m->head_dim_k = m->head_dim_v = v[5];
    m->kv_lora_rank = v[6];
    m->qk_rope_head_dim = v[7];
    m->n_expert = v[8];
    m->n_expert_used = v[9];
    m->n_ff_expert = v[10];
    m->n_layer_moe = v[11] < v[0] ? v[0] - v[11] : 0;
    m->n_swa = v[12];
    m->n_layer_swa = v[13];
    /* hybrid linear attention: only the MLA layers keep a KV cache */
    JsonArray *mla = member_arr(hp, "mla_layers");
    JsonObject *lin = member_obj(hp, "linear_attn");
    if (mla && lin) {
        gint64 heads, dim;
        if (!member_int(lin, "n_head", 0, &heads, id, error) ||
            !member_int(lin, "head_dim", 0, &dim, id, error))
            return FALSE;
        m->n_layer_kv = json_array_get_length(mla);
        m->n_layer_linear = m->n_layer > m->n_layer_kv ? m->n_layer - m->n_layer_kv : 0;
        m->linear_n_head = heads;
        m->linear_head_dim = dim;
    }
    gint64 ctx;
    if (!member_int(e, "context_length", 0, &ctx, id, error))
        return FALSE;
    m->n_ctx_train = ctx;
    return TRUE;
}

static gboolean fill_groups(JsonObject *e, const char *id, moe_plan_model *m, GError **error)
{
    JsonObject *groups = member_obj(member_obj(e, "params"), "groups");
    if (!groups) {
        g_set_error(error, CLI_CATALOG_ERROR, 1, "catalog entry %s: no params.groups object", id);
        return FALSE;
    }
    for (int g = 0; g < MOE_GROUP_COUNT; g++) {
        gint64 n;
        const char *key = moe_tensor_group_name((moe_tensor_group)g);
        if (!member_int(groups, key, -1, &n, id, error))
            return FALSE;
        if (n < 0) {
            g_set_error(error, CLI_CATALOG_ERROR, 1, "catalog entry %s: params.groups.%s is missing",
                        id, key);
            return FALSE;
        }
        m->group_params[g] = (uint64_t)n;
    }
    return TRUE;
}

static gboolean has_quality(const moe_plan_model *m, int32_t quality)
{
    for (size_t i = 0; i < m->n_variants; i++)
        if (m->variants[i].quality == quality)
            return TRUE;
    return FALSE;
}

static gboolean has_name(const moe_plan_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_variants; i++)
        if (g_ascii_strcasecmp(m->variants[i].name, name) == 0)
            return TRUE;
    return FALSE;
}

static gboolean add_variant(moe_plan_model *m, const char *id, const char *name, const char *quant,
                            uint64_t bytes, gboolean estimated, GError **error)
{
    moe_err err = {{0}};
    if (moe_plan_model_add_variant(m, name, quant, bytes, estimated, &err) != MOE_OK) {
        g_set_error(error, CLI_CATALOG_ERROR, 1, "catalog entry %s: %s", id, err.msg);
        return FALSE;
    }
    return TRUE;
}

static gboolean fill_gguf(JsonObject *e, const char *id, moe_plan_model *m,
                          cli_variant_source *sources, GError **error)
{
    JsonArray *gg = member_arr(member_obj(e, "sources"), "gguf");
    for (guint i = 0; gg && i < json_array_get_length(gg); i++) {
        JsonNode *rn = json_array_get_element(gg, i);
        JsonObject *r = JSON_NODE_HOLDS_OBJECT(rn) ? json_node_get_object(rn) : NULL;
        const char *repo = member_str(r, "repo");
        JsonArray *quants = member_arr(r, "quants");
        if (!repo || !quants) {
            g_set_error(error, CLI_CATALOG_ERROR, 1,
                        "catalog entry %s: sources.gguf[%u] needs repo and quants", id, i);
            return FALSE;
        }
        for (guint k = 0; k < json_array_get_length(quants); k++) {
            JsonNode *qn = json_array_get_element(quants, k);
            JsonObject *q = JSON_NODE_HOLDS_OBJECT(qn) ? json_node_get_object(qn) : NULL;
            const char *quant = member_str(q, "quant");
            JsonArray *files = member_arr(q, "files");
            gint64 size;
            if (!quant || !files || json_array_get_length(files) == 0 ||
                !member_int(q, "size_bytes", 0, &size, id, error)) {
                if (error && !*error)
                    g_set_error(error, CLI_CATALOG_ERROR, 1,
                                "catalog entry %s: %s quants[%u] needs quant, files and size_bytes",
                                id, repo, k);
                return FALSE;
            }
            if (has_name(m, quant)) /* the same quantisation from a later repository */
                continue;
            const size_t vi = m->n_variants;
            if (!add_variant(m, id, quant, quant, (uint64_t)size, member_bool(q, "size_estimated"),
                             error))
                return FALSE;
            if (sources) {
                JsonNode *f0 = json_array_get_element(files, 0);
                const char *file = JSON_NODE_HOLDS_VALUE(f0) &&
                                           json_node_get_value_type(f0) == G_TYPE_STRING
                                       ? json_node_get_string(f0)
                                       : "";
                g_strlcpy(sources[vi].repo, repo, sizeof sources[vi].repo);
                g_strlcpy(sources[vi].file, file, sizeof sources[vi].file);
                sources[vi].n_files = (int)json_array_get_length(files);
            }
        }
    }
    return TRUE;
}

gboolean cli_catalog_to_plan_model(JsonObject *e, moe_plan_model *m, cli_variant_source *sources,
                                   GError **error)
{
    g_return_val_if_fail(e != NULL && m != NULL, FALSE);
    memset(m, 0, sizeof *m);
    if (sources)
        memset(sources, 0, sizeof *sources * MOE_PLAN_MAX_VARIANTS);
    const char *id = member_str(e, "id");
    if (!id) {
        g_set_error(error, CLI_CATALOG_ERROR, 1, "catalog entry without an id");
        return FALSE;
    }
    g_strlcpy(m->name, member_str(e, "name") ? member_str(e, "name") : id, sizeof m->name);
    g_strlcpy(m->arch, member_str(e, "architecture") ? member_str(e, "architecture") : "",
              sizeof m->arch);
    if (!fill_hparams(e, id, m, error) || !fill_groups(e, id, m, error) ||
        !fill_gguf(e, id, m, sources, error))
        return FALSE;

    /* What the importer could make from the original checkpoint: only from
     * a 16- or 32-bit one (re-quantising fp8 or mxfp4 weights to a wider
     * type adds size, not quality). */
    JsonObject *safetensors = member_obj(member_obj(e, "sources"), "safetensors");
    const char *dtype = member_str(safetensors, "dtype");
    const char *st = member_str(safetensors, "repo");
    if (!dtype || !(same(dtype, "bf16") || same(dtype, "f16") || same(dtype, "fp16") ||
                    same(dtype, "f32")))
        st = NULL;
    static const char *const imports[] = {"BF16", "Q8_0", "Q6_K", "Q4_K_M", "Q4_0"};
    for (size_t i = 0; st && i < G_N_ELEMENTS(imports); i++) {
        int32_t quality;
        if (!moe_plan_quant_info(imports[i], NULL, &quality) || has_quality(m, quality))
            continue;
        g_autofree char *name = g_strdup_printf("%s (import)", imports[i]);
        const size_t vi = m->n_variants;
        if (!add_variant(m, id, name, imports[i], 0, TRUE, error))
            return FALSE;
        if (sources)
            g_strlcpy(sources[vi].repo, st, sizeof sources[vi].repo);
    }
    moe_err err = {{0}};
    if (moe_plan_model_check(m, &err) != MOE_OK) {
        g_set_error(error, CLI_CATALOG_ERROR, 1, "catalog entry %s: %s", id, err.msg);
        return FALSE;
    }
    return TRUE;
}

/*
 * catalog-lookup.c — finds a catalog entry's repositories (see
 * catalog-lookup.h). Reads only the fields it needs and ignores the rest,
 * so it keeps working as the catalog grows.
 */
#include "catalog-lookup.h"
#include "library.h"

#include <json-glib/json-glib.h>
#include <string.h>

static const char *catalog_path(void)
{
    const char *env = g_getenv("MOEDESK_CATALOG");
    if (env && *env)
        return env;
#ifdef MOEDESK_CATALOG_INSTALLED
    if (g_file_test(MOEDESK_CATALOG_INSTALLED, G_FILE_TEST_IS_REGULAR))
        return MOEDESK_CATALOG_INSTALLED;
#endif
#ifdef MOEDESK_CATALOG_SOURCE
    return MOEDESK_CATALOG_SOURCE;
#else
    return NULL;
#endif
}

static const char *get_string(JsonObject *o, const char *key)
{
    JsonNode *n = o ? json_object_get_member(o, key) : NULL;
    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
               ? json_node_get_string(n) : NULL;
}

static JsonObject *get_object(JsonObject *o, const char *key)
{
    JsonNode *n = o ? json_object_get_member(o, key) : NULL;
    return n && JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
}

static JsonArray *get_array(JsonObject *o, const char *key)
{
    JsonNode *n = o ? json_object_get_member(o, key) : NULL;
    return n && JSON_NODE_HOLDS_ARRAY(n) ? json_node_get_array(n) : NULL;
}

static gboolean entry_matches(JsonObject *m, const char *name)
{
    if (g_ascii_strcasecmp(name, get_string(m, "id") ? get_string(m, "id") : "") == 0 ||
        g_ascii_strcasecmp(name, get_string(m, "name") ? get_string(m, "name") : "") == 0)
        return TRUE;
    JsonArray *aliases = get_array(m, "aliases");
    for (guint i = 0; aliases && i < json_array_get_length(aliases); i++) {
        JsonNode *n = json_array_get_element(aliases, i);
        if (JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING &&
            g_ascii_strcasecmp(name, json_node_get_string(n)) == 0)
            return TRUE;
    }
    return FALSE;
}

gboolean moe_catalog_lookup(const char *name, MoeCatalogHit *out, GError **error)
{
    memset(out, 0, sizeof *out);
    const char *path = catalog_path();
    if (!path || !g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND,
                    "'%s' is not in the model catalog (no catalog file found)", name);
        return FALSE;
    }
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) local = NULL;
    if (!json_parser_load_from_file(parser, path, &local)) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_CORRUPT,
                    "model catalog %s: %s", path, local->message);
        return FALSE;
    }
    JsonNode *root = json_parser_get_root(parser);
    JsonArray *models = root && JSON_NODE_HOLDS_OBJECT(root)
                            ? get_array(json_node_get_object(root), "models") : NULL;
    for (guint i = 0; models && i < json_array_get_length(models); i++) {
        JsonNode *n = json_array_get_element(models, i);
        JsonObject *m = JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
        if (!m || !entry_matches(m, name) || !get_string(m, "id") ||
            !moe_library_check_name(get_string(m, "id"), NULL))
            continue;
        out->id = g_strdup(get_string(m, "id"));
        out->quants = g_ptr_array_new_with_free_func(g_free);
        JsonObject *sources = get_object(m, "sources");
        out->st_repo = g_strdup(get_string(get_object(sources, "safetensors"), "repo"));
        JsonArray *gguf = get_array(sources, "gguf");
        JsonNode *first = gguf && json_array_get_length(gguf) ? json_array_get_element(gguf, 0) : NULL;
        JsonObject *g = first && JSON_NODE_HOLDS_OBJECT(first) ? json_node_get_object(first) : NULL;
        out->gguf_repo = g_strdup(get_string(g, "repo"));
        JsonArray *quants = get_array(g, "quants");
        for (guint q = 0; quants && q < json_array_get_length(quants); q++) {
            JsonNode *qn = json_array_get_element(quants, q);
            const char *quant = JSON_NODE_HOLDS_OBJECT(qn)
                                    ? get_string(json_node_get_object(qn), "quant") : NULL;
            if (quant)
                g_ptr_array_add(out->quants, g_strdup(quant));
        }
        return TRUE;
    }
    g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND,
                "'%s' is not in the model catalog (%s)", name, path);
    return FALSE;
}

void moe_catalog_hit_clear(MoeCatalogHit *hit)
{
    g_clear_pointer(&hit->id, g_free);
    g_clear_pointer(&hit->gguf_repo, g_free);
    g_clear_pointer(&hit->st_repo, g_free);
    g_clear_pointer(&hit->quants, g_ptr_array_unref);
}

/*
 * manifest.c — reading and writing models/<folder>/manifest.json with
 * json-glib, and finding installed models by name or repository id. A
 * manifest is a local file but may have been edited or damaged, so loading
 * checks every field it uses (types, path rules, hash syntax) and names the
 * file and field it rejects.
 */
#include "manifest.h"
#include "library.h"

#include <errno.h>
#include <json-glib/json-glib.h>
#include <string.h>

MoeManifest *moe_manifest_new(const char *name)
{
    MoeManifest *m = g_new0(MoeManifest, 1);
    m->name = g_strdup(name);
    m->state = g_strdup("downloading");
    m->created = g_get_real_time() / G_USEC_PER_SEC;
    m->files = g_ptr_array_new_with_free_func((GDestroyNotify)moe_manifest_file_free);
    return m;
}

void moe_manifest_free(MoeManifest *m)
{
    if (!m)
        return;
    g_free(m->name);
    g_free(m->source);
    g_free(m->endpoint);
    g_free(m->repo);
    g_free(m->revision);
    g_free(m->quant);
    g_free(m->state);
    g_ptr_array_unref(m->files);
    g_free(m);
}

MoeManifestFile *moe_manifest_file_new(const char *path, guint64 size, const char *sha256,
                                       const char *git_sha1)
{
    MoeManifestFile *f = g_new0(MoeManifestFile, 1);
    f->path = g_strdup(path);
    f->size = size;
    f->sha256 = sha256 ? g_ascii_strdown(sha256, -1) : NULL;
    f->git_sha1 = git_sha1 ? g_ascii_strdown(git_sha1, -1) : NULL;
    return f;
}

void moe_manifest_file_free(MoeManifestFile *f)
{
    if (!f)
        return;
    g_free(f->path);
    g_free(f->sha256);
    g_free(f->git_sha1);
    g_free(f);
}

MoeManifestFile *moe_manifest_find_file(const MoeManifest *m, const char *path)
{
    for (guint i = 0; i < m->files->len; i++) {
        MoeManifestFile *f = g_ptr_array_index(m->files, i);
        if (strcmp(f->path, path) == 0)
            return f;
    }
    return NULL;
}

void moe_manifest_add_file(MoeManifest *m, MoeManifestFile *f)
{
    for (guint i = 0; i < m->files->len; i++) {
        MoeManifestFile *old = g_ptr_array_index(m->files, i);
        if (strcmp(old->path, f->path) == 0) {
            moe_manifest_file_free(old);
            m->files->pdata[i] = f;
            return;
        }
    }
    g_ptr_array_add(m->files, f);
}

guint64 moe_manifest_total_bytes(const MoeManifest *m)
{
    guint64 total = 0;
    for (guint i = 0; i < m->files->len; i++)
        total += ((MoeManifestFile *)g_ptr_array_index(m->files, i))->size;
    return total;
}

/* ---- JSON ---- */

static char *time_string(gint64 t)
{
    g_autoptr(GDateTime) dt = g_date_time_new_from_unix_utc(t);
    return dt ? g_date_time_format_iso8601(dt) : NULL;
}

static gint64 time_parse(const char *s)
{
    g_autoptr(GDateTime) dt = s ? g_date_time_new_from_iso8601(s, NULL) : NULL;
    return dt ? g_date_time_to_unix(dt) : 0;
}

static void add_str(JsonBuilder *b, const char *key, const char *value)
{
    if (!value)
        return;
    json_builder_set_member_name(b, key);
    json_builder_add_string_value(b, value);
}

gboolean moe_manifest_save(const MoeManifest *m, const char *path, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    add_str(b, "name", m->name);
    add_str(b, "source", m->source);
    add_str(b, "endpoint", m->endpoint);
    add_str(b, "repo", m->repo);
    add_str(b, "revision", m->revision);
    add_str(b, "quant", m->quant);
    add_str(b, "state", m->state);
    g_autofree char *created = time_string(m->created);
    g_autofree char *verified = m->verified ? time_string(m->verified) : NULL;
    add_str(b, "created", created);
    add_str(b, "verified", verified);
    json_builder_set_member_name(b, "files");
    json_builder_begin_array(b);
    for (guint i = 0; i < m->files->len; i++) {
        const MoeManifestFile *f = g_ptr_array_index(m->files, i);
        json_builder_begin_object(b);
        add_str(b, "path", f->path);
        json_builder_set_member_name(b, "size");
        json_builder_add_int_value(b, (gint64)f->size);
        add_str(b, "sha256", f->sha256);
        add_str(b, "git_sha1", f->git_sha1);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);

    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, TRUE);
    g_autofree char *text = json_generator_to_data(gen, NULL);
    g_autofree char *dir = g_path_get_dirname(path);
    if (g_mkdir_with_parents(dir, 0755) != 0) {
        int e = errno;
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_IO,
                    "cannot create folder %s: %s", dir, g_strerror(e));
        return FALSE;
    }
    return g_file_set_contents(path, text, -1, error);
}

static gboolean is_hex(const char *s, size_t len)
{
    if (!s || strlen(s) != len)
        return FALSE;
    for (size_t i = 0; i < len; i++)
        if (!g_ascii_isxdigit(s[i]))
            return FALSE;
    return TRUE;
}

/* Optional string member; FALSE (and *bad set) if present but not a string. */
static gboolean get_str(JsonObject *o, const char *key, char **out, const char **bad)
{
    JsonNode *n = json_object_get_member(o, key);
    if (!n || JSON_NODE_HOLDS_NULL(n))
        return TRUE;
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING) {
        *bad = key;
        return FALSE;
    }
    *out = g_strdup(json_node_get_string(n));
    return TRUE;
}

static MoeManifestFile *load_file(JsonNode *n, const char **bad)
{
    if (!JSON_NODE_HOLDS_OBJECT(n)) {
        *bad = "files[] (not an object)";
        return NULL;
    }
    JsonObject *o = json_node_get_object(n);
    g_autofree char *path = NULL, *sha256 = NULL, *sha1 = NULL;
    if (!get_str(o, "path", &path, bad) || !get_str(o, "sha256", &sha256, bad) ||
        !get_str(o, "git_sha1", &sha1, bad))
        return NULL;
    JsonNode *size = json_object_get_member(o, "size");
    if (!path || !moe_library_check_rel_path(path, NULL))
        *bad = "files[].path";
    else if (!size || !JSON_NODE_HOLDS_VALUE(size) ||
             json_node_get_value_type(size) != G_TYPE_INT64 || json_node_get_int(size) < 0)
        *bad = "files[].size";
    else if (sha256 && !is_hex(sha256, 64))
        *bad = "files[].sha256";
    else if (sha1 && !is_hex(sha1, 40))
        *bad = "files[].git_sha1";
    if (*bad)
        return NULL;
    return moe_manifest_file_new(path, (guint64)json_node_get_int(size), sha256, sha1);
}

MoeManifest *moe_manifest_load(const char *path, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) local = NULL;
    if (!json_parser_load_from_file(parser, path, &local)) {
        gboolean missing = g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT);
        g_set_error(error, MOE_LIBRARY_ERROR,
                    missing ? MOE_LIBRARY_ERROR_NOT_FOUND : MOE_LIBRARY_ERROR_CORRUPT,
                    "%s: %s", path, local->message);
        return NULL;
    }
    JsonNode *root = json_parser_get_root(parser);
    const char *bad = NULL;
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_CORRUPT,
                    "%s: not a JSON object", path);
        return NULL;
    }
    JsonObject *o = json_node_get_object(root);
    g_autoptr(MoeManifest) m = moe_manifest_new(NULL);
    g_clear_pointer(&m->state, g_free);
    g_autofree char *created = NULL, *verified = NULL;
    if (get_str(o, "name", &m->name, &bad) && get_str(o, "source", &m->source, &bad) &&
        get_str(o, "endpoint", &m->endpoint, &bad) && get_str(o, "repo", &m->repo, &bad) &&
        get_str(o, "revision", &m->revision, &bad) && get_str(o, "quant", &m->quant, &bad) &&
        get_str(o, "state", &m->state, &bad) && get_str(o, "created", &created, &bad) &&
        get_str(o, "verified", &verified, &bad)) {
        if (!m->name || !moe_library_check_name(m->name, NULL))
            bad = "name";
        else if (!m->state)
            m->state = g_strdup("complete");
    }
    JsonNode *files = bad ? NULL : json_object_get_member(o, "files");
    if (!bad && (!files || !JSON_NODE_HOLDS_ARRAY(files)))
        bad = "files";
    for (guint i = 0; !bad && i < json_array_get_length(json_node_get_array(files)); i++) {
        MoeManifestFile *f = load_file(json_array_get_element(json_node_get_array(files), i), &bad);
        if (f)
            moe_manifest_add_file(m, f);
    }
    if (bad) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_CORRUPT,
                    "%s: missing or invalid field '%s'", path, bad);
        return NULL;
    }
    m->created = time_parse(created);
    m->verified = time_parse(verified);
    return g_steal_pointer(&m);
}

static char *manifest_path(const char *name, GError **error)
{
    g_autofree char *dir = moe_library_model_dir(name, error);
    return dir ? g_build_filename(dir, "manifest.json", NULL) : NULL;
}

MoeManifest *moe_manifest_load_model(const char *name, GError **error)
{
    g_autofree char *path = manifest_path(name, error);
    if (!path)
        return NULL;
    g_autoptr(GError) local = NULL;
    MoeManifest *m = moe_manifest_load(path, &local);
    if (!m && g_error_matches(local, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND)) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND,
                    "no installed model called '%s'", name);
        return NULL;
    }
    if (!m) {
        g_propagate_error(error, g_steal_pointer(&local));
        return NULL;
    }
    if (strcmp(m->name, name) != 0) { /* a folder copied or renamed by hand */
        g_free(m->name);
        m->name = g_strdup(name);
    }
    return m;
}

gboolean moe_manifest_save_model(const MoeManifest *m, GError **error)
{
    g_autofree char *path = manifest_path(m->name, error);
    return path && moe_manifest_save(m, path, error);
}

static gint cmp_by_name(gconstpointer a, gconstpointer b)
{
    const MoeManifest *x = *(MoeManifest *const *)a, *y = *(MoeManifest *const *)b;
    return strcmp(x->name, y->name);
}

GPtrArray *moe_manifest_list_installed(GPtrArray *bad)
{
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)moe_manifest_free);
    g_autofree char *models = moe_library_models_dir();
    g_autoptr(GDir) dir = g_dir_open(models, 0, NULL);
    const char *entry;
    while (dir && (entry = g_dir_read_name(dir))) {
        g_autofree char *name = moe_library_folder_to_name(entry);
        g_autofree char *path = g_build_filename(models, entry, "manifest.json", NULL);
        if (!name || !g_file_test(path, G_FILE_TEST_EXISTS))
            continue;
        g_autoptr(GError) error = NULL;
        MoeManifest *m = moe_manifest_load_model(name, &error);
        if (m)
            g_ptr_array_add(out, m);
        else if (bad)
            g_ptr_array_add(bad, g_strdup(error->message));
    }
    g_ptr_array_sort(out, cmp_by_name);
    return out;
}

MoeManifest *moe_manifest_find_installed(const char *name_or_repo, GError **error)
{
    if (!moe_library_check_name(name_or_repo, error))
        return NULL;
    g_autoptr(GError) local = NULL;
    MoeManifest *m = moe_manifest_load_model(name_or_repo, &local);
    if (m || !g_error_matches(local, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND)) {
        if (!m)
            g_propagate_error(error, g_steal_pointer(&local));
        return m;
    }
    g_autoptr(GPtrArray) all = moe_manifest_list_installed(NULL);
    g_autoptr(GString) names = g_string_new(NULL);
    MoeManifest *found = NULL;
    for (guint i = 0; i < all->len; i++) {
        MoeManifest *c = g_ptr_array_index(all, i);
        if (c->repo && g_ascii_strcasecmp(c->repo, name_or_repo) == 0) {
            g_string_append_printf(names, "%s%s", names->len ? ", " : "", c->name);
            found = found ? found : c;
        }
    }
    if (found && !strchr(names->str, ',')) {
        guint i = 0;
        while (g_ptr_array_index(all, i) != found)
            i++;
        return g_ptr_array_steal_index(all, i);
    }
    if (found)
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND,
                    "several installed models come from %s (%s): name one", name_or_repo,
                    names->str);
    else
        g_propagate_error(error, g_steal_pointer(&local));
    return NULL;
}

/*
 * library.c — the data directory, model names and their folders, and the
 * path checks that keep user- and server-supplied names inside models/.
 * See library.h for the rules; they are strict on purpose: a name is both a
 * command-line argument and a REST parameter, and a hub listing is data
 * from the network.
 */
#include "library.h"

#include <string.h>

G_DEFINE_QUARK(moe-library-error-quark, moe_library_error)

#define NAME_PART_MAX 96

char *moe_library_data_dir(void)
{
    const char *env = g_getenv("MOEDESK_DATA_DIR");
    if (env && *env)
        return g_canonicalize_filename(env, NULL);
#ifdef G_OS_WIN32
    return g_build_filename(g_get_user_data_dir(), "MoeDesk", NULL);
#else
    return g_build_filename(g_get_user_data_dir(), "moedesk", NULL);
#endif
}

char *moe_library_models_dir(void)
{
    g_autofree char *data = moe_library_data_dir();
    return g_build_filename(data, "models", NULL);
}

static gboolean name_char_ok(char c)
{
    return g_ascii_isalnum(c) || c == '.' || c == '_' || c == '-';
}

/* One part of a model name: [A-Za-z0-9._-]{1,96}, not starting with '.' or
 * '-', no "--" (the folder mapping) and no "..". */
static gboolean check_name_part(const char *name, const char *part, size_t len, GError **error)
{
    const char *why = NULL;
    if (len == 0)
        why = "an empty part";
    else if (len > NAME_PART_MAX)
        why = "a part longer than 96 characters";
    else if (part[0] == '.' || part[0] == '-')
        why = "a part starting with '.' or '-'";
    for (size_t i = 0; !why && i < len; i++) {
        if (!name_char_ok(part[i]))
            why = "a character other than letters, digits, '.', '_', '-' and one '/'";
        else if (i > 0 && part[i] == part[i - 1] && (part[i] == '-' || part[i] == '.'))
            why = "\"--\" or \"..\"";
    }
    if (why) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_INVALID_NAME,
                    "invalid model name '%s': it has %s", name, why);
        return FALSE;
    }
    return TRUE;
}

gboolean moe_library_check_name(const char *name, GError **error)
{
    if (!name || !*name) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_INVALID_NAME,
                    "invalid model name: it is empty");
        return FALSE;
    }
    const char *slash = strchr(name, '/');
    if (!slash)
        return check_name_part(name, name, strlen(name), error);
    if (strchr(slash + 1, '/')) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_INVALID_NAME,
                    "invalid model name '%s': at most one '/' (ORG/NAME)", name);
        return FALSE;
    }
    return check_name_part(name, name, (size_t)(slash - name), error) &&
           check_name_part(name, slash + 1, strlen(slash + 1), error);
}

char *moe_library_name_to_folder(const char *name, GError **error)
{
    if (!moe_library_check_name(name, error))
        return NULL;
    const char *slash = strchr(name, '/');
    if (!slash)
        return g_strdup(name);
    return g_strdup_printf("%.*s--%s", (int)(slash - name), name, slash + 1);
}

char *moe_library_folder_to_name(const char *folder)
{
    const char *sep = folder ? strstr(folder, "--") : NULL;
    g_autofree char *name = sep ? g_strdup_printf("%.*s/%s", (int)(sep - folder), folder, sep + 2)
                                : g_strdup(folder);
    if (!name || !moe_library_check_name(name, NULL))
        return NULL;
    return g_steal_pointer(&name);
}

char *moe_library_model_dir(const char *name, GError **error)
{
    g_autofree char *folder = moe_library_name_to_folder(name, error);
    if (!folder)
        return NULL;
    g_autofree char *models = moe_library_models_dir();
    return g_build_filename(models, folder, NULL);
}

/* Characters allowed in repository file names: those Hugging Face and
 * ModelScope repositories use in practice, minus anything a shell or
 * Windows treats specially. */
static gboolean path_char_ok(char c)
{
    return g_ascii_isalnum(c) || strchr("._-+=@,()[] ", c) != NULL;
}

gboolean moe_library_check_rel_path(const char *path, GError **error)
{
    const char *why = NULL;
    size_t len = path ? strlen(path) : 0;
    int levels = 0;
    if (len == 0)
        why = "it is empty";
    else if (len > 512)
        why = "it is longer than 512 bytes";
    else if (!g_utf8_validate(path, -1, NULL))
        why = "it is not UTF-8";
    for (const char *p = path; !why && p && *p;) {
        const char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 0 || p[0] == '.' || p[0] == ' ')
            why = "it has an empty part or a part starting with '.' or a space";
        for (size_t i = 0; !why && i < n; i++)
            if (!path_char_ok(p[i]))
                why = "it has a character outside letters, digits and ._-+=@,()[] and space";
        if (++levels > 8 && !why)
            why = "it is more than 8 folders deep";
        p = end ? end + 1 : p + n;
        if (end && !*p && !why)
            why = "it ends in '/'";
    }
    if (why) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_INVALID_NAME,
                    "refusing file path '%s': %s", path ? path : "", why);
        return FALSE;
    }
    return TRUE;
}

char *moe_library_format_size(guint64 bytes)
{
    static const char *units[] = { "B", "kB", "MB", "GB", "TB" };
    double v = (double)bytes;
    int u = 0;
    while (v >= 1000.0 && u < 4) {
        v /= 1000.0;
        u++;
    }
    return u == 0 ? g_strdup_printf("%" G_GUINT64_FORMAT " B", bytes)
                  : g_strdup_printf("%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, units[u]);
}

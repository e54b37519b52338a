/*
 * quant-pick.c — grouping a GGUF repository's files by quantisation and
 * choosing one group (rules in quant-pick.h).
 */
#include "quant-pick.h"
#include "library.h"

#include <string.h>

#ifdef G_OS_WIN32
#include <windows.h>
#else
#include <unistd.h>
#endif

/* True if `tok` (len bytes) looks like a llama.cpp file-type name: Q4_K_M,
 * IQ2_XXS, Q8_0, TQ1_0, F16, BF16, F32, MXFP4, MXFP4_MOE. */
static gboolean looks_like_quant(const char *tok, size_t len)
{
    g_autofree char *t = g_ascii_strup(tok, (gssize)len);
    if (strcmp(t, "F16") == 0 || strcmp(t, "BF16") == 0 || strcmp(t, "F32") == 0 ||
        g_str_has_prefix(t, "MXFP4"))
        return TRUE;
    const char *p = t;
    if (*p == 'I' || *p == 'T')
        p++;
    if (*p++ != 'Q' || !g_ascii_isdigit(*p))
        return FALSE;
    while (g_ascii_isdigit(*p))
        p++;
    if (*p != '_')
        return FALSE;
    for (; *p; p++)
        if (!g_ascii_isalnum(*p) && *p != '_')
            return FALSE;
    return TRUE;
}

/* Quant in one path component (without ".gguf" and split suffix). */
static char *quant_in(const char *stem)
{
    size_t n = strlen(stem);
    /* Tokens end at '-' or '.'; scan them from the end. */
    for (size_t end = n; end > 0;) {
        size_t start = end;
        while (start > 0 && stem[start - 1] != '-' && stem[start - 1] != '.')
            start--;
        if (end > start && looks_like_quant(stem + start, end - start)) {
            g_autofree char *q = g_ascii_strup(stem + start, (gssize)(end - start));
            if (start >= 3 && g_ascii_strncasecmp(stem + start - 3, "UD", 2) == 0 &&
                stem[start - 1] == '-' && (start == 3 || stem[start - 4] == '-' || stem[start - 4] == '.'))
                return g_strconcat("UD-", q, NULL);
            return g_steal_pointer(&q);
        }
        end = start > 0 ? start - 1 : 0;
    }
    return NULL;
}

/* Length of `name` without "-0000K-of-0000N.gguf" or ".gguf". */
static size_t stem_len(const char *name, gboolean *split)
{
    size_t n = strlen(name);
    *split = FALSE;
    if (n >= 5 && g_ascii_strcasecmp(name + n - 5, ".gguf") == 0)
        n -= 5;
    /* "-00001-of-00003" is 15 characters */
    if (n >= 15 && name[n - 15] == '-' && strncmp(name + n - 9, "-of-", 4) == 0) {
        gboolean digits = TRUE;
        for (int i = 0; i < 5; i++)
            digits = digits && g_ascii_isdigit(name[n - 14 + i]) && g_ascii_isdigit(name[n - 5 + i]);
        if (digits) {
            *split = TRUE;
            n -= 15;
        }
    }
    return n;
}

char *moe_quant_name_of(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    gboolean split;
    g_autofree char *stem = g_strndup(base, stem_len(base, &split));
    char *q = quant_in(stem);
    if (q || base == path)
        return q;
    /* Folder names: "BF16/model-00001-of-00002.gguf". */
    g_autofree char *dir = g_strndup(path, (gsize)(base - 1 - path));
    const char *last = strrchr(dir, '/');
    return quant_in(last ? last + 1 : dir);
}

static void group_free(MoeQuantGroup *g)
{
    g_free(g->quant);
    g_ptr_array_unref(g->files);
    g_free(g);
}

static gint cmp_group(gconstpointer a, gconstpointer b)
{
    const MoeQuantGroup *x = *(MoeQuantGroup *const *)a, *y = *(MoeQuantGroup *const *)b;
    return x->bytes < y->bytes ? -1 : x->bytes > y->bytes ? 1 : strcmp(x->quant, y->quant);
}

static gint cmp_path(gconstpointer a, gconstpointer b)
{
    return strcmp((*(MoeManifestFile *const *)a)->path, (*(MoeManifestFile *const *)b)->path);
}

GPtrArray *moe_quant_groups(GPtrArray *files)
{
    GPtrArray *groups = g_ptr_array_new_with_free_func((GDestroyNotify)group_free);
    for (guint i = 0; i < files->len; i++) {
        MoeManifestFile *f = g_ptr_array_index(files, i);
        const char *base = strrchr(f->path, '/');
        base = base ? base + 1 : f->path;
        if (!g_str_has_suffix(f->path, ".gguf") || g_ascii_strncasecmp(base, "mmproj", 6) == 0)
            continue;
        g_autofree char *q = moe_quant_name_of(f->path);
        if (!q) { /* no recognisable quant: the file is its own group */
            gboolean split;
            q = g_strndup(base, stem_len(base, &split));
        }
        MoeQuantGroup *g = moe_quant_find(groups, q);
        if (!g) {
            g = g_new0(MoeQuantGroup, 1);
            g->quant = g_steal_pointer(&q);
            g->files = g_ptr_array_new();
            g_ptr_array_add(groups, g);
        }
        g_ptr_array_add(g->files, f);
        g->bytes += f->size;
    }
    for (guint i = 0; i < groups->len; i++)
        g_ptr_array_sort(((MoeQuantGroup *)g_ptr_array_index(groups, i))->files, cmp_path);
    g_ptr_array_sort(groups, cmp_group);
    return groups;
}

MoeQuantGroup *moe_quant_find(GPtrArray *groups, const char *quant)
{
    for (guint i = 0; i < groups->len; i++) {
        MoeQuantGroup *g = g_ptr_array_index(groups, i);
        if (g_ascii_strcasecmp(g->quant, quant) == 0)
            return g;
    }
    return NULL;
}

guint64 moe_quant_memory_bytes(void)
{
    const char *env = g_getenv("MOEDESK_MEMORY_BYTES");
    guint64 n;
    if (env && g_ascii_string_to_unsigned(env, 10, 1, G_MAXUINT64, &n, NULL))
        return n;
#ifdef G_OS_WIN32
    MEMORYSTATUSEX ms = { .dwLength = sizeof ms };
    return GlobalMemoryStatusEx(&ms) ? (guint64)ms.ullTotalPhys : 0;
#else
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (guint64)pages * (guint64)page : 0;
#endif
}

MoeQuantGroup *moe_quant_pick(GPtrArray *groups, char **why)
{
    if (!groups->len)
        return NULL;
    guint64 mem = moe_quant_memory_bytes();
    guint64 budget = mem / 10 * 9;
    g_autofree char *mem_s = moe_library_format_size(mem);
    MoeQuantGroup *best = NULL;
    for (guint i = 0; i < groups->len; i++) { /* sorted by size: the last that fits */
        MoeQuantGroup *g = g_ptr_array_index(groups, i);
        if (g->bytes <= budget)
            best = g;
    }
    if (best) {
        if (why) {
            g_autofree char *size = moe_library_format_size(best->bytes);
            *why = g_strdup_printf("picked %s (%s): the largest quantisation that fits in 90%%"
                                   " of %s of memory; name another with SOURCE:QUANT",
                                   best->quant, size, mem_s);
        }
        return best;
    }
    best = g_ptr_array_index(groups, 0);
    if (why) {
        g_autofree char *size = moe_library_format_size(best->bytes);
        *why = g_strdup_printf("picked %s (%s), the smallest quantisation: none fits in 90%% of"
                               " %s of memory, so expect slow, partly swapped runs", best->quant,
                               size, mem_s);
    }
    return best;
}

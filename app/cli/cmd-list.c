/*
 * cmd-list.c — `moedesk-cli list` (installed models, one per line, the
 * name first) and `moedesk-cli rm NAME` (NAME or its repository id).
 */
#include "cli.h"
#include "library.h"
#include "manifest.h"
#include "pull.h"

#include <stdio.h>
#include <string.h>

static char *short_time(gint64 t)
{
    if (!t)
        return g_strdup("never");
    g_autoptr(GDateTime) dt = g_date_time_new_from_unix_local(t);
    return g_date_time_format(dt, "%Y-%m-%d %H:%M");
}

int cli_cmd_list(int argc, char **argv)
{
    if (argc > 1) {
        gboolean help = strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0;
        fprintf(help ? stdout : stderr, "usage: moedesk-cli list\n"
                "Lists installed models (data folder: $MOEDESK_DATA_DIR or the user data dir).\n");
        return help ? 0 : 2;
    }
    g_autoptr(GPtrArray) bad = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GPtrArray) all = moe_manifest_list_installed(bad);
    for (guint i = 0; i < bad->len; i++)
        fprintf(stderr, "moedesk-cli list: skipping %s\n", (char *)g_ptr_array_index(bad, i));
    if (!all->len) {
        g_autofree char *dir = moe_library_models_dir();
        printf("no models installed in %s\n", dir);
        return 0;
    }
    printf("%-40s %10s  %-12s %-11s %-16s %s\n", "NAME", "SIZE", "QUANT", "STATE", "VERIFIED",
           "SOURCE");
    for (guint i = 0; i < all->len; i++) {
        MoeManifest *m = g_ptr_array_index(all, i);
        g_autofree char *size = moe_library_format_size(moe_manifest_total_bytes(m));
        g_autofree char *when = short_time(m->verified);
        printf("%-40s %10s  %-12s %-11s %-16s %s:%s@%.12s\n", m->name, size,
               m->quant ? m->quant : "-", m->state, when, m->source ? m->source : "?",
               m->repo ? m->repo : "?", m->revision ? m->revision : "?");
    }
    return 0;
}

int cli_cmd_rm(int argc, char **argv)
{
    if (argc != 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        gboolean help = argc == 2;
        fprintf(help ? stdout : stderr, "usage: moedesk-cli rm NAME\n"
                "Removes an installed model (NAME or its repository id ORG/REPO).\n");
        return help ? 0 : 2;
    }
    g_autoptr(GError) error = NULL;
    g_autoptr(MoeManifest) m = moe_manifest_find_installed(argv[1], &error);
    const char *name = m ? m->name : argv[1];
    if (!m && !g_error_matches(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND)) {
        fprintf(stderr, "moedesk-cli rm: %s\n", error->message);
        return 1;
    }
    /* A folder without a manifest (a pull that never listed) goes too. */
    g_clear_error(&error);
    guint64 bytes = m ? moe_manifest_total_bytes(m) : 0;
    if (!moe_library_remove(name, &error)) {
        fprintf(stderr, "moedesk-cli rm: %s\n", error->message);
        return 1;
    }
    g_autofree char *size = moe_library_format_size(bytes);
    printf("removed %s (%s)\n", name, size);
    return 0;
}

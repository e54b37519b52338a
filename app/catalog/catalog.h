/*
 * catalog.h — the model catalog (resources/catalog.json, described in
 * resources/catalog.schema.md) as moedesk-cli reads it: load the file, find
 * an entry by id, name, alias or Hugging Face repository, and turn an entry
 * into the memory planner's moe_plan_model. Its users: `moedesk-cli plan`
 * and pull's choice of a quantisation (app/library/pull-plan.c). The cli_
 * prefix is historical (the reader started in app/cli/).
 */
#ifndef MOEDESK_CATALOG_H
#define MOEDESK_CATALOG_H

#include "moe.h"

#include <glib.h>
#include <json-glib/json-glib.h>

#define CLI_CATALOG_ERROR (cli_catalog_error_quark())
GQuark cli_catalog_error_quark(void);

typedef struct cli_catalog cli_catalog;

/* Where the catalog is read from: $MOEDESK_CATALOG, else the installed
 * copy (datadir/moedesk/catalog.json) if present, else the source tree's
 * resources/catalog.json (running from a build directory). */
const char  *cli_catalog_default_path(void);

/* Loads and checks the top level (schema_version 1, a models array).
 * The error names the file. */
cli_catalog *cli_catalog_load(const char *path, GError **error);
void         cli_catalog_free(cli_catalog *catalog);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(cli_catalog, cli_catalog_free)

const char  *cli_catalog_path(const cli_catalog *catalog);

/* The entries in file order, for listing the whole catalog (the service's
 * GET /moedesk/v1/catalog). cli_catalog_entry_at returns NULL for an
 * element that is not an object. Borrowed from the catalog. */
guint        cli_catalog_n_entries(const cli_catalog *catalog);
JsonObject  *cli_catalog_entry_at(const cli_catalog *catalog, guint i);

/* The entry whose id, name or alias equals `name` case-insensitively, or
 * whose safetensors or GGUF repository is `name`; NULL if none. Borrowed
 * from the catalog. */
JsonObject  *cli_catalog_find(cli_catalog *catalog, const char *name);

/* Where each variant of a plan model came from, by variant index. */
typedef struct cli_variant_source {
    char repo[128];  /* "unsloth/Qwen3-…-GGUF", or the safetensors repo */
    char file[160];  /* first file ("…-00001-of-00014.gguf" for a set) */
    int  n_files;    /* 0 for an import                               */
} cli_variant_source;

/* Fills `out` from a catalog entry: hyperparameters, group parameter
 * counts, one variant per listed quantisation (the first repository
 * offering a quantisation wins) and, when the entry names a 16- or 32-bit
 * safetensors checkpoint, the quantisations the importer could make that
 * no file offers (BF16, Q8_0, Q6_K, Q4_K_M, Q4_0, shown as "… (import)").
 * `sources` (may be NULL) gets MOE_PLAN_MAX_VARIANTS entries. The error
 * names the entry and field at fault. */
gboolean cli_catalog_to_plan_model(JsonObject *entry, moe_plan_model *out,
                                   cli_variant_source *sources, GError **error);

#endif /* MOEDESK_CATALOG_H */

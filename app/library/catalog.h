/*
 * catalog.h — the model catalog (resources/catalog.json, described in
 * resources/catalog.schema.md): load the file, walk or find an entry by id,
 * name, alias or Hugging Face repository, and turn an entry into the memory
 * planner's moe_plan_model. Users: `moedesk-cli plan` and the service's
 * catalog endpoint (GET /moedesk/v1/catalog). Needs only json-glib and
 * libmoe, so it is its own small static library (app/meson.build) that the
 * CLI links even when the rest of the model library (libsoup) is not built.
 */
#ifndef MOEDESK_CATALOG_H
#define MOEDESK_CATALOG_H

#include "moe.h"

#include <glib.h>
#include <json-glib/json-glib.h>

#define MOE_CATALOG_ERROR (moe_catalog_error_quark())
GQuark moe_catalog_error_quark(void);

typedef struct MoeCatalog MoeCatalog;

/* Where the catalog is read from: $MOEDESK_CATALOG, else the installed
 * copy (datadir/moedesk/catalog.json) if present, else the source tree's
 * resources/catalog.json (running from a build directory). */
const char  *moe_catalog_default_path(void);

/* Loads and checks the top level (schema_version 1, a models array).
 * The error names the file. */
MoeCatalog *moe_catalog_load(const char *path, GError **error);
void         moe_catalog_free(MoeCatalog *catalog);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MoeCatalog, moe_catalog_free)

const char  *moe_catalog_path(const MoeCatalog *catalog);

/* The entries in file order (elements that are not objects are skipped by
 * moe_catalog_entry_at, which then returns NULL). Borrowed. */
guint        moe_catalog_n_entries(const MoeCatalog *catalog);
JsonObject  *moe_catalog_entry_at(const MoeCatalog *catalog, guint i);

/* The entry whose id, name or alias equals `name` case-insensitively, or
 * whose safetensors or GGUF repository is `name`; NULL if none. Borrowed
 * from the catalog. */
JsonObject  *moe_catalog_find(MoeCatalog *catalog, const char *name);

/* Where each variant of a plan model came from, by variant index. */
typedef struct MoeCatalogSource {
    char repo[128];  /* "unsloth/Qwen3-…-GGUF", or the safetensors repo */
    char file[160];  /* first file ("…-00001-of-00014.gguf" for a set) */
    int  n_files;    /* 0 for an import                               */
} MoeCatalogSource;

/* Fills `out` from a catalog entry: hyperparameters, group parameter
 * counts, one variant per listed quantisation (the first repository
 * offering a quantisation wins) and, when the entry names a 16- or 32-bit
 * safetensors checkpoint, the quantisations the importer could make that
 * no file offers (BF16, Q8_0, Q6_K, Q4_K_M, Q4_0, shown as "… (import)").
 * `sources` (may be NULL) gets MOE_PLAN_MAX_VARIANTS entries. The error
 * names the entry and field at fault. */
gboolean moe_catalog_to_plan_model(JsonObject *entry, moe_plan_model *out,
                                   MoeCatalogSource *sources, GError **error);

#endif /* MOEDESK_CATALOG_H */

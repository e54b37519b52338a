/*
 * catalog-lookup.h — the one thing pull needs from the model catalog
 * (resources/catalog.json, schema in resources/catalog.schema.md on the
 * planner branch): which repository a catalog name comes from. The catalog
 * is optional: without it only ORG/REPO sources and installed names work.
 * When the planner's catalog reader (app/cli/catalog.c) is merged, this
 * lookup can call it instead; the file locations are the same:
 * $MOEDESK_CATALOG, else the installed datadir/moedesk/catalog.json, else
 * the source tree's resources/catalog.json.
 */
#ifndef MOEDESK_CATALOG_LOOKUP_H
#define MOEDESK_CATALOG_LOOKUP_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
    char *id;        /* the catalog id, used as the installed model's name */
    char *gguf_repo; /* first GGUF repository, or NULL                     */
    char *st_repo;   /* the safetensors repository, or NULL                */
    GPtrArray *quants; /* of char*: quantisations the catalog lists for
                          gguf_repo (may be empty)                          */
} MoeCatalogHit;

/* Looks `name` up by id, name or alias (case-insensitively). Returns FALSE
 * when there is no catalog or no such entry (NOT_FOUND error), or when the
 * catalog does not parse (CORRUPT error naming the file). */
gboolean moe_catalog_lookup(const char *name, MoeCatalogHit *out, GError **error);
void     moe_catalog_hit_clear(MoeCatalogHit *hit);

G_END_DECLS

#endif /* MOEDESK_CATALOG_LOOKUP_H */

/*
 * quant-pick.h — which files of a GGUF repository to download.
 *
 * A GGUF repository usually holds one model at several quantisations:
 *   Model-Q4_K_M.gguf, Model-Q8_0.gguf, Model-UD-Q4_K_XL.gguf,
 *   BF16/Model-BF16-00001-of-00002.gguf + ...-00002-of-00002.gguf
 * Files are grouped by the quantisation named in the file name (the last
 * '-' or '.' separated token that looks like one, with a "UD-" prefix kept;
 * a folder name counts when the file name has none), split sets
 * (-0000K-of-0000N) staying together. Projector files (mmproj*) are not
 * models and are left out.
 *
 * The choice without a user's selector is made by moe_quant_pick, the one
 * place to switch to the memory planner (moe_plan_*) once it is on main.
 * Until then the rule is: the largest group whose total size fits in
 * 0.9 x the memory budget; if none fits, the smallest group (with a
 * warning). The budget is $MOEDESK_MEMORY_BYTES when set, else the
 * machine's physical RAM (VRAM probing belongs to the planner).
 */
#ifndef MOEDESK_QUANT_PICK_H
#define MOEDESK_QUANT_PICK_H

#include "manifest.h"

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
    char      *quant;  /* "Q4_K_M", "UD-Q4_K_XL", ... upper case           */
    GPtrArray *files;  /* of MoeManifestFile*, borrowed from the listing,
                          split parts in order                              */
    guint64    bytes;  /* total size                                       */
} MoeQuantGroup;

/* The quantisation named in a GGUF path, upper case, or NULL. */
char      *moe_quant_name_of(const char *path);
/* Groups the listing's *.gguf files (see above), sorted by size. */
GPtrArray *moe_quant_groups(GPtrArray *files);
/* The group whose name equals `quant` case-insensitively, or NULL. */
MoeQuantGroup *moe_quant_find(GPtrArray *groups, const char *quant);
/* The group to download (never NULL for a non-empty list); *why (may be
 * NULL) gets a sentence explaining the choice. */
MoeQuantGroup *moe_quant_pick(GPtrArray *groups, char **why);
/* The memory budget the rule uses, in bytes (before the 0.9 factor). */
guint64    moe_quant_memory_bytes(void);

G_END_DECLS

#endif /* MOEDESK_QUANT_PICK_H */

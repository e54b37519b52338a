/*
 * hasher.h — the digest a file is checked against, computed incrementally:
 * SHA-256 (Git LFS files; libmoe's moe_sha256, SHA-NI when the CPU has it)
 * or the git blob id (small files kept in git itself: SHA-1 over
 * "blob <size>\0" followed by the content, so the size must be known up
 * front). Used by downloads while streaming and by verify.
 */
#ifndef MOEDESK_HASHER_H
#define MOEDESK_HASHER_H

#include "moe.h"

#include <glib.h>

G_BEGIN_DECLS

typedef enum { MOE_HASH_NONE, MOE_HASH_SHA256, MOE_HASH_GIT_SHA1 } MoeHashKind;

typedef struct {
    MoeHashKind kind;
    moe_sha256  sha256;
    GChecksum  *sha1;
} MoeHasher;

/* `size` is needed for MOE_HASH_GIT_SHA1 only. */
void  moe_hasher_init(MoeHasher *h, MoeHashKind kind, guint64 size);
void  moe_hasher_update(MoeHasher *h, const void *data, gsize len);
/* The lowercase hex digest (newly allocated; NULL for MOE_HASH_NONE). The
 * hasher is spent afterwards: clear or re-init it. */
char *moe_hasher_finish(MoeHasher *h);
void  moe_hasher_clear(MoeHasher *h);

/* "sha256" or "git sha1". */
const char *moe_hash_kind_name(MoeHashKind kind);

G_END_DECLS

#endif /* MOEDESK_HASHER_H */

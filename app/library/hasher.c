/*
 * hasher.c — see hasher.h. A thin switch between libmoe's SHA-256 and
 * GChecksum's SHA-1 (git blob ids are only used for small files, so the
 * slower GLib SHA-1 costs nothing that matters).
 */
#include "hasher.h"

void moe_hasher_init(MoeHasher *h, MoeHashKind kind, guint64 size)
{
    h->kind = kind;
    h->sha1 = NULL;
    if (kind == MOE_HASH_SHA256) {
        moe_sha256_init(&h->sha256);
    } else if (kind == MOE_HASH_GIT_SHA1) {
        h->sha1 = g_checksum_new(G_CHECKSUM_SHA1);
        char head[48];
        int n = g_snprintf(head, sizeof head, "blob %" G_GUINT64_FORMAT, size);
        g_checksum_update(h->sha1, (const guchar *)head, n + 1); /* with the NUL */
    }
}

void moe_hasher_update(MoeHasher *h, const void *data, gsize len)
{
    if (h->kind == MOE_HASH_SHA256)
        moe_sha256_update(&h->sha256, data, len);
    else if (h->kind == MOE_HASH_GIT_SHA1)
        g_checksum_update(h->sha1, data, (gssize)len);
}

char *moe_hasher_finish(MoeHasher *h)
{
    if (h->kind == MOE_HASH_SHA256) {
        uint8_t d[32];
        char hex[65];
        moe_sha256_final(&h->sha256, d);
        moe_sha256_hex(d, hex);
        return g_strdup(hex);
    }
    if (h->kind == MOE_HASH_GIT_SHA1)
        return g_strdup(g_checksum_get_string(h->sha1));
    return NULL;
}

void moe_hasher_clear(MoeHasher *h)
{
    g_clear_pointer(&h->sha1, g_checksum_free);
    h->kind = MOE_HASH_NONE;
}

const char *moe_hash_kind_name(MoeHashKind kind)
{
    return kind == MOE_HASH_SHA256 ? "sha256" : kind == MOE_HASH_GIT_SHA1 ? "git sha1" : "none";
}

/*
 * verify.h — checking an installed model against its manifest
 * (`moedesk-cli verify NAME`):
 *   every file: present, the manifest's size, the manifest's hash (sha256,
 *     or the git blob id), several files at once on a GThreadPool;
 *   GGUF: the header parses (moe_gguf_open: every count, offset and tensor
 *     extent inside the file); a split set is complete (every part
 *     -0000K-of-0000N listed and present) and opens as one model;
 *   safetensors: every shard's header parses and its tensors tile the file
 *     (moe_safetensors_open); `*.safetensors.index.json`: its weight_map
 *     names only shards that are installed, and each tensor is in the shard
 *     the map names.
 * Each file gets one verdict; the first problem found wins.
 */
#ifndef MOEDESK_VERIFY_H
#define MOEDESK_VERIFY_H

#include "manifest.h"

#include <gio/gio.h>

G_BEGIN_DECLS

typedef enum {
    MOE_VERIFY_OK,
    MOE_VERIFY_MISSING,
    MOE_VERIFY_SIZE_MISMATCH,
    MOE_VERIFY_HASH_MISMATCH,
    MOE_VERIFY_CORRUPT,
} MoeVerifyStatus;

typedef struct {
    char           *path;   /* relative to the model folder              */
    MoeVerifyStatus status;
    char           *detail; /* why, for anything but OK (or NULL)        */
} MoeVerifyResult;

/* "OK", "missing", "size mismatch", "hash mismatch", "corrupt". */
const char *moe_verify_status_name(MoeVerifyStatus status);
void        moe_verify_result_free(MoeVerifyResult *r);

/* Called on the main context about every 200 ms while hashing. */
typedef void (*MoeVerifyProgressFunc)(guint64 done, guint64 total, guint n_done, guint n_files,
                                      gpointer user_data);

/* Verifies the model described by `manifest` (copied) in `model_dir`
 * using `n_threads` hashing threads (0: one per processor). */
void       moe_verify_async(const MoeManifest *manifest, const char *model_dir, guint n_threads,
                            MoeVerifyProgressFunc progress, gpointer progress_data,
                            GCancellable *cancellable, GAsyncReadyCallback callback,
                            gpointer user_data);
/* Of MoeVerifyResult*, in manifest order (then any part of a split set
 * the manifest should have listed). */
GPtrArray *moe_verify_finish(GAsyncResult *result, GError **error);

G_END_DECLS

#endif /* MOEDESK_VERIFY_H */

/*
 * hub.h — model hubs: Hugging Face and ModelScope. Parses what a user types
 * as a source, lists a repository's files with their sizes and hashes, and
 * builds download URLs.
 *
 * Hugging Face: endpoint $HF_ENDPOINT (default https://huggingface.co; a
 * mirror such as https://hf-mirror.com works the same), token $HF_TOKEN
 * (or the older $HUGGING_FACE_HUB_TOKEN), sent as "Authorization: Bearer"
 * to the endpoint's origin only and never printed.
 *   GET /api/models/{repo}/revision/{rev}          -> {"sha": commit}
 *   GET /api/models/{repo}/tree/{sha}?recursive=true -> [{type, path, size,
 *        oid (git blob sha1), lfs: {oid (sha256), size}}], paged by a
 *        Link: <...>; rel="next" header
 *   GET /{repo}/resolve/{sha}/{path}               -> the file (usually a
 *        redirect to a CDN)
 * ModelScope: endpoint $MODELSCOPE_ENDPOINT (default
 * https://www.modelscope.cn), public repositories.
 *   GET /api/v1/models/{repo}/repo/files?Revision={rev}&Recursive=true
 *        -> {"Code":200,"Data":{"Files":[{Type, Path, Size, Sha256, Revision}]}}
 *   GET /api/v1/models/{repo}/repo?Revision={rev}&FilePath={path}
 *
 * Source syntax (moe_hub_ref_parse):
 *   [hf:|hf://|huggingface:|ms:|ms://|modelscope:]ORG/REPO[@REVISION][:SELECTOR]
 * SELECTOR is a file path in the repository (it contains a '.') or a
 * quantisation name such as Q4_K_M (matched case-insensitively).
 */
#ifndef MOEDESK_HUB_H
#define MOEDESK_HUB_H

#include "manifest.h"

#include <gio/gio.h>
#include <libsoup/soup.h>

G_BEGIN_DECLS

typedef enum { MOE_HUB_HF, MOE_HUB_MODELSCOPE } MoeHubKind;

typedef struct {
    MoeHubKind kind;
    char      *repo;     /* "org/repo", checked with moe_library_check_name */
    char      *revision; /* NULL: the default branch                        */
    char      *selector; /* NULL, a file path or a quantisation name        */
} MoeHubRef;

/* TRUE if `text` has the shape of a hub source (a '/' or a hub prefix);
 * otherwise it is a catalog or installed model name. */
gboolean moe_hub_ref_looks_like(const char *text);
/* Parses `text` into `out` (cleared first); INVALID_NAME error on failure. */
gboolean moe_hub_ref_parse(const char *text, MoeHubRef *out, GError **error);
void     moe_hub_ref_clear(MoeHubRef *ref);
/* "hf" or "modelscope" (as stored in manifests). */
const char *moe_hub_kind_name(MoeHubKind kind);
gboolean    moe_hub_kind_from_name(const char *name, MoeHubKind *out);

typedef struct MoeHub MoeHub;

/* A client for `kind` reading its endpoint and token from the environment;
 * `session` is referenced. */
MoeHub     *moe_hub_new(MoeHubKind kind, SoupSession *session);
void        moe_hub_free(MoeHub *hub);
MoeHubKind  moe_hub_kind(const MoeHub *hub);
const char *moe_hub_endpoint(const MoeHub *hub); /* without a trailing '/' */
const char *moe_hub_token(const MoeHub *hub);    /* NULL if none           */

/* The download URL of `path` at `revision` (a commit id preferably). */
char *moe_hub_file_url(const MoeHub *hub, const char *repo, const char *revision,
                       const char *path);

typedef struct {
    char      *revision; /* commit id when the hub gives one               */
    GPtrArray *files;    /* of MoeManifestFile* (path, size, hash), owned  */
} MoeHubListing;

void moe_hub_listing_free(MoeHubListing *listing);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MoeHubListing, moe_hub_listing_free)

/* Lists every file of `repo` at `revision` (NULL: default branch), with
 * the retry policy of http.h. Errors name the repository and the endpoint:
 * NOT_FOUND for 404, HTTP for other statuses (401/403 say a token may be
 * needed), NETWORK after retries, CORRUPT for a listing that does not parse
 * or names an unsafe path. */
void           moe_hub_list_async(MoeHub *hub, const char *repo, const char *revision,
                                  GCancellable *cancellable, GAsyncReadyCallback callback,
                                  gpointer user_data);
MoeHubListing *moe_hub_list_finish(MoeHub *hub, GAsyncResult *result, GError **error);

G_END_DECLS

#endif /* MOEDESK_HUB_H */

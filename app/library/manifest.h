/*
 * manifest.h — the record of one installed model, `models/<folder>/
 * manifest.json`:
 *
 *   { "name": "org/repo", "source": "hf", "endpoint": "https://huggingface.co",
 *     "repo": "org/repo", "revision": "<commit sha>", "quant": "Q4_K_M",
 *     "state": "complete", "created": "2026-...Z", "verified": "2026-...Z",
 *     "files": [ { "path": "x.gguf", "size": 123, "sha256": "<hex>" },
 *                { "path": "config.json", "size": 9, "git_sha1": "<hex>" } ] }
 *
 * "state" is "downloading" from the moment a pull starts until every file is
 * in place and hashed, then "complete". "verified" is the last time every
 * file was hashed and matched (by pull or verify), absent if never. Files
 * from Git LFS carry a sha256; small files kept in git itself carry the git
 * blob id (sha1 over "blob <size>\0" + content), which the hub lists
 * instead. Written atomically (temporary file + rename).
 */
#ifndef MOEDESK_MANIFEST_H
#define MOEDESK_MANIFEST_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
    char   *path;     /* relative, '/'-separated, checked                  */
    guint64 size;
    char   *sha256;   /* 64 lowercase hex digits, or NULL                  */
    char   *git_sha1; /* 40 lowercase hex digits, or NULL                  */
} MoeManifestFile;

typedef struct {
    char      *name;
    char      *source;   /* "hf" or "modelscope"                            */
    char      *endpoint; /* base URL the files came from                    */
    char      *repo;     /* "org/repo"                                      */
    char      *revision; /* commit id, or the branch if the hub gave none   */
    char      *quant;    /* chosen quantisation(s), or NULL                 */
    char      *state;    /* "downloading" or "complete"                     */
    gint64     created;  /* unix seconds                                    */
    gint64     verified; /* unix seconds; 0 = never                         */
    GPtrArray *files;    /* of MoeManifestFile*, owned                      */
} MoeManifest;

MoeManifest     *moe_manifest_new(const char *name);
void             moe_manifest_free(MoeManifest *m);
MoeManifestFile *moe_manifest_file_new(const char *path, guint64 size,
                                       const char *sha256, const char *git_sha1);
void             moe_manifest_file_free(MoeManifestFile *f);

/* Adds `f` (taking it), replacing an entry with the same path. */
void             moe_manifest_add_file(MoeManifest *m, MoeManifestFile *f);
MoeManifestFile *moe_manifest_find_file(const MoeManifest *m, const char *path);
guint64          moe_manifest_total_bytes(const MoeManifest *m);

/* Reads and checks a manifest (names, paths and hashes are validated: the
 * file may have been edited by hand). CORRUPT error naming the file and
 * field on failure. */
MoeManifest *moe_manifest_load(const char *path, GError **error);
gboolean     moe_manifest_save(const MoeManifest *m, const char *path, GError **error);

/* The manifest of the installed model `name`; NOT_FOUND if none. */
MoeManifest *moe_manifest_load_model(const char *name, GError **error);
gboolean     moe_manifest_save_model(const MoeManifest *m, GError **error);

/* Every model folder under models/ that has a readable manifest, sorted by
 * name; folders with an unreadable manifest are reported through `bad`
 * (messages, may be NULL). */
GPtrArray *moe_manifest_list_installed(GPtrArray *bad);

/* The installed model called `name_or_repo`, or else the one whose repo is
 * `name_or_repo` (NOT_FOUND if none; INVALID_NAME for a name that is not
 * valid; an error listing them if several models come from that repo). */
MoeManifest *moe_manifest_find_installed(const char *name_or_repo, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(MoeManifest, moe_manifest_free)

G_END_DECLS

#endif /* MOEDESK_MANIFEST_H */

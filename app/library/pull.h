/*
 * pull.h — installing a model: resolve what the user named, list the
 * repository, choose files, check disk space, download them all (in
 * parallel, through a MoeDownloadManager), and keep the manifest.
 *
 * What may be named (SOURCE):
 *   ORG/REPO[@REV][:FILE|:QUANT] with an optional hub prefix (hub.h);
 *   the name of an installed model (pulls it again: resumes, or fetches
 *     what is missing, from the source in its manifest);
 *   a catalog id, name or alias (catalog-lookup.h): its first GGUF
 *     repository, installed under the catalog id.
 * Files chosen:
 *   :FILE    that file (a split part brings its whole set);
 *   :QUANT   that quantisation group (quant-pick.h);
 *   nothing  GGUF repository with one quantisation: that one; with
 *            several: the memory planner's choice for the machine
 *            (pull-plan.h; an error when none fits); a
 *            repository without GGUF files (a Hugging Face checkpoint):
 *            *.safetensors, *.json, tokenizer.model, *.tiktoken, *.txt,
 *            *.jinja, *.py files (what an import needs).
 * The installed name is the repository id (or the catalog id); a second
 * quantisation of the same repository goes into the same model folder and
 * manifest.
 *
 * The manifest is written with state "downloading" before the first byte
 * and becomes "complete" (with a verified time) when every file is in
 * place, so an interrupted pull is visible in `list` and resumable by name.
 */
#ifndef MOEDESK_PULL_H
#define MOEDESK_PULL_H

#include "download-manager.h"
#include "manifest.h"

#include "moe.h"

G_BEGIN_DECLS

typedef struct {
    const char                *phase;   /* "resolving", "listing", "downloading" */
    const char                *name;    /* the model's name, once known        */
    guint                      n_files, n_done;
    guint64                    done, total; /* bytes over all files          */
    double                     rate;    /* bytes/s over all running files      */
    gint64                     eta_s;   /* -1 if unknown                       */
    const MoeDownloadProgress *file;    /* the file whose change triggered this,
                                           or NULL                             */
    const char                *note;    /* a one-off message (why this
                                           quantisation), or NULL              */
} MoePullProgress;

typedef void (*MoePullProgressFunc)(const MoePullProgress *p, gpointer user_data);

/* Pulls `source`, choosing a quantisation for this machine (moe_hw_probe,
 * which honours $MOEDESK_MACHINE). `progress` (may be NULL) and its data
 * must outlive the operation. The result is the model's manifest. */
void         moe_pull_async(MoeDownloadManager *manager, const char *source,
                            MoeDownloadFlags flags, MoePullProgressFunc progress,
                            gpointer progress_data, GCancellable *cancellable,
                            GAsyncReadyCallback callback, gpointer user_data);
/* The same, choosing for `machine` (copied; NULL: as moe_pull_async). */
void         moe_pull_on_machine_async(MoeDownloadManager *manager, const char *source,
                                       MoeDownloadFlags flags, const moe_machine *machine,
                                       MoePullProgressFunc progress, gpointer progress_data,
                                       GCancellable *cancellable, GAsyncReadyCallback callback,
                                       gpointer user_data);
/* Either one's result. */
MoeManifest *moe_pull_finish(GAsyncResult *result, GError **error);

/* Whether a file of a checkpoint repository (no GGUF files) is downloaded
 * by default (see above). */
gboolean moe_pull_wants_checkpoint_file(const char *path);

/* Removes an installed model's folder (files, parts, manifest). */
gboolean moe_library_remove(const char *name, GError **error);

G_END_DECLS

#endif /* MOEDESK_PULL_H */

/*
 * pull-plan.h — which quantisation a pull downloads when the user names
 * none: the memory planner's choice (moe.h "Memory planner") for this
 * machine (or a machine file), over the quantisation groups of the
 * repository's listing (quant-pick.h).
 *
 * The planner needs the model's structure (layers, heads, head size,
 * experts, context, parameters per tensor group). It comes from
 *   the catalog entry of the repository (resources/catalog.json): no
 *     network;
 *   else the GGUF header of one candidate file, fetched with HTTP Range
 *     requests of its first MOE_PULL_PLAN_HEADER_BYTES (grown while the
 *     header runs past them, up to MOE_PULL_PLAN_HEADER_MAX): a single
 *     file if the repository has one, else every part of the smallest
 *     split set.
 * Each group becomes one planner variant with its exact file size; the
 * planner's choice (best quality all on GPU, else experts in RAM, else CPU
 * only) names the group. When nothing fits the pull stops and says what
 * the smallest option needs. Only when the planner cannot run (no
 * structure, a header that does not parse, no machine description, no
 * quantisation it knows) does pull fall back to moe_quant_pick's size
 * rule, and says so.
 */
#ifndef MOEDESK_PULL_PLAN_H
#define MOEDESK_PULL_PLAN_H

#include "hub.h"
#include "quant-pick.h"

#include "moe.h"

#include <gio/gio.h>
#include <libsoup/soup.h>

G_BEGIN_DECLS

#define MOE_PULL_PLAN_HEADER_BYTES ((guint64)4 << 20)  /* first request     */
#define MOE_PULL_PLAN_HEADER_MAX   ((guint64)64 << 20) /* give up beyond    */

/* The structure of the catalog entry whose GGUF repository is `repo` or,
 * failing that, whose id, name or alias is `name` (may be NULL): hparams
 * and group parameter counts, no variants. FALSE with NOT_FOUND when there
 * is no catalog or no such entry, CORRUPT when the entry lacks what the
 * planner needs (the message names the field). */
gboolean moe_pull_plan_model_from_catalog(const char *repo, const char *name,
                                          moe_plan_model *out, GError **error);

/* The structure from the headers of one GGUF file or of every part of a
 * split set, in order (the first carries the key/values); parameter counts
 * and expert layers are summed over all parts. No variants. CORRUPT error
 * naming `what` when the header lacks a key the planner needs. */
gboolean moe_pull_plan_model_from_headers(moe_gguf *const *parts, guint n_parts,
                                          const char *what, moe_plan_model *out,
                                          GError **error);

typedef enum {
    MOE_PULL_PLAN_PICKED,       /* *picked set; *why explains              */
    MOE_PULL_PLAN_NOTHING_FITS, /* *why: "MACHINE (what the smallest
                                   option needs)"                         */
    MOE_PULL_PLAN_FAILED,       /* the planner cannot run; *why says why   */
} MoePullPlanResult;

/* Plans every group of `groups` whose quantisation the planner knows as a
 * variant of `model` (its variants are replaced; at most
 * MOE_PLAN_MAX_VARIANTS groups, the largest files first) on `machine` at
 * the default context. *picked is borrowed from `groups`; *why (may be
 * NULL) gets a g_free'd sentence. */
MoePullPlanResult moe_pull_plan_pick(moe_plan_model *model, GPtrArray *groups,
                                     const moe_machine *machine, MoeQuantGroup **picked,
                                     char **why);

/* The group whose header pull reads when the catalog does not describe
 * the repository: the smallest single file, else the smallest split set;
 * NULL for no groups. */
MoeQuantGroup *moe_pull_plan_header_group(GPtrArray *groups);

/* Reads the headers of `group`'s files (each file's first bytes, see
 * above) from `repo` at `revision` on `hub`, through `session`, and builds
 * the structure from them. `group` must stay alive until the callback.
 * Errors name the file: HTTP for an error status, NETWORK, CORRUPT for a
 * header that does not parse or lacks planner keys. $MOEDESK_TEST_HEADER_BYTES
 * sets the first request's size (tests use it to exercise the growth). */
void     moe_pull_plan_fetch_async(MoeHub *hub, SoupSession *session, const char *repo,
                                   const char *revision, MoeQuantGroup *group,
                                   GCancellable *cancellable, GAsyncReadyCallback callback,
                                   gpointer user_data);
/* `out` gets the structure. */
gboolean moe_pull_plan_fetch_finish(GAsyncResult *result, moe_plan_model *out,
                                    GError **error);

G_END_DECLS

#endif /* MOEDESK_PULL_PLAN_H */

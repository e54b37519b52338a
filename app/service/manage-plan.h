/*
 * manage-plan.h — the memory planner's view of loading a model, for
 * POST /moedesk/v1/models/{name}/load (manage-models.c): which GGUF of an
 * installed model to load and whether it fits this machine at the asked
 * context and parallelism.
 */
#ifndef MOEDESK_MANAGE_PLAN_H
#define MOEDESK_MANAGE_PLAN_H

#include "manage-private.h"

#include <manifest.h>
#include <quant-pick.h>

G_BEGIN_DECLS

typedef struct mg_load_plan {
    char *path;             /* the GGUF (first part of a split set) to load;
                               NULL: the --model file, which the server
                               resolves by name                           */
    char *quant;            /* its quantisation ("Q8_0"), or NULL         */
    int32_t n_ctx;          /* per sequence, as the server will use it    */
    int32_t n_parallel;
    moe_machine machine;
    gboolean fits;          /* the engine's placement (CPU) fits          */
    guint64 host_bytes, host_budget_bytes, weights_bytes, kv_bytes;
    gboolean has_choice;    /* the planner's own choice (GPUs included)   */
    moe_placement choice_placement;
    guint64 choice_gpu_bytes, choice_host_bytes;
    int32_t choice_n_gpus;
    char *reason;           /* moe_plan_reason                            */
} mg_load_plan;

/* The GGUF groups (quantisations; split sets together) of an installed
 * model, smallest first. Borrowed from `m`; free the array. */
GPtrArray *mg_plan_groups(MoeManifest *m);

/* Plans loading `name` (an installed model, or the --model file's name):
 * the group named `quant` (NULL: the best quality that fits; the smallest
 * when none does), `n_ctx` tokens per sequence and `n_parallel` sequences
 * (0: the server's defaults). Answers the call (400/404/409/500) and
 * returns FALSE when there is nothing to load or the planner cannot run. */
gboolean mg_plan_load(svc_call *call, const char *name, const char *quant, int32_t n_ctx,
                      int32_t n_parallel, mg_load_plan *out);
/* Adds "plan": {...} to the object being built. */
void     mg_plan_add_json(JsonBuilder *b, const mg_load_plan *lp);
void     mg_load_plan_clear(mg_load_plan *lp);

/* "gpu", "hybrid", "cpu" */
const char *mg_placement_key(moe_placement p);

G_END_DECLS

#endif /* MOEDESK_MANAGE_PLAN_H */

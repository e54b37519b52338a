/*
 * quant-plan.h — which type each tensor of a model gets when the model is
 * quantised to a target type (quant-plan.c), kept apart from the file
 * driver (quantize-model.c) so the policy can be tested on names and
 * shapes alone. Internal: not part of the public API.
 *
 * Usage: moe_quant_plan_init; moe_quant_plan_count for every tensor name
 * (first pass); then moe_quant_plan_pick for every tensor in file order
 * (second pass: some choices depend on the position among their kind).
 */
#ifndef MOE_QUANT_PLAN_H
#define MOE_QUANT_PLAN_H

#include "moe.h"

typedef struct moe_quant_plan {
    moe_type target;   /* what the caller asked for                       */
    int      n_layer;  /* <arch>.block_count, or 1 + the largest blk.N    */
    int      n_expert; /* <arch>.expert_count, 0 for dense models         */
    int      n_attn_v; /* attn_v-like tensors in the model (first pass)   */
    int      i_attn_v; /* attn_v-like tensors picked so far               */
    bool     has_output; /* output.weight exists (else embeddings are tied) */
} moe_quant_plan;

/* False if `target` is not a type models can be quantised to. */
bool     moe_quant_plan_init(moe_quant_plan *plan, moe_type target,
                             int n_layer, int n_expert);
void     moe_quant_plan_count(moe_quant_plan *plan, const char *name);
/* The type for tensor `name` with dims ne[0..3] (unused dims 1). Advances
 * the plan's counters, so call it once per tensor in file order. */
moe_type moe_quant_plan_pick(moe_quant_plan *plan, const char *name,
                             const int64_t ne[MOE_GGUF_MAX_DIMS]);
/* llama.cpp's LLAMA_FTYPE number for general.file_type. */
uint32_t moe_quant_plan_ftype(const moe_quant_plan *plan);

#endif /* MOE_QUANT_PLAN_H */

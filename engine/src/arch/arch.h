/*
 * arch.h — what an architecture provides: its GGUF name, a load function
 * that reads its hyperparameters and claims its tensors (with the exact
 * shapes it needs), and a forward function that runs one ubatch through
 * the layers using backend operations only. One file per architecture in
 * this folder; the shared building blocks (attention block, output head)
 * are in arch/blocks.c.
 */
#ifndef MOE_ARCH_H
#define MOE_ARCH_H

#include "forward.h"
#include "model.h"

struct moe_arch {
    const char *name; /* general.architecture */
    /* Called after model.c read the common hyperparameters into m->hp. */
    moe_status (*load)(moe_model *m, moe_err *err);
    void       (*forward)(moe_fwd *f);
};

extern const moe_arch moe_arch_qwen3moe;
extern const moe_arch moe_arch_qwen2moe;
extern const moe_arch moe_arch_llama;
extern const moe_arch moe_arch_olmoe;

/* The architecture called `name`, or NULL. */
const moe_arch *moe_arch_find(const char *name);

/* Claims the tensors every architecture here shares: embeddings, output
 * head, attention projections and norms, the router and the expert
 * stacks. `tied_output` allows output.weight to be absent. */
moe_status moe_arch_load_common(moe_model *m, bool tied_output, moe_err *err);

#endif /* MOE_ARCH_H */

/*
 * llama.c — the "llama" architecture with experts: Mixtral 8x7B / 8x22B.
 * Plain grouped-query attention with "normal" RoPE, which rotates
 * consecutive pairs (x[2i], x[2i+1]) (the GGUF converter permutes the
 * query/key rows to make this equal to the Hugging Face layout); routed
 * experts (top-2 of 8): Mixtral takes the top-k router logits and
 * softmaxes them, which equals softmax over all experts, top-k, then
 * renormalise. Experts are feed_forward_length wide. Dense llama models
 * (no experts) are not Mixture-of-Experts and are refused at load.
 */
#include "arch.h"
#include "util.h"

#include <string.h>

static moe_status llama_load(moe_model *m, moe_err *err)
{
    moe_hparams *hp = &m->hp;
    hp->rope_mode = MOE_ROPE_NORM;
    hp->expert_weights_norm = true;
    hp->n_ff_exp = hp->n_ff;
    if (hp->n_ff <= 0)
        return moe_fail(err, MOE_ERR_NOT_FOUND, "model is missing key 'llama.feed_forward_length'");
    if (hp->n_ff_shexp > 0)
        return moe_fail(err, MOE_ERR_UNSUPPORTED,
                        "llama: shared experts (Granite MoE) are not supported");
    if (hp->n_rot != hp->head_dim)
        return moe_fail(err, MOE_ERR_UNSUPPORTED, "llama: rope dimension %d must equal head size %d",
                        hp->n_rot, hp->head_dim);
    /* Llama-3-style frequency factors would change every angle. */
    int64_t n = moe_gguf_n_tensors(m->gguf);
    for (int64_t i = 0; i < n; i++)
        if (strcmp(moe_gguf_tensor_at(m->gguf, i)->name, "rope_freqs.weight") == 0)
            return moe_fail(err, MOE_ERR_UNSUPPORTED, "llama: tensor 'rope_freqs.weight' (RoPE frequency "
                            "factors) is not supported");
    return moe_arch_load_common(m, true, err);
}

static void llama_forward(moe_fwd *f)
{
    const moe_hparams *hp = &f->model->hp;
    int64_t n = f->n_tok;
    moe_fwd_embed(f);
    for (int il = 0; il < hp->n_layer; il++) {
        n = moe_fwd_attention(f, il, n, MOE_QK_NORM_NONE);
        const moe_moe_args route = moe_fwd_route_args(f, il, hp->expert_weights_norm);
        moe_fwd_moe(f, il, n, &route);
    }
    moe_fwd_output(f, n);
}

const moe_arch moe_arch_llama = {
    .name = "llama",
    .load = llama_load,
    .forward = llama_forward,
};

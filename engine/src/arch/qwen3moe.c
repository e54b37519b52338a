/*
 * qwen3moe.c — Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder-30B):
 * grouped-query attention with an RMSNorm over each query and key head
 * before RoPE (NeoX layout: dimension i rotates with i + head_dim/2), no
 * biases; every layer routed: softmax over the experts, top-k, the k
 * weights renormalised to sum to 1 (norm_topk_prob), SwiGLU experts stacked
 * in ffn_{gate,up,down}_exps. Output head may be tied to the embeddings.
 */
#include "arch.h"
#include "util.h"

static moe_status qwen3moe_load(moe_model *m, moe_err *err)
{
    moe_hparams *hp = &m->hp;
    hp->rope_mode = MOE_ROPE_NEOX;
    hp->expert_weights_norm = true;
    if (hp->n_rot != hp->head_dim)
        return moe_fail(err, MOE_ERR_UNSUPPORTED, "qwen3moe: rope dimension %d must equal head size %d",
                        hp->n_rot, hp->head_dim);
    moe_status st = moe_arch_load_common(m, true, err);
    if (st != MOE_OK)
        return st;
    for (int il = 0; il < hp->n_layer; il++) {
        moe_layer *L = &m->w.layers[il];
        if ((st = moe_model_tensor(m, "blk.%d.attn_q_norm.weight", il, hp->head_dim, 1, 0,
                                   MOE_TENSOR_F32, &L->q_norm, err)) ||
            (st = moe_model_tensor(m, "blk.%d.attn_k_norm.weight", il, hp->head_dim, 1, 0,
                                   MOE_TENSOR_F32, &L->k_norm, err)))
            return st;
    }
    return MOE_OK;
}

static void qwen3moe_forward(moe_fwd *f)
{
    const moe_hparams *hp = &f->model->hp;
    int64_t n = f->n_tok;
    moe_fwd_embed(f);
    for (int il = 0; il < hp->n_layer; il++) {
        n = moe_fwd_attention(f, il, n, MOE_QK_NORM_HEAD);
        const moe_moe_args route = moe_fwd_route_args(f, il, hp->expert_weights_norm);
        moe_fwd_moe(f, il, n, &route);
    }
    moe_fwd_output(f, n);
}

const moe_arch moe_arch_qwen3moe = {
    .name = "qwen3moe",
    .load = qwen3moe_load,
    .forward = qwen3moe_forward,
};

/*
 * olmoe.c — OLMoE (allenai/OLMoE-1B-7B): attention whose query and key
 * projections are RMS-normalised over all heads at once (weights of
 * n_head * head_dim), before NeoX RoPE; 64 experts, top-8, softmax then
 * top-k WITHOUT renormalisation (norm_topk_prob = false). Experts are
 * feed_forward_length wide. The output head is a separate tensor.
 */
#include "arch.h"
#include "util.h"

static moe_status olmoe_load(moe_model *m, moe_err *err)
{
    moe_hparams *hp = &m->hp;
    hp->rope_mode = MOE_ROPE_NEOX;
    hp->expert_weights_norm = false;
    hp->n_ff_exp = hp->n_ff;
    if (hp->n_ff <= 0)
        return moe_fail(err, MOE_ERR_NOT_FOUND, "model is missing key 'olmoe.feed_forward_length'");
    if (hp->n_rot != hp->head_dim)
        return moe_fail(err, MOE_ERR_UNSUPPORTED, "olmoe: rope dimension %d must equal head size %d",
                        hp->n_rot, hp->head_dim);
    moe_status st = moe_arch_load_common(m, false, err);
    if (st != MOE_OK)
        return st;
    const int64_t n_q = (int64_t)hp->n_head * hp->head_dim;
    const int64_t n_kv = (int64_t)hp->n_head_kv * hp->head_dim;
    for (int il = 0; il < hp->n_layer; il++) {
        moe_layer *L = &m->w.layers[il];
        if ((st = moe_model_tensor(m, "blk.%d.attn_q_norm.weight", il, n_q, 1, 0, MOE_TENSOR_F32,
                                   &L->q_norm, err)) ||
            (st = moe_model_tensor(m, "blk.%d.attn_k_norm.weight", il, n_kv, 1, 0, MOE_TENSOR_F32,
                                   &L->k_norm, err)))
            return st;
    }
    return MOE_OK;
}

static void olmoe_forward(moe_fwd *f)
{
    const moe_hparams *hp = &f->model->hp;
    int64_t n = f->n_tok;
    moe_fwd_embed(f);
    for (int il = 0; il < hp->n_layer; il++) {
        n = moe_fwd_attention(f, il, n, MOE_QK_NORM_FULL);
        const moe_moe_args route = moe_fwd_route_args(f, il, hp->expert_weights_norm);
        moe_fwd_moe(f, il, n, &route);
    }
    moe_fwd_output(f, n);
}

const moe_arch moe_arch_olmoe = {
    .name = "olmoe",
    .load = olmoe_load,
    .forward = olmoe_forward,
};

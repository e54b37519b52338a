/*
 * qwen2moe.c — Qwen1.5-MoE / Qwen2-57B-A14B: attention with biases on the
 * query, key and value projections, NeoX RoPE, no query/key norms; routed
 * experts with softmax then top-k and NO renormalisation
 * (norm_topk_prob = false), plus a shared expert in every layer whose
 * output is scaled by sigmoid(ffn_gate_inp_shexp . x) before it is added.
 */
#include "arch.h"
#include "util.h"

static moe_status qwen2moe_load(moe_model *m, moe_err *err)
{
    moe_hparams *hp = &m->hp;
    hp->rope_mode = MOE_ROPE_NEOX;
    hp->expert_weights_norm = false;
    if (hp->n_ff_shexp == 0)
        hp->n_ff_shexp = hp->n_ff;
    if (hp->n_ff_shexp <= 0)
        return moe_fail(err, MOE_ERR_FORMAT,
                        "qwen2moe: shared expert width unknown (no expert_shared_feed_forward_length "
                        "or feed_forward_length key)");
    if (hp->n_rot != hp->head_dim)
        return moe_fail(err, MOE_ERR_UNSUPPORTED, "qwen2moe: rope dimension %d must equal head size %d",
                        hp->n_rot, hp->head_dim);
    moe_status st = moe_arch_load_common(m, false, err);
    if (st != MOE_OK)
        return st;
    const int64_t n_embd = hp->n_embd, sh = hp->n_ff_shexp;
    const int64_t n_q = (int64_t)hp->n_head * hp->head_dim;
    const int64_t n_kv = (int64_t)hp->n_head_kv * hp->head_dim;
    for (int il = 0; il < hp->n_layer; il++) {
        moe_layer *L = &m->w.layers[il];
        if ((st = moe_model_tensor(m, "blk.%d.attn_q.bias", il, n_q, 1, 0, MOE_TENSOR_F32, &L->bq, err)) ||
            (st = moe_model_tensor(m, "blk.%d.attn_k.bias", il, n_kv, 1, 0, MOE_TENSOR_F32, &L->bk, err)) ||
            (st = moe_model_tensor(m, "blk.%d.attn_v.bias", il, n_kv, 1, 0, MOE_TENSOR_F32, &L->bv, err)) ||
            (st = moe_model_tensor(m, "blk.%d.ffn_gate_inp_shexp.weight", il, n_embd, 1, 0,
                                   MOE_TENSOR_ROWS, &L->ffn_gate_inp_shexp, err)) ||
            (st = moe_model_tensor(m, "blk.%d.ffn_gate_shexp.weight", il, n_embd, sh, 0,
                                   MOE_TENSOR_ROWS, &L->ffn_gate_shexp, err)) ||
            (st = moe_model_tensor(m, "blk.%d.ffn_up_shexp.weight", il, n_embd, sh, 0,
                                   MOE_TENSOR_ROWS, &L->ffn_up_shexp, err)) ||
            (st = moe_model_tensor(m, "blk.%d.ffn_down_shexp.weight", il, sh, n_embd, 0,
                                   MOE_TENSOR_ROWS, &L->ffn_down_shexp, err)))
            return st;
        if (L->ffn_gate_shexp->type != L->ffn_up_shexp->type)
            return moe_fail(err, MOE_ERR_UNSUPPORTED,
                            "tensor 'blk.%d.ffn_up_shexp.weight': type %s differs from "
                            "ffn_gate_shexp's %s (they must match)", il,
                            moe_type_name(L->ffn_up_shexp->type), moe_type_name(L->ffn_gate_shexp->type));
    }
    return MOE_OK;
}

static void qwen2moe_forward(moe_fwd *f)
{
    const moe_hparams *hp = &f->model->hp;
    int64_t n = f->n_tok;
    moe_fwd_embed(f);
    for (int il = 0; il < hp->n_layer; il++) {
        n = moe_fwd_attention(f, il, n, MOE_QK_NORM_NONE);
        const moe_moe_args route = moe_fwd_route_args(f, il, hp->expert_weights_norm);
        moe_fwd_moe(f, il, n, &route); /* adds the gated shared expert */
    }
    moe_fwd_output(f, n);
}

const moe_arch moe_arch_qwen2moe = {
    .name = "qwen2moe",
    .load = qwen2moe_load,
    .forward = qwen2moe_forward,
};

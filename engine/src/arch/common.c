/*
 * common.c — what the architectures share: the table of architectures,
 * the tensors every one of them claims, and the blocks their forward
 * passes are built from (embedding, attention, routed experts with an
 * optional shared expert, output head). Each block is a short sequence
 * of backend operations, written to read like the model's equations.
 */
#include "arch.h"
#include "util.h"

#include <string.h>

static const moe_arch *const all_archs[] = {
    &moe_arch_qwen3moe,
    &moe_arch_qwen2moe,
    &moe_arch_llama,
    &moe_arch_olmoe,
};

const moe_arch *moe_arch_find(const char *name)
{
    for (size_t i = 0; i < sizeof all_archs / sizeof all_archs[0]; i++)
        if (strcmp(all_archs[i]->name, name) == 0)
            return all_archs[i];
    return NULL;
}

moe_status moe_arch_load_common(moe_model *m, bool tied_output, moe_err *err)
{
    const moe_hparams *hp = &m->hp;
    const int64_t n_embd = hp->n_embd, n_vocab = hp->n_vocab;
    const int64_t n_q = (int64_t)hp->n_head * hp->head_dim;
    const int64_t n_kv = (int64_t)hp->n_head_kv * hp->head_dim;
    moe_status st;

    if ((st = moe_model_tensor(m, "token_embd.weight", -1, n_embd, n_vocab, 0, 0,
                               &m->w.token_embd, err)) ||
        (st = moe_model_tensor(m, "output_norm.weight", -1, n_embd, 1, 0, MOE_TENSOR_F32,
                               &m->w.output_norm, err)) ||
        (st = moe_model_tensor(m, "output.weight", -1, n_embd, n_vocab, 0,
                               MOE_TENSOR_ROWS | (tied_output ? MOE_TENSOR_OPTIONAL : 0),
                               &m->w.output, err)))
        return st;
    if (!m->w.output) {
        /* Tied embeddings: the output head multiplies by token_embd. */
        if ((st = moe_model_tensor(m, "token_embd.weight", -1, n_embd, n_vocab, 0,
                                   MOE_TENSOR_ROWS, &m->w.output, err)))
            return st;
    }

    for (int il = 0; il < hp->n_layer; il++) {
        moe_layer *L = &m->w.layers[il];
        const int64_t ne = hp->n_expert, ff = hp->n_ff_exp;
        if ((st = moe_model_tensor(m, "blk.%d.attn_norm.weight", il, n_embd, 1, 0,
                                   MOE_TENSOR_F32, &L->attn_norm, err)) ||
            (st = moe_model_tensor(m, "blk.%d.attn_q.weight", il, n_embd, n_q, 0,
                                   MOE_TENSOR_ROWS, &L->wq, err)) ||
            (st = moe_model_tensor(m, "blk.%d.attn_k.weight", il, n_embd, n_kv, 0,
                                   MOE_TENSOR_ROWS, &L->wk, err)) ||
            (st = moe_model_tensor(m, "blk.%d.attn_v.weight", il, n_embd, n_kv, 0,
                                   MOE_TENSOR_ROWS, &L->wv, err)) ||
            (st = moe_model_tensor(m, "blk.%d.attn_output.weight", il, n_q, n_embd, 0,
                                   MOE_TENSOR_ROWS, &L->wo, err)) ||
            (st = moe_model_tensor(m, "blk.%d.ffn_norm.weight", il, n_embd, 1, 0,
                                   MOE_TENSOR_F32, &L->ffn_norm, err)) ||
            (st = moe_model_tensor(m, "blk.%d.ffn_gate_inp.weight", il, n_embd, ne, 0,
                                   MOE_TENSOR_ROWS, &L->ffn_gate_inp, err)) ||
            (st = moe_model_tensor(m, "blk.%d.ffn_gate_exps.weight", il, n_embd, ff, ne,
                                   MOE_TENSOR_ROWS, &L->ffn_gate_exps, err)) ||
            (st = moe_model_tensor(m, "blk.%d.ffn_up_exps.weight", il, n_embd, ff, ne,
                                   MOE_TENSOR_ROWS, &L->ffn_up_exps, err)) ||
            (st = moe_model_tensor(m, "blk.%d.ffn_down_exps.weight", il, ff, n_embd, ne,
                                   MOE_TENSOR_ROWS, &L->ffn_down_exps, err)))
            return st;
        if (L->ffn_gate_exps->type != L->ffn_up_exps->type)
            return moe_fail(err, MOE_ERR_UNSUPPORTED,
                            "tensor 'blk.%d.ffn_up_exps.weight': type %s differs from "
                            "ffn_gate_exps' %s (they must match)",
                            il, moe_type_name(L->ffn_up_exps->type),
                            moe_type_name(L->ffn_gate_exps->type));
    }
    return MOE_OK;
}

/* ---- blocks ------------------------------------------------------------- */

void moe_fwd_embed(moe_fwd *f)
{
    const moe_backend *be = f->be;
    be->iface.get_rows(be->context, f->model->w.token_embd, f->tokens, f->n_tok, f->x);
}

int64_t moe_fwd_attention(moe_fwd *f, int il, int64_t n, moe_qk_norm qk_norm)
{
    const moe_hparams *hp = &f->model->hp;
    const moe_layer *L = &f->model->w.layers[il];
    const moe_backend *be = f->be;
    void *bc = be->context;
    const int64_t n_embd = hp->n_embd, hd = hp->head_dim;
    const int64_t n_head = hp->n_head, n_head_kv = hp->n_head_kv;
    const float eps = hp->rms_eps;
    float *x = f->x, *xb = f->xb, *q = f->q, *k = f->k, *v = f->v, *att = f->att;

    be->iface.rms_norm(bc, x, L->attn_norm, n, n_embd, eps, xb);
    be->iface.mul_mat(bc, L->wq, L->bq, xb, n, q);
    be->iface.mul_mat(bc, L->wk, L->bk, xb, n, k);
    be->iface.mul_mat(bc, L->wv, L->bv, xb, n, v);
    if (qk_norm == MOE_QK_NORM_HEAD) {
        be->iface.rms_norm(bc, q, L->q_norm, n * n_head, hd, eps, q);
        be->iface.rms_norm(bc, k, L->k_norm, n * n_head_kv, hd, eps, k);
    } else if (qk_norm == MOE_QK_NORM_FULL) {
        be->iface.rms_norm(bc, q, L->q_norm, n, n_head * hd, eps, q);
        be->iface.rms_norm(bc, k, L->k_norm, n, n_head_kv * hd, eps, k);
    }
    moe_rope_args rq = {.n_head = (int32_t)n_head, .head_dim = (int32_t)hd, .n_rot = hp->n_rot,
                        .mode = hp->rope_mode, .cos_sin = f->rope_cs};
    moe_rope_args rk = rq;
    rk.n_head = (int32_t)n_head_kv;
    be->iface.rope(bc, q, n, &rq);
    be->iface.rope(bc, k, n, &rk);

    moe_attn_args aa = {
        .n_head = (int32_t)n_head, .n_head_kv = (int32_t)n_head_kv, .head_dim = (int32_t)hd,
        .scale = hp->attn_scale,
        .kv_type = f->kv_type, .kv_row_bytes = f->kv_row_bytes,
        .k_cache = f->k_cache[il], .v_cache = f->v_cache[il],
        .view = f->view,
    };
    be->iface.attention(bc, &aa, q, k, v, att);

    if (il == hp->n_layer - 1 && f->n_out < n) {
        /* Only rows that want logits matter after the last attention. */
        be->iface.gather(bc, att, n_head * hd, f->out_rows, f->n_out, att);
        be->iface.gather(bc, x, n_embd, f->out_rows, f->n_out, x);
        n = f->n_out;
    }
    be->iface.mul_mat(bc, L->wo, NULL, att, n, xb);
    be->iface.add(bc, x, xb, n * n_embd);
    return n;
}

moe_moe_args moe_fwd_route_args(const moe_fwd *f, int il, bool norm_weights)
{
    const moe_layer *L = &f->model->w.layers[il];
    const moe_hparams *hp = &f->model->hp;
    return (moe_moe_args){
        .gate_inp = L->ffn_gate_inp,
        .gate_exps = L->ffn_gate_exps,
        .up_exps = L->ffn_up_exps,
        .down_exps = L->ffn_down_exps,
        .n_expert_used = hp->n_expert_used,
        .gating = MOE_GATING_SOFTMAX,
        .norm_weights = norm_weights,
        .weights_scale = hp->expert_weights_scale,
    };
}

void moe_fwd_moe(moe_fwd *f, int il, int64_t n, const moe_moe_args *route)
{
    const moe_hparams *hp = &f->model->hp;
    const moe_layer *L = &f->model->w.layers[il];
    const moe_backend *be = f->be;
    void *bc = be->context;
    const int64_t n_embd = hp->n_embd;

    be->iface.rms_norm(bc, f->x, L->ffn_norm, n, n_embd, hp->rms_eps, f->xb);
    be->iface.moe_ffn(bc, route, f->xb, n, f->ffn);
    if (L->ffn_gate_shexp) {
        be->iface.ffn(bc, L->ffn_gate_shexp, L->ffn_up_shexp, L->ffn_down_shexp, f->xb, n, f->sh);
        be->iface.mul_mat(bc, L->ffn_gate_inp_shexp, NULL, f->xb, n, f->sh_gate);
        be->iface.add_gated(bc, f->ffn, f->sh, f->sh_gate, n, n_embd);
    }
    be->iface.add(bc, f->x, f->ffn, n * n_embd);
}

void moe_fwd_output(moe_fwd *f, int64_t n)
{
    const moe_hparams *hp = &f->model->hp;
    const moe_backend *be = f->be;
    if (n == 0)
        return;
    be->iface.rms_norm(be->context, f->x, f->model->w.output_norm, n, hp->n_embd, hp->rms_eps, f->xb);
    be->iface.mul_mat(be->context, f->model->w.output, NULL, f->xb, n, f->logits);
}

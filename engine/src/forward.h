/*
 * forward.h — the state of one forward pass over a ubatch, handed by the
 * context (context.c) to an architecture's forward function, and the
 * building blocks those functions are made of (arch/common.c). Activation
 * pointers are backend buffers: the architectures pass them to backend
 * operations and never read them.
 */
#ifndef MOE_FORWARD_H
#define MOE_FORWARD_H

#include "backend.h"
#include "model.h"

typedef struct moe_fwd {
    const moe_model   *model;
    const moe_backend *be;

    /* inputs (host memory) */
    int32_t            n_tok;
    const int32_t     *tokens;   /* [n_tok]                                  */
    const moe_kv_view *view;     /* cells written and read                   */
    const float       *rope_cs;  /* [n_tok][n_rot/2][2] cos, sin             */
    int32_t            n_out;    /* tokens that want logits ...              */
    const int32_t     *out_rows; /* ... ascending indices into the ubatch    */

    /* the cache */
    void             **k_cache, **v_cache; /* [n_layer]                     */
    moe_type           kv_type;
    size_t             kv_row_bytes;

    /* activations, [n_batch] rows each (backend buffers) */
    float *x;       /* residual stream    [n_embd]                 */
    float *xb;      /* normed input       [n_embd]                 */
    float *q;       /* queries            [n_head * head_dim]      */
    float *k, *v;   /* new keys, values   [n_head_kv * head_dim]   */
    float *att;     /* attention output   [n_head * head_dim]      */
    float *ffn;     /* feed-forward out   [n_embd]                 */
    float *sh;      /* shared expert out  [n_embd]                 */
    float *sh_gate; /* shared expert gate [1]                      */
    float *logits;  /* [n_out][n_vocab]                            */
} moe_fwd;

/* How an architecture normalises queries and keys before RoPE. */
typedef enum moe_qk_norm {
    MOE_QK_NORM_NONE = 0,
    MOE_QK_NORM_HEAD, /* RMSNorm over each head (weights [head_dim]), Qwen3 */
    MOE_QK_NORM_FULL, /* RMSNorm over all heads at once (weights
                         [n_head * head_dim]), OLMoE                        */
} moe_qk_norm;

/* x = token embeddings. */
void    moe_fwd_embed(moe_fwd *f);
/* Self-attention block of layer il over n tokens: x += wo(attn(norm(x))).
 * In the last layer only the rows that want logits continue; returns the
 * number of rows left. */
int64_t moe_fwd_attention(moe_fwd *f, int il, int64_t n, moe_qk_norm qk_norm);
/* Routed-experts block: x += moe(norm(x)); with the layer's shared expert
 * (if it has one) added under its sigmoid gate. */
void    moe_fwd_moe(moe_fwd *f, int il, int64_t n, const moe_moe_args *route);
/* logits = output(norm(x)) for the n remaining rows. */
void    moe_fwd_output(moe_fwd *f, int64_t n);

/* The router arguments every architecture here fills the same way. */
moe_moe_args moe_fwd_route_args(const moe_fwd *f, int il, bool norm_weights);

#endif /* MOE_FORWARD_H */

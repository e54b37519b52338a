/*
 * model.h — a loaded model, in three parts with three lifetimes, as in
 * llama2.c's run.c: the hyperparameters (fixed by the file), the weights
 * (read-only views into the mapped file, one moe_tensor each, with their
 * type and shape noted beside them) and, in context.h, the mutable run
 * state of a decoding context. Architectures fill and use these through
 * arch/arch.h.
 */
#ifndef MOE_MODEL_H
#define MOE_MODEL_H

#include "backend.h"

#define MOE_MAX_LAYERS 512

typedef struct moe_arch moe_arch;

typedef struct moe_hparams {
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim;       /* attention.key_length (= value_length)     */
    int32_t n_rot;          /* rope.dimension_count, default head_dim     */
    int32_t n_ff;           /* feed_forward_length (dense layers)         */
    int32_t n_ff_exp;       /* expert_feed_forward_length                 */
    int32_t n_ff_shexp;     /* expert_shared_feed_forward_length, 0 = none */
    int32_t n_expert;
    int32_t n_expert_used;
    float   rms_eps;
    float   rope_freq_base;
    float   rope_freq_scale; /* 1 / rope.scaling.factor for linear scaling */
    float   expert_weights_scale;
    float   attn_scale;      /* attention.scale, or 1/sqrt(head_dim)     */
    bool    expert_weights_norm;
    moe_rope_mode rope_mode;
} moe_hparams;

/* One transformer block. Optional tensors are NULL when absent. */
typedef struct moe_layer {
    const moe_tensor *attn_norm;      /* F32 [n_embd]                          */
    const moe_tensor *wq;             /*     [n_embd, n_head * head_dim]       */
    const moe_tensor *wk;             /*     [n_embd, n_head_kv * head_dim]    */
    const moe_tensor *wv;             /*     [n_embd, n_head_kv * head_dim]    */
    const moe_tensor *wo;             /*     [n_head * head_dim, n_embd]       */
    const moe_tensor *bq, *bk, *bv;   /* F32 biases (qwen2moe)                 */
    const moe_tensor *q_norm;         /* F32 [head_dim] (qwen3moe) or
                                             [n_head * head_dim] (olmoe)       */
    const moe_tensor *k_norm;         /* F32 [head_dim] or [n_head_kv * hd]    */
    const moe_tensor *ffn_norm;       /* F32 [n_embd]                          */
    const moe_tensor *ffn_gate_inp;   /*     [n_embd, n_expert] router         */
    const moe_tensor *ffn_gate_exps;  /*     [n_embd, n_ff_exp, n_expert]      */
    const moe_tensor *ffn_up_exps;    /*     [n_embd, n_ff_exp, n_expert]      */
    const moe_tensor *ffn_down_exps;  /*     [n_ff_exp, n_embd, n_expert]      */
    const moe_tensor *ffn_gate_inp_shexp; /* [n_embd] shared-expert gate       */
    const moe_tensor *ffn_gate_shexp; /*     [n_embd, n_ff_shexp]              */
    const moe_tensor *ffn_up_shexp;   /*     [n_embd, n_ff_shexp]              */
    const moe_tensor *ffn_down_shexp; /*     [n_ff_shexp, n_embd]              */
} moe_layer;

typedef struct moe_weights {
    const moe_tensor *token_embd;  /* [n_embd, n_vocab]                      */
    const moe_tensor *output_norm; /* F32 [n_embd]                           */
    const moe_tensor *output;      /* [n_embd, n_vocab]; token_embd if tied  */
    moe_layer        *layers;      /* [n_layer]                              */
} moe_weights;

struct moe_model {
    moe_gguf       *gguf;
    const moe_arch *arch;
    moe_hparams     hp;
    moe_weights     w;
    moe_vocab      *vocab;
    const char     *name;          /* general.name, owned by gguf, or ""     */
    const char     *chat_template; /* owned by gguf, or NULL                 */
    moe_tensor     *tensors;       /* [n_tensors] every tensor of the file   */
    int64_t         n_tensors;
    bool           *used;          /* [n_tensors] claimed by the arch        */
    uint64_t        n_params, n_bytes;
};

/* Helpers for the architectures' load functions (model.c). */

/* Reads "<arch>.<key>" as a non-negative 32-bit integer. If absent:
 * *out = def when !required, else an error naming the key. */
moe_status moe_model_key_u32(moe_model *m, const char *key, bool required, int32_t def,
                             int32_t *out, moe_err *err);
/* Reads "<arch>.<key>" as a float. */
moe_status moe_model_key_f32(moe_model *m, const char *key, bool required, float def,
                             float *out, moe_err *err);

#define MOE_TENSOR_OPTIONAL 1u /* absent is fine: *out = NULL         */
#define MOE_TENSOR_F32      2u /* must be F32 (norm weights, biases)  */
#define MOE_TENSOR_ROWS     4u /* rows feed products: a type the CPU
                                  kernels multiply                    */

/* Finds the tensor named by printf(fmt, layer), checks its shape against
 * ne0..ne2 (a 1-D tensor has ne1 = ne2 = 1; ne2 = 0 means "2-D") and its
 * type against flags. Errors name the tensor and what is wrong. */
moe_status moe_model_tensor(moe_model *m, const char *fmt, int layer, int64_t ne0,
                            int64_t ne1, int64_t ne2, unsigned flags,
                            const moe_tensor **out, moe_err *err);

#endif /* MOE_MODEL_H */

/*
 * backend.h — the interface between the architectures and the hardware.
 *
 * An architecture's forward pass (arch/<name>.c) is a sequence of calls to
 * the operations below; it never touches activation memory itself. A
 * backend is a table of function pointers plus a `void *context`, in the
 * manner of ggml's ggml-backend-impl.h: the CPU backend fills it today
 * (cpu/backend-cpu.c); a CUDA backend, loaded as a separate module, fills
 * the same table later without any change to the architectures.
 *
 * Memory: activation buffers, KV cache rows and the logits come from
 * `buf_alloc` and live wherever the backend keeps them (host memory for the
 * CPU, device memory for a GPU); pointers to them are passed back to the
 * operations unchanged. Weights are `moe_tensor`s mapped from the file;
 * each records its placement, so a backend can keep its own copy in
 * `extra` (per-tensor placement for partial offload).
 *
 * Per-ubatch inputs (positions, RoPE angles, which KV cells each token
 * writes and reads) are plain host arrays; a backend that needs them on a
 * device uploads them itself.
 *
 * Operations cannot fail once `reserve` succeeded (the CPU backend
 * allocates all scratch there); asynchronous failures of a device backend
 * surface from `synchronize`. Bump MOE_BACKEND_API_VERSION whenever the
 * table changes; a module built for another version is refused.
 */
#ifndef MOE_BACKEND_H
#define MOE_BACKEND_H

#include "moe.h"

#define MOE_BACKEND_API_VERSION 1

/* Where a weight tensor's copy for compute lives (per tensor, so a model
 * can be split between devices; the planner's moe_placement decides it for
 * whole groups). */
typedef enum moe_tensor_place {
    MOE_TENSOR_ON_CPU = 0, /* host memory (the file mapping)    */
    MOE_TENSOR_ON_GPU = 1, /* a device backend's memory (extra) */
} moe_tensor_place;

/* A weight tensor as the forward pass sees it. Expert stacks are 3-D:
 * expert e's matrix starts at data + e * nb2. */
typedef struct moe_tensor {
    const char   *name;  /* borrowed from the GGUF file                 */
    moe_type      type;
    int32_t       n_dims;
    int64_t       ne[4]; /* ne[0] = row length (innermost)              */
    size_t        nb1;   /* bytes per row                               */
    size_t        nb2;   /* bytes per ne[0] x ne[1] matrix              */
    const void   *data;  /* host copy, mapped read-only                 */
    moe_tensor_place place;
    void         *extra; /* backend-private (device copy), or NULL      */
} moe_tensor;

typedef enum moe_op {
    MOE_OP_GET_ROWS,  /* embedding lookup                              */
    MOE_OP_GATHER,    /* pick activation rows                          */
    MOE_OP_RMS_NORM,
    MOE_OP_MUL_MAT,   /* y = W x (+ b)                                 */
    MOE_OP_ROPE,
    MOE_OP_ATTENTION, /* store K/V in the cache, attend causally       */
    MOE_OP_ADD,
    MOE_OP_FFN,       /* dense SwiGLU feed-forward                     */
    MOE_OP_MOE_FFN,   /* routed experts: router, top-k, experts, mix   */
    MOE_OP_ADD_GATED, /* y += sigmoid(g) * x (shared-expert gate)      */
    MOE_OP_COUNT
} moe_op;

typedef enum moe_rope_mode {
    MOE_ROPE_NORM = 0, /* rotate consecutive pairs (x[2i], x[2i+1])       */
    MOE_ROPE_NEOX = 2, /* rotate (x[i], x[i + n_rot/2]) (GPT-NeoX, Qwen)  */
} moe_rope_mode;

typedef struct moe_rope_args {
    int32_t        n_head;   /* heads per token                           */
    int32_t        head_dim;
    int32_t        n_rot;    /* leading dims of each head that rotate     */
    moe_rope_mode  mode;
    const float   *cos_sin;  /* [n_tok][n_rot/2][2] angles of each token  */
} moe_rope_args;

/* Which cache cells each token of a ubatch writes, and which it may read:
 * token t reads cell c iff bit tok_seq[t] of cell_seqs[c] is set and
 * cell_pos[c] <= tok_pos[t]. Built on the host by kv-cache.c. */
typedef struct moe_kv_view {
    int32_t         n_tok;
    const int32_t  *tok_cell;  /* [n_tok]                        */
    const int32_t  *tok_pos;   /* [n_tok]                        */
    const int32_t  *tok_seq;   /* [n_tok]                        */
    int32_t         n_cells;   /* cells [0, n_cells) are scanned */
    const int32_t  *cell_pos;  /* [n_cells], -1 = free           */
    const uint64_t *cell_seqs; /* [n_cells]                      */
} moe_kv_view;

typedef struct moe_attn_args {
    int32_t            n_head, n_head_kv, head_dim;
    float              scale;        /* usually 1/sqrt(head_dim)              */
    moe_type           kv_type;      /* F16, Q8_0 or F32                      */
    size_t             kv_row_bytes; /* bytes of one cell's K (or V) row      */
    void              *k_cache;      /* this layer: [n_ctx] rows of n_head_kv *
                                        head_dim elements of kv_type          */
    void              *v_cache;
    const moe_kv_view *view;
} moe_attn_args;

typedef enum moe_gating {
    MOE_GATING_SOFTMAX = 0, /* softmax over all experts, then top-k */
} moe_gating;

typedef struct moe_moe_args {
    const moe_tensor *gate_inp;  /* router    [n_embd, n_expert]           */
    const moe_tensor *gate_exps; /*           [n_embd, n_ff_exp, n_expert] */
    const moe_tensor *up_exps;   /*           [n_embd, n_ff_exp, n_expert] */
    const moe_tensor *down_exps; /*           [n_ff_exp, n_embd, n_expert] */
    int32_t           n_expert_used;
    moe_gating        gating;
    bool              norm_weights;  /* renormalise the top-k weights to 1 */
    float             weights_scale; /* then multiply by this              */
} moe_moe_args;

/* Upper bounds a context fixes at creation; the backend sizes its scratch
 * from them and never allocates during a forward pass. */
typedef struct moe_backend_limits {
    int64_t n_batch;    /* tokens per forward pass                         */
    int64_t n_ctx;      /* KV cells                                        */
    int64_t max_row;    /* longest weight row (ne[0]) any product uses     */
    int64_t max_out;    /* most output rows (ne[1]) of any product         */
    int64_t n_embd;
    int64_t n_head, n_head_kv, head_dim;
    int64_t n_expert, n_expert_used, n_ff_exp;
    int64_t n_ff;       /* dense / shared-expert width, 0 if none          */
} moe_backend_limits;

typedef struct moe_backend_iface {
    int api_version; /* MOE_BACKEND_API_VERSION */

    const char *(*get_name)(void *ctx);
    void        (*free)(void *ctx);
    /* Can this backend run `op` with weights of `type` (MOE_TYPE_F32 for
     * weight-less ops)? */
    bool        (*supports_op)(void *ctx, moe_op op, moe_type type);
    /* Memory the backend can still allocate / has in all. */
    void        (*get_memory)(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes);
    moe_status  (*reserve)(void *ctx, const moe_backend_limits *lim, moe_err *err);

    void *(*buf_alloc)(void *ctx, size_t size); /* zeroed; NULL on failure */
    void  (*buf_free)(void *ctx, void *buf);
    /* A host pointer to the buffer if it is host memory, else NULL. */
    void *(*buf_host)(void *ctx, void *buf);
    void  (*buf_download)(void *ctx, void *dst_host, const void *src, size_t size);

    /* out[i] = row ids[i] of w, as floats.   out: [n][w->ne[0]] */
    void (*get_rows)(void *ctx, const moe_tensor *w, const int32_t *ids, int32_t n, float *out);
    /* out[i] = x[rows[i]]; rows ascending, so out may be x. */
    void (*gather)(void *ctx, const float *x, int64_t row_len, const int32_t *rows,
                   int32_t n, float *out);
    /* out[r] = x[r] / rms(x[r]) * w, for n_rows rows of row_len; w F32
     * [row_len]. out may be x. */
    void (*rms_norm)(void *ctx, const float *x, const moe_tensor *w, int64_t n_rows,
                     int64_t row_len, float eps, float *out);
    /* out[t] = W x[t] + b for n_tok tokens. x: [n_tok][ne0], out:
     * [n_tok][ne1]; bias F32 [ne1] or NULL. */
    void (*mul_mat)(void *ctx, const moe_tensor *w, const moe_tensor *bias, const float *x,
                    int64_t n_tok, float *out);
    /* In place on x: [n_tok][n_head][head_dim]. */
    void (*rope)(void *ctx, float *x, int64_t n_tok, const moe_rope_args *a);
    /* Stores k, v ([n_tok][n_head_kv * head_dim]) in the cache cells of the
     * view, then out[t] = softmax(q[t] K^T * scale) V over the cells token t
     * reads, per head (grouped-query: head h reads KV head
     * h / (n_head / n_head_kv)). q, out: [n_tok][n_head * head_dim]. */
    void (*attention)(void *ctx, const moe_attn_args *a, const float *q, const float *k,
                      const float *v, float *out);
    /* y += x over n floats. */
    void (*add)(void *ctx, float *y, const float *x, int64_t n);
    /* out = down(silu(gate x) * up x). */
    void (*ffn)(void *ctx, const moe_tensor *gate, const moe_tensor *up,
                const moe_tensor *down, const float *x, int64_t n_tok, float *out);
    /* out[t] = sum over the n_expert_used chosen experts of
     * weight * down_e(silu(gate_e x) * up_e x). */
    void (*moe_ffn)(void *ctx, const moe_moe_args *a, const float *x, int64_t n_tok,
                    float *out);
    /* y[t] += sigmoid(g[t]) * x[t]; rows of row_len. */
    void (*add_gated)(void *ctx, float *y, const float *x, const float *g, int64_t n_tok,
                      int64_t row_len);

    /* Waits for queued work; reports an asynchronous failure. */
    moe_status (*synchronize)(void *ctx, moe_err *err);
} moe_backend_iface;

typedef struct moe_backend {
    moe_backend_iface iface;
    void             *context;
} moe_backend;

/* Frees the backend (NULL is a no-op). */
void moe_backend_free(moe_backend *be);

/* The CPU backend. n_threads >= 1; isa NULL/"" = best for this CPU, else
 * "scalar", "avx2", "avx512" or "neon" (MOE_ERR_UNSUPPORTED if this CPU or
 * build lacks it). */
moe_status moe_backend_cpu_new(int n_threads, const char *isa, moe_backend **out,
                               moe_err *err);
/* The kernel set a CPU backend uses ("avx512", ...). */
const char *moe_backend_cpu_isa(const moe_backend *be);

#endif /* MOE_BACKEND_H */

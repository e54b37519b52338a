/*
 * tiny-model.h — writes small random-weight MoE models (qwen3moe,
 * qwen2moe, llama with experts, olmoe) as GGUF files with llama.cpp's key
 * and tensor names, for the C tests of loading and decoding. A made-up
 * vocabulary of TINY_VOCAB tokens keeps the files small. Options break
 * the file on purpose (drop a tensor, bend a shape, rename the
 * architecture) for the bad-input tests.
 */
#ifndef MOE_TINY_MODEL_H
#define MOE_TINY_MODEL_H

#include "moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TINY_VOCAB 384
#define TINY_EMBD  128
#define TINY_HEAD  4
#define TINY_KV    2
#define TINY_HD    32
#define TINY_LAYER 2
#define TINY_EXP   8
#define TINY_USED  2
#define TINY_FF    64
#define TINY_FF_SH 96

typedef struct tiny_opts {
    const char *arch;         /* architecture to build                  */
    const char *arch_name;    /* general.architecture if not arch      */
    moe_type    type;         /* matrices' type (F32, Q8_0, ...)        */
    const char *omit;         /* leave this tensor out                  */
    const char *bad_shape;    /* give this tensor one row too many      */
    uint64_t    seed;
} tiny_opts;

typedef struct tiny_writer {
    moe_gguf_writer *w;
    uint64_t         rng;
    const tiny_opts *o;
    void            *bufs[256];
    int              n_bufs;
    int              failed;
} tiny_writer;

static inline float tiny_rand(tiny_writer *t) /* about N(0, 1) */
{
    float s = 0;
    for (int i = 0; i < 4; i++) {
        t->rng ^= t->rng << 13;
        t->rng ^= t->rng >> 7;
        t->rng ^= t->rng << 17;
        s += (float)((t->rng >> 11) % 1000001) / 1000000.0f - 0.5f;
    }
    return s * 1.7320508f;
}

/* Adds a tensor [ne0, ne1, ne2] of scale * N(0,1) (+ offset), quantised to
 * the model type when `mat`. */
static inline void tiny_tensor(tiny_writer *t, const char *name, int64_t ne0, int64_t ne1,
                               int64_t ne2, float scale, float offset, int mat)
{
    if (t->o->omit && strcmp(t->o->omit, name) == 0)
        return;
    int64_t ne[3] = {ne0, ne1, ne2};
    if (t->o->bad_shape && strcmp(t->o->bad_shape, name) == 0)
        ne[ne1 > 1 ? 1 : 0] += ne1 > 1 ? 1 : 32;
    uint32_t n_dims = ne[2] > 1 ? 3 : ne[1] > 1 ? 2 : 1;
    int64_t n = ne[0] * ne[1] * ne[2];
    float *f = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        f[i] = offset + scale * tiny_rand(t);
    moe_type type = mat ? t->o->type : MOE_TYPE_F32;
    void *data = f;
    if (type != MOE_TYPE_F32) {
        size_t row = moe_type_row_bytes(type, ne[0]);
        data = malloc(row * (size_t)(n / ne[0]));
        for (int64_t r = 0; r < n / ne[0]; r++)
            if (moe_quantize_row(type, f + r * ne[0], (char *)data + r * row, ne[0]) != MOE_OK)
                t->failed = 1;
        free(f);
    }
    t->bufs[t->n_bufs++] = data;
    if (moe_gguf_writer_add_tensor(t->w, name, type, n_dims, ne, data) != MOE_OK)
        t->failed = 1;
}

static inline void tiny_key_u32(tiny_writer *t, const char *arch, const char *key, uint32_t v)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    moe_gguf_writer_set_u32(t->w, full, v);
}

/* Writes the model; returns 0 on success. */
static inline int tiny_model_write(const char *path, const tiny_opts *o)
{
    tiny_writer t = {.w = moe_gguf_writer_new(), .rng = o->seed ? o->seed : 0x1234567u, .o = o};
    const char *A = o->arch;
    const char *name = o->arch_name ? o->arch_name : A;
    moe_gguf_writer *w = t.w;
    moe_gguf_writer_set_str(w, "general.architecture", name);
    moe_gguf_writer_set_str(w, "general.name", "tiny test model");
    tiny_key_u32(&t, name, "context_length", 4096);
    tiny_key_u32(&t, name, "embedding_length", TINY_EMBD);
    tiny_key_u32(&t, name, "block_count", TINY_LAYER);
    tiny_key_u32(&t, name, "attention.head_count", TINY_HEAD);
    tiny_key_u32(&t, name, "attention.head_count_kv", TINY_KV);
    tiny_key_u32(&t, name, "attention.key_length", TINY_HD);
    tiny_key_u32(&t, name, "attention.value_length", TINY_HD);
    tiny_key_u32(&t, name, "expert_count", TINY_EXP);
    tiny_key_u32(&t, name, "expert_used_count", TINY_USED);
    const int llama_like = strcmp(A, "llama") == 0 || strcmp(A, "olmoe") == 0;
    tiny_key_u32(&t, name, "feed_forward_length", llama_like ? TINY_FF : TINY_FF * TINY_USED);
    if (!llama_like)
        tiny_key_u32(&t, name, "expert_feed_forward_length", TINY_FF);
    if (strcmp(A, "qwen2moe") == 0)
        tiny_key_u32(&t, name, "expert_shared_feed_forward_length", TINY_FF_SH);
    char key[128];
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", name);
    moe_gguf_writer_set_f32(w, key, 1e-6f);
    snprintf(key, sizeof key, "%s.rope.freq_base", name);
    moe_gguf_writer_set_f32(w, key, 10000.0f);

    /* a made-up byte-level vocabulary: "t0", "t1", ... */
    moe_str toks[TINY_VOCAB];
    char text[TINY_VOCAB][8];
    int32_t types[TINY_VOCAB];
    for (int i = 0; i < TINY_VOCAB; i++) {
        snprintf(text[i], sizeof text[i], "t%d", i);
        toks[i] = (moe_str){text[i], strlen(text[i])};
        types[i] = 1;
    }
    moe_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    moe_gguf_writer_set_str(w, "tokenizer.ggml.pre", "default");
    moe_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, TINY_VOCAB);
    moe_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", MOE_GGUF_INT32, types, TINY_VOCAB);
    moe_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", toks, 0);
    moe_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 1);

    const int64_t E = TINY_EMBD, nq = TINY_HEAD * TINY_HD, nkv = TINY_KV * TINY_HD;
    tiny_tensor(&t, "token_embd.weight", E, TINY_VOCAB, 1, 1.0f, 0, 1);
    tiny_tensor(&t, "output_norm.weight", E, 1, 1, 0.1f, 1.0f, 0);
    /* A large output scale makes the distributions sharp. */
    tiny_tensor(&t, "output.weight", E, TINY_VOCAB, 1, 6.0f / sqrtf((float)E), 0, 1);
    char n[128];
#define TN(fmt) (snprintf(n, sizeof n, fmt, il), n)
    for (int il = 0; il < TINY_LAYER; il++) {
        tiny_tensor(&t, TN("blk.%d.attn_norm.weight"), E, 1, 1, 0.1f, 1.0f, 0);
        tiny_tensor(&t, TN("blk.%d.attn_q.weight"), E, nq, 1, 1.0f / sqrtf((float)E), 0, 1);
        tiny_tensor(&t, TN("blk.%d.attn_k.weight"), E, nkv, 1, 1.0f / sqrtf((float)E), 0, 1);
        tiny_tensor(&t, TN("blk.%d.attn_v.weight"), E, nkv, 1, 1.0f / sqrtf((float)E), 0, 1);
        tiny_tensor(&t, TN("blk.%d.attn_output.weight"), nq, E, 1, 1.0f / sqrtf((float)nq), 0, 1);
        if (strcmp(A, "qwen2moe") == 0) {
            tiny_tensor(&t, TN("blk.%d.attn_q.bias"), nq, 1, 1, 0.1f, 0, 0);
            tiny_tensor(&t, TN("blk.%d.attn_k.bias"), nkv, 1, 1, 0.1f, 0, 0);
            tiny_tensor(&t, TN("blk.%d.attn_v.bias"), nkv, 1, 1, 0.1f, 0, 0);
        }
        if (strcmp(A, "qwen3moe") == 0 || strcmp(A, "olmoe") == 0) {
            int full = strcmp(A, "olmoe") == 0;
            tiny_tensor(&t, TN("blk.%d.attn_q_norm.weight"), full ? nq : TINY_HD, 1, 1, 0.1f, 1.0f, 0);
            tiny_tensor(&t, TN("blk.%d.attn_k_norm.weight"), full ? nkv : TINY_HD, 1, 1, 0.1f, 1.0f, 0);
        }
        tiny_tensor(&t, TN("blk.%d.ffn_norm.weight"), E, 1, 1, 0.1f, 1.0f, 0);
        tiny_tensor(&t, TN("blk.%d.ffn_gate_inp.weight"), E, TINY_EXP, 1, 2.0f / sqrtf((float)E), 0, 0);
        tiny_tensor(&t, TN("blk.%d.ffn_gate_exps.weight"), E, TINY_FF, TINY_EXP, 1.0f / sqrtf((float)E), 0, 1);
        tiny_tensor(&t, TN("blk.%d.ffn_up_exps.weight"), E, TINY_FF, TINY_EXP, 1.0f / sqrtf((float)E), 0, 1);
        tiny_tensor(&t, TN("blk.%d.ffn_down_exps.weight"), TINY_FF, E, TINY_EXP, 1.0f / sqrtf((float)TINY_FF), 0, 1);
        if (strcmp(A, "qwen2moe") == 0) {
            tiny_tensor(&t, TN("blk.%d.ffn_gate_inp_shexp.weight"), E, 1, 1, 1.0f / sqrtf((float)E), 0, 0);
            tiny_tensor(&t, TN("blk.%d.ffn_gate_shexp.weight"), E, TINY_FF_SH, 1, 1.0f / sqrtf((float)E), 0, 1);
            tiny_tensor(&t, TN("blk.%d.ffn_up_shexp.weight"), E, TINY_FF_SH, 1, 1.0f / sqrtf((float)E), 0, 1);
            tiny_tensor(&t, TN("blk.%d.ffn_down_shexp.weight"), TINY_FF_SH, E, 1, 1.0f / sqrtf((float)TINY_FF_SH), 0, 1);
        }
    }
#undef TN
    moe_err err = {{0}};
    if (!t.failed && moe_gguf_writer_write_file(w, path, &err) != MOE_OK) {
        fprintf(stderr, "tiny_model_write %s: %s\n", path, err.msg);
        t.failed = 1;
    }
    moe_gguf_writer_free(w);
    for (int i = 0; i < t.n_bufs; i++)
        free(t.bufs[i]);
    return t.failed;
}

#endif /* MOE_TINY_MODEL_H */

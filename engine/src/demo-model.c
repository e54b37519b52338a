/*
 * demo-model.c — writes MoeDesk's demo model: a tiny qwen3moe GGUF with
 * RANDOM weights and a byte-level tokenizer, generated at build time so that
 * every part of MoeDesk (engine, CLI, service, window) can be tried offline
 * before any real model is downloaded. Its name and description say "random
 * weights" so no screen can pass it off as a real model; what it generates
 * is noise.
 *
 * The file uses exactly llama.cpp's qwen3moe keys and tensor names, so
 * llama.cpp loads it too. The vocabulary is the 256 byte tokens of GPT-2's
 * byte-level mapping plus ChatML control tokens; there are no merges, so
 * every byte is one token. Weights come from a seeded xorshift generator:
 * the same seed gives the same file on every platform.
 */
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    DEMO_N_EMBD = 256,
    DEMO_N_LAYER = 4,
    DEMO_N_HEAD = 4,
    DEMO_N_HEAD_KV = 2,
    DEMO_HEAD_DIM = 64,
    DEMO_N_EXPERT = 8,
    DEMO_N_EXPERT_USED = 2,
    DEMO_N_FF_EXP = 256,
    DEMO_N_CTX = 4096,
};

static const char *const demo_specials[] = {
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
};
#define DEMO_N_SPECIAL (sizeof demo_specials / sizeof demo_specials[0])
#define DEMO_N_VOCAB (256 + DEMO_N_SPECIAL)

/* ChatML, written for this file (not any model's template). */
static const char demo_template[] =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

typedef struct demo_rng {
    uint64_t s;
} demo_rng;

static float demo_rand(demo_rng *r) /* uniform in [-1, 1) */
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return (float)((r->s >> 40) * (1.0 / 8388608.0) - 1.0);
}

/* GPT-2 byte-level mapping: printable bytes map to themselves, the others to
 * U+0100 upwards in byte order. Writes the UTF-8 of byte b's symbol. */
static void demo_byte_symbol(unsigned b, char out[4])
{
    unsigned cp;
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) {
        cp = b;
    } else {
        unsigned n = 0;
        for (unsigned c = 0; c < b; c++)
            if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255)))
                n++;
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

static moe_status demo_tokenizer(moe_gguf_writer *w)
{
    static char sym[256][4];
    moe_str toks[DEMO_N_VOCAB];
    int32_t types[DEMO_N_VOCAB];
    for (unsigned b = 0; b < 256; b++) {
        demo_byte_symbol(b, sym[b]);
        toks[b] = (moe_str){sym[b], strlen(sym[b])};
        types[b] = MOE_TOKEN_NORMAL;
    }
    for (size_t i = 0; i < DEMO_N_SPECIAL; i++) {
        toks[256 + i] = (moe_str){demo_specials[i], strlen(demo_specials[i])};
        types[256 + i] = MOE_TOKEN_CONTROL;
    }
    moe_status st = MOE_OK;
    if (!st) st = moe_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (!st) st = moe_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2");
    if (!st) st = moe_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, DEMO_N_VOCAB);
    if (!st) st = moe_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", MOE_GGUF_INT32, types, DEMO_N_VOCAB);
    if (!st) st = moe_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", NULL, 0);
    if (!st) st = moe_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 256 + 2);  /* <|im_end|> */
    if (!st) st = moe_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 256); /* <|endoftext|> */
    if (!st) st = moe_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 256);
    if (!st) st = moe_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);
    if (!st) st = moe_gguf_writer_set_str(w, "tokenizer.chat_template", demo_template);
    return st;
}

static moe_status demo_hparams(moe_gguf_writer *w)
{
    moe_status st = MOE_OK;
    if (!st) st = moe_gguf_writer_set_str(w, "general.architecture", "qwen3moe");
    if (!st) st = moe_gguf_writer_set_str(w, "general.name", "MoeDesk demo (random weights)");
    if (!st) st = moe_gguf_writer_set_str(w, "general.description",
        "Random weights generated at build time for trying MoeDesk offline. "
        "It is not a trained model: its output is noise.");
    if (!st) st = moe_gguf_writer_set_u32(w, "general.file_type", 7); /* mostly Q8_0 */
    if (!st) st = moe_gguf_writer_set_u32(w, "qwen3moe.context_length", DEMO_N_CTX);
    if (!st) st = moe_gguf_writer_set_u32(w, "qwen3moe.embedding_length", DEMO_N_EMBD);
    if (!st) st = moe_gguf_writer_set_u32(w, "qwen3moe.block_count", DEMO_N_LAYER);
    if (!st) st = moe_gguf_writer_set_u32(w, "qwen3moe.feed_forward_length", DEMO_N_FF_EXP * 2);
    if (!st) st = moe_gguf_writer_set_u32(w, "qwen3moe.attention.head_count", DEMO_N_HEAD);
    if (!st) st = moe_gguf_writer_set_u32(w, "qwen3moe.attention.head_count_kv", DEMO_N_HEAD_KV);
    if (!st) st = moe_gguf_writer_set_u32(w, "qwen3moe.attention.key_length", DEMO_HEAD_DIM);
    if (!st) st = moe_gguf_writer_set_u32(w, "qwen3moe.attention.value_length", DEMO_HEAD_DIM);
    if (!st) st = moe_gguf_writer_set_f32(w, "qwen3moe.rope.freq_base", 1000000.0f);
    if (!st) st = moe_gguf_writer_set_f32(w, "qwen3moe.attention.layer_norm_rms_epsilon", 1e-6f);
    if (!st) st = moe_gguf_writer_set_u32(w, "qwen3moe.expert_count", DEMO_N_EXPERT);
    if (!st) st = moe_gguf_writer_set_u32(w, "qwen3moe.expert_used_count", DEMO_N_EXPERT_USED);
    if (!st) st = moe_gguf_writer_set_u32(w, "qwen3moe.expert_feed_forward_length", DEMO_N_FF_EXP);
    return st;
}

typedef struct demo_tensor {
    char name[64];
    moe_type type;
    uint32_t n_dims;
    int64_t ne[3];
    float scale; /* 0: a norm weight, all ones */
} demo_tensor;

static uint32_t demo_list_tensors(demo_tensor *t)
{
    const int64_t E = DEMO_N_EMBD, Q = DEMO_N_HEAD * DEMO_HEAD_DIM,
                  KV = DEMO_N_HEAD_KV * DEMO_HEAD_DIM, V = DEMO_N_VOCAB;
    uint32_t n = 0;
#define DEMO_T(nm, ty, nd, a, b, c, sc)                                                  \
    do {                                                                             \
        t[n] = (demo_tensor){{0}, ty, nd, {a, b, c}, sc};                            \
        snprintf(t[n].name, sizeof t[n].name, "%s", nm);                             \
        n++;                                                                         \
    } while (0)
    DEMO_T("token_embd.weight", MOE_TYPE_Q8_0, 2, E, V, 1, 1.0f);
    for (int l = 0; l < DEMO_N_LAYER; l++) {
        char p[64];
#define DEMO_L(sfx, ty, nd, a, b, c, sc)                                                 \
    do {                                                                             \
        snprintf(p, sizeof p, "blk.%d.%s", l, sfx);                                  \
        DEMO_T(p, ty, nd, a, b, c, sc);                                              \
    } while (0)
        DEMO_L("attn_norm.weight", MOE_TYPE_F32, 1, E, 1, 1, 0.0f);
        DEMO_L("attn_q.weight", MOE_TYPE_Q8_0, 2, E, Q, 1, 1.0f / sqrtf((float)E));
        DEMO_L("attn_k.weight", MOE_TYPE_Q8_0, 2, E, KV, 1, 1.0f / sqrtf((float)E));
        DEMO_L("attn_v.weight", MOE_TYPE_Q8_0, 2, E, KV, 1, 1.0f / sqrtf((float)E));
        DEMO_L("attn_output.weight", MOE_TYPE_Q8_0, 2, Q, E, 1, 1.0f / sqrtf((float)Q));
        DEMO_L("attn_q_norm.weight", MOE_TYPE_F32, 1, DEMO_HEAD_DIM, 1, 1, 0.0f);
        DEMO_L("attn_k_norm.weight", MOE_TYPE_F32, 1, DEMO_HEAD_DIM, 1, 1, 0.0f);
        DEMO_L("ffn_norm.weight", MOE_TYPE_F32, 1, E, 1, 1, 0.0f);
        DEMO_L("ffn_gate_inp.weight", MOE_TYPE_F32, 2, E, DEMO_N_EXPERT, 1, 1.0f / sqrtf((float)E));
        DEMO_L("ffn_gate_exps.weight", MOE_TYPE_Q8_0, 3, E, DEMO_N_FF_EXP, DEMO_N_EXPERT, 1.0f / sqrtf((float)E));
        DEMO_L("ffn_up_exps.weight", MOE_TYPE_Q8_0, 3, E, DEMO_N_FF_EXP, DEMO_N_EXPERT, 1.0f / sqrtf((float)E));
        DEMO_L("ffn_down_exps.weight", MOE_TYPE_Q8_0, 3, DEMO_N_FF_EXP, E, DEMO_N_EXPERT,
               1.0f / sqrtf((float)DEMO_N_FF_EXP));
#undef DEMO_L
    }
    DEMO_T("output_norm.weight", MOE_TYPE_F32, 1, E, 1, 1, 0.0f);
    DEMO_T("output.weight", MOE_TYPE_Q8_0, 2, E, V, 1, 4.0f / sqrtf((float)E));
#undef DEMO_T
    return n;
}

moe_status moe_demo_model_write(const char *path, uint64_t seed, moe_err *err)
{
    demo_tensor tensors[2 + DEMO_N_LAYER * 12 + 2];
    uint32_t n_tensors = demo_list_tensors(tensors);
    moe_gguf_writer *w = moe_gguf_writer_new();
    if (!w)
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory", path);
    moe_status st = demo_hparams(w);
    if (!st)
        st = demo_tokenizer(w);
    for (uint32_t i = 0; i < n_tensors && !st; i++)
        st = moe_gguf_writer_add_tensor(w, tensors[i].name, tensors[i].type, tensors[i].n_dims,
                                        tensors[i].ne, NULL);
    if (st) {
        moe_gguf_writer_free(w);
        return moe_fail(err, st, "%s: building the demo model's header failed", path);
    }
    st = moe_gguf_writer_begin(w, path, err);
    demo_rng rng = {seed ? seed : 0x9E3779B97F4A7C15ull};
    float *f32 = NULL;
    void *q = NULL;
    for (uint32_t i = 0; i < n_tensors && !st; i++) {
        const demo_tensor *t = &tensors[i];
        int64_t n = t->ne[0] * t->ne[1] * t->ne[2];
        f32 = realloc(f32, (size_t)n * sizeof *f32);
        q = realloc(q, moe_type_row_bytes(t->type, n));
        if (!f32 || !q) {
            st = moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        for (int64_t j = 0; j < n; j++)
            f32[j] = t->scale == 0.0f ? 1.0f : t->scale * demo_rand(&rng) * 1.7320508f;
        st = moe_quantize_row(t->type, f32, q, n);
        if (!st)
            st = moe_gguf_writer_write_tensor_data(w, i, q, err);
    }
    if (!st)
        st = moe_gguf_writer_finish(w, err);
    free(f32);
    free(q);
    moe_gguf_writer_free(w);
    return st;
}

/*
 * make-tiny-llama.c — writes a tiny but complete "llama" model (1 layer,
 * 256 wide, random weights) around the vocabulary of a vocab-only GGUF,
 * then quantises it with moe_model_quantize to the given types, so that
 * llama.cpp itself (tests/node/quantized-model.mjs) can load and run every
 * file and compare each quantised model's next-token distribution with the
 * F32 one. A test helper, not a test.
 *
 *   make-tiny-llama VOCAB.gguf OUT_PREFIX TYPE...
 *
 * writes OUT_PREFIX-f32.gguf and OUT_PREFIX-TYPE.gguf for each TYPE.
 * Weights are a fixed pseudo-random function of the tensor and index, so
 * runs are repeatable.
 */
#include "moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_EMBD 256
#define N_FF   512
#define N_HEAD 4

static uint64_t rng_state;

static float rnd_normal(void)
{
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        s += (float)(rng_state >> 40) / (float)(1 << 24);
    }
    return (s - 2.0f) * 1.7320508f;
}

typedef struct tensor_spec {
    const char *name;
    uint32_t    n_dims;
    int64_t     ne0, ne1;
    float       scale; /* 0: a norm, all ones */
} tensor_spec;

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s VOCAB.gguf OUT_PREFIX [TYPE...]\n", argv[0]);
        return 1;
    }
    moe_err err = {{0}};
    moe_gguf *vocab = NULL;
    if (moe_gguf_open(argv[1], &vocab, &err) != MOE_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const int64_t ti = moe_gguf_find_key(vocab, "tokenizer.ggml.tokens");
    const int64_t n_vocab = ti >= 0 ? (int64_t)moe_gguf_arr_len(vocab, ti) : 0;
    if (n_vocab <= 0) {
        fprintf(stderr, "%s: no tokenizer.ggml.tokens\n", argv[1]);
        return 1;
    }

    moe_gguf_writer *w = moe_gguf_writer_new();
    moe_gguf_writer_set_str(w, "general.architecture", "llama");
    moe_gguf_writer_set_str(w, "general.name", "moedesk tiny llama");
    moe_gguf_writer_set_u32(w, "general.file_type", 0);
    moe_gguf_writer_set_u32(w, "llama.context_length", 256);
    moe_gguf_writer_set_u32(w, "llama.embedding_length", N_EMBD);
    moe_gguf_writer_set_u32(w, "llama.block_count", 1);
    moe_gguf_writer_set_u32(w, "llama.feed_forward_length", N_FF);
    moe_gguf_writer_set_u32(w, "llama.attention.head_count", N_HEAD);
    moe_gguf_writer_set_u32(w, "llama.attention.head_count_kv", N_HEAD);
    moe_gguf_writer_set_u32(w, "llama.rope.dimension_count", N_EMBD / N_HEAD);
    moe_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    moe_gguf_writer_set_f32(w, "llama.rope.freq_base", 10000.0f);
    for (int64_t i = 0; i < moe_gguf_n_kv(vocab); i++)
        if (strncmp(moe_gguf_key(vocab, i), "tokenizer.", 10) == 0)
            moe_gguf_writer_copy_kv(w, vocab, i);

    /* The output matrix is scaled up so the next-token distribution is
     * peaked enough for quantisation differences to show. */
    const tensor_spec specs[] = {
        { "token_embd.weight",        2, N_EMBD, n_vocab, 1.0f },
        { "output_norm.weight",       1, N_EMBD, 1,       0.0f },
        { "output.weight",            2, N_EMBD, n_vocab, 0.3f },
        { "blk.0.attn_norm.weight",   1, N_EMBD, 1,       0.0f },
        { "blk.0.attn_q.weight",      2, N_EMBD, N_EMBD,  0.06f },
        { "blk.0.attn_k.weight",      2, N_EMBD, N_EMBD,  0.06f },
        { "blk.0.attn_v.weight",      2, N_EMBD, N_EMBD,  0.06f },
        { "blk.0.attn_output.weight", 2, N_EMBD, N_EMBD,  0.06f },
        { "blk.0.ffn_norm.weight",    1, N_EMBD, 1,       0.0f },
        { "blk.0.ffn_gate.weight",    2, N_EMBD, N_FF,    0.06f },
        { "blk.0.ffn_up.weight",      2, N_EMBD, N_FF,    0.06f },
        { "blk.0.ffn_down.weight",    2, N_FF,   N_EMBD,  0.05f },
    };
    const int n_specs = (int)(sizeof specs / sizeof specs[0]);
    float *data[sizeof specs / sizeof specs[0]];
    for (int i = 0; i < n_specs; i++) {
        const int64_t n = specs[i].ne0 * specs[i].ne1;
        data[i] = malloc((size_t)n * sizeof(float));
        if (data[i] == NULL)
            return 1;
        rng_state = 0x9e3779b97f4a7c15ull + (uint64_t)i * 7919u;
        for (int64_t k = 0; k < n; k++)
            data[i][k] = specs[i].scale == 0.0f ? 1.0f : specs[i].scale * rnd_normal();
        const int64_t ne[2] = { specs[i].ne0, specs[i].ne1 };
        moe_gguf_writer_add_tensor(w, specs[i].name, MOE_TYPE_F32, specs[i].n_dims, ne, data[i]);
    }
    char path[4096], out[4096];
    snprintf(path, sizeof path, "%s-f32.gguf", argv[2]);
    moe_status st = moe_gguf_writer_write_file(w, path, &err);
    moe_gguf_writer_free(w);
    moe_gguf_free(vocab);
    for (int i = 0; i < n_specs; i++)
        free(data[i]);
    if (st != MOE_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    for (int a = 3; a < argc; a++) {
        moe_type t;
        if (!moe_type_from_name(argv[a], &t)) {
            fprintf(stderr, "unknown type %s\n", argv[a]);
            return 1;
        }
        snprintf(out, sizeof out, "%s-%s.gguf", argv[2], argv[a]);
        if (moe_model_quantize(path, out, t, &err) != MOE_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
    }
    return 0;
}

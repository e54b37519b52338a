/*
 * import-internal.h — the pieces of the Hugging Face importer (import.c
 * drives them) and what they pass between each other:
 *
 *   config.json ──► hf_config (hf-config.c) ──► <arch>.* hyperparameter keys
 *   *.safetensors + index ──► hf_checkpoint (hf-checkpoint.c)
 *        └─ hf_plan: every GGUF tensor, its shape and its HF source tensors
 *   tokenizer.json / tokenizer.model / tokenizer_config.json
 *        ──► hf_vocab (hf-vocab.c, hf-spm.c) + hf_special (hf-special.c)
 *        ──► tokenizer.* keys
 *
 * Every function reports bad input through a GError in
 * MOEDESK_IMPORT_ERROR whose one-line message names the file and the key,
 * tensor or byte at fault. Not part of the app's API (import.h is).
 */
#ifndef MOEDESK_IMPORT_INTERNAL_H
#define MOEDESK_IMPORT_INTERNAL_H

#include "import.h"

#include <glib.h>
#include <json-glib/json-glib.h>

/* ---- JSON helpers (hf-config.c) ---------------------------------------- */

/* Parses `dir`/`file` into *parser and returns its root object (borrowed
 * from the parser), or NULL with an error naming the file. A missing file
 * is MOEDESK_IMPORT_ERROR_INPUT "…: missing". */
JsonObject *hf_json_load(const char *dir, const char *file, JsonParser **parser,
                         GError **error);
/* The member `key` unless it is absent or JSON null. */
JsonNode   *hf_json_member(JsonObject *obj, const char *key);
/* A string member, or NULL when absent, null or not a string. */
const char *hf_json_string(JsonObject *obj, const char *key);
/* An integer member (a JSON number with no fraction). FALSE when absent or
 * null; an error (and FALSE) when present but not an integer. */
gboolean    hf_json_int(JsonObject *obj, const char *key, const char *file,
                        gint64 *out, GError **error);
/* Any JSON number as a double; FALSE when absent, null or not a number. */
gboolean    hf_json_double(JsonObject *obj, const char *key, double *out);

/* ---- config.json (hf-config.c) ----------------------------------------- */

typedef enum hf_arch {
    HF_ARCH_QWEN3MOE, /* Qwen3MoeForCausalLM  -> qwen3moe               */
    HF_ARCH_QWEN2MOE, /* Qwen2MoeForCausalLM  -> qwen2moe               */
    HF_ARCH_MIXTRAL,  /* MixtralForCausalLM   -> llama (with experts)   */
    HF_ARCH_OLMOE,    /* OlmoeForCausalLM     -> olmoe                  */
} hf_arch;

typedef struct hf_config {
    hf_arch     arch;
    const char *hf_name;     /* "Qwen3MoeForCausalLM" (static)            */
    const char *gguf_arch;   /* "qwen3moe" (static)                       */
    gint64      n_layer;     /* num_hidden_layers                         */
    gint64      n_embd;      /* hidden_size                               */
    gint64      n_head;      /* num_attention_heads                       */
    gint64      n_head_kv;   /* num_key_value_heads, else n_head          */
    gint64      head_dim;    /* head_dim, else n_embd / n_head            */
    gint64      n_vocab;     /* vocab_size                                */
    gint64      n_expert;    /* num_experts / num_local_experts           */
    gint64      n_expert_used; /* num_experts_per_tok                     */
    gint64      n_ff_exp;    /* expert width: moe_intermediate_size (Qwen)
                                or intermediate_size (Mixtral, OLMoE)     */
    gint64      n_ff_shexp;  /* shared_expert_intermediate_size, 0 if none */
    gboolean    tie_embeddings; /* tie_word_embeddings                    */
    JsonParser *parser;      /* owns `root`                               */
    JsonObject *root;
} hf_config;

hf_config *hf_config_load(const char *dir, GError **error);
void       hf_config_free(hf_config *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(hf_config, hf_config_free)

/* Writes the <arch>.* hyperparameter keys exactly as llama.cpp's
 * convert_hf_to_gguf.py derives them from config.json. */
gboolean hf_config_write_kv(const hf_config *config, moe_gguf_writer *w, GError **error);

/* ---- checkpoint and tensor plan (hf-checkpoint.c) ---------------------- */

typedef struct hf_checkpoint hf_checkpoint;

/* Opens model.safetensors.index.json and every shard it lists, or a lone
 * model.safetensors. Only headers are read. */
hf_checkpoint *hf_checkpoint_open(const char *dir, GError **error);
void           hf_checkpoint_free(hf_checkpoint *ckpt);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(hf_checkpoint, hf_checkpoint_free)
/* Sum of the shards' sizes in bytes. */
guint64        hf_checkpoint_bytes(const hf_checkpoint *ckpt);

/* One source of a GGUF tensor: rows row0 .. row0 + n_rows - 1 of a
 * checkpoint tensor seen as a [rows, ne0] matrix (all of it, except for
 * the fused expert tensors of transformers 5, of which each expert, and
 * for gate_up_proj each half, is a source). A 1-D tensor is one row. */
typedef struct hf_source {
    const moe_safetensors_tensor *t; /* borrowed from the checkpoint      */
    const char                   *file; /* its shard's file name          */
    gint64                        row0, n_rows;
} hf_source;

/* One GGUF tensor to write. A stacked expert tensor has n_expert sources
 * (one [rows, ne0] matrix each, in expert order); others have one.
 * `hf_shape` is the shape each per-expert (or the single) source has.
 * Q/K of arch llama are written with their rows permuted within each of
 * `perm_heads` heads (llama.cpp's converter does this so the GGUF holds
 * RoPE pairs as adjacent rows): GGUF row h*d + 2i + j = HF row
 * h*d + j*d/2 + i for i < d/2, j in {0, 1}, d = rows / perm_heads. */
typedef struct hf_plan_tensor {
    char      name[64];     /* GGUF name                                  */
    guint32   n_dims;
    gint64    ne[MOE_GGUF_MAX_DIMS]; /* GGUF ne, innermost first           */
    guint32   hf_n_dims;    /* expected shape of each source, outermost   */
    gint64    hf_shape[3];  /* first (safetensors order)                  */
    int       n_src;
    hf_source *src;         /* n_src entries                              */
    gint64    perm_heads;   /* 0: rows in order                           */
    moe_type  type;         /* chosen by the caller                       */
} hf_plan_tensor;

typedef struct hf_plan {
    hf_plan_tensor *tensors;
    gint64          n_tensors;
    guint64         n_params;
} hf_plan;

/* Maps every tensor of the checkpoint to its GGUF tensor for `config`'s
 * architecture, in llama.cpp's names, and checks names, shapes and dtypes
 * (F32, F16, BF16) against config.json. An unknown tensor, a missing one or
 * a shape that disagrees with config.json is an error naming the tensor
 * and its file. */
gboolean hf_plan_build(const hf_config *config, const hf_checkpoint *ckpt,
                       hf_plan *plan, GError **error);
void     hf_plan_clear(hf_plan *plan);

/* The GGUF row that HF row `r` of a permuted Q/K matrix goes to is the
 * inverse of this: the HF row holding GGUF row `out_row`. */
gint64   hf_plan_permuted_source_row(gint64 out_row, gint64 n_rows, gint64 n_heads);

/* ---- tokenizer (hf-vocab.c, hf-spm.c, hf-special.c) -------------------- */

/* The vocabulary as llama.cpp's converter writes it. */
typedef struct hf_vocab {
    const char *model;     /* tokenizer.ggml.model: "gpt2" or "llama"     */
    char       *pre;       /* tokenizer.ggml.pre                          */
    gint64      n_tokens;
    char      **tokens;    /* n_tokens owned strings                       */
    gint32     *types;     /* n_tokens moe_token_type values               */
    float      *scores;    /* n_tokens, or NULL (gpt2)                     */
    GPtrArray  *merges;    /* "a b" strings (gpt2), or NULL                */
    gboolean    check_ids; /* special ids must be below n_tokens (SPM)     */
    const char *source;    /* "tokenizer.json" or "tokenizer.model"        */
} hf_vocab;

void hf_vocab_clear(hf_vocab *vocab);

/* Loads the vocabulary of `dir` for `config`'s architecture: for llama
 * (Mixtral) tokenizer.model if present, else tokenizer.json's BPE with
 * byte fallback as a SentencePiece vocabulary, else byte-level BPE; for the
 * other architectures tokenizer.json's byte-level BPE. `tokenizer_json`
 * (may be NULL when the file is absent) and `tokenizer_config` (may be
 * NULL) are the parsed files. */
gboolean hf_vocab_load(const char *dir, const hf_config *config, JsonObject *tokenizer_json,
                       JsonObject *tokenizer_config, hf_vocab *vocab, GError **error);

/* tokenizer.model (SentencePiece ModelProto) pieces into `vocab`, padded to
 * `n_vocab` (config.json vocab_size; 0: the model's own size), with the
 * added tokens of added_tokens.json and of `tokenizer_config`'s
 * added_tokens_decoder (may be NULL) applied. */
gboolean hf_spm_load(const char *dir, gint64 n_vocab, JsonObject *tokenizer_config,
                     hf_vocab *vocab, GError **error);

/* The tokenizer.ggml.pre name for tokenizer.json's pre_tokenizer (see the
 * rule in hf-vocab.c), or NULL with an error. */
char    *hf_vocab_detect_pre(JsonObject *tokenizer_json, GError **error);

/* Writes tokenizer.ggml.* for the vocabulary plus the special token ids,
 * add_bos/add_eos/add_sep, add_space_prefix and the chat template. */
gboolean hf_tokenizer_write_kv(const char *dir, const hf_config *config, const hf_vocab *vocab,
                               JsonObject *tokenizer_json, JsonObject *tokenizer_config,
                               moe_gguf_writer *w, GError **error);

/* True for added-token texts llama.cpp's converter treats as control
 * tokens even when not marked special ("<|...|>", "<pad>", ...). */
gboolean hf_token_looks_special(const char *text);
/* A copy of `text` with every "▁" (U+2581) as a space (g_free it). */
char    *hf_metaspace_to_spaces(const char *text);

#endif /* MOEDESK_IMPORT_INTERNAL_H */

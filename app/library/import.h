/*
 * import.h — import of a Hugging Face checkpoint folder (config.json,
 * tokenizer files, safetensors shards) into one GGUF file that libmoe and
 * llama.cpp run. The result is what llama.cpp's convert_hf_to_gguf.py
 * would write (same keys, tensor names, Q/K row order, expert stacks,
 * vocabulary), quantised in the same pass with llama-quantize's per-tensor
 * policy (moe_quant_policy), so no intermediate F16/BF16 file is needed.
 *
 * Supported: Qwen3MoeForCausalLM (qwen3moe), Qwen2MoeForCausalLM
 * (qwen2moe), MixtralForCausalLM (llama with experts), OlmoeForCausalLM
 * (olmoe); safetensors in F32, F16 or BF16.
 *
 * Memory: tensors are converted in row chunks straight from the mapped
 * shards into the output file, and expert stacks are written one expert
 * at a time, so peak memory is a few MiB of buffers plus the tokenizer,
 * not the model. Pages of the shards are handed back to the OS as each
 * tensor is done.
 */
#ifndef MOEDESK_IMPORT_H
#define MOEDESK_IMPORT_H

#include "moe.h"

#include <glib.h>

#define MOEDESK_IMPORT_ERROR (moedesk_import_error_quark())
GQuark moedesk_import_error_quark(void);

typedef enum moedesk_import_error_code {
    MOEDESK_IMPORT_ERROR_INPUT,       /* a file is missing, malformed or
                                         disagrees with config.json       */
    MOEDESK_IMPORT_ERROR_UNSUPPORTED, /* well-formed, but an architecture,
                                         dtype or tokenizer we do not do  */
    MOEDESK_IMPORT_ERROR_OUTPUT,      /* writing the GGUF failed          */
} moedesk_import_error_code;

typedef struct moedesk_import_options {
    const char *dir;        /* the checkpoint folder                       */
    const char *out_path;   /* NULL: DIR/<name>-<TYPE>.gguf                */
    gboolean    type_given; /* FALSE: moedesk_import_choose_type decides   */
    moe_type    type;       /* F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K      */
    const char *name;       /* general.name; NULL: the folder's name       */
    /* The machine the planner chooses the type for when !type_given; NULL:
     * this one (moe_hw_probe). */
    const moe_machine *machine;
    /* Called after each chunk with the source bytes converted so far and
     * in total; may be NULL. */
    void      (*progress)(void *user, guint64 done, guint64 total);
    void       *progress_user;
} moedesk_import_options;

typedef struct moedesk_import_result {
    char       *out_path;   /* owned                                       */
    const char *hf_arch;    /* "Qwen3MoeForCausalLM" (static)              */
    const char *gguf_arch;  /* "qwen3moe" (static)                         */
    moe_type    type;       /* the target type used                        */
    char       *type_reason; /* why, when the planner chose it (owned)     */
    gint64      n_tensors;
    guint64     n_params;
    guint64     in_bytes;   /* safetensors shards                          */
    guint64     out_bytes;  /* the GGUF file                               */
} moedesk_import_result;

/* Imports opt->dir. On success the GGUF exists at result->out_path; on any
 * error nothing is left at that path (the file is written as
 * "<path>.tmp" and renamed when complete). `result` may be NULL. */
gboolean moedesk_import(const moedesk_import_options *opt, moedesk_import_result *result,
                        GError **error);
void     moedesk_import_result_clear(moedesk_import_result *result);

/* The target type when the user names none: the memory planner's choice
 * for `model` (hyperparameters and group_params filled; the variants are
 * added here: BF16, Q8_0, Q6_K, Q4_K_M, Q4_0) on `machine` at the default
 * context: the best quality that fits, preferring all-on-GPU, then experts
 * in RAM, then CPU only. When nothing fits, Q4_K (the smallest mixture
 * worth running); when the planner cannot run (machine unknown), Q8_0.
 * `reason` (may be NULL) gets a g_free'd line saying why. */
moe_type moedesk_import_choose_type(moe_plan_model *model, const moe_machine *machine,
                                    char **reason);

#endif /* MOEDESK_IMPORT_H */

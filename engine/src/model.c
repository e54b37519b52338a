/*
 * model.c — loading a model: open the GGUF file, pick the architecture
 * from general.architecture, read the hyperparameters every architecture
 * here shares, let the architecture claim its tensors (each checked for
 * presence, shape and type), and build the tokenizer. Every failure names
 * the file and the key or tensor at fault. The weights stay in the file
 * mapping; nothing is copied.
 */
#include "arch/arch.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

moe_model_params moe_model_default_params(void)
{
    moe_model_params p = {0};
    return p;
}

moe_status moe_model_key_u32(moe_model *m, const char *key, bool required, int32_t def,
                             int32_t *out, moe_err *err)
{
    char full[256];
    snprintf(full, sizeof full, "%s.%s", m->arch->name, key);
    int64_t i = moe_gguf_find_key(m->gguf, full);
    if (i < 0) {
        if (required)
            return moe_fail(err, MOE_ERR_NOT_FOUND, "model is missing key '%s'", full);
        *out = def;
        return MOE_OK;
    }
    if (moe_gguf_kv_type(m->gguf, i) == MOE_GGUF_ARRAY)
        return moe_fail(err, MOE_ERR_UNSUPPORTED,
                        "key '%s' is an array; per-layer values are not supported", full);
    uint64_t v;
    if (moe_gguf_get_u64(m->gguf, i, &v) != MOE_OK || v > INT32_MAX)
        return moe_fail(err, MOE_ERR_FORMAT, "key '%s' is not an integer in 0..%d", full,
                        INT32_MAX);
    *out = (int32_t)v;
    return MOE_OK;
}

moe_status moe_model_key_f32(moe_model *m, const char *key, bool required, float def,
                             float *out, moe_err *err)
{
    char full[256];
    snprintf(full, sizeof full, "%s.%s", m->arch->name, key);
    int64_t i = moe_gguf_find_key(m->gguf, full);
    if (i < 0) {
        if (required)
            return moe_fail(err, MOE_ERR_NOT_FOUND, "model is missing key '%s'", full);
        *out = def;
        return MOE_OK;
    }
    double v;
    if (moe_gguf_get_f64(m->gguf, i, &v) != MOE_OK || !isfinite(v))
        return moe_fail(err, MOE_ERR_FORMAT, "key '%s' is not a finite number", full);
    *out = (float)v;
    return MOE_OK;
}

static moe_tensor *model_find(moe_model *m, const char *name, int64_t *idx)
{
    for (int64_t i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) {
            *idx = i;
            return &m->tensors[i];
        }
    return NULL;
}

/* name = pattern with its "%d" (if any) replaced by the layer number. */
static void tensor_name(char *name, size_t cap, const char *pattern, int layer)
{
    const char *d = strstr(pattern, "%d");
    if (!d) {
        snprintf(name, cap, "%s", pattern);
        return;
    }
    snprintf(name, cap, "%.*s%d%s", (int)(d - pattern), pattern, layer, d + 2);
}

moe_status moe_model_tensor(moe_model *m, const char *fmt, int layer, int64_t ne0,
                            int64_t ne1, int64_t ne2, unsigned flags,
                            const moe_tensor **out, moe_err *err)
{
    char name[128];
    tensor_name(name, sizeof name, fmt, layer);
    *out = NULL;
    int64_t idx = -1;
    moe_tensor *t = model_find(m, name, &idx);
    if (!t) {
        if (flags & MOE_TENSOR_OPTIONAL)
            return MOE_OK;
        return moe_fail(err, MOE_ERR_NOT_FOUND, "model is missing tensor '%s' (needed by %s)",
                        name, m->arch->name);
    }
    const int64_t want[4] = {ne0, ne1, ne2 > 0 ? ne2 : 1, 1};
    if (t->ne[0] != want[0] || t->ne[1] != want[1] || t->ne[2] != want[2] || t->ne[3] != 1) {
        if (ne2 > 0)
            return moe_fail(err, MOE_ERR_FORMAT,
                            "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld]",
                            name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                            (long long)t->ne[3], (long long)want[0], (long long)want[1],
                            (long long)want[2]);
        return moe_fail(err, MOE_ERR_FORMAT,
                        "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                        name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                        (long long)t->ne[3], (long long)want[0], (long long)want[1]);
    }
    if (!moe_type_can_dequantize(t->type))
        return moe_fail(err, MOE_ERR_UNSUPPORTED,
                        "tensor '%s' has type %s, which libmoe cannot compute with yet "
                        "(requantise the model to q8_0, q4_k or q4_0)",
                        name, moe_type_name(t->type) ? moe_type_name(t->type) : "(unknown)");
    if ((flags & MOE_TENSOR_F32) && t->type != MOE_TYPE_F32)
        return moe_fail(err, MOE_ERR_UNSUPPORTED, "tensor '%s' has type %s; it must be f32", name,
                        moe_type_name(t->type));
    if (t->nb1 == 0)
        return moe_fail(err, MOE_ERR_FORMAT,
                        "tensor '%s': row length %lld is not a multiple of the %s block (%lld)",
                        name, (long long)t->ne[0], moe_type_name(t->type),
                        (long long)moe_type_block_elems(t->type));
    m->used[idx] = true;
    *out = t;
    return MOE_OK;
}

/* Hyperparameters every architecture here reads the same way. */
static moe_status model_load_hparams(moe_model *m, moe_err *err)
{
    moe_hparams *hp = &m->hp;
    moe_status st;
    if ((st = moe_model_key_u32(m, "context_length", true, 0, &hp->n_ctx_train, err)) ||
        (st = moe_model_key_u32(m, "embedding_length", true, 0, &hp->n_embd, err)) ||
        (st = moe_model_key_u32(m, "block_count", true, 0, &hp->n_layer, err)) ||
        (st = moe_model_key_u32(m, "attention.head_count", true, 0, &hp->n_head, err)) ||
        (st = moe_model_key_u32(m, "feed_forward_length", false, 0, &hp->n_ff, err)) ||
        (st = moe_model_key_u32(m, "expert_count", false, 0, &hp->n_expert, err)) ||
        (st = moe_model_key_u32(m, "expert_used_count", false, 0, &hp->n_expert_used, err)))
        return st;
    if (hp->n_embd <= 0 || hp->n_head <= 0 || hp->n_layer <= 0 || hp->n_layer > MOE_MAX_LAYERS)
        return moe_fail(err, MOE_ERR_FORMAT,
                        "%s: embedding_length %d, head_count %d, block_count %d out of range",
                        m->arch->name, hp->n_embd, hp->n_head, hp->n_layer);
    if ((st = moe_model_key_u32(m, "attention.head_count_kv", false, hp->n_head, &hp->n_head_kv, err)) ||
        (st = moe_model_key_u32(m, "attention.key_length", false, hp->n_embd / hp->n_head,
                                &hp->head_dim, err)))
        return st;
    int32_t v_len = 0;
    if ((st = moe_model_key_u32(m, "attention.value_length", false, hp->head_dim, &v_len, err)) ||
        (st = moe_model_key_u32(m, "rope.dimension_count", false, hp->head_dim, &hp->n_rot, err)))
        return st;
    if (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv != 0 || hp->head_dim <= 0 ||
        v_len != hp->head_dim || hp->n_rot <= 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return moe_fail(err, MOE_ERR_UNSUPPORTED,
                        "%s: heads %d/%d of key length %d, value length %d, rope dims %d are not supported",
                        m->arch->name, hp->n_head, hp->n_head_kv, hp->head_dim, v_len, hp->n_rot);
    if (hp->n_expert <= 0 || hp->n_expert_used <= 0 || hp->n_expert_used > hp->n_expert)
        return moe_fail(err, MOE_ERR_UNSUPPORTED,
                        "%s: expert_count %d / expert_used_count %d: not a Mixture-of-Experts model",
                        m->arch->name, hp->n_expert, hp->n_expert_used);
    int32_t ff_exp_default = hp->n_ff / hp->n_expert_used;
    if ((st = moe_model_key_u32(m, "expert_feed_forward_length", false, ff_exp_default,
                                &hp->n_ff_exp, err)) ||
        (st = moe_model_key_u32(m, "expert_shared_feed_forward_length", false, 0,
                                &hp->n_ff_shexp, err)) ||
        (st = moe_model_key_f32(m, "attention.layer_norm_rms_epsilon", true, 0, &hp->rms_eps, err)) ||
        (st = moe_model_key_f32(m, "rope.freq_base", false, 10000.0f, &hp->rope_freq_base, err)) ||
        (st = moe_model_key_f32(m, "expert_weights_scale", false, 1.0f,
                                &hp->expert_weights_scale, err)))
        return st;
    if (hp->expert_weights_scale == 0.0f)
        hp->expert_weights_scale = 1.0f;
    if ((st = moe_model_key_f32(m, "attention.scale", false, 0.0f, &hp->attn_scale, err)))
        return st;
    if (hp->attn_scale == 0.0f)
        hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);

    /* RoPE scaling: none and linear are exact here; others are refused
     * rather than silently computed wrong. */
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", m->arch->name);
    const char *scaling = moe_gguf_str_or(m->gguf, key, "none");
    float factor = 1.0f;
    if ((st = moe_model_key_f32(m, "rope.scaling.factor", false, 1.0f, &factor, err)))
        return st;
    hp->rope_freq_scale = 1.0f;
    if (strcmp(scaling, "linear") == 0 && factor > 0.0f)
        hp->rope_freq_scale = 1.0f / factor;
    else if (strcmp(scaling, "none") != 0 && !(factor == 1.0f || factor == 0.0f))
        return moe_fail(err, MOE_ERR_UNSUPPORTED, "%s: rope scaling '%s' (factor %g) is not supported",
                        m->arch->name, scaling, (double)factor);
    if (!(hp->rms_eps > 0.0f) || !(hp->rope_freq_base > 0.0f))
        return moe_fail(err, MOE_ERR_FORMAT, "%s: rms epsilon %g / rope base %g must be positive",
                        m->arch->name, (double)hp->rms_eps, (double)hp->rope_freq_base);
    return MOE_OK;
}

static moe_status model_build(moe_model *m, const char *path, moe_err *err)
{
    const char *arch_name = moe_gguf_str_or(m->gguf, "general.architecture", NULL);
    if (!arch_name)
        return moe_fail(err, MOE_ERR_FORMAT, "%s: no general.architecture key", path);
    m->arch = moe_arch_find(arch_name);
    if (!m->arch)
        return moe_fail(err, MOE_ERR_UNSUPPORTED,
                        "%s: architecture '%s' is not supported (supported: qwen3moe, qwen2moe, "
                        "llama with experts, olmoe)", path, arch_name);
    m->name = moe_gguf_str_or(m->gguf, "general.name", "");
    m->chat_template = moe_gguf_str_or(m->gguf, "tokenizer.chat_template", NULL);

    m->n_tensors = moe_gguf_n_tensors(m->gguf);
    m->tensors = calloc((size_t)(m->n_tensors > 0 ? m->n_tensors : 1), sizeof *m->tensors);
    m->used = calloc((size_t)(m->n_tensors > 0 ? m->n_tensors : 1), sizeof *m->used);
    if (!m->tensors || !m->used)
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory", path);
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const moe_gguf_tensor *g = moe_gguf_tensor_at(m->gguf, i);
        moe_tensor *t = &m->tensors[i];
        t->name = g->name;
        t->type = g->type;
        t->n_dims = (int32_t)g->n_dims;
        for (int d = 0; d < 4; d++)
            t->ne[d] = g->ne[d];
        t->nb1 = moe_type_is_known((int)g->type) ? moe_type_row_bytes(g->type, g->ne[0]) : 0;
        t->nb2 = t->nb1 * (size_t)g->ne[1];
        t->data = g->data;
        t->place = MOE_TENSOR_ON_CPU;
        uint64_t n = (uint64_t)g->ne[0] * (uint64_t)g->ne[1] * (uint64_t)g->ne[2] * (uint64_t)g->ne[3];
        m->n_params += n;
        m->n_bytes += g->size_bytes;
    }

    int64_t idx;
    const moe_tensor *emb = model_find(m, "token_embd.weight", &idx);
    if (!emb)
        return moe_fail(err, MOE_ERR_NOT_FOUND, "%s: model is missing tensor 'token_embd.weight'", path);
    if (emb->ne[1] <= 0 || emb->ne[1] > INT32_MAX)
        return moe_fail(err, MOE_ERR_FORMAT, "%s: tensor 'token_embd.weight' has %lld rows", path,
                        (long long)emb->ne[1]);
    m->hp.n_vocab = (int32_t)emb->ne[1];

    moe_status st = model_load_hparams(m, err);
    if (st != MOE_OK)
        return st;
    m->w.layers = calloc((size_t)m->hp.n_layer, sizeof *m->w.layers);
    if (!m->w.layers)
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory", path);
    if ((st = m->arch->load(m, err)) != MOE_OK)
        return st;

    if ((st = moe_vocab_load(m->gguf, &m->vocab, err)) != MOE_OK)
        return st;
    if (moe_vocab_n_tokens(m->vocab) > m->hp.n_vocab)
        return moe_fail(err, MOE_ERR_FORMAT,
                        "%s: the tokenizer has %d tokens but token_embd.weight only %d rows", path,
                        moe_vocab_n_tokens(m->vocab), m->hp.n_vocab);
    return MOE_OK;
}

moe_status moe_model_load(const char *path, const moe_model_params *params, moe_model **out,
                          moe_err *err)
{
    (void)params;
    *out = NULL;
    if (!path)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "no model path given");
    moe_model *m = calloc(1, sizeof *m);
    if (!m)
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory", path);
    moe_status st = moe_gguf_open(path, &m->gguf, err);
    if (st == MOE_OK)
        st = model_build(m, path, err);
    if (st != MOE_OK) {
        /* Messages from the helpers name the key or tensor; make sure the
         * file is named too. */
        if (err && strstr(err->msg, path) == NULL) {
            char tmp[MOE_ERR_MSG_SIZE];
            snprintf(tmp, sizeof tmp, "%s", err->msg);
            moe_fail(err, st, "%s: %s", path, tmp);
        }
        moe_model_free(m);
        return st;
    }
    *out = m;
    return MOE_OK;
}

void moe_model_free(moe_model *m)
{
    if (!m)
        return;
    moe_vocab_free(m->vocab);
    free(m->w.layers);
    free(m->tensors);
    free(m->used);
    moe_gguf_free(m->gguf);
    free(m);
}

const char *moe_model_arch(const moe_model *m) { return m->arch->name; }
const char *moe_model_name(const moe_model *m) { return m->name; }
int32_t moe_model_n_vocab(const moe_model *m) { return m->hp.n_vocab; }
int32_t moe_model_n_ctx_train(const moe_model *m) { return m->hp.n_ctx_train; }
int32_t moe_model_n_embd(const moe_model *m) { return m->hp.n_embd; }
int32_t moe_model_n_layer(const moe_model *m) { return m->hp.n_layer; }
int32_t moe_model_n_expert(const moe_model *m) { return m->hp.n_expert; }
int32_t moe_model_n_expert_used(const moe_model *m) { return m->hp.n_expert_used; }
uint64_t moe_model_n_params(const moe_model *m) { return m->n_params; }
uint64_t moe_model_size_bytes(const moe_model *m) { return m->n_bytes; }
const moe_vocab *moe_model_vocab(const moe_model *m) { return m->vocab; }
const char *moe_model_chat_template(const moe_model *m) { return m->chat_template; }
const moe_gguf *moe_model_gguf(const moe_model *m) { return m->gguf; }

/*
 * context.c — a decoding context: the backend (CPU today), the KV cache,
 * the activation buffers and per-ubatch input arrays, all allocated once
 * here; and moe_decode, which checks a batch completely before touching
 * any state, places its tokens in cache cells, prepares the inputs the
 * backend operations read (cells, RoPE angles, output rows) and runs the
 * architecture's forward pass.
 */
#include "arch/arch.h"
#include "kv-cache.h"
#include "cpu/threadpool.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct moe_context {
    const moe_model   *model;
    moe_context_params p;
    moe_backend       *be;
    moe_kv_cache       kv;

    /* activations: backend buffers of n_batch rows (see forward.h) */
    float  *x, *xb, *q, *k, *v, *att, *ffn, *sh, *sh_gate;
    float  *logits;      /* backend buffer, logits_cap rows of n_vocab      */
    float  *logits_host; /* host copy when the backend's memory is not host */
    int32_t logits_cap;

    /* per-ubatch inputs (host), [n_batch] each unless noted */
    int32_t *tok_cell, *tok_pos, *tok_seq, *out_rows;
    int32_t *batch_row;  /* batch index -> logits row, or -1              */
    float   *rope_cs;    /* [n_batch][n_rot]                              */
    double  *inv_freq;   /* [n_rot / 2]                                   */
    int32_t *seq_last;   /* [n_seq_max]                                   */

    int32_t      n_last; /* tokens in the last decoded batch */
    const float *logits_view;
};

moe_context_params moe_context_default_params(void)
{
    moe_context_params p = {
        .n_ctx = 0,
        .n_seq_max = 1,
        .n_batch = 512,
        .n_threads = 0,
        .kv_type = MOE_TYPE_F16,
    };
    return p;
}

static void ctx_free_buffers(moe_context *c)
{
    const moe_backend *be = c->be;
    if (be) {
        float *bufs[] = {c->x, c->xb, c->q, c->k, c->v, c->att, c->ffn, c->sh, c->sh_gate, c->logits};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i])
                be->iface.buf_free(be->context, bufs[i]);
        moe_kvc_free(&c->kv, be);
    }
    free(c->logits_host);
    free(c->tok_cell);
    free(c->tok_pos);
    free(c->tok_seq);
    free(c->out_rows);
    free(c->batch_row);
    free(c->rope_cs);
    free(c->inv_freq);
    free(c->seq_last);
}

void moe_context_free(moe_context *c)
{
    if (!c)
        return;
    ctx_free_buffers(c);
    moe_backend_free(c->be);
    free(c);
}

/* (Re)allocates the logits buffers for `rows` rows. */
static moe_status ctx_alloc_logits(moe_context *c, int32_t rows, moe_err *err)
{
    const moe_backend *be = c->be;
    const size_t bytes = (size_t)rows * (size_t)c->model->hp.n_vocab * sizeof(float);
    float *dev = be->iface.buf_alloc(be->context, bytes);
    float *host = NULL;
    if (dev && !be->iface.buf_host(be->context, dev))
        host = malloc(bytes);
    if (!dev || (!host && !be->iface.buf_host(be->context, dev))) {
        if (dev)
            be->iface.buf_free(be->context, dev);
        return moe_fail(err, MOE_ERR_NOMEM, "cannot allocate logits for %d rows (%llu bytes)", rows,
                        (unsigned long long)bytes);
    }
    if (c->logits)
        be->iface.buf_free(be->context, c->logits);
    free(c->logits_host);
    c->logits = dev;
    c->logits_host = host;
    c->logits_cap = rows;
    return MOE_OK;
}

static moe_status ctx_check_params(const moe_model *m, moe_context_params *p, moe_err *err)
{
    if (p->n_ctx == 0)
        p->n_ctx = m->hp.n_ctx_train > 0 && m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096;
    if (p->n_seq_max == 0)
        p->n_seq_max = 1;
    if (p->n_batch == 0)
        p->n_batch = 512;
    if (p->n_threads == 0)
        p->n_threads = moe_cpu_count();
    if (p->n_ctx < 1 || p->n_ctx > (1 << 24))
        return moe_fail(err, MOE_ERR_INVALID_ARG, "n_ctx %d out of range 1..%d", p->n_ctx, 1 << 24);
    if (p->n_seq_max < 1 || p->n_seq_max > MOE_KV_MAX_SEQ)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "n_seq_max %d out of range 1..%d", p->n_seq_max,
                        MOE_KV_MAX_SEQ);
    if (p->n_batch < 1 || p->n_batch > 65536)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "n_batch %d out of range 1..65536", p->n_batch);
    if (p->n_threads < 1 || p->n_threads > 1024)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "n_threads %d out of range 1..1024", p->n_threads);
    if (p->kv_type != MOE_TYPE_F16 && p->kv_type != MOE_TYPE_Q8_0 && p->kv_type != MOE_TYPE_F32)
        return moe_fail(err, MOE_ERR_UNSUPPORTED, "KV cache type %d not supported (use f16, q8_0 or f32)",
                        (int)p->kv_type);
    return MOE_OK;
}

/* Asks the backend whether it can run every weight's operation with the
 * weight's type, so an unsupported combination fails here, naming the
 * tensor, rather than in the middle of a forward pass. */
typedef struct ctx_use {
    const moe_tensor *t;
    moe_op            op;
} ctx_use;

static moe_status ctx_check_support(const moe_model *m, const moe_backend *be, moe_err *err)
{
    ctx_use uses[16];
    for (int il = -1; il < m->hp.n_layer; il++) {
        int n = 0;
        if (il < 0) {
            uses[n++] = (ctx_use){m->w.token_embd, MOE_OP_GET_ROWS};
            uses[n++] = (ctx_use){m->w.output, MOE_OP_MUL_MAT};
        } else {
            const moe_layer *L = &m->w.layers[il];
            const moe_tensor *mats[] = {L->wq, L->wk, L->wv, L->wo, L->ffn_gate_inp_shexp};
            for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
                uses[n++] = (ctx_use){mats[i], MOE_OP_MUL_MAT};
            uses[n++] = (ctx_use){L->ffn_gate_inp, MOE_OP_MOE_FFN};
            uses[n++] = (ctx_use){L->ffn_gate_exps, MOE_OP_MOE_FFN};
            uses[n++] = (ctx_use){L->ffn_up_exps, MOE_OP_MOE_FFN};
            uses[n++] = (ctx_use){L->ffn_down_exps, MOE_OP_MOE_FFN};
            uses[n++] = (ctx_use){L->ffn_gate_shexp, MOE_OP_FFN};
            uses[n++] = (ctx_use){L->ffn_up_shexp, MOE_OP_FFN};
            uses[n++] = (ctx_use){L->ffn_down_shexp, MOE_OP_FFN};
        }
        for (int i = 0; i < n; i++)
            if (uses[i].t && !be->iface.supports_op(be->context, uses[i].op, uses[i].t->type))
                return moe_fail(err, MOE_ERR_UNSUPPORTED, "the %s backend cannot compute with tensor "
                                "'%s' of type %s", be->iface.get_name(be->context), uses[i].t->name,
                                moe_type_name(uses[i].t->type));
    }
    return MOE_OK;
}

moe_status moe_context_new(const moe_model *m, const moe_context_params *params,
                           moe_context **out, moe_err *err)
{
    *out = NULL;
    if (!m)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "no model given");
    moe_context_params p = params ? *params : moe_context_default_params();
    moe_status st = ctx_check_params(m, &p, err);
    if (st != MOE_OK)
        return st;
    moe_context *c = calloc(1, sizeof *c);
    if (!c)
        return moe_fail(err, MOE_ERR_NOMEM, "context: out of memory");
    c->model = m;
    c->p = p;
    if ((st = moe_backend_cpu_new(p.n_threads, NULL, &c->be, err)) != MOE_OK) {
        free(c);
        return st;
    }

    const moe_hparams *hp = &m->hp;
    const int64_t nb = p.n_batch, n_embd = hp->n_embd;
    const int64_t n_q = (int64_t)hp->n_head * hp->head_dim;
    const int64_t n_kv = (int64_t)hp->n_head_kv * hp->head_dim;
    int64_t max_row = n_embd;
    if (n_q > max_row) max_row = n_q;
    if (hp->n_ff_exp > max_row) max_row = hp->n_ff_exp;
    if (hp->n_ff_shexp > max_row) max_row = hp->n_ff_shexp;
    const moe_backend_limits lim = {
        .n_batch = nb, .n_ctx = p.n_ctx, .max_row = max_row, .max_out = hp->n_vocab,
        .n_embd = n_embd, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv,
        .head_dim = hp->head_dim, .n_expert = hp->n_expert,
        .n_expert_used = hp->n_expert_used, .n_ff_exp = hp->n_ff_exp, .n_ff = hp->n_ff_shexp,
    };
    const moe_backend *be = c->be;
    if (be->iface.api_version != MOE_BACKEND_API_VERSION) {
        moe_context_free(c);
        return moe_fail(err, MOE_ERR_UNSUPPORTED, "backend API version %d, libmoe needs %d",
                        be->iface.api_version, MOE_BACKEND_API_VERSION);
    }
    if ((st = ctx_check_support(m, be, err)) != MOE_OK ||
        (st = be->iface.reserve(be->context, &lim, err)) != MOE_OK ||
        (st = moe_kvc_init(&c->kv, be, p.n_ctx, p.n_seq_max, hp->n_layer, n_kv, p.kv_type, err)) != MOE_OK) {
        moe_context_free(c);
        return st;
    }
    struct {
        float **buf;
        int64_t width;
    } acts[] = {
        {&c->x, n_embd}, {&c->xb, n_embd}, {&c->q, n_q}, {&c->k, n_kv}, {&c->v, n_kv},
        {&c->att, n_q}, {&c->ffn, n_embd}, {&c->sh, n_embd}, {&c->sh_gate, 1},
    };
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        *acts[i].buf = be->iface.buf_alloc(be->context, (size_t)(nb * acts[i].width) * sizeof(float));
        if (!*acts[i].buf) {
            moe_context_free(c);
            return moe_fail(err, MOE_ERR_NOMEM, "context: cannot allocate activations for n_batch %d",
                            p.n_batch);
        }
    }
    c->tok_cell = malloc((size_t)nb * sizeof(int32_t));
    c->tok_pos = malloc((size_t)nb * sizeof(int32_t));
    c->tok_seq = malloc((size_t)nb * sizeof(int32_t));
    c->out_rows = malloc((size_t)nb * sizeof(int32_t));
    c->batch_row = malloc((size_t)nb * sizeof(int32_t));
    c->rope_cs = malloc((size_t)(nb * hp->n_rot) * sizeof(float));
    c->inv_freq = malloc((size_t)(hp->n_rot / 2 + 1) * sizeof(double));
    c->seq_last = malloc((size_t)p.n_seq_max * sizeof(int32_t));
    if (!c->tok_cell || !c->tok_pos || !c->tok_seq || !c->out_rows || !c->batch_row ||
        !c->rope_cs || !c->inv_freq || !c->seq_last) {
        moe_context_free(c);
        return moe_fail(err, MOE_ERR_NOMEM, "context: out of memory");
    }
    /* theta_i = pos * freq_scale * base^(-2i / n_rot) */
    for (int32_t i = 0; i < hp->n_rot / 2; i++)
        c->inv_freq[i] = (double)hp->rope_freq_scale *
                         pow((double)hp->rope_freq_base, -2.0 * i / (double)hp->n_rot);
    if ((st = ctx_alloc_logits(c, p.n_seq_max, err)) != MOE_OK) {
        moe_context_free(c);
        return st;
    }
    *out = c;
    return MOE_OK;
}

/* Every check of moe_decode that needs no state change. */
static moe_status decode_check(moe_context *c, const moe_batch *b, int32_t *n_out, moe_err *err)
{
    const int32_t n = b->n_tokens;
    if (n <= 0)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "batch is empty");
    if (!b->token || !b->pos || !b->seq_id || !b->logits)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "batch arrays missing");
    if (n > c->p.n_ctx)
        return moe_fail(err, MOE_ERR_RANGE,
                        "batch of %d tokens is longer than the context (n_ctx %d)", n, c->p.n_ctx);
    if (n > c->p.n_batch)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "batch of %d tokens exceeds n_batch %d", n,
                        c->p.n_batch);
    moe_kvc_pos_max_all(&c->kv, c->seq_last);
    *n_out = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t tok = b->token[i], seq = b->seq_id[i], pos = b->pos[i];
        if (tok < 0 || tok >= c->model->hp.n_vocab)
            return moe_fail(err, MOE_ERR_INVALID_ARG,
                            "batch token %d: id %d is outside the vocabulary [0, %d)", i, tok,
                            c->model->hp.n_vocab);
        if (seq < 0 || seq >= c->p.n_seq_max)
            return moe_fail(err, MOE_ERR_INVALID_ARG,
                            "batch token %d: sequence id %d is outside [0, %d)", i, seq, c->p.n_seq_max);
        if (pos < 0 || pos <= c->seq_last[seq])
            return moe_fail(err, MOE_ERR_INVALID_ARG,
                            "batch token %d: position %d of sequence %d does not follow its "
                            "previous position %d", i, pos, seq, c->seq_last[seq]);
        c->seq_last[seq] = pos;
        if (b->logits[i])
            (*n_out)++;
    }
    if (moe_kvc_n_free(&c->kv) < n)
        return moe_fail(err, MOE_ERR_RANGE,
                        "context full: the batch needs %d cells, %d of n_ctx %d are free", n,
                        moe_kvc_n_free(&c->kv), c->p.n_ctx);
    return MOE_OK;
}

moe_status moe_decode(moe_context *c, const moe_batch *b, moe_err *err)
{
    if (!c || !b)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "no context or batch given");
    int32_t n_out = 0;
    moe_status st = decode_check(c, b, &n_out, err);
    if (st != MOE_OK)
        return st;
    if (n_out > c->logits_cap && (st = ctx_alloc_logits(c, n_out, err)) != MOE_OK)
        return st;

    const moe_model *m = c->model;
    const moe_hparams *hp = &m->hp;
    const int32_t n = b->n_tokens;
    if (!moe_kvc_find(&c->kv, n, c->tok_cell))
        return moe_fail(err, MOE_ERR_RANGE, "context full (n_ctx %d)", c->p.n_ctx);
    int32_t r = 0;
    for (int32_t i = 0; i < n; i++) {
        moe_kvc_take(&c->kv, c->tok_cell[i], b->seq_id[i], b->pos[i]);
        c->tok_pos[i] = b->pos[i];
        c->tok_seq[i] = b->seq_id[i];
        c->batch_row[i] = b->logits[i] ? r : -1;
        if (b->logits[i])
            c->out_rows[r++] = i;
        float *cs = c->rope_cs + (size_t)i * hp->n_rot;
        for (int32_t j = 0; j < hp->n_rot / 2; j++) {
            const double theta = (double)b->pos[i] * c->inv_freq[j];
            cs[2 * j] = (float)cos(theta);
            cs[2 * j + 1] = (float)sin(theta);
        }
    }
    const moe_kv_view view = {
        .n_tok = n, .tok_cell = c->tok_cell, .tok_pos = c->tok_pos, .tok_seq = c->tok_seq,
        .n_cells = c->kv.n_high, .cell_pos = c->kv.cell_pos, .cell_seqs = c->kv.cell_seqs,
    };
    moe_fwd f = {
        .model = m, .be = c->be,
        .n_tok = n, .tokens = b->token, .view = &view, .rope_cs = c->rope_cs,
        .n_out = n_out, .out_rows = c->out_rows,
        .k_cache = c->kv.k, .v_cache = c->kv.v, .kv_type = c->kv.type,
        .kv_row_bytes = c->kv.row_bytes,
        .x = c->x, .xb = c->xb, .q = c->q, .k = c->k, .v = c->v, .att = c->att,
        .ffn = c->ffn, .sh = c->sh, .sh_gate = c->sh_gate, .logits = c->logits,
    };
    m->arch->forward(&f);

    const moe_backend *be = c->be;
    if ((st = be->iface.synchronize(be->context, err)) != MOE_OK) {
        for (int32_t i = 0; i < n; i++)
            moe_kvc_drop(&c->kv, c->tok_cell[i]);
        c->n_last = 0;
        return st;
    }
    const float *host = be->iface.buf_host(be->context, c->logits);
    if (!host && n_out > 0) {
        be->iface.buf_download(be->context, c->logits_host, c->logits,
                               (size_t)n_out * (size_t)hp->n_vocab * sizeof(float));
        host = c->logits_host;
    }
    c->logits_view = host;
    c->n_last = n;
    return MOE_OK;
}

const float *moe_get_logits(const moe_context *c, int32_t i)
{
    if (!c || i < 0 || i >= c->n_last || c->batch_row[i] < 0)
        return NULL;
    return c->logits_view + (size_t)c->batch_row[i] * (size_t)c->model->hp.n_vocab;
}

int32_t moe_context_n_ctx(const moe_context *c) { return c->p.n_ctx; }
int32_t moe_context_n_batch(const moe_context *c) { return c->p.n_batch; }
int32_t moe_context_n_seq_max(const moe_context *c) { return c->p.n_seq_max; }
int32_t moe_context_n_threads(const moe_context *c) { return c->p.n_threads; }
const char *moe_context_cpu_isa(const moe_context *c) { return moe_backend_cpu_isa(c->be); }
uint64_t moe_context_kv_bytes(const moe_context *c) { return moe_kvc_bytes(&c->kv); }

/* ---- KV cache management ------------------------------------------------ */

static bool seq_ok(const moe_context *c, int32_t seq)
{
    return seq < c->p.n_seq_max;
}

bool moe_kv_seq_rm(moe_context *c, int32_t seq, int32_t p0, int32_t p1)
{
    if (!seq_ok(c, seq))
        return false;
    moe_kvc_seq_rm(&c->kv, seq, p0, p1);
    return true;
}

void moe_kv_seq_copy(moe_context *c, int32_t src, int32_t dst, int32_t p0, int32_t p1)
{
    if (src < 0 || dst < 0 || !seq_ok(c, src) || !seq_ok(c, dst))
        return;
    moe_kvc_seq_cp(&c->kv, src, dst, p0, p1);
}

void moe_kv_seq_keep(moe_context *c, int32_t seq)
{
    if (seq < 0 || !seq_ok(c, seq))
        return;
    moe_kvc_seq_keep(&c->kv, seq);
}

int32_t moe_kv_seq_pos_max(const moe_context *c, int32_t seq)
{
    if (seq < 0 || !seq_ok(c, seq))
        return -1;
    moe_kvc_pos_max_all(&c->kv, c->seq_last);
    return c->seq_last[seq];
}

int32_t moe_kv_seq_pos_min(const moe_context *c, int32_t seq)
{
    if (seq < 0 || !seq_ok(c, seq))
        return -1;
    moe_kvc_pos_min_all(&c->kv, c->seq_last);
    return c->seq_last[seq];
}

void moe_kv_clear(moe_context *c)
{
    moe_kvc_clear(&c->kv);
}

int32_t moe_kv_n_used(const moe_context *c)
{
    return c->kv.n_used;
}

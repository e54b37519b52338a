/*
 * generate.c — the decode-and-sample loop `chat` and `run` share: evaluate a
 * prompt as sequence 0 (keeping whatever prefix of it the KV cache already
 * holds), then sample token by token, streaming complete UTF-8 characters,
 * until an end-of-generation token, the token limit, a full context or an
 * interrupt. The cache bookkeeping lives in cli_gen.cached so the next
 * prompt can reuse it.
 */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static moe_status gen_fail(moe_err *err, moe_status st, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

static moe_status gen_fail(moe_err *err, moe_status st, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        g_vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return st;
}

moe_status cli_gen_init(cli_gen *g, moe_context *ctx, const moe_vocab *vocab,
                        moe_sampler *sampler, moe_err *err)
{
    g->ctx = ctx;
    g->vocab = vocab;
    g->sampler = sampler;
    g->batch = moe_batch_new(moe_context_n_batch(ctx));
    g->cached = g_array_new(FALSE, FALSE, sizeof(int32_t));
    if (!g->batch)
        return gen_fail(err, MOE_ERR_NOMEM, "out of memory for a batch");
    return MOE_OK;
}

void cli_gen_clear(cli_gen *g)
{
    moe_batch_free(g->batch);
    if (g->cached)
        g_array_unref(g->cached);
    g->batch = NULL;
    g->cached = NULL;
}

/* Evaluates toks[from..n) after the cache's first `from` tokens, logits for
 * the last one. */
static moe_status gen_eval(cli_gen *g, const int32_t *toks, guint from, guint n, moe_err *err)
{
    int32_t n_batch = moe_context_n_batch(g->ctx);
    for (guint i = from; i < n;) {
        moe_batch_clear(g->batch);
        for (; i < n && g->batch->n_tokens < n_batch; i++)
            moe_batch_add(g->batch, toks[i], (int32_t)i, 0, i + 1 == n);
        moe_status st = moe_decode(g->ctx, g->batch, err);
        if (st != MOE_OK)
            return st;
    }
    return MOE_OK;
}

bool cli_generate(cli_gen *g, const GArray *prompt, int max_tokens, FILE *out, GString *reply,
                  volatile sig_atomic_t *stop, cli_gen_stats *stats, moe_err *err)
{
    memset(stats, 0, sizeof *stats);
    int32_t n_ctx = moe_context_n_ctx(g->ctx);
    stats->n_prompt = prompt->len;
    if (prompt->len == 0 || (int64_t)prompt->len + 1 > n_ctx) {
        gen_fail(err, MOE_ERR_RANGE, "the prompt (%u tokens) does not fit the context of %d tokens",
                 prompt->len, n_ctx);
        return false;
    }
    /* Keep what the cache already holds of this prompt. */
    guint common = 0;
    while (common < g->cached->len && common < prompt->len &&
           g_array_index(g->cached, int32_t, common) == g_array_index(prompt, int32_t, common))
        common++;
    if (common == prompt->len) /* the last token's logits are needed: redo it */
        common--;
    moe_kv_seq_rm(g->ctx, 0, (int32_t)common, -1);
    g_array_set_size(g->cached, common);
    stats->n_new = prompt->len - common;

    gint64 t0 = g_get_monotonic_time();
    if (gen_eval(g, (const int32_t *)prompt->data, common, prompt->len, err) != MOE_OK) {
        moe_kv_seq_rm(g->ctx, 0, (int32_t)common, -1);
        return false;
    }
    g_array_append_vals(g->cached, &g_array_index(prompt, int32_t, common), prompt->len - common);
    gint64 t1 = g_get_monotonic_time();

    moe_detok *dt = moe_detok_new(g->vocab, false);
    moe_sampler_reset(g->sampler);
    int32_t pos = (int32_t)prompt->len;
    const float *logits = moe_get_logits(g->ctx, g->batch->n_tokens - 1);
    stats->why = "length";
    bool ok = true;
    while (stats->n_gen < max_tokens) {
        if (stop && *stop) {
            stats->why = "interrupted";
            break;
        }
        int32_t tok = moe_sampler_sample(g->sampler, logits, NULL, 0, err);
        if (tok < 0) {
            ok = false;
            break;
        }
        moe_sampler_accept(g->sampler, tok);
        stats->n_gen++;
        if (moe_vocab_is_eog(g->vocab, tok)) {
            stats->why = "stop";
            break;
        }
        char piece[1024];
        int64_t k = moe_detok_push(dt, tok, piece, sizeof piece);
        if (k > 0) {
            fwrite(piece, 1, (size_t)k, out);
            fflush(out);
            if (reply)
                g_string_append_len(reply, piece, k);
        }
        if (pos + 1 >= n_ctx) {
            stats->why = "context full";
            break;
        }
        moe_batch_clear(g->batch);
        moe_batch_add(g->batch, tok, pos, 0, true);
        if (moe_decode(g->ctx, g->batch, err) != MOE_OK) {
            ok = false;
            break;
        }
        g_array_append_val(g->cached, tok);
        pos++;
        logits = moe_get_logits(g->ctx, 0);
    }
    char tail[64];
    int64_t k = moe_detok_flush(dt, tail, sizeof tail);
    if (k > 0) {
        fwrite(tail, 1, (size_t)k, out);
        if (reply)
            g_string_append_len(reply, tail, k);
    }
    moe_detok_free(dt);
    gint64 t2 = g_get_monotonic_time();
    stats->prompt_s = (t1 - t0) / 1e6;
    stats->gen_s = (t2 - t1) / 1e6;
    if (!ok)
        stats->why = "error";
    return ok;
}

void cli_gen_print_stats(const cli_gen_stats *s)
{
    fprintf(stderr, "[%u prompt tokens (%u new) in %.2f s, %d generated at %.1f tokens/s, %s]\n",
            s->n_prompt, s->n_new, s->prompt_s, s->n_gen,
            s->n_gen > 0 && s->gen_s > 0 ? s->n_gen / s->gen_s : 0.0, s->why);
}

GArray *cli_tokenize(const moe_vocab *vocab, const char *text, size_t len, unsigned flags,
                     moe_err *err)
{
    size_t n = 0;
    moe_tokenize(vocab, text, len, flags, NULL, 0, &n, err);
    GArray *toks = g_array_sized_new(FALSE, FALSE, sizeof(int32_t), (guint)n);
    g_array_set_size(toks, (guint)n);
    size_t got = 0;
    if (moe_tokenize(vocab, text, len, flags, (int32_t *)toks->data, n, &got, err) != MOE_OK) {
        g_array_unref(toks);
        return NULL;
    }
    g_array_set_size(toks, (guint)got);
    return toks;
}

/* Used when a model file carries no chat template: ChatML, which most MoE
 * models of the catalog speak. Written here, not taken from any model. */
const char cli_fallback_chat_template[] =
    "{%- for m in messages %}{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
    "'<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/* The text of a special token, or "" (buf holds it). */
static const char *special_text(const moe_vocab *vocab, moe_special which, char *buf, size_t cap)
{
    buf[0] = 0;
    int32_t id = moe_vocab_special(vocab, which);
    if (id >= 0) {
        int64_t k = moe_token_to_piece(vocab, id, true, buf, cap - 1);
        buf[k > 0 && (size_t)k < cap ? k : 0] = 0;
    }
    return buf;
}

GArray *cli_chat_prompt(const moe_chat_template *tmpl, const moe_vocab *vocab,
                        GPtrArray *roles, GPtrArray *contents, moe_err *err)
{
    guint n = roles->len;
    g_autofree moe_chat_msg *msgs = g_new0(moe_chat_msg, n ? n : 1);
    for (guint i = 0; i < n; i++) {
        msgs[i].role = g_ptr_array_index(roles, i);
        msgs[i].content = g_ptr_array_index(contents, i);
    }
    char bos_text[128], eos_text[128];
    moe_chat_params p = {0};
    p.messages = msgs;
    p.n_messages = n;
    p.add_generation_prompt = true;
    p.bos_token = special_text(vocab, MOE_SPECIAL_BOS, bos_text, sizeof bos_text);
    p.eos_token = special_text(vocab, MOE_SPECIAL_EOS, eos_text, sizeof eos_text);
    char *prompt = NULL;
    size_t len = 0;
    if (moe_chat_template_render(tmpl, &p, &prompt, &len, err) != MOE_OK)
        return NULL;
    /* The template writes BOS itself where the model wants one; add it only
     * if the vocabulary asks for it and the prompt lacks it. */
    bool add_bos = moe_vocab_add_bos(vocab) && bos_text[0] && !g_str_has_prefix(prompt, bos_text);
    GArray *toks = cli_tokenize(vocab, prompt, len, MOE_TOKENIZE_PARSE_SPECIAL, err);
    free(prompt);
    if (toks && add_bos) {
        int32_t bos = moe_vocab_special(vocab, MOE_SPECIAL_BOS);
        g_array_prepend_val(toks, bos);
    }
    return toks;
}

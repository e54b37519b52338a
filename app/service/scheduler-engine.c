/*
 * scheduler-engine.c — the engine thread of the scheduler (scheduler.h):
 * one loop that admits queued requests into sequence slots, builds ONE
 * batch per step from every running request (the next token of each
 * decoding sequence first, then prompt chunks of the prefilling ones in
 * admission order, within n_batch tokens), runs moe_decode once, and
 * samples a token for each sequence that asked for logits.
 *
 * The lock is held only to move requests between the queue, the running
 * set and "done", and to read cancel flags; decoding, sampling and user
 * constraint callbacks run without it. Cancellation and timeouts are
 * checked before every step, so a cancelled request never gets another
 * token after the step in flight.
 *
 * Prefix reuse: a slot's cache keeps the tokens of its last request. A new
 * request takes the free slot sharing the longest prefix with its prompt
 * (ties: least recently used). If another slot, busy or free, holds a
 * longer prefix, those cells are shared into the chosen slot with
 * moe_kv_seq_copy (no copy of data, no extra cells). Cell accounting:
 * a slot never holds more than n_ctx_per_seq positions, so all slots
 * together need at most n_parallel x n_ctx_per_seq = n_ctx cells, shared
 * cells counting once; moe_decode therefore never runs out of cells.
 */
#include "scheduler-internal.h"

#include <math.h>
#include <string.h>

/* ---- finishing --------------------------------------------------------- */

/* Ends a request (queued or running) with `code` (>= 0: an error, message
 * `msg`) or with the finish reason already in g->result. Engine thread,
 * without the lock. */
static void gen_finish(svc_sched *s, svc_gen *g, int code, const char *msg)
{
    const int64_t now = g_get_monotonic_time();
    if (g->slot >= 0) {
        sched_slot *sl = &s->slots[g->slot];
        sl->gen = NULL;
        sl->last_used = ++s->clock;
        g_ptr_array_remove(s->running, g);
        g->slot = -1;
    }
    moe_sampler_free(g->sampler);
    moe_stop_matcher_free(g->stops);
    moe_detok_free(g->detok);
    g->sampler = NULL;
    g->stops = NULL;
    g->detok = NULL;
    if (g->has_constraint && g->constraint.free_user)
        g->constraint.free_user(g->constraint.user);
    g->has_constraint = false;

    svc_gen_result *r = &g->result;
    if (code >= 0) {
        r->finish = MOE_FINISH_NONE;
        r->stop_index = -1;
        r->error = g_error_new_literal(SVC_SCHED_ERROR, code, msg);
    }
    r->n_completion = g->n_gen;
    r->total_us = now - g->t_submit;
    r->ttft_us = g->n_gen > 0 ? g->t_first - g->t_submit : -1;
    r->decode_tps = g->n_gen > 1 && g->t_last > g->t_first
                        ? (double)(g->n_gen - 1) * 1e6 / (double)(g->t_last - g->t_first)
                        : 0.0;
    r->busy_us = (int64_t)(g->busy_us + 0.5);
    gen_push_done(g); /* drops the scheduler's reference: g may be gone */
}

/* ---- admission --------------------------------------------------------- */

static int32_t common_prefix(const int32_t *a, int64_t na, const int32_t *b, int64_t nb)
{
    int64_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return (int32_t)i;
}

/* Puts g into a free slot (one exists: the caller counted them). */
static void gen_admit(svc_sched *s, svc_gen *g)
{
    int32_t best = -1, best_lcp = -1, src = -1, src_lcp = 0;
    for (int32_t i = 0; i < s->p.n_parallel; i++) {
        sched_slot *sl = &s->slots[i];
        int32_t lcp = common_prefix(sl->tokens, sl->n_tokens, g->prompt, g->n_prompt);
        if (sl->gen == NULL &&
            (lcp > best_lcp || (lcp == best_lcp && sl->last_used < s->slots[best].last_used))) {
            best = i;
            best_lcp = lcp;
        }
        if (lcp > src_lcp) {
            src = i;
            src_lcp = lcp;
        }
    }
    sched_slot *dst = &s->slots[best];
    /* At least the last prompt token is evaluated, for its logits. */
    int32_t keep = best_lcp;
    if (src >= 0 && src != best && src_lcp > best_lcp) {
        keep = src_lcp;
        if (keep > g->n_prompt - 1)
            keep = (int32_t)g->n_prompt - 1;
        moe_kv_seq_rm(s->ctx, best, -1, -1);
        if (keep > 0)
            moe_kv_seq_copy(s->ctx, src, best, 0, keep);
        memcpy(dst->tokens, s->slots[src].tokens, (size_t)keep * sizeof(int32_t));
    } else {
        if (keep > g->n_prompt - 1)
            keep = (int32_t)g->n_prompt - 1;
        moe_kv_seq_rm(s->ctx, best, keep, -1);
    }
    dst->n_tokens = keep;
    dst->gen = g;
    g->slot = best;
    g->n_prompt_done = keep;
    g->prefilling = true;
    g->result.n_cached = keep;
    g->result.queue_us = g_get_monotonic_time() - g->t_submit;
    /* Penalties see the prompt, as llama.cpp's server does (the sampler
     * keeps only the last penalty_last_n). */
    for (int64_t i = 0; i < g->n_prompt; i++)
        moe_sampler_accept(g->sampler, g->prompt[i]);
    g_ptr_array_add(s->running, g);
    g_mutex_lock(&s->lock);
    s->tokens_cached += (uint64_t)keep;
    g_mutex_unlock(&s->lock);
}

/* ---- one step ---------------------------------------------------------- */

static void text_append_piece(svc_sched *s, svc_gen *g, const char *piece, size_t len,
                              int32_t *stop_index)
{
    moe_stop_result r;
    moe_err err = {{0}};
    if (moe_stop_matcher_feed(g->stops, piece, len, &r, &err) != MOE_OK)
        return; /* only allocation failures: drop the piece */
    g_string_append_len(s->text, r.text, (gssize)r.len);
    if (r.stop_index >= 0)
        *stop_index = r.stop_index;
}

/* Samples g's next token from logits row `row` and queues its text.
 * Returns 0 to go on, 1 when the request finished (result set), or an
 * error code with *msg (allocated). */
static int gen_sample(svc_sched *s, svc_gen *g, int32_t row, char **msg)
{
    const float *logits = moe_get_logits(s->ctx, row);
    if (g->max_tokens == 0) {
        g->result.finish = MOE_FINISH_LENGTH;
        return 1;
    }
    if (g->has_constraint && g->constraint.mask) {
        memcpy(s->logits, logits, (size_t)s->n_vocab * sizeof(float));
        g->constraint.mask(g->constraint.user, s->logits, s->n_vocab);
        logits = s->logits;
    }
    moe_err err = {{0}};
    size_t n_probs = 0, n_total = 0;
    if (g->n_probs > 0) {
        if (moe_sampler_probs(g->sampler, logits, NULL, 0, s->probs, (size_t)g->n_probs,
                              &n_total, &err) == MOE_OK)
            n_probs = n_total < (size_t)g->n_probs ? n_total : (size_t)g->n_probs;
    }
    int32_t tok = moe_sampler_sample(g->sampler, logits, NULL, 0, &err);
    if (tok < 0) {
        *msg = g_strdup_printf("sampling failed%s: %s",
                               g->has_constraint ? " (the constraint may have banned every token)"
                                                 : "",
                               err.msg);
        return SVC_SCHED_ERROR_ENGINE;
    }
    moe_sampler_accept(g->sampler, tok);
    if (g->has_constraint && g->constraint.accept)
        g->constraint.accept(g->constraint.user, tok);
    const int64_t now = g_get_monotonic_time();
    if (g->n_gen == 0)
        g->t_first = now;
    g->t_last = now;
    g->n_gen++;

    g_string_truncate(s->text, 0);
    int32_t stop_index = -1;
    const bool eog = !g->ignore_eog && moe_vocab_is_eog(s->vocab, tok);
    if (!eog) {
        /* Room for any piece: 16 + 3 x its length (moe_detok_push). */
        int64_t plen = moe_token_to_piece(s->vocab, tok, false, s->piece, s->piece_cap);
        size_t need = 16 + 3 * (size_t)(plen > 0 ? plen : 0) + 1;
        if (need > s->piece_cap) {
            s->piece_cap = need;
            s->piece = g_realloc(s->piece, need);
        }
        int64_t k = moe_detok_push(g->detok, tok, s->piece, s->piece_cap);
        if (k > 0)
            text_append_piece(s, g, s->piece, (size_t)k, &stop_index);
    }
    moe_finish_reason fin = moe_finish_check(eog, stop_index >= 0, g->n_gen, g->max_tokens);
    if (fin == MOE_FINISH_NONE && g->has_constraint && g->constraint.complete &&
        g->constraint.complete(g->constraint.user))
        fin = MOE_FINISH_STOP;
    if (fin == MOE_FINISH_NONE && g->n_prompt + g->n_gen >= s->p.n_ctx_per_seq)
        fin = MOE_FINISH_LENGTH; /* the sequence's context is full */
    if (fin != MOE_FINISH_NONE && stop_index < 0) {
        /* Ending without a stop string: give up what is held back. */
        int64_t k = moe_detok_flush(g->detok, s->piece, s->piece_cap);
        if (k > 0)
            text_append_piece(s, g, s->piece, (size_t)k, &stop_index);
        if (stop_index >= 0) {
            fin = MOE_FINISH_STOP;
        } else {
            moe_stop_result r = moe_stop_matcher_flush(g->stops);
            g_string_append_len(s->text, r.text, (gssize)r.len);
        }
    }
    gen_push_text(g, s->text->str, s->text->len, tok, n_probs ? s->probs : NULL, n_probs);
    if (fin == MOE_FINISH_NONE) {
        g->next_token = tok;
        return 0;
    }
    g->result.finish = fin;
    g->result.stop_index = stop_index;
    return 1;
}

/* Fills the batch: decode tokens first, then prompt chunks, FIFO. Returns
 * the number of prompt tokens in it. */
static int64_t step_build(svc_sched *s)
{
    moe_batch *b = s->batch;
    moe_batch_clear(b);
    for (guint i = 0; i < s->running->len; i++) {
        svc_gen *g = g_ptr_array_index(s->running, i);
        g->batch_count = 0;
        g->batch_logits = -1;
        if (g->prefilling)
            continue;
        sched_slot *sl = &s->slots[g->slot];
        g->batch_first = b->n_tokens;
        g->batch_logits = b->n_tokens;
        g->batch_count = 1;
        moe_batch_add(b, g->next_token, sl->n_tokens, g->slot, true);
    }
    int64_t n_prefill = 0;
    for (guint i = 0; i < s->running->len && b->n_tokens < s->p.n_batch; i++) {
        svc_gen *g = g_ptr_array_index(s->running, i);
        if (!g->prefilling)
            continue;
        sched_slot *sl = &s->slots[g->slot];
        int64_t take = g->n_prompt - g->n_prompt_done;
        if (take > s->p.n_batch - b->n_tokens)
            take = s->p.n_batch - b->n_tokens;
        g->batch_first = b->n_tokens;
        g->batch_count = (int32_t)take;
        for (int64_t k = 0; k < take; k++) {
            int64_t at = g->n_prompt_done + k;
            bool last = at == g->n_prompt - 1;
            if (last)
                g->batch_logits = b->n_tokens;
            moe_batch_add(b, g->prompt[at], sl->n_tokens + (int32_t)k, g->slot, last);
        }
        n_prefill += take;
    }
    return n_prefill;
}

/* After a successful decode: the slots' caches now hold the batch. */
static void step_commit(svc_sched *s)
{
    const moe_batch *b = s->batch;
    for (guint i = 0; i < s->running->len; i++) {
        svc_gen *g = g_ptr_array_index(s->running, i);
        if (g->batch_count == 0)
            continue;
        sched_slot *sl = &s->slots[g->slot];
        memcpy(sl->tokens + sl->n_tokens, b->token + g->batch_first,
               (size_t)g->batch_count * sizeof(int32_t));
        sl->n_tokens += g->batch_count;
        if (g->prefilling) {
            g->n_prompt_done += g->batch_count;
            if (g->n_prompt_done == g->n_prompt)
                g->prefilling = false;
        }
    }
}

static void step_run(svc_sched *s)
{
    const int64_t t0 = g_get_monotonic_time();
    const int64_t n_prefill = step_build(s);
    moe_err err = {{0}};
    /* Requests in this batch; those finishing are ended after the step's
     * time is shared out. */
    GPtrArray *in_batch = s->in_batch;
    g_ptr_array_set_size(in_batch, 0);
    for (guint i = 0; i < s->running->len; i++) {
        svc_gen *g = g_ptr_array_index(s->running, i);
        if (g->batch_count > 0)
            g_ptr_array_add(in_batch, g);
    }
    if (moe_decode(s->ctx, s->batch, &err) != MOE_OK) {
        /* The cache is as before the call: the slots stay consistent. */
        g_autofree char *msg = g_strdup_printf("decode failed: %s", err.msg);
        for (guint i = 0; i < in_batch->len; i++)
            gen_finish(s, g_ptr_array_index(in_batch, i), SVC_SCHED_ERROR_ENGINE, msg);
        return;
    }
    step_commit(s);

    int64_t n_generated = 0;
    for (guint i = 0; i < in_batch->len; i++) {
        svc_gen *g = g_ptr_array_index(in_batch, i);
        g->step_end = -1;
        if (g->batch_logits >= 0) {
            int64_t before = g->n_gen;
            int rc = gen_sample(s, g, g->batch_logits, &g->step_msg);
            n_generated += g->n_gen - before;
            g->step_end = rc == 0 ? -1 : rc == 1 ? -2 : rc;
        }
    }

    const int64_t t1 = g_get_monotonic_time();
    const double share = (double)(t1 - t0) / (double)in_batch->len;
    for (guint i = 0; i < in_batch->len; i++)
        ((svc_gen *)g_ptr_array_index(in_batch, i))->busy_us += share;

    g_mutex_lock(&s->lock);
    s->steps++;
    s->tokens_prefilled += (uint64_t)n_prefill;
    s->tokens_generated += (uint64_t)n_generated;
    s->kv_cells_used = moe_kv_n_used(s->ctx);
    g_mutex_unlock(&s->lock);

    for (guint i = 0; i < in_batch->len; i++) {
        svc_gen *g = g_ptr_array_index(in_batch, i);
        if (g->step_end == -2) {
            gen_finish(s, g, -1, NULL);
        } else if (g->step_end >= 0) {
            char *msg = g_steal_pointer(&g->step_msg);
            gen_finish(s, g, g->step_end, msg);
            g_free(msg);
        }
    }
}

/* ---- the loop ---------------------------------------------------------- */

typedef struct pending_end {
    svc_gen *gen;
    int      code;
} pending_end;

/* Under the lock: requests to end (cancelled, timed out, shut down) and
 * requests to admit. Queued requests that end leave the queue here. */
static void loop_collect(svc_sched *s, GArray *ends, GPtrArray *admit)
{
    const int64_t now = g_get_monotonic_time();
    for (GList *l = s->queue.head; l;) {
        GList *next = l->next;
        svc_gen *g = l->data;
        int code = -1;
        if (g->cancel || s->cancel_all)
            code = SVC_SCHED_ERROR_CANCELLED;
        else if (g->deadline && now >= g->deadline)
            code = SVC_SCHED_ERROR_TIMEOUT;
        if (code >= 0) {
            g_queue_delete_link(&s->queue, l);
            pending_end e = {g, code};
            g_array_append_val(ends, e);
        }
        l = next;
    }
    for (guint i = 0; i < s->running->len; i++) {
        svc_gen *g = g_ptr_array_index(s->running, i);
        int code = -1;
        if (g->cancel || s->cancel_all)
            code = SVC_SCHED_ERROR_CANCELLED;
        else if (g->deadline && now >= g->deadline)
            code = SVC_SCHED_ERROR_TIMEOUT;
        if (code >= 0) {
            pending_end e = {g, code};
            g_array_append_val(ends, e);
        }
    }
    int32_t free_slots = s->p.n_parallel - s->n_running;
    while (free_slots > 0 && s->queue.length > 0) {
        svc_gen *g = g_queue_pop_head(&s->queue);
        g->state = GEN_RUNNING;
        s->n_running++;
        free_slots--;
        g_ptr_array_add(admit, g);
    }
}

gpointer sched_engine_main(gpointer data)
{
    svc_sched *s = data;
    g_autoptr(GArray) ends = g_array_new(FALSE, FALSE, sizeof(pending_end));
    g_autoptr(GPtrArray) admit = g_ptr_array_new();
    g_mutex_lock(&s->lock);
    for (;;) {
        g_array_set_size(ends, 0);
        g_ptr_array_set_size(admit, 0);
        loop_collect(s, ends, admit);
        if (ends->len == 0 && admit->len == 0 && s->running->len == 0) {
            if (s->quit && s->queue.length == 0)
                break;
            g_cond_wait(&s->cond, &s->lock);
            continue;
        }
        g_mutex_unlock(&s->lock);
        for (guint i = 0; i < ends->len; i++) {
            pending_end *e = &g_array_index(ends, pending_end, i);
            gen_finish(s, e->gen, e->code,
                       e->code == SVC_SCHED_ERROR_TIMEOUT ? "the request ran past its timeout"
                                                          : "the request was cancelled");
        }
        for (guint i = 0; i < admit->len; i++)
            gen_admit(s, g_ptr_array_index(admit, i));
        if (s->running->len > 0)
            step_run(s);
        g_mutex_lock(&s->lock);
    }
    g_mutex_unlock(&s->lock);
    return NULL;
}

void sched_engine_free(svc_sched *s)
{
    moe_context_free(s->ctx);
    moe_batch_free(s->batch);
    s->ctx = NULL;
    s->batch = NULL;
    if (s->slots)
        for (int32_t i = 0; i < s->p.n_parallel; i++)
            g_free(s->slots[i].tokens);
    g_clear_pointer(&s->slots, g_free);
    g_clear_pointer(&s->running, g_ptr_array_unref);
    g_clear_pointer(&s->in_batch, g_ptr_array_unref);
    g_clear_pointer(&s->logits, g_free);
    g_clear_pointer(&s->probs, g_free);
    if (s->text)
        g_string_free(s->text, TRUE);
    s->text = NULL;
    g_clear_pointer(&s->piece, g_free);
    if (s->main_context)
        g_main_context_unref(s->main_context);
    s->main_context = NULL;
}

/*
 * scheduler.c — the scheduler's public side (scheduler.h): parameters,
 * creating and freeing the scheduler, submitting and cancelling requests,
 * and delivering their events on the main context. The engine thread
 * itself (admission, batching, sampling) is scheduler-engine.c; what the
 * two share, and who owns what, is scheduler-internal.h.
 *
 * Event delivery: every request has its own event queue (under the
 * scheduler's lock) and at most one idle source attached to the main
 * context at a time. The source holds a reference on the request, drains
 * the queue in order and never delivers anything after on_done, so
 * callbacks arrive in the order the engine produced them and never touch
 * a freed request. g_main_context_invoke is not used on purpose: it runs
 * the function at once on the calling thread when the context is free,
 * which would put callbacks on the engine thread.
 */
#include "scheduler-internal.h"

#include <string.h>

G_DEFINE_QUARK(svc-sched-error-quark, svc_sched_error)

void svc_sched_params_init(svc_sched_params *p)
{
    memset(p, 0, sizeof *p);
    p->kv_type = MOE_TYPE_F16;
}

void svc_gen_params_init(svc_gen_params *p)
{
    memset(p, 0, sizeof *p);
    p->sampling = moe_sampler_params_default();
    p->sampling.temperature = 0.0f;
    p->max_tokens = -1;
}

/* ---- scheduler lifetime ------------------------------------------------ */

static bool sched_resolve_params(const moe_model *model, const svc_sched_params *in,
                                 svc_sched_params *p, GError **error)
{
    if (in)
        *p = *in;
    else
        svc_sched_params_init(p);
    if (p->n_parallel == 0)
        p->n_parallel = 4;
    if (p->n_ctx_per_seq == 0) {
        int32_t train = moe_model_n_ctx_train(model);
        p->n_ctx_per_seq = train > 0 && train < 4096 ? train : 4096;
    }
    if (p->n_batch == 0)
        p->n_batch = 512;
    if (p->queue_max == 0)
        p->queue_max = 64;
    const char *bad = NULL;
    int32_t val = 0;
    if (p->n_parallel < 1 || p->n_parallel > 64)
        bad = "n_parallel (1..64)", val = p->n_parallel;
    else if (p->n_ctx_per_seq < 1 || (int64_t)p->n_ctx_per_seq * p->n_parallel > (1 << 30))
        bad = "n_ctx_per_seq (n_parallel x n_ctx_per_seq at most 2^30)", val = p->n_ctx_per_seq;
    else if (p->n_batch < 1 || p->n_batch > 65536)
        bad = "n_batch (1..65536)", val = p->n_batch;
    else if (p->n_threads < 0)
        bad = "n_threads (>= 0)", val = p->n_threads;
    else if (p->queue_max < 0)
        bad = "queue_max (>= 0)", val = p->queue_max;
    if (bad) {
        g_set_error(error, SVC_SCHED_ERROR, SVC_SCHED_ERROR_INVALID,
                    "scheduler parameter %s out of range: %d", bad, val);
        return false;
    }
    /* Every running sequence puts its next token into each step, so a step
     * must hold one token per slot. */
    if (p->n_batch < p->n_parallel)
        p->n_batch = p->n_parallel;
    return true;
}

svc_sched *svc_sched_new(const moe_model *model, const svc_sched_params *params, GError **error)
{
    g_return_val_if_fail(model != NULL, NULL);
    svc_sched_params p;
    if (!sched_resolve_params(model, params, &p, error))
        return NULL;

    moe_context_params cp = moe_context_default_params();
    cp.n_ctx = p.n_parallel * p.n_ctx_per_seq;
    cp.n_seq_max = p.n_parallel;
    cp.n_batch = p.n_batch;
    cp.n_threads = p.n_threads;
    cp.kv_type = p.kv_type;
    moe_err err = {{0}};
    moe_context *ctx = NULL;
    if (moe_context_new(model, &cp, &ctx, &err) != MOE_OK) {
        g_set_error(error, SVC_SCHED_ERROR, SVC_SCHED_ERROR_ENGINE,
                    "scheduler: cannot create a context of %d sequences x %d tokens: %s",
                    p.n_parallel, p.n_ctx_per_seq, err.msg);
        return NULL;
    }

    svc_sched *s = g_new0(svc_sched, 1);
    s->ref_count = 1;
    g_mutex_init(&s->lock);
    g_cond_init(&s->cond);
    g_queue_init(&s->queue);
    s->model = model;
    s->vocab = moe_model_vocab(model);
    s->n_vocab = moe_model_n_vocab(model);
    s->ctx = ctx;
    s->cpu_isa = moe_context_cpu_isa(ctx);
    s->n_threads = moe_context_n_threads(ctx);
    s->kv_bytes = moe_context_kv_bytes(ctx);
    s->main_context = p.main_context ? g_main_context_ref(p.main_context)
                                     : g_main_context_ref(g_main_context_default());
    p.main_context = s->main_context;
    s->p = p;

    s->batch = moe_batch_new(p.n_batch);
    s->slots = g_new0(sched_slot, p.n_parallel);
    for (int32_t i = 0; i < p.n_parallel; i++)
        s->slots[i].tokens = g_new(int32_t, p.n_ctx_per_seq);
    s->running = g_ptr_array_new();
    s->in_batch = g_ptr_array_new();
    s->logits = g_new(float, s->n_vocab);
    s->probs = g_new(moe_token_prob, s->n_vocab);
    s->text = g_string_new(NULL);
    s->piece_cap = 256;
    s->piece = g_malloc(s->piece_cap);
    if (!s->batch) {
        g_set_error(error, SVC_SCHED_ERROR, SVC_SCHED_ERROR_ENGINE,
                    "scheduler: out of memory for a batch of %d tokens", p.n_batch);
        sched_engine_free(s);
        sched_unref(s);
        return NULL;
    }

    GError *terr = NULL;
    s->thread = g_thread_try_new("moe-sched", sched_engine_main, s, &terr);
    if (!s->thread) {
        g_set_error(error, SVC_SCHED_ERROR, SVC_SCHED_ERROR_ENGINE,
                    "scheduler: cannot start the engine thread: %s", terr->message);
        g_error_free(terr);
        sched_engine_free(s);
        sched_unref(s);
        return NULL;
    }
    return s;
}

void sched_unref(svc_sched *s)
{
    if (!s || !g_atomic_int_dec_and_test(&s->ref_count))
        return;
    /* Only the shell is left: the engine part went with svc_sched_free. */
    g_mutex_clear(&s->lock);
    g_cond_clear(&s->cond);
    g_free(s);
}

void svc_sched_shutdown(svc_sched *s, bool cancel_running)
{
    g_return_if_fail(s != NULL);
    g_mutex_lock(&s->lock);
    s->shutdown = true;
    if (cancel_running)
        s->cancel_all = true;
    g_cond_signal(&s->cond);
    g_mutex_unlock(&s->lock);
}

void svc_sched_free(svc_sched *s)
{
    if (!s)
        return;
    g_mutex_lock(&s->lock);
    s->shutdown = true;
    s->cancel_all = true;
    s->quit = true;
    g_cond_signal(&s->cond);
    g_mutex_unlock(&s->lock);
    /* The engine thread finishes every request (on_done queued) before it
     * returns, so nothing refers to the engine part afterwards. */
    g_thread_join(s->thread);
    s->thread = NULL;
    sched_engine_free(s);
    sched_unref(s);
}

/* ---- requests ---------------------------------------------------------- */

static void gen_free(svc_gen *g)
{
    gen_event *e;
    while ((e = g_queue_pop_head(&g->events)))
        g_free(e);
    /* Set only when submit failed before the engine saw the request; the
     * engine frees these itself when the request finishes. */
    moe_sampler_free(g->sampler);
    moe_stop_matcher_free(g->stops);
    moe_detok_free(g->detok);
    if (g->has_constraint && g->constraint.free_user)
        g->constraint.free_user(g->constraint.user);
    g_clear_error(&g->result.error);
    g_free(g->prompt);
    svc_sched *s = g->sched;
    g_free(g);
    sched_unref(s);
}

svc_gen *svc_gen_ref(svc_gen *g)
{
    g_return_val_if_fail(g != NULL, NULL);
    g_atomic_int_inc(&g->ref_count);
    return g;
}

void svc_gen_unref(svc_gen *g)
{
    if (g && g_atomic_int_dec_and_test(&g->ref_count))
        gen_free(g);
}

void svc_gen_cancel(svc_gen *g)
{
    g_return_if_fail(g != NULL);
    svc_sched *s = g->sched;
    g_mutex_lock(&s->lock);
    if (g->state != GEN_DONE && !g->cancel) {
        g->cancel = true;
        g_cond_signal(&s->cond);
    }
    g_mutex_unlock(&s->lock);
}

/* Checks what can be checked without the lock and builds the engine-side
 * helpers; false with *error set. */
static bool gen_prepare(svc_sched *s, svc_gen *g, const svc_gen_params *p, GError **error)
{
    if (!p->prompt || p->n_prompt == 0) {
        g_set_error(error, SVC_SCHED_ERROR, SVC_SCHED_ERROR_INVALID, "the prompt is empty");
        return false;
    }
    for (size_t i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] < 0 || p->prompt[i] >= s->n_vocab) {
            g_set_error(error, SVC_SCHED_ERROR, SVC_SCHED_ERROR_INVALID,
                        "prompt token %zu: id %d is outside the vocabulary [0, %d)", i,
                        p->prompt[i], s->n_vocab);
            return false;
        }
    if (p->n_probs < 0) {
        g_set_error(error, SVC_SCHED_ERROR, SVC_SCHED_ERROR_INVALID,
                    "n_probs %d is negative", p->n_probs);
        return false;
    }
    const int64_t n_ctx = s->p.n_ctx_per_seq;
    if ((int64_t)p->n_prompt > n_ctx ||
        (p->max_tokens >= 0 && p->max_tokens > n_ctx - (int64_t)p->n_prompt)) {
        g_set_error(error, SVC_SCHED_ERROR, SVC_SCHED_ERROR_CONTEXT,
                    "the prompt (%zu tokens) plus max_tokens (%lld) does not fit the context "
                    "of %lld tokens per sequence", p->n_prompt,
                    (long long)(p->max_tokens >= 0 ? p->max_tokens : 0), (long long)n_ctx);
        return false;
    }
    moe_err err = {{0}};
    if (moe_sampler_new(s->n_vocab, &p->sampling, &g->sampler, &err) != MOE_OK) {
        g_set_error(error, SVC_SCHED_ERROR, SVC_SCHED_ERROR_INVALID, "sampling: %s", err.msg);
        return false;
    }
    if (moe_stop_matcher_new(p->n_stops ? (const char *const *)p->stops : NULL, p->n_stops,
                             &g->stops, &err) != MOE_OK) {
        g_set_error(error, SVC_SCHED_ERROR, SVC_SCHED_ERROR_INVALID, "stop strings: %s", err.msg);
        return false;
    }
    g->detok = moe_detok_new(s->vocab, false);
    if (!g->detok) {
        g_set_error(error, SVC_SCHED_ERROR, SVC_SCHED_ERROR_ENGINE,
                    "out of memory for a detokenizer");
        return false;
    }
    return true;
}

svc_gen *svc_sched_submit(svc_sched *s, const svc_gen_params *p, const svc_gen_events *ev,
                          GError **error)
{
    g_return_val_if_fail(s != NULL && p != NULL, NULL);
    svc_gen *g = g_new0(svc_gen, 1);
    g->ref_count = 1; /* the caller's; the scheduler's is added once queued */
    g_atomic_int_inc(&s->ref_count);
    g->sched = s;
    g->slot = -1;
    g->t_submit = g_get_monotonic_time();
    if (p->constraint) {
        g->constraint = *p->constraint;
        g->has_constraint = true;
    }
    if (ev)
        g->ev = *ev;
    g_queue_init(&g->events);
    g->result.stop_index = -1;
    g->result.ttft_us = -1;

    if (!gen_prepare(s, g, p, error)) {
        svc_gen_unref(g); /* frees the helpers and the constraint's user */
        return NULL;
    }
    g->prompt = g_memdup2(p->prompt, p->n_prompt * sizeof(int32_t));
    g->n_prompt = (int64_t)p->n_prompt;
    g->result.n_prompt = g->n_prompt;
    g->max_tokens = p->max_tokens;
    g->ignore_eog = p->ignore_eog;
    g->n_probs = p->n_probs < s->n_vocab ? p->n_probs : s->n_vocab;
    g->deadline = p->timeout_ms > 0 ? g->t_submit + p->timeout_ms * 1000 : 0;

    g_mutex_lock(&s->lock);
    int code = -1;
    if (s->shutdown)
        code = SVC_SCHED_ERROR_SHUTDOWN;
    /* Requests the engine has not admitted yet may use the free slots; the
     * queue proper is what waits beyond them. */
    else if ((int64_t)s->queue.length >=
             (int64_t)s->p.queue_max + (s->p.n_parallel - s->n_running))
        code = SVC_SCHED_ERROR_QUEUE_FULL;
    if (code < 0) {
        g->state = GEN_QUEUED;
        g_atomic_int_inc(&g->ref_count); /* the scheduler's */
        g_queue_push_tail(&s->queue, g);
        g_cond_signal(&s->cond);
    }
    g_mutex_unlock(&s->lock);
    if (code == SVC_SCHED_ERROR_SHUTDOWN) {
        g_set_error(error, SVC_SCHED_ERROR, code, "the scheduler is shutting down");
    } else if (code == SVC_SCHED_ERROR_QUEUE_FULL) {
        g_set_error(error, SVC_SCHED_ERROR, code,
                    "the request queue is full (%d waiting beyond %d slots)", s->p.queue_max,
                    s->p.n_parallel);
    }
    if (code >= 0) {
        svc_gen_unref(g);
        return NULL;
    }
    return g;
}

/* ---- event delivery ---------------------------------------------------- */

/* Runs on the main context. Delivers what is queued now; if the engine
 * added more meanwhile, stays attached for another round rather than
 * looping here, so a fast stream cannot starve the main loop. */
static gboolean gen_dispatch(gpointer data)
{
    svc_gen *g = data;
    svc_sched *s = g->sched;
    g_mutex_lock(&s->lock);
    GQueue local = g->events;
    g_queue_init(&g->events);
    g_mutex_unlock(&s->lock);

    gen_event *e;
    while ((e = g_queue_pop_head(&local))) {
        if (!g->done_delivered) {
            if (e->done) {
                g->done_delivered = true;
                if (g->ev.on_done)
                    g->ev.on_done(g, &g->result, g->ev.user);
            } else if (g->ev.on_text) {
                g->ev.on_text(g, e->text, e->len, e->token, e->probs, e->n_probs, g->ev.user);
            }
        }
        g_free(e);
    }

    g_mutex_lock(&s->lock);
    gboolean again = !g->done_delivered && g->events.length > 0;
    if (!again)
        g->dispatch_pending = false;
    g_mutex_unlock(&s->lock);
    return again ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
}

static void gen_dispatch_destroy(gpointer data)
{
    svc_gen_unref(data);
}

/* Call with s->lock held. */
static void gen_queue_event_locked(svc_gen *g, gen_event *e)
{
    g_queue_push_tail(&g->events, e);
    if (g->dispatch_pending)
        return;
    g->dispatch_pending = true;
    GSource *src = g_idle_source_new();
    g_source_set_priority(src, G_PRIORITY_DEFAULT);
    g_source_set_static_name(src, "svc-gen-events");
    g_source_set_callback(src, gen_dispatch, svc_gen_ref(g), gen_dispatch_destroy);
    g_source_attach(src, g->sched->main_context);
    g_source_unref(src);
}

void gen_push_text(svc_gen *g, const char *text, size_t len, int32_t token,
                   const moe_token_prob *probs, size_t n_probs)
{
    size_t probs_bytes = n_probs * sizeof(moe_token_prob);
    gen_event *e = g_malloc(sizeof *e + probs_bytes + len + 1);
    e->done = false;
    e->token = token;
    e->probs = n_probs ? (moe_token_prob *)(void *)(e + 1) : NULL;
    e->n_probs = n_probs;
    if (n_probs)
        memcpy(e->probs, probs, probs_bytes);
    e->text = (char *)(e + 1) + probs_bytes;
    e->len = len;
    if (len)
        memcpy(e->text, text, len);
    e->text[len] = 0;
    g_mutex_lock(&g->sched->lock);
    gen_queue_event_locked(g, e);
    g_mutex_unlock(&g->sched->lock);
}

void gen_push_done(svc_gen *g)
{
    svc_sched *s = g->sched;
    gen_event *e = g_new0(gen_event, 1);
    e->done = true;
    e->text = NULL;
    g_mutex_lock(&s->lock);
    if (g->state == GEN_RUNNING)
        s->n_running--;
    g->state = GEN_DONE;
    gen_queue_event_locked(g, e);
    g_mutex_unlock(&s->lock);
    /* The dispatch source now keeps the request alive until on_done ran. */
    svc_gen_unref(g);
}

/* ---- stats ------------------------------------------------------------- */

void svc_sched_get_stats(svc_sched *s, svc_sched_stats *out)
{
    g_return_if_fail(s != NULL && out != NULL);
    memset(out, 0, sizeof *out);
    g_mutex_lock(&s->lock);
    out->n_parallel = s->p.n_parallel;
    out->running = s->n_running;
    out->queued = (int32_t)s->queue.length;
    out->queue_max = s->p.queue_max;
    out->n_ctx_per_seq = s->p.n_ctx_per_seq;
    out->kv_cells_used = s->kv_cells_used;
    out->kv_cells_total = s->p.n_parallel * s->p.n_ctx_per_seq;
    out->kv_bytes = s->kv_bytes;
    out->steps = s->steps;
    out->tokens_prefilled = s->tokens_prefilled;
    out->tokens_cached = s->tokens_cached;
    out->tokens_generated = s->tokens_generated;
    out->cpu_isa = s->cpu_isa;
    out->n_threads = s->n_threads;
    g_mutex_unlock(&s->lock);
}

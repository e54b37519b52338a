/*
 * scheduler.h — the service's engine thread: many generation requests share
 * one loaded model and one KV cache, and each engine step runs ONE
 * moe_decode over a batch that mixes the next token of every running
 * sequence with chunks of the prompts of newly admitted ones (continuous
 * batching with chunked prefill).
 *
 * Threads: the scheduler owns one engine thread. svc_sched_submit /
 * svc_gen_cancel / svc_sched_get_stats are called from the GLib main thread
 * (any thread is safe). Every event callback (on_text, on_done) is invoked
 * on the GMainContext given in svc_sched_params (via g_main_context_invoke
 * or an equivalent idle source), never on the engine thread, so handlers
 * may touch libsoup objects directly.
 *
 * Admission is FIFO: a request waits in a bounded queue until one of the
 * n_parallel sequence slots is free; a full queue makes svc_sched_submit
 * fail with SVC_SCHED_ERROR_QUEUE_FULL (the HTTP layer answers 429 with
 * Retry-After). A request whose prompt + max_tokens cannot fit the
 * per-sequence context fails at submit with SVC_SCHED_ERROR_CONTEXT (never
 * silently truncated).
 *
 * Prefix reuse: a finished sequence's tokens stay in its slot's KV cells.
 * A new request goes to the free slot whose cached tokens share the longest
 * prefix with its prompt (ties: least recently used); that prefix is not
 * evaluated again and is reported as n_cached. (Cells may also be shared
 * between slots with moe_kv_seq_copy.) At least the last prompt token is
 * always evaluated, to get its logits.
 *
 * Determinism: sampled requests with a fixed seed are reproducible for the
 * same logits. Greedy requests give the same tokens alone or batched: the
 * engine's logits for a token are bit-identical whatever else shares its
 * batch, with every kernel set (test-batch-invariance, test-scheduler).
 */
#ifndef MOEDESK_SCHEDULER_H
#define MOEDESK_SCHEDULER_H

#include <glib.h>
#include <moe.h>

G_BEGIN_DECLS

#define SVC_SCHED_ERROR (svc_sched_error_quark())
GQuark svc_sched_error_quark(void);

typedef enum {
    SVC_SCHED_ERROR_QUEUE_FULL, /* bounded queue full: retry later (429)          */
    SVC_SCHED_ERROR_CONTEXT,    /* prompt (+ max_tokens) over the per-seq context */
    SVC_SCHED_ERROR_INVALID,    /* bad parameters (empty prompt, bad sampling...)  */
    SVC_SCHED_ERROR_ENGINE,     /* the engine failed (moe_decode error)           */
    SVC_SCHED_ERROR_CANCELLED,  /* svc_gen_cancel or the scheduler shut down      */
    SVC_SCHED_ERROR_TIMEOUT,    /* the request ran past its timeout               */
    SVC_SCHED_ERROR_SHUTDOWN,   /* submit after svc_sched_shutdown                 */
} svc_sched_error;

typedef struct svc_sched_params {
    int32_t n_parallel;     /* sequence slots (1..64); 0 = 4                     */
    int32_t n_ctx_per_seq;  /* context per sequence; 0 = min(n_ctx_train, 4096)  */
    int32_t n_batch;        /* tokens per engine step; 0 = 512                    */
    int32_t n_threads;      /* CPU threads; 0 = all                               */
    int32_t queue_max;      /* waiting requests beyond the slots; 0 = 64          */
    moe_type kv_type;       /* MOE_TYPE_F16 default (set explicitly)              */
    GMainContext *main_context; /* where callbacks run; NULL = the default one  */
} svc_sched_params;

void svc_sched_params_init(svc_sched_params *p);

/* An optional constraint on what may be generated (e.g. JSON mode, see
 * prompt.h). Runs on the engine thread: `mask` may set logits to -INFINITY
 * before each sample (at least one token must survive, else the request
 * fails with SVC_SCHED_ERROR_ENGINE); `accept` is told every sampled token;
 * `complete` (optional) returning true ends the request with
 * MOE_FINISH_STOP after the token just accepted. The scheduler takes
 * ownership of `user` and calls `free_user` once when the request is done
 * (or when submit fails). */
typedef struct svc_gen_constraint {
    void (*mask)(void *user, float *logits, int32_t n_vocab);
    void (*accept)(void *user, int32_t token);
    bool (*complete)(void *user);
    void (*free_user)(void *user);
    void *user;
} svc_gen_constraint;

/* One generation request. Everything is copied by svc_sched_submit. */
typedef struct svc_gen_params {
    const int32_t *prompt;   /* prompt tokens (BOS etc. already added), n >= 1  */
    size_t n_prompt;
    moe_sampler_params sampling; /* checked with moe_sampler_params_check        */
    const char *const *stops;    /* stop strings (text never shows them)         */
    size_t n_stops;
    int64_t max_tokens;      /* < 0: until the per-sequence context is full      */
    bool ignore_eog;         /* keep going past end-of-generation tokens         */
    int64_t timeout_ms;      /* <= 0: none; counted from submit                  */
    int32_t n_probs;         /* > 0: report the top n_probs candidates per token */
    const svc_gen_constraint *constraint; /* NULL: none; struct copied       */
} svc_gen_params;

void svc_gen_params_init(svc_gen_params *p); /* greedy, no stops, max_tokens -1 */

/* What a finished (or failed) request did. Times are monotonic microseconds
 * relative to submit. */
typedef struct svc_gen_result {
    moe_finish_reason finish;  /* EOG / STOP / LENGTH; NONE when error != NULL  */
    int32_t stop_index;        /* the stop string that matched, or -1           */
    GError *error;             /* SVC_SCHED_ERROR_*; NULL on success; borrowed  */
    int64_t n_prompt;          /* prompt tokens                                  */
    int64_t n_cached;          /* of them, served from the KV cache              */
    int64_t n_completion;      /* tokens generated (EOG token included)          */
    int64_t queue_us;          /* submit -> admitted into a slot                 */
    int64_t ttft_us;           /* submit -> first token sampled; -1 = none       */
    int64_t total_us;          /* submit -> done                                 */
    double  decode_tps;        /* (n_completion-1) / (last - first token time)   */
    int64_t busy_us;           /* engine time attributed to this request: each
                                  step's wall time divided among its sequences  */
} svc_gen_result;

typedef struct svc_gen svc_gen;

typedef struct svc_gen_events {
    /* Text that is safe to show (stop strings held back, whole UTF-8
     * characters), with the token that completed it; may be called with
     * len 0 when a token's text is held back. `probs` (n_probs entries,
     * or NULL) are that token's candidates. */
    void (*on_text)(svc_gen *gen, const char *text, size_t len, int32_t token,
                    const moe_token_prob *probs, size_t n_probs, void *user);
    /* Exactly once, last, also after cancel or error. */
    void (*on_done)(svc_gen *gen, const svc_gen_result *result, void *user);
    void *user;
} svc_gen_events;

typedef struct svc_sched svc_sched;

/* Creates the context (n_parallel sequences x n_ctx_per_seq cells) for a
 * loaded model (borrowed: it must outlive the scheduler) and starts the
 * engine thread. */
svc_sched *svc_sched_new(const moe_model *model, const svc_sched_params *p, GError **error);

/* Cancels queued and running requests (their on_done reports CANCELLED,
 * dispatched to the main context), stops and joins the engine thread, frees
 * everything. Pending on_done callbacks still run if the main context is
 * iterated afterwards; they hold their own references. NULL: no-op. */
void svc_sched_free(svc_sched *s);

/* Stops admitting new requests (submit fails with SHUTDOWN) and lets the
 * running and queued ones finish; `cancel_running` cancels them instead. */
void svc_sched_shutdown(svc_sched *s, bool cancel_running);

/* Queues a request. Returns a new reference (the scheduler keeps its own
 * until on_done has run), or NULL with SVC_SCHED_ERROR_QUEUE_FULL /
 * CONTEXT / INVALID / SHUTDOWN and nothing queued. */
svc_gen *svc_sched_submit(svc_sched *s, const svc_gen_params *p, const svc_gen_events *ev,
                          GError **error);

/* Cancels: a queued request is dropped, a running one stops before the
 * next engine step (its slot is freed). on_done still comes once, with
 * SVC_SCHED_ERROR_CANCELLED unless it had already finished. Idempotent. */
void svc_gen_cancel(svc_gen *gen);

svc_gen *svc_gen_ref(svc_gen *gen);
void     svc_gen_unref(svc_gen *gen);

typedef struct svc_sched_stats {
    int32_t n_parallel;     /* slots                                            */
    int32_t running;        /* sequences being prefilled or decoded             */
    int32_t queued;         /* waiting for a slot                               */
    int32_t queue_max;
    int32_t n_ctx_per_seq;
    int32_t kv_cells_used;  /* moe_kv_n_used                                    */
    int32_t kv_cells_total; /* n_parallel * n_ctx_per_seq                       */
    uint64_t kv_bytes;      /* moe_context_kv_bytes                             */
    uint64_t steps;         /* engine steps run                                 */
    uint64_t tokens_prefilled; /* prompt tokens evaluated (cached ones not)     */
    uint64_t tokens_cached;    /* prompt tokens skipped thanks to prefix reuse  */
    uint64_t tokens_generated;
    const char *cpu_isa;    /* moe_context_cpu_isa                              */
    int32_t n_threads;
} svc_sched_stats;

void svc_sched_get_stats(svc_sched *s, svc_sched_stats *out);

G_END_DECLS

#endif /* MOEDESK_SCHEDULER_H */

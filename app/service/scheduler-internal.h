/*
 * scheduler-internal.h — the structures scheduler.c (public API, event
 * delivery) and scheduler-engine.c (the engine thread) share. Not for the
 * rest of the service: everything here may change with the engine loop.
 *
 * Ownership and locking, in one place:
 *
 *   svc_sched  refcounted "shell" (mutex, cond, queue, counters) plus the
 *              engine part (context, batch, slots, scratch). The owner's
 *              reference is dropped by svc_sched_free after the engine
 *              thread has been joined and the engine part freed; every
 *              svc_gen holds one more, so svc_gen_cancel / svc_gen_unref and
 *              pending on_done sources stay safe after svc_sched_free.
 *   svc_gen    refcounted. References: the caller's (from submit), the
 *              scheduler's (taken at submit, dropped by the engine thread
 *              once on_done is queued), and one per attached dispatch
 *              source (dropped when the source is destroyed).
 *
 *   [lock]     fields under svc_sched.lock
 *   [engine]   fields only the engine thread touches (or any thread before
 *              the engine thread starts / after it is joined)
 *   [main]     fields only the thread iterating main_context touches
 *   [const]    written once at submit/new, read-only afterwards
 */
#ifndef MOEDESK_SCHEDULER_INTERNAL_H
#define MOEDESK_SCHEDULER_INTERNAL_H

#include "scheduler.h"

typedef enum gen_state {
    GEN_QUEUED,
    GEN_RUNNING,
    GEN_DONE,
} gen_state;

/* One callback to deliver: a token's text (done false) or on_done (done
 * true, always the last). One allocation: the text and the probabilities
 * follow the struct. */
typedef struct gen_event {
    bool            done;
    int32_t         token;
    size_t          len;
    char           *text;   /* len bytes + NUL                             */
    moe_token_prob *probs;  /* n_probs entries, or NULL                    */
    size_t          n_probs;
} gen_event;

struct svc_gen {
    gint       ref_count;
    svc_sched *sched;          /* [const] holds a reference on the shell    */

    /* the request [const] */
    int32_t   *prompt;
    int64_t    n_prompt;
    int64_t    max_tokens;
    bool       ignore_eog;
    int32_t    n_probs;
    int64_t    t_submit;       /* monotonic µs                              */
    int64_t    deadline;       /* monotonic µs, 0 = none                    */
    svc_gen_constraint constraint; /* has_constraint: user owned until done */
    bool       has_constraint;
    svc_gen_events ev;

    /* [lock] */
    gen_state  state;
    bool       cancel;         /* svc_gen_cancel was called                 */
    GQueue     events;         /* gen_event*, oldest first                  */
    bool       dispatch_pending; /* a source is attached and not yet run    */

    /* [main] */
    bool       done_delivered; /* on_done ran: nothing is delivered after   */

    /* [engine] */
    moe_sampler      *sampler;
    moe_stop_matcher *stops;
    moe_detok        *detok;
    int32_t    slot;           /* -1 while queued                           */
    int64_t    n_prompt_done;  /* prompt tokens in the slot's cache         */
    bool       prefilling;     /* prompt not fully evaluated yet            */
    int32_t    next_token;     /* sampled, to be decoded in the next step   */
    int32_t    batch_first;    /* this step: first batch index, count, and  */
    int32_t    batch_count;    /*   the index with logits (-1: none)        */
    int32_t    batch_logits;
    int        step_end;       /* after sampling: -1 go on, -2 finished,
                                  >= 0 an error code with step_msg (owned) */
    char      *step_msg;
    int64_t    n_gen;
    int64_t    t_first, t_last;
    double     busy_us;
    svc_gen_result result;     /* complete before the done event is queued;
                                  read by the main thread afterwards only   */
};

/* A sequence id of the context. Its cache holds the K/V of tokens[0..n)
 * at positions 0..n-1, also after its request finished (prefix reuse). */
typedef struct sched_slot {
    svc_gen  *gen;       /* running request, or NULL when free              */
    int32_t  *tokens;    /* [n_ctx_per_seq]                                 */
    int32_t   n_tokens;
    uint64_t  last_used; /* engine clock when last freed: LRU on ties       */
} sched_slot;

struct svc_sched {
    gint          ref_count;
    GMutex        lock;
    GCond         cond;      /* the engine thread waits here for work       */

    /* [const] */
    svc_sched_params p;      /* resolved: no zeros left                     */
    const moe_model *model;
    const moe_vocab *vocab;
    int32_t       n_vocab;
    const char   *cpu_isa;   /* static string from the engine               */
    int32_t       n_threads;
    uint64_t      kv_bytes;
    GMainContext *main_context; /* ref'd until svc_sched_free                */

    /* [lock] */
    GQueue        queue;     /* svc_gen*, waiting for a slot, FIFO          */
    int32_t       n_running; /* admitted, not finished                      */
    bool          shutdown;  /* submit refuses                              */
    bool          cancel_all;/* cancel everything queued or running         */
    bool          quit;      /* the engine thread exits when idle           */
    int32_t       kv_cells_used;
    uint64_t      steps, tokens_prefilled, tokens_cached, tokens_generated;

    /* [engine] */
    GThread      *thread;
    moe_context  *ctx;
    moe_batch    *batch;
    sched_slot   *slots;     /* [n_parallel]                                */
    GPtrArray    *running;   /* svc_gen*, admission order                   */
    GPtrArray    *in_batch;  /* scratch: the running requests in this step  */
    float        *logits;    /* [n_vocab] scratch for a constraint's mask  */
    moe_token_prob *probs;   /* [n_vocab] scratch for n_probs               */
    GString      *text;      /* scratch: one token's shown text             */
    char         *piece;     /* scratch for moe_detok_push                  */
    size_t        piece_cap;
    uint64_t      clock;     /* LRU clock                                   */
};

/* scheduler.c */
void sched_unref(svc_sched *s);
/* Queues an event for gen and attaches a dispatch source if none is
 * pending. Takes s->lock itself. `probs` is copied. */
void gen_push_text(svc_gen *g, const char *text, size_t len, int32_t token,
                   const moe_token_prob *probs, size_t n_probs);
/* Marks gen done, queues on_done (result must be complete) and drops the
 * scheduler's reference. Takes s->lock itself; call without it. */
void gen_push_done(svc_gen *g);

/* scheduler-engine.c */
gpointer sched_engine_main(gpointer data);
/* Frees what the engine thread used (after the join, or when starting it
 * failed). */
void sched_engine_free(svc_sched *s);

#endif /* MOEDESK_SCHEDULER_INTERNAL_H */

/*
 * test-scheduler.c — the service's engine thread (app/service/scheduler.h)
 * on the demo model (random weights, argv[1]):
 *   - 16 concurrent greedy requests (shared prefixes, different lengths,
 *     chunked prefill) give exactly the tokens they give one at a time;
 *   - a seeded sampled request is reproducible, alone or batched;
 *   - stop strings, n_probs, a constraint (mask/accept/complete/free_user);
 *   - QUEUE_FULL, CONTEXT, INVALID and SHUTDOWN at submit;
 *   - cancel of a queued and of a running request, timeout, shutdown with
 *     and without cancelling, svc_sched_free with callbacks pending;
 *   - prefix reuse (same slot, and shared from a busy slot) gives the
 *     same tokens as a cold cache.
 * Every wait iterates a private GMainContext with a deadline that fails
 * the test instead of hanging; every callback checks it comes on the test
 * thread, in order, and never after on_done.
 */
#include "scheduler.h"
#include "test.h"

#define WAIT_S 120.0

static const moe_model *model;
static const moe_vocab *vocab;
static GMainContext *mctx;
static GThread *main_thread;

/* What one request delivered. */
typedef struct run {
    GArray  *tokens;
    GString *text;
    int      n_text;
    int      n_done;
    bool     bad_order;   /* text after done, or a callback off the test thread */
    bool     probs_bad;
    int      want_probs;
    moe_finish_reason finish;
    int32_t  stop_index;
    int      err_code;    /* -1: no error */
    int64_t  n_cached, n_completion, n_prompt, queue_us, ttft_us, total_us, busy_us;
    double   decode_tps;
    svc_gen *gen;
} run;

static void run_init(run *r)
{
    memset(r, 0, sizeof *r);
    r->tokens = g_array_new(FALSE, FALSE, sizeof(int32_t));
    r->text = g_string_new(NULL);
    r->err_code = -1;
}

static void run_clear(run *r)
{
    g_array_unref(r->tokens);
    g_string_free(r->text, TRUE);
    svc_gen_unref(r->gen);
}

static int done_total;

static void on_text(svc_gen *gen, const char *text, size_t len, int32_t token,
                    const moe_token_prob *probs, size_t n_probs, void *user)
{
    run *r = user;
    if (r->n_done || g_thread_self() != main_thread || (r->gen && r->gen != gen))
        r->bad_order = true;
    g_array_append_val(r->tokens, token);
    g_string_append_len(r->text, text, (gssize)len);
    r->n_text++;
    if (r->want_probs) {
        if (!probs || n_probs == 0 || n_probs > (size_t)r->want_probs)
            r->probs_bad = true;
        for (size_t i = 1; probs && i < n_probs; i++)
            if (probs[i].prob > probs[i - 1].prob)
                r->probs_bad = true;
    } else if (probs || n_probs) {
        r->probs_bad = true;
    }
}

static void on_done(svc_gen *gen, const svc_gen_result *res, void *user)
{
    run *r = user;
    (void)gen;
    if (g_thread_self() != main_thread)
        r->bad_order = true;
    r->n_done++;
    done_total++;
    r->finish = res->finish;
    r->stop_index = res->stop_index;
    r->err_code = res->error ? res->error->code : -1;
    if (res->error && res->error->domain != SVC_SCHED_ERROR)
        r->err_code = 1000;
    r->n_cached = res->n_cached;
    r->n_completion = res->n_completion;
    r->n_prompt = res->n_prompt;
    r->queue_us = res->queue_us;
    r->ttft_us = res->ttft_us;
    r->total_us = res->total_us;
    r->busy_us = res->busy_us;
    r->decode_tps = res->decode_tps;
}

static const svc_gen_events events = {on_text, on_done, NULL};

/* Iterates the test context until `*counter >= want`; false on timeout. */
static bool wait_until(const int *counter, int want)
{
    gint64 end = g_get_monotonic_time() + (gint64)(WAIT_S * 1e6);
    while (*counter < want) {
        if (g_get_monotonic_time() > end) {
            fprintf(stderr, "timed out waiting (%d of %d)\n", *counter, want);
            return false;
        }
        if (!g_main_context_iteration(mctx, FALSE))
            g_usleep(200);
    }
    return true;
}

static GArray *tokenize(const char *text)
{
    size_t n = 0;
    moe_err err = {{0}};
    moe_tokenize(vocab, text, strlen(text), MOE_TOKENIZE_PARSE_SPECIAL, NULL, 0, &n, &err);
    GArray *a = g_array_sized_new(FALSE, FALSE, sizeof(int32_t), (guint)n);
    g_array_set_size(a, (guint)n);
    size_t got = 0;
    moe_tokenize(vocab, text, strlen(text), MOE_TOKENIZE_PARSE_SPECIAL, (int32_t *)a->data, n,
                 &got, &err);
    g_array_set_size(a, (guint)got);
    return a;
}

static svc_sched *new_sched(int n_parallel, int n_ctx, int n_batch, int queue_max)
{
    svc_sched_params p;
    svc_sched_params_init(&p);
    p.n_parallel = n_parallel;
    p.n_ctx_per_seq = n_ctx;
    p.n_batch = n_batch;
    p.n_threads = 2;
    p.queue_max = queue_max;
    p.main_context = mctx;
    GError *e = NULL;
    svc_sched *s = svc_sched_new(model, &p, &e);
    CHECK_MSG(s != NULL, "%s", e ? e->message : "?");
    g_clear_error(&e);
    return s;
}

/* Submits `prompt` with params `gp` (prompt fields filled here); on
 * failure returns the error code and leaves r->gen NULL. */
static int submit(svc_sched *s, run *r, const GArray *prompt, svc_gen_params *gp)
{
    gp->prompt = (const int32_t *)prompt->data;
    gp->n_prompt = prompt->len;
    svc_gen_events ev = events;
    ev.user = r;
    GError *e = NULL;
    r->gen = svc_sched_submit(s, gp, &ev, &e);
    int code = -1;
    if (!r->gen) {
        CHECK(e != NULL && e->domain == SVC_SCHED_ERROR && e->message[0]);
        code = e ? e->code : 1000;
    }
    g_clear_error(&e);
    return code;
}

static bool same_tokens(const run *a, const run *b)
{
    return a->tokens->len == b->tokens->len &&
           memcmp(a->tokens->data, b->tokens->data, a->tokens->len * sizeof(int32_t)) == 0;
}

static void check_clean(const run *r)
{
    CHECK_EQ_INT(r->n_done, 1);
    CHECK(!r->bad_order);
    CHECK(!r->probs_bad);
}

/* ---- batched == sequential --------------------------------------------- */

#define N_REQ 16

static GArray *prompt_for(int i)
{
    static const char *const topics[] = {"rivers", "prime numbers", "the moon", "bread"};
    char buf[512];
    if (i % 3 == 0) /* a shared system prompt */
        g_snprintf(buf, sizeof buf,
                   "<|im_start|>system\nYou are a careful assistant who answers briefly."
                   "<|im_end|>\n<|im_start|>user\nTell me about %s, take %d.<|im_end|>\n"
                   "<|im_start|>assistant\n", topics[i % 4], i);
    else if (i % 3 == 1)
        g_snprintf(buf, sizeof buf, "Request %d: list facts on %s", i, topics[(i / 3) % 4]);
    else
        g_snprintf(buf, sizeof buf, "%d%s%d", i, topics[i % 4], i * 7);
    return tokenize(buf);
}

/* Records, for each sampled token, the gap between the two highest
 * logits (the constraint hook sees the logits and changes nothing). */
static void gap_mask(void *user, float *logits, int32_t n_vocab)
{
    float a = -INFINITY, b = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (logits[i] > a) {
            b = a;
            a = logits[i];
        } else if (logits[i] > b) {
            b = logits[i];
        }
    }
    float gap = a - b;
    g_array_append_val((GArray *)user, gap);
}

static void fill_params(svc_gen_params *gp, svc_gen_constraint *k, GArray *gaps, int i)
{
    svc_gen_params_init(gp);
    gp->max_tokens = 4 + (i * 7) % 29;
    gp->ignore_eog = i % 2 == 0;
    svc_gen_constraint obs = {gap_mask, NULL, NULL, NULL, gaps};
    *k = obs;
    gp->constraint = k;
}

/* Batched must equal alone token for token, with the scalar kernels
 * (`exact`) and with the default SIMD kernels: the engine's products sum
 * every token's blocks in the same order whatever the batch holds
 * (test-batch-invariance). On a failure the top-2 logit gaps at the first
 * differing token are printed, to tell a near-tie flip from a real bug. */
static void test_batched_equals_sequential(bool exact)
{
    if (!exact)
        g_unsetenv("MOE_CPU_ISA");
    GArray *prompts[N_REQ], *gaps_alone[N_REQ], *gaps_mixed[N_REQ];
    run alone[N_REQ], mixed[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        prompts[i] = prompt_for(i);
        run_init(&alone[i]);
        run_init(&mixed[i]);
        gaps_alone[i] = g_array_new(FALSE, FALSE, sizeof(float));
        gaps_mixed[i] = g_array_new(FALSE, FALSE, sizeof(float));
    }

    svc_sched *s1 = new_sched(1, 256, 32, 4);
    done_total = 0;
    for (int i = 0; i < N_REQ && s1; i++) {
        svc_gen_params gp;
        svc_gen_constraint k;
        fill_params(&gp, &k, gaps_alone[i], i);
        CHECK_EQ_INT(submit(s1, &alone[i], prompts[i], &gp), -1);
        CHECK(wait_until(&done_total, i + 1));
    }
    svc_sched_free(s1);

    /* 16 at once into 6 slots: 10 queue; n_batch 24 forces chunked
     * prefill next to decode tokens. */
    svc_sched *s = new_sched(6, 256, 24, 16);
    done_total = 0;
    for (int i = 0; i < N_REQ && s; i++) {
        svc_gen_params gp;
        svc_gen_constraint k;
        fill_params(&gp, &k, gaps_mixed[i], i);
        CHECK_EQ_INT(submit(s, &mixed[i], prompts[i], &gp), -1);
    }
    CHECK(wait_until(&done_total, N_REQ));
    if (!exact)
        g_setenv("MOE_CPU_ISA", "scalar", TRUE);
    svc_sched_stats st;
    if (s) {
        svc_sched_get_stats(s, &st);
        CHECK_EQ_INT(st.running, 0);
        CHECK_EQ_INT(st.queued, 0);
        CHECK_EQ_INT(st.n_parallel, 6);
        CHECK_EQ_INT(st.kv_cells_total, 6 * 256);
        CHECK(st.kv_cells_used > 0 && st.kv_cells_used <= st.kv_cells_total);
        CHECK(st.steps > 0 && st.cpu_isa != NULL && st.n_threads == 2);
        if (exact)
            CHECK_EQ_STR(st.cpu_isa, "scalar");
        uint64_t gen = 0, prompt = 0;
        for (int i = 0; i < N_REQ; i++) {
            gen += (uint64_t)mixed[i].n_completion;
            prompt += (uint64_t)mixed[i].n_prompt;
        }
        CHECK_EQ_INT(st.tokens_generated, gen);
        CHECK_EQ_INT(st.tokens_prefilled + st.tokens_cached, prompt);
        /* the shared system prompt is served from the cache at least once */
        CHECK(st.tokens_cached > 0);
    }
    int n_same = 0;
    for (int i = 0; i < N_REQ; i++) {
        check_clean(&alone[i]);
        check_clean(&mixed[i]);
        if (exact) {
            CHECK_MSG(same_tokens(&alone[i], &mixed[i]), "request %d: %u tokens alone, %u batched",
                      i, alone[i].tokens->len, mixed[i].tokens->len);
            CHECK(strcmp(alone[i].text->str, mixed[i].text->str) == 0);
        } else {
            guint k = 0, n = MIN(alone[i].tokens->len, mixed[i].tokens->len);
            while (k < n && g_array_index(alone[i].tokens, int32_t, k) ==
                                g_array_index(mixed[i].tokens, int32_t, k))
                k++;
            if (k < n) {
                float ga = g_array_index(gaps_alone[i], float, k);
                float gm = g_array_index(gaps_mixed[i], float, k);
                CHECK_MSG(false,
                          "request %d: token %u differs batched (top-2 logit gaps %g / %g)", i,
                          k, ga, gm);
            } else {
                CHECK_EQ_INT(alone[i].tokens->len, mixed[i].tokens->len);
                n_same++;
            }
        }
        CHECK_EQ_INT(gaps_mixed[i]->len, mixed[i].n_completion);
        CHECK_EQ_INT(mixed[i].err_code, -1);
        CHECK_EQ_INT(mixed[i].n_completion, mixed[i].tokens->len);
        CHECK_EQ_INT(mixed[i].n_text, mixed[i].n_completion);
        CHECK_EQ_INT(mixed[i].n_prompt, prompts[i]->len);
        if (i % 2 == 0) {
            CHECK_EQ_INT(mixed[i].finish, MOE_FINISH_LENGTH);
            CHECK_EQ_INT(mixed[i].n_completion, 4 + (i * 7) % 29);
        }
        CHECK(mixed[i].queue_us >= 0 && mixed[i].ttft_us >= mixed[i].queue_us);
        CHECK(mixed[i].total_us >= mixed[i].ttft_us);
        CHECK(mixed[i].busy_us > 0 && mixed[i].busy_us <= mixed[i].total_us);
        CHECK(mixed[i].n_completion < 2 || mixed[i].decode_tps > 0);
        run_clear(&alone[i]);
        run_clear(&mixed[i]);
        g_array_unref(prompts[i]);
        g_array_unref(gaps_alone[i]);
        g_array_unref(gaps_mixed[i]);
    }
    if (!exact)
        fprintf(stderr, "SIMD kernels: %d of %d requests identical batched and alone\n", n_same,
                N_REQ);
    svc_sched_free(s);
}

/* ---- sampling, probabilities, stop strings ----------------------------- */

static void test_seeded_sampling(void)
{
    GArray *prompt = tokenize("Once upon a time");
    GArray *other = tokenize("Another story begins");
    run a, b, noise;
    run_init(&a);
    run_init(&b);
    run_init(&noise);
    svc_gen_params gp;
    svc_gen_params_init(&gp);
    gp.sampling.temperature = 1.0f;
    gp.sampling.top_k = 0;
    gp.sampling.top_p = 1.0f;
    gp.sampling.min_p = 0.0f;
    gp.sampling.seed = 1234;
    gp.max_tokens = 40;
    gp.ignore_eog = true;
    gp.n_probs = 3;
    a.want_probs = b.want_probs = 3;

    svc_sched *s = new_sched(3, 128, 16, 4);
    done_total = 0;
    if (s) {
        submit(s, &a, prompt, &gp);
        CHECK(wait_until(&done_total, 1));
        /* again, now next to another request */
        svc_gen_params np;
        svc_gen_params_init(&np);
        np.max_tokens = 30;
        np.ignore_eog = true;
        submit(s, &noise, other, &np);
        submit(s, &b, prompt, &gp);
        CHECK(wait_until(&done_total, 3));
    }
    check_clean(&a);
    check_clean(&b);
    CHECK_EQ_INT(a.tokens->len, 40);
    CHECK(same_tokens(&a, &b));
    CHECK(b.n_cached > 0); /* the second run reused the first one's prompt */
    run_clear(&a);
    run_clear(&b);
    run_clear(&noise);
    svc_sched_free(s);
    g_array_unref(prompt);
    g_array_unref(other);
}

static void test_stop_strings(void)
{
    GArray *prompt = tokenize("The quick brown fox");
    svc_sched *s = new_sched(2, 256, 64, 4);
    if (!s)
        return;
    run plain;
    run_init(&plain);
    svc_gen_params gp;
    svc_gen_params_init(&gp);
    gp.max_tokens = 60;
    gp.ignore_eog = true;
    done_total = 0;
    submit(s, &plain, prompt, &gp);
    CHECK(wait_until(&done_total, 1));
    check_clean(&plain);

    /* A stop string taken from the middle of the greedy text, starting and
     * ending on character boundaries. */
    const char *t = plain.text->str;
    size_t n = plain.text->len;
    const char *from = g_utf8_offset_to_pointer(t, MIN(4, (glong)g_utf8_strlen(t, (gssize)n)));
    const char *to = g_utf8_offset_to_pointer(from, MIN(3, (glong)g_utf8_strlen(from, -1)));
    char *stop = g_strndup(from, (gsize)(to - from));
    CHECK_MSG(stop[0] != 0, "greedy text too short: \"%s\"", t);
    const char *stops[] = {"this will not occur \x01", stop};
    size_t expect_len = (size_t)(strstr(t, stop) - t);

    run cut;
    run_init(&cut);
    gp.stops = stops;
    gp.n_stops = 2;
    submit(s, &cut, prompt, &gp);
    CHECK(wait_until(&done_total, 2));
    check_clean(&cut);
    CHECK_EQ_INT(cut.finish, MOE_FINISH_STOP);
    CHECK_EQ_INT(cut.stop_index, 1);
    CHECK_EQ_INT(cut.err_code, -1);
    CHECK(strstr(cut.text->str, stop) == NULL);
    CHECK_EQ_INT(cut.text->len, expect_len);
    CHECK(strncmp(cut.text->str, t, expect_len) == 0);
    CHECK(cut.n_completion < plain.n_completion);
    g_free(stop);
    run_clear(&plain);
    run_clear(&cut);
    svc_sched_free(s);
    g_array_unref(prompt);
}

/* ---- constraint -------------------------------------------------------- */

typedef struct cons_state {
    int32_t allowed[3];
    int     accepted;
    int     complete_after; /* 0: never */
    bool    ban_all;
    bool    allow_all;      /* only slow */
    bool    accepted_bad;
    int     sleep_us;
    int    *freed;
} cons_state;

static void cons_mask(void *user, float *logits, int32_t n_vocab)
{
    cons_state *c = user;
    if (c->sleep_us)
        g_usleep((gulong)c->sleep_us);
    for (int32_t i = 0; i < n_vocab && !c->allow_all; i++)
        if (c->ban_all || (i != c->allowed[0] && i != c->allowed[1] && i != c->allowed[2]))
            logits[i] = -INFINITY;
}

static void cons_accept(void *user, int32_t token)
{
    cons_state *c = user;
    if (!c->sleep_us && token != c->allowed[0] && token != c->allowed[1] && token != c->allowed[2])
        c->accepted_bad = true;
    c->accepted++;
}

static bool cons_complete(void *user)
{
    cons_state *c = user;
    return c->complete_after > 0 && c->accepted >= c->complete_after;
}

static void cons_free(void *user)
{
    cons_state *c = user;
    (*c->freed)++;
    g_free(c);
}

static svc_gen_constraint make_constraint(int *freed, int complete_after, bool ban_all,
                                          int sleep_us)
{
    cons_state *c = g_new0(cons_state, 1);
    GArray *abc = tokenize("abc");
    for (int i = 0; i < 3; i++)
        c->allowed[i] = g_array_index(abc, int32_t, i);
    g_array_unref(abc);
    c->complete_after = complete_after;
    c->ban_all = ban_all;
    c->sleep_us = sleep_us;
    c->freed = freed;
    svc_gen_constraint k = {cons_mask, cons_accept, cons_complete, cons_free, c};
    return k;
}

static void test_constraint(void)
{
    GArray *prompt = tokenize("Pick letters:");
    svc_sched *s = new_sched(2, 64, 32, 4);
    if (!s)
        return;
    int freed = 0;
    run r, banned, refused;
    run_init(&r);
    run_init(&banned);
    run_init(&refused);
    svc_gen_params gp;
    svc_gen_params_init(&gp);
    gp.sampling.temperature = 1.5f; /* draws among the survivors */
    gp.sampling.top_k = 0;
    gp.sampling.min_p = 0.0f;
    gp.sampling.top_p = 1.0f;
    gp.max_tokens = 20;
    svc_gen_constraint k1 = make_constraint(&freed, 7, false, 0);
    const cons_state allowed_copy = *(cons_state *)k1.user;
    const cons_state *st1 = &allowed_copy;
    gp.constraint = &k1;
    done_total = 0;
    submit(s, &r, prompt, &gp);
    svc_gen_constraint k2 = make_constraint(&freed, 0, true, 0);
    gp.constraint = &k2;
    submit(s, &banned, prompt, &gp);
    CHECK(wait_until(&done_total, 2));
    check_clean(&r);
    check_clean(&banned);
    CHECK_EQ_INT(r.finish, MOE_FINISH_STOP);
    CHECK_EQ_INT(r.stop_index, -1);
    CHECK_EQ_INT(r.n_completion, 7);
    CHECK_EQ_INT(r.tokens->len, 7);
    for (guint i = 0; i < r.tokens->len; i++) {
        int32_t t = g_array_index(r.tokens, int32_t, i);
        CHECK_MSG(t == st1->allowed[0] || t == st1->allowed[1] || t == st1->allowed[2],
                  "token %d", t);
    }
    for (size_t i = 0; i < r.text->len; i++)
        CHECK(r.text->str[i] >= 'a' && r.text->str[i] <= 'c');
    CHECK_EQ_INT(banned.err_code, SVC_SCHED_ERROR_ENGINE);
    CHECK_EQ_INT(banned.finish, MOE_FINISH_NONE);
    CHECK_EQ_INT(freed, 2);

    /* A refused submit frees the constraint's state too. */
    GArray *big = g_array_new(FALSE, TRUE, sizeof(int32_t));
    g_array_set_size(big, 65);
    svc_gen_constraint k3 = make_constraint(&freed, 0, false, 0);
    gp.constraint = &k3;
    CHECK_EQ_INT(submit(s, &refused, big, &gp), SVC_SCHED_ERROR_CONTEXT);
    CHECK_EQ_INT(freed, 3);
    g_array_unref(big);
    run_clear(&r);
    run_clear(&banned);
    run_clear(&refused);
    svc_sched_free(s);
    g_array_unref(prompt);
}

/* ---- submit errors ----------------------------------------------------- */

static void test_submit_errors(void)
{
    svc_sched *s = new_sched(1, 64, 16, 2);
    if (!s)
        return;
    GArray *prompt = tokenize("0123456789");
    int freed = 0;
    run r[6];
    for (int i = 0; i < 6; i++)
        run_init(&r[i]);
    svc_gen_params gp;
    svc_gen_params_init(&gp);
    gp.ignore_eog = true;
    gp.max_tokens = 50;
    /* slow enough that nothing finishes while we submit */
    svc_gen_constraint k = make_constraint(&freed, 0, false, 20000);
    gp.constraint = &k;
    done_total = 0;
    CHECK_EQ_INT(submit(s, &r[0], prompt, &gp), -1);
    k = make_constraint(&freed, 0, false, 20000);
    CHECK_EQ_INT(submit(s, &r[1], prompt, &gp), -1);
    k = make_constraint(&freed, 0, false, 20000);
    CHECK_EQ_INT(submit(s, &r[2], prompt, &gp), -1);
    gp.constraint = NULL;
    /* one slot + queue_max 2 */
    CHECK_EQ_INT(submit(s, &r[3], prompt, &gp), SVC_SCHED_ERROR_QUEUE_FULL);
    svc_sched_stats st;
    svc_sched_get_stats(s, &st);
    CHECK_EQ_INT(st.running + st.queued, 3);
    CHECK_EQ_INT(st.queue_max, 2);

    /* context: 60 + 5 > 64; 65 prompt tokens; 64 with no limit is fine */
    GArray *p60 = g_array_new(FALSE, TRUE, sizeof(int32_t));
    g_array_set_size(p60, 60);
    gp.max_tokens = 5;
    CHECK_EQ_INT(submit(s, &r[4], p60, &gp), SVC_SCHED_ERROR_CONTEXT);
    g_array_set_size(p60, 65);
    gp.max_tokens = -1;
    CHECK_EQ_INT(submit(s, &r[4], p60, &gp), SVC_SCHED_ERROR_CONTEXT);

    /* invalid */
    GArray *empty = g_array_new(FALSE, TRUE, sizeof(int32_t));
    CHECK_EQ_INT(submit(s, &r[4], empty, &gp), SVC_SCHED_ERROR_INVALID);
    GArray *badtok = tokenize("x");
    g_array_index(badtok, int32_t, 0) = 1 << 20;
    CHECK_EQ_INT(submit(s, &r[4], badtok, &gp), SVC_SCHED_ERROR_INVALID);
    gp.sampling.temperature = -1.0f;
    CHECK_EQ_INT(submit(s, &r[4], prompt, &gp), SVC_SCHED_ERROR_INVALID);
    gp.sampling.temperature = 0.0f;

    for (int i = 0; i < 3; i++)
        svc_gen_cancel(r[i].gen);
    CHECK(wait_until(&done_total, 3));
    for (int i = 0; i < 3; i++) {
        check_clean(&r[i]);
        CHECK_EQ_INT(r[i].err_code, SVC_SCHED_ERROR_CANCELLED);
    }
    CHECK_EQ_INT(freed, 3);

    /* the context rule at its edge: 60 prompt tokens, no limit: 4 tokens */
    g_array_set_size(p60, 60);
    gp.max_tokens = -1;
    CHECK_EQ_INT(submit(s, &r[4], p60, &gp), -1);
    CHECK(wait_until(&done_total, 4));
    check_clean(&r[4]);
    CHECK_EQ_INT(r[4].finish, MOE_FINISH_LENGTH);
    CHECK_EQ_INT(r[4].n_completion, 4);

    svc_sched_shutdown(s, false);
    CHECK_EQ_INT(submit(s, &r[5], prompt, &gp), SVC_SCHED_ERROR_SHUTDOWN);
    for (int i = 0; i < 6; i++)
        run_clear(&r[i]);
    g_array_unref(p60);
    g_array_unref(empty);
    g_array_unref(badtok);
    g_array_unref(prompt);
    svc_sched_free(s);
}

/* ---- cancel, timeout, shutdown, free ----------------------------------- */

static void test_cancel_and_timeout(void)
{
    svc_sched *s = new_sched(1, 512, 32, 4);
    if (!s)
        return;
    GArray *prompt = tokenize("Count with me:");
    int freed = 0;
    run a, b, c, t;
    run_init(&a);
    run_init(&b);
    run_init(&c);
    run_init(&t);
    svc_gen_params gp;
    svc_gen_params_init(&gp);
    gp.ignore_eog = true;
    gp.max_tokens = 400;
    svc_gen_constraint k = make_constraint(&freed, 0, false, 5000);
    gp.constraint = &k;
    done_total = 0;
    submit(s, &a, prompt, &gp);
    gp.constraint = NULL;
    submit(s, &b, prompt, &gp);
    /* a is running once it streamed; b waits for the only slot */
    CHECK(wait_until(&a.n_text, 2));
    svc_gen_cancel(b.gen);
    svc_gen_cancel(a.gen);
    svc_gen_cancel(a.gen); /* idempotent */
    CHECK(wait_until(&done_total, 2));
    CHECK_EQ_INT(a.err_code, SVC_SCHED_ERROR_CANCELLED);
    CHECK_EQ_INT(b.err_code, SVC_SCHED_ERROR_CANCELLED);
    CHECK_EQ_INT(b.n_text, 0);
    CHECK_EQ_INT(b.ttft_us, -1);
    CHECK(a.n_text >= 2 && a.n_text < 400);
    CHECK_EQ_INT(a.n_completion, a.n_text);
    CHECK_EQ_INT(freed, 1);

    /* the slot is free again */
    gp.max_tokens = 5;
    submit(s, &c, prompt, &gp);
    CHECK(wait_until(&done_total, 3));
    CHECK_EQ_INT(c.err_code, -1);
    CHECK_EQ_INT(c.n_completion, 5);
    CHECK(c.n_cached > 0);
    svc_gen_cancel(c.gen); /* after on_done: nothing more */

    /* timeout: 5 ms per token, 400 tokens, 100 ms allowed */
    k = make_constraint(&freed, 0, false, 5000);
    gp.constraint = &k;
    gp.max_tokens = 400;
    gp.timeout_ms = 100;
    submit(s, &t, prompt, &gp);
    CHECK(wait_until(&done_total, 4));
    CHECK_EQ_INT(t.err_code, SVC_SCHED_ERROR_TIMEOUT);
    CHECK(t.n_completion < 400);
    CHECK(t.total_us >= 100000);

    for (int i = 0; i < 200; i++) /* let any stray event arrive */
        g_main_context_iteration(mctx, FALSE);
    check_clean(&a);
    check_clean(&b);
    check_clean(&c);
    check_clean(&t);
    CHECK_EQ_INT(done_total, 4);
    run_clear(&a);
    run_clear(&b);
    run_clear(&c);
    run_clear(&t);
    g_array_unref(prompt);
    svc_sched_free(s);
}

static void test_shutdown(bool cancel_running)
{
    svc_sched *s = new_sched(2, 128, 32, 8);
    if (!s)
        return;
    GArray *prompt = tokenize("Shutting down soon");
    int freed = 0;
    run r[4];
    svc_gen_params gp;
    svc_gen_params_init(&gp);
    gp.ignore_eog = true;
    gp.max_tokens = cancel_running ? 100 : 10;
    done_total = 0;
    for (int i = 0; i < 4; i++) {
        run_init(&r[i]);
        svc_gen_constraint k = make_constraint(&freed, 0, false, cancel_running ? 3000 : 0);
        gp.constraint = &k;
        CHECK_EQ_INT(submit(s, &r[i], prompt, &gp), -1);
    }
    CHECK(wait_until(&r[0].n_text, 1));
    svc_sched_shutdown(s, cancel_running);
    run late;
    run_init(&late);
    gp.constraint = NULL;
    CHECK_EQ_INT(submit(s, &late, prompt, &gp), SVC_SCHED_ERROR_SHUTDOWN);
    CHECK(wait_until(&done_total, 4));
    for (int i = 0; i < 4; i++) {
        check_clean(&r[i]);
        if (cancel_running) {
            CHECK_EQ_INT(r[i].err_code, SVC_SCHED_ERROR_CANCELLED);
        } else {
            CHECK_EQ_INT(r[i].err_code, -1);
            CHECK_EQ_INT(r[i].n_completion, 10);
        }
        run_clear(&r[i]);
    }
    CHECK_EQ_INT(freed, 4);
    run_clear(&late);
    g_array_unref(prompt);
    svc_sched_free(s);
}

static void test_free_with_pending(void)
{
    svc_sched *s = new_sched(2, 128, 32, 8);
    if (!s)
        return;
    GArray *prompt = tokenize("Free me");
    run r[3];
    svc_gen_params gp;
    svc_gen_params_init(&gp);
    gp.ignore_eog = true;
    gp.max_tokens = 100;
    done_total = 0;
    for (int i = 0; i < 3; i++) {
        run_init(&r[i]);
        submit(s, &r[i], prompt, &gp);
    }
    /* the caller drops one reference at once: events still come */
    svc_gen_unref(r[2].gen);
    r[2].gen = NULL;
    g_usleep(20000); /* tokens pile up undelivered */
    svc_sched_free(s);
    CHECK(wait_until(&done_total, 3));
    for (int i = 0; i < 3; i++) {
        check_clean(&r[i]);
        CHECK(r[i].err_code == -1 || r[i].err_code == SVC_SCHED_ERROR_CANCELLED);
        CHECK_EQ_INT(r[i].n_text, r[i].n_completion);
    }
    /* cancelling after the scheduler is gone is harmless */
    svc_gen_cancel(r[0].gen);
    for (int i = 0; i < 3; i++)
        run_clear(&r[i]);
    g_array_unref(prompt);
}

/* ---- prefix reuse ------------------------------------------------------ */

static void test_prefix_reuse(void)
{
    GArray *first = tokenize("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                             "<|im_start|>assistant\n");
    svc_sched *s = new_sched(2, 256, 32, 4);
    if (!s)
        return;
    run a, warm, cold;
    run_init(&a);
    run_init(&warm);
    run_init(&cold);
    svc_gen_params gp;
    svc_gen_params_init(&gp);
    gp.max_tokens = 12;
    gp.ignore_eog = true;
    done_total = 0;
    submit(s, &a, first, &gp);
    CHECK(wait_until(&done_total, 1));
    CHECK_EQ_INT(a.n_cached, 0);
    /* turn 2: turn 1, its answer, a new question */
    GArray *second = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_array_append_vals(second, first->data, first->len);
    g_array_append_vals(second, a.tokens->data, a.tokens->len);
    GArray *more = tokenize("<|im_end|>\n<|im_start|>user\nAnd of Spain?<|im_end|>\n"
                            "<|im_start|>assistant\n");
    g_array_append_vals(second, more->data, more->len);
    submit(s, &warm, second, &gp);
    CHECK(wait_until(&done_total, 2));
    /* the answer's last token was sampled but never decoded */
    CHECK_EQ_INT(warm.n_cached, first->len + a.tokens->len - 1);
    svc_sched_free(s);

    s = new_sched(2, 256, 32, 4);
    submit(s, &cold, second, &gp);
    CHECK(wait_until(&done_total, 3));
    CHECK_EQ_INT(cold.n_cached, 0);
    CHECK(same_tokens(&warm, &cold));
    check_clean(&a);
    check_clean(&warm);
    check_clean(&cold);

    /* sharing from a busy slot: b starts while a2 still runs, in the other
     * slot, and gets the common prefix through moe_kv_seq_copy */
    run a2, b, bcold;
    run_init(&a2);
    run_init(&b);
    run_init(&bcold);
    GArray *pa = tokenize("<|im_start|>system\nA long shared system prompt, the same for both."
                          "<|im_end|>\n<|im_start|>user\nFirst");
    GArray *pb = tokenize("<|im_start|>system\nA long shared system prompt, the same for both."
                          "<|im_end|>\n<|im_start|>user\nSecond");
    int freed = 0;
    svc_gen_constraint k = make_constraint(&freed, 0, false, 3000);
    ((cons_state *)k.user)->allow_all = true; /* only slow */
    gp.max_tokens = 60;
    gp.constraint = &k;
    submit(s, &a2, pa, &gp);
    CHECK(wait_until(&a2.n_text, 1));
    gp.max_tokens = 8;
    gp.constraint = NULL;
    submit(s, &b, pb, &gp);
    CHECK(wait_until(&b.n_done, 1));
    int32_t lcp = 0;
    while (g_array_index(pa, int32_t, lcp) == g_array_index(pb, int32_t, lcp))
        lcp++;
    CHECK_EQ_INT(b.n_cached, lcp);
    CHECK_EQ_INT(a2.n_done, 0); /* b really shared a busy slot's cells */
    svc_gen_cancel(a2.gen);
    CHECK(wait_until(&a2.n_done, 1));
    CHECK_EQ_INT(freed, 1);
    svc_sched_free(s);
    s = new_sched(2, 256, 32, 4);
    submit(s, &bcold, pb, &gp);
    CHECK(wait_until(&bcold.n_done, 1));
    CHECK(same_tokens(&b, &bcold));
    svc_sched_free(s);

    run_clear(&a);
    run_clear(&warm);
    run_clear(&cold);
    run_clear(&a2);
    run_clear(&b);
    run_clear(&bcold);
    g_array_unref(first);
    g_array_unref(second);
    g_array_unref(more);
    g_array_unref(pa);
    g_array_unref(pb);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test-scheduler DEMO_MODEL.gguf\n");
        return 2;
    }
    moe_err err = {{0}};
    moe_model *m = NULL;
    if (moe_model_load(argv[1], NULL, &m, &err) != MOE_OK) {
        fprintf(stderr, "%s: %s\n", argv[1], err.msg);
        return 1;
    }
    model = m;
    vocab = moe_model_vocab(m);
    mctx = g_main_context_new();
    main_thread = g_thread_self();
    /* Exact comparisons (batched vs alone, warm vs cold cache) run on the
     * scalar kernels; batched-simd says why. */
    g_setenv("MOE_CPU_ISA", "scalar", TRUE);

    /* argv[2], optional: run only the tests whose name contains it */
    const char *only = argc > 2 ? argv[2] : "";
#define RUN(name, call)                                                  \
    do {                                                                 \
        if (strstr(name, only)) {                                        \
            fprintf(stderr, "-- %s\n", name);                            \
            call;                                                        \
        }                                                                \
    } while (0)
    RUN("batched-exact", test_batched_equals_sequential(true));
    RUN("batched-simd", test_batched_equals_sequential(false));
    RUN("seeded", test_seeded_sampling());
    RUN("stop", test_stop_strings());
    RUN("constraint", test_constraint());
    RUN("errors", test_submit_errors());
    RUN("cancel-timeout", test_cancel_and_timeout());
    RUN("shutdown-finish", test_shutdown(false));
    RUN("shutdown-cancel", test_shutdown(true));
    RUN("free-pending", test_free_with_pending());
    RUN("prefix", test_prefix_reuse());

    while (g_main_context_iteration(mctx, FALSE))
        ;
    g_main_context_unref(mctx);
    moe_model_free(m);
    TEST_DONE();
}

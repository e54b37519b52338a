/*
 * sampler.c — turns one row of logits into a token id: repetition and
 * presence/frequency penalties, logit bias, greedy, top-k, top-p, min-p,
 * temperature and a seeded draw. The chain, its order and the exact
 * formulas are the contract in moe.h ("Sampling"); this file is how it is
 * made fast enough to run once per generated token without allocating.
 *
 * Cost per call (n = n_vocab, m = tokens that survive the filters):
 *   - always: one pass that copies and cleans the logits and finds the top
 *     (SSE2), plus O(window + biases) for the sparse penalty/bias edits;
 *   - greedy: one more pass to find the first top logit;
 *   - top-k, k < n: a pass comparing four logits at a time against the
 *     worst of the k kept so far (a min-heap), then a sort of the k;
 *   - top-p without top-k: no sort of the vocabulary. One pass adds every
 *     token's weight into a 4096-bucket histogram by distance below the top
 *     (1/128 logit per bucket); walking the buckets from the top finds the
 *     one where the mass reaches top_p; a gather pass takes the tokens above
 *     it and only that bucket's tokens are sorted to place the exact cut;
 *   - min-p is a distance bound folded into the gather (or a cut of the
 *     sorted top-k list);
 *   - the draw: one exp per survivor and a linear walk.
 *
 *   work[n]        cleaned, penalised logits; then the survivors' weights
 *   cand_logit[n]  survivors (logit, id): heap, gather target, sort space
 *   cand_id[n]
 *   count[n]       occurrences in the penalty window; all zero between calls
 */
#include "sampler-kernels.h"
#include "util.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLER_MAX_VOCAB  (INT32_C(1) << 30)
#define SAMPLER_MAX_LAST_N (INT32_C(1) << 24)
#define HIST_BUCKETS       4096
#define HIST_PER_UNIT      128.0f /* a power of two, so bucket edges are exact */
#define DRAW_BLOCK         64     /* weights per partial sum in the draw      */

struct moe_sampler {
    int32_t            n_vocab;
    moe_sampler_params params;     /* .logit_bias points at `bias` below      */
    moe_logit_bias    *bias;       /* one entry per token, duplicates summed  */
    size_t             n_bias;
    float              min_p_dist; /* keep top - logit <= this; +inf: off     */
    bool               penalties_on;
    moe_rng            rng;
    int32_t           *hist;       /* ring of the last penalty_last_n tokens  */
    size_t             hist_len, hist_next;
    float             *work;
    float             *cand_logit;
    int32_t           *cand_id;
    uint32_t          *count;
    double            *block_sum;  /* [n_vocab / DRAW_BLOCK + 1]              */
    double             mass[HIST_BUCKETS];
};

moe_sampler_params moe_sampler_params_default(void)
{
    moe_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.penalty_last_n = 64;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.0f;
    p.seed = MOE_SAMPLER_DEFAULT_SEED;
    return p;
}

moe_status moe_sampler_params_check(const moe_sampler_params *p, int32_t n_vocab,
                                    moe_err *err)
{
    if (!p)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "sampler: params is NULL");
    if (n_vocab < 1 || n_vocab > SAMPLER_MAX_VOCAB)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "sampler: n_vocab %d: must be 1..%d",
                        (int)n_vocab, (int)SAMPLER_MAX_VOCAB);
    if (!(p->temperature >= 0.0f) || !isfinite(p->temperature))
        return moe_fail(err, MOE_ERR_INVALID_ARG,
                        "sampler: temperature %g: must be finite and >= 0 (0 = greedy)",
                        (double)p->temperature);
    if (!(p->top_p >= 0.0f && p->top_p <= 1.0f))
        return moe_fail(err, MOE_ERR_INVALID_ARG, "sampler: top_p %g: must be in [0, 1]",
                        (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return moe_fail(err, MOE_ERR_INVALID_ARG, "sampler: min_p %g: must be in [0, 1]",
                        (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty))
        return moe_fail(err, MOE_ERR_INVALID_ARG,
                        "sampler: repeat_penalty %g: must be finite and > 0 (1 = off)",
                        (double)p->repeat_penalty);
    if (p->penalty_last_n < 0 || p->penalty_last_n > SAMPLER_MAX_LAST_N)
        return moe_fail(err, MOE_ERR_INVALID_ARG,
                        "sampler: penalty_last_n %d: must be 0..%d (for \"whole context\" "
                        "pass the context length)",
                        (int)p->penalty_last_n, (int)SAMPLER_MAX_LAST_N);
    if (!isfinite(p->presence_penalty))
        return moe_fail(err, MOE_ERR_INVALID_ARG, "sampler: presence_penalty %g: must be finite",
                        (double)p->presence_penalty);
    if (!isfinite(p->frequency_penalty))
        return moe_fail(err, MOE_ERR_INVALID_ARG, "sampler: frequency_penalty %g: must be finite",
                        (double)p->frequency_penalty);
    if (p->n_logit_bias > 0 && !p->logit_bias)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "sampler: logit_bias is NULL but n_logit_bias is %llu",
                        (unsigned long long)p->n_logit_bias);
    for (size_t i = 0; i < p->n_logit_bias; i++) {
        const moe_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= n_vocab)
            return moe_fail(err, MOE_ERR_INVALID_ARG,
                            "sampler: logit_bias[%llu]: token %d outside the vocabulary (0..%d)",
                            (unsigned long long)i, (int)b->token, (int)n_vocab - 1);
        if (b->bias != b->bias || b->bias == INFINITY)
            return moe_fail(err, MOE_ERR_INVALID_ARG,
                            "sampler: logit_bias[%llu] (token %d): bias %g: must be finite or -inf",
                            (unsigned long long)i, (int)b->token, (double)b->bias);
    }
    return MOE_OK;
}

void moe_sampler_free(moe_sampler *s)
{
    if (!s)
        return;
    free(s->bias);
    free(s->hist);
    free(s->work);
    free(s->cand_logit);
    free(s->cand_id);
    free(s->count);
    free(s->block_sum);
    free(s);
}

/* Copies the bias list with one entry per token, summing duplicates in the
 * order given. cand_id serves as the token -> entry map. */
static void sampler_merge_bias(moe_sampler *s, const moe_sampler_params *p)
{
    for (size_t i = 0; i < p->n_logit_bias; i++)
        s->cand_id[p->logit_bias[i].token] = -1;
    size_t nb = 0;
    for (size_t i = 0; i < p->n_logit_bias; i++) {
        int32_t t = p->logit_bias[i].token;
        if (s->cand_id[t] < 0) {
            s->cand_id[t] = (int32_t)nb;
            s->bias[nb++] = p->logit_bias[i];
        } else {
            s->bias[s->cand_id[t]].bias += p->logit_bias[i].bias;
        }
    }
    s->n_bias = nb;
}

moe_status moe_sampler_new(int32_t n_vocab, const moe_sampler_params *params,
                           moe_sampler **out, moe_err *err)
{
    if (!out)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "sampler: out is NULL");
    *out = NULL;
    moe_status st = moe_sampler_params_check(params, n_vocab, err);
    if (st != MOE_OK)
        return st;
    moe_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return moe_fail(err, MOE_ERR_NOMEM, "sampler: out of memory");
    size_t n = (size_t)n_vocab;
    s->n_vocab = n_vocab;
    s->params = *params;
    s->work = malloc(n * sizeof *s->work);
    s->cand_logit = malloc(n * sizeof *s->cand_logit);
    s->cand_id = malloc(n * sizeof *s->cand_id);
    s->count = calloc(n, sizeof *s->count);
    s->block_sum = malloc((n / DRAW_BLOCK + 1) * sizeof *s->block_sum);
    if (params->penalty_last_n > 0)
        s->hist = malloc((size_t)params->penalty_last_n * sizeof *s->hist);
    if (params->n_logit_bias > 0)
        s->bias = malloc(params->n_logit_bias * sizeof *s->bias);
    if (!s->work || !s->cand_logit || !s->cand_id || !s->count || !s->block_sum ||
        (params->penalty_last_n > 0 && !s->hist) || (params->n_logit_bias > 0 && !s->bias)) {
        moe_sampler_free(s);
        return moe_fail(err, MOE_ERR_NOMEM, "sampler: out of memory for n_vocab %d", (int)n_vocab);
    }
    sampler_merge_bias(s, params);
    s->params.logit_bias = s->bias;
    s->params.n_logit_bias = s->n_bias;
    s->min_p_dist = params->min_p > 0.0f ? (float)-moe_log_f64(params->min_p) : INFINITY;
    s->penalties_on = params->penalty_last_n > 0 &&
                      (params->repeat_penalty != 1.0f || params->presence_penalty != 0.0f ||
                       params->frequency_penalty != 0.0f);
    moe_rng_seed(&s->rng, params->seed);
    *out = s;
    return MOE_OK;
}

void moe_sampler_reset(moe_sampler *s)
{
    if (!s)
        return;
    s->hist_len = 0;
    s->hist_next = 0;
    moe_rng_seed(&s->rng, s->params.seed);
}

void moe_sampler_accept(moe_sampler *s, int32_t token)
{
    if (!s || !s->hist)
        return;
    size_t cap = (size_t)s->params.penalty_last_n;
    s->hist[s->hist_next] = token;
    s->hist_next = (s->hist_next + 1) % cap;
    if (s->hist_len < cap)
        s->hist_len++;
}

/* ---- steps 1-2: penalties and bias ------------------------------------ */

static inline size_t penalty_count_one(moe_sampler *s, int32_t t, size_t nd)
{
    if (t < 0 || t >= s->n_vocab)
        return nd;
    if (s->count[t]++ == 0)
        s->cand_id[nd++] = t;
    return nd;
}

/* Counts the window into s->count and lists its distinct tokens in
 * cand_id[0..return). */
static size_t penalty_count(moe_sampler *s, const int32_t *recent, size_t n_recent)
{
    size_t last_n = (size_t)s->params.penalty_last_n, nd = 0;
    if (recent) {
        size_t from = n_recent > last_n ? n_recent - last_n : 0;
        for (size_t i = from; i < n_recent; i++)
            nd = penalty_count_one(s, recent[i], nd);
    } else {
        for (size_t i = 0; i < s->hist_len; i++)
            nd = penalty_count_one(s, s->hist[i], nd);
    }
    return nd;
}

/* Writes one edited logit, keeping *top right: raising is tracked here;
 * lowering a value equal to the top sets *top_lost so the caller rescans. */
static inline void set_logit(float *work, int32_t t, float v, float *top, bool *top_lost)
{
    if (v != v)
        v = -INFINITY;
    else if (v > FLT_MAX)
        v = FLT_MAX;
    if (work[t] == *top && v < work[t])
        *top_lost = true;
    work[t] = v;
    if (v > *top)
        *top = v;
}

/* work = cleaned logits after penalties and bias; returns their maximum. */
static float sampler_prepare(moe_sampler *s, const float *logits, const int32_t *recent,
                             size_t n_recent)
{
    const moe_sampler_params *p = &s->params;
    float *work = s->work;
    float top = moe_logits_clean_max_f32(work, logits, (size_t)s->n_vocab);
    bool top_lost = false;
    if (s->penalties_on) {
        size_t nd = penalty_count(s, recent, n_recent);
        for (size_t j = 0; j < nd; j++) {
            int32_t t = s->cand_id[j];
            float c = (float)s->count[t];
            s->count[t] = 0;
            float v = work[t];
            v = v > 0.0f ? v / p->repeat_penalty : v * p->repeat_penalty;
            v = v - (c * p->frequency_penalty + p->presence_penalty);
            set_logit(work, t, v, &top, &top_lost);
        }
    }
    for (size_t j = 0; j < s->n_bias; j++)
        set_logit(work, s->bias[j].token, work[s->bias[j].token] + s->bias[j].bias, &top,
                  &top_lost);
    if (top_lost)
        top = moe_max_f32(work, (size_t)s->n_vocab);
    return top;
}

/* ---- candidate heap ----------------------------------------------------
 * A min-heap over (logit, id) pairs kept in two parallel arrays; the root
 * is the worst kept candidate ("worse" = lower logit, or equal logit and
 * higher id, so ties prefer lower ids everywhere). */

static inline bool cand_worse(float la, int32_t ia, float lb, int32_t ib)
{
    return la < lb || (la == lb && ia > ib);
}

static void heap_sift_down(float *l, int32_t *id, size_t m, size_t i)
{
    float vl = l[i];
    int32_t vi = id[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m)
            break;
        if (c + 1 < m && cand_worse(l[c + 1], id[c + 1], l[c], id[c]))
            c++;
        if (!cand_worse(l[c], id[c], vl, vi))
            break;
        l[i] = l[c];
        id[i] = id[c];
        i = c;
    }
    l[i] = vl;
    id[i] = vi;
}

static void heap_push(float *l, int32_t *id, size_t *m, float v, int32_t t)
{
    size_t i = (*m)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!cand_worse(v, t, l[parent], id[parent]))
            break;
        l[i] = l[parent];
        id[i] = id[parent];
        i = parent;
    }
    l[i] = v;
    id[i] = t;
}

/* Sorts (l, id)[0..m) best first: heapify, then move the worst to the end
 * repeatedly. O(m log m), in place, deterministic. */
static void cand_sort_desc(float *l, int32_t *id, size_t m, bool is_heap)
{
    if (!is_heap)
        for (size_t i = m / 2; i-- > 0;)
            heap_sift_down(l, id, m, i);
    for (size_t e = m; e > 1; e--) {
        float tl = l[0];
        int32_t ti = id[0];
        l[0] = l[e - 1];
        id[0] = id[e - 1];
        l[e - 1] = tl;
        id[e - 1] = ti;
        heap_sift_down(l, id, e - 1, 0);
    }
}

/* ---- steps 4-6 ---------------------------------------------------------- */

/* Top-k: the k best of work into cand_*, sorted best first. Logits arrive
 * in increasing id, so a newcomer equal to the root never displaces it. */
static size_t filter_top_k(moe_sampler *s, size_t k)
{
    const float *x = s->work;
    float *l = s->cand_logit;
    int32_t *id = s->cand_id;
    size_t n = (size_t)s->n_vocab, m = 0, i = 0;
    for (; i < n && m < k; i++)
        if (x[i] != -INFINITY)
            heap_push(l, id, &m, x[i], (int32_t)i);
    while (m == k && (i = moe_find_gt_f32(x, i, n, l[0])) < n) {
        l[0] = x[i];
        id[0] = (int32_t)i;
        heap_sift_down(l, id, m, 0);
        i++;
    }
    cand_sort_desc(l, id, m, true);
    return m;
}

/* Top-p over a best-first list: the shortest prefix with mass >= top_p. */
static size_t filter_top_p_sorted(moe_sampler *s, size_t m, float top)
{
    moe_exp_shift_f32(s->work, s->cand_logit, m, top, 1.0f);
    double z = 0.0;
    for (size_t j = 0; j < m; j++)
        z += s->work[j];
    double target = (double)s->params.top_p * z, cum = 0.0;
    for (size_t j = 0; j < m; j++) {
        cum += s->work[j];
        if (cum >= target)
            return j + 1;
    }
    return m;
}

static size_t filter_min_p_sorted(const moe_sampler *s, size_t m, float top)
{
    for (size_t j = 1; j < m; j++)
        if (top - s->cand_logit[j] > s->min_p_dist)
            return j;
    return m;
}

/* No top-k: top-p by histogram (see the top of the file), min-p as a bound
 * in the gather. Survivors are left in no particular (but fixed) order. */
static size_t filter_full(moe_sampler *s, float top)
{
    size_t n = (size_t)s->n_vocab;
    bool top_p_on = s->params.top_p < 1.0f;
    float d_lt = INFINITY, d_cut = INFINITY;
    double target = 0.0, before = 0.0;
    if (top_p_on) {
        memset(s->mass, 0, sizeof s->mass);
        moe_mass_histogram_f32(s->work, n, top, HIST_PER_UNIT, s->mass, HIST_BUCKETS);
        double z = 0.0;
        for (size_t b = 0; b < HIST_BUCKETS; b++)
            z += s->mass[b];
        target = (double)s->params.top_p * z;
        size_t b = 0;
        for (; b < HIST_BUCKETS - 1; b++) {
            if (before + s->mass[b] >= target)
                break;
            before += s->mass[b];
        }
        /* Bucket b holds distances in [b, b+1) / HIST_PER_UNIT, the last
         * bucket everything from its start on. */
        d_cut = (float)b / HIST_PER_UNIT;
        d_lt = b < HIST_BUCKETS - 1 ? (float)(b + 1) / HIST_PER_UNIT : INFINITY;
    }
    float *l = s->cand_logit;
    int32_t *id = s->cand_id;
    size_t m = moe_select_near_f32(s->work, n, top, d_lt, s->min_p_dist, id, l);
    if (!top_p_on)
        return m;
    /* Tokens above the cut bucket are all kept; move the cut bucket's to
     * the back, sort them, and keep them until the mass reaches target.
     * (If min-p dropped some of them, the survivors are still a prefix of
     * that order, so the walk still finds the intersection of the two.) */
    size_t f = 0, e = m;
    while (f < e) {
        if (top - l[f] < d_cut) {
            f++;
        } else {
            e--;
            float tl = l[f];
            int32_t ti = id[f];
            l[f] = l[e];
            id[f] = id[e];
            l[e] = tl;
            id[e] = ti;
        }
    }
    cand_sort_desc(l + f, id + f, m - f, false);
    double cum = before;
    for (size_t j = f; j < m; j++) {
        cum += moe_exp_f32(l[j] - top);
        if (cum >= target)
            return j + 1;
    }
    return m;
}

/* Steps 1-6: leaves the survivors in cand_* (at least one) and their top
 * logit in *top; *sorted tells whether they are best first. */
static moe_status sampler_run(moe_sampler *s, const float *logits, const int32_t *recent,
                              size_t n_recent, size_t *m_out, float *top_out, bool *sorted,
                              moe_err *err)
{
    if (!s || !logits)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "sampler: %s is NULL", s ? "logits" : "sampler");
    const moe_sampler_params *p = &s->params;
    float top = sampler_prepare(s, logits, recent, n_recent);
    if (top == -INFINITY)
        return moe_fail(err, MOE_ERR_INVALID_ARG,
                        "sampler: all %d logits are NaN or -inf after penalties and bias; "
                        "nothing to sample", (int)s->n_vocab);
    size_t m;
    *sorted = true;
    if (p->temperature == 0.0f) {
        size_t i = moe_find_f32(s->work, (size_t)s->n_vocab, top);
        s->cand_id[0] = (int32_t)i;
        s->cand_logit[0] = top;
        m = 1;
    } else if (p->top_k > 0 && p->top_k < s->n_vocab) {
        m = filter_top_k(s, (size_t)p->top_k);
        if (p->top_p < 1.0f)
            m = filter_top_p_sorted(s, m, top);
        m = filter_min_p_sorted(s, m, top);
    } else {
        m = filter_full(s, top);
        *sorted = false;
    }
    *m_out = m;
    *top_out = top;
    return MOE_OK;
}

/* Sum of up to DRAW_BLOCK weights in a fixed order: eight interleaved
 * partial sums (independent chains, so the CPU overlaps them), combined
 * pairwise. Written out in C, so every build adds in the same order. */
static double block_sum(const float *w, size_t n)
{
    double lane[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (size_t q = 0; q < 8; q++)
            lane[q] += w[j + q];
    for (; j < n; j++)
        lane[j & 7] += w[j];
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
           ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

/* Step 7: work[j] = exp((logit_j - top) / T) for the m survivors, their
 * sums per DRAW_BLOCK in block_sum; returns the total (>= 1: the top's own
 * weight is 1). */
static double sampler_weights(moe_sampler *s, size_t m, float top)
{
    float t = s->params.temperature > 0.0f ? s->params.temperature : 1.0f;
    moe_exp_shift_f32(s->work, s->cand_logit, m, top, t);
    double z = 0.0;
    for (size_t k = 0, j = 0; j < m; k++, j += DRAW_BLOCK) {
        s->block_sum[k] = block_sum(s->work + j, m - j < DRAW_BLOCK ? m - j : DRAW_BLOCK);
        z += s->block_sum[k];
    }
    return z;
}

int32_t moe_sampler_sample(moe_sampler *s, const float *logits, const int32_t *recent,
                           size_t n_recent, moe_err *err)
{
    size_t m;
    float top;
    bool sorted;
    if (sampler_run(s, logits, recent, n_recent, &m, &top, &sorted, err) != MOE_OK)
        return -1;
    if (s->params.temperature == 0.0f)
        return s->cand_id[0];
    /* Every non-greedy call draws exactly one number, so the n-th token
     * always uses the n-th draw whatever the filters kept. The walk skips
     * whole blocks by their sums, then steps through one block. */
    double z = sampler_weights(s, m, top);
    double u = moe_rng_next_f64(&s->rng) * z, cum = 0.0;
    size_t n_blocks = (m + DRAW_BLOCK - 1) / DRAW_BLOCK, k = 0;
    for (; k + 1 < n_blocks && !(u < cum + s->block_sum[k]); k++)
        cum += s->block_sum[k];
    size_t end = (k + 1) * DRAW_BLOCK < m ? (k + 1) * DRAW_BLOCK : m;
    for (size_t j = k * DRAW_BLOCK; j < end; j++) {
        cum += s->work[j];
        if (u < cum)
            return s->cand_id[j];
    }
    /* Rounding left u past the block's end: take the last weighted token. */
    size_t j = end - 1;
    while (j > 0 && s->work[j] == 0.0f)
        j--;
    return s->cand_id[j];
}

moe_status moe_sampler_probs(moe_sampler *s, const float *logits, const int32_t *recent,
                             size_t n_recent, moe_token_prob *out, size_t cap,
                             size_t *n_total, moe_err *err)
{
    if (!n_total || (cap > 0 && !out))
        return moe_fail(err, MOE_ERR_INVALID_ARG, "sampler: %s is NULL", n_total ? "out" : "n_total");
    *n_total = 0;
    size_t m;
    float top;
    bool sorted;
    moe_status st = sampler_run(s, logits, recent, n_recent, &m, &top, &sorted, err);
    if (st != MOE_OK)
        return st;
    if (!sorted)
        cand_sort_desc(s->cand_logit, s->cand_id, m, false);
    double z = sampler_weights(s, m, top);
    /* Best first, so the zero weights (underflow at low temperature) trail. */
    size_t k = m;
    while (k > 1 && s->work[k - 1] == 0.0f)
        k--;
    *n_total = k;
    for (size_t j = 0; j < k && j < cap; j++) {
        out[j].token = s->cand_id[j];
        out[j].prob = (float)(s->work[j] / z);
    }
    return MOE_OK;
}

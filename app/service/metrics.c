/*
 * metrics.c — the registry of metrics.h: a fixed table of families, each a
 * hash of label sets to series, under one mutex; and the text exposition
 * (format 0.0.4) for GET /metrics.
 *
 *   svc_metrics ── fam[F_COUNT] ── family ── series (GHashTable)
 *                                            key "5:qwen3" "5:local" ...
 *                                            (length-prefixed label values,
 *                                             so no separator can collide)
 */
#include "metrics.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef enum { KIND_COUNTER, KIND_GAUGE, KIND_HISTOGRAM } metric_kind;

typedef struct family_def {
    const char *name;
    const char *help;
    metric_kind kind;
    guint       n_labels;
    const char *labels[4];
} family_def;

enum {
    F_REQUESTS, F_PROMPT, F_CACHED, F_COMPLETION, F_TTFT, F_DURATION,
    F_QUEUE, F_RUNNING, F_KV_USED, F_KV_TOTAL, F_MODEL_LOADED, F_UPSTREAM_UP,
    F_COUNT
};

#define MR {"model", "route"}
static const family_def defs[F_COUNT] = {
    [F_REQUESTS] = {"moedesk_requests_total",
                    "Requests answered, by model, route (local or upstream), endpoint and HTTP status.",
                    KIND_COUNTER, 4, {"model", "route", "endpoint", "status"}},
    [F_PROMPT] = {"moedesk_prompt_tokens_total", "Prompt tokens, cached ones included.",
                  KIND_COUNTER, 2, MR},
    [F_CACHED] = {"moedesk_cached_tokens_total",
                  "Prompt tokens not evaluated again (prefix reuse or the upstream's cache).",
                  KIND_COUNTER, 2, MR},
    [F_COMPLETION] = {"moedesk_completion_tokens_total", "Generated tokens.", KIND_COUNTER, 2, MR},
    [F_TTFT] = {"moedesk_time_to_first_token_seconds",
                "Time from the request's arrival to its first generated token.", KIND_HISTOGRAM,
                2, MR},
    [F_DURATION] = {"moedesk_request_duration_seconds",
                    "Time from the request's arrival to its last byte.", KIND_HISTOGRAM, 2, MR},
    [F_QUEUE] = {"moedesk_queue_depth", "Requests waiting for a sequence slot.", KIND_GAUGE, 0,
                 {NULL}},
    [F_RUNNING] = {"moedesk_running_sequences", "Sequences being decoded.", KIND_GAUGE, 0,
                   {NULL}},
    [F_KV_USED] = {"moedesk_kv_cache_used_cells", "KV cache cells in use.", KIND_GAUGE, 0,
                   {NULL}},
    [F_KV_TOTAL] = {"moedesk_kv_cache_total_cells", "KV cache cells in all.", KIND_GAUGE, 0,
                    {NULL}},
    [F_MODEL_LOADED] = {"moedesk_model_loaded", "1 for the model loaded now.", KIND_GAUGE, 1,
                        {"model"}},
    [F_UPSTREAM_UP] = {"moedesk_upstream_up", "1 when the upstream answered its last check.",
                       KIND_GAUGE, 1, {"upstream"}},
};

static const double bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                1,     2.5,  5,     10,   30,  60,  120};
#define N_BOUNDS G_N_ELEMENTS(bounds)

typedef struct series {
    char   **values;               /* n_labels label values, cleaned, owned */
    guint64  total;                /* counter                               */
    double   value;                /* gauge                                 */
    guint64  buckets[N_BOUNDS + 1]; /* histogram, per bucket (not cumulative); last = +Inf */
    double   sum;
    guint64  count;
} series;

typedef struct family {
    const family_def *def;
    GHashTable       *series; /* char *key -> series* */
} family;

struct svc_metrics {
    GMutex lock;
    family fam[F_COUNT];
};

static void series_free(gpointer p)
{
    series *s = p;
    g_strfreev(s->values);
    g_free(s);
}

/* A label value safe to print: valid UTF-8, no control characters but
 * newline (escaped when rendered), at most SVC_METRICS_LABEL_MAX bytes. */
static char *label_clean(const char *v)
{
    char *s = g_utf8_make_valid(v ? v : "", -1);
    size_t len = strlen(s);
    if (len > SVC_METRICS_LABEL_MAX) {
        const char *end = g_utf8_find_prev_char(s, s + SVC_METRICS_LABEL_MAX + 1);
        s[end ? end - s : 0] = '\0';
    }
    for (unsigned char *p = (unsigned char *)s; *p; p++)
        if ((*p < 0x20 && *p != '\n') || *p == 0x7f)
            *p = '_';
    return s;
}

/* The series for `values` (already cleaned), created on first use. Past
 * the cap, new label sets share the all-"_other" series. */
static series *get_series(family *f, char **values)
{
    GString *key = g_string_new(NULL);
    for (guint i = 0; i < f->def->n_labels; i++)
        g_string_append_printf(key, "%zu:%s", strlen(values[i]), values[i]);
    series *s = g_hash_table_lookup(f->series, key->str);
    if (!s && g_hash_table_size(f->series) >= SVC_METRICS_MAX_SERIES) {
        g_string_truncate(key, 0);
        for (guint i = 0; i < f->def->n_labels; i++)
            g_string_append(key, "6:_other");
        s = g_hash_table_lookup(f->series, key->str);
        if (!s) {
            for (guint i = 0; i < f->def->n_labels; i++) {
                g_free(values[i]);
                values[i] = g_strdup("_other");
            }
        }
    }
    if (!s) {
        s = g_new0(series, 1);
        s->values = g_new0(char *, f->def->n_labels + 1);
        for (guint i = 0; i < f->def->n_labels; i++)
            s->values[i] = g_strdup(values[i]);
        g_hash_table_insert(f->series, g_string_free(key, FALSE), s);
        return s;
    }
    g_string_free(key, TRUE);
    return s;
}

svc_metrics *svc_metrics_new(void)
{
    svc_metrics *m = g_new0(svc_metrics, 1);
    g_mutex_init(&m->lock);
    for (int i = 0; i < F_COUNT; i++) {
        m->fam[i].def = &defs[i];
        m->fam[i].series = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, series_free);
        if (defs[i].n_labels == 0)
            get_series(&m->fam[i], NULL); /* unlabelled gauges always show */
    }
    return m;
}

void svc_metrics_free(svc_metrics *m)
{
    if (!m)
        return;
    for (int i = 0; i < F_COUNT; i++)
        g_hash_table_unref(m->fam[i].series);
    g_mutex_clear(&m->lock);
    g_free(m);
}

static void hist_observe(series *s, double v)
{
    guint i = 0;
    while (i < N_BOUNDS && v > bounds[i])
        i++;
    s->buckets[i]++;
    s->sum += v;
    s->count++;
}

void svc_metrics_observe_request(svc_metrics *m, const svc_metrics_request *r)
{
    g_return_if_fail(m != NULL && r != NULL);
    char status[16];
    snprintf(status, sizeof status, "%d", r->status);
    char *req[4] = {label_clean(r->model), label_clean(r->route), label_clean(r->endpoint),
                    g_strdup(status)};
    char *mr[2] = {g_strdup(req[0]), g_strdup(req[1])};
    g_mutex_lock(&m->lock);
    get_series(&m->fam[F_REQUESTS], req)->total++;
    /* get_series may rewrite mr to "_other": copy once per family. */
    const int counters[] = {F_PROMPT, F_CACHED, F_COMPLETION};
    const gint64 counts[] = {r->prompt_tokens, r->cached_tokens, r->completion_tokens};
    for (int i = 0; i < 3; i++) {
        char *v[2] = {g_strdup(mr[0]), g_strdup(mr[1])};
        get_series(&m->fam[counters[i]], v)->total += counts[i] > 0 ? (guint64)counts[i] : 0;
        g_free(v[0]);
        g_free(v[1]);
    }
    if (isfinite(r->ttft_s) && r->ttft_s >= 0) {
        char *v[2] = {g_strdup(mr[0]), g_strdup(mr[1])};
        hist_observe(get_series(&m->fam[F_TTFT], v), r->ttft_s);
        g_free(v[0]);
        g_free(v[1]);
    }
    if (isfinite(r->duration_s))
        hist_observe(get_series(&m->fam[F_DURATION], mr), r->duration_s > 0 ? r->duration_s : 0);
    g_mutex_unlock(&m->lock);
    for (int i = 0; i < 4; i++)
        g_free(req[i]);
    g_free(mr[0]);
    g_free(mr[1]);
}

static int gauge_family(svc_metrics_gauge g)
{
    switch (g) {
    case SVC_METRICS_QUEUE_DEPTH: return F_QUEUE;
    case SVC_METRICS_RUNNING_SEQUENCES: return F_RUNNING;
    case SVC_METRICS_KV_USED_CELLS: return F_KV_USED;
    case SVC_METRICS_KV_TOTAL_CELLS: return F_KV_TOTAL;
    case SVC_METRICS_MODEL_LOADED: return F_MODEL_LOADED;
    case SVC_METRICS_UPSTREAM_UP: return F_UPSTREAM_UP;
    }
    return -1;
}

void svc_metrics_set_gauge(svc_metrics *m, svc_metrics_gauge g, const char *label, double value)
{
    g_return_if_fail(m != NULL);
    int fi = gauge_family(g);
    if (fi < 0 || isnan(value))
        return;
    char *v[1] = {label_clean(label)};
    g_mutex_lock(&m->lock);
    get_series(&m->fam[fi], v)->value = value;
    g_mutex_unlock(&m->lock);
    g_free(v[0]);
}

void svc_metrics_clear_gauge(svc_metrics *m, svc_metrics_gauge g)
{
    g_return_if_fail(m != NULL);
    int fi = gauge_family(g);
    if (fi < 0)
        return;
    g_mutex_lock(&m->lock);
    if (m->fam[fi].def->n_labels)
        g_hash_table_remove_all(m->fam[fi].series);
    else
        get_series(&m->fam[fi], NULL)->value = 0;
    g_mutex_unlock(&m->lock);
}

/* ---- rendering ---- */

/* The shortest text that reads back as v ("0.005", not 0.0050000000000000001). */
static void append_double(GString *out, double v)
{
    if (isnan(v)) {
        g_string_append(out, "NaN");
        return;
    }
    if (isinf(v)) {
        g_string_append(out, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    /* At least as many digits as the integer part has, so 60 prints as
     * "60", not "6e+01". */
    int p0 = 1;
    if (fabs(v) >= 1 && fabs(v) < 1e15)
        p0 = (int)floor(log10(fabs(v))) + 1;
    for (int p = p0; p <= 17; p++) {
        char fmt[16];
        snprintf(fmt, sizeof fmt, "%%.%dg", p);
        g_ascii_formatd(buf, sizeof buf, fmt, v);
        if (g_ascii_strtod(buf, NULL) == v)
            break;
    }
    g_string_append(out, buf);
}

static void append_escaped(GString *out, const char *v)
{
    for (const char *p = v; *p; p++) {
        if (*p == '\\')
            g_string_append(out, "\\\\");
        else if (*p == '"')
            g_string_append(out, "\\\"");
        else if (*p == '\n')
            g_string_append(out, "\\n");
        else
            g_string_append_c(out, *p);
    }
}

/* name{l1="v1",...[,le="x"]} — braces left out when there are no labels. */
static void append_name(GString *out, const family_def *d, const char *suffix, const series *s,
                        const char *le)
{
    g_string_append(out, d->name);
    g_string_append(out, suffix);
    if (!d->n_labels && !le)
        return;
    g_string_append_c(out, '{');
    for (guint i = 0; i < d->n_labels; i++) {
        g_string_append_printf(out, "%s%s=\"", i ? "," : "", d->labels[i]);
        append_escaped(out, s->values[i]);
        g_string_append_c(out, '"');
    }
    if (le)
        g_string_append_printf(out, "%sle=\"%s\"", d->n_labels ? "," : "", le);
    g_string_append_c(out, '}');
}

static gint series_cmp(gconstpointer a, gconstpointer b, gpointer def)
{
    const series *x = *(series *const *)a, *y = *(series *const *)b;
    for (guint i = 0; i < ((const family_def *)def)->n_labels; i++) {
        int c = strcmp(x->values[i], y->values[i]);
        if (c)
            return c;
    }
    return 0;
}

static void render_series(GString *out, const family_def *d, const series *s)
{
    switch (d->kind) {
    case KIND_COUNTER:
        append_name(out, d, "", s, NULL);
        g_string_append_printf(out, " %" G_GUINT64_FORMAT "\n", s->total);
        break;
    case KIND_GAUGE:
        append_name(out, d, "", s, NULL);
        g_string_append_c(out, ' ');
        append_double(out, s->value);
        g_string_append_c(out, '\n');
        break;
    case KIND_HISTOGRAM: {
        guint64 cum = 0;
        for (guint b = 0; b <= N_BOUNDS; b++) {
            cum += s->buckets[b];
            GString *le = g_string_new(NULL);
            if (b < N_BOUNDS)
                append_double(le, bounds[b]);
            else
                g_string_append(le, "+Inf");
            append_name(out, d, "_bucket", s, le->str);
            g_string_append_printf(out, " %" G_GUINT64_FORMAT "\n", cum);
            g_string_free(le, TRUE);
        }
        append_name(out, d, "_sum", s, NULL);
        g_string_append_c(out, ' ');
        append_double(out, s->sum);
        g_string_append_c(out, '\n');
        append_name(out, d, "_count", s, NULL);
        g_string_append_printf(out, " %" G_GUINT64_FORMAT "\n", s->count);
        break;
    }
    }
}

void svc_metrics_render(svc_metrics *m, GString *out)
{
    g_return_if_fail(m != NULL && out != NULL);
    static const char *const kind_names[] = {"counter", "gauge", "histogram"};
    g_mutex_lock(&m->lock);
    for (int i = 0; i < F_COUNT; i++) {
        const family_def *d = m->fam[i].def;
        g_string_append_printf(out, "# HELP %s %s\n# TYPE %s %s\n", d->name, d->help, d->name,
                               kind_names[d->kind]);
        GPtrArray *all = g_ptr_array_new();
        GHashTableIter it;
        gpointer v;
        g_hash_table_iter_init(&it, m->fam[i].series);
        while (g_hash_table_iter_next(&it, NULL, &v))
            g_ptr_array_add(all, v);
        g_ptr_array_sort_with_data(all, series_cmp, (gpointer)d);
        for (guint j = 0; j < all->len; j++)
            render_series(out, d, g_ptr_array_index(all, j));
        g_ptr_array_unref(all);
    }
    g_mutex_unlock(&m->lock);
}

/*
 * report-tail.c — the P95 tail of the reported week: the ok requests slower
 * than the week's latency P95, read from raw rows (the store's
 * (start_ms, total_ms) index keeps this to the qualifying rows). It lists
 * the slowest and asks three questions of the whole tail, so a user can see
 * why it is slow: were the prompts long, was it one caller (or model), was
 * it one hour? Thresholds for each hint are in docs/report.md.
 */
#include "report-private.h"

#include <math.h>
#include <string.h>

static void tail_row_free(gpointer p)
{
    report_tail_row *t = p;
    if (!t)
        return;
    g_free(t->caller);
    g_free(t->client);
    g_free(t->model);
    g_free(t->route);
    g_free(t);
}

void report_tail_clear(report_tail *t)
{
    if (t->slowest)
        g_ptr_array_unref(t->slowest);
    if (t->hints)
        g_ptr_array_unref(t->hints);
    g_free(t->top_caller);
    g_free(t->top_model);
    g_free(t->top_hour);
    memset(t, 0, sizeof *t);
}

typedef struct tail_ctx {
    GPtrArray *rows;            /* report_tail_row* */
    const report_settings *st;
} tail_ctx;

static gboolean on_tail_row(gint64 id, const usage_row *row, gpointer data, GError **error)
{
    tail_ctx *c = data;
    report_tail_row *t = g_new0(report_tail_row, 1);
    t->id = id;
    t->start_ms = row->start_ms;
    t->caller = g_strdup(row->caller);
    t->client = g_strdup(row->client);
    t->model = g_strdup(row->model);
    t->route = g_strdup(row->route);
    t->prompt_tokens = row->prompt_tokens;
    t->completion_tokens = row->completion_tokens;
    t->ttft_ms = row->ttft_ms;
    t->total_ms = row->total_ms;
    g_ptr_array_add(c->rows, t);
    return TRUE;
}

static gint cmp_slowest(gconstpointer pa, gconstpointer pb)
{
    const report_tail_row *a = *(report_tail_row *const *)pa;
    const report_tail_row *b = *(report_tail_row *const *)pb;
    if (a->total_ms != b->total_ms)
        return a->total_ms > b->total_ms ? -1 : 1;
    if (a->start_ms != b->start_ms)
        return a->start_ms < b->start_ms ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Most frequent key of a count table: count desc, then name asc. */
static char *top_of(GHashTable *counts, gint64 *count)
{
    GHashTableIter it;
    gpointer key, value;
    const char *best = NULL;
    gint64 best_n = 0;
    g_hash_table_iter_init(&it, counts);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        gint64 n = GPOINTER_TO_SIZE(value);
        if (n > best_n || (n == best_n && best && strcmp(key, best) < 0)) {
            best = key;
            best_n = n;
        }
    }
    *count = best_n;
    return g_strdup(best);
}

static void bump(GHashTable *counts, const char *key)
{
    gpointer old = g_hash_table_lookup(counts, key);
    g_hash_table_replace(counts, g_strdup(key), GSIZE_TO_POINTER(GPOINTER_TO_SIZE(old) + 1));
}

static double call_share(const report_week_data *w, report_dim d, const char *name)
{
    double calls = w->v[REPORT_M_CALLS];
    for (guint i = 0; i < w->groups[d]->len; i++) {
        const report_group *g = w->groups[d]->pdata[i];
        if (g_str_equal(g->name, name))
            return calls > 0 ? g->v[REPORT_M_CALLS] / calls : 0;
    }
    return 0;
}

static void add_hint(report_tail *t, const char *kind, char *text)
{
    g_ptr_array_add(t->hints, g_strdup(kind));
    g_ptr_array_add(t->hints, text);
}

gboolean report_analyse_tail(usage_report *r, const report_source *src, GError **error)
{
    report_tail *t = &r->tail;
    const report_week_data *w = usage_report_current(r);
    t->slowest = g_ptr_array_new_with_free_func(tail_row_free);
    t->hints = g_ptr_array_new_with_free_func(g_free);
    t->threshold_ms = isnan(w->v[REPORT_M_LATENCY_P95]) ? -1 : (gint64)w->v[REPORT_M_LATENCY_P95];
    if (t->threshold_ms < 0)
        return TRUE;
    tail_ctx c = {g_ptr_array_new_with_free_func(tail_row_free), r->settings};
    if (!src->each_row(src->ctx, w->week.start_ms, w->week.end_ms, t->threshold_ms,
                       on_tail_row, &c, error)) {
        g_ptr_array_unref(c.rows);
        return FALSE;
    }
    t->n_rows = c.rows->len;
    g_ptr_array_sort(c.rows, cmp_slowest);

    g_autoptr(GHashTable) callers = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(GHashTable) models = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(GHashTable) hours = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    gint64 prompt_sum = 0;
    for (guint i = 0; i < c.rows->len; i++) {
        const report_tail_row *row = c.rows->pdata[i];
        prompt_sum += row->prompt_tokens;
        bump(callers, row->caller);
        bump(models, row->model);
        g_autofree char *hour = report_format_time(r->settings->tz, row->start_ms,
                                                   "%Y-%m-%d %H:00");
        bump(hours, hour);
    }
    double calls = w->v[REPORT_M_CALLS];
    t->week_mean_prompt = calls > 0 ? w->v[REPORT_M_PROMPT_TOKENS] / calls : NAN;
    t->tail_mean_prompt = t->n_rows ? (double)prompt_sum / (double)t->n_rows : NAN;
    gint64 n;
    double tail_n = (double)t->n_rows;
    if (t->n_rows) {
        t->top_caller = top_of(callers, &n);
        t->top_caller_share = n / tail_n;
        t->top_caller_call_share = call_share(w, REPORT_DIM_CALLER, t->top_caller);
        t->top_model = top_of(models, &n);
        t->top_model_share = n / tail_n;
        t->top_model_call_share = call_share(w, REPORT_DIM_MODEL, t->top_model);
        t->top_hour = top_of(hours, &n);
        t->top_hour_share = n / tail_n;
    }
    for (guint i = 0; i < c.rows->len && (int)i < r->settings->tail_rows; i++)
        g_ptr_array_add(t->slowest, g_steal_pointer(&c.rows->pdata[i]));
    g_ptr_array_unref(c.rows);  /* stolen slots are NULL; the free func skips them */

    if (!t->n_rows)
        return TRUE;
    if (t->week_mean_prompt > 0 && t->tail_mean_prompt >= 2 * t->week_mean_prompt)
        add_hint(t, "long_prompts",
                 g_strdup_printf("Long prompts: the slow requests averaged %.0f prompt tokens, "
                                 "%.1f× the week's average of %.0f.", t->tail_mean_prompt,
                                 t->tail_mean_prompt / t->week_mean_prompt, t->week_mean_prompt));
    if (t->top_caller_share >= 0.5 && t->top_caller_share >= 2 * t->top_caller_call_share)
        add_hint(t, "one_caller",
                 g_strdup_printf("One caller: '%s' sent %.0f%% of the slow requests but %.0f%% "
                                 "of all calls.", t->top_caller, 100 * t->top_caller_share,
                                 100 * t->top_caller_call_share));
    if (t->top_model_share >= 0.5 && t->top_model_share >= 2 * t->top_model_call_share)
        add_hint(t, "one_model",
                 g_strdup_printf("One model: '%s' served %.0f%% of the slow requests but %.0f%% "
                                 "of all calls.", t->top_model, 100 * t->top_model_share,
                                 100 * t->top_model_call_share));
    if (t->n_rows >= 5 && t->top_hour_share >= 0.25)
        add_hint(t, "one_hour",
                 g_strdup_printf("One hour: %.0f%% of the slow requests started in the hour from "
                                 "%s.", 100 * t->top_hour_share, t->top_hour));
    if (t->hints->len == 0)
        add_hint(t, "spread",
                 g_strdup("No single cause stands out: the slow requests are spread over "
                          "prompt lengths, callers, models and hours."));
    return TRUE;
}

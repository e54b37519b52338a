/*
 * report-build.c — turns roll-ups into weekly figures.
 *
 * The window is the reported week, the n_weeks - 1 before it, and
 * REPORT_LOOKBACK more so even the oldest shown week has a previous week
 * and a four-week average. Whole UTC hours inside one week come from the
 * `hourly` roll-ups; an hour cut by a week boundary (zones with a :30 or
 * :45 offset) is read from raw rows, so every request lands in exactly the
 * week its start time belongs to. Each record is added to the week total
 * and to one group per dimension (model, route, caller, client), together
 * with its cost: upstream tokens at the route's price, local busy time as
 * energy. The week's fixed cost (amortisation + fixed monthly) is shared
 * among groups by local busy time.
 */
#include "report-private.h"

#include <math.h>
#include <string.h>

static const report_metric_info metric_info[REPORT_N_METRICS] = {
    [REPORT_M_CALLS] = {"calls", "Calls", REPORT_KIND_COUNT, +1},
    [REPORT_M_PROMPT_TOKENS] = {"prompt_tokens", "Prompt tokens", REPORT_KIND_COUNT, +1},
    [REPORT_M_CACHED_TOKENS] = {"cached_tokens", "Cached prompt tokens", REPORT_KIND_COUNT, 0},
    [REPORT_M_COMPLETION_TOKENS] = {"completion_tokens", "Completion tokens",
                                    REPORT_KIND_COUNT, +1},
    [REPORT_M_TOTAL_TOKENS] = {"total_tokens", "Total tokens", REPORT_KIND_COUNT, +1},
    [REPORT_M_TTFT_P50] = {"ttft_p50_ms", "TTFT median", REPORT_KIND_MS, -1},
    [REPORT_M_TTFT_P95] = {"ttft_p95_ms", "TTFT P95", REPORT_KIND_MS, -1},
    [REPORT_M_LATENCY_P50] = {"latency_p50_ms", "Latency median", REPORT_KIND_MS, -1},
    [REPORT_M_LATENCY_P95] = {"latency_p95_ms", "Latency P95", REPORT_KIND_MS, -1},
    [REPORT_M_DECODE_TPS] = {"decode_tps", "Decode tokens/s", REPORT_KIND_RATE, +1},
    [REPORT_M_ERROR_RATE] = {"error_rate", "Error rate", REPORT_KIND_FRACTION, -1},
    [REPORT_M_COST] = {"cost", "Cost", REPORT_KIND_MONEY, 0},
    [REPORT_M_COST_PER_1K] = {"cost_per_1k_tokens", "Cost per 1k tokens", REPORT_KIND_MONEY, -1},
};

const report_metric_info *report_metric_get(report_metric m)
{
    return &metric_info[m];
}

const char *report_dim_name(report_dim d)
{
    static const char *const names[REPORT_N_DIMS] = {"model", "route", "caller", "client"};
    return names[d];
}

/* ---- accumulators ------------------------------------------------------ */

static void acc_free(gpointer p)
{
    report_acc *a = p;
    if (!a)
        return;
    g_free(a->ttft);
    g_free(a->total);
    g_free(a);
}

static void acc_add(report_acc *a, const usage_sums *s, const usage_hist_pair *ttft,
                    guint n_ttft, const usage_hist_pair *total, guint n_total,
                    gboolean local, double upstream_usd, gint64 unpriced)
{
    usage_sums_add(&a->sums, s);
    if (n_ttft) {
        if (!a->ttft)
            a->ttft = g_new0(guint64, USAGE_HIST_N_BUCKETS);
        usage_hist_add_pairs(a->ttft, ttft, n_ttft);
    }
    if (n_total) {
        if (!a->total)
            a->total = g_new0(guint64, USAGE_HIST_N_BUCKETS);
        usage_hist_add_pairs(a->total, total, n_total);
    }
    a->upstream_usd += upstream_usd;
    a->unpriced_tokens += unpriced;
    if (local) {
        a->local_busy_ms += s->busy_ms;
        a->local_busy_unmeasured += s->busy_ms_unmeasured;
        a->local_energy_wms += s->energy_wms;
        a->local_prompt += s->prompt_tokens;
        a->local_cached += s->cached_tokens;
        a->local_completion += s->completion_tokens;
    }
}

static report_acc *dim_acc(report_week_acc *w, report_dim d, const char *name)
{
    report_acc *a = g_hash_table_lookup(w->dims[d], name);
    if (!a) {
        a = g_new0(report_acc, 1);
        g_hash_table_insert(w->dims[d], g_strdup(name), a);
    }
    return a;
}

static const report_price no_price;

static const report_price *lookup_price(report_build_ctx *b, const char *route,
                                        const char *model)
{
    g_string_assign(b->key, route);
    g_string_append_c(b->key, '\x1f');
    g_string_append(b->key, model);
    const report_price *p = g_hash_table_lookup(b->price_cache, b->key->str);
    if (!p) {
        p = report_prices_find(b->prices, route, model);
        if (!p)
            p = &no_price;
        g_hash_table_insert(b->price_cache, g_strdup(b->key->str), (gpointer)p);
    }
    return p == &no_price ? NULL : p;
}

static void add_record(report_build_ctx *b, guint wi, const char *model, const char *route,
                       const char *caller, const char *client, const usage_sums *s,
                       const usage_hist_pair *ttft, guint n_ttft,
                       const usage_hist_pair *total, guint n_total)
{
    report_week_acc *w = &b->acc[wi];
    gboolean local = g_str_equal(route, "local");
    double usd = 0;
    gint64 unpriced = 0;
    if (!local) {
        const report_price *p = lookup_price(b, route, model);
        if (p) {
            usd = report_price_usd(p, s->prompt_tokens, s->cached_tokens, s->completion_tokens);
        } else {
            unpriced = s->prompt_tokens + s->completion_tokens;
            g_hash_table_add(w->unpriced, g_strdup_printf("%s/%s", route, model));
        }
    }
    report_acc *targets[] = {&w->total, dim_acc(w, REPORT_DIM_MODEL, model),
                             dim_acc(w, REPORT_DIM_ROUTE, route),
                             dim_acc(w, REPORT_DIM_CALLER, caller),
                             dim_acc(w, REPORT_DIM_CLIENT, client)};
    for (guint i = 0; i < G_N_ELEMENTS(targets); i++)
        acc_add(targets[i], s, ttft, n_ttft, total, n_total, local, usd, unpriced);
}

/* Week index holding [from, to), or -1 when it crosses a boundary/outside. */
static int week_of_span(const report_build_ctx *b, gint64 from, gint64 to)
{
    int lo = 0, hi = (int)b->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (from < b->weeks[mid].start_ms)
            hi = mid - 1;
        else if (from >= b->weeks[mid].end_ms)
            lo = mid + 1;
        else
            return to <= b->weeks[mid].end_ms ? mid : -1;
    }
    return -1;
}

static gboolean on_hour(const usage_hour_rec *rec, gpointer data, GError **error)
{
    report_build_ctx *b = data;
    gint64 from = rec->utc_hour * 3600000;
    int wi = week_of_span(b, from, from + 3600000);
    if (wi >= 0)
        add_record(b, (guint)wi, rec->model, rec->route, rec->caller, rec->client, &rec->sums,
                   rec->ttft, rec->n_ttft, rec->total, rec->n_total);
    return TRUE;
}

static gboolean on_edge_row(gint64 id, const usage_row *row, gpointer data, GError **error)
{
    report_build_ctx *b = data;
    int wi = week_of_span(b, row->start_ms, row->start_ms);
    if (wi < 0)
        return TRUE;
    usage_sums s = {0};
    usage_sums_add_row(&s, row);
    usage_hist_pair ttft = {0, 1}, total = {0, 1};
    guint n_ttft = 0, n_total = 0;
    if (!usage_row_is_error(row)) {
        total.bucket = usage_hist_bucket(row->total_ms);
        n_total = 1;
        if (row->ttft_ms >= 0) {
            ttft.bucket = usage_hist_bucket(row->ttft_ms);
            n_ttft = 1;
        }
    }
    add_record(b, (guint)wi, row->model, row->route, row->caller, row->client, &s, &ttft,
               n_ttft, &total, n_total);
    return TRUE;
}

/* Read every record of the window into the week accumulators. */
static gboolean load_window(report_build_ctx *b, const report_source *src, GError **error)
{
    gint64 start = b->weeks[0].start_ms, end = b->weeks[b->n - 1].end_ms;
    gint64 first_hour = start / 3600000, last_hour = (end + 3599999) / 3600000;
    if (!src->each_hour(src->ctx, first_hour, last_hour, on_hour, b, error))
        return FALSE;
    /* Hours cut by a boundary: every week start plus the window's end. */
    gint64 prev_cut = -1;
    for (guint i = 0; i <= b->n; i++) {
        gint64 edge = i < b->n ? b->weeks[i].start_ms : end;
        if (edge % 3600000 == 0)
            continue;
        gint64 hour = edge / 3600000;
        if (hour == prev_cut)
            continue;
        prev_cut = hour;
        if (!src->each_row(src->ctx, hour * 3600000, (hour + 1) * 3600000, -1, on_edge_row, b,
                           error))
            return FALSE;
    }
    return TRUE;
}

/* ---- figures ----------------------------------------------------------- */

static double pct_or_nan(const guint64 *counts, guint pct)
{
    if (!counts)
        return NAN;
    gint64 v = usage_hist_percentile(counts, pct);
    return v < 0 ? NAN : (double)v;
}

void report_acc_figures(const report_acc *a, const report_settings *st, double fixed_share,
                        double v[REPORT_N_METRICS])
{
    const usage_sums *s = &a->sums;
    v[REPORT_M_CALLS] = (double)s->calls;
    v[REPORT_M_PROMPT_TOKENS] = (double)s->prompt_tokens;
    v[REPORT_M_CACHED_TOKENS] = (double)s->cached_tokens;
    v[REPORT_M_COMPLETION_TOKENS] = (double)s->completion_tokens;
    gint64 tokens = s->prompt_tokens + s->completion_tokens;
    v[REPORT_M_TOTAL_TOKENS] = (double)tokens;
    v[REPORT_M_TTFT_P50] = pct_or_nan(a->ttft, 50);
    v[REPORT_M_TTFT_P95] = pct_or_nan(a->ttft, 95);
    v[REPORT_M_LATENCY_P50] = pct_or_nan(a->total, 50);
    v[REPORT_M_LATENCY_P95] = pct_or_nan(a->total, 95);
    v[REPORT_M_DECODE_TPS] = s->decode_s > 0 ? (double)s->decode_tokens / s->decode_s : NAN;
    v[REPORT_M_ERROR_RATE] = s->calls > 0 ? (double)s->errors / (double)s->calls : NAN;
    double cost = a->upstream_usd * st->usd_rate + report_acc_kwh(a, st) * st->kwh_price +
                  fixed_share;
    v[REPORT_M_COST] = cost;
    v[REPORT_M_COST_PER_1K] = tokens > 0 ? cost / (double)tokens * 1000.0 : NAN;
}

double report_acc_kwh(const report_acc *a, const report_settings *st)
{
    return (a->local_energy_wms + st->gpu_watts * (double)a->local_busy_unmeasured) / 3.6e9;
}

static gint cmp_group(gconstpointer pa, gconstpointer pb)
{
    const report_group *a = *(report_group *const *)pa, *b = *(report_group *const *)pb;
    if (a->v[REPORT_M_CALLS] != b->v[REPORT_M_CALLS])
        return a->v[REPORT_M_CALLS] > b->v[REPORT_M_CALLS] ? -1 : 1;
    return strcmp(a->name, b->name);
}

static void group_free(gpointer p)
{
    report_group *g = p;
    g_free(g->name);
    g_free(g);
}

void report_week_data_free(gpointer p)
{
    report_week_data *w = p;
    if (!w)
        return;
    for (guint d = 0; d < REPORT_N_DIMS; d++)
        if (w->groups[d])
            g_ptr_array_unref(w->groups[d]);
    if (w->cost.unpriced_routes)
        g_ptr_array_unref(w->cost.unpriced_routes);
    g_free(w);
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Figures of week i from its accumulator. */
static report_week_data *week_figures(report_build_ctx *b, guint i)
{
    const report_settings *st = b->settings;
    report_week_acc *wa = &b->acc[i];
    report_week_data *w = g_new0(report_week_data, 1);
    w->week = b->weeks[i];
    w->has_data = b->any_data && w->week.end_ms > b->first_ms;
    double fixed = w->has_data ? report_settings_fixed_per_week(st) : 0;
    report_acc_figures(&wa->total, st, fixed, w->v);
    if (!w->has_data)
        for (guint m = 0; m < REPORT_N_METRICS; m++)
            w->v[m] = NAN;
    w->cost.upstream = wa->total.upstream_usd * st->usd_rate;
    w->cost.local_kwh = report_acc_kwh(&wa->total, st);
    w->cost.electricity = w->cost.local_kwh * st->kwh_price;
    w->cost.fixed = fixed;
    w->cost.local_busy_ms = wa->total.local_busy_ms;
    w->cost.local_tokens = wa->total.local_prompt + wa->total.local_completion;
    w->cost.unpriced_tokens = wa->total.unpriced_tokens;
    w->cost.unpriced_routes = g_ptr_array_new_with_free_func(g_free);
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, wa->unpriced);
    while (g_hash_table_iter_next(&it, &key, NULL))
        g_ptr_array_add(w->cost.unpriced_routes, g_strdup(key));
    g_ptr_array_sort(w->cost.unpriced_routes, cmp_str);

    gint64 busy_total = wa->total.local_busy_ms;
    for (guint d = 0; d < REPORT_N_DIMS; d++) {
        w->groups[d] = g_ptr_array_new_with_free_func(group_free);
        g_hash_table_iter_init(&it, wa->dims[d]);
        while (g_hash_table_iter_next(&it, &key, &value)) {
            const report_acc *a = value;
            report_group *g = g_new0(report_group, 1);
            g->name = g_strdup(key);
            double share = busy_total > 0 ? fixed * (double)a->local_busy_ms / (double)busy_total
                                          : 0.0;
            report_acc_figures(a, st, share, g->v);
            g_ptr_array_add(w->groups[d], g);
        }
        g_ptr_array_sort(w->groups[d], cmp_group);
    }
    return w;
}

/* ---- entry point ------------------------------------------------------- */

static void build_clear(report_build_ctx *b)
{
    for (guint i = 0; i < b->n && b->acc; i++) {
        g_free(b->acc[i].total.ttft);
        g_free(b->acc[i].total.total);
        for (guint d = 0; d < REPORT_N_DIMS; d++)
            g_hash_table_unref(b->acc[i].dims[d]);
        g_hash_table_unref(b->acc[i].unpriced);
    }
    g_free(b->acc);
    g_free(b->weeks);
    if (b->price_cache)
        g_hash_table_unref(b->price_cache);
    if (b->key)
        g_string_free(b->key, TRUE);
}

usage_report *report_build(const report_source *src, const report_settings *st,
                           const report_prices *prices, const char *week, guint n_weeks,
                           gint64 now_ms, GError **error)
{
    report_week target;
    if (week) {
        int y, w;
        if (!report_week_parse(week, &y, &w, error))
            return NULL;
        report_week_from_iso(st->tz, st->week_start, y, w, &target);
    } else {
        report_week now;
        report_week_containing(st->tz, st->week_start, now_ms, &now);
        report_week_shift(st->tz, st->week_start, &now, -1, &target);
    }
    n_weeks = CLAMP(n_weeks, 1u, 104u);

    report_build_ctx b = {.settings = st, .prices = prices};
    gint64 last_ms = 0;
    if (!src->time_range(src->ctx, &b.first_ms, &last_ms, &b.any_data, error))
        return NULL;
    b.n = n_weeks + REPORT_LOOKBACK;
    b.weeks = g_new(report_week, b.n);
    for (guint i = 0; i < b.n; i++)
        report_week_shift(st->tz, st->week_start, &target, (int)i - (int)b.n + 1, &b.weeks[i]);
    b.acc = g_new0(report_week_acc, b.n);
    for (guint i = 0; i < b.n; i++) {
        for (guint d = 0; d < REPORT_N_DIMS; d++)
            b.acc[i].dims[d] = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, acc_free);
        b.acc[i].unpriced = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    }
    b.price_cache = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    b.key = g_string_new(NULL);

    if (!load_window(&b, src, error)) {
        build_clear(&b);
        return NULL;
    }
    if (b.acc[b.n - 1].total.sums.calls == 0) {
        g_autofree char *from = report_format_time(st->tz, target.start_ms, "%Y-%m-%d");
        g_autofree char *to = report_format_time(st->tz, target.end_ms - 1, "%Y-%m-%d");
        g_set_error(error, REPORT_ERROR, REPORT_ERROR_NO_DATA,
                    "%s: no usage recorded in week %s (%s to %s, %s)", src->label, target.label,
                    from, to, st->timezone[0] ? st->timezone : "local time");
        build_clear(&b);
        return NULL;
    }

    usage_report *r = g_new0(usage_report, 1);
    r->settings = st;
    r->prices = prices;
    r->source_label = g_strdup(src->label);
    r->generated_ms = now_ms;
    GPtrArray *all = g_ptr_array_new_with_free_func(report_week_data_free);
    for (guint i = 0; i < b.n; i++)
        g_ptr_array_add(all, week_figures(&b, i));
    report_analyse_weeks(r, all);
    /* Keep only the shown weeks. */
    g_ptr_array_remove_range(all, 0, REPORT_LOOKBACK);
    r->weeks = all;
    report_analyse_costs(r, &b.acc[b.n - 1]);
    gboolean ok = report_analyse_tail(r, src, error);
    build_clear(&b);
    if (!ok) {
        usage_report_free(r);
        return NULL;
    }
    return r;
}

void usage_report_free(usage_report *r)
{
    if (!r)
        return;
    g_free(r->source_label);
    if (r->weeks)
        g_ptr_array_unref(r->weeks);
    if (r->alerts)
        g_ptr_array_unref(r->alerts);
    if (r->comparisons)
        g_ptr_array_unref(r->comparisons);
    report_tail_clear(&r->tail);
    g_free(r->rec.reason);
    g_free(r);
}

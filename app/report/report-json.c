/*
 * report-json.c — the report as JSON: the machine-readable form the REST
 * endpoint serves and the tests compare against an independent reference.
 * Counts and milliseconds are integers, other figures doubles, "no value"
 * is null and a change from zero is the string "new". The layout is
 * documented in docs/report.md ("JSON").
 */
#include "report-private.h"

#include <json-glib/json-glib.h>
#include <math.h>

static void add_number(JsonBuilder *b, const char *name, report_kind kind, double v)
{
    json_builder_set_member_name(b, name);
    if (isnan(v))
        json_builder_add_null_value(b);
    else if (kind == REPORT_KIND_COUNT || kind == REPORT_KIND_MS)
        json_builder_add_int_value(b, (gint64)llround(v));
    else
        json_builder_add_double_value(b, v);
}

static void add_double(JsonBuilder *b, const char *name, double v)
{
    add_number(b, name, REPORT_KIND_RATE, v);
}

static void add_int(JsonBuilder *b, const char *name, gint64 v)
{
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, v);
}

static void add_string(JsonBuilder *b, const char *name, const char *v)
{
    json_builder_set_member_name(b, name);
    if (v)
        json_builder_add_string_value(b, v);
    else
        json_builder_add_null_value(b);
}

typedef enum { AS_FIGURES, AS_DOUBLES, AS_CHANGES } figures_as;

/* One value per metric: figures in their own kind (counts as integers),
 * averages as doubles, changes as doubles or "new". */
static void add_figures(JsonBuilder *b, const char *name, const double *v, figures_as as)
{
    json_builder_set_member_name(b, name);
    json_builder_begin_object(b);
    for (guint m = 0; m < REPORT_N_METRICS; m++) {
        const report_metric_info *info = report_metric_get(m);
        if (as == AS_CHANGES && isinf(v[m])) {
            add_string(b, info->key, "new");
            continue;
        }
        add_number(b, info->key, as == AS_FIGURES ? info->kind : REPORT_KIND_RATE, v[m]);
    }
    json_builder_end_object(b);
}

static char *iso_local(const usage_report *r, gint64 ms)
{
    return report_format_time(r->settings->tz, ms, "%Y-%m-%dT%H:%M:%S%:z");
}

static void add_week(JsonBuilder *b, const usage_report *r, const report_week_data *w)
{
    json_builder_begin_object(b);
    add_string(b, "week", w->week.label);
    g_autofree char *start = iso_local(r, w->week.start_ms);
    g_autofree char *end = iso_local(r, w->week.end_ms);
    add_string(b, "start", start);
    add_string(b, "end", end);
    add_int(b, "start_ms", w->week.start_ms);
    add_int(b, "end_ms", w->week.end_ms);
    json_builder_set_member_name(b, "has_data");
    json_builder_add_boolean_value(b, w->has_data);
    add_figures(b, "figures", w->v, AS_FIGURES);
    add_figures(b, "change_pct", w->change_pct, AS_CHANGES);
    add_figures(b, "avg4", w->avg4, AS_DOUBLES);
    add_figures(b, "vs_avg4_pct", w->vs_avg4_pct, AS_CHANGES);

    json_builder_set_member_name(b, "cost");
    json_builder_begin_object(b);
    add_double(b, "upstream", w->cost.upstream);
    add_double(b, "electricity", w->cost.electricity);
    add_double(b, "fixed", w->cost.fixed);
    add_double(b, "local_kwh", w->cost.local_kwh);
    add_int(b, "local_busy_ms", w->cost.local_busy_ms);
    add_int(b, "local_tokens", w->cost.local_tokens);
    add_int(b, "unpriced_tokens", w->cost.unpriced_tokens);
    json_builder_set_member_name(b, "unpriced_routes");
    json_builder_begin_array(b);
    for (guint i = 0; i < w->cost.unpriced_routes->len; i++)
        json_builder_add_string_value(b, w->cost.unpriced_routes->pdata[i]);
    json_builder_end_array(b);
    json_builder_end_object(b);

    json_builder_set_member_name(b, "breakdown");
    json_builder_begin_object(b);
    for (guint d = 0; d < REPORT_N_DIMS; d++) {
        json_builder_set_member_name(b, report_dim_name(d));
        json_builder_begin_array(b);
        for (guint i = 0; i < w->groups[d]->len; i++) {
            const report_group *g = w->groups[d]->pdata[i];
            json_builder_begin_object(b);
            add_string(b, "name", g->name);
            add_figures(b, "figures", g->v, AS_FIGURES);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
    }
    json_builder_end_object(b);
    json_builder_end_object(b);
}

static void add_settings(JsonBuilder *b, const report_settings *st)
{
    static const char *const days[] = {"", "monday", "tuesday", "wednesday", "thursday",
                                       "friday", "saturday", "sunday"};
    json_builder_set_member_name(b, "settings");
    json_builder_begin_object(b);
    add_string(b, "timezone", st->timezone[0] ? st->timezone : g_time_zone_get_identifier(st->tz));
    add_string(b, "week_start", days[st->week_start]);
    add_string(b, "currency", st->currency);
    add_double(b, "usd_rate", st->usd_rate);
    add_double(b, "hardware_price", st->hardware_price);
    add_double(b, "amortisation_months", st->amortisation_months);
    add_double(b, "gpu_watts", st->gpu_watts);
    add_double(b, "kwh_price", st->kwh_price);
    add_double(b, "fixed_monthly", st->fixed_monthly);
    add_double(b, "fixed_per_week", report_settings_fixed_per_week(st));
    add_string(b, "sensitivity", st->sensitivity);
    add_double(b, "api_below_tokens", st->api_below_tokens);
    add_double(b, "local_above_tokens", st->local_above_tokens);
    add_double(b, "alert_pct", st->alert_pct);
    add_double(b, "trend_min_pct", st->trend_min_pct);
    add_int(b, "tail_rows", st->tail_rows);
    add_string(b, "file", st->path);
    json_builder_end_object(b);
}

static void add_tail(JsonBuilder *b, const usage_report *r)
{
    const report_tail *t = &r->tail;
    json_builder_set_member_name(b, "tail");
    json_builder_begin_object(b);
    add_number(b, "threshold_ms", REPORT_KIND_MS, t->threshold_ms < 0 ? NAN : (double)t->threshold_ms);
    add_int(b, "count", t->n_rows);
    add_double(b, "tail_mean_prompt_tokens", t->tail_mean_prompt);
    add_double(b, "week_mean_prompt_tokens", t->week_mean_prompt);
    struct { const char *name, *value; double share, call_share; } tops[] = {
        {"top_caller", t->top_caller, t->top_caller_share, t->top_caller_call_share},
        {"top_model", t->top_model, t->top_model_share, t->top_model_call_share},
        {"top_hour", t->top_hour, t->top_hour_share, NAN},
    };
    for (guint i = 0; i < G_N_ELEMENTS(tops); i++) {
        json_builder_set_member_name(b, tops[i].name);
        if (!tops[i].value) {
            json_builder_add_null_value(b);
            continue;
        }
        json_builder_begin_object(b);
        add_string(b, "name", tops[i].value);
        add_double(b, "tail_share", tops[i].share);
        if (!isnan(tops[i].call_share))
            add_double(b, "call_share", tops[i].call_share);
        json_builder_end_object(b);
    }
    json_builder_set_member_name(b, "slowest");
    json_builder_begin_array(b);
    for (guint i = 0; i < t->slowest->len; i++) {
        const report_tail_row *row = t->slowest->pdata[i];
        json_builder_begin_object(b);
        g_autofree char *start = iso_local(r, row->start_ms);
        add_string(b, "start", start);
        add_int(b, "start_ms", row->start_ms);
        add_string(b, "caller", row->caller);
        add_string(b, "client", row->client);
        add_string(b, "model", row->model);
        add_string(b, "route", row->route);
        add_int(b, "prompt_tokens", row->prompt_tokens);
        add_int(b, "completion_tokens", row->completion_tokens);
        add_number(b, "ttft_ms", REPORT_KIND_MS, row->ttft_ms < 0 ? NAN : (double)row->ttft_ms);
        add_int(b, "total_ms", row->total_ms);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "hints");
    json_builder_begin_array(b);
    for (guint i = 0; i + 1 < t->hints->len; i += 2) {
        json_builder_begin_object(b);
        add_string(b, "kind", t->hints->pdata[i]);
        add_string(b, "text", t->hints->pdata[i + 1]);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
}

static void add_costs(JsonBuilder *b, const usage_report *r)
{
    json_builder_set_member_name(b, "cost_comparison");
    json_builder_begin_array(b);
    for (guint i = 0; i < r->comparisons->len; i++) {
        const report_comparison *c = r->comparisons->pdata[i];
        json_builder_begin_object(b);
        add_string(b, "api", c->api);
        json_builder_set_member_name(b, "priced");
        json_builder_add_boolean_value(b, c->priced);
        add_double(b, "api_cost", c->api_cost);
        add_double(b, "local_cost", c->local_cost);
        add_double(b, "saving", c->saving);
        add_double(b, "payback_months", c->payback_months);
        const report_price *p = report_prices_find_key(r->prices, c->api);
        json_builder_set_member_name(b, "price");
        if (!p) {
            json_builder_add_null_value(b);
        } else {
            json_builder_begin_object(b);
            add_double(b, "input", p->input);
            add_double(b, "cached_input", p->cached_input);
            add_double(b, "output", p->output);
            add_string(b, "source", p->source);
            add_string(b, "checked", p->checked);
            json_builder_set_member_name(b, "confirmed");
            json_builder_add_boolean_value(b, p->confirmed);
            json_builder_set_member_name(b, "from_user");
            json_builder_add_boolean_value(b, p->from_user);
            json_builder_end_object(b);
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);

    const report_recommendation *rec = &r->rec;
    json_builder_set_member_name(b, "recommendation");
    json_builder_begin_object(b);
    add_string(b, "verdict", rec->verdict);
    add_double(b, "monthly_tokens", rec->monthly_tokens);
    add_int(b, "weeks_used", rec->weeks_used);
    add_double(b, "api_below_tokens", r->settings->api_below_tokens);
    add_double(b, "local_above_tokens", r->settings->local_above_tokens);
    add_string(b, "sensitivity", r->settings->sensitivity);
    add_string(b, "reason", rec->reason);
    json_builder_end_object(b);
}

char *report_to_json(const usage_report *r)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    add_string(b, "report", "moedesk-weekly");
    add_int(b, "schema", 1);
    add_string(b, "week", usage_report_current(r)->week.label);
    g_autoptr(GDateTime) now = g_date_time_new_from_unix_utc(r->generated_ms / 1000);
    g_autofree char *gen = g_date_time_format(now, "%Y-%m-%dT%H:%M:%SZ");
    add_string(b, "generated_at", gen);
    add_string(b, "source", r->source_label);
    add_string(b, "percentile_definition",
               "nearest rank (rank = ceil(p/100 * n)) over latency buckets 1 ms wide below "
               "200 ms and at most 1% wide above; the value is the largest millisecond the "
               "bucket holds, so it is never below the exact value and at most 1% above it");
    add_settings(b, r->settings);
    json_builder_set_member_name(b, "weeks");
    json_builder_begin_array(b);
    for (guint i = 0; i < r->weeks->len; i++)
        add_week(b, r, r->weeks->pdata[i]);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "alerts");
    json_builder_begin_array(b);
    for (guint i = 0; i < r->alerts->len; i++) {
        const report_alert *a = r->alerts->pdata[i];
        json_builder_begin_object(b);
        add_string(b, "kind", a->kind);
        add_string(b, "metric", report_metric_get(a->metric)->key);
        add_string(b, "message", a->message);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    add_tail(b, r);
    add_costs(b, r);
    json_builder_end_object(b);

    g_autoptr(JsonGenerator) gen_json = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    json_generator_set_root(gen_json, root);
    json_generator_set_pretty(gen_json, TRUE);
    json_generator_set_indent(gen_json, 1);
    return json_generator_to_data(gen_json, NULL);
}

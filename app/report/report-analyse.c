/*
 * report-analyse.c — everything the report concludes from the weekly
 * figures: week-over-week change, the four-week average, the two kinds of
 * alert, the API price comparison with savings and payback, the
 * API/hybrid/local verdict, and the anatomy of the slow tail.
 * Definitions and thresholds: docs/report.md.
 */
#include "report-private.h"

#include <math.h>
#include <string.h>

static double change_pct(double prev, double cur)
{
    if (isnan(cur))
        return NAN;
    if (isnan(prev) || prev == 0)
        return cur == 0 ? (isnan(prev) ? NAN : 0.0) : INFINITY;
    return (cur - prev) / prev * 100.0;
}

/* A move from p to q is "worse" by more than min_pct. */
static gboolean worse(int better, double p, double q, double min_pct)
{
    if (better < 0)
        return q > p * (1.0 + min_pct / 100.0);
    return q < p * (1.0 - min_pct / 100.0);
}

static void alert_free(gpointer p)
{
    report_alert *a = p;
    g_free(a->kind);
    g_free(a->message);
    g_free(a);
}

static void add_alert(usage_report *r, const char *kind, report_metric m, char *message)
{
    report_alert *a = g_new0(report_alert, 1);
    a->kind = g_strdup(kind);
    a->metric = m;
    a->message = message;
    g_ptr_array_add(r->alerts, a);
}

static void recommend(usage_report *r, GPtrArray *all)
{
    const report_settings *st = r->settings;
    double tokens = 0;
    int weeks = 0;
    for (guint i = all->len >= 4 ? all->len - 4 : 0; i < all->len; i++) {
        const report_week_data *w = all->pdata[i];
        if (!w->has_data)
            continue;
        tokens += w->v[REPORT_M_TOTAL_TOKENS];
        weeks++;
    }
    report_recommendation *rec = &r->rec;
    rec->weeks_used = weeks;
    rec->monthly_tokens = weeks ? tokens / weeks * REPORT_WEEKS_PER_MONTH : 0;
    g_autofree char *vol = report_format_count(rec->monthly_tokens);
    g_autofree char *lo = report_format_count(st->api_below_tokens);
    g_autofree char *hi = report_format_count(st->local_above_tokens);
    if (g_str_equal(st->sensitivity, "high")) {
        rec->verdict = "local";
        rec->reason = g_strdup_printf(
            "Data sensitivity is set to high, so prompts and outputs stay on this machine: "
            "run locally whatever the volume (%s tokens a month at the last %d weeks' rate).",
            vol, weeks);
    } else if (rec->monthly_tokens < st->api_below_tokens) {
        rec->verdict = "api";
        rec->reason = g_strdup_printf(
            "%s tokens a month (last %d weeks' rate) is below %s: local hardware would mostly "
            "sit idle, so stay on the API.", vol, weeks, lo);
    } else if (rec->monthly_tokens <= st->local_above_tokens) {
        rec->verdict = "hybrid";
        rec->reason = g_strdup_printf(
            "%s tokens a month (last %d weeks' rate) is between %s and %s: serve the steady "
            "load locally and send peaks and the largest models to the API.", vol, weeks, lo, hi);
    } else {
        rec->verdict = "local";
        rec->reason = g_strdup_printf(
            "%s tokens a month (last %d weeks' rate) is above %s: the volume pays for local "
            "hardware, so run locally.", vol, weeks, hi);
    }
}

void report_analyse_weeks(usage_report *r, GPtrArray *all)
{
    const report_settings *st = r->settings;
    for (guint i = 0; i < all->len; i++) {
        report_week_data *w = all->pdata[i];
        const report_week_data *prev = i > 0 ? all->pdata[i - 1] : NULL;
        for (guint m = 0; m < REPORT_N_METRICS; m++) {
            w->change_pct[m] = prev ? change_pct(prev->v[m], w->v[m]) : NAN;
            double sum = 0;
            int n = 0;
            for (guint k = i >= 4 ? i - 4 : 0; k < i; k++) {
                const report_week_data *o = all->pdata[k];
                if (!isnan(o->v[m])) {
                    sum += o->v[m];
                    n++;
                }
            }
            w->avg4[m] = n ? sum / n : NAN;
            w->vs_avg4_pct[m] = (isnan(w->v[m]) || isnan(w->avg4[m]) || w->avg4[m] == 0)
                                    ? NAN : (w->v[m] - w->avg4[m]) / w->avg4[m] * 100.0;
        }
    }

    r->alerts = g_ptr_array_new_with_free_func(alert_free);
    guint c = all->len - 1;
    const report_week_data *w0 = all->pdata[c - 2], *w1 = all->pdata[c - 1], *w2 = all->pdata[c];
    for (guint m = 0; m < REPORT_N_METRICS; m++) {
        const report_metric_info *info = report_metric_get(m);
        if (info->better != 0 && !isnan(w0->v[m]) && !isnan(w1->v[m]) && !isnan(w2->v[m]) &&
            worse(info->better, w0->v[m], w1->v[m], st->trend_min_pct) &&
            worse(info->better, w1->v[m], w2->v[m], st->trend_min_pct)) {
            g_autofree char *a = report_format_value(r, m, w0->v[m]);
            g_autofree char *b = report_format_value(r, m, w1->v[m]);
            g_autofree char *x = report_format_value(r, m, w2->v[m]);
            add_alert(r, "trend", m,
                      g_strdup_printf("%s moved the wrong way two weeks in a row: %s (%s) → "
                                      "%s (%s) → %s (%s).", info->label, a, w0->week.label, b,
                                      w1->week.label, x, w2->week.label));
        }
    }
    for (guint m = 0; m < REPORT_N_METRICS; m++) {
        double d = w2->vs_avg4_pct[m];
        if (isnan(d) || fabs(d) <= st->alert_pct)
            continue;
        g_autofree char *now = report_format_value(r, m, w2->v[m]);
        g_autofree char *avg = report_format_value(r, m, w2->avg4[m]);
        add_alert(r, "off_average", m,
                  g_strdup_printf("%s is %.0f%% %s its four-week average (%s against %s).",
                                  report_metric_get(m)->label, fabs(d),
                                  d > 0 ? "above" : "below", now, avg));
    }
    recommend(r, all);
}

static void comparison_free(gpointer p)
{
    report_comparison *c = p;
    g_free(c->api);
    g_free(c);
}

void report_analyse_costs(usage_report *r, const report_week_acc *current)
{
    const report_settings *st = r->settings;
    const report_acc *t = &current->total;
    double electricity = report_acc_kwh(t, st) * st->kwh_price;
    double fixed = report_settings_fixed_per_week(st);
    double other_fixed = st->fixed_monthly / REPORT_WEEKS_PER_MONTH;
    r->comparisons = g_ptr_array_new_with_free_func(comparison_free);
    for (char **key = st->compare; key && *key; key++) {
        report_comparison *c = g_new0(report_comparison, 1);
        c->api = g_strdup(*key);
        c->local_cost = electricity + fixed;
        const report_price *p = report_prices_find_key(r->prices, *key);
        c->priced = p != NULL;
        if (p) {
            c->api_cost = report_price_usd(p, t->local_prompt, t->local_cached,
                                           t->local_completion) * st->usd_rate;
            c->saving = c->api_cost - c->local_cost;
            /* Payback: hardware price over what running locally saves a month
             * once the hardware is bought (electricity and other fixed costs). */
            double running = c->api_cost - electricity - other_fixed;
            c->payback_months = st->hardware_price <= 0 ? 0.0
                              : running > 0 ? st->hardware_price / (running * REPORT_WEEKS_PER_MONTH)
                                            : NAN;
        } else {
            c->api_cost = c->saving = c->payback_months = NAN;
        }
        g_ptr_array_add(r->comparisons, c);
    }
}

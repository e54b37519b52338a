/*
 * report-markdown.c — the weekly report as Markdown, following the weekly
 * template: totals and week over week, latency, usage breakdowns, cost,
 * anomalies (alerts and the P95 tail), the recommendation, a short history,
 * and a free-text "Next week" section. The last section belongs to the
 * user: when the CLI rewrites an existing file it carries their text over
 * (report_markdown_next_week()).
 */
#include "report-private.h"

#include <math.h>
#include <string.h>

#define NEXT_WEEK_HEADING "## Next week"
#define NEXT_WEEK_PLACEHOLDER \
    "<!-- Plans and actions for next week. MoeDesk keeps what you write here " \
    "when it rewrites this file. -->"

/* Table cells must not break the row. */
static void cell(GString *out, const char *s)
{
    g_string_append(out, " ");
    for (const char *p = s; *p; p++) {
        if (*p == '|')
            g_string_append(out, "\\|");
        else if (*p == '\n' || *p == '\r')
            g_string_append_c(out, ' ');
        else
            g_string_append_c(out, *p);
    }
    g_string_append(out, " |");
}

static void cell_take(GString *out, char *s)
{
    cell(out, s);
    g_free(s);
}

static void totals(GString *out, const usage_report *r)
{
    const report_week_data *w = usage_report_current(r);
    const report_week_data *p = r->weeks->len > 1 ? r->weeks->pdata[r->weeks->len - 2] : NULL;
    g_string_append(out, "## Totals and week over week\n\n"
                         "| Figure | This week | Previous week | Change | 4-week average | vs average |\n"
                         "|---|---:|---:|---:|---:|---:|\n");
    for (guint m = 0; m < REPORT_N_METRICS; m++) {
        g_string_append(out, "|");
        cell(out, report_metric_get(m)->label);
        cell_take(out, report_format_value(r, m, w->v[m]));
        cell_take(out, report_format_value(r, m, p ? p->v[m] : NAN));
        cell_take(out, report_format_change(w->change_pct[m]));
        cell_take(out, report_format_value(r, m, w->avg4[m]));
        cell_take(out, report_format_change(w->vs_avg4_pct[m]));
        g_string_append_c(out, '\n');
    }
    g_string_append_c(out, '\n');
}

static void breakdown(GString *out, const usage_report *r, report_dim d, gboolean latency)
{
    const report_week_data *w = usage_report_current(r);
    if (latency)
        g_string_append_printf(out, "| %s | Calls | TTFT median | TTFT P95 | Latency median | "
                                    "Latency P95 | Decode | Errors |\n"
                                    "|---|---:|---:|---:|---:|---:|---:|---:|\n",
                               report_dim_name(d));
    else
        g_string_append_printf(out, "| %s | Calls | Share | Tokens | Cost | Cost per 1k |\n"
                                    "|---|---:|---:|---:|---:|---:|\n", report_dim_name(d));
    for (guint i = 0; i < w->groups[d]->len; i++) {
        const report_group *g = w->groups[d]->pdata[i];
        g_string_append(out, "|");
        cell(out, g->name[0] ? g->name : "(none)");
        cell_take(out, report_format_value(r, REPORT_M_CALLS, g->v[REPORT_M_CALLS]));
        if (latency) {
            const report_metric ms[] = {REPORT_M_TTFT_P50, REPORT_M_TTFT_P95,
                                        REPORT_M_LATENCY_P50, REPORT_M_LATENCY_P95,
                                        REPORT_M_DECODE_TPS, REPORT_M_ERROR_RATE};
            for (guint k = 0; k < G_N_ELEMENTS(ms); k++)
                cell_take(out, report_format_value(r, ms[k], g->v[ms[k]]));
        } else {
            double share = w->v[REPORT_M_CALLS] > 0
                               ? g->v[REPORT_M_CALLS] / w->v[REPORT_M_CALLS] : NAN;
            cell_take(out, report_format_value(r, REPORT_M_ERROR_RATE, share));
            cell_take(out, report_format_value(r, REPORT_M_TOTAL_TOKENS,
                                               g->v[REPORT_M_TOTAL_TOKENS]));
            cell_take(out, report_format_value(r, REPORT_M_COST, g->v[REPORT_M_COST]));
            cell_take(out, report_format_value(r, REPORT_M_COST_PER_1K,
                                               g->v[REPORT_M_COST_PER_1K]));
        }
        g_string_append_c(out, '\n');
    }
    g_string_append_c(out, '\n');
}

static void costs(GString *out, const usage_report *r)
{
    const report_week_data *w = usage_report_current(r);
    const report_settings *st = r->settings;
    g_autofree char *elec = report_format_money(r, w->cost.electricity);
    g_autofree char *fixed = report_format_money(r, w->cost.fixed);
    g_autofree char *up = report_format_money(r, w->cost.upstream);
    g_autofree char *total = report_format_money(r, w->v[REPORT_M_COST]);
    g_autofree char *per1k = report_format_money(r, w->v[REPORT_M_COST_PER_1K]);
    g_autofree char *local_tokens = report_format_count((double)w->cost.local_tokens);
    g_string_append_printf(out,
        "## Cost\n\n"
        "- Local: electricity %s (%.2f kWh over %.1f busy hours; measured GPU power where "
        "recorded, else %.0f W, at %.3f %s/kWh) plus hardware and fixed costs %s "
        "(%.0f %s over %.0f months, plus %.2f %s a month).\n"
        "- Upstream APIs: %s.\n"
        "- Total %s for the week: %s per 1,000 tokens. Local tokens: %s.\n",
        elec, w->cost.local_kwh, (double)w->cost.local_busy_ms / 3.6e6, st->gpu_watts,
        st->kwh_price, st->currency, fixed, st->hardware_price, st->currency,
        st->amortisation_months, st->fixed_monthly, st->currency, up, total, per1k,
        local_tokens);
    if (w->cost.unpriced_tokens > 0) {
        g_autofree char *n = report_format_count((double)w->cost.unpriced_tokens);
        GString *routes = g_string_new(NULL);
        for (guint i = 0; i < w->cost.unpriced_routes->len; i++)
            g_string_append_printf(routes, "%s%s", i ? ", " : "",
                                   (const char *)w->cost.unpriced_routes->pdata[i]);
        g_string_append_printf(out, "- **%s upstream tokens have no price** (%s): add them to "
                                    "%s.\n", n, routes->str, report_prices_user_path(r->prices));
        g_string_free(routes, TRUE);
    }
    g_string_append(out, "\nWhat this week's local tokens would have cost on each API:\n\n"
                         "| API | Would have cost | Saving | Hardware payback | Price source |\n"
                         "|---|---:|---:|---:|---|\n");
    for (guint i = 0; i < r->comparisons->len; i++) {
        const report_comparison *c = r->comparisons->pdata[i];
        g_string_append(out, "|");
        cell(out, c->api);
        if (!c->priced) {
            cell(out, "no price");
            cell(out, "—");
            cell(out, "—");
            cell(out, "add it to prices.json");
            g_string_append_c(out, '\n');
            continue;
        }
        const report_price *p = report_prices_find_key(r->prices, c->api);
        cell_take(out, report_format_money(r, c->api_cost));
        cell_take(out, report_format_money(r, c->saving));
        cell_take(out, isnan(c->payback_months) ? g_strdup("never at this volume")
                                               : g_strdup_printf("%.1f months", c->payback_months));
        cell_take(out, g_strdup_printf("%s (%s%s)", p->source, p->checked,
                                       p->confirmed ? "" : ", unconfirmed"));
        g_string_append_c(out, '\n');
    }
    g_string_append_c(out, '\n');
}

static void anomalies(GString *out, const usage_report *r)
{
    g_string_append(out, "## Anomalies\n\n");
    if (r->alerts->len == 0)
        g_string_append(out, "No alerts this week.\n");
    for (guint i = 0; i < r->alerts->len; i++) {
        const report_alert *a = r->alerts->pdata[i];
        g_string_append_printf(out, "- %s\n", a->message);
    }
    const report_tail *t = &r->tail;
    g_string_append(out, "\n### Slowest requests (P95 tail)\n\n");
    if (t->threshold_ms < 0 || t->n_rows == 0) {
        g_string_append(out, "No successful request was slower than the week's P95.\n\n");
        return;
    }
    g_autofree char *thr = report_format_count((double)t->threshold_ms);
    g_string_append_printf(out, "%" G_GINT64_FORMAT " requests took longer than the P95 of %s ms.\n\n",
                           t->n_rows, thr);
    for (guint i = 0; i + 1 < t->hints->len; i += 2)
        g_string_append_printf(out, "- %s\n", (const char *)t->hints->pdata[i + 1]);
    g_string_append(out, "\n| Started | Caller | Client | Model | Route | Prompt tokens | "
                         "Completion tokens | TTFT | Total |\n"
                         "|---|---|---|---|---|---:|---:|---:|---:|\n");
    for (guint i = 0; i < t->slowest->len; i++) {
        const report_tail_row *row = t->slowest->pdata[i];
        g_string_append(out, "|");
        cell_take(out, report_format_time(r->settings->tz, row->start_ms, "%a %Y-%m-%d %H:%M:%S"));
        cell(out, row->caller);
        cell(out, row->client);
        cell(out, row->model);
        cell(out, row->route);
        cell_take(out, report_format_count((double)row->prompt_tokens));
        cell_take(out, report_format_count((double)row->completion_tokens));
        cell_take(out, report_format_value(r, REPORT_M_TTFT_P50,
                                           row->ttft_ms < 0 ? NAN : (double)row->ttft_ms));
        cell_take(out, report_format_value(r, REPORT_M_LATENCY_P50, (double)row->total_ms));
        g_string_append_c(out, '\n');
    }
    g_string_append_c(out, '\n');
}

static void history(GString *out, const usage_report *r)
{
    const report_metric ms[] = {REPORT_M_CALLS, REPORT_M_TOTAL_TOKENS, REPORT_M_TTFT_P95,
                                REPORT_M_LATENCY_P95, REPORT_M_ERROR_RATE, REPORT_M_COST_PER_1K};
    g_string_append(out, "## History\n\n| Week |");
    for (guint k = 0; k < G_N_ELEMENTS(ms); k++)
        g_string_append_printf(out, " %s |", report_metric_get(ms[k])->label);
    g_string_append(out, "\n|---|");
    for (guint k = 0; k < G_N_ELEMENTS(ms); k++)
        g_string_append(out, "---:|");
    g_string_append_c(out, '\n');
    for (guint i = 0; i < r->weeks->len; i++) {
        const report_week_data *w = r->weeks->pdata[i];
        g_string_append(out, "|");
        cell(out, w->week.label);
        for (guint k = 0; k < G_N_ELEMENTS(ms); k++)
            cell_take(out, report_format_value(r, ms[k], w->v[ms[k]]));
        g_string_append_c(out, '\n');
    }
    g_string_append_c(out, '\n');
}

char *report_to_markdown(const usage_report *r, const char *next_week)
{
    const report_week_data *w = usage_report_current(r);
    const report_settings *st = r->settings;
    GString *out = g_string_new(NULL);
    g_autofree char *from = report_format_time(st->tz, w->week.start_ms, "%a %d %b %Y");
    g_autofree char *to = report_format_time(st->tz, w->week.end_ms - 1, "%a %d %b %Y");
    g_autoptr(GDateTime) gen = g_date_time_new_from_unix_utc(r->generated_ms / 1000);
    g_autofree char *gen_s = g_date_time_format(gen, "%Y-%m-%d %H:%M UTC");
    g_string_append_printf(out, "# MoeDesk weekly report — %s\n\n"
                                "%s to %s (%s). Source: `%s`. Generated %s.\n\n",
                           w->week.label, from, to,
                           st->timezone[0] ? st->timezone : g_time_zone_get_identifier(st->tz),
                           r->source_label, gen_s);
    totals(out, r);
    g_string_append(out, "## Latency\n\nMedians and P95s are nearest-rank values over "
                         "millisecond buckets (exact below 200 ms, at most 1% high above; see "
                         "docs/report.md). Successful requests only.\n\n");
    breakdown(out, r, REPORT_DIM_MODEL, TRUE);
    breakdown(out, r, REPORT_DIM_ROUTE, TRUE);
    g_string_append(out, "## Usage by route, model, caller and client\n\n");
    for (guint d = 0; d < REPORT_N_DIMS; d++)
        breakdown(out, r, d, FALSE);
    costs(out, r);
    anomalies(out, r);
    g_autofree char *lo = report_format_count(st->api_below_tokens);
    g_autofree char *hi = report_format_count(st->local_above_tokens);
    g_string_append_printf(out, "## Recommendation\n\n**%s** — %s\n\nThresholds: below %s "
                                "tokens a month stay on the API, above %s run locally, hybrid "
                                "between (settings api_below_tokens / local_above_tokens); "
                                "sensitivity = %s.\n\n",
                           g_str_equal(r->rec.verdict, "api") ? "Stay on the API"
                           : g_str_equal(r->rec.verdict, "hybrid") ? "Go hybrid" : "Run locally",
                           r->rec.reason, lo, hi, st->sensitivity);
    history(out, r);
    g_string_append_printf(out, "%s\n\n%s\n", NEXT_WEEK_HEADING,
                           next_week && next_week[0] ? next_week : NEXT_WEEK_PLACEHOLDER);
    return g_string_free(out, FALSE);
}

char *report_markdown_next_week(const char *md)
{
    const char *at = NULL;
    for (const char *p = md; (p = strstr(p, NEXT_WEEK_HEADING)); p++)
        if ((p == md || p[-1] == '\n') && (p[strlen(NEXT_WEEK_HEADING)] == '\n' ||
                                           p[strlen(NEXT_WEEK_HEADING)] == '\r' ||
                                           p[strlen(NEXT_WEEK_HEADING)] == '\0'))
            at = p;
    if (!at)
        return NULL;
    GString *text = g_string_new(at + strlen(NEXT_WEEK_HEADING));
    char *ph;
    while ((ph = strstr(text->str, NEXT_WEEK_PLACEHOLDER)))
        g_string_erase(text, ph - text->str, (gssize)strlen(NEXT_WEEK_PLACEHOLDER));
    char *s = g_strstrip(g_string_free(text, FALSE));  /* strips in place */
    if (!s[0]) {
        g_free(s);
        return NULL;
    }
    return s;
}

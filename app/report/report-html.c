/*
 * report-html.c — the weekly report as one self-contained HTML page: key
 * figures with their change, SVG charts of the four key metrics (calls,
 * tokens, TTFT P95, cost per 1k tokens) over the shown weeks, then the same
 * tables as the Markdown report. Inline CSS, no script, nothing fetched:
 * it opens offline and prints cleanly. All text is escaped.
 */
#include "report-private.h"
#include "report-svg.h"

#include <math.h>

static const char css[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;"
    "color:#1d2330;background:#f5f6f8;margin:0}"
    "main{max-width:1240px;margin:0 auto;padding:24px 28px 48px}"
    "h1{font-size:26px;margin:0 0 4px}h2{font-size:19px;margin:28px 0 10px;"
    "border-bottom:1px solid #d9dce3;padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}"
    ".sub{color:#5a6272;margin:0 0 18px}"
    ".cards{display:grid;grid-template-columns:repeat(4,1fr);gap:12px}"
    ".card{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:12px 14px}"
    ".card .k{color:#5a6272;font-size:12px;text-transform:uppercase;letter-spacing:.04em}"
    ".card .v{font-size:24px;font-weight:600;margin:2px 0}"
    ".card .c{font-size:13px;color:#5a6272}.up{color:#1f7a3f}.down{color:#b3261e}"
    ".charts{display:grid;grid-template-columns:1fr 1fr;gap:12px;margin-top:14px}"
    ".charts svg{background:#fff;border:1px solid #dde1e8;border-radius:8px;width:100%;height:auto}"
    "svg .t{font-size:14px;font-weight:600;fill:#1d2330}svg .a{font-size:11px;fill:#5a6272}"
    "svg .g{stroke:#e6e8ee;stroke-width:1}svg .x{stroke:#9aa1ad;stroke-width:1}"
    "table{border-collapse:collapse;background:#fff;border:1px solid #dde1e8;margin:6px 0 12px;"
    "font-size:13px}th,td{padding:5px 10px;border-bottom:1px solid #eceef2;text-align:right}"
    "td{white-space:nowrap}td:first-child{white-space:normal;overflow-wrap:anywhere}"
    "th{background:#eef0f4;font-weight:600}td:first-child,th:first-child{text-align:left}"
    ".tables{display:grid;grid-template-columns:1fr 1fr;gap:0 16px}.tables table{width:100%}"
    ".tables td:first-child{min-width:8em}"
    ".verdict{font-size:18px;font-weight:700}.alert{color:#8a4b00}"
    ".note{color:#5a6272;font-size:12px}";

static void esc(GString *out, const char *s)
{
    g_autofree char *e = g_markup_escape_text(s ? s : "", -1);
    g_string_append(out, e);
}

static void td(GString *out, char *owned)
{
    g_string_append(out, "<td>");
    esc(out, owned);
    g_string_append(out, "</td>");
    g_free(owned);
}

static void card(GString *out, const usage_report *r, report_metric m)
{
    const report_week_data *w = usage_report_current(r);
    const report_metric_info *info = report_metric_get(m);
    g_autofree char *v = report_format_value(r, m, w->v[m]);
    g_autofree char *c = report_format_change(w->change_pct[m]);
    g_autofree char *a = report_format_value(r, m, w->avg4[m]);
    double ch = w->change_pct[m];
    const char *cls = isnan(ch) || isinf(ch) || info->better == 0 || fabs(ch) < 0.05 ? ""
                      : (ch > 0) == (info->better > 0) ? "up" : "down";
    g_string_append(out, "<div class=\"card\"><div class=\"k\">");
    esc(out, info->label);
    g_string_append(out, "</div><div class=\"v\">");
    esc(out, v);
    g_string_append_printf(out, "</div><div class=\"c\"><span class=\"%s\">", cls);
    esc(out, c);
    g_string_append(out, "</span> vs previous week · 4-week avg ");
    esc(out, a);
    g_string_append(out, "</div></div>\n");
}

static void charts(GString *out, const usage_report *r)
{
    guint n = r->weeks->len;
    const char **labels = g_new(const char *, n);
    double *calls = g_new(double, n), *prompt = g_new(double, n), *completion = g_new(double, n);
    double *ttft = g_new(double, n), *cost = g_new(double, n);
    for (guint i = 0; i < n; i++) {
        const report_week_data *w = r->weeks->pdata[i];
        labels[i] = w->week.label;
        calls[i] = w->v[REPORT_M_CALLS];
        prompt[i] = w->v[REPORT_M_PROMPT_TOKENS];
        completion[i] = w->v[REPORT_M_COMPLETION_TOKENS];
        ttft[i] = w->v[REPORT_M_TTFT_P95];
        cost[i] = w->v[REPORT_M_COST_PER_1K];
    }
    g_autofree char *cost_title = g_strdup_printf("Cost per 1,000 tokens (%s)",
                                                  r->settings->currency);
    report_svg_series s_calls = {"calls", calls, "#3b6ea8"};
    report_svg_series s_tokens[] = {{"prompt", prompt, "#3b6ea8"},
                                    {"completion", completion, "#e0a33a"}};
    report_svg_series s_ttft = {"TTFT P95", ttft, "#c0504d"};
    report_svg_series s_cost = {"cost per 1k", cost, "#4f9d69"};
    g_string_append(out, "<div class=\"charts\">\n");
    report_svg_chart(out, "Calls per week", labels, n, &s_calls, 1, TRUE, REPORT_SVG_COUNT);
    report_svg_chart(out, "Tokens per week", labels, n, s_tokens, 2, TRUE, REPORT_SVG_COUNT);
    report_svg_chart(out, "Time to first token, P95", labels, n, &s_ttft, 1, FALSE,
                     REPORT_SVG_MS);
    report_svg_chart(out, cost_title, labels, n, &s_cost, 1, FALSE, REPORT_SVG_MONEY);
    g_string_append(out, "</div>\n");
    g_free(labels);
    g_free(calls);
    g_free(prompt);
    g_free(completion);
    g_free(ttft);
    g_free(cost);
}

static void totals_table(GString *out, const usage_report *r)
{
    const report_week_data *w = usage_report_current(r);
    const report_week_data *p = r->weeks->len > 1 ? r->weeks->pdata[r->weeks->len - 2] : NULL;
    g_string_append(out, "<h2>Totals and week over week</h2>\n<table><tr><th>Figure</th>"
                         "<th>This week</th><th>Previous week</th><th>Change</th>"
                         "<th>4-week average</th><th>vs average</th></tr>\n");
    for (guint m = 0; m < REPORT_N_METRICS; m++) {
        g_string_append(out, "<tr>");
        td(out, g_strdup(report_metric_get(m)->label));
        td(out, report_format_value(r, m, w->v[m]));
        td(out, report_format_value(r, m, p ? p->v[m] : NAN));
        td(out, report_format_change(w->change_pct[m]));
        td(out, report_format_value(r, m, w->avg4[m]));
        td(out, report_format_change(w->vs_avg4_pct[m]));
        g_string_append(out, "</tr>\n");
    }
    g_string_append(out, "</table>\n");
}

/* A plain number for narrow table cells (the unit is in the header). */
static char *bare(double v, int decimals)
{
    if (isnan(v))
        return g_strdup("—");
    if (decimals == 0)
        return report_format_count(v);
    if (v != 0 && fabs(v) < 0.01)
        return g_strdup_printf("%.3g", v);
    return g_strdup_printf("%.*f", decimals, v);
}

static void group_table(GString *out, const usage_report *r, report_dim d)
{
    const report_week_data *w = usage_report_current(r);
    g_string_append(out, "<div><h3>By ");
    esc(out, report_dim_name(d));
    g_string_append(out, "</h3><table><tr><th>Name</th><th>Calls</th><th>Tokens</th>"
                         "<th>TTFT P95 (ms)</th><th>Latency P95 (ms)</th><th>Errors (%)</th>"
                         "<th>Cost per 1k (");
    esc(out, r->settings->currency);
    g_string_append(out, ")</th></tr>\n");
    for (guint i = 0; i < w->groups[d]->len; i++) {
        const report_group *g = w->groups[d]->pdata[i];
        g_string_append(out, "<tr>");
        td(out, g_strdup(g->name[0] ? g->name : "(none)"));
        td(out, bare(g->v[REPORT_M_CALLS], 0));
        td(out, bare(g->v[REPORT_M_TOTAL_TOKENS], 0));
        td(out, bare(g->v[REPORT_M_TTFT_P95], 0));
        td(out, bare(g->v[REPORT_M_LATENCY_P95], 0));
        td(out, bare(g->v[REPORT_M_ERROR_RATE] * 100.0, 2));
        td(out, bare(g->v[REPORT_M_COST_PER_1K], 4));
        g_string_append(out, "</tr>\n");
    }
    g_string_append(out, "</table></div>\n");
}

static void cost_section(GString *out, const usage_report *r)
{
    const report_week_data *w = usage_report_current(r);
    g_autofree char *elec = report_format_money(r, w->cost.electricity);
    g_autofree char *fixed = report_format_money(r, w->cost.fixed);
    g_autofree char *up = report_format_money(r, w->cost.upstream);
    g_autofree char *total = report_format_money(r, w->v[REPORT_M_COST]);
    g_string_append(out, "<h2>Cost</h2>\n<p>Local electricity ");
    esc(out, elec);
    g_string_append_printf(out, " (%.2f kWh over %.1f busy hours) · hardware and fixed ",
                           w->cost.local_kwh, (double)w->cost.local_busy_ms / 3.6e6);
    esc(out, fixed);
    g_string_append(out, " · upstream APIs ");
    esc(out, up);
    g_string_append(out, " · <b>total ");
    esc(out, total);
    g_string_append(out, "</b></p>\n<table><tr><th>This week's local tokens on</th>"
                         "<th>Would have cost</th><th>Saving</th><th>Hardware payback</th>"
                         "<th>Price checked</th></tr>\n");
    for (guint i = 0; i < r->comparisons->len; i++) {
        const report_comparison *c = r->comparisons->pdata[i];
        const report_price *p = report_prices_find_key(r->prices, c->api);
        g_string_append(out, "<tr>");
        td(out, g_strdup(c->api));
        td(out, c->priced ? report_format_money(r, c->api_cost) : g_strdup("no price"));
        td(out, report_format_money(r, c->saving));
        td(out, !c->priced || isnan(c->payback_months) ? g_strdup("—")
                : g_strdup_printf("%.1f months", c->payback_months));
        td(out, p ? g_strdup_printf("%s%s", p->checked, p->confirmed ? "" : " (unconfirmed)")
                  : g_strdup("—"));
        g_string_append(out, "</tr>\n");
    }
    g_string_append(out, "</table>\n");
}

static void anomalies(GString *out, const usage_report *r)
{
    g_string_append(out, "<h2>Anomalies</h2>\n<ul>\n");
    if (r->alerts->len == 0)
        g_string_append(out, "<li>No alerts this week.</li>\n");
    for (guint i = 0; i < r->alerts->len; i++) {
        const report_alert *a = r->alerts->pdata[i];
        g_string_append(out, "<li class=\"alert\">");
        esc(out, a->message);
        g_string_append(out, "</li>\n");
    }
    g_string_append(out, "</ul>\n");
    const report_tail *t = &r->tail;
    if (t->n_rows == 0)
        return;
    g_string_append_printf(out, "<h3>P95 tail: %" G_GINT64_FORMAT
                                " requests slower than %" G_GINT64_FORMAT " ms</h3>\n<ul>\n",
                           t->n_rows, t->threshold_ms);
    for (guint i = 0; i + 1 < t->hints->len; i += 2) {
        g_string_append(out, "<li>");
        esc(out, t->hints->pdata[i + 1]);
        g_string_append(out, "</li>\n");
    }
    g_string_append(out, "</ul>\n<table><tr><th>Started</th><th>Caller</th><th>Model</th>"
                         "<th>Route</th><th>Prompt tokens</th><th>TTFT</th><th>Total</th></tr>\n");
    for (guint i = 0; i < t->slowest->len; i++) {
        const report_tail_row *row = t->slowest->pdata[i];
        g_string_append(out, "<tr>");
        td(out, report_format_time(r->settings->tz, row->start_ms, "%a %Y-%m-%d %H:%M"));
        td(out, g_strdup(row->caller));
        td(out, g_strdup(row->model));
        td(out, g_strdup(row->route));
        td(out, report_format_count((double)row->prompt_tokens));
        td(out, report_format_value(r, REPORT_M_TTFT_P50,
                                    row->ttft_ms < 0 ? NAN : (double)row->ttft_ms));
        td(out, report_format_value(r, REPORT_M_LATENCY_P50, (double)row->total_ms));
        g_string_append(out, "</tr>\n");
    }
    g_string_append(out, "</table>\n");
}

char *report_to_html(const usage_report *r)
{
    const report_week_data *w = usage_report_current(r);
    const report_settings *st = r->settings;
    GString *out = g_string_new("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                                "<meta name=\"viewport\" content=\"width=device-width\">\n<title>");
    g_string_append_printf(out, "MoeDesk weekly report %s</title>\n<style>%s</style></head>\n"
                                "<body><main>\n<h1>MoeDesk weekly report — %s</h1>\n<p class=\"sub\">",
                           w->week.label, css, w->week.label);
    g_autofree char *from = report_format_time(st->tz, w->week.start_ms, "%a %d %b %Y");
    g_autofree char *to = report_format_time(st->tz, w->week.end_ms - 1, "%a %d %b %Y");
    g_autofree char *range = g_strdup_printf("%s to %s (%s) · source %s", from, to,
                                             st->timezone[0] ? st->timezone
                                                             : g_time_zone_get_identifier(st->tz),
                                             r->source_label);
    esc(out, range);
    g_string_append(out, "</p>\n<div class=\"cards\">\n");
    card(out, r, REPORT_M_CALLS);
    card(out, r, REPORT_M_TOTAL_TOKENS);
    card(out, r, REPORT_M_TTFT_P95);
    card(out, r, REPORT_M_COST_PER_1K);
    g_string_append(out, "</div>\n");
    charts(out, r);
    totals_table(out, r);
    g_string_append(out, "<h2>Breakdown</h2>\n<div class=\"tables\">\n");
    for (guint d = 0; d < REPORT_N_DIMS; d++)
        group_table(out, r, d);
    g_string_append(out, "</div>\n");
    cost_section(out, r);
    anomalies(out, r);
    g_string_append(out, "<h2>Recommendation</h2>\n<p class=\"verdict\">");
    esc(out, g_str_equal(r->rec.verdict, "api") ? "Stay on the API"
             : g_str_equal(r->rec.verdict, "hybrid") ? "Go hybrid" : "Run locally");
    g_string_append(out, "</p>\n<p>");
    esc(out, r->rec.reason);
    g_string_append(out, "</p>\n<p class=\"note\">Percentiles are nearest-rank values over "
                         "millisecond buckets: exact below 200 ms, never low and at most 1% high "
                         "above. See docs/report.md for every definition.</p>\n"
                         "</main></body></html>\n");
    return g_string_free(out, FALSE);
}

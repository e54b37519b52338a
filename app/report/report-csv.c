/*
 * report-csv.c — the report's numbers as CSV for spreadsheets: one row per
 * week and scope (the week total, then each model, route, caller and
 * client), one column per figure, plus the total rows' change and
 * four-week average columns. Numbers are written raw (shortest form that
 * reads back exactly); "no value" is an empty field, a change from zero is
 * "new". RFC 4180 quoting.
 */
#include "report-private.h"

#include <math.h>
#include <string.h>

static void put_field(GString *out, const char *s)
{
    if (strpbrk(s, ",\"\r\n")) {
        g_string_append_c(out, '"');
        for (const char *p = s; *p; p++) {
            if (*p == '"')
                g_string_append_c(out, '"');
            g_string_append_c(out, *p);
        }
        g_string_append_c(out, '"');
    } else {
        g_string_append(out, s);
    }
}

static void put_number(GString *out, report_kind kind, double v)
{
    g_string_append_c(out, ',');
    if (isnan(v))
        return;
    if (isinf(v)) {
        g_string_append(out, "new");
        return;
    }
    if (kind == REPORT_KIND_COUNT || kind == REPORT_KIND_MS) {
        g_string_append_printf(out, "%" G_GINT64_FORMAT, (gint64)llround(v));
        return;
    }
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    g_string_append(out, g_ascii_dtostr(buf, sizeof buf, v));
}

static void put_row(GString *out, const report_week_data *w, const char *scope, const char *name,
                    const double *v, const report_week_data *totals)
{
    put_field(out, w->week.label);
    g_string_append_printf(out, ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",", w->week.start_ms,
                           w->week.end_ms);
    put_field(out, scope);
    g_string_append_c(out, ',');
    put_field(out, name);
    for (guint m = 0; m < REPORT_N_METRICS; m++)
        put_number(out, report_metric_get(m)->kind, v[m]);
    for (guint m = 0; m < REPORT_N_METRICS; m++)
        put_number(out, REPORT_KIND_RATE, totals ? totals->change_pct[m] : NAN);
    for (guint m = 0; m < REPORT_N_METRICS; m++)
        put_number(out, REPORT_KIND_RATE, totals ? totals->avg4[m] : NAN);
    g_string_append(out, "\r\n");
}

char *report_to_csv(const usage_report *r)
{
    GString *out = g_string_new("week,start_ms,end_ms,scope,name");
    for (guint m = 0; m < REPORT_N_METRICS; m++)
        g_string_append_printf(out, ",%s", report_metric_get(m)->key);
    for (guint m = 0; m < REPORT_N_METRICS; m++)
        g_string_append_printf(out, ",change_pct_%s", report_metric_get(m)->key);
    for (guint m = 0; m < REPORT_N_METRICS; m++)
        g_string_append_printf(out, ",avg4_%s", report_metric_get(m)->key);
    g_string_append(out, "\r\n");
    for (guint i = 0; i < r->weeks->len; i++) {
        const report_week_data *w = r->weeks->pdata[i];
        put_row(out, w, "total", "", w->v, w);
        for (guint d = 0; d < REPORT_N_DIMS; d++)
            for (guint k = 0; k < w->groups[d]->len; k++) {
                const report_group *g = w->groups[d]->pdata[k];
                put_row(out, w, report_dim_name(d), g->name, g->v, NULL);
            }
    }
    return g_string_free(out, FALSE);
}

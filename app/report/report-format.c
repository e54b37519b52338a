/*
 * report-format.c — how numbers read in the human outputs (Markdown, HTML,
 * alert messages): thousands separators, milliseconds, percentages, money
 * with enough digits for per-token prices, "new" for a change from zero,
 * and "—" for no value. JSON and CSV print raw numbers instead.
 */
#include "report-private.h"

#include <math.h>

#define NO_VALUE "—"

char *report_format_count(double v)
{
    if (isnan(v))
        return g_strdup(NO_VALUE);
    char digits[64];
    g_snprintf(digits, sizeof digits, "%.0f", fabs(v));
    GString *s = g_string_new(v < 0 ? "-" : "");
    size_t len = strlen(digits);
    for (size_t i = 0; i < len; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            g_string_append_c(s, ',');
        g_string_append_c(s, digits[i]);
    }
    return g_string_free(s, FALSE);
}

char *report_format_money(const usage_report *r, double v)
{
    if (isnan(v))
        return g_strdup(NO_VALUE);
    const char *cur = r->settings->currency;
    /* Per-token costs are tiny: keep four significant digits below 0.01. */
    if (v != 0 && fabs(v) < 0.01)
        return g_strdup_printf("%.4g %s", v, cur);
    if (fabs(v) >= 10000) {
        g_autofree char *whole = report_format_count(v);
        return g_strdup_printf("%s %s", whole, cur);
    }
    return g_strdup_printf("%.2f %s", v, cur);
}

char *report_format_value(const usage_report *r, report_metric m, double v)
{
    if (isnan(v))
        return g_strdup(NO_VALUE);
    switch (report_metric_get(m)->kind) {
    case REPORT_KIND_COUNT:
        return report_format_count(v);
    case REPORT_KIND_MS: {
        g_autofree char *n = report_format_count(v);
        return g_strdup_printf("%s ms", n);
    }
    case REPORT_KIND_RATE:
        return g_strdup_printf("%.1f tok/s", v);
    case REPORT_KIND_FRACTION:
        return g_strdup_printf("%.2f%%", v * 100.0);
    case REPORT_KIND_MONEY:
        return report_format_money(r, v);
    }
    return g_strdup(NO_VALUE);
}

char *report_format_change(double pct)
{
    if (isnan(pct))
        return g_strdup(NO_VALUE);
    if (isinf(pct))
        return g_strdup("new");
    if (fabs(pct) < 0.05)
        return g_strdup("±0.0%");
    return g_strdup_printf("%+.1f%%", pct);
}

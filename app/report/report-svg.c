/*
 * report-svg.c — small self-made SVG charts for the HTML report: bars
 * (optionally two stacked series) or a line, over weekly points, with a
 * "nice" y axis (steps of 1, 2 or 5 x 10^k), gridlines, week labels and a
 * <title> tooltip per point. Missing values (NAN) leave a gap. No script,
 * no external fonts: the page renders the same offline and headless.
 */
#include "report-svg.h"

#include <math.h>
#include <string.h>

#define W 600.0
#define H 260.0
#define ML 72.0
#define MR 16.0
#define MT 40.0
#define MB 40.0

static double nice_step(double raw)
{
    if (!(raw > 0))
        return 1;
    double p = pow(10, floor(log10(raw)));
    double f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

char *report_svg_compact(double v, report_svg_unit unit)
{
    if (isnan(v))
        return g_strdup("—");
    switch (unit) {
    case REPORT_SVG_MS:
        return g_strdup_printf("%.0f ms", v);
    case REPORT_SVG_MONEY:
        return v == 0 ? g_strdup("0") : g_strdup_printf("%.3g", v);
    case REPORT_SVG_COUNT:
    default:
        if (fabs(v) >= 1e9)
            return g_strdup_printf("%.3gG", v / 1e9);
        if (fabs(v) >= 1e6)
            return g_strdup_printf("%.3gM", v / 1e6);
        if (fabs(v) >= 1e3)
            return g_strdup_printf("%.3gk", v / 1e3);
        return g_strdup_printf("%.0f", v);
    }
}

static void text(GString *out, double x, double y, const char *anchor, const char *cls,
                 const char *s)
{
    g_autofree char *esc = g_markup_escape_text(s, -1);
    g_string_append_printf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" class=\"%s\">%s</text>\n",
                           x, y, anchor, cls, esc);
}

void report_svg_chart(GString *out, const char *title, const char *const *labels, guint n,
                      const report_svg_series *series, guint n_series, gboolean bars,
                      report_svg_unit unit)
{
    double pw = W - ML - MR, ph = H - MT - MB;
    double max = 0;
    for (guint i = 0; i < n; i++) {
        double sum = 0;
        for (guint s = 0; s < n_series; s++) {
            double v = series[s].values[i];
            if (isnan(v))
                continue;
            if (bars)
                sum += v;
            else
                sum = MAX(sum, v);
        }
        max = MAX(max, sum);
    }
    double step = nice_step(max / 4);
    double top = max > 0 ? ceil(max / step) * step : step * 4;
    g_autofree char *esc_title = g_markup_escape_text(title, -1);
    g_string_append_printf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" "
                                "width=\"%.0f\" height=\"%.0f\" role=\"img\" aria-label=\"%s\">\n",
                           W, H, W, H, esc_title);
    text(out, 8, 22, "start", "t", title);
    /* Grid and y labels. */
    for (double v = 0; v <= top + step / 2; v += step) {
        double y = MT + ph - v / top * ph;
        g_string_append_printf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"g\"/>\n",
                               ML, y, W - MR, y);
        g_autofree char *lab = report_svg_compact(v, unit);
        text(out, ML - 6, y + 4, "end", "a", lab);
    }
    double band = n ? pw / n : pw;
    guint every = n > 12 ? (n + 11) / 12 : 1;
    for (guint i = 0; i < n; i++) {
        double cx = ML + band * (i + 0.5);
        if (i % every == 0 || i == n - 1) {
            const char *lab = labels[i];
            const char *w = strstr(lab, "-W");
            text(out, cx, H - MB + 16, "middle", "a", w ? w + 1 : lab);
        }
    }
    if (bars) {
        double bw = band * 0.62;
        for (guint i = 0; i < n; i++) {
            double base = 0;
            double x = ML + band * i + (band - bw) / 2;
            for (guint s = 0; s < n_series; s++) {
                double v = series[s].values[i];
                if (isnan(v) || v <= 0)
                    continue;
                double y0 = MT + ph - base / top * ph, y1 = MT + ph - (base + v) / top * ph;
                g_autofree char *tip = report_svg_compact(v, unit);
                g_autofree char *esc = g_markup_escape_text(series[s].name, -1);
                g_string_append_printf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                                            "fill=\"%s\"><title>%s %s: %s</title></rect>\n",
                                       x, y1, bw, y0 - y1, series[s].color, labels[i], esc, tip);
                base += v;
            }
        }
    } else {
        for (guint s = 0; s < n_series; s++) {
            gboolean open = FALSE;
            for (guint i = 0; i < n; i++) {
                double v = series[s].values[i];
                if (isnan(v)) {
                    if (open)
                        g_string_append(out, "\"/>\n");
                    open = FALSE;
                    continue;
                }
                double x = ML + band * (i + 0.5), y = MT + ph - v / top * ph;
                if (!open)
                    g_string_append_printf(out, "<polyline fill=\"none\" stroke=\"%s\" "
                                                "stroke-width=\"2.5\" points=\"", series[s].color);
                g_string_append_printf(out, "%.1f,%.1f ", x, y);
                open = TRUE;
            }
            if (open)
                g_string_append(out, "\"/>\n");
            for (guint i = 0; i < n; i++) {
                double v = series[s].values[i];
                if (isnan(v))
                    continue;
                double x = ML + band * (i + 0.5), y = MT + ph - v / top * ph;
                g_autofree char *tip = report_svg_compact(v, unit);
                g_string_append_printf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\">"
                                            "<title>%s: %s</title></circle>\n",
                                       x, y, series[s].color, labels[i], tip);
            }
        }
    }
    /* Legend when there is more than one series. */
    for (guint s = 0; n_series > 1 && s < n_series; s++) {
        double x = W - MR - 150 + 80 * s;
        g_string_append_printf(out, "<rect x=\"%.1f\" y=\"12\" width=\"10\" height=\"10\" fill=\"%s\"/>\n",
                               x - 70, series[s].color);
        text(out, x - 56, 21, "start", "a", series[s].name);
    }
    g_string_append_printf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"x\"/>\n",
                           ML, MT + ph, W - MR, MT + ph);
    g_string_append(out, "</svg>\n");
}

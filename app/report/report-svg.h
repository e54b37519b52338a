/*
 * report-svg.h — inline SVG charts for the HTML report (report-svg.c).
 */
#ifndef MOEDESK_REPORT_SVG_H
#define MOEDESK_REPORT_SVG_H

#include <glib.h>

typedef enum {
    REPORT_SVG_COUNT,   /* 12k, 3.4M */
    REPORT_SVG_MS,      /* 850 ms */
    REPORT_SVG_MONEY,   /* 3 significant digits */
} report_svg_unit;

typedef struct report_svg_series {
    const char *name;
    const double *values;   /* n points; NAN = no value */
    const char *color;      /* CSS colour */
} report_svg_series;

/* Append one chart (600x260) to `out`; bars stack the series. */
void report_svg_chart(GString *out, const char *title, const char *const *labels, guint n,
                      const report_svg_series *series, guint n_series, gboolean bars,
                      report_svg_unit unit);

/* Short axis/tooltip label (newly allocated). */
char *report_svg_compact(double v, report_svg_unit unit);

#endif /* MOEDESK_REPORT_SVG_H */

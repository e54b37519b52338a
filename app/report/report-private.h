/*
 * report-private.h — what the report's own files share: accumulators the
 * builder fills, and the analysis passes that run once the weekly figures
 * exist (changes, averages, alerts, API comparison, verdict, slow tail).
 */
#ifndef MOEDESK_REPORT_PRIVATE_H
#define MOEDESK_REPORT_PRIVATE_H

#include "report.h"

/* Extra weeks loaded before the first shown one: its previous week and
 * four-week average need them. */
#define REPORT_LOOKBACK 4

/* Everything one group (or a week total) adds up. */
typedef struct report_acc {
    usage_sums sums;
    guint64 *ttft;            /* dense counts [USAGE_HIST_N_BUCKETS], NULL = none */
    guint64 *total;
    double upstream_usd;      /* priced upstream tokens */
    gint64 unpriced_tokens;
    gint64 local_busy_ms;     /* route "local" only, from here down */
    gint64 local_busy_unmeasured;
    double local_energy_wms;
    gint64 local_prompt, local_cached, local_completion;
} report_acc;

typedef struct report_week_acc {
    report_acc total;
    GHashTable *dims[REPORT_N_DIMS];   /* name -> report_acc* */
    GHashTable *unpriced;              /* set of "route/model" */
} report_week_acc;

typedef struct report_build_ctx {
    const report_settings *settings;
    const report_prices *prices;
    guint n;                  /* weeks loaded, oldest first */
    report_week *weeks;
    report_week_acc *acc;
    gboolean any_data;
    gint64 first_ms;          /* earliest request in the source */
    GHashTable *price_cache;  /* "route\x1fmodel" -> const report_price* */
    GString *key;
} report_build_ctx;

void report_acc_figures(const report_acc *a, const report_settings *st, double fixed_share,
                        double v[REPORT_N_METRICS]);
double report_acc_kwh(const report_acc *a, const report_settings *st);
void report_week_data_free(gpointer p);

/* Changes, 4-week averages, alerts and the verdict over all loaded weeks
 * (the last is the reported one). */
void report_analyse_weeks(usage_report *r, GPtrArray *all);
/* What the reported week's local tokens would cost on each compared API. */
void report_analyse_costs(usage_report *r, const report_week_acc *current);
/* The reported week's requests slower than its P95. */
gboolean report_analyse_tail(usage_report *r, const report_source *src, GError **error);
void report_tail_clear(report_tail *t);

#endif /* MOEDESK_REPORT_PRIVATE_H */

/*
 * report.h — the weekly adoption and cost report (issue 6): what it
 * computes from the usage store's hourly roll-ups, and the four ways it is
 * written out (Markdown, HTML with SVG charts, CSV, JSON). The REST service
 * serves usage_report_weekly_json(); moedesk-cli's `report weekly` wraps the
 * same calls. Definitions of every figure: docs/report.md.
 *
 * Data flow:
 *
 *   report_source (SQLite store | Postgres) ──► report_build()
 *        hourly roll-ups for whole hours,            │  per week: totals, groups by
 *        raw rows for hours cut by a week edge,      │  model/route/caller/client,
 *        raw rows above P95 for the slow tail        ▼  costs; then change, 4-week
 *                                               usage_report   average, alerts, tail,
 *                                                    │          API comparison, verdict
 *                              report_write_{markdown,html,csv,json}()
 */
#ifndef MOEDESK_REPORT_H
#define MOEDESK_REPORT_H

#include <glib.h>

#include "report-error.h"
#include "report-prices.h"
#include "report-settings.h"
#include "report-weeks.h"
#include "usage-pg.h"
#include "usage-store.h"

G_BEGIN_DECLS

/* Where the rows come from: the SQLite store, or Postgres (usage-pg.c). */
typedef struct report_source {
    const char *label;     /* for messages: a path or "postgres" */
    gpointer ctx;
    gboolean (*time_range)(gpointer ctx, gint64 *first_ms, gint64 *last_ms, gboolean *any,
                           GError **error);
    gboolean (*each_hour)(gpointer ctx, gint64 from_hour, gint64 to_hour, usage_hour_fn fn,
                          gpointer user_data, GError **error);
    gboolean (*each_row)(gpointer ctx, gint64 from_ms, gint64 to_ms, gint64 above_total_ms,
                         usage_row_fn fn, gpointer user_data, GError **error);
} report_source;

void report_source_init_store(report_source *src, usage_store *store);
/* Rows of every gateway in Postgres; `label` (borrowed) names it in messages. */
void report_source_init_pg(report_source *src, usage_pg *pg, const char *label);

/* Every weekly figure, in output order. */
typedef enum {
    REPORT_M_CALLS,
    REPORT_M_PROMPT_TOKENS,
    REPORT_M_CACHED_TOKENS,
    REPORT_M_COMPLETION_TOKENS,
    REPORT_M_TOTAL_TOKENS,
    REPORT_M_TTFT_P50,
    REPORT_M_TTFT_P95,
    REPORT_M_LATENCY_P50,
    REPORT_M_LATENCY_P95,
    REPORT_M_DECODE_TPS,
    REPORT_M_ERROR_RATE,
    REPORT_M_COST,
    REPORT_M_COST_PER_1K,
    REPORT_N_METRICS
} report_metric;

typedef enum {
    REPORT_KIND_COUNT,     /* integer */
    REPORT_KIND_MS,        /* integer milliseconds */
    REPORT_KIND_RATE,      /* tokens per second */
    REPORT_KIND_FRACTION,  /* 0..1, shown as a percentage */
    REPORT_KIND_MONEY,     /* settings currency */
} report_kind;

typedef struct report_metric_info {
    const char *key;       /* JSON/CSV name */
    const char *label;     /* human name */
    report_kind kind;
    int better;            /* +1 higher is better, -1 lower is better, 0 neither */
} report_metric_info;

const report_metric_info *report_metric_get(report_metric m);

typedef enum {
    REPORT_DIM_MODEL,
    REPORT_DIM_ROUTE,
    REPORT_DIM_CALLER,
    REPORT_DIM_CLIENT,
    REPORT_N_DIMS
} report_dim;

const char *report_dim_name(report_dim d);   /* "model", "route", ... */

/* Values use NAN for "no value" (no data, nothing to divide by). Changes use
 * INFINITY for "new" (previous week was zero or had no data). */
typedef struct report_group {
    char *name;
    double v[REPORT_N_METRICS];
} report_group;

typedef struct report_cost {
    double upstream;       /* priced upstream tokens, currency */
    double electricity;    /* local busy time * power * kWh price */
    double fixed;          /* amortisation + fixed monthly, per week */
    double local_kwh;
    gint64 local_busy_ms;
    gint64 local_tokens;   /* prompt + completion served locally */
    gint64 unpriced_tokens;      /* upstream tokens with no price entry */
    GPtrArray *unpriced_routes;  /* "route/model" strings */
} report_cost;

typedef struct report_week_data {
    report_week week;
    gboolean has_data;     /* at or after the first recorded request */
    double v[REPORT_N_METRICS];
    double change_pct[REPORT_N_METRICS];  /* vs the previous week */
    double avg4[REPORT_N_METRICS];        /* mean of the four weeks before */
    double vs_avg4_pct[REPORT_N_METRICS];
    report_cost cost;
    GPtrArray *groups[REPORT_N_DIMS];     /* report_group*: calls desc, name asc */
} report_week_data;

typedef struct report_alert {
    char *kind;            /* "trend" | "off_average" */
    report_metric metric;
    char *message;
} report_alert;

typedef struct report_tail_row {
    gint64 id;
    gint64 start_ms;
    char *caller, *client, *model, *route;
    gint64 prompt_tokens, completion_tokens, ttft_ms, total_ms;
} report_tail_row;

typedef struct report_tail {
    gint64 threshold_ms;   /* the week's latency P95; -1 when none */
    gint64 n_rows;         /* ok requests slower than the threshold */
    GPtrArray *slowest;    /* report_tail_row*, slowest first, at most tail_rows */
    double tail_mean_prompt, week_mean_prompt;
    char *top_caller;
    double top_caller_share, top_caller_call_share;
    char *top_model;
    double top_model_share, top_model_call_share;
    char *top_hour;        /* local "YYYY-MM-DD HH:00" */
    double top_hour_share;
    GPtrArray *hints;      /* char*: (kind, sentence) pairs; kinds in report-tail.c */
} report_tail;

typedef struct report_comparison {
    char *api;             /* "provider/model" */
    gboolean priced;
    double api_cost;       /* this week's local tokens at that API's prices */
    double local_cost;     /* electricity + fixed share of the week */
    double saving;         /* api_cost - local_cost */
    double payback_months; /* hardware price / monthly running saving; NAN = never */
} report_comparison;

typedef struct report_recommendation {
    const char *verdict;   /* "api" | "hybrid" | "local" */
    double monthly_tokens;
    int weeks_used;        /* weeks with data averaged (<= 4) */
    char *reason;
} report_recommendation;

typedef struct usage_report {
    const report_settings *settings;  /* borrowed: must outlive the report */
    const report_prices *prices;      /* borrowed */
    char *source_label;
    gint64 generated_ms;
    GPtrArray *weeks;                 /* report_week_data*, oldest first; last = reported */
    GPtrArray *alerts;                /* report_alert* */
    report_tail tail;
    GPtrArray *comparisons;           /* report_comparison* */
    report_recommendation rec;
} usage_report;

/*
 * Build the report for ISO week `week` ("2026-W47"; NULL = the last
 * complete week before `now_ms`) with `n_weeks` of history (1..104, the
 * reported week included). Fails with REPORT_ERROR_NO_DATA when the week
 * holds no request, REPORT_ERROR_WEEK for a bad label, or the source's error.
 */
usage_report *report_build(const report_source *src, const report_settings *settings,
                           const report_prices *prices, const char *week, guint n_weeks,
                           gint64 now_ms, GError **error);
void usage_report_free(usage_report *report);

static inline report_week_data *usage_report_current(const usage_report *r)
{
    return r->weeks->pdata[r->weeks->len - 1];
}

/* Outputs; each returns a newly allocated string. */
char *report_to_json(const usage_report *report);
char *report_to_csv(const usage_report *report);
/* `next_week` is the user's text for the "Next week" section (NULL: placeholder). */
char *report_to_markdown(const usage_report *report, const char *next_week);
char *report_to_html(const usage_report *report);

/* The user's filled-in "Next week" section of an earlier Markdown report,
 * or NULL when the section is missing or still the placeholder. */
char *report_markdown_next_week(const char *markdown);

/*
 * For the service: settings from the config dir, prices, build and JSON in
 * one call. `week` may be NULL (last complete week).
 */
char *usage_report_weekly_json(usage_store *store, const char *week, guint n_weeks,
                               GError **error);

/* Formatting helpers shared by the writers (report-format.c). */
char *report_format_value(const usage_report *r, report_metric m, double v);
char *report_format_change(double pct);
char *report_format_count(double v);
char *report_format_money(const usage_report *r, double v);

G_END_DECLS

#endif /* MOEDESK_REPORT_H */

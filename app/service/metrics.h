/*
 * metrics.h — moedesk-service's Prometheus metrics: a fixed set of
 * families (below), filled by the server after each request and by the
 * scheduler's stats, rendered for GET /metrics in the text exposition
 * format 0.0.4 (Content-Type: text/plain; version=0.0.4; charset=utf-8).
 *
 * Families (labels in braces):
 *   moedesk_requests_total{model,route,endpoint,status}       counter
 *   moedesk_prompt_tokens_total{model,route}                  counter
 *   moedesk_cached_tokens_total{model,route}                  counter
 *   moedesk_completion_tokens_total{model,route}              counter
 *   moedesk_time_to_first_token_seconds{model,route}          histogram
 *   moedesk_request_duration_seconds{model,route}             histogram
 *   moedesk_queue_depth, moedesk_running_sequences,
 *   moedesk_kv_cache_used_cells, moedesk_kv_cache_total_cells gauge
 *   moedesk_model_loaded{model}                                gauge (1 loaded)
 *   moedesk_upstream_up{upstream}                              gauge (1 up, 0 down)
 *
 * Histogram buckets (seconds): 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5
 * 10 30 60 120 +Inf.
 *
 * Label values are made safe here: invalid UTF-8 is repaired, control
 * characters other than newline become '_', values are cut to 128 bytes.
 * Cardinality is bounded: a family holds at most SVC_METRICS_MAX_SERIES
 * label sets; beyond that new ones are counted under every label "_other"
 * (model names come from requests; a client must not grow memory).
 *
 * Threads: every function may be called from any thread (one mutex).
 */
#ifndef MOEDESK_SVC_METRICS_H
#define MOEDESK_SVC_METRICS_H

#include <glib.h>

G_BEGIN_DECLS

#define SVC_METRICS_MAX_SERIES    1000
#define SVC_METRICS_LABEL_MAX     128 /* bytes */
#define SVC_METRICS_CONTENT_TYPE  "text/plain; version=0.0.4; charset=utf-8"

typedef struct svc_metrics svc_metrics;

/* One finished request, local or forwarded. Strings are borrowed; NULL
 * counts as "". */
typedef struct svc_metrics_request {
    const char *model;
    const char *route;    /* "local" or the upstream's name                */
    const char *endpoint; /* the route pattern, e.g. "/v1/chat/completions" */
    int         status;   /* HTTP status sent                               */
    gint64      prompt_tokens, cached_tokens, completion_tokens; /* < 0 = 0 */
    double      ttft_s;     /* time to first token; < 0 or NaN = none      */
    double      duration_s; /* whole request; NaN = not observed           */
} svc_metrics_request;

typedef enum {
    SVC_METRICS_QUEUE_DEPTH,        /* requests waiting for a slot          */
    SVC_METRICS_RUNNING_SEQUENCES,  /* sequences decoding now               */
    SVC_METRICS_KV_USED_CELLS,      /* KV cache cells in use                */
    SVC_METRICS_KV_TOTAL_CELLS,     /* KV cache cells in all                */
    SVC_METRICS_MODEL_LOADED,       /* label: model                         */
    SVC_METRICS_UPSTREAM_UP,        /* label: upstream                      */
} svc_metrics_gauge;

svc_metrics *svc_metrics_new(void);
void         svc_metrics_free(svc_metrics *m);

/* Counts one request into the counters and histograms. */
void svc_metrics_observe_request(svc_metrics *m, const svc_metrics_request *r);

/* Sets a gauge. `label` is the model or upstream for the labelled gauges
 * and ignored for the others. NaN is ignored. */
void svc_metrics_set_gauge(svc_metrics *m, svc_metrics_gauge g, const char *label, double value);
/* Drops every series of a labelled gauge (e.g. all models before setting
 * the one now loaded) or resets an unlabelled one to 0. */
void svc_metrics_clear_gauge(svc_metrics *m, svc_metrics_gauge g);

/* Appends the exposition text (every family, HELP and TYPE lines, series
 * sorted by labels) to `out`. */
void svc_metrics_render(svc_metrics *m, GString *out);

G_END_DECLS

#endif /* MOEDESK_SVC_METRICS_H */

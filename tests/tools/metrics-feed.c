/*
 * metrics-feed.c — drives the service's metrics registry (app/service/
 * metrics.h) from JSON lines on stdin and prints the /metrics exposition
 * on stdout, so tests/scripts/test_metrics_exposition.py can check the text
 * with an independent parser against counts it computes itself.
 *
 * One JSON object per line:
 *   {"model": S, "route": S, "endpoint": S, "status": N, "prompt": N,
 *    "cached": N, "completion": N, "ttft": X|null, "duration": X|null}
 *   {"gauge": "queue_depth"|"running_sequences"|"kv_used"|"kv_total"|
 *             "model_loaded"|"upstream_up", "label": S|null, "value": X}
 *   {"clear": GAUGE}
 * Exit status 1 (message on stderr) on a line it cannot read.
 */
#include "metrics.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *str_member(JsonObject *o, const char *k)
{
    JsonNode *n = json_object_get_member(o, k);
    return n && JSON_NODE_HOLDS_VALUE(n) ? json_node_get_string(n) : NULL;
}

static double num_member(JsonObject *o, const char *k, double dflt)
{
    JsonNode *n = json_object_get_member(o, k);
    return n && JSON_NODE_HOLDS_VALUE(n) ? json_node_get_double(n) : dflt;
}

static int gauge_of(const char *name)
{
    static const char *const names[] = {"queue_depth", "running_sequences", "kv_used",
                                        "kv_total", "model_loaded", "upstream_up"};
    for (int i = 0; name && i < (int)G_N_ELEMENTS(names); i++)
        if (!strcmp(name, names[i]))
            return i; /* the order of svc_metrics_gauge */
    return -1;
}

int main(void)
{
    svc_metrics *m = svc_metrics_new();
    char line[65536];
    int lineno = 0;
    while (fgets(line, sizeof line, stdin)) {
        lineno++;
        g_autoptr(JsonParser) p = json_parser_new();
        g_autoptr(GError) e = NULL;
        if (!json_parser_load_from_data(p, line, -1, &e) ||
            !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(p))) {
            fprintf(stderr, "metrics-feed: line %d: %s\n", lineno, e ? e->message : "not an object");
            svc_metrics_free(m);
            return 1;
        }
        JsonObject *o = json_node_get_object(json_parser_get_root(p));
        if (json_object_has_member(o, "gauge") || json_object_has_member(o, "clear")) {
            gboolean clear = json_object_has_member(o, "clear");
            int g = gauge_of(str_member(o, clear ? "clear" : "gauge"));
            if (g < 0) {
                fprintf(stderr, "metrics-feed: line %d: unknown gauge\n", lineno);
                svc_metrics_free(m);
                return 1;
            }
            if (clear)
                svc_metrics_clear_gauge(m, (svc_metrics_gauge)g);
            else
                svc_metrics_set_gauge(m, (svc_metrics_gauge)g, str_member(o, "label"),
                                      num_member(o, "value", NAN));
            continue;
        }
        svc_metrics_request r = {
            .model = str_member(o, "model"),
            .route = str_member(o, "route"),
            .endpoint = str_member(o, "endpoint"),
            .status = (int)num_member(o, "status", 0),
            .prompt_tokens = (gint64)num_member(o, "prompt", 0),
            .cached_tokens = (gint64)num_member(o, "cached", 0),
            .completion_tokens = (gint64)num_member(o, "completion", 0),
            .ttft_s = num_member(o, "ttft", -1),
            .duration_s = num_member(o, "duration", NAN),
        };
        svc_metrics_observe_request(m, &r);
    }
    GString *out = g_string_new(NULL);
    svc_metrics_render(m, out);
    fwrite(out->str, 1, out->len, stdout);
    g_string_free(out, TRUE);
    svc_metrics_free(m);
    return 0;
}

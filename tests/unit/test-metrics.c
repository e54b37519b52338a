/*
 * test-metrics.c — the Prometheus registry (app/service/metrics.h): exact
 * sample lines after known observations, bucket edges (le is inclusive),
 * missing TTFT and NaN durations, label escaping and cleaning, gauges,
 * the cardinality cap, and counts under concurrent observers. The
 * exposition grammar itself is checked by an independent Python parser
 * (tests/scripts/test_metrics_exposition.py).
 */
#include "metrics.h"
#include "test.h"

static char *render(svc_metrics *m)
{
    GString *s = g_string_new(NULL);
    svc_metrics_render(m, s);
    return g_string_free(s, FALSE);
}

/* TRUE when `line` is one whole line of `text`. */
static gboolean has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return TRUE;
    return FALSE;
}

#define CHECK_LINE(text, line) CHECK_MSG(has_line(text, line), "missing line: %s", line)

static void test_empty(void)
{
    svc_metrics *m = svc_metrics_new();
    g_autofree char *t = render(m);
    static const char *const fams[] = {
        "moedesk_requests_total counter", "moedesk_prompt_tokens_total counter",
        "moedesk_cached_tokens_total counter", "moedesk_completion_tokens_total counter",
        "moedesk_time_to_first_token_seconds histogram",
        "moedesk_request_duration_seconds histogram", "moedesk_queue_depth gauge",
        "moedesk_running_sequences gauge", "moedesk_kv_cache_used_cells gauge",
        "moedesk_kv_cache_total_cells gauge", "moedesk_model_loaded gauge",
        "moedesk_upstream_up gauge"};
    for (size_t i = 0; i < G_N_ELEMENTS(fams); i++) {
        g_autofree char *type = g_strconcat("# TYPE ", fams[i], NULL);
        CHECK_LINE(t, type);
    }
    CHECK_LINE(t, "moedesk_queue_depth 0");
    CHECK_LINE(t, "moedesk_kv_cache_total_cells 0");
    CHECK(strstr(t, "moedesk_requests_total{") == NULL);
    svc_metrics_free(m);
    svc_metrics_free(NULL);
}

static void test_request(void)
{
    svc_metrics *m = svc_metrics_new();
    svc_metrics_request r = {.model = "qwen3", .route = "local",
                             .endpoint = "/v1/chat/completions", .status = 200,
                             .prompt_tokens = 100, .cached_tokens = 40, .completion_tokens = 20,
                             .ttft_s = 0.03, .duration_s = 1.2};
    svc_metrics_observe_request(m, &r);
    r.ttft_s = 0.005; /* on the edge: counted in le="0.005" */
    r.duration_s = 120;
    svc_metrics_observe_request(m, &r);
    r.status = 429; /* refused: no first token, no tokens */
    r.ttft_s = -1;
    r.duration_s = 0.0001;
    r.prompt_tokens = r.cached_tokens = r.completion_tokens = -5;
    svc_metrics_observe_request(m, &r);
    r.duration_s = NAN;
    r.ttft_s = NAN;
    r.status = 500;
    svc_metrics_observe_request(m, &r);
    g_autofree char *t = render(m);
    CHECK_LINE(t, "moedesk_requests_total{model=\"qwen3\",route=\"local\","
                  "endpoint=\"/v1/chat/completions\",status=\"200\"} 2");
    CHECK_LINE(t, "moedesk_requests_total{model=\"qwen3\",route=\"local\","
                  "endpoint=\"/v1/chat/completions\",status=\"429\"} 1");
    CHECK_LINE(t, "moedesk_requests_total{model=\"qwen3\",route=\"local\","
                  "endpoint=\"/v1/chat/completions\",status=\"500\"} 1");
    CHECK_LINE(t, "moedesk_prompt_tokens_total{model=\"qwen3\",route=\"local\"} 200");
    CHECK_LINE(t, "moedesk_cached_tokens_total{model=\"qwen3\",route=\"local\"} 80");
    CHECK_LINE(t, "moedesk_completion_tokens_total{model=\"qwen3\",route=\"local\"} 40");
    const char *tt = "moedesk_time_to_first_token_seconds";
    g_autofree char *l1 = g_strdup_printf("%s_bucket{model=\"qwen3\",route=\"local\",le=\"0.005\"} 1", tt);
    g_autofree char *l2 = g_strdup_printf("%s_bucket{model=\"qwen3\",route=\"local\",le=\"0.025\"} 1", tt);
    g_autofree char *l3 = g_strdup_printf("%s_bucket{model=\"qwen3\",route=\"local\",le=\"0.05\"} 2", tt);
    g_autofree char *l4 = g_strdup_printf("%s_bucket{model=\"qwen3\",route=\"local\",le=\"+Inf\"} 2", tt);
    g_autofree char *l5 = g_strdup_printf("%s_count{model=\"qwen3\",route=\"local\"} 2", tt);
    g_autofree char *l6 = g_strdup_printf("%s_sum{model=\"qwen3\",route=\"local\"} 0.034999999999999996", tt);
    CHECK_LINE(t, l1);
    CHECK_LINE(t, l2);
    CHECK_LINE(t, l3);
    CHECK_LINE(t, l4);
    CHECK_LINE(t, l5);
    CHECK_LINE(t, l6);
    const char *d = "moedesk_request_duration_seconds";
    g_autofree char *d1 = g_strdup_printf("%s_bucket{model=\"qwen3\",route=\"local\",le=\"0.005\"} 1", d);
    g_autofree char *d2 = g_strdup_printf("%s_bucket{model=\"qwen3\",route=\"local\",le=\"1\"} 1", d);
    g_autofree char *d3 = g_strdup_printf("%s_bucket{model=\"qwen3\",route=\"local\",le=\"2.5\"} 2", d);
    g_autofree char *d4 = g_strdup_printf("%s_bucket{model=\"qwen3\",route=\"local\",le=\"60\"} 2", d);
    g_autofree char *d5 = g_strdup_printf("%s_bucket{model=\"qwen3\",route=\"local\",le=\"120\"} 3", d);
    g_autofree char *d6 = g_strdup_printf("%s_count{model=\"qwen3\",route=\"local\"} 3", d);
    CHECK_LINE(t, d1);
    CHECK_LINE(t, d2);
    CHECK_LINE(t, d3);
    CHECK_LINE(t, d4);
    CHECK_LINE(t, d5);
    CHECK_LINE(t, d6);
    svc_metrics_free(m);
}

static void test_labels(void)
{
    svc_metrics *m = svc_metrics_new();
    svc_metrics_request r = {.model = "a\"b\\c\nd\re\x01", .route = NULL, .endpoint = "/x",
                             .status = 200, .ttft_s = -1, .duration_s = 1};
    svc_metrics_observe_request(m, &r);
    r.model = "bad\xff\xfeutf8";
    svc_metrics_observe_request(m, &r);
    char big[400];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[127] = '\xc3'; /* a two-byte character across the 128-byte cut */
    big[128] = '\xa9';
    r.model = big;
    svc_metrics_observe_request(m, &r);
    g_autofree char *t = render(m);
    CHECK_LINE(t, "moedesk_prompt_tokens_total{model=\"a\\\"b\\\\c\\nd_e_\",route=\"\"} 0");
    CHECK_LINE(t, "moedesk_prompt_tokens_total{model=\"bad\xef\xbf\xbd\xef\xbf\xbdutf8\",route=\"\"} 0");
    g_autofree char *cut = g_strnfill(127, 'z');
    g_autofree char *line = g_strdup_printf("moedesk_prompt_tokens_total{model=\"%s\",route=\"\"} 0", cut);
    CHECK_LINE(t, line);
    CHECK(g_utf8_validate(t, -1, NULL));
    svc_metrics_free(m);
}

static void test_gauges(void)
{
    svc_metrics *m = svc_metrics_new();
    svc_metrics_set_gauge(m, SVC_METRICS_QUEUE_DEPTH, "ignored", 3);
    svc_metrics_set_gauge(m, SVC_METRICS_RUNNING_SEQUENCES, NULL, 4);
    svc_metrics_set_gauge(m, SVC_METRICS_KV_USED_CELLS, NULL, 1024);
    svc_metrics_set_gauge(m, SVC_METRICS_KV_TOTAL_CELLS, NULL, 16384);
    svc_metrics_set_gauge(m, SVC_METRICS_KV_TOTAL_CELLS, NULL, NAN); /* ignored */
    svc_metrics_set_gauge(m, SVC_METRICS_MODEL_LOADED, "qwen3", 1);
    svc_metrics_set_gauge(m, SVC_METRICS_UPSTREAM_UP, "moonshot", 0);
    svc_metrics_set_gauge(m, SVC_METRICS_UPSTREAM_UP, "cluster", 1);
    svc_metrics_set_gauge(m, (svc_metrics_gauge)99, NULL, 1); /* ignored */
    g_autofree char *t = render(m);
    CHECK_LINE(t, "moedesk_queue_depth 3");
    CHECK_LINE(t, "moedesk_running_sequences 4");
    CHECK_LINE(t, "moedesk_kv_cache_used_cells 1024");
    CHECK_LINE(t, "moedesk_kv_cache_total_cells 16384");
    CHECK_LINE(t, "moedesk_model_loaded{model=\"qwen3\"} 1");
    CHECK_LINE(t, "moedesk_upstream_up{upstream=\"moonshot\"} 0");
    /* Series come sorted by label values. */
    const char *c = strstr(t, "upstream=\"cluster\""), *mo = strstr(t, "upstream=\"moonshot\"");
    CHECK(c && mo && c < mo);
    svc_metrics_clear_gauge(m, SVC_METRICS_MODEL_LOADED);
    svc_metrics_clear_gauge(m, SVC_METRICS_QUEUE_DEPTH);
    svc_metrics_set_gauge(m, SVC_METRICS_MODEL_LOADED, "other", 1);
    g_autofree char *t2 = render(m);
    CHECK(strstr(t2, "model=\"qwen3\"") == NULL);
    CHECK_LINE(t2, "moedesk_model_loaded{model=\"other\"} 1");
    CHECK_LINE(t2, "moedesk_queue_depth 0");
    svc_metrics_set_gauge(m, SVC_METRICS_KV_USED_CELLS, NULL, 0.25);
    g_autofree char *t3 = render(m);
    CHECK_LINE(t3, "moedesk_kv_cache_used_cells 0.25");
    svc_metrics_free(m);
}

static void test_cap(void)
{
    svc_metrics *m = svc_metrics_new();
    for (int i = 0; i < SVC_METRICS_MAX_SERIES + 100; i++) {
        char model[32];
        snprintf(model, sizeof model, "m%05d", i);
        svc_metrics_request r = {.model = model, .route = "local", .endpoint = "/e",
                                 .status = 200, .prompt_tokens = 1, .ttft_s = -1,
                                 .duration_s = NAN};
        svc_metrics_observe_request(m, &r);
    }
    g_autofree char *t = render(m);
    CHECK_LINE(t, "moedesk_prompt_tokens_total{model=\"_other\",route=\"_other\"} 100");
    CHECK_LINE(t, "moedesk_requests_total{model=\"_other\",route=\"_other\",endpoint=\"_other\","
                  "status=\"_other\"} 100");
    int n = 0;
    for (const char *p = t; (p = strstr(p, "\nmoedesk_prompt_tokens_total{")); p++)
        n++;
    CHECK_EQ_INT(n, SVC_METRICS_MAX_SERIES + 1);
    svc_metrics_free(m);
}

#define N_THREADS 8
#define N_EACH    2000

static gpointer observer(gpointer p)
{
    svc_metrics *m = p;
    for (int i = 0; i < N_EACH; i++) {
        svc_metrics_request r = {.model = i % 2 ? "a" : "b", .route = "local", .endpoint = "/e",
                                 .status = 200, .prompt_tokens = 3, .completion_tokens = 1,
                                 .ttft_s = 0.001 * (i % 100), .duration_s = 0.01};
        svc_metrics_observe_request(m, &r);
        if (i % 100 == 0) {
            svc_metrics_set_gauge(m, SVC_METRICS_QUEUE_DEPTH, NULL, i);
            GString *s = g_string_new(NULL);
            svc_metrics_render(m, s);
            g_string_free(s, TRUE);
        }
    }
    return NULL;
}

static void test_threads(void)
{
    svc_metrics *m = svc_metrics_new();
    GThread *th[N_THREADS];
    for (int i = 0; i < N_THREADS; i++)
        th[i] = g_thread_new("observer", observer, m);
    for (int i = 0; i < N_THREADS; i++)
        g_thread_join(th[i]);
    g_autofree char *t = render(m);
    g_autofree char *want = g_strdup_printf(
        "moedesk_prompt_tokens_total{model=\"a\",route=\"local\"} %d", 3 * N_THREADS * N_EACH / 2);
    CHECK_LINE(t, want);
    g_autofree char *want2 = g_strdup_printf(
        "moedesk_request_duration_seconds_count{model=\"b\",route=\"local\"} %d",
        N_THREADS * N_EACH / 2);
    CHECK_LINE(t, want2);
    svc_metrics_free(m);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    test_empty();
    test_request();
    test_labels();
    test_gauges();
    test_cap();
    test_threads();
    TEST_DONE();
}

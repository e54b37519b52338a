/*
 * bench-report.c — the weekly report over a large usage database: fills a
 * store with N synthetic requests (default 10 million over 12 weeks) through
 * the bulk path, reporting the insert rate and what the hourly roll-ups
 * cost per row, times the queued append path the service uses, then builds
 * the report (JSON) several times and prints the best and median time.
 * Run by hand; numbers go to docs/benchmarks.md ("Weekly report").
 *
 *   bench-report DB [ROWS] [--reuse]
 *
 * --reuse skips generation when DB already exists (to re-time the report).
 */
#include "report.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_ROWS 100000
#define WEEKS 12
/* Monday 2026-09-07 00:00 UTC: weeks 2026-W37 .. 2026-W48. */
#define T0_MS G_GINT64_CONSTANT(1788739200000)

static guint64 rng_state = 0x9e3779b97f4a7c15ULL;

static guint32 rnd(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (guint32)(rng_state >> 33);
}

static double unit(void)
{
    return (rnd() + 0.5) / 2147483648.0;
}

static const char *const models[][2] = {
    {"qwen3-30b-a3b", "local"}, {"qwen3-coder-30b-a3b", "local"}, {"kimi-k2.6", "moonshot"},
    {"qwen/qwen3-30b-a3b-instruct-2507", "openrouter"}, {"deepseek-v4-flash", "deepseek"},
    {"kimi-k3", "cluster"}, {"glm-9-experimental", "openrouter"},
};
static const int model_weight[] = {45, 17, 14, 9, 6, 6, 3};
static const char *const callers[][2] = {
    {"gui", "moedesk/0.1.0"}, {"cli", "moedesk-cli/0.1.0"}, {"anonymous", "curl/7.88.1"},
    {"alice", "continue/1.2.3"}, {"bob", "openai-python/1.40.0"}, {"ci", "ci-runner/2.3"},
};
static const int caller_weight[] = {28, 9, 5, 22, 16, 20};

static int pick(const int *weights, int n)
{
    int total = 0;
    for (int i = 0; i < n; i++)
        total += weights[i];
    int x = (int)(rnd() % (guint32)total);
    for (int i = 0; i < n; i++) {
        if (x < weights[i])
            return i;
        x -= weights[i];
    }
    return n - 1;
}

static void make_row(gint64 i, gint64 n, usage_row *r)
{
    int m = pick(model_weight, G_N_ELEMENTS(model_weight));
    int c = pick(caller_weight, G_N_ELEMENTS(caller_weight));
    gboolean local = g_str_equal(models[m][1], "local");
    gint64 span = (gint64)WEEKS * 7 * 86400000;
    gint64 prompt = 50 + (gint64)(unit() * unit() * 4000);
    gint64 completion = 20 + (gint64)(unit() * 600);
    gint64 ttft = local ? 20 + prompt / 60 + (gint64)(unit() * 40) : 300 + (gint64)(unit() * 900);
    double tps = local ? 35 + unit() * 55 : 25 + unit() * 45;
    gint64 total = ttft + (gint64)(completion / tps * 1000);
    guint32 roll = rnd() % 1000;
    *r = (usage_row){
        .start_ms = T0_MS + i * span / n,
        .caller = callers[c][0],
        .client = rnd() % 10 ? callers[c][1] : "curl/7.88.1",
        .endpoint = "/v1/chat/completions",
        .model = models[m][0],
        .route = models[m][1],
        .backend = local ? "cuda" : NULL,
        .quant = local ? "Q4_K_M" : NULL,
        .prompt_tokens = prompt,
        .cached_tokens = prompt * (rnd() % 4) / 4,
        .completion_tokens = completion,
        .ttft_ms = ttft,
        .total_ms = total,
        .decode_tps = tps,
        .http_status = roll < 15 ? 500 : 200,
        .error_kind = roll < 15 ? "engine_error" : NULL,
        .finish_reason = "stop",
        .gpu_power_w = local && rnd() % 10 < 7 ? 240 + unit() * 190 : -1,
        .busy_ms = local ? total : 0,
    };
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench-report DB [ROWS] [--reuse]\n");
        return 2;
    }
    const char *path = argv[1];
    gint64 n = argc > 2 && argv[2][0] != '-' ? g_ascii_strtoll(argv[2], NULL, 10) : 10000000;
    gboolean reuse = FALSE;
    for (int i = 2; i < argc; i++)
        reuse = reuse || g_str_equal(argv[i], "--reuse");
    GError *err = NULL;

    if (!(reuse && g_file_test(path, G_FILE_TEST_EXISTS))) {
        for (const char *suffix = ""; suffix; suffix = g_str_equal(suffix, "") ? "-wal"
                                                       : g_str_equal(suffix, "-wal") ? "-shm" : NULL) {
            g_autofree char *p = g_strconcat(path, suffix, NULL);
            g_unlink(p);
        }
        usage_store *store = usage_store_open(path, USAGE_STORE_READ_WRITE, &err);
        if (!store) {
            fprintf(stderr, "%s\n", err->message);
            return 1;
        }
        usage_row *rows = g_new(usage_row, CHUNK_ROWS);
        gint64 t0 = g_get_monotonic_time();
        for (gint64 done = 0; done < n;) {
            gint64 k = MIN(CHUNK_ROWS, n - done);
            for (gint64 j = 0; j < k; j++)
                make_row(done + j, n, &rows[j]);
            if (!usage_store_insert_bulk(store, rows, (gsize)k, &err)) {
                fprintf(stderr, "%s\n", err->message);
                return 1;
            }
            done += k;
            if (done % 1000000 == 0)
                fprintf(stderr, "  %" G_GINT64_FORMAT " rows\n", done);
        }
        double secs = (g_get_monotonic_time() - t0) / 1e6;
        usage_store_stats st;
        usage_store_get_stats(store, &st);
        printf("bulk insert: %" G_GINT64_FORMAT " rows in %.1f s = %.0f rows/s\n", n, secs,
               n / secs);
        printf("  per row: raw insert %.2f us, roll-up maintenance %.2f us, commit %.2f us "
               "(%" G_GUINT64_FORMAT " transactions)\n", (double)st.insert_us / n,
               (double)st.rollup_us / n, (double)st.commit_us / n, st.batches);

        /* The service's path: append from one thread, batches committed by
         * the writer thread. Rows go one week after the bulk data. */
        const gint64 q = 200000;
        gint64 a0 = g_get_monotonic_time();
        gint64 append_us = 0;
        for (gint64 j = 0; j < q; j++) {
            usage_row r;
            make_row(j, q, &r);
            r.start_ms += (gint64)WEEKS * 7 * 86400000;
            gint64 s = g_get_monotonic_time();
            usage_store_append(store, &r);
            append_us += g_get_monotonic_time() - s;
        }
        usage_store_flush(store, NULL);
        double qsecs = (g_get_monotonic_time() - a0) / 1e6;
        usage_store_stats st2;
        usage_store_get_stats(store, &st2);
        printf("queued append: %" G_GINT64_FORMAT " rows, %.2f us per append call, all "
               "committed in %.1f s (%" G_GUINT64_FORMAT " batches, roll-ups %.2f us/row)\n",
               q, (double)append_us / q, qsecs, st2.batches - st.batches,
               (double)(st2.rollup_us - st.rollup_us) / q);
        g_free(rows);
        gint64 c0 = g_get_monotonic_time();
        usage_store_close(store, NULL);
        printf("close (checkpoint): %.1f s\n", (g_get_monotonic_time() - c0) / 1e6);
    }

    report_settings *settings = report_settings_new();
    g_time_zone_unref(settings->tz);
    settings->tz = g_time_zone_new_identifier("Europe/Berlin");
    g_free(settings->timezone);
    settings->timezone = g_strdup("Europe/Berlin");
    report_prices *prices = report_prices_load("/nonexistent/prices.json", &err);
    usage_store *store = usage_store_open(path, USAGE_STORE_READ_ONLY, &err);
    if (!prices || !store) {
        fprintf(stderr, "%s\n", err->message);
        return 1;
    }
    report_source src;
    report_source_init_store(&src, store);
    double times[5];
    gsize json_len = 0;
    for (int run = 0; run < 5; run++) {
        gint64 t0 = g_get_monotonic_time();
        usage_report *r = report_build(&src, settings, prices, "2026-W48", 12,
                                       g_get_real_time() / 1000, &err);
        if (!r) {
            fprintf(stderr, "%s\n", err->message);
            return 1;
        }
        char *json = report_to_json(r);
        times[run] = (g_get_monotonic_time() - t0) / 1e6;
        json_len = strlen(json);
        g_free(json);
        usage_report_free(r);
    }
    qsort(times, 5, sizeof times[0], cmp_double);
    printf("report 2026-W48, 12 weeks, JSON (%" G_GSIZE_FORMAT " bytes): best %.3f s, "
           "median %.3f s\n", json_len, times[0], times[2]);
    usage_store_close(store, NULL);
    report_prices_free(prices);
    report_settings_free(settings);
    return 0;
}

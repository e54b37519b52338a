/*
 * test-usage-hist.c — the latency buckets behind the report's medians and
 * P95s: edges follow the documented rule, every value lands in the bucket
 * that holds it, a percentile is never below the exact nearest-rank value
 * and at most 1 % above it, and the roll-up blob codec round-trips and
 * rejects malformed input.
 */
#include "test.h"
#include "usage-hist.h"

#include <glib.h>

static void test_edges(void)
{
    /* Below 100 ms each bucket is one millisecond. */
    for (gint64 v = 0; v < 100; v++) {
        CHECK_EQ_INT(usage_hist_bucket(v), v);
        CHECK_EQ_INT(usage_hist_bucket_lo((guint)v), v);
        CHECK_EQ_INT(usage_hist_bucket_hi((guint)v), v);
    }
    CHECK_EQ_INT(usage_hist_bucket(-5), 0);
    /* The rule edge[b+1] = edge[b] + max(1, edge[b] / 100), rebuilt here. */
    gint64 e = 100;
    for (guint b = 100; b < USAGE_HIST_N_BUCKETS; b++) {
        CHECK_EQ_INT(usage_hist_bucket_lo(b), e);
        gint64 next = e + MAX(1, e / 100);
        CHECK_EQ_INT(usage_hist_bucket_hi(b), next - 1);
        /* Width bound: the largest value overshoots the smallest by < 1 %. */
        CHECK_MSG((double)(next - 1 - e) < 0.01 * (double)e, "bucket %u too wide", b);
        e = next;
    }
    CHECK(e > USAGE_HIST_CLAMP_MS);
    CHECK_EQ_INT(usage_hist_bucket(USAGE_HIST_CLAMP_MS * 10), USAGE_HIST_N_BUCKETS - 1);
    /* Every value in a sweep maps to a bucket that contains it. */
    for (gint64 v = 0; v < 2000000; v = v * 1.003 + 1) {
        guint b = usage_hist_bucket(v);
        CHECK_MSG(usage_hist_bucket_lo(b) <= v && v <= usage_hist_bucket_hi(b),
                  "%" G_GINT64_FORMAT " not in bucket %u", v, b);
    }
}

static int cmp_i64(const void *a, const void *b)
{
    gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;
    return x < y ? -1 : x > y;
}

static void test_percentiles(void)
{
    guint64 *counts = g_new0(guint64, USAGE_HIST_N_BUCKETS);
    CHECK_EQ_INT(usage_hist_percentile(counts, 95), -1);

    /* Small exact case: 1..20 ms. P50 = rank 10 -> 10; P95 = rank 19 -> 19. */
    for (gint64 v = 1; v <= 20; v++)
        counts[usage_hist_bucket(v)]++;
    CHECK_EQ_INT(usage_hist_percentile(counts, 50), 10);
    CHECK_EQ_INT(usage_hist_percentile(counts, 95), 19);
    CHECK_EQ_INT(usage_hist_percentile(counts, 100), 20);

    /* Random log-spread values: bound against exact nearest rank. */
    GRand *rng = g_rand_new_with_seed(7);
    for (int trial = 0; trial < 50; trial++) {
        memset(counts, 0, USAGE_HIST_N_BUCKETS * sizeof *counts);
        guint n = 1 + g_rand_int_range(rng, 0, 3000);
        gint64 *v = g_new(gint64, n);
        for (guint i = 0; i < n; i++) {
            v[i] = (gint64)exp(g_rand_double_range(rng, 0.0, 13.0));
            counts[usage_hist_bucket(v[i])]++;
        }
        qsort(v, n, sizeof *v, cmp_i64);
        guint pcts[] = {50, 95, 99};
        for (guint k = 0; k < G_N_ELEMENTS(pcts); k++) {
            guint64 rank = ((guint64)n * pcts[k] + 99) / 100;
            gint64 exact = v[rank - 1];
            gint64 got = usage_hist_percentile(counts, pcts[k]);
            CHECK_MSG(got >= exact && (double)got <= (double)exact * 1.01 + 1e-9,
                      "P%u of %u values: got %" G_GINT64_FORMAT " exact %" G_GINT64_FORMAT,
                      pcts[k], n, got, exact);
            if (exact < 200)
                CHECK_EQ_INT(got, exact);
        }
        g_free(v);
    }
    g_rand_free(rng);
    g_free(counts);
}

static void test_codec(void)
{
    usage_hist_pair in[] = {{0, 1}, {5, 300}, {99, 1}, {1000, G_GUINT64_CONSTANT(1) << 40},
                            {USAGE_HIST_N_BUCKETS - 1, 2}};
    gsize len = 0;
    guint8 *blob = usage_hist_encode(in, G_N_ELEMENTS(in), &len);
    CHECK(blob != NULL && len > 0);
    usage_hist_pair *out = g_new(usage_hist_pair, USAGE_HIST_N_BUCKETS);
    guint n = 0;
    GError *err = NULL;
    CHECK(usage_hist_decode(blob, len, out, &n, "t", &err));
    CHECK_EQ_INT(n, G_N_ELEMENTS(in));
    for (guint i = 0; i < n && i < G_N_ELEMENTS(in); i++) {
        CHECK_EQ_INT(out[i].bucket, in[i].bucket);
        CHECK_EQ_INT(out[i].count, in[i].count);
    }
    /* Truncated: every proper prefix that cuts a pair must fail. */
    for (gsize cut = 1; cut < len; cut++) {
        guint m = 0;
        gboolean ok = usage_hist_decode(blob, cut, out, &m, "t", &err);
        if (!ok) {
            CHECK(err != NULL && strstr(err->message, "malformed") != NULL);
            g_clear_error(&err);
        } else {
            CHECK(m < n);
        }
    }
    /* Bucket out of range, zero count, runaway varint. */
    guint8 bad1[] = {0xff, 0x0f, 1};
    guint8 bad2[] = {3, 0};
    guint8 bad3[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};
    guint m = 0;
    CHECK(!usage_hist_decode(bad1, sizeof bad1, out, &m, "t", &err));
    g_clear_error(&err);
    CHECK(!usage_hist_decode(bad2, sizeof bad2, out, &m, "t", &err));
    g_clear_error(&err);
    CHECK(!usage_hist_decode(bad3, sizeof bad3, out, &m, "where", &err));
    CHECK(err && strstr(err->message, "where") != NULL);
    g_clear_error(&err);
    /* Empty blob = empty histogram. */
    CHECK(usage_hist_decode(NULL, 0, out, &m, "t", &err) && m == 0);
    CHECK(usage_hist_encode(in, 0, &len) == NULL && len == 0);

    /* Merge adds equal buckets and keeps order. */
    usage_hist_pair a[] = {{1, 1}, {4, 2}}, b[] = {{0, 5}, {4, 3}, {9, 1}};
    n = usage_hist_merge(a, 2, b, 3, out);
    CHECK_EQ_INT(n, 4);
    CHECK(out[0].bucket == 0 && out[1].bucket == 1 && out[2].bucket == 4 && out[2].count == 5 &&
          out[3].bucket == 9);
    g_free(out);
    g_free(blob);
}

int main(void)
{
    test_edges();
    test_percentiles();
    test_codec();
    TEST_DONE();
}

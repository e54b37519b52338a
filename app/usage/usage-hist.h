/*
 * usage-hist.h — the fixed latency buckets behind every median and P95 the
 * weekly report prints, and the compact blob the hourly roll-ups keep them
 * in.
 *
 * Why buckets: a week of a busy gateway holds millions of requests, and the
 * report must come back in well under two seconds, so it cannot sort raw
 * latencies. Each hourly roll-up row instead keeps a count per bucket; the
 * report adds the counts of a week's hours and walks them to the
 * nearest-rank position. The buckets are integer milliseconds:
 *
 *     bucket b < 100         holds exactly b ms            (width 1)
 *     then edge[b+1] = edge[b] + max(1, edge[b] / 100)      (width <= 1 %)
 *
 * up to 24 hours (1531 buckets); longer values are clamped into the last
 * bucket. The value reported for a bucket is the largest millisecond value it
 * can hold, so a percentile is never below the true nearest-rank value and at
 * most 1 % above it (exact below 200 ms, where buckets are 1 ms wide).
 * tests/scripts/usage_ref.py rebuilds the same edges from the same rule.
 */
#ifndef MOEDESK_USAGE_HIST_H
#define MOEDESK_USAGE_HIST_H

#include <glib.h>

#define USAGE_HIST_N_BUCKETS 1531
/* Latencies at or above this (24 h) share the last bucket. */
#define USAGE_HIST_CLAMP_MS G_GINT64_CONSTANT(86400000)

/* One non-empty bucket: the sparse form used in blobs and callbacks. */
typedef struct usage_hist_pair {
    guint32 bucket;
    guint64 count;
} usage_hist_pair;

/* Bucket holding `ms` (negative counts as 0, >= clamp as the last). */
guint usage_hist_bucket(gint64 ms);

/* Smallest and largest millisecond value bucket `b` holds. */
gint64 usage_hist_bucket_lo(guint b);
gint64 usage_hist_bucket_hi(guint b);

/*
 * Nearest-rank percentile over dense counts[USAGE_HIST_N_BUCKETS]: the value
 * of rank ceil(pct * total / 100) in ascending order, reported as the
 * largest value of the bucket that rank falls in. pct in 1..100. Returns -1
 * when the counts are all zero.
 */
gint64 usage_hist_percentile(const guint64 *counts, guint pct);

/*
 * Blob codec. A blob is a sequence of LEB128 varint pairs (bucket delta from
 * the previous pair's bucket + 1, count), buckets strictly ascending, counts
 * non-zero. The empty blob is the empty histogram.
 *
 * usage_hist_encode: returns a g_malloc'd blob (NULL and *len 0 when empty).
 * usage_hist_decode: decodes into pairs[USAGE_HIST_N_BUCKETS] (caller-owned),
 *   *n_pairs set; FALSE with `error` naming `what` on a malformed blob.
 */
guint8 *usage_hist_encode(const usage_hist_pair *pairs, guint n_pairs, gsize *len);
gboolean usage_hist_decode(const guint8 *blob, gsize len, usage_hist_pair *pairs,
                           guint *n_pairs, const char *what, GError **error);

/*
 * Merge two ascending pair lists into `out` (capacity USAGE_HIST_N_BUCKETS,
 * may not alias the inputs), adding counts of equal buckets. Returns the
 * number of pairs written.
 */
guint usage_hist_merge(const usage_hist_pair *a, guint n_a, const usage_hist_pair *b,
                       guint n_b, usage_hist_pair *out);

/* Add sparse pairs into dense counts[USAGE_HIST_N_BUCKETS]. */
void usage_hist_add_pairs(guint64 *counts, const usage_hist_pair *pairs, guint n_pairs);

#endif /* MOEDESK_USAGE_HIST_H */

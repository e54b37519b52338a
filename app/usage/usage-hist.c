/*
 * usage-hist.c — latency buckets, nearest-rank percentiles over them, and
 * the varint blob the hourly roll-ups store. See usage-hist.h for the bucket
 * rule and the accuracy it gives.
 */
#include "usage-hist.h"
#include "usage-store.h"

/* edges[b] = smallest value of bucket b; edges[N] = one past the last. */
static gint64 hist_edges[USAGE_HIST_N_BUCKETS + 1];

static void hist_init_edges(void)
{
    static gsize done;
    if (g_once_init_enter(&done)) {
        gint64 e = 0;
        for (guint b = 0; b <= USAGE_HIST_N_BUCKETS; b++) {
            hist_edges[b] = e;
            e += MAX(G_GINT64_CONSTANT(1), e / 100);
        }
        /* The rule is fixed; if it ever changes, the last edge must still
         * cover the clamp so every value has a bucket. */
        g_assert(hist_edges[USAGE_HIST_N_BUCKETS] > USAGE_HIST_CLAMP_MS);
        g_once_init_leave(&done, 1);
    }
}

guint usage_hist_bucket(gint64 ms)
{
    if (ms < 100)
        return ms < 0 ? 0 : (guint)ms;
    hist_init_edges();
    if (ms >= USAGE_HIST_CLAMP_MS)
        ms = USAGE_HIST_CLAMP_MS - 1;
    /* Largest b with edges[b] <= ms. */
    guint lo = 100, hi = USAGE_HIST_N_BUCKETS;
    while (hi - lo > 1) {
        guint mid = lo + (hi - lo) / 2;
        if (hist_edges[mid] <= ms)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

gint64 usage_hist_bucket_lo(guint b)
{
    hist_init_edges();
    return hist_edges[MIN(b, USAGE_HIST_N_BUCKETS - 1)];
}

gint64 usage_hist_bucket_hi(guint b)
{
    hist_init_edges();
    b = MIN(b, USAGE_HIST_N_BUCKETS - 1);
    return hist_edges[b + 1] - 1;
}

gint64 usage_hist_percentile(const guint64 *counts, guint pct)
{
    guint64 total = 0;
    for (guint b = 0; b < USAGE_HIST_N_BUCKETS; b++)
        total += counts[b];
    if (total == 0)
        return -1;
    pct = CLAMP(pct, 1u, 100u);
    /* ceil(pct * total / 100) in integers: no rounding surprises. */
    guint64 rank = (total * pct + 99) / 100;
    guint64 seen = 0;
    for (guint b = 0; b < USAGE_HIST_N_BUCKETS; b++) {
        seen += counts[b];
        if (seen >= rank)
            return usage_hist_bucket_hi(b);
    }
    return usage_hist_bucket_hi(USAGE_HIST_N_BUCKETS - 1); /* not reached */
}

static guint8 *put_varint(guint8 *p, guint64 v)
{
    while (v >= 0x80) {
        *p++ = (guint8)(v | 0x80);
        v >>= 7;
    }
    *p++ = (guint8)v;
    return p;
}

guint8 *usage_hist_encode(const usage_hist_pair *pairs, guint n_pairs, gsize *len)
{
    *len = 0;
    if (n_pairs == 0)
        return NULL;
    /* Each pair takes at most 5 (bucket delta) + 10 (count) bytes. */
    guint8 *buf = g_malloc((gsize)n_pairs * 15);
    guint8 *p = buf;
    guint32 next = 0;
    for (guint i = 0; i < n_pairs; i++) {
        p = put_varint(p, pairs[i].bucket - next);
        p = put_varint(p, pairs[i].count);
        next = pairs[i].bucket + 1;
    }
    *len = (gsize)(p - buf);
    return buf;
}

static gboolean get_varint(const guint8 **pp, const guint8 *end, guint64 *out)
{
    guint64 v = 0;
    for (guint shift = 0; shift < 64; shift += 7) {
        if (*pp >= end)
            return FALSE;
        guint8 byte = *(*pp)++;
        v |= (guint64)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *out = v;
            return TRUE;
        }
    }
    return FALSE;
}

gboolean usage_hist_decode(const guint8 *blob, gsize len, usage_hist_pair *pairs,
                           guint *n_pairs, const char *what, GError **error)
{
    const guint8 *p = blob, *end = blob + len;
    guint64 next = 0;
    guint n = 0;
    while (p < end) {
        guint64 delta, count;
        gsize at = (gsize)(p - blob);
        if (!get_varint(&p, end, &delta) || !get_varint(&p, end, &count) ||
            next + delta >= USAGE_HIST_N_BUCKETS || count == 0 ||
            n >= USAGE_HIST_N_BUCKETS) {
            g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_CORRUPT,
                        "%s: malformed latency histogram at byte %" G_GSIZE_FORMAT,
                        what, at);
            return FALSE;
        }
        pairs[n].bucket = (guint32)(next + delta);
        pairs[n].count = count;
        next = next + delta + 1;
        n++;
    }
    *n_pairs = n;
    return TRUE;
}

guint usage_hist_merge(const usage_hist_pair *a, guint n_a, const usage_hist_pair *b,
                       guint n_b, usage_hist_pair *out)
{
    guint i = 0, j = 0, n = 0;
    while (i < n_a || j < n_b) {
        if (j >= n_b || (i < n_a && a[i].bucket < b[j].bucket)) {
            out[n++] = a[i++];
        } else if (i >= n_a || b[j].bucket < a[i].bucket) {
            out[n++] = b[j++];
        } else {
            out[n].bucket = a[i].bucket;
            out[n++].count = a[i++].count + b[j++].count;
        }
    }
    return n;
}

void usage_hist_add_pairs(guint64 *counts, const usage_hist_pair *pairs, guint n_pairs)
{
    for (guint i = 0; i < n_pairs; i++)
        counts[pairs[i].bucket] += pairs[i].count;
}

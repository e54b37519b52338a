/*
 * stop.c — the end of a generation: stop strings matched across streamed
 * pieces, and the finish reason (end-of-generation token, stop string,
 * length). It lives apart from the sampler because it works on text, not
 * logits, and the server runs it after detokenizing.
 *
 * The matcher keeps one buffer:
 *
 *   buf: [ shown last call | held | new piece ]
 *        0                 start   start+held   end
 *
 * Each feed first drops the "shown last call" part (the caller has had its
 * pointer until now), appends the piece, looks for the first stop string
 * completed inside the new bytes, and otherwise holds back the longest tail
 * that is a prefix of some stop string (and any unfinished UTF-8
 * character), showing the rest. Stop strings are short, so plain byte
 * comparison (O(piece * stops * stop length)) is cheaper than building an
 * automaton.
 */
#include "util.h"

#include <stdlib.h>
#include <string.h>

#define STOP_MAX_COUNT 64
#define STOP_MAX_LEN   4096

struct moe_stop_matcher {
    char  **stops;     /* copies, NUL-terminated                          */
    size_t *lens;
    size_t  n_stops;
    size_t  max_len;   /* longest stop string                             */
    char   *buf;       /* see the picture above                           */
    size_t  buf_cap;
    size_t  start;     /* first held byte                                 */
    size_t  held;
    int32_t stopped;   /* index of the stop reported, or -1               */
};

void moe_stop_matcher_free(moe_stop_matcher *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_stops; i++)
        free(m->stops[i]);
    free(m->stops);
    free(m->lens);
    free(m->buf);
    free(m);
}

moe_status moe_stop_matcher_new(const char *const *stops, size_t n_stops,
                                moe_stop_matcher **out, moe_err *err)
{
    if (!out)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "stop matcher: out is NULL");
    *out = NULL;
    if (n_stops > 0 && !stops)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "stop matcher: stops is NULL but n_stops is %llu",
                        (unsigned long long)n_stops);
    if (n_stops > STOP_MAX_COUNT)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "stop matcher: %llu stop strings: at most %d",
                        (unsigned long long)n_stops, STOP_MAX_COUNT);
    for (size_t i = 0; i < n_stops; i++) {
        size_t len = stops[i] ? strlen(stops[i]) : 0;
        if (len == 0 || len > STOP_MAX_LEN)
            return moe_fail(err, MOE_ERR_INVALID_ARG,
                            "stop matcher: stop string %llu is %s: must be 1..%d bytes",
                            (unsigned long long)i,
                            !stops[i] ? "NULL" : len == 0 ? "empty" : "too long", STOP_MAX_LEN);
    }
    moe_stop_matcher *m = calloc(1, sizeof *m);
    if (!m)
        return moe_fail(err, MOE_ERR_NOMEM, "stop matcher: out of memory");
    m->stopped = -1;
    m->stops = calloc(n_stops ? n_stops : 1, sizeof *m->stops);
    m->lens = calloc(n_stops ? n_stops : 1, sizeof *m->lens);
    if (!m->stops || !m->lens) {
        moe_stop_matcher_free(m);
        return moe_fail(err, MOE_ERR_NOMEM, "stop matcher: out of memory");
    }
    for (size_t i = 0; i < n_stops; i++) {
        size_t len = strlen(stops[i]);
        m->stops[i] = malloc(len + 1);
        if (!m->stops[i]) {
            moe_stop_matcher_free(m);
            return moe_fail(err, MOE_ERR_NOMEM, "stop matcher: out of memory");
        }
        memcpy(m->stops[i], stops[i], len + 1);
        m->lens[i] = len;
        m->n_stops = i + 1;
        if (len > m->max_len)
            m->max_len = len;
    }
    /* Room for what can be held plus a typical piece; grows if needed. */
    m->buf_cap = m->max_len + 256;
    m->buf = malloc(m->buf_cap);
    if (!m->buf) {
        moe_stop_matcher_free(m);
        return moe_fail(err, MOE_ERR_NOMEM, "stop matcher: out of memory");
    }
    *out = m;
    return MOE_OK;
}

void moe_stop_matcher_reset(moe_stop_matcher *m)
{
    if (!m)
        return;
    m->start = 0;
    m->held = 0;
    m->stopped = -1;
}

static inline bool utf8_is_cont(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

/* Bytes at the end of buf[0..n) that begin a UTF-8 character but do not
 * finish it (0 if the text ends on a character boundary or is not UTF-8
 * there, in which case holding would not help). */
static size_t utf8_unfinished_tail(const char *buf, size_t n)
{
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char)buf[n - back];
        if (utf8_is_cont(c))
            continue;
        size_t need = c >= 0xF0 && c <= 0xF7 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (c >= 0xF8)
            need = 1;
        return need > back ? back : 0;
    }
    return 0;
}

/* The longest k such that the last k bytes of buf[0..n) are a proper
 * prefix of some stop string (k < max_len), or 0. */
static size_t stop_prefix_tail(const moe_stop_matcher *m, const char *buf, size_t n)
{
    size_t k = m->max_len > 0 ? m->max_len - 1 : 0;
    if (k > n)
        k = n;
    for (; k > 0; k--) {
        const char *tail = buf + n - k;
        for (size_t i = 0; i < m->n_stops; i++)
            if (m->lens[i] > k && memcmp(m->stops[i], tail, k) == 0)
                return k;
    }
    return 0;
}

static moe_stop_result stop_result(const char *text, size_t len, int32_t stop, size_t held)
{
    moe_stop_result r;
    r.text = text;
    r.len = len;
    r.stop_index = stop;
    r.held = held;
    return r;
}

moe_status moe_stop_matcher_feed(moe_stop_matcher *m, const char *piece, size_t len,
                                 moe_stop_result *out, moe_err *err)
{
    if (!m || !out || (len > 0 && !piece))
        return moe_fail(err, MOE_ERR_INVALID_ARG, "stop matcher: %s is NULL",
                        !m ? "matcher" : !out ? "out" : "piece");
    if (m->stopped >= 0) {
        *out = stop_result(m->buf, 0, m->stopped, 0);
        return MOE_OK;
    }
    /* Drop what the previous call showed; keep the held tail at 0. */
    if (m->start > 0 && m->held > 0)
        memmove(m->buf, m->buf + m->start, m->held);
    m->start = 0;
    if (len > SIZE_MAX - m->held)
        return moe_fail(err, MOE_ERR_RANGE, "stop matcher: piece of %llu bytes too long",
                        (unsigned long long)len);
    size_t end = m->held + len;
    if (end > m->buf_cap) {
        size_t cap = m->buf_cap * 2 > end ? m->buf_cap * 2 : end;
        char *nb = realloc(m->buf, cap);
        if (!nb)
            return moe_fail(err, MOE_ERR_NOMEM, "stop matcher: out of memory for a %llu-byte piece",
                            (unsigned long long)len);
        m->buf = nb;
        m->buf_cap = cap;
    }
    if (len > 0)
        memcpy(m->buf + m->held, piece, len);
    const char *buf = m->buf;

    /* The first stop completed in the new bytes: scan end positions in
     * order; at one position prefer the longest stop. Held bytes were
     * already scanned, so no stop ends inside them. */
    for (size_t e = m->held + 1; e <= end; e++) {
        int32_t best = -1;
        for (size_t i = 0; i < m->n_stops; i++) {
            size_t sl = m->lens[i];
            if (sl > e || buf[e - 1] != m->stops[i][sl - 1])
                continue;
            if (memcmp(buf + e - sl, m->stops[i], sl) == 0 &&
                (best < 0 || sl > m->lens[best]))
                best = (int32_t)i;
        }
        if (best >= 0) {
            m->stopped = best;
            m->held = 0;
            *out = stop_result(buf, e - m->lens[best], best, 0);
            return MOE_OK;
        }
    }

    size_t hold = stop_prefix_tail(m, buf, end);
    size_t hold_utf8 = utf8_unfinished_tail(buf, end);
    if (hold_utf8 > hold)
        hold = hold_utf8;
    /* Never split a character between shown and held text. */
    size_t split = end - hold;
    for (int k = 0; k < 3 && split > 0 && split < end && utf8_is_cont((unsigned char)buf[split]);
         k++)
        split--;
    m->start = split;
    m->held = end - split;
    *out = stop_result(buf, split, -1, m->held);
    return MOE_OK;
}

moe_stop_result moe_stop_matcher_flush(moe_stop_matcher *m)
{
    if (!m)
        return stop_result("", 0, -1, 0);
    if (m->stopped >= 0)
        return stop_result(m->buf, 0, m->stopped, 0);
    moe_stop_result r = stop_result(m->buf + m->start, m->held, -1, 0);
    /* The shown bytes stay in place until the next call. */
    m->start += m->held;
    m->held = 0;
    return r;
}

/* ---- finish reason ---------------------------------------------------- */

const char *moe_finish_reason_str(moe_finish_reason reason)
{
    switch (reason) {
    case MOE_FINISH_NONE:   return "none";
    case MOE_FINISH_EOG:    return "eog";
    case MOE_FINISH_STOP:   return "stop";
    case MOE_FINISH_LENGTH: return "length";
    }
    return "unknown";
}

const char *moe_finish_reason_openai(moe_finish_reason reason)
{
    switch (reason) {
    case MOE_FINISH_NONE:   return NULL;
    case MOE_FINISH_EOG:    return "stop";
    case MOE_FINISH_STOP:   return "stop";
    case MOE_FINISH_LENGTH: return "length";
    }
    return NULL;
}

moe_finish_reason moe_finish_check(bool token_is_eog, bool stop_matched, int64_t n_generated,
                                   int64_t max_tokens)
{
    if (token_is_eog)
        return MOE_FINISH_EOG;
    if (stop_matched)
        return MOE_FINISH_STOP;
    if (max_tokens >= 0 && n_generated >= max_tokens)
        return MOE_FINISH_LENGTH;
    return MOE_FINISH_NONE;
}

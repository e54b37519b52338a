/*
 * test-stop.c — stop strings across streamed pieces and the finish reason.
 * Cases: a stop split across pieces, several stops, a stop that is a prefix
 * of another, held bytes released when a match fails, UTF-8 never split,
 * flush/reset, and a randomized check that the shown text does not depend
 * on how the stream is cut into pieces and never contains any byte of the
 * stop that ended it.
 */
#include "moe.h"
#include "test.h"

/* Collects everything a matcher shows. */
typedef struct {
    char    text[8192];
    size_t  len;
    int32_t stop;
} shown;

static void feed(moe_stop_matcher *m, shown *acc, const char *piece, size_t len)
{
    moe_stop_result r;
    moe_err err = {{0}};
    CHECK_MSG(moe_stop_matcher_feed(m, piece, len, &r, &err) == MOE_OK, "%s", err.msg);
    CHECK(acc->len + r.len < sizeof acc->text);
    if (acc->len + r.len < sizeof acc->text) {
        memcpy(acc->text + acc->len, r.text, r.len);
        acc->len += r.len;
        acc->text[acc->len] = 0;
    }
    acc->stop = r.stop_index;
}

static void feed_s(moe_stop_matcher *m, shown *acc, const char *piece)
{
    feed(m, acc, piece, strlen(piece));
}

static void flush(moe_stop_matcher *m, shown *acc)
{
    moe_stop_result r = moe_stop_matcher_flush(m);
    memcpy(acc->text + acc->len, r.text, r.len);
    acc->len += r.len;
    acc->text[acc->len] = 0;
    acc->stop = r.stop_index;
}

static moe_stop_matcher *mk(const char *const *stops, size_t n)
{
    moe_stop_matcher *m = NULL;
    moe_err err = {{0}};
    CHECK_MSG(moe_stop_matcher_new(stops, n, &m, &err) == MOE_OK && m, "%s", err.msg);
    return m;
}

static void test_basic(void)
{
    const char *s1[] = {"<|end|>"};
    moe_stop_matcher *m = mk(s1, 1);
    shown a = {{0}, 0, -1};
    moe_stop_result r;
    moe_err err = {{0}};
    CHECK_EQ_INT(moe_stop_matcher_feed(m, "Hello<|e", 8, &r, &err), MOE_OK);
    CHECK_EQ_INT(r.len, 5);
    CHECK(memcmp(r.text, "Hello", 5) == 0);
    CHECK_EQ_INT(r.held, 3);
    CHECK_EQ_INT(r.stop_index, -1);
    CHECK_EQ_INT(moe_stop_matcher_feed(m, "nd|> more", 9, &r, &err), MOE_OK);
    CHECK_EQ_INT(r.len, 0);
    CHECK_EQ_INT(r.stop_index, 0);
    /* After the stop nothing more comes out. */
    CHECK_EQ_INT(moe_stop_matcher_feed(m, "zzz", 3, &r, &err), MOE_OK);
    CHECK(r.len == 0 && r.stop_index == 0);
    r = moe_stop_matcher_flush(m);
    CHECK(r.len == 0 && r.stop_index == 0);

    /* Held bytes come back when the match fails. */
    moe_stop_matcher_reset(m);
    feed_s(m, &a, "a<|e");
    CHECK_EQ_STR(a.text, "a");
    feed_s(m, &a, "x");
    CHECK_EQ_STR(a.text, "a<|ex");
    CHECK_EQ_INT(a.stop, -1);
    /* ...and at the end of the generation. */
    feed_s(m, &a, "b<|end");
    CHECK_EQ_STR(a.text, "a<|exb");
    flush(m, &a);
    CHECK_EQ_STR(a.text, "a<|exb<|end");
    moe_stop_matcher_free(m);

    /* A stop overlapping itself: "aaab" with "aab" shows "a". */
    const char *s2[] = {"aab"};
    m = mk(s2, 1);
    a.len = 0, a.text[0] = 0;
    feed_s(m, &a, "aa");
    CHECK_EQ_STR(a.text, "");
    feed_s(m, &a, "a");
    CHECK_EQ_STR(a.text, "a");
    feed_s(m, &a, "b");
    CHECK_EQ_STR(a.text, "a");
    CHECK_EQ_INT(a.stop, 0);
    moe_stop_matcher_free(m);
}

static void test_multiple(void)
{
    const char *s[] = {"###", "\n\nUser:"};
    moe_stop_matcher *m = mk(s, 2);
    shown a = {{0}, 0, -1};
    feed_s(m, &a, "abc\n\nUs");
    CHECK_EQ_STR(a.text, "abc");
    feed_s(m, &a, "er: hi");
    CHECK_EQ_STR(a.text, "abc");
    CHECK_EQ_INT(a.stop, 1);
    moe_stop_matcher_reset(m);
    a.len = 0, a.text[0] = 0;
    feed_s(m, &a, "x\n\n##");
    CHECK_EQ_STR(a.text, "x\n\n"); /* "\n\n" no longer leads to "\n\nUser:" */
    feed_s(m, &a, "#");
    CHECK_EQ_INT(a.stop, 0);
    CHECK_EQ_STR(a.text, "x\n\n");
    moe_stop_matcher_free(m);

    /* A stop that is a prefix of another: the shorter completes first. */
    const char *p1[] = {"abc", "ab"};
    m = mk(p1, 2);
    a.len = 0, a.text[0] = 0;
    feed_s(m, &a, "xa");
    CHECK_EQ_STR(a.text, "x");
    feed_s(m, &a, "bc");
    CHECK_EQ_INT(a.stop, 1);
    CHECK_EQ_STR(a.text, "x");
    moe_stop_matcher_free(m);
    /* Two stops ending on the same byte: the longer one wins. */
    const char *p2[] = {"b", "ab"};
    m = mk(p2, 2);
    a.len = 0, a.text[0] = 0;
    feed_s(m, &a, "xab");
    CHECK_EQ_INT(a.stop, 1);
    CHECK_EQ_STR(a.text, "x");
    moe_stop_matcher_free(m);
    /* The first to complete wins even if another started earlier. */
    const char *p3[] = {"abcd", "bc"};
    m = mk(p3, 2);
    a.len = 0, a.text[0] = 0;
    feed_s(m, &a, "xabcd");
    CHECK_EQ_INT(a.stop, 1);
    CHECK_EQ_STR(a.text, "xa");
    moe_stop_matcher_free(m);
}

static bool utf8_boundary_ok(const char *t, size_t len)
{
    /* Neither end of the shown piece cuts a character. */
    if (len == 0)
        return true;
    if (((unsigned char)t[0] & 0xC0) == 0x80)
        return false;
    size_t back = 0;
    while (back < len && back < 4 && ((unsigned char)t[len - 1 - back] & 0xC0) == 0x80)
        back++;
    if (back == len)
        return false;
    unsigned char lead = (unsigned char)t[len - 1 - back];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return need == back + 1;
}

static void test_utf8(void)
{
    /* "你好" as the stop; "说你们" must show "说" then "你们" whole. */
    const char *s[] = {"\xe4\xbd\xa0\xe5\xa5\xbd"};
    moe_stop_matcher *m = mk(s, 1);
    moe_stop_result r;
    moe_err err = {{0}};
    const char *text = "\xe8\xaf\xb4\xe4\xbd\xa0\xe4\xbb\xac"; /* 说你们 */
    CHECK_EQ_INT(moe_stop_matcher_feed(m, text, 6, &r, &err), MOE_OK);
    CHECK_EQ_INT(r.len, 3);
    CHECK_EQ_INT(r.held, 3);
    CHECK(utf8_boundary_ok(r.text, r.len));
    /* "们" does not continue the stop: "你" is released, and the first byte
     * of "们" is held only because the character is unfinished. */
    CHECK_EQ_INT(moe_stop_matcher_feed(m, text + 6, 1, &r, &err), MOE_OK);
    CHECK_EQ_INT(r.len, 3);
    CHECK(memcmp(r.text, text + 3, 3) == 0);
    CHECK_EQ_INT(r.held, 1);
    CHECK_EQ_INT(moe_stop_matcher_feed(m, text + 7, 2, &r, &err), MOE_OK);
    CHECK_EQ_INT(r.len, 3);
    CHECK(memcmp(r.text, text + 6, 3) == 0);
    /* Byte by byte into the stop and out again: nothing shows while the
     * bytes could still become "你好" (E4 BD A0 E5 A5 BD); E5 A5 BC is not. */
    const char *near = "\xe4\xbd\xa0\xe5\xa5\xbc";
    for (int i = 0; i < 5; i++) {
        CHECK_EQ_INT(moe_stop_matcher_feed(m, near + i, 1, &r, &err), MOE_OK);
        CHECK_EQ_INT(r.len, 0);
        CHECK_EQ_INT(r.held, (size_t)i + 1);
    }
    CHECK_EQ_INT(moe_stop_matcher_feed(m, near + 5, 1, &r, &err), MOE_OK);
    CHECK_EQ_INT(r.len, 6);
    CHECK(memcmp(r.text, near, 6) == 0);
    CHECK_EQ_INT(r.stop_index, -1);
    moe_stop_matcher_free(m);

    /* No stops at all: an unfinished character is still held. */
    m = mk(NULL, 0);
    CHECK_EQ_INT(moe_stop_matcher_feed(m, "ab\xe4\xbd", 4, &r, &err), MOE_OK);
    CHECK_EQ_INT(r.len, 2);
    CHECK_EQ_INT(r.held, 2);
    CHECK_EQ_INT(moe_stop_matcher_feed(m, "\xa0!", 2, &r, &err), MOE_OK);
    CHECK_EQ_INT(r.len, 4);
    CHECK(memcmp(r.text, "\xe4\xbd\xa0!", 4) == 0);
    /* Invalid UTF-8 is not held forever. */
    CHECK_EQ_INT(moe_stop_matcher_feed(m, "\xe4x", 2, &r, &err), MOE_OK);
    CHECK_EQ_INT(r.len, 2);
    moe_stop_matcher_free(m);

    /* A stop that starts inside a character (invalid on its own) makes the
     * matcher hold the whole character, not a piece of it. */
    const char *odd[] = {"\xbd\xa0Z"};
    m = mk(odd, 1);
    CHECK_EQ_INT(moe_stop_matcher_feed(m, "q\xe4\xbd\xa0", 4, &r, &err), MOE_OK);
    CHECK_EQ_INT(r.len, 1);
    CHECK_EQ_INT(r.held, 3);
    moe_stop_matcher_free(m);
}

/* Reference: the text before the stop that completes first (ties: the
 * longest), or all of it. */
static size_t ref_shown(const char *t, size_t n, const char *const *stops, size_t ns, int *which)
{
    for (size_t e = 1; e <= n; e++) {
        int best = -1;
        for (size_t i = 0; i < ns; i++) {
            size_t sl = strlen(stops[i]);
            if (sl <= e && memcmp(t + e - sl, stops[i], sl) == 0 &&
                (best < 0 || sl > strlen(stops[best])))
                best = (int)i;
        }
        if (best >= 0) {
            *which = best;
            return e - strlen(stops[best]);
        }
    }
    *which = -1;
    return n;
}

static uint64_t rs = 0x2545F4914F6CDD1Dull;
static unsigned rnd(unsigned n)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (unsigned)(rs % n);
}

static void test_random_splits(void)
{
    const char *stops[] = {"aba", "bb", "abc\xc3\xa9", "cab"};
    const char *alphabet[] = {"a", "b", "c", "\xc3\xa9", "x"};
    char text[400];
    for (int round = 0; round < 400; round++) {
        size_t ns = 1 + rnd(4), n = 0;
        while (n < 60) {
            const char *a = alphabet[rnd(5)];
            memcpy(text + n, a, strlen(a));
            n += strlen(a);
        }
        int which;
        size_t want = ref_shown(text, n, stops, ns, &which);
        moe_stop_matcher *m = mk(stops, ns);
        shown acc = {{0}, 0, -1};
        size_t at = 0;
        while (at < n) {
            size_t len = round % 4 == 0 ? 1 : 1 + rnd(7);
            if (len > n - at)
                len = n - at;
            size_t before = acc.len;
            feed(m, &acc, text + at, len);
            CHECK(utf8_boundary_ok(acc.text + before, acc.len - before));
            at += len;
            if (acc.stop >= 0)
                break;
        }
        if (acc.stop < 0)
            flush(m, &acc);
        CHECK_EQ_INT(acc.stop, which);
        CHECK_MSG(acc.len == want && memcmp(acc.text, text, want) == 0,
                  "round %d: shown %zu bytes, want %zu", round, acc.len, want);
        moe_stop_matcher_free(m);
    }
}

static void test_errors_and_growth(void)
{
    moe_stop_matcher *m = (moe_stop_matcher *)1;
    moe_err err = {{0}};
    const char *bad1[] = {""};
    CHECK_EQ_INT(moe_stop_matcher_new(bad1, 1, &m, &err), MOE_ERR_INVALID_ARG);
    CHECK(m == NULL && strstr(err.msg, "empty"));
    const char *bad2[] = {"ok", NULL};
    CHECK_EQ_INT(moe_stop_matcher_new(bad2, 2, &m, &err), MOE_ERR_INVALID_ARG);
    CHECK_EQ_INT(moe_stop_matcher_new(NULL, 3, &m, &err), MOE_ERR_INVALID_ARG);
    const char *many[65];
    for (int i = 0; i < 65; i++)
        many[i] = "x";
    CHECK_EQ_INT(moe_stop_matcher_new(many, 65, &m, &err), MOE_ERR_INVALID_ARG);
    moe_stop_matcher_free(NULL);

    /* A piece far longer than the initial buffer. */
    const char *s[] = {"STOP"};
    m = mk(s, 1);
    static char big[20000];
    memset(big, 'q', sizeof big);
    memcpy(big + 15000, "STOP", 4);
    moe_stop_result r;
    CHECK_EQ_INT(moe_stop_matcher_feed(m, big, sizeof big, &r, &err), MOE_OK);
    CHECK_EQ_INT(r.stop_index, 0);
    CHECK_EQ_INT(r.len, 15000);
    CHECK_EQ_INT(moe_stop_matcher_feed(m, NULL, 3, &r, &err), MOE_ERR_INVALID_ARG);
    moe_stop_matcher_free(m);
}

static void test_finish(void)
{
    CHECK_EQ_INT(moe_finish_check(true, true, 100, 100), MOE_FINISH_EOG);
    CHECK_EQ_INT(moe_finish_check(false, true, 100, 100), MOE_FINISH_STOP);
    CHECK_EQ_INT(moe_finish_check(false, false, 100, 100), MOE_FINISH_LENGTH);
    CHECK_EQ_INT(moe_finish_check(false, false, 99, 100), MOE_FINISH_NONE);
    CHECK_EQ_INT(moe_finish_check(false, false, 1000000, -1), MOE_FINISH_NONE);
    CHECK_EQ_INT(moe_finish_check(false, false, 0, 0), MOE_FINISH_LENGTH);
    CHECK_EQ_STR(moe_finish_reason_str(MOE_FINISH_EOG), "eog");
    CHECK_EQ_STR(moe_finish_reason_str(MOE_FINISH_LENGTH), "length");
    CHECK_EQ_STR(moe_finish_reason_openai(MOE_FINISH_EOG), "stop");
    CHECK_EQ_STR(moe_finish_reason_openai(MOE_FINISH_STOP), "stop");
    CHECK_EQ_STR(moe_finish_reason_openai(MOE_FINISH_LENGTH), "length");
    CHECK(moe_finish_reason_openai(MOE_FINISH_NONE) == NULL);
}

int main(void)
{
    test_basic();
    test_multiple();
    test_utf8();
    test_random_splits();
    test_errors_and_growth();
    test_finish();
    TEST_DONE();
}

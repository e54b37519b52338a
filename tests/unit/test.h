/*
 * test.h — the tiny harness every C unit test uses: CHECK-style macros that
 * report file:line and keep going, so one run shows every failure, and a
 * main() epilogue that turns the failure count into the exit status meson
 * reads. Asserts stay on in every build type (no NDEBUG dependence).
 */
#ifndef MOE_TEST_H
#define MOE_TEST_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failures_;
static int test_checks_;

#define CHECK(cond)                                                              \
    do {                                                                         \
        test_checks_++;                                                          \
        if (!(cond)) {                                                           \
            test_failures_++;                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                        \
    } while (0)

#define CHECK_MSG(cond, ...)                                                     \
    do {                                                                         \
        test_checks_++;                                                          \
        if (!(cond)) {                                                           \
            test_failures_++;                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                       \
    do {                                                                         \
        long long a_ = (long long)(a), b_ = (long long)(b);                      \
        CHECK_MSG(a_ == b_, "%lld != %lld", a_, b_);                             \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                       \
    do {                                                                         \
        const char *a_ = (a), *b_ = (b);                                         \
        CHECK_MSG(a_ && b_ && strcmp(a_, b_) == 0, "\"%s\" != \"%s\"",           \
                  a_ ? a_ : "(null)", b_ ? b_ : "(null)");                       \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                    \
    do {                                                                         \
        double a_ = (double)(a), b_ = (double)(b);                               \
        CHECK_MSG(fabs(a_ - b_) <= (tol), "%.9g vs %.9g (tol %g)", a_, b_, (double)(tol)); \
    } while (0)

/* Call at the end of main(). */
#define TEST_DONE()                                                              \
    do {                                                                         \
        fprintf(stderr, "%d checks, %d failed\n", test_checks_, test_failures_); \
        return test_failures_ ? 1 : 0;                                           \
    } while (0)

/* Path of a source-tree data file: tests get MOE_SOURCE_ROOT from meson. */
static inline const char *test_src_path(char *buf, size_t cap, const char *rel)
{
    const char *root = getenv("MOE_SOURCE_ROOT");
    snprintf(buf, cap, "%s/%s", root ? root : ".", rel);
    return buf;
}

#endif /* MOE_TEST_H */

/*
 * util.h — small internal helpers shared by every engine file: writing an
 * error message, overflow-checked size arithmetic, and the MOE_ALWAYS /
 * MOE_NEVER markers for branches that "cannot happen" (SQLite's idea: in
 * debug builds they assert, in release they still take the safe path).
 * Not part of the public API.
 */
#ifndef MOE_UTIL_H
#define MOE_UTIL_H

#include "moe.h"

#include <assert.h>
#include <stdarg.h>
#include <stdint.h>

#if defined(__MINGW32__)
/* mingw with __USE_MINGW_ANSI_STDIO formats like glibc (%zu, %lld). */
#define MOE_PRINTF(fmt_idx, arg_idx) __attribute__((format(gnu_printf, fmt_idx, arg_idx)))
#define MOE_LIKELY(x)   __builtin_expect(!!(x), 1)
#define MOE_UNLIKELY(x) __builtin_expect(!!(x), 0)
#elif defined(__GNUC__) || defined(__clang__)
#define MOE_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#define MOE_LIKELY(x)   __builtin_expect(!!(x), 1)
#define MOE_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define MOE_PRINTF(fmt_idx, arg_idx)
#define MOE_LIKELY(x)   (x)
#define MOE_UNLIKELY(x) (x)
#endif

#ifdef NDEBUG
#define MOE_ALWAYS(x) (x)
#define MOE_NEVER(x)  (x)
#else
#define MOE_ALWAYS(x) ((x) ? 1 : (assert(0 && #x), 0))
#define MOE_NEVER(x)  ((x) ? (assert(0 && #x), 1) : 0)
#endif

/* Formats a message into err->msg (if err is not NULL) and returns status,
 * so a failing path reads `return moe_fail(err, MOE_ERR_FORMAT, "...", ...);` */
moe_status moe_fail(moe_err *err, moe_status status, const char *fmt, ...) MOE_PRINTF(3, 4);

/* a + b and a * b into *out; false on overflow (out untouched). */
static inline int moe_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b > UINT64_MAX - a)
        return 0;
    *out = a + b;
    return 1;
}

static inline int moe_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

#endif /* MOE_UTIL_H */

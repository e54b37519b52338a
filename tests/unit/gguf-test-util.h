/*
 * gguf-test-util.h — helpers shared by the GGUF unit tests: a scratch
 * directory under the build tree (removed at the end), whole-file reads,
 * and a comparison of two open files' key/values through the public API
 * only, so the same checks serve round trips, copies and split sets.
 */
#ifndef MOE_GGUF_TEST_UTIL_H
#define MOE_GGUF_TEST_UTIL_H

#include "moe.h"
#include "test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <direct.h>
#include <process.h>
#define test_mkdir(p) _mkdir(p)
#define test_rmdir(p) _rmdir(p)
#define test_getpid() _getpid()
#else
#include <sys/stat.h>
#include <unistd.h>
#define test_mkdir(p) mkdir((p), 0755)
#define test_rmdir(p) rmdir(p)
#define test_getpid() getpid()
#endif

/* The scratch directory and the files made in it, removed by
 * test_tmp_cleanup(). Paths are at most 1023 bytes. */
static char test_tmp_dir_[1024];
static char test_tmp_files_[64][1024];
static int  test_tmp_n_;

static inline const char *test_tmp_init(const char *tag)
{
    const char *root = getenv("MOE_BUILD_ROOT");
    snprintf(test_tmp_dir_, sizeof test_tmp_dir_, "%s/%s-tmp-%d", root ? root : ".", tag,
             (int)test_getpid());
    if (test_mkdir(test_tmp_dir_) != 0)
        fprintf(stderr, "cannot create %s\n", test_tmp_dir_);
    return test_tmp_dir_;
}

/* Path of scratch file `name`, remembered for cleanup. */
static inline const char *test_tmp_path(const char *name)
{
    for (int i = 0; i < test_tmp_n_; i++) {
        const char *slash = strrchr(test_tmp_files_[i], '/');
        if (slash && strcmp(slash + 1, name) == 0)
            return test_tmp_files_[i];
    }
    if (test_tmp_n_ == 64)
        return NULL;
    char *p = test_tmp_files_[test_tmp_n_++];
    if (snprintf(p, 1024, "%s/%s", test_tmp_dir_, name) >= 1024)
        fprintf(stderr, "scratch path too long: %s\n", name);
    return p;
}

static inline void test_tmp_cleanup(void)
{
    for (int i = 0; i < test_tmp_n_; i++) {
        char tmp[1100];
        remove(test_tmp_files_[i]);
        if (snprintf(tmp, sizeof tmp, "%s.tmp", test_tmp_files_[i]) < (int)sizeof tmp)
            remove(tmp);
    }
    test_rmdir(test_tmp_dir_);
}

/* Whole file into a malloc'd buffer; NULL if unreadable. */
static inline uint8_t *test_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *grown = realloc(buf, cap);
            if (!grown)
                break;
            buf = grown;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        if (got == 0)
            break;
        n += got;
    }
    fclose(f);
    *size = n;
    return buf;
}

static inline int test_file_exists(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

/* True if key/value ia of a equals ib of b: same key, type and value. */
static inline int test_kv_equal(const moe_gguf *a, int64_t ia, const moe_gguf *b, int64_t ib)
{
    moe_gguf_type t = moe_gguf_kv_type(a, ia);
    if (strcmp(moe_gguf_key(a, ia), moe_gguf_key(b, ib)) != 0 || t != moe_gguf_kv_type(b, ib))
        return 0;
    uint64_t ua = 0, ub = 0;
    int64_t sa = 0, sb = 0;
    double fa = 0, fb = 0;
    bool ba = false, bb = false;
    moe_str stra = { 0 }, strb = { 0 };
    switch (t) {
    case MOE_GGUF_UINT8: case MOE_GGUF_UINT16: case MOE_GGUF_UINT32: case MOE_GGUF_UINT64:
        return moe_gguf_get_u64(a, ia, &ua) == MOE_OK && moe_gguf_get_u64(b, ib, &ub) == MOE_OK &&
               ua == ub;
    case MOE_GGUF_INT8: case MOE_GGUF_INT16: case MOE_GGUF_INT32: case MOE_GGUF_INT64:
        return moe_gguf_get_i64(a, ia, &sa) == MOE_OK && moe_gguf_get_i64(b, ib, &sb) == MOE_OK &&
               sa == sb;
    case MOE_GGUF_FLOAT32: case MOE_GGUF_FLOAT64:
        return moe_gguf_get_f64(a, ia, &fa) == MOE_OK && moe_gguf_get_f64(b, ib, &fb) == MOE_OK &&
               memcmp(&fa, &fb, sizeof fa) == 0;
    case MOE_GGUF_BOOL:
        return moe_gguf_get_bool(a, ia, &ba) == MOE_OK && moe_gguf_get_bool(b, ib, &bb) == MOE_OK &&
               ba == bb;
    case MOE_GGUF_STRING:
        return moe_gguf_get_str(a, ia, &stra) == MOE_OK && moe_gguf_get_str(b, ib, &strb) == MOE_OK &&
               stra.len == strb.len && memcmp(stra.ptr, strb.ptr, (size_t)stra.len) == 0;
    case MOE_GGUF_ARRAY:
        break;
    }
    moe_gguf_type et = moe_gguf_arr_type(a, ia);
    uint64_t n = moe_gguf_arr_len(a, ia);
    if (et != moe_gguf_arr_type(b, ib) || n != moe_gguf_arr_len(b, ib))
        return 0;
    if (et != MOE_GGUF_STRING) {
        static const size_t sizes[] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
        return memcmp(moe_gguf_arr_data(a, ia), moe_gguf_arr_data(b, ib),
                      (size_t)n * sizes[et]) == 0;
    }
    for (uint64_t j = 0; j < n; j++) {
        moe_str x = moe_gguf_arr_str(a, ia, j), y = moe_gguf_arr_str(b, ib, j);
        if (x.len != y.len || memcmp(x.ptr, y.ptr, (size_t)x.len) != 0)
            return 0;
    }
    return 1;
}

/* Every key/value of `a` appears in `b` with the same value, in the same
 * order, and `b` has no others. */
static inline void test_check_same_kvs(const moe_gguf *a, const moe_gguf *b)
{
    CHECK_EQ_INT(moe_gguf_n_kv(a), moe_gguf_n_kv(b));
    for (int64_t i = 0; i < moe_gguf_n_kv(a) && i < moe_gguf_n_kv(b); i++)
        CHECK_MSG(test_kv_equal(a, i, b, i), "key '%s' differs", moe_gguf_key(a, i));
}

#endif /* MOE_GGUF_TEST_UTIL_H */

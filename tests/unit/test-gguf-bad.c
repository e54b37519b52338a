/*
 * test-gguf-bad.c — the hand-made bad GGUF files of tests/data/bad-gguf
 * (written by tests/scripts/make-bad-gguf.py) are each rejected with the
 * status and message listed in bad-gguf/EXPECTED, and the message names the
 * file; the same bytes opened from an exact-size memory buffer are rejected
 * too (under ASan this proves no read past the end). The small valid files
 * of tests/data/good-gguf open from disk and from memory, and every
 * accessor works on them.
 */
#include "gguf-internal.h"
#include "gguf-test-util.h"
#include "test.h"

static moe_status status_from_name(const char *name)
{
    if (strcmp(name, "FORMAT") == 0)
        return MOE_ERR_FORMAT;
    if (strcmp(name, "UNSUPPORTED") == 0)
        return MOE_ERR_UNSUPPORTED;
    if (strcmp(name, "IO") == 0)
        return MOE_ERR_IO;
    return MOE_OK; /* never expected: makes the case fail */
}

static void check_bad_file(const char *dir, const char *name, const char *status,
                           const char *substr)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    moe_err err = { { 0 } };
    moe_gguf *g = NULL;
    moe_status st = moe_gguf_open(path, &g, &err);
    printf("%-34s %s\n", name, err.msg);
    CHECK_MSG(st == status_from_name(status), "%s: want %s, got %s (%s)", name, status,
              moe_status_str(st), err.msg);
    /* Look past the leading "path: " so file names cannot match. */
    const char *what = strstr(err.msg, ": ");
    CHECK_MSG(what && strstr(what, substr) != NULL, "%s: '%s' not in '%s'", name, substr,
              err.msg);
    CHECK_MSG(strstr(err.msg, name) != NULL, "%s: message does not name the file: %s", name,
              err.msg);
    CHECK(g == NULL);
    moe_gguf_free(g);

    size_t size = 0;
    uint8_t *bytes = test_read_file(path, &size);
    CHECK_MSG(bytes != NULL || size == 0, "cannot read %s", path);
    uint8_t *exact = malloc(size ? size : 1);
    if (exact && size)
        memcpy(exact, bytes, size);
    st = moe_gguf_open_memory(exact, size, name, &g, &err);
    CHECK_MSG(st != MOE_OK && g == NULL, "%s opened from memory", name);
    moe_gguf_free(g);
    free(exact);
    free(bytes);
}

/* Runs every case of EXPECTED; returns how many. */
static int check_bad_dir(const char *dir)
{
    char path[2048], line[1024];
    snprintf(path, sizeof path, "%s/EXPECTED", dir);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    int n = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *status = strchr(line, '\t');
        char *substr = status ? strchr(status + 1, '\t') : NULL;
        CHECK_MSG(substr != NULL, "bad EXPECTED line: %s", line);
        if (!substr)
            continue;
        *status++ = '\0';
        *substr++ = '\0';
        check_bad_file(dir, line, status, substr);
        n++;
    }
    if (f)
        fclose(f);
    return n;
}

/* Every accessor on every key and tensor, as a consumer would call them. */
static void touch_everything(const moe_gguf *g)
{
    for (int64_t i = 0; i < moe_gguf_n_kv(g); i++) {
        const char *key = moe_gguf_key(g, i);
        CHECK(key && moe_gguf_find_key(g, key) == i);
        uint64_t u;
        int64_t s;
        double d;
        bool b;
        moe_str str;
        int ok = (moe_gguf_get_u64(g, i, &u) == MOE_OK) + (moe_gguf_get_i64(g, i, &s) == MOE_OK) +
                 (moe_gguf_get_f64(g, i, &d) == MOE_OK) + (moe_gguf_get_bool(g, i, &b) == MOE_OK) +
                 (moe_gguf_get_str(g, i, &str) == MOE_OK);
        moe_gguf_type t = moe_gguf_kv_type(g, i);
        CHECK_MSG(ok > 0 || t == MOE_GGUF_ARRAY,
                  "key '%s' readable by no getter", key);
        for (uint64_t j = 0; t == MOE_GGUF_ARRAY && j < moe_gguf_arr_len(g, i); j++)
            if (moe_gguf_arr_type(g, i) == MOE_GGUF_STRING)
                CHECK(moe_gguf_arr_str(g, i, j).ptr != NULL);
    }
    for (int64_t i = 0; i < moe_gguf_n_tensors(g); i++) {
        const moe_gguf_tensor *t = moe_gguf_tensor_at(g, i);
        CHECK(moe_gguf_find_tensor(g, t->name) == t);
        CHECK(t->size_bytes > 0 && t->data != NULL);
    }
}

static void check_good_file(const char *dir, const char *name, int64_t n_kv, int64_t n_tensors)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    moe_err err = { { 0 } };
    moe_gguf *g = NULL;
    CHECK_MSG(moe_gguf_open(path, &g, &err) == MOE_OK, "%s", err.msg);
    if (g) {
        CHECK_EQ_INT(moe_gguf_n_kv(g), n_kv);
        CHECK_EQ_INT(moe_gguf_n_tensors(g), n_tensors);
        touch_everything(g);
    }
    moe_gguf_free(g);
    size_t size = 0;
    uint8_t *bytes = test_read_file(path, &size);
    g = NULL;
    CHECK_MSG(moe_gguf_open_memory(bytes, size, name, &g, &err) == MOE_OK, "%s", err.msg);
    if (g)
        touch_everything(g);
    moe_gguf_free(g);
    free(bytes);
}

int main(void)
{
    char bad[1024], good[1024];
    test_src_path(bad, sizeof bad, "tests/data/bad-gguf");
    test_src_path(good, sizeof good, "tests/data/good-gguf");
    int n = check_bad_dir(bad);
    CHECK_MSG(n >= 40, "only %d bad cases ran", n);
    check_good_file(good, "all-types.gguf", 17, 4);
    check_good_file(good, "one-tensor.gguf", 1, 1);
    check_good_file(good, "no-tensors.gguf", 2, 0);
    check_good_file(good, "empty-header.gguf", 0, 0);
    moe_gguf *g = NULL;
    moe_err err = { { 0 } };
    CHECK(moe_gguf_open_memory(NULL, 0, "null", &g, &err) == MOE_ERR_FORMAT && g == NULL);
    CHECK(moe_gguf_open(NULL, &g, &err) == MOE_ERR_INVALID_ARG);
    TEST_DONE();
}

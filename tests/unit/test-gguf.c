/*
 * test-gguf.c — the GGUF reader and writer against each other and against
 * real files: every key/value type (scalars, arrays of every element type,
 * empty strings and arrays) and tensors of several types, shapes and
 * alignments survive a write and a reopen byte for byte; copy_kv copies
 * real vocabularies exactly; streaming output equals write_file output;
 * split sets open as one model; truncated images and bad writer calls are
 * rejected. Scratch files live under MOE_BUILD_ROOT and are removed.
 */
#include "gguf-internal.h"
#include "gguf-test-util.h"
#include "test.h"

#ifndef _WIN32
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#endif

/* ---- a writer holding one key of every type and seven tensors ---- */

static const uint8_t  arr_u8[]  = { 1, 2, 255 };
static const int8_t   arr_i8[]  = { -128, 0, 127 };
static const uint16_t arr_u16[] = { 0, 65535 };
static const int16_t  arr_i16[] = { -32768, 1, 32767 };
static const uint32_t arr_u32[] = { 7, 4000000000u };
static const int32_t  arr_i32[] = { INT32_MIN, -1, INT32_MAX };
static const float    arr_f32[] = { 1.5f, -0.0f, 3.25e-20f };
static const uint8_t  arr_bool[] = { 1, 0, 1, 1 };
static const uint64_t arr_u64[] = { UINT64_MAX, 0 };
static const int64_t  arr_i64[] = { INT64_MIN, 42 };
static const double   arr_f64[] = { 1e300, -2.5 };

typedef struct test_arr {
    const char   *key;
    moe_gguf_type type;
    const void   *data;
    uint64_t      n;
    size_t        elem_size;
} test_arr;

static const test_arr test_arrays[] = {
    { "a.u8", MOE_GGUF_UINT8, arr_u8, 3, 1 },       { "a.i8", MOE_GGUF_INT8, arr_i8, 3, 1 },
    { "a.u16", MOE_GGUF_UINT16, arr_u16, 2, 2 },    { "a.i16", MOE_GGUF_INT16, arr_i16, 3, 2 },
    { "a.u32", MOE_GGUF_UINT32, arr_u32, 2, 4 },    { "a.i32", MOE_GGUF_INT32, arr_i32, 3, 4 },
    { "a.f32", MOE_GGUF_FLOAT32, arr_f32, 3, 4 },   { "a.bool", MOE_GGUF_BOOL, arr_bool, 4, 1 },
    { "a.u64", MOE_GGUF_UINT64, arr_u64, 2, 8 },    { "a.i64", MOE_GGUF_INT64, arr_i64, 2, 8 },
    { "a.f64", MOE_GGUF_FLOAT64, arr_f64, 2, 8 },   { "a.empty", MOE_GGUF_UINT32, arr_u32, 0, 4 },
};

static const moe_str arr_str[] = { { "alpha", 5 }, { "", 0 }, { "\xc3\xbc" "nic" "\0" "de", 8 } };

typedef struct test_tensor {
    const char *name;
    moe_type    type;
    uint32_t    n_dims;
    int64_t     ne[4];
    size_t      size_bytes;
} test_tensor;

static const test_tensor test_tensors[] = {
    { "t.f32", MOE_TYPE_F32, 2, { 5, 3, 1, 1 }, 60 },
    { "t.f16", MOE_TYPE_F16, 1, { 7, 1, 1, 1 }, 14 },
    { "t.q8_0", MOE_TYPE_Q8_0, 2, { 64, 2, 1, 1 }, 136 },
    { "t.q4_0", MOE_TYPE_Q4_0, 3, { 32, 1, 2, 1 }, 36 },
    { "t.q4_k", MOE_TYPE_Q4_K, 2, { 256, 2, 1, 1 }, 288 },
    { "t.q6_k", MOE_TYPE_Q6_K, 1, { 256, 1, 1, 1 }, 210 },
    { "t.bf16", MOE_TYPE_BF16, 4, { 3, 2, 2, 2 }, 48 },
};
#define N_TEST_TENSORS ((int64_t)(sizeof test_tensors / sizeof test_tensors[0]))

/* Deterministic, tensor-specific contents. */
static uint8_t *tensor_bytes(int64_t i)
{
    uint8_t *p = malloc(test_tensors[i].size_bytes);
    for (size_t j = 0; p && j < test_tensors[i].size_bytes; j++)
        p[j] = (uint8_t)(j * 31 + (size_t)i * 7 + 1);
    return p;
}

static void set_all_kvs(moe_gguf_writer *w, uint32_t alignment)
{
    CHECK(moe_gguf_writer_set_u32(w, "general.alignment", alignment) == MOE_OK);
    CHECK(moe_gguf_writer_set_u8(w, "s.u8", 200) == MOE_OK);
    CHECK(moe_gguf_writer_set_i8(w, "s.i8", -100) == MOE_OK);
    CHECK(moe_gguf_writer_set_u16(w, "s.u16", 60000) == MOE_OK);
    CHECK(moe_gguf_writer_set_i16(w, "s.i16", -30000) == MOE_OK);
    CHECK(moe_gguf_writer_set_u32(w, "s.u32", 4000000000u) == MOE_OK);
    CHECK(moe_gguf_writer_set_i32(w, "s.i32", -2000000000) == MOE_OK);
    CHECK(moe_gguf_writer_set_f32(w, "s.f32", 3.5f) == MOE_OK);
    CHECK(moe_gguf_writer_set_u64(w, "s.u64", ((uint64_t)1 << 63) + 5) == MOE_OK);
    CHECK(moe_gguf_writer_set_i64(w, "s.i64", INT64_MIN + 1) == MOE_OK);
    CHECK(moe_gguf_writer_set_f64(w, "s.f64", -1.25e300) == MOE_OK);
    CHECK(moe_gguf_writer_set_bool(w, "s.bool", true) == MOE_OK);
    CHECK(moe_gguf_writer_set_str(w, "s.str", "hello, gguf") == MOE_OK);
    CHECK(moe_gguf_writer_set_str(w, "s.empty", "") == MOE_OK);
    for (size_t i = 0; i < sizeof test_arrays / sizeof test_arrays[0]; i++)
        CHECK(moe_gguf_writer_set_arr(w, test_arrays[i].key, test_arrays[i].type,
                                      test_arrays[i].data, test_arrays[i].n) == MOE_OK);
    CHECK(moe_gguf_writer_set_arr_str(w, "a.str", arr_str, 3) == MOE_OK);
    CHECK(moe_gguf_writer_set_arr_str(w, "a.str_empty", NULL, 0) == MOE_OK);
}

/* A writer with every kv and every tensor; `data` holds N_TEST_TENSORS
 * buffers, or is NULL to declare the tensors for streaming. */
static moe_gguf_writer *make_writer(uint32_t alignment, uint8_t **data)
{
    moe_gguf_writer *w = moe_gguf_writer_new();
    set_all_kvs(w, alignment);
    for (int64_t i = 0; i < N_TEST_TENSORS; i++) {
        const test_tensor *t = &test_tensors[i];
        CHECK(moe_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne,
                                         data ? data[i] : NULL) == MOE_OK);
    }
    return w;
}

/* ---- checks on the reopened file ---- */

static void check_scalars(const moe_gguf *g)
{
    uint64_t u;
    int64_t s;
    double f;
    bool b;
    moe_str str;
    CHECK(moe_gguf_get_u64(g, moe_gguf_find_key(g, "s.u8"), &u) == MOE_OK && u == 200);
    CHECK(moe_gguf_get_i64(g, moe_gguf_find_key(g, "s.i8"), &s) == MOE_OK && s == -100);
    CHECK(moe_gguf_get_u64(g, moe_gguf_find_key(g, "s.u16"), &u) == MOE_OK && u == 60000);
    CHECK(moe_gguf_get_i64(g, moe_gguf_find_key(g, "s.i16"), &s) == MOE_OK && s == -30000);
    CHECK(moe_gguf_get_u64(g, moe_gguf_find_key(g, "s.u32"), &u) == MOE_OK && u == 4000000000u);
    CHECK(moe_gguf_get_i64(g, moe_gguf_find_key(g, "s.i32"), &s) == MOE_OK && s == -2000000000);
    CHECK(moe_gguf_get_f64(g, moe_gguf_find_key(g, "s.f32"), &f) == MOE_OK && f == 3.5);
    CHECK(moe_gguf_get_u64(g, moe_gguf_find_key(g, "s.u64"), &u) == MOE_OK &&
          u == ((uint64_t)1 << 63) + 5);
    CHECK(moe_gguf_get_i64(g, moe_gguf_find_key(g, "s.i64"), &s) == MOE_OK && s == INT64_MIN + 1);
    CHECK(moe_gguf_get_f64(g, moe_gguf_find_key(g, "s.f64"), &f) == MOE_OK && f == -1.25e300);
    CHECK(moe_gguf_get_bool(g, moe_gguf_find_key(g, "s.bool"), &b) == MOE_OK && b);
    CHECK(moe_gguf_get_str(g, moe_gguf_find_key(g, "s.str"), &str) == MOE_OK && str.len == 11 &&
          memcmp(str.ptr, "hello, gguf", 11) == 0);
    CHECK(moe_gguf_get_str(g, moe_gguf_find_key(g, "s.empty"), &str) == MOE_OK && str.len == 0);
    CHECK_EQ_INT(moe_gguf_kv_type(g, moe_gguf_find_key(g, "s.i16")), MOE_GGUF_INT16);
    CHECK_EQ_INT(moe_gguf_kv_type(g, moe_gguf_find_key(g, "s.bool")), MOE_GGUF_BOOL);
}

/* Conversions that must be refused, and the by-key helpers. */
static void check_conversions(const moe_gguf *g)
{
    uint64_t u;
    int64_t s;
    double f;
    bool b;
    moe_str str;
    CHECK(moe_gguf_get_u64(g, moe_gguf_find_key(g, "s.i8"), &u) == MOE_ERR_FORMAT);
    CHECK(moe_gguf_get_i64(g, moe_gguf_find_key(g, "s.u64"), &s) == MOE_ERR_FORMAT);
    CHECK(moe_gguf_get_i64(g, moe_gguf_find_key(g, "s.u32"), &s) == MOE_OK && s == 4000000000);
    CHECK(moe_gguf_get_f64(g, moe_gguf_find_key(g, "s.u8"), &f) == MOE_OK && f == 200.0);
    CHECK(moe_gguf_get_f64(g, moe_gguf_find_key(g, "s.u64"), &f) == MOE_ERR_FORMAT);
    CHECK(moe_gguf_get_u64(g, moe_gguf_find_key(g, "s.f32"), &u) == MOE_ERR_FORMAT);
    CHECK(moe_gguf_get_bool(g, moe_gguf_find_key(g, "s.u8"), &b) == MOE_ERR_FORMAT);
    CHECK(moe_gguf_get_str(g, moe_gguf_find_key(g, "s.u8"), &str) == MOE_ERR_FORMAT);
    CHECK(moe_gguf_get_u64(g, -1, &u) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_get_u64(g, moe_gguf_n_kv(g), &u) == MOE_ERR_INVALID_ARG);
    CHECK_EQ_INT(moe_gguf_u64_or(g, "s.u16", 9), 60000);
    CHECK_EQ_INT(moe_gguf_u64_or(g, "missing", 9), 9);
    CHECK_EQ_INT(moe_gguf_u64_or(g, "s.str", 9), 9);
    CHECK(moe_gguf_f64_or(g, "s.f32", 0) == 3.5);
    CHECK(moe_gguf_bool_or(g, "s.bool", false) == true);
    CHECK(moe_gguf_bool_or(g, "s.u8", false) == false);
    CHECK_EQ_STR(moe_gguf_str_or(g, "s.str", NULL), "hello, gguf");
    CHECK_EQ_STR(moe_gguf_str_or(g, "s.empty", NULL), "");
    CHECK(moe_gguf_str_or(g, "s.u8", NULL) == NULL);
    CHECK(moe_gguf_find_key(g, "missing") == -1);
    CHECK(moe_gguf_key(g, -1) == NULL && moe_gguf_key(g, moe_gguf_n_kv(g)) == NULL);
}

static void check_arrays(const moe_gguf *g)
{
    for (size_t i = 0; i < sizeof test_arrays / sizeof test_arrays[0]; i++) {
        const test_arr *a = &test_arrays[i];
        int64_t k = moe_gguf_find_key(g, a->key);
        CHECK_MSG(k >= 0, "%s missing", a->key);
        CHECK_EQ_INT(moe_gguf_kv_type(g, k), MOE_GGUF_ARRAY);
        CHECK_EQ_INT(moe_gguf_arr_type(g, k), a->type);
        CHECK_EQ_INT(moe_gguf_arr_len(g, k), a->n);
        const void *d = moe_gguf_arr_data(g, k);
        CHECK_MSG(d && memcmp(d, a->data, (size_t)a->n * a->elem_size) == 0, "%s", a->key);
    }
    int64_t k = moe_gguf_find_key(g, "a.str");
    CHECK_EQ_INT(moe_gguf_arr_type(g, k), MOE_GGUF_STRING);
    CHECK_EQ_INT(moe_gguf_arr_len(g, k), 3);
    CHECK(moe_gguf_arr_data(g, k) == NULL);
    for (uint64_t j = 0; j < 3; j++) {
        moe_str s = moe_gguf_arr_str(g, k, j);
        CHECK(s.len == arr_str[j].len && memcmp(s.ptr, arr_str[j].ptr, (size_t)s.len) == 0);
    }
    CHECK(moe_gguf_arr_str(g, k, 3).ptr == NULL);
    k = moe_gguf_find_key(g, "a.str_empty");
    CHECK(moe_gguf_arr_type(g, k) == MOE_GGUF_STRING && moe_gguf_arr_len(g, k) == 0);
    CHECK_EQ_INT(moe_gguf_arr_len(g, moe_gguf_find_key(g, "s.u8")), 0);
}

static void check_tensors(const moe_gguf *g, uint8_t **data, uint32_t alignment)
{
    CHECK_EQ_INT(moe_gguf_n_tensors(g), N_TEST_TENSORS);
    const uint8_t *base = moe_gguf_tensor_at(g, 0) ? moe_gguf_tensor_at(g, 0)->data : NULL;
    for (int64_t i = 0; i < N_TEST_TENSORS && i < moe_gguf_n_tensors(g); i++) {
        const test_tensor *want = &test_tensors[i];
        const moe_gguf_tensor *t = moe_gguf_tensor_at(g, i);
        CHECK_EQ_STR(t->name, want->name);
        CHECK(moe_gguf_find_tensor(g, want->name) == t);
        CHECK_EQ_INT(t->n_dims, want->n_dims);
        for (int d = 0; d < 4; d++)
            CHECK_EQ_INT(t->ne[d], want->ne[d]);
        CHECK_EQ_INT(t->type, want->type);
        CHECK_EQ_INT(t->size_bytes, want->size_bytes);
        CHECK_EQ_INT(t->offset % alignment, 0);
        CHECK_EQ_INT((const uint8_t *)t->data - base, (int64_t)t->offset);
        CHECK_EQ_INT(t->split, 0);
        CHECK_MSG(memcmp(t->data, data[i], want->size_bytes) == 0, "tensor %s bytes", want->name);
    }
    CHECK(moe_gguf_tensor_at(g, -1) == NULL && moe_gguf_tensor_at(g, N_TEST_TENSORS) == NULL);
    CHECK(moe_gguf_find_tensor(g, "t.none") == NULL);
}

static void test_round_trip(uint32_t alignment, const char *name)
{
    uint8_t *data[N_TEST_TENSORS];
    for (int64_t i = 0; i < N_TEST_TENSORS; i++)
        data[i] = tensor_bytes(i);
    moe_gguf_writer *w = make_writer(alignment, data);
    moe_err err = { { 0 } };
    const char *path = test_tmp_path(name);
    CHECK_MSG(moe_gguf_writer_write_file(w, path, &err) == MOE_OK, "%s", err.msg);
    moe_gguf_writer_free(w);

    moe_gguf *g = NULL;
    CHECK_MSG(moe_gguf_open(path, &g, &err) == MOE_OK, "%s", err.msg);
    if (g) {
        size_t size = 0;
        free(test_read_file(path, &size));
        CHECK_EQ_INT(moe_gguf_version(g), 3);
        CHECK_EQ_INT(moe_gguf_alignment(g), alignment);
        CHECK_EQ_INT(moe_gguf_n_splits(g), 1);
        CHECK_EQ_INT(moe_gguf_file_bytes(g), size);
        CHECK_EQ_INT(moe_gguf_n_kv(g), 14 + 12 + 2);
        CHECK_EQ_STR(moe_gguf_key(g, 0), "general.alignment");
        check_scalars(g);
        check_conversions(g);
        check_arrays(g);
        check_tensors(g, data, alignment);
    }
    moe_gguf_free(g);
    for (int64_t i = 0; i < N_TEST_TENSORS; i++)
        free(data[i]);
}

/* Streaming writes the same bytes as write_file. */
static void test_streaming(void)
{
    uint8_t *data[N_TEST_TENSORS];
    for (int64_t i = 0; i < N_TEST_TENSORS; i++)
        data[i] = tensor_bytes(i);
    moe_err err = { { 0 } };
    const char *whole = test_tmp_path("whole.gguf"), *streamed = test_tmp_path("streamed.gguf");
    moe_gguf_writer *w = make_writer(128, data);
    CHECK(moe_gguf_writer_write_file(w, whole, &err) == MOE_OK);
    moe_gguf_writer_free(w);

    w = make_writer(128, NULL);
    CHECK(moe_gguf_writer_write_file(w, streamed, &err) == MOE_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "t.f32") != NULL);
    CHECK(!test_file_exists(streamed));
    CHECK_MSG(moe_gguf_writer_begin(w, streamed, &err) == MOE_OK, "%s", err.msg);
    CHECK(moe_gguf_writer_set_u8(w, "late", 1) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_write_tensor_data(w, 1, data[1], &err) == MOE_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "t.f32") != NULL);
    for (int64_t i = 0; i < N_TEST_TENSORS; i++) {
        if (i == 3) {
            CHECK(moe_gguf_writer_finish(w, &err) == MOE_ERR_INVALID_ARG);
            CHECK(!test_file_exists(streamed));
        }
        CHECK(moe_gguf_writer_write_tensor_data(w, i, data[i], &err) == MOE_OK);
    }
    CHECK_MSG(moe_gguf_writer_finish(w, &err) == MOE_OK, "%s", err.msg);
    moe_gguf_writer_free(w);

    size_t na = 0, nb = 0;
    uint8_t *a = test_read_file(whole, &na), *b = test_read_file(streamed, &nb);
    CHECK(a && b && na == nb && memcmp(a, b, na) == 0);
    free(a);
    free(b);
    for (int64_t i = 0; i < N_TEST_TENSORS; i++)
        free(data[i]);
}

/* Writing tensors in parts of any size gives the same file as writing
 * them whole; overruns and a whole write after a part are refused. */
static void test_streaming_parts(void)
{
    uint8_t *data[N_TEST_TENSORS];
    for (int64_t i = 0; i < N_TEST_TENSORS; i++)
        data[i] = tensor_bytes(i);
    moe_err err = { { 0 } };
    const char *whole = test_tmp_path("whole-p.gguf"), *parts = test_tmp_path("parts.gguf");
    moe_gguf_writer *w = make_writer(64, data);
    CHECK(moe_gguf_writer_write_file(w, whole, &err) == MOE_OK);
    moe_gguf_writer_free(w);

    w = make_writer(64, NULL);
    CHECK_MSG(moe_gguf_writer_begin(w, parts, &err) == MOE_OK, "%s", err.msg);
    CHECK(moe_gguf_writer_write_tensor_part(w, 1, data[1], 1, &err) == MOE_ERR_INVALID_ARG);
    for (int64_t i = 0; i < N_TEST_TENSORS; i++) {
        size_t size = test_tensors[i].size_bytes;
        size_t step = (size_t)(i % 3) + 1, done = 0; /* 1, 2 or 3 bytes at a time */
        while (done < size) {
            size_t n = size - done < step ? size - done : step;
            CHECK(moe_gguf_writer_write_tensor_part(w, i, data[i] + done, n, &err) == MOE_OK);
            done += n;
            if (done == 1 && size > 1) {
                CHECK(moe_gguf_writer_write_tensor_data(w, i, data[i], &err) ==
                      MOE_ERR_INVALID_ARG);
                CHECK(moe_gguf_writer_write_tensor_part(w, i, data[i], size, &err) ==
                      MOE_ERR_INVALID_ARG);
                CHECK(strstr(err.msg, "overrun") != NULL);
            }
        }
    }
    CHECK(moe_gguf_writer_write_tensor_part(w, N_TEST_TENSORS, data[0], 1, &err) ==
          MOE_ERR_INVALID_ARG);
    CHECK_MSG(moe_gguf_writer_finish(w, &err) == MOE_OK, "%s", err.msg);
    moe_gguf_writer_free(w);

    size_t na = 0, nb = 0;
    uint8_t *a = test_read_file(whole, &na), *b = test_read_file(parts, &nb);
    CHECK(a && b && na == nb && memcmp(a, b, na) == 0);
    free(a);
    free(b);
    for (int64_t i = 0; i < N_TEST_TENSORS; i++)
        free(data[i]);
}

/* copy_kv reproduces every key/value, here of the round-trip file and of
 * the real vocabularies (large string arrays, float scores...). */
static void test_copy_kv(const char *src_path, const char *name)
{
    moe_err err = { { 0 } };
    moe_gguf *src = NULL, *copy = NULL;
    CHECK_MSG(moe_gguf_open(src_path, &src, &err) == MOE_OK, "%s", err.msg);
    if (!src)
        return;
    moe_gguf_writer *w = moe_gguf_writer_new();
    for (int64_t i = 0; i < moe_gguf_n_kv(src); i++)
        CHECK(moe_gguf_writer_copy_kv(w, src, i) == MOE_OK);
    CHECK(moe_gguf_writer_copy_kv(w, src, moe_gguf_n_kv(src)) == MOE_ERR_INVALID_ARG);
    const char *path = test_tmp_path(name);
    CHECK_MSG(moe_gguf_writer_write_file(w, path, &err) == MOE_OK, "%s", err.msg);
    moe_gguf_writer_free(w);
    CHECK_MSG(moe_gguf_open(path, &copy, &err) == MOE_OK, "%s", err.msg);
    if (copy)
        test_check_same_kvs(src, copy);
    moe_gguf_free(copy);
    moe_gguf_free(src);
}

static void test_real_vocab(const char *path)
{
    moe_err err = { { 0 } };
    moe_gguf *g = NULL;
    CHECK_MSG(moe_gguf_open(path, &g, &err) == MOE_OK, "%s", err.msg);
    if (!g)
        return;
    CHECK_EQ_STR(moe_gguf_str_or(g, "general.architecture", NULL), "llama");
    int64_t k = moe_gguf_find_key(g, "tokenizer.ggml.tokens");
    CHECK_EQ_INT(moe_gguf_arr_len(g, k), 32000);
    moe_str s = moe_gguf_arr_str(g, k, 0);
    CHECK(s.len == 5 && memcmp(s.ptr, "<unk>", 5) == 0);
    CHECK_EQ_INT(moe_gguf_arr_type(g, moe_gguf_find_key(g, "tokenizer.ggml.scores")),
                 MOE_GGUF_FLOAT32);
    CHECK_EQ_INT(moe_gguf_n_tensors(g), 0);
    moe_gguf_free(g);
}

/* Calls out of contract are refused without side effects. */
static void test_writer_errors(void)
{
    moe_gguf_writer *w = moe_gguf_writer_new();
    const int64_t ne_ok[2] = { 32, 2 }, ne_zero[2] = { 32, 0 }, ne_odd[1] = { 33 };
    const int64_t ne_big[4] = { INT64_MAX / 2, 4, 1, 1 };
    const uint8_t bad_bool[] = { 0, 2 };
    CHECK(moe_gguf_writer_set_u32(w, "general.alignment", 3) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_set_u32(w, "general.alignment", 0) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_set_u64(w, "general.alignment", 64) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_set_u8(w, "", 1) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_set_u8(w, NULL, 1) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_set_str(w, "k", NULL) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_set_arr(w, "k", MOE_GGUF_STRING, "x", 1) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_set_arr(w, "k", MOE_GGUF_ARRAY, "x", 1) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_set_arr(w, "k", MOE_GGUF_BOOL, bad_bool, 2) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_set_arr(w, "k", MOE_GGUF_UINT8, NULL, 1) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_add_tensor(w, "a", MOE_TYPE_Q8_0, 2, ne_ok, NULL) == MOE_OK);
    CHECK(moe_gguf_writer_add_tensor(w, "a", MOE_TYPE_Q8_0, 2, ne_ok, NULL) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_add_tensor(w, "b", MOE_TYPE_Q8_0, 2, ne_zero, NULL) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_add_tensor(w, "b", MOE_TYPE_Q8_0, 1, ne_odd, NULL) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_add_tensor(w, "b", MOE_TYPE_F32, 0, ne_ok, NULL) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_add_tensor(w, "b", MOE_TYPE_F32, 5, ne_big, NULL) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_add_tensor(w, "b", MOE_TYPE_F32, 2, ne_big, NULL) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_add_tensor(w, "b", (moe_type)99, 1, ne_ok, NULL) == MOE_ERR_UNSUPPORTED);
    CHECK(moe_gguf_writer_add_tensor(w, "", MOE_TYPE_F32, 1, ne_ok, NULL) == MOE_ERR_INVALID_ARG);
    char long_name[80];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    CHECK(moe_gguf_writer_add_tensor(w, long_name, MOE_TYPE_F32, 1, ne_ok, NULL) == MOE_ERR_INVALID_ARG);
    moe_err err = { { 0 } };
    CHECK(moe_gguf_writer_write_tensor_data(w, 0, "x", &err) == MOE_ERR_INVALID_ARG);
    CHECK(moe_gguf_writer_finish(w, &err) == MOE_ERR_INVALID_ARG);
    /* A directory that does not exist: the message names the file. */
    char bad_path[1100];
    snprintf(bad_path, sizeof bad_path, "%s/no-such-dir/out.gguf", test_tmp_dir_);
    CHECK(moe_gguf_writer_begin(w, bad_path, &err) == MOE_ERR_IO);
    CHECK_MSG(strstr(err.msg, bad_path) != NULL, "%s", err.msg);
    moe_gguf_writer_free(w);
    moe_gguf_writer_free(NULL);
}

/* Keys keep their first position when replaced; removal closes the gap. */
static void test_replace_and_remove(void)
{
    moe_gguf_writer *w = moe_gguf_writer_new();
    moe_err err = { { 0 } };
    moe_gguf *g = NULL;
    CHECK(moe_gguf_writer_set_u32(w, "k.a", 1) == MOE_OK);
    CHECK(moe_gguf_writer_set_str(w, "k.b", "b") == MOE_OK);
    CHECK(moe_gguf_writer_set_u32(w, "k.c", 3) == MOE_OK);
    CHECK(moe_gguf_writer_set_str(w, "k.a", "now a string") == MOE_OK);
    moe_gguf_writer_remove_key(w, "k.b");
    moe_gguf_writer_remove_key(w, "k.none");
    const char *path = test_tmp_path("replace.gguf");
    CHECK(moe_gguf_writer_write_file(w, path, &err) == MOE_OK);
    /* Writing again replaces the existing file. */
    CHECK(moe_gguf_writer_set_u32(w, "k.c", 4) == MOE_OK);
    CHECK_MSG(moe_gguf_writer_write_file(w, path, &err) == MOE_OK, "%s", err.msg);
    moe_gguf_writer_free(w);
    CHECK_MSG(moe_gguf_open(path, &g, &err) == MOE_OK, "%s", err.msg);
    if (g) {
        CHECK_EQ_INT(moe_gguf_n_kv(g), 2);
        CHECK_EQ_STR(moe_gguf_key(g, 0), "k.a");
        CHECK_EQ_STR(moe_gguf_str_or(g, "k.a", NULL), "now a string");
        CHECK_EQ_INT(moe_gguf_u64_or(g, "k.c", 0), 4);
        CHECK_EQ_INT(moe_gguf_alignment(g), MOE_GGUF_DEFAULT_ALIGNMENT);
        CHECK_EQ_INT(moe_gguf_n_tensors(g), 0);
    }
    moe_gguf_free(g);
}

/* ---- split sets ---- */

/* Writes part `no` of `count` holding tensors [first, first+n) of the test
 * set; the first part carries the model's keys. `count_key` lets a test
 * make one part lie about the count. */
static void write_split_part(const char *name, uint16_t no, uint16_t count, uint16_t count_key,
                             int64_t first, int64_t n, uint8_t **data)
{
    moe_gguf_writer *w = moe_gguf_writer_new();
    moe_err err = { { 0 } };
    if (no == 0)
        set_all_kvs(w, 64);
    CHECK(moe_gguf_writer_set_u16(w, "split.no", no) == MOE_OK);
    CHECK(moe_gguf_writer_set_u16(w, "split.count", count_key) == MOE_OK);
    CHECK(moe_gguf_writer_set_i32(w, "split.tensors.count", (int32_t)N_TEST_TENSORS) == MOE_OK);
    for (int64_t i = first; i < first + n; i++) {
        const test_tensor *t = &test_tensors[i];
        CHECK(moe_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, data[i]) == MOE_OK);
    }
    (void)count;
    CHECK_MSG(moe_gguf_writer_write_file(w, test_tmp_path(name), &err) == MOE_OK, "%s", err.msg);
    moe_gguf_writer_free(w);
}

static void check_split_set(const char *open_name, uint8_t **data)
{
    moe_err err = { { 0 } };
    moe_gguf *g = NULL;
    CHECK_MSG(moe_gguf_open(test_tmp_path(open_name), &g, &err) == MOE_OK, "%s", err.msg);
    if (!g)
        return;
    CHECK_EQ_INT(moe_gguf_n_splits(g), 3);
    CHECK_EQ_INT(moe_gguf_alignment(g), 64);
    CHECK_EQ_INT(moe_gguf_u64_or(g, "split.no", 99), 0);
    check_scalars(g);
    check_arrays(g);
    CHECK_EQ_INT(moe_gguf_n_tensors(g), N_TEST_TENSORS);
    static const uint32_t want_split[N_TEST_TENSORS] = { 0, 0, 1, 1, 1, 2, 2 };
    for (int64_t i = 0; i < N_TEST_TENSORS && i < moe_gguf_n_tensors(g); i++) {
        const moe_gguf_tensor *t = moe_gguf_tensor_at(g, i);
        CHECK_EQ_STR(t->name, test_tensors[i].name);
        CHECK_EQ_INT(t->split, want_split[i]);
        CHECK(memcmp(t->data, data[i], test_tensors[i].size_bytes) == 0);
        CHECK(moe_gguf_find_tensor(g, t->name) == t);
    }
    uint64_t total = 0;
    for (int p = 1; p <= 3; p++) {
        char name[64];
        size_t n = 0;
        snprintf(name, sizeof name, "model-%05d-of-00003.gguf", p);
        free(test_read_file(test_tmp_path(name), &n));
        total += n;
    }
    CHECK_EQ_INT(moe_gguf_file_bytes(g), total);
    moe_gguf_free(g);
}

static void expect_open_error(const char *name, moe_status want, const char *substr)
{
    moe_err err = { { 0 } };
    moe_gguf *g = NULL;
    moe_status st = moe_gguf_open(test_tmp_path(name), &g, &err);
    CHECK_MSG(st == want, "%s: got %s (%s)", name, moe_status_str(st), err.msg);
    CHECK_MSG(strstr(err.msg, substr) != NULL, "'%s' not in '%s'", substr, err.msg);
    CHECK(g == NULL);
    moe_gguf_free(g);
}

static void test_split(void)
{
    uint8_t *data[N_TEST_TENSORS];
    for (int64_t i = 0; i < N_TEST_TENSORS; i++)
        data[i] = tensor_bytes(i);
    write_split_part("model-00001-of-00003.gguf", 0, 3, 3, 0, 2, data);
    write_split_part("model-00002-of-00003.gguf", 1, 3, 3, 2, 3, data);
    write_split_part("model-00003-of-00003.gguf", 2, 3, 3, 5, 2, data);
    check_split_set("model-00001-of-00003.gguf", data);
    check_split_set("model-00002-of-00003.gguf", data);

    /* A part whose name does not follow the pattern cannot find the rest. */
    size_t n = 0;
    uint8_t *bytes = test_read_file(test_tmp_path("model-00001-of-00003.gguf"), &n);
    FILE *f = fopen(test_tmp_path("renamed.gguf"), "wb");
    if (f && bytes) {
        fwrite(bytes, 1, n, f);
        fclose(f);
    }
    free(bytes);
    expect_open_error("renamed.gguf", MOE_ERR_FORMAT, "-00001-of-00003.gguf");

    /* A part that disagrees about the count. */
    write_split_part("model-00002-of-00003.gguf", 1, 3, 4, 2, 3, data);
    expect_open_error("model-00001-of-00003.gguf", MOE_ERR_FORMAT, "model-00002-of-00003.gguf");
    write_split_part("model-00002-of-00003.gguf", 1, 3, 3, 2, 3, data);

    /* A missing part is named. */
    remove(test_tmp_path("model-00003-of-00003.gguf"));
    expect_open_error("model-00001-of-00003.gguf", MOE_ERR_IO, "model-00003-of-00003.gguf");
    expect_open_error("model-00002-of-00003.gguf", MOE_ERR_IO, "missing part 3 of 3");
    expect_open_error("no-such-file.gguf", MOE_ERR_IO, "no-such-file.gguf");
    for (int64_t i = 0; i < N_TEST_TENSORS; i++)
        free(data[i]);
}

/* Every truncation of a good image that cuts into its header or tensor
 * data is rejected (only the last tensor's trailing padding may go). */
static void test_truncations(const char *path)
{
    size_t size = 0;
    uint8_t *bytes = test_read_file(path, &size);
    moe_gguf *g = NULL;
    moe_err err = { { 0 } };
    CHECK(bytes && moe_gguf_open_memory(bytes, size, "image", &g, &err) == MOE_OK);
    const moe_gguf_tensor *last = moe_gguf_tensor_at(g, moe_gguf_n_tensors(g) - 1);
    size_t end = last ? (size_t)((const uint8_t *)last->data - bytes + (ptrdiff_t)last->size_bytes) : 0;
    moe_gguf_free(g);
    CHECK(end > 0 && end <= size);
    int rejected = 0;
    for (size_t n = 0; n < end; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact size, so ASan sees overreads */
        memcpy(copy, bytes, n);
        g = NULL;
        rejected += moe_gguf_open_memory(copy, n, "cut", &g, &err) != MOE_OK && g == NULL;
        moe_gguf_free(g);
        free(copy);
    }
    CHECK_EQ_INT(rejected, (int64_t)end);
    CHECK(moe_gguf_open_memory(bytes, end, "cut", &g, &err) == MOE_OK);
    moe_gguf_free(g);
    free(bytes);
}

/* moe_gguf_open_header: every prefix that ends inside the header asks for
 * more (MOE_ERR_RANGE with a larger, bounded need); growing as told ends in
 * the same key/values and tensors as the whole file, data NULL; a bad magic
 * is final at once, a lying file size is caught by the extent check. */
static void test_header_prefix(const char *path)
{
    size_t size = 0;
    uint8_t *bytes = test_read_file(path, &size);
    moe_gguf *whole = NULL, *g = NULL;
    moe_err err = { { 0 } };
    CHECK(bytes && moe_gguf_open_memory(bytes, size, "image", &whole, &err) == MOE_OK);
    const moe_gguf_tensor *t0 = whole ? moe_gguf_tensor_at(whole, 0) : NULL;
    /* >= the header's end (a vocabulary file has no tensors: all header) */
    const size_t header = t0 ? (size_t)((const uint8_t *)t0->data - bytes) : size;
    CHECK(header > 24 && header <= size);
    int asked = 0;
    for (size_t n = 0; n < header; n += 1 + n / 8) {
        uint8_t *copy = malloc(n ? n : 1); /* exact size, so ASan sees overreads */
        memcpy(copy, bytes, n);
        uint64_t need = 0;
        g = NULL;
        moe_status st = moe_gguf_open_header(copy, n, size, "prefix", &g, &need, &err);
        if (st == MOE_ERR_RANGE) {
            asked++;
            CHECK_MSG(need > n && need <= size, "prefix %zu: need %llu", n, (unsigned long long)need);
            CHECK(g == NULL && strstr(err.msg, "prefix"));
        } else {
            /* the parse may end before the padding does */
            CHECK_MSG(st == MOE_OK && g, "prefix %zu: %s", n, err.msg);
            CHECK_EQ_INT(moe_gguf_n_tensors(g), moe_gguf_n_tensors(whole));
        }
        moe_gguf_free(g);
        free(copy);
    }
    CHECK(asked > 0);
    /* Grow as told, from 100 bytes. */
    uint64_t have = 100, need = 0;
    int rounds = 0;
    moe_status st;
    while ((st = moe_gguf_open_header(bytes, (size_t)have, size, "grow", &g, &need, &err)) ==
               MOE_ERR_RANGE && rounds++ < 40)
        have = need;
    CHECK_MSG(st == MOE_OK && g, "%s", err.msg);
    if (g && whole) {
        CHECK_EQ_INT(moe_gguf_file_bytes(g), size);
        test_check_same_kvs(g, whole);
        CHECK_EQ_INT(moe_gguf_n_tensors(g), moe_gguf_n_tensors(whole));
        for (int64_t i = 0; i < moe_gguf_n_tensors(g); i++) {
            const moe_gguf_tensor *a = moe_gguf_tensor_at(g, i), *b = moe_gguf_tensor_at(whole, i);
            CHECK_EQ_STR(a->name, b->name);
            CHECK(a->type == b->type && a->size_bytes == b->size_bytes && a->offset == b->offset);
            CHECK(have < size ? a->data == NULL : a->data != NULL);
        }
    }
    moe_gguf_free(g);
    g = NULL;
    /* Told a size smaller than the tensors need: the whole "file" is given
     * and the extent check rejects it. */
    if (t0) {
        CHECK(moe_gguf_open_header(bytes, header, header, "short", &g, &need, &err) ==
              MOE_ERR_FORMAT);
        CHECK(g == NULL && need == 0 && strstr(err.msg, "past end of file"));
    }
    uint8_t bad[64];
    memcpy(bad, bytes, sizeof bad);
    bad[0] = 'X';
    CHECK(moe_gguf_open_header(bad, sizeof bad, size, "bad", &g, &need, &err) == MOE_ERR_FORMAT);
    CHECK(strstr(err.msg, "magic") && need == 0);
    CHECK(moe_gguf_open_header(bytes, 10, 5, "x", &g, NULL, &err) == MOE_ERR_INVALID_ARG);
    moe_gguf_free(whole);
    free(bytes);
}

#ifndef _WIN32
/* A write that fails midway (here: over the file size limit, as a full
 * disk would) reports the path and leaves neither file behind. Runs in a
 * child so the limit does not touch other tests. */
static void test_write_failure(void)
{
    const char *path = test_tmp_path("too-big.gguf");
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit lim = { 4096, 4096 };
        signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &lim);
        static uint8_t big[1 << 16];
        const int64_t ne[1] = { sizeof big / 4 };
        moe_gguf_writer *w = moe_gguf_writer_new();
        moe_err err = { { 0 } };
        moe_gguf_writer_add_tensor(w, "big", MOE_TYPE_F32, 1, ne, big);
        moe_status st = moe_gguf_writer_write_file(w, path, &err);
        moe_gguf_writer_free(w);
        int ok = st == MOE_ERR_IO && strstr(err.msg, path) && !test_file_exists(path);
        char tmp[1100];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        ok = ok && !test_file_exists(tmp);
        if (!ok)
            fprintf(stderr, "write failure: %s (%s)\n", moe_status_str(st), err.msg);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
#endif

int main(void)
{
    char vocab[1024];
    const char *shared = getenv("MOE_SHARED_DATA");
    test_tmp_init("test-gguf");
    test_round_trip(MOE_GGUF_DEFAULT_ALIGNMENT, "round-32.gguf");
    test_round_trip(64, "round-64.gguf");
    test_round_trip(1, "round-1.gguf");
    test_round_trip(4096, "round-4096.gguf");
    test_streaming();
    test_streaming_parts();
    test_copy_kv(test_tmp_path("round-64.gguf"), "copy-round.gguf");
    snprintf(vocab, sizeof vocab, "%s/vocab/ggml-vocab-llama-spm.gguf", shared ? shared : ".");
    test_real_vocab(vocab);
    test_copy_kv(vocab, "copy-spm.gguf");
    snprintf(vocab, sizeof vocab, "%s/vocab/ggml-vocab-qwen2.gguf", shared ? shared : ".");
    test_copy_kv(vocab, "copy-qwen2.gguf");
    test_writer_errors();
    test_replace_and_remove();
    test_split();
    test_truncations(test_tmp_path("round-64.gguf"));
    test_header_prefix(test_tmp_path("round-64.gguf"));
    test_header_prefix(vocab); /* a real one: a 150k-token vocabulary */
#ifndef _WIN32
    test_write_failure();
#endif
    moe_gguf_free(NULL);
    test_tmp_cleanup();
    TEST_DONE();
}

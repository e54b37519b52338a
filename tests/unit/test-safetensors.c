/*
 * test-safetensors.c — the safetensors header reader (moe_safetensors_*):
 * a well-formed file opens with the right names, dtypes, shapes, data
 * pointers and metadata (from memory and from a file on disk); each kind of
 * malformed header is refused with a message naming the fault. Files are
 * built in memory: 8-byte little-endian length, JSON, data bytes.
 */
#include "test.h"
#include "moe.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Builds a file image: header JSON (padded with spaces to `pad`), then
 * `data_bytes` bytes whose value is their index mod 251. Caller frees. */
static uint8_t *build(const char *json, size_t pad, size_t data_bytes, size_t *size)
{
    size_t n = strlen(json);
    size_t hlen = n < pad ? pad : n;
    *size = 8 + hlen + data_bytes;
    uint8_t *buf = malloc(*size);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    memcpy(buf + 8, json, n);
    memset(buf + 8 + n, ' ', hlen - n);
    for (size_t i = 0; i < data_bytes; i++)
        buf[8 + hlen + i] = (uint8_t)(i % 251);
    return buf;
}

/* Opens the image; returns the status and leaves the message in err. */
static moe_status try_open(const char *json, size_t data_bytes, moe_err *err)
{
    size_t size;
    uint8_t *buf = build(json, 0, data_bytes, &size);
    moe_safetensors *st = NULL;
    memset(err, 0, sizeof *err);
    moe_status r = moe_safetensors_open_memory(buf, size, "t.safetensors", &st, err);
    CHECK(r == MOE_OK ? st != NULL : st == NULL);
    moe_safetensors_free(st);
    free(buf);
    return r;
}

static const char good_json[] =
    "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"caf\\u00e9 \\ud83d\\ude00\"},"
    " \"b.weight\" : {\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[16,28]},"
    "\"a.bias\":{\"data_offsets\":[0,16],\"shape\":[4],\"dtype\":\"F32\"},"
    "\"scalar\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[28,36]},"
    "\"empty\":{\"dtype\":\"F16\",\"shape\":[0,5],\"data_offsets\":[36,36]}}";

static void test_good(void)
{
    size_t size;
    uint8_t *buf = build(good_json, 512, 36, &size);
    moe_safetensors *st = NULL;
    moe_err err = { { 0 } };
    CHECK_MSG(moe_safetensors_open_memory(buf, size, "good", &st, &err) == MOE_OK, "%s", err.msg);
    if (!st) {
        free(buf);
        return;
    }
    CHECK_EQ_INT(moe_safetensors_n_tensors(st), 4);
    CHECK_EQ_INT(moe_safetensors_data_offset(st), 8 + 512);
    CHECK_EQ_INT(moe_safetensors_file_bytes(st), size);
    const moe_safetensors_tensor *t = moe_safetensors_tensor_at(st, 0);
    CHECK_EQ_STR(t->name, "b.weight");
    CHECK(t->dtype == MOE_ST_BF16);
    CHECK_EQ_STR(t->dtype_name, "BF16");
    CHECK_EQ_INT(t->n_dims, 2);
    CHECK_EQ_INT(t->shape[0], 2);
    CHECK_EQ_INT(t->shape[1], 3);
    CHECK_EQ_INT(t->shape[2], 1);
    CHECK_EQ_INT(t->offset, 16);
    CHECK_EQ_INT(t->size_bytes, 12);
    CHECK(t->data == buf + 8 + 512 + 16);
    CHECK(moe_safetensors_find(st, "a.bias") == moe_safetensors_tensor_at(st, 1));
    CHECK(moe_safetensors_find(st, "scalar")->n_dims == 0);
    CHECK(moe_safetensors_find(st, "empty")->size_bytes == 0);
    CHECK(moe_safetensors_find(st, "nope") == NULL);
    CHECK(moe_safetensors_tensor_at(st, 4) == NULL);
    CHECK_EQ_INT(moe_safetensors_n_metadata(st), 2);
    CHECK_EQ_STR(moe_safetensors_metadata(st, "format"), "pt");
    CHECK_EQ_STR(moe_safetensors_metadata(st, "note"), "caf\xc3\xa9 \xf0\x9f\x98\x80");
    const char *k = NULL, *v = NULL;
    CHECK(moe_safetensors_metadata_at(st, 1, &k, &v));
    CHECK_EQ_STR(k, "note");
    CHECK(!moe_safetensors_metadata_at(st, 2, &k, &v));
    CHECK(moe_safetensors_metadata(st, "missing") == NULL);
    moe_safetensors_free(st);

    /* The same bytes through a real file. */
    char path[256];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/moe-test-st-%d.safetensors", tmp ? tmp : ".", (int)(size % 9973));
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(buf, 1, size, f) == size);
    if (f)
        fclose(f);
    st = NULL;
    CHECK_MSG(moe_safetensors_open(path, &st, &err) == MOE_OK, "%s", err.msg);
    if (st) {
        const moe_safetensors_tensor *a = moe_safetensors_find(st, "a.bias");
        CHECK(a && ((const uint8_t *)a->data)[5] == 5);
        moe_safetensors_free(st);
    }
    remove(path);
    free(buf);
    moe_safetensors_free(NULL);

    /* An empty header (no tensors) is a valid, empty file. */
    CHECK(try_open("{}", 0, &err) == MOE_OK);
    CHECK(try_open("{\"__metadata__\":{}}  ", 0, &err) == MOE_OK);
}

/* Each case: header JSON, data bytes, a word the message must contain. */
static const struct { const char *json; size_t data; const char *want; } bad[] = {
    {"[]", 0, "must start with '{'"},
    {"", 0, "must start with '{'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},}", 4, "expected a string"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, "expected ',' or '}'"},
    {"{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype 'F33'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4, "unknown field 'x'"},
    {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "duplicate field"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 0, "lacks 'data_offsets'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "non-negative integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4, "non-negative integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", 4, "non-negative integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "more than 8"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}", 4, "too large"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4, "overflows"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "give 8 bytes"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "before it begins"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "[begin, end]"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "cover 4"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "gap"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "overlap"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "past the end"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "duplicate tensor 'a'"},
    {"{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "empty tensor name"},
    {"{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "NUL"},
    {"{\"a\\ud800\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "\\u escape"},
    {"{\"a\\x\":{}}", 0, "invalid escape"},
    {"{\"a\xc0\xaf\":{}}", 0, "invalid UTF-8"},
    {"{\"a\n\":{}}", 0, "control character"},
    {"{\"a", 0, "unterminated string"},
    {"{\"a\":", 0, "header ended"},
    {"{\"__metadata__\":{\"k\":1}}", 0, "must be a string"},
    {"{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"}}", 0, "duplicate __metadata__ key"},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "appears twice"},
    {"{\"a\":[]}", 0, "must be an object"},
    {"{} x", 0, "unexpected bytes"},
};

static void test_bad(void)
{
    moe_err err;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        moe_status r = try_open(bad[i].json, bad[i].data, &err);
        CHECK_MSG(r == MOE_ERR_FORMAT, "case %zu: status %d", i, (int)r);
        CHECK_MSG(strstr(err.msg, bad[i].want) != NULL, "case %zu: '%s' lacks '%s'", i,
                  err.msg, bad[i].want);
        CHECK_MSG(strstr(err.msg, "t.safetensors") != NULL, "case %zu: no file name", i);
    }
    /* Length field problems. */
    uint8_t small[7] = { 0 };
    moe_safetensors *st = NULL;
    CHECK(moe_safetensors_open_memory(small, sizeof small, "s", &st, &err) == MOE_ERR_FORMAT);
    CHECK(strstr(err.msg, "too short") != NULL);
    uint8_t huge[16] = { 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, '{', '}' };
    CHECK(moe_safetensors_open_memory(huge, sizeof huge, "h", &st, &err) == MOE_ERR_FORMAT);
    CHECK(strstr(err.msg, "limit") != NULL);
    uint8_t past[12] = { 9, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ' };
    CHECK(moe_safetensors_open_memory(past, sizeof past, "p", &st, &err) == MOE_ERR_FORMAT);
    CHECK(strstr(err.msg, "runs past the end") != NULL);
    CHECK(st == NULL);
    CHECK(moe_safetensors_open("/nonexistent/x.safetensors", &st, &err) == MOE_ERR_IO);
    CHECK(strstr(err.msg, "x.safetensors") != NULL);
}

static void test_dtypes(void)
{
    moe_st_dtype d;
    CHECK(moe_st_dtype_from_name("F8_E4M3", &d) && d == MOE_ST_F8_E4M3);
    CHECK(!moe_st_dtype_from_name("f32", &d)); /* the format is case-sensitive */
    CHECK_EQ_INT(moe_st_dtype_size(MOE_ST_I64), 8);
    CHECK_EQ_INT(moe_st_dtype_size(MOE_ST_DTYPE_COUNT), 0);
    CHECK(moe_st_dtype_name(MOE_ST_DTYPE_COUNT) == NULL);
    for (int i = 0; i < MOE_ST_DTYPE_COUNT; i++)
        CHECK(moe_st_dtype_from_name(moe_st_dtype_name((moe_st_dtype)i), &d) && (int)d == i);
}

int main(void)
{
    test_good();
    test_bad();
    test_dtypes();
    TEST_DONE();
}

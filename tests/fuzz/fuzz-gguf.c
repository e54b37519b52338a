/*
 * fuzz-gguf.c — libFuzzer target for the GGUF reader. Each input is opened
 * as a file image from memory; when it opens, every accessor is called on
 * every key/value and tensor (including reading each tensor's first and
 * last byte, so ASan checks the extents the reader promised) and every
 * key/value is copied into a writer (its encoder walks the same bytes).
 * When it does not open, the message must be a non-empty C string.
 */
#include "gguf-internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t fuzz_sink;

/* Folds a double into the sink by its bits (a cast could overflow). */
static void sink_double(double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    fuzz_sink += bits;
}

static void touch_kv(const moe_gguf *g, int64_t i)
{
    uint64_t u = 0;
    int64_t s = 0;
    double d = 0;
    bool b = false;
    moe_str str = { 0 };
    const char *key = moe_gguf_key(g, i);
    if (!key || moe_gguf_find_key(g, key) != i)
        abort(); /* keys are unique, so lookup finds this one */
    moe_gguf_get_u64(g, i, &u);
    moe_gguf_get_i64(g, i, &s);
    moe_gguf_get_f64(g, i, &d);
    moe_gguf_get_bool(g, i, &b);
    if (moe_gguf_get_str(g, i, &str) == MOE_OK && str.len)
        fuzz_sink += (uint8_t)str.ptr[str.len - 1];
    fuzz_sink += u + (uint64_t)s + b;
    sink_double(d);
    fuzz_sink += moe_gguf_u64_or(g, key, 1) + moe_gguf_bool_or(g, key, false);
    sink_double(moe_gguf_f64_or(g, key, 0.0));
    const char *copy = moe_gguf_str_or(g, key, NULL);
    fuzz_sink += copy ? strlen(copy) : 0;

    uint64_t n = moe_gguf_arr_len(g, i);
    const uint8_t *arr = moe_gguf_arr_data(g, i);
    if (arr && n)
        fuzz_sink += arr[0];
    for (uint64_t j = 0; moe_gguf_arr_type(g, i) == MOE_GGUF_STRING && j < n; j++) {
        moe_str e = moe_gguf_arr_str(g, i, j);
        if (e.len)
            fuzz_sink += (uint8_t)e.ptr[0] + (uint8_t)e.ptr[e.len - 1];
    }
}

static void touch_tensor(const moe_gguf *g, int64_t i)
{
    const moe_gguf_tensor *t = moe_gguf_tensor_at(g, i);
    if (!t || moe_gguf_find_tensor(g, t->name) != t || t->size_bytes == 0)
        abort();
    const uint8_t *p = t->data;
    fuzz_sink += p[0] + p[t->size_bytes - 1] + (uint64_t)t->ne[3] + t->type;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    moe_gguf *g = NULL;
    moe_err err = { { 0 } };
    if (moe_gguf_open_memory(data, size, "fuzz", &g, &err) != MOE_OK) {
        if (g || !memchr(err.msg, 0, sizeof err.msg) || err.msg[0] == '\0')
            abort();
        return 0;
    }
    fuzz_sink += moe_gguf_version(g) + moe_gguf_alignment(g) + moe_gguf_n_splits(g);
    fuzz_sink += moe_gguf_file_bytes(g);
    moe_gguf_writer *w = moe_gguf_writer_new();
    for (int64_t i = 0; i < moe_gguf_n_kv(g); i++) {
        touch_kv(g, i);
        if (moe_gguf_writer_copy_kv(w, g, i) != MOE_OK)
            abort(); /* a value the reader accepted must copy */
    }
    for (int64_t i = 0; i < moe_gguf_n_tensors(g); i++)
        touch_tensor(g, i);
    moe_gguf_writer_free(w);
    moe_gguf_free(g);
    return 0;
}

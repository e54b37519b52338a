/*
 * gguf-writer.c — builds GGUF v3 files that llama.cpp (and our reader)
 * accept. Key/values are serialised into small byte buffers when they are
 * set, so writing the header is a plain walk; tensors are declared first
 * (name, type, shape) and their data is written either all at once
 * (write_file) or streamed one tensor at a time in declaration order
 * (begin / write_tensor_data / finish), so a converter never needs more
 * than one tensor in memory.
 *
 * Layout written: header, key/values, tensor infos, zero padding to the
 * alignment, then each tensor's data followed by zero padding to the
 * alignment. Tensor i's offset is the sum of the padded sizes before it,
 * which is exactly what llama.cpp's loader requires.
 *
 * The file is written as "<path>.tmp" and renamed onto `path` by finish, so
 * a failed or abandoned write never leaves a partial file under `path`.
 */
#include "gguf-internal.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ggml keeps tensor names in char[64], so longer names break llama.cpp. */
#define WRITER_MAX_NAME 63

/* A growable byte buffer; `oom` latches the first allocation failure. */
typedef struct wbuf {
    uint8_t *p;
    size_t   n, cap;
    int      oom;
} wbuf;

typedef struct writer_kv {
    char          *key;
    moe_gguf_type  type;
    uint8_t       *bytes; /* u32 type tag + encoded value */
    size_t         n_bytes;
} writer_kv;

typedef struct writer_tensor {
    char       *name;
    moe_type    type;
    uint32_t    n_dims;
    int64_t     ne[MOE_GGUF_MAX_DIMS];
    const void *data; /* borrowed, may be NULL when streaming */
    uint64_t    size_bytes;
    uint64_t    offset;
} writer_tensor;

struct moe_gguf_writer {
    writer_kv     *kvs;
    int64_t        n_kv, cap_kv;
    writer_tensor *tensors;
    int64_t        n_tensors, cap_tensors;
    /* Streaming state, between begin and finish. */
    FILE          *file;
    char          *path;
    char          *tmp_path;
    uint32_t       alignment;
    int64_t        next_tensor;
    uint64_t       part_written; /* bytes of next_tensor written so far  */
    uint64_t       n_written; /* bytes written so far, for padding */
};

static void wbuf_put(wbuf *b, const void *p, size_t n)
{
    if (b->oom || n == 0)
        return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n && cap <= SIZE_MAX / 2)
            cap *= 2;
        uint8_t *grown = cap - b->n >= n ? realloc(b->p, cap) : NULL;
        if (!grown) {
            b->oom = 1;
            return;
        }
        b->p = grown;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void wbuf_put_le(wbuf *b, uint64_t v, size_t n)
{
    uint8_t bytes[8];
    for (size_t i = 0; i < n; i++)
        bytes[i] = (uint8_t)(v >> (8 * i));
    wbuf_put(b, bytes, n);
}

static void wbuf_put_str(wbuf *b, const char *s, uint64_t len)
{
    wbuf_put_le(b, len, 8);
    wbuf_put(b, s, (size_t)len);
}

moe_gguf_writer *moe_gguf_writer_new(void)
{
    return calloc(1, sizeof(moe_gguf_writer));
}

static void writer_abort_stream(moe_gguf_writer *w)
{
    if (w->file) {
        fclose(w->file);
        moe_platform_remove_file(w->tmp_path);
    }
    free(w->path);
    free(w->tmp_path);
    w->file = NULL;
    w->path = w->tmp_path = NULL;
}

void moe_gguf_writer_free(moe_gguf_writer *w)
{
    if (!w)
        return;
    writer_abort_stream(w);
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        free(w->kvs[i].bytes);
    }
    for (int64_t i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->kvs);
    free(w->tensors);
    free(w);
}

static int64_t writer_find_key(const moe_gguf_writer *w, const char *key)
{
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kvs[i].key, key) == 0)
            return i;
    return -1;
}

/* Grows *arr (elements of `size` bytes) to hold one more than *n. */
static int writer_grow(void **arr, int64_t n, int64_t *cap, size_t size)
{
    if (n < *cap)
        return 1;
    int64_t new_cap = *cap ? 2 * *cap : 16;
    void *grown = realloc(*arr, (size_t)new_cap * size);
    if (!grown)
        return 0;
    *arr = grown;
    *cap = new_cap;
    return 1;
}

/* general.alignment must stay a uint32 power of two (see read_alignment). */
static int alignment_ok(const char *key, moe_gguf_type type, const wbuf *value)
{
    if (strcmp(key, "general.alignment") != 0)
        return 1;
    if (type != MOE_GGUF_UINT32)
        return 0;
    uint32_t a = (uint32_t)moe_gguf_load_le(value->p + 4, 4);
    return a != 0 && (a & (a - 1)) == 0;
}

/* The slot for `key`: the existing one, or a new one at the end. */
static moe_status writer_slot(moe_gguf_writer *w, const char *key, int64_t *out)
{
    *out = writer_find_key(w, key);
    if (*out >= 0)
        return MOE_OK;
    size_t len = strlen(key) + 1;
    char *copy = malloc(len);
    if (!copy || !writer_grow((void **)&w->kvs, w->n_kv, &w->cap_kv, sizeof *w->kvs)) {
        free(copy);
        return MOE_ERR_NOMEM;
    }
    memcpy(copy, key, len);
    *out = w->n_kv++;
    w->kvs[*out] = (writer_kv){ .key = copy };
    return MOE_OK;
}

/* Stores an encoded value (type tag first) under `key`, taking `value`'s
 * buffer in every case. Replaces an existing key in place. Keys cannot
 * change once a write has begun: the header is already out. */
static moe_status writer_set(moe_gguf_writer *w, const char *key, moe_gguf_type type, wbuf *value)
{
    moe_status st = MOE_OK;
    int64_t i = -1;
    if (!w || !key || !*key || w->file)
        st = MOE_ERR_INVALID_ARG;
    else if (value->oom)
        st = MOE_ERR_NOMEM;
    else if (!alignment_ok(key, type, value))
        st = MOE_ERR_INVALID_ARG;
    else
        st = writer_slot(w, key, &i);
    if (st != MOE_OK) {
        free(value->p);
        return st;
    }
    free(w->kvs[i].bytes);
    w->kvs[i].type = type;
    w->kvs[i].bytes = value->p;
    w->kvs[i].n_bytes = value->n;
    return MOE_OK;
}

static moe_status writer_set_scalar(moe_gguf_writer *w, const char *key, moe_gguf_type type,
                                    uint64_t bits)
{
    wbuf b = { 0 };
    wbuf_put_le(&b, (uint64_t)type, 4);
    wbuf_put_le(&b, bits, moe_gguf_type_size(type));
    return writer_set(w, key, type, &b);
}

moe_status moe_gguf_writer_set_u8(moe_gguf_writer *w, const char *key, uint8_t v)
{
    return writer_set_scalar(w, key, MOE_GGUF_UINT8, v);
}

moe_status moe_gguf_writer_set_i8(moe_gguf_writer *w, const char *key, int8_t v)
{
    return writer_set_scalar(w, key, MOE_GGUF_INT8, (uint8_t)v);
}

moe_status moe_gguf_writer_set_u16(moe_gguf_writer *w, const char *key, uint16_t v)
{
    return writer_set_scalar(w, key, MOE_GGUF_UINT16, v);
}

moe_status moe_gguf_writer_set_i16(moe_gguf_writer *w, const char *key, int16_t v)
{
    return writer_set_scalar(w, key, MOE_GGUF_INT16, (uint16_t)v);
}

moe_status moe_gguf_writer_set_u32(moe_gguf_writer *w, const char *key, uint32_t v)
{
    return writer_set_scalar(w, key, MOE_GGUF_UINT32, v);
}

moe_status moe_gguf_writer_set_i32(moe_gguf_writer *w, const char *key, int32_t v)
{
    return writer_set_scalar(w, key, MOE_GGUF_INT32, (uint32_t)v);
}

moe_status moe_gguf_writer_set_f32(moe_gguf_writer *w, const char *key, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return writer_set_scalar(w, key, MOE_GGUF_FLOAT32, bits);
}

moe_status moe_gguf_writer_set_u64(moe_gguf_writer *w, const char *key, uint64_t v)
{
    return writer_set_scalar(w, key, MOE_GGUF_UINT64, v);
}

moe_status moe_gguf_writer_set_i64(moe_gguf_writer *w, const char *key, int64_t v)
{
    return writer_set_scalar(w, key, MOE_GGUF_INT64, (uint64_t)v);
}

moe_status moe_gguf_writer_set_f64(moe_gguf_writer *w, const char *key, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return writer_set_scalar(w, key, MOE_GGUF_FLOAT64, bits);
}

moe_status moe_gguf_writer_set_bool(moe_gguf_writer *w, const char *key, bool v)
{
    return writer_set_scalar(w, key, MOE_GGUF_BOOL, v ? 1 : 0);
}

moe_status moe_gguf_writer_set_str(moe_gguf_writer *w, const char *key, const char *v)
{
    if (!v)
        return MOE_ERR_INVALID_ARG;
    wbuf b = { 0 };
    wbuf_put_le(&b, MOE_GGUF_STRING, 4);
    wbuf_put_str(&b, v, strlen(v));
    return writer_set(w, key, MOE_GGUF_STRING, &b);
}

/* Packed elements are copied as they are: GGUF and every host we build
 * for are little-endian. Bools must be 0 or 1, as the reader insists. */
moe_status moe_gguf_writer_set_arr(moe_gguf_writer *w, const char *key,
                                   moe_gguf_type elem_type, const void *data, uint64_t n)
{
    size_t size = moe_gguf_type_size(elem_type);
    uint64_t n_bytes;
    if (size == 0 || (!data && n) || !moe_mul_u64(n, size, &n_bytes) || n_bytes > SIZE_MAX)
        return MOE_ERR_INVALID_ARG;
    for (uint64_t j = 0; elem_type == MOE_GGUF_BOOL && j < n; j++)
        if (((const uint8_t *)data)[j] > 1)
            return MOE_ERR_INVALID_ARG;
    wbuf b = { 0 };
    wbuf_put_le(&b, MOE_GGUF_ARRAY, 4);
    wbuf_put_le(&b, (uint64_t)elem_type, 4);
    wbuf_put_le(&b, n, 8);
    wbuf_put(&b, data, (size_t)n_bytes);
    return writer_set(w, key, MOE_GGUF_ARRAY, &b);
}

moe_status moe_gguf_writer_set_arr_str(moe_gguf_writer *w, const char *key,
                                       const moe_str *strs, uint64_t n)
{
    if (!strs && n)
        return MOE_ERR_INVALID_ARG;
    for (uint64_t j = 0; j < n; j++)
        if ((!strs[j].ptr && strs[j].len) || strs[j].len > SIZE_MAX)
            return MOE_ERR_INVALID_ARG;
    wbuf b = { 0 };
    wbuf_put_le(&b, MOE_GGUF_ARRAY, 4);
    wbuf_put_le(&b, MOE_GGUF_STRING, 4);
    wbuf_put_le(&b, n, 8);
    for (uint64_t j = 0; j < n; j++)
        wbuf_put_str(&b, strs[j].ptr, strs[j].len);
    return writer_set(w, key, MOE_GGUF_ARRAY, &b);
}

/* Re-encodes the source value from its mapped bytes (already validated by
 * the reader), so every type, arrays included, copies exactly. */
moe_status moe_gguf_writer_copy_kv(moe_gguf_writer *w, const moe_gguf *src, int64_t i)
{
    if (!src || i < 0 || i >= src->parts[0].n_kv)
        return MOE_ERR_INVALID_ARG;
    const gguf_kv *kv = &src->parts[0].kvs[i];
    wbuf b = { 0 };
    wbuf_put_le(&b, (uint64_t)kv->type, 4);
    if (kv->type == MOE_GGUF_STRING) {
        wbuf_put_str(&b, (const char *)kv->val, kv->str_len);
    } else if (kv->type != MOE_GGUF_ARRAY) {
        wbuf_put(&b, kv->val, moe_gguf_type_size(kv->type));
    } else {
        wbuf_put_le(&b, (uint64_t)kv->arr_type, 4);
        wbuf_put_le(&b, kv->arr_len, 8);
        for (uint64_t j = 0; kv->arr_type == MOE_GGUF_STRING && j < kv->arr_len; j++) {
            moe_str s = moe_gguf_arr_str(src, i, j);
            wbuf_put_str(&b, s.ptr, s.len);
        }
        if (kv->arr_type != MOE_GGUF_STRING) /* size fits: it is mapped */
            wbuf_put(&b, kv->val, (size_t)kv->arr_len * moe_gguf_type_size(kv->arr_type));
    }
    return writer_set(w, kv->key, kv->type, &b);
}

void moe_gguf_writer_remove_key(moe_gguf_writer *w, const char *key)
{
    int64_t i = (w && key && !w->file) ? writer_find_key(w, key) : -1;
    if (i < 0)
        return;
    free(w->kvs[i].key);
    free(w->kvs[i].bytes);
    memmove(&w->kvs[i], &w->kvs[i + 1], (size_t)(w->n_kv - i - 1) * sizeof *w->kvs);
    w->n_kv--;
}

/* Shape and size checks shared with the reader's: dims > 0, the element
 * count fits int64, the row is a whole number of blocks. */
static moe_status tensor_size(moe_type type, uint32_t n_dims, const int64_t *ne,
                              int64_t *ne_out, uint64_t *size_bytes)
{
    if (!moe_type_is_known((int)type))
        return MOE_ERR_UNSUPPORTED;
    if (n_dims < 1 || n_dims > MOE_GGUF_MAX_DIMS || !ne)
        return MOE_ERR_INVALID_ARG;
    uint64_t n_elems = 1;
    for (uint32_t d = 0; d < MOE_GGUF_MAX_DIMS; d++) {
        int64_t v = d < n_dims ? ne[d] : 1;
        if (v <= 0 || !moe_mul_u64(n_elems, (uint64_t)v, &n_elems) || n_elems > INT64_MAX)
            return MOE_ERR_INVALID_ARG;
        ne_out[d] = v;
    }
    size_t row_bytes = moe_type_row_bytes(type, ne_out[0]);
    uint64_t n_rows = (uint64_t)(ne_out[1] * ne_out[2] * ne_out[3]);
    if (row_bytes == 0 || !moe_mul_u64(row_bytes, n_rows, size_bytes) || *size_bytes > SIZE_MAX)
        return MOE_ERR_INVALID_ARG;
    return MOE_OK;
}

moe_status moe_gguf_writer_add_tensor(moe_gguf_writer *w, const char *name,
                                      moe_type type, uint32_t n_dims,
                                      const int64_t *ne, const void *data)
{
    if (!w || !name || !*name || strlen(name) > WRITER_MAX_NAME || w->file)
        return MOE_ERR_INVALID_ARG;
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return MOE_ERR_INVALID_ARG;
    writer_tensor t = { .type = type, .n_dims = n_dims, .data = data };
    moe_status st = tensor_size(type, n_dims, ne, t.ne, &t.size_bytes);
    if (st != MOE_OK)
        return st;
    size_t len = strlen(name) + 1;
    if (!writer_grow((void **)&w->tensors, w->n_tensors, &w->cap_tensors, sizeof *w->tensors) ||
        !(t.name = malloc(len)))
        return MOE_ERR_NOMEM;
    memcpy(t.name, name, len);
    w->tensors[w->n_tensors++] = t;
    return MOE_OK;
}

/* ---- output ---- */

static uint32_t writer_alignment(const moe_gguf_writer *w)
{
    int64_t i = writer_find_key(w, "general.alignment");
    if (i < 0) /* when present it was checked by alignment_ok */
        return MOE_GGUF_DEFAULT_ALIGNMENT;
    return (uint32_t)moe_gguf_load_le(w->kvs[i].bytes + 4, 4);
}

static uint64_t pad_bytes(uint64_t n, uint32_t alignment)
{
    return (alignment - n % alignment) % alignment;
}

/* Assigns each tensor its offset in the data section; false on overflow. */
static int writer_layout(moe_gguf_writer *w)
{
    uint64_t offset = 0;
    for (int64_t i = 0; i < w->n_tensors; i++) {
        writer_tensor *t = &w->tensors[i];
        t->offset = offset;
        if (!moe_add_u64(offset, t->size_bytes, &offset) ||
            !moe_add_u64(offset, pad_bytes(offset, w->alignment), &offset))
            return 0;
    }
    return 1;
}

static int writer_put(moe_gguf_writer *w, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, w->file) != n)
        return 0;
    w->n_written += n;
    return 1;
}

static int writer_pad(moe_gguf_writer *w)
{
    static const uint8_t zeros[4096];
    uint64_t n = pad_bytes(w->n_written, w->alignment);
    while (n > 0) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        if (!writer_put(w, zeros, k))
            return 0;
        n -= k;
    }
    return 1;
}

/* Header, key/values and tensor infos, encoded into one buffer. */
static void writer_encode_header(const moe_gguf_writer *w, wbuf *b)
{
    wbuf_put(b, MOE_GGUF_MAGIC, 4);
    wbuf_put_le(b, 3, 4);
    wbuf_put_le(b, (uint64_t)w->n_tensors, 8);
    wbuf_put_le(b, (uint64_t)w->n_kv, 8);
    for (int64_t i = 0; i < w->n_kv; i++) {
        wbuf_put_str(b, w->kvs[i].key, strlen(w->kvs[i].key));
        wbuf_put(b, w->kvs[i].bytes, w->kvs[i].n_bytes);
    }
    for (int64_t i = 0; i < w->n_tensors; i++) {
        const writer_tensor *t = &w->tensors[i];
        wbuf_put_str(b, t->name, strlen(t->name));
        wbuf_put_le(b, t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++)
            wbuf_put_le(b, (uint64_t)t->ne[d], 8);
        wbuf_put_le(b, (uint64_t)t->type, 4);
        wbuf_put_le(b, t->offset, 8);
    }
}

/* Reports a failed write with the system's reason, then drops the
 * temporary file. */
static moe_status writer_io_fail(moe_gguf_writer *w, moe_err *err, const char *what)
{
    int e = errno;
    moe_status st = moe_fail(err, MOE_ERR_IO, "%s: %s: %s (temporary file %s)", w->path, what,
                             e ? strerror(e) : "unknown error", w->tmp_path);
    writer_abort_stream(w);
    return st;
}

static moe_status writer_open_tmp(moe_gguf_writer *w, const char *path, moe_err *err)
{
    size_t len = strlen(path);
    w->path = malloc(len + 1);
    w->tmp_path = malloc(len + 5);
    if (!w->path || !w->tmp_path) {
        writer_abort_stream(w);
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(w->path, path, len + 1);
    memcpy(w->tmp_path, path, len);
    memcpy(w->tmp_path + len, ".tmp", 5);
    errno = 0;
    w->file = moe_platform_fopen(w->tmp_path, "wb");
    if (!w->file)
        return writer_io_fail(w, err, "cannot create");
    w->n_written = 0;
    w->next_tensor = 0;
    w->part_written = 0;
    return MOE_OK;
}

moe_status moe_gguf_writer_begin(moe_gguf_writer *w, const char *path, moe_err *err)
{
    if (!w || !path)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_gguf_writer_begin: NULL argument");
    if (w->file)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "%s: a write to %s is already in progress",
                        path, w->path);
    w->alignment = writer_alignment(w);
    if (!writer_layout(w))
        return moe_fail(err, MOE_ERR_RANGE, "%s: tensor data size overflows", path);
    wbuf header = { 0 };
    writer_encode_header(w, &header);
    if (header.oom) {
        free(header.p);
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory for the header", path);
    }
    moe_status st = writer_open_tmp(w, path, err);
    if (st == MOE_OK) {
        errno = 0;
        if (!writer_put(w, header.p, header.n) || !writer_pad(w))
            st = writer_io_fail(w, err, "write failed");
    }
    free(header.p);
    return st;
}

moe_status moe_gguf_writer_write_tensor_part(moe_gguf_writer *w, int64_t idx,
                                             const void *data, size_t size, moe_err *err)
{
    if (!w || !w->file)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "write_tensor_part: no write in progress");
    if (idx != w->next_tensor || idx >= w->n_tensors || !data)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "%s: expected data of tensor %" PRId64
                        " ('%s') next, got %s for index %" PRId64, w->path, w->next_tensor,
                        w->next_tensor < w->n_tensors ? w->tensors[w->next_tensor].name : "none",
                        data ? "data" : "NULL", idx);
    const writer_tensor *t = &w->tensors[idx];
    if ((uint64_t)size > t->size_bytes - w->part_written)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "%s: tensor '%s': %zu more bytes after %"
                        PRIu64 " of %" PRIu64 " overrun it", w->path, t->name, size,
                        w->part_written, t->size_bytes);
    errno = 0;
    if (!writer_put(w, data, size))
        return writer_io_fail(w, err, "write failed");
    w->part_written += size;
    if (w->part_written == t->size_bytes) { /* sizes are never 0 */
        if (!writer_pad(w))
            return writer_io_fail(w, err, "write failed");
        w->next_tensor++;
        w->part_written = 0;
    }
    return MOE_OK;
}

moe_status moe_gguf_writer_write_tensor_data(moe_gguf_writer *w, int64_t idx,
                                             const void *data, moe_err *err)
{
    if (!w || !w->file)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "write_tensor_data: no write in progress");
    if (w->part_written != 0)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "%s: whole data for tensor %" PRId64
                        " after part of tensor '%s' was written", w->path, idx,
                        w->tensors[w->next_tensor].name);
    if (idx != w->next_tensor || idx >= w->n_tensors)
        return moe_gguf_writer_write_tensor_part(w, idx, data, 0, err);
    return moe_gguf_writer_write_tensor_part(w, idx, data, (size_t)w->tensors[idx].size_bytes,
                                             err);
}

moe_status moe_gguf_writer_finish(moe_gguf_writer *w, moe_err *err)
{
    if (!w || !w->file)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "writer_finish: no write in progress");
    if (w->next_tensor != w->n_tensors)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "%s: finish after %" PRId64 " of %" PRId64
                        " tensors were written", w->path, w->next_tensor, w->n_tensors);
    errno = 0;
    if (fflush(w->file) != 0 || ferror(w->file))
        return writer_io_fail(w, err, "write failed");
    FILE *f = w->file;
    w->file = NULL;
    if (fclose(f) != 0) {
        int e = errno;
        moe_platform_remove_file(w->tmp_path);
        errno = e;
        return writer_io_fail(w, err, "write failed on close");
    }
    moe_status st = moe_platform_rename_file(w->tmp_path, w->path, err);
    if (st != MOE_OK)
        moe_platform_remove_file(w->tmp_path);
    writer_abort_stream(w); /* frees the paths; the file is closed */
    return st;
}

moe_status moe_gguf_writer_write_file(moe_gguf_writer *w, const char *path, moe_err *err)
{
    if (!w || !path)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_gguf_writer_write_file: NULL argument");
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (!w->tensors[i].data)
            return moe_fail(err, MOE_ERR_INVALID_ARG, "%s: tensor '%s' has no data (stream it"
                            " with begin/write_tensor_data instead)", path, w->tensors[i].name);
    moe_status st = moe_gguf_writer_begin(w, path, err);
    for (int64_t i = 0; st == MOE_OK && i < w->n_tensors; i++)
        st = moe_gguf_writer_write_tensor_data(w, i, w->tensors[i].data, err);
    return st == MOE_OK ? moe_gguf_writer_finish(w, err) : st;
}

/*
 * gguf-parse.c — reads and validates the header of one GGUF file (magic,
 * version, key/values, tensor infos) from bytes that are already mapped.
 * This is the only code that trusts nothing: every count, length, offset
 * and dimension is checked against the bytes left and against overflow
 * before it is used, so a hostile file can neither read out of bounds nor
 * make us allocate more than a small multiple of its own size.
 *
 * Layout (little-endian, GGUF v2/v3):
 *   "GGUF" u32 version  u64 n_tensors  u64 n_kv
 *   n_kv    x { str key, u32 type, value }        str = u64 len + bytes
 *   n_tensors x { str name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset }
 *   padding to `general.alignment` (default 32), then the data section.
 * Arrays ({u32 elem type, u64 n, elements}) of arrays are rejected as
 * unsupported: llama.cpp neither writes nor reads them.
 * Messages read "<path>: <fault> (at byte offset N, key 'k' | tensor 't')".
 */
#include "gguf-internal.h"
#include "util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Smallest possible encodings, used to bound counts before allocating:
 * a kv is key length + 1 key byte + type + 1 value byte; a tensor info is
 * name length + 1 name byte + n_dims + one dimension + type + offset. */
#define GGUF_MIN_KV_BYTES     14u
#define GGUF_MIN_TENSOR_BYTES 33u

/* Reading position in one part plus what to name in messages. */
typedef struct gguf_cursor {
    const uint8_t *data;
    uint64_t       size;
    uint64_t       pos;
    const char    *path;
    char           where[160]; /* "key 'x'" / "tensor 'y'" or "" */
    moe_err       *err;
} gguf_cursor;

static moe_status cursor_fail(gguf_cursor *c, moe_status st, uint64_t at,
                              const char *fmt, ...) MOE_PRINTF(4, 5);

static moe_status cursor_fail(gguf_cursor *c, moe_status st, uint64_t at,
                              const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return moe_fail(c->err, st, "%s: %s (at byte offset %" PRIu64 "%s%s)", c->path, what,
                    at, c->where[0] ? ", " : "", c->where);
}

static uint64_t cursor_left(const gguf_cursor *c)
{
    return c->size - c->pos;
}

static moe_status cursor_need(gguf_cursor *c, uint64_t n, const char *what)
{
    if (n > cursor_left(c))
        return cursor_fail(c, MOE_ERR_FORMAT, c->pos,
                           "truncated %s: needs %" PRIu64 " bytes, %" PRIu64 " left",
                           what, n, cursor_left(c));
    return MOE_OK;
}

static moe_status read_u32(gguf_cursor *c, const char *what, uint32_t *out)
{
    moe_status st = cursor_need(c, 4, what);
    if (st == MOE_OK) {
        *out = (uint32_t)moe_gguf_load_le(c->data + c->pos, 4);
        c->pos += 4;
    }
    return st;
}

static moe_status read_u64(gguf_cursor *c, const char *what, uint64_t *out)
{
    moe_status st = cursor_need(c, 8, what);
    if (st == MOE_OK) {
        *out = moe_gguf_load_le(c->data + c->pos, 8);
        c->pos += 8;
    }
    return st;
}

/* A length-prefixed string; *ptr points into the file. */
static moe_status read_str(gguf_cursor *c, const char *what, const uint8_t **ptr, uint64_t *len)
{
    uint64_t at = c->pos;
    moe_status st = read_u64(c, what, len);
    if (st != MOE_OK)
        return st;
    if (*len > cursor_left(c))
        return cursor_fail(c, MOE_ERR_FORMAT, at,
                           "%s length %" PRIu64 " runs past end of file (%" PRIu64 " bytes left)",
                           what, *len, cursor_left(c));
    *ptr = c->data + c->pos;
    c->pos += *len;
    return MOE_OK;
}

/* A key or tensor name: non-empty, no NUL inside, copied NUL-terminated. */
static moe_status read_name(gguf_cursor *c, const char *what, char **out)
{
    uint64_t at = c->pos;
    const uint8_t *ptr;
    uint64_t len;
    moe_status st = read_str(c, what, &ptr, &len);
    if (st != MOE_OK)
        return st;
    if (len == 0)
        return cursor_fail(c, MOE_ERR_FORMAT, at, "empty %s", what);
    if (memchr(ptr, 0, (size_t)len))
        return cursor_fail(c, MOE_ERR_FORMAT, at, "%s contains a NUL byte", what);
    *out = malloc((size_t)len + 1);
    if (!*out)
        return cursor_fail(c, MOE_ERR_NOMEM, at, "out of memory for %s", what);
    memcpy(*out, ptr, (size_t)len);
    (*out)[len] = '\0';
    return MOE_OK;
}

/* Checks `n` packed values of fixed-size `type` fit and that bools are
 * 0 or 1 (anything else would be undefined behaviour when read as bool). */
static moe_status read_fixed(gguf_cursor *c, moe_gguf_type type, uint64_t n, int is_array,
                             const uint8_t **out)
{
    uint64_t at = c->pos;
    size_t size = moe_gguf_type_size(type);
    if (is_array && n > cursor_left(c) / size)
        return cursor_fail(c, MOE_ERR_FORMAT, at, "array length %" PRIu64 " of %s is more than"
                           " the file can hold (%" PRIu64 " bytes left)",
                           n, moe_gguf_type_name(type), cursor_left(c));
    moe_status st = cursor_need(c, n * size, "value");
    if (st != MOE_OK)
        return st;
    const uint8_t *p = c->data + c->pos;
    for (uint64_t i = 0; type == MOE_GGUF_BOOL && i < n; i++)
        if (p[i] > 1)
            return cursor_fail(c, MOE_ERR_FORMAT, at + i, "bool value %u is neither 0 nor 1", p[i]);
    *out = p;
    c->pos += n * size;
    return MOE_OK;
}

static moe_status read_str_array(gguf_cursor *c, gguf_kv *kv)
{
    if (kv->arr_len > cursor_left(c) / 8)
        return cursor_fail(c, MOE_ERR_FORMAT, c->pos,
                           "array length %" PRIu64 " of strings is more than the file can hold",
                           kv->arr_len);
    kv->strs = malloc((size_t)(kv->arr_len ? kv->arr_len : 1) * sizeof *kv->strs);
    if (!kv->strs)
        return cursor_fail(c, MOE_ERR_NOMEM, c->pos, "out of memory for a string array");
    kv->val = c->data + c->pos;
    for (uint64_t j = 0; j < kv->arr_len; j++) {
        const uint8_t *ptr;
        uint64_t len;
        kv->strs[j] = c->data + c->pos;
        moe_status st = read_str(c, "string array element", &ptr, &len);
        if (st != MOE_OK)
            return st;
    }
    return MOE_OK;
}

static moe_status read_array(gguf_cursor *c, gguf_kv *kv)
{
    uint64_t at = c->pos;
    uint32_t type;
    moe_status st = read_u32(c, "array element type", &type);
    if (st != MOE_OK)
        return st;
    if (type == MOE_GGUF_ARRAY)
        return cursor_fail(c, MOE_ERR_UNSUPPORTED, at, "arrays of arrays are not supported");
    if (type > MOE_GGUF_FLOAT64)
        return cursor_fail(c, MOE_ERR_FORMAT, at, "unknown array element type %" PRIu32, type);
    kv->arr_type = (moe_gguf_type)type;
    st = read_u64(c, "array length", &kv->arr_len);
    if (st != MOE_OK)
        return st;
    if (type == MOE_GGUF_STRING)
        return read_str_array(c, kv);
    return read_fixed(c, kv->arr_type, kv->arr_len, 1, &kv->val);
}

static moe_status read_scalar_str(gguf_cursor *c, gguf_kv *kv)
{
    uint64_t at = c->pos;
    moe_status st = read_str(c, "string value", &kv->val, &kv->str_len);
    if (st != MOE_OK)
        return st;
    kv->str_copy = malloc((size_t)kv->str_len + 1);
    if (!kv->str_copy)
        return cursor_fail(c, MOE_ERR_NOMEM, at, "out of memory for a string value");
    memcpy(kv->str_copy, kv->val, (size_t)kv->str_len);
    kv->str_copy[kv->str_len] = '\0';
    return MOE_OK;
}

static moe_status read_kv(gguf_cursor *c, gguf_kv *kv)
{
    c->where[0] = '\0';
    moe_status st = read_name(c, "key", &kv->key);
    if (st != MOE_OK)
        return st;
    snprintf(c->where, sizeof c->where, "key '%.120s'", kv->key);
    uint64_t at = c->pos;
    uint32_t type;
    st = read_u32(c, "value type", &type);
    if (st != MOE_OK)
        return st;
    if (type > MOE_GGUF_FLOAT64)
        return cursor_fail(c, MOE_ERR_FORMAT, at, "unknown value type %" PRIu32, type);
    kv->type = (moe_gguf_type)type;
    if (type == MOE_GGUF_ARRAY)
        return read_array(c, kv);
    if (type == MOE_GGUF_STRING)
        return read_scalar_str(c, kv);
    return read_fixed(c, kv->type, 1, 0, &kv->val);
}

/* general.alignment, if present, must be a uint32 power of two. */
static moe_status read_alignment(gguf_cursor *c, gguf_part *part)
{
    part->alignment = MOE_GGUF_DEFAULT_ALIGNMENT;
    for (int64_t i = 0; i < part->n_kv; i++) {
        const gguf_kv *kv = &part->kvs[i];
        if (strcmp(kv->key, "general.alignment") != 0)
            continue;
        uint64_t at = (uint64_t)(kv->val - c->data);
        snprintf(c->where, sizeof c->where, "key 'general.alignment'");
        if (kv->type != MOE_GGUF_UINT32)
            return cursor_fail(c, MOE_ERR_FORMAT, at, "general.alignment has type %s, must be uint32",
                               moe_gguf_type_name(kv->type));
        uint32_t a = (uint32_t)moe_gguf_load_le(kv->val, 4);
        if (a == 0 || (a & (a - 1)) != 0)
            return cursor_fail(c, MOE_ERR_FORMAT, at, "general.alignment %" PRIu32
                               " is not a power of two", a);
        part->alignment = a;
    }
    return MOE_OK;
}

static moe_status read_dims(gguf_cursor *c, moe_gguf_tensor *t)
{
    uint64_t at = c->pos;
    moe_status st = read_u32(c, "tensor n_dims", &t->n_dims);
    if (st != MOE_OK)
        return st;
    if (t->n_dims < 1 || t->n_dims > MOE_GGUF_MAX_DIMS)
        return cursor_fail(c, MOE_ERR_FORMAT, at, "n_dims %" PRIu32 " is not in 1..%d",
                           t->n_dims, MOE_GGUF_MAX_DIMS);
    int64_t n_elems = 1;
    for (uint32_t d = 0; d < MOE_GGUF_MAX_DIMS; d++) {
        uint64_t v = 1;
        at = c->pos;
        if (d < t->n_dims && (st = read_u64(c, "tensor dimension", &v)) != MOE_OK)
            return st;
        if (v == 0 || v > (uint64_t)INT64_MAX)
            return cursor_fail(c, MOE_ERR_FORMAT, at, "dimension %" PRIu32 " is %" PRId64
                               " (must be > 0)", d, (int64_t)v);
        if ((uint64_t)n_elems > (uint64_t)INT64_MAX / v)
            return cursor_fail(c, MOE_ERR_FORMAT, at, "element count overflows int64");
        t->ne[d] = (int64_t)v;
        n_elems *= (int64_t)v;
    }
    return MOE_OK;
}

/* Type and byte size: a known type whose block divides the row. */
static moe_status read_type_and_size(gguf_cursor *c, moe_gguf_tensor *t)
{
    uint64_t at = c->pos;
    uint32_t type;
    moe_status st = read_u32(c, "tensor type", &type);
    if (st != MOE_OK)
        return st;
    if (type > INT32_MAX || !moe_type_is_known((int)type))
        return cursor_fail(c, MOE_ERR_UNSUPPORTED, at, "unknown tensor type %" PRIu32, type);
    t->type = (moe_type)type;
    size_t row_bytes = moe_type_row_bytes(t->type, t->ne[0]);
    if (row_bytes == 0)
        return cursor_fail(c, MOE_ERR_FORMAT, at, "row of %" PRId64 " elements is not a multiple"
                           " of the %s block size %" PRId64, t->ne[0], moe_type_name(t->type),
                           moe_type_block_elems(t->type));
    uint64_t n_rows = (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]); /* fits: checked in read_dims */
    if (!moe_mul_u64(row_bytes, n_rows, &t->size_bytes) || t->size_bytes > (uint64_t)SIZE_MAX)
        return cursor_fail(c, MOE_ERR_FORMAT, at, "size in bytes overflows");
    return MOE_OK;
}

static moe_status append_tensor(moe_gguf *g, gguf_cursor *c, moe_gguf_tensor **out)
{
    if (g->n_tensors == g->cap_tensors) {
        int64_t cap = g->cap_tensors ? 2 * g->cap_tensors : 16;
        moe_gguf_tensor *grown = realloc(g->tensors, (size_t)cap * sizeof *grown);
        if (!grown)
            return cursor_fail(c, MOE_ERR_NOMEM, c->pos, "out of memory for tensor infos");
        g->tensors = grown;
        g->cap_tensors = cap;
    }
    *out = &g->tensors[g->n_tensors++];
    memset(*out, 0, sizeof **out);
    return MOE_OK;
}

static moe_status read_tensor_info(gguf_cursor *c, moe_gguf *g, uint32_t split)
{
    moe_gguf_tensor *t = NULL;
    moe_status st = append_tensor(g, c, &t);
    if (st != MOE_OK)
        return st;
    c->where[0] = '\0';
    t->split = split;
    char *name = NULL;
    st = read_name(c, "tensor name", &name);
    t->name = name;
    if (st != MOE_OK)
        return st;
    snprintf(c->where, sizeof c->where, "tensor '%.120s'", t->name);
    if ((st = read_dims(c, t)) != MOE_OK || (st = read_type_and_size(c, t)) != MOE_OK)
        return st;
    return read_u64(c, "tensor data offset", &t->offset);
}

/* Once the data section's start is known: each tensor's offset is aligned
 * and its bytes lie inside the file. Sets the data pointers. */
static moe_status check_tensor_data(gguf_cursor *c, gguf_part *part, moe_gguf_tensor *t)
{
    snprintf(c->where, sizeof c->where, "tensor '%.120s'", t->name);
    uint64_t start, end;
    if (t->offset % part->alignment != 0)
        return cursor_fail(c, MOE_ERR_FORMAT, part->data_offset, "data offset %" PRIu64
                           " is not aligned to %" PRIu32, t->offset, part->alignment);
    if (!moe_add_u64(part->data_offset, t->offset, &start) ||
        !moe_add_u64(start, t->size_bytes, &end) || end > part->size)
        return cursor_fail(c, MOE_ERR_FORMAT, part->data_offset, "data (offset %" PRIu64 ", %"
                           PRIu64 " bytes) runs past end of file (%" PRIu64 " bytes)",
                           t->offset, t->size_bytes, part->size);
    t->data = part->prefix_bytes ? NULL : part->data + start; /* header-only: not present */
    return MOE_OK;
}

/* The kv array grows as key/values are read, so a lying count costs
 * nothing; entries are zeroed so a failed part frees cleanly. */
static moe_status append_kv(gguf_cursor *c, gguf_part *part, gguf_kv **out)
{
    if (part->n_kv == part->cap_kv) {
        int64_t cap = part->cap_kv ? 2 * part->cap_kv : 16;
        gguf_kv *grown = realloc(part->kvs, (size_t)cap * sizeof *grown);
        if (!grown)
            return cursor_fail(c, MOE_ERR_NOMEM, c->pos, "out of memory for key/values");
        part->kvs = grown;
        part->cap_kv = cap;
    }
    *out = &part->kvs[part->n_kv++];
    memset(*out, 0, sizeof **out);
    return MOE_OK;
}

static moe_status read_header(gguf_cursor *c, gguf_part *part, uint64_t *n_kv,
                              uint64_t *n_tensors)
{
    if (c->size < 4 + 4 + 8 + 8)
        return cursor_fail(c, MOE_ERR_FORMAT, 0, "truncated header: file has %" PRIu64
                           " bytes, a GGUF header needs 24", c->size);
    if (memcmp(c->data, MOE_GGUF_MAGIC, 4) != 0)
        return cursor_fail(c, MOE_ERR_FORMAT, 0, "bad magic: not a GGUF file");
    c->pos = 4;
    read_u32(c, "version", &part->version);
    read_u64(c, "tensor count", n_tensors);
    read_u64(c, "key/value count", n_kv);
    uint32_t v = part->version;
    if (v == 0x02000000u || v == 0x03000000u)
        return cursor_fail(c, MOE_ERR_UNSUPPORTED, 4, "big-endian GGUF files are not supported");
    if (v != 2 && v != 3)
        return cursor_fail(c, MOE_ERR_UNSUPPORTED, 4, "unsupported GGUF version %" PRIu32
                           " (versions 2 and 3 are supported)", v);
    if (*n_kv > cursor_left(c) / GGUF_MIN_KV_BYTES)
        return cursor_fail(c, MOE_ERR_FORMAT, 16, "key/value count %" PRIu64
                           " is more than the file can hold", *n_kv);
    if (*n_tensors > cursor_left(c) / GGUF_MIN_TENSOR_BYTES)
        return cursor_fail(c, MOE_ERR_FORMAT, 8, "tensor count %" PRIu64
                           " is more than the file can hold", *n_tensors);
    return MOE_OK;
}

moe_status moe_gguf_parse_part(moe_gguf *g, gguf_part *part, uint32_t split, moe_err *err)
{
    /* A header-only parse reads the prefix; extents are still checked
     * against the whole file's size. */
    gguf_cursor c = { .data = part->data, .size = part->prefix_bytes ? part->prefix_bytes : part->size,
                      .path = part->path, .err = err };
    uint64_t n_kv, n_tensors;
    moe_status st = read_header(&c, part, &n_kv, &n_tensors);
    for (uint64_t i = 0; st == MOE_OK && i < n_kv; i++) {
        gguf_kv *kv = NULL;
        if ((st = append_kv(&c, part, &kv)) == MOE_OK)
            st = read_kv(&c, kv);
    }
    if (st == MOE_OK)
        st = read_alignment(&c, part);
    if (st != MOE_OK)
        return st;
    c.where[0] = '\0';
    if (n_tensors > cursor_left(&c) / GGUF_MIN_TENSOR_BYTES)
        return cursor_fail(&c, MOE_ERR_FORMAT, 8, "tensor count %" PRIu64
                           " is more than the rest of the file can hold", n_tensors);
    int64_t first = g->n_tensors;
    part->n_tensors = (int64_t)n_tensors;
    for (uint64_t i = 0; st == MOE_OK && i < n_tensors; i++)
        st = read_tensor_info(&c, g, split);
    if (st != MOE_OK)
        return st;
    /* The data section starts at the next multiple of the alignment. */
    uint64_t pad = (part->alignment - c.pos % part->alignment) % part->alignment;
    if (!moe_add_u64(c.pos, pad, &part->data_offset))
        return cursor_fail(&c, MOE_ERR_FORMAT, c.pos, "data section offset overflows");
    for (int64_t i = first; st == MOE_OK && i < g->n_tensors; i++)
        st = check_tensor_data(&c, part, &g->tensors[i]);
    return st;
}

void moe_gguf_free_part(gguf_part *part)
{
    if (!part)
        return;
    for (int64_t i = 0; part->kvs && i < part->n_kv; i++) {
        free(part->kvs[i].key);
        free(part->kvs[i].str_copy);
        free(part->kvs[i].strs);
    }
    free(part->kvs);
    free(part->path);
    moe_platform_unmap_file(&part->map);
    memset(part, 0, sizeof *part);
}

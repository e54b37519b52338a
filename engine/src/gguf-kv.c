/*
 * gguf-kv.c — the read-only accessors of an open moe_gguf: key/values by
 * index (type, array element type/length/data, strings, typed scalar
 * getters with lossless conversion), convenience lookups by key, and
 * tensors. Values are decoded from the mapped little-endian bytes on each
 * call (they may be unaligned), which is cheap and keeps the handle
 * immutable, hence shareable between threads. Indexes outside the valid
 * range give an "empty" answer (NULL, 0, -1 or MOE_ERR_INVALID_ARG), never
 * a crash.
 */
#include "gguf-internal.h"
#include "util.h"

#include <string.h>

size_t moe_gguf_type_size(moe_gguf_type type)
{
    switch (type) {
    case MOE_GGUF_UINT8: case MOE_GGUF_INT8: case MOE_GGUF_BOOL:       return 1;
    case MOE_GGUF_UINT16: case MOE_GGUF_INT16:                         return 2;
    case MOE_GGUF_UINT32: case MOE_GGUF_INT32: case MOE_GGUF_FLOAT32:  return 4;
    case MOE_GGUF_UINT64: case MOE_GGUF_INT64: case MOE_GGUF_FLOAT64:  return 8;
    case MOE_GGUF_STRING: case MOE_GGUF_ARRAY:                         return 0;
    }
    return 0;
}

const char *moe_gguf_type_name(moe_gguf_type type)
{
    static const char *const names[] = {
        "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
        "bool", "string", "array", "uint64", "int64", "float64",
    };
    unsigned t = (unsigned)type;
    return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

/* An integer scalar as either a signed or an unsigned 64-bit value. */
typedef struct gguf_int {
    int      is_signed;
    uint64_t u; /* when !is_signed */
    int64_t  s; /* when is_signed */
} gguf_int;

/* False if `kv` is not an integer scalar. */
static int kv_load_int(const gguf_kv *kv, gguf_int *out)
{
    size_t n = moe_gguf_type_size(kv->type);
    uint64_t raw = n ? moe_gguf_load_le(kv->val, n) : 0;
    memset(out, 0, sizeof *out);
    switch (kv->type) {
    case MOE_GGUF_UINT8: case MOE_GGUF_UINT16: case MOE_GGUF_UINT32: case MOE_GGUF_UINT64:
        out->u = raw;
        return 1;
    case MOE_GGUF_INT8:  out->s = (int8_t)raw;  break;
    case MOE_GGUF_INT16: out->s = (int16_t)raw; break;
    case MOE_GGUF_INT32: out->s = (int32_t)raw; break;
    case MOE_GGUF_INT64: out->s = (int64_t)raw; break;
    default:
        return 0;
    }
    out->is_signed = 1;
    return 1;
}

moe_status moe_gguf_kv_get_u64(const gguf_kv *kv, uint64_t *out)
{
    gguf_int v;
    if (!kv_load_int(kv, &v) || (v.is_signed && v.s < 0))
        return MOE_ERR_FORMAT;
    *out = v.is_signed ? (uint64_t)v.s : v.u;
    return MOE_OK;
}

static const gguf_kv *kv_at(const moe_gguf *g, int64_t i)
{
    if (!g || i < 0 || i >= g->parts[0].n_kv)
        return NULL;
    return &g->parts[0].kvs[i];
}

int64_t moe_gguf_n_kv(const moe_gguf *gguf)
{
    return gguf ? gguf->parts[0].n_kv : 0;
}

const char *moe_gguf_key(const moe_gguf *gguf, int64_t i)
{
    const gguf_kv *kv = kv_at(gguf, i);
    return kv ? kv->key : NULL;
}

/* Out of range: (moe_gguf_type)-1, which matches no type. */
moe_gguf_type moe_gguf_kv_type(const moe_gguf *gguf, int64_t i)
{
    const gguf_kv *kv = kv_at(gguf, i);
    return kv ? kv->type : (moe_gguf_type)-1;
}

moe_gguf_type moe_gguf_arr_type(const moe_gguf *gguf, int64_t i)
{
    const gguf_kv *kv = kv_at(gguf, i);
    return kv && kv->type == MOE_GGUF_ARRAY ? kv->arr_type : (moe_gguf_type)0;
}

uint64_t moe_gguf_arr_len(const moe_gguf *gguf, int64_t i)
{
    const gguf_kv *kv = kv_at(gguf, i);
    return kv && kv->type == MOE_GGUF_ARRAY ? kv->arr_len : 0;
}

const void *moe_gguf_arr_data(const moe_gguf *gguf, int64_t i)
{
    const gguf_kv *kv = kv_at(gguf, i);
    if (!kv || kv->type != MOE_GGUF_ARRAY || kv->arr_type == MOE_GGUF_STRING)
        return NULL;
    return kv->val;
}

moe_str moe_gguf_arr_str(const moe_gguf *gguf, int64_t i, uint64_t j)
{
    const gguf_kv *kv = kv_at(gguf, i);
    moe_str s = { NULL, 0 };
    if (!kv || kv->type != MOE_GGUF_ARRAY || kv->arr_type != MOE_GGUF_STRING || j >= kv->arr_len)
        return s;
    s.len = moe_gguf_load_le(kv->strs[j], 8); /* bounds checked at open */
    s.ptr = (const char *)kv->strs[j] + 8;
    return s;
}

moe_status moe_gguf_get_u64(const moe_gguf *gguf, int64_t i, uint64_t *out)
{
    const gguf_kv *kv = kv_at(gguf, i);
    if (!kv || !out)
        return MOE_ERR_INVALID_ARG;
    return moe_gguf_kv_get_u64(kv, out);
}

moe_status moe_gguf_get_i64(const moe_gguf *gguf, int64_t i, int64_t *out)
{
    const gguf_kv *kv = kv_at(gguf, i);
    gguf_int v;
    if (!kv || !out)
        return MOE_ERR_INVALID_ARG;
    if (!kv_load_int(kv, &v) || (!v.is_signed && v.u > (uint64_t)INT64_MAX))
        return MOE_ERR_FORMAT;
    *out = v.is_signed ? v.s : (int64_t)v.u;
    return MOE_OK;
}

/* Floats convert directly; integers only when a double holds them exactly
 * (magnitude at most 2^53). */
moe_status moe_gguf_get_f64(const moe_gguf *gguf, int64_t i, double *out)
{
    const gguf_kv *kv = kv_at(gguf, i);
    const uint64_t exact = (uint64_t)1 << 53;
    gguf_int v;
    if (!kv || !out)
        return MOE_ERR_INVALID_ARG;
    if (kv->type == MOE_GGUF_FLOAT32) {
        float f;
        memcpy(&f, kv->val, sizeof f); /* little-endian hosts only, as GGUF */
        *out = f;
    } else if (kv->type == MOE_GGUF_FLOAT64) {
        memcpy(out, kv->val, sizeof *out);
    } else if (kv_load_int(kv, &v) && !v.is_signed && v.u <= exact) {
        *out = (double)v.u;
    } else if (kv_load_int(kv, &v) && v.is_signed && v.s <= (int64_t)exact &&
               v.s >= -(int64_t)exact) {
        *out = (double)v.s;
    } else {
        return MOE_ERR_FORMAT;
    }
    return MOE_OK;
}

moe_status moe_gguf_get_bool(const moe_gguf *gguf, int64_t i, bool *out)
{
    const gguf_kv *kv = kv_at(gguf, i);
    if (!kv || !out)
        return MOE_ERR_INVALID_ARG;
    if (kv->type != MOE_GGUF_BOOL)
        return MOE_ERR_FORMAT;
    *out = kv->val[0] != 0;
    return MOE_OK;
}

moe_status moe_gguf_get_str(const moe_gguf *gguf, int64_t i, moe_str *out)
{
    const gguf_kv *kv = kv_at(gguf, i);
    if (!kv || !out)
        return MOE_ERR_INVALID_ARG;
    if (kv->type != MOE_GGUF_STRING)
        return MOE_ERR_FORMAT;
    out->ptr = (const char *)kv->val;
    out->len = kv->str_len;
    return MOE_OK;
}

uint64_t moe_gguf_u64_or(const moe_gguf *gguf, const char *key, uint64_t def)
{
    uint64_t v;
    return moe_gguf_get_u64(gguf, moe_gguf_find_key(gguf, key), &v) == MOE_OK ? v : def;
}

double moe_gguf_f64_or(const moe_gguf *gguf, const char *key, double def)
{
    double v;
    return moe_gguf_get_f64(gguf, moe_gguf_find_key(gguf, key), &v) == MOE_OK ? v : def;
}

bool moe_gguf_bool_or(const moe_gguf *gguf, const char *key, bool def)
{
    bool v;
    return moe_gguf_get_bool(gguf, moe_gguf_find_key(gguf, key), &v) == MOE_OK ? v : def;
}

const char *moe_gguf_str_or(const moe_gguf *gguf, const char *key, const char *def)
{
    const gguf_kv *kv = kv_at(gguf, moe_gguf_find_key(gguf, key));
    return kv && kv->type == MOE_GGUF_STRING ? kv->str_copy : def;
}

int64_t moe_gguf_n_tensors(const moe_gguf *gguf)
{
    return gguf ? gguf->n_tensors : 0;
}

const moe_gguf_tensor *moe_gguf_tensor_at(const moe_gguf *gguf, int64_t i)
{
    if (!gguf || i < 0 || i >= gguf->n_tensors)
        return NULL;
    return &gguf->tensors[i];
}

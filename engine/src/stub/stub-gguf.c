/*
 * stub-gguf.c — TEMPORARY stand-in for the GGUF reader the "gguf" helper is
 * writing, so the forward pass can be developed before it lands. Reads the
 * whole file into memory (no mmap), checks little. Reverted before merge.
 */
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct stub_kv {
    char *key;
    moe_gguf_type type, arr_type;
    uint64_t arr_len;
    const uint8_t *val; /* points at the value bytes in the file */
    char *str_copy;
} stub_kv;

struct moe_gguf {
    uint8_t *buf;
    uint64_t size;
    uint32_t version, alignment;
    int64_t n_kv, n_tensors;
    stub_kv *kv;
    moe_gguf_tensor *t;
};

static size_t scalar_size(moe_gguf_type t)
{
    switch (t) {
    case MOE_GGUF_UINT8: case MOE_GGUF_INT8: case MOE_GGUF_BOOL: return 1;
    case MOE_GGUF_UINT16: case MOE_GGUF_INT16: return 2;
    case MOE_GGUF_UINT32: case MOE_GGUF_INT32: case MOE_GGUF_FLOAT32: return 4;
    case MOE_GGUF_UINT64: case MOE_GGUF_INT64: case MOE_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

typedef struct rd { const uint8_t *p, *end; int bad; } rd;

static uint64_t rd_u(rd *r, int n)
{
    uint64_t v = 0;
    if (r->end - r->p < n) { r->bad = 1; return 0; }
    for (int i = 0; i < n; i++) v |= (uint64_t)r->p[i] << (8 * i);
    r->p += n;
    return v;
}

static void rd_skip(rd *r, uint64_t n)
{
    if ((uint64_t)(r->end - r->p) < n) { r->bad = 1; r->p = r->end; return; }
    r->p += n;
}

static void skip_value(rd *r, moe_gguf_type t)
{
    if (t == MOE_GGUF_STRING) { uint64_t l = rd_u(r, 8); rd_skip(r, l); return; }
    size_t s = scalar_size(t);
    if (!s) { r->bad = 1; return; }
    rd_skip(r, s);
}

moe_status moe_gguf_open(const char *path, moe_gguf **out, moe_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return moe_fail(err, MOE_ERR_IO, "%s: cannot open", path);
    fseek(f, 0, SEEK_END);
    long long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    moe_gguf *g = calloc(1, sizeof *g);
    g->buf = malloc(sz > 0 ? (size_t)sz : 1);
    g->size = (uint64_t)sz;
    if (fread(g->buf, 1, (size_t)sz, f) != (size_t)sz) { fclose(f); moe_gguf_free(g); return moe_fail(err, MOE_ERR_IO, "%s: read", path); }
    fclose(f);
    rd r = {g->buf, g->buf + sz, 0};
    if (rd_u(&r, 4) != 0x46554747u) { moe_gguf_free(g); return moe_fail(err, MOE_ERR_FORMAT, "%s: not GGUF", path); }
    g->version = (uint32_t)rd_u(&r, 4);
    g->n_tensors = (int64_t)rd_u(&r, 8);
    g->n_kv = (int64_t)rd_u(&r, 8);
    g->alignment = 32;
    if (r.bad || g->n_kv > 1000000 || g->n_tensors > 1000000) { moe_gguf_free(g); return moe_fail(err, MOE_ERR_FORMAT, "%s: header", path); }
    g->kv = calloc((size_t)g->n_kv + 1, sizeof *g->kv);
    g->t = calloc((size_t)g->n_tensors + 1, sizeof *g->t);
    for (int64_t i = 0; i < g->n_kv && !r.bad; i++) {
        uint64_t kl = rd_u(&r, 8);
        const uint8_t *kp = r.p;
        rd_skip(&r, kl);
        if (r.bad) break;
        g->kv[i].key = calloc(kl + 1, 1);
        memcpy(g->kv[i].key, kp, kl);
        g->kv[i].type = (moe_gguf_type)rd_u(&r, 4);
        g->kv[i].val = r.p;
        if (g->kv[i].type == MOE_GGUF_ARRAY) {
            g->kv[i].arr_type = (moe_gguf_type)rd_u(&r, 4);
            g->kv[i].arr_len = rd_u(&r, 8);
            g->kv[i].val = r.p;
            for (uint64_t j = 0; j < g->kv[i].arr_len && !r.bad; j++) skip_value(&r, g->kv[i].arr_type);
        } else {
            skip_value(&r, g->kv[i].type);
        }
        if (strcmp(g->kv[i].key, "general.alignment") == 0)
            g->alignment = (uint32_t)rd_u(&(rd){g->kv[i].val, g->kv[i].val + 4, 0}, 4);
    }
    for (int64_t i = 0; i < g->n_tensors && !r.bad; i++) {
        moe_gguf_tensor *t = &g->t[i];
        uint64_t nl = rd_u(&r, 8);
        const uint8_t *np = r.p;
        rd_skip(&r, nl);
        if (r.bad) break;
        char *name = calloc(nl + 1, 1);
        memcpy(name, np, nl);
        t->name = name;
        t->n_dims = (uint32_t)rd_u(&r, 4);
        if (t->n_dims < 1 || t->n_dims > 4) { r.bad = 1; break; }
        for (int d = 0; d < 4; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) t->ne[d] = (int64_t)rd_u(&r, 8);
        t->type = (moe_type)rd_u(&r, 4);
        t->offset = rd_u(&r, 8);
        t->size_bytes = moe_type_row_bytes(t->type, t->ne[0]) * (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    }
    if (r.bad) { moe_gguf_free(g); return moe_fail(err, MOE_ERR_FORMAT, "%s: truncated", path); }
    uint64_t data_off = (uint64_t)(r.p - g->buf);
    data_off = (data_off + g->alignment - 1) / g->alignment * g->alignment;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        moe_gguf_tensor *t = &g->t[i];
        if (data_off + t->offset + t->size_bytes > g->size) { moe_gguf_free(g); return moe_fail(err, MOE_ERR_FORMAT, "%s: tensor '%s' out of file", path, t->name); }
        t->data = g->buf + data_off + t->offset;
    }
    *out = g;
    return MOE_OK;
}

void moe_gguf_free(moe_gguf *g)
{
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) { free(g->kv[i].key); free(g->kv[i].str_copy); }
    for (int64_t i = 0; i < g->n_tensors; i++) free((char *)g->t[i].name);
    free(g->kv); free(g->t); free(g->buf); free(g);
}

uint32_t moe_gguf_version(const moe_gguf *g) { return g->version; }
uint32_t moe_gguf_alignment(const moe_gguf *g) { return g->alignment; }
uint32_t moe_gguf_n_splits(const moe_gguf *g) { (void)g; return 1; }
uint64_t moe_gguf_file_bytes(const moe_gguf *g) { return g->size; }
int64_t moe_gguf_n_kv(const moe_gguf *g) { return g->n_kv; }
int64_t moe_gguf_find_key(const moe_gguf *g, const char *key)
{
    for (int64_t i = 0; i < g->n_kv; i++) if (g->kv[i].key && strcmp(g->kv[i].key, key) == 0) return i;
    return -1;
}
const char *moe_gguf_key(const moe_gguf *g, int64_t i) { return g->kv[i].key; }
moe_gguf_type moe_gguf_kv_type(const moe_gguf *g, int64_t i) { return g->kv[i].type; }
moe_gguf_type moe_gguf_arr_type(const moe_gguf *g, int64_t i) { return g->kv[i].arr_type; }
uint64_t moe_gguf_arr_len(const moe_gguf *g, int64_t i) { return g->kv[i].type == MOE_GGUF_ARRAY ? g->kv[i].arr_len : 0; }
const void *moe_gguf_arr_data(const moe_gguf *g, int64_t i) { return g->kv[i].arr_type == MOE_GGUF_STRING ? NULL : g->kv[i].val; }
moe_str moe_gguf_arr_str(const moe_gguf *g, int64_t i, uint64_t j)
{
    rd r = {g->kv[i].val, g->buf + g->size, 0};
    for (uint64_t k = 0; k < j; k++) skip_value(&r, MOE_GGUF_STRING);
    uint64_t l = rd_u(&r, 8);
    return (moe_str){(const char *)r.p, l};
}

static moe_status get_num(const moe_gguf *g, int64_t i, double *d, int64_t *s, uint64_t *u, int *is_float)
{
    rd r = {g->kv[i].val, g->buf + g->size, 0};
    *is_float = 0;
    switch (g->kv[i].type) {
    case MOE_GGUF_UINT8: case MOE_GGUF_BOOL: *u = rd_u(&r, 1); *s = (int64_t)*u; break;
    case MOE_GGUF_UINT16: *u = rd_u(&r, 2); *s = (int64_t)*u; break;
    case MOE_GGUF_UINT32: *u = rd_u(&r, 4); *s = (int64_t)*u; break;
    case MOE_GGUF_UINT64: *u = rd_u(&r, 8); *s = (int64_t)*u; break;
    case MOE_GGUF_INT8: *s = (int8_t)rd_u(&r, 1); *u = (uint64_t)*s; break;
    case MOE_GGUF_INT16: *s = (int16_t)rd_u(&r, 2); *u = (uint64_t)*s; break;
    case MOE_GGUF_INT32: *s = (int32_t)rd_u(&r, 4); *u = (uint64_t)*s; break;
    case MOE_GGUF_INT64: *s = (int64_t)rd_u(&r, 8); *u = (uint64_t)*s; break;
    case MOE_GGUF_FLOAT32: { uint32_t b = (uint32_t)rd_u(&r, 4); float f; memcpy(&f, &b, 4); *d = f; *is_float = 1; break; }
    case MOE_GGUF_FLOAT64: { uint64_t b = rd_u(&r, 8); memcpy(d, &b, 8); *is_float = 1; break; }
    default: return MOE_ERR_FORMAT;
    }
    if (!*is_float) *d = (double)*s;
    return MOE_OK;
}

moe_status moe_gguf_get_u64(const moe_gguf *g, int64_t i, uint64_t *out)
{ double d; int64_t s; uint64_t u; int f; if (get_num(g, i, &d, &s, &u, &f) || f) return MOE_ERR_FORMAT; *out = u; return MOE_OK; }
moe_status moe_gguf_get_i64(const moe_gguf *g, int64_t i, int64_t *out)
{ double d; int64_t s; uint64_t u; int f; if (get_num(g, i, &d, &s, &u, &f) || f) return MOE_ERR_FORMAT; *out = s; return MOE_OK; }
moe_status moe_gguf_get_f64(const moe_gguf *g, int64_t i, double *out)
{ double d; int64_t s; uint64_t u; int f; if (get_num(g, i, &d, &s, &u, &f)) return MOE_ERR_FORMAT; *out = d; return MOE_OK; }
moe_status moe_gguf_get_bool(const moe_gguf *g, int64_t i, bool *out)
{ if (g->kv[i].type != MOE_GGUF_BOOL) return MOE_ERR_FORMAT; *out = g->kv[i].val[0] != 0; return MOE_OK; }
moe_status moe_gguf_get_str(const moe_gguf *g, int64_t i, moe_str *out)
{
    if (g->kv[i].type != MOE_GGUF_STRING) return MOE_ERR_FORMAT;
    rd r = {g->kv[i].val, g->buf + g->size, 0};
    uint64_t l = rd_u(&r, 8);
    *out = (moe_str){(const char *)r.p, l};
    return MOE_OK;
}
uint64_t moe_gguf_u64_or(const moe_gguf *g, const char *key, uint64_t def)
{ int64_t i = moe_gguf_find_key(g, key); uint64_t v; return i >= 0 && moe_gguf_get_u64(g, i, &v) == MOE_OK ? v : def; }
double moe_gguf_f64_or(const moe_gguf *g, const char *key, double def)
{ int64_t i = moe_gguf_find_key(g, key); double v; return i >= 0 && moe_gguf_get_f64(g, i, &v) == MOE_OK ? v : def; }
bool moe_gguf_bool_or(const moe_gguf *g, const char *key, bool def)
{ int64_t i = moe_gguf_find_key(g, key); bool v; return i >= 0 && moe_gguf_get_bool(g, i, &v) == MOE_OK ? v : def; }
const char *moe_gguf_str_or(const moe_gguf *g, const char *key, const char *def)
{
    int64_t i = moe_gguf_find_key(g, key);
    moe_str s;
    if (i < 0 || moe_gguf_get_str(g, i, &s) != MOE_OK) return def;
    stub_kv *kv = &((moe_gguf *)g)->kv[i];
    if (!kv->str_copy) { kv->str_copy = calloc(s.len + 1, 1); memcpy(kv->str_copy, s.ptr, s.len); }
    return kv->str_copy;
}
int64_t moe_gguf_n_tensors(const moe_gguf *g) { return g->n_tensors; }
const moe_gguf_tensor *moe_gguf_tensor_at(const moe_gguf *g, int64_t i) { return &g->t[i]; }
const moe_gguf_tensor *moe_gguf_find_tensor(const moe_gguf *g, const char *name)
{
    for (int64_t i = 0; i < g->n_tensors; i++) if (strcmp(g->t[i].name, name) == 0) return &g->t[i];
    return NULL;
}

/*
 * gguf.c — opening GGUF files and split sets (moe.h's "GGUF files"
 * section), plus the whole-file facts and lookups by name. Parsing and
 * validation of one file's header lives in gguf-parse.c, the per-key and
 * per-tensor accessors in gguf-kv.c; this file maps files, stitches the
 * parts of a split set ("X-00001-of-00003.gguf" ...) into one model and
 * builds the name indexes. After open nothing is mutated, so a handle may
 * be shared by threads.
 */
#include "gguf-internal.h"
#include "util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- name indexes: open addressing, slots hold index+1, 0 = empty ---- */

typedef const char *(*gguf_name_fn)(const void *ctx, int64_t i);

static uint64_t gguf_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3u;
    return h;
}

static int64_t index_find(const int64_t *slots, uint64_t mask, const char *name,
                          gguf_name_fn name_at, const void *ctx)
{
    if (!slots || !name)
        return -1;
    for (uint64_t h = gguf_hash(name) & mask;; h = (h + 1) & mask) {
        if (slots[h] == 0)
            return -1;
        if (strcmp(name_at(ctx, slots[h] - 1), name) == 0)
            return slots[h] - 1;
    }
}

/* Indexes n names; on a duplicate returns MOE_ERR_FORMAT with *dup set to
 * the second occurrence. Load factor stays at or below one half. */
static moe_status index_build(int64_t n, gguf_name_fn name_at, const void *ctx,
                              int64_t **slots, uint64_t *mask, int64_t *dup)
{
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)n)
        cap *= 2;
    *slots = calloc((size_t)cap, sizeof **slots);
    if (!*slots)
        return MOE_ERR_NOMEM;
    *mask = cap - 1;
    for (int64_t i = 0; i < n; i++) {
        const char *name = name_at(ctx, i);
        uint64_t h = gguf_hash(name) & *mask;
        for (; (*slots)[h] != 0; h = (h + 1) & *mask) {
            if (strcmp(name_at(ctx, (*slots)[h] - 1), name) == 0) {
                *dup = i;
                return MOE_ERR_FORMAT;
            }
        }
        (*slots)[h] = i + 1;
    }
    return MOE_OK;
}

static const char *part_key_at(const void *ctx, int64_t i)
{
    return ((const gguf_part *)ctx)->kvs[i].key;
}

static const char *tensor_name_at(const void *ctx, int64_t i)
{
    return ((const moe_gguf *)ctx)->tensors[i].name;
}

static moe_status index_keys(gguf_part *part, int64_t **slots, uint64_t *mask, moe_err *err)
{
    int64_t dup = -1;
    moe_status st = index_build(part->n_kv, part_key_at, part, slots, mask, &dup);
    if (st == MOE_ERR_NOMEM)
        return moe_fail(err, st, "%s: out of memory for the key index", part->path);
    if (st != MOE_OK)
        return moe_fail(err, st, "%s: duplicate key (key '%.200s')", part->path,
                        part->kvs[dup].key);
    return MOE_OK;
}

moe_status moe_gguf_build_indexes(moe_gguf *g, moe_err *err)
{
    for (uint32_t p = 1; p < g->n_parts; p++) { /* other parts: only checked */
        int64_t *slots = NULL;
        uint64_t mask;
        moe_status st = index_keys(&g->parts[p], &slots, &mask, err);
        free(slots);
        if (st != MOE_OK)
            return st;
    }
    moe_status st = index_keys(&g->parts[0], &g->key_slots, &g->key_mask, err);
    if (st != MOE_OK)
        return st;
    int64_t dup = -1;
    st = index_build(g->n_tensors, tensor_name_at, g, &g->tensor_slots, &g->tensor_mask, &dup);
    if (st == MOE_ERR_NOMEM)
        return moe_fail(err, st, "%s: out of memory for the tensor index", g->parts[0].path);
    if (st != MOE_OK)
        return moe_fail(err, st, "%s: duplicate tensor (tensor '%.200s')",
                        g->parts[g->tensors[dup].split].path, g->tensors[dup].name);
    return MOE_OK;
}

/* ---- opening ---- */

static moe_gguf *gguf_new(uint32_t n_parts)
{
    moe_gguf *g = calloc(1, sizeof *g);
    if (g && !(g->parts = calloc(n_parts, sizeof *g->parts))) {
        free(g);
        return NULL;
    }
    if (g)
        g->n_parts = n_parts;
    return g;
}

void moe_gguf_free(moe_gguf *gguf)
{
    if (!gguf)
        return;
    for (uint32_t p = 0; p < gguf->n_parts; p++)
        moe_gguf_free_part(&gguf->parts[p]);
    for (int64_t i = 0; i < gguf->n_tensors; i++)
        free((char *)gguf->tensors[i].name);
    free(gguf->parts);
    free(gguf->tensors);
    free(gguf->key_slots);
    free(gguf->tensor_slots);
    free(gguf);
}

static char *gguf_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Maps `path` into part `split` of g and parses it. */
static moe_status open_part(moe_gguf *g, uint32_t split, const char *path, moe_err *err)
{
    gguf_part *part = &g->parts[split];
    if (!(part->path = gguf_strdup(path)))
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory", path);
    moe_status st = moe_platform_map_file(path, &part->map, err);
    if (st != MOE_OK)
        return st;
    part->data = part->map.data;
    part->size = part->map.size;
    g->file_bytes += part->size;
    return moe_gguf_parse_part(g, part, split, err);
}

static const gguf_kv *part_find_kv(const gguf_part *part, const char *key)
{
    for (int64_t i = 0; i < part->n_kv; i++)
        if (strcmp(part->kvs[i].key, key) == 0)
            return &part->kvs[i];
    return NULL;
}

/* split.count (1 when absent) and split.no (0 when absent) of one part. */
static moe_status read_split_keys(const gguf_part *part, uint32_t *count, uint32_t *no,
                                  moe_err *err)
{
    const gguf_kv *kc = part_find_kv(part, "split.count");
    const gguf_kv *kn = part_find_kv(part, "split.no");
    uint64_t c = 1, n = 0;
    if (kc && (moe_gguf_kv_get_u64(kc, &c) != MOE_OK || c == 0 || c > MOE_GGUF_MAX_SPLITS))
        return moe_fail(err, MOE_ERR_FORMAT, "%s: split.count must be an integer in 1..%u"
                        " (key 'split.count')", part->path, MOE_GGUF_MAX_SPLITS);
    if (c > 1 && !kn)
        return moe_fail(err, MOE_ERR_FORMAT, "%s: split.count is %" PRIu64 " but split.no is"
                        " missing (key 'split.no')", part->path, c);
    if (kn && (moe_gguf_kv_get_u64(kn, &n) != MOE_OK || n >= c))
        return moe_fail(err, MOE_ERR_FORMAT, "%s: split.no must be an integer below split.count"
                        " %" PRIu64 " (key 'split.no')", part->path, c);
    *count = (uint32_t)c;
    *no = (uint32_t)n;
    return MOE_OK;
}

/* Path of part `no` (0-based) of `count`, given the prefix before
 * "-NNNNN-of-NNNNN.gguf". Caller frees. */
static char *split_part_path(const char *prefix, size_t prefix_len, uint32_t no, uint32_t count)
{
    char suffix[64];
    int n = snprintf(suffix, sizeof suffix, "-%05" PRIu32 "-of-%05" PRIu32 ".gguf", no + 1, count);
    char *path = malloc(prefix_len + (size_t)n + 1);
    if (path) {
        memcpy(path, prefix, prefix_len);
        memcpy(path + prefix_len, suffix, (size_t)n + 1);
    }
    return path;
}

/* Checks the file name of part `no` ends in its split suffix; returns the
 * length of the prefix before it. */
static moe_status split_prefix_len(const char *path, uint32_t no, uint32_t count,
                                   size_t *prefix_len, moe_err *err)
{
    char suffix[64];
    int n = snprintf(suffix, sizeof suffix, "-%05" PRIu32 "-of-%05" PRIu32 ".gguf", no + 1, count);
    size_t len = strlen(path);
    if (len < (size_t)n || strcmp(path + len - (size_t)n, suffix) != 0)
        return moe_fail(err, MOE_ERR_FORMAT, "%s: file is part %" PRIu32 " of a %" PRIu32
                        "-part split set but its name does not end in '%s'",
                        path, no + 1, count, suffix);
    *prefix_len = len - (size_t)n;
    return MOE_OK;
}

/* Opens part `no` of the set into g and checks its split keys agree. */
static moe_status open_split_part(moe_gguf *g, const char *prefix, size_t prefix_len,
                                  uint32_t no, const char *opened_from, moe_err *err)
{
    char *path = split_part_path(prefix, prefix_len, no, g->n_parts);
    if (!path)
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory", opened_from);
    moe_status st = MOE_OK;
    uint32_t count, got_no;
    if (!moe_platform_file_exists(path))
        st = moe_fail(err, MOE_ERR_IO, "%s: missing part %" PRIu32 " of %" PRIu32 " of the"
                      " split set opened from %s", path, no + 1, g->n_parts, opened_from);
    else if ((st = open_part(g, no, path, err)) == MOE_OK &&
             (st = read_split_keys(&g->parts[no], &count, &got_no, err)) == MOE_OK &&
             (count != g->n_parts || got_no != no))
        st = moe_fail(err, MOE_ERR_FORMAT, "%s: split.no/split.count say part %" PRIu32 " of %"
                      PRIu32 ", expected part %" PRIu32 " of %" PRIu32, path, got_no + 1, count,
                      no + 1, g->n_parts);
    free(path);
    return st;
}

/* split.tensors.count, if the first part has it, must match the union. */
static moe_status check_split_tensor_count(const moe_gguf *g, moe_err *err)
{
    const gguf_kv *kv = part_find_kv(&g->parts[0], "split.tensors.count");
    uint64_t n;
    if (!kv)
        return MOE_OK;
    if (moe_gguf_kv_get_u64(kv, &n) != MOE_OK || n != (uint64_t)g->n_tensors)
        return moe_fail(err, MOE_ERR_FORMAT, "%s: split.tensors.count does not match the %" PRId64
                        " tensors found in %" PRIu32 " parts (key 'split.tensors.count')",
                        g->parts[0].path, g->n_tensors, g->n_parts);
    return MOE_OK;
}

static moe_status open_split_set(const char *path, uint32_t no, uint32_t count,
                                 moe_gguf **out, moe_err *err)
{
    size_t prefix_len = 0;
    moe_status st = split_prefix_len(path, no, count, &prefix_len, err);
    if (st != MOE_OK)
        return st;
    moe_gguf *g = gguf_new(count);
    if (!g)
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory", path);
    for (uint32_t k = 0; st == MOE_OK && k < count; k++)
        st = open_split_part(g, path, prefix_len, k, path, err);
    if (st == MOE_OK)
        st = check_split_tensor_count(g, err);
    if (st == MOE_OK)
        st = moe_gguf_build_indexes(g, err);
    if (st != MOE_OK) {
        moe_gguf_free(g);
        return st;
    }
    *out = g;
    return MOE_OK;
}

moe_status moe_gguf_open(const char *path, moe_gguf **out, moe_err *err)
{
    if (!path || !out)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_gguf_open: NULL argument");
    *out = NULL;
    moe_gguf *g = gguf_new(1);
    if (!g)
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory", path);
    uint32_t count = 1, no = 0;
    moe_status st = open_part(g, 0, path, err);
    if (st == MOE_OK)
        st = read_split_keys(&g->parts[0], &count, &no, err);
    if (st == MOE_OK && count > 1) {
        /* Reopen every part in order, so tensors come in split order. */
        moe_gguf_free(g);
        return open_split_set(path, no, count, out, err);
    }
    if (st == MOE_OK)
        st = moe_gguf_build_indexes(g, err);
    if (st != MOE_OK) {
        moe_gguf_free(g);
        return st;
    }
    *out = g;
    return MOE_OK;
}

moe_status moe_gguf_open_memory(const void *data, size_t size, const char *name,
                                moe_gguf **out, moe_err *err)
{
    if ((!data && size) || !name || !out)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_gguf_open_memory: NULL argument");
    *out = NULL;
    moe_gguf *g = gguf_new(1);
    if (!g || !(g->parts[0].path = gguf_strdup(name))) {
        moe_gguf_free(g);
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory", name);
    }
    g->parts[0].data = data;
    g->parts[0].size = size;
    g->file_bytes = size;
    uint32_t count = 1, no = 0;
    moe_status st = moe_gguf_parse_part(g, &g->parts[0], 0, err);
    if (st == MOE_OK)
        st = read_split_keys(&g->parts[0], &count, &no, err);
    if (st == MOE_OK && count > 1)
        st = moe_fail(err, MOE_ERR_UNSUPPORTED, "%s: part %" PRIu32 " of a %" PRIu32 "-part split"
                      " set cannot be opened from memory", name, no + 1, count);
    if (st == MOE_OK)
        st = moe_gguf_build_indexes(g, err);
    if (st != MOE_OK) {
        moe_gguf_free(g);
        return st;
    }
    *out = g;
    return MOE_OK;
}

moe_status moe_gguf_open_header(const void *data, size_t len, uint64_t file_bytes,
                                const char *name, moe_gguf **out, uint64_t *need_bytes,
                                moe_err *err)
{
    if (need_bytes)
        *need_bytes = 0;
    if ((!data && len) || !name || !out)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_gguf_open_header: NULL argument");
    *out = NULL;
    if (len > file_bytes)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "%s: %zu bytes given of a %" PRIu64
                        "-byte file", name, len, file_bytes);
    /* A wrong magic is final however many bytes follow. */
    if (len >= 4 && memcmp(data, MOE_GGUF_MAGIC, 4) != 0)
        return moe_fail(err, MOE_ERR_FORMAT, "%s: bad magic: not a GGUF file", name);
    /* A prefix shorter than the fixed header (magic, version, two counts)
     * asks for more before any parsing: the parser bounds its reads by the
     * prefix length, and 0 would read as "the whole file". */
    if (len < file_bytes && len < 24) {
        if (need_bytes)
            *need_bytes = file_bytes < 8192 ? file_bytes : 8192;
        return moe_fail(err, MOE_ERR_RANGE, "%s: the header does not end within the first %zu"
                        " bytes", name, len);
    }
    moe_gguf *g = gguf_new(1);
    if (!g || !(g->parts[0].path = gguf_strdup(name))) {
        moe_gguf_free(g);
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory", name);
    }
    gguf_part *part = &g->parts[0];
    part->data = data;
    part->size = file_bytes;
    /* prefix_bytes 0 means "whole file"; a whole file given is parsed as one. */
    part->prefix_bytes = len < file_bytes ? len : 0;
    g->file_bytes = file_bytes;
    moe_status st = len == file_bytes && len == 0
                        ? moe_fail(err, MOE_ERR_FORMAT, "%s: empty file", name)
                        : moe_gguf_parse_part(g, part, 0, err);
    if (st == MOE_OK)
        st = moe_gguf_build_indexes(g, err);
    if (st == MOE_ERR_FORMAT && len < file_bytes) {
        /* Most likely the header runs past the prefix (a count, string or
         * array that would not fit in the bytes given): more bytes decide.
         * Doubling bounds the retries at log2(file / prefix). */
        const uint64_t want = len < 4096 ? 8192 : 2 * (uint64_t)len;
        if (need_bytes)
            *need_bytes = want < file_bytes ? want : file_bytes;
        st = moe_fail(err, MOE_ERR_RANGE, "%s: the header does not end within the first %zu"
                      " bytes", name, len);
    }
    if (st != MOE_OK) {
        moe_gguf_free(g);
        return st;
    }
    *out = g;
    return MOE_OK;
}

/* ---- whole-file facts and lookups by name ---- */

uint32_t moe_gguf_version(const moe_gguf *gguf)
{
    return gguf ? gguf->parts[0].version : 0;
}

uint32_t moe_gguf_alignment(const moe_gguf *gguf)
{
    return gguf ? gguf->parts[0].alignment : 0;
}

uint32_t moe_gguf_n_splits(const moe_gguf *gguf)
{
    return gguf ? gguf->n_parts : 0;
}

uint64_t moe_gguf_file_bytes(const moe_gguf *gguf)
{
    return gguf ? gguf->file_bytes : 0;
}

int64_t moe_gguf_find_key(const moe_gguf *gguf, const char *key)
{
    if (!gguf)
        return -1;
    return index_find(gguf->key_slots, gguf->key_mask, key, part_key_at, &gguf->parts[0]);
}

const moe_gguf_tensor *moe_gguf_find_tensor(const moe_gguf *gguf, const char *name)
{
    if (!gguf)
        return NULL;
    int64_t i = index_find(gguf->tensor_slots, gguf->tensor_mask, name, tensor_name_at, gguf);
    return i < 0 ? NULL : &gguf->tensors[i];
}

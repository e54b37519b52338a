/*
 * gguf-internal.h — the reader's data structures, shared by gguf-parse.c
 * (validating one file's header), gguf.c (opening files and split sets,
 * lookups by name), gguf-kv.c (accessors), gguf-writer.c (copy_kv re-encodes
 * the mapped bytes) and the tests/fuzzer, which open files from memory.
 *
 * A moe_gguf is a list of parts (one per file of a split set) plus the
 * union of their tensors and two hash indexes for name lookup:
 *
 *   moe_gguf ─┬─ parts[0] ── map/data, kvs[] (the set's key/values)
 *             ├─ parts[1..] ── map/data, kvs[] (only checked: split.*)
 *             ├─ tensors[] ── every part's tensors, in order; data → map
 *             └─ key_slots[], tensor_slots[] ── open-addressing indexes
 *
 * Everything a kv or tensor points at lives in its part's mapped bytes;
 * only names, keys, scalar-string copies and string-array tables are
 * allocated. Not part of the public API.
 */
#ifndef MOE_GGUF_INTERNAL_H
#define MOE_GGUF_INTERNAL_H

#include "moe.h"
#include "platform.h"

#include <stddef.h>
#include <stdint.h>

#define MOE_GGUF_MAGIC "GGUF"
/* Largest number of parts a split name can express ("-NNNNN-of-NNNNN"). */
#define MOE_GGUF_MAX_SPLITS 99999u

/* One key/value. `val` points into the part's bytes:
 *   scalar (not string): the value's packed bytes
 *   string:             the string bytes (length in str_len)
 *   array:              the first element (numeric) or first length prefix */
typedef struct gguf_kv {
    char          *key;      /* owned, NUL-terminated */
    moe_gguf_type  type;
    moe_gguf_type  arr_type; /* element type when type == ARRAY */
    uint64_t       arr_len;  /* elements when type == ARRAY */
    const uint8_t *val;
    uint64_t       str_len;  /* scalar strings */
    char          *str_copy; /* scalar strings: owned NUL-terminated copy */
    const uint8_t **strs;    /* string arrays: owned table of arr_len pointers
                                to each element's 8-byte length prefix */
} gguf_kv;

/* One file of the set. */
typedef struct gguf_part {
    char            *path;      /* owned */
    moe_platform_map map;       /* zeroed when opened from memory */
    const uint8_t   *data;      /* the whole file, or its first
                                   prefix_bytes when header-only */
    uint64_t         size;      /* of the whole file */
    uint64_t         prefix_bytes; /* header-only parse (moe_gguf_open_header):
                                   bytes present at data; 0 otherwise */
    uint32_t         version;
    uint32_t         alignment;
    uint64_t         data_offset; /* start of the aligned data section */
    int64_t          n_kv;
    int64_t          cap_kv;
    gguf_kv         *kvs;       /* owned; grows while parsing */
    int64_t          n_tensors; /* tensors this part declares */
} gguf_part;

struct moe_gguf {
    gguf_part       *parts;    /* owned, n_parts entries */
    uint32_t         n_parts;
    moe_gguf_tensor *tensors;  /* owned; names owned too */
    int64_t          n_tensors;
    int64_t          cap_tensors;
    uint64_t         file_bytes;
    int64_t         *key_slots;    /* index+1 per slot, 0 = empty */
    uint64_t         key_mask;     /* slots - 1 (a power of two minus one) */
    int64_t         *tensor_slots;
    uint64_t         tensor_mask;
};

/* Parses and validates the header of `part` (data, size and path set) and
 * appends its tensors to `g` with `split` as their part number. Checks
 * everything moe_gguf_open promises; see gguf-parse.c. */
moe_status moe_gguf_parse_part(moe_gguf *g, gguf_part *part, uint32_t split, moe_err *err);
/* Releases what a part owns (kv keys, copies, tables, the mapping). */
void       moe_gguf_free_part(gguf_part *part);

/* Builds the key index of parts[0] and the tensor index of all tensors,
 * rejecting duplicates. */
moe_status moe_gguf_build_indexes(moe_gguf *g, moe_err *err);

/* The n-byte little-endian unsigned integer at p (n <= 8). */
static inline uint64_t moe_gguf_load_le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* An integer scalar kv as uint64: MOE_ERR_FORMAT if it is not an integer
 * type or is negative. */
moe_status moe_gguf_kv_get_u64(const gguf_kv *kv, uint64_t *out);

/* Size in bytes of one scalar of a fixed-size GGUF value type; 0 for
 * STRING, ARRAY and unknown types. */
size_t moe_gguf_type_size(moe_gguf_type type);
/* "uint8", ..., "float64"; "unknown" for other values. */
const char *moe_gguf_type_name(moe_gguf_type type);

/* Opens a GGUF image held in memory (for the fuzzer and tests). `data` is
 * borrowed and must outlive the handle; `name` is used in messages. A
 * buffer that is part of a split set (split.count > 1) is checked and then
 * rejected with MOE_ERR_UNSUPPORTED, as its other parts cannot be found. */
moe_status moe_gguf_open_memory(const void *data, size_t size, const char *name,
                                moe_gguf **out, moe_err *err);

#endif /* MOE_GGUF_INTERNAL_H */

/*
 * moe.h — the one public header of libmoe, the MoeDesk engine.
 *
 * libmoe reads and writes GGUF model files, knows the tensor block formats
 * that llama.cpp uses (so files interoperate both ways), tokenizes text with
 * the vocabulary stored in a GGUF file, describes the machine (hardware
 * probe), plans where a model's memory goes (memory planner) and (in later
 * layers) runs Mixture-of-Experts models. It is plain C11 plus libc and
 * threads: no GLib, so it cross-compiles with mingw-w64 and its tests run
 * under wine.
 *
 * Conventions that hold for every function below:
 *   - Fallible calls return a moe_status and, when `err` is not NULL, write a
 *     one-line, NUL-terminated message into it naming the thing at fault
 *     (file, key, tensor, token...). The library never exits or aborts.
 *   - Handles are opaque. Every `*_open`/`*_new`/`*_load` has a `*_free`;
 *     `*_free(NULL)` is a no-op.
 *   - Pointers returned by a getter borrow from the handle and stay valid
 *     until that handle is freed, unless the comment says otherwise.
 *   - Thread safety: a read-only handle (moe_gguf, moe_vocab) may be used by
 *     several threads at once; a writer or decoder state by one at a time.
 */
#ifndef MOE_H
#define MOE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Status and errors                                                        */
/* ------------------------------------------------------------------------ */

typedef enum moe_status {
    MOE_OK = 0,
    MOE_ERR_IO,          /* open/read/write/mmap failed (errno text in msg) */
    MOE_ERR_FORMAT,      /* the file or data is malformed                   */
    MOE_ERR_UNSUPPORTED, /* well-formed but not something we handle         */
    MOE_ERR_INVALID_ARG, /* the caller passed something out of contract     */
    MOE_ERR_NOMEM,       /* an allocation failed                            */
    MOE_ERR_RANGE,       /* an output buffer is too small / value too big   */
    MOE_ERR_NOT_FOUND,   /* a key, tensor or token does not exist           */
} moe_status;

#define MOE_ERR_MSG_SIZE 512

/* Where a fallible call writes its one-line message. Zero-initialise it. */
typedef struct moe_err {
    char msg[MOE_ERR_MSG_SIZE];
} moe_err;

/* A short constant name for a status ("format error", ...). */
const char *moe_status_str(moe_status status);

/* libmoe's version as "MAJOR.MINOR.PATCH". */
const char *moe_version(void);

/* ------------------------------------------------------------------------ */
/* Tensor types and block formats                                           */
/* ------------------------------------------------------------------------ */

/* Numbered exactly as ggml's `enum ggml_type`, because these numbers are
 * stored in GGUF files. The ones named here are those libmoe computes with;
 * the other numbers ggml defines are sized only (moe_type_is_known), and a
 * number ggml does not define is reported as MOE_ERR_UNSUPPORTED. */
typedef enum moe_type {
    MOE_TYPE_F32  = 0,
    MOE_TYPE_F16  = 1,
    MOE_TYPE_Q4_0 = 2,
    MOE_TYPE_Q8_0 = 8,
    MOE_TYPE_Q4_K = 12,
    MOE_TYPE_Q6_K = 14,
    MOE_TYPE_BF16 = 30,
    MOE_TYPE_COUNT = 40, /* one past the largest ggml number we reserve */
} moe_type;

/* True for every ggml type libmoe can size: the seven above, which it
 * computes with, and the others ggml defines (q4_1, q5_0, q5_k, q2_k, q3_k,
 * iq*, i8..f64, tq*, mxfp4), which a file may hold and which are named and
 * sized so the file opens, but not computed (see moe_type_can_dequantize). */
bool moe_type_is_known(int type);
/* True for the types moe_dequantize_row handles (the seven named above). */
bool moe_type_can_dequantize(moe_type type);
/* "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "q5_k"...; NULL if unknown. */
const char *moe_type_name(moe_type type);
/* Parses a name case-insensitively ("Q4_K", "q4_k_m" is NOT accepted).
 * Returns false if unknown. */
bool moe_type_from_name(const char *name, moe_type *out);
/* Elements per block (1 for float types, 32 for Q8_0/Q4_0, 256 for K). */
int64_t moe_type_block_elems(moe_type type);
/* Bytes per block (4, 2, 2, 34, 18, 144, 210). */
size_t moe_type_block_bytes(moe_type type);
/* Bytes of one row of `n_elems` elements; 0 if n_elems is not a multiple of
 * the block size or the type is unknown. */
size_t moe_type_row_bytes(moe_type type, int64_t n_elems);
/* True if moe_quantize_row can produce this type. */
bool moe_type_can_quantize(moe_type type);

/* IEEE half and bfloat16 conversions (round to nearest even). */
float    moe_f16_to_f32(uint16_t h);
uint16_t moe_f32_to_f16(float f);
float    moe_bf16_to_f32(uint16_t h);
uint16_t moe_f32_to_bf16(float f);

/* Dequantise `n_elems` elements (a multiple of the block size) of `type`
 * from `src` into `dst`. Scalar reference implementation; the floats equal
 * llama.cpp's dequantize_row_* output bit for bit (a NaN scale gives NaN,
 * its sign and payload unspecified). `src` needs no alignment.
 * MOE_ERR_UNSUPPORTED for an unknown type, MOE_ERR_INVALID_ARG for a bad
 * count. */
moe_status moe_dequantize_row(moe_type type, const void *src, float *dst,
                              int64_t n_elems);

/* Quantise `n_elems` floats (a multiple of the block size) into `dst`, which
 * must hold moe_type_row_bytes(type, n_elems) bytes. Supported: F32, F16,
 * BF16, Q8_0, Q4_0 (byte-identical to llama.cpp's reference quantisers),
 * Q4_K and Q6_K (own error-minimising search; squared error no worse than
 * llama.cpp's reference quantisers on the tested data). Returns
 * MOE_ERR_UNSUPPORTED for other types, MOE_ERR_INVALID_ARG for a count that
 * is negative or not a multiple of the block size. Non-finite inputs give
 * some defined output, never undefined behaviour. */
moe_status moe_quantize_row(moe_type type, const float *src, void *dst,
                            int64_t n_elems);

/* ------------------------------------------------------------------------ */
/* GGUF files (version 3; versions 2 read too)                              */
/* ------------------------------------------------------------------------ */

/* Metadata value types, numbered as in the GGUF specification. */
typedef enum moe_gguf_type {
    MOE_GGUF_UINT8   = 0,
    MOE_GGUF_INT8    = 1,
    MOE_GGUF_UINT16  = 2,
    MOE_GGUF_INT16   = 3,
    MOE_GGUF_UINT32  = 4,
    MOE_GGUF_INT32   = 5,
    MOE_GGUF_FLOAT32 = 6,
    MOE_GGUF_BOOL    = 7,
    MOE_GGUF_STRING  = 8,
    MOE_GGUF_ARRAY   = 9,
    MOE_GGUF_UINT64  = 10,
    MOE_GGUF_INT64   = 11,
    MOE_GGUF_FLOAT64 = 12,
} moe_gguf_type;

#define MOE_GGUF_DEFAULT_ALIGNMENT 32
#define MOE_GGUF_MAX_DIMS 4

/* A byte string inside the mapped file: not NUL-terminated. */
typedef struct moe_str {
    const char *ptr;
    uint64_t    len;
} moe_str;

/* One tensor as described by the file. `data` points into the mapping. */
typedef struct moe_gguf_tensor {
    const char *name;                 /* NUL-terminated copy               */
    uint32_t    n_dims;               /* 1..4                               */
    int64_t     ne[MOE_GGUF_MAX_DIMS]; /* elements per dim, ne[0] innermost;
                                         unused dims are 1                 */
    moe_type    type;
    uint64_t    offset;               /* from the file's data section start */
    uint64_t    size_bytes;           /* moe_type_row_bytes * rows          */
    uint32_t    split;                /* which file of a split set          */
    const void *data;                 /* mapped, read-only                  */
} moe_gguf_tensor;

typedef struct moe_gguf moe_gguf;

/* Opens a GGUF file read-only with mmap; nothing but the header is read.
 * Every count, offset, length, dimension and tensor extent is checked
 * against the file size and against overflow; a file that fails any check
 * is rejected with a message naming the file and the fault.
 * If `path` names the first file of a split set ("X-00001-of-00003.gguf",
 * or a file with split.count > 1), all parts are opened and presented as one
 * model: the key/values are the first file's, the tensors are the union.
 * (Any part may be named; a missing part is reported by its file name.)
 * Arrays of arrays are rejected as MOE_ERR_UNSUPPORTED (llama.cpp neither
 * writes nor reads them); tensor types other than those above likewise. */
moe_status moe_gguf_open(const char *path, moe_gguf **out, moe_err *err);
void       moe_gguf_free(moe_gguf *gguf);

/* Parses only the header of a GGUF file from its first `len` bytes (for
 * example a download's Range prefix), to plan or inspect a file before it
 * is fetched. `file_bytes` is the whole file's size: every tensor extent is
 * checked against it, and the tensors' `data` pointers are NULL (when `len`
 * equals `file_bytes` the file is parsed whole and `data` is set). `data`
 * is borrowed and must outlive the handle. A part of a split set opens as
 * the one file it is (its own tensors; split.* keys readable).
 * MOE_ERR_RANGE when the header (or a check that needs more bytes) runs
 * past the prefix: *need_bytes (may be NULL) gets a larger prefix worth
 * trying, at most file_bytes; any other status is final (MOE_ERR_FORMAT
 * for a bad magic or, with the whole file given, a malformed header). */
moe_status moe_gguf_open_header(const void *data, size_t len, uint64_t file_bytes,
                                const char *name, moe_gguf **out, uint64_t *need_bytes,
                                moe_err *err);

uint32_t moe_gguf_version(const moe_gguf *gguf);
uint32_t moe_gguf_alignment(const moe_gguf *gguf);
uint32_t moe_gguf_n_splits(const moe_gguf *gguf);
/* Total size in bytes of all files of the set. */
uint64_t moe_gguf_file_bytes(const moe_gguf *gguf);

/* Key/values. Indices run 0..n_kv-1 in file order. */
int64_t       moe_gguf_n_kv(const moe_gguf *gguf);
/* Index of `key`, or -1. */
int64_t       moe_gguf_find_key(const moe_gguf *gguf, const char *key);
const char   *moe_gguf_key(const moe_gguf *gguf, int64_t i); /* NUL-terminated */
moe_gguf_type moe_gguf_kv_type(const moe_gguf *gguf, int64_t i);
/* For arrays: the element type and length (0 for non-arrays). */
moe_gguf_type moe_gguf_arr_type(const moe_gguf *gguf, int64_t i);
uint64_t      moe_gguf_arr_len(const moe_gguf *gguf, int64_t i);
/* Numeric arrays: pointer to the packed little-endian elements (may be
 * unaligned: copy with memcpy). NULL for string arrays. */
const void   *moe_gguf_arr_data(const moe_gguf *gguf, int64_t i);
/* String arrays: element j. */
moe_str       moe_gguf_arr_str(const moe_gguf *gguf, int64_t i, uint64_t j);
/* Scalars. The typed getters return the value converted where lossless
 * (any integer type into int64/uint64 if in range, float32 into double);
 * MOE_ERR_FORMAT if the stored type does not convert. */
moe_status moe_gguf_get_u64(const moe_gguf *gguf, int64_t i, uint64_t *out);
moe_status moe_gguf_get_i64(const moe_gguf *gguf, int64_t i, int64_t *out);
moe_status moe_gguf_get_f64(const moe_gguf *gguf, int64_t i, double *out);
moe_status moe_gguf_get_bool(const moe_gguf *gguf, int64_t i, bool *out);
moe_status moe_gguf_get_str(const moe_gguf *gguf, int64_t i, moe_str *out);

/* Convenience lookups by key: return `def` when the key is missing or has
 * an incompatible type. The string version returns a NUL-terminated copy
 * owned by the handle, or NULL. */
uint64_t    moe_gguf_u64_or(const moe_gguf *gguf, const char *key, uint64_t def);
double      moe_gguf_f64_or(const moe_gguf *gguf, const char *key, double def);
bool        moe_gguf_bool_or(const moe_gguf *gguf, const char *key, bool def);
const char *moe_gguf_str_or(const moe_gguf *gguf, const char *key, const char *def);

/* Tensors, in file order (split parts in order). */
int64_t                moe_gguf_n_tensors(const moe_gguf *gguf);
const moe_gguf_tensor *moe_gguf_tensor_at(const moe_gguf *gguf, int64_t i);
/* NULL if absent. */
const moe_gguf_tensor *moe_gguf_find_tensor(const moe_gguf *gguf, const char *name);

/* ---- Writer ------------------------------------------------------------ */
/* Builds a GGUF v3 file that llama.cpp reads. Usage:
 *   w = moe_gguf_writer_new();
 *   moe_gguf_writer_set_*(w, ...);            key/values, in order
 *   moe_gguf_writer_add_tensor(w, ...);        tensor infos, in order
 *   either moe_gguf_writer_write_file(w, path, err)   (all data given)
 *   or     moe_gguf_writer_begin(w, path, err);
 *          moe_gguf_writer_write_tensor_data(w, idx, data, err) for each idx in
 *          order (streaming, so only one tensor needs to be in memory);
 *          moe_gguf_writer_finish(w, err);
 * Setting a key that exists replaces its value in place. Strings and arrays
 * are copied. `general.alignment` (uint32, power of two) is honoured.
 * Tensor names are at most 63 bytes (ggml's limit). The file is written as
 * "<path>.tmp" and renamed onto `path` by finish/write_file, so a failed
 * write (reported with the path and the system's reason) leaves no partial
 * file under `path`; the temporary file is removed. */
typedef struct moe_gguf_writer moe_gguf_writer;

moe_gguf_writer *moe_gguf_writer_new(void);
void             moe_gguf_writer_free(moe_gguf_writer *w);

moe_status moe_gguf_writer_set_u8(moe_gguf_writer *w, const char *key, uint8_t v);
moe_status moe_gguf_writer_set_i8(moe_gguf_writer *w, const char *key, int8_t v);
moe_status moe_gguf_writer_set_u16(moe_gguf_writer *w, const char *key, uint16_t v);
moe_status moe_gguf_writer_set_i16(moe_gguf_writer *w, const char *key, int16_t v);
moe_status moe_gguf_writer_set_u32(moe_gguf_writer *w, const char *key, uint32_t v);
moe_status moe_gguf_writer_set_i32(moe_gguf_writer *w, const char *key, int32_t v);
moe_status moe_gguf_writer_set_f32(moe_gguf_writer *w, const char *key, float v);
moe_status moe_gguf_writer_set_u64(moe_gguf_writer *w, const char *key, uint64_t v);
moe_status moe_gguf_writer_set_i64(moe_gguf_writer *w, const char *key, int64_t v);
moe_status moe_gguf_writer_set_f64(moe_gguf_writer *w, const char *key, double v);
moe_status moe_gguf_writer_set_bool(moe_gguf_writer *w, const char *key, bool v);
moe_status moe_gguf_writer_set_str(moe_gguf_writer *w, const char *key, const char *v);
/* Numeric array of `n` elements of `elem_type` (not STRING/ARRAY), packed. */
moe_status moe_gguf_writer_set_arr(moe_gguf_writer *w, const char *key,
                                   moe_gguf_type elem_type, const void *data,
                                   uint64_t n);
moe_status moe_gguf_writer_set_arr_str(moe_gguf_writer *w, const char *key,
                                       const moe_str *strs, uint64_t n);
/* Copies key/value `i` of `src` (any type, arrays included). */
moe_status moe_gguf_writer_copy_kv(moe_gguf_writer *w, const moe_gguf *src, int64_t i);
/* Removes a key if present. */
void       moe_gguf_writer_remove_key(moe_gguf_writer *w, const char *key);

/* Declares a tensor. `data` may be NULL when streaming with begin/
 * write_tensor_data; otherwise it is borrowed until write_file returns. */
moe_status moe_gguf_writer_add_tensor(moe_gguf_writer *w, const char *name,
                                      moe_type type, uint32_t n_dims,
                                      const int64_t *ne, const void *data);

moe_status moe_gguf_writer_write_file(moe_gguf_writer *w, const char *path, moe_err *err);
moe_status moe_gguf_writer_begin(moe_gguf_writer *w, const char *path, moe_err *err);
moe_status moe_gguf_writer_write_tensor_data(moe_gguf_writer *w, int64_t idx,
                                             const void *data, moe_err *err);
/* Streams tensor `idx` in pieces instead: consecutive calls append `size`
 * bytes each until the tensor's size is reached (then the padding follows
 * and the next tensor is due), so a tensor assembled from parts (an expert
 * stack) never has to be in memory whole. More bytes than the tensor has
 * left, or a whole-tensor write in the middle of a part-written tensor, is
 * MOE_ERR_INVALID_ARG. */
moe_status moe_gguf_writer_write_tensor_part(moe_gguf_writer *w, int64_t idx,
                                             const void *data, size_t size, moe_err *err);
moe_status moe_gguf_writer_finish(moe_gguf_writer *w, moe_err *err);

/* ------------------------------------------------------------------------ */
/* Safetensors                                                              */
/* ------------------------------------------------------------------------ */

/* Reads Hugging Face `.safetensors` files: an 8-byte little-endian header
 * length N, N bytes of JSON, then the tensor data. The JSON is an object
 * whose keys are tensor names, each mapping to
 *   {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}
 * (offsets relative to the data section, shape outermost first), plus an
 * optional "__metadata__" object of string values.
 *
 * Checks, each reported with the file and the byte offset or tensor at
 * fault: the header length fits the file (and is at most 100 MiB, the
 * format's own limit); the JSON is well formed (strict: no trailing commas,
 * no comments, valid escapes and UTF-8, integers without sign, fraction
 * or exponent; trailing spaces after the object are allowed, as writers
 * pad with them); every tensor has exactly dtype, shape and data_offsets;
 * the dtype is known; end - begin equals the element count times the dtype
 * size (overflow checked); the tensors tile the data section exactly, in
 * some order, with no gap or overlap, as the reference implementation
 * requires; tensor names are unique, non-empty and contain no NUL. */

typedef enum moe_st_dtype {
    MOE_ST_BOOL = 0,
    MOE_ST_U8,
    MOE_ST_I8,
    MOE_ST_F8_E5M2,
    MOE_ST_F8_E4M3,
    MOE_ST_F8_E8M0,
    MOE_ST_I16,
    MOE_ST_U16,
    MOE_ST_F16,
    MOE_ST_BF16,
    MOE_ST_I32,
    MOE_ST_U32,
    MOE_ST_F32,
    MOE_ST_F64,
    MOE_ST_I64,
    MOE_ST_U64,
    MOE_ST_DTYPE_COUNT,
} moe_st_dtype;

/* "F32", "BF16", ... as written in files; NULL if out of range. */
const char *moe_st_dtype_name(moe_st_dtype dtype);
/* Bytes per element (1, 2, 4 or 8); 0 if out of range. */
size_t      moe_st_dtype_size(moe_st_dtype dtype);
/* Parses a file's dtype string (case-sensitive, as the format is). */
bool        moe_st_dtype_from_name(const char *name, moe_st_dtype *out);

#define MOE_SAFETENSORS_MAX_DIMS 8

/* One tensor as described by the header. `data` points into the mapping
 * (for a zero-size tensor it may point one past the last byte). */
typedef struct moe_safetensors_tensor {
    const char  *name;        /* NUL-terminated, decoded from JSON         */
    moe_st_dtype dtype;
    const char  *dtype_name;  /* moe_st_dtype_name(dtype)                  */
    uint32_t     n_dims;      /* 0 (a scalar) .. MOE_SAFETENSORS_MAX_DIMS  */
    int64_t      shape[MOE_SAFETENSORS_MAX_DIMS]; /* outermost first, as in
                                 the file (the reverse of GGUF's ne[]);
                                 unused entries are 1                       */
    uint64_t     offset;      /* data_offsets[0], from the data section    */
    uint64_t     size_bytes;  /* data_offsets[1] - data_offsets[0]         */
    const void  *data;
} moe_safetensors_tensor;

typedef struct moe_safetensors moe_safetensors;

/* Maps `path` read-only and validates its header (the tensor data is not
 * read, so opening a 10 GB shard costs only its header). */
moe_status moe_safetensors_open(const char *path, moe_safetensors **out, moe_err *err);
/* The same over `size` bytes in memory, borrowed until free; `name` is
 * used in messages. For tests and the fuzzer. */
moe_status moe_safetensors_open_memory(const void *data, size_t size, const char *name,
                                       moe_safetensors **out, moe_err *err);
void       moe_safetensors_free(moe_safetensors *st);

/* Tensors in the order the header lists them. */
int64_t moe_safetensors_n_tensors(const moe_safetensors *st);
const moe_safetensors_tensor *moe_safetensors_tensor_at(const moe_safetensors *st, int64_t i);
/* NULL if absent. */
const moe_safetensors_tensor *moe_safetensors_find(const moe_safetensors *st, const char *name);

/* The "__metadata__" map (string to string), in file order. */
int64_t     moe_safetensors_n_metadata(const moe_safetensors *st);
/* Entry i: *key and *value borrow from the handle. False if out of range. */
bool        moe_safetensors_metadata_at(const moe_safetensors *st, int64_t i,
                                        const char **key, const char **value);
/* Value for `key`, or NULL. */
const char *moe_safetensors_metadata(const moe_safetensors *st, const char *key);

/* Size of the whole file and offset of the data section (8 + N). */
uint64_t moe_safetensors_file_bytes(const moe_safetensors *st);
uint64_t moe_safetensors_data_offset(const moe_safetensors *st);

/* ------------------------------------------------------------------------ */
/* Hashing                                                                  */
/* ------------------------------------------------------------------------ */

/* SHA-256 for checking downloaded and installed model files. Uses the CPU's
 * SHA extensions when it has them (x86-64 SHA-NI: about 1.5-2 GB/s per
 * core), portable C otherwise; the digests are identical. A context is used
 * by one thread at a time; contexts are independent. */
typedef struct moe_sha256 {
    uint32_t state[8];
    uint64_t n_bytes;
    uint8_t  buf[64];
    size_t   buf_len;
    int      hw;       /* 1 if this context uses the SHA extensions */
} moe_sha256;

void moe_sha256_init(moe_sha256 *ctx);
void moe_sha256_update(moe_sha256 *ctx, const void *data, size_t len);
/* Writes the digest; the context must be re-initialised before reuse. */
void moe_sha256_final(moe_sha256 *ctx, uint8_t out[32]);
/* 64 lowercase hex digits and a NUL. */
void moe_sha256_hex(const uint8_t digest[32], char out[65]);
/* Allows or forbids the SHA extensions for contexts initialised later (for
 * tests and benchmarks); returns whether the CPU has them. */
bool moe_sha256_use_hw(bool allow);

/* ------------------------------------------------------------------------ */
/* Model quantisation                                                       */
/* ------------------------------------------------------------------------ */

/* Options for moe_model_quantize_ex. Fill with moe_quantize_params_init. */
typedef struct moe_quantize_params {
    moe_type type;     /* target: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K   */
    int      n_threads; /* worker threads; <= 0 means 1                     */
    /* Called from the calling thread after each chunk of work with the
     * elements converted so far and in total; may be NULL. */
    void   (*progress)(void *user, int64_t done, int64_t total);
    void    *progress_user;
} moe_quantize_params;

void moe_quantize_params_init(moe_quantize_params *params, moe_type type);

/* Writes a copy of the GGUF model `in_path` (a split set is read whole and
 * written as one file) with its tensors converted to `type`, following
 * llama-quantize's policy so the result matches what it would make:
 * 1-D tensors, norms, the MoE router (ffn_gate_inp) and other small tensors
 * llama.cpp keeps unquantised are written F32; output.weight (or tied
 * token embeddings) gets Q6_K for quantised targets other than Q8_0; Q4_K
 * is llama.cpp's Q4_K_M mixture (some attn_v/ffn_down layers Q6_K); a row
 * length that does not fit the block size falls back to Q8_0 or F16. Every
 * key/value is copied except split.*; general.file_type is set to
 * llama.cpp's LLAMA_FTYPE number (F32 0, F16 1, Q4_0 2, Q8_0 7, Q4_K 15 =
 * Q4_K_M, Q6_K 18, BF16 32) and general.quantization_version to 2.
 * A tensor already in its chosen type is copied byte for byte; others are
 * dequantised row by row to F32 and quantised, so memory use is one output
 * tensor plus a row per thread. The file appears at `out_path` only when
 * complete (written as "<out_path>.part", then renamed over any existing
 * file); on any error nothing is left behind. `out_path` may equal
 * `in_path`. */
moe_status moe_model_quantize(const char *in_path, const char *out_path,
                              moe_type type, moe_err *err);
moe_status moe_model_quantize_ex(const char *in_path, const char *out_path,
                                 const moe_quantize_params *params, moe_err *err);

/* The per-tensor type policy moe_model_quantize applies, for writers that
 * produce a model's tensors themselves (the Hugging Face importer) and want
 * the same mixture. Usage: new; count(name) for every tensor; then
 * pick(name, ne) once per tensor in file order (some choices depend on the
 * position among tensors of a kind); ftype gives general.file_type.
 * `n_layer` is <arch>.block_count, `n_expert` <arch>.expert_count (0 for a
 * dense model). MOE_ERR_UNSUPPORTED for a target moe_model_quantize does
 * not write. */
typedef struct moe_quant_policy moe_quant_policy;

moe_status moe_quant_policy_new(moe_type target, int n_layer, int n_expert,
                                moe_quant_policy **out, moe_err *err);
void       moe_quant_policy_free(moe_quant_policy *policy);
void       moe_quant_policy_count(moe_quant_policy *policy, const char *name);
moe_type   moe_quant_policy_pick(moe_quant_policy *policy, const char *name,
                                 const int64_t ne[MOE_GGUF_MAX_DIMS]);
uint32_t   moe_quant_policy_ftype(const moe_quant_policy *policy);

/* ------------------------------------------------------------------------ */
/* Tokenizer                                                                */
/* ------------------------------------------------------------------------ */

typedef enum moe_vocab_kind {
    MOE_VOCAB_BPE = 1, /* tokenizer.ggml.model = "gpt2": byte-level BPE     */
    MOE_VOCAB_SPM = 2, /* tokenizer.ggml.model = "llama": SentencePiece BPE */
} moe_vocab_kind;

/* Token types as stored in tokenizer.ggml.token_type. */
typedef enum moe_token_type {
    MOE_TOKEN_UNDEFINED    = 0,
    MOE_TOKEN_NORMAL       = 1,
    MOE_TOKEN_UNKNOWN      = 2,
    MOE_TOKEN_CONTROL      = 3,
    MOE_TOKEN_USER_DEFINED = 4,
    MOE_TOKEN_UNUSED       = 5,
    MOE_TOKEN_BYTE         = 6,
} moe_token_type;

/* Special ids; a vocabulary that lacks one reports -1. */
typedef enum moe_special {
    MOE_SPECIAL_BOS = 0,
    MOE_SPECIAL_EOS,
    MOE_SPECIAL_EOT,
    MOE_SPECIAL_UNK,
    MOE_SPECIAL_PAD,
    MOE_SPECIAL_SEP,
    MOE_SPECIAL_NL,
    MOE_SPECIAL_FIM_PRE,
    MOE_SPECIAL_FIM_SUF,
    MOE_SPECIAL_FIM_MID,
    MOE_SPECIAL_FIM_PAD,
    MOE_SPECIAL_FIM_REP,
    MOE_SPECIAL_FIM_SEP,
    MOE_SPECIAL_COUNT,
} moe_special;

typedef struct moe_vocab moe_vocab;

/* Builds the tokenizer from the file's tokenizer.ggml.* keys. The handle
 * copies what it needs: `gguf` may be freed afterwards. */
moe_status moe_vocab_load(const moe_gguf *gguf, moe_vocab **out, moe_err *err);
void       moe_vocab_free(moe_vocab *vocab);

moe_vocab_kind moe_vocab_kind_of(const moe_vocab *vocab);
/* tokenizer.ggml.pre as loaded ("qwen2", "llama-bpe", "default", ...). */
const char    *moe_vocab_pre(const moe_vocab *vocab);
int32_t        moe_vocab_n_tokens(const moe_vocab *vocab);
int32_t        moe_vocab_special(const moe_vocab *vocab, moe_special which);
bool           moe_vocab_add_bos(const moe_vocab *vocab);
bool           moe_vocab_add_eos(const moe_vocab *vocab);
/* The token's type as stored, with llama.cpp's corrections applied (texts
 * that end generation, such as "<|im_end|>", and FIM/EOT texts become
 * CONTROL); MOE_TOKEN_UNDEFINED for an id out of range. */
moe_token_type moe_vocab_token_type(const moe_vocab *vocab, int32_t id);
/* The token's stored text (byte-level BPE: the GPT-2 byte-mapped form). */
moe_str        moe_vocab_token_text(const moe_vocab *vocab, int32_t id);
/* True for ids that end generation (EOS, EOT and any other end-of-generation
 * token the vocabulary marks). */
bool           moe_vocab_is_eog(const moe_vocab *vocab, int32_t id);

/* Flags for moe_tokenize. */
#define MOE_TOKENIZE_ADD_SPECIAL   1u /* add BOS/EOS as the vocab asks       */
#define MOE_TOKENIZE_PARSE_SPECIAL 2u /* text like "<|im_start|>" becomes the
                                         control token instead of plain text */

/* Tokenizes `len` bytes of UTF-8 `text` exactly as llama.cpp does (same ids
 * for the same text and flags). Invalid UTF-8 is never rejected: byte-level
 * BPE reads each ill-formed byte as U+FFFD (as llama.cpp does), SentencePiece
 * falls back to byte tokens. Writes up to `cap` ids to `tokens` and the count
 * to `*n_tokens`; if `cap` is too small returns MOE_ERR_RANGE with
 * `*n_tokens` set to the number needed (`tokens` may be NULL when `cap` is
 * 0, to count). Any number of threads may tokenize with one vocabulary. */
moe_status moe_tokenize(const moe_vocab *vocab, const char *text, size_t len,
                        unsigned flags, int32_t *tokens, size_t cap,
                        size_t *n_tokens, moe_err *err);

/* The bytes a token stands for (byte-level BPE unmapped, SPM "▁" as space,
 * <0xNN> byte tokens as that byte). Control tokens give their text only when
 * `render_special` is true, else nothing. Returns the number of bytes, which
 * may exceed `cap` (then only `cap` were written), or -1 for an invalid id. */
int64_t moe_token_to_piece(const moe_vocab *vocab, int32_t id, bool render_special,
                           char *buf, size_t cap);

/* Streaming detokenizer: feed ids one at a time, get back only complete
 * UTF-8 characters; bytes of an unfinished character are held until the
 * next token completes them (or flush gives them up as U+FFFD). */
typedef struct moe_detok moe_detok;

moe_detok *moe_detok_new(const moe_vocab *vocab, bool render_special);
void       moe_detok_free(moe_detok *d);
/* Appends the text `id` completes to `out` (capacity `cap`, at most
 * cap-1 bytes plus NUL). Returns bytes written, or -1 for an invalid id or a
 * too-small buffer (then nothing is consumed). Ill-formed bytes come out as
 * U+FFFD, 3 bytes each, so 16 bytes plus 3 x the token's piece length
 * (moe_token_to_piece) always suffice; 64 plus the piece length suffice
 * whenever the piece holds no ill-formed bytes. */
int64_t    moe_detok_push(moe_detok *d, int32_t id, char *out, size_t cap);
/* Emits what is held (incomplete sequences as U+FFFD) and resets. */
int64_t    moe_detok_flush(moe_detok *d, char *out, size_t cap);

/* ------------------------------------------------------------------------ */
/* Sampling                                                                 */
/* ------------------------------------------------------------------------ */

/* A sampler turns one row of logits (float[n_vocab]) into a token id.
 *
 * The chain, in this order (llama.cpp's default chain is the model, with one
 * deliberate change, marked *):
 *   1. penalties over the last `penalty_last_n` tokens of the sequence. For
 *      every distinct token t seen c > 0 times in that window:
 *        repetition (llama.cpp): logit > 0 ? logit / repeat_penalty
 *                                          : logit * repeat_penalty
 *        then presence/frequency (OpenAI):
 *                                logit -= presence + frequency * c
 *   2. logit bias: logit += bias[t]; a bias of -INFINITY bans t.
 *      (*) llama.cpp adds the bias before the penalties; here it comes
 *      after, so a bias is exactly the offset the caller asked for (OpenAI
 *      describes logit_bias as added to the final logits) and a +100 "force
 *      this token" is not shrunk by a multiplicative repetition penalty.
 *      The two orders differ only for a token that is both biased and
 *      penalised.
 *   3. greedy: if temperature == 0 the answer is the highest logit (ties:
 *      lowest id) and steps 4-8 are skipped.
 *   4. top-k: keep the k highest logits (ties: lower id first).
 *   5. top-p: softmax (temperature 1) over what is left; sort by logit
 *      descending (ties: lower id first); keep the shortest prefix whose
 *      probability mass is >= top_p (always at least one token).
 *   6. min-p: keep tokens with p >= min_p * p_max, i.e.
 *      logit >= max_logit + ln(min_p).
 *   7. temperature: logit / temperature over the survivors.
 *   8. draw one token from the softmax of the survivors with the sampler's
 *      own PRNG (xoshiro256**, seeded by splitmix64 from `seed`).
 * Temperature comes last (as in llama.cpp) so the filters see the model's own
 * distribution: a high temperature widens the draw among plausible tokens but
 * does not let implausible ones through the top-p/min-p gates.
 *
 * Determinism: the same seed, parameters and logits give the same tokens on
 * every platform (Linux, Windows, under wine): the sampler uses no libm
 * transcendental functions and no rand(); its exp/log are its own and only
 * IEEE +, -, *, / are used, in a fixed order.
 *
 * Logits: NaN is treated as -INFINITY (never drawn), +INFINITY as the
 * largest finite float. */

typedef struct moe_logit_bias {
    int32_t token; /* 0 <= token < n_vocab                                 */
    float   bias;  /* finite, or -INFINITY to ban; entries for the same
                      token add up                                         */
} moe_logit_bias;

typedef struct moe_sampler_params {
    float    temperature;       /* >= 0, finite; 0 = greedy                  */
    int32_t  top_k;             /* <= 0 or >= n_vocab: off                   */
    float    top_p;             /* [0, 1]; 1: off; 0 keeps the top token     */
    float    min_p;             /* [0, 1]; 0: off                            */
    float    repeat_penalty;    /* > 0, finite; 1: off                       */
    int32_t  penalty_last_n;    /* >= 0 tokens of history; 0: no penalties   */
    float    presence_penalty;  /* finite; 0: off (OpenAI: -2..2)            */
    float    frequency_penalty; /* finite; 0: off (OpenAI: -2..2)            */
    uint64_t seed;              /* the whole 64 bits are used                */
    /* Borrowed by moe_sampler_new, which copies it; may be NULL when 0. */
    const moe_logit_bias *logit_bias;
    size_t                n_logit_bias;
} moe_sampler_params;

/* Defaults: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05,
 * repeat_penalty 1.0 (off), penalty_last_n 64, presence 0, frequency 0,
 * seed MOE_SAMPLER_DEFAULT_SEED, no logit bias. The seed is fixed so that a
 * default run is reproducible; a server should pass a random one when the
 * request names none. */
#define MOE_SAMPLER_DEFAULT_SEED UINT64_C(0x4d6f654465736b31)
moe_sampler_params moe_sampler_params_default(void);

/* Checks every field against the ranges above (and each bias token against
 * n_vocab); MOE_ERR_INVALID_ARG with a message naming the field. */
moe_status moe_sampler_params_check(const moe_sampler_params *params,
                                    int32_t n_vocab, moe_err *err);

typedef struct moe_sampler moe_sampler;

/* Makes a sampler for rows of `n_vocab` logits (1 .. 2^30). All scratch
 * (about 16 bytes per vocabulary entry plus 4 per history token) is allocated
 * here, so sampling never allocates. Invalid params: MOE_ERR_INVALID_ARG. */
moe_status moe_sampler_new(int32_t n_vocab, const moe_sampler_params *params,
                           moe_sampler **out, moe_err *err);
void       moe_sampler_free(moe_sampler *s);

/* Forgets the history and restarts the PRNG from params.seed, so the same
 * calls afterwards give the same tokens as after moe_sampler_new. */
void moe_sampler_reset(moe_sampler *s);

/* Appends `token` to the sampler's own history (the last penalty_last_n
 * tokens are kept), used when moe_sampler_sample gets recent == NULL. Feed
 * it the prompt tokens too if they should be penalised. */
void moe_sampler_accept(moe_sampler *s, int32_t token);

/* Runs the chain on `logits` (n_vocab floats, not modified) and draws a
 * token. Penalties use the last penalty_last_n entries of `recent`
 * (n_recent tokens, oldest first; ids outside the vocabulary are ignored),
 * or the sampler's own history when recent is NULL. The sampled token is
 * NOT added to the history: call moe_sampler_accept for that.
 * Returns the token (0 <= id < n_vocab), or -1 when no token can be drawn
 * (every logit NaN/-INFINITY or banned; NULL logits), with a message in err.
 * Takes well under 1 ms at n_vocab 151936 (docs/benchmarks.md). One thread
 * at a time per sampler. */
int32_t moe_sampler_sample(moe_sampler *s, const float *logits,
                           const int32_t *recent, size_t n_recent, moe_err *err);

/* A token with its probability under the final distribution. */
typedef struct moe_token_prob {
    int32_t token;
    float   prob;
} moe_token_prob;

/* The distribution moe_sampler_sample would draw from (after step 7), without
 * drawing: the PRNG does not advance. Writes the min(cap, n) most probable
 * candidates to `out`, most probable first (ties: lower id first), and the
 * number of candidates with non-zero weight to *n_total. Greedy gives one
 * candidate with probability 1. Same errors as moe_sampler_sample. */
moe_status moe_sampler_probs(moe_sampler *s, const float *logits,
                             const int32_t *recent, size_t n_recent,
                             moe_token_prob *out, size_t cap, size_t *n_total,
                             moe_err *err);

/* ---- End of generation ------------------------------------------------- */

/* Why a generation ended. */
typedef enum moe_finish_reason {
    MOE_FINISH_NONE = 0, /* not finished: keep generating                    */
    MOE_FINISH_EOG,      /* the model produced an end-of-generation token    */
    MOE_FINISH_STOP,     /* the text completed one of the stop strings       */
    MOE_FINISH_LENGTH,   /* max_tokens were generated                        */
} moe_finish_reason;

/* "none", "eog", "stop", "length". */
const char *moe_finish_reason_str(moe_finish_reason reason);
/* The OpenAI finish_reason: "stop" for EOG and STOP, "length", or NULL for
 * NONE. */
const char *moe_finish_reason_openai(moe_finish_reason reason);

/* Decides after each generated token, in this precedence: the token is an
 * end-of-generation token (moe_vocab_is_eog) -> EOG; the stop matcher
 * reported a stop -> STOP; n_generated (tokens so far, this one included)
 * >= max_tokens -> LENGTH (max_tokens < 0: no limit; 0: finish at once);
 * else NONE. An EOG token's text is not shown: do not feed it to the stop
 * matcher. */
moe_finish_reason moe_finish_check(bool token_is_eog, bool stop_matched,
                                   int64_t n_generated, int64_t max_tokens);

/* ---- Stop strings ------------------------------------------------------ */

/* Watches streamed text for stop strings. Feed it each decoded piece; it
 * returns the bytes that are safe to show and holds back the tail that could
 * still be the start of a stop string, so a client never sees part of one.
 *
 *   stream: "Hello<|e" "nd|> more"     stop: "<|end|>"
 *   feed 1: shows "Hello", holds "<|e"
 *   feed 2: stop completed; shows nothing more; reason STOP
 *
 * When several stop strings could complete, the one that completes first in
 * the byte stream wins (ties: the longer one), so the result does not depend
 * on how the text was cut into pieces. Held bytes never end in the middle of
 * a UTF-8 character, and a piece that ends inside a character is held until
 * the character completes. */
typedef struct moe_stop_matcher moe_stop_matcher;

/* Copies `n_stops` NUL-terminated stop strings (each 1 .. 4096 bytes, at
 * most 64 strings; n_stops may be 0, then text only passes through). */
moe_status moe_stop_matcher_new(const char *const *stops, size_t n_stops,
                                moe_stop_matcher **out, moe_err *err);
void       moe_stop_matcher_free(moe_stop_matcher *m);
/* Forgets held text and a previous stop (for the next generation). */
void       moe_stop_matcher_reset(moe_stop_matcher *m);

/* What one feed (or flush) gives back. `text` borrows from the matcher and
 * stays valid until its next call. */
typedef struct moe_stop_result {
    const char *text;       /* bytes to show now (not NUL-terminated)       */
    size_t      len;
    int32_t     stop_index; /* index of the completed stop string, or -1    */
    size_t      held;       /* bytes held back after this call              */
} moe_stop_result;

/* Feeds `len` bytes. After a stop has been reported every later feed gives
 * no text and the same stop_index. Fails only for NULL piece with len > 0
 * or an allocation failure (the buffer grows only when a piece is longer
 * than any before). */
moe_status moe_stop_matcher_feed(moe_stop_matcher *m, const char *piece, size_t len,
                                 moe_stop_result *out, moe_err *err);
/* The generation ended without a stop: gives back everything held. */
moe_stop_result moe_stop_matcher_flush(moe_stop_matcher *m);

/* ------------------------------------------------------------------------ */
/* Hardware                                                                 */
/* ------------------------------------------------------------------------ */

/* What the machine offers the engine: CPU model and SIMD features, cores,
 * RAM, and GPUs with their memory. Filled by a probe of this machine or,
 * for tests and "what if I had..." questions, from a machine file.
 *
 * The probe never fails for lack of a GPU: a machine without the NVIDIA
 * driver (no libnvidia-ml.so.1 / nvml.dll) simply has no compute GPU, and
 * gpu_note says why. Environment variables it reads:
 *   MOEDESK_MACHINE=FILE     moe_hw_probe describes FILE instead of this
 *                            machine (format: moe_machine_parse below)
 *   MOEDESK_NVML_PATH=LIB    load NVML from LIB instead of the driver's
 *                            library (tests point it at a fake NVML)   */

#define MOE_HW_MAX_GPUS  16
#define MOE_HW_NAME_SIZE 128

/* CPU features as bits of moe_machine.cpu_features. x86 features count only
 * when the operating system saves the registers they use (XGETBV). */
typedef enum moe_cpu_feature {
    MOE_CPU_SSE42       = 1u << 0,
    MOE_CPU_AVX         = 1u << 1,
    MOE_CPU_AVX2        = 1u << 2,
    MOE_CPU_FMA         = 1u << 3,
    MOE_CPU_F16C        = 1u << 4,
    MOE_CPU_AVX512F     = 1u << 5,
    MOE_CPU_AVX512BW    = 1u << 6,
    MOE_CPU_AVX512VL    = 1u << 7,
    MOE_CPU_AVX512_VNNI = 1u << 8,
    MOE_CPU_AVX_VNNI    = 1u << 9,
    MOE_CPU_AVX512_BF16 = 1u << 10,
    MOE_CPU_NEON        = 1u << 11,
    MOE_CPU_DOTPROD     = 1u << 12,
} moe_cpu_feature;
#define MOE_CPU_FEATURE_COUNT 13

/* "sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
 * "avx512_vnni", "avx_vnni", "avx512_bf16", "neon", "dotprod"; NULL for a
 * value that is not exactly one feature bit. */
const char *moe_cpu_feature_name(moe_cpu_feature feature);
/* The inverse (exact, lower case); false if unknown. */
bool        moe_cpu_feature_from_name(const char *name, moe_cpu_feature *out);

typedef enum moe_gpu_source {
    MOE_GPU_SOURCE_NVML = 1, /* NVIDIA driver's management library         */
    MOE_GPU_SOURCE_DXGI = 2, /* Windows adapter list (any vendor)          */
    MOE_GPU_SOURCE_FILE = 3, /* a machine file                             */
} moe_gpu_source;

typedef struct moe_gpu_info {
    char           name[MOE_HW_NAME_SIZE]; /* "NVIDIA GeForce RTX 4090"   */
    char           driver[32];        /* driver version, "" if unknown     */
    uint64_t       vram_total_bytes;
    uint64_t       vram_free_bytes;   /* DXGI cannot tell: equals total    */
    double         power_watts;       /* current draw; 0 if unknown        */
    bool           compute;           /* usable by the CUDA backend (NVML
                                         GPUs, file GPUs unless they say
                                         "compute": false; DXGI: no)       */
    moe_gpu_source source;
} moe_gpu_info;

typedef struct moe_machine {
    char         name[MOE_HW_NAME_SIZE];     /* "this machine" or the file's
                                                "name"                      */
    char         cpu_name[MOE_HW_NAME_SIZE]; /* never empty after a probe   */
    uint32_t     cpu_features;               /* moe_cpu_feature bits        */
    int32_t      n_cores_logical;            /* >= 1                        */
    int32_t      n_cores_physical;           /* >= 1, <= logical            */
    uint64_t     ram_total_bytes;
    uint64_t     ram_free_bytes;             /* available to a new process  */
    int32_t      n_gpus;                     /* 0..MOE_HW_MAX_GPUS          */
    moe_gpu_info gpus[MOE_HW_MAX_GPUS];
    char         gpu_note[160];  /* how the GPUs were found, or why none:
                                    "NVML: libnvidia-ml.so.1 not found"     */
    bool         from_file;      /* described by a machine file             */
} moe_machine;

/* Describes this machine, or the file named by MOEDESK_MACHINE when that is
 * set (then errors are the file's). Fails only for a bad machine file or
 * when even the RAM size cannot be read. Takes a few milliseconds (NVML
 * initialisation can take longer on a machine with GPUs). */
moe_status moe_hw_probe(moe_machine *out, moe_err *err);
/* The same, always probing this machine (ignores MOEDESK_MACHINE). */
moe_status moe_hw_probe_system(moe_machine *out, moe_err *err);

/* Reads a machine file (at most 1 MiB): see moe_machine_parse. */
moe_status moe_machine_load(const char *path, moe_machine *out, moe_err *err);

/* Parses a machine description: one JSON object, for example
 *   { "name": "1x RTX 4090 workstation",
 *     "cpu": "AMD Ryzen 9 7950X", "cpu_features": ["avx2", "fma", "avx512f"],
 *     "cores_logical": 32, "cores_physical": 16,
 *     "ram_total": "64 GiB", "ram_free": "58 GiB",
 *     "gpus": [ { "name": "NVIDIA GeForce RTX 4090", "vram_total": "24564 MiB",
 *                 "vram_free": "24000 MiB", "driver": "560.94",
 *                 "power_watts": 350, "compute": true } ] }
 * Only these keys are allowed (an unknown or repeated key is an error, so a
 * typo cannot pass unnoticed). Sizes are byte counts, or strings of a
 * number and a unit (B, KB, MB, GB, TB powers of 1000; KiB, MiB, GiB, TiB
 * powers of 1024). Required: ram_total. Defaults: ram_free = ram_total,
 * vram_free = vram_total, cores 1, no features, no GPUs. The subset of JSON
 * read: objects, arrays, strings (escapes \" \\ \/ \b \f \n \r \t \uXXXX),
 * numbers, true/false; nesting at most 3 deep; at most MOE_HW_MAX_GPUS
 * GPUs. `source` names the text in messages (may be NULL). Never reads
 * past `len`; the text need not be NUL-terminated. */
moe_status moe_machine_parse(const char *text, size_t len, const char *source,
                             moe_machine *out, moe_err *err);

/* GPUs with compute set. */
int32_t  moe_machine_n_compute_gpus(const moe_machine *machine);

/* ------------------------------------------------------------------------ */
/* Memory planner                                                           */
/* ------------------------------------------------------------------------ */

/* Given a model (its tensor sizes from a GGUF file, or a catalog entry's
 * parameter counts and quantisation files) and a machine, the planner lists
 * every (quantisation, placement, context) option with the GPU and host
 * memory it needs, and chooses one. All figures are bytes.
 *
 * Estimate for one option (n_ctx tokens, one sequence):
 *   weights   from the file's tensor sizes (exact per group), or the
 *             catalog file size split over the groups in proportion to
 *             params x bpw, or params x bpw / 8 when no size is known
 *             (bpw: f32 32, f16/bf16 16, q8_0 8.5, q6_k 6.5625, q5_k 5.5,
 *             q4_k 4.5, q4_0 4.5, mxfp4 4.25, ... see moe_plan_quant_info)
 *   KV cache  n_layer_kv x 2 x n_head_kv x head_dim x cells x bytes, or for
 *             MLA n_layer_kv x (kv_lora_rank + qk_rope_head_dim) x cells x
 *             bytes; bytes per element f16 = 2, q8_0 = 34/32; cells = n_ctx,
 *             or min(n_ctx, n_swa + n_batch) on sliding-window layers; plus
 *             linear-attention layers' state, n_layer_linear x linear_n_head
 *             x linear_head_dim^2 x 4
 *   compute   4 x n_batch x (n_vocab + 8 n_embd + 2 n_expert_used n_ff_expert)
 *             activations and logits, plus 4 x 32 x n_head x n_ctx for an
 *             attention kernel that scores 32 queries at a time; with experts
 *             in RAM the host adds 4 x n_batch x (2 n_embd + 2 n_expert_used
 *             n_ff_expert) for the expert inputs and outputs. CPU only: the
 *             CPU backend keeps logits only for the rows asked for (one
 *             sequence: the last token), so n_batch x n_vocab becomes n_vocab
 *   overhead  MOE_PLAN_CUDA_OVERHEAD_BYTES per GPU used (CUDA context,
 *             cuBLAS workspace) and, on the host in every placement,
 *             MOE_PLAN_HOST_OVERHEAD_BYTES (threads, scheduler, allocator)
 *             plus MOE_PLAN_VOCAB_TOKEN_BYTES x n_vocab for the loaded
 *             tokenizer (strings, merges, lookup tables); measured against
 *             the engine's resident memory by tests/unit/test-plan-fit.c
 * The budget of a GPU is min(vram_total x ceiling, vram_free); of the host,
 * min(ram_total x ceiling, ram_free).
 *
 * Placements:
 *   GPU     every weight, KV and compute on the GPUs. With several GPUs the
 *           layers are split in proportion to the budgets: each GPU pays its
 *           own overhead and compute buffer, and each GPU after the first
 *           loses one layer (weights + KV) of room to the split granularity.
 *           The fewest GPUs that fit are used.
 *   HYBRID  embeddings/output, attention, routers, shared experts, KV and
 *           compute on the GPUs; routed experts in host RAM, run on the CPU.
 *           The option reports how many layers' experts would also fit on
 *           the GPUs (n_expert_layers_gpu). Only for models with experts and
 *           machines with a compute GPU.
 *   CPU     everything in host RAM.
 *
 * Choice: the contexts are tried in the order given; at the first context
 * where anything fits, the first placement in the order GPU, HYBRID, CPU
 * that has a fitting option wins, and within it the best quality (f32 >
 * f16/bf16 > q8_0 > q6_k > q5_k > q4_k > mxfp4 > iq4 > q4_0 > q3 > q2 >
 * q1; ties: the larger file). If nothing fits at any context the plan has
 * no choice and the reason says what the smallest option needs. */

#define MOE_PLAN_CUDA_OVERHEAD_BYTES (UINT64_C(400) << 20) /* per GPU used  */
#define MOE_PLAN_HOST_OVERHEAD_BYTES (UINT64_C(2) << 20)  /* + vocab part */
#define MOE_PLAN_VOCAB_TOKEN_BYTES   160                   /* per token      */
#define MOE_PLAN_DEFAULT_CEILING     0.90
#define MOE_PLAN_DEFAULT_N_CTX       32768
#define MOE_PLAN_DEFAULT_N_BATCH     512

/* Tensor groups; their names are the catalog's keys. */
typedef enum moe_tensor_group {
    MOE_GROUP_EMBD_OUTPUT = 0, /* "embd_output": token_embd, output, output_norm  */
    MOE_GROUP_ATTENTION,       /* "attention": attention weights, all layer norms */
    MOE_GROUP_ROUTER,          /* "router": ffn_gate_inp*, exp_probs_b            */
    MOE_GROUP_SHARED_EXPERTS,  /* "shared_experts": *_shexp, dense FFN layers     */
    MOE_GROUP_ROUTED_EXPERTS,  /* "routed_experts": *_exps                        */
    MOE_GROUP_COUNT,
} moe_tensor_group;

/* The group of a GGUF tensor name (llama.cpp's names). */
moe_tensor_group moe_tensor_group_of(const char *tensor_name);
/* "embd_output", "attention", "router", "shared_experts", "routed_experts";
 * NULL when out of range. */
const char      *moe_tensor_group_name(moe_tensor_group group);

/* What a quantisation name means to the planner: nominal bits per weight
 * and a quality rank (higher is better). Accepts llama.cpp file-type names
 * in any case with an optional "UD-" prefix and size suffix: "Q4_K_M",
 * "q4_k", "UD-Q4_K_XL", "BF16", "MXFP4", "IQ1_S"... False if unknown. */
bool moe_plan_quant_info(const char *quant, double *bpw, int32_t *quality);

#define MOE_PLAN_MAX_VARIANTS 32
#define MOE_PLAN_MAX_CTX      8

/* One way the weights can be stored: a file (or split set) or a
 * quantisation the importer would produce. */
typedef struct moe_plan_variant {
    char     name[48];       /* what to show: "Q4_K_M", "BF16 (import)"     */
    char     quant[24];      /* its quantisation, for moe_plan_quant_info   */
    double   bpw;
    int32_t  quality;
    uint64_t file_bytes;     /* 0: unknown, estimated from params x bpw     */
    bool     size_estimated; /* file_bytes is an estimate                   */
    bool     exact_groups;   /* group_bytes are the file's tensor sizes     */
    uint64_t group_bytes[MOE_GROUP_COUNT]; /* weights per group            */
} moe_plan_variant;

/* A model as the planner sees it. Zero-initialise, fill, add variants. */
typedef struct moe_plan_model {
    char     name[128];
    char     arch[32];            /* general.architecture                   */
    int64_t  n_layer;
    int64_t  n_embd;
    int64_t  n_vocab;
    int64_t  n_head;
    int64_t  n_head_kv;           /* 0: n_head                              */
    int64_t  head_dim_k;          /* 0: n_embd / n_head                     */
    int64_t  head_dim_v;          /* 0: head_dim_k                          */
    int64_t  kv_lora_rank;        /* > 0: MLA, the cache holds the latent   */
    int64_t  qk_rope_head_dim;    /* MLA: rotary part stored beside it      */
    int64_t  n_layer_kv;          /* layers with a KV cache; 0: n_layer      */
    int64_t  n_layer_swa;         /* of those, sliding-window layers        */
    int64_t  n_swa;               /* their window                           */
    int64_t  n_layer_linear;      /* linear-attention layers (fixed state)  */
    int64_t  linear_n_head;
    int64_t  linear_head_dim;
    int64_t  n_expert;            /* 0 for a dense model                    */
    int64_t  n_expert_used;
    int64_t  n_ff_expert;
    int64_t  n_layer_moe;         /* layers with routed experts; 0: n_layer */
    int64_t  n_ctx_train;
    uint64_t group_params[MOE_GROUP_COUNT];
    size_t           n_variants;
    moe_plan_variant variants[MOE_PLAN_MAX_VARIANTS];
} moe_plan_model;

/* Fills `out` from a GGUF file's metadata (<arch>.block_count,
 * .embedding_length, .attention.head_count[_kv], .key_length, .value_length,
 * .kv_lora_rank, .rope.dimension_count, .expert_count, .expert_used_count,
 * .expert_feed_forward_length, .context_length, .attention.sliding_window)
 * and tensor list: group_params and one variant, the file itself, with
 * exact group sizes. MOE_ERR_FORMAT naming the key when a required one is
 * missing. */
moe_status moe_plan_model_from_gguf(const moe_gguf *gguf, moe_plan_model *out,
                                    moe_err *err);

/* Adds a variant stored as `quant` (see moe_plan_quant_info) shown as
 * `name` (NULL: quant), with its file size (0 if unknown). Group sizes are
 * derived from group_params, which must be set first. MOE_ERR_NOT_FOUND for
 * an unknown quant, MOE_ERR_RANGE when MOE_PLAN_MAX_VARIANTS are present. */
moe_status moe_plan_model_add_variant(moe_plan_model *model, const char *name,
                                      const char *quant, uint64_t file_bytes,
                                      bool size_estimated, moe_err *err);

/* Checks the fields the planner needs (positive sizes, n_expert_used <=
 * n_expert, at least one variant...); the message names the field. */
moe_status moe_plan_model_check(const moe_plan_model *model, moe_err *err);

typedef struct moe_plan_params {
    int64_t  n_ctx[MOE_PLAN_MAX_CTX]; /* contexts to try, in order         */
    size_t   n_n_ctx;   /* 0: one, min(MOE_PLAN_DEFAULT_N_CTX, n_ctx_train) */
    int32_t  n_batch;   /* 0: MOE_PLAN_DEFAULT_N_BATCH                     */
    moe_type kv_type;   /* MOE_TYPE_F16 (0 means F16 too) or MOE_TYPE_Q8_0 */
    double   ceiling;   /* fraction of memory to use, (0, 1]; 0: 0.90      */
} moe_plan_params;

moe_plan_params moe_plan_default_params(void);

typedef enum moe_placement {
    MOE_PLACE_GPU    = 0,
    MOE_PLACE_HYBRID = 1,
    MOE_PLACE_CPU    = 2,
} moe_placement;

/* "all on GPU", "experts in RAM", "CPU only". */
const char *moe_placement_str(moe_placement placement);

typedef struct moe_plan_option {
    size_t        variant;            /* index into model->variants         */
    int64_t       n_ctx;
    moe_placement placement;
    int32_t       n_gpus;             /* GPUs used (0 for CPU)              */
    uint64_t      weights_gpu_bytes;
    uint64_t      weights_host_bytes;
    uint64_t      kv_bytes;           /* on the GPUs unless placement CPU   */
    uint64_t      compute_gpu_bytes;  /* all GPUs together                  */
    uint64_t      compute_host_bytes;
    uint64_t      overhead_gpu_bytes;
    uint64_t      overhead_host_bytes;
    uint64_t      gpu_bytes;          /* sum of the GPU parts               */
    uint64_t      host_bytes;         /* sum of the host parts              */
    uint64_t      gpu_budget_bytes;   /* of the GPUs used, less the split
                                         granularity reserve                */
    uint64_t      host_budget_bytes;
    int32_t       n_expert_layers_gpu; /* HYBRID: expert layers that would
                                          also fit on the GPUs              */
    bool          fits;
} moe_plan_option;

typedef struct moe_plan moe_plan;

/* Plans `model` (which must pass moe_plan_model_check) on `machine`;
 * `params` may be NULL for defaults. The plan copies what it needs. */
moe_status moe_plan_make(const moe_plan_model *model, const moe_machine *machine,
                         const moe_plan_params *params, moe_plan **out,
                         moe_err *err);
void       moe_plan_free(moe_plan *plan);

/* Options in order: context (as given), variant (best quality first),
 * placement (GPU, HYBRID, CPU). Placements that do not apply (HYBRID
 * without experts or GPU; GPU without a GPU) are left out. */
size_t                 moe_plan_n_options(const moe_plan *plan);
const moe_plan_option *moe_plan_option_at(const moe_plan *plan, size_t i);
/* Index of the chosen option, or -1 when nothing fits. */
int64_t                moe_plan_chosen(const moe_plan *plan);
/* One line explaining the choice, or what the smallest option needs. */
const char            *moe_plan_reason(const moe_plan *plan);

/* The catalog's verdict for one variant at one of the plan's contexts: the
 * best placement where it fits. */
typedef enum moe_verdict {
    MOE_VERDICT_FITS_GPU = 0, /* "fits on GPU"     */
    MOE_VERDICT_PARTIAL,      /* "partial offload" */
    MOE_VERDICT_CPU_ONLY,     /* "CPU only"        */
    MOE_VERDICT_WONT_FIT,     /* "won't fit"       */
} moe_verdict;

const char *moe_verdict_str(moe_verdict verdict);
/* WONT_FIT also for a variant or context the plan does not have. */
moe_verdict moe_plan_verdict(const moe_plan *plan, size_t variant, int64_t n_ctx);
/* Chat templates                                                           */
/* ------------------------------------------------------------------------ */

/* A model's prompt format is a Jinja2 template (the GGUF key
 * tokenizer.chat_template). libmoe interprets the subset of Jinja2 that
 * chat templates use, with Python Jinja2's semantics as Hugging Face
 * transformers configures it (trim_blocks and lstrip_blocks on, break and
 * continue allowed, a tojson that keeps non-ASCII text), so the prompt is
 * byte for byte what transformers would build.
 *
 * Errors: a template that uses something the interpreter does not have is
 * MOE_ERR_UNSUPPORTED and the message names the construct and its
 * "line L:C"; a syntax error is MOE_ERR_FORMAT with its line:column; a
 * template that calls raise_exception("...") fails with
 * MOE_ERR_INVALID_ARG and a message containing that text; a runtime type
 * error (e.g. concatenating None to a string) is MOE_ERR_INVALID_ARG.
 * Rendering is bounded: more than 16 MiB of output, 256 MiB of working
 * memory, 20 million evaluation steps or 300 levels of nesting/recursion
 * is MOE_ERR_RANGE, so a hostile template cannot hang or crash the
 * process (the deepest render needs under 256 KiB of stack). A parsed
 * template is immutable: several threads may render it at once. */

/* One chat message. Strings are UTF-8 and NUL-terminated. */
typedef struct moe_chat_msg {
    const char *role;              /* "system", "user", "assistant", "tool"...   */
    const char *content;           /* NULL: content is None (JSON null)          */
    const char *reasoning_content; /* NULL: no such key                          */
    const char *tool_calls_json;   /* JSON array of OpenAI-style tool calls
                                      ({"id","type","function":{"name",
                                      "arguments"}}), or NULL: no such key      */
    const char *tool_call_id;      /* tool results: the call answered, or NULL   */
    const char *name;              /* NULL: no such key                          */
} moe_chat_msg;

typedef struct moe_chat_template moe_chat_template;

/* Parses `len` bytes of template source. Unsupported tags, filters and
 * tests are reported here, not at render time. */
moe_status moe_chat_template_parse(const char *source, size_t len,
                                   moe_chat_template **out, moe_err *err);
void       moe_chat_template_free(moe_chat_template *t);

typedef struct moe_chat_params {
    const moe_chat_msg *messages;       /* ignored by ..._render_json       */
    size_t              n_messages;
    bool                add_generation_prompt;
    /* JSON array of tool definitions ({"type":"function","function":
     * {...}}), or NULL, in which case `tools` is None as in transformers. */
    const char         *tools_json;
    const char         *bos_token;      /* NULL: left undefined             */
    const char         *eos_token;
    /* A JSON object whose members become template variables, e.g.
     * {"enable_thinking": false, "reasoning_effort": "high"}. Applied last,
     * so it may also override any variable above. NULL: none. */
    const char         *extra_context_json;
    /* Most templates read tool_calls[].function.arguments as an object,
     * while OpenAI clients send a JSON string: when true, such strings
     * holding a JSON object are parsed into objects first. */
    bool                tool_args_as_objects;
    /* strftime_now()'s clock in seconds since 1970 (local time zone);
     * 0: now. */
    int64_t             now_unix;
} moe_chat_params;

/* Renders `p->messages` with the template. On success `*out` is a
 * malloc'd, NUL-terminated prompt the caller frees with free(), and
 * `*out_len` (if not NULL) its length in bytes. The template sees
 * `messages` (a list of dicts with the non-NULL fields of moe_chat_msg),
 * `add_generation_prompt`, `tools`, `documents` (None), `bos_token`,
 * `eos_token` and the extra context; plus the globals range, namespace,
 * dict, raise_exception and strftime_now. */
moe_status moe_chat_template_render(const moe_chat_template *t, const moe_chat_params *p,
                                    char **out, size_t *out_len, moe_err *err);

/* The same, with the messages given as a JSON array of message objects
 * (as in an OpenAI chat request: content may also be a list of parts,
 * tool_calls an array, any other keys are passed through). */
moe_status moe_chat_template_render_json(const moe_chat_template *t, const char *messages_json,
                                         const moe_chat_params *p, char **out, size_t *out_len,
                                         moe_err *err);

/* ------------------------------------------------------------------------ */
/* Demo model                                                               */
/* ------------------------------------------------------------------------ */

/* Writes MoeDesk's demo model to `path`: a tiny qwen3moe GGUF (about 7 MB,
 * Q8_0) whose weights are RANDOM, with a byte-level tokenizer and a ChatML
 * template. Its general.name says "random weights"; what it generates is
 * noise. It exists so every part of MoeDesk can be tried offline. The same
 * seed gives the same bytes on every platform. */
moe_status moe_demo_model_write(const char *path, uint64_t seed, moe_err *err);
/* Models and inference                                                     */
/* ------------------------------------------------------------------------ */

/* A loaded model: hyperparameters, the tokenizer and the weights, mapped
 * read-only from the GGUF file. Read-only after loading, so several
 * contexts (and threads) may share one model. */
typedef struct moe_model moe_model;

/* A decoding state over one model: KV cache, scratch buffers, threads.
 * One thread at a time. */
typedef struct moe_context moe_context;

typedef struct moe_model_params {
    /* Reserved for placement options (GPU layers, expert offload); zero
     * them. */
    int32_t reserved;
} moe_model_params;

moe_model_params moe_model_default_params(void);

/* Opens a GGUF model. Validates before returning: the architecture
 * (general.architecture must be one of "qwen3moe", "qwen2moe", "llama"
 * with experts, "olmoe"), its hyperparameters, and that every tensor the
 * architecture needs is present with the expected shape and a supported
 * type; the message names the key or tensor at fault. `params` may be
 * NULL for defaults. */
moe_status moe_model_load(const char *path, const moe_model_params *params,
                          moe_model **out, moe_err *err);
void       moe_model_free(moe_model *model);

/* general.architecture, e.g. "qwen3moe". */
const char *moe_model_arch(const moe_model *model);
/* general.name, or "" if absent. */
const char *moe_model_name(const moe_model *model);
int32_t     moe_model_n_vocab(const moe_model *model);
int32_t     moe_model_n_ctx_train(const moe_model *model);
int32_t     moe_model_n_embd(const moe_model *model);
int32_t     moe_model_n_layer(const moe_model *model);
int32_t     moe_model_n_expert(const moe_model *model);
int32_t     moe_model_n_expert_used(const moe_model *model);
/* Parameters and bytes of all weight tensors. */
uint64_t    moe_model_n_params(const moe_model *model);
uint64_t    moe_model_size_bytes(const moe_model *model);
/* The tokenizer; borrowed from the model. */
const moe_vocab *moe_model_vocab(const moe_model *model);
/* tokenizer.chat_template, or NULL if the file has none. */
const char *moe_model_chat_template(const moe_model *model);
/* The file the model was read from; borrowed from the model. */
const moe_gguf *moe_model_gguf(const moe_model *model);

typedef struct moe_context_params {
    int32_t  n_ctx;     /* KV cache cells shared by all sequences;
                           0 = min(n_ctx_train, 4096)                     */
    int32_t  n_seq_max; /* sequence ids run 0..n_seq_max-1 (1..64); 0 = 1  */
    int32_t  n_batch;   /* most tokens one moe_decode call takes; 0 = 512  */
    int32_t  n_threads; /* CPU threads; 0 = all processors                 */
    moe_type kv_type;   /* MOE_TYPE_F16 (the default), MOE_TYPE_Q8_0 (half
                           the memory) or MOE_TYPE_F32 (exact, for
                           comparisons with references; note F32 is 0, so a
                           zeroed struct asks for it: start from
                           moe_context_default_params())                    */
} moe_context_params;

moe_context_params moe_context_default_params(void);

/* Creates a context; every buffer a forward pass needs is allocated here
 * (the logits buffer grows if a batch asks for more rows than any before).
 * The model must outlive the context. `params` may be NULL for defaults. */
moe_status moe_context_new(const moe_model *model, const moe_context_params *params,
                           moe_context **out, moe_err *err);
void       moe_context_free(moe_context *ctx);

int32_t moe_context_n_ctx(const moe_context *ctx);
int32_t moe_context_n_batch(const moe_context *ctx);
int32_t moe_context_n_seq_max(const moe_context *ctx);
int32_t moe_context_n_threads(const moe_context *ctx);
/* The CPU kernel set in use: "scalar", "avx2", "avx512" or "neon". */
const char *moe_context_cpu_isa(const moe_context *ctx);
/* Bytes of the KV cache. */
uint64_t moe_context_kv_bytes(const moe_context *ctx);

/* A batch: n_tokens tokens, each with its position in its sequence, its
 * sequence id and whether its logits are wanted. Tokens of different
 * sequences (prefill chunks and single decode tokens) mix freely; within
 * one sequence positions must increase and continue after the positions
 * already in the cache. The arrays have room for `capacity` tokens. */
typedef struct moe_batch {
    int32_t  n_tokens;
    int32_t  capacity;
    int32_t *token;  /* [capacity] token ids                              */
    int32_t *pos;    /* [capacity] positions                              */
    int32_t *seq_id; /* [capacity] sequence ids, 0..n_seq_max-1           */
    int8_t  *logits; /* [capacity] nonzero: compute logits for this token */
} moe_batch;

/* A batch with room for `capacity` tokens (n_tokens = 0); NULL on failure.
 * Free with moe_batch_free. */
moe_batch *moe_batch_new(int32_t capacity);
void       moe_batch_free(moe_batch *batch);
void       moe_batch_clear(moe_batch *batch);
/* Appends one token; false if the batch is full. */
bool       moe_batch_add(moe_batch *batch, int32_t token, int32_t pos, int32_t seq_id,
                         bool want_logits);

/* Runs the model over the batch: appends every token's keys and values to
 * the cache of its sequence and computes logits where asked. Everything is
 * checked before anything changes: token ids in [0, n_vocab), sequence ids
 * in [0, n_seq_max), positions continuing their sequence, at most n_batch
 * tokens, and room in the cache (MOE_ERR_RANGE "context full ..." if not).
 * On error the cache is as before the call. */
moe_status moe_decode(moe_context *ctx, const moe_batch *batch, moe_err *err);

/* The n_vocab logits of token `i` of the last decoded batch, or NULL if
 * that token did not ask for logits (or i is out of range). Valid until
 * the next moe_decode. */
const float *moe_get_logits(const moe_context *ctx, int32_t i);

/* KV cache management, for prefix reuse and multi-sequence scheduling.
 * Position ranges are [p0, p1); p0 < 0 means 0 and p1 < 0 means no upper
 * bound. A seq_id < 0 means every sequence. */

/* Removes the sequence's cells in [p0, p1). Returns false only for a bad
 * seq_id. */
bool    moe_kv_seq_rm(moe_context *ctx, int32_t seq_id, int32_t p0, int32_t p1);
/* Makes dst share src's cells in [p0, p1) (no data is copied); dst's own
 * cells in that range are removed first. */
void    moe_kv_seq_copy(moe_context *ctx, int32_t src, int32_t dst, int32_t p0, int32_t p1);
/* Removes every sequence but this one. */
void    moe_kv_seq_keep(moe_context *ctx, int32_t seq_id);
/* Largest / smallest position of the sequence in the cache; -1 if empty. */
int32_t moe_kv_seq_pos_max(const moe_context *ctx, int32_t seq_id);
int32_t moe_kv_seq_pos_min(const moe_context *ctx, int32_t seq_id);
/* Empties the cache. */
void    moe_kv_clear(moe_context *ctx);
/* Cells in use (shared cells count once). */
int32_t moe_kv_n_used(const moe_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* MOE_H */

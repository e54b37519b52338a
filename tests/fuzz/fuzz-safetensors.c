/*
 * fuzz-safetensors.c — libFuzzer target for the safetensors header reader.
 * Each input is opened as a file image from memory. When it opens, every
 * tensor is looked up by name (the index must find that very tensor), its
 * first and last data byte are read (so ASan checks the extents the reader
 * promised), and every metadata entry is read back. When it does not open,
 * the message must be a non-empty C string.
 */
#include "moe.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t fuzz_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    moe_safetensors *st = NULL;
    moe_err err = { { 0 } };
    if (moe_safetensors_open_memory(data, size, "fuzz", &st, &err) != MOE_OK) {
        if (st || !memchr(err.msg, 0, sizeof err.msg) || err.msg[0] == '\0')
            abort();
        return 0;
    }
    uint64_t covered = 0;
    for (int64_t i = 0; i < moe_safetensors_n_tensors(st); i++) {
        const moe_safetensors_tensor *t = moe_safetensors_tensor_at(st, i);
        if (!t || moe_safetensors_find(st, t->name) != t || !t->dtype_name)
            abort();
        uint64_t elems = 1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            elems *= (uint64_t)t->shape[d];
        if (elems * moe_st_dtype_size(t->dtype) != t->size_bytes)
            abort();
        if (t->size_bytes) {
            const uint8_t *p = t->data;
            fuzz_sink += p[0] + p[t->size_bytes - 1];
        }
        covered += t->size_bytes;
    }
    /* The tensors tile the data section exactly. */
    if (covered != moe_safetensors_file_bytes(st) - moe_safetensors_data_offset(st))
        abort();
    for (int64_t i = 0; i < moe_safetensors_n_metadata(st); i++) {
        const char *k = NULL, *v = NULL;
        if (!moe_safetensors_metadata_at(st, i, &k, &v) || moe_safetensors_metadata(st, k) != v)
            abort();
        fuzz_sink += strlen(k) + strlen(v);
    }
    moe_safetensors_free(st);
    return 0;
}

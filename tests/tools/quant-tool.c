/*
 * quant-tool.c — a command-line door to libmoe's block formats, so scripts
 * (tests/scripts/test_quant_vs_llama.py) can compare them with llama.cpp's
 * without a Python binding:
 *
 *   quant-tool quantize   TYPE IN.f32 OUT     raw little-endian f32 in,
 *                                             packed blocks out
 *   quant-tool dequantize TYPE IN OUT.f32     packed blocks in, f32 out
 *
 * TYPE is a name moe_type_from_name accepts (f32, f16, bf16, q8_0, q4_0,
 * q4_k, q6_k). The element count comes from the input size. Exit status 0
 * on success, 1 with a message on stderr otherwise.
 */
#include "moe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads a whole file into a malloc'd buffer; NULL on failure. */
static void *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf != NULL) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        unsigned char *grown = realloc(buf, cap * 2);
        if (grown == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    if (ferror(f)) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = n;
    return buf;
}

static int write_all(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    size_t w = fwrite(data, 1, len, f);
    int rc = fclose(f);
    return (w == len && rc == 0) ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[1], "quantize") != 0 && strcmp(argv[1], "dequantize") != 0)) {
        fprintf(stderr, "usage: %s quantize|dequantize TYPE IN OUT\n", argv[0]);
        return 1;
    }
    const int quantize = strcmp(argv[1], "quantize") == 0;
    moe_type type;
    if (!moe_type_from_name(argv[2], &type)) {
        fprintf(stderr, "unknown type '%s'\n", argv[2]);
        return 1;
    }
    size_t in_len = 0;
    void *in = read_all(argv[3], &in_len);
    if (in == NULL) {
        fprintf(stderr, "cannot read %s\n", argv[3]);
        return 1;
    }
    const int64_t blk = moe_type_block_elems(type);
    const size_t blk_bytes = moe_type_block_bytes(type);
    int64_t n_elems;
    if (quantize) {
        n_elems = (int64_t)(in_len / sizeof(float));
        if (in_len % sizeof(float) != 0 || n_elems % blk != 0) {
            fprintf(stderr, "%s: %zu bytes is not a whole number of %s blocks\n",
                    argv[3], in_len, argv[2]);
            free(in);
            return 1;
        }
    } else {
        if (in_len % blk_bytes != 0) {
            fprintf(stderr, "%s: %zu bytes is not a whole number of %s blocks\n",
                    argv[3], in_len, argv[2]);
            free(in);
            return 1;
        }
        n_elems = (int64_t)(in_len / blk_bytes) * blk;
    }
    const size_t out_len = quantize ? moe_type_row_bytes(type, n_elems)
                                    : (size_t)n_elems * sizeof(float);
    void *out = malloc(out_len ? out_len : 1);
    moe_status st = MOE_ERR_NOMEM;
    if (out != NULL)
        st = quantize ? moe_quantize_row(type, in, out, n_elems)
                      : moe_dequantize_row(type, in, out, n_elems);
    int rc = 0;
    if (st != MOE_OK) {
        fprintf(stderr, "%s %s: %s\n", argv[1], argv[2], moe_status_str(st));
        rc = 1;
    } else if (write_all(argv[4], out, out_len) != 0) {
        fprintf(stderr, "cannot write %s\n", argv[4]);
        rc = 1;
    }
    free(out);
    free(in);
    return rc;
}

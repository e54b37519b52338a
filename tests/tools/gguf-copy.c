/*
 * gguf-copy.c — copies a GGUF file through libmoe's reader and writer, for
 * the interop tests: every key/value via moe_gguf_writer_copy_kv, every
 * tensor's bytes, plus known extras that other readers can check without
 * access to our code:
 *   moedesk.test.<type>     one scalar of each value type
 *   moedesk.test.arr_<type> one array of each element type (+ strings)
 *   interop.f32   F32  [8, 3]  element i = i * 0.5 - 3
 *   interop.q8_0  Q8_0 [64, 2] byte j = (j * 7 + 3) mod 256
 * usage: gguf-copy [--alignment N] IN OUT     (N: general.alignment to set)
 * llama.cpp (tests/node/gguf-interop.mjs) and gguf-py
 * (tests/scripts/check-gguf-py.py) then read OUT.
 */
#include "moe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Statuses are OR-ed: the result is only compared with MOE_OK. */
static moe_status add_scalars(moe_gguf_writer *w)
{
    moe_status st = MOE_OK;
    st |= moe_gguf_writer_set_u8(w, "moedesk.test.u8", 250);
    st |= moe_gguf_writer_set_i8(w, "moedesk.test.i8", -7);
    st |= moe_gguf_writer_set_u16(w, "moedesk.test.u16", 65000);
    st |= moe_gguf_writer_set_i16(w, "moedesk.test.i16", -32000);
    st |= moe_gguf_writer_set_u32(w, "moedesk.test.u32", 4000000000u);
    st |= moe_gguf_writer_set_i32(w, "moedesk.test.i32", -2000000000);
    st |= moe_gguf_writer_set_f32(w, "moedesk.test.f32", 0.25f);
    st |= moe_gguf_writer_set_bool(w, "moedesk.test.bool", true);
    st |= moe_gguf_writer_set_str(w, "moedesk.test.str", "h\xc3\xa9llo");
    st |= moe_gguf_writer_set_u64(w, "moedesk.test.u64", 18000000000000000000u);
    st |= moe_gguf_writer_set_i64(w, "moedesk.test.i64", -9000000000000000000);
    st |= moe_gguf_writer_set_f64(w, "moedesk.test.f64", -1.5e-300);
    return st;
}

static moe_status add_arrays(moe_gguf_writer *w)
{
    static const uint8_t u8[] = { 0, 1, 255 };
    static const int8_t i8[] = { -128, 127 };
    static const uint16_t u16[] = { 1, 65535 };
    static const int16_t i16[] = { -32768, 32767 };
    static const uint32_t u32[] = { 0, 4294967295u };
    static const int32_t i32[] = { -5, 5 };
    static const float f32[] = { 1.5f, -2.25f };
    static const uint8_t bools[] = { 1, 0, 1 };
    static const uint64_t u64[] = { 0, 18446744073709551615u };
    static const int64_t i64[] = { -1, 1 };
    static const double f64[] = { 3.5, -0.125 };
    static const moe_str strs[] = { { "a", 1 }, { "", 0 }, { "\xe4\xb8\xad", 3 } };
    moe_status st = MOE_OK;
    st |= moe_gguf_writer_set_arr(w, "moedesk.test.arr_u8", MOE_GGUF_UINT8, u8, 3);
    st |= moe_gguf_writer_set_arr(w, "moedesk.test.arr_i8", MOE_GGUF_INT8, i8, 2);
    st |= moe_gguf_writer_set_arr(w, "moedesk.test.arr_u16", MOE_GGUF_UINT16, u16, 2);
    st |= moe_gguf_writer_set_arr(w, "moedesk.test.arr_i16", MOE_GGUF_INT16, i16, 2);
    st |= moe_gguf_writer_set_arr(w, "moedesk.test.arr_u32", MOE_GGUF_UINT32, u32, 2);
    st |= moe_gguf_writer_set_arr(w, "moedesk.test.arr_i32", MOE_GGUF_INT32, i32, 2);
    st |= moe_gguf_writer_set_arr(w, "moedesk.test.arr_f32", MOE_GGUF_FLOAT32, f32, 2);
    st |= moe_gguf_writer_set_arr(w, "moedesk.test.arr_bool", MOE_GGUF_BOOL, bools, 3);
    st |= moe_gguf_writer_set_arr(w, "moedesk.test.arr_u64", MOE_GGUF_UINT64, u64, 2);
    st |= moe_gguf_writer_set_arr(w, "moedesk.test.arr_i64", MOE_GGUF_INT64, i64, 2);
    st |= moe_gguf_writer_set_arr(w, "moedesk.test.arr_f64", MOE_GGUF_FLOAT64, f64, 2);
    st |= moe_gguf_writer_set_arr_str(w, "moedesk.test.arr_str", strs, 3);
    return st;
}

int main(int argc, char **argv)
{
    long alignment = 0;
    if (argc == 5 && strcmp(argv[1], "--alignment") == 0) {
        alignment = strtol(argv[2], NULL, 10);
        argv += 2;
        argc -= 2;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: gguf-copy [--alignment N] IN OUT\n");
        return 2;
    }
    moe_err err = { { 0 } };
    moe_gguf *src = NULL;
    if (moe_gguf_open(argv[1], &src, &err) != MOE_OK) {
        fprintf(stderr, "gguf-copy: %s\n", err.msg);
        return 1;
    }
    moe_gguf_writer *w = moe_gguf_writer_new();
    moe_status st = MOE_OK;
    for (int64_t i = 0; i < moe_gguf_n_kv(src); i++)
        st |= moe_gguf_writer_copy_kv(w, src, i);
    if (alignment)
        st |= moe_gguf_writer_set_u32(w, "general.alignment", (uint32_t)alignment);
    st |= add_scalars(w) | add_arrays(w);
    for (int64_t i = 0; i < moe_gguf_n_tensors(src); i++) {
        const moe_gguf_tensor *t = moe_gguf_tensor_at(src, i);
        st |= moe_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    float f32[24];
    uint8_t q8[2 * 2 * 34];
    for (int i = 0; i < 24; i++)
        f32[i] = (float)i * 0.5f - 3.0f;
    for (size_t j = 0; j < sizeof q8; j++)
        q8[j] = (uint8_t)(j * 7 + 3);
    const int64_t ne_f32[2] = { 8, 3 }, ne_q8[2] = { 64, 2 };
    st |= moe_gguf_writer_add_tensor(w, "interop.f32", MOE_TYPE_F32, 2, ne_f32, f32);
    st |= moe_gguf_writer_add_tensor(w, "interop.q8_0", MOE_TYPE_Q8_0, 2, ne_q8, q8);
    if (st != MOE_OK) {
        fprintf(stderr, "gguf-copy: building the writer failed\n");
    } else if ((st = moe_gguf_writer_write_file(w, argv[2], &err)) != MOE_OK) {
        fprintf(stderr, "gguf-copy: %s\n", err.msg);
    }
    moe_gguf_writer_free(w);
    moe_gguf_free(src);
    return st == MOE_OK ? 0 : 1;
}

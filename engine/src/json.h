/*
 * json.h — a strict RFC 8259 JSON reader for the engine.
 *
 * libmoe takes chat messages, tool definitions and tool calls as JSON (the
 * REST service receives them that way) and turns them into chat-template
 * values; the engine has no GLib, so it carries this small parser. It is
 * strict: UTF-8 only (no BOM), no comments, no trailing commas, no NaN, no
 * lone surrogates, nothing after the value. Nesting is limited to
 * MOE_JSON_MAX_DEPTH so hostile input cannot exhaust the stack.
 *
 * A parsed document owns all its nodes (one arena); free it with
 * moe_json_doc_free(). Objects keep members in document order, duplicates
 * included; moe_json_get() returns the last one, as Python's json does.
 *
 * Also here: the two locale-independent number conversions that JSON and
 * the template interpreter share (a GTK process may run with a locale whose
 * decimal point is ',').
 */
#ifndef MOE_JSON_H
#define MOE_JSON_H

#include "moe.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MOE_JSON_MAX_DEPTH 256

typedef enum moe_json_type {
    MOE_JSON_NULL = 0,
    MOE_JSON_BOOL,
    MOE_JSON_INT,    /* an integer literal that fits int64_t            */
    MOE_JSON_FLOAT,  /* has a fraction or exponent, or is out of range  */
    MOE_JSON_STRING,
    MOE_JSON_ARRAY,
    MOE_JSON_OBJECT,
} moe_json_type;

typedef struct moe_json moe_json;

typedef struct moe_json_member {
    const char *key;      /* NUL-terminated; may also contain NULs (\u0000) */
    size_t      key_len;
    moe_json   *value;
} moe_json_member;

struct moe_json {
    moe_json_type type;
    union {
        bool    b;
        int64_t i;
        double  f;
        struct { const char *ptr; size_t len; } str; /* UTF-8, NUL-terminated */
        struct { moe_json **items; size_t n; } arr;
        struct { moe_json_member *members; size_t n; } obj;
    } u;
};

typedef struct moe_json_doc moe_json_doc;

/* Parses `len` bytes of `text`. On error the message names the byte offset
 * (and line:column) and what was expected. */
moe_status moe_json_parse(const char *text, size_t len, moe_json_doc **out, moe_err *err);
void       moe_json_doc_free(moe_json_doc *doc);
const moe_json *moe_json_doc_root(const moe_json_doc *doc);

/* The last member named `key` of an object, or NULL (also for non-objects). */
const moe_json *moe_json_get(const moe_json *obj, const char *key);

/* Parses a decimal floating-point literal of `len` bytes with '.' as the
 * decimal point whatever the C locale says. False if it is not one. */
bool moe_json_strtod(const char *s, size_t len, double *out);

/* Formats `v` the way Python's repr(float) does: the shortest digits that
 * read back to the same double, "1.0" for integral values, exponent form
 * ("1e+16", "1.5e-05") outside 1e-4 <= |v| < 1e16, "inf"/"-inf"/"nan".
 * `buf` must hold MOE_JSON_DOUBLE_BUF bytes; returns the length. */
#define MOE_JSON_DOUBLE_BUF 40
size_t moe_json_format_double(double v, char *buf);

#endif /* MOE_JSON_H */

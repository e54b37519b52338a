/*
 * fuzz-json.c — libFuzzer target for the strict JSON reader: parses the
 * input and, when it is accepted, walks every node and checks the tree's
 * invariants (string lengths, counts, lookups) so a malformed tree is
 * caught by ASan, not just a crash in the parser.
 */
#include "json.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t walk(const moe_json *v, int depth)
{
    if (depth > MOE_JSON_MAX_DEPTH + 1)
        abort();
    size_t n = 1;
    switch (v->type) {
    case MOE_JSON_STRING:
        if (v->u.str.ptr[v->u.str.len] != 0)
            abort();
        break;
    case MOE_JSON_ARRAY:
        for (size_t i = 0; i < v->u.arr.n; i++)
            n += walk(v->u.arr.items[i], depth + 1);
        break;
    case MOE_JSON_OBJECT:
        for (size_t i = 0; i < v->u.obj.n; i++) {
            const moe_json_member *m = &v->u.obj.members[i];
            if (m->key[m->key_len] != 0)
                abort();
            /* lookup by a NUL-free key must find a member with that key */
            if (strlen(m->key) == m->key_len && !moe_json_get(v, m->key))
                abort();
            n += walk(m->value, depth + 1);
        }
        break;
    default:
        break;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    moe_json_doc *doc = NULL;
    moe_err err = {{0}};
    if (moe_json_parse((const char *)data, size, &doc, &err) == MOE_OK) {
        const moe_json *root = moe_json_doc_root(doc);
        if (!root || walk(root, 1) > size + 1)
            abort();
        if (root->type == MOE_JSON_FLOAT) {
            char buf[MOE_JSON_DOUBLE_BUF];
            double back = 0;
            size_t n = moe_json_format_double(root->u.f, buf);
            if (!moe_json_strtod(buf, n, &back) || back != root->u.f)
                abort(); /* repr must round-trip */
        }
    } else if (doc != NULL || err.msg[0] == 0) {
        abort();
    }
    moe_json_doc_free(doc);
    return 0;
}

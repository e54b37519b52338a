/*
 * fuzz-prompt.c — libFuzzer target for the service's plain-C prompt parts
 * (app/service/jsonguard.c, toolcall.c, toolcall-formats.c; no GLib, so
 * they build without the app layer): the JSON guard and the tool-call
 * parser on arbitrary model output. Besides crashes (ASan/UBSan) it checks
 * the invariants the service relies on:
 *
 *   - the guard gives the same verdict fed whole or byte by byte, and a
 *     living prefix is completed by svc_json_guard_completion;
 *   - a complete object's members are found by svc_json_object_get, and a
 *     string literal decodes and re-encodes to a literal that decodes the
 *     same;
 *   - the tool-call stream split at a fuzzer-chosen cut gives the same
 *     content and calls as the whole reply, never emits a marker when
 *     calls were found, and every call's arguments are a JSON object.
 *
 * Input: byte 0 picks the tool format, byte 1 the stream cut; the rest is
 * the text.
 */
#include "jsonguard.h"
#include "toolcall.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_guard(const char *s, size_t n, bool object_only)
{
    svc_json_guard whole, bytes;
    svc_json_guard_init(&whole, object_only, 0);
    svc_json_guard_init(&bytes, object_only, 0);
    bool alive = svc_json_guard_feed(&whole, s, n);
    for (size_t i = 0; i < n; i++)
        svc_json_guard_feed(&bytes, s + i, 1);
    if (alive != svc_json_guard_alive(&bytes) ||
        svc_json_guard_complete(&whole) != svc_json_guard_complete(&bytes))
        abort();
    if (alive && !svc_json_guard_complete(&whole)) {
        char buf[16 + 8 * SVC_JSON_GUARD_MAX_DEPTH];
        size_t k = svc_json_guard_completion(&whole, buf, sizeof buf);
        svc_json_guard t = whole;
        if (k == 0 || k > sizeof buf || !svc_json_guard_feed(&t, buf, k) ||
            !svc_json_guard_complete(&t))
            abort();
    }
    if (!object_only && alive && svc_json_guard_complete(&whole)) {
        size_t span = svc_json_value_span(s, n);
        if (span == 0 || span > n)
            abort();
    }
}

static void check_string(const char *s, size_t n)
{
    size_t span = svc_json_value_span(s, n);
    if (span == 0 || s[0] != '"')
        return;
    char *dec = malloc(span + 1);
    long d = svc_json_string_decode(s, span, dec, span + 1);
    if (d < 0 || (size_t)d > span)
        abort();
    size_t need = svc_json_string_encode(dec, (size_t)d, NULL, 0);
    char *enc = malloc(need + 1);
    svc_json_string_encode(dec, (size_t)d, enc, need);
    char *dec2 = malloc(need + 1);
    long d2 = svc_json_string_decode(enc, need, dec2, need + 1);
    if (d2 != d || memcmp(dec, dec2, (size_t)d) != 0)
        abort();
    free(dec);
    free(enc);
    free(dec2);
}

static bool same_parse(const svc_tool_parse *a, const char *head, size_t head_len,
                       const svc_tool_parse *b)
{
    if (head_len + a->content_len != b->content_len || memcmp(head, b->content, head_len) ||
        memcmp(a->content, b->content + head_len, a->content_len) || a->n_calls != b->n_calls ||
        a->malformed != b->malformed)
        return false;
    for (size_t i = 0; i < a->n_calls; i++)
        if (strcmp(a->calls[i].name, b->calls[i].name) ||
            strcmp(a->calls[i].arguments, b->calls[i].arguments))
            return false;
    return true;
}

static void check_tools(svc_tool_format f, const char *s, size_t n, size_t cut)
{
    svc_tool_parse whole;
    if (!svc_tool_parse_text(f, s, n, &whole))
        return;
    for (size_t i = 0; i < whole.n_calls; i++) {
        const char *a = whole.calls[i].arguments;
        size_t an = strlen(a);
        if (svc_json_value_span(a, an) != an || a[0] != '{')
            abort();
    }
    svc_tool_stream *st = svc_tool_stream_new(f);
    if (!st) {
        svc_tool_parse_clear(&whole);
        return;
    }
    char *head = malloc(n + 1);
    size_t head_len = 0, k = 0;
    const char *o = svc_tool_stream_feed(st, s, cut, &k);
    if (o) {
        memcpy(head, o, k);
        head_len = k;
    }
    o = svc_tool_stream_feed(st, s + cut, n - cut, &k);
    if (o) {
        memcpy(head + head_len, o, k);
        head_len += k;
    }
    svc_tool_parse parts;
    if (o && svc_tool_stream_finish(st, &parts)) {
        if (!same_parse(&parts, head, head_len, &whole))
            abort();
        svc_tool_parse_clear(&parts);
    }
    svc_tool_stream_free(st);
    free(head);
    svc_tool_parse_clear(&whole);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    svc_tool_format f = (svc_tool_format)(data[0] % SVC_TOOL_FORMAT_COUNT);
    const char *s = (const char *)data + 2;
    size_t n = size - 2;
    size_t cut = n ? data[1] % (n + 1) : 0;
    check_guard(s, n, true);
    check_guard(s, n, false);
    check_string(s, n);
    const char *v;
    size_t vn;
    if (n && s[0] == '{')
        svc_json_object_get(s, n, "name", &v, &vn);
    check_tools(f, s, n, cut);
    return 0;
}

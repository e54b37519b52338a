/*
 * jsonguard.h — an incremental JSON validator (a pushdown state machine over
 * bytes) for JSON mode, plus the span helpers the tool-call parser uses to
 * find JSON values inside model output.
 *
 * Plain C, no GLib and no allocation, so the fuzz build (which has no app
 * layer) compiles this file into its libFuzzer target. The guard is a small
 * value type (32 bytes): copying it is how a caller asks "what if I appended
 * these bytes?" without disturbing the live state, which is what the JSON
 * constraint does once per vocabulary entry and step.
 *
 * Grammar: RFC 8259 exactly, with three deliberate restrictions that keep a
 * sampler out of trouble: nesting is at most SVC_JSON_GUARD_MAX_DEPTH deep,
 * a run of whitespace outside strings may be bounded (max_ws), and \u
 * escapes must form valid scalar values (a high surrogate must be followed
 * by a low one; a lone low surrogate is refused), so every accepted string
 * decodes to valid UTF-8. Raw bytes in strings must be well-formed UTF-8
 * (no overlongs, no surrogates, nothing above U+10FFFF) and no control
 * characters below 0x20.
 */
#ifndef MOEDESK_JSONGUARD_H
#define MOEDESK_JSONGUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SVC_JSON_GUARD_MAX_DEPTH 64

typedef struct svc_json_guard {
    uint64_t stack;    /* bit d set: level d is an object, clear: an array  */
    uint8_t  depth;    /* open containers, 0..SVC_JSON_GUARD_MAX_DEPTH       */
    uint8_t  state;    /* internal state (jsonguard.c), 0 = dead             */
    uint8_t  aux;      /* literal position / hex digits seen / UTF-8 bytes left */
    uint8_t  aux2;     /* literal id / first hex digit / next-byte range      */
    uint8_t  flags;    /* in a key, surrogate bookkeeping                     */
    uint8_t  ws_run;   /* consecutive whitespace bytes outside strings        */
    uint8_t  max_ws;   /* bound on ws_run; 0 = unbounded                      */
    uint8_t  any_top;  /* 1: any value at top level, 0: objects only          */
} svc_json_guard;

/* Starts a guard for one top-level value. `object_only`: the top level must
 * be an object (JSON mode); else any value. `max_ws`: the longest run of
 * whitespace bytes allowed outside strings (leading and trailing included),
 * 0 = no bound, at most 255. */
void svc_json_guard_init(svc_json_guard *g, bool object_only, unsigned max_ws);

/* Appends `len` bytes. Returns true while the text so far is a prefix of
 * some valid document (the trailing whitespace bound included); false once
 * it cannot be, after which the guard stays dead. Bytes after a complete
 * top-level value are only whitespace. */
bool svc_json_guard_feed(svc_json_guard *g, const char *bytes, size_t len);

/* True when the text so far is a complete document (a top-level number is
 * complete when it could end here: "12" is, "12." and "-" are not). */
bool svc_json_guard_complete(const svc_json_guard *g);

/* True when the guard has not rejected anything. */
bool svc_json_guard_alive(const svc_json_guard *g);

/* True when the guard is between a complete top-level value and the end:
 * only whitespace may follow. */
bool svc_json_guard_closed(const svc_json_guard *g);

/* True when the guard is inside a string with no escape or UTF-8
 * sequence pending: any run of printable ASCII other than '"' and '\\',
 * and any complete UTF-8 character, keeps it there. */
bool svc_json_guard_in_plain_string(const svc_json_guard *g);

/* The shortest bytes that complete the document from here (close the
 * string, finish the number or literal, give a missing value 0, close
 * every container). Writes up to `cap` bytes and returns the full length
 * (bounded: at most 16 + 8 x SVC_JSON_GUARD_MAX_DEPTH); 0 when already
 * complete or when the guard is dead. Feeding them makes the guard
 * complete, and feeding any prefix of them leaves a guard whose
 * completion is the rest. */
size_t svc_json_guard_completion(const svc_json_guard *g, char *out, size_t cap);

/* The length of the one JSON value (any type) that starts at `s` after
 * optional whitespace, leading whitespace included; 0 when `s` does not
 * start with a complete valid value within `len` bytes. A number is taken
 * to end at the first byte that cannot continue it. */
size_t svc_json_value_span(const char *s, size_t len);

/* Finds the member `key` (compared after unescaping) of the JSON object
 * spanning exactly s[0..len) (whitespace around it allowed). On success
 * sets *val and *val_len to the value's bytes (whitespace trimmed) and returns
 * true; false when `s` is not an object or has no such member. The first
 * match wins. */
bool svc_json_object_get(const char *s, size_t len, const char *key,
                         const char **val, size_t *val_len);

/* Decodes the JSON string literal s[0..len) (quotes included) into `out`
 * (capacity `cap`; the result is never longer than len). Returns the
 * decoded length or -1 when `s` is not exactly one valid string literal.
 * The output is NUL-terminated when cap > the length. */
long svc_json_string_decode(const char *s, size_t len, char *out, size_t cap);

/* Appends the JSON string literal for UTF-8 `s` (quotes included; control
 * characters, '"' and '\\' escaped, invalid UTF-8 bytes replaced by
 * U+FFFD) to `out` of capacity `cap`. Returns the full length needed
 * (which may exceed cap: then only cap bytes were written), 6*len+2 at
 * most. */
size_t svc_json_string_encode(const char *s, size_t len, char *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* MOEDESK_JSONGUARD_H */

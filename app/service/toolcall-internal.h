/*
 * toolcall-internal.h — what toolcall.c (detection, the streaming filter,
 * the region driver) and toolcall-formats.c (one block reader per markup)
 * share: a growable byte buffer with a sticky out-of-memory flag, the call
 * list, and the block reader table.
 */
#ifndef MOEDESK_TOOLCALL_INTERNAL_H
#define MOEDESK_TOOLCALL_INTERNAL_H

#include "toolcall.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct tc_buf {
    char *p;       /* NUL-terminated when non-NULL */
    size_t n, cap;
    bool oom;      /* an append failed; the content is then incomplete */
} tc_buf;

void tc_buf_add(tc_buf *b, const char *s, size_t n);
void tc_buf_adds(tc_buf *b, const char *s);
void tc_buf_free(tc_buf *b);

typedef struct tc_calls {
    svc_tool_call *v;
    size_t n, cap;
    bool oom;
} tc_calls;

/* Adds a call (copies both strings). */
void tc_calls_add(tc_calls *c, const char *name, size_t name_len,
                  const char *args, size_t args_len);
/* Drops calls from index `keep` on (a block that failed half way). */
void tc_calls_truncate(tc_calls *c, size_t keep);

/* Reads one block of calls that starts exactly at s (with one of the
 * format's markers). Returns the bytes consumed, or 0 when the block is
 * malformed (then *why says what; calls it added are dropped by the
 * caller). `at_end`: s[len] is the end of the reply, so a missing closing
 * tag after a complete call is forgiven. */
typedef size_t (*tc_block_fn)(const char *s, size_t len, tc_calls *out, const char **why);

typedef struct tc_format {
    const char *name;
    const char *markers[4];  /* NULL-ended: what starts a block          */
    tc_block_fn block;
} tc_format;

const tc_format *tc_format_get(svc_tool_format f);

/* Helpers the readers share. */
bool tc_starts(const char *s, size_t len, const char *lit);
size_t tc_find(const char *s, size_t len, const char *lit); /* len if absent */
size_t tc_skip_ws(const char *s, size_t len, size_t i);

#endif /* MOEDESK_TOOLCALL_INTERNAL_H */

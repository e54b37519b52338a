/*
 * upstream-parse.h — the byte-level helpers of the upstream forwarder
 * (upstream.c), kept apart so they can be tested without a network: cutting
 * a Server-Sent-Events byte stream into whole events without changing a
 * byte, reading what an OpenAI-style chunk or response says (usage, finish
 * reason, whether it carries content), and redacting a secret from text.
 * Internal to app/service/.
 */
#ifndef MOEDESK_UPSTREAM_PARSE_H
#define MOEDESK_UPSTREAM_PARSE_H

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>

G_BEGIN_DECLS

/* SSE splitter. Bytes go in as they arrive; whole events (every byte up to
 * and including the blank line that ends them, "\n", "\r\n" or "\r" line
 * ends) come out unchanged. */
typedef struct svc_sse_splitter {
    GByteArray *buf;  /* bytes not yet returned as an event               */
    guint pos;        /* next byte to scan                                */
    bool line_start;  /* buf[pos] starts a line                            */
    bool pending_cr;  /* buf[pos-1] was '\r': a '\n' here belongs to it   */
} svc_sse_splitter;

void svc_sse_splitter_init(svc_sse_splitter *s);
void svc_sse_splitter_clear(svc_sse_splitter *s);
void svc_sse_splitter_push(svc_sse_splitter *s, const void *data, size_t len);
/* The next whole event (owned), or NULL when none is complete yet. */
GBytes *svc_sse_splitter_next(svc_sse_splitter *s);
/* Bytes held that are not (yet) a whole event. */
static inline size_t svc_sse_splitter_pending(const svc_sse_splitter *s)
{
    return s->buf->len;
}

/* The data of an event: its "data:" lines' values (one leading space
 * dropped) joined with '\n'; NULL when it has no data line. Owned. */
char *svc_sse_event_data(const char *event, size_t len);

typedef struct svc_ups_usage {
    int64_t prompt_tokens;     /* -1 = not reported */
    int64_t cached_tokens;
    int64_t completion_tokens;
} svc_ups_usage;

/* What one chunk (or a whole non-stream response) says. */
typedef struct svc_ups_chunk_info {
    bool has_usage;       /* a non-null "usage" object                       */
    svc_ups_usage usage;
    bool usage_only;      /* usage and no choices (the include_usage chunk)  */
    bool has_content;     /* a choice with text, reasoning or tool calls      */
    bool has_error;       /* an "error" member                                */
    char *finish_reason;  /* owned; the last non-null one, or NULL           */
    char *error_message;  /* owned; error.message (or the error as text)     */
} svc_ups_chunk_info;

/* Reads `json` (one chunk's data or a whole body). FALSE when it is not a
 * JSON object (info is then empty). Free info with _clear. */
bool svc_ups_chunk_inspect(const char *json, size_t len, svc_ups_chunk_info *info);
void svc_ups_chunk_info_clear(svc_ups_chunk_info *info);

/* `text` with every occurrence of `secret` replaced by "[redacted]", as a
 * new ref (the same bytes, ref'd, when there is nothing to replace or the
 * secret is shorter than SVC_UPSTREAM_KEY_MIN_REDACT). */
GBytes *svc_ups_redact_bytes(GBytes *text, const char *secret);
/* The same for a string; owned; NULL in, NULL out. */
char *svc_ups_redact_str(const char *text, const char *secret);

G_END_DECLS

#endif /* MOEDESK_UPSTREAM_PARSE_H */

/*
 * json-write.h — JSON text from a json-glib node that strict parsers
 * accept. json-glib 1.6 (Debian 12) escapes control characters below 0x1f
 * only and writes U+001F raw, which RFC 8259 forbids: Python's json, the
 * openai SDKs and our own template engine's JSON reader all reject it. A
 * token or a message containing U+001F then broke an answer, a stream
 * chunk, a chat template's input or a forwarded body. Every place the
 * service turns a node into text it sends or parses again goes through
 * svc_json_write.
 */
#ifndef MOEDESK_SVC_JSON_WRITE_H
#define MOEDESK_SVC_JSON_WRITE_H

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Compact JSON for `node` (borrowed), U+001F written as \u001f. Caller
 * frees. */
char *svc_json_write(JsonNode *node);

G_END_DECLS

#endif /* MOEDESK_SVC_JSON_WRITE_H */

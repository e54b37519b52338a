/*
 * upstream-parse.c — SSE event splitting, OpenAI chunk inspection and secret
 * redaction for the upstream forwarder (see upstream-parse.h).
 *
 * The splitter never rewrites bytes: the client must see exactly what the
 * upstream sent, event by event, so it only finds where each event ends.
 * Inspection reads the few fields metering needs (usage, finish_reason,
 * whether a chunk carries content) and tolerates anything else.
 */
#include "upstream-parse.h"
#include "upstream.h"

#include <string.h>

void svc_sse_splitter_init(svc_sse_splitter *s)
{
    s->buf = g_byte_array_new();
    s->pos = 0;
    s->line_start = true;
    s->pending_cr = false;
}

void svc_sse_splitter_clear(svc_sse_splitter *s)
{
    if (s->buf)
        g_byte_array_unref(s->buf);
    s->buf = NULL;
}

void svc_sse_splitter_push(svc_sse_splitter *s, const void *data, size_t len)
{
    g_byte_array_append(s->buf, data, (guint)len);
}

/* Scans from s->pos for a blank line. The state (pos, line_start,
 * pending_cr) survives between pushes, so every byte is scanned once. */
GBytes *svc_sse_splitter_next(svc_sse_splitter *s)
{
    const guint8 *b = s->buf->data;
    guint len = s->buf->len;
    for (; s->pos < len; s->pos++) {
        guint8 c = b[s->pos];
        if (s->pending_cr) {
            s->pending_cr = false;
            if (c == '\n')
                continue; /* second half of a CRLF already counted */
        }
        if (c != '\r' && c != '\n') {
            s->line_start = false;
            continue;
        }
        if (!s->line_start) {
            s->line_start = true;
            s->pending_cr = c == '\r';
            continue;
        }
        /* A blank line: the event ends after its terminator. */
        guint end = s->pos + 1;
        if (c == '\r') {
            if (end == len)
                return NULL; /* a '\n' may follow in the next push */
            if (b[end] == '\n')
                end++;
        }
        GBytes *ev = g_bytes_new(b, end);
        g_byte_array_remove_range(s->buf, 0, end);
        s->pos = 0;
        s->line_start = true;
        s->pending_cr = false;
        return ev;
    }
    return NULL;
}

char *svc_sse_event_data(const char *event, size_t len)
{
    GString *out = NULL;
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && event[j] != '\n' && event[j] != '\r')
            j++;
        const char *line = event + i;
        size_t n = j - i;
        if (n >= 5 && memcmp(line, "data:", 5) == 0) {
            const char *v = line + 5;
            size_t vn = n - 5;
            if (vn > 0 && v[0] == ' ') {
                v++;
                vn--;
            }
            if (!out)
                out = g_string_new(NULL);
            else
                g_string_append_c(out, '\n');
            g_string_append_len(out, v, (gssize)vn);
        }
        if (j < len && event[j] == '\r' && j + 1 < len && event[j + 1] == '\n')
            j++;
        i = j + 1;
    }
    return out ? g_string_free(out, FALSE) : NULL;
}

static int64_t member_int(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;
    if (!n || !JSON_NODE_HOLDS_VALUE(n))
        return -1;
    GType t = json_node_get_value_type(n);
    if (t == G_TYPE_INT64)
        return json_node_get_int(n) >= 0 ? json_node_get_int(n) : -1;
    if (t == G_TYPE_DOUBLE)
        return json_node_get_double(n) >= 0 ? (int64_t)json_node_get_double(n) : -1;
    return -1;
}

static JsonObject *member_object(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;
    return n && JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
}

static const char *member_string(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;
    if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING)
        return NULL;
    return json_node_get_string(n);
}

static bool nonempty_string(JsonObject *o, const char *name)
{
    const char *v = member_string(o, name);
    return v && v[0];
}

static bool nonempty_array(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;
    return n && JSON_NODE_HOLDS_ARRAY(n) && json_array_get_length(json_node_get_array(n)) > 0;
}

/* A choice carries content when its delta (stream) or message (non-stream)
 * has text, reasoning or tool calls, or, for /completions, its text is
 * non-empty. */
static bool choice_has_content(JsonObject *choice)
{
    if (nonempty_string(choice, "text"))
        return true;
    JsonObject *d = member_object(choice, "delta");
    if (!d)
        d = member_object(choice, "message");
    return d && (nonempty_string(d, "content") || nonempty_string(d, "reasoning_content") ||
                 nonempty_string(d, "reasoning") || nonempty_array(d, "tool_calls"));
}

static void read_usage(JsonObject *u, svc_ups_usage *out)
{
    out->prompt_tokens = member_int(u, "prompt_tokens");
    out->completion_tokens = member_int(u, "completion_tokens");
    out->cached_tokens = member_int(member_object(u, "prompt_tokens_details"), "cached_tokens");
    if (out->cached_tokens < 0)
        out->cached_tokens = member_int(u, "cached_tokens"); /* Moonshot's spelling */
}

bool svc_ups_chunk_inspect(const char *json, size_t len, svc_ups_chunk_info *info)
{
    memset(info, 0, sizeof *info);
    info->usage.prompt_tokens = info->usage.cached_tokens = info->usage.completion_tokens = -1;
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!json_parser_load_from_data(parser, json, (gssize)len, NULL))
        return false;
    JsonNode *root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root))
        return false;
    JsonObject *o = json_node_get_object(root);

    JsonObject *u = member_object(o, "usage");
    if (u) {
        info->has_usage = true;
        read_usage(u, &info->usage);
    }
    JsonNode *ch = json_object_get_member(o, "choices");
    JsonArray *choices = ch && JSON_NODE_HOLDS_ARRAY(ch) ? json_node_get_array(ch) : NULL;
    guint n_choices = choices ? json_array_get_length(choices) : 0;
    info->usage_only = u && n_choices == 0;
    for (guint i = 0; i < n_choices; i++) {
        JsonNode *cn = json_array_get_element(choices, i);
        if (!JSON_NODE_HOLDS_OBJECT(cn))
            continue;
        JsonObject *c = json_node_get_object(cn);
        if (choice_has_content(c))
            info->has_content = true;
        const char *fr = member_string(c, "finish_reason");
        if (fr) {
            g_free(info->finish_reason);
            info->finish_reason = g_strdup(fr);
        }
    }
    JsonNode *err = json_object_get_member(o, "error");
    if (err && !JSON_NODE_HOLDS_NULL(err)) {
        info->has_error = true;
        const char *m = JSON_NODE_HOLDS_OBJECT(err) ? member_string(json_node_get_object(err), "message")
                                                    : NULL;
        if (m)
            info->error_message = g_strdup(m);
        else if (JSON_NODE_HOLDS_VALUE(err) && json_node_get_value_type(err) == G_TYPE_STRING)
            info->error_message = g_strdup(json_node_get_string(err));
        else
            info->error_message = json_to_string(err, FALSE);
    }
    return true;
}

void svc_ups_chunk_info_clear(svc_ups_chunk_info *info)
{
    g_clear_pointer(&info->finish_reason, g_free);
    g_clear_pointer(&info->error_message, g_free);
}

static const char REDACTED[] = "[redacted]";

/* Replaces every occurrence of `secret` in data[0..len); NULL when there is
 * none. */
static GString *redact(const char *data, size_t len, const char *secret)
{
    size_t sn = secret ? strlen(secret) : 0;
    if (sn < SVC_UPSTREAM_KEY_MIN_REDACT || len < sn)
        return NULL;
    GString *out = NULL;
    size_t i = 0, copied = 0;
    while (i + sn <= len) {
        const char *hit = memchr(data + i, secret[0], len - sn + 1 - i);
        if (!hit)
            break;
        i = (size_t)(hit - data);
        if (memcmp(hit, secret, sn) != 0) {
            i++;
            continue;
        }
        if (!out)
            out = g_string_sized_new(len);
        g_string_append_len(out, data + copied, (gssize)(i - copied));
        g_string_append(out, REDACTED);
        i += sn;
        copied = i;
    }
    if (out)
        g_string_append_len(out, data + copied, (gssize)(len - copied));
    return out;
}

GBytes *svc_ups_redact_bytes(GBytes *text, const char *secret)
{
    gsize len;
    const char *data = g_bytes_get_data(text, &len);
    GString *out = redact(data, len, secret);
    if (!out)
        return g_bytes_ref(text);
    return g_string_free_to_bytes(out);
}

char *svc_ups_redact_str(const char *text, const char *secret)
{
    if (!text)
        return NULL;
    GString *out = redact(text, strlen(text), secret);
    return out ? g_string_free(out, FALSE) : g_strdup(text);
}

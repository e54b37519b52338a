/*
 * toolcall.h — finding tool calls in generated text: which markup a chat
 * template teaches its model (detected from the template's source), a
 * parser that splits a finished reply into content and calls, and a
 * streaming filter that passes content through as it is generated while
 * holding back everything from the first tool-call marker on, so a client
 * never sees raw "<tool_call>" text.
 *
 * Plain C with malloc, no GLib: the fuzz build (no app layer) compiles it
 * into its libFuzzer target. prompt.h wraps the result into OpenAI
 * tool_calls objects (ids, JsonArray).
 *
 * Arguments come out as JSON object text. Formats that write arguments as
 * XML-like parameters (Qwen3-Coder, GLM, Seed-OSS) have no types: a value
 * that is itself valid JSON (number, true, {...}) is kept as that JSON
 * value, anything else becomes a JSON string; prompt.c then corrects the
 * types against the request's tool schemas.
 */
#ifndef MOEDESK_TOOLCALL_H
#define MOEDESK_TOOLCALL_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum svc_tool_format {
    SVC_TOOL_FORMAT_NONE = 0,     /* no tool-call markup known               */
    SVC_TOOL_FORMAT_HERMES,       /* <tool_call>{"name","arguments"}</tool_call>
                                     (Qwen2.5, Qwen3, QwQ, Hermes, Granite 4) */
    SVC_TOOL_FORMAT_QWEN3_CODER,  /* <tool_call><function=N><parameter=K>V
                                     </parameter></function></tool_call>     */
    SVC_TOOL_FORMAT_SEED_OSS,     /* the same inside <seed:tool_call>         */
    SVC_TOOL_FORMAT_GLM,          /* <tool_call>N<arg_key>K</arg_key>
                                     <arg_value>V</arg_value></tool_call>     */
    SVC_TOOL_FORMAT_MISTRAL,      /* [TOOL_CALLS][{...}] or
                                     [TOOL_CALLS]N[CALL_ID]id[ARGS]{...}      */
    SVC_TOOL_FORMAT_LLAMA3,       /* {"name": N, "parameters": {...}} as the
                                     whole reply, or after <|python_tag|>     */
    SVC_TOOL_FORMAT_DEEPSEEK,     /* <｜tool▁calls▁begin｜>... (R1 and V3.1)   */
    SVC_TOOL_FORMAT_KIMI,         /* <|tool_calls_section_begin|>...          */
    SVC_TOOL_FORMAT_JSON_LIST,    /* <tool_calls>[{...}]</tool_calls> or one
                                     object per line (Apriel, MiniMax-M1)     */
    SVC_TOOL_FORMAT_FIREFUNCTION, /* functools[{...}]                         */
    SVC_TOOL_FORMAT_COMMAND_R,    /* <|START_ACTION|>[{"tool_name",
                                     "parameters"}]<|END_ACTION|>             */
    SVC_TOOL_FORMAT_COUNT
} svc_tool_format;

/* The format a chat template's model writes, from the template's source
 * (NULL: NONE). Templates that mention several pick the most specific. */
svc_tool_format svc_tool_format_detect(const char *template_src);
/* "hermes", "qwen3-coder", ...; "none". */
const char *svc_tool_format_name(svc_tool_format f);
/* The markers that start a tool-call region in this format (NULL-ended,
 * static). A caller that detokenizes without control-token text must
 * still render these tokens, or the calls are invisible. */
const char *const *svc_tool_format_markers(svc_tool_format f);

typedef struct svc_tool_call {
    char *name;       /* malloc'd, NUL-terminated                          */
    char *arguments;  /* malloc'd JSON object text                         */
} svc_tool_call;

typedef struct svc_tool_parse {
    char *content;          /* malloc'd text outside tool-call markup      */
    size_t content_len;
    svc_tool_call *calls;   /* malloc'd array                              */
    size_t n_calls;
    /* Markup was found but part of it could not be read (unterminated,
     * bad JSON): that part is kept in `content`, and `problem` says what
     * and where (byte offset in the whole reply). */
    bool malformed;
    char problem[128];
} svc_tool_parse;

/* Splits a whole reply. Returns false only when memory ran out (then `out`
 * holds nothing). Same result as feeding the text to a stream in any
 * pieces: content = what the stream emitted + what finish returned. */
bool svc_tool_parse_text(svc_tool_format f, const char *text, size_t len,
                         svc_tool_parse *out);
void svc_tool_parse_clear(svc_tool_parse *p);

typedef struct svc_tool_stream svc_tool_stream;

/* NULL when memory runs out. A NONE format passes everything through. */
svc_tool_stream *svc_tool_stream_new(svc_tool_format f);
void svc_tool_stream_free(svc_tool_stream *s);

/* Feeds the next piece of generated text. Returns the content that is safe
 * to show now (possibly empty; *out_len bytes, NUL-terminated, owned by the
 * stream and valid until the next call), or NULL when memory ran out.
 * Bytes that might begin a marker are held until they are known not to. */
const char *svc_tool_stream_feed(svc_tool_stream *s, const char *piece, size_t len,
                                 size_t *out_len);

/* At the end of generation: the held text that turned out to be content
 * (out->content, to be sent after what feed returned) and the calls.
 * Returns false when memory ran out. The stream may then be freed. */
bool svc_tool_stream_finish(svc_tool_stream *s, svc_tool_parse *out);

/* True once the stream has seen a tool-call marker (the reply is turning
 * into a call; a caller may report that early). */
bool svc_tool_stream_in_call(const svc_tool_stream *s);

#ifdef __cplusplus
}
#endif

#endif /* MOEDESK_TOOLCALL_H */

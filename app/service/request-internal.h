/*
 * request-internal.h — what the request parser's files share: the parse
 * context, typed field readers that fail with a 400 naming the field, and
 * one entry point per API family. Not for use outside request*.c.
 *
 * Every reader treats an absent member and a JSON null alike ("not given"),
 * since clients built on generated SDKs send nulls for unset options.
 * Parameter names are full paths ("options.top_p", "messages[2].role");
 * `prefix` is the path of the object being read ("" at the top level).
 */
#ifndef MOEDESK_REQUEST_INTERNAL_H
#define MOEDESK_REQUEST_INTERNAL_H

#include "request.h"

typedef struct rq_ctx {
    svc_request       *r;
    svc_request_error *err;
} rq_ctx;

/* Longest parameter path kept; longer ones are cut (still NUL-terminated). */
#define RQ_PARAM_MAX 96

/* Sets a 400 invalid_request_error for `param` (may be NULL) and returns
 * FALSE, so callers can `return rq_fail(...)`. */
gboolean rq_fail(rq_ctx *c, const char *param, const char *code, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);

/* svc_request_error_set with a va_list; every text is kept valid UTF-8. */
void rq_error_vset(svc_request_error *err, guint status, const char *type, const char *param,
                   const char *code, const char *fmt, va_list ap) G_GNUC_PRINTF(6, 0);

/* `prefix` + `key` into buf (RQ_PARAM_MAX bytes); returns buf. */
const char *rq_path(char *buf, const char *prefix, const char *key);

/* The member, or NULL when absent or null. */
JsonNode *rq_member(JsonObject *o, const char *key);

/* The member's text, or NULL when absent, null or not a string. */
const char *rq_member_string(JsonObject *o, const char *key);

/* Readers: TRUE when absent (outputs untouched) or valid (outputs set);
 * FALSE with the error set on a wrong type or an out-of-range value.
 * `*given` (may be NULL) says whether a value was stored. */
gboolean rq_string(rq_ctx *c, JsonObject *o, const char *prefix, const char *key,
                   char **out);
gboolean rq_bool(rq_ctx *c, JsonObject *o, const char *prefix, const char *key,
                 bool *out);
gboolean rq_number(rq_ctx *c, JsonObject *o, const char *prefix, const char *key,
                   double lo, double hi, double *out, bool *given);
gboolean rq_int(rq_ctx *c, JsonObject *o, const char *prefix, const char *key,
                int64_t lo, int64_t hi, int64_t *out, bool *given);
/* An object member (NULL when absent). */
gboolean rq_object(rq_ctx *c, JsonObject *o, const char *prefix, const char *key,
                   JsonObject **out);
/* A number node as a double / an integral number as int64 (no range). */
gboolean rq_node_number(JsonNode *n, double *out);
gboolean rq_node_int(JsonNode *n, int64_t *out);
gboolean rq_node_is_string(JsonNode *n);

/* Shared fields. */
gboolean rq_model(rq_ctx *c, JsonObject *o, bool required);
gboolean rq_stops(rq_ctx *c, JsonObject *o, const char *prefix, const char *key);
gboolean rq_float_field(rq_ctx *c, JsonObject *o, const char *prefix, const char *key,
                        double lo, double hi, float *dst);
/* OpenAI {"123": -5} or llama.cpp [[123, -5], [456, false]] logit biases. */
gboolean rq_logit_bias(rq_ctx *c, JsonObject *o, const char *prefix, double lo, double hi);
/* chat_template_kwargs (an object), merged into template_kwargs. */
gboolean rq_template_kwargs(rq_ctx *c, JsonObject *o);
void     rq_set_think(svc_request *r, svc_think think, const char *effort);

/* Chat messages and tools (request-chat.c). */
gboolean rq_openai_messages(rq_ctx *c, JsonObject *o);
gboolean rq_ollama_messages(rq_ctx *c, JsonObject *o);
gboolean rq_openai_tools(rq_ctx *c, JsonObject *o);
gboolean rq_openai_tool_choice(rq_ctx *c, JsonObject *o);
/* Checks that a named tool_choice names a declared tool. */
gboolean rq_check_tool_choice(rq_ctx *c);
/* Builds {id, type:"function", function:{name, arguments}}; `args` is the
 * arguments as JSON text. */
JsonNode *rq_tool_call_new(const char *id, const char *name, const char *args);
/* Builds a normalised message object; content NULL means "". */
JsonObject *rq_message_new(const char *role, const char *content);

/* One body per API family (request-openai.c, request-anthropic.c,
 * request-ollama.c, request-llamacpp.c). */
gboolean rq_parse_openai_chat(rq_ctx *c, JsonObject *o);
gboolean rq_parse_openai_completions(rq_ctx *c, JsonObject *o);
gboolean rq_parse_anthropic(rq_ctx *c, JsonObject *o);
gboolean rq_parse_ollama_chat(rq_ctx *c, JsonObject *o);
gboolean rq_parse_ollama_generate(rq_ctx *c, JsonObject *o);
gboolean rq_parse_llamacpp(rq_ctx *c, JsonObject *o);

/* A prompt given as a string, [string], [int...] or [[int...]]. */
gboolean rq_prompt(rq_ctx *c, JsonObject *o, const char *key, bool required);

#endif /* MOEDESK_REQUEST_INTERNAL_H */

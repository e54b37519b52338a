/*
 * request.h — one parser for the JSON bodies of every generation endpoint
 * moedesk-service offers (OpenAI chat and completions, Anthropic messages,
 * Ollama chat and generate, llama.cpp /completion and /infill). Each body is
 * checked and turned into ONE svc_request, so the HTTP handlers share the
 * prompt building and scheduling code no matter which API a client speaks:
 *
 *   body ──svc_request_parse(api)──> svc_request ──prompt.h──> tokens
 *                                         └─svc_request_gen_params──> svc_gen_params
 *
 * The normalised form is OpenAI's: messages are an OpenAI-style JsonArray
 * (Anthropic system/content blocks/tool_use/tool_result and Ollama tool calls
 * converted), tools are OpenAI function tools, sampling is a
 * moe_sampler_params filled with the API's own defaults.
 *
 * Everything here is pure: no I/O, no globals, no model. A bad body gives a
 * svc_request_error (HTTP status, OpenAI error type, the parameter at fault
 * and a message naming it) that the handler writes in its API's error shape
 * with svc_request_error_to_json. Unknown fields are ignored; the fields
 * each API accepts, their defaults and the ones ignored on purpose are
 * listed in app/DESIGN.md, "Request parsing".
 */
#ifndef MOEDESK_REQUEST_H
#define MOEDESK_REQUEST_H

#include <glib.h>
#include <json-glib/json-glib.h>
#include <moe.h>

#include "scheduler.h"

G_BEGIN_DECLS

typedef enum {
    SVC_API_OPENAI_CHAT,          /* POST /v1/chat/completions */
    SVC_API_OPENAI_COMPLETIONS,   /* POST /v1/completions      */
    SVC_API_ANTHROPIC_MESSAGES,   /* POST /v1/messages         */
    SVC_API_OLLAMA_CHAT,          /* POST /api/chat            */
    SVC_API_OLLAMA_GENERATE,      /* POST /api/generate        */
    SVC_API_LLAMACPP_COMPLETION,  /* POST /completion          */
    SVC_API_LLAMACPP_INFILL,      /* POST /infill              */
} svc_api;

#define SVC_API_COUNT 7

/* "openai.chat", "openai.completions", "anthropic.messages", "ollama.chat",
 * "ollama.generate", "llamacpp.completion", "llamacpp.infill"; NULL for a
 * value outside the enum. */
const char *svc_api_name(svc_api api);

/* Bounds the parser enforces (each breach is a 400 naming the field). */
#define SVC_REQUEST_MAX_STOPS     64   /* stop strings                       */
#define SVC_REQUEST_MAX_DEPTH     128  /* JSON nesting, checked before json-glib */
#define SVC_REQUEST_MAX_N_PROBS   100  /* n_probs / top_logprobs             */

typedef enum {
    SVC_RESPONSE_TEXT = 0,     /* free text                                   */
    SVC_RESPONSE_JSON_OBJECT,  /* any JSON value (OpenAI json_object, Ollama
                                  format "json", llama.cpp json_schema {})    */
    SVC_RESPONSE_JSON_SCHEMA,  /* JSON with a schema (json_schema): generated
                                  as JSON_OBJECT; `json_schema` is kept so the
                                  prompt may quote it. Not enforced yet.      */
} svc_response_format;

typedef enum {
    SVC_THINK_DEFAULT = 0,     /* not asked: the template's default          */
    SVC_THINK_OFF,             /* think:false, thinking.type "disabled",
                                  chat_template_kwargs.enable_thinking false */
    SVC_THINK_ON,              /* think:true/"low"/..., thinking "enabled"    */
} svc_think;

/*
 * A parsed request. Every pointer is owned by the request (svc_request_free)
 * and NULL when the field was absent, unless said otherwise.
 */
typedef struct svc_request {
    svc_api api;
    char   *model;            /* NULL only for llama.cpp (optional there)    */
    bool    stream;           /* Ollama: default true; others false          */
    bool    include_usage;    /* OpenAI stream_options.include_usage         */

    /* Chat endpoints (OpenAI chat, Anthropic, Ollama chat). Each element
     * is an object {role, content[, name][, tool_calls][, tool_call_id]
     * [, reasoning_content]}: role one of system/user/assistant/tool
     * (OpenAI "developer" becomes "system"), content ALWAYS a string (text
     * parts joined with "\n"), tool_calls [{id, type:"function",
     * function:{name, arguments}}] with arguments a JSON text (string).
     * Non-empty except for an Ollama load request (load_only). */
    JsonArray *messages;
    /* [{type:"function", function:{name[, description][, parameters]}}] */
    JsonArray *tools;
    /* "none" | "auto" | "required" | {type:"function", function:{name}} */
    JsonNode  *tool_choice;
    bool       parallel_tool_calls; /* default true                           */

    /* Prompt endpoints (OpenAI completions, Ollama generate, llama.cpp).
     * Exactly one of prompt / prompt_tokens is set when a prompt was given;
     * prompt_tokens are raw ids (0..INT32_MAX, checked against the
     * vocabulary by the scheduler). */
    char    *prompt;
    int32_t *prompt_tokens;
    size_t   n_prompt_tokens;
    char    *suffix;          /* OpenAI/Ollama suffix, llama.cpp input_suffix */
    char    *prefix;          /* llama.cpp input_prefix                       */
    JsonArray *extra;         /* llama.cpp input_extra: [{filename, text}]
                                 both strings ("" when absent)                */
    char    *system;          /* Ollama generate system                       */
    bool     raw;             /* Ollama generate raw: no template             */
    bool     echo;            /* OpenAI completions echo                      */
    bool     load_only;       /* Ollama: empty messages / prompt = (un)load   */

    /* Chat template variables: chat_template_kwargs as given, plus
     * enable_thinking (from think / thinking) and reasoning_effort. */
    JsonObject *template_kwargs;
    svc_think   think;
    char       *reasoning_effort; /* "low"/"medium"/"high"... as given        */

    /* Generation. sampling.logit_bias points into this request (valid as
     * long as it lives). When has_seed is false sampling.seed is
     * MOE_SAMPLER_DEFAULT_SEED: the handler should put a random one in. */
    moe_sampler_params sampling;
    bool     has_seed;
    int64_t  max_tokens;      /* -1: until the context is full; 0: none (a
                                 llama.cpp/Ollama cache warm-up)              */
    char   **stops;           /* NULL-terminated; n_stops entries, never ""   */
    size_t   n_stops;
    bool     ignore_eos;      /* llama.cpp ignore_eos                         */
    bool     logprobs;        /* OpenAI: return log-probabilities             */
    int32_t  top_logprobs;    /* alternatives asked per token (OpenAI)        */
    int32_t  n_probs;         /* candidates the scheduler reports; 0 = none   */
    svc_response_format response_format;
    JsonNode *json_schema;    /* the schema for SVC_RESPONSE_JSON_SCHEMA      */

    /* Serving hints. */
    int32_t  num_ctx;         /* Ollama options.num_ctx; 0 = not asked        */
    bool     cache_prompt;    /* llama.cpp cache_prompt (default true)        */
    bool     has_keep_alive;  /* Ollama keep_alive given                      */
    int64_t  keep_alive_ms;   /* -1: forever; 0: unload after this request    */
    int64_t  t_max_predict_ms; /* llama.cpp t_max_predict_ms; 0 = none        */

    /* Owned storage behind sampling.logit_bias. */
    moe_logit_bias *logit_bias;
    size_t          n_logit_bias;
} svc_request;

/*
 * What was wrong with a body: the OpenAI error object
 * {"error":{"message","type","param","code"}} plus the HTTP status. Plain
 * buffers so a handler can keep one on the stack; param and code are ""
 * when null.
 */
typedef struct svc_request_error {
    guint status;              /* HTTP status: 400 for every parse error     */
    char  type[32];            /* "invalid_request_error", ...               */
    char  param[96];           /* "messages[2].role", "options.top_p", ""    */
    char  code[48];            /* "invalid_value", "unsupported", ""         */
    char  message[512];        /* one sentence naming the field              */
} svc_request_error;

/*
 * Parses and checks `len` bytes of `body` (need not be NUL-terminated) as
 * a request for `api`. On success returns TRUE and stores a new request in
 * *out (free with svc_request_free); on failure returns FALSE, leaves *out
 * NULL and fills *err (400, "invalid_request_error", the param at fault).
 * `err` may be NULL. The body must be UTF-8 and one JSON object.
 */
gboolean svc_request_parse(svc_api api, const char *body, gsize len,
                           svc_request **out, svc_request_error *err);

/* NULL: no-op. */
void svc_request_free(svc_request *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(svc_request, svc_request_free)

/*
 * Fills the request's part of `p` (sampling, stops, max_tokens, ignore_eog,
 * n_probs); the caller adds prompt tokens, timeout and constraint. The
 * pointers are borrowed from `r`, which must outlive the submit call (the
 * scheduler copies them). `p` should come from svc_gen_params_init.
 */
void svc_request_gen_params(const svc_request *r, svc_gen_params *p);

/* Fills *err (NULL: no-op). `param` and `code` may be NULL (JSON null);
 * `type` NULL means "invalid_request_error". Also for the handlers' own
 * errors: unknown model (404, "model_not_found"), busy (429), ... */
void svc_request_error_set(svc_request_error *err, guint status, const char *type,
                           const char *param, const char *code,
                           const char *fmt, ...) G_GNUC_PRINTF(6, 7);

/* The error as JSON text (newly allocated, g_free), in each API's shape:
 *   OpenAI     {"error":{"message":..,"type":..,"param":..|null,"code":..|null}}
 *   Anthropic  {"type":"error","error":{"type":..,"message":..}} with the
 *              type derived from the status (invalid_request_error,
 *              authentication_error, not_found_error, rate_limit_error, ...)
 *   Ollama     {"error":".."}
 *   llama.cpp  {"error":{"code":<status>,"message":..,"type":..}} */
char *svc_request_error_to_openai_json(const svc_request_error *err);
char *svc_request_error_to_anthropic_json(const svc_request_error *err);
char *svc_request_error_to_ollama_json(const svc_request_error *err);
char *svc_request_error_to_llamacpp_json(const svc_request_error *err);
/* The shape that fits `api` (one of the four above). */
char *svc_request_error_to_json(const svc_request_error *err, svc_api api);

G_END_DECLS

#endif /* MOEDESK_REQUEST_H */

/*
 * prompt.h — turning API requests into prompt tokens and model output back
 * into API objects, for one loaded model: chat messages through the model's
 * chat template, fill-in-the-middle prompts from the model's FIM tokens,
 * tool calls out of generated text (whole or streamed), the JSON-mode
 * constraint for the scheduler, and the capability list /api/show reports.
 *
 * Pure functions over a svc_prompt_model, which caches what they need per
 * model (parsed template, special tokens, tool-call format, the
 * vocabulary's token texts for JSON mode). No HTTP here: handlers parse the
 * request with json-glib and hand its pieces over. Every function may be
 * called from any thread once the svc_prompt_model exists.
 *
 * Errors are SVC_PROMPT_ERROR; messages name the thing at fault
 * ("messages[2].content[1]: ..."), fit to be returned to the client as is.
 */
#ifndef MOEDESK_PROMPT_H
#define MOEDESK_PROMPT_H

#include <glib.h>
#include <json-glib/json-glib.h>
#include <moe.h>

#include "jsonguard.h"
#include "scheduler.h"
#include "toolcall.h"

G_BEGIN_DECLS

#define SVC_PROMPT_ERROR (svc_prompt_error_quark())
GQuark svc_prompt_error_quark(void);

typedef enum {
    SVC_PROMPT_ERROR_INVALID,     /* bad request content: 400                     */
    SVC_PROMPT_ERROR_UNSUPPORTED, /* images, no FIM tokens, ...: 400              */
    SVC_PROMPT_ERROR_TEMPLATE,    /* the template failed: raise_exception() in it
                                     is the request's fault (400), others 500    */
    SVC_PROMPT_ERROR_TOKENIZE,    /* the tokenizer failed: 500                    */
} svc_prompt_error;

/* What the prompt functions need from one model. Read-only after _new; the
 * fields are public for logging and tests, do not change them. */
typedef struct svc_prompt_model {
    char *name;                  /* general.name or "model"                     */
    const moe_vocab *vocab;      /* borrowed: the model (or caller) owns it     */
    char *template_src;          /* the template in use                          */
    moe_chat_template *tmpl;
    /* The model has no tokenizer.chat_template (or it does not parse): the
     * built-in ChatML template is used. The service should log this. */
    bool template_fallback;
    char *template_problem;      /* why the model's template was not used, or NULL */
    int32_t bos, eos;            /* -1 when absent                               */
    char *bos_text, *eos_text;   /* their texts, NULL when absent                */
    bool add_bos;                /* the vocabulary asks for BOS at the start     */
    bool template_uses_tools;    /* the template reads the `tools` variable      */
    svc_tool_format tool_format; /* the markup its model writes, NONE: unknown   */
    int32_t fim_pre, fim_suf, fim_mid, fim_rep, fim_sep; /* -1 when absent       */
    struct svc_token_texts *texts; /* JSON mode's per-token texts, built lazily  */
    GMutex texts_lock;
} svc_prompt_model;

/* The model must outlive the result. */
svc_prompt_model *svc_prompt_model_new(const moe_model *model, GError **error);
/* The same from a vocabulary and a template source (NULL: none, so the
 * fallback), for tests and tools; `vocab` must outlive the result. */
svc_prompt_model *svc_prompt_model_new_for_vocab(const moe_vocab *vocab, const char *template_src,
                                                 const char *name, GError **error);
void svc_prompt_model_free(svc_prompt_model *pm);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(svc_prompt_model, svc_prompt_model_free)

/* ---- chat ------------------------------------------------------------- */

/* Renders OpenAI-format `messages` (role system/developer/user/assistant/
 * tool; content a string, null (given to the template as ""), or a list
 * of {"type":"text","text":...} parts, joined with "\n"; assistant tool_calls with arguments as JSON
 * strings; tool messages with tool_call_id) with the generation prompt
 * added, then tokenizes the text with special tokens parsed. BOS is
 * prepended when the vocabulary asks for it and the text does not already
 * start with it. `tools`: the request's tool definitions (NULL: none).
 * `template_kwargs`: extra template variables such as enable_thinking
 * (NULL: none). Either output may be NULL. `*tokens_out`: GArray of
 * int32_t; `*text_out`: g_malloc'd prompt text. */
bool svc_prompt_chat(const svc_prompt_model *pm, JsonArray *messages, JsonArray *tools,
                     JsonObject *template_kwargs, GArray **tokens_out, char **text_out,
                     GError **error);

/* Tokenizes plain prompt text (/v1/completions, /completion, /api/generate
 * with raw): special tokens parsed only when `parse_special`, BOS as for
 * chat. */
bool svc_prompt_tokenize(const svc_prompt_model *pm, const char *text, gssize len,
                         bool parse_special, GArray **tokens_out, GError **error);

/* ---- capabilities ------------------------------------------------------ */

/* Tools can be offered: the template reads `tools` AND its tool-call markup
 * is one svc_tool_format knows (so calls can be read back). */
bool svc_prompt_supports_tools(const svc_prompt_model *pm);
/* The vocabulary has FIM prefix, suffix and middle tokens. */
bool svc_prompt_supports_fim(const svc_prompt_model *pm);
/* The template knows a thinking switch or <think> blocks. */
bool svc_prompt_supports_thinking(const svc_prompt_model *pm);

/* Ollama /api/show "capabilities": ["completion", "tools"?, "insert"?,
 * "thinking"?]. New array. */
JsonArray *svc_prompt_capabilities_json(const svc_prompt_model *pm);

/* Ollama /api/show "template": a Go-template rendition for clients that
 * read it (we never execute it). It contains ".Suffix" (with the model's
 * FIM token texts) when the model can fill in the middle, and ".Tools"
 * when it supports tools, which is what Continue and others test for.
 * g_malloc'd. */
char *svc_prompt_ollama_template(const svc_prompt_model *pm);

/* ---- fill in the middle ------------------------------------------------- */

/* PSM order: [BOS] [extra context] FIM_PRE prefix FIM_SUF suffix FIM_MID.
 * `extra` (llama.cpp's input_extra, NULL: none): objects {"filename":
 * string (optional), "text": string}; with a repo token they are written
 * as FIM_REP "project\n" then FIM_SEP filename "\n" text per file and
 * FIM_SEP "filename\n" for the current file (Qwen2.5-Coder's repo format,
 * as llama.cpp's /infill writes it); without FIM_SEP each chunk follows a
 * "\n\n--- snippet ---\n\n" line. Prefix, suffix and extra are user text:
 * special-token texts in them are not parsed. Fails with UNSUPPORTED "model
 * X has no fill-in-the-middle tokens". */
bool svc_prompt_fim(const svc_prompt_model *pm, const char *prefix, const char *suffix,
                    JsonArray *extra, GArray **tokens_out, GError **error);

/* ---- tool calls ------------------------------------------------------- */

/* A finished reply, split. */
typedef struct svc_reply {
    char *content;          /* g_malloc'd; NULL when it is empty or only
                               whitespace beside tool calls (OpenAI null)   */
    JsonArray *tool_calls;  /* OpenAI tool_calls ({"id":"call_...","type":
                               "function","function":{"name","arguments"}}
                               with arguments a JSON string), NULL: none    */
    char *problem;          /* malformed tool-call markup kept as content:
                               what and where (for the log), or NULL        */
} svc_reply;

void svc_reply_clear(svc_reply *r);

/* Splits a whole reply with the model's tool format. `tools` (the
 * request's, NULL allowed) is used to give XML-style parameter values the
 * schema's types (a "string" parameter stays a string even if it reads
 * "123"). Never fails. */
void svc_prompt_parse_reply(const svc_prompt_model *pm, const char *text, gssize len,
                            JsonArray *tools, svc_reply *out);

/* Streaming: svc_tool_stream_new(pm->tool_format), svc_tool_stream_feed
 * per piece (send what it returns as content deltas), then this, which
 * finishes the stream into `out` (content = the held text that turned out
 * to be content, to send before the tool calls). */
void svc_prompt_finish_stream(svc_tool_stream *s, JsonArray *tools, svc_reply *out);

/* The OpenAI tool_calls array for parsed calls (new ids). */
JsonArray *svc_prompt_tool_calls_json(const svc_tool_call *calls, size_t n_calls,
                                      JsonArray *tools);

/* Control tokens whose text is tool-call markup in this model's format
 * ("[TOOL_CALLS]", "<|tool_call_begin|>"...): a detokenizer that drops
 * control-token text must still render these, or the calls vanish. New
 * GArray of int32_t, maybe empty. */
GArray *svc_prompt_tool_marker_tokens(const svc_prompt_model *pm);

/* ---- JSON mode ---------------------------------------------------------- */

/* Fills `out` with a constraint that keeps generation a prefix of a JSON
 * object: every token whose text would make the output invalid gets
 * -INFINITY, end-of-generation tokens only once the object is complete,
 * runs of whitespace outside strings are at most 12 bytes, and `complete`
 * ends the request after the closing brace. With `max_tokens` > 0 (the
 * request's budget) the object is also steered to close within that
 * budget: a token is allowed only if the shortest completion after it
 * still fits in the tokens left. The first call per model precomputes
 * every token's text (~1 MB for a 150k vocabulary). `out->user` is owned
 * by the scheduler (free_user); it holds a reference on the token table,
 * not on `pm`. */
bool svc_prompt_json_constraint(svc_prompt_model *pm, int64_t max_tokens,
                                svc_gen_constraint *out, GError **error);

G_END_DECLS

#endif /* MOEDESK_PROMPT_H */

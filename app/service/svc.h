/*
 * svc.h — the core of moedesk-service that every endpoint module builds on:
 * the server object (settings, loaded model, scheduler, usage store,
 * metrics, keys, upstreams, the libsoup server) and one HTTP call
 * (`svc_call`) with helpers to answer it: JSON, OpenAI/Anthropic/Ollama-style
 * errors, and streamed bodies (SSE or NDJSON) written as the scheduler
 * produces tokens.
 *
 * Threads: everything here runs on the GLib main thread. Endpoint modules
 * register their routes with svc_server_add_route() from their
 * svc_<api>_register(srv) function, which server.c calls at start-up.
 *
 * Lifetime of a call: the server creates a svc_call for each request that
 * passes the checks every request gets (Host, Origin, API key, body size),
 * then calls the route's handler. A handler either answers at once
 * (svc_call_reply_*) or keeps a reference (svc_call_ref), starts a stream
 * (svc_call_stream_begin) and writes to it later from scheduler callbacks;
 * svc_call_stream_end finishes it. When the client goes away the call's
 * GCancellable is cancelled (cancel the scheduler request from its
 * "cancelled" handler) and later writes are dropped.
 *
 * Metering: for routes registered with SVC_ROUTE_METERED the server writes
 * one usage row when the HTTP exchange ends (also when the client vanished
 * or the request was refused): start time, caller, client (User-Agent),
 * endpoint, status and total time are filled by the server; handlers fill
 * model, route, backend, quantisation, tokens, time to first token, decode
 * rate, error kind and finish reason through the setters below.
 */
#ifndef MOEDESK_SVC_H
#define MOEDESK_SVC_H

#include <glib.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <moe.h>

#include "scheduler.h"
#include "usage-store.h"

G_BEGIN_DECLS

#define SVC_ERROR (svc_error_quark())
GQuark svc_error_quark(void);

typedef enum {
    SVC_ERROR_MODEL_NOT_FOUND, /* no local model or upstream by that name (404) */
    SVC_ERROR_MODEL_LOAD,      /* the model exists but could not be loaded (500) */
    SVC_ERROR_CONFIG,          /* bad settings or command line                  */
    SVC_ERROR_BIND,            /* could not listen                              */
    SVC_ERROR_MODEL_NAME,      /* a model name that could escape the models folder (400) */
} svc_error;

/* How a route's errors look. */
typedef enum {
    SVC_STYLE_OPENAI,    /* {"error":{"message","type","param","code"}}         */
    SVC_STYLE_ANTHROPIC, /* {"type":"error","error":{"type","message"}}         */
    SVC_STYLE_OLLAMA,    /* {"error":"message"}                                 */
    SVC_STYLE_LLAMACPP,  /* {"error":{"code":status,"message","type"}}          */
} svc_err_style;

typedef enum {
    SVC_ROUTE_EXACT = 0,
    SVC_ROUTE_PREFIX = 1 << 0,  /* path matches this prefix (management API)    */
    SVC_ROUTE_METERED = 1 << 1, /* one usage row per request                    */
} svc_route_flags;

typedef struct svc_server svc_server;
typedef struct svc_call svc_call;
typedef void (*svc_handler)(svc_call *call);

/* Registers a handler for METHOD PATH ("GET", "/v1/models"). Later routes
 * with the same method and path replace earlier ones. */
void svc_server_add_route(svc_server *srv, const char *method, const char *path,
                          svc_route_flags flags, svc_err_style style, svc_handler fn);

/* ---- The loaded model -------------------------------------------------- */

/* A model the service has loaded, with its scheduler. Reference counted:
 * a handler holds one for the duration of its request, so switching models
 * never frees one under a running request. */
typedef struct svc_model {
    char *name;           /* what clients call it, e.g. "qwen3-30b-a3b"     */
    char *path;           /* the GGUF file                                  */
    char *quant;          /* e.g. "Q4_K_M", from general.file_type / types  */
    const char *backend;  /* "cpu"                                          */
    moe_model *model;
    svc_sched *sched;
    int32_t n_ctx_per_seq;
    gint64 loaded_us;     /* g_get_real_time() when loaded                  */
    gint64 last_used_us;  /* g_get_monotonic_time() of the last acquire     */
    gint ref_count;
    void *prompt;         /* svc_prompt_model*, built on first use (prompt.h) */
    void (*prompt_free)(void *);
} svc_model;

/* The loaded model answering to `name` (its name, file stem, "NAME:latest",
 * or NULL / "" for the default model), loading it if it is installed and
 * not loaded (unloading the previous one once its requests are done).
 * SVC_ERROR_MODEL_NOT_FOUND names the model; the caller then tries the
 * upstreams. Returns a new reference. */
svc_model *svc_server_acquire_model(svc_server *srv, const char *name, GError **error);
svc_model *svc_model_ref(svc_model *m);
void       svc_model_unref(svc_model *m);

/* The currently loaded model (borrowed) or NULL. */
svc_model *svc_server_current_model(svc_server *srv);

/* Unloads the current model (after its running requests end). */
void svc_server_unload_model(svc_server *srv);

/* Loads the model answering to `name` as svc_server_acquire_model does,
 * but always anew and with `n_ctx` tokens per sequence and `n_parallel`
 * sequences (each 0: the server's defaults), replacing the current model
 * (which is freed once its running requests end). `path` (may be NULL)
 * names the GGUF to load instead of the one the name resolves to; the
 * caller has checked it is inside the models folder. Returns a new
 * reference. */
svc_model *svc_server_load_model(svc_server *srv, const char *name, const char *path,
                                 int32_t n_ctx, int32_t n_parallel, GError **error);

/* What svc_server_load_model uses for 0: the sequence slots, and the
 * context per sequence (0 = the model's own, at most 4096). */
void svc_server_model_defaults(svc_server *srv, int32_t *n_parallel, int32_t *n_ctx);

/* The GGUF served with --model and its name for clients (NULL when none). */
const char *svc_server_default_model_path(svc_server *srv);

/* ---- Server-wide objects for endpoint modules ------------------------- */

usage_store *svc_server_usage(svc_server *srv); /* may be NULL (no database) */
/* The settings (settings.h) and the other modules' objects are reached
 * through these typed accessors once those modules are merged. */
const char *svc_server_version(void);
/* The settings file the management API edits (NULL: the default path). */
const char *svc_server_settings_path(svc_server *srv);
/* The API keys store (keys.h). */
struct svc_keys *svc_server_keys(svc_server *srv);
/* Per-request timeout in milliseconds (<= 0: none). */
gint64      svc_server_request_timeout_ms(svc_server *srv);
gint64      svc_server_started_us(svc_server *srv);

/* Endpoint modules keep their own objects on the server under a key of
 * their own (a download manager, running jobs). `destroy` runs when the
 * data is replaced or the server is freed (after svc_server_stop). */
void     svc_server_set_data(svc_server *srv, const char *key, gpointer data,
                             GDestroyNotify destroy);
gpointer svc_server_get_data(svc_server *srv, const char *key);

/* Called first thing in svc_server_stop, on the main thread, before the
 * server waits for running calls: end long-lived streams, cancel
 * background work (the hook may iterate the main context while it waits). */
typedef void (*svc_stop_hook)(svc_server *srv, gpointer data);
void     svc_server_add_stop_hook(svc_server *srv, svc_stop_hook fn, gpointer data);

/* ---- One HTTP call ---------------------------------------------------- */

svc_call   *svc_call_ref(svc_call *call);
void        svc_call_unref(svc_call *call);

svc_server        *svc_call_server(svc_call *call);
SoupServerMessage *svc_call_msg(svc_call *call);
const char        *svc_call_method(svc_call *call);
const char        *svc_call_path(svc_call *call);
/* The request body (NUL-terminated copy; len without the NUL). */
const char        *svc_call_body(svc_call *call, gsize *len);
/* The query parameter or NULL. */
const char        *svc_call_query(svc_call *call, const char *name);
/* The API key's name, "gui", "cli" or "anonymous". */
const char        *svc_call_caller(svc_call *call);
/* Cancelled when the client disconnects or the server shuts down. */
GCancellable      *svc_call_cancellable(svc_call *call);
gboolean           svc_call_is_gone(svc_call *call);
/* g_get_monotonic_time() when the request arrived. */
gint64             svc_call_start_us(svc_call *call);
/* The client connected from this machine (a loopback address). */
gboolean           svc_call_from_loopback(svc_call *call);

/* Metering fields (strings copied). */
void svc_call_set_model(svc_call *call, const char *model);
void svc_call_set_route(svc_call *call, const char *route);       /* "local" or upstream */
void svc_call_set_backend(svc_call *call, const char *backend, const char *quant);
void svc_call_set_error_kind(svc_call *call, const char *kind);
void svc_call_set_finish_reason(svc_call *call, const char *reason);
void svc_call_set_tokens(svc_call *call, gint64 prompt, gint64 cached, gint64 completion);
/* Marks the first token now (only the first call counts). */
void svc_call_mark_first_token(svc_call *call);
void svc_call_set_decode(svc_call *call, double tokens_per_s, gint64 busy_ms);
/* Fills everything the scheduler knows from a finished request. */
void svc_call_set_gen_result(svc_call *call, const svc_gen_result *r);

/* ---- Answers ----------------------------------------------------------- */

/* Takes ownership of `node`. */
void svc_call_reply_json(svc_call *call, guint status, JsonNode *node);
void svc_call_reply_text(svc_call *call, guint status, const char *content_type,
                         const char *data, gssize len);
/* An error in the route's style; `param`/`code` may be NULL. Also records
 * the error kind (`code`, else `type`) for metering. */
void svc_call_reply_error(svc_call *call, guint status, const char *type, const char *param,
                          const char *code, const char *fmt, ...) G_GNUC_PRINTF(6, 7);
/* Maps a GError from the scheduler/server to status + error object. */
void svc_call_reply_gerror(svc_call *call, const GError *error);

/* Streams: headers go out with the first write. text/event-stream sets
 * Cache-Control: no-cache. Writes after the client left return FALSE and
 * are dropped. */
void     svc_call_stream_begin(svc_call *call, guint status, const char *content_type);
gboolean svc_call_stream_write(svc_call *call, const char *data, gssize len);
/* Writes "data: <json>\n\n" (SSE) or "<json>\n" (NDJSON), by content type. */
gboolean svc_call_stream_json(svc_call *call, JsonNode *node /* owned */);
/* SSE with an event name (Anthropic): "event: NAME\ndata: <json>\n\n". */
gboolean svc_call_stream_event(svc_call *call, const char *event, JsonNode *node /* owned */);
void     svc_call_stream_end(svc_call *call);

/* JSON helpers. */
/* The builder's root; frees the builder. */
JsonNode *svc_json_take(JsonBuilder *b);
char     *svc_json_to_string(JsonNode *node);
JsonNode *svc_json_parse(const char *text, gssize len, GError **error);

G_END_DECLS

#endif /* MOEDESK_SVC_H */

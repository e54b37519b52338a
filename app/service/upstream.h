/*
 * upstream.h — forwarding OpenAI-compatible requests from moedesk-service to
 * configured upstream servers (a vLLM/SGLang cluster, Moonshot's API,
 * OpenRouter, another MoeDesk service): the hybrid deployment of issue #5
 * item 8. The settings module fills `svc_upstream` structs; the HTTP server
 * picks one with svc_upstream_match (or svc_upstream_fallback) and calls
 * svc_upstream_forward, mapping its three callbacks onto a
 * SoupServerMessage.
 *
 * Threads: everything runs on the thread-default GMainContext of the
 * caller of svc_upstream_forward (which must be the context the client was
 * created on); every callback runs there, so handlers may touch libsoup
 * server objects directly.
 *
 * Secrets: an upstream's api_key is sent only as "Authorization: Bearer"
 * to that upstream's base_url (redirects are not followed, so it never
 * reaches another origin). It is never logged, never part of an error
 * message or result field, and any occurrence of it in what the upstream
 * sends back (an error that echoes the key) is replaced by "[redacted]"
 * before the client sees it. Keys shorter than SVC_UPSTREAM_KEY_MIN_REDACT
 * bytes are not searched for (that would mangle ordinary text).
 */
#ifndef MOEDESK_UPSTREAM_H
#define MOEDESK_UPSTREAM_H

#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>

G_BEGIN_DECLS

#define SVC_UPSTREAM_KEY_MIN_REDACT 8

/* Defaults for the timeouts an upstream leaves at 0. */
#define SVC_UPSTREAM_CONNECT_TIMEOUT_MS 10000  /* connect + send the request   */
#define SVC_UPSTREAM_IDLE_TIMEOUT_MS    300000 /* longest wait for the next byte
                                                  (headers, body, SSE chunk)   */

/* One configured upstream. A plain struct: the settings module fills it
 * (strings with g_strdup, patterns with g_strdupv) and frees it with
 * svc_upstream_clear. The forwarder copies what it needs, so an upstream
 * may be cleared or reloaded while requests are in flight. */
typedef struct svc_upstream {
    char *name;        /* "cluster", "openrouter": route in usage rows, the
                          explicit "name/model" prefix, error messages     */
    char *base_url;    /* "http://127.0.0.1:8000/v1" (http or https; a
                          trailing '/' is ignored)                          */
    char *api_key;     /* NULL/"" = no Authorization header                */
    char **models;     /* NULL-terminated GPatternSpec globs ("kimi-*",
                          "qwen3-*-a3b"); NULL/empty = matches nothing (only
                          the explicit prefix or fallback reach it)          */
    bool fallback;     /* used when the local queue is full or the model
                          cannot be loaded                                  */
    char *fallback_model; /* model name sent when used as a fallback; NULL =
                             the client's model name                        */
    double price_input_per_mtok;        /* currency units per 1e6 tokens */
    double price_cached_input_per_mtok;
    double price_output_per_mtok;
    int64_t connect_timeout_ms; /* 0 = SVC_UPSTREAM_CONNECT_TIMEOUT_MS      */
    int64_t idle_timeout_ms;    /* 0 = SVC_UPSTREAM_IDLE_TIMEOUT_MS         */
} svc_upstream;

/* Frees the owned fields and zeroes the struct. NULL: no-op. */
void svc_upstream_clear(svc_upstream *ups);

/* The upstream serving `model`, or -1. First an explicit "NAME/rest"
 * prefix naming an upstream (then *model_out = "rest"), else the first
 * upstream (in array order) one of whose patterns matches the whole model
 * name (then *model_out = model). *model_out points into `model`
 * (borrowed); model_out may be NULL. */
int svc_upstream_match(const svc_upstream *ups, size_t n, const char *model,
                       const char **model_out);

/* The first upstream with `fallback` set, or -1. The model name to send is
 * its fallback_model, or the client's when that is NULL. */
int svc_upstream_fallback(const svc_upstream *ups, size_t n);

/* --- forwarding ------------------------------------------------------ */

#define SVC_UPSTREAM_ERROR (svc_upstream_error_quark())
GQuark svc_upstream_error_quark(void);

/* Error codes; each has an error_kind string for usage rows. */
typedef enum {
    SVC_UPSTREAM_ERROR_CONFIG,       /* "upstream_config": bad base_url/path  */
    SVC_UPSTREAM_ERROR_UNREACHABLE,  /* "upstream_unreachable" (502)          */
    SVC_UPSTREAM_ERROR_TIMEOUT,      /* "upstream_timeout" (504)              */
    SVC_UPSTREAM_ERROR_AUTH,         /* "upstream_auth": 401/403 (502)        */
    SVC_UPSTREAM_ERROR_STATUS_4XX,   /* "upstream_status_4xx": passed through */
    SVC_UPSTREAM_ERROR_STATUS_5XX,   /* "upstream_status_5xx" (502; 503 kept) */
    SVC_UPSTREAM_ERROR_BAD_RESPONSE, /* "upstream_bad_response": redirect,
                                        oversized or unparsable answer (502) */
    SVC_UPSTREAM_ERROR_STREAM_CUT,   /* "upstream_stream_cut": body ended
                                        early / no "data: [DONE]"            */
    SVC_UPSTREAM_ERROR_STREAM_ERROR, /* "upstream_stream_error": an error
                                        event inside a 200 stream            */
    SVC_UPSTREAM_ERROR_CANCELLED,    /* "cancelled": the client went away (499) */
} svc_upstream_error;

const char *svc_upstream_error_kind(svc_upstream_error code);

/* One forwarding request. Everything is copied by svc_upstream_forward. */
typedef struct svc_upstream_request {
    const char *path;   /* below base_url, starting with '/':
                           "/chat/completions", "/completions", "/models"   */
    JsonNode *body;     /* JSON object (borrowed, not modified) or NULL for
                           a GET. The copy sent has "model" replaced (when
                           `model` is set), "stream" set to `stream`, and, for
                           a stream, stream_options.include_usage = true     */
    const char *model;  /* the model name to send; NULL = keep the body's   */
    bool stream;        /* the client asked for SSE                         */
} svc_upstream_request;

/* What the client should get as status line and headers. */
typedef struct svc_upstream_head {
    unsigned status;          /* HTTP status for the client                 */
    const char *content_type; /* "text/event-stream", "application/json"... */
    const char *retry_after;  /* the upstream's Retry-After or NULL         */
    const char *error_kind;   /* non-NULL when this head and the body after
                                 it are the forwarder's error answer (not the
                                 upstream's own); a caller that would rather
                                 try another upstream may ignore both and
                                 retry from on_done                          */
} svc_upstream_head;

/* How a forwarded request ended. Times are monotonic microseconds since
 * svc_upstream_forward; -1 = did not happen. Borrowed pointers live until
 * on_done returns. */
typedef struct svc_upstream_result {
    unsigned http_status;     /* what the client got; 499 when cancelled   */
    unsigned upstream_status; /* the upstream's status; 0 = no answer      */
    const GError *error;      /* SVC_UPSTREAM_ERROR_*, NULL on success; the
                                 message names the upstream (name and base
                                 URL), never its key                        */
    const char *error_kind;   /* svc_upstream_error_kind(code) or NULL      */
    const char *upstream_name;
    int64_t prompt_tokens;    /* from the upstream's usage; -1 = not seen   */
    int64_t cached_tokens;    /* prompt_tokens_details.cached_tokens (or a
                                 top-level usage.cached_tokens); -1 = none */
    int64_t completion_tokens;
    int64_t ttfb_us;          /* response headers received                  */
    int64_t ttft_us;          /* streams: first chunk with content (text,
                                 reasoning or tool call); -1 for non-stream  */
    int64_t total_us;
    const char *finish_reason; /* last one seen (choices[].finish_reason)   */
} svc_upstream_result;

/* Callbacks, in this order: on_head at most once (not when the client
 * cancelled before any answer), on_data zero or more times after it,
 * on_done exactly once, last. Errors before the head become a head with
 * the error's status and one on_data with an OpenAI-style error body
 * {"error":{"message","type":"upstream_error","param":null,"code":KIND}};
 * errors in the middle of a stream become one SSE event
 * "data: {"error":{...}}\n\n". A cancelled request sends nothing more.
 * `bytes` is borrowed (ref it to keep it). */
typedef struct svc_upstream_events {
    void (*on_head)(const svc_upstream_head *head, void *user);
    void (*on_data)(GBytes *bytes, void *user);
    void (*on_done)(const svc_upstream_result *result, void *user);
    void *user;
} svc_upstream_events;

/* The shared HTTP client: one SoupSession (connection pool) for every
 * upstream. Create and use it on one thread-default GMainContext. */
typedef struct svc_upstream_client svc_upstream_client;

typedef struct svc_upstream_client_params {
    int max_conns;          /* pooled connections in all; 0 = 256          */
    int max_conns_per_host; /* 0 = 64 (libsoup's default of 2 would queue
                               parallel streams to one cluster)            */
    const char *user_agent; /* NULL = "moedesk-service"                     */
} svc_upstream_client_params;

/* params may be NULL (defaults). */
svc_upstream_client *svc_upstream_client_new(const svc_upstream_client_params *params);
/* Aborts requests in flight (their on_done still runs, with an error, when
 * the main context next iterates) and drops the client's reference to the
 * session. NULL: no-op. */
void svc_upstream_client_free(svc_upstream_client *client);

/* Starts forwarding `req` to `ups`. Returns at once; the events arrive on
 * the caller's thread-default main context. Cancelling `cancellable` (the
 * server does when the client disconnects) aborts the upstream request
 * promptly: on_done follows with SVC_UPSTREAM_ERROR_CANCELLED and nothing
 * else is sent. Streams are passed through event by event as they arrive
 * (the usage-only chunk is dropped when the client did not ask for
 * stream_options.include_usage); non-stream answers are passed whole once
 * complete. A bad request (no path, bad base_url) still reports through
 * the callbacks, never synchronously. */
void svc_upstream_forward(svc_upstream_client *client, const svc_upstream *ups,
                          const svc_upstream_request *req,
                          const svc_upstream_events *events,
                          GCancellable *cancellable);

G_END_DECLS

#endif /* MOEDESK_UPSTREAM_H */

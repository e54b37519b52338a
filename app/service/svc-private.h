/*
 * svc-private.h — the structs behind svc.h's opaque types, shared by
 * server.c (dispatch, checks, lifetime), call.c (answers and metering) and
 * model.c (loading). Endpoint modules must not include it.
 */
#ifndef MOEDESK_SVC_PRIVATE_H
#define MOEDESK_SVC_PRIVATE_H

#include "server.h"

typedef struct svc_route {
    char *method;
    char *path;
    svc_route_flags flags;
    svc_err_style style;
    svc_handler fn;
} svc_route;

struct svc_server {
    /* options, copied */
    char *host;
    guint16 port;
    char *model_path;
    char *model_name;
    char *default_model;
    char *models_dir;
    char *usage_db;
    char *keys_db;
    char *settings_path;
    int32_t n_parallel, n_ctx, n_threads, queue_max;
    gint64 request_timeout_ms, header_timeout_ms, idle_unload_s;
    gsize max_body_bytes;
    char **allowed_hosts;
    char **cors_origins;

    SoupServer *soup;
    GPtrArray *routes;       /* svc_route*                                  */
    GHashTable *calls;       /* svc_call* -> itself: calls not yet finished  */
    usage_store *usage;
    struct svc_keys *keys;
    struct svc_metrics *metrics;
    svc_model *current;      /* the loaded model (one reference)            */
    gint64 started_us;
    gboolean stopping;
    svc_upstream *upstreams;   /* deep copies                                  */
    size_t n_upstreams;
    svc_upstream_client *up_client;
    guint idle_source;
    GData *module_data;      /* svc_server_set_data                         */
    GArray *stop_hooks;      /* svc_stop_hook_entry                         */
};

typedef struct svc_stop_hook_entry {
    svc_stop_hook fn;
    gpointer data;
} svc_stop_hook_entry;

struct svc_call {
    gint ref_count;
    svc_server *srv;
    SoupServerMessage *msg;  /* a reference                                 */
    const svc_route *route;  /* NULL: refused before routing                */
    char *method, *path;
    GHashTable *query;       /* owned strings, or NULL                      */
    char *body;              /* NUL-terminated copy                         */
    gsize body_len;
    char *caller;
    char *client;
    GCancellable *cancellable;
    gint64 start_us;         /* monotonic                                   */
    gint64 start_ms;         /* UTC wall clock                              */
    gint64 first_token_us;   /* monotonic, 0 = none                         */

    /* metering */
    char *model, *route_name, *backend, *quant, *error_kind, *finish_reason;
    gint64 prompt_tokens, cached_tokens, completion_tokens, busy_ms;
    double decode_tps;
    gboolean metered;
    guint final_status;      /* status when libsoup finished; 0 = not yet  */

    /* answer state */
    gboolean paused;         /* handler returned without answering           */
    gboolean streaming;
    gboolean stream_ended;
    gboolean stream_written; /* a chunk was queued: the status line is final  */
    gboolean finished;       /* libsoup is done with the message             */
    gboolean gone;           /* the client left before the answer ended      */
    gboolean is_sse;
    guint liveness_source;   /* polls the socket for a vanished client       */
};

/* call.c */
svc_call *svc_call_new(svc_server *srv, SoupServerMessage *msg, const char *path,
                       GHashTable *query);
/* libsoup finished (or aborted) the exchange: meter, cancel, drop refs. */
void svc_call_finished(svc_call *call, gboolean aborted);
/* The handler returned: pause the message if it has no answer yet. */
void svc_call_after_handler(svc_call *call);

/* model.c */
svc_model *svc_model_load(svc_server *srv, const char *path, const char *name, GError **error);

#endif /* MOEDESK_SVC_PRIVATE_H */

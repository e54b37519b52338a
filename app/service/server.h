/*
 * server.h — creating, starting and stopping the service (used by main.c
 * and by tests that run a service in-process). Endpoint modules use svc.h.
 */
#ifndef MOEDESK_SERVER_H
#define MOEDESK_SERVER_H

#include "settings.h"
#include "svc.h"
#include "upstream.h"

G_BEGIN_DECLS

/* What the server needs to start; main.c fills it from the settings file
 * and the command line. Strings are copied. */
typedef struct svc_server_options {
    const char *host;           /* bind address; "127.0.0.1"                    */
    guint16     port;           /* 0: any free port (read it back)               */
    const char *model_path;     /* GGUF to serve (--model), or NULL              */
    const char *model_name;     /* its name for clients; NULL: the file stem      */
    const char *default_model;  /* an installed model's name to load on first use */
    const char *models_dir;     /* installed models (library), or NULL           */
    const char *usage_db;       /* usage.sqlite3 path; NULL: no metering          */
    const char *keys_db;        /* keys.sqlite3 path; NULL: the default one       */
    const char *settings_path;  /* service.json the management API edits; NULL: default */
    int32_t     n_parallel;     /* scheduler slots                               */
    int32_t     n_ctx;          /* per sequence; 0: model default, <= 4096       */
    int32_t     n_threads;
    int32_t     queue_max;
    gint64      header_timeout_ms;  /* headers+body must arrive within; 0: 30 s */
} svc_server_options;

void svc_server_options_init(svc_server_options *o);

svc_server *svc_server_new(const svc_server_options *o, GError **error);
/* The settings that take effect while the service runs: allowed Host names,
 * CORS origins, the body limit, the per-request timeout, idle unloading,
 * upstreams (none with data_sensitivity "high"). main.c applies them at
 * start (after folding its command-line overrides into `st`), the
 * management API after every PATCH. Until then: no extra hosts or origins,
 * 10 MiB, 600 s, never unload, no upstreams. */
void        svc_server_apply_settings(svc_server *srv, const svc_settings *st);
/* Starts listening (and loads the model given in the options). */
gboolean    svc_server_start(svc_server *srv, GError **error);
/* The port actually bound (after start). */
guint16     svc_server_port(svc_server *srv);
/* Stops accepting, lets requests finish for up to `grace_ms` (then cancels
 * them), flushes the usage database. Iterates the default main context
 * itself while waiting. */
void        svc_server_stop(svc_server *srv, gint64 grace_ms);
void        svc_server_free(svc_server *srv);

G_END_DECLS

#endif /* MOEDESK_SERVER_H */

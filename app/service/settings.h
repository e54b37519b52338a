/*
 * settings.h — moedesk-service's settings: one JSON file,
 * `$MOEDESK_CONFIG_DIR/service.json`, else
 * `g_get_user_config_dir()/moedesk/service.json` (XDG_CONFIG_HOME on Linux,
 * %LOCALAPPDATA% on Windows). Every field is type- and range-checked on load;
 * a bad file is one GError naming the file and the JSON path at fault
 * ("service.json: upstreams[1].base_url: expected a string"). Unknown keys
 * are errors too, so a typo never silently means "default".
 *
 * The struct is plain data: main.c applies command-line overrides by
 * assigning fields. Strings are owned (g_free), string lists are
 * NULL-terminated GStrv (never NULL, possibly empty), upstreams is a
 * GPtrArray of svc_upstream_cfg* that frees its elements.
 *
 * Secrets: an upstream's api_key is kept in the file (mode 0600) but never
 * leaves the process through svc_settings_to_json(s, TRUE), which the
 * management API uses; it says "has_api_key": true instead.
 *
 * Threads: no internal locking; the main thread owns a settings object.
 */
#ifndef MOEDESK_SVC_SETTINGS_H
#define MOEDESK_SVC_SETTINGS_H

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* MoeDesk's default port: 11435, one above Ollama's 11434, so both can run
 * side by side and clients configured for "Ollama on localhost" need only the
 * port changed. */
#define SVC_SETTINGS_DEFAULT_PORT 11435
#define SVC_SETTINGS_FILE_MAX_BYTES (1024 * 1024)

#define SVC_SETTINGS_ERROR (svc_settings_error_quark())
GQuark svc_settings_error_quark(void);

typedef enum {
    SVC_SETTINGS_ERROR_READ,    /* the file exists but cannot be read      */
    SVC_SETTINGS_ERROR_PARSE,   /* not JSON                                */
    SVC_SETTINGS_ERROR_INVALID, /* a field has a bad type or value         */
    SVC_SETTINGS_ERROR_WRITE,   /* save failed                             */
} svc_settings_error;

/* The same scale as the report's `sensitivity` (report-settings.h). */
typedef enum {
    SVC_DATA_SENSITIVITY_NORMAL, /* "normal": upstream routing allowed          */
    SVC_DATA_SENSITIVITY_LOW,    /* "low": the same as normal for the service   */
    SVC_DATA_SENSITIVITY_HIGH,   /* "high": keep data local, never forward       */
} svc_data_sensitivity;

typedef struct svc_upstream_prices {
    double input_per_mtok;        /* USD per million prompt tokens (>= 0)   */
    double cached_input_per_mtok; /* USD per million cached prompt tokens   */
    double output_per_mtok;       /* USD per million completion tokens      */
} svc_upstream_prices;

/* An OpenAI-compatible endpoint requests may be forwarded to. */
typedef struct svc_upstream_cfg {
    char  *name;        /* 1-64 of [A-Za-z0-9._-], unique, not "local"; the route in usage rows */
    char  *base_url;    /* http(s)://host[:port][/path], e.g. https://api.moonshot.ai/v1 */
    char  *api_key;     /* secret or NULL; never logged or returned     */
    char  *api_key_env; /* or the name of an environment variable; NULL */
    char **models;      /* glob patterns (g_pattern_match_simple) routed here */
    gboolean fallback;  /* used when the local queue is full or the model cannot load */
    svc_upstream_prices prices;
} svc_upstream_cfg;

typedef struct svc_settings {
    char   *host;              /* bind address; "127.0.0.1"                    */
    int     port;              /* 0-65535 (0 = any free port); 11435           */
    char   *model;             /* model name or GGUF path to load; NULL = none */
    int     n_parallel;        /* sequence slots, 1-64; 4                      */
    int     n_ctx;             /* context per sequence; 0 = model's, capped at 4096 */
    int     n_threads;         /* CPU threads; 0 = all                         */
    int     queue_max;         /* waiting requests, 1-65536; 64                */
    int     request_timeout_s; /* 1-86400; 600                                 */
    int     idle_unload_s;     /* unload after this idle time; 0 = never       */
    gint64  max_body_bytes;    /* request body limit, 1 KiB-1 GiB; 10 MiB      */
    char  **allowed_hosts;     /* Host names accepted besides loopback         */
    char  **cors_origins;      /* origins that get CORS headers; "*" = any     */
    GPtrArray *upstreams;      /* of svc_upstream_cfg*                              */
    svc_data_sensitivity data_sensitivity;
} svc_settings;

/* `$MOEDESK_CONFIG_DIR/service.json` or the user config dir's
 * `moedesk/service.json`. Caller frees. */
char *svc_settings_default_path(void);

/* A new settings object with every default. Free with svc_settings_free. */
svc_settings *svc_settings_new(void);
void          svc_settings_free(svc_settings *s);
svc_settings *svc_settings_copy(const svc_settings *s);

/* Reads `path` (NULL = the default path). A missing file gives the defaults;
 * fields absent from the file keep their defaults. NULL + error on anything
 * else wrong, the message naming the file and the JSON path. */
svc_settings *svc_settings_load(const char *path, GError **error);

/* Parses settings from JSON text; `source` names it in errors. */
svc_settings *svc_settings_load_from_data(const char *data, gssize len, const char *source,
                                          GError **error);

/* Writes every field (secrets included) to `path` (NULL = default)
 * atomically (temporary file + rename), mode 0600, creating the folder. */
gboolean svc_settings_save(const svc_settings *s, const char *path, GError **error);

/* The settings as a JSON object (a new node, caller frees). With
 * redact_secrets, api_key is left out and "has_api_key" says whether one is
 * set (from the file or the named environment variable); the management API
 * must always pass TRUE. */
JsonNode *svc_settings_to_json(const svc_settings *s, gboolean redact_secrets);

/* Applies a partial update from the management API: each member of `patch`
 * replaces that field ("model": null clears it). "upstreams" replaces the
 * whole list, but an upstream given without api_key/api_key_env keeps the
 * key of the existing upstream of the same name (the client never saw it);
 * "api_key": null removes it. "has_api_key" is accepted and ignored, so what
 * svc_settings_to_json returned can be sent back. Everything is validated
 * first: on error `s` is unchanged and the message names the field
 * ("patch: upstreams[0].name: ..."). */
gboolean svc_settings_patch(svc_settings *s, JsonObject *patch, GError **error);

/* The upstream's key: api_key, else the value of $api_key_env, else NULL.
 * Borrowed; do not log it. */
const char *svc_upstream_get_api_key(const svc_upstream_cfg *u);

/* The first upstream (in file order) with a model pattern matching `model`,
 * or NULL: serve locally. Always NULL when data_sensitivity is "high".
 * Borrowed. */
const svc_upstream_cfg *svc_settings_route_model(const svc_settings *s, const char *model);
/* The first upstream with fallback set, or NULL (always NULL when
 * data_sensitivity is "high"). Borrowed. */
const svc_upstream_cfg *svc_settings_fallback_upstream(const svc_settings *s);

const char *svc_data_sensitivity_name(svc_data_sensitivity d);

G_END_DECLS

#endif /* MOEDESK_SVC_SETTINGS_H */

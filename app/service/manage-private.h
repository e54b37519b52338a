/*
 * manage-private.h — what the Management API's files share (api-manage.c,
 * manage-*.c): the module's state on the server, JSON and request helpers,
 * and background jobs (downloads, imports, verifications) with their
 * NDJSON progress streams.
 *
 * Jobs live on the main thread. Each has an id ("dl-3", "imp-1",
 * "ver-2"), a state, and kind-specific fields its class writes into its
 * JSON. Clients follow a job by polling GET .../{id} or by holding
 * GET .../{id}/events open: one JSON line per change (at most four a
 * second, every state change at once), ending after a final state
 * (completed, failed, cancelled) or when the service stops. A request
 * that must answer with the job's settled state (pause, cancel,
 * verify?wait=1) waits on the job: it is answered the first time the job
 * is neither queued nor running.
 */
#ifndef MOEDESK_MANAGE_PRIVATE_H
#define MOEDESK_MANAGE_PRIVATE_H

#include "api-manage.h"

#include <download-manager.h>

G_BEGIN_DECLS

#define MG_PREFIX "/moedesk/v1/"

typedef enum {
    MG_JOB_DOWNLOAD,
    MG_JOB_IMPORT,
    MG_JOB_VERIFY,
    MG_N_JOB_KINDS
} mg_job_kind;

typedef enum {
    MG_STATE_QUEUED,
    MG_STATE_RUNNING,
    MG_STATE_PAUSED,
    MG_STATE_COMPLETED, /* final */
    MG_STATE_FAILED,    /* final (a failed download may still be resumed,
                           which makes it running again)                  */
    MG_STATE_CANCELLED, /* final                                          */
} mg_job_state;

typedef struct mg_job mg_job;
typedef struct svc_manage svc_manage;

/* What a kind of job does; a static table per kind. */
typedef struct mg_job_class {
    mg_job_kind kind;
    const char *name;       /* "download": the job object's "kind"         */
    const char *id_prefix;  /* "dl"                                        */
    /* Adds the kind's members to the job object being built. */
    void (*describe)(mg_job *job, JsonBuilder *b);
    /* The service stops: cancel the work (NULL: it cannot be cancelled). */
    void (*stop)(mg_job *job);
    /* TRUE while an asynchronous operation holds the job. */
    gboolean (*busy)(mg_job *job);
    void (*free_data)(gpointer data);
} mg_job_class;

struct mg_job {
    gint ref_count;
    svc_manage *mg;       /* NULL once the module is gone (late callbacks) */
    const mg_job_class *cls;
    char *id;
    mg_job_state state;
    gint64 created_ms, updated_ms, finished_ms; /* unix ms; 0 = not yet    */
    char *error_code, *error_message;
    GPtrArray *streams;   /* mg_stream* (manage-jobs.c)                    */
    GPtrArray *waiters;   /* svc_call* references                          */
    gint64 last_emit_us;
    guint emit_source;
    gpointer data;        /* the kind's, freed by cls->free_data          */
};

/* The module's state, one per server (svc_server_get_data). */
struct svc_manage {
    svc_server *srv;
    MoeDownloadManager *downloads; /* created on the first download        */
    GHashTable *jobs;              /* id -> mg_job* (a reference)           */
    GPtrArray *order;              /* mg_job*, oldest first (borrowed)      */
    guint next_id;
    gboolean stopping;
};

svc_manage *mg_of(svc_call *call);

/* ---- JSON and requests (api-manage.c) --------------------------------- */

void mg_add_str(JsonBuilder *b, const char *name, const char *value); /* NULL: null */
void mg_add_int(JsonBuilder *b, const char *name, gint64 value);
void mg_add_u64(JsonBuilder *b, const char *name, guint64 value);
void mg_add_double(JsonBuilder *b, const char *name, double value); /* NaN: null */
void mg_add_bool(JsonBuilder *b, const char *name, gboolean value);
/* ISO 8601 UTC ("2026-11-23T09:30:00Z"); 0 gives null. */
void mg_add_time_ms(JsonBuilder *b, const char *name, gint64 unix_ms);
void mg_add_time_s(JsonBuilder *b, const char *name, gint64 unix_s);
/* Ends the builder's root and replies with it. */
void mg_reply_builder(svc_call *call, guint status, JsonBuilder *b);

/* The request body as a JSON object; an empty body gives an empty object.
 * Otherwise answers 400 and returns NULL. Free with json_node_unref. */
JsonNode *mg_body(svc_call *call, JsonObject **out);
/* Optional members of the body; a member of the wrong type answers 400
 * naming it and returns FALSE. Absent members leave *out unchanged. */
gboolean mg_member_string(svc_call *call, JsonObject *o, const char *name, const char **out);
gboolean mg_member_int(svc_call *call, JsonObject *o, const char *name, gint64 min, gint64 max,
                       gint64 *out);
gboolean mg_member_bool(svc_call *call, JsonObject *o, const char *name, gboolean *out);
/* A query parameter as an integer in [min, max] (absent: *out unchanged);
 * otherwise answers 400 naming it. */
gboolean mg_query_int(svc_call *call, const char *name, gint64 min, gint64 max, gint64 *out);
/* "1", "true", "yes" */
gboolean mg_query_flag(svc_call *call, const char *name);

/* The part of the path after `prefix` with `suffix` removed ("" when the
 * path is exactly the prefix); NULL when the path does not end in suffix. */
char *mg_path_part(svc_call *call, const char *prefix, const char *suffix);
/* A model name from the path, checked with moe_library_check_name; answers
 * 400 (invalid_model_name) and returns NULL when it is not valid. */
char *mg_path_model(svc_call *call, const char *prefix, const char *suffix);

/* A library (MOE_LIBRARY_ERROR) error as a reply: invalid name 400, not
 * found 404, busy 409, network/HTTP 502, others 500. `param` may be NULL. */
void mg_reply_library_error(svc_call *call, const GError *e, const char *param);
/* The code string for a library error ("hash_mismatch", ...). */
const char *mg_library_error_code(const GError *e);

/* ---- jobs (manage-jobs.c) --------------------------------------------- */

/* A new job in state QUEUED, kept by the module (borrowed result). */
mg_job     *mg_job_new(svc_manage *mg, const mg_job_class *cls, gpointer data);
mg_job     *mg_job_ref(mg_job *job);
void        mg_job_unref(mg_job *job);
const char *mg_job_state_name(mg_job_state state);
gboolean    mg_job_is_final(const mg_job *job);
gboolean    mg_job_is_active(const mg_job *job); /* queued, running or paused */
JsonNode   *mg_job_to_json(mg_job *job);
/* Something changed: streams get a line (at most every 250 ms). */
void        mg_job_changed(mg_job *job);
/* A new state: streams get a line at once; waiters are answered when the
 * job is neither queued nor running; streams end on a final state. */
void        mg_job_set_state(mg_job *job, mg_job_state state);
void        mg_job_fail(mg_job *job, const char *code, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
/* Answers `call` with the job (200) once it is neither queued nor running. */
void        mg_job_wait(mg_job *job, svc_call *call);
/* Turns `call` into an NDJSON stream of the job's states. */
void        mg_job_stream(mg_job *job, svc_call *call);
/* Drops the job from the module's list (its streams end). */
void        mg_job_forget(mg_job *job);
mg_job     *mg_job_lookup(svc_manage *mg, mg_job_kind kind, const char *id);
/* The first active job of `kind` for which `match` is TRUE, or NULL. */
mg_job     *mg_job_find_active(svc_manage *mg, mg_job_kind kind,
                               gboolean (*match)(mg_job *job, gpointer data), gpointer data);
guint       mg_jobs_count_active(svc_manage *mg, mg_job_kind kind);

/* Routes every job collection ("downloads", "imports", "verifications")
 * shares: GET /moedesk/v1/<collection> lists its jobs, oldest first ... */
void        mg_jobs_route_list(svc_call *call, mg_job_kind kind);
/* ... and GET .../{id} answers one, GET .../{id}/events streams it. */
void        mg_jobs_route_get(svc_call *call, mg_job_kind kind);
/* The job named by the path's {id} (followed by `suffix`), or NULL after
 * answering 404. */
mg_job     *mg_jobs_from_path(svc_call *call, mg_job_kind kind, const char *suffix);

/* Server stop: cancel what can be cancelled, end streams, answer waiters,
 * wait (up to `wait_ms`, iterating the main context) for cancelled work. */
void        mg_jobs_stop(svc_manage *mg, gint64 wait_ms);
void        mg_jobs_free(svc_manage *mg);

/* ---- route groups ------------------------------------------------------ */

void mg_catalog_register(svc_server *srv);   /* manage-catalog.c   */
void mg_models_register(svc_server *srv);    /* manage-models.c    */
void mg_downloads_register(svc_server *srv); /* manage-downloads.c */
void mg_imports_register(svc_server *srv);   /* manage-import.c    */
void mg_usage_register(svc_server *srv);     /* manage-usage.c     */
/* Waits (iterating the main context, at most `wait_ms`) until no worker
 * thread reads the usage store: the server closes it after stopping. */
void mg_usage_wait(gint64 wait_ms);

/* manage-models.c: is `name` being downloaded or imported (delete and
 * verify must wait)? */
gboolean mg_model_busy(svc_manage *mg, const char *name);
/* manage-downloads.c / manage-import.c: the model a job writes, or NULL. */
const char *mg_download_model(mg_job *job);
const char *mg_import_model(mg_job *job);

/* manage-catalog.c: this machine (moe_hw_probe, which honours
 * MOEDESK_MACHINE), probed at most every few seconds. FALSE with a reply
 * (500) when the machine file is bad. */
gboolean mg_machine(svc_call *call, moe_machine *out);
void     mg_add_machine(JsonBuilder *b, const char *name, const moe_machine *m);

G_END_DECLS

#endif /* MOEDESK_MANAGE_PRIVATE_H */

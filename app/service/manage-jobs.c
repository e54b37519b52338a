/*
 * manage-jobs.c — background jobs of the Management API (downloads,
 * imports, verifications; see manage-private.h): ids, the JSON every job
 * shares, NDJSON progress streams, requests waiting for a job to settle,
 * the job lists, and stopping everything when the service stops.
 *
 * Ownership: the module's table holds one reference per job; an
 * asynchronous operation (a pull, a verify, an import thread) holds
 * another until its callback has run; a pending throttled emit and every
 * "client left" idle hold one each. A stream holds a reference to its call
 * until the stream ends. Reference counts are atomic because an import's
 * worker thread takes one for each progress report it posts; everything
 * else about a job is touched on the main thread only.
 *
 * At most MG_KEEP_FINISHED finished jobs of each kind are remembered (the
 * oldest go first), so a long-running service does not grow without bound.
 */
#include "manage-private.h"

#include <stdarg.h>
#include <string.h>

#define MG_EMIT_INTERVAL_US 250000
#define MG_KEEP_FINISHED 64

typedef struct mg_stream {
    svc_call *call;  /* a reference */
    gulong cancel_id;
} mg_stream;

static const char *const state_names[] = {
    [MG_STATE_QUEUED] = "queued",       [MG_STATE_RUNNING] = "running",
    [MG_STATE_PAUSED] = "paused",       [MG_STATE_COMPLETED] = "completed",
    [MG_STATE_FAILED] = "failed",       [MG_STATE_CANCELLED] = "cancelled",
};

const char *mg_job_state_name(mg_job_state state)
{
    return state_names[state];
}

gboolean mg_job_is_final(const mg_job *job)
{
    return job->state == MG_STATE_COMPLETED || job->state == MG_STATE_CANCELLED ||
           job->state == MG_STATE_FAILED;
}

gboolean mg_job_is_active(const mg_job *job)
{
    return job->state == MG_STATE_QUEUED || job->state == MG_STATE_RUNNING ||
           job->state == MG_STATE_PAUSED;
}

mg_job *mg_job_ref(mg_job *job)
{
    g_atomic_int_inc(&job->ref_count);
    return job;
}

void mg_job_unref(mg_job *job)
{
    if (!job || !g_atomic_int_dec_and_test(&job->ref_count))
        return;
    /* Streams and waiters were ended by forget/stop; nothing holds calls. */
    g_ptr_array_unref(job->streams);
    g_ptr_array_unref(job->waiters);
    if (job->cls->free_data && job->data)
        job->cls->free_data(job->data);
    g_free(job->id);
    g_free(job->error_code);
    g_free(job->error_message);
    g_free(job);
}

/* ---- JSON ------------------------------------------------------------------- */

JsonNode *mg_job_to_json(mg_job *job)
{
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    mg_add_str(b, "id", job->id);
    mg_add_str(b, "kind", job->cls->name);
    mg_add_str(b, "state", mg_job_state_name(job->state));
    json_builder_set_member_name(b, "error");
    if (job->error_message) {
        json_builder_begin_object(b);
        mg_add_str(b, "code", job->error_code);
        mg_add_str(b, "message", job->error_message);
        json_builder_end_object(b);
    } else {
        json_builder_add_null_value(b);
    }
    mg_add_time_ms(b, "created", job->created_ms);
    mg_add_time_ms(b, "updated", job->updated_ms);
    mg_add_time_ms(b, "finished", job->finished_ms);
    job->cls->describe(job, b);
    json_builder_end_object(b);
    JsonNode *n = json_builder_get_root(b);
    g_object_unref(b);
    return n;
}

/* ---- streams ---------------------------------------------------------------- */

static void stream_free(mg_stream *s)
{
    if (s->cancel_id)
        g_cancellable_disconnect(svc_call_cancellable(s->call), s->cancel_id);
    svc_call_unref(s->call);
    g_free(s);
}

static void stream_end(mg_stream *s)
{
    svc_call_stream_end(s->call);
    stream_free(s);
}

typedef struct gone_ctx {
    mg_job *job;
    svc_call *call;
} gone_ctx;

/* The client of a stream left: drop the stream on the next turn (a
 * cancellable's handler must not disconnect itself). */
static gboolean stream_gone_idle(gpointer data)
{
    gone_ctx *g = data;
    for (guint i = 0; i < g->job->streams->len; i++) {
        mg_stream *s = g_ptr_array_index(g->job->streams, i);
        if (s->call == g->call) {
            g_ptr_array_remove_index(g->job->streams, i);
            stream_end(s);
            break;
        }
    }
    mg_job_unref(g->job);
    svc_call_unref(g->call);
    g_free(g);
    return G_SOURCE_REMOVE;
}

typedef struct watch_ctx {
    mg_job *job;     /* borrowed: the stream, which the job holds, owns us */
    svc_call *call;  /* borrowed likewise                                  */
} watch_ctx;

static void on_stream_cancelled(GCancellable *c, gpointer data)
{
    (void)c;
    watch_ctx *w = data;
    gone_ctx *g = g_new(gone_ctx, 1);
    g->job = mg_job_ref(w->job);
    g->call = svc_call_ref(w->call);
    g_idle_add(stream_gone_idle, g);
}

static char *job_line(mg_job *job)
{
    JsonNode *n = mg_job_to_json(job);
    char *s = svc_json_to_string(n);
    json_node_unref(n);
    char *line = g_strconcat(s, "\n", NULL);
    g_free(s);
    return line;
}

static void job_emit(mg_job *job)
{
    job->last_emit_us = g_get_monotonic_time();
    if (!job->streams->len)
        return;
    char *line = job_line(job);
    for (guint i = 0; i < job->streams->len;) {
        mg_stream *s = g_ptr_array_index(job->streams, i);
        if (svc_call_stream_write(s->call, line, -1)) {
            i++;
        } else {
            g_ptr_array_remove_index(job->streams, i);
            stream_end(s);
        }
    }
    g_free(line);
}

static void job_end_streams(mg_job *job)
{
    while (job->streams->len) {
        mg_stream *s = g_ptr_array_steal_index(job->streams, job->streams->len - 1);
        stream_end(s);
    }
}

static gboolean emit_timeout(gpointer data)
{
    mg_job *job = data;
    job->emit_source = 0;
    if (job->mg)
        job_emit(job);
    return G_SOURCE_REMOVE;
}

void mg_job_changed(mg_job *job)
{
    if (!job->mg)
        return;
    job->updated_ms = g_get_real_time() / 1000;
    if (job->emit_source || !job->streams->len)
        return;
    gint64 wait_us = job->last_emit_us + MG_EMIT_INTERVAL_US - g_get_monotonic_time();
    if (wait_us <= 0) {
        job_emit(job);
        return;
    }
    job->emit_source = g_timeout_add_full(G_PRIORITY_DEFAULT, (guint)(wait_us / 1000) + 1,
                                          emit_timeout, mg_job_ref(job),
                                          (GDestroyNotify)mg_job_unref);
}

static void answer_waiters(mg_job *job)
{
    while (job->waiters->len) {
        svc_call *call = g_ptr_array_steal_index(job->waiters, 0);
        svc_call_reply_json(call, 200, mg_job_to_json(job));
        svc_call_unref(call);
    }
}

void mg_job_set_state(mg_job *job, mg_job_state state)
{
    job->state = state;
    job->updated_ms = g_get_real_time() / 1000;
    job->finished_ms = mg_job_is_final(job) ? job->updated_ms : 0;
    if (state != MG_STATE_FAILED) {
        g_clear_pointer(&job->error_code, g_free);
        g_clear_pointer(&job->error_message, g_free);
    }
    if (!job->mg)
        return;
    if (job->emit_source) {
        g_source_remove(job->emit_source);
        job->emit_source = 0;
    }
    job_emit(job);
    if (state != MG_STATE_QUEUED && state != MG_STATE_RUNNING)
        answer_waiters(job);
    if (mg_job_is_final(job))
        job_end_streams(job);
}

void mg_job_fail(mg_job *job, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    /* Set before the state so the state's line carries the message. */
    g_free(job->error_code);
    g_free(job->error_message);
    job->error_code = g_strdup(code);
    job->error_message = msg;
    mg_job_set_state(job, MG_STATE_FAILED);
}

void mg_job_wait(mg_job *job, svc_call *call)
{
    if (job->state != MG_STATE_QUEUED && job->state != MG_STATE_RUNNING) {
        svc_call_reply_json(call, 200, mg_job_to_json(job));
        return;
    }
    g_ptr_array_add(job->waiters, svc_call_ref(call));
}

void mg_job_stream(mg_job *job, svc_call *call)
{
    svc_call_stream_begin(call, 200, "application/x-ndjson");
    char *line = job_line(job);
    gboolean ok = svc_call_stream_write(call, line, -1);
    g_free(line);
    if (!ok || mg_job_is_final(job) || !job->mg || job->mg->stopping) {
        svc_call_stream_end(call);
        return;
    }
    mg_stream *s = g_new0(mg_stream, 1);
    s->call = svc_call_ref(call);
    watch_ctx *w = g_new(watch_ctx, 1);
    w->job = job;
    w->call = call;
    g_ptr_array_add(job->streams, s);
    s->cancel_id = g_cancellable_connect(svc_call_cancellable(call),
                                         G_CALLBACK(on_stream_cancelled), w, g_free);
}

/* ---- the module's list --------------------------------------------------------- */

/* Forgets the oldest finished jobs of `kind` beyond MG_KEEP_FINISHED. */
static void trim_finished(svc_manage *mg, mg_job_kind kind)
{
    guint n = 0;
    for (guint i = mg->order->len; i-- > 0;) {
        mg_job *job = g_ptr_array_index(mg->order, i);
        if (job->cls->kind == kind && mg_job_is_final(job) && ++n > MG_KEEP_FINISHED)
            mg_job_forget(job);
    }
}

mg_job *mg_job_new(svc_manage *mg, const mg_job_class *cls, gpointer data)
{
    trim_finished(mg, cls->kind);
    mg_job *job = g_new0(mg_job, 1);
    job->ref_count = 1;
    job->mg = mg;
    job->cls = cls;
    job->id = g_strdup_printf("%s-%u", cls->id_prefix, ++mg->next_id);
    job->state = MG_STATE_QUEUED;
    job->created_ms = job->updated_ms = g_get_real_time() / 1000;
    job->streams = g_ptr_array_new();
    job->waiters = g_ptr_array_new();
    job->data = data;
    g_hash_table_insert(mg->jobs, job->id, job);
    g_ptr_array_add(mg->order, job);
    return job;
}

static void job_detach(mg_job *job)
{
    if (job->emit_source) {
        g_source_remove(job->emit_source);
        job->emit_source = 0;
    }
    answer_waiters(job);
    job_end_streams(job);
    job->mg = NULL;
}

void mg_job_forget(mg_job *job)
{
    svc_manage *mg = job->mg;
    if (!mg)
        return;
    mg_job_ref(job);
    job_detach(job);
    g_ptr_array_remove(mg->order, job);
    g_hash_table_remove(mg->jobs, job->id);
    mg_job_unref(job);
}

mg_job *mg_job_lookup(svc_manage *mg, mg_job_kind kind, const char *id)
{
    mg_job *job = g_hash_table_lookup(mg->jobs, id);
    return job && job->cls->kind == kind ? job : NULL;
}

mg_job *mg_job_find_active(svc_manage *mg, mg_job_kind kind,
                           gboolean (*match)(mg_job *job, gpointer data), gpointer data)
{
    for (guint i = 0; i < mg->order->len; i++) {
        mg_job *job = g_ptr_array_index(mg->order, i);
        if (job->cls->kind == kind && mg_job_is_active(job) && match(job, data))
            return job;
    }
    return NULL;
}

guint mg_jobs_count_active(svc_manage *mg, mg_job_kind kind)
{
    guint n = 0;
    for (guint i = 0; i < mg->order->len; i++) {
        mg_job *job = g_ptr_array_index(mg->order, i);
        n += job->cls->kind == kind && mg_job_is_active(job);
    }
    return n;
}

/* ---- routes ------------------------------------------------------------------ */

static const char *collection_of(mg_job_kind kind)
{
    static const char *const names[] = {"downloads", "imports", "verifications"};
    return names[kind];
}

static const char *singular_of(mg_job_kind kind)
{
    static const char *const names[] = {"download", "import", "verification"};
    return names[kind];
}

void mg_jobs_route_list(svc_call *call, mg_job_kind kind)
{
    svc_manage *mg = mg_of(call);
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, collection_of(kind));
    json_builder_begin_array(b);
    for (guint i = 0; i < mg->order->len; i++) {
        mg_job *job = g_ptr_array_index(mg->order, i);
        if (job->cls->kind == kind)
            json_builder_add_value(b, mg_job_to_json(job));
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    mg_reply_builder(call, 200, b);
    g_object_unref(b);
}

mg_job *mg_jobs_from_path(svc_call *call, mg_job_kind kind, const char *suffix)
{
    char *prefix = g_strconcat(MG_PREFIX, collection_of(kind), "/", NULL);
    char *id = mg_path_part(call, prefix, suffix);
    g_free(prefix);
    mg_job *job = id && *id && !strchr(id, '/') ? mg_job_lookup(mg_of(call), kind, id) : NULL;
    if (!job)
        svc_call_reply_error(call, 404, "invalid_request_error", "id", "not_found",
                             "there is no %s '%s'", singular_of(kind), id && *id ? id : "");
    g_free(id);
    return job;
}

void mg_jobs_route_get(svc_call *call, mg_job_kind kind)
{
    if (g_str_has_suffix(svc_call_path(call), "/events")) {
        mg_job *job = mg_jobs_from_path(call, kind, "/events");
        if (job)
            mg_job_stream(job, call);
        return;
    }
    mg_job *job = mg_jobs_from_path(call, kind, NULL);
    if (job)
        svc_call_reply_json(call, 200, mg_job_to_json(job));
}

/* ---- stopping ------------------------------------------------------------------ */

static gboolean any_busy(svc_manage *mg)
{
    for (guint i = 0; i < mg->order->len; i++) {
        mg_job *job = g_ptr_array_index(mg->order, i);
        if (job->cls->stop && job->cls->busy && job->cls->busy(job))
            return TRUE;
    }
    return FALSE;
}

void mg_jobs_stop(svc_manage *mg, gint64 wait_ms)
{
    for (guint i = 0; i < mg->order->len; i++) {
        mg_job *job = g_ptr_array_index(mg->order, i);
        if (job->cls->stop)
            job->cls->stop(job);
    }
    gint64 deadline = g_get_monotonic_time() + wait_ms * 1000;
    GMainContext *ctx = g_main_context_default();
    while (any_busy(mg) && g_get_monotonic_time() < deadline)
        if (!g_main_context_iteration(ctx, FALSE))
            g_usleep(2000);
    for (guint i = 0; i < mg->order->len; i++) {
        mg_job *job = g_ptr_array_index(mg->order, i);
        if (job->emit_source) {
            g_source_remove(job->emit_source);
            job->emit_source = 0;
        }
        job_emit(job);
        answer_waiters(job);
        job_end_streams(job);
    }
}

void mg_jobs_free(svc_manage *mg)
{
    for (guint i = 0; i < mg->order->len; i++)
        job_detach(g_ptr_array_index(mg->order, i));
    g_ptr_array_unref(mg->order);
    g_hash_table_destroy(mg->jobs);
}

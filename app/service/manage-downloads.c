/*
 * manage-downloads.c — model downloads through the Management API:
 *
 *   POST   /moedesk/v1/downloads            {"source": "org/repo[:QUANT|:FILE]"}
 *   GET    /moedesk/v1/downloads            every download this service knows
 *   GET    /moedesk/v1/downloads/{id}       one
 *   GET    /moedesk/v1/downloads/{id}/events  NDJSON progress until it ends
 *   POST   /moedesk/v1/downloads/{id}/pause   answers once it has stopped
 *   POST   /moedesk/v1/downloads/{id}/resume
 *   DELETE /moedesk/v1/downloads/{id}[?discard=1]
 *
 * A download is `moedesk-cli pull SOURCE` run on the service's main loop:
 * the same moe_pull_async (resolve, list, choose files, manifest, disk
 * check, parallel verified downloads) on one MoeDownloadManager shared by
 * every download of this service. The download manager has no pause of
 * its own; it has something as good: cancelling keeps each file's `.part`
 * (and its sidecar), and pulling the same source again resumes every part
 * with an HTTP Range request after re-hashing what is there. So pause =
 * cancel the pull, resume = start the pull again; a failed download (a
 * network outage past the retries, a full disk) resumes the same way.
 * Cancelling (DELETE) stops it too and forgets it; with ?discard=1 its
 * partial files go, and so does the model's folder if this download
 * created it and it never completed.
 *
 * Downloads are not remembered across restarts of the service: POST the
 * same source again and the partial files are picked up.
 */
#include "manage-private.h"

#include <catalog-lookup.h>
#include <glib/gstdio.h>
#include <hub.h>
#include <library.h>
#include <partfile.h>
#include <pull.h>
#include <string.h>

#define MG_DOWNLOAD_JOBS 4 /* files transferred at once, as `pull --jobs` */

typedef enum { STOP_NONE, STOP_PAUSE, STOP_CANCEL } stop_request;

typedef struct dl_file {
    char *dest;
    char *path;             /* inside the model folder, from the label   */
    MoeDownloadState state;
    guint64 done, total, received;
    double rate;
    guint attempt;
    char *last_error;
} dl_file;

typedef struct mg_download {
    char *source;
    char *model;            /* the installed name, once resolved         */
    const char *phase;      /* static: resolving, listing, downloading, done */
    guint n_files, n_done;
    guint64 done, total;
    double rate;
    gint64 eta_s;
    char *note;
    GPtrArray *files;       /* dl_file*, in the order first seen          */
    GCancellable *cancel;   /* the running pull's                         */
    gboolean in_flight;     /* a pull is running                           */
    stop_request stop;
    gboolean restart;       /* resume asked while a pause was settling   */
    gboolean discard;
    gboolean forget;        /* DELETE: forget the job once it stopped    */
    gboolean dir_checked, dir_existed; /* did the model folder exist before? */
    guint runs;
    char *revision;         /* of the completed pull                     */
    guint64 result_bytes;
    guint result_files;
} mg_download;

static const char *const file_states[] = {
    [MOE_DOWNLOAD_QUEUED] = "queued",     [MOE_DOWNLOAD_WAITING_LOCK] = "waiting_lock",
    [MOE_DOWNLOAD_CHECKING] = "checking", [MOE_DOWNLOAD_RUNNING] = "running",
    [MOE_DOWNLOAD_RETRY_WAIT] = "retry_wait", [MOE_DOWNLOAD_FINISHING] = "finishing",
    [MOE_DOWNLOAD_DONE] = "done",
};

static void dl_file_free(dl_file *f)
{
    g_free(f->dest);
    g_free(f->path);
    g_free(f->last_error);
    g_free(f);
}

static void download_free(gpointer data)
{
    mg_download *d = data;
    g_free(d->source);
    g_free(d->model);
    g_free(d->note);
    g_ptr_array_unref(d->files);
    g_clear_object(&d->cancel);
    g_free(d->revision);
    g_free(d);
}

const char *mg_download_model(mg_job *job)
{
    return ((mg_download *)job->data)->model;
}

static void download_describe(mg_job *job, JsonBuilder *b)
{
    mg_download *d = job->data;
    mg_add_str(b, "source", d->source);
    mg_add_str(b, "model", d->model);
    mg_add_str(b, "phase", d->phase);
    mg_add_int(b, "files_total", d->n_files);
    mg_add_int(b, "files_done", d->n_done);
    mg_add_u64(b, "bytes_done", d->done);
    mg_add_u64(b, "bytes_total", d->total);
    mg_add_double(b, "rate_bytes_per_s", job->state == MG_STATE_RUNNING ? d->rate : 0);
    json_builder_set_member_name(b, "eta_s");
    if (job->state == MG_STATE_RUNNING && d->eta_s >= 0)
        json_builder_add_int_value(b, d->eta_s);
    else
        json_builder_add_null_value(b);
    mg_add_str(b, "note", d->note);
    json_builder_set_member_name(b, "files");
    json_builder_begin_array(b);
    for (guint i = 0; i < d->files->len; i++) {
        dl_file *f = g_ptr_array_index(d->files, i);
        json_builder_begin_object(b);
        mg_add_str(b, "path", f->path);
        mg_add_str(b, "state", file_states[f->state]);
        mg_add_u64(b, "bytes_done", f->done);
        json_builder_set_member_name(b, "bytes_total");
        if (f->total == MOE_SIZE_UNKNOWN)
            json_builder_add_null_value(b);
        else
            json_builder_add_int_value(b, (gint64)f->total);
        mg_add_u64(b, "bytes_received", f->received);
        mg_add_int(b, "attempt", f->attempt);
        mg_add_str(b, "last_error", f->last_error);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "result");
    if (job->state == MG_STATE_COMPLETED) {
        json_builder_begin_object(b);
        mg_add_str(b, "model", d->model);
        mg_add_str(b, "revision", d->revision);
        mg_add_int(b, "files", d->result_files);
        mg_add_u64(b, "bytes", d->result_bytes);
        json_builder_end_object(b);
    } else {
        json_builder_add_null_value(b);
    }
}

static void download_stop(mg_job *job);

static gboolean download_busy(mg_job *job)
{
    return ((mg_download *)job->data)->in_flight;
}

static const mg_job_class download_class = {
    .kind = MG_JOB_DOWNLOAD,
    .name = "download",
    .id_prefix = "dl",
    .describe = download_describe,
    .stop = download_stop,
    .busy = download_busy,
    .free_data = download_free,
};

/* ---- running a pull ------------------------------------------------------------ */

static dl_file *file_record(mg_download *d, const MoeDownloadProgress *p)
{
    for (guint i = 0; i < d->files->len; i++) {
        dl_file *f = g_ptr_array_index(d->files, i);
        if (!strcmp(f->dest, p->dest))
            return f;
    }
    dl_file *f = g_new0(dl_file, 1);
    f->dest = g_strdup(p->dest);
    /* pull.c labels files "org/repo: path/in/repo" */
    const char *sep = p->label ? strstr(p->label, ": ") : NULL;
    f->path = g_strdup(sep ? sep + 2 : p->label ? p->label : p->dest);
    g_ptr_array_add(d->files, f);
    return f;
}

static void on_pull_progress(const MoePullProgress *p, gpointer data)
{
    mg_job *job = data;
    mg_download *d = job->data;
    d->phase = p->phase;
    if (p->name && g_strcmp0(d->model, p->name)) {
        g_free(d->model);
        d->model = g_strdup(p->name);
    }
    /* Before the listing comes back nothing is written: whether the model
     * folder exists now tells whether this download made it. */
    if (!d->dir_checked && d->model && !g_strcmp0(p->phase, "listing")) {
        char *dir = moe_library_model_dir(d->model, NULL);
        d->dir_existed = dir && g_file_test(dir, G_FILE_TEST_IS_DIR);
        d->dir_checked = TRUE;
        g_free(dir);
    }
    if (p->n_files) {
        d->n_files = p->n_files;
        d->n_done = p->n_done;
        d->done = p->done;
        d->total = p->total;
        d->rate = p->rate;
        d->eta_s = p->eta_s;
    }
    if (p->note) {
        g_free(d->note);
        d->note = g_strdup(p->note);
    }
    if (p->file) {
        dl_file *f = file_record(d, p->file);
        f->state = p->file->state;
        f->done = p->file->done;
        f->total = p->file->total;
        f->received = p->file->received;
        f->rate = p->file->rate;
        f->attempt = p->file->attempt;
        if (p->file->last_error && g_strcmp0(f->last_error, p->file->last_error)) {
            g_free(f->last_error);
            f->last_error = g_strdup(p->file->last_error);
        }
    }
    mg_job_changed(job);
}

/* Removes the partial files of this download (and the model folder when
 * this download made it and it never completed). */
static void discard_parts(mg_download *d)
{
    for (guint i = 0; i < d->files->len; i++) {
        dl_file *f = g_ptr_array_index(d->files, i);
        if (f->state == MOE_DOWNLOAD_DONE && g_file_test(f->dest, G_FILE_TEST_EXISTS))
            continue;
        char *part = moe_download_part_path(f->dest);
        char *sidecar = moe_download_sidecar_path(f->dest);
        g_unlink(part);
        g_unlink(sidecar);
        g_free(part);
        g_free(sidecar);
    }
    if (d->model && d->dir_checked && !d->dir_existed) {
        MoeManifest *m = moe_manifest_load_model(d->model, NULL);
        if (!m || g_strcmp0(m->state, "complete")) {
            GError *e = NULL;
            if (!moe_library_remove(d->model, &e) &&
                !g_error_matches(e, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND))
                g_warning("discarding the download of %s: %s", d->model, e->message);
            g_clear_error(&e);
        }
        moe_manifest_free(m);
    }
}

static void download_start(mg_job *job);

static void on_pulled(GObject *source, GAsyncResult *res, gpointer data)
{
    (void)source;
    mg_job *job = data;
    mg_download *d = job->data;
    GError *e = NULL;
    MoeManifest *m = moe_pull_finish(res, &e);
    d->in_flight = FALSE;
    g_clear_object(&d->cancel);
    if (!job->mg) {
        /* The service is gone; nothing to tell anyone. */
    } else if (m) {
        g_free(d->model);
        d->model = g_strdup(m->name);
        d->revision = g_strdup(m->revision);
        d->result_files = m->files->len;
        d->result_bytes = moe_manifest_total_bytes(m);
        d->phase = "done";
        mg_job_set_state(job, MG_STATE_COMPLETED);
    } else if (g_error_matches(e, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
        if (d->stop == STOP_CANCEL) {
            if (d->discard)
                discard_parts(d);
            mg_job_set_state(job, MG_STATE_CANCELLED);
        } else {
            mg_job_set_state(job, MG_STATE_PAUSED);
        }
    } else {
        mg_job_fail(job, mg_library_error_code(e), "%s", e->message);
    }
    if (job->mg && d->forget)
        mg_job_forget(job);
    else if (job->mg && d->restart && job->state == MG_STATE_PAUSED && !job->mg->stopping)
        download_start(job);
    d->restart = FALSE;
    g_clear_error(&e);
    moe_manifest_free(m);
    mg_job_unref(job);
}

static void download_start(mg_job *job)
{
    mg_download *d = job->data;
    svc_manage *mg = job->mg;
    if (!mg->downloads)
        mg->downloads = moe_download_manager_new(NULL, MG_DOWNLOAD_JOBS);
    d->cancel = g_cancellable_new();
    d->stop = STOP_NONE;
    d->in_flight = TRUE;
    d->runs++;
    d->rate = 0;
    d->eta_s = -1;
    mg_job_set_state(job, MG_STATE_RUNNING);
    moe_pull_async(mg->downloads, d->source, 0, on_pull_progress, job, d->cancel, on_pulled,
                   mg_job_ref(job));
}

static void download_stop(mg_job *job)
{
    mg_download *d = job->data;
    if (d->in_flight) {
        if (d->stop == STOP_NONE)
            d->stop = STOP_PAUSE;
        d->restart = FALSE;
        g_cancellable_cancel(d->cancel);
    }
}

/* ---- routes ------------------------------------------------------------------ */

/* What `pull` would accept, checked before a job is made so a bad source
 * is a 400/404 answer, not a failed job. */
static gboolean check_source(svc_call *call, const char *source)
{
    GError *e = NULL;
    if (moe_hub_ref_looks_like(source)) {
        MoeHubRef ref;
        gboolean ok = moe_hub_ref_parse(source, &ref, &e);
        moe_hub_ref_clear(&ref);
        if (!ok) {
            svc_call_reply_error(call, 400, "invalid_request_error", "source",
                                 "invalid_model_name", "%s", e->message);
            g_error_free(e);
        }
        return ok;
    }
    if (moe_library_check_name(source, NULL)) {
        MoeManifest *m = moe_manifest_load_model(source, NULL);
        gboolean installed = m && m->repo;
        moe_manifest_free(m);
        if (installed)
            return TRUE;
    }
    MoeCatalogHit hit;
    if (moe_catalog_lookup(source, &hit, &e)) {
        moe_catalog_hit_clear(&hit);
        return TRUE;
    }
    if (g_error_matches(e, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_CORRUPT)) {
        mg_reply_library_error(call, e, NULL);
    } else {
        svc_call_reply_error(call, 404, "invalid_request_error", "source", "not_found",
                             "unknown model '%s': it is not installed, not in the model "
                             "catalog, and not ORG/REPO", source);
    }
    g_clear_error(&e);
    return FALSE;
}

static gboolean same_source(mg_job *job, gpointer data)
{
    return !strcmp(((mg_download *)job->data)->source, data);
}

static void set_location(svc_call *call, mg_job *job)
{
    char *loc = g_strconcat(MG_PREFIX "downloads/", job->id, NULL);
    soup_message_headers_replace(soup_server_message_get_response_headers(svc_call_msg(call)),
                                 "Location", loc);
    g_free(loc);
}

static void route_create(svc_call *call)
{
    JsonObject *o = NULL;
    JsonNode *root = mg_body(call, &o);
    if (!root)
        return;
    const char *source = NULL;
    if (!mg_member_string(call, o, "source", &source))
        goto out;
    if (!source || !*source) {
        svc_call_reply_error(call, 400, "invalid_request_error", "source", "missing_parameter",
                             "name what to download: {\"source\": \"org/repo[:QUANT|:FILE]\"}, "
                             "a catalog name or an installed model's name");
        goto out;
    }
    if (!check_source(call, source))
        goto out;
    svc_manage *mg = mg_of(call);
    /* The same source twice is one download (a second pull of the same
     * files would only join the first one's transfers). */
    mg_job *job = mg_job_find_active(mg, MG_JOB_DOWNLOAD, same_source, (gpointer)source);
    if (job) {
        set_location(call, job);
        svc_call_reply_json(call, 200, mg_job_to_json(job));
        goto out;
    }
    mg_download *d = g_new0(mg_download, 1);
    d->source = g_strdup(source);
    d->phase = "resolving";
    d->eta_s = -1;
    d->files = g_ptr_array_new_with_free_func((GDestroyNotify)dl_file_free);
    job = mg_job_new(mg, &download_class, d);
    download_start(job);
    set_location(call, job);
    svc_call_reply_json(call, 202, mg_job_to_json(job));
out:
    json_node_unref(root);
}

static void route_list(svc_call *call)
{
    mg_jobs_route_list(call, MG_JOB_DOWNLOAD);
}

static void route_get(svc_call *call)
{
    mg_jobs_route_get(call, MG_JOB_DOWNLOAD);
}

static void do_pause(svc_call *call, mg_job *job)
{
    mg_download *d = job->data;
    if (d->in_flight) {
        if (d->stop == STOP_NONE)
            d->stop = STOP_PAUSE;
        d->restart = FALSE;
        g_cancellable_cancel(d->cancel);
        mg_job_wait(job, call);
    } else if (job->state == MG_STATE_PAUSED) {
        svc_call_reply_json(call, 200, mg_job_to_json(job));
    } else {
        svc_call_reply_error(call, 409, "conflict_error", NULL, "not_running",
                             "download %s is %s; only a running download can be paused", job->id,
                             mg_job_state_name(job->state));
    }
}

static void do_resume(svc_call *call, mg_job *job)
{
    mg_download *d = job->data;
    if (d->in_flight) {
        /* A pause still settling: start again as soon as it has. */
        if (d->stop == STOP_PAUSE)
            d->restart = TRUE;
    } else if (job->state == MG_STATE_PAUSED || job->state == MG_STATE_FAILED) {
        download_start(job);
    } else if (job->state != MG_STATE_RUNNING) {
        svc_call_reply_error(call, 409, "conflict_error", NULL, "not_paused",
                             "download %s is %s; only a paused or failed download can be resumed",
                             job->id, mg_job_state_name(job->state));
        return;
    }
    svc_call_reply_json(call, 200, mg_job_to_json(job));
}

static void route_action(svc_call *call)
{
    mg_job *job;
    if (g_str_has_suffix(svc_call_path(call), "/pause")) {
        if ((job = mg_jobs_from_path(call, MG_JOB_DOWNLOAD, "/pause")))
            do_pause(call, job);
    } else if (g_str_has_suffix(svc_call_path(call), "/resume")) {
        if ((job = mg_jobs_from_path(call, MG_JOB_DOWNLOAD, "/resume")))
            do_resume(call, job);
    } else {
        svc_call_reply_error(call, 404, "invalid_request_error", NULL, "not_found",
                             "there is no endpoint POST %s (a download's actions are "
                             "/pause and /resume)", svc_call_path(call));
    }
}

static void route_delete(svc_call *call)
{
    mg_job *job = mg_jobs_from_path(call, MG_JOB_DOWNLOAD, NULL);
    if (!job)
        return;
    mg_download *d = job->data;
    gboolean discard = mg_query_flag(call, "discard");
    if (d->in_flight) {
        d->stop = STOP_CANCEL;
        d->discard = d->discard || discard;
        d->forget = TRUE;
        d->restart = FALSE;
        g_cancellable_cancel(d->cancel);
        mg_job_wait(job, call);
        return;
    }
    if (mg_job_is_active(job) || job->state == MG_STATE_FAILED) {
        if (discard)
            discard_parts(d);
        mg_job_set_state(job, MG_STATE_CANCELLED);
    }
    svc_call_reply_json(call, 200, mg_job_to_json(job));
    mg_job_forget(job);
}

void mg_downloads_register(svc_server *srv)
{
    svc_server_add_route(srv, "POST", MG_PREFIX "downloads", 0, SVC_STYLE_OPENAI, route_create);
    svc_server_add_route(srv, "GET", MG_PREFIX "downloads", 0, SVC_STYLE_OPENAI, route_list);
    svc_server_add_route(srv, "GET", MG_PREFIX "downloads/", SVC_ROUTE_PREFIX, SVC_STYLE_OPENAI,
                         route_get);
    svc_server_add_route(srv, "POST", MG_PREFIX "downloads/", SVC_ROUTE_PREFIX, SVC_STYLE_OPENAI,
                         route_action);
    svc_server_add_route(srv, "DELETE", MG_PREFIX "downloads/", SVC_ROUTE_PREFIX,
                         SVC_STYLE_OPENAI, route_delete);
}

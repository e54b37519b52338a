/*
 * manage-models.c — installed models through the Management API:
 *
 *   GET    /moedesk/v1/models               installed models, and the loaded one
 *   GET    /moedesk/v1/models/{name}        one installed model
 *   DELETE /moedesk/v1/models/{name}[?force=1]
 *   POST   /moedesk/v1/models/{name}/verify[?wait=1]
 *   POST   /moedesk/v1/models/{name}/load   {"ctx", "parallel", "quant", "force"}
 *   POST   /moedesk/v1/unload
 *   GET    /moedesk/v1/verifications[/{id}[/events]], DELETE .../{id}
 *
 * Names in paths are `NAME` or `ORG/NAME` and pass moe_library_check_name
 * before anything becomes a path (libsoup already refuses encoded dot
 * segments); nothing here can reach outside the models folder.
 *
 * Deleting the loaded model is refused (409) unless ?force=1, which
 * unloads it first (running requests finish on the mapped file). A model
 * being downloaded or imported cannot be deleted or verified (409).
 *
 * Verification is moe_verify_async (sizes, hashes, GGUF/safetensors
 * structure) as a job, so a 60 GB model does not hold a request open;
 * ?wait=1 answers when it is done. Success records the verified time in
 * the manifest, as `moedesk-cli verify` does.
 *
 * Loading is planned first (manage-plan.c): the planner's view of the
 * chosen file at the requested context on this machine; a model that does
 * not fit in memory is refused (409) unless "force" is true.
 */
#include "manage-plan.h"

#include <library.h>
#include <pull.h>
#include <string.h>
#include <verify.h>

#define MODELS_PATH MG_PREFIX "models/"
#define MG_MAX_KV_CELLS (1 << 24) /* the planner's largest context */

/* ---- installed models as JSON ------------------------------------------------ */

static gboolean path_inside(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return path && !strncmp(path, dir, n) && G_IS_DIR_SEPARATOR(path[n]);
}

/* TRUE if the loaded model was loaded from this model's folder. */
static gboolean is_loaded(svc_server *srv, const char *name)
{
    svc_model *cur = svc_server_current_model(srv);
    if (!cur)
        return FALSE;
    char *dir = moe_library_model_dir(name, NULL);
    gboolean in = dir && path_inside(cur->path, dir);
    g_free(dir);
    return in;
}

static void add_model(JsonBuilder *b, svc_server *srv, MoeManifest *m)
{
    json_builder_begin_object(b);
    mg_add_str(b, "name", m->name);
    mg_add_str(b, "source", m->source);
    mg_add_str(b, "endpoint", m->endpoint);
    mg_add_str(b, "repo", m->repo);
    mg_add_str(b, "revision", m->revision);
    mg_add_str(b, "quant", m->quant);
    mg_add_str(b, "state", m->state);
    mg_add_time_s(b, "created", m->created);
    mg_add_time_s(b, "verified", m->verified);
    mg_add_u64(b, "size_bytes", moe_manifest_total_bytes(m));
    mg_add_bool(b, "loaded", is_loaded(srv, m->name));
    json_builder_set_member_name(b, "ggufs");
    json_builder_begin_array(b);
    GPtrArray *groups = mg_plan_groups(m);
    for (guint i = 0; i < groups->len; i++) {
        MoeQuantGroup *g = g_ptr_array_index(groups, i);
        json_builder_begin_object(b);
        mg_add_str(b, "quant", g->quant);
        mg_add_str(b, "path", ((MoeManifestFile *)g_ptr_array_index(g->files, 0))->path);
        mg_add_int(b, "n_files", g->files->len);
        mg_add_u64(b, "size_bytes", g->bytes);
        json_builder_end_object(b);
    }
    g_ptr_array_unref(groups);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "files");
    json_builder_begin_array(b);
    for (guint i = 0; i < m->files->len; i++) {
        MoeManifestFile *f = g_ptr_array_index(m->files, i);
        json_builder_begin_object(b);
        mg_add_str(b, "path", f->path);
        mg_add_u64(b, "size_bytes", f->size);
        mg_add_str(b, "sha256", f->sha256);
        mg_add_str(b, "git_sha1", f->git_sha1);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
}

static void add_loaded(JsonBuilder *b, svc_server *srv)
{
    svc_model *cur = svc_server_current_model(srv);
    json_builder_set_member_name(b, "loaded");
    if (!cur) {
        json_builder_add_null_value(b);
        return;
    }
    svc_sched_stats st;
    svc_sched_get_stats(cur->sched, &st);
    json_builder_begin_object(b);
    mg_add_str(b, "name", cur->name);
    mg_add_str(b, "path", cur->path);
    mg_add_str(b, "quant", cur->quant);
    mg_add_str(b, "backend", cur->backend);
    mg_add_str(b, "architecture", moe_model_arch(cur->model));
    mg_add_int(b, "n_ctx_per_seq", cur->n_ctx_per_seq);
    mg_add_int(b, "n_parallel", st.n_parallel);
    mg_add_time_ms(b, "loaded", cur->loaded_us / 1000);
    json_builder_end_object(b);
}

static void route_list(svc_call *call)
{
    svc_server *srv = svc_call_server(call);
    GPtrArray *bad = g_ptr_array_new_with_free_func(g_free);
    GPtrArray *all = moe_manifest_list_installed(bad);
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "models");
    json_builder_begin_array(b);
    for (guint i = 0; i < all->len; i++)
        add_model(b, srv, g_ptr_array_index(all, i));
    json_builder_end_array(b);
    add_loaded(b, srv);
    json_builder_set_member_name(b, "problems");
    json_builder_begin_array(b);
    for (guint i = 0; i < bad->len; i++)
        json_builder_add_string_value(b, g_ptr_array_index(bad, i));
    json_builder_end_array(b);
    json_builder_end_object(b);
    mg_reply_builder(call, 200, b);
    g_object_unref(b);
    g_ptr_array_unref(all);
    g_ptr_array_unref(bad);
}

/* The installed model named in the path, or NULL after answering. */
static MoeManifest *path_manifest(svc_call *call, const char *suffix, char **name_out)
{
    char *name = mg_path_model(call, MODELS_PATH, suffix);
    if (!name)
        return NULL;
    GError *e = NULL;
    MoeManifest *m = moe_manifest_load_model(name, &e);
    if (!m) {
        mg_reply_library_error(call, e, "name");
        g_error_free(e);
        g_free(name);
        return NULL;
    }
    if (name_out)
        *name_out = name;
    else
        g_free(name);
    return m;
}

static void route_get(svc_call *call)
{
    MoeManifest *m = path_manifest(call, NULL, NULL);
    if (!m)
        return;
    JsonBuilder *b = json_builder_new();
    add_model(b, svc_call_server(call), m);
    mg_reply_builder(call, 200, b);
    g_object_unref(b);
    moe_manifest_free(m);
}

/* ---- delete -------------------------------------------------------------------- */

static gboolean job_writes_model(mg_job *job, gpointer name)
{
    const char *model = job->cls->kind == MG_JOB_DOWNLOAD ? mg_download_model(job)
                                                          : mg_import_model(job);
    return model && !strcmp(model, name);
}

gboolean mg_model_busy(svc_manage *mg, const char *name)
{
    return mg_job_find_active(mg, MG_JOB_DOWNLOAD, job_writes_model, (gpointer)name) ||
           mg_job_find_active(mg, MG_JOB_IMPORT, job_writes_model, (gpointer)name);
}

static void reply_busy(svc_call *call, const char *name)
{
    svc_call_reply_error(call, 409, "conflict_error", "name", "model_busy",
                         "%s is being downloaded or imported by this service; cancel that "
                         "first (DELETE /moedesk/v1/downloads/{id})", name);
}

static void route_delete(svc_call *call)
{
    svc_server *srv = svc_call_server(call);
    char *name = mg_path_model(call, MODELS_PATH, NULL);
    if (!name)
        return;
    char *dir = moe_library_model_dir(name, NULL);
    if (!dir || !g_file_test(dir, G_FILE_TEST_IS_DIR)) {
        svc_call_reply_error(call, 404, "invalid_request_error", "name", "not_found",
                             "no installed model called '%s'", name);
        goto out;
    }
    if (mg_model_busy(mg_of(call), name)) {
        reply_busy(call, name);
        goto out;
    }
    gboolean unloaded = FALSE;
    if (is_loaded(srv, name)) {
        if (!mg_query_flag(call, "force")) {
            svc_call_reply_error(call, 409, "conflict_error", "name", "model_loaded",
                                 "%s is the loaded model; unload it first or add ?force=1",
                                 name);
            goto out;
        }
        svc_server_unload_model(srv);
        unloaded = TRUE;
    }
    MoeManifest *m = moe_manifest_load_model(name, NULL);
    guint64 bytes = m ? moe_manifest_total_bytes(m) : 0;
    moe_manifest_free(m);
    GError *e = NULL;
    if (!moe_library_remove(name, &e)) {
        mg_reply_library_error(call, e, "name");
        g_error_free(e);
        goto out;
    }
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    mg_add_str(b, "deleted", name);
    mg_add_u64(b, "bytes_freed", bytes);
    mg_add_bool(b, "unloaded", unloaded);
    json_builder_end_object(b);
    mg_reply_builder(call, 200, b);
    g_object_unref(b);
out:
    g_free(dir);
    g_free(name);
}

/* ---- verify ---------------------------------------------------------------------- */

typedef struct mg_verify {
    char *model;
    MoeManifest *manifest;
    GCancellable *cancel;
    gboolean in_flight;
    gboolean forget;    /* DELETE: forget once it has stopped */
    guint64 done, total;
    guint n_done, n_files;
    GPtrArray *results; /* MoeVerifyResult*, when done */
} mg_verify;

static void verify_free(gpointer data)
{
    mg_verify *v = data;
    g_free(v->model);
    moe_manifest_free(v->manifest);
    g_clear_object(&v->cancel);
    if (v->results)
        g_ptr_array_unref(v->results);
    g_free(v);
}

static void verify_describe(mg_job *job, JsonBuilder *b)
{
    mg_verify *v = job->data;
    mg_add_str(b, "model", v->model);
    mg_add_int(b, "files_total", v->n_files);
    mg_add_int(b, "files_done", v->n_done);
    mg_add_u64(b, "bytes_done", v->done);
    mg_add_u64(b, "bytes_total", v->total);
    guint bad = 0;
    for (guint i = 0; v->results && i < v->results->len; i++)
        bad += ((MoeVerifyResult *)g_ptr_array_index(v->results, i))->status != MOE_VERIFY_OK;
    json_builder_set_member_name(b, "ok");
    if (v->results)
        json_builder_add_boolean_value(b, bad == 0);
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "results");
    if (!v->results) {
        json_builder_add_null_value(b);
        return;
    }
    json_builder_begin_array(b);
    for (guint i = 0; i < v->results->len; i++) {
        MoeVerifyResult *r = g_ptr_array_index(v->results, i);
        json_builder_begin_object(b);
        mg_add_str(b, "path", r->path);
        mg_add_str(b, "status", moe_verify_status_name(r->status));
        mg_add_str(b, "detail", r->detail);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

static void verify_stop(mg_job *job)
{
    mg_verify *v = job->data;
    if (v->in_flight)
        g_cancellable_cancel(v->cancel);
}

static gboolean verify_busy(mg_job *job)
{
    return ((mg_verify *)job->data)->in_flight;
}

static const mg_job_class verify_class = {
    .kind = MG_JOB_VERIFY,
    .name = "verification",
    .id_prefix = "ver",
    .describe = verify_describe,
    .stop = verify_stop,
    .busy = verify_busy,
    .free_data = verify_free,
};

static void on_verify_progress(guint64 done, guint64 total, guint n_done, guint n_files,
                               gpointer data)
{
    mg_job *job = data;
    mg_verify *v = job->data;
    v->done = done;
    v->total = total;
    v->n_done = n_done;
    v->n_files = n_files;
    mg_job_changed(job);
}

static void on_verified(GObject *source, GAsyncResult *res, gpointer data)
{
    (void)source;
    mg_job *job = data;
    mg_verify *v = job->data;
    GError *e = NULL;
    v->results = moe_verify_finish(res, &e);
    v->in_flight = FALSE;
    if (!job->mg) {
        /* the service is gone */
    } else if (!v->results) {
        if (g_error_matches(e, G_IO_ERROR, G_IO_ERROR_CANCELLED))
            mg_job_set_state(job, MG_STATE_CANCELLED);
        else
            mg_job_fail(job, mg_library_error_code(e), "%s", e->message);
    } else {
        guint bad = 0;
        for (guint i = 0; i < v->results->len; i++)
            bad += ((MoeVerifyResult *)g_ptr_array_index(v->results, i))->status != MOE_VERIFY_OK;
        v->n_files = v->n_done = v->results->len;
        if (bad) {
            mg_job_fail(job, "verify_failed", "%s: %u of %u files not OK", v->model, bad,
                        v->results->len);
        } else {
            /* As `moedesk-cli verify`: a clean check is recorded. */
            GError *se = NULL;
            MoeManifest *m = moe_manifest_load_model(v->model, NULL);
            if (m) {
                m->verified = g_get_real_time() / G_USEC_PER_SEC;
                g_free(m->state);
                m->state = g_strdup("complete");
                if (!moe_manifest_save_model(m, &se))
                    g_warning("verify %s: %s", v->model, se->message);
                g_clear_error(&se);
                moe_manifest_free(m);
            }
            mg_job_set_state(job, MG_STATE_COMPLETED);
        }
    }
    if (job->mg && v->forget)
        mg_job_forget(job);
    g_clear_error(&e);
    mg_job_unref(job);
}

static void do_verify(svc_call *call)
{
    char *name = NULL;
    MoeManifest *m = path_manifest(call, "/verify", &name);
    if (!m)
        return;
    svc_manage *mg = mg_of(call);
    if (mg_model_busy(mg, name)) {
        reply_busy(call, name);
        moe_manifest_free(m);
        g_free(name);
        return;
    }
    mg_verify *v = g_new0(mg_verify, 1);
    v->model = name;
    v->manifest = m;
    v->cancel = g_cancellable_new();
    v->in_flight = TRUE;
    v->n_files = m->files->len;
    v->total = moe_manifest_total_bytes(m);
    mg_job *job = mg_job_new(mg, &verify_class, v);
    char *dir = moe_library_model_dir(name, NULL);
    mg_job_set_state(job, MG_STATE_RUNNING);
    moe_verify_async(m, dir, 0, on_verify_progress, job, v->cancel, on_verified, mg_job_ref(job));
    g_free(dir);
    char *loc = g_strconcat(MG_PREFIX "verifications/", job->id, NULL);
    soup_message_headers_replace(soup_server_message_get_response_headers(svc_call_msg(call)),
                                 "Location", loc);
    g_free(loc);
    if (mg_query_flag(call, "wait"))
        mg_job_wait(job, call);
    else
        svc_call_reply_json(call, 202, mg_job_to_json(job));
}

static void route_verifications_list(svc_call *call)
{
    mg_jobs_route_list(call, MG_JOB_VERIFY);
}

static void route_verifications_get(svc_call *call)
{
    mg_jobs_route_get(call, MG_JOB_VERIFY);
}

/* DELETE /moedesk/v1/verifications/{id}: cancels a running verification
 * (answering once it has stopped) and forgets it. */
static void route_verifications_delete(svc_call *call)
{
    mg_job *job = mg_jobs_from_path(call, MG_JOB_VERIFY, NULL);
    if (!job)
        return;
    mg_verify *v = job->data;
    if (v->in_flight) {
        g_cancellable_cancel(v->cancel);
        mg_job_wait(job, call);
        v->forget = TRUE;
        return;
    }
    svc_call_reply_json(call, 200, mg_job_to_json(job));
    mg_job_forget(job);
}

/* ---- load / unload --------------------------------------------------------------- */

static void do_load(svc_call *call)
{
    svc_server *srv = svc_call_server(call);
    char *name = mg_path_model(call, MODELS_PATH, "/load");
    if (!name)
        return;
    JsonObject *o = NULL;
    JsonNode *root = mg_body(call, &o);
    gint64 ctx = 0, parallel = 0;
    gboolean force = FALSE;
    const char *quant = NULL;
    mg_load_plan lp = {0};
    if (!root || !mg_member_int(call, o, "ctx", 0, 1 << 24, &ctx) ||
        !mg_member_int(call, o, "parallel", 0, 64, &parallel) ||
        !mg_member_string(call, o, "quant", &quant) || !mg_member_bool(call, o, "force", &force))
        goto out;
    int32_t def_par = 0, def_ctx = 0;
    svc_server_model_defaults(srv, &def_par, &def_ctx);
    gint64 cells = (ctx ? ctx : def_ctx ? def_ctx : 4096) * (parallel ? parallel : def_par);
    if (cells > MG_MAX_KV_CELLS) {
        svc_call_reply_error(call, 400, "invalid_request_error", "ctx", "invalid_value",
                             "ctx x parallel is %" G_GINT64_FORMAT " KV cells; at most %d",
                             cells, MG_MAX_KV_CELLS);
        goto out;
    }
    if (!mg_plan_load(call, name, quant, (int32_t)ctx, (int32_t)parallel, &lp))
        goto out;
    if (!lp.fits && !force) {
        svc_call_reply_error(call, 409, "conflict_error", NULL, "does_not_fit",
                             "%s (%s) does not fit in this machine's memory at %d x %d tokens: %s; "
                             "load a smaller quantisation or context, or send \"force\": true",
                             name, lp.quant ? lp.quant : "?", lp.n_parallel, lp.n_ctx,
                             lp.reason);
        goto out;
    }
    GError *e = NULL;
    svc_model *m = svc_server_load_model(srv, name, lp.path, lp.n_ctx, lp.n_parallel, &e);
    if (!m) {
        svc_call_reply_error(call, 500, "server_error", NULL, "model_load_failed", "%s",
                             e->message);
        g_error_free(e);
        goto out;
    }
    svc_model_unref(m);
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    add_loaded(b, srv);
    mg_plan_add_json(b, &lp);
    json_builder_end_object(b);
    mg_reply_builder(call, 200, b);
    g_object_unref(b);
out:
    mg_load_plan_clear(&lp);
    if (root)
        json_node_unref(root);
    g_free(name);
}

static void route_unload(svc_call *call)
{
    svc_server *srv = svc_call_server(call);
    svc_model *cur = svc_server_current_model(srv);
    char *name = cur ? g_strdup(cur->name) : NULL;
    svc_server_unload_model(srv);
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    mg_add_str(b, "unloaded", name);
    json_builder_end_object(b);
    mg_reply_builder(call, 200, b);
    g_object_unref(b);
    g_free(name);
}

static void route_post(svc_call *call)
{
    const char *path = svc_call_path(call);
    if (g_str_has_suffix(path, "/verify"))
        do_verify(call);
    else if (g_str_has_suffix(path, "/load"))
        do_load(call);
    else
        svc_call_reply_error(call, 404, "invalid_request_error", NULL, "not_found",
                             "there is no endpoint POST %s (a model's actions are /verify and "
                             "/load)", path);
}

void mg_models_register(svc_server *srv)
{
    svc_server_add_route(srv, "GET", MG_PREFIX "models", 0, SVC_STYLE_OPENAI, route_list);
    svc_server_add_route(srv, "GET", MODELS_PATH, SVC_ROUTE_PREFIX, SVC_STYLE_OPENAI, route_get);
    svc_server_add_route(srv, "DELETE", MODELS_PATH, SVC_ROUTE_PREFIX, SVC_STYLE_OPENAI,
                         route_delete);
    svc_server_add_route(srv, "POST", MODELS_PATH, SVC_ROUTE_PREFIX, SVC_STYLE_OPENAI,
                         route_post);
    svc_server_add_route(srv, "POST", MG_PREFIX "unload", 0, SVC_STYLE_OPENAI, route_unload);
    svc_server_add_route(srv, "GET", MG_PREFIX "verifications", 0, SVC_STYLE_OPENAI,
                         route_verifications_list);
    svc_server_add_route(srv, "GET", MG_PREFIX "verifications/", SVC_ROUTE_PREFIX,
                         SVC_STYLE_OPENAI, route_verifications_get);
    svc_server_add_route(srv, "DELETE", MG_PREFIX "verifications/", SVC_ROUTE_PREFIX,
                         SVC_STYLE_OPENAI, route_verifications_delete);
}

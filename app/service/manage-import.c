/*
 * manage-import.c — Hugging Face checkpoint import through the Management
 * API:
 *
 *   POST   /moedesk/v1/imports  {"model": "org/ckpt" | "dir": "/abs/folder",
 *                                "name"?: "org/out", "type"?: "q8_0"}
 *   GET    /moedesk/v1/imports[/{id}[/events]]
 *   DELETE /moedesk/v1/imports/{id}   forget a finished import
 *
 * The conversion is moedesk_import (app/library/import.h, the code behind
 * `moedesk-cli import`) on a GTask worker thread; its progress callback
 * posts to the main loop, where the job's streams are fed as for
 * downloads.
 *
 * Where things go: the source is an installed checkpoint (`model`, e.g.
 * one pulled with POST /moedesk/v1/downloads) or any folder given by
 * absolute path (`dir`; only read). The GGUF is always written into the
 * models folder, into the model `name` (default: the source model itself,
 * or the folder's name), as `<leaf>-<TYPE>.gguf`, and that model's
 * manifest lists it (size only: no hash is computed for a file made here)
 * with its type added to "quant". So the result is loadable by name and
 * appears in GET /moedesk/v1/models. Without a type the importer asks the
 * memory planner for the best one that fits this machine.
 *
 * An import cannot be cancelled once it runs (the importer has no
 * cancellation point); a stop of the service does not wait for it, and
 * the process exit leaves its partial "<leaf>.importing.gguf.tmp" in the
 * model folder (never under a name that is loaded or listed).
 */
#include "manage-private.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <import.h>
#include <library.h>
#include <manifest.h>
#include <string.h>

typedef struct mg_import {
    char *source_model;     /* installed checkpoint, or NULL              */
    char *dir;              /* the folder read                             */
    char *model;            /* the model the GGUF goes into                */
    char *leaf;             /* last part of `model`: file and general.name */
    gboolean type_given;
    moe_type type;
    char *model_dir;
    char *out_path;         /* where the importer writes                   */
    gboolean dir_created;
    gboolean in_flight;
    GMutex lock;            /* guards done, total, posted (worker thread)  */
    guint64 done, total;
    gboolean posted;        /* a progress idle is pending                  */
    moedesk_import_result result;
    gboolean have_result;
    char *result_rel;       /* the GGUF, relative to the model folder      */
} mg_import;

static void import_free(gpointer data)
{
    mg_import *im = data;
    g_free(im->source_model);
    g_free(im->dir);
    g_free(im->model);
    g_free(im->leaf);
    g_free(im->model_dir);
    g_free(im->out_path);
    g_mutex_clear(&im->lock);
    moedesk_import_result_clear(&im->result);
    g_free(im->result_rel);
    g_free(im);
}

const char *mg_import_model(mg_job *job)
{
    return ((mg_import *)job->data)->model;
}

/* The names users know: Q4_K is written as llama-quantize's Q4_K_M mix. */
static char *type_label(moe_type t)
{
    if (t == MOE_TYPE_Q4_K)
        return g_strdup("Q4_K_M");
    const char *n = moe_type_name(t);
    return g_ascii_strup(n ? n : "?", -1);
}

static void import_describe(mg_job *job, JsonBuilder *b)
{
    mg_import *im = job->data;
    mg_add_str(b, "source_model", im->source_model);
    mg_add_str(b, "dir", im->dir);
    mg_add_str(b, "model", im->model);
    char *type = im->type_given ? type_label(im->type) : NULL;
    mg_add_str(b, "type", type);
    g_free(type);
    g_mutex_lock(&im->lock);
    guint64 done = im->done, total = im->total;
    g_mutex_unlock(&im->lock);
    mg_add_u64(b, "bytes_done", done);
    mg_add_u64(b, "bytes_total", total);
    json_builder_set_member_name(b, "result");
    if (!im->have_result) {
        json_builder_add_null_value(b);
        return;
    }
    const moedesk_import_result *r = &im->result;
    char *label = type_label(r->type);
    json_builder_begin_object(b);
    mg_add_str(b, "model", im->model);
    mg_add_str(b, "path", im->result_rel);
    mg_add_str(b, "architecture", r->gguf_arch);
    mg_add_str(b, "hf_architecture", r->hf_arch);
    mg_add_str(b, "type", label);
    mg_add_str(b, "type_reason", r->type_reason);
    mg_add_int(b, "n_tensors", r->n_tensors);
    mg_add_u64(b, "n_params", r->n_params);
    mg_add_u64(b, "bytes_in", r->in_bytes);
    mg_add_u64(b, "bytes_out", r->out_bytes);
    json_builder_end_object(b);
    g_free(label);
}

static gboolean import_busy(mg_job *job)
{
    return ((mg_import *)job->data)->in_flight;
}

static const mg_job_class import_class = {
    .kind = MG_JOB_IMPORT,
    .name = "import",
    .id_prefix = "imp",
    .describe = import_describe,
    .stop = NULL, /* cannot be cancelled: not waited for either */
    .busy = import_busy,
    .free_data = import_free,
};

/* ---- the worker --------------------------------------------------------------- */

static gboolean progress_idle(gpointer data)
{
    mg_job *job = data;
    mg_import *im = job->data;
    g_mutex_lock(&im->lock);
    im->posted = FALSE;
    g_mutex_unlock(&im->lock);
    mg_job_changed(job);
    mg_job_unref(job);
    return G_SOURCE_REMOVE;
}

/* Worker thread: note the figures; one idle at a time carries them over. */
static void on_import_progress(void *user, guint64 done, guint64 total)
{
    mg_job *job = user;
    mg_import *im = job->data;
    g_mutex_lock(&im->lock);
    im->done = done;
    im->total = total;
    gboolean post = !im->posted;
    im->posted = TRUE;
    g_mutex_unlock(&im->lock);
    if (post)
        g_idle_add(progress_idle, mg_job_ref(job)); /* the task holds one: never 0 */
}

static void import_thread(GTask *task, gpointer source, gpointer data, GCancellable *c)
{
    (void)source;
    (void)c;
    mg_job *job = data;
    mg_import *im = job->data;
    moedesk_import_options opt = {0};
    opt.dir = im->dir;
    opt.out_path = im->out_path;
    opt.type_given = im->type_given;
    opt.type = im->type;
    opt.name = im->leaf;
    opt.progress = on_import_progress;
    opt.progress_user = job;
    moedesk_import_result *res = g_new0(moedesk_import_result, 1);
    GError *e = NULL;
    if (moedesk_import(&opt, res, &e)) {
        g_task_return_pointer(task, res, NULL);
    } else {
        g_free(res);
        g_task_return_error(task, e);
    }
}

static const char *import_error_code(const GError *e)
{
    if (e->domain == MOEDESK_IMPORT_ERROR) {
        switch ((moedesk_import_error_code)e->code) {
        case MOEDESK_IMPORT_ERROR_INPUT: return "invalid_checkpoint";
        case MOEDESK_IMPORT_ERROR_UNSUPPORTED: return "unsupported";
        case MOEDESK_IMPORT_ERROR_OUTPUT: return "io_error";
        }
    }
    return "import_failed";
}

/* Puts the GGUF under its final name and into the model's manifest. */
static gboolean install_result(mg_import *im, GError **error)
{
    char *label = type_label(im->result.type);
    char *file = g_strdup_printf("%s-%s.gguf", im->leaf, label);
    char *final_path = g_build_filename(im->model_dir, file, NULL);
    gboolean ok = FALSE;
    MoeManifest *m = NULL;
    if (g_rename(im->out_path, final_path) != 0) {
        int en = errno;
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_IO, "cannot rename %s to %s: %s",
                    im->out_path, final_path, g_strerror(en));
        goto out;
    }
    GError *le = NULL;
    m = moe_manifest_load_model(im->model, &le);
    if (!m && !g_error_matches(le, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND)) {
        g_propagate_error(error, le);
        goto out;
    }
    g_clear_error(&le);
    if (!m) {
        m = moe_manifest_new(im->model);
        m->source = g_strdup("import");
        m->created = g_get_real_time() / G_USEC_PER_SEC;
        if (im->source_model) {
            MoeManifest *src = moe_manifest_load_model(im->source_model, NULL);
            if (src)
                m->repo = g_strdup(src->repo);
            moe_manifest_free(src);
        }
    }
    moe_manifest_add_file(m, moe_manifest_file_new(file, im->result.out_bytes, NULL, NULL));
    if (!m->quant || !strstr(m->quant, label)) {
        char *q = m->quant ? g_strdup_printf("%s,%s", m->quant, label) : g_strdup(label);
        g_free(m->quant);
        m->quant = q;
    }
    g_free(m->state);
    m->state = g_strdup("complete");
    if (!moe_manifest_save_model(m, error))
        goto out;
    im->result_rel = g_strdup(file);
    ok = TRUE;
out:
    moe_manifest_free(m);
    g_free(final_path);
    g_free(file);
    g_free(label);
    return ok;
}

static void on_imported(GObject *source, GAsyncResult *res, gpointer data)
{
    (void)source;
    (void)data;
    GTask *task = G_TASK(res);
    mg_job *job = g_task_get_task_data(task);
    mg_import *im = job->data;
    GError *e = NULL;
    moedesk_import_result *r = g_task_propagate_pointer(task, &e);
    im->in_flight = FALSE;
    if (r) {
        im->result = *r;
        im->have_result = TRUE;
        g_free(r);
    }
    if (!job->mg)
        goto out;
    if (!r) {
        mg_job_fail(job, import_error_code(e), "%s", e->message);
    } else if (!install_result(im, &e)) {
        g_unlink(im->out_path);
        mg_job_fail(job, mg_library_error_code(e), "%s", e->message);
    } else {
        mg_job_set_state(job, MG_STATE_COMPLETED);
    }
    if (job->state == MG_STATE_FAILED && im->dir_created)
        g_rmdir(im->model_dir); /* only if empty: nothing else was ours */
out:
    g_clear_error(&e);
}

/* ---- routes ----------------------------------------------------------------------- */

static gboolean parse_type(const char *s, moe_type *out)
{
    if (!g_ascii_strcasecmp(s, "q4_k_m")) {
        *out = MOE_TYPE_Q4_K;
        return TRUE;
    }
    return moe_type_from_name(s, out) &&
           (*out == MOE_TYPE_F32 || *out == MOE_TYPE_F16 || *out == MOE_TYPE_BF16 ||
            *out == MOE_TYPE_Q8_0 || *out == MOE_TYPE_Q6_K || *out == MOE_TYPE_Q4_K ||
            *out == MOE_TYPE_Q4_0);
}

static gboolean same_output(mg_job *job, gpointer name)
{
    return !strcmp(((mg_import *)job->data)->model, name);
}

/* Fills the source fields from the body; answers and returns FALSE on a
 * bad request. */
static gboolean import_source(svc_call *call, const char *model, const char *dir,
                              mg_import *im)
{
    if (!model == !dir) {
        svc_call_reply_error(call, 400, "invalid_request_error", "model", "missing_parameter",
                             "name the checkpoint to import: \"model\" (an installed model) or "
                             "\"dir\" (an absolute folder path), one of them");
        return FALSE;
    }
    GError *e = NULL;
    if (model) {
        MoeManifest *m = moe_manifest_find_installed(model, &e);
        if (!m) {
            mg_reply_library_error(call, e, "model");
            g_error_free(e);
            return FALSE;
        }
        im->source_model = g_strdup(m->name);
        im->dir = moe_library_model_dir(m->name, NULL);
        moe_manifest_free(m);
    } else {
        if (!g_path_is_absolute(dir) || !g_file_test(dir, G_FILE_TEST_IS_DIR)) {
            svc_call_reply_error(call, 400, "invalid_request_error", "dir", "invalid_value",
                                 "'%s' is not an absolute path to a folder", dir);
            return FALSE;
        }
        im->dir = g_strdup(dir);
    }
    char *config = g_build_filename(im->dir, "config.json", NULL);
    gboolean has = g_file_test(config, G_FILE_TEST_IS_REGULAR);
    g_free(config);
    if (!has) {
        svc_call_reply_error(call, 400, "invalid_request_error", model ? "model" : "dir",
                             "invalid_checkpoint",
                             "%s has no config.json: not a Hugging Face checkpoint", im->dir);
        return FALSE;
    }
    return TRUE;
}

static gboolean import_target(svc_call *call, const char *name, mg_import *im)
{
    GError *e = NULL;
    char *base = NULL;
    if (!name)
        name = im->source_model ? im->source_model : (base = g_path_get_basename(im->dir));
    gboolean ok = moe_library_check_name(name, &e);
    if (!ok) {
        svc_call_reply_error(call, 400, "invalid_request_error", "name", "invalid_model_name",
                             "%s%s", e->message,
                             base ? " (the folder's name; give \"name\")" : "");
        g_error_free(e);
    } else {
        im->model = g_strdup(name);
        const char *slash = strrchr(name, '/');
        im->leaf = g_strdup(slash ? slash + 1 : name);
        im->model_dir = moe_library_model_dir(name, NULL);
        char *tmp_name = g_strconcat(im->leaf, ".importing.gguf", NULL);
        im->out_path = g_build_filename(im->model_dir, tmp_name, NULL);
        g_free(tmp_name);
    }
    g_free(base);
    return ok;
}

static void route_create(svc_call *call)
{
    JsonObject *o = NULL;
    JsonNode *root = mg_body(call, &o);
    if (!root)
        return;
    const char *model = NULL, *dir = NULL, *name = NULL, *type = NULL;
    mg_import *im = g_new0(mg_import, 1);
    g_mutex_init(&im->lock);
    if (!mg_member_string(call, o, "model", &model) || !mg_member_string(call, o, "dir", &dir) ||
        !mg_member_string(call, o, "name", &name) || !mg_member_string(call, o, "type", &type))
        goto fail;
    if (type && !(im->type_given = parse_type(type, &im->type))) {
        svc_call_reply_error(call, 400, "invalid_request_error", "type", "invalid_value",
                             "unknown type '%s' (bf16, f16, f32, q8_0, q6_k, q4_k_m, q4_0)", type);
        goto fail;
    }
    if (!import_source(call, model, dir, im) || !import_target(call, name, im))
        goto fail;
    svc_manage *mg = mg_of(call);
    if (mg_job_find_active(mg, MG_JOB_IMPORT, same_output, im->model) ||
        mg_model_busy(mg, im->model)) {
        svc_call_reply_error(call, 409, "conflict_error", "name", "model_busy",
                             "%s is already being imported or downloaded", im->model);
        goto fail;
    }
    im->dir_created = !g_file_test(im->model_dir, G_FILE_TEST_IS_DIR);
    if (g_mkdir_with_parents(im->model_dir, 0755) != 0) {
        int en = errno;
        svc_call_reply_error(call, 500, "server_error", NULL, "io_error", "cannot create %s: %s",
                             im->model_dir, g_strerror(en));
        goto fail;
    }
    mg_job *job = mg_job_new(mg, &import_class, im);
    im->in_flight = TRUE;
    mg_job_set_state(job, MG_STATE_RUNNING);
    GTask *task = g_task_new(NULL, NULL, on_imported, NULL);
    g_task_set_task_data(task, mg_job_ref(job), (GDestroyNotify)mg_job_unref);
    g_task_run_in_thread(task, import_thread);
    g_object_unref(task);
    char *loc = g_strconcat(MG_PREFIX "imports/", job->id, NULL);
    soup_message_headers_replace(soup_server_message_get_response_headers(svc_call_msg(call)),
                                 "Location", loc);
    g_free(loc);
    svc_call_reply_json(call, 202, mg_job_to_json(job));
    json_node_unref(root);
    return;
fail:
    import_free(im);
    json_node_unref(root);
}

static void route_list(svc_call *call)
{
    mg_jobs_route_list(call, MG_JOB_IMPORT);
}

static void route_get(svc_call *call)
{
    mg_jobs_route_get(call, MG_JOB_IMPORT);
}

static void route_delete(svc_call *call)
{
    mg_job *job = mg_jobs_from_path(call, MG_JOB_IMPORT, NULL);
    if (!job)
        return;
    if (((mg_import *)job->data)->in_flight) {
        svc_call_reply_error(call, 409, "conflict_error", "id", "import_running",
                             "import %s is running and cannot be cancelled; it can be forgotten "
                             "once it ends", job->id);
        return;
    }
    svc_call_reply_json(call, 200, mg_job_to_json(job));
    mg_job_forget(job);
}

void mg_imports_register(svc_server *srv)
{
    svc_server_add_route(srv, "POST", MG_PREFIX "imports", 0, SVC_STYLE_OPENAI, route_create);
    svc_server_add_route(srv, "GET", MG_PREFIX "imports", 0, SVC_STYLE_OPENAI, route_list);
    svc_server_add_route(srv, "GET", MG_PREFIX "imports/", SVC_ROUTE_PREFIX, SVC_STYLE_OPENAI,
                         route_get);
    svc_server_add_route(srv, "DELETE", MG_PREFIX "imports/", SVC_ROUTE_PREFIX, SVC_STYLE_OPENAI,
                         route_delete);
}

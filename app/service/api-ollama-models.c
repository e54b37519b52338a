/*
 * api-ollama-models.c — Ollama's model endpoints, which editor plugins call
 * before they generate anything: the server version, the model list, one
 * model's details (context length, capabilities, a template text that
 * says whether fill-in-the-middle works), the loaded model, pulls with a
 * progress stream, and the embedding endpoints (refused: MoeDesk serves
 * generative models only).
 *
 *   GET  /api/version              {"version": SVC_OLLAMA_COMPAT_VERSION}
 *   GET  /api/tags                 the loaded model, then installed ones
 *   POST /api/show                 details, model_info, capabilities,
 *                                  template, parameters
 *   GET  /api/ps                   the loaded model (size_vram 0: CPU)
 *   POST /api/pull                 NDJSON progress from the download manager
 *   POST /api/embed, /api/embeddings   501
 *
 * Models are named "NAME:latest" as Ollama names them; the service takes
 * either form back. `digest` identifies a file by its path, size and time
 * (hashing a 20 GB file per listing would take minutes), so it changes
 * when the file does. A model's GGUF header is opened (memory-mapped, no
 * weights read) when it is not the loaded one.
 */
#include "api-ollama.h"

#include <download-manager.h>
#include <partfile.h>
#include <library.h>
#include <math.h>
#include <pull.h>
#include <string.h>

/* ---- model facts ------------------------------------------------------------------- */

uint64_t svc_ollama_gguf_n_params(const moe_gguf *g)
{
    uint64_t n = moe_gguf_u64_or(g, "general.parameter_count", 0);
    if (n)
        return n;
    for (int64_t i = 0; i < moe_gguf_n_tensors(g); i++) {
        const moe_gguf_tensor *t = moe_gguf_tensor_at(g, i);
        uint64_t e = 1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            e *= (uint64_t)t->ne[d];
        n += e;
    }
    return n;
}

/* Ollama's "30.5B", "85.2M". */
static char *param_size(uint64_t n)
{
    if (n >= 1000000000ull)
        return g_strdup_printf("%.1fB", (double)n / 1e9);
    if (n >= 1000000ull)
        return g_strdup_printf("%.1fM", (double)n / 1e6);
    if (n >= 1000ull)
        return g_strdup_printf("%.1fK", (double)n / 1e3);
    return g_strdup_printf("%" G_GUINT64_FORMAT, (guint64)n);
}

static char *file_digest(const char *path, guint64 size, gint64 mtime)
{
    char *id = g_strdup_printf("%s\n%" G_GUINT64_FORMAT "\n%" G_GINT64_FORMAT, path ? path : "",
                               size, mtime);
    char *d = g_compute_checksum_for_string(G_CHECKSUM_SHA256, id, -1);
    g_free(id);
    return d;
}

void svc_ollama_add_details(JsonBuilder *b, const char *arch, uint64_t n_params, const char *quant)
{
    json_builder_set_member_name(b, "details");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "parent_model");
    json_builder_add_string_value(b, "");
    json_builder_set_member_name(b, "format");
    json_builder_add_string_value(b, "gguf");
    json_builder_set_member_name(b, "family");
    json_builder_add_string_value(b, arch ? arch : "");
    json_builder_set_member_name(b, "families");
    json_builder_begin_array(b);
    if (arch && *arch)
        json_builder_add_string_value(b, arch);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "parameter_size");
    char *ps = param_size(n_params);
    json_builder_add_string_value(b, ps);
    g_free(ps);
    json_builder_set_member_name(b, "quantization_level");
    json_builder_add_string_value(b, quant ? quant : "unknown");
    json_builder_end_object(b);
}

/* One model as the listing endpoints show it. `loaded` (borrowed) when it
 * is the loaded model, else its header is read from `mi->path`; `ps` adds
 * /api/ps's fields. */
static void add_model_entry(JsonBuilder *b, const svc_api_model_info *mi, svc_model *loaded,
                            gboolean ps)
{
    const char *arch = NULL;
    uint64_t n_params = 0;
    moe_gguf *g = NULL;
    if (loaded) {
        arch = moe_model_arch(loaded->model);
        n_params = moe_model_n_params(loaded->model);
    } else {
        moe_err err = {{0}};
        if (mi->path && moe_gguf_open(mi->path, &g, &err) == MOE_OK) {
            arch = moe_gguf_str_or(g, "general.architecture", "");
            n_params = svc_ollama_gguf_n_params(g);
        }
    }
    char *name = svc_ollama_tagged_name(mi->name);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, name);
    json_builder_set_member_name(b, "model");
    json_builder_add_string_value(b, name);
    json_builder_set_member_name(b, "modified_at");
    char *t = svc_ollama_time(mi->created * G_USEC_PER_SEC);
    json_builder_add_string_value(b, t);
    g_free(t);
    json_builder_set_member_name(b, "size");
    json_builder_add_int_value(b, (gint64)mi->size);
    json_builder_set_member_name(b, "digest");
    char *d = file_digest(mi->path, mi->size, mi->created);
    json_builder_add_string_value(b, d);
    g_free(d);
    svc_ollama_add_details(b, arch, n_params, mi->quant);
    if (loaded && ps) {
        json_builder_set_member_name(b, "expires_at");
        /* Idle unloading is a service setting this module cannot see;
         * Ollama reports a far date for a model kept loaded. */
        json_builder_add_string_value(b, "2318-01-01T00:00:00Z");
        json_builder_set_member_name(b, "size_vram");
        json_builder_add_int_value(b, 0);
        json_builder_set_member_name(b, "context_length");
        json_builder_add_int_value(b, loaded->n_ctx_per_seq);
    }
    json_builder_end_object(b);
    g_free(name);
    moe_gguf_free(g);
}

/* ---- /api/version, /api/tags, /api/ps ---------------------------------------------- */

static void route_version(svc_call *call)
{
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "version");
    json_builder_add_string_value(b, SVC_OLLAMA_COMPAT_VERSION);
    json_builder_set_member_name(b, "moedesk");
    json_builder_add_string_value(b, svc_server_version());
    json_builder_end_object(b);
    svc_call_reply_json(call, 200, svc_json_take(b));
}

static void list_models(svc_call *call, gboolean loaded_only)
{
    svc_server *srv = svc_call_server(call);
    svc_model *cur = svc_server_current_model(srv);
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "models");
    json_builder_begin_array(b);
    GPtrArray *models = svc_api_list_models(srv);
    for (guint i = 0; i < models->len; i++) {
        const svc_api_model_info *mi = g_ptr_array_index(models, i);
        if (!mi->path)
            continue; /* an upstream's model: no local file to describe */
        gboolean is_loaded = mi->loaded && cur;
        if (loaded_only && !is_loaded)
            continue;
        if (is_loaded && loaded_only) {
            /* /api/ps: the memory it holds, weights and KV cache. */
            svc_sched_stats st;
            svc_sched_get_stats(cur->sched, &st);
            svc_api_model_info copy = *mi;
            copy.size = moe_model_size_bytes(cur->model) + st.kv_bytes;
            add_model_entry(b, &copy, cur, TRUE);
        } else {
            add_model_entry(b, mi, is_loaded ? cur : NULL, FALSE);
        }
    }
    g_ptr_array_unref(models);
    json_builder_end_array(b);
    json_builder_end_object(b);
    svc_call_reply_json(call, 200, svc_json_take(b));
}

static void route_tags(svc_call *call)
{
    list_models(call, FALSE);
}

static void route_ps(svc_call *call)
{
    list_models(call, TRUE);
}

/* ---- /api/pull -------------------------------------------------------------------- */

typedef struct pull_state {
    svc_call *call;
    gboolean stream;
    gboolean manifest_sent;
} pull_state;

/* One manager for the process's pulls, so two clients pulling the same
 * file share one transfer. */
static MoeDownloadManager *pull_manager(void)
{
    static MoeDownloadManager *manager;
    if (!manager)
        manager = moe_download_manager_new(NULL, 4);
    return manager;
}

static void pull_status(pull_state *ps, const char *status, const char *digest, gint64 total,
                        gint64 completed)
{
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "status");
    json_builder_add_string_value(b, status);
    if (digest) {
        json_builder_set_member_name(b, "digest");
        json_builder_add_string_value(b, digest);
        if (total >= 0) {
            json_builder_set_member_name(b, "total");
            json_builder_add_int_value(b, total);
        }
        json_builder_set_member_name(b, "completed");
        json_builder_add_int_value(b, completed);
    }
    json_builder_end_object(b);
    svc_call_stream_json(ps->call, svc_json_take(b));
}

/* Ollama's lines: "pulling manifest" while the repository is listed, then
 * "pulling <file>" with total/completed bytes per file (Ollama names
 * layers by digest; a GGUF file is named by its file name here). */
static void pull_progress(const MoePullProgress *p, gpointer data)
{
    pull_state *ps = data;
    if (!ps->stream || svc_call_is_gone(ps->call))
        return;
    if (!ps->manifest_sent) {
        ps->manifest_sent = TRUE;
        pull_status(ps, "pulling manifest", NULL, -1, 0);
    }
    if (p->note)
        pull_status(ps, p->note, NULL, -1, 0);
    if (p->file) {
        char *base = g_path_get_basename(p->file->dest);
        char *status = g_strconcat("pulling ", base, NULL);
        gint64 total = p->file->total == MOE_SIZE_UNKNOWN ? -1 : (gint64)p->file->total;
        pull_status(ps, status, base, total, (gint64)p->file->done);
        g_free(status);
        g_free(base);
    }
}

static void pull_done(GObject *source, GAsyncResult *res, gpointer data)
{
    (void)source;
    pull_state *ps = data;
    GError *e = NULL;
    MoeManifest *mf = moe_pull_finish(res, &e);
    svc_call *call = ps->call;
    if (mf) {
        if (ps->stream) {
            /* Every file's sha256 was checked while it streamed in. */
            pull_status(ps, "verifying sha256 digest", NULL, -1, 0);
            pull_status(ps, "writing manifest", NULL, -1, 0);
            pull_status(ps, "success", NULL, -1, 0);
            svc_call_stream_end(call);
        } else {
            JsonBuilder *b = json_builder_new();
            json_builder_begin_object(b);
            json_builder_set_member_name(b, "status");
            json_builder_add_string_value(b, "success");
            json_builder_end_object(b);
            svc_call_reply_json(call, 200, svc_json_take(b));
        }
        moe_manifest_free(mf);
    } else if (!svc_call_is_gone(call)) {
        guint status = 500;
        if (e->domain == MOE_LIBRARY_ERROR && e->code == MOE_LIBRARY_ERROR_NOT_FOUND)
            status = 404;
        else if (e->domain == MOE_LIBRARY_ERROR && e->code == MOE_LIBRARY_ERROR_INVALID_NAME)
            status = 400;
        svc_call_reply_error(call, status, status == 500 ? "server_error" : "invalid_request_error",
                             "model", NULL, "pull failed: %s", e->message);
    }
    g_clear_error(&e);
    svc_call_unref(call);
    g_free(ps);
}

/* Ollama's names for Hugging Face GGUF repositories ("hf.co/ORG/REPO:QUANT")
 * become the library's "hf:ORG/REPO:QUANT"; a ":latest" tag means no tag. */
static char *pull_source(const char *name)
{
    const char *rest = name;
    gboolean hf = FALSE;
    if (g_str_has_prefix(rest, "hf.co/")) {
        rest += 6;
        hf = TRUE;
    } else if (g_str_has_prefix(rest, "huggingface.co/")) {
        rest += 15;
        hf = TRUE;
    }
    char *src = g_strconcat(hf ? "hf:" : "", rest, NULL);
    if (g_str_has_suffix(src, ":latest"))
        src[strlen(src) - 7] = '\0';
    return src;
}

static void ollama_pull(svc_call *call, const char *model, gboolean stream)
{
    pull_state *ps = g_new0(pull_state, 1);
    ps->call = svc_call_ref(call);
    ps->stream = stream;
    if (stream) {
        svc_call_stream_begin(call, 200, "application/x-ndjson");
        ps->manifest_sent = TRUE;
        pull_status(ps, "pulling manifest", NULL, -1, 0);
    }
    char *src = pull_source(model);
    moe_pull_async(pull_manager(), src, 0, pull_progress, ps, svc_call_cancellable(call),
                   pull_done, ps);
    g_free(src);
}

/* ---- /api/embed ---------------------------------------------------------------------- */

static void route_embed(svc_call *call)
{
    svc_call_reply_error(call, 501, "invalid_request_error", NULL, "not_supported",
                         "embeddings are not supported: MoeDesk serves generative "
                         "mixture-of-experts models only; use an embedding server for %s",
                         svc_call_path(call));
}

/* ---- request bodies ----------------------------------------------------------------- */

/* The body's object, or NULL after answering 400. */
static JsonObject *body_object(svc_call *call, JsonNode **root)
{
    gsize len;
    const char *body = svc_call_body(call, &len);
    GError *e = NULL;
    *root = len ? svc_json_parse(body, (gssize)len, &e) : NULL;
    if (!*root || !JSON_NODE_HOLDS_OBJECT(*root)) {
        svc_call_reply_error(call, 400, "invalid_request_error", NULL, "invalid_json",
                             "the body must be a JSON object%s%s", e ? ": " : "",
                             e ? e->message : "");
        g_clear_error(&e);
        if (*root)
            json_node_unref(*root);
        *root = NULL;
        return NULL;
    }
    return json_node_get_object(*root);
}

/* "model" (or the older "name") as a non-empty string; NULL after 400. */
static const char *body_model(svc_call *call, JsonObject *o)
{
    const char *key = json_object_has_member(o, "model") ? "model" : "name";
    JsonNode *n = json_object_get_member(o, key);
    if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING ||
        !*json_node_get_string(n)) {
        svc_call_reply_error(call, 400, "invalid_request_error", "model", "missing_model",
                             "'model' must be a non-empty string naming a model");
        return NULL;
    }
    return json_node_get_string(n);
}

static gboolean body_bool(JsonObject *o, const char *key, gboolean def)
{
    JsonNode *n = json_object_get_member(o, key);
    if (n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_BOOLEAN)
        return json_node_get_boolean(n);
    return def;
}

/* ---- registration --------------------------------------------------------------------- */

static void route_show(svc_call *call)
{
    JsonNode *root = NULL;
    JsonObject *o = body_object(call, &root);
    if (!o)
        return;
    const char *model = body_model(call, o);
    if (model)
        svc_ollama_show(call, o, model);
    json_node_unref(root);
}

static void route_pull(svc_call *call)
{
    JsonNode *root = NULL;
    JsonObject *o = body_object(call, &root);
    if (!o)
        return;
    const char *model = body_model(call, o);
    if (model)
        ollama_pull(call, model, body_bool(o, "stream", TRUE));
    json_node_unref(root);
}

void svc_ollama_register_models(svc_server *srv)
{
    svc_server_add_route(srv, "GET", "/api/version", 0, SVC_STYLE_OLLAMA, route_version);
    svc_server_add_route(srv, "GET", "/api/tags", 0, SVC_STYLE_OLLAMA, route_tags);
    svc_server_add_route(srv, "GET", "/api/ps", 0, SVC_STYLE_OLLAMA, route_ps);
    svc_server_add_route(srv, "POST", "/api/show", 0, SVC_STYLE_OLLAMA, route_show);
    svc_server_add_route(srv, "POST", "/api/pull", 0, SVC_STYLE_OLLAMA, route_pull);
    svc_server_add_route(srv, "POST", "/api/embed", 0, SVC_STYLE_OLLAMA, route_embed);
    svc_server_add_route(srv, "POST", "/api/embeddings", 0, SVC_STYLE_OLLAMA, route_embed);
}

/*
 * api-manage.c — the Management API's entry point (api-manage.h): the
 * module's state on the server, GET /moedesk/v1/health, the helpers every
 * manage-*.c file uses to read requests and write JSON, and the mapping of
 * model-library errors to HTTP answers.
 *
 * Every route is registered OpenAI-style and unmetered: these calls manage
 * the service, they do not generate, so they have no place in the usage
 * report.
 */
#include "manage-private.h"

#include <library.h>
#include <math.h>
#include <string.h>

#define MG_DATA_KEY "svc-manage"

svc_manage *mg_of(svc_call *call)
{
    return svc_server_get_data(svc_call_server(call), MG_DATA_KEY);
}

/* ---- JSON helpers --------------------------------------------------------- */

void mg_add_str(JsonBuilder *b, const char *name, const char *value)
{
    json_builder_set_member_name(b, name);
    if (value)
        json_builder_add_string_value(b, value);
    else
        json_builder_add_null_value(b);
}

void mg_add_int(JsonBuilder *b, const char *name, gint64 value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, value);
}

void mg_add_u64(JsonBuilder *b, const char *name, guint64 value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, value > (guint64)G_MAXINT64 ? G_MAXINT64 : (gint64)value);
}

void mg_add_double(JsonBuilder *b, const char *name, double value)
{
    json_builder_set_member_name(b, name);
    if (isfinite(value))
        json_builder_add_double_value(b, value);
    else
        json_builder_add_null_value(b);
}

void mg_add_bool(JsonBuilder *b, const char *name, gboolean value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_boolean_value(b, value);
}

void mg_add_time_s(JsonBuilder *b, const char *name, gint64 unix_s)
{
    json_builder_set_member_name(b, name);
    GDateTime *dt = unix_s > 0 ? g_date_time_new_from_unix_utc(unix_s) : NULL;
    if (!dt) {
        json_builder_add_null_value(b);
        return;
    }
    char *s = g_date_time_format(dt, "%Y-%m-%dT%H:%M:%SZ");
    json_builder_add_string_value(b, s);
    g_free(s);
    g_date_time_unref(dt);
}

void mg_add_time_ms(JsonBuilder *b, const char *name, gint64 unix_ms)
{
    mg_add_time_s(b, name, unix_ms > 0 ? unix_ms / 1000 : 0);
}

void mg_reply_builder(svc_call *call, guint status, JsonBuilder *b)
{
    svc_call_reply_json(call, status, json_builder_get_root(b));
}

/* ---- request helpers -------------------------------------------------------- */

JsonNode *mg_body(svc_call *call, JsonObject **out)
{
    gsize len = 0;
    const char *text = svc_call_body(call, &len);
    JsonNode *root = NULL;
    if (len == 0 || strspn(text, " \t\r\n") == len) {
        root = json_node_init_object(json_node_alloc(), json_object_new());
    } else {
        GError *e = NULL;
        root = svc_json_parse(text, (gssize)len, &e);
        if (!root) {
            svc_call_reply_error(call, 400, "invalid_request_error", NULL, "invalid_json",
                                 "the request body is not valid JSON: %s", e->message);
            g_error_free(e);
            return NULL;
        }
        if (!JSON_NODE_HOLDS_OBJECT(root)) {
            svc_call_reply_error(call, 400, "invalid_request_error", NULL, "invalid_json",
                                 "the request body must be a JSON object");
            json_node_unref(root);
            return NULL;
        }
    }
    *out = json_node_get_object(root);
    return root;
}

static JsonNode *member_value(JsonObject *o, const char *name)
{
    JsonNode *n = json_object_get_member(o, name);
    return n && !JSON_NODE_HOLDS_NULL(n) ? n : NULL;
}

gboolean mg_member_string(svc_call *call, JsonObject *o, const char *name, const char **out)
{
    JsonNode *n = member_value(o, name);
    if (!n)
        return TRUE;
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING) {
        svc_call_reply_error(call, 400, "invalid_request_error", name, "invalid_type",
                             "'%s' must be a string", name);
        return FALSE;
    }
    *out = json_node_get_string(n);
    return TRUE;
}

gboolean mg_member_int(svc_call *call, JsonObject *o, const char *name, gint64 min, gint64 max,
                       gint64 *out)
{
    JsonNode *n = member_value(o, name);
    if (!n)
        return TRUE;
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64 ||
        json_node_get_int(n) < min || json_node_get_int(n) > max) {
        svc_call_reply_error(call, 400, "invalid_request_error", name, "invalid_value",
                             "'%s' must be an integer from %" G_GINT64_FORMAT
                             " to %" G_GINT64_FORMAT, name, min, max);
        return FALSE;
    }
    *out = json_node_get_int(n);
    return TRUE;
}

gboolean mg_member_bool(svc_call *call, JsonObject *o, const char *name, gboolean *out)
{
    JsonNode *n = member_value(o, name);
    if (!n)
        return TRUE;
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_BOOLEAN) {
        svc_call_reply_error(call, 400, "invalid_request_error", name, "invalid_type",
                             "'%s' must be true or false", name);
        return FALSE;
    }
    *out = json_node_get_boolean(n);
    return TRUE;
}

gboolean mg_query_int(svc_call *call, const char *name, gint64 min, gint64 max, gint64 *out)
{
    const char *v = svc_call_query(call, name);
    if (!v)
        return TRUE;
    gint64 x = 0;
    if (!g_ascii_string_to_signed(v, 10, min, max, &x, NULL)) {
        svc_call_reply_error(call, 400, "invalid_request_error", name, "invalid_value",
                             "the query parameter '%s' must be an integer from %" G_GINT64_FORMAT
                             " to %" G_GINT64_FORMAT ", not '%s'", name, min, max, v);
        return FALSE;
    }
    *out = x;
    return TRUE;
}

gboolean mg_query_flag(svc_call *call, const char *name)
{
    const char *v = svc_call_query(call, name);
    return v && (!strcmp(v, "1") || !g_ascii_strcasecmp(v, "true") ||
                 !g_ascii_strcasecmp(v, "yes") || !*v);
}

char *mg_path_part(svc_call *call, const char *prefix, const char *suffix)
{
    const char *path = svc_call_path(call);
    if (!g_str_has_prefix(path, prefix))
        return NULL;
    const char *rest = path + strlen(prefix);
    size_t n = strlen(rest), s = suffix ? strlen(suffix) : 0;
    if (n < s || (s && strcmp(rest + n - s, suffix)))
        return NULL;
    return g_strndup(rest, n - s);
}

char *mg_path_model(svc_call *call, const char *prefix, const char *suffix)
{
    char *name = mg_path_part(call, prefix, suffix);
    GError *e = NULL;
    if (!name || !moe_library_check_name(name, &e)) {
        svc_call_reply_error(call, 400, "invalid_request_error", "name", "invalid_model_name",
                             "%s", e ? e->message : "no model name in the path");
        g_clear_error(&e);
        g_free(name);
        return NULL;
    }
    return name;
}

const char *mg_library_error_code(const GError *e)
{
    if (e->domain == G_IO_ERROR && e->code == G_IO_ERROR_CANCELLED)
        return "cancelled";
    if (e->domain != MOE_LIBRARY_ERROR)
        return "internal_error";
    switch ((MoeLibraryError)e->code) {
    case MOE_LIBRARY_ERROR_INVALID_NAME: return "invalid_model_name";
    case MOE_LIBRARY_ERROR_NOT_FOUND: return "not_found";
    case MOE_LIBRARY_ERROR_HTTP: return "hub_error";
    case MOE_LIBRARY_ERROR_NETWORK: return "network_error";
    case MOE_LIBRARY_ERROR_HASH_MISMATCH: return "hash_mismatch";
    case MOE_LIBRARY_ERROR_SIZE_MISMATCH: return "size_mismatch";
    case MOE_LIBRARY_ERROR_NO_SPACE: return "no_space";
    case MOE_LIBRARY_ERROR_BUSY: return "busy";
    case MOE_LIBRARY_ERROR_CORRUPT: return "corrupt";
    case MOE_LIBRARY_ERROR_IO: return "io_error";
    case MOE_LIBRARY_ERROR_TOO_BIG: return "does_not_fit";
    }
    return "internal_error";
}

void mg_reply_library_error(svc_call *call, const GError *e, const char *param)
{
    guint status = 500;
    const char *type = "server_error";
    if (e->domain == MOE_LIBRARY_ERROR) {
        switch ((MoeLibraryError)e->code) {
        case MOE_LIBRARY_ERROR_INVALID_NAME:
            status = 400;
            type = "invalid_request_error";
            break;
        case MOE_LIBRARY_ERROR_NOT_FOUND:
            status = 404;
            type = "invalid_request_error";
            break;
        case MOE_LIBRARY_ERROR_BUSY:
            status = 409;
            type = "conflict_error";
            break;
        case MOE_LIBRARY_ERROR_HTTP:
        case MOE_LIBRARY_ERROR_NETWORK:
            status = 502;
            break;
        default:
            break;
        }
    }
    svc_call_reply_error(call, status, type, status < 500 ? param : NULL,
                         mg_library_error_code(e), "%s", e->message);
}

/* ---- GET /moedesk/v1/health -------------------------------------------------- */

static void add_sched_stats(JsonBuilder *b, svc_model *m)
{
    svc_sched_stats st;
    svc_sched_get_stats(m->sched, &st);
    json_builder_set_member_name(b, "scheduler");
    json_builder_begin_object(b);
    mg_add_int(b, "n_parallel", st.n_parallel);
    mg_add_int(b, "running", st.running);
    mg_add_int(b, "queued", st.queued);
    mg_add_int(b, "queue_max", st.queue_max);
    mg_add_int(b, "n_ctx_per_seq", st.n_ctx_per_seq);
    mg_add_int(b, "kv_cells_used", st.kv_cells_used);
    mg_add_int(b, "kv_cells_total", st.kv_cells_total);
    mg_add_u64(b, "kv_bytes", st.kv_bytes);
    mg_add_u64(b, "steps", st.steps);
    mg_add_u64(b, "tokens_prefilled", st.tokens_prefilled);
    mg_add_u64(b, "tokens_cached", st.tokens_cached);
    mg_add_u64(b, "tokens_generated", st.tokens_generated);
    mg_add_str(b, "cpu_isa", st.cpu_isa);
    mg_add_int(b, "n_threads", st.n_threads);
    json_builder_end_object(b);
}

static void route_health(svc_call *call)
{
    svc_server *srv = svc_call_server(call);
    svc_manage *mg = mg_of(call);
    svc_model *m = svc_server_current_model(srv);
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    mg_add_str(b, "status", "ok");
    mg_add_str(b, "version", svc_server_version());
    mg_add_time_ms(b, "started", svc_server_started_us(srv) / 1000);
    mg_add_int(b, "uptime_s", (g_get_real_time() - svc_server_started_us(srv)) / G_USEC_PER_SEC);
    json_builder_set_member_name(b, "model");
    if (m) {
        json_builder_begin_object(b);
        mg_add_str(b, "name", m->name);
        mg_add_str(b, "path", m->path);
        mg_add_str(b, "quant", m->quant);
        mg_add_str(b, "backend", m->backend);
        mg_add_str(b, "architecture", moe_model_arch(m->model));
        mg_add_int(b, "n_ctx_per_seq", m->n_ctx_per_seq);
        mg_add_time_ms(b, "loaded", m->loaded_us / 1000);
        json_builder_end_object(b);
        add_sched_stats(b, m);
    } else {
        json_builder_add_null_value(b);
        json_builder_set_member_name(b, "scheduler");
        json_builder_add_null_value(b);
    }
    json_builder_set_member_name(b, "jobs");
    json_builder_begin_object(b);
    mg_add_int(b, "downloads_active", mg_jobs_count_active(mg, MG_JOB_DOWNLOAD));
    mg_add_int(b, "imports_active", mg_jobs_count_active(mg, MG_JOB_IMPORT));
    mg_add_int(b, "verifications_active", mg_jobs_count_active(mg, MG_JOB_VERIFY));
    json_builder_end_object(b);
    usage_store *store = svc_server_usage(srv);
    json_builder_set_member_name(b, "usage");
    if (store) {
        usage_store_stats st;
        usage_store_get_stats(store, &st);
        json_builder_begin_object(b);
        mg_add_str(b, "database", usage_store_path(store));
        mg_add_u64(b, "rows_written", st.rows_written);
        mg_add_u64(b, "rows_dropped", st.rows_dropped);
        json_builder_end_object(b);
    } else {
        json_builder_add_null_value(b);
    }
    json_builder_end_object(b);
    mg_reply_builder(call, 200, b);
    g_object_unref(b);
}

/* ---- life cycle -------------------------------------------------------------- */

static void mg_free(gpointer data)
{
    svc_manage *mg = data;
    mg_jobs_free(mg);
    g_clear_object(&mg->downloads);
    g_free(mg);
}

static void mg_on_stop(svc_server *srv, gpointer data)
{
    (void)srv;
    svc_manage *mg = data;
    mg->stopping = TRUE;
    /* Cancelled downloads close their part files within a few main-loop
     * turns; the wait is bounded so a stuck disk cannot hold up the stop. */
    mg_jobs_stop(mg, 5000);
    /* A report over millions of rows takes a second or two. */
    mg_usage_wait(30000);
}

void svc_manage_register(svc_server *srv)
{
    svc_manage *mg = g_new0(svc_manage, 1);
    mg->srv = srv;
    mg->jobs = g_hash_table_new_full(g_str_hash, g_str_equal, NULL,
                                     (GDestroyNotify)mg_job_unref);
    mg->order = g_ptr_array_new();
    svc_server_set_data(srv, MG_DATA_KEY, mg, mg_free);
    svc_server_add_stop_hook(srv, mg_on_stop, mg);

    svc_server_add_route(srv, "GET", MG_PREFIX "health", 0, SVC_STYLE_OPENAI, route_health);
    mg_catalog_register(srv);
    mg_models_register(srv);
    mg_downloads_register(srv);
    mg_imports_register(srv);
    mg_usage_register(srv);
}

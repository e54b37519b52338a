/*
 * manage-usage.c — the usage database through the Management API (issue
 * #6 item 5, "a REST endpoint for the window"):
 *
 *   GET /moedesk/v1/usage/report[?week=2026-W47][&weeks=12][&format=json|md|html|csv]
 *   GET /moedesk/v1/usage/requests[?limit=50]
 *
 * The report is the one `moedesk-cli report weekly` writes (app/report:
 * settings.ini and prices.json from the config folder, report_build, the
 * four writers); JSON is usage_report_weekly_json()'s document. It is
 * built on a GTask worker thread: over millions of rows it takes up to a
 * second or two, and the main loop keeps serving meanwhile (the store is
 * thread-safe). Rows still queued for the database are flushed first, so a
 * request that just ended is counted.
 *
 * Which database: the service's own store; when the service runs with
 * --no-usage, the data folder's usage.sqlite3 opened read-only (never
 * created, migrated or written). Either way the report only reads.
 *
 * Errors: a malformed `week`, `weeks` or `format` is a 400 naming the
 * parameter; a week without requests a 404; a database that is corrupt
 * (or another program's) a 500 with the store's message; a database
 * another program holds locked a 503 with Retry-After.
 */
#include "manage-private.h"

#include <math.h>
#include <report.h>
#include <string.h>

#define MG_REQUESTS_DEFAULT 50
#define MG_REQUESTS_MAX 1000

/* Worker threads reading the server's store; the stop hook waits for them
 * before the server closes the store under them. */
static gint workers_running;

typedef struct usage_job {
    usage_store *store;       /* the server's, or NULL: open the default  */
    char *week;               /* NULL: the last complete week             */
    guint n_weeks;
    char *format;             /* json, md, html, csv                      */
    guint limit;              /* requests: rows                           */
    gboolean no_database;     /* set by the worker: nothing to open       */
} usage_job;

static void usage_job_free(gpointer data)
{
    usage_job *u = data;
    g_free(u->week);
    g_free(u->format);
    g_free(u);
}

/* The store to read (the server's, flushed; else the default file opened
 * read-only), or NULL with an error. `*own` is set when it must be closed. */
static usage_store *open_store(usage_job *u, gboolean *own, GError **error)
{
    *own = FALSE;
    if (u->store)
        return usage_store_flush(u->store, error) ? u->store : NULL;
    char *path = usage_store_default_path();
    usage_store *s = NULL;
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        u->no_database = TRUE;
        g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_OPEN,
                    "%s: no usage database (the service runs with --no-usage and nothing was "
                    "recorded before)", path);
    } else {
        s = usage_store_open(path, USAGE_STORE_READ_ONLY, error);
        *own = s != NULL;
    }
    g_free(path);
    return s;
}

static const char *content_type_of(const char *format)
{
    if (!strcmp(format, "md"))
        return "text/markdown; charset=utf-8";
    if (!strcmp(format, "html"))
        return "text/html; charset=utf-8";
    if (!strcmp(format, "csv"))
        return "text/csv; charset=utf-8";
    return "application/json";
}

static void report_thread(GTask *task, gpointer source, gpointer data, GCancellable *c)
{
    (void)source;
    (void)c;
    usage_job *u = data;
    GError *e = NULL;
    gboolean own = FALSE;
    char *text = NULL;
    char *dir = report_config_dir();
    char *settings_path = g_build_filename(dir, "settings.ini", NULL);
    report_settings *st = report_settings_new();
    report_prices *prices = NULL;
    usage_report *r = NULL;
    usage_store *store = open_store(u, &own, &e);
    if (store && report_settings_load(st, settings_path, &e) &&
        (prices = report_prices_load(NULL, &e))) {
        report_source src;
        report_source_init_store(&src, store);
        r = report_build(&src, st, prices, u->week, u->n_weeks, g_get_real_time() / 1000, &e);
    }
    if (r) {
        if (!strcmp(u->format, "json"))
            text = report_to_json(r);
        else if (!strcmp(u->format, "csv"))
            text = report_to_csv(r);
        else if (!strcmp(u->format, "html"))
            text = report_to_html(r);
        else
            text = report_to_markdown(r, NULL);
    }
    usage_report_free(r);
    report_prices_free(prices);
    report_settings_free(st);
    if (own)
        usage_store_close(store, NULL);
    g_free(settings_path);
    g_free(dir);
    g_atomic_int_dec_and_test(&workers_running);
    if (text)
        g_task_return_pointer(task, text, g_free);
    else
        g_task_return_error(task, e);
}

static void reply_usage_error(svc_call *call, usage_job *u, const GError *e)
{
    if (e->domain == REPORT_ERROR && e->code == REPORT_ERROR_WEEK) {
        svc_call_reply_error(call, 400, "invalid_request_error", "week", "invalid_week", "%s",
                             e->message);
    } else if (e->domain == REPORT_ERROR && e->code == REPORT_ERROR_NO_DATA) {
        svc_call_reply_error(call, 404, "invalid_request_error", "week", "no_data", "%s",
                             e->message);
    } else if (e->domain == REPORT_ERROR &&
               (e->code == REPORT_ERROR_SETTINGS || e->code == REPORT_ERROR_PRICES)) {
        svc_call_reply_error(call, 500, "server_error", NULL, "settings_error", "%s",
                             e->message);
    } else if (u->no_database) {
        svc_call_reply_error(call, 404, "invalid_request_error", NULL, "no_usage_database",
                             "%s", e->message);
    } else if (e->domain == USAGE_STORE_ERROR && e->code == USAGE_STORE_ERROR_LOCKED) {
        soup_message_headers_replace(soup_server_message_get_response_headers(svc_call_msg(call)),
                                     "Retry-After", "5");
        svc_call_reply_error(call, 503, "server_error", NULL, "database_locked", "%s",
                             e->message);
    } else {
        svc_call_reply_error(call, 500, "server_error", NULL, "usage_database_error", "%s",
                             e->message);
    }
}

static void on_report(GObject *source, GAsyncResult *res, gpointer data)
{
    (void)source;
    svc_call *call = data;
    GTask *task = G_TASK(res);
    usage_job *u = g_task_get_task_data(task);
    GError *e = NULL;
    char *text = g_task_propagate_pointer(task, &e);
    if (text)
        svc_call_reply_text(call, 200, content_type_of(u->format), text, -1);
    else
        reply_usage_error(call, u, e);
    g_free(text);
    g_clear_error(&e);
    svc_call_unref(call);
}

static void run_usage_task(svc_call *call, usage_job *u, GTaskThreadFunc fn, GAsyncReadyCallback done)
{
    u->store = svc_server_usage(svc_call_server(call));
    GTask *task = g_task_new(NULL, NULL, done, svc_call_ref(call));
    g_task_set_task_data(task, u, usage_job_free);
    g_atomic_int_inc(&workers_running);
    g_task_run_in_thread(task, fn);
    g_object_unref(task);
}

static void route_report(svc_call *call)
{
    static const char *const formats[] = {"json", "md", "html", "csv"};
    const char *format = svc_call_query(call, "format");
    const char *week = svc_call_query(call, "week");
    gint64 n_weeks = 12;
    if (!format || !*format)
        format = "json";
    gboolean known = FALSE;
    for (guint i = 0; i < G_N_ELEMENTS(formats); i++)
        known = known || !strcmp(format, formats[i]);
    if (!known) {
        svc_call_reply_error(call, 400, "invalid_request_error", "format", "invalid_format",
                             "unknown format '%s' (expected json, md, html or csv)", format);
        return;
    }
    if (!mg_query_int(call, "weeks", 1, 104, &n_weeks))
        return;
    GError *e = NULL;
    int y, w;
    if (week && *week && !report_week_parse(week, &y, &w, &e)) {
        svc_call_reply_error(call, 400, "invalid_request_error", "week", "invalid_week", "%s",
                             e->message);
        g_error_free(e);
        return;
    }
    usage_job *u = g_new0(usage_job, 1);
    u->week = week && *week ? g_strdup(week) : NULL;
    u->n_weeks = (guint)n_weeks;
    u->format = g_strdup(format);
    run_usage_task(call, u, report_thread, on_report);
}

/* ---- recent requests ---------------------------------------------------------- */

static gboolean add_row(gint64 id, const usage_row *r, gpointer data, GError **error)
{
    (void)error;
    JsonBuilder *b = data;
    json_builder_begin_object(b);
    mg_add_int(b, "id", id);
    mg_add_time_ms(b, "start", r->start_ms);
    mg_add_int(b, "start_ms", r->start_ms);
    mg_add_str(b, "caller", r->caller);
    mg_add_str(b, "client", r->client);
    mg_add_str(b, "endpoint", r->endpoint);
    mg_add_str(b, "model", r->model);
    mg_add_str(b, "route", r->route);
    mg_add_str(b, "backend", r->backend);
    mg_add_str(b, "quant", r->quant);
    mg_add_int(b, "prompt_tokens", r->prompt_tokens);
    mg_add_int(b, "cached_tokens", r->cached_tokens);
    mg_add_int(b, "completion_tokens", r->completion_tokens);
    json_builder_set_member_name(b, "ttft_ms");
    if (r->ttft_ms >= 0)
        json_builder_add_int_value(b, r->ttft_ms);
    else
        json_builder_add_null_value(b);
    mg_add_int(b, "total_ms", r->total_ms);
    mg_add_double(b, "decode_tps", r->decode_tps > 0 ? r->decode_tps : NAN);
    mg_add_int(b, "http_status", r->http_status);
    mg_add_str(b, "error_kind", r->error_kind && *r->error_kind ? r->error_kind : NULL);
    mg_add_str(b, "finish_reason", r->finish_reason);
    mg_add_double(b, "gpu_power_w", r->gpu_power_w >= 0 ? r->gpu_power_w : NAN);
    mg_add_int(b, "busy_ms", r->busy_ms);
    json_builder_end_object(b);
    return TRUE;
}

static void requests_thread(GTask *task, gpointer source, gpointer data, GCancellable *c)
{
    (void)source;
    (void)c;
    usage_job *u = data;
    GError *e = NULL;
    gboolean own = FALSE;
    usage_store *store = open_store(u, &own, &e);
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "requests");
    json_builder_begin_array(b);
    gboolean ok = store && usage_store_each_recent_row(store, u->limit, add_row, b, &e);
    json_builder_end_array(b);
    if (ok)
        mg_add_str(b, "database", usage_store_path(store));
    json_builder_end_object(b);
    if (own)
        usage_store_close(store, NULL);
    g_atomic_int_dec_and_test(&workers_running);
    if (ok)
        g_task_return_pointer(task, json_builder_get_root(b), (GDestroyNotify)json_node_unref);
    else
        g_task_return_error(task, e);
    g_object_unref(b);
}

static void on_requests(GObject *source, GAsyncResult *res, gpointer data)
{
    (void)source;
    svc_call *call = data;
    GTask *task = G_TASK(res);
    GError *e = NULL;
    JsonNode *n = g_task_propagate_pointer(task, &e);
    if (n)
        svc_call_reply_json(call, 200, n);
    else
        reply_usage_error(call, g_task_get_task_data(task), e);
    g_clear_error(&e);
    svc_call_unref(call);
}

static void route_requests(svc_call *call)
{
    gint64 limit = MG_REQUESTS_DEFAULT;
    if (!mg_query_int(call, "limit", 1, MG_REQUESTS_MAX, &limit))
        return;
    usage_job *u = g_new0(usage_job, 1);
    u->limit = (guint)limit;
    run_usage_task(call, u, requests_thread, on_requests);
}

void mg_usage_wait(gint64 wait_ms)
{
    gint64 deadline = g_get_monotonic_time() + wait_ms * 1000;
    GMainContext *ctx = g_main_context_default();
    while (g_atomic_int_get(&workers_running) > 0 && g_get_monotonic_time() < deadline)
        if (!g_main_context_iteration(ctx, FALSE))
            g_usleep(2000);
}

void mg_usage_register(svc_server *srv)
{
    svc_server_add_route(srv, "GET", MG_PREFIX "usage/report", 0, SVC_STYLE_OPENAI, route_report);
    svc_server_add_route(srv, "GET", MG_PREFIX "usage/requests", 0, SVC_STYLE_OPENAI,
                         route_requests);
}

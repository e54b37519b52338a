/*
 * http.c — session setup, redirect-following GET with origin-bound bearer
 * tokens, and the retry policy (see http.h). Redirects are followed here
 * rather than by libsoup so that the Authorization header is attached per
 * hop: Hugging Face answers resolve/ with a redirect to a CDN host, which
 * must not receive the user's token.
 */
#include "http.h"

#include <stdlib.h>
#include <string.h>

#define MAX_REDIRECTS 10
#define BACKOFF_CAP_MS 60000
#define RETRY_AFTER_CAP_MS (15 * 60 * 1000)

static guint env_uint(const char *name, guint def)
{
    const char *v = g_getenv(name);
    guint64 n;
    if (!v || !g_ascii_string_to_unsigned(v, 10, 0, G_MAXUINT, &n, NULL))
        return def;
    return (guint)n;
}

SoupSession *moe_http_session_new(void)
{
    g_autofree char *ua = g_strdup_printf("moedesk/%s", MOEDESK_VERSION);
    return soup_session_new_with_options("user-agent", ua,
                                         "timeout", env_uint("MOEDESK_HTTP_TIMEOUT_S", 60),
                                         "max-conns-per-host", 16,
                                         NULL);
}

/* ---- GET with manual redirects ---- */

typedef struct {
    SoupSession         *session;
    char                *token;
    GUri                *token_uri;
    MoeHttpConfigureFunc configure;
    gpointer             configure_data;
    SoupMessage         *msg;
    int                  hops;
} GetState;

static void get_state_free(GetState *s)
{
    g_clear_object(&s->session);
    g_free(s->token);
    g_clear_pointer(&s->token_uri, g_uri_unref);
    g_clear_object(&s->msg);
    g_free(s);
}

static gboolean same_origin(GUri *a, GUri *b)
{
    if (!a || !b || g_ascii_strcasecmp(g_uri_get_scheme(a), g_uri_get_scheme(b)) != 0 ||
        !g_uri_get_host(a) || !g_uri_get_host(b) ||
        g_ascii_strcasecmp(g_uri_get_host(a), g_uri_get_host(b)) != 0)
        return FALSE;
    int pa = g_uri_get_port(a), pb = g_uri_get_port(b);
    gboolean https = g_ascii_strcasecmp(g_uri_get_scheme(a), "https") == 0;
    if (pa < 0) pa = https ? 443 : 80;
    if (pb < 0) pb = https ? 443 : 80;
    return pa == pb;
}

static void get_sent(GObject *source, GAsyncResult *res, gpointer data);

static void get_send(GTask *task, GUri *uri)
{
    GetState *s = g_task_get_task_data(task);
    g_clear_object(&s->msg);
    s->msg = soup_message_new_from_uri(SOUP_METHOD_GET, uri);
    soup_message_add_flags(s->msg, SOUP_MESSAGE_NO_REDIRECT);
    if (s->token && same_origin(uri, s->token_uri)) {
        g_autofree char *auth = g_strdup_printf("Bearer %s", s->token);
        soup_message_headers_replace(soup_message_get_request_headers(s->msg),
                                     "Authorization", auth);
    }
    if (s->configure)
        s->configure(s->msg, s->configure_data);
    soup_session_send_async(s->session, s->msg, G_PRIORITY_DEFAULT,
                            g_task_get_cancellable(task), get_sent, task);
}

static void get_sent(GObject *source, GAsyncResult *res, gpointer data)
{
    GTask *task = data;
    GetState *s = g_task_get_task_data(task);
    GError *error = NULL;
    GInputStream *body = soup_session_send_finish(SOUP_SESSION(source), res, &error);
    if (!body) {
        g_task_return_error(task, error);
        g_object_unref(task);
        return;
    }
    guint status = soup_message_get_status(s->msg);
    const char *location = soup_message_headers_get_one(
        soup_message_get_response_headers(s->msg), "Location");
    gboolean redirect = (status == 301 || status == 302 || status == 303 || status == 307 ||
                         status == 308) && location;
    if (!redirect) {
        g_task_return_pointer(task, body, g_object_unref);
        g_object_unref(task);
        return;
    }
    g_object_unref(body);
    GUri *next = g_uri_parse_relative(soup_message_get_uri(s->msg), location,
                                      SOUP_HTTP_URI_FLAGS, NULL);
    if (!next || ++s->hops > MAX_REDIRECTS ||
        (g_ascii_strcasecmp(g_uri_get_scheme(next), "http") != 0 &&
         g_ascii_strcasecmp(g_uri_get_scheme(next), "https") != 0)) {
        /* Without the query: signed CDN URLs carry credentials there. */
        g_autofree char *from = g_uri_to_string_partial(soup_message_get_uri(s->msg),
                                                        G_URI_HIDE_QUERY);
        g_task_return_new_error(task, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                                "%s: %s", from, next ? "too many or non-HTTP redirects"
                                                     : "redirect to an invalid Location");
        g_clear_pointer(&next, g_uri_unref);
        g_object_unref(task);
        return;
    }
    get_send(task, next);
    g_uri_unref(next);
}

void moe_http_get_async(SoupSession *session, const char *url, const char *token,
                        const char *token_url, MoeHttpConfigureFunc configure,
                        gpointer configure_data, GCancellable *cancellable,
                        GAsyncReadyCallback callback, gpointer user_data)
{
    GTask *task = g_task_new(session, cancellable, callback, user_data);
    g_task_set_source_tag(task, moe_http_get_async);
    GetState *s = g_new0(GetState, 1);
    s->session = g_object_ref(session);
    s->token = g_strdup(token);
    s->token_uri = token_url ? g_uri_parse(token_url, SOUP_HTTP_URI_FLAGS, NULL) : NULL;
    s->configure = configure;
    s->configure_data = configure_data;
    g_task_set_task_data(task, s, (GDestroyNotify)get_state_free);
    g_autoptr(GError) error = NULL;
    g_autoptr(GUri) uri = g_uri_parse(url, SOUP_HTTP_URI_FLAGS, &error);
    if (!uri) {
        g_task_return_new_error(task, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                                "invalid URL %s: %s", url, error->message);
        g_object_unref(task);
        return;
    }
    get_send(task, uri);
}

GInputStream *moe_http_get_finish(GAsyncResult *result, SoupMessage **msg, GError **error)
{
    GTask *task = G_TASK(result);
    GInputStream *body = g_task_propagate_pointer(task, error);
    if (body && msg) {
        GetState *s = g_task_get_task_data(task);
        *msg = g_object_ref(s->msg);
    }
    return body;
}

/* ---- retry policy ---- */

gboolean moe_http_error_is_transient(const GError *error)
{
    if (!error)
        return FALSE;
    if (error->domain == G_IO_ERROR)
        return error->code == G_IO_ERROR_TIMED_OUT || error->code == G_IO_ERROR_CONNECTION_REFUSED ||
               error->code == G_IO_ERROR_CONNECTION_CLOSED || error->code == G_IO_ERROR_BROKEN_PIPE ||
               error->code == G_IO_ERROR_PARTIAL_INPUT || error->code == G_IO_ERROR_NETWORK_UNREACHABLE ||
               error->code == G_IO_ERROR_HOST_UNREACHABLE ||
               error->code == G_IO_ERROR_NOT_CONNECTED;
    if (error->domain == G_RESOLVER_ERROR)
        return error->code == G_RESOLVER_ERROR_TEMPORARY_FAILURE;
    if (error->domain == SOUP_SESSION_ERROR)
        return error->code == SOUP_SESSION_ERROR_PARSING || error->code == SOUP_SESSION_ERROR_ENCODING;
    return error->domain == G_TLS_ERROR && error->code == G_TLS_ERROR_EOF;
}

gboolean moe_http_status_is_transient(guint status)
{
    return status == 408 || status == 429 || (status >= 500 && status <= 599);
}

guint moe_http_max_attempts(void)
{
    guint n = env_uint("MOEDESK_RETRY_ATTEMPTS", 6);
    return n ? n : 1;
}

gint64 moe_http_parse_retry_after(const char *value)
{
    if (!value)
        return -1;
    guint64 secs;
    g_autofree char *v = g_strstrip(g_strdup(value));
    if (g_ascii_string_to_unsigned(v, 10, 0, G_MAXINT32, &secs, NULL))
        return (gint64)secs * 1000;
    g_autoptr(GDateTime) when = soup_date_time_new_from_http_string(v);
    if (!when)
        return -1;
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    GTimeSpan diff = g_date_time_difference(when, now);
    return diff > 0 ? diff / 1000 : 0;
}

gint64 moe_http_retry_delay_ms(guint attempt, SoupMessageHeaders *headers)
{
    const char *ra = headers ? soup_message_headers_get_one(headers, "Retry-After") : NULL;
    gint64 wait = moe_http_parse_retry_after(ra);
    if (wait >= 0)
        return wait > RETRY_AFTER_CAP_MS ? -1 : wait;
    gint64 base = env_uint("MOEDESK_RETRY_BASE_MS", 1000);
    gint64 delay = base;
    for (guint i = 1; i < attempt && delay < BACKOFF_CAP_MS; i++)
        delay *= 2;
    delay = MIN(delay, BACKOFF_CAP_MS);
    /* +-25% jitter so that many clients cut off together do not return in
     * lockstep. */
    return delay + g_random_int_range(-(gint32)(delay / 4), (gint32)(delay / 4) + 1);
}

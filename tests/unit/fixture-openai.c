/*
 * fixture-openai.c — the OpenAI-compatible test server described in
 * fixture-openai.h. Streams are written one piece per "wrote-chunk": the
 * next piece is appended FIXTURE_CHUNK_MS later from a timer, so the client
 * really receives them spread out in time, as from a model.
 */
#include "fixture-openai.h"

#include <json-glib/json-glib.h>
#include <string.h>

typedef struct fstream {
    fixture_openai *fx;
    SoupServerMessage *msg;  /* ref */
    GPtrArray *pieces;       /* char*, appended one per tick */
    guint next;
    guint timer;
    int cut_after;           /* shut the socket after this many pieces; -1 */
    int stall_after;         /* stop (keep the connection) after this many; -1 */
    char *slow_body;         /* "slow": the whole answer, sent after 5 s */
    gboolean completed;
} fstream;

static void fstream_free(fstream *s)
{
    s->fx->streams = g_list_remove(s->fx->streams, s);
    if (s->timer)
        g_source_remove(s->timer);
    g_signal_handlers_disconnect_by_data(s->msg, s);
    g_object_unref(s->msg);
    g_ptr_array_unref(s->pieces);
    g_free(s->slow_body);
    g_free(s);
}

static void on_gone(SoupServerMessage *msg, gpointer data)
{
    (void)msg;
    fstream *s = data;
    if (!s->completed)
        s->fx->n_aborted++;
    fstream_free(s);
}

static void append_next(fstream *s)
{
    SoupMessageBody *body = soup_server_message_get_response_body(s->msg);
    if (s->next >= s->pieces->len) {
        s->completed = TRUE;
        soup_message_body_complete(body);
        return;
    }
    const char *p = g_ptr_array_index(s->pieces, s->next++);
    soup_message_body_append(body, SOUP_MEMORY_COPY, p, strlen(p));
}

static gboolean on_tick(gpointer data)
{
    fstream *s = data;
    s->timer = 0;
    append_next(s);
    soup_server_message_unpause(s->msg);
    return G_SOURCE_REMOVE;
}

static void on_wrote_chunk(SoupServerMessage *msg, gpointer data)
{
    fstream *s = data;
    if (s->cut_after >= 0 && s->next >= (guint)s->cut_after) {
        GSocket *sock = soup_server_message_get_socket(msg);
        if (sock)
            g_socket_shutdown(sock, TRUE, TRUE, NULL);
        return;
    }
    soup_server_message_pause(msg);
    if (s->stall_after >= 0 && s->next >= (guint)s->stall_after)
        return; /* never resumed: the client's idle timeout must fire */
    s->timer = g_timeout_add(FIXTURE_CHUNK_MS, on_tick, s);
}

static fstream *fstream_new(fixture_openai *fx, SoupServerMessage *msg)
{
    fstream *s = g_new0(fstream, 1);
    s->fx = fx;
    s->msg = g_object_ref(msg);
    s->pieces = g_ptr_array_new_with_free_func(g_free);
    s->cut_after = s->stall_after = -1;
    fx->streams = g_list_prepend(fx->streams, s);
    g_signal_connect(msg, "finished", G_CALLBACK(on_gone), s);
    g_signal_connect(msg, "disconnected", G_CALLBACK(on_gone), s);
    return s;
}

static const char USAGE_JSON[] =
    "{\"prompt_tokens\":11,\"completion_tokens\":3,\"total_tokens\":14,"
    "\"prompt_tokens_details\":{\"cached_tokens\":4}}";

static char *chunk(const char *model, const char *delta, const char *finish, const char *eol)
{
    return g_strdup_printf("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,"
                           "\"model\":\"%s\",\"choices\":[{\"index\":0,\"delta\":%s,"
                           "\"finish_reason\":%s}]}%s%s",
                           model, delta, finish, eol, eol);
}

/* The events of a stream for `model` ("ok", "long", "crlf"). */
static GPtrArray *stream_events(const char *model, gboolean include_usage)
{
    GPtrArray *ev = g_ptr_array_new_with_free_func(g_free);
    const char *eol = strcmp(model, "crlf") == 0 ? "\r\n" : "\n";
    g_ptr_array_add(ev, chunk(model, "{\"role\":\"assistant\",\"content\":\"\"}", "null", eol));
    if (strcmp(model, "long") == 0) {
        for (int i = 0; i < FIXTURE_LONG_CHUNKS; i++) {
            g_autofree char *d = g_strdup_printf("{\"content\":\"w%d \"}", i);
            g_ptr_array_add(ev, chunk(model, d, "null", eol));
        }
    } else {
        g_ptr_array_add(ev, chunk(model, "{\"content\":\"Hel\"}", "null", eol));
        g_ptr_array_add(ev, chunk(model, "{\"content\":\"lo\"}", "null", eol));
        g_ptr_array_add(ev, chunk(model, "{\"content\":\" world\"}", "null", eol));
    }
    g_ptr_array_add(ev, chunk(model, "{}", "\"stop\"", eol));
    if (include_usage)
        g_ptr_array_add(ev, g_strdup_printf("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\","
                                            "\"created\":1,\"model\":\"%s\",\"choices\":[],"
                                            "\"usage\":%s}%s%s",
                                            model, USAGE_JSON, eol, eol));
    g_ptr_array_add(ev, g_strdup_printf("data: [DONE]%s%s", eol, eol));
    return ev;
}

char *fixture_openai_stream_text(const char *model, gboolean include_usage)
{
    g_autoptr(GPtrArray) ev = stream_events(model, include_usage);
    GString *s = g_string_new(NULL);
    for (guint i = 0; i < ev->len; i++)
        g_string_append(s, g_ptr_array_index(ev, i));
    return g_string_free(s, FALSE);
}

static void reply(SoupServerMessage *msg, guint status, const char *json)
{
    soup_server_message_set_status(msg, status, NULL);
    soup_server_message_set_response(msg, "application/json", SOUP_MEMORY_COPY, json, strlen(json));
}

static void start_stream(fixture_openai *fx, SoupServerMessage *msg, const char *model,
                         gboolean include_usage)
{
    fstream *s = fstream_new(fx, msg);
    g_autoptr(GPtrArray) ev = stream_events(strcmp(model, "cut") == 0 || strcmp(model, "stall") == 0
                                                ? "ok" : model, include_usage);
    GString *all = g_string_new(NULL);
    for (guint i = 0; i < ev->len; i++) {
        const char *e = g_ptr_array_index(ev, i);
        if (strcmp(model, "burst") == 0) {
            g_string_append(all, e);
        } else if (strcmp(model, "crlf") == 0) {
            /* Two pieces per event, the second starting with the final
             * '\n', so "\r" and "\n" arrive apart. */
            size_t n = strlen(e);
            g_ptr_array_add(s->pieces, g_strndup(e, n - 1));
            g_ptr_array_add(s->pieces, g_strdup(e + n - 1));
        } else {
            g_ptr_array_add(s->pieces, g_strdup(e));
        }
    }
    if (all->len)
        g_ptr_array_add(s->pieces, g_string_free(all, FALSE));
    else
        g_string_free(all, TRUE);
    if (strcmp(model, "cut") == 0)
        s->cut_after = 2;
    if (strcmp(model, "stall") == 0)
        s->stall_after = 1;
    SoupMessageHeaders *h = soup_server_message_get_response_headers(msg);
    soup_message_headers_set_encoding(h, SOUP_ENCODING_CHUNKED);
    soup_message_headers_set_content_type(h, "text/event-stream", NULL);
    soup_message_body_set_accumulate(soup_server_message_get_response_body(msg), FALSE);
    soup_server_message_set_status(msg, 200, NULL);
    g_signal_connect(msg, "wrote-chunk", G_CALLBACK(on_wrote_chunk), s);
    append_next(s);
}

static gboolean on_slow(gpointer data)
{
    fstream *s = data;
    s->timer = 0;
    s->completed = TRUE;
    reply(s->msg, 200, s->slow_body);
    soup_server_message_unpause(s->msg);
    return G_SOURCE_REMOVE;
}

static void chat(fixture_openai *fx, SoupServerMessage *msg)
{
    g_autoptr(JsonParser) p = json_parser_new();
    JsonNode *root = json_parser_load_from_data(p, fx->last_body, -1, NULL) ? json_parser_get_root(p)
                                                                             : NULL;
    JsonObject *o = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    if (!o) {
        reply(msg, 400, "{\"error\":{\"message\":\"not JSON\"}}");
        return;
    }
    const char *model = json_object_get_string_member_with_default(o, "model", "");
    gboolean stream = json_object_get_boolean_member_with_default(o, "stream", FALSE);
    JsonObject *so = json_object_has_member(o, "stream_options")
                         ? json_object_get_object_member(o, "stream_options") : NULL;
    gboolean usage = so && json_object_get_boolean_member_with_default(so, "include_usage", FALSE);

    if (strcmp(model, "fail500") == 0) {
        reply(msg, 500, "{\"error\":{\"message\":\"boom\"}}");
    } else if (strcmp(model, "fail503") == 0) {
        soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Retry-After", "7");
        reply(msg, 503, "{\"error\":{\"message\":\"overloaded\"}}");
    } else if (strcmp(model, "bad") == 0) {
        reply(msg, 400, "{\"error\":{\"message\":\"bad temperature\",\"type\":\"invalid_request_error\"}}");
    } else if (strcmp(model, "slow") == 0) {
        fstream *s = fstream_new(fx, msg);
        s->slow_body = g_strdup("{\"choices\":[]}");
        soup_server_message_pause(msg);
        s->timer = g_timeout_add(5000, on_slow, s);
    } else if (stream) {
        start_stream(fx, msg, model, usage);
    } else {
        g_autofree char *js = g_strdup_printf(
            "{\"id\":\"c1\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"%s\","
            "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hello world\"},"
            "\"finish_reason\":\"stop\"}],\"usage\":%s}",
            model, USAGE_JSON);
        reply(msg, 200, js);
    }
}

static void handle(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                   gpointer data)
{
    (void)server;
    (void)query;
    fixture_openai *fx = data;
    fx->n_requests++;
    SoupMessageHeaders *rq = soup_server_message_get_request_headers(msg);
    g_free(fx->last_auth);
    fx->last_auth = g_strdup(soup_message_headers_get_one(rq, "Authorization"));
    g_autoptr(GBytes) body = soup_message_body_flatten(soup_server_message_get_request_body(msg));
    g_free(fx->last_body);
    fx->last_body = g_strndup(g_bytes_get_data(body, NULL), g_bytes_get_size(body));

    g_autofree char *want = g_strconcat("Bearer ", fx->key, NULL);
    if (!fx->last_auth || strcmp(fx->last_auth, want) != 0) {
        const char *sent = fx->last_auth && g_str_has_prefix(fx->last_auth, "Bearer ")
                               ? fx->last_auth + 7 : "";
        g_autofree char *js = g_strdup_printf(
            "{\"error\":{\"message\":\"Incorrect API key provided: %s\",\"type\":\"invalid_request_error\"}}",
            sent);
        reply(msg, 401, js);
        return;
    }
    if (strcmp(path, "/v1/models") == 0 && strcmp(soup_server_message_get_method(msg), "GET") == 0)
        reply(msg, 200, "{\"object\":\"list\",\"data\":[{\"id\":\"ok\",\"object\":\"model\"}]}");
    else if (strcmp(path, "/v1/chat/completions") == 0)
        chat(fx, msg);
    else
        reply(msg, 404, "{\"error\":{\"message\":\"no such route\"}}");
}

fixture_openai *fixture_openai_new(const char *key)
{
    fixture_openai *fx = g_new0(fixture_openai, 1);
    fx->key = g_strdup(key);
    fx->server = soup_server_new(NULL, NULL);
    soup_server_add_handler(fx->server, "/v1", handle, fx, NULL);
    g_autoptr(GError) e = NULL;
    g_autoptr(GInetAddress) lo = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    g_autoptr(GSocketAddress) addr = g_inet_socket_address_new(lo, 0);
    if (!soup_server_listen(fx->server, addr, 0, &e))
        g_error("fixture: listen: %s", e->message);
    GSList *uris = soup_server_get_uris(fx->server);
    fx->port = (guint)g_uri_get_port(uris->data);
    g_slist_free_full(uris, (GDestroyNotify)g_uri_unref);
    fx->base_url = g_strdup_printf("http://127.0.0.1:%u/v1", fx->port);
    return fx;
}

void fixture_openai_free(fixture_openai *fx)
{
    if (!fx)
        return;
    while (fx->streams)
        fstream_free(fx->streams->data);
    soup_server_disconnect(fx->server);
    g_object_unref(fx->server);
    g_free(fx->key);
    g_free(fx->base_url);
    g_free(fx->last_body);
    g_free(fx->last_auth);
    g_free(fx);
}

/*
 * chat-remote.c — `moedesk-cli chat --service URL`: the same terminal chat
 * as cmd-chat.c, but each turn is a streamed POST /v1/chat/completions to a
 * running moedesk-service, so the chat shares the service's loaded model,
 * its KV cache (the next turn reuses the previous one's prefix) and its
 * usage log (caller "cli"). Ctrl-C closes the connection, which the service
 * notices and cancels within one engine step.
 */
#include "cli.h"

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t remote_interrupted;

static void remote_on_sigint(int sig)
{
    (void)sig;
    remote_interrupted = 1;
    signal(SIGINT, remote_on_sigint);
}

static char *request_body(JsonArray *messages, const cli_remote_opts *o)
{
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "model");
    json_builder_add_string_value(b, o->model ? o->model : "");
    json_builder_set_member_name(b, "messages");
    json_builder_add_value(b, json_node_init_array(json_node_alloc(), messages));
    json_builder_set_member_name(b, "stream");
    json_builder_add_boolean_value(b, TRUE);
    json_builder_set_member_name(b, "stream_options");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "include_usage");
    json_builder_add_boolean_value(b, TRUE);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "max_tokens");
    json_builder_add_int_value(b, o->max_tokens);
    json_builder_set_member_name(b, "temperature");
    json_builder_add_double_value(b, o->temperature);
    json_builder_set_member_name(b, "top_p");
    json_builder_add_double_value(b, o->top_p);
    if (o->seed >= 0) {
        json_builder_set_member_name(b, "seed");
        json_builder_add_int_value(b, o->seed);
    }
    json_builder_end_object(b);
    JsonGenerator *g = json_generator_new();
    JsonNode *root = json_builder_get_root(b);
    json_generator_set_root(g, root);
    char *s = json_generator_to_data(g, NULL);
    json_node_unref(root);
    g_object_unref(g);
    g_object_unref(b);
    return s;
}

/* Streams one reply to stdout; returns it (NULL after an error, printed). */
static char *remote_turn(SoupSession *session, const char *url, JsonArray *messages,
                         const cli_remote_opts *o)
{
    char *body = request_body(messages, o);
    SoupMessage *msg = soup_message_new("POST", url);
    soup_message_headers_replace(soup_message_get_request_headers(msg), "X-MoeDesk-Caller",
                                 "cli");
    GBytes *bytes = g_bytes_new_take(body, strlen(body));
    soup_message_set_request_body_from_bytes(msg, "application/json", bytes);
    g_bytes_unref(bytes);
    GError *err = NULL;
    gint64 t0 = g_get_monotonic_time(), t_first = 0;
    GInputStream *in = soup_session_send(session, msg, NULL, &err);
    if (!in) {
        fprintf(stderr, "moedesk-cli chat: cannot reach the service at %s: %s\n", url,
                err->message);
        g_error_free(err);
        g_object_unref(msg);
        return NULL;
    }
    guint status = soup_message_get_status(msg);
    GDataInputStream *data = g_data_input_stream_new(in);
    GString *reply = g_string_new(NULL);
    gboolean ok = TRUE;
    gint64 prompt = -1, completion = -1, cached = -1;
    for (;;) {
        if (remote_interrupted)
            break;
        gsize n;
        char *line = g_data_input_stream_read_line_utf8(data, &n, NULL, &err);
        if (!line)
            break;
        if (status != 200) {
            g_string_append(reply, line);
            g_free(line);
            continue;
        }
        if (!g_str_has_prefix(line, "data: ") || !strcmp(line, "data: [DONE]")) {
            g_free(line);
            continue;
        }
        JsonParser *p = json_parser_new();
        if (json_parser_load_from_data(p, line + 6, -1, NULL) &&
            JSON_NODE_HOLDS_OBJECT(json_parser_get_root(p))) {
            JsonObject *ob = json_node_get_object(json_parser_get_root(p));
            if (json_object_has_member(ob, "error")) {
                JsonObject *e = json_object_get_object_member(ob, "error");
                fprintf(stderr, "\nmoedesk-cli chat: the service failed: %s\n",
                        e && json_object_has_member(e, "message")
                            ? json_object_get_string_member(e, "message")
                            : "unknown error");
                ok = FALSE;
            }
            JsonArray *choices = json_object_has_member(ob, "choices")
                                     ? json_object_get_array_member(ob, "choices")
                                     : NULL;
            if (choices && json_array_get_length(choices) > 0) {
                JsonObject *c = json_array_get_object_element(choices, 0);
                JsonObject *d = json_object_has_member(c, "delta")
                                    ? json_object_get_object_member(c, "delta")
                                    : NULL;
                if (d && json_object_has_member(d, "content") &&
                    JSON_NODE_HOLDS_VALUE(json_object_get_member(d, "content"))) {
                    const char *t = json_object_get_string_member(d, "content");
                    if (t && *t) {
                        if (!t_first)
                            t_first = g_get_monotonic_time();
                        fputs(t, stdout);
                        fflush(stdout);
                        g_string_append(reply, t);
                    }
                }
            }
            if (json_object_has_member(ob, "usage") &&
                JSON_NODE_HOLDS_OBJECT(json_object_get_member(ob, "usage"))) {
                JsonObject *u = json_object_get_object_member(ob, "usage");
                prompt = json_object_get_int_member_with_default(u, "prompt_tokens", -1);
                completion = json_object_get_int_member_with_default(u, "completion_tokens", -1);
                JsonObject *det = json_object_has_member(u, "prompt_tokens_details")
                                      ? json_object_get_object_member(u, "prompt_tokens_details")
                                      : NULL;
                if (det)
                    cached = json_object_get_int_member_with_default(det, "cached_tokens", -1);
            }
        }
        g_object_unref(p);
        g_free(line);
    }
    g_clear_error(&err);
    g_input_stream_close(G_INPUT_STREAM(data), NULL, NULL);
    g_object_unref(data);
    g_object_unref(in);
    g_object_unref(msg);
    if (status != 200) {
        fprintf(stderr, "moedesk-cli chat: the service answered %u: %s\n", status, reply->str);
        g_string_free(reply, TRUE);
        return NULL;
    }
    printf("\n");
    if (remote_interrupted)
        fprintf(stderr, "[stopped]\n");
    else if (completion >= 0) {
        double s = (g_get_monotonic_time() - t0) / 1e6;
        fprintf(stderr, "[%" G_GINT64_FORMAT " prompt tokens (%" G_GINT64_FORMAT
                " cached), %" G_GINT64_FORMAT " generated, first token %.0f ms, %.1f s]\n",
                prompt, cached, completion, t_first ? (t_first - t0) / 1e3 : 0.0, s);
    }
    if (!ok) {
        g_string_free(reply, TRUE);
        return NULL;
    }
    return g_string_free(reply, FALSE);
}

static void add_message(JsonArray *messages, const char *role, const char *content)
{
    JsonObject *m = json_object_new();
    json_object_set_string_member(m, "role", role);
    json_object_set_string_member(m, "content", content);
    json_array_add_object_element(messages, m);
}

int cli_chat_remote(const cli_remote_opts *o)
{
    char *base = g_strdup(o->service);
    while (*base && base[strlen(base) - 1] == '/')
        base[strlen(base) - 1] = '\0';
    char *url = g_strconcat(base, "/v1/chat/completions", NULL);
    SoupSession *session = soup_session_new_with_options("timeout", 0, "user-agent",
                                                         "moedesk-cli/" MOEDESK_VERSION, NULL);
    JsonArray *messages = json_array_new();
    if (o->system && *o->system)
        add_message(messages, "system", o->system);
    fprintf(stderr, "MoeDesk chat — %s at %s\n", o->model && *o->model ? o->model : "default model",
                base);
    if (o->model && strstr(o->model, "demo-random"))
        fprintf(stderr, "NOTE: this is the DEMO MODEL. Its weights are random: replies are noise.\n");
    fprintf(stderr, "Type a message and press Enter. /reset clears the conversation, /exit leaves.\n");
    signal(SIGINT, remote_on_sigint);
    int rc = 0;
    for (;;) {
        remote_interrupted = 0;
        fputs("> ", stdout);
        fflush(stdout);
        char *line = cli_read_line();
        if (!line || remote_interrupted) {
            printf("\n");
            g_free(line);
            break;
        }
        g_strstrip(line);
        if (!*line) {
            g_free(line);
            continue;
        }
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) {
            g_free(line);
            break;
        }
        if (!strcmp(line, "/reset")) {
            guint keep = (o->system && *o->system) ? 1 : 0;
            while (json_array_get_length(messages) > keep)
                json_array_remove_element(messages, json_array_get_length(messages) - 1);
            fprintf(stderr, "[conversation cleared]\n");
            g_free(line);
            continue;
        }
        if (line[0] == '/') {
            fprintf(stderr, "unknown command %s (use /reset or /exit)\n", line);
            g_free(line);
            continue;
        }
        add_message(messages, "user", line);
        char *reply = remote_turn(session, url, messages, o);
        if (reply) {
            add_message(messages, "assistant", reply);
            g_free(reply);
        } else {
            json_array_remove_element(messages, json_array_get_length(messages) - 1);
            rc = 1;
        }
        g_free(line);
    }
    signal(SIGINT, SIG_DFL);
    json_array_unref(messages);
    g_object_unref(session);
    g_free(url);
    g_free(base);
    return rc;
}

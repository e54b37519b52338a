/*
 * test-upstream.c — the upstream forwarder (app/service/upstream.h) against
 * an in-process OpenAI-compatible fixture (fixture-openai.c) on 127.0.0.1:
 * routing by prefix and glob, non-stream and SSE pass-through (byte for
 * byte what the client would have got from the upstream directly, the
 * usage-only chunk dropped unless asked for), usage numbers, the key only
 * in the Authorization header and never in anything returned, 401/4xx/5xx
 * mapping, an unreachable upstream, a stream cut or stalled mid-way, a slow
 * upstream hitting the idle timeout, and cancellation mid-stream closing
 * the upstream connection. Also the SSE splitter and redaction on their own.
 */
#include "fixture-openai.h"
#include "test.h"
#include "upstream-parse.h"
#include "upstream.h"

#define KEY "sk-test-0123456789abcdef"
#define WRONG_KEY "sk-wrong-9876543210fedcba"

typedef struct run {
    GMainLoop *loop;
    int n_head, n_data, n_done, order_errors;
    unsigned head_status;
    char *content_type, *retry_after, *head_kind;
    GByteArray *data;
    int64_t t_start, t_first_data, t_cancel, t_done;
    GCancellable *cancel;
    int cancel_after_data; /* cancel once this many on_data came; 0 = never */
    int data_after_cancel;
    /* The result, copied. */
    unsigned http_status, upstream_status;
    char *kind, *message, *finish, *name;
    int64_t prompt, cached, completion, ttfb, ttft, total;
} run;

static void on_head(const svc_upstream_head *h, void *user)
{
    run *r = user;
    if (r->n_head || r->n_data || r->n_done)
        r->order_errors++;
    r->n_head++;
    r->head_status = h->status;
    r->content_type = g_strdup(h->content_type);
    r->retry_after = g_strdup(h->retry_after);
    r->head_kind = g_strdup(h->error_kind);
}

static void on_data(GBytes *b, void *user)
{
    run *r = user;
    if (!r->n_head || r->n_done)
        r->order_errors++;
    if (r->t_cancel)
        r->data_after_cancel++;
    if (!r->n_data)
        r->t_first_data = g_get_monotonic_time();
    r->n_data++;
    g_byte_array_append(r->data, g_bytes_get_data(b, NULL), (guint)g_bytes_get_size(b));
    if (r->cancel_after_data && r->n_data == r->cancel_after_data) {
        r->t_cancel = g_get_monotonic_time();
        g_cancellable_cancel(r->cancel);
    }
}

static void on_done(const svc_upstream_result *res, void *user)
{
    run *r = user;
    r->n_done++;
    r->t_done = g_get_monotonic_time();
    r->http_status = res->http_status;
    r->upstream_status = res->upstream_status;
    r->kind = g_strdup(res->error_kind);
    r->message = res->error ? g_strdup(res->error->message) : NULL;
    r->finish = g_strdup(res->finish_reason);
    r->name = g_strdup(res->upstream_name);
    r->prompt = res->prompt_tokens;
    r->cached = res->cached_tokens;
    r->completion = res->completion_tokens;
    r->ttfb = res->ttfb_us;
    r->ttft = res->ttft_us;
    r->total = res->total_us;
    if (res->error)
        CHECK_EQ_STR(res->error_kind, svc_upstream_error_kind((svc_upstream_error)res->error->code));
    g_main_loop_quit(r->loop);
}

static gboolean give_up(gpointer data)
{
    run *r = data;
    fprintf(stderr, "timed out waiting for on_done\n");
    g_main_loop_quit(r->loop);
    return G_SOURCE_REMOVE;
}

static void run_clear(run *r)
{
    g_main_loop_unref(r->loop);
    g_byte_array_unref(r->data);
    g_object_unref(r->cancel);
    g_free(r->content_type);
    g_free(r->retry_after);
    g_free(r->head_kind);
    g_free(r->kind);
    g_free(r->message);
    g_free(r->finish);
    g_free(r->name);
}

/* Forwards `body_json` to `ups` and waits for on_done (at most 15 s). */
static void run_forward(run *r, svc_upstream_client *c, const svc_upstream *ups, const char *path,
                        const char *body_json, const char *model, gboolean stream)
{
    r->loop = g_main_loop_new(NULL, FALSE);
    r->data = g_byte_array_new();
    if (!r->cancel)
        r->cancel = g_cancellable_new();
    g_autoptr(JsonNode) body = body_json ? json_from_string(body_json, NULL) : NULL;
    svc_upstream_request req = { .path = path, .body = body, .model = model, .stream = stream };
    svc_upstream_events ev = { on_head, on_data, on_done, r };
    r->t_start = g_get_monotonic_time();
    svc_upstream_forward(c, ups, &req, &ev, r->cancel);
    CHECK_EQ_INT(r->n_done, 0); /* never synchronous */
    guint guard = g_timeout_add(15000, give_up, r);
    g_main_loop_run(r->loop);
    g_source_remove(guard);
    CHECK_EQ_INT(r->n_done, 1);
    CHECK_EQ_INT(r->order_errors, 0);
}

/* Neither the good nor the wrong key appears in anything the forwarder
 * handed out. */
static void check_no_key(const run *r)
{
    const char *keys[] = { KEY, WRONG_KEY };
    for (size_t i = 0; i < 2; i++) {
        const char *k = keys[i];
        CHECK(!r->message || !strstr(r->message, k));
        CHECK(!r->kind || !strstr(r->kind, k));
        CHECK(!r->finish || !strstr(r->finish, k));
        CHECK(!r->content_type || !strstr(r->content_type, k));
        CHECK(!r->name || !strstr(r->name, k));
        g_autofree char *d = g_strndup((const char *)r->data->data, r->data->len);
        CHECK(strlen(d) == r->data->len && !strstr(d, k));
    }
}

static char *data_str(const run *r)
{
    return g_strndup((const char *)r->data->data, r->data->len);
}

static const char CHAT[] =
    "{\"model\":\"alias\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
static const char CHAT_USAGE[] =
    "{\"model\":\"alias\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
    "\"stream\":true,\"stream_options\":{\"include_usage\":true}}";

static void test_match(void)
{
    char *pa[] = { "kimi-*", "qwen3-*", NULL };
    char *pb[] = { "*", NULL };
    svc_upstream ups[2] = {
        { .name = "cluster", .models = pa },
        { .name = "openrouter", .models = pb, .fallback = true },
    };
    const char *m = NULL;
    CHECK_EQ_INT(svc_upstream_match(ups, 2, "kimi-k2", &m), 0);
    CHECK_EQ_STR(m, "kimi-k2");
    CHECK_EQ_INT(svc_upstream_match(ups, 2, "openrouter/openai/gpt-4o", &m), 1);
    CHECK_EQ_STR(m, "openai/gpt-4o");
    CHECK_EQ_INT(svc_upstream_match(ups, 2, "cluster/llama", &m), 0);
    CHECK_EQ_STR(m, "llama");
    CHECK_EQ_INT(svc_upstream_match(ups, 2, "llama", &m), 1);
    CHECK_EQ_STR(m, "llama");
    CHECK_EQ_INT(svc_upstream_match(ups, 1, "llama", &m), -1);
    CHECK_EQ_INT(svc_upstream_match(ups, 1, "cluster/", &m), -1); /* nothing after the prefix */
    CHECK_EQ_INT(svc_upstream_match(ups, 1, "xkimi-k2", NULL), -1);
    CHECK_EQ_INT(svc_upstream_fallback(ups, 2), 1);
    CHECK_EQ_INT(svc_upstream_fallback(ups, 1), -1);

    svc_upstream owned = { .name = g_strdup("a"), .api_key = g_strdup(KEY),
                           .models = g_strdupv(pa), .base_url = g_strdup("http://x") };
    svc_upstream_clear(&owned);
    CHECK(owned.name == NULL && owned.api_key == NULL && owned.models == NULL);
    svc_upstream_clear(NULL);
}

static void test_parse(void)
{
    svc_sse_splitter s;
    svc_sse_splitter_init(&s);
    const char *in = "data: a\r\n\r\n: c\n\ndata: b\rdata: c\r\r";
    /* One byte at a time: every split point, including between \r and \n. */
    GString *out = g_string_new(NULL);
    int n = 0;
    for (size_t i = 0; in[i]; i++) {
        svc_sse_splitter_push(&s, in + i, 1);
        GBytes *ev;
        while ((ev = svc_sse_splitter_next(&s))) {
            g_string_append_len(out, g_bytes_get_data(ev, NULL), (gssize)g_bytes_get_size(ev));
            if (n == 0)
                CHECK_EQ_INT(g_bytes_get_size(ev), 11);
            n++;
            g_bytes_unref(ev);
        }
    }
    /* The last "\r\r" waits for a possible '\n'. */
    CHECK_EQ_INT(n, 2);
    svc_sse_splitter_push(&s, "x", 1);
    GBytes *last = svc_sse_splitter_next(&s);
    CHECK(last && g_bytes_get_size(last) == 17);
    if (last) {
        g_autofree char *d = svc_sse_event_data(g_bytes_get_data(last, NULL), g_bytes_get_size(last));
        CHECK_EQ_STR(d, "b\nc");
        g_string_append_len(out, g_bytes_get_data(last, NULL), (gssize)g_bytes_get_size(last));
        g_bytes_unref(last);
    }
    CHECK_EQ_INT(svc_sse_splitter_pending(&s), 1);
    CHECK_EQ_STR(out->str, in);
    g_string_free(out, TRUE);
    svc_sse_splitter_clear(&s);

    g_autofree char *r1 = svc_ups_redact_str("key " KEY " and " KEY "!", KEY);
    CHECK_EQ_STR(r1, "key [redacted] and [redacted]!");
    g_autofree char *r2 = svc_ups_redact_str("short abc", "abc"); /* under the minimum */
    CHECK_EQ_STR(r2, "short abc");

    svc_ups_chunk_info info;
    const char *j = "{\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,"
                    "\"cached_tokens\":3}}";
    CHECK(svc_ups_chunk_inspect(j, strlen(j), &info));
    CHECK(info.usage_only && !info.has_content);
    CHECK_EQ_INT(info.usage.prompt_tokens, 5);
    CHECK_EQ_INT(info.usage.cached_tokens, 3);
    CHECK_EQ_INT(info.usage.completion_tokens, 2);
    svc_ups_chunk_info_clear(&info);
    CHECK(!svc_ups_chunk_inspect("[1]", 3, &info));
    svc_ups_chunk_info_clear(&info);
}

static void test_non_stream(svc_upstream_client *c, fixture_openai *fx, svc_upstream *ups)
{
    run r = { 0 };
    run_forward(&r, c, ups, "/chat/completions", CHAT, "ok", FALSE);
    CHECK_EQ_INT(r.head_status, 200);
    CHECK_EQ_STR(r.content_type, "application/json");
    CHECK(r.kind == NULL);
    CHECK_EQ_INT(r.http_status, 200);
    CHECK_EQ_INT(r.n_data, 1);
    g_autofree char *d = data_str(&r);
    CHECK(strstr(d, "\"Hello world\"") != NULL);
    CHECK_EQ_INT(r.prompt, 11);
    CHECK_EQ_INT(r.cached, 4);
    CHECK_EQ_INT(r.completion, 3);
    CHECK_EQ_STR(r.finish, "stop");
    CHECK(r.ttfb > 0 && r.ttfb <= r.total);
    CHECK_EQ_INT(r.ttft, -1);
    CHECK_EQ_STR(r.name, "cluster");
    CHECK_EQ_STR(fx->last_auth, "Bearer " KEY);
    CHECK(strstr(fx->last_body, "\"model\":\"ok\"") != NULL);
    CHECK(strstr(fx->last_body, "stream_options") == NULL);
    check_no_key(&r);
    run_clear(&r);

    /* GET /models passes through. */
    run g = { 0 };
    run_forward(&g, c, ups, "/models", NULL, NULL, FALSE);
    CHECK_EQ_INT(g.head_status, 200);
    g_autofree char *gd = data_str(&g);
    CHECK(strstr(gd, "\"object\":\"list\"") != NULL);
    run_clear(&g);
}

static void test_stream(svc_upstream_client *c, fixture_openai *fx, svc_upstream *ups,
                        const char *model, gboolean client_usage)
{
    run r = { 0 };
    run_forward(&r, c, ups, "/chat/completions", client_usage ? CHAT_USAGE : CHAT, model, TRUE);
    CHECK_EQ_INT(r.head_status, 200);
    CHECK(r.head_kind == NULL);
    CHECK_EQ_STR(r.content_type, "text/event-stream");
    CHECK_MSG(r.kind == NULL, "%s: %s", r.kind, r.message ? r.message : "");
    /* Exactly what the upstream would have sent the client itself. */
    g_autofree char *want = fixture_openai_stream_text(model, client_usage);
    g_autofree char *got = data_str(&r);
    CHECK_EQ_STR(got, want);
    /* Passed on as it came: one on_data per event, the first long before
     * the end. */
    CHECK_EQ_INT(r.n_data, client_usage ? 7 : 6);
    if (strcmp(model, "burst") != 0)
        CHECK(r.t_done - r.t_first_data >= 3 * FIXTURE_CHUNK_MS * 1000);
    /* The upstream was asked for usage either way, and it was read. */
    CHECK(strstr(fx->last_body, "\"include_usage\":true") != NULL);
    CHECK(strstr(fx->last_body, "\"stream\":true") != NULL);
    CHECK_EQ_INT(r.prompt, 11);
    CHECK_EQ_INT(r.cached, 4);
    CHECK_EQ_INT(r.completion, 3);
    CHECK_EQ_STR(r.finish, "stop");
    CHECK(r.ttfb > 0 && r.ttft > r.ttfb && r.ttft < r.total);
    check_no_key(&r);
    run_clear(&r);
}

static void test_errors(svc_upstream_client *c, fixture_openai *fx, svc_upstream *ups)
{
    /* The upstream refuses our key and echoes it back. */
    svc_upstream bad = *ups;
    bad.api_key = WRONG_KEY;
    run a = { 0 };
    run_forward(&a, c, &bad, "/chat/completions", CHAT, "ok", FALSE);
    CHECK_EQ_STR(fx->last_auth, "Bearer " WRONG_KEY);
    CHECK_EQ_STR(a.kind, "upstream_auth");
    CHECK_EQ_INT(a.head_status, 502);
    CHECK_EQ_STR(a.head_kind, "upstream_auth");
    CHECK_EQ_INT(a.http_status, 502);
    CHECK_EQ_INT(a.upstream_status, 401);
    CHECK(a.message && strstr(a.message, "cluster") && strstr(a.message, fx->base_url) &&
          strstr(a.message, "[redacted]"));
    g_autofree char *ad = data_str(&a);
    CHECK(strstr(ad, "\"code\":\"upstream_auth\"") != NULL);
    check_no_key(&a);
    run_clear(&a);

    /* The same echo through a 4xx that is passed through as is. */
    run b = { 0 };
    run_forward(&b, c, ups, "/chat/completions", CHAT, "bad", FALSE);
    CHECK_EQ_INT(b.head_status, 400);
    CHECK(b.head_kind == NULL); /* the upstream's own answer */
    CHECK_EQ_STR(b.kind, "upstream_status_4xx");
    g_autofree char *bd = data_str(&b);
    CHECK(strstr(bd, "bad temperature") != NULL);
    run_clear(&b);

    run e5 = { 0 };
    run_forward(&e5, c, ups, "/chat/completions", CHAT, "fail500", TRUE);
    CHECK_EQ_STR(e5.kind, "upstream_status_5xx");
    CHECK_EQ_INT(e5.head_status, 502);
    CHECK_EQ_INT(e5.upstream_status, 500);
    CHECK(e5.message && strstr(e5.message, "boom") && strstr(e5.message, "HTTP 500"));
    CHECK_EQ_STR(e5.content_type, "application/json");
    check_no_key(&e5);
    run_clear(&e5);

    run e3 = { 0 };
    run_forward(&e3, c, ups, "/chat/completions", CHAT, "fail503", FALSE);
    CHECK_EQ_INT(e3.head_status, 503);
    CHECK_EQ_STR(e3.retry_after, "7");
    CHECK_EQ_STR(e3.kind, "upstream_status_5xx");
    run_clear(&e3);

    /* Nobody listening. */
    GSocket *sock = g_socket_new(G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
    g_autoptr(GInetAddress) lo = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    g_autoptr(GSocketAddress) any = g_inet_socket_address_new(lo, 0);
    CHECK(g_socket_bind(sock, any, TRUE, NULL));
    g_autoptr(GSocketAddress) bound = g_socket_get_local_address(sock, NULL);
    guint port = g_inet_socket_address_get_port(G_INET_SOCKET_ADDRESS(bound));
    g_object_unref(sock); /* closed: the port refuses connections */
    svc_upstream gone = *ups;
    g_autofree char *url = g_strdup_printf("http://127.0.0.1:%u/v1", port);
    gone.base_url = url;
    run u = { 0 };
    run_forward(&u, c, &gone, "/chat/completions", CHAT, "ok", TRUE);
    CHECK_EQ_STR(u.kind, "upstream_unreachable");
    CHECK_EQ_INT(u.head_status, 502);
    CHECK_EQ_STR(u.head_kind, "upstream_unreachable");
    CHECK_EQ_INT(u.upstream_status, 0);
    CHECK(u.message && strstr(u.message, "cluster") && strstr(u.message, url));
    check_no_key(&u);
    run_clear(&u);

    /* A base URL that is not http(s): reported through the callbacks. */
    svc_upstream ftp = *ups;
    ftp.base_url = "ftp://127.0.0.1/v1";
    run f = { 0 };
    run_forward(&f, c, &ftp, "/chat/completions", CHAT, "ok", FALSE);
    CHECK_EQ_STR(f.kind, "upstream_config");
    run_clear(&f);
}

static void test_faults(svc_upstream_client *c, fixture_openai *fx, svc_upstream *ups)
{
    (void)fx;
    /* Cut after two events: those two, then one error event. */
    run cut = { 0 };
    run_forward(&cut, c, ups, "/chat/completions", CHAT, "cut", TRUE);
    CHECK_EQ_INT(cut.head_status, 200);
    CHECK_EQ_STR(cut.kind, "upstream_stream_cut");
    g_autofree char *full = fixture_openai_stream_text("ok", FALSE);
    g_autofree char *cd = data_str(&cut);
    const char *second_end = strstr(strstr(full, "\n\n") + 2, "\n\n") + 2;
    size_t two = (size_t)(second_end - full);
    CHECK(strlen(cd) > two && strncmp(cd, full, two) == 0);
    CHECK(g_str_has_prefix(cd + two, "data: {\"error\":") && g_str_has_suffix(cd, "\n\n") &&
          strstr(cd + two, "upstream_stream_cut"));
    check_no_key(&cut);
    run_clear(&cut);

    /* Stalled mid-stream: the idle timeout ends it. */
    svc_upstream quick = *ups;
    quick.idle_timeout_ms = 300;
    run st = { 0 };
    run_forward(&st, c, &quick, "/chat/completions", CHAT, "stall", TRUE);
    CHECK_EQ_STR(st.kind, "upstream_timeout");
    CHECK_EQ_INT(st.head_status, 200);
    g_autofree char *sd = data_str(&st);
    CHECK(strstr(sd, "upstream_timeout") && strstr(sd, "300 ms"));
    CHECK(st.total >= 300000 && st.total < 3000000);
    check_no_key(&st);
    run_clear(&st);

    /* No headers in time: a 504 with an error body. */
    run sl = { 0 };
    run_forward(&sl, c, &quick, "/chat/completions", CHAT, "slow", FALSE);
    CHECK_EQ_STR(sl.kind, "upstream_timeout");
    CHECK_EQ_INT(sl.head_status, 504);
    CHECK(sl.total >= 300000 && sl.total < 3000000);
    CHECK(sl.message && strstr(sl.message, "cluster"));
    run_clear(&sl);
}

static gboolean tick_cb(gpointer data)
{
    (void)data;
    return G_SOURCE_CONTINUE;
}

static void test_cancel(svc_upstream_client *c, fixture_openai *fx, svc_upstream *ups)
{
    int aborted = fx->n_aborted;
    run r = { 0 };
    r.cancel_after_data = 3;
    run_forward(&r, c, ups, "/chat/completions", CHAT, "long", TRUE);
    CHECK_EQ_STR(r.kind, "cancelled");
    CHECK_EQ_INT(r.http_status, 499);
    CHECK_EQ_INT(r.n_data, 3);
    CHECK_EQ_INT(r.data_after_cancel, 0);
    /* Promptly: the next main-loop turn, not the next upstream chunk (the
     * bound leaves room for a loaded CI machine). */
    CHECK_MSG(r.t_done - r.t_cancel < 500000, "on_done %lld us after cancel",
              (long long)(r.t_done - r.t_cancel));
    /* The fixture notices the dropped connection when it writes next
     * (FIXTURE_CHUNK_MS later), long before the stream would have ended. */
    int64_t deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
    guint tick = g_timeout_add(50, tick_cb, NULL); /* so the loop wakes */
    while (fx->n_aborted == aborted && g_get_monotonic_time() < deadline)
        g_main_context_iteration(NULL, TRUE);
    g_source_remove(tick);
    CHECK_EQ_INT(fx->n_aborted, aborted + 1);
    CHECK(g_get_monotonic_time() - r.t_cancel < FIXTURE_LONG_CHUNKS * FIXTURE_CHUNK_MS * 1000);
    run_clear(&r);

    /* Cancelled from on_data while more events of the same read wait:
     * none of them is passed on. */
    run b = { 0 };
    b.cancel_after_data = 1;
    run_forward(&b, c, ups, "/chat/completions", CHAT, "burst", TRUE);
    CHECK_EQ_STR(b.kind, "cancelled");
    CHECK_EQ_INT(b.n_data, 1);
    CHECK_EQ_INT(b.data_after_cancel, 0);
    run_clear(&b);

    /* Cancelled before it starts: no head, no data, one on_done. */
    run p = { 0 };
    p.cancel = g_cancellable_new();
    g_cancellable_cancel(p.cancel);
    run_forward(&p, c, ups, "/chat/completions", CHAT, "ok", TRUE);
    CHECK_EQ_STR(p.kind, "cancelled");
    CHECK_EQ_INT(p.n_head, 0);
    CHECK_EQ_INT(p.n_data, 0);
    run_clear(&p);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    test_match();
    test_parse();

    fixture_openai *fx = fixture_openai_new(KEY);
    svc_upstream_client *c = svc_upstream_client_new(NULL);
    char *pats[] = { "*", NULL };
    svc_upstream ups = { .name = "cluster", .base_url = fx->base_url, .api_key = KEY,
                         .models = pats };
    test_non_stream(c, fx, &ups);
    test_stream(c, fx, &ups, "ok", FALSE);
    test_stream(c, fx, &ups, "ok", TRUE);
    test_stream(c, fx, &ups, "crlf", FALSE);
    test_stream(c, fx, &ups, "burst", FALSE);
    test_errors(c, fx, &ups);
    test_faults(c, fx, &ups);
    test_cancel(c, fx, &ups);
    svc_upstream_client_free(c);
    fixture_openai_free(fx);
    TEST_DONE();
}

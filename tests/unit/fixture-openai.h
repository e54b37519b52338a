/*
 * fixture-openai.h — a tiny OpenAI-compatible server for the upstream
 * forwarder's tests (test-upstream.c): a SoupServer on 127.0.0.1, port 0,
 * serving in the test's own thread on the thread-default main context.
 *
 *   GET  /v1/models             {"object":"list","data":[...]}
 *   POST /v1/chat/completions   behaviour chosen by the request's "model":
 *     "ok"        200; non-stream: one completion with usage (11 prompt,
 *                 4 cached, 3 completion); stream: role, "Hel", "lo", " world",
 *                 finish "stop" chunks FIXTURE_CHUNK_MS apart, then the usage
 *                 chunk (choices []) only when stream_options.include_usage
 *                 is true, then "data: [DONE]"
 *     "long"      stream of FIXTURE_LONG_CHUNKS content chunks
 *     "fail500"   500 {"error":{"message":"boom"}}
 *     "fail503"   503 with Retry-After: 7
 *     "bad"       400 {"error":{"message":"bad temperature"}}
 *     "cut"       stream: two chunks, then the socket is shut down
 *     "stall"     stream: one chunk, then nothing (connection kept open)
 *     "slow"      headers only after 5 s
 *     "crlf"      stream whose events end in "\r\n\r\n", split mid-event
 *     "burst"     the "ok" stream's events all in one write
 *   Every route checks "Authorization: Bearer KEY" first: a wrong or missing
 *   key gets 401 with a message that echoes the key it was sent (as OpenAI
 *   does, partly), so the tests can check the forwarder redacts it.
 */
#ifndef MOEDESK_FIXTURE_OPENAI_H
#define MOEDESK_FIXTURE_OPENAI_H

#include <libsoup/soup.h>

#define FIXTURE_CHUNK_MS 30
#define FIXTURE_LONG_CHUNKS 60

typedef struct fixture_openai {
    SoupServer *server;
    guint port;
    char *key;           /* the key it accepts */
    char *base_url;      /* "http://127.0.0.1:PORT/v1" */
    /* What the last request carried. */
    char *last_body;
    char *last_auth;
    int n_requests;
    /* Streams the client dropped before they completed ("finished" or
     * "disconnected" came first). */
    int n_aborted;
    GList *streams;      /* in flight */
} fixture_openai;

fixture_openai *fixture_openai_new(const char *key);
void fixture_openai_free(fixture_openai *fx);
/* The whole SSE text the fixture streams for `model` ("ok", "long",
 * "crlf"), with or without the usage chunk; owned. */
char *fixture_openai_stream_text(const char *model, gboolean include_usage);

#endif /* MOEDESK_FIXTURE_OPENAI_H */

/*
 * http.h — the HTTP pieces the hub client and the download manager share:
 * one SoupSession setup, a GET that follows redirects itself (so a token
 * never leaves the origin it was meant for), and the retry policy.
 *
 * Proxies: the session uses GLib's default GProxyResolver, which follows the
 * desktop's proxy settings (GNOME settings, or the http_proxy/https_proxy/
 * no_proxy environment variables through libproxy or GLib's fallback) on
 * Linux and the system (WinINet) settings on Windows. Nothing here sets a
 * proxy of its own.
 *
 * Retry policy (downloads and listings): timeouts, connection failures and
 * resets, cut-off bodies and 5xx answers are retried with exponential
 * backoff: base x 2^attempt, capped at 60 s, with +-25% jitter, at most
 * MOEDESK_RETRY_ATTEMPTS attempts (default 6; base MOEDESK_RETRY_BASE_MS,
 * default 1000). A 429 or 503 with Retry-After (seconds or an HTTP date) waits
 * exactly that long (at most 15 minutes). Other 4xx are not retried.
 */
#ifndef MOEDESK_HTTP_H
#define MOEDESK_HTTP_H

#include <gio/gio.h>
#include <libsoup/soup.h>

G_BEGIN_DECLS

/* A session with MoeDesk's user agent and an I/O timeout of
 * MOEDESK_HTTP_TIMEOUT_S seconds (default 60). */
SoupSession *moe_http_session_new(void);

/* Called on every message before it is sent (each redirect hop too), to add
 * headers such as Range. */
typedef void (*MoeHttpConfigureFunc)(SoupMessage *msg, gpointer user_data);

/* GETs `url`, following up to 10 redirects. `token` (may be NULL) is sent
 * as "Authorization: Bearer" only while the request's origin (scheme, host,
 * port) equals that of `token_url`. On success the result is the final
 * message and its body stream, whatever its status. */
void moe_http_get_async(SoupSession *session, const char *url, const char *token,
                        const char *token_url, MoeHttpConfigureFunc configure,
                        gpointer configure_data, GCancellable *cancellable,
                        GAsyncReadyCallback callback, gpointer user_data);
/* Returns the body stream (owned) and sets *msg (owned) to the final
 * message. */
GInputStream *moe_http_get_finish(GAsyncResult *result, SoupMessage **msg, GError **error);

/* True for errors worth another attempt: timeouts, refused/reset/closed
 * connections, a body cut short, unresolvable names (a network blip). */
gboolean moe_http_error_is_transient(const GError *error);
/* True for statuses worth another attempt: 408, 429, 5xx. */
gboolean moe_http_status_is_transient(guint status);

/* Maximum attempts and the wait before attempt `attempt` (1 = the first
 * retry) in milliseconds, honouring Retry-After in `headers` (may be NULL);
 * -1 when Retry-After asks for longer than the 15-minute cap. */
guint  moe_http_max_attempts(void);
gint64 moe_http_retry_delay_ms(guint attempt, SoupMessageHeaders *headers);
/* Parses a Retry-After value (delta seconds or HTTP date) into ms from now;
 * -1 if absent or unparsable. */
gint64 moe_http_parse_retry_after(const char *value);

G_END_DECLS

#endif /* MOEDESK_HTTP_H */

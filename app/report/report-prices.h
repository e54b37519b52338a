/*
 * report-prices.h — cloud API prices the cost model uses: the table shipped
 * in resources/prices.json (compiled into the binary as a GResource), with
 * the user's own file (prices.json in the config dir) laid over it entry by
 * entry. Prices are US dollars per million tokens, with separate input,
 * cached-input and output rates; each entry carries its source URL, the
 * date it was checked and whether the figure was confirmed at the source.
 *
 * A route in the usage log ("moonshot", "openrouter", a cluster's name) is
 * a provider here; its model is looked up exactly, then as "*" (a flat rate
 * for everything on that provider, handy for a self-hosted cluster).
 */
#ifndef MOEDESK_REPORT_PRICES_H
#define MOEDESK_REPORT_PRICES_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct report_price {
    char *provider;
    char *model;
    double input;          /* USD / 1M prompt tokens not served from a cache */
    double cached_input;   /* USD / 1M cached prompt tokens (= input when unknown) */
    double output;         /* USD / 1M completion tokens */
    char *source;          /* URL */
    char *checked;         /* date looked up, YYYY-MM-DD */
    char *note;            /* where the figure came from, caveats (may be NULL) */
    gboolean confirmed;    /* read at the provider's own page */
    gboolean from_user;    /* came from the user's file */
} report_price;

typedef struct report_prices report_prices;

/*
 * Load the built-in table, then `user_path` (NULL: <config dir>/prices.json)
 * over it. A missing user file is fine; a malformed one is an error naming
 * the file and the entry.
 */
report_prices *report_prices_load(const char *user_path, GError **error);
void report_prices_free(report_prices *prices);

/* Parse one prices document (exposed for tests); entries are appended. */
gboolean report_prices_add_json(report_prices *prices, const char *json, gssize len,
                                const char *what, gboolean from_user, GError **error);

const report_price *report_prices_find(const report_prices *prices, const char *provider,
                                       const char *model);
/* "provider/model" (model may contain further slashes). */
const report_price *report_prices_find_key(const report_prices *prices, const char *key);

guint report_prices_count(const report_prices *prices);
const report_price *report_prices_get(const report_prices *prices, guint i);
const char *report_prices_user_path(const report_prices *prices);

/* USD for these tokens at this price (prompt includes cached). */
double report_price_usd(const report_price *p, gint64 prompt_tokens, gint64 cached_tokens,
                        gint64 completion_tokens);

G_END_DECLS

#endif /* MOEDESK_REPORT_PRICES_H */

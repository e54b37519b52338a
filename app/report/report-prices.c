/*
 * report-prices.c — loading and looking up the API price table. The
 * built-in table is resources/prices.json, compiled in as a GResource so an
 * installed binary never depends on a data path; the user's file overrides
 * entries with the same provider and model and adds new ones.
 */
#include "report-prices.h"
#include "report-error.h"
#include "report-settings.h"
#include "report-resources.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#define PRICES_RESOURCE "/org/moedesk/report/prices.json"

struct report_prices {
    GPtrArray *entries;   /* report_price*, owned */
    char *user_path;
};

static void price_free(gpointer data)
{
    report_price *p = data;
    g_free(p->provider);
    g_free(p->model);
    g_free(p->source);
    g_free(p->checked);
    g_free(p->note);
    g_free(p);
}

void report_prices_free(report_prices *prices)
{
    if (!prices)
        return;
    g_ptr_array_unref(prices->entries);
    g_free(prices->user_path);
    g_free(prices);
}

static gboolean bad_entry(GError **error, const char *what, guint i, const char *why)
{
    g_set_error(error, REPORT_ERROR, REPORT_ERROR_PRICES, "%s: entries[%u]: %s", what, i, why);
    return FALSE;
}

static const char *member_string(JsonObject *o, const char *name)
{
    JsonNode *n = json_object_get_member(o, name);
    if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING)
        return NULL;
    return json_node_get_string(n);
}

/* A price member: a non-negative number, or (optional members) absent/null -> -1. */
static gboolean member_price(JsonObject *o, const char *name, gboolean optional, double *out)
{
    JsonNode *n = json_object_get_member(o, name);
    if (!n || JSON_NODE_HOLDS_NULL(n)) {
        *out = -1;
        return optional;
    }
    if (!JSON_NODE_HOLDS_VALUE(n))
        return FALSE;
    GType t = json_node_get_value_type(n);
    if (t != G_TYPE_DOUBLE && t != G_TYPE_INT64)
        return FALSE;
    *out = json_node_get_double(n);
    return isfinite(*out) && *out >= 0;
}

static void put_entry(report_prices *prices, report_price *p)
{
    for (guint i = 0; i < prices->entries->len; i++) {
        report_price *old = prices->entries->pdata[i];
        if (g_str_equal(old->provider, p->provider) && g_str_equal(old->model, p->model)) {
            price_free(old);
            prices->entries->pdata[i] = p;
            return;
        }
    }
    g_ptr_array_add(prices->entries, p);
}

gboolean report_prices_add_json(report_prices *prices, const char *json, gssize len,
                                const char *what, gboolean from_user, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) err = NULL;
    if (!json_parser_load_from_data(parser, json, len, &err)) {
        g_set_error(error, REPORT_ERROR, REPORT_ERROR_PRICES, "%s: %s", what, err->message);
        return FALSE;
    }
    JsonNode *root = json_parser_get_root(parser);
    JsonObject *top = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    JsonNode *list = top ? json_object_get_member(top, "entries") : NULL;
    if (!list || !JSON_NODE_HOLDS_ARRAY(list)) {
        g_set_error(error, REPORT_ERROR, REPORT_ERROR_PRICES,
                    "%s: expected an object with an \"entries\" array", what);
        return FALSE;
    }
    JsonArray *arr = json_node_get_array(list);
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        JsonNode *en = json_array_get_element(arr, i);
        if (!JSON_NODE_HOLDS_OBJECT(en))
            return bad_entry(error, what, i, "not an object");
        JsonObject *o = json_node_get_object(en);
        const char *provider = member_string(o, "provider");
        const char *model = member_string(o, "model");
        if (!provider || !provider[0] || !model || !model[0])
            return bad_entry(error, what, i, "needs string \"provider\" and \"model\"");
        double in, cached, out;
        if (!member_price(o, "input", FALSE, &in) || !member_price(o, "output", FALSE, &out) ||
            !member_price(o, "cached_input", TRUE, &cached))
            return bad_entry(error, what, i,
                             "\"input\" and \"output\" must be non-negative numbers "
                             "(USD per 1M tokens); \"cached_input\" a number or null");
        report_price *p = g_new0(report_price, 1);
        p->provider = g_strdup(provider);
        p->model = g_strdup(model);
        p->input = in;
        p->cached_input = cached < 0 ? in : cached;
        p->output = out;
        p->source = g_strdup(member_string(o, "source") ? member_string(o, "source") : "");
        p->checked = g_strdup(member_string(o, "checked") ? member_string(o, "checked") : "");
        p->note = g_strdup(member_string(o, "note"));
        JsonNode *conf = json_object_get_member(o, "confirmed");
        p->confirmed = conf && JSON_NODE_HOLDS_VALUE(conf) &&
                       json_node_get_value_type(conf) == G_TYPE_BOOLEAN &&
                       json_node_get_boolean(conf);
        p->from_user = from_user;
        put_entry(prices, p);
    }
    return TRUE;
}

report_prices *report_prices_load(const char *user_path, GError **error)
{
    report_prices *prices = g_new0(report_prices, 1);
    prices->entries = g_ptr_array_new_with_free_func(price_free);
    g_autoptr(GBytes) builtin = g_resource_lookup_data(moedesk_report_get_resource(),
                                                       PRICES_RESOURCE, 0, NULL);
    gsize len = 0;
    const char *data = builtin ? g_bytes_get_data(builtin, &len) : NULL;
    if (!data || !report_prices_add_json(prices, data, (gssize)len,
                                         "built-in prices.json", FALSE, error)) {
        if (!data)
            g_set_error(error, REPORT_ERROR, REPORT_ERROR_PRICES,
                        "built-in prices.json missing from the binary");
        report_prices_free(prices);
        return NULL;
    }
    if (user_path) {
        prices->user_path = g_strdup(user_path);
    } else {
        g_autofree char *dir = report_config_dir();
        prices->user_path = g_build_filename(dir, "prices.json", NULL);
    }
    g_autofree char *text = NULL;
    gsize text_len = 0;
    g_autoptr(GError) err = NULL;
    if (!g_file_get_contents(prices->user_path, &text, &text_len, &err)) {
        if (!g_error_matches(err, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
            g_set_error(error, REPORT_ERROR, REPORT_ERROR_PRICES, "%s: %s",
                        prices->user_path, err->message);
            report_prices_free(prices);
            return NULL;
        }
    } else if (!report_prices_add_json(prices, text, (gssize)text_len, prices->user_path,
                                       TRUE, error)) {
        report_prices_free(prices);
        return NULL;
    }
    return prices;
}

const report_price *report_prices_find(const report_prices *prices, const char *provider,
                                       const char *model)
{
    const report_price *wildcard = NULL;
    for (guint i = 0; i < prices->entries->len; i++) {
        const report_price *p = prices->entries->pdata[i];
        if (!g_str_equal(p->provider, provider))
            continue;
        if (g_str_equal(p->model, model))
            return p;
        if (g_str_equal(p->model, "*"))
            wildcard = p;
    }
    return wildcard;
}

const report_price *report_prices_find_key(const report_prices *prices, const char *key)
{
    const char *slash = strchr(key, '/');
    if (!slash)
        return NULL;
    g_autofree char *provider = g_strndup(key, (gsize)(slash - key));
    return report_prices_find(prices, provider, slash + 1);
}

guint report_prices_count(const report_prices *prices)
{
    return prices->entries->len;
}

const report_price *report_prices_get(const report_prices *prices, guint i)
{
    return prices->entries->pdata[i];
}

const char *report_prices_user_path(const report_prices *prices)
{
    return prices->user_path;
}

double report_price_usd(const report_price *p, gint64 prompt_tokens, gint64 cached_tokens,
                        gint64 completion_tokens)
{
    return ((double)(prompt_tokens - cached_tokens) * p->input +
            (double)cached_tokens * p->cached_input +
            (double)completion_tokens * p->output) / 1e6;
}

/*
 * report-settings.c — defaults and the [report] section of settings.ini.
 * See report-settings.h for the keys. Validation errors name the file and
 * the key so a user can fix a typo without reading code.
 */
#include "report-settings.h"
#include "report-error.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK(moedesk-report-error-quark, report_error)

static const char *const default_compare[] = {
    "openai/gpt-5.4-mini",
    "deepseek/deepseek-v4-flash",
    "moonshot/kimi-k2.6",
    "openrouter/qwen/qwen3-30b-a3b-instruct-2507",
    NULL,
};

report_settings *report_settings_new(void)
{
    report_settings *s = g_new0(report_settings, 1);
    s->timezone = g_strdup("");
    s->tz = g_time_zone_new_local();
    s->week_start = G_DATE_MONDAY;
    s->currency = g_strdup("USD");
    s->usd_rate = 1.0;
    s->hardware_price = 2500.0;
    s->amortisation_months = 36.0;
    s->gpu_watts = 350.0;
    s->kwh_price = 0.30;
    s->fixed_monthly = 0.0;
    s->compare = g_strdupv((char **)default_compare);
    s->sensitivity = g_strdup("normal");
    s->api_below_tokens = 1e8;
    s->local_above_tokens = 5e8;
    s->alert_pct = 30.0;
    s->trend_min_pct = 1.0;
    s->tail_rows = 10;
    return s;
}

void report_settings_free(report_settings *s)
{
    if (!s)
        return;
    g_free(s->timezone);
    if (s->tz)
        g_time_zone_unref(s->tz);
    g_free(s->currency);
    g_strfreev(s->compare);
    g_free(s->sensitivity);
    g_free(s->path);
    g_free(s);
}

char *report_config_dir(void)
{
    const char *env = g_getenv("MOEDESK_CONFIG_DIR");
    if (env && env[0])
        return g_strdup(env);
    return g_build_filename(g_get_user_config_dir(), "moedesk", NULL);
}

double report_settings_fixed_per_week(const report_settings *s)
{
    double monthly = s->hardware_price / s->amortisation_months + s->fixed_monthly;
    return monthly / REPORT_WEEKS_PER_MONTH;
}

static gboolean bad_value(GError **error, const char *path, const char *key,
                          const char *value, const char *expected)
{
    g_set_error(error, REPORT_ERROR, REPORT_ERROR_SETTINGS,
                "%s: [report] %s = '%s': %s", path, key, value, expected);
    return FALSE;
}

/* Read a number key if present, checking lo <= v <= hi. */
static gboolean get_double(GKeyFile *kf, const char *path, const char *key, double lo,
                           double hi, double *out, GError **error)
{
    if (!g_key_file_has_key(kf, "report", key, NULL))
        return TRUE;
    g_autofree char *raw = g_key_file_get_value(kf, "report", key, NULL);
    g_strstrip(raw);
    char *end = NULL;
    double v = g_ascii_strtod(raw, &end);
    if (!raw[0] || *end || !isfinite(v))
        return bad_value(error, path, key, raw, "not a number");
    if (v < lo || v > hi) {
        g_autofree char *range = g_strdup_printf("must be between %g and %g", lo, hi);
        return bad_value(error, path, key, raw, range);
    }
    *out = v;
    return TRUE;
}

static gboolean get_string(GKeyFile *kf, const char *key, char **out)
{
    if (!g_key_file_has_key(kf, "report", key, NULL))
        return FALSE;
    g_free(*out);
    *out = g_key_file_get_string(kf, "report", key, NULL);
    if (!*out)
        *out = g_strdup("");
    g_strstrip(*out);
    return TRUE;
}

static gboolean parse_weekday(const char *s, GDateWeekday *out)
{
    static const char *const names[] = {"monday", "tuesday", "wednesday", "thursday",
                                        "friday", "saturday", "sunday"};
    for (guint i = 0; i < G_N_ELEMENTS(names); i++)
        if (g_ascii_strcasecmp(s, names[i]) == 0) {
            *out = (GDateWeekday)(G_DATE_MONDAY + i);
            return TRUE;
        }
    return FALSE;
}

gboolean report_settings_load(report_settings *s, const char *path, GError **error)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) err = NULL;
    if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &err)) {
        if (g_error_matches(err, G_FILE_ERROR, G_FILE_ERROR_NOENT))
            return TRUE;
        g_set_error(error, REPORT_ERROR, REPORT_ERROR_SETTINGS, "%s: %s", path, err->message);
        return FALSE;
    }
    g_free(s->path);
    s->path = g_strdup(path);
    if (!g_key_file_has_group(kf, "report"))
        return TRUE;

    if (get_string(kf, "timezone", &s->timezone)) {
        GTimeZone *tz = s->timezone[0] ? g_time_zone_new_identifier(s->timezone)
                                       : g_time_zone_new_local();
        if (!tz)
            return bad_value(error, path, "timezone", s->timezone,
                             "unknown time zone (use an IANA name such as Europe/Berlin)");
        g_time_zone_unref(s->tz);
        s->tz = tz;
    }
    g_autofree char *ws = NULL;
    if (get_string(kf, "week_start", &ws) && !parse_weekday(ws, &s->week_start))
        return bad_value(error, path, "week_start", ws, "expected a weekday name (monday..sunday)");
    get_string(kf, "currency", &s->currency);
    if (get_string(kf, "sensitivity", &s->sensitivity) &&
        !g_str_equal(s->sensitivity, "low") && !g_str_equal(s->sensitivity, "normal") &&
        !g_str_equal(s->sensitivity, "high"))
        return bad_value(error, path, "sensitivity", s->sensitivity,
                         "expected low, normal or high");
    if (g_key_file_has_key(kf, "report", "compare", NULL)) {
        gsize n = 0;
        char **list = g_key_file_get_string_list(kf, "report", "compare", &n, NULL);
        GPtrArray *clean = g_ptr_array_new();
        for (gsize i = 0; list && i < n; i++) {
            g_strstrip(list[i]);
            if (!list[i][0])
                continue;
            if (!strchr(list[i], '/')) {
                bad_value(error, path, "compare", list[i], "expected provider/model");
                g_ptr_array_free(clean, TRUE);
                g_strfreev(list);
                return FALSE;
            }
            g_ptr_array_add(clean, g_strdup(list[i]));
        }
        g_ptr_array_add(clean, NULL);
        g_strfreev(list);
        g_strfreev(s->compare);
        s->compare = (char **)g_ptr_array_free(clean, FALSE);
    }
    double tail = s->tail_rows;
    if (!get_double(kf, path, "usd_rate", 1e-9, 1e9, &s->usd_rate, error) ||
        !get_double(kf, path, "hardware_price", 0, 1e12, &s->hardware_price, error) ||
        !get_double(kf, path, "amortisation_months", 1, 1200, &s->amortisation_months, error) ||
        !get_double(kf, path, "gpu_watts", 0, 1e6, &s->gpu_watts, error) ||
        !get_double(kf, path, "kwh_price", 0, 1e6, &s->kwh_price, error) ||
        !get_double(kf, path, "fixed_monthly", 0, 1e12, &s->fixed_monthly, error) ||
        !get_double(kf, path, "api_below_tokens", 0, 1e18, &s->api_below_tokens, error) ||
        !get_double(kf, path, "local_above_tokens", 0, 1e18, &s->local_above_tokens, error) ||
        !get_double(kf, path, "alert_pct", 0, 1e6, &s->alert_pct, error) ||
        !get_double(kf, path, "trend_min_pct", 0, 1000, &s->trend_min_pct, error) ||
        !get_double(kf, path, "tail_rows", 0, 1000, &tail, error))
        return FALSE;
    s->tail_rows = (int)tail;
    if (s->local_above_tokens < s->api_below_tokens) {
        g_autofree char *v = g_strdup_printf("%g", s->local_above_tokens);
        return bad_value(error, path, "local_above_tokens", v,
                         "must not be below api_below_tokens");
    }
    return TRUE;
}

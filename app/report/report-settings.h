/*
 * report-settings.h — the weekly report's settings: section [report] of the
 * user's key file (settings.ini in the config dir). Every key is optional;
 * the defaults below are starting points for one RTX 4090 workstation and
 * are documented in docs/report.md.
 *
 *   key                   default          meaning
 *   timezone              (system zone)    IANA zone weeks are cut in
 *   week_start            monday           first day of a week
 *   currency              USD              display code for every cost
 *   usd_rate              1.0              currency units per US dollar (prices.json is USD)
 *   hardware_price        2500             what the machine cost, in currency
 *   amortisation_months   36               months the hardware price is spread over
 *   gpu_watts             350              power assumed while busy when none was measured
 *   kwh_price             0.30             electricity, currency per kWh
 *   fixed_monthly         0                other monthly costs (hosting, support)
 *   compare               (see .c)         APIs to price local tokens at, "provider/model;..."
 *   sensitivity           normal           low | normal | high (high: keep data local)
 *   api_below_tokens      1e8              below this many tokens a month: stay on the API
 *   local_above_tokens    5e8              above this: run locally; between: hybrid
 *   alert_pct             30               flag a week this % off its 4-week average
 *   trend_min_pct         1                smaller moves do not count as "moved"
 *   tail_rows             10               slowest requests listed
 */
#ifndef MOEDESK_REPORT_SETTINGS_H
#define MOEDESK_REPORT_SETTINGS_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct report_settings {
    char *timezone;            /* as configured; "" = system zone */
    GTimeZone *tz;             /* resolved */
    GDateWeekday week_start;
    char *currency;
    double usd_rate;
    double hardware_price;
    double amortisation_months;
    double gpu_watts;
    double kwh_price;
    double fixed_monthly;
    char **compare;            /* NULL-terminated "provider/model" */
    char *sensitivity;
    double api_below_tokens;
    double local_above_tokens;
    double alert_pct;
    double trend_min_pct;
    int tail_rows;
    char *path;                /* file the values came from, NULL = defaults only */
} report_settings;

/* Defaults only. */
report_settings *report_settings_new(void);
void report_settings_free(report_settings *s);

/*
 * Read [report] from `path` over the defaults. A missing file is not an
 * error (defaults stay); a malformed file, an unknown zone, weekday or
 * sensitivity, or a value out of range is, naming the file and key.
 */
gboolean report_settings_load(report_settings *s, const char *path, GError **error);

/* $MOEDESK_CONFIG_DIR, else the user config dir + "/moedesk" (newly allocated). */
char *report_config_dir(void);

/* Cost of one week of owning the machine: (hardware / months + fixed) per week. */
double report_settings_fixed_per_week(const report_settings *s);

/* Weeks in an average month (365.25 / 12 / 7). */
#define REPORT_WEEKS_PER_MONTH (365.25 / 12.0 / 7.0)

G_END_DECLS

#endif /* MOEDESK_REPORT_SETTINGS_H */

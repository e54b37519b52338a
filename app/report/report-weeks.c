/*
 * report-weeks.c — week boundaries in a GTimeZone and ISO week labels.
 * Dates are GDate (pure calendar arithmetic, no zone); only the two
 * midnights that bound a week go through GDateTime, which applies the
 * zone's offset on that date (DST included).
 */
#include "report-weeks.h"
#include "report-error.h"

#include <stdio.h>
#include <string.h>

int report_iso_weeks_in_year(int iso_year)
{
    /* Dec 28 always lies in the last ISO week of its year. */
    GDate d;
    g_date_clear(&d, 1);
    g_date_set_dmy(&d, 28, G_DATE_DECEMBER, (GDateYear)iso_year);
    return (int)g_date_get_iso8601_week_of_year(&d);
}

gboolean report_week_parse(const char *text, int *iso_year, int *iso_week, GError **error)
{
    int y = 0, w = 0;
    char tail = 0;
    if (!text || sscanf(text, "%4d-W%2d%c", &y, &w, &tail) != 2 || strlen(text) != 8 ||
        y < 1971 || y > 9998) {
        g_set_error(error, REPORT_ERROR, REPORT_ERROR_WEEK,
                    "week '%s': expected an ISO week such as 2026-W47", text ? text : "");
        return FALSE;
    }
    int n = report_iso_weeks_in_year(y);
    if (w < 1 || w > n) {
        g_set_error(error, REPORT_ERROR, REPORT_ERROR_WEEK,
                    "week '%s': %d has ISO weeks 1 to %d", text, y, n);
        return FALSE;
    }
    *iso_year = y;
    *iso_week = w;
    return TRUE;
}

static gint64 local_midnight_ms(GTimeZone *tz, const GDate *d)
{
    GDateTime *dt = g_date_time_new(tz, (gint)g_date_get_year(d), (gint)g_date_get_month(d),
                                    (gint)g_date_get_day(d), 0, 0, 0.0);
    gint64 ms = g_date_time_to_unix(dt) * 1000;
    g_date_time_unref(dt);
    return ms;
}

/* Fill everything from the first day. */
static void week_fill(GTimeZone *tz, const GDate *first, report_week *out)
{
    out->first_day = *first;
    GDate label_day = *first;
    g_date_add_days(&label_day, 3);
    out->iso_week = (int)g_date_get_iso8601_week_of_year(&label_day);
    /* The ISO year is the calendar year of that week's Thursday. */
    GDate thursday = label_day;
    int wd = (int)g_date_get_weekday(&thursday);
    if (wd < G_DATE_THURSDAY)
        g_date_add_days(&thursday, (guint)(G_DATE_THURSDAY - wd));
    else if (wd > G_DATE_THURSDAY)
        g_date_subtract_days(&thursday, (guint)(wd - G_DATE_THURSDAY));
    out->iso_year = g_date_get_year(&thursday);
    g_snprintf(out->label, sizeof out->label, "%04d-W%02d", out->iso_year, out->iso_week);
    GDate next = *first;
    g_date_add_days(&next, 7);
    out->start_ms = local_midnight_ms(tz, first);
    out->end_ms = local_midnight_ms(tz, &next);
}

void report_week_from_iso(GTimeZone *tz, GDateWeekday week_start, int iso_year, int iso_week,
                          report_week *out)
{
    /* Monday of ISO week 1 = the Monday on or before Jan 4. */
    GDate monday;
    g_date_clear(&monday, 1);
    g_date_set_dmy(&monday, 4, G_DATE_JANUARY, (GDateYear)iso_year);
    g_date_subtract_days(&monday, (guint)(g_date_get_weekday(&monday) - G_DATE_MONDAY));
    g_date_add_days(&monday, (guint)(iso_week - 1) * 7);
    /* Start k days after Monday, or k - 7, whichever keeps day 4 in this ISO week. */
    int k = (int)week_start - (int)G_DATE_MONDAY;
    GDate first = monday;
    if (k + 3 <= 6)
        g_date_add_days(&first, (guint)k);
    else
        g_date_subtract_days(&first, (guint)(7 - k));
    week_fill(tz, &first, out);
}

void report_week_containing(GTimeZone *tz, GDateWeekday week_start, gint64 ms,
                            report_week *out)
{
    GDateTime *utc = g_date_time_new_from_unix_utc(ms / 1000 - (ms % 1000 < 0));
    GDateTime *local = g_date_time_to_timezone(utc, tz);
    GDate day;
    g_date_clear(&day, 1);
    g_date_set_dmy(&day, (GDateDay)g_date_time_get_day_of_month(local),
                   (GDateMonth)g_date_time_get_month(local),
                   (GDateYear)g_date_time_get_year(local));
    g_date_time_unref(local);
    g_date_time_unref(utc);
    int back = ((int)g_date_get_weekday(&day) - (int)week_start + 7) % 7;
    g_date_subtract_days(&day, (guint)back);
    week_fill(tz, &day, out);
}

void report_week_shift(GTimeZone *tz, GDateWeekday week_start, const report_week *w, int by,
                       report_week *out)
{
    (void)week_start;
    GDate first = w->first_day;
    if (by >= 0)
        g_date_add_days(&first, (guint)by * 7);
    else
        g_date_subtract_days(&first, (guint)(-by) * 7);
    week_fill(tz, &first, out);
}

char *report_format_time(GTimeZone *tz, gint64 ms, const char *format)
{
    GDateTime *utc = g_date_time_new_from_unix_utc(ms / 1000);
    GDateTime *local = g_date_time_to_timezone(utc, tz);
    char *s = g_date_time_format(local, format);
    g_date_time_unref(local);
    g_date_time_unref(utc);
    return s;
}

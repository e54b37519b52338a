/*
 * report-weeks.h — calendar weeks in the user's time zone.
 *
 * A week starts at local midnight on the configured weekday and lasts seven
 * local days (so 167 or 169 hours across a DST change). Its label is the
 * ISO 8601 week ("2026-W47") that contains the week's fourth day: for
 * Monday-start weeks that is exactly the ISO week (the one holding its
 * Thursday); for Sunday-start weeks it is the ISO week of the Wednesday.
 * ISO years have 52 or 53 weeks (2026 has 53: Dec 28 2026 – Jan 3 2027).
 */
#ifndef MOEDESK_REPORT_WEEKS_H
#define MOEDESK_REPORT_WEEKS_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct report_week {
    int iso_year;
    int iso_week;
    char label[16];        /* "2026-W47" */
    GDate first_day;       /* local date the week starts */
    gint64 start_ms;       /* local midnight of first_day, UTC unix ms */
    gint64 end_ms;         /* start of the next week (exclusive) */
} report_week;

/* Parse "YYYY-Www"; checks the week exists in that ISO year. */
gboolean report_week_parse(const char *text, int *iso_year, int *iso_week, GError **error);

/* Number of ISO weeks (52 or 53) in an ISO year. */
int report_iso_weeks_in_year(int iso_year);

/* The week labelled iso_year-Wiso_week. */
void report_week_from_iso(GTimeZone *tz, GDateWeekday week_start, int iso_year, int iso_week,
                          report_week *out);

/* The week containing instant `ms`. */
void report_week_containing(GTimeZone *tz, GDateWeekday week_start, gint64 ms,
                            report_week *out);

/* The week before / after `w`. */
void report_week_shift(GTimeZone *tz, GDateWeekday week_start, const report_week *w, int by,
                       report_week *out);

/* Format `ms` in `tz` with a g_date_time_format() pattern (newly allocated). */
char *report_format_time(GTimeZone *tz, gint64 ms, const char *format);

G_END_DECLS

#endif /* MOEDESK_REPORT_WEEKS_H */

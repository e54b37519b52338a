/*
 * report-error.h — the error domain of the weekly report (settings, prices,
 * week parsing, building, output). Messages always name the file, key,
 * week or format at fault.
 */
#ifndef MOEDESK_REPORT_ERROR_H
#define MOEDESK_REPORT_ERROR_H

#include <glib.h>

#define REPORT_ERROR (report_error_quark())
GQuark report_error_quark(void);

typedef enum {
    REPORT_ERROR_SETTINGS,   /* settings.ini unreadable or a bad value */
    REPORT_ERROR_PRICES,     /* prices.json unreadable or malformed */
    REPORT_ERROR_WEEK,       /* a week label that is not an ISO week */
    REPORT_ERROR_NO_DATA,    /* nothing recorded in the requested week */
    REPORT_ERROR_FORMAT,     /* unknown output format */
    REPORT_ERROR_OUTPUT,     /* writing the output failed */
} report_error;

#endif /* MOEDESK_REPORT_ERROR_H */

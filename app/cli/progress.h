/*
 * progress.h — progress output for long CLI commands (pull, verify): a
 * one-line bar redrawn in place on a terminal, plain timestamped lines
 * otherwise (logs, pipes, tests). MOEDESK_PROGRESS=plain or =bar forces
 * one; MOEDESK_PROGRESS_INTERVAL_MS sets the plain-line interval
 * (default 1000).
 */
#ifndef MOEDESK_CLI_PROGRESS_H
#define MOEDESK_CLI_PROGRESS_H

#include <glib.h>
#include <stdio.h>

typedef struct CliProgress CliProgress;

CliProgress *cli_progress_new(FILE *out);
void         cli_progress_free(CliProgress *p);

/* Shows done/total bytes (total 0: unknown), rate (bytes/s) and ETA
 * (seconds, -1: unknown) and a short `what`. Rate-limited; `force` draws
 * now. */
void cli_progress_update(CliProgress *p, const char *what, guint64 done, guint64 total,
                         double rate, gint64 eta_s, gboolean force);
/* A line that stays (the bar is redrawn below it). */
void cli_progress_message(CliProgress *p, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
/* Ends the bar line. */
void cli_progress_done(CliProgress *p);

/* "1:02:03" / "4:05" / "?" */
char *cli_format_eta(gint64 eta_s);

#endif /* MOEDESK_CLI_PROGRESS_H */

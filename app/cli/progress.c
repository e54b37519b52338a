/*
 * progress.c — see progress.h. The bar is 24 cells wide and the whole line
 * is cut to the terminal width (COLUMNS, else 80) so it never wraps.
 */
#include "progress.h"
#include "library.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#ifdef G_OS_WIN32
#include <io.h>
#define isatty _isatty
#define fileno _fileno
#else
#include <unistd.h>
#endif

struct CliProgress {
    FILE    *out;
    gboolean bar;        /* redraw in place                          */
    gboolean drawn;      /* a bar line is on screen                  */
    gint64   last_us;
    gint64   interval_us;
    int      width;
};

CliProgress *cli_progress_new(FILE *out)
{
    CliProgress *p = g_new0(CliProgress, 1);
    p->out = out;
    const char *mode = g_getenv("MOEDESK_PROGRESS");
    p->bar = mode ? g_strcmp0(mode, "bar") == 0 : isatty(fileno(out));
    const char *iv = g_getenv("MOEDESK_PROGRESS_INTERVAL_MS");
    p->interval_us = p->bar ? 100000 : 1000000;
    if (iv && !p->bar)
        p->interval_us = (gint64)g_ascii_strtoull(iv, NULL, 10) * 1000;
    const char *cols = g_getenv("COLUMNS");
    p->width = cols ? atoi(cols) : 80;
    if (p->width < 40)
        p->width = 80;
    return p;
}

void cli_progress_free(CliProgress *p)
{
    if (!p)
        return;
    cli_progress_done(p);
    g_free(p);
}

char *cli_format_eta(gint64 s)
{
    if (s < 0)
        return g_strdup("?");
    if (s >= 3600)
        return g_strdup_printf("%" G_GINT64_FORMAT ":%02d:%02d", s / 3600, (int)(s / 60 % 60),
                               (int)(s % 60));
    return g_strdup_printf("%d:%02d", (int)(s / 60), (int)(s % 60));
}

void cli_progress_update(CliProgress *p, const char *what, guint64 done, guint64 total,
                         double rate, gint64 eta_s, gboolean force)
{
    gint64 now = g_get_monotonic_time();
    if (!force && now - p->last_us < p->interval_us)
        return;
    p->last_us = now;
    g_autofree char *done_s = moe_library_format_size(done);
    g_autofree char *total_s = moe_library_format_size(total);
    g_autofree char *rate_s = moe_library_format_size((guint64)(rate > 0 ? rate : 0));
    g_autofree char *eta = cli_format_eta(eta_s);
    double frac = total ? (double)done / (double)total : 0;
    if (frac > 1)
        frac = 1;
    if (!p->bar) {
        /* Plain lines carry the raw numbers too, for scripts. */
        fprintf(p->out, "progress %5.1f%% %s / %s %s/s ETA %s  %s  [done=%" G_GUINT64_FORMAT
                " total=%" G_GUINT64_FORMAT " rate=%.0f eta=%" G_GINT64_FORMAT "]\n", 100 * frac,
                done_s, total_s, rate_s, eta, what ? what : "", done, total, rate, eta_s);
        fflush(p->out);
        return;
    }
    char cells[25];
    int full = (int)(frac * 24 + 0.5);
    for (int i = 0; i < 24; i++)
        cells[i] = i < full ? '#' : '-';
    cells[24] = '\0';
    g_autofree char *line = g_strdup_printf("[%s] %3.0f%% %s / %s  %s/s  ETA %s  %s", cells,
                                            100 * frac, done_s, total_s, rate_s, eta,
                                            what ? what : "");
    if ((int)strlen(line) > p->width - 1)
        line[p->width - 1] = '\0';
    fprintf(p->out, "\r%s\033[K", line);
    fflush(p->out);
    p->drawn = TRUE;
}

void cli_progress_message(CliProgress *p, const char *fmt, ...)
{
    if (p->drawn)
        fputs("\r\033[K", p->out);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->out, fmt, ap);
    va_end(ap);
    fputc('\n', p->out);
    fflush(p->out);
    p->drawn = FALSE;
    p->last_us = 0; /* redraw the bar at the next update */
}

void cli_progress_done(CliProgress *p)
{
    if (p->drawn) {
        fputc('\n', p->out);
        fflush(p->out);
    }
    p->drawn = FALSE;
}

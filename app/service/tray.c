/*
 * tray.c — the platform-neutral half of the tray icon: the status text,
 * the menu items and what they do, and the icon drawn in code (so the icon
 * shows even where no "moedesk" icon is installed in the theme). The
 * platform halves are tray-dbus.c (Linux, StatusNotifierItem) and
 * tray-win32.c (Windows, Shell_NotifyIcon); see tray-internal.h.
 */
#include "tray-internal.h"

#include <gio/gio.h>
#include <math.h>

static char *status_text(const char *model, const char *url)
{
    /* U+00B7 MIDDLE DOT between the two, as in "qwen3-30b-a3b · http://..." */
    return g_strdup_printf("%s \u00b7 %s", model && *model ? model : "no model loaded",
                           url ? url : "");
}

svc_tray *svc_tray_new(const char *model, const char *url,
                       svc_tray_quit_fn quit, gpointer user_data)
{
    svc_tray *tray = g_new0(svc_tray, 1);
    tray->model = g_strdup(model);
    tray->url = g_strdup(url);
    tray->status = status_text(model, url);
    tray->quit = quit;
    tray->quit_data = user_data;
    tray->backend = svc_tray_backend_start(tray);
    return tray;
}

void svc_tray_set_status(svc_tray *tray, const char *model, const char *url)
{
    if (!tray)
        return;
    if (g_strcmp0(model, tray->model) == 0 && g_strcmp0(url, tray->url) == 0)
        return;
    g_free(tray->model);
    g_free(tray->url);
    g_free(tray->status);
    tray->model = g_strdup(model);
    tray->url = g_strdup(url);
    tray->status = status_text(model, url);
    if (tray->backend)
        svc_tray_backend_update(tray);
}

void svc_tray_free(svc_tray *tray)
{
    if (!tray)
        return;
    if (tray->backend)
        svc_tray_backend_stop(tray);
    if (tray->quit_idle)
        g_source_remove(tray->quit_idle);
    g_free(tray->model);
    g_free(tray->url);
    g_free(tray->status);
    g_free(tray);
}

const char *svc_tray_bus_name(const svc_tray *tray)
{
    return tray && tray->backend ? svc_tray_backend_bus_name(tray) : NULL;
}

/* ---- Menu items -------------------------------------------------------- */

const char *svc_tray_item_label(const svc_tray *tray, svc_tray_item item)
{
    switch (item) {
    case SVC_TRAY_ITEM_STATUS: return tray->status;
    case SVC_TRAY_ITEM_OPEN: return "Open MoeDesk";
    case SVC_TRAY_ITEM_QUIT: return "Quit MoeDesk";
    default: return "";
    }
}

gboolean svc_tray_item_is_separator(svc_tray_item item)
{
    return item == SVC_TRAY_ITEM_SEP1 || item == SVC_TRAY_ITEM_SEP2;
}

gboolean svc_tray_item_is_enabled(svc_tray_item item)
{
    return item == SVC_TRAY_ITEM_OPEN || item == SVC_TRAY_ITEM_QUIT;
}

static gboolean quit_idle(gpointer data)
{
    svc_tray *tray = data;
    tray->quit_idle = 0;
    if (tray->quit)
        tray->quit(tray->quit_data);
    return G_SOURCE_REMOVE;
}

/* The window if it is installed (`moedesk` on PATH, started with no
 * arguments: it finds the service through the lock file), else the
 * service's /health page in the default browser. Nothing from the bus
 * reaches a command line or a URL. */
static void open_moedesk(svc_tray *tray)
{
    GError *err = NULL;
    char *window = g_find_program_in_path("moedesk");
    if (window) {
        char *argv[] = {window, NULL};
        if (!g_spawn_async(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, &err)) {
            g_message("tray: cannot start %s: %s", window, err->message);
            g_clear_error(&err);
        }
        g_free(window);
        return;
    }
    if (!tray->url || !*tray->url)
        return;
    char *uri = g_strconcat(tray->url, "/health", NULL);
    if (!g_app_info_launch_default_for_uri(uri, NULL, &err)) {
        g_message("tray: cannot open %s in a browser: %s", uri, err->message);
        g_clear_error(&err);
    }
    g_free(uri);
}

void svc_tray_activate(svc_tray *tray, svc_tray_item item)
{
    if (item == SVC_TRAY_ITEM_OPEN) {
        open_moedesk(tray);
    } else if (item == SVC_TRAY_ITEM_QUIT && !tray->quit_idle) {
        g_message("tray: quit requested");
        tray->quit_idle = g_idle_add(quit_idle, tray);
    }
}

/* ---- The icon ----------------------------------------------------------- */

/* Distance from (px,py) to the segment (ax,ay)-(bx,by). */
static double seg_dist(double px, double py, double ax, double ay, double bx, double by)
{
    double vx = bx - ax, vy = by - ay;
    double t = ((px - ax) * vx + (py - ay) * vy) / (vx * vx + vy * vy);
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    double dx = px - (ax + t * vx), dy = py - (ay + t * vy);
    return sqrt(dx * dx + dy * dy);
}

void svc_tray_draw_icon(guint32 *argb, int size)
{
    /* The "M": four strokes through these points, in a unit square. */
    static const double m[5][2] = {
        {0.27, 0.74}, {0.27, 0.28}, {0.50, 0.56}, {0.73, 0.28}, {0.73, 0.74},
    };
    const double margin = 0.04, radius = 0.22, stroke = 0.075;
    const int ss = 4; /* 4x4 samples per pixel: anti-aliased edges */
    for (int y = 0; y < size; y++) {
        for (int x = 0; x < size; x++) {
            int in_bg = 0, in_m = 0;
            for (int sy = 0; sy < ss; sy++) {
                for (int sx = 0; sx < ss; sx++) {
                    double u = (x + (sx + 0.5) / ss) / size;
                    double v = (y + (sy + 0.5) / ss) / size;
                    double half = 0.5 - margin - radius;
                    double dx = fmax(fabs(u - 0.5) - half, 0);
                    double dy = fmax(fabs(v - 0.5) - half, 0);
                    if (dx * dx + dy * dy > radius * radius)
                        continue;
                    in_bg++;
                    for (int k = 0; k < 4; k++) {
                        if (seg_dist(u, v, m[k][0], m[k][1], m[k + 1][0], m[k + 1][1]) <= stroke) {
                            in_m++;
                            break;
                        }
                    }
                }
            }
            /* violet #6A4CC4 under white, alpha = the square's coverage */
            double w = in_bg ? (double)in_m / in_bg : 0;
            guint32 a = (guint32)(255.0 * in_bg / (ss * ss) + 0.5);
            guint32 r = (guint32)(0x6A + (255 - 0x6A) * w + 0.5);
            guint32 g = (guint32)(0x4C + (255 - 0x4C) * w + 0.5);
            guint32 b = (guint32)(0xC4 + (255 - 0xC4) * w + 0.5);
            argb[y * size + x] = a << 24 | r << 16 | g << 8 | b;
        }
    }
}

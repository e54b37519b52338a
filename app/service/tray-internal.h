/*
 * tray-internal.h — what tray.c (status text, icon drawing, menu actions)
 * shares with the platform backends: tray-dbus.c (StatusNotifierItem) and
 * tray-win32.c (Shell_NotifyIcon). Exactly one backend is built.
 */
#ifndef MOEDESK_SVC_TRAY_INTERNAL_H
#define MOEDESK_SVC_TRAY_INTERNAL_H

#include "tray.h"

/* Menu items, in order; the ids are dbusmenu's item ids and the Win32
 * menu's command ids (0 is dbusmenu's root, never a command). */
typedef enum {
    SVC_TRAY_ITEM_ROOT = 0,
    SVC_TRAY_ITEM_STATUS,  /* "MODEL · URL", disabled */
    SVC_TRAY_ITEM_SEP1,
    SVC_TRAY_ITEM_OPEN,    /* "Open MoeDesk" */
    SVC_TRAY_ITEM_SEP2,
    SVC_TRAY_ITEM_QUIT,    /* "Quit MoeDesk" */
    SVC_TRAY_N_ITEMS
} svc_tray_item;

#define SVC_TRAY_TITLE "MoeDesk"

struct svc_tray_backend; /* per platform */

struct svc_tray {
    char *model;          /* NULL: no model loaded                          */
    char *url;            /* "http://127.0.0.1:11435"                        */
    char *status;         /* "MODEL · URL", the status item and tooltip      */
    svc_tray_quit_fn quit;
    gpointer quit_data;
    guint quit_idle;      /* pending quit callback, 0 = none                 */
    struct svc_tray_backend *backend; /* NULL: no tray shown                */
};

/* The label of a menu item ("" for the root and separators). Borrowed. */
const char *svc_tray_item_label(const svc_tray *tray, svc_tray_item item);
/* Whether an item is a separator, or greyed out. */
gboolean svc_tray_item_is_separator(svc_tray_item item);
gboolean svc_tray_item_is_enabled(svc_tray_item item);

/* Runs what the menu item does: Open starts the window (or the browser),
 * Quit schedules the quit callback on an idle so the D-Bus reply or the
 * window message handler finishes first. Others: nothing. */
void svc_tray_activate(svc_tray *tray, svc_tray_item item);

/* Draws the icon (a rounded violet square with a white "M") at size x
 * size pixels into `argb` (size*size values 0xAARRGGBB, straight alpha,
 * rows top to bottom). size 1..256. */
void svc_tray_draw_icon(guint32 *argb, int size);

/* Backends: start may connect asynchronously; update is called after the
 * status text changed; stop undoes start and frees the backend. */
struct svc_tray_backend *svc_tray_backend_start(svc_tray *tray);
void svc_tray_backend_update(svc_tray *tray);
void svc_tray_backend_stop(svc_tray *tray);
const char *svc_tray_backend_bus_name(const svc_tray *tray);

#endif /* MOEDESK_SVC_TRAY_INTERNAL_H */

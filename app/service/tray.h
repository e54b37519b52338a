/*
 * tray.h — moedesk-service's tray icon, without GTK: a StatusNotifierItem
 * with a com.canonical.dbusmenu menu on the session bus (Linux: KDE, GNOME
 * with the AppIndicator extension, waybar, ...), Shell_NotifyIcon on
 * Windows. The menu shows the loaded model and the URL, "Open MoeDesk"
 * and "Quit MoeDesk"; Quit calls back into main.c, which stops the service
 * exactly as on SIGTERM.
 *
 * The tray is optional by nature: on a headless machine (no session bus)
 * svc_tray_new() logs one line and returns an object that does nothing.
 *
 * Threads: main thread only; callbacks run on the default main context.
 */
#ifndef MOEDESK_SVC_TRAY_H
#define MOEDESK_SVC_TRAY_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct svc_tray svc_tray;

/* Called from the main loop (never from inside a D-Bus or window message
 * handler) when the user picks "Quit MoeDesk". */
typedef void (*svc_tray_quit_fn)(gpointer user_data);

/* Shows the icon with "MODEL · URL" as its status (model NULL: "no model
 * loaded"). Never fails; the icon appears once the bus connection is made
 * (asynchronous), or never, with one log line, where there is no bus.
 * `quit` may be NULL (the menu then has no effect on Quit). */
svc_tray *svc_tray_new(const char *model, const char *url,
                       svc_tray_quit_fn quit, gpointer user_data);

/* Updates the status line and tooltip; does nothing (no D-Bus signal) when
 * neither changed, so main.c may call it from a timer. NULL tray: no-op. */
void svc_tray_set_status(svc_tray *tray, const char *model, const char *url);

/* Removes the icon and drops the bus name. NULL: no-op. */
void svc_tray_free(svc_tray *tray);

/* The bus name the icon is exported under ("org.kde.StatusNotifierItem-PID-1"
 * on Linux), or NULL where there is none; for logs and tests. */
const char *svc_tray_bus_name(const svc_tray *tray);

G_END_DECLS

#endif /* MOEDESK_SVC_TRAY_H */

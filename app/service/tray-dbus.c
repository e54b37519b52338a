/*
 * tray-dbus.c — the tray icon on Linux (and other D-Bus desktops): a
 * StatusNotifierItem (org.kde.StatusNotifierItem, what KDE, GNOME with the
 * AppIndicator extension, waybar, ... read) at /StatusNotifierItem, and its
 * menu as com.canonical.dbusmenu at /MenuBar, both exported with GDBus on
 * the session bus under "org.kde.StatusNotifierItem-PID-1".
 *
 * The item is registered with org.kde.StatusNotifierWatcher whenever one
 * is on the bus: at start, and again each time one appears (a panel that
 * starts later or restarts). Without a session bus there is no icon and
 * one log line, never an error: the service runs headless just the same.
 *
 * Lifetime: everything asynchronous carries the backend's GCancellable or
 * a name-owner/watch id, and svc_tray_backend_stop() cancels/unowns them
 * all, so no callback runs on a freed backend.
 */
#include "tray-internal.h"

#include <gio/gio.h>
#include <string.h>
#include <unistd.h>

#define SNI_PATH "/StatusNotifierItem"
#define SNI_IFACE "org.kde.StatusNotifierItem"
#define MENU_PATH "/MenuBar"
#define MENU_IFACE "com.canonical.dbusmenu"
#define WATCHER_NAME "org.kde.StatusNotifierWatcher"
#define WATCHER_PATH "/StatusNotifierWatcher"

static const char introspection_xml[] =
    "<node>"
    " <interface name='org.kde.StatusNotifierItem'>"
    "  <property name='Category' type='s' access='read'/>"
    "  <property name='Id' type='s' access='read'/>"
    "  <property name='Title' type='s' access='read'/>"
    "  <property name='Status' type='s' access='read'/>"
    "  <property name='WindowId' type='i' access='read'/>"
    "  <property name='IconThemePath' type='s' access='read'/>"
    "  <property name='IconName' type='s' access='read'/>"
    "  <property name='IconPixmap' type='a(iiay)' access='read'/>"
    "  <property name='OverlayIconName' type='s' access='read'/>"
    "  <property name='OverlayIconPixmap' type='a(iiay)' access='read'/>"
    "  <property name='AttentionIconName' type='s' access='read'/>"
    "  <property name='AttentionIconPixmap' type='a(iiay)' access='read'/>"
    "  <property name='AttentionMovieName' type='s' access='read'/>"
    "  <property name='ToolTip' type='(sa(iiay)ss)' access='read'/>"
    "  <property name='ItemIsMenu' type='b' access='read'/>"
    "  <property name='Menu' type='o' access='read'/>"
    "  <method name='ContextMenu'><arg name='x' type='i' direction='in'/>"
    "   <arg name='y' type='i' direction='in'/></method>"
    "  <method name='Activate'><arg name='x' type='i' direction='in'/>"
    "   <arg name='y' type='i' direction='in'/></method>"
    "  <method name='SecondaryActivate'><arg name='x' type='i' direction='in'/>"
    "   <arg name='y' type='i' direction='in'/></method>"
    "  <method name='Scroll'><arg name='delta' type='i' direction='in'/>"
    "   <arg name='orientation' type='s' direction='in'/></method>"
    "  <signal name='NewTitle'/><signal name='NewIcon'/><signal name='NewAttentionIcon'/>"
    "  <signal name='NewOverlayIcon'/><signal name='NewToolTip'/>"
    "  <signal name='NewStatus'><arg name='status' type='s'/></signal>"
    " </interface>"
    " <interface name='com.canonical.dbusmenu'>"
    "  <property name='Version' type='u' access='read'/>"
    "  <property name='TextDirection' type='s' access='read'/>"
    "  <property name='Status' type='s' access='read'/>"
    "  <property name='IconThemePath' type='as' access='read'/>"
    "  <method name='GetLayout'>"
    "   <arg type='i' name='parentId' direction='in'/>"
    "   <arg type='i' name='recursionDepth' direction='in'/>"
    "   <arg type='as' name='propertyNames' direction='in'/>"
    "   <arg type='u' name='revision' direction='out'/>"
    "   <arg type='(ia{sv}av)' name='layout' direction='out'/></method>"
    "  <method name='GetGroupProperties'>"
    "   <arg type='ai' name='ids' direction='in'/>"
    "   <arg type='as' name='propertyNames' direction='in'/>"
    "   <arg type='a(ia{sv})' name='properties' direction='out'/></method>"
    "  <method name='GetProperty'>"
    "   <arg type='i' name='id' direction='in'/>"
    "   <arg type='s' name='name' direction='in'/>"
    "   <arg type='v' name='value' direction='out'/></method>"
    "  <method name='Event'>"
    "   <arg type='i' name='id' direction='in'/>"
    "   <arg type='s' name='eventId' direction='in'/>"
    "   <arg type='v' name='data' direction='in'/>"
    "   <arg type='u' name='timestamp' direction='in'/></method>"
    "  <method name='EventGroup'>"
    "   <arg type='a(isvu)' name='events' direction='in'/>"
    "   <arg type='ai' name='idErrors' direction='out'/></method>"
    "  <method name='AboutToShow'>"
    "   <arg type='i' name='id' direction='in'/>"
    "   <arg type='b' name='needUpdate' direction='out'/></method>"
    "  <method name='AboutToShowGroup'>"
    "   <arg type='ai' name='ids' direction='in'/>"
    "   <arg type='ai' name='updatesNeeded' direction='out'/>"
    "   <arg type='ai' name='idErrors' direction='out'/></method>"
    "  <signal name='ItemsPropertiesUpdated'>"
    "   <arg type='a(ia{sv})' name='updatedProps'/>"
    "   <arg type='a(ias)' name='removedProps'/></signal>"
    "  <signal name='LayoutUpdated'>"
    "   <arg type='u' name='revision'/><arg type='i' name='parent'/></signal>"
    "  <signal name='ItemActivationRequested'>"
    "   <arg type='i' name='id'/><arg type='u' name='timestamp'/></signal>"
    " </interface>"
    "</node>";

struct svc_tray_backend {
    svc_tray *tray;             /* the owner (borrowed)                       */
    GCancellable *cancel;       /* the bus connection and watcher calls        */
    GDBusConnection *conn;      /* NULL until connected                        */
    GDBusNodeInfo *info;
    guint sni_reg, menu_reg;    /* object registrations, 0 = none              */
    guint own_id, watch_id;
    char *bus_name;             /* org.kde.StatusNotifierItem-PID-1            */
    gboolean name_owned;
    gboolean watcher_present;
    guint32 revision;           /* dbusmenu layout revision                    */
    char *icon_name;            /* "moedesk" if installed in a theme, else ""  */
    GVariant *pixmaps;          /* a(iiay), the drawn icon at 22 and 44 px     */
};

/* ---- The item's properties --------------------------------------------- */

/* "moedesk" when an installed icon theme has it; "" otherwise, so hosts
 * fall back to IconPixmap instead of showing a broken icon. */
static char *themed_icon_name(void)
{
    static const char *const rel[] = {
        "scalable/apps/moedesk.svg", "48x48/apps/moedesk.png",
        "64x64/apps/moedesk.png", "128x128/apps/moedesk.png",
        "256x256/apps/moedesk.png", "32x32/apps/moedesk.png",
        "22x22/apps/moedesk.png",
    };
    GPtrArray *dirs = g_ptr_array_new();
    g_ptr_array_add(dirs, (gpointer)g_get_user_data_dir());
    for (const char *const *d = g_get_system_data_dirs(); *d; d++)
        g_ptr_array_add(dirs, (gpointer)*d);
    gboolean found = FALSE;
    for (guint i = 0; i < dirs->len && !found; i++) {
        for (gsize k = 0; k < G_N_ELEMENTS(rel) && !found; k++) {
            char *p = g_build_filename(dirs->pdata[i], "icons", "hicolor", rel[k], NULL);
            found = g_file_test(p, G_FILE_TEST_IS_REGULAR);
            g_free(p);
        }
    }
    g_ptr_array_free(dirs, TRUE);
    return g_strdup(found ? "moedesk" : "");
}

/* a(iiay): each size's pixels as ARGB32 in network byte order, as the
 * StatusNotifierItem spec asks. */
static GVariant *icon_pixmaps(void)
{
    static const int sizes[] = {22, 44};
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE("a(iiay)"));
    for (gsize k = 0; k < G_N_ELEMENTS(sizes); k++) {
        int n = sizes[k];
        guint32 *px = g_new(guint32, n * n);
        svc_tray_draw_icon(px, n);
        guint8 *bytes = g_new(guint8, 4 * n * n);
        for (int i = 0; i < n * n; i++) {
            bytes[4 * i + 0] = px[i] >> 24;
            bytes[4 * i + 1] = px[i] >> 16 & 0xff;
            bytes[4 * i + 2] = px[i] >> 8 & 0xff;
            bytes[4 * i + 3] = px[i] & 0xff;
        }
        g_variant_builder_add(&b, "(ii@ay)", n, n,
                              g_variant_new_fixed_array(G_VARIANT_TYPE_BYTE, bytes,
                                                        4 * n * n, 1));
        g_free(bytes);
        g_free(px);
    }
    return g_variant_ref_sink(g_variant_builder_end(&b));
}

static GVariant *no_pixmaps(void)
{
    return g_variant_new_array(G_VARIANT_TYPE("(iiay)"), NULL, 0);
}

static GVariant *sni_get_property(GDBusConnection *conn, const char *sender,
                                  const char *path, const char *iface,
                                  const char *prop, GError **error, gpointer data)
{
    struct svc_tray_backend *be = data;
    (void)conn, (void)sender, (void)path, (void)iface;
    if (!strcmp(prop, "Category"))
        return g_variant_new_string("ApplicationStatus");
    if (!strcmp(prop, "Id"))
        return g_variant_new_string("moedesk");
    if (!strcmp(prop, "Title"))
        return g_variant_new_string(SVC_TRAY_TITLE);
    if (!strcmp(prop, "Status"))
        return g_variant_new_string("Active");
    if (!strcmp(prop, "WindowId"))
        return g_variant_new_int32(0);
    if (!strcmp(prop, "IconName"))
        return g_variant_new_string(be->icon_name);
    if (!strcmp(prop, "IconPixmap"))
        return g_variant_ref(be->pixmaps);
    if (!strcmp(prop, "OverlayIconPixmap") || !strcmp(prop, "AttentionIconPixmap"))
        return no_pixmaps();
    if (!strcmp(prop, "IconThemePath") || !strcmp(prop, "OverlayIconName") ||
        !strcmp(prop, "AttentionIconName") || !strcmp(prop, "AttentionMovieName"))
        return g_variant_new_string("");
    if (!strcmp(prop, "ToolTip"))
        return g_variant_new("(s@a(iiay)ss)", be->icon_name, be->pixmaps,
                             SVC_TRAY_TITLE, be->tray->status);
    if (!strcmp(prop, "ItemIsMenu"))
        return g_variant_new_boolean(FALSE);
    if (!strcmp(prop, "Menu"))
        return g_variant_new_object_path(MENU_PATH);
    g_set_error(error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_PROPERTY,
                "StatusNotifierItem has no property %s", prop);
    return NULL;
}

static void sni_method_call(GDBusConnection *conn, const char *sender, const char *path,
                            const char *iface, const char *method, GVariant *params,
                            GDBusMethodInvocation *inv, gpointer data)
{
    struct svc_tray_backend *be = data;
    (void)conn, (void)sender, (void)path, (void)iface, (void)params;
    /* A left click opens MoeDesk; the menu comes from /MenuBar, so
     * ContextMenu, SecondaryActivate and Scroll do nothing. */
    if (!strcmp(method, "Activate"))
        svc_tray_activate(be->tray, SVC_TRAY_ITEM_OPEN);
    g_dbus_method_invocation_return_value(inv, NULL);
}

/* ---- The menu (com.canonical.dbusmenu) ---------------------------------- */

static gboolean want(const char *const *names, const char *name)
{
    return !names || !names[0] || g_strv_contains(names, name);
}

/* A label for dbusmenu, where '_' marks a mnemonic: model names and URLs
 * may hold underscores, which must show as themselves. */
static char *menu_label(const char *text)
{
    GString *s = g_string_new(NULL);
    for (const char *p = text; *p; p++) {
        if (*p == '_')
            g_string_append_c(s, '_');
        g_string_append_c(s, *p);
    }
    return g_string_free(s, FALSE);
}

/* a{sv}: the properties of item `id` (valid) that differ from dbusmenu's
 * defaults, filtered to `names` (NULL or empty: all). */
static GVariant *item_props(struct svc_tray_backend *be, int id, const char *const *names)
{
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE_VARDICT);
    if (id == SVC_TRAY_ITEM_ROOT) {
        if (want(names, "children-display"))
            g_variant_builder_add(&b, "{sv}", "children-display", g_variant_new_string("submenu"));
    } else if (svc_tray_item_is_separator(id)) {
        if (want(names, "type"))
            g_variant_builder_add(&b, "{sv}", "type", g_variant_new_string("separator"));
    } else {
        if (want(names, "label")) {
            char *label = menu_label(svc_tray_item_label(be->tray, id));
            g_variant_builder_add(&b, "{sv}", "label", g_variant_new_string(label));
            g_free(label);
        }
        if (!svc_tray_item_is_enabled(id) && want(names, "enabled"))
            g_variant_builder_add(&b, "{sv}", "enabled", g_variant_new_boolean(FALSE));
        if (id == SVC_TRAY_ITEM_QUIT && want(names, "icon-name"))
            g_variant_builder_add(&b, "{sv}", "icon-name", g_variant_new_string("application-exit"));
    }
    return g_variant_builder_end(&b);
}

/* (ia{sv}av): item `id` with its children down to `depth` levels (-1: all). */
static GVariant *layout_node(struct svc_tray_backend *be, int id, int depth,
                             const char *const *names)
{
    GVariantBuilder kids;
    g_variant_builder_init(&kids, G_VARIANT_TYPE("av"));
    if (id == SVC_TRAY_ITEM_ROOT && depth != 0) {
        for (int i = SVC_TRAY_ITEM_ROOT + 1; i < SVC_TRAY_N_ITEMS; i++)
            g_variant_builder_add(&kids, "v", layout_node(be, i, depth - 1, names));
    }
    return g_variant_new("(i@a{sv}av)", id, item_props(be, id, names), &kids);
}

static gboolean valid_id(gint32 id)
{
    return id >= 0 && id < SVC_TRAY_N_ITEMS;
}

static void menu_event(struct svc_tray_backend *be, gint32 id, const char *event)
{
    /* Only a click on an enabled item does something; "hovered", "opened"
     * and "closed" are for menus that change as they are shown. */
    if (!strcmp(event, "clicked") && svc_tray_item_is_enabled(id))
        svc_tray_activate(be->tray, id);
}

static void menu_method_call(GDBusConnection *conn, const char *sender, const char *path,
                             const char *iface, const char *method, GVariant *params,
                             GDBusMethodInvocation *inv, gpointer data)
{
    struct svc_tray_backend *be = data;
    (void)conn, (void)sender, (void)path, (void)iface;
    gint32 id = 0;
    if (!strcmp(method, "GetLayout")) {
        gint32 depth;
        const char **names;
        g_variant_get(params, "(ii^a&s)", &id, &depth, &names);
        if (valid_id(id))
            g_dbus_method_invocation_return_value(
                inv, g_variant_new("(u@(ia{sv}av))", be->revision,
                                   layout_node(be, id, depth, names)));
        g_free(names);
    } else if (!strcmp(method, "GetGroupProperties")) {
        GVariantIter *ids;
        const char **names;
        g_variant_get(params, "(ai^a&s)", &ids, &names);
        GVariantBuilder b;
        g_variant_builder_init(&b, G_VARIANT_TYPE("a(ia{sv})"));
        gboolean all = g_variant_iter_n_children(ids) == 0;
        for (gint32 i = 0; all && i < SVC_TRAY_N_ITEMS; i++)
            g_variant_builder_add(&b, "(i@a{sv})", i, item_props(be, i, names));
        while (!all && g_variant_iter_next(ids, "i", &id)) {
            if (valid_id(id))
                g_variant_builder_add(&b, "(i@a{sv})", id, item_props(be, id, names));
        }
        g_variant_iter_free(ids);
        g_free(names);
        g_dbus_method_invocation_return_value(inv, g_variant_new("(@a(ia{sv}))",
                                                                 g_variant_builder_end(&b)));
        return;
    } else if (!strcmp(method, "GetProperty")) {
        const char *name;
        g_variant_get(params, "(i&s)", &id, &name);
        if (valid_id(id)) {
            const char *one[] = {name, NULL};
            GVariant *props = g_variant_ref_sink(item_props(be, id, one));
            GVariant *v = g_variant_lookup_value(props, name, NULL);
            g_variant_unref(props);
            if (v) {
                g_dbus_method_invocation_return_value(inv, g_variant_new("(v)", v));
                g_variant_unref(v);
                return;
            }
            g_dbus_method_invocation_return_error(inv, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS,
                                                  "menu item %d has no property %s", id, name);
            return;
        }
    } else if (!strcmp(method, "Event")) {
        const char *event;
        g_variant_get(params, "(i&svu)", &id, &event, NULL, NULL);
        if (valid_id(id)) {
            g_dbus_method_invocation_return_value(inv, NULL);
            menu_event(be, id, event);
        }
    } else if (!strcmp(method, "EventGroup")) {
        GVariantIter *events;
        const char *event;
        GVariantBuilder errs;
        g_variant_builder_init(&errs, G_VARIANT_TYPE("ai"));
        g_variant_get(params, "(a(isvu))", &events);
        while (g_variant_iter_next(events, "(i&svu)", &id, &event, NULL, NULL)) {
            if (valid_id(id))
                menu_event(be, id, event);
            else
                g_variant_builder_add(&errs, "i", id);
        }
        g_variant_iter_free(events);
        g_dbus_method_invocation_return_value(inv, g_variant_new("(ai)", &errs));
        return;
    } else if (!strcmp(method, "AboutToShow")) {
        g_variant_get(params, "(i)", &id);
        if (valid_id(id))
            g_dbus_method_invocation_return_value(inv, g_variant_new("(b)", FALSE));
    } else if (!strcmp(method, "AboutToShowGroup")) {
        GVariantIter *ids;
        GVariantBuilder none, errs;
        g_variant_builder_init(&none, G_VARIANT_TYPE("ai"));
        g_variant_builder_init(&errs, G_VARIANT_TYPE("ai"));
        g_variant_get(params, "(ai)", &ids);
        while (g_variant_iter_next(ids, "i", &id)) {
            if (!valid_id(id))
                g_variant_builder_add(&errs, "i", id);
        }
        g_variant_iter_free(ids);
        g_dbus_method_invocation_return_value(inv, g_variant_new("(aiai)", &none, &errs));
        return;
    } else {
        g_dbus_method_invocation_return_error(inv, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD,
                                              "no method %s on the menu", method);
        return;
    }
    if (!valid_id(id))
        g_dbus_method_invocation_return_error(inv, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS,
                                              "no menu item with id %d", id);
}

static GVariant *menu_get_property(GDBusConnection *conn, const char *sender,
                                   const char *path, const char *iface,
                                   const char *prop, GError **error, gpointer data)
{
    (void)conn, (void)sender, (void)path, (void)iface, (void)data;
    if (!strcmp(prop, "Version"))
        return g_variant_new_uint32(3);
    if (!strcmp(prop, "TextDirection"))
        return g_variant_new_string("ltr");
    if (!strcmp(prop, "Status"))
        return g_variant_new_string("normal");
    if (!strcmp(prop, "IconThemePath"))
        return g_variant_new_strv(NULL, 0);
    g_set_error(error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_PROPERTY,
                "the menu has no property %s", prop);
    return NULL;
}

static const GDBusInterfaceVTable sni_vtable = {sni_method_call, sni_get_property, NULL, {0}};
static const GDBusInterfaceVTable menu_vtable = {menu_method_call, menu_get_property, NULL, {0}};

/* ---- Bus connection, name, watcher --------------------------------------- */

static void on_registered(GObject *src, GAsyncResult *res, gpointer data)
{
    GError *err = NULL;
    GVariant *ret = g_dbus_connection_call_finish(G_DBUS_CONNECTION(src), res, &err);
    if (ret) {
        g_variant_unref(ret);
        struct svc_tray_backend *be = data;
        g_debug("tray: %s registered with the StatusNotifierWatcher", be->bus_name);
    } else {
        /* Cancelled means the backend is gone: touch nothing. */
        if (!g_error_matches(err, G_IO_ERROR, G_IO_ERROR_CANCELLED))
            g_message("tray: the StatusNotifierWatcher refused the icon: %s", err->message);
        g_error_free(err);
    }
}

/* Once we own our name and a watcher is on the bus, tell it about us (by
 * bus name, as the spec says; the watcher reads /StatusNotifierItem). */
static void register_with_watcher(struct svc_tray_backend *be)
{
    if (!be->name_owned || !be->watcher_present)
        return;
    g_dbus_connection_call(be->conn, WATCHER_NAME, WATCHER_PATH, WATCHER_NAME,
                           "RegisterStatusNotifierItem", g_variant_new("(s)", be->bus_name),
                           NULL, G_DBUS_CALL_FLAGS_NONE, 5000, be->cancel, on_registered, be);
}

static void on_name_acquired(GDBusConnection *conn, const char *name, gpointer data)
{
    struct svc_tray_backend *be = data;
    (void)conn, (void)name;
    be->name_owned = TRUE;
    register_with_watcher(be);
}

static void on_name_lost(GDBusConnection *conn, const char *name, gpointer data)
{
    struct svc_tray_backend *be = data;
    (void)conn;
    g_message("tray: %s %s on the session bus; no tray icon",
              be->name_owned ? "lost" : "cannot own", name);
    be->name_owned = FALSE;
}

static void on_watcher_appeared(GDBusConnection *conn, const char *name, const char *owner,
                                gpointer data)
{
    struct svc_tray_backend *be = data;
    (void)conn, (void)name, (void)owner;
    be->watcher_present = TRUE;
    register_with_watcher(be);
}

static void on_watcher_vanished(GDBusConnection *conn, const char *name, gpointer data)
{
    struct svc_tray_backend *be = data;
    (void)conn, (void)name;
    be->watcher_present = FALSE;
}

static void on_bus(GObject *src, GAsyncResult *res, gpointer data)
{
    GError *err = NULL;
    GDBusConnection *conn = g_bus_get_finish(res, &err);
    (void)src;
    if (!conn) {
        if (!g_error_matches(err, G_IO_ERROR, G_IO_ERROR_CANCELLED))
            g_message("tray: no session bus (%s); running without a tray icon", err->message);
        g_error_free(err);
        return;
    }
    struct svc_tray_backend *be = data;
    be->conn = conn;
    /* The service outlives a desktop session's bus: the HTTP API keeps
     * serving editors and scripts if the bus goes away. */
    g_dbus_connection_set_exit_on_close(conn, FALSE);
    be->sni_reg = g_dbus_connection_register_object(conn, SNI_PATH,
        g_dbus_node_info_lookup_interface(be->info, SNI_IFACE), &sni_vtable, be, NULL, &err);
    if (be->sni_reg)
        be->menu_reg = g_dbus_connection_register_object(conn, MENU_PATH,
            g_dbus_node_info_lookup_interface(be->info, MENU_IFACE), &menu_vtable, be, NULL, &err);
    if (!be->menu_reg) {
        g_message("tray: cannot export the tray icon: %s", err->message);
        g_error_free(err);
        return;
    }
    be->own_id = g_bus_own_name_on_connection(conn, be->bus_name, G_BUS_NAME_OWNER_FLAGS_NONE,
                                              on_name_acquired, on_name_lost, be, NULL);
    be->watch_id = g_bus_watch_name_on_connection(conn, WATCHER_NAME,
                                                  G_BUS_NAME_WATCHER_FLAGS_NONE,
                                                  on_watcher_appeared, on_watcher_vanished,
                                                  be, NULL);
}

struct svc_tray_backend *svc_tray_backend_start(svc_tray *tray)
{
    struct svc_tray_backend *be = g_new0(struct svc_tray_backend, 1);
    be->tray = tray;
    be->cancel = g_cancellable_new();
    be->info = g_dbus_node_info_new_for_xml(introspection_xml, NULL);
    g_assert(be->info); /* a constant above */
    be->bus_name = g_strdup_printf("org.kde.StatusNotifierItem-%d-1", (int)getpid());
    be->icon_name = themed_icon_name();
    be->pixmaps = icon_pixmaps();
    be->revision = 1;
    g_bus_get(G_BUS_TYPE_SESSION, be->cancel, on_bus, be);
    return be;
}

void svc_tray_backend_update(svc_tray *tray)
{
    struct svc_tray_backend *be = tray->backend;
    if (!be->menu_reg)
        return;
    g_dbus_connection_emit_signal(be->conn, NULL, SNI_PATH, SNI_IFACE, "NewToolTip", NULL, NULL);
    /* The status item's new label, then a new layout revision for hosts
     * that only re-read the whole menu. */
    char *label = menu_label(tray->status);
    GVariantBuilder upd, removed;
    g_variant_builder_init(&upd, G_VARIANT_TYPE("a(ia{sv})"));
    g_variant_builder_init(&removed, G_VARIANT_TYPE("a(ias)"));
    GVariantBuilder props;
    g_variant_builder_init(&props, G_VARIANT_TYPE_VARDICT);
    g_variant_builder_add(&props, "{sv}", "label", g_variant_new_string(label));
    g_variant_builder_add(&upd, "(i@a{sv})", SVC_TRAY_ITEM_STATUS, g_variant_builder_end(&props));
    g_dbus_connection_emit_signal(be->conn, NULL, MENU_PATH, MENU_IFACE, "ItemsPropertiesUpdated",
                                  g_variant_new("(a(ia{sv})a(ias))", &upd, &removed), NULL);
    be->revision++;
    g_dbus_connection_emit_signal(be->conn, NULL, MENU_PATH, MENU_IFACE, "LayoutUpdated",
                                  g_variant_new("(ui)", be->revision, SVC_TRAY_ITEM_ROOT), NULL);
    g_free(label);
}

void svc_tray_backend_stop(svc_tray *tray)
{
    struct svc_tray_backend *be = tray->backend;
    tray->backend = NULL;
    g_cancellable_cancel(be->cancel);
    if (be->watch_id)
        g_bus_unwatch_name(be->watch_id);
    if (be->own_id)
        g_bus_unown_name(be->own_id);
    if (be->menu_reg)
        g_dbus_connection_unregister_object(be->conn, be->menu_reg);
    if (be->sni_reg)
        g_dbus_connection_unregister_object(be->conn, be->sni_reg);
    if (be->conn) {
        /* Send the name release now: the process may exit right after. */
        g_dbus_connection_flush_sync(be->conn, NULL, NULL);
        g_object_unref(be->conn);
    }
    g_object_unref(be->cancel);
    g_dbus_node_info_unref(be->info);
    g_variant_unref(be->pixmaps);
    g_free(be->icon_name);
    g_free(be->bus_name);
    g_free(be);
}

const char *svc_tray_backend_bus_name(const svc_tray *tray)
{
    return tray->backend->conn ? tray->backend->bus_name : NULL;
}

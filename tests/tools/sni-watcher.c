/*
 * sni-watcher.c — a stand-in org.kde.StatusNotifierWatcher for
 * test_service_tray.py: the part of a desktop panel that tray icons
 * register with. It owns the watcher name on the session bus
 * ($DBUS_SESSION_BUS_ADDRESS), prints "ready" once it does, and for each
 * RegisterStatusNotifierItem(s) call prints
 *
 *     registered SERVICE SENDER
 *
 * then reads the item's Id property back from SERVICE at
 * /StatusNotifierItem, as a panel would, and prints "item-id ID" (or
 * "item-error MESSAGE"). One line per event, flushed, so the test can wait
 * on stdout. Exits 0 on SIGTERM or when stdin closes.
 *
 * usage: sni-watcher
 */
#include <gio/gio.h>
#include <glib-unix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char xml[] =
    "<node><interface name='org.kde.StatusNotifierWatcher'>"
    " <method name='RegisterStatusNotifierItem'><arg type='s' direction='in'/></method>"
    " <method name='RegisterStatusNotifierHost'><arg type='s' direction='in'/></method>"
    " <property name='RegisteredStatusNotifierItems' type='as' access='read'/>"
    " <property name='IsStatusNotifierHostRegistered' type='b' access='read'/>"
    " <property name='ProtocolVersion' type='i' access='read'/>"
    " <signal name='StatusNotifierItemRegistered'><arg type='s'/></signal>"
    "</interface></node>";

static GPtrArray *items; /* registered service names */

static void on_id(GObject *src, GAsyncResult *res, gpointer data)
{
    GError *err = NULL;
    GVariant *ret = g_dbus_connection_call_finish(G_DBUS_CONNECTION(src), res, &err);
    (void)data;
    if (ret) {
        GVariant *v;
        g_variant_get(ret, "(v)", &v);
        printf("item-id %s\n", g_variant_is_of_type(v, G_VARIANT_TYPE_STRING)
                                   ? g_variant_get_string(v, NULL) : "(not a string)");
        g_variant_unref(v);
        g_variant_unref(ret);
    } else {
        printf("item-error %s\n", err->message);
        g_error_free(err);
    }
    fflush(stdout);
}

static void method_call(GDBusConnection *conn, const char *sender, const char *path,
                        const char *iface, const char *method, GVariant *params,
                        GDBusMethodInvocation *inv, gpointer data)
{
    const char *arg;
    (void)path, (void)iface, (void)data;
    g_variant_get(params, "(&s)", &arg);
    if (strcmp(method, "RegisterStatusNotifierItem") == 0) {
        /* Items pass their bus name, or (libappindicator) an object path
         * on the sender's connection. */
        const char *service = arg[0] == '/' ? sender : arg;
        printf("registered %s %s\n", arg, sender);
        fflush(stdout);
        g_ptr_array_add(items, g_strdup(service));
        g_dbus_connection_emit_signal(conn, NULL, "/StatusNotifierWatcher",
                                      "org.kde.StatusNotifierWatcher",
                                      "StatusNotifierItemRegistered",
                                      g_variant_new("(s)", service), NULL);
        g_dbus_connection_call(conn, service, "/StatusNotifierItem",
                               "org.freedesktop.DBus.Properties", "Get",
                               g_variant_new("(ss)", "org.kde.StatusNotifierItem", "Id"),
                               G_VARIANT_TYPE("(v)"), G_DBUS_CALL_FLAGS_NONE, 5000, NULL,
                               on_id, NULL);
    }
    g_dbus_method_invocation_return_value(inv, NULL);
}

static GVariant *get_property(GDBusConnection *conn, const char *sender, const char *path,
                              const char *iface, const char *prop, GError **error,
                              gpointer data)
{
    (void)conn, (void)sender, (void)path, (void)iface, (void)data;
    if (strcmp(prop, "RegisteredStatusNotifierItems") == 0)
        return g_variant_new_strv((const char *const *)items->pdata, items->len);
    if (strcmp(prop, "IsStatusNotifierHostRegistered") == 0)
        return g_variant_new_boolean(TRUE);
    if (strcmp(prop, "ProtocolVersion") == 0)
        return g_variant_new_int32(0);
    g_set_error(error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_PROPERTY, "no property %s", prop);
    return NULL;
}

static const GDBusInterfaceVTable vtable = {method_call, get_property, NULL, {0}};

static void on_bus(GDBusConnection *conn, const char *name, gpointer data)
{
    GDBusNodeInfo *info = data;
    GError *err = NULL;
    (void)name;
    if (!g_dbus_connection_register_object(conn, "/StatusNotifierWatcher", info->interfaces[0],
                                           &vtable, NULL, NULL, &err)) {
        fprintf(stderr, "sni-watcher: %s\n", err->message);
        exit(1);
    }
}

static void on_name(GDBusConnection *conn, const char *name, gpointer data)
{
    (void)conn, (void)name, (void)data;
    printf("ready\n");
    fflush(stdout);
}

static void on_lost(GDBusConnection *conn, const char *name, gpointer data)
{
    (void)conn, (void)data;
    fprintf(stderr, "sni-watcher: cannot own %s\n", name);
    exit(1);
}

static gboolean quit(gpointer loop)
{
    g_main_loop_quit(loop);
    return G_SOURCE_REMOVE;
}

static gboolean on_stdin(gint fd, GIOCondition cond, gpointer loop)
{
    char buf[64];
    (void)cond;
    if (read(fd, buf, sizeof buf) <= 0)
        g_main_loop_quit(loop);
    return G_SOURCE_CONTINUE;
}

int main(void)
{
    GMainLoop *loop = g_main_loop_new(NULL, FALSE);
    GDBusNodeInfo *info = g_dbus_node_info_new_for_xml(xml, NULL);
    items = g_ptr_array_new_with_free_func(g_free);
    guint id = g_bus_own_name(G_BUS_TYPE_SESSION, "org.kde.StatusNotifierWatcher",
                              G_BUS_NAME_OWNER_FLAGS_NONE, on_bus, on_name, on_lost, info, NULL);
    g_unix_signal_add(SIGTERM, quit, loop);
    g_unix_fd_add(0, G_IO_IN | G_IO_HUP, on_stdin, loop);
    g_main_loop_run(loop);
    g_bus_unown_name(id);
    g_ptr_array_free(items, TRUE);
    g_dbus_node_info_unref(info);
    g_main_loop_unref(loop);
    return 0;
}

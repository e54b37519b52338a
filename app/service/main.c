/*
 * main.c — moedesk-service: parse the command line, start the server,
 * serve until SIGTERM/SIGINT, then stop cleanly (running requests get a
 * grace period, the usage database is flushed).
 *
 * A tray icon (tray.h) shows the model and URL and offers "Quit MoeDesk",
 * which stops the service exactly as SIGTERM does; `--no-tray` hides it,
 * and without a session bus there is simply none.
 *
 * Scripts and tests rely on: `--port P` (0 = any free port) and
 * `--model FILE.gguf`; the first line on stdout is
 * "moedesk-service listening on http://HOST:PORT" once requests can be
 * sent. Data goes under $XDG_DATA_HOME/moedesk (or $MOEDESK_DATA_DIR).
 */
#include "server.h"
#include "settings.h"
#include "tray.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#ifdef G_OS_UNIX
#include <fcntl.h>
#include <glib-unix.h>
#include <sys/file.h>
#include <unistd.h>
#endif

/* One instance per user (per data directory): an exclusive lock on
 * <data dir>/service.lock, held for the process's life, which also records
 * the pid and URL so the window and scripts can find the running service.
 * Returns the fd (>= 0), or -1 after printing who holds it. */
static int instance_lock(const char *data_dir)
{
#ifdef G_OS_UNIX
    g_mkdir_with_parents(data_dir, 0700);
    char *path = g_build_filename(data_dir, "service.lock", NULL);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "moedesk-service: cannot open %s: %s\n", path, g_strerror(errno));
        g_free(path);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char buf[256] = {0};
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        g_strstrip(buf);
        fprintf(stderr, "moedesk-service: another moedesk-service is already running for this "
                        "user (%s: %s); stop it first or use another XDG_DATA_HOME\n",
                path, n > 0 ? buf : "no details");
        close(fd);
        g_free(path);
        return -1;
    }
    g_free(path);
    return fd;
#else
    (void)data_dir;
    return 0; /* Windows: a named mutex in the tray build (not built yet) */
#endif
}

static void instance_record(int fd, const char *url)
{
#ifdef G_OS_UNIX
    char *line = g_strdup_printf("pid %d %s\n", (int)getpid(), url);
    if (ftruncate(fd, 0) == 0 && pwrite(fd, line, strlen(line), 0) < 0)
        g_warning("cannot record the service's URL in its lock file");
    g_free(line);
#else
    (void)fd;
    (void)url;
#endif
}

void svc_register_all(svc_server *srv);

static gboolean on_signal(gpointer data)
{
    g_main_loop_quit(data);
    return G_SOURCE_CONTINUE;
}

static void on_tray_quit(gpointer data)
{
    g_main_loop_quit(data);
}

/* The tray's status line follows the loaded model (loads, switches and
 * idle unloads happen in server code on this thread); set_status only
 * signals the desktop when something changed. */
typedef struct {
    svc_tray *tray;
    svc_server *srv;
    char *url;
} tray_poll;

static const char *current_model_name(svc_server *srv)
{
    svc_model *m = svc_server_current_model(srv);
    return m ? m->name : NULL;
}

static gboolean on_tray_poll(gpointer data)
{
    tray_poll *tp = data;
    svc_tray_set_status(tp->tray, current_model_name(tp->srv), tp->url);
    return G_SOURCE_CONTINUE;
}

int main(int argc, char **argv)
{
    svc_server_options o;
    svc_server_options_init(&o);
    int port = -1;
    char *host = NULL, *model = NULL, *name = NULL, *usage_db = NULL, *config = NULL;
    int parallel = 0, n_ctx = 0, threads = 0, queue = 0, timeout_s = 0, idle_s = 0;
    int header_timeout_ms = 0;
    gboolean no_usage = FALSE, no_tray = FALSE;
    GOptionEntry entries[] = {
        {"config", 0, 0, G_OPTION_ARG_FILENAME, &config, "Settings file (default: the config dir's moedesk/service.json)", "FILE"},
        {"port", 'p', 0, G_OPTION_ARG_INT, &port, "Port to listen on (default 11435; 0: any free port)", "P"},
        {"host", 0, 0, G_OPTION_ARG_STRING, &host, "Address to bind (default 127.0.0.1)", "ADDR"},
        {"model", 'm', 0, G_OPTION_ARG_FILENAME, &model, "Serve this GGUF file", "FILE"},
        {"name", 0, 0, G_OPTION_ARG_STRING, &name, "Name clients use for --model (default: file stem)", "NAME"},
        {"parallel", 0, 0, G_OPTION_ARG_INT, &parallel, "Sequences decoded together (default 4)", "N"},
        {"ctx", 'c', 0, G_OPTION_ARG_INT, &n_ctx, "Context per sequence (default: model's, at most 4096)", "N"},
        {"threads", 't', 0, G_OPTION_ARG_INT, &threads, "CPU threads (default: all)", "N"},
        {"queue", 0, 0, G_OPTION_ARG_INT, &queue, "Requests waiting beyond the running ones (default 64)", "N"},
        {"timeout", 0, 0, G_OPTION_ARG_INT, &timeout_s, "Per-request timeout in seconds (default 600)", "S"},
        {"idle-unload", 0, 0, G_OPTION_ARG_INT, &idle_s, "Unload the model after S idle seconds", "S"},
        {"header-timeout", 0, 0, G_OPTION_ARG_INT, &header_timeout_ms, "Close connections whose request has not fully arrived after MS milliseconds (default 30000)", "MS"},
        {"usage-db", 0, 0, G_OPTION_ARG_FILENAME, &usage_db, "Usage database (default: data dir's usage.sqlite3)", "FILE"},
        {"no-usage", 0, 0, G_OPTION_ARG_NONE, &no_usage, "Do not record usage", NULL},
        {"no-tray", 0, 0, G_OPTION_ARG_NONE, &no_tray, "Do not show a tray icon", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    GOptionContext *oc = g_option_context_new("- MoeDesk's local model service");
    g_option_context_add_main_entries(oc, entries, NULL);
    GError *err = NULL;
    if (!g_option_context_parse(oc, &argc, &argv, &err)) {
        fprintf(stderr, "moedesk-service: %s\n", err->message);
        return 2;
    }
    g_option_context_free(oc);
    /* The settings file first, then the command line on top of it. */
    svc_settings *st = svc_settings_load(config, &err);
    if (!st) {
        fprintf(stderr, "moedesk-service: %s\n", err->message);
        return 1;
    }
    if (port == -1)
        port = st->port;
    if (port < 0 || port > 65535) {
        fprintf(stderr, "moedesk-service: --port %d is not a port number (0..65535)\n", port);
        return 2;
    }
    o.port = (guint16)port;
    o.host = host ? host : st->host;
    /* --model FILE serves that file; the settings' model may be a file or
     * an installed model's name (loaded on the first request). */
    if (model) {
        o.model_path = model;
        o.model_name = name;
    } else if (st->model && g_file_test(st->model, G_FILE_TEST_IS_REGULAR)) {
        o.model_path = st->model;
    } else if (st->model) {
        o.default_model = st->model;
    }
    o.n_parallel = parallel ? parallel : st->n_parallel;
    o.n_ctx = n_ctx ? n_ctx : st->n_ctx;
    o.n_threads = threads ? threads : st->n_threads;
    o.queue_max = queue ? queue : st->queue_max;
    /* The settings the service takes while running come from `st`, with
     * the command line's overrides folded in (not saved). */
    if (timeout_s)
        st->request_timeout_s = timeout_s;
    if (idle_s)
        st->idle_unload_s = idle_s;
    o.settings_path = config; /* NULL: the default path, as loaded */
    if (header_timeout_ms > 0)
        o.header_timeout_ms = header_timeout_ms;
    char *default_db = usage_store_default_path();
    char *data_dir = g_path_get_dirname(default_db);
    int lock_fd = instance_lock(data_dir);
    g_free(data_dir);
    if (lock_fd < 0) {
        g_free(default_db);
        svc_settings_free(st);
        return 1;
    }
    o.usage_db = no_usage ? NULL : usage_db ? usage_db : default_db;

    svc_server *srv = svc_server_new(&o, &err);
    if (srv) {
        svc_server_apply_settings(srv, st);
        svc_register_all(srv);
    }
    if (!srv || !svc_server_start(srv, &err)) {
        fprintf(stderr, "moedesk-service: %s\n", err->message);
        g_error_free(err);
        svc_server_free(srv);
        g_free(default_db);
        svc_settings_free(st);
        return 1;
    }
    GMainLoop *loop = g_main_loop_new(NULL, FALSE);
#ifdef G_OS_UNIX
    g_unix_signal_add(SIGTERM, on_signal, loop);
    g_unix_signal_add(SIGINT, on_signal, loop);
#endif
    char *url = g_strdup_printf("http://%s:%u", o.host, svc_server_port(srv));
    instance_record(lock_fd, url);
    printf("moedesk-service listening on %s\n", url);
    fflush(stdout);
    tray_poll tp = {NULL, srv, url};
    guint poll_id = 0;
    if (!no_tray) {
        tp.tray = svc_tray_new(current_model_name(srv), url, on_tray_quit, loop);
        poll_id = g_timeout_add_seconds(1, on_tray_poll, &tp);
    }
    g_main_loop_run(loop);
    /* The icon goes first: a second Quit cannot arrive while stopping. */
    if (poll_id)
        g_source_remove(poll_id);
    svc_tray_free(tp.tray);
    g_free(url);
    g_message("stopping: finishing running requests");
    svc_server_stop(srv, 10000);
    svc_server_free(srv);
    g_main_loop_unref(loop);
    g_free(default_db);
    g_free(host);
    g_free(model);
    g_free(name);
    g_free(usage_db);
    g_free(config);
    svc_settings_free(st);
    return 0;
}

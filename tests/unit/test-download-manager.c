/*
 * test-download-manager.c — MoeDownloadManager in-process, against the
 * fixture hub (its path is argv[1]): two requests for one destination share
 * one transfer; one caller cancelling does not stop the other's; the queue
 * runs more files than the parallel limit; progress only grows; a bad hash
 * fails only the file it belongs to. The hub's byte counters prove what was
 * transferred.
 */
#include "test.h"
#include "download-manager.h"
#include "library.h"
#include "partfile.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    int      pending;
    GError  *errors[8];
    gboolean ok[8];
    guint64  last_done[8];
    gboolean went_back;
    GMainLoop *loop;
} Run;

typedef struct {
    Run *run;
    int  index;
} Slot;

static void on_progress(const MoeDownloadProgress *p, gpointer data)
{
    Slot *s = data;
    if (p->done < s->run->last_done[s->index])
        s->run->went_back = TRUE;
    s->run->last_done[s->index] = p->done;
}

static void on_done(GObject *source, GAsyncResult *res, gpointer data)
{
    Slot *s = data;
    s->run->ok[s->index] = moe_download_manager_download_finish(MOE_DOWNLOAD_MANAGER(source), res,
                                                                &s->run->errors[s->index]);
    if (--s->run->pending == 0)
        g_main_loop_quit(s->run->loop);
}

static char *sha256_hex(const guint8 *data, gsize n)
{
    moe_sha256 ctx;
    uint8_t d[32];
    char hex[65];
    moe_sha256_init(&ctx);
    moe_sha256_update(&ctx, data, n);
    moe_sha256_final(&ctx, d);
    moe_sha256_hex(d, hex);
    return g_strdup(hex);
}

/* GET (or POST) on the fixture's control API; returns the body. */
static char *control(SoupSession *session, guint port, const char *method, const char *what)
{
    g_autofree char *url = g_strdup_printf("http://127.0.0.1:%u/_control/%s", port, what);
    g_autoptr(SoupMessage) msg = soup_message_new(method, url);
    g_autoptr(GBytes) body = soup_session_send_and_read(session, msg, NULL, NULL);
    return body ? g_strndup(g_bytes_get_data(body, NULL), g_bytes_get_size(body)) : NULL;
}

static gint64 served_bytes(SoupSession *session, guint port, const char *path)
{
    g_autofree char *text = control(session, port, "GET", "stats");
    g_autoptr(JsonParser) p = json_parser_new();
    if (!text || !json_parser_load_from_data(p, text, -1, NULL))
        return -1;
    JsonObject *files = json_object_get_object_member(json_node_get_object(json_parser_get_root(p)), "files");
    JsonObject *f = files && json_object_has_member(files, path) ? json_object_get_object_member(files, path) : NULL;
    return f ? json_object_get_int_member(f, "bytes") : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test-download-manager FIXTURE_HUB\n");
        return 2;
    }
    g_autofree char *tmp = g_dir_make_tmp("moe-dlm-XXXXXX", NULL);
    g_autofree char *repo_dir = g_build_filename(tmp, "root", "org", "repo", NULL);
    g_mkdir_with_parents(repo_dir, 0755);
    gsize n = 3u << 20;
    guint8 *data = g_malloc(n);
    for (gsize i = 0; i < n; i++)
        data[i] = (guint8)(i * 2654435761u >> 13);
    g_autofree char *hash = sha256_hex(data, n);
    for (int k = 0; k < 4; k++) {
        g_autofree char *name = g_strdup_printf("f%d.bin", k);
        g_autofree char *path = g_build_filename(repo_dir, name, NULL);
        CHECK(g_file_set_contents(path, (const char *)data, (gssize)n, NULL));
    }
    g_autofree char *root = g_build_filename(tmp, "root", NULL);
    char *hub_argv[] = { argv[1], "--root", root, NULL };
    GPid pid;
    int in_fd, out_fd;
    g_autoptr(GError) error = NULL;
    if (!g_spawn_async_with_pipes(NULL, hub_argv, NULL, 0, NULL, NULL, &pid, &in_fd, &out_fd,
                                  NULL, &error)) {
        fprintf(stderr, "cannot start %s: %s\n", argv[1], error->message);
        return 1;
    }
    char line[64] = { 0 };
    for (size_t len = 0; len < sizeof line - 1 && read(out_fd, line + len, 1) == 1 && line[len] != '\n'; len++)
        ;
    guint port = (guint)atoi(line);
    CHECK(port > 0);
    g_setenv("MOEDESK_RETRY_BASE_MS", "50", TRUE);
    g_autoptr(SoupSession) session = soup_session_new();
    g_autoptr(MoeDownloadManager) mgr = moe_download_manager_new(NULL, 1);
    Run run = { .loop = g_main_loop_new(NULL, FALSE) };
    Slot slots[8];
    for (int i = 0; i < 8; i++)
        slots[i] = (Slot){ &run, i };

    /* 1. Two callers, one destination: one transfer; the first caller
     *    cancels, the second still gets the file. Plus three more files
     *    queued behind the limit of 1, one of them with a wrong hash. */
    g_free(control(session, port, "POST", "fault?path=org/repo/f0.bin&kind=slow&rate=6000000"));
    g_autoptr(GCancellable) cancel_a = g_cancellable_new();
    for (int k = 0; k < 4; k++) {
        g_autofree char *url = g_strdup_printf("http://127.0.0.1:%u/org/repo/resolve/main/f%d.bin", port, k);
        g_autofree char *dest = g_strdup_printf("%s/out/f%d.bin", tmp, k);
        MoeDownloadSpec spec = {
            .url = url, .dest = dest, .label = dest, .size = n, .hash_kind = MOE_HASH_SHA256,
            .hash = k == 3 ? "0000000000000000000000000000000000000000000000000000000000000000" : hash,
        };
        if (k == 0) {
            run.pending += 2;
            moe_download_manager_download_async(mgr, &spec, 0, on_progress, &slots[0], cancel_a,
                                                on_done, &slots[0]);
            moe_download_manager_download_async(mgr, &spec, 0, on_progress, &slots[1], NULL,
                                                on_done, &slots[1]);
        } else {
            run.pending++;
            moe_download_manager_download_async(mgr, &spec, 0, on_progress, &slots[k + 1], NULL,
                                                on_done, &slots[k + 1]);
        }
    }
    g_timeout_add_once(150, (GSourceOnceFunc)g_cancellable_cancel, cancel_a);
    g_main_loop_run(run.loop);
    CHECK(!run.ok[0] && g_error_matches(run.errors[0], G_IO_ERROR, G_IO_ERROR_CANCELLED));
    CHECK_MSG(run.ok[1], "%s", run.errors[1] ? run.errors[1]->message : "");
    CHECK(run.ok[2] && run.ok[3]);
    CHECK(!run.ok[4] && g_error_matches(run.errors[4], MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_HASH_MISMATCH));
    CHECK(run.errors[4] && strstr(run.errors[4]->message, "f3.bin"));
    CHECK(!run.went_back);
    CHECK_EQ_INT(run.last_done[1], n);
    CHECK_EQ_INT(served_bytes(session, port, "org/repo/f0.bin"), n); /* shared, not twice */
    for (int k = 0; k < 4; k++) {
        g_autofree char *dest = g_strdup_printf("%s/out/f%d.bin", tmp, k);
        g_autofree char *part = g_strconcat(dest, ".part", NULL);
        gchar *got = NULL;
        gsize got_n = 0;
        gboolean have = g_file_get_contents(dest, &got, &got_n, NULL);
        CHECK_MSG(k == 3 ? !have : (have && got_n == n && memcmp(got, data, n) == 0), "f%d", k);
        CHECK(!g_file_test(part, G_FILE_TEST_EXISTS));
        g_free(got);
        g_unlink(dest);
    }
    for (int i = 0; i < 8; i++)
        g_clear_error(&run.errors[i]);

    /* 2. The last caller cancelling stops the transfer and keeps the part. */
    g_free(control(session, port, "POST", "reset"));
    g_free(control(session, port, "POST", "fault?path=org/repo/f1.bin&kind=slow&rate=2000000"));
    g_autoptr(GCancellable) cancel_b = g_cancellable_new();
    {
        g_autofree char *url = g_strdup_printf("http://127.0.0.1:%u/org/repo/resolve/main/f1.bin", port);
        g_autofree char *dest = g_strdup_printf("%s/out/f1.bin", tmp);
        MoeDownloadSpec spec = { .url = url, .dest = dest, .size = n, .hash_kind = MOE_HASH_SHA256,
                                 .hash = hash };
        run.pending = 1;
        memset(run.last_done, 0, sizeof run.last_done);
        moe_download_manager_download_async(mgr, &spec, 0, on_progress, &slots[0], cancel_b,
                                            on_done, &slots[0]);
        g_timeout_add_once(600, (GSourceOnceFunc)g_cancellable_cancel, cancel_b);
        g_main_loop_run(run.loop);
        CHECK(g_error_matches(run.errors[0], G_IO_ERROR, G_IO_ERROR_CANCELLED));
        g_autofree char *part = g_strconcat(dest, ".part", NULL);
        g_autofree char *sidecar = g_strconcat(dest, ".part.json", NULL);
        g_autofree char *lock = g_strconcat(dest, ".part.lock", NULL);
        GStatBuf st;
        CHECK(g_stat(part, &st) == 0 && st.st_size > 0 && (gsize)st.st_size < n);
        MoePartInfo info;
        CHECK(moe_part_info_load(sidecar, &info) && info.size == n && g_strcmp0(info.sha256, hash) == 0);
        moe_part_info_clear(&info);
        CHECK(!g_file_test(lock, G_FILE_TEST_EXISTS));
        g_clear_error(&run.errors[0]);
    }

    close(in_fd); /* the hub exits when its stdin closes */
    close(out_fd);
    int status = 0;
    waitpid(pid, &status, 0);
    g_spawn_close_pid(pid);
    g_main_loop_unref(run.loop);
    g_free(data);
    g_autofree char *rm = g_strdup_printf("rm -rf '%s'", tmp);
    CHECK(system(rm) == 0);
    TEST_DONE();
}

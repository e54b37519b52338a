/*
 * partfile.c — sidecar JSON and the per-file lock of partfile.h. The
 * sidecar is small and rewritten whole (temporary file + rename), so a crash
 * leaves either the old or the new one. The lock holds a pid; liveness is
 * checked with kill(pid, 0) on POSIX and OpenProcess on Windows.
 */
#include "partfile.h"
#include "library.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>

#ifdef G_OS_WIN32
#include <windows.h>
#include <process.h>
#include <io.h>
#define getpid _getpid
#else
#include <signal.h>
#include <unistd.h>
#endif

void moe_part_info_clear(MoePartInfo *info)
{
    g_clear_pointer(&info->url, g_free);
    g_clear_pointer(&info->sha256, g_free);
    g_clear_pointer(&info->git_sha1, g_free);
    g_clear_pointer(&info->etag, g_free);
    info->size = MOE_SIZE_UNKNOWN;
    info->bytes_done = 0;
}

static char *member_str(JsonObject *o, const char *key)
{
    JsonNode *n = json_object_get_member(o, key);
    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
               ? g_strdup(json_node_get_string(n)) : NULL;
}

static guint64 member_u64(JsonObject *o, const char *key, guint64 def)
{
    JsonNode *n = json_object_get_member(o, key);
    if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64 ||
        json_node_get_int(n) < 0)
        return def;
    return (guint64)json_node_get_int(n);
}

gboolean moe_part_info_load(const char *sidecar, MoePartInfo *info)
{
    memset(info, 0, sizeof *info);
    info->size = MOE_SIZE_UNKNOWN;
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!json_parser_load_from_file(parser, sidecar, NULL))
        return FALSE;
    JsonNode *root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root))
        return FALSE;
    JsonObject *o = json_node_get_object(root);
    info->url = member_str(o, "url");
    info->sha256 = member_str(o, "sha256");
    info->git_sha1 = member_str(o, "git_sha1");
    info->etag = member_str(o, "etag");
    info->size = member_u64(o, "size", MOE_SIZE_UNKNOWN);
    info->bytes_done = member_u64(o, "bytes_done", 0);
    return TRUE;
}

gboolean moe_part_info_save(const char *sidecar, const MoePartInfo *info, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    const char *keys[] = { "url", "sha256", "git_sha1", "etag" };
    const char *vals[] = { info->url, info->sha256, info->git_sha1, info->etag };
    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
        if (!vals[i])
            continue;
        json_builder_set_member_name(b, keys[i]);
        json_builder_add_string_value(b, vals[i]);
    }
    if (info->size != MOE_SIZE_UNKNOWN) {
        json_builder_set_member_name(b, "size");
        json_builder_add_int_value(b, (gint64)info->size);
    }
    json_builder_set_member_name(b, "bytes_done");
    json_builder_add_int_value(b, (gint64)info->bytes_done);
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    g_autofree char *when = g_date_time_format_iso8601(now);
    json_builder_set_member_name(b, "updated");
    json_builder_add_string_value(b, when);
    json_builder_end_object(b);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    g_autofree char *text = json_generator_to_data(gen, NULL);
    /* Consistent (temporary + rename) but not durable: an fsync every few
     * seconds would slow the download, and a lost sidecar only costs a
     * restart of that file. */
    return g_file_set_contents_full(sidecar, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0644, error);
}

gboolean moe_pid_alive(int pid)
{
    if (pid <= 0)
        return FALSE;
#ifdef G_OS_WIN32
    HANDLE h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)pid);
    if (!h)
        return GetLastError() == ERROR_ACCESS_DENIED;
    DWORD code = 0;
    BOOL ok = GetExitCodeProcess(h, &code);
    CloseHandle(h);
    return ok && code == STILL_ACTIVE;
#else
    return kill(pid, 0) == 0 || errno == EPERM;
#endif
}

static int read_lock_pid(const char *lock_path)
{
    g_autofree char *text = NULL;
    guint64 pid = 0;
    if (!g_file_get_contents(lock_path, &text, NULL, NULL))
        return -1;
    g_strstrip(text);
    if (!g_ascii_string_to_unsigned(text, 10, 1, G_MAXINT, &pid, NULL))
        return 0; /* being written, or garbage: treated as stale below */
    return (int)pid;
}

MoeLockResult moe_part_lock_acquire(const char *lock_path, int *holder_pid, GError **error)
{
    for (int tries = 0; tries < 5; tries++) {
        int fd = g_open(lock_path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd >= 0) {
            char buf[32];
            int n = g_snprintf(buf, sizeof buf, "%d\n", (int)getpid());
            gboolean ok = write(fd, buf, (size_t)n) == n;
            ok = (close(fd) == 0) && ok;
            if (!ok) {
                int e = errno;
                g_unlink(lock_path);
                g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_IO,
                            "cannot write lock file %s: %s", lock_path, g_strerror(e));
                return MOE_LOCK_FAILED;
            }
            return MOE_LOCK_TAKEN;
        }
        if (errno != EEXIST) {
            int e = errno;
            g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_IO,
                        "cannot create lock file %s: %s", lock_path, g_strerror(e));
            return MOE_LOCK_FAILED;
        }
        int pid = read_lock_pid(lock_path);
        if (pid < 0)
            continue; /* removed between our open and read: try again */
        if (pid == 0) {
            /* Empty: its writer may be between open and write. Only a lock
             * older than a few seconds is garbage. */
            GStatBuf st;
            if (g_stat(lock_path, &st) == 0 && (gint64)st.st_mtime + 5 > g_get_real_time() / G_USEC_PER_SEC) {
                *holder_pid = 0;
                return MOE_LOCK_BUSY;
            }
        } else if (pid != (int)getpid() && moe_pid_alive(pid)) {
            *holder_pid = pid;
            return MOE_LOCK_BUSY;
        }
        /* Stale (its process is gone) or left by an earlier run of ours. */
        g_unlink(lock_path);
    }
    g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_IO,
                "cannot take lock file %s: it keeps changing", lock_path);
    return MOE_LOCK_FAILED;
}

void moe_part_lock_release(const char *lock_path)
{
    if (read_lock_pid(lock_path) == (int)getpid())
        g_unlink(lock_path);
}

/*
 * download-manager.h — resumable, verified downloads of single files on the
 * GLib main loop; the engine under `moedesk-cli pull`, the service and the
 * window.
 *
 * One request downloads one URL into `dest`:
 *   - bytes go to `dest.part` with a sidecar and a lock (partfile.h); an
 *     existing part is resumed with an HTTP Range request (If-Range with the
 *     ETag when the server gave one), after re-hashing its bytes;
 *   - 206 continues, 200 (the server ignored Range) restarts from zero, 416
 *     restarts from zero once;
 *   - timeouts, resets, bodies cut short and 5xx are retried with backoff,
 *     429/503 honour Retry-After (http.h); a retry that follows progress
 *     starts the attempt count afresh, so a long download survives many
 *     short outages but a dead server fails after MOEDESK_RETRY_ATTEMPTS;
 *   - the hash (sha256, or the git blob id for small files) is computed
 *     while streaming, on a worker thread that also writes, and checked
 *     before `dest.part` is fsynced and renamed to `dest`; a mismatch deletes
 *     the part and names the file;
 *   - a write that fails with ENOSPC/EDQUOT/EFBIG is a NO_SPACE error; the
 *     part and sidecar are kept for a later resume;
 *   - cancelling keeps the part for resume;
 *   - requests for the same `dest` share one transfer (each caller gets the
 *     result); another process holding `dest.part.lock` is waited for (or,
 *     with MOE_DOWNLOAD_NO_WAIT, reported as BUSY naming its pid).
 * At most `max_parallel` transfers run at once; the rest queue.
 */
#ifndef MOEDESK_DOWNLOAD_MANAGER_H
#define MOEDESK_DOWNLOAD_MANAGER_H

#include "hasher.h"

#include <gio/gio.h>
#include <libsoup/soup.h>

G_BEGIN_DECLS

#define MOE_TYPE_DOWNLOAD_MANAGER (moe_download_manager_get_type())
G_DECLARE_FINAL_TYPE(MoeDownloadManager, moe_download_manager, MOE, DOWNLOAD_MANAGER, GObject)

typedef enum {
    MOE_DOWNLOAD_NO_WAIT = 1 << 0, /* BUSY instead of waiting for another process */
} MoeDownloadFlags;

/* What to download. Strings are copied by download_async. */
typedef struct {
    const char *url;
    const char *dest;      /* final path; its folder is created             */
    const char *label;     /* for messages, e.g. "org/repo: model.gguf"     */
    guint64     size;      /* expected bytes, or MOE_SIZE_UNKNOWN           */
    MoeHashKind hash_kind; /* what `hash` is                                */
    const char *hash;      /* lowercase hex, or NULL                        */
    const char *token;     /* bearer token, or NULL                         */
    const char *token_url; /* the origin the token belongs to               */
} MoeDownloadSpec;

typedef enum {
    MOE_DOWNLOAD_QUEUED,
    MOE_DOWNLOAD_WAITING_LOCK, /* another process downloads it: lock_pid    */
    MOE_DOWNLOAD_CHECKING,     /* re-hashing an existing part               */
    MOE_DOWNLOAD_RUNNING,
    MOE_DOWNLOAD_RETRY_WAIT,   /* retry_in_ms until the next attempt        */
    MOE_DOWNLOAD_FINISHING,    /* hash checked, fsync and rename            */
    MOE_DOWNLOAD_DONE,
} MoeDownloadState;

typedef struct {
    const char      *dest;
    const char      *label;
    MoeDownloadState state;
    guint64          done;        /* bytes in the part file (hashed)        */
    guint64          total;       /* MOE_SIZE_UNKNOWN if unknown            */
    guint64          received;    /* bytes received over the network by this
                                     process for this file                  */
    double           rate;        /* bytes/s over the last seconds          */
    guint            attempt;     /* 1-based                                */
    gint64           retry_in_ms;
    int              lock_pid;
    const char      *last_error;  /* why the last attempt failed, or NULL   */
} MoeDownloadProgress;

/* Called on the main context, at most every ~100 ms per file and on every
 * state change. `p` is valid during the call only. */
typedef void (*MoeDownloadProgressFunc)(const MoeDownloadProgress *p, gpointer user_data);

/* `session` may be NULL (a new one from moe_http_session_new). */
MoeDownloadManager *moe_download_manager_new(SoupSession *session, guint max_parallel);

/* The session downloads use (for other requests to the same hosts). */
SoupSession *moe_download_manager_get_session(MoeDownloadManager *self);

/* Starts (or joins) the download of spec->dest. `progress` (may be NULL)
 * and its data must stay valid until the callback has run. Errors:
 * MOE_LIBRARY_ERROR_* (NOT_FOUND for 404, HTTP, NETWORK after retries,
 * HASH_MISMATCH, SIZE_MISMATCH, NO_SPACE, BUSY, IO) with a message that
 * names the file; G_IO_ERROR_CANCELLED when `cancellable` fires. */
void     moe_download_manager_download_async(MoeDownloadManager *self,
                                             const MoeDownloadSpec *spec,
                                             MoeDownloadFlags flags,
                                             MoeDownloadProgressFunc progress,
                                             gpointer progress_data,
                                             GCancellable *cancellable,
                                             GAsyncReadyCallback callback,
                                             gpointer user_data);
gboolean moe_download_manager_download_finish(MoeDownloadManager *self,
                                              GAsyncResult *result, GError **error);

/* Paths of the helper files for `dest` (newly allocated). */
char *moe_download_part_path(const char *dest);
char *moe_download_sidecar_path(const char *dest);
char *moe_download_lock_path(const char *dest);

G_END_DECLS

#endif /* MOEDESK_DOWNLOAD_MANAGER_H */

/*
 * partfile.h — the files that let a download survive interruption:
 *
 *   NAME.part       the bytes received so far (appended to, never rewritten)
 *   NAME.part.json  sidecar: what the part is a download of
 *                   {"url", "size", "sha256" | "git_sha1", "etag",
 *                    "bytes_done", "updated"}
 *   NAME.part.lock  the decimal pid of the process downloading NAME
 *
 * The sidecar says whether an existing part may be resumed (same expected
 * size and hash); the part's own length, not bytes_done, says where to
 * resume, since a killed process may have written past its last sidecar
 * update. Hash state is not saved: a resumed download re-hashes the part's
 * bytes first (at SHA-NI speed that is ~1 s per GB).
 *
 * The lock is taken with O_CREAT|O_EXCL; a lock whose pid no longer runs
 * (the process was killed) is stale and is taken over.
 */
#ifndef MOEDESK_PARTFILE_H
#define MOEDESK_PARTFILE_H

#include <glib.h>

G_BEGIN_DECLS

#define MOE_SIZE_UNKNOWN G_MAXUINT64

typedef struct {
    char   *url;
    guint64 size;       /* MOE_SIZE_UNKNOWN if the hub gave none          */
    char   *sha256;
    char   *git_sha1;
    char   *etag;
    guint64 bytes_done;
} MoePartInfo;

/* FALSE if the sidecar is missing or unreadable (then *info is zeroed). */
gboolean moe_part_info_load(const char *sidecar, MoePartInfo *info);
gboolean moe_part_info_save(const char *sidecar, const MoePartInfo *info, GError **error);
void     moe_part_info_clear(MoePartInfo *info);

typedef enum {
    MOE_LOCK_TAKEN,  /* this process now holds the lock                 */
    MOE_LOCK_BUSY,   /* a live process holds it; *holder_pid says which  */
    MOE_LOCK_FAILED, /* the lock file could not be created (error set)  */
} MoeLockResult;

MoeLockResult moe_part_lock_acquire(const char *lock_path, int *holder_pid, GError **error);
/* Removes the lock if this process holds it. */
void          moe_part_lock_release(const char *lock_path);
/* TRUE if a process with this pid runs (or exists but is not ours). */
gboolean      moe_pid_alive(int pid);

G_END_DECLS

#endif /* MOEDESK_PARTFILE_H */

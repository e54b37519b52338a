/*
 * download-job.c — one file's transfer (see download-manager.h for the
 * behaviour promised). Everything runs on the main context except two
 * things done on GTask worker threads: re-hashing an existing part before a
 * resume, and each "write these bytes and hash them" step, so the network
 * read of the next chunk overlaps the disk write and hash of the previous
 * one. Two buffers of BUF_BYTES alternate:
 *
 *   network --read_async--> bufs[fill] --(full or writer idle)--> writer
 *                                          thread: write(2) + hash update
 *
 * At most one read and one write are in flight. pump() looks at the flags
 * after every event and starts whatever can run; an attempt ends when
 * neither is in flight and either the body ended (eof) or something
 * stopped it (stop_error: a network error, a disk error, cancellation).
 *
 *   lock -> open part -> [re-hash part] -> request -> stream -> finish
 *             ^                               |  ^
 *             |                               v  | (backoff timer)
 *        (other process: poll)             retry wait
 */
#include "download-job.h"
#include "http.h"
#include "library.h"
#include "partfile.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>

#ifdef G_OS_WIN32
#include <io.h>
#define dl_ftruncate(fd, n) _chsize_s((fd), (__int64)(n))
#define dl_lseek _lseeki64
#else
#include <unistd.h>
#define dl_ftruncate(fd, n) ftruncate((fd), (off_t)(n))
#define dl_lseek lseek
#endif
#ifndef O_BINARY
#define O_BINARY 0
#endif

#define BUF_BYTES (4u << 20)
#define LOCK_POLL_MS 500
#define PROGRESS_EVERY_US (100 * 1000)
#define SIDECAR_EVERY_US (2 * G_USEC_PER_SEC)

struct DlJob {
    /* what */
    SoupSession     *session;
    char            *url, *dest, *label, *hash, *token, *token_url;
    guint64          size;
    MoeHashKind      hash_kind;
    MoeDownloadFlags flags;
    char            *part_path, *sidecar_path, *lock_path;
    DlJobProgressFunc progress_cb;
    DlJobDoneFunc    done_cb;
    gpointer         cb_data;

    /* where we are */
    gboolean         lock_held, cancelled, finished;
    int              fd;          /* the part, or -1                      */
    MoeHasher        hasher;      /* over bytes [0, done) of the part     */
    guint64          done;
    guint64          received;
    char            *etag;
    guint            attempt;     /* attempts since the last progress      */
    guint64          done_at_attempt;
    gboolean         restarted;   /* a 416 or a bad Content-Range restarted once */
    guint            timer_id;
    GError          *error;       /* the final error, freed with the job  */

    /* one attempt */
    GCancellable    *xfer;        /* cancels the read in flight           */
    SoupMessage     *msg;
    GInputStream    *body;
    guint8          *bufs[2];
    int              fill;        /* index of the buffer being filled     */
    gsize            fill_len;
    gboolean         in_read, in_write, eof;
    GError          *stop_error;  /* ends the attempt once nothing is in flight */

    /* progress */
    MoeDownloadProgress prog;
    char            *last_error;
    gint64           last_report_us, rate_t0_us, last_sidecar_us;
    guint64          rate_b0;
    double           rate;
};

static void job_request(DlJob *job);
static void job_pump(DlJob *job);
static void job_open_part(DlJob *job);

/* ---- progress ---- */

static void job_report(DlJob *job, MoeDownloadState state, gboolean force)
{
    gint64 now = g_get_monotonic_time();
    if (!force && state == job->prog.state && now - job->last_report_us < PROGRESS_EVERY_US)
        return;
    if (now - job->rate_t0_us >= 500 * 1000 || job->rate_t0_us == 0) {
        if (job->rate_t0_us) {
            double inst = (double)(job->received - job->rate_b0) * 1e6 / (double)(now - job->rate_t0_us);
            job->rate = job->rate > 0 ? 0.7 * job->rate + 0.3 * inst : inst;
        }
        job->rate_t0_us = now;
        job->rate_b0 = job->received;
    }
    job->last_report_us = now;
    job->prog.state = state;
    job->prog.done = job->done;
    job->prog.total = job->size;
    job->prog.received = job->received;
    job->prog.rate = state == MOE_DOWNLOAD_RUNNING ? job->rate : 0;
    job->prog.attempt = job->attempt ? job->attempt : 1;
    job->prog.last_error = job->last_error;
    if (job->progress_cb)
        job->progress_cb(job, &job->prog, job->cb_data);
}

/* ---- ending ---- */

static void job_save_sidecar(DlJob *job)
{
    MoePartInfo info = {
        .url = job->url, .size = job->size, .etag = job->etag, .bytes_done = job->done,
        .sha256 = job->hash_kind == MOE_HASH_SHA256 ? job->hash : NULL,
        .git_sha1 = job->hash_kind == MOE_HASH_GIT_SHA1 ? job->hash : NULL,
    };
    job->last_sidecar_us = g_get_monotonic_time();
    moe_part_info_save(job->sidecar_path, &info, NULL); /* best effort: the part
                                                        * itself is what resumes */
}

static void job_close_part(DlJob *job)
{
    if (job->fd >= 0)
        close(job->fd);
    job->fd = -1;
}

/* Ends the job: `error` (taken; NULL for success) goes to the done callback.
 * keep_part: leave part + sidecar for a resume (else they are deleted). */
static void job_end(DlJob *job, GError *error, gboolean keep_part)
{
    if (job->finished) {
        g_clear_error(&error);
        return;
    }
    job->finished = TRUE;
    if (job->timer_id)
        g_source_remove(job->timer_id);
    job->timer_id = 0;
    if (error && keep_part && job->fd >= 0)
        job_save_sidecar(job);
    job_close_part(job);
    if (error && !keep_part) {
        g_unlink(job->part_path);
        g_unlink(job->sidecar_path);
    }
    if (job->lock_held)
        moe_part_lock_release(job->lock_path);
    job->lock_held = FALSE;
    job->error = error;
    if (!error)
        job_report(job, MOE_DOWNLOAD_DONE, TRUE);
    job->done_cb(job, error, job->cb_data);
}

static void job_fail(DlJob *job, gboolean keep_part, MoeLibraryError code, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);

static void job_fail(DlJob *job, gboolean keep_part, MoeLibraryError code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    job_end(job, g_error_new_literal(MOE_LIBRARY_ERROR, code, msg), keep_part);
}

static void job_end_cancelled(DlJob *job)
{
    job_end(job, g_error_new(G_IO_ERROR, G_IO_ERROR_CANCELLED,
                             "%s: download interrupted; the partial file is kept and the next"
                             " pull resumes it", job->label), TRUE);
}

/* Truncates the part to zero and restarts the hash. */
static gboolean job_reset_part(DlJob *job)
{
    if (dl_ftruncate(job->fd, 0) != 0 || dl_lseek(job->fd, 0, SEEK_SET) != 0) {
        int e = errno;
        job_fail(job, FALSE, MOE_LIBRARY_ERROR_IO, "%s: cannot truncate %s: %s", job->label,
                 job->part_path, g_strerror(e));
        return FALSE;
    }
    moe_hasher_clear(&job->hasher);
    moe_hasher_init(&job->hasher, job->hash_kind, job->size);
    job->done = 0;
    return TRUE;
}

/* ---- finishing: fsync + rename on a worker thread ---- */

static void finish_thread(GTask *task, gpointer source, gpointer data, GCancellable *c)
{
    DlJob *job = data;
    if (g_fsync(job->fd) != 0 || close(job->fd) != 0) {
        int e = errno;
        job->fd = -1;
        g_task_return_new_error(task, MOE_LIBRARY_ERROR,
                                e == ENOSPC ? MOE_LIBRARY_ERROR_NO_SPACE : MOE_LIBRARY_ERROR_IO,
                                "%s: cannot flush %s: %s", job->label, job->part_path,
                                g_strerror(e));
        return;
    }
    job->fd = -1;
    g_autoptr(GFile) from = g_file_new_for_path(job->part_path);
    g_autoptr(GFile) to = g_file_new_for_path(job->dest);
    GError *error = NULL;
    if (!g_file_move(from, to, G_FILE_COPY_OVERWRITE | G_FILE_COPY_NO_FALLBACK_FOR_MOVE, NULL,
                     NULL, NULL, &error)) {
        g_prefix_error(&error, "%s: cannot rename %s into place: ", job->label, job->part_path);
        g_task_return_error(task, error);
        return;
    }
    g_task_return_boolean(task, TRUE);
}

static void finish_done(GObject *source, GAsyncResult *res, gpointer data)
{
    DlJob *job = data;
    GError *error = NULL;
    if (!g_task_propagate_boolean(G_TASK(res), &error)) {
        job_end(job, error, TRUE);
        return;
    }
    g_unlink(job->sidecar_path);
    job_end(job, NULL, FALSE);
}

static void job_finish(DlJob *job)
{
    job_report(job, MOE_DOWNLOAD_FINISHING, TRUE);
    if (job->hash_kind != MOE_HASH_NONE && job->hash) {
        g_autofree char *got = moe_hasher_finish(&job->hasher);
        if (g_strcmp0(got, job->hash) != 0) {
            job_fail(job, FALSE, MOE_LIBRARY_ERROR_HASH_MISMATCH,
                     "%s: %s mismatch (expected %s, got %s); the download was deleted and"
                     " nothing was installed", job->label, moe_hash_kind_name(job->hash_kind),
                     job->hash, got);
            return;
        }
    }
    GTask *task = g_task_new(NULL, NULL, finish_done, job);
    g_task_set_task_data(task, job, NULL);
    g_task_run_in_thread(task, finish_thread);
    g_object_unref(task);
}

/* ---- retries ---- */

static gboolean retry_timer_cb(gpointer data)
{
    DlJob *job = data;
    job->timer_id = 0;
    job_request(job);
    return G_SOURCE_REMOVE;
}

/* After a transient failure described by `why`: wait and try again, or give
 * up when the attempts are spent. */
static void job_retry(DlJob *job, SoupMessageHeaders *headers, const char *why)
{
    g_free(job->last_error);
    job->last_error = g_strdup(why);
    if (job->done > job->done_at_attempt)
        job->attempt = 0; /* progress since the last failure: a fresh budget */
    guint max = moe_http_max_attempts();
    if (job->attempt >= max) {
        job_fail(job, TRUE, MOE_LIBRARY_ERROR_NETWORK,
                 "%s: giving up after %u attempts: %s (the partial file is kept; pull again"
                 " to resume)", job->label, max, why);
        return;
    }
    gint64 delay = moe_http_retry_delay_ms(job->attempt, headers);
    if (delay < 0) {
        job_fail(job, TRUE, MOE_LIBRARY_ERROR_HTTP, "%s: %s and Retry-After asks to wait more"
                 " than 15 minutes", job->label, why);
        return;
    }
    job_save_sidecar(job);
    job->prog.retry_in_ms = delay;
    job_report(job, MOE_DOWNLOAD_RETRY_WAIT, TRUE);
    job->timer_id = g_timeout_add((guint)delay, retry_timer_cb, job);
}

/* ---- the attempt's end ---- */

static gboolean error_is_disk(const GError *e)
{
    return e->domain == MOE_LIBRARY_ERROR && (e->code == MOE_LIBRARY_ERROR_NO_SPACE ||
                                             e->code == MOE_LIBRARY_ERROR_IO);
}

static void job_attempt_over(DlJob *job)
{
    g_clear_object(&job->body);
    g_clear_object(&job->xfer);
    g_autoptr(SoupMessage) msg = g_steal_pointer(&job->msg);
    GError *stop = g_steal_pointer(&job->stop_error);
    if (job->cancelled) {
        g_clear_error(&stop);
        job_end_cancelled(job);
        return;
    }
    if (stop && error_is_disk(stop)) {
        job_end(job, stop, TRUE);
        return;
    }
    if (stop) {
        g_autofree char *why = g_strdup(stop->message);
        gboolean transient = moe_http_error_is_transient(stop);
        g_error_free(stop);
        if (transient)
            job_retry(job, NULL, why);
        else
            job_fail(job, TRUE, MOE_LIBRARY_ERROR_NETWORK, "%s: %s", job->label, why);
        return;
    }
    if (job->size != MOE_SIZE_UNKNOWN && job->done < job->size) {
        g_autofree char *why = g_strdup_printf("the connection ended after %" G_GUINT64_FORMAT
                                               " of %" G_GUINT64_FORMAT " bytes", job->done,
                                               job->size);
        job_retry(job, NULL, why);
        return;
    }
    if (job->size != MOE_SIZE_UNKNOWN && job->done > job->size) {
        job_fail(job, FALSE, MOE_LIBRARY_ERROR_SIZE_MISMATCH, "%s: the server sent %"
                 G_GUINT64_FORMAT " bytes, the hub listed %" G_GUINT64_FORMAT "; the download"
                 " was deleted", job->label, job->done, job->size);
        return;
    }
    job_finish(job);
}

/* ---- streaming ---- */

typedef struct {
    DlJob  *job;
    guint8 *buf;
    gsize   len;
    gsize   written;
    int     errnum;
} WriteOp;

static void write_thread(GTask *task, gpointer source, gpointer data, GCancellable *c)
{
    WriteOp *op = data;
    while (op->written < op->len) {
        gssize n = write(op->job->fd, op->buf + op->written, op->len - op->written);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            op->errnum = n < 0 ? errno : ENOSPC;
            break;
        }
        op->written += (gsize)n;
    }
    /* Hash exactly what reached the file, so done and the hash agree. */
    moe_hasher_update(&op->job->hasher, op->buf, op->written);
    g_task_return_boolean(task, TRUE);
}

static void write_done(GObject *source, GAsyncResult *res, gpointer data)
{
    WriteOp *op = g_task_get_task_data(G_TASK(res));
    DlJob *job = op->job;
    job->in_write = FALSE;
    job->done += op->written;
    if (op->errnum) {
        gboolean full = op->errnum == ENOSPC || op->errnum == EFBIG
#ifdef EDQUOT
                        || op->errnum == EDQUOT
#endif
            ;
        g_autofree char *dir = g_path_get_dirname(job->part_path);
        g_clear_error(&job->stop_error);
        job->stop_error = g_error_new(MOE_LIBRARY_ERROR,
                                      full ? MOE_LIBRARY_ERROR_NO_SPACE : MOE_LIBRARY_ERROR_IO,
                                      "%s: writing %s failed after %" G_GUINT64_FORMAT " bytes: %s%s;"
                                      " the partial file is kept, free some space and pull again"
                                      " to resume", job->label, job->part_path, job->done,
                                      g_strerror(op->errnum),
                                      full ? " (the disk or the file size limit is full)" : "");
        job->fill_len = 0;
        if (job->xfer)
            g_cancellable_cancel(job->xfer);
    }
    if (g_get_monotonic_time() - job->last_sidecar_us > SIDECAR_EVERY_US)
        job_save_sidecar(job);
    job_report(job, MOE_DOWNLOAD_RUNNING, FALSE);
    job_pump(job);
}

static void job_start_write(DlJob *job)
{
    WriteOp *op = g_new0(WriteOp, 1);
    op->job = job;
    op->buf = job->bufs[job->fill];
    op->len = job->fill_len;
    job->fill ^= 1;
    job->fill_len = 0;
    job->in_write = TRUE;
    GTask *task = g_task_new(NULL, NULL, write_done, job);
    g_task_set_task_data(task, op, g_free);
    g_task_run_in_thread(task, write_thread);
    g_object_unref(task);
}

static void read_done(GObject *source, GAsyncResult *res, gpointer data)
{
    DlJob *job = data;
    GError *error = NULL;
    gssize n = g_input_stream_read_finish(G_INPUT_STREAM(source), res, &error);
    job->in_read = FALSE;
    if (n < 0) {
        if (!job->stop_error)
            job->stop_error = error;
        else
            g_error_free(error);
    } else if (n == 0) {
        job->eof = TRUE;
    } else {
        job->fill_len += (gsize)n;
        job->received += (guint64)n;
    }
    job_pump(job);
}

static void job_pump(DlJob *job)
{
    if (job->stop_error && error_is_disk(job->stop_error))
        job->fill_len = 0; /* the disk refused bytes: write no more */
    /* Only between reads: a read in flight is filling bufs[fill]. */
    if (!job->in_write && !job->in_read && job->fill_len > 0)
        job_start_write(job);
    if (!job->in_read && !job->eof && !job->stop_error && !job->cancelled &&
        job->fill_len < BUF_BYTES) {
        job->in_read = TRUE;
        g_input_stream_read_async(job->body, job->bufs[job->fill] + job->fill_len,
                                  BUF_BYTES - job->fill_len, G_PRIORITY_DEFAULT, job->xfer,
                                  read_done, job);
    }
    if (!job->in_read && !job->in_write && job->fill_len == 0 &&
        (job->eof || job->stop_error || job->cancelled))
        job_attempt_over(job);
}

/* ---- the request ---- */

static void configure_request(SoupMessage *msg, gpointer data)
{
    DlJob *job = data;
    SoupMessageHeaders *h = soup_message_get_request_headers(msg);
    /* The bytes on disk must be the file's bytes: no transfer compression. */
    soup_message_disable_feature(msg, SOUP_TYPE_CONTENT_DECODER);
    soup_message_headers_replace(h, "Accept-Encoding", "identity");
    if (job->done > 0) {
        soup_message_headers_set_range(h, (goffset)job->done, -1);
        /* Only a strong validator can vouch for byte ranges. */
        if (job->etag && !g_str_has_prefix(job->etag, "W/"))
            soup_message_headers_replace(h, "If-Range", job->etag);
    }
}

/* Checks a 206 answer: it must continue at `done` and agree on the size.
 * Returns FALSE after ending or restarting the job. */
static gboolean check_partial(DlJob *job, SoupMessageHeaders *h)
{
    goffset start = -1, end = -1, total = -1;
    if (!soup_message_headers_get_content_range(h, &start, &end, &total) ||
        start != (goffset)job->done) {
        if (job->restarted) {
            job_fail(job, TRUE, MOE_LIBRARY_ERROR_HTTP, "%s: the server answered the range"
                     " request from byte %" G_GUINT64_FORMAT " with a different range", job->label,
                     job->done);
            return FALSE;
        }
        job->restarted = TRUE;
        if (job_reset_part(job))
            job_request(job);
        return FALSE;
    }
    if (total >= 0 && job->size != MOE_SIZE_UNKNOWN && (guint64)total != job->size) {
        job_fail(job, FALSE, MOE_LIBRARY_ERROR_SIZE_MISMATCH, "%s: the server has %"
                 G_GINT64_FORMAT " bytes, the hub listed %" G_GUINT64_FORMAT " (has the"
                 " repository changed?)", job->label, (gint64)total, job->size);
        return FALSE;
    }
    return TRUE;
}

static void start_streaming(DlJob *job, GInputStream *body)
{
    const char *etag = soup_message_headers_get_one(soup_message_get_response_headers(job->msg),
                                                    "ETag");
    if (etag && g_strcmp0(etag, job->etag) != 0) {
        g_free(job->etag);
        job->etag = g_strdup(etag);
    }
    job_save_sidecar(job);
    job->body = body;
    job->eof = FALSE;
    job->fill_len = 0;
    job->fill = 0;
    job_report(job, MOE_DOWNLOAD_RUNNING, TRUE);
    job_pump(job);
}

static void got_response(GObject *source, GAsyncResult *res, gpointer data)
{
    DlJob *job = data;
    GError *error = NULL;
    g_autoptr(SoupMessage) msg = NULL;
    g_autoptr(GInputStream) body = moe_http_get_finish(res, &msg, &error);
    if (!body || job->cancelled) {
        job->stop_error = error;
        job_attempt_over(job);
        return;
    }
    guint status = soup_message_get_status(msg);
    SoupMessageHeaders *h = soup_message_get_response_headers(msg);
    if (status == 206 || status == 200) {
        goffset len = soup_message_headers_get_encoding(h) == SOUP_ENCODING_CONTENT_LENGTH
                          ? soup_message_headers_get_content_length(h) : -1;
        if (status == 206 && !check_partial(job, h))
            return;
        if (status == 200 && len >= 0 && job->size != MOE_SIZE_UNKNOWN &&
            (guint64)len != job->size) {
            job_fail(job, FALSE, MOE_LIBRARY_ERROR_SIZE_MISMATCH, "%s: the server has %"
                     G_GINT64_FORMAT " bytes, the hub listed %" G_GUINT64_FORMAT " (has the"
                     " repository changed?)", job->label, (gint64)len, job->size);
            return;
        }
        /* 200: a fresh start, or a server that ignores Range (or an If-Range
         * that no longer matches): start over from byte 0. */
        if (status == 200 && job->done > 0 && !job_reset_part(job))
            return;
        job->msg = g_steal_pointer(&msg);
        start_streaming(job, g_steal_pointer(&body));
        return;
    }
    g_autofree char *url = g_uri_to_string_partial(soup_message_get_uri(msg), G_URI_HIDE_QUERY);
    if (status == 416 && !job->restarted) {
        job->restarted = TRUE;
        if (job_reset_part(job))
            job_request(job);
        return;
    }
    if (moe_http_status_is_transient(status)) {
        g_autofree char *why = g_strdup_printf("HTTP %u %s from %s", status,
                                               soup_status_get_phrase(status), url);
        job_retry(job, h, why);
        return;
    }
    if (status == 404)
        job_fail(job, TRUE, MOE_LIBRARY_ERROR_NOT_FOUND, "%s: not found on the server (HTTP 404"
                 " from %s)", job->label, url);
    else if (status == 401 || status == 403)
        job_fail(job, TRUE, MOE_LIBRARY_ERROR_HTTP, "%s: access denied (HTTP %u from %s); the"
                 " repository may be gated or private: %s", job->label, status, url,
                 job->token ? "check that HF_TOKEN has access" : "set HF_TOKEN");
    else
        job_fail(job, TRUE, MOE_LIBRARY_ERROR_HTTP, "%s: HTTP %u %s from %s", job->label, status,
                 soup_status_get_phrase(status), url);
}

static void job_request(DlJob *job)
{
    if (job->cancelled) {
        job_end_cancelled(job);
        return;
    }
    job->attempt++;
    job->done_at_attempt = job->done;
    job->prog.retry_in_ms = 0;
    g_clear_object(&job->xfer);
    job->xfer = g_cancellable_new();
    job_report(job, MOE_DOWNLOAD_RUNNING, TRUE);
    moe_http_get_async(job->session, job->url, job->token, job->token_url, configure_request, job,
                       job->xfer, got_response, job);
}

/* ---- opening and re-hashing the part ---- */

static void rehash_thread(GTask *task, gpointer source, gpointer data, GCancellable *c)
{
    DlJob *job = data;
    guint8 *buf = job->bufs[0];
    guint64 total = 0;
    if (dl_lseek(job->fd, 0, SEEK_SET) != 0) {
        int e = errno;
        g_task_return_new_error(task, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_IO, "%s: %s",
                                job->part_path, g_strerror(e));
        return;
    }
    for (;;) {
        if (g_cancellable_is_cancelled(c)) {
            g_task_return_error_if_cancelled(task);
            return;
        }
        gssize n = read(job->fd, buf, BUF_BYTES);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            g_task_return_new_error(task, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_IO,
                                    "%s: reading %s: %s", job->label, job->part_path, g_strerror(e));
            return;
        }
        if (n == 0)
            break;
        moe_hasher_update(&job->hasher, buf, (gsize)n);
        total += (guint64)n;
    }
    job->done = total; /* the main thread does not touch `done` meanwhile */
    g_task_return_boolean(task, TRUE);
}

static void rehash_done(GObject *source, GAsyncResult *res, gpointer data)
{
    DlJob *job = data;
    GError *error = NULL;
    if (!g_task_propagate_boolean(G_TASK(res), &error)) {
        if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
            g_error_free(error);
            job_end_cancelled(job);
        } else {
            job_end(job, error, TRUE);
        }
        return;
    }
    if (job->size != MOE_SIZE_UNKNOWN && job->done == job->size)
        job_finish(job); /* everything was there: only the hash is left */
    else
        job_request(job);
}

static gboolean compatible_sidecar(DlJob *job, const MoePartInfo *info)
{
    const char *hash = job->hash_kind == MOE_HASH_SHA256 ? info->sha256
                     : job->hash_kind == MOE_HASH_GIT_SHA1 ? info->git_sha1 : NULL;
    return info->size == job->size && g_strcmp0(hash, job->hash) == 0;
}

static void job_open_part(DlJob *job)
{
    GStatBuf st;
    if (job->size != MOE_SIZE_UNKNOWN && g_stat(job->dest, &st) == 0 &&
        (guint64)st.st_size == job->size) {
        /* Installed already (by us earlier or by the process we waited
         * for); it was hashed before it was renamed into place. */
        g_unlink(job->part_path);
        g_unlink(job->sidecar_path);
        job->done = job->size;
        job_end(job, NULL, FALSE);
        return;
    }
    MoePartInfo info;
    gboolean have_info = moe_part_info_load(job->sidecar_path, &info);
    gboolean resume = have_info && compatible_sidecar(job, &info);
    if (resume)
        job->etag = g_strdup(info.etag);
    moe_part_info_clear(&info);
    job->fd = g_open(job->part_path, O_RDWR | O_CREAT | O_BINARY | (resume ? 0 : O_TRUNC), 0644);
    if (job->fd < 0) {
        int e = errno;
        job_fail(job, TRUE, e == ENOSPC ? MOE_LIBRARY_ERROR_NO_SPACE : MOE_LIBRARY_ERROR_IO,
                 "%s: cannot open %s: %s", job->label, job->part_path, g_strerror(e));
        return;
    }
    moe_hasher_init(&job->hasher, job->hash_kind, job->size);
    gint64 part_size = dl_lseek(job->fd, 0, SEEK_END);
    if (part_size > 0 && job->size != MOE_SIZE_UNKNOWN && (guint64)part_size > job->size) {
        if (!job_reset_part(job))
            return;
        part_size = 0;
    }
    if (part_size <= 0) {
        job_request(job);
        return;
    }
    job_report(job, MOE_DOWNLOAD_CHECKING, TRUE);
    g_clear_object(&job->xfer);
    job->xfer = g_cancellable_new();
    GTask *task = g_task_new(NULL, job->xfer, rehash_done, job);
    g_task_set_task_data(task, job, NULL);
    g_task_run_in_thread(task, rehash_thread);
    g_object_unref(task);
}

/* ---- the lock ---- */

static void job_take_lock(DlJob *job);

static gboolean lock_timer_cb(gpointer data)
{
    DlJob *job = data;
    job->timer_id = 0;
    job_take_lock(job);
    return G_SOURCE_REMOVE;
}

static void job_take_lock(DlJob *job)
{
    if (job->cancelled) {
        job_end_cancelled(job);
        return;
    }
    int pid = 0;
    GError *error = NULL;
    switch (moe_part_lock_acquire(job->lock_path, &pid, &error)) {
    case MOE_LOCK_TAKEN:
        job->lock_held = TRUE;
        job_open_part(job);
        return;
    case MOE_LOCK_FAILED:
        job_end(job, error, TRUE);
        return;
    case MOE_LOCK_BUSY:
        if (job->flags & MOE_DOWNLOAD_NO_WAIT) {
            job_fail(job, TRUE, MOE_LIBRARY_ERROR_BUSY, "%s: already being downloaded by pid %d"
                     " (lock %s)", job->label, pid, job->lock_path);
            return;
        }
        job->prog.lock_pid = pid;
        job_report(job, MOE_DOWNLOAD_WAITING_LOCK, FALSE);
        job->timer_id = g_timeout_add(LOCK_POLL_MS, lock_timer_cb, job);
        return;
    }
}

/* ---- lifetime ---- */

DlJob *dl_job_new(SoupSession *session, const MoeDownloadSpec *spec, MoeDownloadFlags flags,
                  DlJobProgressFunc progress, DlJobDoneFunc done, gpointer data)
{
    DlJob *job = g_new0(DlJob, 1);
    job->session = g_object_ref(session);
    job->url = g_strdup(spec->url);
    job->dest = g_strdup(spec->dest);
    job->label = g_strdup(spec->label ? spec->label : spec->dest);
    job->hash = spec->hash && spec->hash_kind != MOE_HASH_NONE ? g_ascii_strdown(spec->hash, -1) : NULL;
    job->hash_kind = job->hash ? spec->hash_kind : MOE_HASH_NONE;
    job->token = g_strdup(spec->token);
    job->token_url = g_strdup(spec->token_url);
    job->size = spec->size;
    job->flags = flags;
    job->part_path = moe_download_part_path(spec->dest);
    job->sidecar_path = moe_download_sidecar_path(spec->dest);
    job->lock_path = moe_download_lock_path(spec->dest);
    job->progress_cb = progress;
    job->done_cb = done;
    job->cb_data = data;
    job->fd = -1;
    job->bufs[0] = g_malloc(BUF_BYTES);
    job->bufs[1] = g_malloc(BUF_BYTES);
    job->prog.dest = job->dest;
    job->prog.label = job->label;
    job->prog.total = job->size;
    job->prog.state = MOE_DOWNLOAD_QUEUED;
    return job;
}

void dl_job_free(DlJob *job)
{
    if (!job)
        return;
    if (job->timer_id)
        g_source_remove(job->timer_id);
    job_close_part(job);
    moe_hasher_clear(&job->hasher);
    g_clear_object(&job->session);
    g_clear_object(&job->xfer);
    g_clear_object(&job->msg);
    g_clear_object(&job->body);
    g_clear_error(&job->stop_error);
    g_clear_error(&job->error);
    if (job->token)
        memset(job->token, 0, strlen(job->token));
    g_free(job->token);
    g_free(job->url);
    g_free(job->dest);
    g_free(job->label);
    g_free(job->hash);
    g_free(job->token_url);
    g_free(job->part_path);
    g_free(job->sidecar_path);
    g_free(job->lock_path);
    g_free(job->etag);
    g_free(job->last_error);
    g_free(job->bufs[0]);
    g_free(job->bufs[1]);
    g_free(job);
}

void dl_job_start(DlJob *job)
{
    g_autofree char *dir = g_path_get_dirname(job->dest);
    if (g_mkdir_with_parents(dir, 0755) != 0) {
        int e = errno;
        job_fail(job, TRUE, MOE_LIBRARY_ERROR_IO, "%s: cannot create folder %s: %s", job->label,
                 dir, g_strerror(e));
        return;
    }
    job_take_lock(job);
}

void dl_job_cancel(DlJob *job)
{
    if (job->finished || job->cancelled)
        return;
    job->cancelled = TRUE;
    if (job->xfer)
        g_cancellable_cancel(job->xfer);
    if (job->timer_id) { /* waiting for a retry or a lock: end now */
        g_source_remove(job->timer_id);
        job->timer_id = 0;
        job_end_cancelled(job);
    }
}

const char *dl_job_dest(const DlJob *job)
{
    return job->dest;
}

const MoeDownloadProgress *dl_job_progress(const DlJob *job)
{
    return &job->prog;
}

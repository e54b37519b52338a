/*
 * download-manager.c — MoeDownloadManager: owns the running and queued
 * download jobs (download-job.c), shares one job among every caller that
 * asks for the same destination, and fans progress and results out to
 * them. A caller that cancels only leaves; the job itself is cancelled
 * when its last caller has left.
 */
#include "download-manager.h"
#include "download-job.h"
#include "http.h"

typedef struct {
    GTask                  *task;
    MoeDownloadProgressFunc progress;
    gpointer                progress_data;
    gulong                  cancel_id;
    guint                   cancel_idle; /* pending waiter_cancel_idle */
    struct Entry           *entry;
} Waiter;

typedef struct Entry {
    MoeDownloadManager *mgr;
    DlJob              *job;
    GList              *waiters; /* of Waiter* */
    gboolean            started;
} Entry;

struct _MoeDownloadManager {
    GObject      parent_instance;
    SoupSession *session;
    guint        max_parallel;
    guint        n_running;
    GHashTable  *entries; /* dest -> Entry*, running or queued */
    GQueue       queue;   /* of Entry*, not yet started        */
};

G_DEFINE_FINAL_TYPE(MoeDownloadManager, moe_download_manager, G_TYPE_OBJECT)

char *moe_download_part_path(const char *dest)
{
    return g_strconcat(dest, ".part", NULL);
}

char *moe_download_sidecar_path(const char *dest)
{
    return g_strconcat(dest, ".part.json", NULL);
}

char *moe_download_lock_path(const char *dest)
{
    return g_strconcat(dest, ".part.lock", NULL);
}

static void entry_free(Entry *e)
{
    dl_job_free(e->job);
    g_list_free(e->waiters);
    g_free(e);
}

static gboolean free_entry_idle(gpointer data)
{
    entry_free(data);
    return G_SOURCE_REMOVE;
}

static void manager_start_queued(MoeDownloadManager *self)
{
    while (self->n_running < self->max_parallel && !g_queue_is_empty(&self->queue)) {
        Entry *e = g_queue_pop_head(&self->queue);
        e->started = TRUE;
        self->n_running++;
        dl_job_start(e->job); /* may finish at once (already installed) */
    }
}

static void waiter_finish(Waiter *w, const GError *error)
{
    if (w->cancel_id)
        g_cancellable_disconnect(g_task_get_cancellable(w->task), w->cancel_id);
    w->cancel_id = 0;
    if (w->cancel_idle)
        g_source_remove(w->cancel_idle);
    if (error)
        g_task_return_error(w->task, g_error_copy(error));
    else
        g_task_return_boolean(w->task, TRUE);
    g_object_unref(w->task);
    g_free(w);
}

static void on_job_progress(DlJob *job, const MoeDownloadProgress *p, gpointer data)
{
    Entry *e = data;
    for (GList *l = e->waiters; l; l = l->next) {
        Waiter *w = l->data;
        if (w->progress)
            w->progress(p, w->progress_data);
    }
}

static void on_job_done(DlJob *job, const GError *error, gpointer data)
{
    Entry *e = data;
    MoeDownloadManager *self = e->mgr;
    g_hash_table_remove(self->entries, dl_job_dest(job));
    if (e->started)
        self->n_running--;
    else
        g_queue_remove(&self->queue, e);
    GList *waiters = g_steal_pointer(&e->waiters);
    for (GList *l = waiters; l; l = l->next)
        waiter_finish(l->data, error);
    g_list_free(waiters);
    /* The job is still on the stack below us: free it from an idle. */
    g_idle_add(free_entry_idle, e);
    manager_start_queued(self);
}

/* A caller's cancellable fired: that caller leaves with CANCELLED; the
 * last one to leave cancels the job. Runs in an idle so it never re-enters
 * the code that called g_cancellable_cancel. */
static gboolean waiter_cancel_idle(gpointer data)
{
    Waiter *w = data;
    Entry *e = w->entry;
    w->cancel_idle = 0;
    e->waiters = g_list_remove(e->waiters, w);
    g_autoptr(GError) error = g_error_new(G_IO_ERROR, G_IO_ERROR_CANCELLED,
                                          "%s: download interrupted; the partial file is kept"
                                          " and the next pull resumes it", dl_job_progress(e->job)->label);
    if (!e->waiters) {
        if (e->started) {
            e->waiters = g_list_append(NULL, w); /* the job's own CANCELLED reaches it */
            dl_job_cancel(e->job);
            return G_SOURCE_REMOVE;
        }
        g_hash_table_remove(e->mgr->entries, dl_job_dest(e->job));
        g_queue_remove(&e->mgr->queue, e);
        entry_free(e);
    }
    waiter_finish(w, error);
    return G_SOURCE_REMOVE;
}

/* Cancellables must be cancelled on the main context (as the CLI's signal
 * handler and the service do), so the idle id is ours alone. */
static void on_waiter_cancelled(GCancellable *c, gpointer data)
{
    Waiter *w = data;
    if (!w->cancel_idle)
        w->cancel_idle = g_idle_add(waiter_cancel_idle, w);
}

void moe_download_manager_download_async(MoeDownloadManager *self, const MoeDownloadSpec *spec,
                                         MoeDownloadFlags flags, MoeDownloadProgressFunc progress,
                                         gpointer progress_data, GCancellable *cancellable,
                                         GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail(MOE_IS_DOWNLOAD_MANAGER(self));
    g_return_if_fail(spec && spec->url && spec->dest);
    GTask *task = g_task_new(self, cancellable, callback, user_data);
    g_task_set_source_tag(task, moe_download_manager_download_async);
    if (g_task_return_error_if_cancelled(task)) {
        g_object_unref(task);
        return;
    }
    Entry *e = g_hash_table_lookup(self->entries, spec->dest);
    gboolean fresh = e == NULL;
    if (fresh) {
        e = g_new0(Entry, 1);
        e->mgr = self;
        e->job = dl_job_new(self->session, spec, flags, on_job_progress, on_job_done, e);
        g_hash_table_insert(self->entries, (gpointer)dl_job_dest(e->job), e);
    }
    Waiter *w = g_new0(Waiter, 1);
    w->task = task;
    w->progress = progress;
    w->progress_data = progress_data;
    w->entry = e;
    e->waiters = g_list_append(e->waiters, w);
    if (cancellable)
        w->cancel_id = g_cancellable_connect(cancellable, G_CALLBACK(on_waiter_cancelled), w, NULL);
    if (!fresh) {
        if (progress) /* a joiner sees where the shared transfer is */
            progress(dl_job_progress(e->job), progress_data);
        return;
    }
    g_queue_push_tail(&self->queue, e);
    manager_start_queued(self);
}

gboolean moe_download_manager_download_finish(MoeDownloadManager *self, GAsyncResult *result,
                                              GError **error)
{
    g_return_val_if_fail(g_task_is_valid(result, self), FALSE);
    return g_task_propagate_boolean(G_TASK(result), error);
}

SoupSession *moe_download_manager_get_session(MoeDownloadManager *self)
{
    return self->session;
}

MoeDownloadManager *moe_download_manager_new(SoupSession *session, guint max_parallel)
{
    MoeDownloadManager *self = g_object_new(MOE_TYPE_DOWNLOAD_MANAGER, NULL);
    self->session = session ? g_object_ref(session) : moe_http_session_new();
    self->max_parallel = max_parallel ? max_parallel : 4;
    return self;
}

static void moe_download_manager_dispose(GObject *object)
{
    MoeDownloadManager *self = MOE_DOWNLOAD_MANAGER(object);
    /* Jobs hold callbacks into us; a manager is disposed only when idle
     * (the CLI and the service keep it for their whole life). */
    g_warn_if_fail(g_hash_table_size(self->entries) == 0);
    g_clear_object(&self->session);
    G_OBJECT_CLASS(moe_download_manager_parent_class)->dispose(object);
}

static void moe_download_manager_finalize(GObject *object)
{
    MoeDownloadManager *self = MOE_DOWNLOAD_MANAGER(object);
    g_hash_table_unref(self->entries);
    G_OBJECT_CLASS(moe_download_manager_parent_class)->finalize(object);
}

static void moe_download_manager_class_init(MoeDownloadManagerClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    object_class->dispose = moe_download_manager_dispose;
    object_class->finalize = moe_download_manager_finalize;
}

static void moe_download_manager_init(MoeDownloadManager *self)
{
    self->entries = g_hash_table_new(g_str_hash, g_str_equal);
    g_queue_init(&self->queue);
}

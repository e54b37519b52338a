/*
 * pull.c — moe_pull_async (see pull.h): resolve -> list -> choose a
 * quantisation (pull-plan.h) -> select -> manifest -> disk check ->
 * parallel downloads -> manifest complete. Runs on the main loop; the heavy
 * lifting is in the download manager.
 */
#include "pull.h"
#include "catalog-lookup.h"
#include "hub.h"
#include "library.h"
#include "partfile.h"
#include "pull-plan.h"
#include "quant-pick.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

typedef struct PullState PullState;

typedef struct {
    PullState *s;
    guint      index;
} PullFile;

struct PullState {
    MoeDownloadManager *mgr;
    MoeDownloadFlags    flags;
    MoePullProgressFunc progress;
    gpointer            progress_data;
    char               *source;
    MoeHubRef           ref;
    char               *name;
    char               *model_dir;
    MoeHub             *hub;
    MoeHubListing      *listing;
    MoeManifest        *manifest;
    GPtrArray          *files;     /* selected, borrowed from listing     */
    PullFile           *file_ctx;  /* one per selected file               */
    guint64            *file_done;
    double             *file_rate;
    gboolean           *file_finished; /* reached MOE_DOWNLOAD_DONE          */
    guint               n_pending, n_done;
    GError             *first_error;
    GCancellable       *children;  /* cancels every download             */
    GCancellable       *user_cancel;
    gulong              cancel_id;
    char               *quant;
    moe_machine         machine;   /* the one given, or probed when needed */
    gboolean            have_machine;
    GPtrArray          *groups;    /* the listing's quantisation groups    */
    MoeQuantGroup      *picked;    /* the choice when no selector is given */
};

static void pull_state_free(PullState *s)
{
    if (s->cancel_id)
        g_cancellable_disconnect(s->user_cancel, s->cancel_id);
    g_clear_object(&s->user_cancel);
    g_clear_object(&s->mgr);
    g_free(s->source);
    moe_hub_ref_clear(&s->ref);
    g_free(s->name);
    g_free(s->model_dir);
    moe_hub_free(s->hub);
    moe_hub_listing_free(s->listing);
    moe_manifest_free(s->manifest);
    if (s->files)
        g_ptr_array_unref(s->files);
    g_free(s->file_ctx);
    g_free(s->file_done);
    g_free(s->file_rate);
    g_free(s->file_finished);
    g_clear_error(&s->first_error);
    g_clear_object(&s->children);
    g_free(s->quant);
    if (s->groups)
        g_ptr_array_unref(s->groups);
    g_free(s);
}

static void report(PullState *s, const char *phase, const MoeDownloadProgress *file,
                   const char *note)
{
    if (!s->progress)
        return;
    MoePullProgress p = { .phase = phase, .name = s->name, .file = file, .note = note,
                          .eta_s = -1 };
    if (s->files && s->file_done) {
        p.n_files = s->files->len;
        for (guint i = 0; i < s->files->len; i++) {
            p.n_done += s->file_finished[i];
            p.total += ((MoeManifestFile *)g_ptr_array_index(s->files, i))->size;
            p.done += s->file_done[i];
            p.rate += s->file_rate[i];
        }
        if (p.rate > 1 && p.total >= p.done)
            p.eta_s = (gint64)((double)(p.total - p.done) / p.rate + 0.5);
    }
    s->progress(&p, s->progress_data);
}

static void pull_fail(GTask *task, GError *error)
{
    g_task_return_error(task, error);
    g_object_unref(task);
}

/* ---- finishing ---- */

static void file_progress(const MoeDownloadProgress *p, gpointer data)
{
    PullFile *f = data;
    f->s->file_done[f->index] = p->done;
    f->s->file_rate[f->index] = p->state == MOE_DOWNLOAD_RUNNING ? p->rate : 0;
    f->s->file_finished[f->index] = p->state == MOE_DOWNLOAD_DONE;
    report(f->s, "downloading", p, NULL);
}

static void file_done(GObject *source, GAsyncResult *res, gpointer data)
{
    GTask *task = data;
    PullState *s = g_task_get_task_data(task);
    GError *error = NULL;
    gboolean ok = moe_download_manager_download_finish(MOE_DOWNLOAD_MANAGER(source), res, &error);
    s->n_pending--;
    if (ok) {
        s->n_done++;
    } else if (!s->first_error) {
        s->first_error = error;
        g_cancellable_cancel(s->children); /* stop the others; their parts stay */
    } else {
        if (g_error_matches(s->first_error, G_IO_ERROR, G_IO_ERROR_CANCELLED) &&
            !g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
            g_clear_error(&s->first_error); /* the real failure matters more */
            s->first_error = error;
        } else {
            g_error_free(error);
        }
    }
    if (s->n_pending > 0)
        return;
    if (s->first_error) {
        pull_fail(task, g_steal_pointer(&s->first_error));
        return;
    }
    g_free(s->manifest->state);
    s->manifest->state = g_strdup("complete");
    s->manifest->verified = g_get_real_time() / G_USEC_PER_SEC;
    GError *save_error = NULL;
    if (!moe_manifest_save_model(s->manifest, &save_error)) {
        pull_fail(task, save_error);
        return;
    }
    report(s, "done", NULL, NULL);
    g_task_return_pointer(task, g_steal_pointer(&s->manifest), (GDestroyNotify)moe_manifest_free);
    g_object_unref(task);
}

/* ---- disk space and downloads ---- */

static char *file_dest(PullState *s, const char *rel)
{
    g_auto(GStrv) parts = g_strsplit(rel, "/", -1);
    g_autofree char *tail = g_build_filenamev(parts);
    return g_build_filename(s->model_dir, tail, NULL);
}

static guint64 file_size_or_zero(const char *path)
{
    GStatBuf st;
    return g_stat(path, &st) == 0 && st.st_size > 0 ? (guint64)st.st_size : 0;
}

/* Bytes still to fetch, counting finished files and resumable parts. */
static guint64 bytes_needed(PullState *s)
{
    guint64 need = 0;
    for (guint i = 0; i < s->files->len; i++) {
        MoeManifestFile *f = g_ptr_array_index(s->files, i);
        g_autofree char *dest = file_dest(s, f->path);
        g_autofree char *part = g_strconcat(dest, ".part", NULL);
        if (file_size_or_zero(dest) == f->size && g_file_test(dest, G_FILE_TEST_EXISTS))
            continue;
        guint64 have = file_size_or_zero(part);
        need += have <= f->size ? f->size - have : f->size;
    }
    return need;
}

static gboolean check_space(PullState *s, GError **error)
{
    guint64 need = bytes_needed(s);
    guint64 free_bytes = 0;
    const char *fake = g_getenv("MOEDESK_TEST_FREE_BYTES"); /* fault-injection hook for tests */
    if (fake) {
        free_bytes = g_ascii_strtoull(fake, NULL, 10);
    } else {
        g_autoptr(GFile) dir = g_file_new_for_path(s->model_dir);
        g_autoptr(GFileInfo) info = g_file_query_filesystem_info(
            dir, G_FILE_ATTRIBUTE_FILESYSTEM_FREE, NULL, NULL);
        if (!info || !g_file_info_has_attribute(info, G_FILE_ATTRIBUTE_FILESYSTEM_FREE))
            return TRUE; /* unknown: let the writes tell */
        free_bytes = g_file_info_get_attribute_uint64(info, G_FILE_ATTRIBUTE_FILESYSTEM_FREE);
    }
    if (free_bytes >= need)
        return TRUE;
    g_autofree char *need_s = moe_library_format_size(need);
    g_autofree char *free_s = moe_library_format_size(free_bytes);
    g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NO_SPACE,
                "not enough disk space in %s: %s needs %s more, but only %s are free",
                s->model_dir, s->name, need_s, free_s);
    return FALSE;
}

static void start_downloads(GTask *task)
{
    PullState *s = g_task_get_task_data(task);
    guint n = s->files->len;
    s->file_ctx = g_new0(PullFile, n);
    s->file_done = g_new0(guint64, n);
    s->file_rate = g_new0(double, n);
    s->file_finished = g_new0(gboolean, n);
    s->n_pending = n;
    report(s, "downloading", NULL, NULL);
    for (guint i = 0; i < n; i++) {
        MoeManifestFile *f = g_ptr_array_index(s->files, i);
        g_autofree char *dest = file_dest(s, f->path);
        g_autofree char *url = moe_hub_file_url(s->hub, s->ref.repo, s->listing->revision, f->path);
        g_autofree char *label = g_strdup_printf("%s: %s", s->ref.repo, f->path);
        MoeDownloadSpec spec = {
            .url = url, .dest = dest, .label = label, .size = f->size,
            .hash_kind = f->sha256 ? MOE_HASH_SHA256 : f->git_sha1 ? MOE_HASH_GIT_SHA1 : MOE_HASH_NONE,
            .hash = f->sha256 ? f->sha256 : f->git_sha1,
            .token = moe_hub_token(s->hub), .token_url = moe_hub_endpoint(s->hub),
        };
        s->file_ctx[i] = (PullFile){ s, i };
        moe_download_manager_download_async(s->mgr, &spec, s->flags, file_progress,
                                            &s->file_ctx[i], s->children, file_done, task);
    }
}

/* ---- choosing files ---- */

gboolean moe_pull_wants_checkpoint_file(const char *path)
{
    static const char *suffixes[] = { ".safetensors", ".json", ".tiktoken", ".txt", ".jinja", ".py" };
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strcmp(base, "tokenizer.model") == 0)
        return TRUE;
    for (size_t i = 0; i < G_N_ELEMENTS(suffixes); i++)
        if (g_str_has_suffix(base, suffixes[i]))
            return TRUE;
    return FALSE;
}

static GPtrArray *select_files(PullState *s, GError **error)
{
    GPtrArray *all = s->listing->files;
    GPtrArray *out = g_ptr_array_new();
    GPtrArray *groups = s->groups;
    const char *sel = s->ref.selector;
    if (sel && strchr(sel, '.')) {
        /* A file; a split part brings its whole set (its quant group). */
        for (guint i = 0; i < all->len; i++) {
            MoeManifestFile *f = g_ptr_array_index(all, i);
            if (strcmp(f->path, sel) != 0)
                continue;
            for (guint g = 0; g < groups->len && strstr(sel, "-of-"); g++) {
                MoeQuantGroup *grp = g_ptr_array_index(groups, g);
                if (g_ptr_array_find(grp->files, f, NULL) && grp->files->len > 1) {
                    for (guint k = 0; k < grp->files->len; k++)
                        g_ptr_array_add(out, g_ptr_array_index(grp->files, k));
                    s->quant = g_strdup(grp->quant);
                    return out;
                }
            }
            g_ptr_array_add(out, f);
            s->quant = moe_quant_name_of(f->path);
            return out;
        }
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND,
                    "file %s not found in repository %s (revision %s) at %s", sel, s->ref.repo,
                    s->listing->revision, moe_hub_endpoint(s->hub));
        g_ptr_array_unref(out);
        return NULL;
    }
    MoeQuantGroup *grp = NULL;
    if (sel) {
        grp = moe_quant_find(groups, sel);
        if (!grp) {
            g_autoptr(GString) avail = g_string_new(NULL);
            for (guint g = 0; g < groups->len; g++)
                g_string_append_printf(avail, "%s%s", g ? ", " : "",
                                       ((MoeQuantGroup *)g_ptr_array_index(groups, g))->quant);
            g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND,
                        "repository %s has no quantisation %s (it has: %s)", s->ref.repo, sel,
                        avail->len ? avail->str : "no GGUF files");
            g_ptr_array_unref(out);
            return NULL;
        }
    } else {
        grp = s->picked; /* choose_quant's */
    }
    if (grp) {
        for (guint k = 0; k < grp->files->len; k++)
            g_ptr_array_add(out, g_ptr_array_index(grp->files, k));
        s->quant = g_strdup(grp->quant);
        return out;
    }
    for (guint i = 0; i < all->len; i++) {
        MoeManifestFile *f = g_ptr_array_index(all, i);
        if (moe_pull_wants_checkpoint_file(f->path))
            g_ptr_array_add(out, f);
    }
    if (!out->len) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND,
                    "repository %s has neither GGUF nor safetensors files", s->ref.repo);
        g_ptr_array_unref(out);
        return NULL;
    }
    return out;
}

/* Merges the selection into the model's manifest (new or existing). */
static gboolean prepare_manifest(PullState *s, GError **error)
{
    g_autoptr(GError) local = NULL;
    MoeManifest *m = moe_manifest_load_model(s->name, &local);
    if (!m && !g_error_matches(local, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND)) {
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    if (m && m->repo && g_ascii_strcasecmp(m->repo, s->ref.repo) != 0) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_INVALID_NAME,
                    "a model called %s is already installed from %s; remove it first",
                    s->name, m->repo);
        moe_manifest_free(m);
        return FALSE;
    }
    if (!m)
        m = moe_manifest_new(s->name);
    s->manifest = m;
    g_free(m->source);
    m->source = g_strdup(moe_hub_kind_name(s->ref.kind));
    g_free(m->endpoint);
    m->endpoint = g_strdup(moe_hub_endpoint(s->hub));
    g_free(m->repo);
    m->repo = g_strdup(s->ref.repo);
    g_free(m->revision);
    m->revision = g_strdup(s->listing->revision);
    if (s->quant && (!m->quant || !strstr(m->quant, s->quant))) {
        char *q = m->quant ? g_strdup_printf("%s,%s", m->quant, s->quant) : g_strdup(s->quant);
        g_free(m->quant);
        m->quant = q;
    }
    for (guint i = 0; i < s->files->len; i++) {
        MoeManifestFile *f = g_ptr_array_index(s->files, i);
        moe_manifest_add_file(m, moe_manifest_file_new(f->path, f->size, f->sha256, f->git_sha1));
    }
    g_free(m->state);
    m->state = g_strdup("downloading");
    return moe_manifest_save_model(m, error);
}

/* After the choice: files, folder, disk space, manifest, downloads. */
static void continue_pull(GTask *task)
{
    PullState *s = g_task_get_task_data(task);
    GError *error = NULL;
    if (!(s->files = select_files(s, &error)) || !(s->model_dir = moe_library_model_dir(s->name, &error))) {
        pull_fail(task, error);
        return;
    }
    if (g_mkdir_with_parents(s->model_dir, 0755) != 0) {
        int e = errno;
        pull_fail(task, g_error_new(MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_IO,
                                    "cannot create %s: %s", s->model_dir, g_strerror(e)));
        return;
    }
    if (!check_space(s, &error) || !prepare_manifest(s, &error)) {
        pull_fail(task, error);
        return;
    }
    start_downloads(task);
}

/* ---- choosing a quantisation (pull-plan.h) ---- */

/* The planner cannot run: the size rule of quant-pick.h, saying so. */
static void choose_by_size(GTask *task, const char *why_not)
{
    PullState *s = g_task_get_task_data(task);
    g_autofree char *rule = NULL;
    s->picked = moe_quant_pick(s->groups, &rule);
    g_autofree char *note = g_strdup_printf("the memory planner cannot run (%s), so by file"
                                            " size: %s", why_not, rule);
    report(s, "listing", NULL, note);
    continue_pull(task);
}

static void choose_with(GTask *task, moe_plan_model *model, const char *from)
{
    PullState *s = g_task_get_task_data(task);
    g_autofree char *why = NULL;
    MoeQuantGroup *picked = NULL;
    switch (moe_pull_plan_pick(model, s->groups, &s->machine, &picked, &why)) {
    case MOE_PULL_PLAN_PICKED: {
        s->picked = picked;
        g_autofree char *note = g_strdup_printf("%s (model structure from %s)", why, from);
        report(s, "listing", NULL, note);
        continue_pull(task);
        return;
    }
    case MOE_PULL_PLAN_NOTHING_FITS: {
        MoeQuantGroup *smallest = g_ptr_array_index(s->groups, 0);
        pull_fail(task, g_error_new(MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_TOO_BIG,
                                    "no quantisation in %s fits %s; to download one anyway,"
                                    " name it (%s:%s)", s->ref.repo, why, s->ref.repo,
                                    smallest->quant));
        return;
    }
    case MOE_PULL_PLAN_FAILED:
        choose_by_size(task, why);
        return;
    }
}

static void headers_fetched(GObject *source, GAsyncResult *res, gpointer data)
{
    GTask *task = data;
    g_autofree moe_plan_model *model = g_new0(moe_plan_model, 1);
    g_autoptr(GError) error = NULL;
    if (!moe_pull_plan_fetch_finish(res, model, &error)) {
        if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
            pull_fail(task, g_steal_pointer(&error));
            return;
        }
        choose_by_size(task, error->message);
        return;
    }
    PullState *s = g_task_get_task_data(task);
    MoeQuantGroup *g = moe_pull_plan_header_group(s->groups);
    g_autofree char *from = g_strdup_printf("the GGUF header of %s%s",
                                            ((MoeManifestFile *)g_ptr_array_index(g->files, 0))->path,
                                            g->files->len > 1 ? " and its other parts" : "");
    choose_with(task, model, from);
}

/* Several quantisations and none named: the planner decides. */
static void choose_quant(GTask *task)
{
    PullState *s = g_task_get_task_data(task);
    moe_err err = { { 0 } };
    if (!s->have_machine && moe_hw_probe(&s->machine, &err) != MOE_OK) {
        g_autofree char *why = g_strdup_printf("hardware probe: %s", err.msg);
        choose_by_size(task, why);
        return;
    }
    s->have_machine = TRUE;
    g_autofree moe_plan_model *model = g_new0(moe_plan_model, 1);
    if (moe_pull_plan_model_from_catalog(s->ref.repo, s->name, model, NULL)) {
        choose_with(task, model, "the catalog");
        return;
    }
    /* Not in the catalog (or its entry lacks the structure): read a header. */
    moe_pull_plan_fetch_async(s->hub, moe_download_manager_get_session(s->mgr), s->ref.repo,
                              s->listing->revision, moe_pull_plan_header_group(s->groups),
                              s->children, headers_fetched, task);
}

static void listed(GObject *source, GAsyncResult *res, gpointer data)
{
    GTask *task = data;
    PullState *s = g_task_get_task_data(task);
    GError *error = NULL;
    s->listing = moe_hub_list_finish(s->hub, res, &error);
    if (!s->listing) {
        pull_fail(task, error);
        return;
    }
    s->groups = moe_quant_groups(s->listing->files);
    if (!s->ref.selector && s->groups->len > 1) {
        choose_quant(task);
        return;
    }
    if (!s->ref.selector && s->groups->len == 1)
        s->picked = g_ptr_array_index(s->groups, 0); /* nothing to choose */
    continue_pull(task);
}

/* ---- resolving the source ---- */

static gboolean resolve(PullState *s, GError **error)
{
    const char *src = s->source;
    if (moe_hub_ref_looks_like(src)) {
        if (!moe_hub_ref_parse(src, &s->ref, error))
            return FALSE;
        g_autoptr(MoeManifest) installed = moe_manifest_find_installed(s->ref.repo, NULL);
        s->name = g_strdup(installed ? installed->name : s->ref.repo);
        return TRUE;
    }
    g_autoptr(GError) local = NULL;
    if (!moe_library_check_name(src, &local)) {
        /* Not a valid name: it may still be a catalog alias ("qwen3:30b-a3b"). */
        g_clear_error(&local);
    } else {
        g_autoptr(MoeManifest) m = moe_manifest_load_model(src, &local);
        if (m && m->repo && moe_hub_kind_from_name(m->source, &s->ref.kind)) {
            s->name = g_strdup(m->name);
            s->ref.repo = g_strdup(m->repo);
            s->ref.revision = g_strdup(m->revision);
            if (m->quant && !strchr(m->quant, ','))
                s->ref.selector = g_strdup(m->quant);
            return TRUE;
        }
        if (!m && !g_error_matches(local, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND)) {
            g_propagate_error(error, g_steal_pointer(&local));
            return FALSE;
        }
    }
    MoeCatalogHit hit;
    g_autoptr(GError) cat_error = NULL;
    if (moe_catalog_lookup(src, &hit, &cat_error)) {
        s->name = g_strdup(hit.id);
        s->ref.kind = MOE_HUB_HF;
        s->ref.repo = g_strdup(hit.gguf_repo ? hit.gguf_repo : hit.st_repo);
        moe_catalog_hit_clear(&hit);
        if (s->ref.repo && moe_library_check_name(s->ref.repo, NULL))
            return TRUE;
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_CORRUPT,
                    "catalog entry %s names no usable repository", s->name);
        return FALSE;
    }
    if (g_error_matches(cat_error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_CORRUPT)) {
        g_propagate_error(error, g_steal_pointer(&cat_error));
        return FALSE;
    }
    g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND,
                "unknown model '%s': it is not installed, not in the model catalog, and not"
                " ORG/REPO", src);
    return FALSE;
}

static void on_user_cancel(GCancellable *c, gpointer data)
{
    g_cancellable_cancel(data);
}

void moe_pull_async(MoeDownloadManager *manager, const char *source, MoeDownloadFlags flags,
                    MoePullProgressFunc progress, gpointer progress_data,
                    GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
    moe_pull_on_machine_async(manager, source, flags, NULL, progress, progress_data, cancellable,
                              callback, user_data);
}

void moe_pull_on_machine_async(MoeDownloadManager *manager, const char *source,
                               MoeDownloadFlags flags, const moe_machine *machine,
                               MoePullProgressFunc progress, gpointer progress_data,
                               GCancellable *cancellable, GAsyncReadyCallback callback,
                               gpointer user_data)
{
    GTask *task = g_task_new(NULL, cancellable, callback, user_data);
    g_task_set_source_tag(task, moe_pull_async);
    PullState *s = g_new0(PullState, 1);
    s->mgr = g_object_ref(manager);
    s->flags = flags;
    if (machine) {
        s->machine = *machine;
        s->have_machine = TRUE;
    }
    s->progress = progress;
    s->progress_data = progress_data;
    s->source = g_strdup(source);
    s->children = g_cancellable_new();
    g_task_set_task_data(task, s, (GDestroyNotify)pull_state_free);
    if (cancellable) {
        s->user_cancel = g_object_ref(cancellable);
        s->cancel_id = g_cancellable_connect(cancellable, G_CALLBACK(on_user_cancel),
                                             s->children, NULL);
    }
    GError *error = NULL;
    report(s, "resolving", NULL, NULL);
    if (!resolve(s, &error)) {
        pull_fail(task, error);
        return;
    }
    s->hub = moe_hub_new(s->ref.kind, moe_download_manager_get_session(manager));
    report(s, "listing", NULL, NULL);
    moe_hub_list_async(s->hub, s->ref.repo, s->ref.revision, s->children, listed, task);
}

MoeManifest *moe_pull_finish(GAsyncResult *result, GError **error)
{
    return g_task_propagate_pointer(G_TASK(result), error);
}

/* ---- removing ---- */

/* Deletes `path` and everything under it without following links. */
static gboolean remove_tree(const char *path, GError **error)
{
    GStatBuf st;
    if (g_lstat(path, &st) != 0)
        return TRUE;
    if (S_ISDIR(st.st_mode)) {
        g_autoptr(GDir) dir = g_dir_open(path, 0, error);
        if (!dir)
            return FALSE;
        const char *entry;
        while ((entry = g_dir_read_name(dir))) {
            g_autofree char *child = g_build_filename(path, entry, NULL);
            if (!remove_tree(child, error))
                return FALSE;
        }
        if (g_rmdir(path) == 0)
            return TRUE;
    } else if (g_unlink(path) == 0) {
        return TRUE;
    }
    int e = errno;
    g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_IO, "cannot remove %s: %s", path,
                g_strerror(e));
    return FALSE;
}

/* The pid holding any *.part.lock under `path`, or 0. */
static int find_live_lock(const char *path)
{
    g_autoptr(GDir) dir = g_dir_open(path, 0, NULL);
    const char *entry;
    while (dir && (entry = g_dir_read_name(dir))) {
        g_autofree char *child = g_build_filename(path, entry, NULL);
        if (g_file_test(child, G_FILE_TEST_IS_DIR) && !g_file_test(child, G_FILE_TEST_IS_SYMLINK)) {
            int pid = find_live_lock(child);
            if (pid)
                return pid;
        } else if (g_str_has_suffix(entry, ".part.lock")) {
            g_autofree char *text = NULL;
            if (g_file_get_contents(child, &text, NULL, NULL)) {
                int pid = atoi(text);
                if (moe_pid_alive(pid))
                    return pid;
            }
        }
    }
    return 0;
}

gboolean moe_library_remove(const char *name, GError **error)
{
    g_autofree char *dir = moe_library_model_dir(name, error);
    if (!dir)
        return FALSE;
    if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND,
                    "no installed model called '%s'", name);
        return FALSE;
    }
    int pid = find_live_lock(dir);
    if (pid) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_BUSY,
                    "%s is being downloaded by pid %d; stop that pull first", name, pid);
        return FALSE;
    }
    return remove_tree(dir, error);
}

/*
 * pull-plan.c — the memory planner's choice of a quantisation for pull
 * (see pull-plan.h): the model's structure from the catalog or from GGUF
 * headers read with HTTP Range requests, one planner variant per
 * quantisation group, and the sentence that says why.
 *
 * Header fetch, per file of the group, in order:
 *   want = first request size; have = 0
 *   GET Range: bytes=have-(want-1)  -> append to the file's buffer
 *   moe_gguf_open_header(buffer, have, file size)
 *     MOE_ERR_RANGE -> want = need (at most MOE_PULL_PLAN_HEADER_MAX), again
 *     MOE_OK        -> keep the handle (it borrows the buffer), next file
 * A server that ignores Range answers 200: the buffer restarts at byte 0
 * and only `want` bytes are read. Transient failures are retried with the
 * policy of http.h; a body cut short resumes from what arrived.
 */
#include "pull-plan.h"
#include "catalog.h"
#include "http.h"
#include "library.h"

#include <stdio.h>
#include <string.h>

/* ---- structure ---- */

gboolean moe_pull_plan_model_from_catalog(const char *repo, const char *name,
                                          moe_plan_model *out, GError **error)
{
    const char *path = cli_catalog_default_path();
    if (!path || !g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND,
                    "no model catalog at %s", path ? path : "(none)");
        return FALSE;
    }
    g_autoptr(GError) local = NULL;
    g_autoptr(cli_catalog) cat = cli_catalog_load(path, &local);
    if (!cat) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_CORRUPT, "%s", local->message);
        return FALSE;
    }
    JsonObject *entry = repo ? cli_catalog_find(cat, repo) : NULL;
    if (!entry && name)
        entry = cli_catalog_find(cat, name);
    if (!entry) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND,
                    "%s is not in the model catalog (%s)", repo ? repo : name, path);
        return FALSE;
    }
    if (!cli_catalog_to_plan_model(entry, out, NULL, &local)) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_CORRUPT, "%s: %s", path,
                    local->message);
        return FALSE;
    }
    out->n_variants = 0; /* the listing's groups replace the catalog's files */
    return TRUE;
}

gboolean moe_pull_plan_model_from_headers(moe_gguf *const *parts, guint n_parts,
                                          const char *what, moe_plan_model *out,
                                          GError **error)
{
    moe_err err = { { 0 } };
    if (n_parts == 0 || moe_plan_model_from_gguf(parts[0], out, &err) != MOE_OK) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_CORRUPT, "%s: %s", what,
                    n_parts ? err.msg : "no header");
        return FALSE;
    }
    if (n_parts > 1) {
        /* The first part's tensors are only a share: count them all. */
        memset(out->group_params, 0, sizeof out->group_params);
        g_autoptr(GHashTable) expert_layers = g_hash_table_new(NULL, NULL);
        for (guint p = 0; p < n_parts; p++) {
            for (int64_t i = 0; i < moe_gguf_n_tensors(parts[p]); i++) {
                const moe_gguf_tensor *t = moe_gguf_tensor_at(parts[p], i);
                guint64 n = 1;
                for (uint32_t d = 0; d < t->n_dims; d++)
                    n *= (guint64)t->ne[d]; /* checked against the file by the reader */
                out->group_params[moe_tensor_group_of(t->name)] += n;
                int layer = -1;
                if (strstr(t->name, "_exps") && sscanf(t->name, "blk.%d.", &layer) == 1 &&
                    layer >= 0 && layer < out->n_layer)
                    g_hash_table_add(expert_layers, GINT_TO_POINTER(layer + 1));
            }
        }
        if (out->n_expert > 0)
            out->n_layer_moe = g_hash_table_size(expert_layers);
    }
    out->n_variants = 0;
    return TRUE;
}

/* ---- the choice ---- */

MoePullPlanResult moe_pull_plan_pick(moe_plan_model *model, GPtrArray *groups,
                                     const moe_machine *machine, MoeQuantGroup **picked,
                                     char **why)
{
    *picked = NULL;
    guint group_of[MOE_PLAN_MAX_VARIANTS];
    model->n_variants = 0;
    /* Groups are sorted by size: the largest (usually the best) first. */
    for (guint i = groups->len; i-- > 0 && model->n_variants < MOE_PLAN_MAX_VARIANTS;) {
        MoeQuantGroup *g = g_ptr_array_index(groups, i);
        moe_err err = { { 0 } };
        const size_t at = model->n_variants;
        if (strlen(g->quant) >= sizeof model->variants[0].quant ||
            !moe_plan_quant_info(g->quant, NULL, NULL) ||
            moe_plan_model_add_variant(model, g->quant, g->quant, g->bytes, false, &err) != MOE_OK)
            continue; /* a file without a quantisation the planner knows */
        group_of[at] = i;
    }
    if (model->n_variants == 0) {
        if (why)
            *why = g_strdup("no file is named with a quantisation the planner knows");
        return MOE_PULL_PLAN_FAILED;
    }
    moe_err err = { { 0 } };
    moe_plan *plan = NULL;
    if (moe_plan_model_check(model, &err) != MOE_OK ||
        moe_plan_make(model, machine, NULL, &plan, &err) != MOE_OK) {
        if (why)
            *why = g_strdup(err.msg);
        return MOE_PULL_PLAN_FAILED;
    }
    const int64_t chosen = moe_plan_chosen(plan);
    MoePullPlanResult result = MOE_PULL_PLAN_NOTHING_FITS;
    if (chosen >= 0) {
        const moe_plan_option *o = moe_plan_option_at(plan, (size_t)chosen);
        *picked = g_ptr_array_index(groups, group_of[o->variant]);
        result = MOE_PULL_PLAN_PICKED;
    }
    if (why && *picked) {
        g_autofree char *size = moe_library_format_size((*picked)->bytes);
        *why = g_strdup_printf("picked %s (%s) for %s with the memory planner: %s; name another"
                               " with SOURCE:QUANT", (*picked)->quant, size, machine->name,
                               moe_plan_reason(plan));
    } else if (why) {
        const char *reason = moe_plan_reason(plan);
        if (g_str_has_prefix(reason, "does not fit: "))
            reason += strlen("does not fit: ");
        *why = g_strdup_printf("%s (%s)", machine->name, reason);
    }
    moe_plan_free(plan);
    return result;
}

MoeQuantGroup *moe_pull_plan_header_group(GPtrArray *groups)
{
    for (guint i = 0; i < groups->len; i++) { /* sorted by size */
        MoeQuantGroup *g = g_ptr_array_index(groups, i);
        if (g->files->len == 1)
            return g;
    }
    return groups->len ? g_ptr_array_index(groups, 0) : NULL;
}

/* ---- fetching headers ---- */

typedef struct {
    SoupSession   *session;
    char          *token, *token_url, *url;
    MoeHub        *hub;      /* borrowed: the pull's, outlives the fetch */
    char          *repo, *revision;
    MoeQuantGroup *group;    /* borrowed */
    guint          index;    /* file of the group being read            */
    GByteArray    *buf;      /* its first bytes                          */
    guint64        want;     /* bytes the current request reads up to    */
    guint          attempt;
    GInputStream  *body;
    SoupMessage   *msg;
    GPtrArray     *bufs;     /* GByteArray* the handles below borrow     */
    GPtrArray     *parts;    /* moe_gguf*, one per file done             */
} FetchState;

static void fetch_state_free(FetchState *s)
{
    g_clear_object(&s->session);
    g_free(s->token);
    g_free(s->token_url);
    g_free(s->url);
    g_free(s->repo);
    g_free(s->revision);
    if (s->buf)
        g_byte_array_unref(s->buf);
    g_clear_object(&s->body);
    g_clear_object(&s->msg);
    g_ptr_array_unref(s->parts); /* before the buffers they borrow */
    g_ptr_array_unref(s->bufs);
    g_free(s);
}

static MoeManifestFile *current_file(FetchState *s)
{
    return g_ptr_array_index(s->group->files, s->index);
}

static guint64 first_request_bytes(void)
{
    const char *env = g_getenv("MOEDESK_TEST_HEADER_BYTES");
    guint64 n;
    if (env && g_ascii_string_to_unsigned(env, 10, 1, MOE_PULL_PLAN_HEADER_MAX, &n, NULL))
        return n;
    return MOE_PULL_PLAN_HEADER_BYTES;
}

static void send_request(GTask *task);

static void fetch_fail(GTask *task, GError *error)
{
    g_task_return_error(task, error);
    g_object_unref(task);
}

static gboolean retry_later(gpointer data)
{
    send_request(data);
    return G_SOURCE_REMOVE;
}

/* Another attempt after the policy's delay, or FALSE when none is left. */
static gboolean maybe_retry(GTask *task)
{
    FetchState *s = g_task_get_task_data(task);
    if (++s->attempt >= moe_http_max_attempts())
        return FALSE;
    gint64 ms = moe_http_retry_delay_ms(s->attempt, s->msg ? soup_message_get_response_headers(s->msg)
                                                            : NULL);
    if (ms < 0)
        return FALSE;
    g_timeout_add((guint)ms, retry_later, task);
    return TRUE;
}

static void start_file(GTask *task)
{
    FetchState *s = g_task_get_task_data(task);
    if (s->index == s->group->files->len) {
        moe_plan_model *m = g_new0(moe_plan_model, 1);
        GError *error = NULL;
        g_autofree char *what = g_strdup_printf(
            "%s: %s", s->repo, ((MoeManifestFile *)g_ptr_array_index(s->group->files, 0))->path);
        if (!moe_pull_plan_model_from_headers((moe_gguf *const *)s->parts->pdata, s->parts->len,
                                              what, m, &error)) {
            g_free(m);
            fetch_fail(task, error);
            return;
        }
        g_task_return_pointer(task, m, g_free);
        g_object_unref(task);
        return;
    }
    MoeManifestFile *f = current_file(s);
    s->buf = g_byte_array_new();
    s->want = MIN(first_request_bytes(), f->size);
    s->attempt = 0;
    g_free(s->url);
    s->url = moe_hub_file_url(s->hub, s->repo, s->revision, f->path);
    send_request(task);
}

/* Parses what arrived: next file, a larger prefix, or an error. */
static void parse_prefix(GTask *task)
{
    FetchState *s = g_task_get_task_data(task);
    MoeManifestFile *f = current_file(s);
    g_autofree char *what = g_strdup_printf("%s: %s", s->repo, f->path);
    moe_gguf *g = NULL;
    guint64 need = 0;
    moe_err err = { { 0 } };
    moe_status st = moe_gguf_open_header(s->buf->data, s->buf->len, f->size, what, &g, &need, &err);
    if (st == MOE_OK) {
        g_ptr_array_add(s->parts, g);
        g_ptr_array_add(s->bufs, g_steal_pointer(&s->buf));
        s->index++;
        start_file(task);
        return;
    }
    if (st == MOE_ERR_RANGE && need > s->buf->len && need <= MOE_PULL_PLAN_HEADER_MAX) {
        s->want = need;
        send_request(task);
        return;
    }
    fetch_fail(task, g_error_new(MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_CORRUPT, "%s", st == MOE_ERR_RANGE
                                 ? "the GGUF header is larger than the most pull reads to plan"
                                 : err.msg));
}

static void body_read(GObject *source, GAsyncResult *res, gpointer data)
{
    GTask *task = data;
    FetchState *s = g_task_get_task_data(task);
    GError *error = NULL;
    g_autoptr(GBytes) bytes = g_input_stream_read_bytes_finish(G_INPUT_STREAM(source), res, &error);
    if (!bytes) {
        g_clear_object(&s->body);
        if (!g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED) &&
            moe_http_error_is_transient(error) && maybe_retry(task)) {
            g_error_free(error);
            return;
        }
        fetch_fail(task, error);
        return;
    }
    gsize n = g_bytes_get_size(bytes);
    if (n > 0) {
        gsize keep = (gsize)MIN((guint64)n, s->want - s->buf->len);
        g_byte_array_append(s->buf, g_bytes_get_data(bytes, NULL), (guint)keep);
    }
    if (n > 0 && s->buf->len < s->want) {
        g_input_stream_read_bytes_async(s->body, (gsize)MIN(s->want - s->buf->len, 256 * 1024),
                                        G_PRIORITY_DEFAULT, g_task_get_cancellable(task),
                                        body_read, task);
        return;
    }
    g_clear_object(&s->body); /* a server that ignored Range: the rest is dropped */
    if (s->buf->len < s->want) { /* cut short: resume from what arrived */
        if (maybe_retry(task))
            return;
        fetch_fail(task, g_error_new(MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NETWORK,
                                     "%s: %s: the connection closed after %u of %" G_GUINT64_FORMAT
                                     " header bytes", s->repo, current_file(s)->path,
                                     s->buf->len, s->want));
        return;
    }
    parse_prefix(task);
}

static void got_response(GObject *source, GAsyncResult *res, gpointer data)
{
    GTask *task = data;
    FetchState *s = g_task_get_task_data(task);
    GError *error = NULL;
    g_clear_object(&s->msg);
    s->body = moe_http_get_finish(res, &s->msg, &error);
    if (!s->body) {
        if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
            fetch_fail(task, error);
            return;
        }
        if (moe_http_error_is_transient(error) && maybe_retry(task)) {
            g_error_free(error);
            return;
        }
        fetch_fail(task, g_error_new(MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NETWORK, "%s: %s: %s",
                                     s->repo, current_file(s)->path, error->message));
        g_error_free(error);
        return;
    }
    guint status = soup_message_get_status(s->msg);
    if (status == 200) {
        g_byte_array_set_size(s->buf, 0); /* the whole file from byte 0 */
    } else if (status != 206) {
        g_clear_object(&s->body);
        if (moe_http_status_is_transient(status) && maybe_retry(task))
            return;
        fetch_fail(task, g_error_new(MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_HTTP,
                                     "%s: %s: HTTP %u reading the GGUF header", s->repo,
                                     current_file(s)->path, status));
        return;
    }
    g_input_stream_read_bytes_async(s->body, (gsize)MIN(s->want - s->buf->len, 256 * 1024),
                                    G_PRIORITY_DEFAULT, g_task_get_cancellable(task), body_read,
                                    task);
}

static void set_range(SoupMessage *msg, gpointer data)
{
    FetchState *s = data;
    soup_message_headers_set_range(soup_message_get_request_headers(msg), (goffset)s->buf->len,
                                   (goffset)s->want - 1);
}

static void send_request(GTask *task)
{
    FetchState *s = g_task_get_task_data(task);
    if (g_task_return_error_if_cancelled(task)) {
        g_object_unref(task);
        return;
    }
    moe_http_get_async(s->session, s->url, s->token, s->token_url, set_range, s,
                       g_task_get_cancellable(task), got_response, task);
}

void moe_pull_plan_fetch_async(MoeHub *hub, SoupSession *session, const char *repo,
                               const char *revision, MoeQuantGroup *group,
                               GCancellable *cancellable, GAsyncReadyCallback callback,
                               gpointer user_data)
{
    GTask *task = g_task_new(NULL, cancellable, callback, user_data);
    g_task_set_source_tag(task, moe_pull_plan_fetch_async);
    FetchState *s = g_new0(FetchState, 1);
    s->session = g_object_ref(session);
    s->hub = hub;
    s->token = g_strdup(moe_hub_token(hub));
    s->token_url = g_strdup(moe_hub_endpoint(hub));
    s->repo = g_strdup(repo);
    s->revision = g_strdup(revision);
    s->group = group;
    s->bufs = g_ptr_array_new_with_free_func((GDestroyNotify)g_byte_array_unref);
    s->parts = g_ptr_array_new_with_free_func((GDestroyNotify)moe_gguf_free);
    g_task_set_task_data(task, s, (GDestroyNotify)fetch_state_free);
    start_file(task);
}

gboolean moe_pull_plan_fetch_finish(GAsyncResult *result, moe_plan_model *out, GError **error)
{
    g_autofree moe_plan_model *m = g_task_propagate_pointer(G_TASK(result), error);
    if (!m)
        return FALSE;
    *out = *m;
    return TRUE;
}

/*
 * verify.c — moe_verify_async (see verify.h). One GTask thread runs the
 * check: phase 1 hashes files on a GThreadPool (one file per task, a 4 MiB
 * buffer each; bytes hashed are counted in an atomic the main context
 * polls for progress); phase 2, for files whose size and hash passed,
 * opens GGUF headers (split sets once, from part 1), safetensors headers
 * and index files. Only headers are read in phase 2.
 */
#include "verify.h"
#include "hasher.h"
#include "library.h"
#include "moe.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

#define READ_BYTES (4u << 20)

typedef struct {
    MoeManifest   *manifest;
    char          *dir;
    guint          n_threads;
    GPtrArray     *results;   /* of MoeVerifyResult*, parallel to files  */
    GCancellable  *cancellable;
    guint64        total;
    gsize          done;      /* atomic */
    gint           n_done;    /* atomic */
    gboolean       finished;  /* set on the main context                 */
    guint          timer;
    MoeVerifyProgressFunc progress;
    gpointer       progress_data;
} VerifyState;

const char *moe_verify_status_name(MoeVerifyStatus status)
{
    switch (status) {
    case MOE_VERIFY_OK:            return "OK";
    case MOE_VERIFY_MISSING:       return "missing";
    case MOE_VERIFY_SIZE_MISMATCH: return "size mismatch";
    case MOE_VERIFY_HASH_MISMATCH: return "hash mismatch";
    case MOE_VERIFY_CORRUPT:       return "corrupt";
    }
    return "?";
}

void moe_verify_result_free(MoeVerifyResult *r)
{
    if (!r)
        return;
    g_free(r->path);
    g_free(r->detail);
    g_free(r);
}

static MoeVerifyResult *result_new(const char *path)
{
    MoeVerifyResult *r = g_new0(MoeVerifyResult, 1);
    r->path = g_strdup(path);
    return r;
}

static void result_set(MoeVerifyResult *r, MoeVerifyStatus status, char *detail)
{
    if (r->status != MOE_VERIFY_OK) { /* the first problem wins */
        g_free(detail);
        return;
    }
    r->status = status;
    r->detail = detail;
}

static char *full_path(VerifyState *s, const char *rel)
{
    g_auto(GStrv) parts = g_strsplit(rel, "/", -1);
    g_autofree char *tail = g_build_filenamev(parts);
    return g_build_filename(s->dir, tail, NULL);
}

static void state_free(VerifyState *s)
{
    moe_manifest_free(s->manifest);
    g_free(s->dir);
    if (s->results)
        g_ptr_array_unref(s->results);
    g_clear_object(&s->cancellable);
    g_free(s);
}

/* ---- phase 1: size and hash, one file per pool task ---- */

static void hash_one(gpointer item, gpointer data)
{
    VerifyState *s = data;
    guint i = GPOINTER_TO_UINT(item) - 1;
    MoeManifestFile *f = g_ptr_array_index(s->manifest->files, i);
    MoeVerifyResult *r = g_ptr_array_index(s->results, i);
    g_autofree char *path = full_path(s, f->path);
    GStatBuf st;
    if (g_stat(path, &st) != 0) {
        result_set(r, MOE_VERIFY_MISSING, g_strdup_printf("%s does not exist", path));
    } else if ((guint64)st.st_size != f->size) {
        result_set(r, MOE_VERIFY_SIZE_MISMATCH, g_strdup_printf(
            "%" G_GUINT64_FORMAT " bytes, the manifest says %" G_GUINT64_FORMAT,
            (guint64)st.st_size, f->size));
    } else if (f->sha256 || f->git_sha1) {
        MoeHasher h;
        moe_hasher_init(&h, f->sha256 ? MOE_HASH_SHA256 : MOE_HASH_GIT_SHA1, f->size);
        FILE *fp = g_fopen(path, "rb");
        guint8 *buf = g_malloc(READ_BYTES);
        size_t n;
        int read_errno = 0;
        while (fp && !g_cancellable_is_cancelled(s->cancellable) &&
               (n = fread(buf, 1, READ_BYTES, fp)) > 0) {
            moe_hasher_update(&h, buf, n);
            g_atomic_pointer_add(&s->done, (gssize)n);
        }
        if (!fp || ferror(fp))
            read_errno = errno ? errno : EIO;
        if (fp)
            fclose(fp);
        g_free(buf);
        g_autofree char *got = moe_hasher_finish(&h);
        moe_hasher_clear(&h);
        const char *want = f->sha256 ? f->sha256 : f->git_sha1;
        if (read_errno)
            result_set(r, MOE_VERIFY_CORRUPT, g_strdup_printf("cannot read %s: %s", path,
                                                              g_strerror(read_errno)));
        else if (!g_cancellable_is_cancelled(s->cancellable) && g_strcmp0(got, want) != 0)
            result_set(r, MOE_VERIFY_HASH_MISMATCH, g_strdup_printf(
                "%s %s, the manifest says %s", f->sha256 ? "sha256" : "git sha1", got, want));
    }
    g_atomic_int_inc(&s->n_done);
}

/* ---- phase 2: structure ---- */

/* Parses "PREFIX-0000K-of-0000N.gguf"; FALSE if `path` is not a split part. */
static gboolean split_parts(const char *path, char **prefix, guint *k, guint *n)
{
    size_t len = strlen(path);
    if (len < 20 || !g_str_has_suffix(path, ".gguf") || path[len - 20] != '-' ||
        strncmp(path + len - 14, "-of-", 4) != 0)
        return FALSE;
    guint64 a, b;
    g_autofree char *ks = g_strndup(path + len - 19, 5), *ns = g_strndup(path + len - 10, 5);
    if (!g_ascii_string_to_unsigned(ks, 10, 1, 99999, &a, NULL) ||
        !g_ascii_string_to_unsigned(ns, 10, 1, 99999, &b, NULL) || a > b)
        return FALSE;
    *prefix = g_strndup(path, len - 20);
    *k = (guint)a;
    *n = (guint)b;
    return TRUE;
}

static MoeVerifyResult *find_result(VerifyState *s, const char *path)
{
    for (guint i = 0; i < s->results->len; i++) {
        MoeVerifyResult *r = g_ptr_array_index(s->results, i);
        if (strcmp(r->path, path) == 0)
            return r;
    }
    return NULL;
}

/* Every part of each split set must be in the manifest; an unlisted part
 * gets a row of its own. Returns FALSE if the set is incomplete or a part
 * failed phase 1 (then the set is not opened). */
static gboolean check_split_set(VerifyState *s, const char *prefix, guint n)
{
    gboolean ok = TRUE;
    for (guint k = 1; k <= n; k++) {
        g_autofree char *part = g_strdup_printf("%s-%05u-of-%05u.gguf", prefix, k, n);
        MoeVerifyResult *r = find_result(s, part);
        if (!r) {
            g_autofree char *path = full_path(s, part);
            r = result_new(part);
            result_set(r, g_file_test(path, G_FILE_TEST_EXISTS) ? MOE_VERIFY_CORRUPT
                                                                : MOE_VERIFY_MISSING,
                       g_strdup_printf("part %u of %u of the split set is not in the manifest",
                                       k, n));
            g_ptr_array_add(s->results, r);
        }
        ok = ok && r->status == MOE_VERIFY_OK;
    }
    return ok;
}

static void check_gguf(VerifyState *s, MoeVerifyResult *r)
{
    g_autofree char *prefix = NULL;
    guint k = 0, n = 0;
    if (split_parts(r->path, &prefix, &k, &n) && (k != 1 || !check_split_set(s, prefix, n)))
        return; /* opened from part 1, and only when every part passed */
    g_autofree char *path = full_path(s, r->path);
    moe_gguf *g = NULL;
    moe_err err = { { 0 } };
    if (moe_gguf_open(path, &g, &err) != MOE_OK)
        result_set(r, MOE_VERIFY_CORRUPT, g_strdup(err.msg));
    else if (n > 1 && moe_gguf_n_splits(g) != n)
        result_set(r, MOE_VERIFY_CORRUPT, g_strdup_printf(
            "the file name says %u parts, split.count says %u", n, moe_gguf_n_splits(g)));
    moe_gguf_free(g);
}

static void check_safetensors(VerifyState *s, MoeVerifyResult *r)
{
    g_autofree char *path = full_path(s, r->path);
    moe_safetensors *st = NULL;
    moe_err err = { { 0 } };
    if (moe_safetensors_open(path, &st, &err) != MOE_OK)
        result_set(r, MOE_VERIFY_CORRUPT, g_strdup(err.msg));
    moe_safetensors_free(st);
}

/* weight_map: tensor -> shard file (relative to the index's folder). */
static void check_st_index(VerifyState *s, MoeVerifyResult *r)
{
    g_autofree char *path = full_path(s, r->path);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    if (!json_parser_load_from_file(parser, path, &error)) {
        result_set(r, MOE_VERIFY_CORRUPT, g_strdup(error->message));
        return;
    }
    JsonNode *root = json_parser_get_root(parser);
    JsonNode *map = root && JSON_NODE_HOLDS_OBJECT(root)
                        ? json_object_get_member(json_node_get_object(root), "weight_map") : NULL;
    if (!map || !JSON_NODE_HOLDS_OBJECT(map)) {
        result_set(r, MOE_VERIFY_CORRUPT, g_strdup("no weight_map object"));
        return;
    }
    g_autofree char *base = g_path_get_dirname(r->path);
    g_autoptr(GHashTable) shards = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                                         (GDestroyNotify)moe_safetensors_free);
    JsonObjectIter it;
    const char *tensor;
    JsonNode *value;
    json_object_iter_init(&it, json_node_get_object(map));
    while (r->status == MOE_VERIFY_OK && json_object_iter_next(&it, &tensor, &value)) {
        const char *shard = JSON_NODE_HOLDS_VALUE(value) &&
                            json_node_get_value_type(value) == G_TYPE_STRING
                                ? json_node_get_string(value) : NULL;
        g_autofree char *rel = shard ? (strcmp(base, ".") == 0 ? g_strdup(shard)
                                                               : g_strconcat(base, "/", shard, NULL))
                                     : NULL;
        MoeVerifyResult *sr = rel && moe_library_check_rel_path(rel, NULL) ? find_result(s, rel) : NULL;
        if (!sr) {
            result_set(r, MOE_VERIFY_CORRUPT, g_strdup_printf(
                "weight_map sends tensor '%s' to %s, which is not an installed file", tensor,
                shard ? shard : "(not a string)"));
            break;
        }
        if (sr->status != MOE_VERIFY_OK)
            continue; /* reported on the shard's own row */
        moe_safetensors *st = g_hash_table_lookup(shards, rel);
        if (!st) {
            g_autofree char *sp = full_path(s, rel);
            moe_err err = { { 0 } };
            if (moe_safetensors_open(sp, &st, &err) != MOE_OK)
                continue; /* check_safetensors reports it */
            g_hash_table_insert(shards, g_strdup(rel), st);
        }
        if (!moe_safetensors_find(st, tensor))
            result_set(r, MOE_VERIFY_CORRUPT, g_strdup_printf(
                "weight_map puts tensor '%s' in %s, which does not have it", tensor, shard));
    }
}

static void verify_thread(GTask *task, gpointer source, gpointer data, GCancellable *c)
{
    VerifyState *s = data;
    guint n = s->manifest->files->len;
    GThreadPool *pool = g_thread_pool_new(hash_one, s, (gint)MAX(1, MIN(s->n_threads, n)), TRUE, NULL);
    for (guint i = 0; i < n; i++)
        g_thread_pool_push(pool, GUINT_TO_POINTER(i + 1), NULL);
    g_thread_pool_free(pool, FALSE, TRUE); /* waits for every file */
    if (g_task_return_error_if_cancelled(task))
        return;
    for (guint i = 0; i < n; i++) {
        MoeVerifyResult *r = g_ptr_array_index(s->results, i);
        if (r->status != MOE_VERIFY_OK)
            continue;
        if (g_str_has_suffix(r->path, ".gguf"))
            check_gguf(s, r);
        else if (g_str_has_suffix(r->path, ".safetensors"))
            check_safetensors(s, r);
    }
    for (guint i = 0; i < n; i++) { /* after the shards have their verdicts */
        MoeVerifyResult *r = g_ptr_array_index(s->results, i);
        if (r->status == MOE_VERIFY_OK && g_str_has_suffix(r->path, ".safetensors.index.json"))
            check_st_index(s, r);
    }
    g_task_return_pointer(task, g_ptr_array_ref(s->results), (GDestroyNotify)g_ptr_array_unref);
}

static gboolean progress_tick(gpointer data)
{
    VerifyState *s = data;
    if (s->progress)
        s->progress((guint64)g_atomic_pointer_get(&s->done), s->total,
                    (guint)g_atomic_int_get(&s->n_done), s->manifest->files->len,
                    s->progress_data);
    return G_SOURCE_CONTINUE;
}

static void verify_done(GObject *source, GAsyncResult *res, gpointer data)
{
    GTask *outer = data;
    VerifyState *s = g_task_get_task_data(outer);
    g_source_remove(s->timer);
    progress_tick(s);
    GError *error = NULL;
    GPtrArray *results = g_task_propagate_pointer(G_TASK(res), &error);
    if (results)
        g_task_return_pointer(outer, results, (GDestroyNotify)g_ptr_array_unref);
    else
        g_task_return_error(outer, error);
    g_object_unref(outer);
}

void moe_verify_async(const MoeManifest *manifest, const char *model_dir, guint n_threads,
                      MoeVerifyProgressFunc progress, gpointer progress_data,
                      GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
    GTask *outer = g_task_new(NULL, cancellable, callback, user_data);
    VerifyState *s = g_new0(VerifyState, 1);
    s->manifest = moe_manifest_new(manifest->name);
    for (guint i = 0; i < manifest->files->len; i++) {
        const MoeManifestFile *f = g_ptr_array_index(manifest->files, i);
        moe_manifest_add_file(s->manifest, moe_manifest_file_new(f->path, f->size, f->sha256,
                                                                 f->git_sha1));
    }
    s->dir = g_strdup(model_dir);
    s->n_threads = n_threads ? n_threads : (guint)g_get_num_processors();
    s->results = g_ptr_array_new_with_free_func((GDestroyNotify)moe_verify_result_free);
    for (guint i = 0; i < s->manifest->files->len; i++)
        g_ptr_array_add(s->results, result_new(((MoeManifestFile *)g_ptr_array_index(
                                                    s->manifest->files, i))->path));
    s->total = moe_manifest_total_bytes(s->manifest);
    s->cancellable = cancellable ? g_object_ref(cancellable) : NULL;
    s->progress = progress;
    s->progress_data = progress_data;
    g_task_set_task_data(outer, s, (GDestroyNotify)state_free);
    s->timer = g_timeout_add(200, progress_tick, s);
    GTask *inner = g_task_new(NULL, cancellable, verify_done, outer);
    g_task_set_task_data(inner, s, NULL);
    g_task_run_in_thread(inner, verify_thread);
    g_object_unref(inner);
}

GPtrArray *moe_verify_finish(GAsyncResult *result, GError **error)
{
    return g_task_propagate_pointer(G_TASK(result), error);
}

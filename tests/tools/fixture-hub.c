/*
 * fixture-hub.c — a local stand-in for Hugging Face and ModelScope, for the
 * download tests and benchmarks. Serves ROOT/ORG/REPO/... on 127.0.0.1:
 *
 *   GET /api/models/ORG/REPO/revision/REV       {"id", "sha"}
 *   GET /api/models/ORG/REPO/tree/REV?recursive=true
 *        [{type, path, size, oid, lfs: {oid, size}}]; *.gguf, *.safetensors
 *        and *.bin are "LFS" files (sha256), others carry the git blob id;
 *        paged (Link: rel="next") when --page-size N is given
 *   GET /ORG/REPO/resolve/REV/PATH               the file (Range, If-Range)
 *   GET /api/v1/models/ORG/REPO/repo/files        ModelScope listing
 *   GET /api/v1/models/ORG/REPO/repo?FilePath=P   ModelScope download
 *   GET /cdn/ORG/REPO/PATH                        (second port) the file
 *
 * and a control API for the tests:
 *   POST /_control/fault?path=ORG/REPO/FILE&kind=K[&at=N][&count=N]
 *        [&code=N][&retry_after=S|date:S][&rate=BPS]
 *        kinds: cut (close the connection after `at` body bytes), status
 *        (answer `code`, with Retry-After for 429/503), corrupt (flip the
 *        byte at offset `at` of the file as served), slow (`rate` bytes/s),
 *        stall (send `at` body bytes, then nothing, keeping the connection),
 *        norange (answer 200 to ranged requests), redirect (302 to the CDN
 *        port); `count` times (default 1; -1: always)
 *   GET  /_control/stats   {"files": {PATH: {"bytes", "requests",
 *        "range_starts": [...]}}, "requests": [{"port", "path", "auth"}]}
 *   POST /_control/reset   forget faults and statistics
 *
 * Bodies are slices of a mapped file, so a gigabyte file is served without
 * holding it in memory. Prints "PORT CDN_PORT" on stdout, then serves until
 * stdin closes (so it dies with the test that started it).
 */
#include "moe.h"

#include <glib-unix.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK_BYTES (1u << 20)

typedef struct {
    char *path;   /* ORG/REPO/FILE */
    char *kind;
    gint64 at, code, rate, count;
    char *retry_after;
} Fault;

typedef struct {
    guint64    bytes, requests;
    GArray    *range_starts; /* gint64 */
} Stat;

static struct {
    char       *root;
    int         page_size;
    guint       port, cdn_port;
    GPtrArray  *faults;     /* Fault* */
    GHashTable *stats;      /* path -> Stat* */
    GPtrArray  *requests;   /* JsonNode* objects */
    GHashTable *hashes;     /* abs path -> "sha256 size mtime" cache */
    GList      *sends;      /* bodies in flight (freed at exit if never finished) */
} hub;

/* ---- faults and stats ---- */

static void fault_free(Fault *f)
{
    g_free(f->path);
    g_free(f->kind);
    g_free(f->retry_after);
    g_free(f);
}

static void stat_free(Stat *s)
{
    g_array_unref(s->range_starts);
    g_free(s);
}

/* Takes (consumes one use of) the first fault of `kind` for `path`. */
static Fault *fault_take(const char *path, const char *kind)
{
    for (guint i = 0; i < hub.faults->len; i++) {
        Fault *f = g_ptr_array_index(hub.faults, i);
        if (strcmp(f->path, path) == 0 && strcmp(f->kind, kind) == 0 && f->count != 0) {
            if (f->count > 0)
                f->count--;
            return f;
        }
    }
    return NULL;
}

static Stat *stat_for(const char *path)
{
    Stat *s = g_hash_table_lookup(hub.stats, path);
    if (!s) {
        s = g_new0(Stat, 1);
        s->range_starts = g_array_new(FALSE, FALSE, sizeof(gint64));
        g_hash_table_insert(hub.stats, g_strdup(path), s);
    }
    return s;
}

/* ---- hashing (cached by size and mtime) ---- */

static char *file_sha256(const char *abs, guint64 size, gint64 mtime)
{
    g_autofree char *key = g_strdup_printf("%s|%" G_GUINT64_FORMAT "|%" G_GINT64_FORMAT, abs, size, mtime);
    const char *cached = g_hash_table_lookup(hub.hashes, key);
    if (cached)
        return g_strdup(cached);
    g_autoptr(GMappedFile) map = g_mapped_file_new(abs, FALSE, NULL);
    moe_sha256 ctx;
    uint8_t d[32];
    char hex[65];
    moe_sha256_init(&ctx);
    if (map)
        moe_sha256_update(&ctx, g_mapped_file_get_contents(map), g_mapped_file_get_length(map));
    moe_sha256_final(&ctx, d);
    moe_sha256_hex(d, hex);
    g_hash_table_insert(hub.hashes, g_steal_pointer(&key), g_strdup(hex));
    return g_strdup(hex);
}

static char *git_blob_sha1_of(const char *data, guint64 size)
{
    g_autoptr(GChecksum) c = g_checksum_new(G_CHECKSUM_SHA1);
    char head[48];
    int n = g_snprintf(head, sizeof head, "blob %" G_GUINT64_FORMAT, size);
    g_checksum_update(c, (const guchar *)head, n + 1);
    if (size)
        g_checksum_update(c, (const guchar *)data, (gssize)size);
    return g_strdup(g_checksum_get_string(c));
}

static char *git_blob_sha1(const char *abs, guint64 size)
{
    g_autoptr(GMappedFile) map = g_mapped_file_new(abs, FALSE, NULL);
    return git_blob_sha1_of(map ? g_mapped_file_get_contents(map) : "", map ? size : 0);
}

/* What git stores for an LFS file is a pointer; its blob id is the "oid"
 * Hugging Face lists for LFS files. */
static char *lfs_pointer_sha1(const char *sha256, guint64 size)
{
    g_autofree char *ptr = g_strdup_printf("version https://git-lfs.github.com/spec/v1\n"
                                           "oid sha256:%s\nsize %" G_GUINT64_FORMAT "\n", sha256, size);
    return git_blob_sha1_of(ptr, strlen(ptr));
}

static gboolean is_lfs(const char *path)
{
    return g_str_has_suffix(path, ".gguf") || g_str_has_suffix(path, ".safetensors") ||
           g_str_has_suffix(path, ".bin");
}

static char *repo_sha(const char *repo)
{
    return g_compute_checksum_for_string(G_CHECKSUM_SHA1, repo, -1);
}

/* ---- listings ---- */

typedef struct {
    char   *path;
    guint64 size;
    gint64  mtime;
} Entry;

static void entry_free(Entry *e)
{
    g_free(e->path);
    g_free(e);
}

static gint cmp_entry(gconstpointer a, gconstpointer b)
{
    return strcmp((*(Entry *const *)a)->path, (*(Entry *const *)b)->path);
}

static void walk(const char *base, const char *rel, GPtrArray *out)
{
    g_autofree char *dir_path = rel ? g_build_filename(base, rel, NULL) : g_strdup(base);
    g_autoptr(GDir) dir = g_dir_open(dir_path, 0, NULL);
    const char *name;
    while (dir && (name = g_dir_read_name(dir))) {
        if (name[0] == '.' || g_str_has_suffix(name, ".part") || strstr(name, ".part."))
            continue;
        g_autofree char *child_rel = rel ? g_strconcat(rel, "/", name, NULL) : g_strdup(name);
        g_autofree char *abs = g_build_filename(base, child_rel, NULL);
        GStatBuf st;
        if (g_stat(abs, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            walk(base, child_rel, out);
        } else {
            Entry *e = g_new0(Entry, 1);
            e->path = g_steal_pointer(&child_rel);
            e->size = (guint64)st.st_size;
            e->mtime = (gint64)st.st_mtime;
            g_ptr_array_add(out, e);
        }
    }
}

static GPtrArray *list_repo(const char *repo)
{
    g_autofree char *base = g_build_filename(hub.root, repo, NULL);
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)entry_free);
    walk(base, NULL, out);
    g_ptr_array_sort(out, cmp_entry);
    return out;
}

static void set_json(SoupServerMessage *msg, guint status, JsonNode *root)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_root(gen, root);
    gsize len = 0;
    char *text = json_generator_to_data(gen, &len);
    soup_server_message_set_status(msg, status, NULL);
    soup_server_message_set_response(msg, "application/json", SOUP_MEMORY_TAKE, text, len);
}

static void set_text(SoupServerMessage *msg, guint status, const char *text)
{
    soup_server_message_set_status(msg, status, NULL);
    soup_server_message_set_response(msg, "text/plain", SOUP_MEMORY_COPY, text, strlen(text));
}

static void serve_tree(SoupServerMessage *msg, const char *repo, GHashTable *query, gboolean ms)
{
    g_autoptr(GPtrArray) entries = list_repo(repo);
    g_autofree char *sha = repo_sha(repo);
    guint start = 0, end = entries->len;
    const char *cursor = query ? g_hash_table_lookup(query, "cursor") : NULL;
    if (!ms && hub.page_size > 0) {
        start = cursor ? (guint)atoi(cursor) : 0;
        end = MIN(entries->len, start + (guint)hub.page_size);
    }
    g_autoptr(JsonBuilder) b = json_builder_new();
    if (ms) {
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "Code");
        json_builder_add_int_value(b, 200);
        json_builder_set_member_name(b, "Data");
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "Files");
    }
    json_builder_begin_array(b);
    for (guint i = start; i < end; i++) {
        Entry *e = g_ptr_array_index(entries, i);
        g_autofree char *abs = g_build_filename(hub.root, repo, e->path, NULL);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, ms ? "Type" : "type");
        json_builder_add_string_value(b, ms ? "blob" : "file");
        json_builder_set_member_name(b, ms ? "Path" : "path");
        json_builder_add_string_value(b, e->path);
        json_builder_set_member_name(b, ms ? "Size" : "size");
        json_builder_add_int_value(b, (gint64)e->size);
        if (ms) {
            g_autofree char *h = file_sha256(abs, e->size, e->mtime);
            json_builder_set_member_name(b, "Sha256");
            json_builder_add_string_value(b, h);
            json_builder_set_member_name(b, "Revision");
            json_builder_add_string_value(b, sha);
        } else {
            g_autofree char *h = is_lfs(e->path) ? file_sha256(abs, e->size, e->mtime) : NULL;
            g_autofree char *oid = h ? lfs_pointer_sha1(h, e->size) : git_blob_sha1(abs, e->size);
            json_builder_set_member_name(b, "oid");
            json_builder_add_string_value(b, oid);
            if (h) {
                json_builder_set_member_name(b, "lfs");
                json_builder_begin_object(b);
                json_builder_set_member_name(b, "oid");
                json_builder_add_string_value(b, h);
                json_builder_set_member_name(b, "size");
                json_builder_add_int_value(b, (gint64)e->size);
                json_builder_end_object(b);
            }
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    if (ms) {
        json_builder_end_object(b);
        json_builder_end_object(b);
    }
    if (end < entries->len) {
        g_autofree char *next = g_strdup_printf("<http://127.0.0.1:%u/api/models/%s/tree/%s"
                                                "?recursive=true&cursor=%u>; rel=\"next\"",
                                                hub.port, repo, sha, end);
        soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Link", next);
    }
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    set_json(msg, 200, root);
}

/* ---- serving a file ---- */

typedef struct {
    GMappedFile *map;
    GBytes      *all;
    char        *path;   /* ORG/REPO/FILE, for stats */
    guint64      pos;    /* next body byte (file offset) */
    guint64      end;    /* one past the last body byte  */
    gint64       cut_at; /* file offset to cut at, or -1 */
    gint64       stall_at; /* file offset to stop sending at (keeping the
                            * connection open), or -1 */
    gint64       corrupt_at;
    gint64       rate;   /* bytes/s, 0 = unlimited       */
    guint64      pending; /* bytes appended, not yet counted as written */
    guint        timer;
    gboolean     done;
    SoupServerMessage *msg;
} Send;

static void send_free(Send *s)
{
    hub.sends = g_list_remove(hub.sends, s);
    if (s->timer)
        g_source_remove(s->timer);
    g_bytes_unref(s->all);
    g_mapped_file_unref(s->map);
    g_free(s->path);
    g_free(s);
}

/* Appends the next chunk (or completes the body); FALSE if it had to stop. */
static void send_next(Send *s);

static gboolean send_timer(gpointer data)
{
    Send *s = data;
    s->timer = 0;
    send_next(s);
    soup_server_message_unpause(s->msg);
    return G_SOURCE_REMOVE;
}

static void send_next(Send *s)
{
    SoupMessageBody *body = soup_server_message_get_response_body(s->msg);
    guint64 limit = s->end;
    if (s->cut_at >= 0 && (guint64)s->cut_at < limit)
        limit = (guint64)s->cut_at;
    if (s->stall_at >= 0 && (guint64)s->stall_at < limit)
        limit = (guint64)s->stall_at;
    if (s->pos >= limit) {
        if (s->pos >= s->end)
            soup_message_body_complete(body);
        return; /* a cut: wrote-chunk after the last byte closes the socket */
    }
    guint64 n = MIN((guint64)CHUNK_BYTES, limit - s->pos);
    if (s->rate > 0)
        n = MIN(n, (guint64)MAX(1, s->rate / 10));
    GBytes *chunk;
    if (s->corrupt_at >= 0 && (guint64)s->corrupt_at >= s->pos && (guint64)s->corrupt_at < s->pos + n) {
        guint8 *copy = g_memdup2((const guint8 *)g_bytes_get_data(s->all, NULL) + s->pos, n);
        copy[s->corrupt_at - (gint64)s->pos] ^= 0x5a;
        chunk = g_bytes_new_take(copy, n);
    } else {
        chunk = g_bytes_new_from_bytes(s->all, s->pos, n);
    }
    soup_message_body_append_bytes(body, chunk);
    g_bytes_unref(chunk);
    s->pending = n;
    s->pos += n;
}

static void on_wrote_chunk(SoupServerMessage *msg, gpointer data)
{
    Send *s = data;
    stat_for(s->path)->bytes += s->pending;
    s->pending = 0;
    if (s->cut_at >= 0 && s->pos >= (guint64)s->cut_at && s->pos < s->end) {
        /* Drop the connection mid-body: the client sees it end early. */
        GSocket *sock = soup_server_message_get_socket(msg);
        if (sock)
            g_socket_shutdown(sock, TRUE, TRUE, NULL);
        return;
    }
    if (s->stall_at >= 0 && s->pos >= (guint64)s->stall_at && s->pos < s->end) {
        soup_server_message_pause(msg); /* and never resume: the client must time out */
        return;
    }
    if (s->rate > 0 && s->pos < s->end) {
        soup_server_message_pause(msg);
        s->timer = g_timeout_add(100, send_timer, s);
        return;
    }
    send_next(s);
}

static void on_finished(SoupServerMessage *msg, gpointer data)
{
    send_free(data);
}

static void serve_file(SoupServerMessage *msg, const char *repo, const char *rel)
{
    g_autofree char *path = g_strconcat(repo, "/", rel, NULL);
    if (strstr(rel, "..") || rel[0] == '/') {
        set_text(msg, 400, "bad path");
        return;
    }
    Stat *fst = stat_for(path);
    fst->requests++;
    Fault *f = fault_take(path, "status");
    if (f) {
        if (f->retry_after) {
            g_autofree char *value = NULL;
            if (g_str_has_prefix(f->retry_after, "date:")) {
                g_autoptr(GDateTime) now = g_date_time_new_now_utc();
                g_autoptr(GDateTime) when = g_date_time_add_seconds(now, atof(f->retry_after + 5));
                value = soup_date_time_to_string(when, SOUP_DATE_HTTP);
            } else {
                value = g_strdup(f->retry_after);
            }
            soup_message_headers_replace(soup_server_message_get_response_headers(msg),
                                         "Retry-After", value);
        }
        set_text(msg, (guint)f->code, "injected fault");
        return;
    }
    g_autofree char *abs = g_build_filename(hub.root, repo, rel, NULL);
    GError *error = NULL;
    GMappedFile *map = g_file_test(abs, G_FILE_TEST_IS_REGULAR) ? g_mapped_file_new(abs, FALSE, &error) : NULL;
    if (!map) {
        g_clear_error(&error);
        set_text(msg, 404, "Entry not found");
        return;
    }
    guint64 size = g_mapped_file_get_length(map);
    GStatBuf st;
    g_autofree char *etag = NULL;
    if (g_stat(abs, &st) == 0) {
        g_autofree char *h = file_sha256(abs, size, (gint64)st.st_mtime);
        etag = g_strdup_printf("\"%s\"", h);
    }
    SoupMessageHeaders *req = soup_server_message_get_request_headers(msg);
    SoupMessageHeaders *rh = soup_server_message_get_response_headers(msg);
    guint64 start = 0, end = size;
    guint status = 200;
    const char *if_range = soup_message_headers_get_one(req, "If-Range");
    gboolean use_range = soup_message_headers_get_one(req, "Range") && !fault_take(path, "norange") &&
                         (!if_range || g_strcmp0(if_range, etag) == 0);
    if (use_range) {
        SoupRange *ranges = NULL;
        int n = 0;
        if (!soup_message_headers_get_ranges(req, (goffset)size, &ranges, &n) || n < 1) {
            g_mapped_file_unref(map);
            g_autofree char *cr = g_strdup_printf("bytes */%" G_GUINT64_FORMAT, size);
            soup_message_headers_replace(rh, "Content-Range", cr);
            set_text(msg, 416, "range not satisfiable");
            return;
        }
        start = (guint64)ranges[0].start;
        end = (guint64)ranges[0].end + 1;
        soup_message_headers_free_ranges(req, ranges);
        soup_message_headers_set_content_range(rh, (goffset)start, (goffset)end - 1, (goffset)size);
        status = 206;
        gint64 s64 = (gint64)start;
        g_array_append_val(fst->range_starts, s64);
    }
    if (etag)
        soup_message_headers_replace(rh, "ETag", etag);
    soup_message_headers_replace(rh, "Accept-Ranges", "bytes");
    soup_message_headers_set_content_type(rh, "application/octet-stream", NULL);
    soup_message_headers_set_encoding(rh, SOUP_ENCODING_CONTENT_LENGTH);
    soup_message_headers_set_content_length(rh, (goffset)(end - start));
    soup_server_message_set_status(msg, status, NULL);

    Send *s = g_new0(Send, 1);
    hub.sends = g_list_prepend(hub.sends, s);
    s->map = map;
    s->all = g_mapped_file_get_bytes(map);
    s->path = g_strdup(path);
    s->pos = start;
    s->end = end;
    s->msg = msg;
    Fault *cut = fault_take(path, "cut");
    s->cut_at = cut ? cut->at : -1;
    Fault *stall = fault_take(path, "stall");
    s->stall_at = stall ? stall->at : -1;
    Fault *corrupt = fault_take(path, "corrupt");
    s->corrupt_at = corrupt ? corrupt->at : -1;
    Fault *slow = fault_take(path, "slow");
    s->rate = slow ? slow->rate : 0;
    soup_message_body_set_accumulate(soup_server_message_get_response_body(msg), FALSE);
    g_signal_connect(msg, "wrote-chunk", G_CALLBACK(on_wrote_chunk), s);
    g_signal_connect(msg, "finished", G_CALLBACK(on_finished), s);
    if (start == end)
        soup_message_body_complete(soup_server_message_get_response_body(msg));
    else
        send_next(s);
}

/* ---- routing ---- */

/* Splits "/ORG/REPO/rest" style paths; returns the repo or NULL if absent. */
static char *take_repo(const char *p, const char **rest)
{
    const char *a = strchr(p, '/');
    const char *b = a ? strchr(a + 1, '/') : NULL;
    if (!a || a == p)
        return NULL;
    *rest = b ? b + 1 : "";
    g_autofree char *repo = b ? g_strndup(p, (gsize)(b - p)) : g_strdup(p);
    g_autofree char *abs = g_build_filename(hub.root, repo, NULL);
    return g_file_test(abs, G_FILE_TEST_IS_DIR) && !strstr(repo, "..") ? g_steal_pointer(&repo) : NULL;
}

static void log_request(SoupServerMessage *msg, const char *path)
{
    GUri *uri = soup_server_message_get_uri(msg);
    const char *auth = soup_message_headers_get_one(soup_server_message_get_request_headers(msg),
                                                    "Authorization");
    JsonObject *o = json_object_new();
    json_object_set_int_member(o, "port", g_uri_get_port(uri));
    json_object_set_string_member(o, "path", path);
    if (auth)
        json_object_set_string_member(o, "auth", auth);
    JsonNode *n = json_node_new(JSON_NODE_OBJECT);
    json_node_take_object(n, o);
    g_ptr_array_add(hub.requests, n);
}

static void serve_stats(SoupServerMessage *msg)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "files");
    json_builder_begin_object(b);
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, hub.stats);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        Stat *s = v;
        json_builder_set_member_name(b, k);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "bytes");
        json_builder_add_int_value(b, (gint64)s->bytes);
        json_builder_set_member_name(b, "requests");
        json_builder_add_int_value(b, (gint64)s->requests);
        json_builder_set_member_name(b, "range_starts");
        json_builder_begin_array(b);
        for (guint i = 0; i < s->range_starts->len; i++)
            json_builder_add_int_value(b, g_array_index(s->range_starts, gint64, i));
        json_builder_end_array(b);
        json_builder_end_object(b);
    }
    json_builder_end_object(b);
    json_builder_set_member_name(b, "requests");
    json_builder_begin_array(b);
    for (guint i = 0; i < hub.requests->len; i++)
        json_builder_add_value(b, json_node_copy(g_ptr_array_index(hub.requests, i)));
    json_builder_end_array(b);
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    set_json(msg, 200, root);
}

static void serve_control(SoupServerMessage *msg, const char *what, GHashTable *query)
{
    if (strcmp(what, "stats") == 0) {
        serve_stats(msg);
    } else if (strcmp(what, "reset") == 0) {
        g_ptr_array_set_size(hub.faults, 0);
        g_hash_table_remove_all(hub.stats);
        g_ptr_array_set_size(hub.requests, 0);
        set_text(msg, 200, "ok");
    } else if (strcmp(what, "fault") == 0 && query && g_hash_table_lookup(query, "path") &&
               g_hash_table_lookup(query, "kind")) {
        Fault *f = g_new0(Fault, 1);
        const char *v;
        f->path = g_strdup(g_hash_table_lookup(query, "path"));
        f->kind = g_strdup(g_hash_table_lookup(query, "kind"));
        f->at = (v = g_hash_table_lookup(query, "at")) ? g_ascii_strtoll(v, NULL, 10) : 0;
        f->code = (v = g_hash_table_lookup(query, "code")) ? g_ascii_strtoll(v, NULL, 10) : 500;
        f->rate = (v = g_hash_table_lookup(query, "rate")) ? g_ascii_strtoll(v, NULL, 10) : 0;
        f->count = (v = g_hash_table_lookup(query, "count")) ? g_ascii_strtoll(v, NULL, 10) : 1;
        f->retry_after = g_strdup(g_hash_table_lookup(query, "retry_after"));
        g_ptr_array_add(hub.faults, f);
        set_text(msg, 200, "ok");
    } else {
        set_text(msg, 400, "bad control request");
    }
}

static void handle(SoupServer *server, SoupServerMessage *msg, const char *path,
                   GHashTable *query, gpointer data)
{
    log_request(msg, path);
    const char *rest = NULL;
    g_autofree char *repo = NULL;
    if (g_str_has_prefix(path, "/_control/")) {
        serve_control(msg, path + 10, query);
    } else if (g_str_has_prefix(path, "/cdn/") && (repo = take_repo(path + 5, &rest))) {
        serve_file(msg, repo, rest);
    } else if (g_str_has_prefix(path, "/api/v1/models/") && (repo = take_repo(path + 15, &rest))) {
        const char *file = query ? g_hash_table_lookup(query, "FilePath") : NULL;
        if (strcmp(rest, "repo/files") == 0)
            serve_tree(msg, repo, query, TRUE);
        else if (strcmp(rest, "repo") == 0 && file)
            serve_file(msg, repo, file);
        else
            set_text(msg, 404, "not found");
    } else if (g_str_has_prefix(path, "/api/models/") && (repo = take_repo(path + 12, &rest))) {
        g_autofree char *sha = repo_sha(repo);
        if (g_str_has_prefix(rest, "revision/")) {
            const char *rev = rest + 9;
            if (strcmp(rev, "main") != 0 && strcmp(rev, sha) != 0) {
                set_text(msg, 404, "Revision not found");
                return;
            }
            g_autoptr(JsonBuilder) b = json_builder_new();
            json_builder_begin_object(b);
            json_builder_set_member_name(b, "id");
            json_builder_add_string_value(b, repo);
            json_builder_set_member_name(b, "sha");
            json_builder_add_string_value(b, sha);
            json_builder_end_object(b);
            g_autoptr(JsonNode) root = json_builder_get_root(b);
            set_json(msg, 200, root);
        } else if (g_str_has_prefix(rest, "tree/")) {
            serve_tree(msg, repo, query, FALSE);
        } else {
            set_text(msg, 404, "not found");
        }
    } else if ((repo = take_repo(path + 1, &rest)) && g_str_has_prefix(rest, "resolve/")) {
        const char *rev_end = strchr(rest + 8, '/');
        const char *file = rev_end ? rev_end + 1 : "";
        g_autofree char *fpath = g_strconcat(repo, "/", file, NULL);
        if (fault_take(fpath, "redirect")) {
            g_autofree char *to = g_strdup_printf("http://127.0.0.1:%u/cdn/%s/%s", hub.cdn_port,
                                                  repo, file);
            soup_server_message_set_redirect(msg, 302, to);
            return;
        }
        serve_file(msg, repo, file);
    } else {
        set_text(msg, 404, "Repository not found");
    }
}

static gboolean on_stdin(gint fd, GIOCondition cond, gpointer data)
{
    char buf[256];
    if (read(fd, buf, sizeof buf) <= 0) {
        g_main_loop_quit(data);
        return G_SOURCE_REMOVE;
    }
    return G_SOURCE_CONTINUE;
}

static guint listen_port(SoupServer *server)
{
    GError *error = NULL;
    if (!soup_server_listen_local(server, 0, SOUP_SERVER_LISTEN_IPV4_ONLY, &error)) {
        fprintf(stderr, "fixture-hub: %s\n", error->message);
        return 0;
    }
    GSList *uris = soup_server_get_uris(server);
    guint port = uris ? (guint)g_uri_get_port(uris->data) : 0;
    g_slist_free_full(uris, (GDestroyNotify)g_uri_unref);
    return port;
}

int main(int argc, char **argv)
{
    int page_size = 0;
    char *root = NULL;
    GOptionEntry entries[] = {
        { "root", 0, 0, G_OPTION_ARG_FILENAME, &root, "folder holding ORG/REPO/...", "DIR" },
        { "page-size", 0, 0, G_OPTION_ARG_INT, &page_size, "tree entries per page", "N" },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- fixture model hub");
    g_option_context_add_main_entries(ctx, entries, NULL);
    GError *error = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &error) || !root) {
        fprintf(stderr, "fixture-hub: %s\n", error ? error->message : "--root is required");
        return 2;
    }
    hub.root = root;
    hub.page_size = page_size;
    hub.faults = g_ptr_array_new_with_free_func((GDestroyNotify)fault_free);
    hub.stats = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)stat_free);
    hub.requests = g_ptr_array_new_with_free_func((GDestroyNotify)json_node_unref);
    hub.hashes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    SoupServer *server = soup_server_new("server-header", "fixture-hub", NULL);
    SoupServer *cdn = soup_server_new("server-header", "fixture-cdn", NULL);
    soup_server_add_handler(server, NULL, handle, NULL, NULL);
    soup_server_add_handler(cdn, NULL, handle, NULL, NULL);
    hub.port = listen_port(server);
    hub.cdn_port = listen_port(cdn);
    if (!hub.port || !hub.cdn_port)
        return 1;
    printf("%u %u\n", hub.port, hub.cdn_port);
    fflush(stdout);
    GMainLoop *loop = g_main_loop_new(NULL, FALSE);
    g_unix_fd_add(0, G_IO_IN | G_IO_HUP, on_stdin, loop);
    g_main_loop_run(loop);
    g_main_loop_unref(loop);
    g_object_unref(server);
    g_object_unref(cdn);
    while (hub.sends) /* a cut or abandoned connection may never report "finished" */
        send_free(hub.sends->data);
    g_ptr_array_unref(hub.faults);
    g_hash_table_unref(hub.stats);
    g_ptr_array_unref(hub.requests);
    g_hash_table_unref(hub.hashes);
    g_free(root);
    return 0;
}

/*
 * hub.c — the hub client of hub.h: source parsing, URLs, and the file
 * listing as a small asynchronous state machine on the main loop:
 *   HF:         revision -> tree page -> tree page ... -> done
 *   ModelScope: files -> done
 * Each step is one JSON GET with the shared retry policy (http.h). Listings
 * come from the network, so every entry is checked (types, sizes, hash
 * syntax, and paths with moe_library_check_rel_path) before use.
 */
#include "hub.h"
#include "http.h"
#include "library.h"

#include <json-glib/json-glib.h>
#include <string.h>

#define LISTING_MAX_BYTES (64u << 20) /* a 100k-file listing is ~20 MB */
#define LISTING_MAX_PAGES 1000

struct MoeHub {
    MoeHubKind   kind;
    SoupSession *session;
    char        *endpoint;
    char        *token;
};

/* ---- sources ---- */

static const struct { const char *prefix; MoeHubKind kind; } hub_prefixes[] = {
    { "hf://", MOE_HUB_HF },          { "hf:", MOE_HUB_HF },
    { "huggingface:", MOE_HUB_HF },   { "ms://", MOE_HUB_MODELSCOPE },
    { "ms:", MOE_HUB_MODELSCOPE },    { "modelscope:", MOE_HUB_MODELSCOPE },
};

gboolean moe_hub_ref_looks_like(const char *text)
{
    if (!text)
        return FALSE;
    for (size_t i = 0; i < G_N_ELEMENTS(hub_prefixes); i++)
        if (g_str_has_prefix(text, hub_prefixes[i].prefix))
            return TRUE;
    return strchr(text, '/') != NULL;
}

void moe_hub_ref_clear(MoeHubRef *ref)
{
    g_clear_pointer(&ref->repo, g_free);
    g_clear_pointer(&ref->revision, g_free);
    g_clear_pointer(&ref->selector, g_free);
}

gboolean moe_hub_ref_parse(const char *text, MoeHubRef *out, GError **error)
{
    memset(out, 0, sizeof *out);
    const char *p = text ? text : "";
    for (size_t i = 0; i < G_N_ELEMENTS(hub_prefixes); i++) {
        if (g_str_has_prefix(p, hub_prefixes[i].prefix)) {
            out->kind = hub_prefixes[i].kind;
            p += strlen(hub_prefixes[i].prefix);
            break;
        }
    }
    /* ORG/REPO ends at '@' or ':'; the revision at ':'. */
    size_t repo_len = strcspn(p, "@:");
    out->repo = g_strndup(p, repo_len);
    p += repo_len;
    if (*p == '@') {
        size_t rev_len = strcspn(p + 1, ":");
        out->revision = g_strndup(p + 1, rev_len);
        p += 1 + rev_len;
    }
    if (*p == ':')
        out->selector = g_strdup(p + 1);
    const char *why = NULL;
    if (!strchr(out->repo, '/') || !moe_library_check_name(out->repo, NULL))
        why = "expected ORG/REPO with letters, digits, '.', '_' and '-'";
    else if (out->revision && (!*out->revision || strlen(out->revision) > 200 ||
                               strstr(out->revision, "..") || !g_utf8_validate(out->revision, -1, NULL)))
        why = "bad revision after '@'";
    else if (out->selector && !*out->selector)
        why = "nothing after ':'";
    else if (out->selector && strchr(out->selector, '.') &&
             !moe_library_check_rel_path(out->selector, NULL))
        why = "the file after ':' is not a safe relative path";
    if (why) {
        g_set_error(error, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_INVALID_NAME,
                    "invalid source '%s': %s", text ? text : "", why);
        moe_hub_ref_clear(out);
        return FALSE;
    }
    return TRUE;
}

const char *moe_hub_kind_name(MoeHubKind kind)
{
    return kind == MOE_HUB_MODELSCOPE ? "modelscope" : "hf";
}

gboolean moe_hub_kind_from_name(const char *name, MoeHubKind *out)
{
    if (g_strcmp0(name, "hf") == 0)
        *out = MOE_HUB_HF;
    else if (g_strcmp0(name, "modelscope") == 0)
        *out = MOE_HUB_MODELSCOPE;
    else
        return FALSE;
    return TRUE;
}

/* ---- client ---- */

MoeHub *moe_hub_new(MoeHubKind kind, SoupSession *session)
{
    MoeHub *hub = g_new0(MoeHub, 1);
    hub->kind = kind;
    hub->session = g_object_ref(session);
    const char *ep = g_getenv(kind == MOE_HUB_HF ? "HF_ENDPOINT" : "MODELSCOPE_ENDPOINT");
    if (!ep || !*ep)
        ep = kind == MOE_HUB_HF ? "https://huggingface.co" : "https://www.modelscope.cn";
    hub->endpoint = g_strdup(ep);
    size_t n = strlen(hub->endpoint);
    while (n > 0 && hub->endpoint[n - 1] == '/')
        hub->endpoint[--n] = '\0';
    if (kind == MOE_HUB_HF) {
        const char *tok = g_getenv("HF_TOKEN");
        if (!tok || !*tok)
            tok = g_getenv("HUGGING_FACE_HUB_TOKEN");
        hub->token = tok && *tok ? g_strstrip(g_strdup(tok)) : NULL;
    }
    return hub;
}

void moe_hub_free(MoeHub *hub)
{
    if (!hub)
        return;
    g_clear_object(&hub->session);
    g_free(hub->endpoint);
    if (hub->token) /* do not leave the token in freed memory */
        memset(hub->token, 0, strlen(hub->token));
    g_free(hub->token);
    g_free(hub);
}

MoeHubKind moe_hub_kind(const MoeHub *hub) { return hub->kind; }
const char *moe_hub_endpoint(const MoeHub *hub) { return hub->endpoint; }
const char *moe_hub_token(const MoeHub *hub) { return hub->token; }

static char *default_revision(const MoeHub *hub, const char *revision)
{
    return g_strdup(revision ? revision : hub->kind == MOE_HUB_HF ? "main" : "master");
}

char *moe_hub_file_url(const MoeHub *hub, const char *repo, const char *revision,
                       const char *path)
{
    g_autofree char *rev = default_revision(hub, revision);
    g_autofree char *erev = g_uri_escape_string(rev, NULL, FALSE);
    if (hub->kind == MOE_HUB_HF) {
        g_autofree char *epath = g_uri_escape_string(path, "/", FALSE);
        return g_strdup_printf("%s/%s/resolve/%s/%s", hub->endpoint, repo, erev, epath);
    }
    g_autofree char *epath = g_uri_escape_string(path, NULL, FALSE);
    return g_strdup_printf("%s/api/v1/models/%s/repo?Revision=%s&FilePath=%s", hub->endpoint,
                           repo, erev, epath);
}

void moe_hub_listing_free(MoeHubListing *listing)
{
    if (!listing)
        return;
    g_free(listing->revision);
    g_clear_pointer(&listing->files, g_ptr_array_unref);
    g_free(listing);
}

/* ---- listing: state ---- */

typedef struct {
    MoeHub        *hub;     /* borrowed: the caller keeps it alive         */
    char          *repo;
    char          *revision;
    char          *url;     /* of the request in flight                    */
    guint          attempt;
    int            pages;
    int            step;    /* 0: HF revision, 1: HF tree, 2: ModelScope   */
    SoupMessage   *msg;
    GByteArray    *body;
    MoeHubListing *listing;
} ListState;

static void list_state_free(ListState *s)
{
    g_free(s->repo);
    g_free(s->revision);
    g_free(s->url);
    g_clear_object(&s->msg);
    if (s->body)
        g_byte_array_unref(s->body);
    moe_hub_listing_free(s->listing);
    g_free(s);
}

static void list_fetch(GTask *task);

static void list_fail_status(GTask *task, guint status)
{
    ListState *s = g_task_get_task_data(task);
    const char *ep = s->hub->endpoint;
    if (status == 404)
        g_task_return_new_error(task, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND,
                                "repository %s (revision %s) not found at %s (HTTP 404)",
                                s->repo, s->revision, ep);
    else if (status == 401 || status == 403)
        g_task_return_new_error(task, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_HTTP,
                                "access to repository %s at %s denied (HTTP %u): it may be"
                                " private or gated; %s", s->repo, ep, status,
                                s->hub->kind == MOE_HUB_HF && !s->hub->token
                                    ? "set HF_TOKEN to a token that has access"
                                    : "check that the token has access");
    else
        g_task_return_new_error(task, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_HTTP,
                                "listing repository %s at %s failed: HTTP %u %s", s->repo, ep,
                                status, soup_status_get_phrase(status));
    g_object_unref(task);
}

static gboolean list_retry_cb(gpointer data)
{
    list_fetch(data);
    return G_SOURCE_REMOVE;
}

/* Schedules another attempt if the policy allows; FALSE if it does not. */
static gboolean list_maybe_retry(GTask *task, SoupMessageHeaders *headers)
{
    ListState *s = g_task_get_task_data(task);
    if (++s->attempt >= moe_http_max_attempts())
        return FALSE;
    gint64 delay = moe_http_retry_delay_ms(s->attempt, headers);
    if (delay < 0)
        return FALSE;
    g_timeout_add((guint)delay, list_retry_cb, task);
    return TRUE;
}

/* ---- listing: parsing ---- */

static gboolean is_hex_len(const char *s, size_t len)
{
    if (!s || strlen(s) != len)
        return FALSE;
    for (size_t i = 0; i < len; i++)
        if (!g_ascii_isxdigit(s[i]))
            return FALSE;
    return TRUE;
}

static const char *obj_str(JsonObject *o, const char *key)
{
    JsonNode *n = o ? json_object_get_member(o, key) : NULL;
    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
               ? json_node_get_string(n) : NULL;
}

static gboolean obj_size(JsonObject *o, const char *key, guint64 *out)
{
    JsonNode *n = o ? json_object_get_member(o, key) : NULL;
    if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64 ||
        json_node_get_int(n) < 0)
        return FALSE;
    *out = (guint64)json_node_get_int(n);
    return TRUE;
}

static JsonObject *obj_obj(JsonObject *o, const char *key)
{
    JsonNode *n = o ? json_object_get_member(o, key) : NULL;
    return n && JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
}

/* Adds one file entry; FALSE with `why` set if it is malformed. */
static gboolean add_entry(ListState *s, const char *path, guint64 size, const char *sha256,
                          const char *sha1, const char **why)
{
    g_autoptr(GError) error = NULL;
    if (!moe_library_check_rel_path(path, &error)) {
        *why = "an unsafe file path";
        return FALSE;
    }
    if (sha256 && *sha256 && !is_hex_len(sha256, 64)) {
        *why = "a sha256 that is not 64 hex digits";
        return FALSE;
    }
    if (sha1 && !is_hex_len(sha1, 40))
        sha1 = NULL; /* not a git blob id; the file is then checked by size only */
    if (sha256 && !*sha256)
        sha256 = NULL;
    g_ptr_array_add(s->listing->files, moe_manifest_file_new(path, size, sha256,
                                                             sha256 ? NULL : sha1));
    return TRUE;
}

static gboolean parse_hf_tree(ListState *s, JsonNode *root, const char **why)
{
    if (!JSON_NODE_HOLDS_ARRAY(root)) {
        *why = "the tree is not a JSON array";
        return FALSE;
    }
    JsonArray *arr = json_node_get_array(root);
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        JsonNode *n = json_array_get_element(arr, i);
        JsonObject *o = JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
        const char *type = obj_str(o, "type"), *path = obj_str(o, "path");
        guint64 size = 0;
        if (g_strcmp0(type, "directory") == 0)
            continue;
        if (g_strcmp0(type, "file") != 0 || !path || !obj_size(o, "size", &size)) {
            *why = "an entry without type, path or size";
            return FALSE;
        }
        JsonObject *lfs = obj_obj(o, "lfs");
        if (lfs && !obj_size(lfs, "size", &size)) {
            *why = "an lfs entry without size";
            return FALSE;
        }
        if (!add_entry(s, path, size, lfs ? obj_str(lfs, "oid") : NULL, obj_str(o, "oid"), why))
            return FALSE;
    }
    return TRUE;
}

static gboolean parse_modelscope(ListState *s, JsonNode *root, const char **why)
{
    JsonObject *o = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    JsonNode *files = obj_obj(o, "Data") ? json_object_get_member(obj_obj(o, "Data"), "Files") : NULL;
    if (!files || !JSON_NODE_HOLDS_ARRAY(files)) {
        *why = "no Data.Files array";
        return FALSE;
    }
    JsonArray *arr = json_node_get_array(files);
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        JsonNode *n = json_array_get_element(arr, i);
        JsonObject *f = JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
        const char *type = obj_str(f, "Type"), *path = obj_str(f, "Path");
        guint64 size = 0;
        if (g_strcmp0(type, "tree") == 0)
            continue;
        if (!path || !obj_size(f, "Size", &size)) {
            *why = "an entry without Path or Size";
            return FALSE;
        }
        const char *rev = obj_str(f, "Revision");
        if (!s->listing->revision && rev && is_hex_len(rev, 40))
            s->listing->revision = g_strdup(rev);
        if (!add_entry(s, path, size, obj_str(f, "Sha256"), NULL, why))
            return FALSE;
    }
    return TRUE;
}

/* The target of a `Link: <url>; rel="next"` header, or NULL. */
static char *link_next(SoupMessage *msg)
{
    const char *link = soup_message_headers_get_one(soup_message_get_response_headers(msg), "Link");
    const char *rel = link ? strstr(link, "rel=\"next\"") : NULL;
    if (!rel)
        return NULL;
    const char *close = NULL, *open = NULL;
    for (const char *p = rel; p > link; p--) {
        if (!close && p[-1] == '>')
            close = p - 1;
        else if (close && p[-1] == '<') {
            open = p;
            break;
        }
    }
    return open && close > open ? g_strndup(open, (gsize)(close - open)) : NULL;
}

/* ---- listing: requests ---- */

static void list_body_read(GObject *source, GAsyncResult *res, gpointer data);

static void list_handle_json(GTask *task, JsonNode *root)
{
    ListState *s = g_task_get_task_data(task);
    const char *why = NULL;
    if (s->step == 0) {
        JsonObject *o = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
        const char *sha = obj_str(o, "sha");
        if (!sha || !is_hex_len(sha, 40)) {
            why = "the revision has no 40-digit commit sha";
        } else {
            s->listing->revision = g_ascii_strdown(sha, -1);
            s->step = 1;
            g_free(s->url);
            s->url = g_strdup_printf("%s/api/models/%s/tree/%s?recursive=true",
                                     s->hub->endpoint, s->repo, s->listing->revision);
        }
    } else if (s->step == 1) {
        if (parse_hf_tree(s, root, &why)) {
            g_autofree char *next = link_next(s->msg);
            if (!next) {
                g_task_return_pointer(task, g_steal_pointer(&s->listing),
                                      (GDestroyNotify)moe_hub_listing_free);
                g_object_unref(task);
                return;
            }
            if (++s->pages >= LISTING_MAX_PAGES)
                why = "more than 1000 pages";
            g_free(s->url);
            s->url = g_steal_pointer(&next);
        }
    } else if (parse_modelscope(s, root, &why)) {
        if (!s->listing->revision)
            s->listing->revision = g_strdup(s->revision);
        g_task_return_pointer(task, g_steal_pointer(&s->listing),
                              (GDestroyNotify)moe_hub_listing_free);
        g_object_unref(task);
        return;
    }
    if (why) {
        g_task_return_new_error(task, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_CORRUPT,
                                "listing of repository %s from %s: %s", s->repo,
                                s->hub->endpoint, why);
        g_object_unref(task);
        return;
    }
    s->attempt = 0;
    list_fetch(task);
}

static void list_body_done(GTask *task)
{
    ListState *s = g_task_get_task_data(task);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    if (!json_parser_load_from_data(parser, (const char *)s->body->data, (gssize)s->body->len,
                                    &error)) {
        g_task_return_new_error(task, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_CORRUPT,
                                "listing of repository %s from %s is not JSON: %s", s->repo,
                                s->hub->endpoint, error->message);
        g_object_unref(task);
        return;
    }
    list_handle_json(task, json_parser_get_root(parser));
}

static void list_read_more(GTask *task, GInputStream *body)
{
    g_input_stream_read_bytes_async(body, 256 * 1024, G_PRIORITY_DEFAULT,
                                    g_task_get_cancellable(task), list_body_read, task);
}

static void list_body_read(GObject *source, GAsyncResult *res, gpointer data)
{
    GTask *task = data;
    ListState *s = g_task_get_task_data(task);
    GError *error = NULL;
    g_autoptr(GBytes) bytes = g_input_stream_read_bytes_finish(G_INPUT_STREAM(source), res, &error);
    if (!bytes) {
        if (moe_http_error_is_transient(error) && list_maybe_retry(task, NULL)) {
            g_error_free(error);
        } else {
            g_task_return_error(task, error);
            g_object_unref(task);
        }
        g_object_unref(source);
        return;
    }
    if (g_bytes_get_size(bytes) == 0) {
        g_object_unref(source);
        list_body_done(task);
        return;
    }
    if (s->body->len + g_bytes_get_size(bytes) > LISTING_MAX_BYTES) {
        g_object_unref(source);
        g_task_return_new_error(task, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_CORRUPT,
                                "listing of repository %s from %s is larger than 64 MiB",
                                s->repo, s->hub->endpoint);
        g_object_unref(task);
        return;
    }
    g_byte_array_append(s->body, g_bytes_get_data(bytes, NULL), (guint)g_bytes_get_size(bytes));
    list_read_more(task, G_INPUT_STREAM(source));
}

static void list_got(GObject *source, GAsyncResult *res, gpointer data)
{
    GTask *task = data;
    ListState *s = g_task_get_task_data(task);
    GError *error = NULL;
    g_clear_object(&s->msg);
    GInputStream *body = moe_http_get_finish(res, &s->msg, &error);
    if (!body) {
        if (moe_http_error_is_transient(error) && list_maybe_retry(task, NULL)) {
            g_error_free(error);
            return;
        }
        if (!g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
            g_prefix_error(&error, "listing repository %s at %s: ", s->repo, s->hub->endpoint);
            error->domain = MOE_LIBRARY_ERROR;
            error->code = MOE_LIBRARY_ERROR_NETWORK;
        }
        g_task_return_error(task, error);
        g_object_unref(task);
        return;
    }
    guint status = soup_message_get_status(s->msg);
    if (status != 200) {
        g_object_unref(body);
        if (!(moe_http_status_is_transient(status) &&
              list_maybe_retry(task, soup_message_get_response_headers(s->msg))))
            list_fail_status(task, status);
        return;
    }
    g_byte_array_set_size(s->body, 0);
    list_read_more(task, body);
}

static void list_fetch(GTask *task)
{
    ListState *s = g_task_get_task_data(task);
    if (g_task_return_error_if_cancelled(task)) {
        g_object_unref(task);
        return;
    }
    moe_http_get_async(s->hub->session, s->url, s->hub->token, s->hub->endpoint, NULL, NULL,
                       g_task_get_cancellable(task), list_got, task);
}

void moe_hub_list_async(MoeHub *hub, const char *repo, const char *revision,
                        GCancellable *cancellable, GAsyncReadyCallback callback,
                        gpointer user_data)
{
    GTask *task = g_task_new(NULL, cancellable, callback, user_data);
    g_task_set_source_tag(task, moe_hub_list_async);
    ListState *s = g_new0(ListState, 1);
    s->hub = hub;
    s->repo = g_strdup(repo);
    s->revision = default_revision(hub, revision);
    s->body = g_byte_array_new();
    s->listing = g_new0(MoeHubListing, 1);
    s->listing->files = g_ptr_array_new_with_free_func((GDestroyNotify)moe_manifest_file_free);
    g_autofree char *erev = g_uri_escape_string(s->revision, NULL, FALSE);
    if (hub->kind == MOE_HUB_HF) {
        s->step = 0;
        s->url = g_strdup_printf("%s/api/models/%s/revision/%s", hub->endpoint, repo, erev);
    } else {
        s->step = 2;
        s->url = g_strdup_printf("%s/api/v1/models/%s/repo/files?Revision=%s&Recursive=true",
                                 hub->endpoint, repo, erev);
    }
    g_task_set_task_data(task, s, (GDestroyNotify)list_state_free);
    list_fetch(task);
}

MoeHubListing *moe_hub_list_finish(MoeHub *hub, GAsyncResult *result, GError **error)
{
    return g_task_propagate_pointer(G_TASK(result), error);
}

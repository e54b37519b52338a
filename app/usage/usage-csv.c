/*
 * usage-csv.c — importing request logs from CSV into the usage store
 * (`moedesk-cli usage import-csv`): a header row naming columns of the
 * `requests` table (any order, unknown names refused), then one request per
 * row. RFC 4180 quoting; an empty field means "none" (NULL). The file is
 * read twice: first every row is checked, so bad input writes nothing; then
 * rows go in through usage_store_insert_bulk() in chunks, roll-ups included.
 */
#include "usage-csv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CSV_CHUNK_ROWS 20000

enum {
    C_START_MS, C_CALLER, C_CLIENT, C_ENDPOINT, C_MODEL, C_ROUTE, C_BACKEND, C_QUANT,
    C_PROMPT, C_CACHED, C_COMPLETION, C_TTFT, C_TOTAL, C_DECODE, C_STATUS, C_ERROR,
    C_FINISH, C_POWER, C_BUSY, C_N
};

static const char *const col_names[C_N] = {
    "start_ms", "caller", "client", "endpoint", "model", "route", "backend", "quant",
    "prompt_tokens", "cached_tokens", "completion_tokens", "ttft_ms", "total_ms",
    "decode_tps", "http_status", "error_kind", "finish_reason", "gpu_power_w", "busy_ms",
};

static const int required[] = {C_START_MS, C_CALLER, C_MODEL, C_ROUTE, C_TOTAL, C_STATUS};

typedef struct csv_reader {
    const char *p, *end;
    const char *path;
    guint line;            /* line the current record starts on */
    guint next_line;
} csv_reader;

/* Next record into `fields` (cleared first). FALSE at end of input or on a
 * quoting error (then *bad is set). */
static gboolean csv_next(csv_reader *r, GPtrArray *fields, gboolean *bad)
{
    g_ptr_array_set_size(fields, 0);
    *bad = FALSE;
    if (r->p >= r->end)
        return FALSE;
    r->line = r->next_line;
    GString *f = g_string_new(NULL);
    gboolean quoted = FALSE, was_quoted = FALSE;
    while (r->p < r->end) {
        char c = *r->p++;
        if (quoted) {
            if (c == '"' && r->p < r->end && *r->p == '"') {
                g_string_append_c(f, '"');
                r->p++;
            } else if (c == '"') {
                quoted = FALSE;
            } else {
                if (c == '\n')
                    r->next_line++;
                g_string_append_c(f, c);
            }
        } else if (c == '"' && f->len == 0 && !was_quoted) {
            quoted = was_quoted = TRUE;
        } else if (c == ',') {
            g_ptr_array_add(fields, g_string_free(f, FALSE));
            f = g_string_new(NULL);
            was_quoted = FALSE;
        } else if (c == '\n' || c == '\r') {
            if (c == '\r' && r->p < r->end && *r->p == '\n')
                r->p++;
            r->next_line++;
            break;
        } else {
            g_string_append_c(f, c);
        }
    }
    g_ptr_array_add(fields, g_string_free(f, FALSE));
    if (quoted)
        *bad = TRUE;
    return !*bad;
}

static gboolean parse_i64(const char *s, gint64 *out)
{
    if (!s[0])
        return FALSE;
    char *end = NULL;
    errno = 0;
    gint64 v = g_ascii_strtoll(s, &end, 10);
    if (errno || *end)
        return FALSE;
    *out = v;
    return TRUE;
}

static gboolean parse_dbl(const char *s, double *out)
{
    char *end = NULL;
    double v = g_ascii_strtod(s, &end);
    if (!s[0] || *end)
        return FALSE;
    *out = v;
    return TRUE;
}

static gboolean csv_fail(GError **error, const csv_reader *r, const char *col, const char *why)
{
    g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_INVALID, "%s:%u: %s%s%s%s", r->path,
                r->line, col ? "column '" : "", col ? col : "", col ? "': " : "", why);
    return FALSE;
}

/* Fill `row` from `fields` via the header map; strings point into fields. */
static gboolean csv_row(const csv_reader *r, GPtrArray *fields, const int *map, guint n_cols,
                        usage_row *row, GError **error)
{
    if (fields->len != n_cols) {
        g_autofree char *why = g_strdup_printf("%u fields, the header has %u", fields->len, n_cols);
        return csv_fail(error, r, NULL, why);
    }
    const char *v[C_N] = {0};
    for (guint i = 0; i < n_cols; i++)
        v[map[i]] = fields->pdata[i];
    *row = (usage_row){.ttft_ms = -1, .gpu_power_w = -1, .client = "", .endpoint = ""};
    for (int c = 0; c < C_N; c++) {
        const char *s = v[c];
        if (!s || !s[0])
            continue;
        gint64 i = 0;
        double d = 0;
        gboolean ok = TRUE;
        switch (c) {
        case C_CALLER: row->caller = s; break;
        case C_CLIENT: row->client = s; break;
        case C_ENDPOINT: row->endpoint = s; break;
        case C_MODEL: row->model = s; break;
        case C_ROUTE: row->route = s; break;
        case C_BACKEND: row->backend = s; break;
        case C_QUANT: row->quant = s; break;
        case C_ERROR: row->error_kind = s; break;
        case C_FINISH: row->finish_reason = s; break;
        case C_DECODE: ok = parse_dbl(s, &d); row->decode_tps = d; break;
        case C_POWER: ok = parse_dbl(s, &d); row->gpu_power_w = d; break;
        default:
            ok = parse_i64(s, &i);
            switch (c) {
            case C_START_MS: row->start_ms = i; break;
            case C_PROMPT: row->prompt_tokens = i; break;
            case C_CACHED: row->cached_tokens = i; break;
            case C_COMPLETION: row->completion_tokens = i; break;
            case C_TTFT: row->ttft_ms = i; break;
            case C_TOTAL: row->total_ms = i; break;
            case C_STATUS: row->http_status = (gint)CLAMP(i, -1, 100000); break;
            case C_BUSY: row->busy_ms = i; break;
            }
        }
        if (!ok)
            return csv_fail(error, r, col_names[c], c == C_DECODE || c == C_POWER
                                                        ? "not a number" : "not an integer");
    }
    for (guint k = 0; k < G_N_ELEMENTS(required); k++)
        if (!v[required[k]] || !v[required[k]][0])
            return csv_fail(error, r, col_names[required[k]], "required, but empty");
    g_autoptr(GError) bad = NULL;
    if (!usage_row_validate(row, &bad))
        return csv_fail(error, r, NULL, bad->message);
    return TRUE;
}

static gboolean csv_pass(const char *path, const char *data, gsize len, usage_store *store,
                         guint64 *n_rows, GError **error)
{
    csv_reader r = {data, data + len, path, 1, 1};
    if (len >= 3 && memcmp(data, "\xef\xbb\xbf", 3) == 0)
        r.p += 3;  /* UTF-8 byte order mark */
    g_autoptr(GPtrArray) header = g_ptr_array_new_with_free_func(g_free);
    gboolean bad;
    if (!csv_next(&r, header, &bad))
        return csv_fail(error, &r, NULL, bad ? "unterminated quote" : "empty file (no header)");
    int map[C_N];
    gboolean seen[C_N] = {0};
    if (header->len > C_N)
        return csv_fail(error, &r, NULL, "more header columns than the table has");
    for (guint i = 0; i < header->len; i++) {
        const char *name = g_strstrip((char *)header->pdata[i]);
        int c = -1;
        for (int k = 0; k < C_N; k++)
            if (g_str_equal(name, col_names[k]))
                c = k;
        if (c < 0 || seen[c])
            return csv_fail(error, &r, name, c < 0 ? "unknown column" : "appears twice");
        seen[c] = TRUE;
        map[i] = c;
    }
    for (guint k = 0; k < G_N_ELEMENTS(required); k++)
        if (!seen[required[k]])
            return csv_fail(error, &r, col_names[required[k]], "missing from the header");

    GArray *rows = g_array_new(FALSE, FALSE, sizeof(usage_row));
    GPtrArray *keep = g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
    gboolean ok = TRUE;
    *n_rows = 0;
    for (;;) {
        GPtrArray *fields = g_ptr_array_new_with_free_func(g_free);
        if (!csv_next(&r, fields, &bad)) {
            g_ptr_array_unref(fields);
            if (bad)
                ok = csv_fail(error, &r, NULL, "unterminated quote");
            break;
        }
        if (fields->len == 1 && !((char *)fields->pdata[0])[0]) {
            g_ptr_array_unref(fields);   /* blank line */
            continue;
        }
        usage_row row;
        if (!csv_row(&r, fields, map, header->len, &row, error)) {
            g_ptr_array_unref(fields);
            ok = FALSE;
            break;
        }
        (*n_rows)++;
        if (!store) {
            g_ptr_array_unref(fields);
            continue;
        }
        g_array_append_val(rows, row);
        g_ptr_array_add(keep, fields);
        if (rows->len == CSV_CHUNK_ROWS) {
            ok = usage_store_insert_bulk(store, (usage_row *)rows->data, rows->len, error);
            g_array_set_size(rows, 0);
            g_ptr_array_set_size(keep, 0);
            if (!ok)
                break;
        }
    }
    if (ok && store && rows->len)
        ok = usage_store_insert_bulk(store, (usage_row *)rows->data, rows->len, error);
    g_array_unref(rows);
    g_ptr_array_unref(keep);
    return ok;
}

gboolean usage_csv_import(usage_store *store, const char *path, guint64 *n_rows, GError **error)
{
    g_autofree char *data = NULL;
    gsize len = 0;
    g_autoptr(GError) err = NULL;
    if (!g_file_get_contents(path, &data, &len, &err)) {
        g_set_error(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_OPEN, "%s", err->message);
        return FALSE;
    }
    guint64 checked = 0;
    if (!csv_pass(path, data, len, NULL, &checked, error))
        return FALSE;
    return csv_pass(path, data, len, store, n_rows, error);
}

/*
 * usage-row.c — one request row: validation, what counts as an error, how a
 * row adds into roll-up sums, and moving rows in and out of SQLite
 * statements. usage_sums_add_row() is the single definition of every sum
 * the report uses; tests/scripts/usage_ref.py mirrors it line by line.
 */
#include "usage-store-private.h"

#include <math.h>

gboolean usage_row_is_error(const usage_row *row)
{
    return row->http_status >= 400 || (row->error_kind && row->error_kind[0]);
}

void usage_sums_add_row(usage_sums *s, const usage_row *row)
{
    s->calls++;
    gboolean error = usage_row_is_error(row);
    if (error)
        s->errors++;
    s->prompt_tokens += row->prompt_tokens;
    s->cached_tokens += row->cached_tokens;
    s->completion_tokens += row->completion_tokens;
    s->busy_ms += row->busy_ms;
    if (row->gpu_power_w >= 0)
        s->energy_wms += row->gpu_power_w * (double)row->busy_ms;
    else
        s->busy_ms_unmeasured += row->busy_ms;
    if (!error && row->decode_tps > 0 && row->completion_tokens > 0) {
        s->decode_tokens += row->completion_tokens;
        s->decode_s += (double)row->completion_tokens / row->decode_tps;
    }
}

void usage_sums_add(usage_sums *into, const usage_sums *from)
{
    into->calls += from->calls;
    into->errors += from->errors;
    into->prompt_tokens += from->prompt_tokens;
    into->cached_tokens += from->cached_tokens;
    into->completion_tokens += from->completion_tokens;
    into->busy_ms += from->busy_ms;
    into->busy_ms_unmeasured += from->busy_ms_unmeasured;
    into->energy_wms += from->energy_wms;
    into->decode_tokens += from->decode_tokens;
    into->decode_s += from->decode_s;
}

gboolean usage_row_validate(const usage_row *row, GError **error)
{
    const char *bad = NULL;
    if (row->start_ms < 0)
        bad = "start_ms is negative";
    else if (row->prompt_tokens < 0 || row->cached_tokens < 0 || row->completion_tokens < 0)
        bad = "a token count is negative";
    else if (row->cached_tokens > row->prompt_tokens)
        bad = "cached_tokens exceeds prompt_tokens";
    else if (row->total_ms < 0 || row->busy_ms < 0)
        bad = "total_ms or busy_ms is negative";
    else if (row->ttft_ms < -1)
        bad = "ttft_ms is below -1";
    else if (row->http_status < 0 || row->http_status > 999)
        bad = "http_status is outside 0..999";
    else if (!isfinite(row->decode_tps) || !isfinite(row->gpu_power_w))
        bad = "decode_tps or gpu_power_w is not a finite number";
    if (bad) {
        g_set_error_literal(error, USAGE_STORE_ERROR, USAGE_STORE_ERROR_INVALID, bad);
        return FALSE;
    }
    return TRUE;
}

static const char *req(const char *s)
{
    return s ? s : "";
}

static int bind_opt_text(sqlite3_stmt *stmt, int i, const char *s)
{
    return s && s[0] ? sqlite3_bind_text(stmt, i, s, -1, SQLITE_STATIC)
                     : sqlite3_bind_null(stmt, i);
}

int usage_row_bind(sqlite3_stmt *st, int i, const usage_row *r)
{
    sqlite3_bind_int64(st, i + 0, r->start_ms);
    sqlite3_bind_text(st, i + 1, req(r->caller), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, i + 2, req(r->client), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, i + 3, req(r->endpoint), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, i + 4, req(r->model), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, i + 5, req(r->route), -1, SQLITE_STATIC);
    bind_opt_text(st, i + 6, r->backend);
    bind_opt_text(st, i + 7, r->quant);
    sqlite3_bind_int64(st, i + 8, r->prompt_tokens);
    sqlite3_bind_int64(st, i + 9, r->cached_tokens);
    sqlite3_bind_int64(st, i + 10, r->completion_tokens);
    if (r->ttft_ms >= 0)
        sqlite3_bind_int64(st, i + 11, r->ttft_ms);
    else
        sqlite3_bind_null(st, i + 11);
    sqlite3_bind_int64(st, i + 12, r->total_ms);
    if (r->decode_tps > 0)
        sqlite3_bind_double(st, i + 13, r->decode_tps);
    else
        sqlite3_bind_null(st, i + 13);
    sqlite3_bind_int(st, i + 14, r->http_status);
    bind_opt_text(st, i + 15, r->error_kind);
    bind_opt_text(st, i + 16, r->finish_reason);
    if (r->gpu_power_w >= 0)
        sqlite3_bind_double(st, i + 17, r->gpu_power_w);
    else
        sqlite3_bind_null(st, i + 17);
    return sqlite3_bind_int64(st, i + 18, r->busy_ms);
}

static const char *col_text(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NULL
                                                      : (const char *)sqlite3_column_text(st, i);
}

void usage_row_read(sqlite3_stmt *st, int i, usage_row *r)
{
    r->start_ms = sqlite3_column_int64(st, i + 0);
    r->caller = req(col_text(st, i + 1));
    r->client = req(col_text(st, i + 2));
    r->endpoint = req(col_text(st, i + 3));
    r->model = req(col_text(st, i + 4));
    r->route = req(col_text(st, i + 5));
    r->backend = col_text(st, i + 6);
    r->quant = col_text(st, i + 7);
    r->prompt_tokens = sqlite3_column_int64(st, i + 8);
    r->cached_tokens = sqlite3_column_int64(st, i + 9);
    r->completion_tokens = sqlite3_column_int64(st, i + 10);
    r->ttft_ms = sqlite3_column_type(st, i + 11) == SQLITE_NULL
                     ? -1 : sqlite3_column_int64(st, i + 11);
    r->total_ms = sqlite3_column_int64(st, i + 12);
    r->decode_tps = sqlite3_column_type(st, i + 13) == SQLITE_NULL
                        ? 0.0 : sqlite3_column_double(st, i + 13);
    r->http_status = sqlite3_column_int(st, i + 14);
    r->error_kind = col_text(st, i + 15);
    r->finish_reason = col_text(st, i + 16);
    r->gpu_power_w = sqlite3_column_type(st, i + 17) == SQLITE_NULL
                         ? -1.0 : sqlite3_column_double(st, i + 17);
    r->busy_ms = sqlite3_column_int64(st, i + 18);
}

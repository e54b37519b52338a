/*
 * toolcall.c — tool-call format detection, the streaming filter and the
 * driver that turns the held tool-call region into calls (the per-format
 * block readers are in toolcall-formats.c).
 *
 * The stream has three modes:
 *
 *   START  (Llama 3 only) the reply so far is whitespace or a prefix of
 *          `{"name"` / `{"type"`: held, because Llama 3 writes a call as the
 *          whole reply with no marker in front.
 *   PASS   content: emitted as it comes, except a tail that could still
 *          grow into a marker (at most the longest marker's length - 1).
 *   HOLD   a marker was seen: everything from it to the end of the reply is
 *          the region, read into calls by svc_tool_stream_finish.
 *
 * Whole-reply parsing is the stream fed in one piece, so streamed and
 * non-streamed replies cannot disagree.
 */
#include "toolcall-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tc_buf_add(tc_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void tc_buf_adds(tc_buf *b, const char *s)
{
    tc_buf_add(b, s, strlen(s));
}

void tc_buf_free(tc_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

void tc_calls_add(tc_calls *c, const char *name, size_t name_len,
                  const char *args, size_t args_len)
{
    if (c->oom)
        return;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4;
        svc_tool_call *v = realloc(c->v, cap * sizeof *v);
        if (!v) {
            c->oom = true;
            return;
        }
        c->v = v, c->cap = cap;
    }
    svc_tool_call *t = &c->v[c->n];
    t->name = dup_n(name, name_len);
    t->arguments = dup_n(args, args_len);
    if (!t->name || !t->arguments) {
        free(t->name);
        free(t->arguments);
        c->oom = true;
        return;
    }
    c->n++;
}

void tc_calls_truncate(tc_calls *c, size_t keep)
{
    while (c->n > keep) {
        c->n--;
        free(c->v[c->n].name);
        free(c->v[c->n].arguments);
    }
}

bool tc_starts(const char *s, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    return len >= n && memcmp(s, lit, n) == 0;
}

size_t tc_find(const char *s, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    if (n == 0)
        return 0;
    for (size_t i = 0; i + n <= len; i++)
        if (s[i] == lit[0] && memcmp(s + i, lit, n) == 0)
            return i;
    return len;
}

size_t tc_skip_ws(const char *s, size_t len, size_t i)
{
    while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

svc_tool_format svc_tool_format_detect(const char *t)
{
    if (!t)
        return SVC_TOOL_FORMAT_NONE;
    /* MiniMax's <invoke name=...> XML (M2, M3) is not read: better no
     * tools than calls that come back as raw markup */
    if (strstr(t, "<invoke name="))
        return SVC_TOOL_FORMAT_NONE;
    /* most specific first: several formats share <tool_call> */
    if (strstr(t, "<seed:tool_call>"))
        return SVC_TOOL_FORMAT_SEED_OSS;
    if (strstr(t, "<tool_call>") && strstr(t, "<function="))
        return SVC_TOOL_FORMAT_QWEN3_CODER;
    if (strstr(t, "<arg_key>"))
        return SVC_TOOL_FORMAT_GLM;
    if (strstr(t, "<tool_calls>"))
        return SVC_TOOL_FORMAT_JSON_LIST;
    if (strstr(t, "<tool_call>"))
        return SVC_TOOL_FORMAT_HERMES;
    if (strstr(t, "[TOOL_CALLS]"))
        return SVC_TOOL_FORMAT_MISTRAL;
    if (strstr(t, "<|tool_calls_section_begin|>"))
        return SVC_TOOL_FORMAT_KIMI;
    if (strstr(t, "tool\xe2\x96\x81" "call\xe2\x96\x81" "begin"))
        return SVC_TOOL_FORMAT_DEEPSEEK;
    if (strstr(t, "functools["))
        return SVC_TOOL_FORMAT_FIREFUNCTION;
    if (strstr(t, "<|START_ACTION|>"))
        return SVC_TOOL_FORMAT_COMMAND_R;
    if (strstr(t, "<|start_header_id|>") && strstr(t, "\"parameters\""))
        return SVC_TOOL_FORMAT_LLAMA3;
    return SVC_TOOL_FORMAT_NONE;
}

const char *svc_tool_format_name(svc_tool_format f)
{
    return tc_format_get(f)->name;
}

const char *const *svc_tool_format_markers(svc_tool_format f)
{
    return tc_format_get(f)->markers;
}

/* ---- the region driver ------------------------------------------------ */

static bool block_starts(const tc_format *f, svc_tool_format id, const char *s, size_t len)
{
    if (id == SVC_TOOL_FORMAT_LLAMA3 && len && s[0] == '{')
        return true;
    for (size_t m = 0; f->markers[m]; m++)
        if (tc_starts(s, len, f->markers[m]))
            return true;
    return false;
}

/* Reads the region r[0..n) (which starts with a block) into calls and
 * content; `base` is the region's offset in the reply, for messages. */
static void read_region(svc_tool_format id, const char *r, size_t n, size_t base,
                        tc_buf *content, tc_calls *calls, svc_tool_parse *out)
{
    const tc_format *f = tc_format_get(id);
    size_t i = 0;
    while (i < n) {
        size_t j = tc_skip_ws(r, n, i);
        if (j == n)
            break; /* whitespace after the last call */
        if (block_starts(f, id, r + j, n - j)) {
            const char *why = NULL;
            size_t keep = calls->n;
            size_t k = f->block(r + j, n - j, calls, &why);
            if (k == 0) {
                tc_calls_truncate(calls, keep);
                tc_buf_add(content, r + j, n - j);
                out->malformed = true;
                snprintf(out->problem, sizeof out->problem, "%s at byte %zu",
                         why ? why : "a malformed tool call", base + j);
                return;
            }
            i = j + k;
            continue;
        }
        /* text between or after calls is content, up to the next block */
        size_t q = j + 1;
        while (q < n && !block_starts(f, id, r + q, n - q))
            q++;
        tc_buf_add(content, r + i, q - i);
        i = q;
    }
}

/* ---- the stream -------------------------------------------------------- */

enum { MODE_START, MODE_PASS, MODE_HOLD };

struct svc_tool_stream {
    svc_tool_format format;
    int mode;
    tc_buf pending;   /* START/PASS: not yet emitted                      */
    tc_buf region;    /* HOLD: from the first marker on                   */
    tc_buf out;       /* what the last feed returned                      */
    size_t emitted;   /* bytes emitted so far (offsets in messages)       */
    size_t lead;      /* START: leading whitespace already scanned        */
};

svc_tool_stream *svc_tool_stream_new(svc_tool_format f)
{
    svc_tool_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->format = (unsigned)f < SVC_TOOL_FORMAT_COUNT ? f : SVC_TOOL_FORMAT_NONE;
    s->mode = s->format == SVC_TOOL_FORMAT_LLAMA3 ? MODE_START : MODE_PASS;
    return s;
}

void svc_tool_stream_free(svc_tool_stream *s)
{
    if (!s)
        return;
    tc_buf_free(&s->pending);
    tc_buf_free(&s->region);
    tc_buf_free(&s->out);
    free(s);
}

bool svc_tool_stream_in_call(const svc_tool_stream *s)
{
    return s->mode == MODE_HOLD;
}

/* 2: t starts a Llama 3 call ({ then "name" or "type"), 1: it still may,
 * 0: it cannot. */
static int llama3_start(const char *t, size_t n)
{
    if (n == 0)
        return 1;
    if (t[0] != '{')
        return 0;
    size_t i = tc_skip_ws(t, n, 1);
    if (i == n)
        return 1;
    static const char *const keys[] = {"\"name\"", "\"type\""};
    int best = 0;
    for (size_t k = 0; k < 2; k++) {
        size_t m = strlen(keys[k]), avail = n - i < m ? n - i : m;
        if (memcmp(t + i, keys[k], avail) == 0)
            best = avail == m ? 2 : (best > 1 ? best : 1);
    }
    return best;
}

static void emit(svc_tool_stream *s, const char *p, size_t n)
{
    tc_buf_add(&s->out, p, n);
    s->emitted += n;
}

/* Moves pending[from..] into the region and switches to HOLD. */
static void hold_from(svc_tool_stream *s, size_t from)
{
    tc_buf_add(&s->region, s->pending.p + from, s->pending.n - from);
    s->pending.n = 0;
    s->mode = MODE_HOLD;
}

static void pass(svc_tool_stream *s)
{
    const char *const *markers = tc_format_get(s->format)->markers;
    const char *p = s->pending.p;
    size_t n = s->pending.n;
    size_t first = n;
    for (size_t m = 0; markers[m]; m++) {
        size_t at = tc_find(p, n, markers[m]);
        if (at < first)
            first = at;
    }
    if (first < n) {
        emit(s, p, first);
        hold_from(s, first);
        return;
    }
    /* keep the longest tail that is a proper prefix of a marker */
    size_t keep = 0;
    for (size_t m = 0; markers[m]; m++) {
        size_t ml = strlen(markers[m]);
        for (size_t k = ml - 1 < n ? ml - 1 : n; k > keep; k--)
            if (memcmp(p + n - k, markers[m], k) == 0) {
                keep = k;
                break;
            }
    }
    emit(s, p, n - keep);
    memmove(s->pending.p, p + n - keep, keep);
    s->pending.n = keep;
    s->pending.p[keep] = 0;
}

const char *svc_tool_stream_feed(svc_tool_stream *s, const char *piece, size_t len,
                                 size_t *out_len)
{
    s->out.n = 0;
    tc_buf_add(&s->out, "", 0);
    if (s->mode == MODE_HOLD) {
        tc_buf_add(&s->region, piece, len);
    } else {
        tc_buf_add(&s->pending, piece, len);
        if (s->mode == MODE_START && s->pending.p) {
            size_t lead = s->lead = tc_skip_ws(s->pending.p, s->pending.n, s->lead);
            int m = llama3_start(s->pending.p + lead, s->pending.n - lead);
            if (m == 2) {
                s->emitted += lead; /* leading whitespace before a call is dropped */
                hold_from(s, lead);
            } else if (m == 0) {
                s->mode = MODE_PASS;
            }
        }
        if (s->mode == MODE_PASS && s->pending.p)
            pass(s);
    }
    if (s->out.oom || s->pending.oom || s->region.oom)
        return NULL;
    *out_len = s->out.n;
    return s->out.p;
}

bool svc_tool_stream_finish(svc_tool_stream *s, svc_tool_parse *out)
{
    memset(out, 0, sizeof *out);
    tc_buf content = {0};
    tc_calls calls = {0};
    tc_buf_add(&content, "", 0);
    if (s->mode == MODE_HOLD)
        read_region(s->format, s->region.p, s->region.n, s->emitted, &content, &calls, out);
    else if (s->pending.n)
        tc_buf_add(&content, s->pending.p, s->pending.n);
    if (content.oom || calls.oom || s->region.oom || s->pending.oom) {
        tc_buf_free(&content);
        tc_calls_truncate(&calls, 0);
        free(calls.v);
        memset(out, 0, sizeof *out);
        return false;
    }
    out->content = content.p;
    out->content_len = content.n;
    out->calls = calls.v;
    out->n_calls = calls.n;
    s->pending.n = 0;
    s->region.n = 0;
    return true;
}

bool svc_tool_parse_text(svc_tool_format f, const char *text, size_t len, svc_tool_parse *out)
{
    memset(out, 0, sizeof *out);
    svc_tool_stream *s = svc_tool_stream_new(f);
    if (!s)
        return false;
    size_t n0 = 0;
    const char *head = svc_tool_stream_feed(s, text, len, &n0);
    char *first = head ? dup_n(head, n0) : NULL;
    bool ok = first && svc_tool_stream_finish(s, out);
    svc_tool_stream_free(s);
    if (!ok) {
        free(first);
        return false;
    }
    if (n0) { /* content = emitted + held */
        char *all = malloc(n0 + out->content_len + 1);
        if (!all) {
            free(first);
            svc_tool_parse_clear(out);
            return false;
        }
        memcpy(all, first, n0);
        memcpy(all + n0, out->content, out->content_len + 1);
        free(out->content);
        out->content = all;
        out->content_len += n0;
    }
    free(first);
    return true;
}

void svc_tool_parse_clear(svc_tool_parse *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_calls; i++) {
        free(p->calls[i].name);
        free(p->calls[i].arguments);
    }
    free(p->calls);
    free(p->content);
    memset(p, 0, sizeof *p);
}

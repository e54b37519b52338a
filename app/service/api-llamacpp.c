/*
 * api-llamacpp.c — the llama.cpp server's own (non-OpenAI) endpoints, for
 * the editor plugins built on llama-server: llama.vscode and Continue's
 * autocomplete call /infill, Tabby and scripts call /completion.
 *
 *   POST /completion, /completions   prompt (text or token ids) → text
 *   POST /infill      input_prefix / input_suffix / input_extra through the
 *                     model's FIM tokens, then `prompt` after FIM_MID
 *   GET  /props       context size, slots, model path, chat template
 *   POST /tokenize    {"content"} → {"tokens"} (optionally with pieces)
 *   POST /detokenize  {"tokens"} → {"content"}
 *   (GET /health is the server's own: {"status":"ok", ...})
 *
 * Replies follow llama-server: `content`, `stop`, `stop_type` (eos, limit,
 * word), `stopping_word`, `tokens_cached` (prefix reuse), and a `timings`
 * object (prompt_n, prompt_ms, predicted_n, predicted_ms and rates) in the
 * final object; streams are SSE `data: {...}` lines without a [DONE] line.
 * Errors are {"error":{"code":status,"message","type"}}.
 *
 * Context: /completion refuses a prompt longer than the context (400,
 * exceed_context_size_error) where llama-server would cut it; /infill, as
 * llama-server does, keeps the text nearest the cursor (extra chunks, then
 * far prefix and suffix lines go) and says so with "truncated": true.
 * n_predict beyond the context is capped (stop_type "limit"). Not
 * returned: completion_probabilities (n_probs), per-token timings.
 */
#include "api.h"
#include "job.h"

#include <math.h>
#include <string.h>

typedef struct lcp_state {
    gboolean stream;
    gboolean infill;
    char *model;            /* reported in "model"                          */
    int64_t n_predicted;    /* tokens with text so far (for stream chunks)  */
    int32_t n_ctx;
    gboolean truncated;     /* /infill dropped far context to fit         */
} lcp_state;

static void lcp_state_free(gpointer p)
{
    lcp_state *s = p;
    g_free(s->model);
    g_free(s);
}

char *svc_api_fim_missing(const svc_prompt_model *pm)
{
    const char *parts[3];
    int n = 0;
    if (pm->fim_pre < 0)
        parts[n++] = "prefix";
    if (pm->fim_suf < 0)
        parts[n++] = "suffix";
    if (pm->fim_mid < 0)
        parts[n++] = "middle";
    if (n == 0)
        return g_strdup("nothing");
    GString *s = g_string_new("the FIM ");
    for (int i = 0; i < n; i++) {
        if (i)
            g_string_append(s, i == n - 1 ? " and " : ", ");
        g_string_append(s, parts[i]);
    }
    g_string_append(s, n == 1 ? " token" : " tokens");
    g_string_append(s, " (tokenizer.ggml.fim_pre/suf/mid_token_id, or tokens such as "
                       "<|fim_prefix|> <|fim_suffix|> <|fim_middle|>)");
    return g_string_free(s, FALSE);
}

/* ---- reply pieces -------------------------------------------------------------------- */

static double rate(double n, double ms)
{
    return ms > 0 ? n * 1000.0 / ms : 0.0;
}

/* llama-server's timings: the prompt from admission to the first token,
 * prediction from the first token to the end. */
static void add_timings(JsonBuilder *b, const svc_gen_result *r)
{
    int64_t first = r->ttft_us >= 0 ? r->ttft_us : r->total_us;
    double prompt_ms = (double)MAX(0, first - r->queue_us) / 1000.0;
    double pred_ms = (double)MAX(0, r->total_us - first) / 1000.0;
    int64_t prompt_n = MAX(0, r->n_prompt - r->n_cached);
    json_builder_set_member_name(b, "timings");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "cache_n");
    json_builder_add_int_value(b, r->n_cached);
    json_builder_set_member_name(b, "prompt_n");
    json_builder_add_int_value(b, prompt_n);
    json_builder_set_member_name(b, "prompt_ms");
    json_builder_add_double_value(b, prompt_ms);
    json_builder_set_member_name(b, "prompt_per_token_ms");
    json_builder_add_double_value(b, prompt_n ? prompt_ms / (double)prompt_n : 0.0);
    json_builder_set_member_name(b, "prompt_per_second");
    json_builder_add_double_value(b, rate((double)prompt_n, prompt_ms));
    json_builder_set_member_name(b, "predicted_n");
    json_builder_add_int_value(b, r->n_completion);
    json_builder_set_member_name(b, "predicted_ms");
    json_builder_add_double_value(b, pred_ms);
    json_builder_set_member_name(b, "predicted_per_token_ms");
    json_builder_add_double_value(b, r->n_completion ? pred_ms / (double)r->n_completion : 0.0);
    json_builder_set_member_name(b, "predicted_per_second");
    json_builder_add_double_value(b, rate((double)r->n_completion, pred_ms));
    json_builder_end_object(b);
}

static void add_float(JsonBuilder *b, const char *name, double v)
{
    json_builder_set_member_name(b, name);
    json_builder_add_double_value(b, isfinite(v) ? v : 0.0);
}

static void add_int(JsonBuilder *b, const char *name, gint64 v)
{
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, v);
}

/* The sampling settings a request ran with (llama-server's
 * generation_settings / default_generation_settings.params). */
static void add_params(JsonBuilder *b, const moe_sampler_params *sp, gboolean has_seed,
                       int64_t n_predict, char **stops, gboolean ignore_eos, gboolean stream,
                       int32_t n_probs)
{
    add_int(b, "n_predict", n_predict);
    /* llama.cpp's "random seed" value when the request named none. */
    add_int(b, "seed", has_seed ? (gint64)sp->seed : 4294967295);
    add_float(b, "temperature", sp->temperature);
    add_int(b, "top_k", sp->top_k);
    add_float(b, "top_p", sp->top_p);
    add_float(b, "min_p", sp->min_p);
    add_int(b, "repeat_last_n", sp->penalty_last_n);
    add_float(b, "repeat_penalty", sp->repeat_penalty);
    add_float(b, "presence_penalty", sp->presence_penalty);
    add_float(b, "frequency_penalty", sp->frequency_penalty);
    json_builder_set_member_name(b, "stop");
    json_builder_begin_array(b);
    for (char **s = stops; s && *s; s++)
        json_builder_add_string_value(b, *s);
    json_builder_end_array(b);
    add_int(b, "max_tokens", n_predict);
    json_builder_set_member_name(b, "ignore_eos");
    json_builder_add_boolean_value(b, ignore_eos);
    json_builder_set_member_name(b, "stream");
    json_builder_add_boolean_value(b, stream);
    add_int(b, "n_probs", n_probs);
}

/* The prompt as text, special tokens written out. */
static char *prompt_text(const moe_vocab *v, const GArray *tokens)
{
    GString *s = g_string_new(NULL);
    char buf[256];
    for (guint i = 0; i < tokens->len; i++) {
        int64_t n = moe_token_to_piece(v, g_array_index(tokens, int32_t, i), true, buf, sizeof buf);
        if (n > 0)
            g_string_append_len(s, buf, MIN(n, (int64_t)sizeof buf));
    }
    char *valid = g_utf8_make_valid(s->str, (gssize)s->len);
    g_string_free(s, TRUE);
    return valid;
}

/* ---- job events ----------------------------------------------------------------------- */

static void on_delta(svc_job *job, const char *text, size_t len, int32_t token,
                     const moe_token_prob *probs, size_t n_probs)
{
    (void)probs;
    (void)n_probs;
    lcp_state *s = svc_job_user(job);
    if (token >= 0)
        s->n_predicted++;
    if (!s->stream || !len)
        return;
    svc_call *call = svc_job_call(job);
    svc_call_stream_begin(call, 200, "text/event-stream");
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    add_int(b, "index", 0);
    json_builder_set_member_name(b, "content");
    char *t = g_strndup(text, len);
    json_builder_add_string_value(b, t);
    g_free(t);
    json_builder_set_member_name(b, "tokens");
    json_builder_begin_array(b);
    if (token >= 0)
        json_builder_add_int_value(b, token);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "stop");
    json_builder_add_boolean_value(b, FALSE);
    add_int(b, "tokens_predicted", s->n_predicted);
    add_int(b, "tokens_evaluated", svc_job_prompt(job)->len);
    json_builder_end_object(b);
    svc_call_stream_json(call, svc_json_take(b));
}

static void on_done(svc_job *job, const svc_gen_result *r)
{
    lcp_state *s = svc_job_user(job);
    svc_call *call = svc_job_call(job);
    if (r->error) {
        if (!svc_call_is_gone(call))
            svc_call_reply_gerror(call, r->error);
        return;
    }
    const svc_request *req = svc_job_request(job);
    svc_model *m = svc_job_model(job);
    gsize len = 0;
    const char *text = svc_job_text(job, &len);
    const char *stop_type = "eos";
    const char *stopping_word = "";
    if (r->finish == MOE_FINISH_LENGTH) {
        stop_type = "limit";
    } else if (r->finish == MOE_FINISH_STOP) {
        stop_type = "word";
        if (r->stop_index >= 0 && (size_t)r->stop_index < req->n_stops)
            stopping_word = req->stops[r->stop_index];
    }
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    add_int(b, "index", 0);
    json_builder_set_member_name(b, "content");
    char *t = g_strndup(s->stream ? "" : text, s->stream ? 0 : len);
    json_builder_add_string_value(b, t);
    g_free(t);
    json_builder_set_member_name(b, "tokens");
    json_builder_begin_array(b);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "stop");
    json_builder_add_boolean_value(b, TRUE);
    json_builder_set_member_name(b, "model");
    json_builder_add_string_value(b, s->model);
    add_int(b, "tokens_predicted", r->n_completion);
    add_int(b, "tokens_evaluated", r->n_prompt);
    json_builder_set_member_name(b, "generation_settings");
    json_builder_begin_object(b);
    add_int(b, "n_ctx", s->n_ctx);
    json_builder_set_member_name(b, "model");
    json_builder_add_string_value(b, s->model);
    add_params(b, &req->sampling, req->has_seed, req->max_tokens, req->stops, req->ignore_eos,
               req->stream, req->n_probs);
    json_builder_set_member_name(b, "cache_prompt");
    json_builder_add_boolean_value(b, req->cache_prompt);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "prompt");
    char *pt = prompt_text(moe_model_vocab(m->model), svc_job_prompt(job));
    json_builder_add_string_value(b, pt);
    g_free(pt);
    json_builder_set_member_name(b, "has_new_line");
    json_builder_add_boolean_value(b, memchr(text, '\n', len) != NULL);
    json_builder_set_member_name(b, "truncated");
    json_builder_add_boolean_value(b, s->truncated);
    json_builder_set_member_name(b, "stop_type");
    json_builder_add_string_value(b, stop_type);
    json_builder_set_member_name(b, "stopping_word");
    json_builder_add_string_value(b, stopping_word);
    add_int(b, "tokens_cached", r->n_cached);
    add_timings(b, r);
    json_builder_end_object(b);
    if (s->stream) {
        svc_call_stream_begin(call, 200, "text/event-stream");
        svc_call_stream_json(call, svc_json_take(b));
        svc_call_stream_end(call);
    } else {
        svc_call_reply_json(call, 200, svc_json_take(b));
    }
}

/* ---- generation --------------------------------------------------------------------------- */

/* Tokens of plain text (no BOS, special-token text not parsed), appended. */
static gboolean append_text(const moe_vocab *v, const char *text, GArray *tokens, moe_err *err)
{
    size_t n = 0, len = strlen(text);
    if (!len)
        return TRUE;
    moe_tokenize(v, text, len, 0, NULL, 0, &n, err);
    guint at = tokens->len;
    g_array_set_size(tokens, at + (guint)n);
    return moe_tokenize(v, text, len, 0, &g_array_index(tokens, int32_t, at), n, &n, err) ==
           MOE_OK;
}

/* Drops about `bytes` bytes from the start of `s` (keep_end) or from its
 * end, at a line boundary when there is one, else at a character
 * boundary. Returns the new length; `*start` moves for keep_end (NULL
 * otherwise). */
static gsize trim_text(const char *s, gsize len, gsize bytes, gboolean keep_end, gsize *start)
{
    if (bytes == 0)
        return len;
    if (bytes >= len)
        return 0;
    if (keep_end) {
        const char *cut = s + bytes;
        const char *nl = memchr(cut, '\n', len - bytes);
        cut = nl ? nl + 1 : g_utf8_find_next_char(cut - 1, s + len);
        if (!cut)
            return 0;
        *start += (gsize)(cut - s);
        return len - (gsize)(cut - s);
    }
    gsize keep = len - bytes;
    const char *nl = g_strrstr_len(s, (gssize)keep, "\n");
    if (nl)
        return (gsize)(nl - s) + 1;
    const char *c = g_utf8_find_prev_char(s, s + keep + 1);
    return c ? (gsize)(c - s) : 0;
}

/* /infill: [extra] FIM_PRE prefix FIM_SUF suffix FIM_MID, then `prompt`
 * as plain text. Like llama-server, a prompt over the context keeps the
 * text nearest the cursor: extra chunks go first (oldest first), then the
 * prefix loses lines at its start and the suffix at its end, until the
 * prompt leaves room for the answer (n_predict, or an eighth of the
 * context when unlimited). `*trimmed` says whether anything went. */
static gboolean infill_tokens(svc_call *call, svc_model *m, svc_prompt_model *pm,
                              const svc_request *req, GArray **tokens, gboolean *trimmed)
{
    const char *name = req->model ? req->model : m->name;
    *trimmed = FALSE;
    if (!svc_prompt_supports_fim(pm)) {
        char *missing = svc_api_fim_missing(pm);
        svc_call_reply_error(call, 400, "not_supported_error", NULL, "unsupported",
                             "the model '%s' cannot fill in the middle: its vocabulary lacks %s",
                             name, missing);
        g_free(missing);
        return FALSE;
    }
    const moe_vocab *v = moe_model_vocab(m->model);
    moe_err err = {{0}};
    GArray *tail = g_array_new(FALSE, FALSE, sizeof(int32_t));
    if (!append_text(v, req->prompt ? req->prompt : "", tail, &err)) {
        svc_call_reply_error(call, 500, "server_error", "prompt", NULL,
                             "cannot tokenize the prompt: %s", err.msg);
        g_array_unref(tail);
        return FALSE;
    }
    int64_t ctx = m->n_ctx_per_seq;
    int64_t reserve = req->max_tokens >= 0 ? MIN(req->max_tokens, ctx / 2) : ctx / 8;
    int64_t budget = ctx - MAX(reserve, 1) - (int64_t)tail->len;
    const char *pre = req->prefix ? req->prefix : "", *suf = req->suffix ? req->suffix : "";
    gsize pre_start = 0, pre_len = strlen(pre), suf_len = strlen(suf);
    guint n_extra = req->extra ? json_array_get_length(req->extra) : 0, first_extra = 0;
    gboolean ok = FALSE;
    for (int round = 0; round < 64; round++) {
        JsonArray *extra = json_array_new();
        for (guint i = first_extra; i < n_extra; i++)
            json_array_add_element(extra, json_node_copy(json_array_get_element(req->extra, i)));
        char *p = g_strndup(pre + pre_start, pre_len), *sx = g_strndup(suf, suf_len);
        GError *e = NULL;
        if (*tokens)
            g_array_unref(*tokens);
        *tokens = NULL;
        ok = svc_prompt_fim(pm, p, sx, extra, tokens, &e);
        g_free(p);
        g_free(sx);
        json_array_unref(extra);
        if (!ok) {
            svc_call_reply_error(call, 400, "invalid_request_error", "input_prefix", NULL, "%s",
                                 e->message);
            g_error_free(e);
            break;
        }
        int64_t over = (int64_t)(*tokens)->len - budget;
        if (over <= 0)
            break;
        /* Too long: give up the farthest context first — extra chunks,
         * then prefix and suffix cut to the bytes the overflow takes (at
         * this text's bytes per token), the suffix keeping at most a
         * quarter of what is left (llama-server's split). */
        if (first_extra < n_extra) {
            first_extra++;
        } else if (pre_len + suf_len > 0) {
            double bpt = (double)(pre_len + suf_len) / (double)MAX((*tokens)->len, 1u);
            gsize cut = (gsize)((double)over * MAX(bpt, 0.25)) + 8;
            gsize total = pre_len + suf_len > cut ? pre_len + suf_len - cut : 0;
            gsize want_suf = MIN(suf_len, total / 4);
            gsize want_pre = MIN(pre_len, total - want_suf);
            want_suf = total - want_pre;
            if (want_pre < pre_len)
                pre_len = trim_text(pre + pre_start, pre_len, pre_len - want_pre, TRUE, &pre_start);
            if (want_suf < suf_len)
                suf_len = trim_text(suf, suf_len, suf_len - want_suf, FALSE, NULL);
        } else {
            break; /* nothing left to give: the context check refuses it */
        }
        *trimmed = TRUE;
    }
    if (ok)
        g_array_append_vals(*tokens, tail->data, tail->len);
    g_array_unref(tail);
    return ok;
}

static void generate(svc_call *call, svc_api api)
{
    gsize body_len;
    const char *body = svc_call_body(call, &body_len);
    svc_request *req = NULL;
    svc_request_error rerr;
    if (!svc_request_parse(api, body, body_len, &req, &rerr)) {
        svc_call_reply_error(call, rerr.status, rerr.type[0] ? rerr.type : "invalid_request_error",
                             rerr.param[0] ? rerr.param : NULL, rerr.code[0] ? rerr.code : NULL,
                             "%s", rerr.message);
        return;
    }
    svc_call_set_model(call, req->model);
    if (svc_api_try_upstream(call, req, api)) {
        svc_request_free(req);
        return;
    }
    GError *e = NULL;
    svc_model *m = svc_server_acquire_model(svc_call_server(call), req->model, &e);
    if (!m) {
        svc_call_reply_gerror(call, e);
        g_error_free(e);
        svc_request_free(req);
        return;
    }
    GArray *tokens = NULL;
    gboolean trimmed = FALSE;
    svc_prompt_model *pm = svc_prompt_for_model(m, &e);
    gboolean ok = pm != NULL;
    if (!ok) {
        svc_call_reply_error(call, 500, "server_error", NULL, NULL, "%s", e->message);
        g_clear_error(&e);
    } else if (api == SVC_API_LLAMACPP_INFILL) {
        ok = infill_tokens(call, m, pm, req, &tokens, &trimmed);
    } else if (!svc_api_prompt_tokens(pm, req, &tokens, &e)) {
        svc_call_reply_error(call, 400, "invalid_request_error", "prompt", NULL, "%s",
                             e->message);
        g_clear_error(&e);
        ok = FALSE;
    }
    /* The prompt must fit with room for one token; n_predict is capped to
     * the room left, as llama-server stops at the context's end. */
    if (ok && (int64_t)tokens->len >= m->n_ctx_per_seq) {
        svc_call_reply_error(call, 400, "exceed_context_size_error", "prompt",
                             "context_length_exceeded",
                             "the request (%u prompt tokens) exceeds the available context "
                             "size (%d tokens), try increasing it",
                             tokens->len, m->n_ctx_per_seq);
        ok = FALSE;
    }
    if (!ok) {
        if (tokens)
            g_array_unref(tokens);
        svc_model_unref(m);
        svc_request_free(req);
        return;
    }
    int64_t room = m->n_ctx_per_seq - (int64_t)tokens->len;
    if (req->max_tokens < 0 || req->max_tokens > room)
        req->max_tokens = room;
    lcp_state *s = g_new0(lcp_state, 1);
    s->stream = req->stream;
    s->infill = api == SVC_API_LLAMACPP_INFILL;
    s->model = g_strdup(req->model ? req->model : m->name);
    s->n_ctx = m->n_ctx_per_seq;
    s->truncated = trimmed;
    static const svc_job_events ev = {on_delta, on_done};
    svc_job_start(call, m, req, tokens, &ev, s, lcp_state_free);
}

static void route_completion(svc_call *call)
{
    generate(call, SVC_API_LLAMACPP_COMPLETION);
}

static void route_infill(svc_call *call)
{
    generate(call, SVC_API_LLAMACPP_INFILL);
}

/* ---- /props, /tokenize, /detokenize -------------------------------------------------------- */

/* The loaded model (or the default one, loaded); NULL after 503. */
static svc_model *model_for(svc_call *call, const char *name)
{
    GError *e = NULL;
    svc_model *m = svc_server_acquire_model(svc_call_server(call), name, &e);
    if (!m) {
        if (e->domain == SVC_ERROR && e->code == SVC_ERROR_MODEL_NOT_FOUND && !name)
            svc_call_reply_error(call, 503, "unavailable_error", NULL, NULL, "%s", e->message);
        else
            svc_call_reply_gerror(call, e);
        g_error_free(e);
    }
    return m;
}

static void route_props(svc_call *call)
{
    svc_model *m = model_for(call, NULL);
    if (!m)
        return;
    svc_sched_stats st;
    svc_sched_get_stats(m->sched, &st);
    moe_sampler_params sp = moe_sampler_params_default();
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "default_generation_settings");
    json_builder_begin_object(b);
    add_int(b, "id", 0);
    add_int(b, "id_task", -1);
    add_int(b, "n_ctx", m->n_ctx_per_seq);
    json_builder_set_member_name(b, "speculative");
    json_builder_add_boolean_value(b, FALSE);
    json_builder_set_member_name(b, "is_processing");
    json_builder_add_boolean_value(b, st.running > 0);
    json_builder_set_member_name(b, "params");
    json_builder_begin_object(b);
    add_params(b, &sp, FALSE, -1, NULL, FALSE, FALSE, 0);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "prompt");
    json_builder_add_string_value(b, "");
    json_builder_end_object(b);
    add_int(b, "total_slots", st.n_parallel);
    json_builder_set_member_name(b, "model_path");
    json_builder_add_string_value(b, m->path);
    json_builder_set_member_name(b, "model_alias");
    json_builder_add_string_value(b, m->name);
    json_builder_set_member_name(b, "chat_template");
    const char *tmpl = moe_model_chat_template(m->model);
    json_builder_add_string_value(b, tmpl ? tmpl : "");
    json_builder_set_member_name(b, "modalities");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "vision");
    json_builder_add_boolean_value(b, FALSE);
    json_builder_set_member_name(b, "audio");
    json_builder_add_boolean_value(b, FALSE);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "build_info");
    char *bi = g_strconcat("moedesk-", svc_server_version(), NULL);
    json_builder_add_string_value(b, bi);
    g_free(bi);
    json_builder_set_member_name(b, "is_sleeping");
    json_builder_add_boolean_value(b, FALSE);
    json_builder_end_object(b);
    svc_call_reply_json(call, 200, svc_json_take(b));
    svc_model_unref(m);
}

/* The body's object and its optional "model"; NULL after 400. */
static JsonObject *body_object(svc_call *call, JsonNode **root, const char **model)
{
    gsize len;
    const char *body = svc_call_body(call, &len);
    GError *e = NULL;
    *root = len ? svc_json_parse(body, (gssize)len, &e) : NULL;
    if (!*root || !JSON_NODE_HOLDS_OBJECT(*root)) {
        svc_call_reply_error(call, 400, "invalid_request_error", NULL, NULL,
                             "the body must be a JSON object%s%s", e ? ": " : "",
                             e ? e->message : "");
        g_clear_error(&e);
        if (*root)
            json_node_unref(*root);
        *root = NULL;
        return NULL;
    }
    JsonObject *o = json_node_get_object(*root);
    JsonNode *mn = json_object_get_member(o, "model");
    *model = mn && JSON_NODE_HOLDS_VALUE(mn) && json_node_get_value_type(mn) == G_TYPE_STRING
                 ? json_node_get_string(mn)
                 : NULL;
    return o;
}

/* A boolean member (absent: `def`); FALSE after 400 for another type. */
static gboolean member_bool(svc_call *call, JsonObject *o, const char *key, gboolean def,
                            gboolean *out)
{
    JsonNode *n = json_object_get_member(o, key);
    *out = def;
    if (!n || JSON_NODE_HOLDS_NULL(n))
        return TRUE;
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_BOOLEAN) {
        svc_call_reply_error(call, 400, "invalid_request_error", key, NULL,
                             "'%s' must be a boolean", key);
        return FALSE;
    }
    *out = json_node_get_boolean(n);
    return TRUE;
}

static void add_piece(JsonBuilder *b, const moe_vocab *v, int32_t id)
{
    char buf[256];
    int64_t n = moe_token_to_piece(v, id, true, buf, sizeof buf);
    n = CLAMP(n, 0, (int64_t)sizeof buf);
    if (g_utf8_validate(buf, (gssize)n, NULL)) {
        char *p = g_strndup(buf, (gsize)n);
        json_builder_add_string_value(b, p);
        g_free(p);
    } else {
        /* Part of a character: its bytes, as llama-server gives them. */
        json_builder_begin_array(b);
        for (int64_t i = 0; i < n; i++)
            json_builder_add_int_value(b, (unsigned char)buf[i]);
        json_builder_end_array(b);
    }
}

static void route_tokenize(svc_call *call)
{
    JsonNode *root = NULL;
    const char *model = NULL;
    JsonObject *o = body_object(call, &root, &model);
    if (!o)
        return;
    JsonNode *cn = json_object_get_member(o, "content");
    gboolean add_special, parse_special, with_pieces;
    if (!cn || !JSON_NODE_HOLDS_VALUE(cn) || json_node_get_value_type(cn) != G_TYPE_STRING) {
        svc_call_reply_error(call, 400, "invalid_request_error", "content", NULL,
                             "'content' must be the text to tokenize (a string)");
    } else if (member_bool(call, o, "add_special", FALSE, &add_special) &&
               member_bool(call, o, "parse_special", TRUE, &parse_special) &&
               member_bool(call, o, "with_pieces", FALSE, &with_pieces)) {
        svc_model *m = model_for(call, model);
        if (m) {
            const moe_vocab *v = moe_model_vocab(m->model);
            const char *text = json_node_get_string(cn);
            size_t len = strlen(text), n = 0;
            unsigned flags = (add_special ? MOE_TOKENIZE_ADD_SPECIAL : 0) |
                             (parse_special ? MOE_TOKENIZE_PARSE_SPECIAL : 0);
            moe_err err = {{0}};
            moe_tokenize(v, text, len, flags, NULL, 0, &n, &err);
            int32_t *ids = g_new(int32_t, n ? n : 1);
            if (moe_tokenize(v, text, len, flags, ids, n, &n, &err) != MOE_OK) {
                svc_call_reply_error(call, 500, "server_error", "content", NULL,
                                     "cannot tokenize: %s", err.msg);
            } else {
                JsonBuilder *b = json_builder_new();
                json_builder_begin_object(b);
                json_builder_set_member_name(b, "tokens");
                json_builder_begin_array(b);
                for (size_t i = 0; i < n; i++) {
                    if (!with_pieces) {
                        json_builder_add_int_value(b, ids[i]);
                        continue;
                    }
                    json_builder_begin_object(b);
                    add_int(b, "id", ids[i]);
                    json_builder_set_member_name(b, "piece");
                    add_piece(b, v, ids[i]);
                    json_builder_end_object(b);
                }
                json_builder_end_array(b);
                json_builder_end_object(b);
                svc_call_reply_json(call, 200, svc_json_take(b));
            }
            g_free(ids);
            svc_model_unref(m);
        }
    }
    json_node_unref(root);
}

static void route_detokenize(svc_call *call)
{
    JsonNode *root = NULL;
    const char *model = NULL;
    JsonObject *o = body_object(call, &root, &model);
    if (!o)
        return;
    JsonNode *tn = json_object_get_member(o, "tokens");
    if (!tn || !JSON_NODE_HOLDS_ARRAY(tn)) {
        svc_call_reply_error(call, 400, "invalid_request_error", "tokens", NULL,
                             "'tokens' must be an array of token ids");
        json_node_unref(root);
        return;
    }
    svc_model *m = model_for(call, model);
    if (!m) {
        json_node_unref(root);
        return;
    }
    const moe_vocab *v = moe_model_vocab(m->model);
    JsonArray *a = json_node_get_array(tn);
    GString *text = g_string_new(NULL);
    gboolean ok = TRUE;
    for (guint i = 0; ok && i < json_array_get_length(a); i++) {
        JsonNode *e = json_array_get_element(a, i);
        gint64 id = -1;
        if (JSON_NODE_HOLDS_VALUE(e) && json_node_get_value_type(e) == G_TYPE_INT64)
            id = json_node_get_int(e);
        if (id < 0 || id >= moe_vocab_n_tokens(v)) {
            svc_call_reply_error(call, 400, "invalid_request_error", "tokens", NULL,
                                 "tokens[%u] is not a token id of this model (0..%d)", i,
                                 moe_vocab_n_tokens(v) - 1);
            ok = FALSE;
            break;
        }
        char buf[256];
        int64_t n = moe_token_to_piece(v, (int32_t)id, true, buf, sizeof buf);
        if (n > 0)
            g_string_append_len(text, buf, MIN(n, (int64_t)sizeof buf));
    }
    if (ok) {
        char *valid = g_utf8_make_valid(text->str, (gssize)text->len);
        JsonBuilder *b = json_builder_new();
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "content");
        json_builder_add_string_value(b, valid);
        json_builder_end_object(b);
        svc_call_reply_json(call, 200, svc_json_take(b));
        g_free(valid);
    }
    g_string_free(text, TRUE);
    svc_model_unref(m);
    json_node_unref(root);
}

void svc_llamacpp_register(svc_server *srv)
{
    svc_server_add_route(srv, "POST", "/completion", SVC_ROUTE_METERED, SVC_STYLE_LLAMACPP,
                         route_completion);
    svc_server_add_route(srv, "POST", "/completions", SVC_ROUTE_METERED, SVC_STYLE_LLAMACPP,
                         route_completion);
    svc_server_add_route(srv, "POST", "/infill", SVC_ROUTE_METERED, SVC_STYLE_LLAMACPP,
                         route_infill);
    svc_server_add_route(srv, "GET", "/props", 0, SVC_STYLE_LLAMACPP, route_props);
    svc_server_add_route(srv, "POST", "/tokenize", 0, SVC_STYLE_LLAMACPP, route_tokenize);
    svc_server_add_route(srv, "POST", "/detokenize", 0, SVC_STYLE_LLAMACPP, route_detokenize);
}

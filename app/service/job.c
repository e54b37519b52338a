/*
 * job.c — one generation for one HTTP call (see job.h): request → scheduler
 * request, the call's cancellation, tool markup held back and parsed,
 * metering. Runs on the main thread; the scheduler's callbacks arrive there.
 */
#include "job.h"

#include "api.h"

#include <string.h>

struct svc_job {
    svc_call *call;
    svc_model *model;
    svc_request *req;
    GArray *tokens;
    svc_job_events ev;
    void *user;
    GDestroyNotify user_free;
    svc_gen *gen;
    gulong cancel_id;
    GString *text;
    svc_tool_stream *tool_stream;
    svc_tool_parse tools;
    gboolean first_seen;
};

svc_call *svc_job_call(svc_job *job) { return job->call; }
svc_model *svc_job_model(svc_job *job) { return job->model; }
svc_request *svc_job_request(svc_job *job) { return job->req; }
void *svc_job_user(svc_job *job) { return job->user; }
const GArray *svc_job_prompt(svc_job *job) { return job->tokens; }
const svc_tool_parse *svc_job_tools(svc_job *job) { return &job->tools; }

const char *svc_job_text(svc_job *job, gsize *len)
{
    if (len)
        *len = job->text->len;
    return job->text->str;
}

char *svc_job_new_id(const char *prefix)
{
    char *id = g_strdup_printf("%s%08x%08x%08x", prefix, g_random_int(), g_random_int(),
                               g_random_int());
    return id;
}

const char *svc_job_finish_reason(svc_job *job, const svc_gen_result *r)
{
    if (job->tools.n_calls > 0)
        return "tool_calls";
    return r->finish == MOE_FINISH_LENGTH ? "length" : "stop";
}

static void job_free(svc_job *job)
{
    if (job->cancel_id)
        g_cancellable_disconnect(svc_call_cancellable(job->call), job->cancel_id);
    if (job->gen)
        svc_gen_unref(job->gen);
    if (job->user_free)
        job->user_free(job->user);
    svc_tool_stream_free(job->tool_stream);
    svc_tool_parse_clear(&job->tools);
    g_string_free(job->text, TRUE);
    g_array_unref(job->tokens);
    svc_request_free(job->req);
    svc_model_unref(job->model);
    svc_call_unref(job->call);
    g_free(job);
}

static void job_on_text(svc_gen *gen, const char *text, size_t len, int32_t token,
                        const moe_token_prob *probs, size_t n_probs, void *user)
{
    (void)gen;
    svc_job *job = user;
    if (!job->first_seen) {
        job->first_seen = TRUE;
        svc_call_mark_first_token(job->call);
    }
    if (job->tool_stream) {
        size_t vis = 0;
        const char *v = svc_tool_stream_feed(job->tool_stream, text, len, &vis);
        text = v;
        len = vis;
    }
    if (len)
        g_string_append_len(job->text, text, (gssize)len);
    if (job->ev.on_delta && (len || probs))
        job->ev.on_delta(job, text, len, token, probs, n_probs);
}

static void job_on_done(svc_gen *gen, const svc_gen_result *r, void *user)
{
    (void)gen;
    svc_job *job = user;
    if (job->tool_stream) {
        svc_tool_stream_finish(job->tool_stream, &job->tools);
        /* Text held back as possible markup that turned out not to be a
         * call is content after all. */
        if (job->tools.content && job->tools.content_len > 0) {
            g_string_append_len(job->text, job->tools.content, (gssize)job->tools.content_len);
            if (job->ev.on_delta)
                job->ev.on_delta(job, job->tools.content, job->tools.content_len, -1, NULL, 0);
        }
    }
    svc_call_set_gen_result(job->call, r);
    if (!r->error)
        svc_call_set_finish_reason(job->call, svc_job_finish_reason(job, r));
    else if (r->error->domain == SVC_SCHED_ERROR) {
        static const char *const kinds[] = {"queue_full", "context_length_exceeded",
                                            "invalid_request", "engine_error", "cancelled",
                                            "timeout", "shutting_down"};
        if (r->error->code >= 0 && r->error->code < (int)G_N_ELEMENTS(kinds) &&
            !svc_call_is_gone(job->call))
            svc_call_set_error_kind(job->call, kinds[r->error->code]);
    }
    if (job->ev.on_done)
        job->ev.on_done(job, r);
    job_free(job);
}

static void job_cancelled(GCancellable *c, gpointer data)
{
    (void)c;
    svc_job *job = data;
    if (job->gen)
        svc_gen_cancel(job->gen);
}

svc_job *svc_job_start(svc_call *call, svc_model *model, svc_request *req, GArray *tokens,
                       const svc_job_events *ev, void *user, GDestroyNotify user_free)
{
    svc_job *job = g_new0(svc_job, 1);
    job->call = svc_call_ref(call);
    job->model = model; /* the caller's reference is handed over */
    job->req = req;
    job->tokens = tokens;
    job->ev = *ev;
    job->user = user;
    job->user_free = user_free;
    job->text = g_string_new(NULL);

    svc_call_set_model(call, req->model ? req->model : model->name);
    svc_call_set_route(call, "local");
    svc_call_set_backend(call, model->backend, model->quant);

    svc_gen_params p;
    svc_gen_params_init(&p);
    svc_request_gen_params(req, &p);
    if (!req->has_seed)
        p.sampling.seed = ((uint64_t)g_random_int() << 32) | g_random_int();
    p.prompt = (const int32_t *)tokens->data;
    p.n_prompt = tokens->len;
    p.timeout_ms = svc_server_request_timeout_ms(svc_call_server(call));
    if (req->t_max_predict_ms > 0 && (p.timeout_ms <= 0 || req->t_max_predict_ms < p.timeout_ms))
        p.timeout_ms = req->t_max_predict_ms;

    svc_gen_constraint constraint;
    if (req->response_format != SVC_RESPONSE_TEXT) {
        GError *e = NULL;
        svc_prompt_model *pm = svc_prompt_for_model(model, &e);
        /* The object must close within the request's budget: max_tokens,
         * or what the context leaves after the prompt. */
        int64_t budget = req->max_tokens > 0 ? req->max_tokens
                                             : (int64_t)model->n_ctx_per_seq - tokens->len;
        if (!pm || !svc_prompt_json_constraint(pm, budget, &constraint, &e)) {
            svc_call_reply_error(call, 400, "invalid_request_error", "response_format",
                                 "unsupported", "%s", e ? e->message : "JSON mode unavailable");
            g_clear_error(&e);
            job_free(job);
            return NULL;
        }
        p.constraint = &constraint;
    }

    gboolean want_tools = req->tools && json_array_get_length(req->tools) > 0;
    if (want_tools && req->tool_choice && JSON_NODE_HOLDS_VALUE(req->tool_choice) &&
        !g_strcmp0(json_node_get_string(req->tool_choice), "none"))
        want_tools = FALSE;
    if (want_tools) {
        svc_prompt_model *pm = svc_prompt_for_model(model, NULL);
        if (pm && pm->tool_format != SVC_TOOL_FORMAT_NONE)
            job->tool_stream = svc_tool_stream_new(pm->tool_format);
    }

    svc_gen_events gev = {job_on_text, job_on_done, job};
    GError *e = NULL;
    job->gen = svc_sched_submit(model->sched, &p, &gev, &e);
    if (!job->gen) {
        svc_call_reply_gerror(call, e);
        g_error_free(e);
        job_free(job);
        return NULL;
    }
    job->cancel_id = g_cancellable_connect(svc_call_cancellable(call), G_CALLBACK(job_cancelled),
                                           job, NULL);
    return job;
}

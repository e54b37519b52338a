/*
 * job.h — one generation for one HTTP call, shared by every API family
 * (OpenAI, Anthropic, Ollama, llama.cpp): from a parsed request (request.h)
 * and prompt tokens (prompt.h) to a scheduler request (scheduler.h), with
 * what every family needs done the same way:
 *
 *   - sampling parameters from the request, a random seed when none given,
 *     the service's request timeout, JSON mode as a token constraint;
 *   - the call's cancellation (client gone) cancels the scheduler request;
 *   - tool-call markup held back from the streamed text and parsed at the
 *     end when the request offered tools and the model's template has a
 *     known tool-call format;
 *   - metering: time to first token, token counts, decode rate, finish
 *     reason, route "local", backend and quantisation.
 *
 * The API module formats: it gets `on_delta` for each piece of visible
 * text (already stripped of stop strings and tool markup) and `on_done`
 * once, then writes its own chunks and final object.
 */
#ifndef MOEDESK_JOB_H
#define MOEDESK_JOB_H

#include "request.h"
#include "svc.h"
#include "toolcall.h"

G_BEGIN_DECLS

typedef struct svc_job svc_job;

typedef struct svc_job_events {
    /* Visible text, in order; `token` is the token that completed it and
     * `probs` its candidates when the request asked for them. */
    void (*on_delta)(svc_job *job, const char *text, size_t len, int32_t token,
                     const moe_token_prob *probs, size_t n_probs);
    /* Once, last. `r->error` set: the request failed (the module answers
     * with svc_call_reply_gerror unless the client is gone). The job is
     * freed when on_done returns. */
    void (*on_done)(svc_job *job, const svc_gen_result *r);
} svc_job_events;

/* Starts generating `tokens` for `call`. Takes, in every case, `req`,
 * `tokens`, the caller's reference on `model` and `user` (freed with
 * `user_free` when the job ends). Returns NULL with the error already
 * answered on the call (queue full → 429, context → 400, ...). `user` is
 * the module's state, reachable with svc_job_user(). */
svc_job *svc_job_start(svc_call *call, svc_model *model, svc_request *req /* taken */,
                       GArray *tokens /* taken */, const svc_job_events *ev, void *user,
                       GDestroyNotify user_free);

svc_call    *svc_job_call(svc_job *job);
svc_model   *svc_job_model(svc_job *job);
svc_request *svc_job_request(svc_job *job);
void        *svc_job_user(svc_job *job);
/* All visible text so far (tool markup excluded). */
const char  *svc_job_text(svc_job *job, gsize *len);
/* Prompt tokens submitted. */
const GArray *svc_job_prompt(svc_job *job);
/* After on_done: the tool calls parsed from the reply (may be empty). */
const svc_tool_parse *svc_job_tools(svc_job *job);
/* "stop", "length" or "tool_calls" (OpenAI's finish_reason). */
const char *svc_job_finish_reason(svc_job *job, const svc_gen_result *r);
/* A fresh id with a prefix, e.g. "chatcmpl-…". */
char *svc_job_new_id(const char *prefix);

G_END_DECLS

#endif /* MOEDESK_JOB_H */

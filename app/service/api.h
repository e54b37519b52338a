/*
 * api.h — helpers the API families (api-openai.c, api-anthropic.c,
 * api-ollama.c, api-llamacpp.c) share: the loaded model's prompt builder,
 * prompt tokens from a completion-style request, the model list every
 * family shows in its own shape, and forwarding to an upstream.
 */
#ifndef MOEDESK_API_H
#define MOEDESK_API_H

#include "prompt.h"
#include "request.h"
#include "svc.h"

G_BEGIN_DECLS

/* The model's prompt builder (made on first use, kept with the model). */
svc_prompt_model *svc_prompt_for_model(svc_model *m, GError **error);

/* Prompt tokens of a completion-style request: its token ids as given, or
 * its text tokenized with BOS as the vocabulary wants and special-token
 * text parsed (as llama.cpp's server does). */
gboolean svc_api_prompt_tokens(svc_prompt_model *pm, const svc_request *req, GArray **tokens,
                               GError **error);

/* One model a client can name. */
typedef struct svc_api_model_info {
    char *name;        /* what clients send as "model"                    */
    char *path;        /* GGUF file, or NULL for upstream models          */
    char *quant;       /* "Q4_K_M", or NULL                               */
    char *arch;        /* "qwen3moe", or NULL                             */
    char *owned_by;    /* "moedesk" or the upstream's name                */
    gint64 created;    /* unix seconds (file time)                        */
    guint64 size;      /* bytes on disk (0: unknown)                      */
    gboolean loaded;
} svc_api_model_info;

/* The loaded model first, then installed models, then upstream models.
 * Elements are svc_api_model_info* freed with the array. */
GPtrArray *svc_api_list_models(svc_server *srv);

/* When `req->model` is not a local model and an upstream serves it (or
 * the local queue is full and an upstream is the fallback), forwards the
 * call there and returns TRUE: the call is then answered by the upstream
 * module. FALSE: serve it locally. */
gboolean svc_api_try_upstream(svc_call *call, const svc_request *req, svc_api api);
/* The fallback upstream takes the call (local queue full, model cannot
 * load): TRUE when one is configured and the call went there. */
gboolean svc_api_fallback(svc_call *call, const svc_request *req, svc_api api);
/* The model's scheduler has no room in its queue. */
gboolean svc_api_local_queue_full(svc_model *m);

/* Which fill-in-the-middle tokens the model lacks, for error messages:
 * "prefix (<|fim_prefix|>), suffix and middle tokens" style text naming
 * the tokens /infill and suffix requests need. New string. */
char *svc_api_fim_missing(const svc_prompt_model *pm);

/* Endpoint families, called by svc_register_all (routes.c). */
void svc_openai_register(svc_server *srv);
void svc_anthropic_register(svc_server *srv);
void svc_admin_register(svc_server *srv);
void svc_ollama_register(svc_server *srv);   /* api-ollama.c: /api/...          */
void svc_llamacpp_register(svc_server *srv); /* api-llamacpp.c: /completion ... */

G_END_DECLS

#endif /* MOEDESK_API_H */

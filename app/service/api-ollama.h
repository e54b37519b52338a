/*
 * api-ollama.h — what the two halves of the Ollama-compatible API share:
 * api-ollama.c (POST /api/chat and /api/generate) and api-ollama-models.c
 * (/api/version, /api/tags, /api/show, /api/ps, /api/pull, /api/embed).
 * Internal to those files; everything else reaches them through
 * svc_ollama_register() in api.h.
 */
#ifndef MOEDESK_API_OLLAMA_H
#define MOEDESK_API_OLLAMA_H

#include "api.h"

G_BEGIN_DECLS

/* The Ollama version /api/version reports. Clients gate features on it
 * (VS Code Copilot Chat refuses servers older than 0.6.4; tools, the
 * `capabilities` list and `think` are 0.6–0.9 features), so it names the
 * Ollama release whose API this module follows, not MoeDesk's version. */
#define SVC_OLLAMA_COMPAT_VERSION "0.11.4"

/* RFC 3339 UTC time with microseconds ("2025-01-31T09:15:02.123456Z") for
 * a wall-clock time in microseconds since the epoch. New string. */
char *svc_ollama_time(gint64 unix_us);

/* Whether the name a client sent means the model called `have`: same
 * name ignoring case, with or without a ":latest" tag. */
gboolean svc_ollama_name_matches(const char *want, const char *have);

/* The name Ollama clients list and send back: "NAME:latest" unless the
 * name already carries a tag. New string. */
char *svc_ollama_tagged_name(const char *name);

/* general.parameter_count, else the elements of every tensor counted. */
uint64_t svc_ollama_gguf_n_params(const moe_gguf *g);

/* "details": {parent_model, format "gguf", family, families,
 * parameter_size ("30.5B"), quantization_level}. */
void svc_ollama_add_details(JsonBuilder *b, const char *arch, uint64_t n_params,
                            const char *quant);

/* The model and download routes (api-ollama-models.c), registered by
 * svc_ollama_register(). */
void svc_ollama_register_models(svc_server *srv);

/* POST /api/show for `model` (api-ollama-show.c); `body` is the request
 * object (for "verbose"). */
void svc_ollama_show(svc_call *call, JsonObject *body, const char *model);

G_END_DECLS

#endif /* MOEDESK_API_OLLAMA_H */

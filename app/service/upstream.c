/*
 * upstream.c — upstream configuration helpers: error kinds, freeing a
 * configured upstream, and choosing the upstream for a model name (explicit
 * "name/model" prefix, then glob patterns, or the fallback). The forwarding
 * itself is in upstream-forward.c.
 */
#include "upstream.h"

#include <string.h>

G_DEFINE_QUARK(svc-upstream-error-quark, svc_upstream_error)

const char *svc_upstream_error_kind(svc_upstream_error code)
{
    switch (code) {
    case SVC_UPSTREAM_ERROR_CONFIG: return "upstream_config";
    case SVC_UPSTREAM_ERROR_UNREACHABLE: return "upstream_unreachable";
    case SVC_UPSTREAM_ERROR_TIMEOUT: return "upstream_timeout";
    case SVC_UPSTREAM_ERROR_AUTH: return "upstream_auth";
    case SVC_UPSTREAM_ERROR_STATUS_4XX: return "upstream_status_4xx";
    case SVC_UPSTREAM_ERROR_STATUS_5XX: return "upstream_status_5xx";
    case SVC_UPSTREAM_ERROR_BAD_RESPONSE: return "upstream_bad_response";
    case SVC_UPSTREAM_ERROR_STREAM_CUT: return "upstream_stream_cut";
    case SVC_UPSTREAM_ERROR_STREAM_ERROR: return "upstream_stream_error";
    case SVC_UPSTREAM_ERROR_CANCELLED: return "cancelled";
    }
    return "upstream_error";
}

void svc_upstream_clear(svc_upstream *ups)
{
    if (!ups)
        return;
    g_free(ups->name);
    g_free(ups->base_url);
    if (ups->api_key)
        memset(ups->api_key, 0, strlen(ups->api_key));
    g_free(ups->api_key);
    g_strfreev(ups->models);
    g_free(ups->fallback_model);
    memset(ups, 0, sizeof *ups);
}

int svc_upstream_match(const svc_upstream *ups, size_t n, const char *model,
                       const char **model_out)
{
    if (model_out)
        *model_out = model;
    if (!ups || !model)
        return -1;
    const char *slash = strchr(model, '/');
    if (slash && slash[1]) {
        size_t plen = (size_t)(slash - model);
        for (size_t i = 0; i < n; i++) {
            const char *name = ups[i].name;
            if (name && strlen(name) == plen && memcmp(name, model, plen) == 0) {
                if (model_out)
                    *model_out = slash + 1;
                return (int)i;
            }
        }
    }
    size_t mlen = strlen(model);
    g_autofree char *rev = g_utf8_strreverse(model, (gssize)mlen);
    for (size_t i = 0; i < n; i++) {
        for (char **p = ups[i].models; p && *p; p++) {
            GPatternSpec *spec = g_pattern_spec_new(*p);
            gboolean hit = g_pattern_spec_match(spec, mlen, model, rev);
            g_pattern_spec_free(spec);
            if (hit)
                return (int)i;
        }
    }
    return -1;
}

int svc_upstream_fallback(const svc_upstream *ups, size_t n)
{
    for (size_t i = 0; ups && i < n; i++)
        if (ups[i].fallback)
            return (int)i;
    return -1;
}


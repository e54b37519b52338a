/*
 * routes.c — the one place that lists every endpoint module, so main.c and
 * in-process tests register the same routes.
 */
#include "api-manage.h"
#include "api.h"

void svc_register_all(svc_server *srv);

void svc_register_all(svc_server *srv)
{
    svc_openai_register(srv);
    svc_anthropic_register(srv);
    svc_admin_register(srv);
    svc_ollama_register(srv);
    svc_llamacpp_register(srv);
    svc_manage_register(srv);
}

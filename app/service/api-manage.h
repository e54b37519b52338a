/*
 * api-manage.h — the Management API of moedesk-service (issue #5 item 9):
 * everything the MoeDesk window and scripts need besides generation, under
 * the prefix /moedesk/v1/ and documented route by route in docs/api.md:
 *
 *   health            GET  /moedesk/v1/health
 *   catalog           GET  /moedesk/v1/catalog          planner verdicts here
 *   models            GET  /moedesk/v1/models[/{name}]  installed + loaded
 *                     DELETE /moedesk/v1/models/{name}
 *                     POST /moedesk/v1/models/{name}/verify
 *                     POST /moedesk/v1/models/{name}/load
 *                     POST /moedesk/v1/unload
 *   downloads         POST|GET /moedesk/v1/downloads, GET|DELETE .../{id},
 *                     GET .../{id}/events, POST .../{id}/pause|resume
 *   imports           POST|GET /moedesk/v1/imports, GET .../{id}[/events]
 *   verifications     GET /moedesk/v1/verifications[/{id}[/events]]
 *   usage             GET  /moedesk/v1/usage/report, /moedesk/v1/usage/requests
 *
 * Errors are OpenAI-shaped ({"error":{"message","type","param","code"}});
 * no route here is metered (they are not generation requests). Progress
 * streams are NDJSON: one job object per line, the last one in a final
 * state.
 */
#ifndef MOEDESK_API_MANAGE_H
#define MOEDESK_API_MANAGE_H

#include "svc.h"

G_BEGIN_DECLS

/* Registers every route above on `srv`, and a stop hook that cancels
 * downloads and verifications (partial files kept) and ends progress
 * streams when the server stops. Call once, before svc_server_start. */
void svc_manage_register(svc_server *srv);

G_END_DECLS

#endif /* MOEDESK_API_MANAGE_H */

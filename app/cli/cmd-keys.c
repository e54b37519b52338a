/*
 * cmd-keys.c — `moedesk-cli keys create NAME | list | revoke NAME`: the
 * service's API keys (app/service/keys.h) from the command line. Works
 * while the service runs: it sees a new or revoked key within a second.
 *
 * `create` prints the key alone on stdout (so KEY=$(moedesk-cli keys create
 * ci) works) and the "shown only once" notice on stderr.
 */
#include "cli.h"
#include "keys.h"

#include <stdio.h>
#include <string.h>

static int usage(FILE *out, int status)
{
    fprintf(out,
            "usage: moedesk-cli keys create NAME\n"
            "       moedesk-cli keys list\n"
            "       moedesk-cli keys revoke NAME\n"
            "API keys for moedesk-service. NAME (1-64 of A-Z a-z 0-9 . _ -) is the caller\n"
            "in usage rows; gui, cli and anonymous are reserved. The key is shown once.\n"
            "Database: $MOEDESK_DATA_DIR/keys.sqlite3, else the user data dir's\n"
            "moedesk/keys.sqlite3.\n");
    return status;
}

static char *when(gint64 t)
{
    if (!t)
        return g_strdup("never");
    g_autoptr(GDateTime) dt = g_date_time_new_from_unix_local(t);
    return dt ? g_date_time_format(dt, "%Y-%m-%d %H:%M") : g_strdup("?");
}

static int keys_list(svc_keys *k)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) list = svc_keys_list(k, &error);
    if (!list) {
        fprintf(stderr, "moedesk-cli keys: %s\n", error->message);
        return 1;
    }
    if (!list->len) {
        printf("no API keys (create one with: moedesk-cli keys create NAME)\n");
        return 0;
    }
    printf("%-24s %-16s %-16s %s\n", "NAME", "CREATED", "LAST USED", "STATUS");
    for (guint i = 0; i < list->len; i++) {
        const svc_key_info *ki = g_ptr_array_index(list, i);
        g_autofree char *created = when(ki->created);
        g_autofree char *used = when(ki->last_used);
        g_autofree char *revoked = ki->revoked_at ? when(ki->revoked_at) : NULL;
        g_autofree char *status = revoked ? g_strdup_printf("revoked %s", revoked)
                                          : g_strdup("active");
        printf("%-24s %-16s %-16s %s\n", ki->name, created, used, status);
    }
    return 0;
}

int cli_cmd_keys(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
        return usage(stdout, 0);
    if (argc < 2)
        return usage(stderr, 2);
    const char *sub = argv[1];
    gboolean named = !strcmp(sub, "create") || !strcmp(sub, "revoke");
    if (!named && strcmp(sub, "list")) {
        fprintf(stderr, "moedesk-cli keys: unknown subcommand '%s'\n", sub);
        return usage(stderr, 2);
    }
    if (argc != (named ? 3 : 2))
        return usage(stderr, 2);
    g_autoptr(GError) error = NULL;
    if (!strcmp(sub, "create") && !svc_keys_name_valid(argv[2], &error)) {
        fprintf(stderr, "moedesk-cli keys: %s\n", error->message);
        return 2;
    }
    svc_keys *k = svc_keys_open(NULL, &error);
    if (!k) {
        fprintf(stderr, "moedesk-cli keys: %s\n", error->message);
        return 1;
    }
    int status = 0;
    if (!strcmp(sub, "list")) {
        status = keys_list(k);
    } else if (!strcmp(sub, "create")) {
        char *token = svc_keys_create(k, argv[2], &error);
        if (!token) {
            fprintf(stderr, "moedesk-cli keys: %s\n", error->message);
            status = 1;
        } else {
            printf("%s\n", token);
            fflush(stdout);
            fprintf(stderr,
                    "Created API key '%s'. It is shown only this once: store it now.\n"
                    "Clients send it as 'Authorization: Bearer KEY'; requests made with it\n"
                    "are recorded with caller '%s'. Revoke it with: moedesk-cli keys revoke %s\n",
                    argv[2], argv[2], argv[2]);
            memset(token, 0, strlen(token));
            g_free(token);
        }
    } else {
        if (!svc_keys_revoke(k, argv[2], &error)) {
            fprintf(stderr, "moedesk-cli keys: %s\n", error->message);
            status = 1;
        } else {
            printf("revoked API key '%s'\n", argv[2]);
        }
    }
    svc_keys_close(k);
    return status;
}

/*
 * cli.h — the subcommand table type and the entry points of moedesk-cli's
 * commands, one per cmd-*.c file. Each takes argv starting at the command
 * name and returns the exit status.
 */
#ifndef MOEDESK_CLI_H
#define MOEDESK_CLI_H

#include "moe.h"
#include "usage-store.h"

#ifndef MOEDESK_VERSION
#define MOEDESK_VERSION "0.1.0"
#endif

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_command;

int cli_cmd_version(int argc, char **argv);
int cli_cmd_hw(int argc, char **argv);
int cli_cmd_plan(int argc, char **argv);
int cli_cmd_report(int argc, char **argv);   /* cmd-report.c */
int cli_cmd_usage(int argc, char **argv);    /* cmd-usage.c */

/* Open the usage database: read-only (migrating an older schema first) or
 * read-write (creating it). cmd-usage.c. */
usage_store *cli_open_usage_store(const char *path, gboolean write, GError **error);
int cli_cmd_inspect(int argc, char **argv);
int cli_cmd_demo_model(int argc, char **argv);
int cli_cmd_tokenize(int argc, char **argv);
int cli_cmd_quantize(int argc, char **argv);
int cli_cmd_import(int argc, char **argv);

#endif /* MOEDESK_CLI_H */

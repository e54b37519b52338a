/*
 * cli.h — the subcommand table type and the entry points of moedesk-cli's
 * commands, one per cmd-*.c file. Each takes argv starting at the command
 * name and returns the exit status.
 */
#ifndef MOEDESK_CLI_H
#define MOEDESK_CLI_H

#include "moe.h"
#include "usage-store.h"

#include <glib.h>

#ifndef MOEDESK_VERSION
#define MOEDESK_VERSION "0.1.0"
#endif

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_command;

int cli_cmd_version(int argc, char **argv);
int cli_cmd_eval(int argc, char **argv);
int cli_cmd_chat(int argc, char **argv);
int cli_cmd_bench(int argc, char **argv);

/* Options the engine commands share (cli-engine.c). */
typedef struct cli_engine_opts {
    char *model;   /* -m/--model                      */
    int   n_threads; /* -t/--threads, 0 = all         */
    int   n_ctx;   /* -c/--ctx-size, 0 = default      */
    int   n_batch; /* -b/--batch-size                 */
    int   n_seq;   /* sequences the context holds     */
    char *kv_type; /* --kv-type                       */
} cli_engine_opts;

void          cli_engine_opts_init(cli_engine_opts *o);
/* A GOptionGroup whose entries write into o (o must outlive it). */
GOptionGroup *cli_engine_opts_group(cli_engine_opts *o);
void          cli_engine_opts_clear(cli_engine_opts *o);
/* Loads the model and creates a context; prints the error and returns
 * the exit status (0 on success, 1 failure, 2 usage). */
int           cli_engine_open(const cli_engine_opts *o, const char *cmd, moe_model **model,
                              moe_context **ctx);
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
#ifdef MOEDESK_HAVE_LIBRARY
int cli_cmd_pull(int argc, char **argv);   /* cmd-pull.c   */
int cli_cmd_verify(int argc, char **argv); /* cmd-verify.c */
int cli_cmd_list(int argc, char **argv);   /* cmd-list.c   */
int cli_cmd_rm(int argc, char **argv);     /* cmd-list.c   */
#endif

#endif /* MOEDESK_CLI_H */

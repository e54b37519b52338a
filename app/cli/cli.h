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
#include <signal.h>
#include <stdio.h>

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
/* One line of stdin without its end ("\r\n" or "\n"), newly allocated;
 * NULL at end of input. Shared by the local and the service chat. */
char *cli_read_line(void);

/* `chat --service URL`: the conversation goes to a running moedesk-service
 * (chat-remote.c; needs libsoup, so only with the model library). */
typedef struct cli_remote_opts {
    const char *service;   /* base URL, e.g. http://127.0.0.1:11435        */
    const char *model;     /* the name the service knows the model by       */
    const char *system;
    double temperature, top_p;
    gint64 seed;           /* < 0: the service picks                        */
    int max_tokens;
} cli_remote_opts;
int cli_chat_remote(const cli_remote_opts *o);
int cli_cmd_run(int argc, char **argv);
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
int cli_cmd_import(int argc, char **argv); /* cmd-import.c */
int cli_cmd_keys(int argc, char **argv);   /* cmd-keys.c   */
#endif

/* Generation shared by chat and run (generate.c). */
typedef struct cli_gen {
    moe_context     *ctx;
    const moe_vocab *vocab;
    moe_sampler     *sampler;
    moe_batch       *batch;
    GArray          *cached; /* int32 tokens now in the KV cache, sequence 0 */
} cli_gen;

typedef struct cli_gen_stats {
    guint       n_prompt, n_new; /* prompt tokens; of them evaluated anew  */
    int         n_gen;
    double      prompt_s, gen_s;
    const char *why;             /* stop, length, context full, ...        */
} cli_gen_stats;

moe_status cli_gen_init(cli_gen *g, moe_context *ctx, const moe_vocab *vocab,
                        moe_sampler *sampler, moe_err *err);
void       cli_gen_clear(cli_gen *g);
/* Evaluates `prompt` (reusing the cached prefix) and generates up to
 * max_tokens, writing text to `out` and appending it to `reply` (may be
 * NULL). Stops early when *stop becomes nonzero. False on an engine error
 * (message in err); stats->why says how it ended. */
bool       cli_generate(cli_gen *g, const GArray *prompt, int max_tokens, FILE *out,
                        GString *reply, volatile sig_atomic_t *stop, cli_gen_stats *stats,
                        moe_err *err);
void       cli_gen_print_stats(const cli_gen_stats *stats);
/* Tokenizes text into a new GArray of int32, or NULL (err says why). */
GArray    *cli_tokenize(const moe_vocab *vocab, const char *text, size_t len, unsigned flags,
                        moe_err *err);
/* Renders the conversation (roles[i], contents[i]) with the template and
 * tokenizes it, ready for the assistant's turn. */
GArray    *cli_chat_prompt(const moe_chat_template *tmpl, const moe_vocab *vocab,
                           GPtrArray *roles, GPtrArray *contents, moe_err *err);
extern const char cli_fallback_chat_template[];

#endif /* MOEDESK_CLI_H */

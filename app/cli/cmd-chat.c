/*
 * cmd-chat.c — `moedesk-cli chat --model M`: an interactive chat in the
 * terminal, the main job until the service and the window exist. Each turn
 * renders the whole conversation with the model's chat template, reuses the
 * KV cache for the prefix the previous turn already evaluated (so a turn
 * costs only its new tokens), samples a reply and streams it as complete
 * UTF-8 characters. Lines starting with '/' are commands (/reset, /exit).
 * Ctrl-C stops a reply; at the prompt it (or end of input) leaves.
 *
 * Reads stdin line by line, so it also works piped ("printf 'hi\n' |
 * moedesk-cli chat -m M"), which is how the tests drive it.
 */
#include "cli.h"

#include <glib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Set by the SIGINT handler; polled between tokens. */
static volatile sig_atomic_t chat_interrupted;

static void chat_on_sigint(int sig)
{
    (void)sig;
    chat_interrupted = 1;
    signal(SIGINT, chat_on_sigint);
}

typedef struct chat_state {
    moe_model         *model;
    moe_context       *ctx;
    const moe_vocab   *vocab;
    moe_chat_template *tmpl;
    moe_sampler       *sampler;
    cli_gen            gen;      /* batch and the KV cache's token record   */
    GPtrArray         *roles;    /* owned strings, one per message          */
    GPtrArray         *contents;
    int                max_tokens;
} chat_state;

static void chat_state_clear(chat_state *s)
{
    cli_gen_clear(&s->gen);
    moe_sampler_free(s->sampler);
    moe_chat_template_free(s->tmpl);
    moe_context_free(s->ctx);
    moe_model_free(s->model);
    if (s->roles)
        g_ptr_array_unref(s->roles);
    if (s->contents)
        g_ptr_array_unref(s->contents);
}

static void chat_add_message(chat_state *s, const char *role, const char *content)
{
    g_ptr_array_add(s->roles, g_strdup(role));
    g_ptr_array_add(s->contents, g_strdup(content));
}

static void chat_drop_last_message(chat_state *s)
{
    g_ptr_array_remove_index(s->roles, s->roles->len - 1);
    g_ptr_array_remove_index(s->contents, s->contents->len - 1);
}

/* One assistant turn for the conversation as it stands. Returns false if
 * the turn could not run (the message was printed). */
static bool chat_turn(chat_state *s)
{
    moe_err err = {{0}};
    g_autoptr(GArray) toks = cli_chat_prompt(s->tmpl, s->vocab, s->roles, s->contents, &err);
    if (!toks) {
        fprintf(stderr, "moedesk-cli chat: building the prompt: %s\n", err.msg);
        return false;
    }
    if ((int64_t)toks->len + 1 > moe_context_n_ctx(s->ctx)) {
        fprintf(stderr, "moedesk-cli chat: the conversation (%u tokens) no longer fits the "
                "context of %d tokens; /reset starts over (or use -c)\n", toks->len,
                moe_context_n_ctx(s->ctx));
        return false;
    }
    g_autoptr(GString) reply = g_string_new(NULL);
    cli_gen_stats st;
    chat_interrupted = 0;
    bool ok = cli_generate(&s->gen, toks, s->max_tokens, stdout, reply, &chat_interrupted, &st, &err);
    printf("\n");
    fflush(stdout);
    if (!ok) {
        fprintf(stderr, "moedesk-cli chat: %s\n", err.msg);
        return false;
    }
    cli_gen_print_stats(&st);
    chat_add_message(s, "assistant", reply->str);
    return true;
}

/* Reads one line (any length) without its newline; NULL at end of input. */
char *cli_read_line(void)
{
    GString *line = g_string_new(NULL);
    int c;
    while ((c = fgetc(stdin)) != EOF && c != '\n')
        g_string_append_c(line, (char)c);
    if (c == EOF && line->len == 0) {
        g_string_free(line, TRUE);
        return NULL;
    }
    if (line->len && line->str[line->len - 1] == '\r')
        g_string_truncate(line, line->len - 1);
    return g_string_free(line, FALSE);
}

int cli_cmd_chat(int argc, char **argv)
{
    cli_engine_opts eo;
    cli_engine_opts_init(&eo);
    double temp = 0.7, top_p = 0.9;
    gint top_k = 40, max_tokens = 512;
    gint64 seed = -1;
    g_autofree char *system = NULL;
    g_autofree char *service = NULL;
    GOptionEntry entries[] = {
        {"service", 0, 0, G_OPTION_ARG_STRING, &service, "Chat through a running moedesk-service at URL (--model is then the service's model name)", "URL"},
        {"temp", 0, 0, G_OPTION_ARG_DOUBLE, &temp, "Sampling temperature, 0 = greedy (default 0.7)", "T"},
        {"top-k", 0, 0, G_OPTION_ARG_INT, &top_k, "Top-k (default 40)", "K"},
        {"top-p", 0, 0, G_OPTION_ARG_DOUBLE, &top_p, "Top-p (default 0.9)", "P"},
        {"seed", 's', 0, G_OPTION_ARG_INT64, &seed, "Random seed (default: a new one each run)", "S"},
        {"n-predict", 'n', 0, G_OPTION_ARG_INT, &max_tokens, "Most tokens per reply (default 512)", "N"},
        {"system", 0, 0, G_OPTION_ARG_STRING, &system, "System prompt", "TEXT"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) oc = g_option_context_new("— chat with a model in the terminal");
    g_option_context_add_main_entries(oc, entries, NULL);
    g_option_context_add_group(oc, cli_engine_opts_group(&eo));
    g_autoptr(GError) gerr = NULL;
    if (!g_option_context_parse(oc, &argc, &argv, &gerr) || argc != 1) {
        fprintf(stderr, "moedesk-cli chat: %s\nusage: moedesk-cli chat --model FILE.gguf [options]\n",
                gerr ? gerr->message : "unexpected argument");
        cli_engine_opts_clear(&eo);
        return 2;
    }
    if (max_tokens <= 0) {
        fprintf(stderr, "moedesk-cli chat: -n must be positive\n");
        cli_engine_opts_clear(&eo);
        return 2;
    }

    if (service) {
#ifdef MOEDESK_HAVE_LIBRARY
        g_autofree char *name = NULL;
        if (eo.model) { /* a file path names the model by its stem, as the service does */
            name = g_path_get_basename(eo.model);
            if (g_str_has_suffix(name, ".gguf"))
                name[strlen(name) - 5] = '\0';
        }
        cli_remote_opts ro = {service, name, system, temp, top_p, seed, max_tokens};
        int rrc = cli_chat_remote(&ro);
        cli_engine_opts_clear(&eo);
        return rrc;
#else
        fprintf(stderr, "moedesk-cli chat: --service needs a build with libsoup\n");
        cli_engine_opts_clear(&eo);
        return 2;
#endif
    }

    chat_state s = {0};
    int rc = cli_engine_open(&eo, "chat", &s.model, &s.ctx);
    if (rc != 0) {
        cli_engine_opts_clear(&eo);
        return rc;
    }
    s.vocab = moe_model_vocab(s.model);
    s.max_tokens = max_tokens;
    moe_err err = {{0}};
    const char *src = moe_model_chat_template(s.model);
    bool fallback = src == NULL;
    if (fallback)
        src = cli_fallback_chat_template;
    if (moe_chat_template_parse(src, strlen(src), &s.tmpl, &err) != MOE_OK) {
        fprintf(stderr, "moedesk-cli chat: %s: its chat template: %s\n", eo.model, err.msg);
        chat_state_clear(&s);
        cli_engine_opts_clear(&eo);
        return 1;
    }
    moe_sampler_params sp = moe_sampler_params_default();
    sp.temperature = (float)temp;
    sp.top_k = top_k;
    sp.top_p = (float)top_p;
    sp.seed = seed >= 0 ? (uint64_t)seed : (uint64_t)g_get_real_time() ^ (uint64_t)g_random_int();
    if (moe_sampler_new(moe_model_n_vocab(s.model), &sp, &s.sampler, &err) != MOE_OK) {
        fprintf(stderr, "moedesk-cli chat: %s\n", err.msg);
        chat_state_clear(&s);
        cli_engine_opts_clear(&eo);
        return 2;
    }
    if (cli_gen_init(&s.gen, s.ctx, s.vocab, s.sampler, &err) != MOE_OK) {
        fprintf(stderr, "moedesk-cli chat: %s\n", err.msg);
        chat_state_clear(&s);
        cli_engine_opts_clear(&eo);
        return 1;
    }
    s.roles = g_ptr_array_new_with_free_func(g_free);
    s.contents = g_ptr_array_new_with_free_func(g_free);
    if (system && *system)
        chat_add_message(&s, "system", system);

    const char *name = moe_model_name(s.model);
    fprintf(stderr, "MoeDesk chat — %s (%s, %d-token context, %d threads, %s kernels)\n",
            name && *name ? name : eo.model, moe_model_arch(s.model), moe_context_n_ctx(s.ctx),
            moe_context_n_threads(s.ctx), moe_context_cpu_isa(s.ctx));
    if (name && strstr(name, "random weights"))
        fprintf(stderr, "NOTE: this is the DEMO MODEL. Its weights are random: replies are noise.\n");
    if (fallback)
        fprintf(stderr, "note: the model has no chat template; using ChatML\n");
    fprintf(stderr, "Type a message and press Enter. /reset clears the conversation, /exit leaves.\n");

    signal(SIGINT, chat_on_sigint);
    for (;;) {
        chat_interrupted = 0;
        fputs("> ", stdout);
        fflush(stdout);
        g_autofree char *line = cli_read_line();
        if (!line || chat_interrupted) {
            printf("\n");
            break;
        }
        g_strstrip(line);
        if (!*line)
            continue;
        if (strcmp(line, "/exit") == 0 || strcmp(line, "/quit") == 0)
            break;
        if (strcmp(line, "/reset") == 0) {
            guint keep = (system && *system) ? 1 : 0;
            g_ptr_array_set_size(s.roles, keep);
            g_ptr_array_set_size(s.contents, keep);
            fprintf(stderr, "[conversation cleared]\n");
            continue;
        }
        if (line[0] == '/') {
            fprintf(stderr, "unknown command %s (use /reset or /exit)\n", line);
            continue;
        }
        chat_add_message(&s, "user", line);
        if (!chat_turn(&s))
            chat_drop_last_message(&s);
    }
    signal(SIGINT, SIG_DFL);
    chat_state_clear(&s);
    cli_engine_opts_clear(&eo);
    return 0;
}

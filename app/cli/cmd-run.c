/*
 * cmd-run.c — `moedesk-cli run --model M -p TEXT [-n N] [--temp T]
 * [--seed S] [--chat] [--system TEXT]`: one prompt, one streamed answer.
 * Without --chat the text goes to the model as it is (BOS added where the
 * vocabulary asks, special-token text parsed); with --chat it becomes the
 * user turn of the model's chat template. Ctrl-C stops the answer cleanly.
 * The generated text goes to stdout, the timing line to stderr.
 */
#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t run_interrupted;

static void run_on_sigint(int sig)
{
    (void)sig;
    run_interrupted = 1;
}

/* The prompt's tokens: raw text, or the chat template around it. */
static GArray *run_prompt(const moe_model *model, const char *text, gboolean chat,
                          const char *system, moe_err *err)
{
    const moe_vocab *vocab = moe_model_vocab(model);
    if (!chat)
        return cli_tokenize(vocab, text, strlen(text),
                            MOE_TOKENIZE_ADD_SPECIAL | MOE_TOKENIZE_PARSE_SPECIAL, err);
    const char *src = moe_model_chat_template(model);
    if (!src)
        src = cli_fallback_chat_template;
    moe_chat_template *tmpl = NULL;
    if (moe_chat_template_parse(src, strlen(src), &tmpl, err) != MOE_OK)
        return NULL;
    g_autoptr(GPtrArray) roles = g_ptr_array_new();
    g_autoptr(GPtrArray) contents = g_ptr_array_new();
    if (system && *system) {
        g_ptr_array_add(roles, (gpointer) "system");
        g_ptr_array_add(contents, (gpointer)system);
    }
    g_ptr_array_add(roles, (gpointer) "user");
    g_ptr_array_add(contents, (gpointer)text);
    GArray *toks = cli_chat_prompt(tmpl, vocab, roles, contents, err);
    moe_chat_template_free(tmpl);
    return toks;
}

int cli_cmd_run(int argc, char **argv)
{
    cli_engine_opts eo;
    cli_engine_opts_init(&eo);
    g_autofree char *prompt = NULL, *system = NULL;
    double temp = 0.8, top_p = 0.95;
    gint top_k = 40, n_predict = 128;
    gint64 seed = -1;
    gboolean chat = FALSE;
    GOptionEntry entries[] = {
        {"prompt", 'p', 0, G_OPTION_ARG_STRING, &prompt, "The prompt", "TEXT"},
        {"n-predict", 'n', 0, G_OPTION_ARG_INT, &n_predict, "Most tokens to generate (default 128)", "N"},
        {"temp", 0, 0, G_OPTION_ARG_DOUBLE, &temp, "Sampling temperature, 0 = greedy (default 0.8)", "T"},
        {"top-k", 0, 0, G_OPTION_ARG_INT, &top_k, "Top-k (default 40)", "K"},
        {"top-p", 0, 0, G_OPTION_ARG_DOUBLE, &top_p, "Top-p (default 0.95)", "P"},
        {"seed", 's', 0, G_OPTION_ARG_INT64, &seed, "Random seed (default: a new one each run)", "S"},
        {"chat", 0, 0, G_OPTION_ARG_NONE, &chat, "Apply the model's chat template", NULL},
        {"system", 0, 0, G_OPTION_ARG_STRING, &system, "System prompt (with --chat)", "TEXT"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) oc = g_option_context_new("— generate text for one prompt");
    g_option_context_add_main_entries(oc, entries, NULL);
    g_option_context_add_group(oc, cli_engine_opts_group(&eo));
    g_autoptr(GError) gerr = NULL;
    if (!g_option_context_parse(oc, &argc, &argv, &gerr) || argc != 1 || !prompt || n_predict < 0) {
        fprintf(stderr, "moedesk-cli run: %s\nusage: moedesk-cli run --model FILE.gguf -p TEXT "
                "[-n N] [--temp T] [--seed S] [--chat]\n",
                gerr ? gerr->message : !prompt ? "-p is required" : n_predict < 0 ? "-n must not be negative"
                                                                   : "unexpected argument");
        cli_engine_opts_clear(&eo);
        return 2;
    }
    moe_model *model = NULL;
    moe_context *ctx = NULL;
    int rc = cli_engine_open(&eo, "run", &model, &ctx);
    if (rc != 0) {
        cli_engine_opts_clear(&eo);
        return rc;
    }
    moe_err err = {{0}};
    moe_sampler_params sp = moe_sampler_params_default();
    sp.temperature = (float)temp;
    sp.top_k = top_k;
    sp.top_p = (float)top_p;
    sp.seed = seed >= 0 ? (uint64_t)seed : (uint64_t)g_get_real_time() ^ (uint64_t)g_random_int();
    moe_sampler *sampler = NULL;
    cli_gen gen = {0};
    g_autoptr(GArray) toks = NULL;
    if (moe_sampler_new(moe_model_n_vocab(model), &sp, &sampler, &err) != MOE_OK) {
        fprintf(stderr, "moedesk-cli run: %s\n", err.msg);
        rc = 2;
    } else if (!(toks = run_prompt(model, prompt, chat, system, &err))) {
        fprintf(stderr, "moedesk-cli run: building the prompt: %s\n", err.msg);
        rc = 1;
    } else if (cli_gen_init(&gen, ctx, moe_model_vocab(model), sampler, &err) != MOE_OK) {
        fprintf(stderr, "moedesk-cli run: %s\n", err.msg);
        rc = 1;
    } else {
        cli_gen_stats st;
        run_interrupted = 0;
        signal(SIGINT, run_on_sigint);
        bool ok = cli_generate(&gen, toks, n_predict, stdout, NULL, &run_interrupted, &st, &err);
        signal(SIGINT, SIG_DFL);
        printf("\n");
        fflush(stdout);
        if (!ok) {
            fprintf(stderr, "moedesk-cli run: %s: %s\n", eo.model, err.msg);
            rc = 1;
        } else {
            cli_gen_print_stats(&st);
        }
    }
    cli_gen_clear(&gen);
    moe_sampler_free(sampler);
    moe_context_free(ctx);
    moe_model_free(model);
    cli_engine_opts_clear(&eo);
    return rc;
}

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

/* Used when a model file carries no chat template: ChatML, which most MoE
 * models of the catalog speak. Written here, not taken from any model. */
static const char chat_fallback_template[] =
    "{%- for m in messages %}{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
    "'<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

typedef struct chat_state {
    moe_model         *model;
    moe_context       *ctx;
    const moe_vocab   *vocab;
    moe_chat_template *tmpl;
    moe_sampler       *sampler;
    moe_batch         *batch;
    GPtrArray         *roles;    /* owned strings, one per message          */
    GPtrArray         *contents;
    GArray            *cached;   /* int32 tokens now in the KV cache (seq 0) */
    int                max_tokens;
} chat_state;

static void chat_state_clear(chat_state *s)
{
    moe_batch_free(s->batch);
    moe_sampler_free(s->sampler);
    moe_chat_template_free(s->tmpl);
    moe_context_free(s->ctx);
    moe_model_free(s->model);
    if (s->roles)
        g_ptr_array_unref(s->roles);
    if (s->contents)
        g_ptr_array_unref(s->contents);
    if (s->cached)
        g_array_unref(s->cached);
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

/* Renders the conversation and tokenizes it. Returns a new array or NULL
 * with the error printed. */
static GArray *chat_prompt_tokens(chat_state *s)
{
    guint n = s->roles->len;
    g_autofree moe_chat_msg *msgs = g_new0(moe_chat_msg, n);
    for (guint i = 0; i < n; i++) {
        msgs[i].role = g_ptr_array_index(s->roles, i);
        msgs[i].content = g_ptr_array_index(s->contents, i);
    }
    moe_chat_params p = {0};
    p.messages = msgs;
    p.n_messages = n;
    p.add_generation_prompt = true;
    int32_t bos = moe_vocab_special(s->vocab, MOE_SPECIAL_BOS);
    int32_t eos = moe_vocab_special(s->vocab, MOE_SPECIAL_EOS);
    char bos_text[128] = "", eos_text[128] = "";
    if (bos >= 0) {
        int64_t k = moe_token_to_piece(s->vocab, bos, true, bos_text, sizeof bos_text - 1);
        bos_text[k > 0 && k < (int64_t)sizeof bos_text ? k : 0] = 0;
    }
    if (eos >= 0) {
        int64_t k = moe_token_to_piece(s->vocab, eos, true, eos_text, sizeof eos_text - 1);
        eos_text[k > 0 && k < (int64_t)sizeof eos_text ? k : 0] = 0;
    }
    p.bos_token = bos_text;
    p.eos_token = eos_text;

    moe_err err = {{0}};
    char *prompt = NULL;
    size_t len = 0;
    if (moe_chat_template_render(s->tmpl, &p, &prompt, &len, &err) != MOE_OK) {
        fprintf(stderr, "moedesk-cli chat: chat template: %s\n", err.msg);
        return NULL;
    }
    /* The template writes BOS itself where the model wants one; add it only
     * if the vocabulary asks for it and the prompt lacks it. */
    bool add_bos = moe_vocab_add_bos(s->vocab) && bos >= 0 &&
                   !(bos_text[0] && g_str_has_prefix(prompt, bos_text));
    size_t n_tok = 0;
    moe_tokenize(s->vocab, prompt, len, MOE_TOKENIZE_PARSE_SPECIAL, NULL, 0, &n_tok, &err);
    GArray *toks = g_array_sized_new(FALSE, FALSE, sizeof(int32_t), (guint)n_tok + 1);
    if (add_bos)
        g_array_append_val(toks, bos);
    guint off = toks->len;
    g_array_set_size(toks, off + (guint)n_tok);
    size_t got = 0;
    moe_status st = moe_tokenize(s->vocab, prompt, len, MOE_TOKENIZE_PARSE_SPECIAL,
                                 &g_array_index(toks, int32_t, off), n_tok, &got, &err);
    free(prompt);
    if (st != MOE_OK) {
        fprintf(stderr, "moedesk-cli chat: tokenizing the prompt: %s\n", err.msg);
        g_array_unref(toks);
        return NULL;
    }
    return toks;
}

/* Evaluates toks[from..] as sequence 0 after the cache's first `from`
 * tokens; logits for the last one. */
static moe_status chat_eval(chat_state *s, const int32_t *toks, guint from, guint n, moe_err *err)
{
    int32_t n_batch = moe_context_n_batch(s->ctx);
    for (guint i = from; i < n;) {
        moe_batch_clear(s->batch);
        for (; i < n && s->batch->n_tokens < n_batch; i++)
            moe_batch_add(s->batch, toks[i], (int32_t)i, 0, i + 1 == n);
        moe_status st = moe_decode(s->ctx, s->batch, err);
        if (st != MOE_OK)
            return st;
    }
    return MOE_OK;
}

/* One assistant turn for the conversation as it stands. Returns false if
 * the turn could not run (the message was printed). */
static bool chat_turn(chat_state *s)
{
    g_autoptr(GArray) toks = chat_prompt_tokens(s);
    if (!toks)
        return false;
    int32_t n_ctx = moe_context_n_ctx(s->ctx);
    if ((int64_t)toks->len + 1 > n_ctx) {
        fprintf(stderr, "moedesk-cli chat: the conversation (%u tokens) no longer fits the "
                "context of %d tokens; /reset starts over (or use -c)\n", toks->len, n_ctx);
        return false;
    }
    /* Keep what the cache already holds of this prompt. */
    guint common = 0;
    while (common < s->cached->len && common < toks->len &&
           g_array_index(s->cached, int32_t, common) == g_array_index(toks, int32_t, common))
        common++;
    if (common == toks->len) /* need logits for the last token: redo it */
        common--;
    moe_kv_seq_rm(s->ctx, 0, (int32_t)common, -1);
    g_array_set_size(s->cached, common);

    moe_err err = {{0}};
    gint64 t0 = g_get_monotonic_time();
    if (chat_eval(s, (const int32_t *)toks->data, common, toks->len, &err) != MOE_OK) {
        fprintf(stderr, "moedesk-cli chat: %s\n", err.msg);
        moe_kv_seq_rm(s->ctx, 0, (int32_t)common, -1);
        return false;
    }
    g_array_append_vals(s->cached, &g_array_index(toks, int32_t, common), toks->len - common);
    gint64 t1 = g_get_monotonic_time();

    moe_detok *dt = moe_detok_new(s->vocab, false);
    g_autoptr(GString) reply = g_string_new(NULL);
    moe_sampler_reset(s->sampler);
    int n_gen = 0;
    int32_t pos = (int32_t)toks->len;
    const float *logits = moe_get_logits(s->ctx, s->batch->n_tokens - 1);
    const char *why = "length";
    chat_interrupted = 0;
    while (n_gen < s->max_tokens) {
        if (chat_interrupted) {
            why = "interrupted";
            break;
        }
        int32_t tok = moe_sampler_sample(s->sampler, logits, NULL, 0, &err);
        if (tok < 0) {
            fprintf(stderr, "\nmoedesk-cli chat: sampling: %s\n", err.msg);
            why = "error";
            break;
        }
        moe_sampler_accept(s->sampler, tok);
        n_gen++;
        if (moe_vocab_is_eog(s->vocab, tok)) {
            why = "stop";
            break;
        }
        char piece[1024];
        int64_t k = moe_detok_push(dt, tok, piece, sizeof piece);
        if (k > 0) {
            fwrite(piece, 1, (size_t)k, stdout);
            fflush(stdout);
            g_string_append_len(reply, piece, k);
        }
        if (pos + 1 >= n_ctx) {
            why = "context full";
            break;
        }
        moe_batch_clear(s->batch);
        moe_batch_add(s->batch, tok, pos, 0, true);
        if (moe_decode(s->ctx, s->batch, &err) != MOE_OK) {
            fprintf(stderr, "\nmoedesk-cli chat: %s\n", err.msg);
            why = "error";
            break;
        }
        g_array_append_val(s->cached, tok);
        pos++;
        logits = moe_get_logits(s->ctx, 0);
    }
    char tail[64];
    int64_t k = moe_detok_flush(dt, tail, sizeof tail);
    if (k > 0) {
        fwrite(tail, 1, (size_t)k, stdout);
        g_string_append_len(reply, tail, k);
    }
    moe_detok_free(dt);
    gint64 t2 = g_get_monotonic_time();
    printf("\n");
    fprintf(stderr, "[%u prompt tokens (%u new) in %.2f s, %d generated at %.1f tokens/s, %s]\n",
            toks->len, toks->len - common, (t1 - t0) / 1e6, n_gen,
            n_gen > 0 && t2 > t1 ? n_gen / ((t2 - t1) / 1e6) : 0.0, why);
    fflush(stdout);
    chat_add_message(s, "assistant", reply->str);
    return true;
}

/* Reads one line (any length) without its newline; NULL at end of input. */
static char *chat_read_line(void)
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
    GOptionEntry entries[] = {
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
        src = chat_fallback_template;
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
    s.batch = moe_batch_new(moe_context_n_batch(s.ctx));
    s.roles = g_ptr_array_new_with_free_func(g_free);
    s.contents = g_ptr_array_new_with_free_func(g_free);
    s.cached = g_array_new(FALSE, FALSE, sizeof(int32_t));
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
        g_autofree char *line = chat_read_line();
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

/*
 * cli-engine.c — what the engine commands (eval, run, bench) share: the
 * common options (-m/--model, -t/--threads, -c/--ctx-size, -b/--batch-size,
 * --kv-type) as a GOptionEntry group, and opening a model plus a context
 * from them with errors printed the same way everywhere.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

void cli_engine_opts_init(cli_engine_opts *o)
{
    memset(o, 0, sizeof *o);
    o->n_ctx = 0;
    o->n_batch = 512;
    o->n_seq = 1;
}

GOptionGroup *cli_engine_opts_group(cli_engine_opts *o)
{
    GOptionEntry entries[] = {
        {"model", 'm', 0, G_OPTION_ARG_FILENAME, &o->model, "GGUF model file", "FILE"},
        {"threads", 't', 0, G_OPTION_ARG_INT, &o->n_threads, "CPU threads (default: all)", "N"},
        {"ctx-size", 'c', 0, G_OPTION_ARG_INT, &o->n_ctx, "context size in tokens (default: min(train, 4096))", "N"},
        {"batch-size", 'b', 0, G_OPTION_ARG_INT, &o->n_batch, "most tokens per forward pass (default 512)", "N"},
        {"kv-type", 0, 0, G_OPTION_ARG_STRING, &o->kv_type, "KV cache type: f16 (default), q8_0 or f32", "TYPE"},
        G_OPTION_ENTRY_NULL,
    };
    GOptionGroup *g = g_option_group_new("engine", "Engine options", "Show engine options", NULL, NULL);
    g_option_group_add_entries(g, entries);
    return g;
}

void cli_engine_opts_clear(cli_engine_opts *o)
{
    g_free(o->model);
    g_free(o->kv_type);
    o->model = NULL;
    o->kv_type = NULL;
}

int cli_engine_open(const cli_engine_opts *o, const char *cmd, moe_model **model, moe_context **ctx)
{
    *model = NULL;
    *ctx = NULL;
    if (!o->model) {
        fprintf(stderr, "moedesk-cli %s: --model is required\n", cmd);
        return 2;
    }
    moe_context_params cp = moe_context_default_params();
    cp.n_ctx = o->n_ctx;
    cp.n_batch = o->n_batch;
    cp.n_threads = o->n_threads;
    cp.n_seq_max = o->n_seq;
    if (o->kv_type && !moe_type_from_name(o->kv_type, &cp.kv_type)) {
        fprintf(stderr, "moedesk-cli %s: unknown --kv-type '%s'\n", cmd, o->kv_type);
        return 2;
    }
    moe_err err = {{0}};
    if (moe_model_load(o->model, NULL, model, &err) != MOE_OK) {
        fprintf(stderr, "moedesk-cli %s: %s\n", cmd, err.msg);
        return 1;
    }
    if (moe_context_new(*model, &cp, ctx, &err) != MOE_OK) {
        fprintf(stderr, "moedesk-cli %s: %s\n", cmd, err.msg);
        moe_model_free(*model);
        *model = NULL;
        return 1;
    }
    return 0;
}

/*
 * cmd-inspect.c — `moedesk-cli inspect MODEL.gguf [--json]`: what a model
 * file is, read from its GGUF header only (the file is mapped, not read):
 * architecture, name, parameter count, tensor types histogram, context
 * length, expert counts, tokenizer kind and whether a chat template is
 * present. Useful before downloading a variant or loading it.
 */
#include "cli.h"

#include <glib.h>
#include <stdio.h>
#include <string.h>

typedef struct inspect_info {
    const char *arch;
    const char *name;
    const char *tokenizer;
    const char *pre;
    uint64_t n_ctx_train;
    uint64_t n_expert, n_expert_used, n_layer, n_embd;
    uint64_t n_params;
    uint64_t n_tokens;
    bool has_template;
    uint64_t type_params[MOE_TYPE_COUNT];
    uint64_t type_count[MOE_TYPE_COUNT];
} inspect_info;

static uint64_t arch_u64(const moe_gguf *g, const char *arch, const char *suffix)
{
    g_autofree char *key = g_strdup_printf("%s.%s", arch, suffix);
    return moe_gguf_u64_or(g, key, 0);
}

static void inspect_collect(const moe_gguf *g, inspect_info *in)
{
    memset(in, 0, sizeof *in);
    in->arch = moe_gguf_str_or(g, "general.architecture", "(none)");
    in->name = moe_gguf_str_or(g, "general.name", NULL);
    in->tokenizer = moe_gguf_str_or(g, "tokenizer.ggml.model", NULL);
    in->pre = moe_gguf_str_or(g, "tokenizer.ggml.pre", NULL);
    in->has_template = moe_gguf_find_key(g, "tokenizer.chat_template") >= 0;
    int64_t tok = moe_gguf_find_key(g, "tokenizer.ggml.tokens");
    in->n_tokens = tok >= 0 ? moe_gguf_arr_len(g, tok) : 0;
    in->n_ctx_train = arch_u64(g, in->arch, "context_length");
    in->n_expert = arch_u64(g, in->arch, "expert_count");
    in->n_expert_used = arch_u64(g, in->arch, "expert_used_count");
    in->n_layer = arch_u64(g, in->arch, "block_count");
    in->n_embd = arch_u64(g, in->arch, "embedding_length");
    for (int64_t i = 0; i < moe_gguf_n_tensors(g); i++) {
        const moe_gguf_tensor *t = moe_gguf_tensor_at(g, i);
        uint64_t n = 1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            n *= (uint64_t)t->ne[d];
        in->n_params += n;
        in->type_params[t->type] += n;
        in->type_count[t->type]++;
    }
}

static void print_json_str(GString *out, const char *s)
{
    if (!s) {
        g_string_append(out, "null");
        return;
    }
    g_string_append_c(out, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            g_string_append_printf(out, "\\%c", *p);
        else if (*p < 0x20)
            g_string_append_printf(out, "\\u%04x", *p);
        else
            g_string_append_c(out, (char)*p);
    }
    g_string_append_c(out, '"');
}

static void inspect_print_json(const char *path, const moe_gguf *g, const inspect_info *in)
{
    g_autoptr(GString) o = g_string_new("{\"file\":");
    print_json_str(o, path);
    g_string_append(o, ",\"architecture\":");
    print_json_str(o, in->arch);
    g_string_append(o, ",\"name\":");
    print_json_str(o, in->name);
    g_string_append_printf(o,
        ",\"gguf_version\":%u,\"file_bytes\":%" G_GUINT64_FORMAT ",\"splits\":%u"
        ",\"n_kv\":%" G_GINT64_FORMAT ",\"n_tensors\":%" G_GINT64_FORMAT
        ",\"n_params\":%" G_GUINT64_FORMAT ",\"context_length\":%" G_GUINT64_FORMAT
        ",\"n_layer\":%" G_GUINT64_FORMAT ",\"n_embd\":%" G_GUINT64_FORMAT
        ",\"expert_count\":%" G_GUINT64_FORMAT ",\"expert_used_count\":%" G_GUINT64_FORMAT,
        moe_gguf_version(g), moe_gguf_file_bytes(g), moe_gguf_n_splits(g),
        moe_gguf_n_kv(g), moe_gguf_n_tensors(g), in->n_params, in->n_ctx_train,
        in->n_layer, in->n_embd, in->n_expert, in->n_expert_used);
    g_string_append(o, ",\"tokenizer\":");
    print_json_str(o, in->tokenizer);
    g_string_append(o, ",\"tokenizer_pre\":");
    print_json_str(o, in->pre);
    g_string_append_printf(o, ",\"n_vocab\":%" G_GUINT64_FORMAT ",\"chat_template\":%s,\"tensor_types\":{",
                           in->n_tokens, in->has_template ? "true" : "false");
    bool first = true;
    for (int t = 0; t < MOE_TYPE_COUNT; t++) {
        if (!in->type_count[t])
            continue;
        g_string_append_printf(o, "%s\"%s\":{\"tensors\":%" G_GUINT64_FORMAT ",\"params\":%" G_GUINT64_FORMAT "}",
                               first ? "" : ",", moe_type_name((moe_type)t),
                               in->type_count[t], in->type_params[t]);
        first = false;
    }
    g_string_append(o, "}}\n");
    fputs(o->str, stdout);
}

static void inspect_print_text(const char *path, const moe_gguf *g, const inspect_info *in)
{
    printf("file:           %s\n", path);
    printf("gguf:           version %u, %u file(s), %.2f MiB, %" G_GINT64_FORMAT " keys, %" G_GINT64_FORMAT " tensors\n",
           moe_gguf_version(g), moe_gguf_n_splits(g), moe_gguf_file_bytes(g) / 1048576.0,
           moe_gguf_n_kv(g), moe_gguf_n_tensors(g));
    printf("architecture:   %s\n", in->arch);
    if (in->name)
        printf("name:           %s\n", in->name);
    printf("parameters:     %" G_GUINT64_FORMAT " (%.3f B)\n", in->n_params, in->n_params / 1e9);
    if (in->n_layer)
        printf("layers:         %" G_GUINT64_FORMAT ", embedding %" G_GUINT64_FORMAT "\n", in->n_layer, in->n_embd);
    if (in->n_expert)
        printf("experts:        %" G_GUINT64_FORMAT " (%" G_GUINT64_FORMAT " used per token)\n",
               in->n_expert, in->n_expert_used);
    printf("context length: %" G_GUINT64_FORMAT "\n", in->n_ctx_train);
    if (in->tokenizer)
        printf("tokenizer:      %s%s%s, %" G_GUINT64_FORMAT " tokens\n", in->tokenizer,
               in->pre ? " / pre " : "", in->pre ? in->pre : "", in->n_tokens);
    else
        printf("tokenizer:      (none)\n");
    printf("chat template:  %s\n", in->has_template ? "present" : "absent");
    printf("tensor types:\n");
    for (int t = 0; t < MOE_TYPE_COUNT; t++)
        if (in->type_count[t])
            printf("  %-6s %6" G_GUINT64_FORMAT " tensors %14" G_GUINT64_FORMAT " params (%.1f%%)\n",
                   moe_type_name((moe_type)t), in->type_count[t], in->type_params[t],
                   in->n_params ? 100.0 * in->type_params[t] / in->n_params : 0.0);
}

int cli_cmd_inspect(int argc, char **argv)
{
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print JSON", NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) oc = g_option_context_new("MODEL.gguf — describe a model file");
    g_option_context_add_main_entries(oc, entries, NULL);
    g_autoptr(GError) gerr = NULL;
    if (!g_option_context_parse(oc, &argc, &argv, &gerr) || argc != 2) {
        fprintf(stderr, "moedesk-cli inspect: %s\nusage: moedesk-cli inspect MODEL.gguf [--json]\n",
                gerr ? gerr->message : "expected one model file");
        return 2;
    }
    moe_err err = {{0}};
    moe_gguf *g = NULL;
    if (moe_gguf_open(argv[1], &g, &err) != MOE_OK) {
        fprintf(stderr, "moedesk-cli inspect: %s\n", err.msg);
        return 1;
    }
    inspect_info in;
    inspect_collect(g, &in);
    if (json)
        inspect_print_json(argv[1], g, &in);
    else
        inspect_print_text(argv[1], g, &in);
    moe_gguf_free(g);
    return 0;
}

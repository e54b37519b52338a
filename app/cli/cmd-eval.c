/*
 * cmd-eval.c — `moedesk-cli eval`: runs a list of token ids through the
 * model as one sequence and writes the logits of every position, float32
 * little-endian, one row of n_vocab per input token, row-major. The tests
 * compare this file with the Python reference and with llama.cpp.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses "12 7 9" (spaces, tabs, commas) into a new array. */
static int parse_tokens(const char *s, int32_t **out, int32_t *n_out)
{
    GArray *a = g_array_new(FALSE, FALSE, sizeof(int32_t));
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',' || *p == '\n')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < INT32_MIN || v > INT32_MAX) {
            fprintf(stderr, "moedesk-cli eval: '%.20s' is not a token id\n", p);
            g_array_free(a, TRUE);
            return 1;
        }
        int32_t t = (int32_t)v;
        g_array_append_val(a, t);
        p = end;
    }
    *n_out = (int32_t)a->len;
    *out = (int32_t *)(void *)g_array_free(a, FALSE);
    return 0;
}

/* Writes n floats little-endian whatever the host order. */
static bool write_f32_le(FILE *f, const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &v[i], 4);
        unsigned char c[4] = {(unsigned char)b, (unsigned char)(b >> 8), (unsigned char)(b >> 16),
                              (unsigned char)(b >> 24)};
        if (fwrite(c, 1, 4, f) != 4)
            return false;
    }
    return true;
}

int cli_cmd_eval(int argc, char **argv)
{
    cli_engine_opts eo;
    cli_engine_opts_init(&eo);
    char *tokens = NULL, *logits_path = NULL;
    GOptionEntry entries[] = {
        {"tokens", 0, 0, G_OPTION_ARG_STRING, &tokens, "token ids, separated by spaces", "\"ID ID ...\""},
        {"logits", 0, 0, G_OPTION_ARG_FILENAME, &logits_path, "where to write the logits", "FILE"},
        G_OPTION_ENTRY_NULL,
    };
    GOptionContext *oc = g_option_context_new("- logits of a token sequence");
    g_option_context_add_main_entries(oc, entries, NULL);
    g_option_context_add_group(oc, cli_engine_opts_group(&eo));
    GError *gerr = NULL;
    int rc = 0;
    moe_model *model = NULL;
    moe_context *ctx = NULL;
    moe_batch *batch = NULL;
    int32_t *ids = NULL, n = 0;
    FILE *f = NULL;

    if (!g_option_context_parse(oc, &argc, &argv, &gerr)) {
        fprintf(stderr, "moedesk-cli eval: %s\n", gerr->message);
        rc = 2;
        goto done;
    }
    if (!tokens || !logits_path) {
        fprintf(stderr, "moedesk-cli eval: --tokens and --logits are required\n");
        rc = 2;
        goto done;
    }
    if ((rc = parse_tokens(tokens, &ids, &n)) != 0)
        goto done;
    if (n == 0) {
        fprintf(stderr, "moedesk-cli eval: no tokens given\n");
        rc = 1;
        goto done;
    }
    if ((rc = cli_engine_open(&eo, "eval", &model, &ctx)) != 0)
        goto done;
    if (n > moe_context_n_ctx(ctx)) {
        fprintf(stderr, "moedesk-cli eval: %d tokens do not fit in the context (n_ctx %d; use -c)\n", n,
                moe_context_n_ctx(ctx));
        rc = 1;
        goto done;
    }
    f = fopen(logits_path, "wb");
    if (!f) {
        fprintf(stderr, "moedesk-cli eval: %s: %s\n", logits_path, strerror(errno));
        rc = 1;
        goto done;
    }
    const int32_t nb = moe_context_n_batch(ctx), n_vocab = moe_model_n_vocab(model);
    batch = moe_batch_new(nb);
    if (!batch) {
        rc = 1;
        goto done;
    }
    for (int32_t i0 = 0; i0 < n; i0 += nb) {
        moe_batch_clear(batch);
        for (int32_t i = i0; i < n && i < i0 + nb; i++)
            moe_batch_add(batch, ids[i], i, 0, true);
        moe_err err = {{0}};
        if (moe_decode(ctx, batch, &err) != MOE_OK) {
            fprintf(stderr, "moedesk-cli eval: %s\n", err.msg);
            rc = 1;
            goto done;
        }
        for (int32_t j = 0; j < batch->n_tokens; j++)
            if (!write_f32_le(f, moe_get_logits(ctx, j), (size_t)n_vocab)) {
                fprintf(stderr, "moedesk-cli eval: %s: write failed\n", logits_path);
                rc = 1;
                goto done;
            }
    }
    if (fclose(f) != 0) {
        f = NULL;
        fprintf(stderr, "moedesk-cli eval: %s: %s\n", logits_path, strerror(errno));
        rc = 1;
        goto done;
    }
    f = NULL;

done:
    if (f)
        fclose(f);
    g_clear_error(&gerr);
    g_option_context_free(oc);
    g_free(tokens);
    g_free(logits_path);
    g_free(ids);
    moe_batch_free(batch);
    moe_context_free(ctx);
    moe_model_free(model);
    cli_engine_opts_clear(&eo);
    return rc;
}

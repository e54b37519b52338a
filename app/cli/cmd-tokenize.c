/*
 * cmd-tokenize.c — `moedesk-cli tokenize --model M [--add-special]
 * [--parse-special]`: reads UTF-8 text from stdin and prints the token ids,
 * separated by single spaces, on one line. Without flags no BOS/EOS is added
 * and special-token text ("<|im_start|>") is tokenized as plain text, which
 * is what tokenizer conformance tests compare against.
 */
#include "cli.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef G_OS_WIN32
#include <fcntl.h>
#include <io.h>
#endif

/* Reads all of stdin into a GByteArray (binary-safe). NULL on read error. */
static GByteArray *read_stdin(void)
{
#ifdef G_OS_WIN32
    _setmode(_fileno(stdin), _O_BINARY);
#endif
    GByteArray *buf = g_byte_array_new();
    guint8 chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
        g_byte_array_append(buf, chunk, (guint)n);
    if (ferror(stdin)) {
        g_byte_array_unref(buf);
        return NULL;
    }
    return buf;
}

int cli_cmd_tokenize(int argc, char **argv)
{
    g_autofree char *model_path = NULL;
    gboolean add_special = FALSE, parse_special = FALSE;
    GOptionEntry entries[] = {
        {"model", 'm', 0, G_OPTION_ARG_FILENAME, &model_path, "Model or vocabulary GGUF file", "FILE"},
        {"add-special", 0, 0, G_OPTION_ARG_NONE, &add_special, "Add BOS/EOS as the vocabulary asks", NULL},
        {"parse-special", 0, 0, G_OPTION_ARG_NONE, &parse_special,
         "Turn special-token text into the special token", NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) oc = g_option_context_new("— tokenize text read from stdin");
    g_option_context_add_main_entries(oc, entries, NULL);
    g_autoptr(GError) gerr = NULL;
    if (!g_option_context_parse(oc, &argc, &argv, &gerr) || !model_path || argc != 1) {
        fprintf(stderr, "moedesk-cli tokenize: %s\nusage: moedesk-cli tokenize --model FILE.gguf "
                "[--add-special] [--parse-special] < text\n",
                gerr ? gerr->message : !model_path ? "--model is required" : "unexpected argument");
        return 2;
    }

    moe_err err = {{0}};
    moe_gguf *g = NULL;
    moe_vocab *v = NULL;
    if (moe_gguf_open(model_path, &g, &err) != MOE_OK || moe_vocab_load(g, &v, &err) != MOE_OK) {
        if (v == NULL && g != NULL && strstr(err.msg, model_path) == NULL) {
            /* vocab errors name the key; add the file so the user knows which */
            fprintf(stderr, "moedesk-cli tokenize: %s: %s\n", model_path, err.msg);
        } else {
            fprintf(stderr, "moedesk-cli tokenize: %s\n", err.msg);
        }
        moe_gguf_free(g);
        return 1;
    }
    moe_gguf_free(g);

    g_autoptr(GByteArray) text = read_stdin();
    if (!text) {
        fprintf(stderr, "moedesk-cli tokenize: reading standard input failed\n");
        moe_vocab_free(v);
        return 1;
    }
    unsigned flags = (add_special ? MOE_TOKENIZE_ADD_SPECIAL : 0) |
                     (parse_special ? MOE_TOKENIZE_PARSE_SPECIAL : 0);
    size_t cap = text->len + 16, n = 0;
    int32_t *ids = g_new(int32_t, cap);
    moe_status st = moe_tokenize(v, (const char *)text->data, text->len, flags, ids, cap, &n, &err);
    if (st == MOE_ERR_RANGE) {
        cap = n;
        ids = g_renew(int32_t, ids, cap);
        st = moe_tokenize(v, (const char *)text->data, text->len, flags, ids, cap, &n, &err);
    }
    int rc = 0;
    if (st != MOE_OK) {
        fprintf(stderr, "moedesk-cli tokenize: %s: %s\n", model_path, err.msg);
        rc = 1;
    } else {
        g_autoptr(GString) line = g_string_sized_new(n * 7 + 1);
        for (size_t i = 0; i < n; i++)
            g_string_append_printf(line, i ? " %d" : "%d", ids[i]);
        g_string_append_c(line, '\n');
        fwrite(line->str, 1, line->len, stdout);
    }
    g_free(ids);
    moe_vocab_free(v);
    return rc;
}

/*
 * cmd-demo.c — `moedesk-cli demo-model OUT.gguf [--seed S]`: writes the demo
 * model (random weights, see engine/src/demo-model.c). The build runs it so
 * that a fresh checkout has something to load before any download.
 */
#include "cli.h"

#include <glib.h>
#include <stdio.h>

int cli_cmd_demo_model(int argc, char **argv)
{
    gint64 seed = 1;
    GOptionEntry entries[] = {
        {"seed", 's', 0, G_OPTION_ARG_INT64, &seed, "Random seed (same seed, same file)", "S"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) oc = g_option_context_new("OUT.gguf — write the random-weight demo model");
    g_option_context_add_main_entries(oc, entries, NULL);
    g_autoptr(GError) gerr = NULL;
    if (!g_option_context_parse(oc, &argc, &argv, &gerr) || argc != 2) {
        fprintf(stderr, "moedesk-cli demo-model: %s\nusage: moedesk-cli demo-model OUT.gguf [--seed S]\n",
                gerr ? gerr->message : "expected one output file");
        return 2;
    }
    moe_err err = {{0}};
    if (moe_demo_model_write(argv[1], (uint64_t)seed, &err) != MOE_OK) {
        fprintf(stderr, "moedesk-cli demo-model: %s\n", err.msg);
        return 1;
    }
    return 0;
}

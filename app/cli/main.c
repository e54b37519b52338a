/*
 * main.c — moedesk-cli entry point: finds the subcommand and hands argv to
 * it. Each subcommand lives in its own cmd-*.c file and returns the process
 * exit status (0 success, 1 bad input or failure, 2 usage error).
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const cli_command commands[] = {
    {"bench", "measure prefill and decode speed", cli_cmd_bench},
    {"chat", "chat with a model in the terminal", cli_cmd_chat},
    {"demo-model", "write the random-weight demo model", cli_cmd_demo_model},
    {"eval", "write the logits of a token sequence", cli_cmd_eval},
    {"hw", "describe this machine: CPU, RAM, GPUs", cli_cmd_hw},
    {"inspect", "describe a GGUF model file", cli_cmd_inspect},
    {"plan", "plan memory for a model on this machine", cli_cmd_plan},
    {"quantize", "rewrite a model at another tensor type", cli_cmd_quantize},
    {"run", "generate text for one prompt", cli_cmd_run},
    {"report", "weekly adoption and cost report from the usage database", cli_cmd_report},
    {"tokenize", "tokenize stdin with a model's vocabulary", cli_cmd_tokenize},
    {"usage", "import request logs, export them to PostgreSQL", cli_cmd_usage},
    {"version", "print the version", cli_cmd_version},
#ifdef MOEDESK_HAVE_LIBRARY
    {"import", "convert a Hugging Face checkpoint folder into GGUF", cli_cmd_import},
    {"keys", "create, list and revoke the service's API keys", cli_cmd_keys},
    {"pull", "download a model (resumable, verified)", cli_cmd_pull},
    {"verify", "re-check an installed model's files", cli_cmd_verify},
    {"list", "list installed models", cli_cmd_list},
    {"rm", "remove an installed model", cli_cmd_rm},
#endif
};

static void print_usage(FILE *out)
{
    fprintf(out, "usage: moedesk-cli COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nRun 'moedesk-cli COMMAND --help' for a command's options.\n");
}

int cli_cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("moedesk-cli %s (libmoe %s)\n", MOEDESK_VERSION, moe_version());
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        print_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "moedesk-cli: unknown command '%s'\n", argv[1]);
    print_usage(stderr);
    return 2;
}

/*
 * chat-render-tool.c — renders a chat template with libmoe from a JSON
 * context file, for the conformance test against @huggingface/jinja
 * (tests/scripts/chat-conformance.py) and for trying templates by hand.
 *
 *   chat-render-tool TEMPLATE.jinja CONTEXT.json
 *
 * CONTEXT.json is an object of template variables ("messages",
 * "add_generation_prompt", "tools", "bos_token", ...), the same object
 * tests/node/render-template.mjs passes to @huggingface/jinja. Every member
 * becomes a variable (through extra_context_json, which is applied last).
 * strftime_now is pinned to 2024-07-26 12:00 UTC so output is stable.
 * Prints the prompt on stdout; on failure prints "error: <status>: <msg>"
 * on stderr and exits 1 (2 for usage or I/O problems).
 */
#include "moe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _WIN32
#include <fcntl.h>
#include <io.h>
#endif

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        cap *= 2;
        char *nb = realloc(buf, cap + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
        }
        buf = nb;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        *len = n;
    }
    return buf;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s TEMPLATE.jinja CONTEXT.json\n", argv[0]);
        return 2;
    }
    size_t tlen, clen;
    char *src = read_file(argv[1], &tlen);
    char *ctx = read_file(argv[2], &clen);
    if (!src || !ctx) {
        fprintf(stderr, "error: cannot read %s\n", !src ? argv[1] : argv[2]);
        free(src);
        free(ctx);
        return 2;
    }
    moe_err err = {{0}};
    moe_chat_template *t = NULL;
    moe_status st = moe_chat_template_parse(src, tlen, &t, &err);
    char *out = NULL;
    size_t out_len = 0;
    if (st == MOE_OK) {
        moe_chat_params p = {0};
        p.extra_context_json = ctx;
        p.now_unix = 1721995200; /* 2024-07-26 12:00:00 UTC */
        st = moe_chat_template_render_json(t, "[]", &p, &out, &out_len, &err);
    }
    int rc = 0;
    if (st == MOE_OK) {
#ifdef _WIN32
        _setmode(_fileno(stdout), _O_BINARY); /* the prompt's bytes, not CRLF */
#endif
        fwrite(out, 1, out_len, stdout);
    } else {
        fprintf(stderr, "error: %s: %s\n", moe_status_str(st), err.msg);
        rc = 1;
    }
    free(out);
    moe_chat_template_free(t);
    free(src);
    free(ctx);
    return rc;
}

/*
 * tok-tool.c — the tokenizer's door for test scripts:
 *
 *   tok-tool ids VOCAB.gguf CASES OUT
 *       tokenizes every case of CASES (llama.cpp's .inp format) with each
 *       flag combination and writes "meta add_bos=.. add_eos=.. bos=.. eos=.."
 *       and "<case> <flags>: id id ..." lines, the format of
 *       tests/node/tokenize-ref.mjs and tests/scripts/llama_tokenize_ref.py.
 *   tok-tool set-pre IN.gguf OUT.gguf PRE
 *       copies a vocabulary-only GGUF file with tokenizer.ggml.pre set to
 *       PRE (to try a pre-tokenizer on a vocabulary that never had it).
 *   tok-tool eog VOCAB.gguf
 *       prints "eog: id ..." (the ids moe_vocab_is_eog accepts) and
 *       "special eot=<id> nl=<id>", as tokenize-ref.mjs does.
 */
#include "moe.h"
#include "tok-test-util.h"

static int cmd_ids(const char *vocab_path, const char *cases_path, const char *out_path)
{
    moe_vocab *v = tt_open_vocab(vocab_path);
    size_t len = 0;
    char *data = tt_read_file(cases_path, &len);
    FILE *out = fopen(out_path, "wb");
    if (!v || !data || !out) {
        fprintf(stderr, "tok-tool: cannot open %s, %s or %s\n", vocab_path, cases_path, out_path);
        return 1;
    }
    tt_case *cases = NULL;
    size_t n_cases = tt_split_cases(data, len, &cases);
    fprintf(out, "meta add_bos=%d add_eos=%d bos=%d eos=%d\n", moe_vocab_add_bos(v),
            moe_vocab_add_eos(v), moe_vocab_special(v, MOE_SPECIAL_BOS),
            moe_vocab_special(v, MOE_SPECIAL_EOS));
    size_t cap = 1024;
    int32_t *ids = malloc(cap * sizeof *ids);
    int rc = 0;
    for (size_t c = 0; c < n_cases && rc == 0; c++) {
        for (unsigned flags = 0; flags < 4; flags++) {
            size_t n = 0;
            moe_err err = {{0}};
            moe_status st = moe_tokenize(v, cases[c].ptr, cases[c].len, flags, ids, cap, &n, &err);
            if (st == MOE_ERR_RANGE) {
                cap = n;
                free(ids);
                ids = malloc(cap * sizeof *ids);
                st = ids ? moe_tokenize(v, cases[c].ptr, cases[c].len, flags, ids, cap, &n, &err)
                         : MOE_ERR_NOMEM;
            }
            if (st != MOE_OK) {
                fprintf(stderr, "tok-tool: case %zu: %s\n", c, err.msg);
                rc = 1;
                break;
            }
            fprintf(out, "%zu %u:", c, flags);
            for (size_t i = 0; i < n; i++)
                fprintf(out, " %d", ids[i]);
            fputc('\n', out);
        }
    }
    free(ids);
    free(cases);
    free(data);
    fclose(out);
    moe_vocab_free(v);
    return rc;
}

static int cmd_set_pre(const char *in, const char *outp, const char *pre)
{
    moe_gguf *g = NULL;
    moe_err err = {{0}};
    if (moe_gguf_open(in, &g, &err) != MOE_OK) {
        fprintf(stderr, "tok-tool: %s\n", err.msg);
        return 1;
    }
    if (moe_gguf_n_tensors(g) != 0) {
        fprintf(stderr, "tok-tool: %s has tensors; set-pre copies vocabulary-only files\n", in);
        moe_gguf_free(g);
        return 1;
    }
    moe_gguf_writer *w = moe_gguf_writer_new();
    moe_status st = w ? MOE_OK : MOE_ERR_NOMEM;
    for (int64_t i = 0; st == MOE_OK && i < moe_gguf_n_kv(g); i++)
        st = moe_gguf_writer_copy_kv(w, g, i);
    if (st == MOE_OK)
        st = moe_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    if (st == MOE_OK)
        st = moe_gguf_writer_write_file(w, outp, &err);
    if (st != MOE_OK)
        fprintf(stderr, "tok-tool: writing %s: %s %s\n", outp, moe_status_str(st), err.msg);
    moe_gguf_writer_free(w);
    moe_gguf_free(g);
    return st == MOE_OK ? 0 : 1;
}

static int cmd_eog(const char *path)
{
    moe_vocab *v = tt_open_vocab(path);
    if (!v)
        return 1;
    printf("eog:");
    for (int32_t i = 0; i < moe_vocab_n_tokens(v); i++)
        if (moe_vocab_is_eog(v, i))
            printf(" %d", i);
    printf("\nspecial eot=%d nl=%d\n", moe_vocab_special(v, MOE_SPECIAL_EOT),
           moe_vocab_special(v, MOE_SPECIAL_NL));
    moe_vocab_free(v);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "ids") == 0)
        return cmd_ids(argv[2], argv[3], argv[4]);
    if (argc == 5 && strcmp(argv[1], "set-pre") == 0)
        return cmd_set_pre(argv[2], argv[3], argv[4]);
    if (argc == 3 && strcmp(argv[1], "eog") == 0)
        return cmd_eog(argv[2]);
    fprintf(stderr, "usage: tok-tool ids VOCAB CASES OUT | set-pre IN OUT PRE | eog VOCAB\n");
    return 2;
}

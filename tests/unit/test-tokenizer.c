/*
 * test-tokenizer.c — real vocabularies against llama.cpp's expected ids.
 *
 *   test-tokenizer [DIR [NAME.gguf ...]]
 *
 * For each vocabulary file in DIR (default $MOE_SHARED_DATA/vocab; all
 * *.gguf that have .inp and .out beside them, or the NAMEs given) every
 * case of the .inp file is tokenized without add_special and without
 * parse_special and must give exactly the ids on its .out line. Each result
 * is then detokenized, both by pieces and through the streaming
 * detokenizer, and must give back the input bytes (SentencePiece adds one
 * leading space, which is dropped as llama.cpp's detokenizer drops it).
 * Nothing is skipped: a missing file or a vocabulary that fails to load is
 * a failure.
 */
#include "moe.h"
#include "test.h"
#include "tok-test-util.h"

#include <dirent.h>

#define MAX_IDS 65536

static int32_t got[MAX_IDS], want[MAX_IDS];

static void show_ids(const char *what, const int32_t *ids, size_t n)
{
    fprintf(stderr, "    %s:", what);
    for (size_t i = 0; i < n && i < 40; i++)
        fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

/* Streams ids through moe_detok and returns the text (malloc'd). */
static char *stream_detok(const moe_vocab *v, const int32_t *ids, size_t n, size_t *len)
{
    moe_detok *d = moe_detok_new(v, false);
    size_t cap = 1024, o = 0;
    char *out = malloc(cap);
    char buf[8192];
    for (size_t i = 0; d && out && i <= n; i++) {
        int64_t k = i < n ? moe_detok_push(d, ids[i], buf, sizeof buf)
                          : moe_detok_flush(d, buf, sizeof buf);
        if (k < 0)
            break;
        if (o + (size_t)k + 1 > cap) {
            cap = 2 * (o + (size_t)k + 1);
            char *nb = realloc(out, cap);
            if (!nb)
                break;
            out = nb;
        }
        memcpy(out + o, buf, (size_t)k);
        o += (size_t)k;
    }
    moe_detok_free(d);
    *len = o;
    return out;
}

static void check_vocab(const char *dir, const char *name)
{
    char path[2048], inp_path[2100], out_path[2100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(inp_path, sizeof inp_path, "%s.inp", path);
    snprintf(out_path, sizeof out_path, "%s.out", path);
    size_t inp_len = 0, out_len = 0;
    char *inp = tt_read_file(inp_path, &inp_len);
    char *outs = tt_read_file(out_path, &out_len);
    moe_vocab *v = tt_open_vocab(path);
    CHECK_MSG(inp && outs && v, "%s: cannot read the vocabulary or its .inp/.out", path);
    if (!inp || !outs || !v)
        goto done;

    tt_case *cases = NULL;
    size_t n_cases = tt_split_cases(inp, inp_len, &cases);
    size_t n_lines = 0;
    for (size_t i = 0; i < out_len; i++)
        n_lines += outs[i] == '\n';
    CHECK_MSG(n_cases == n_lines && n_cases > 0, "%s: %zu cases but %zu expected lines", name,
              n_cases, n_lines);

    const char *op = outs, *oend = outs + out_len;
    size_t ok = 0, rt_ok = 0, rt_total = 0;
    for (size_t c = 0; c < n_cases && op < oend; c++) {
        size_t n_want = tt_parse_ids(&op, oend, want, MAX_IDS), n_got = 0;
        moe_err err = {{0}};
        moe_status st = moe_tokenize(v, cases[c].ptr, cases[c].len, 0, got, MAX_IDS, &n_got,
                                     &err);
        bool same = st == MOE_OK && n_got == n_want &&
                    memcmp(got, want, n_got * sizeof(int32_t)) == 0;
        if (!same) {
            CHECK_MSG(same, "%s case %zu (\"%.*s\"): ids differ (%s)", name, c,
                      (int)(cases[c].len < 60 ? cases[c].len : 60), cases[c].ptr,
                      st == MOE_OK ? "ok" : err.msg);
            show_ids("want", want, n_want);
            show_ids("got ", got, n_got);
            continue;
        }
        ok++;

        /* Round trip. */
        size_t dl = 0, sl = 0;
        char *text = tt_detok(v, got, n_got, 0, &dl);
        char *streamed = stream_detok(v, got, n_got, &sl);
        const char *t = text;
        if (moe_vocab_kind_of(v) == MOE_VOCAB_SPM && dl > 0 && t[0] == ' ') {
            t++;
            dl--;
        }
        const char *s = streamed;
        if (moe_vocab_kind_of(v) == MOE_VOCAB_SPM && sl > 0 && s[0] == ' ') {
            s++;
            sl--;
        }
        rt_total++;
        bool rt = text && streamed && dl == cases[c].len && memcmp(t, cases[c].ptr, dl) == 0 &&
                  sl == dl && memcmp(s, t, dl) == 0;
        CHECK_MSG(rt, "%s case %zu: detokenized text differs from the input", name, c);
        rt_ok += rt;
        free(text);
        free(streamed);
    }
    fprintf(stderr, "%s: %zu/%zu cases match llama.cpp, %zu/%zu round trips\n", name, ok,
            n_cases, rt_ok, rt_total);
    free(cases);
done:
    moe_vocab_free(v);
    free(inp);
    free(outs);
}

static int has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

int main(int argc, char **argv)
{
    char dir[1024];
    if (argc > 1) {
        snprintf(dir, sizeof dir, "%s", argv[1]);
    } else {
        const char *shared = getenv("MOE_SHARED_DATA");
        CHECK_MSG(shared != NULL, "MOE_SHARED_DATA is not set");
        snprintf(dir, sizeof dir, "%s/vocab", shared ? shared : ".");
    }
    int n_vocabs = 0;
    if (argc > 2) {
        for (int i = 2; i < argc; i++, n_vocabs++)
            check_vocab(dir, argv[i]);
    } else {
        DIR *d = opendir(dir);
        CHECK_MSG(d != NULL, "cannot list %s", dir);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (!has_suffix(e->d_name, ".gguf"))
                continue;
            char probe[2100];
            snprintf(probe, sizeof probe, "%s/%s.inp", dir, e->d_name);
            FILE *f = fopen(probe, "rb");
            if (!f)
                continue;
            fclose(f);
            check_vocab(dir, e->d_name);
            n_vocabs++;
        }
        if (d)
            closedir(d);
    }
    CHECK_MSG(n_vocabs > 0, "no vocabulary with .inp/.out found in %s", dir);
    TEST_DONE();
}

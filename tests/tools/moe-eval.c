/*
 * moe-eval.c — the engine's side of the forward-pass comparisons
 * (tests/scripts/test_forward.py): evaluates a token sequence with libmoe
 * and writes the logits of every position (float32 little-endian
 * [n_tokens, n_vocab], the format of `moedesk-cli eval` and of
 * ref_forward.py), then continues greedily. Engine only (no GLib), so the
 * comparison also runs where the app is not built.
 *
 *   moe-eval MODEL --tokens 1,2,3 [--logits OUT.f32] [--generate N]
 *            [--threads N] [--batch N] [--kv f16|q8_0|f32]
 *   stdout: {"n_vocab": V, "n_tokens": T, "top1": [...], "generated": [...],
 *            "gen_gap": [...]}   gen_gap[i] = logit gap between the best and
 *            second-best token when generated[i] was chosen (near ties are
 *            small).
 */
#include "moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int argmax2(const float *v, int n, float *gap)
{
    int b = 0, s = -1;
    for (int i = 1; i < n; i++) {
        if (v[i] > v[b]) {
            s = b;
            b = i;
        } else if (s < 0 || v[i] > v[s]) {
            s = i;
        }
    }
    if (gap)
        *gap = s >= 0 ? v[b] - v[s] : INFINITY;
    return b;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: moe-eval MODEL --tokens 1,2,3 [--logits OUT] [--generate N] "
                        "[--threads N] [--batch N] [--kv f16|q8_0|f32]\n");
        return 2;
    }
    const char *model_path = argv[1], *tokens_arg = NULL, *logits_path = NULL, *kv = "f16";
    int n_gen = 0, threads = 2, n_batch = 512;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--tokens") == 0) tokens_arg = argv[i + 1];
        else if (strcmp(argv[i], "--logits") == 0) logits_path = argv[i + 1];
        else if (strcmp(argv[i], "--generate") == 0) n_gen = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--threads") == 0) threads = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--batch") == 0) n_batch = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--kv") == 0) kv = argv[i + 1];
        else {
            fprintf(stderr, "moe-eval: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!tokens_arg)
        return 2;
    int n = 0, cap = 16;
    int32_t *toks = malloc((size_t)cap * sizeof(int32_t));
    for (const char *p = tokens_arg; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        if (n == cap)
            toks = realloc(toks, (size_t)(cap *= 2) * sizeof(int32_t));
        toks[n++] = (int32_t)v;
        p = *end == ',' ? end + 1 : end;
    }

    moe_err err = {{0}};
    moe_model *m = NULL;
    moe_context *c = NULL;
    if (moe_model_load(model_path, NULL, &m, &err) != MOE_OK) {
        fprintf(stderr, "moe-eval: %s\n", err.msg);
        return 1;
    }
    moe_context_params cp = moe_context_default_params();
    cp.n_ctx = n + n_gen + 8;
    cp.n_batch = n_batch;
    cp.n_threads = threads;
    if (!moe_type_from_name(kv, &cp.kv_type)) {
        fprintf(stderr, "moe-eval: unknown --kv %s\n", kv);
        return 2;
    }
    if (moe_context_new(m, &cp, &c, &err) != MOE_OK) {
        fprintf(stderr, "moe-eval: %s\n", err.msg);
        return 1;
    }
    const int V = moe_model_n_vocab(m);
    FILE *f = logits_path ? fopen(logits_path, "wb") : NULL;
    int *top1 = malloc((size_t)(n + 1) * sizeof(int));
    float *gaps = malloc((size_t)(n_gen + 1) * sizeof(float));
    float last_gap = INFINITY;
    moe_batch *b = moe_batch_new(n_batch);
    int rc = 0;
    for (int i0 = 0; i0 < n && rc == 0; i0 += n_batch) {
        moe_batch_clear(b);
        for (int i = i0; i < n && i < i0 + n_batch; i++)
            moe_batch_add(b, toks[i], i, 0, true);
        if (moe_decode(c, b, &err) != MOE_OK) {
            fprintf(stderr, "moe-eval: %s\n", err.msg);
            rc = 1;
            break;
        }
        for (int j = 0; j < b->n_tokens; j++) {
            const float *l = moe_get_logits(c, j);
            top1[i0 + j] = argmax2(l, V, &last_gap);
            if (f && fwrite(l, sizeof(float), (size_t)V, f) != (size_t)V)
                rc = 1;
        }
    }
    if (f)
        fclose(f);
    printf("{\"n_vocab\": %d, \"n_tokens\": %d, \"top1\": [", V, n);
    for (int i = 0; i < n && rc == 0; i++)
        printf("%s%d", i ? ", " : "", top1[i]);
    printf("], \"generated\": [");
    int tok = n > 0 ? top1[n - 1] : 0;
    int n_done = 0;
    gaps[n_done++] = last_gap;
    for (int g = 0; g < n_gen && rc == 0; g++) {
        /* step g's token was chosen from the previous logits */
        printf("%s%d", g ? ", " : "", tok);
        if (g == n_gen - 1)
            break;
        moe_batch_clear(b);
        moe_batch_add(b, tok, n + g, 0, true);
        if (moe_decode(c, b, &err) != MOE_OK) {
            fprintf(stderr, "moe-eval: %s\n", err.msg);
            rc = 1;
            break;
        }
        tok = argmax2(moe_get_logits(c, 0), V, &gaps[n_done++]);
    }
    printf("], \"gen_gap\": [");
    for (int i = 0; i < n_done; i++)
        printf("%s%.6g", i ? ", " : "", (double)gaps[i]);
    printf("]}\n");
    free(gaps);
    free(top1);
    free(toks);
    moe_batch_free(b);
    moe_context_free(c);
    moe_model_free(m);
    return rc;
}

/*
 * sampler-tool.c — runs moe_sampler_probs on cases read from stdin and
 * prints the final candidate probabilities, so tests/scripts/
 * test_sampler_ref.py can compare them with its own numpy implementation
 * of the documented chain. Not a unit test by itself.
 *
 * Input, whitespace-separated, any number of cases until EOF:
 *   n_vocab temperature top_k top_p min_p repeat_penalty penalty_last_n
 *       presence_penalty frequency_penalty
 *   n_recent  token...
 *   n_bias    token bias ...
 *   n_vocab logits ("nan", "inf", "-inf" allowed)
 * Output per case:
 *   "case <i> ok <n_total>" then n_total lines "<token> <prob %.9g>", or
 *   "case <i> error <message>".
 */
#include "moe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_f(float *out)
{
    char tok[64];
    if (scanf("%63s", tok) != 1)
        return 0;
    *out = strtof(tok, NULL);
    return 1;
}

int main(void)
{
    int n_vocab;
    for (int c = 0; scanf("%d", &n_vocab) == 1; c++) {
        moe_sampler_params p = moe_sampler_params_default();
        size_t n_recent, n_bias;
        if (!read_f(&p.temperature) || scanf("%d", &p.top_k) != 1 || !read_f(&p.top_p) ||
            !read_f(&p.min_p) || !read_f(&p.repeat_penalty) ||
            scanf("%d", &p.penalty_last_n) != 1 || !read_f(&p.presence_penalty) ||
            !read_f(&p.frequency_penalty) || scanf("%zu", &n_recent) != 1) {
            fprintf(stderr, "case %d: bad header\n", c);
            return 2;
        }
        int32_t *recent = malloc((n_recent + 1) * sizeof *recent);
        for (size_t i = 0; i < n_recent; i++)
            if (scanf("%d", &recent[i]) != 1)
                return 2;
        if (scanf("%zu", &n_bias) != 1)
            return 2;
        moe_logit_bias *bias = malloc((n_bias + 1) * sizeof *bias);
        for (size_t i = 0; i < n_bias; i++)
            if (scanf("%d", &bias[i].token) != 1 || !read_f(&bias[i].bias))
                return 2;
        p.logit_bias = bias;
        p.n_logit_bias = n_bias;
        size_t nv = n_vocab > 0 ? (size_t)n_vocab : 0;
        float *logits = malloc((nv + 1) * sizeof *logits);
        moe_token_prob *out = malloc((nv + 1) * sizeof *out);
        for (size_t i = 0; i < nv; i++)
            if (!read_f(&logits[i]))
                return 2;

        moe_err err = {{0}};
        moe_sampler *s = NULL;
        size_t n_total = 0;
        moe_status st = moe_sampler_new(n_vocab, &p, &s, &err);
        if (st == MOE_OK)
            st = moe_sampler_probs(s, logits, recent, n_recent, out, nv, &n_total, &err);
        if (st != MOE_OK) {
            printf("case %d error %s\n", c, err.msg);
        } else {
            printf("case %d ok %zu\n", c, n_total);
            for (size_t j = 0; j < n_total; j++)
                printf("%d %.9g\n", (int)out[j].token, (double)out[j].prob);
        }
        moe_sampler_free(s);
        free(recent);
        free(bias);
        free(logits);
        free(out);
    }
    return 0;
}

/*
 * batch.c — the moe_batch helpers: a batch owns four parallel arrays of
 * `capacity` entries (token, position, sequence, wants-logits); moe_decode
 * reads the first n_tokens.
 */
#include "moe.h"

#include <stdlib.h>

moe_batch *moe_batch_new(int32_t capacity)
{
    if (capacity <= 0)
        return NULL;
    moe_batch *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->capacity = capacity;
    b->token = calloc((size_t)capacity, sizeof *b->token);
    b->pos = calloc((size_t)capacity, sizeof *b->pos);
    b->seq_id = calloc((size_t)capacity, sizeof *b->seq_id);
    b->logits = calloc((size_t)capacity, sizeof *b->logits);
    if (!b->token || !b->pos || !b->seq_id || !b->logits) {
        moe_batch_free(b);
        return NULL;
    }
    return b;
}

void moe_batch_free(moe_batch *b)
{
    if (!b)
        return;
    free(b->token);
    free(b->pos);
    free(b->seq_id);
    free(b->logits);
    free(b);
}

void moe_batch_clear(moe_batch *b)
{
    b->n_tokens = 0;
}

bool moe_batch_add(moe_batch *b, int32_t token, int32_t pos, int32_t seq_id, bool want_logits)
{
    if (b->n_tokens >= b->capacity)
        return false;
    int32_t i = b->n_tokens++;
    b->token[i] = token;
    b->pos[i] = pos;
    b->seq_id[i] = seq_id;
    b->logits[i] = want_logits ? 1 : 0;
    return true;
}

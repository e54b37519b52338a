/*
 * jsonmode.c — JSON mode (response_format json_object) as a scheduler
 * constraint: before each sample, every token whose text would take the
 * output off the JSON grammar gets -INFINITY (jsonguard.c decides), so what
 * comes out is always a prefix of a JSON object and ends with a complete
 * one.
 *
 * Cost: the per-model table of token texts (built once, shared by every
 * request through a reference) lets one mask pass look at each token with
 * a copied 16-byte guard. Three shortcuts keep a 150k vocabulary cheap:
 * tokens already at -INFINITY are skipped; a 256-entry table of which first
 * bytes the current state accepts rejects most tokens after one lookup in
 * structural states; inside a string, tokens that are plain text (printable,
 * no quote or backslash, whole UTF-8 characters) are accepted without
 * running the machine. Measured numbers are in app/DESIGN.md ("Prompts").
 *
 * Budget: with the request's max_tokens known, a token is allowed only when
 * the shortest completion after it (svc_json_guard_completion) still fits
 * in the tokens left, one byte per token at worst, so a model that wanders
 * (random weights, a long string) is walked back to a closed object before
 * the budget runs out. Every vocabulary MoeDesk loads has a token for each
 * single byte (byte-level BPE, or SentencePiece byte fallback), which is
 * what makes the completion reachable; if it is not, the budget rule is
 * dropped for that step rather than masking every token.
 */
#include "prompt.h"

#include <math.h>
#include <string.h>

/* meta[id]: flags in bits 0-7, the first byte in 8-15, the second in
 * 16-23, so the mask loop reads 4 bytes per token and touches the texts
 * only for tokens the tables cannot decide. */
enum { TT_EOG = 1, TT_PLAIN = 2, TT_EMPTY = 4, TT_SPACE_WORD = 8 /* ' ' then more */ };

struct svc_token_texts {
    int32_t n;       /* vocabulary size                                    */
    uint32_t *off;   /* n + 1 offsets into blob                            */
    char *blob;      /* every token's bytes (moe_token_to_piece, no control
                        token text), concatenated                          */
    uint32_t *meta;  /* TT_* | first byte << 8 | second byte << 16         */
};

/* The most whitespace bytes in a row outside strings. Enough for pretty
 * printing a few levels deep; a model that only wants spaces must write
 * something else after 12. */
#define JSON_MODE_MAX_WS 12

static void token_texts_clear(gpointer p)
{
    struct svc_token_texts *t = p;
    g_free(t->off);
    g_free(t->blob);
    g_free(t->meta);
}

void svc_token_texts_unref(struct svc_token_texts *t);
void svc_token_texts_unref(struct svc_token_texts *t)
{
    g_atomic_rc_box_release_full(t, token_texts_clear);
}

static bool plain_text(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == '"' || c == '\\')
            return false;
    }
    return g_utf8_validate_len(s, n, NULL);
}

static struct svc_token_texts *token_texts_build(const moe_vocab *vocab)
{
    struct svc_token_texts *t = g_atomic_rc_box_new0(struct svc_token_texts);
    int32_t n = moe_vocab_n_tokens(vocab);
    t->n = n;
    t->off = g_new(uint32_t, (gsize)n + 1);
    t->meta = g_new0(uint32_t, (gsize)n);
    GByteArray *blob = g_byte_array_new();
    char buf[256];
    for (int32_t id = 0; id < n; id++) {
        t->off[id] = blob->len;
        int64_t len = moe_token_to_piece(vocab, id, false, buf, sizeof buf);
        if (len > (int64_t)sizeof buf) {
            g_autofree char *big = g_malloc((gsize)len);
            moe_token_to_piece(vocab, id, false, big, (size_t)len);
            g_byte_array_append(blob, (const guint8 *)big, (guint)len);
        } else if (len > 0) {
            g_byte_array_append(blob, (const guint8 *)buf, (guint)len);
        }
        const uint8_t *s = blob->data + t->off[id];
        size_t n_s = blob->len - t->off[id];
        uint32_t m = n_s == 0 ? TT_EMPTY : plain_text((const char *)s, n_s) ? TT_PLAIN : 0;
        if (n_s > 0)
            m |= (uint32_t)s[0] << 8;
        if (n_s > 1) {
            m |= (uint32_t)s[1] << 16;
            if (s[0] == ' ')
                m |= TT_SPACE_WORD;
        }
        if (moe_vocab_is_eog(vocab, id))
            m |= TT_EOG;
        t->meta[id] = m;
    }
    t->off[n] = blob->len;
    t->blob = (char *)g_byte_array_free(blob, FALSE);
    return t;
}

typedef struct json_mode {
    struct svc_token_texts *tt;
    svc_json_guard g;
    int64_t left;    /* tokens left in the budget; -1: no budget */
    float *saved;    /* n_saved logits: the row before the budget pass */
    int32_t n_saved;
} json_mode;

/* Masks for one step; `budget` applies the completion-fits rule. Returns
 * how many tokens survive. */
static size_t mask_pass(json_mode *jm, float *logits, int32_t n_vocab, bool budget)
{
    const struct svc_token_texts *tt = jm->tt;
    const svc_json_guard *g = &jm->g;
    bool complete = svc_json_guard_complete(g);
    bool plain = svc_json_guard_in_plain_string(g);
    /* which first bytes the state takes, and which second bytes after one
     * space (half a BPE vocabulary starts with a space: " the" dies on its
     * second byte outside strings) */
    bool first_ok[256], second_ok[256];
    svc_json_guard after_space = *g;
    bool space_ok = svc_json_guard_feed(&after_space, " ", 1);
    for (unsigned b = 0; b < 256; b++) {
        svc_json_guard t = *g;
        char c = (char)b;
        first_ok[b] = svc_json_guard_feed(&t, &c, 1);
        t = after_space;
        second_ok[b] = space_ok && svc_json_guard_feed(&t, &c, 1);
    }
    int64_t after = jm->left - 1; /* tokens left after this one */
    size_t clen = budget ? svc_json_guard_completion(g, NULL, 0) : 0;
    size_t alive = 0;
    for (int32_t id = 0; id < n_vocab; id++) {
        if (logits[id] == -INFINITY)
            continue;
        bool ok = false;
        if (id < tt->n) {
            uint32_t m = tt->meta[id];
            if (m & TT_EOG) {
                ok = complete;
            } else if ((m & TT_EMPTY) || !first_ok[(m >> 8) & 255]) {
                ok = false;
            } else if ((m & TT_SPACE_WORD) && !second_ok[(m >> 16) & 255]) {
                ok = false;
            } else if (plain && (m & TT_PLAIN)) {
                ok = !budget || (int64_t)clen <= after; /* the completion is unchanged */
            } else {
                const char *s = tt->blob + tt->off[id];
                size_t len = tt->off[id + 1] - tt->off[id];
                svc_json_guard t = *g;
                ok = svc_json_guard_feed(&t, s, len);
                /* a token grows the completion by at most 8 bytes per byte
                 * (a \u high surrogate is the worst case): only near the
                 * end of the budget is the exact length worth computing */
                if (ok && budget && (int64_t)(clen + 8 * len + 8) > after)
                    ok = (int64_t)svc_json_guard_completion(&t, NULL, 0) <= after;
            }
        }
        if (ok)
            alive++;
        else
            logits[id] = -INFINITY;
    }
    return alive;
}

static void json_mode_mask(void *user, float *logits, int32_t n_vocab)
{
    json_mode *jm = user;
    if (jm->left <= 0) {
        mask_pass(jm, logits, n_vocab, false);
        return;
    }
    /* the budget rule on a copy first: if it leaves nothing (a vocabulary
     * without the single-byte tokens the completion needs), do without */
    if (jm->n_saved != n_vocab) {
        g_free(jm->saved);
        jm->saved = g_new(float, n_vocab);
        jm->n_saved = n_vocab;
    }
    memcpy(jm->saved, logits, (gsize)n_vocab * sizeof *logits);
    if (mask_pass(jm, logits, n_vocab, true) == 0) {
        memcpy(logits, jm->saved, (gsize)n_vocab * sizeof *logits);
        mask_pass(jm, logits, n_vocab, false);
    }
}

static void json_mode_accept(void *user, int32_t token)
{
    json_mode *jm = user;
    if (jm->left > 0)
        jm->left--;
    if (token < 0 || token >= jm->tt->n || (jm->tt->meta[token] & TT_EOG))
        return;
    const char *s = jm->tt->blob + jm->tt->off[token];
    svc_json_guard_feed(&jm->g, s, jm->tt->off[token + 1] - jm->tt->off[token]);
}

static bool json_mode_complete(void *user)
{
    json_mode *jm = user;
    return svc_json_guard_closed(&jm->g);
}

static void json_mode_free(void *user)
{
    json_mode *jm = user;
    if (!jm)
        return;
    svc_token_texts_unref(jm->tt);
    g_free(jm->saved);
    g_free(jm);
}

bool svc_prompt_json_constraint(svc_prompt_model *pm, int64_t max_tokens,
                                svc_gen_constraint *out, GError **error)
{
    g_return_val_if_fail(pm && out, false);
    (void)error; /* nothing can fail today; kept so a vocabulary check can */
    g_mutex_lock(&pm->texts_lock);
    if (!pm->texts)
        pm->texts = token_texts_build(pm->vocab);
    struct svc_token_texts *tt = g_atomic_rc_box_acquire(pm->texts);
    g_mutex_unlock(&pm->texts_lock);
    json_mode *jm = g_new0(json_mode, 1);
    jm->tt = tt;
    jm->left = max_tokens > 0 ? max_tokens : -1;
    svc_json_guard_init(&jm->g, true, JSON_MODE_MAX_WS);
    *out = (svc_gen_constraint){
        .mask = json_mode_mask,
        .accept = json_mode_accept,
        .complete = json_mode_complete,
        .free_user = json_mode_free,
        .user = jm,
    };
    return true;
}

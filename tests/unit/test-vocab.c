/*
 * test-vocab.c — the tokenizer cores on small vocabularies built in memory
 * (no GGUF file needed): BPE merge order, merges through strings that are
 * not tokens, byte fallback, special-token matching (parse_special, user-
 * defined tokens, longest first, whitespace stripping), add_special,
 * SentencePiece scores and byte fallback, pieces, the streaming
 * detokenizer, the EOG set and argument checks.
 */
#include "moe.h"
#include "unicode.h"
#include "vocab.h"
#include "test.h"

#define MAXT 600

static moe_str toks[MAXT];
static char tok_text[MAXT][16];
static int32_t types[MAXT];
static float scores[MAXT];
static int n_toks;

static int add_tok(const char *s, int32_t type, float score)
{
    snprintf(tok_text[n_toks], sizeof tok_text[0], "%s", s);
    toks[n_toks] = (moe_str){tok_text[n_toks], strlen(tok_text[n_toks])};
    types[n_toks] = type;
    scores[n_toks] = score;
    return n_toks++;
}

static void desc_init(moe_vocab_desc *d)
{
    memset(d, 0, sizeof *d);
    for (int i = 0; i < MOE_SPECIAL_COUNT; i++)
        d->ids[i] = -1;
    d->eom_id = -1;
    d->add_bos = d->add_eos = d->add_space_prefix = -1;
    d->tokens = toks;
    d->types = types;
    d->scores = scores;
}

static size_t tok(const moe_vocab *v, const char *s, unsigned flags, int32_t *ids)
{
    size_t n = 0;
    moe_err err = {{0}};
    moe_status st = moe_tokenize(v, s, strlen(s), flags, ids, 64, &n, &err);
    CHECK_MSG(st == MOE_OK, "tokenize \"%s\": %s", s, err.msg);
    return n;
}

#define CHECK_IDS(v, s, flags, ...)                                                   \
    do {                                                                              \
        int32_t want_[] = {__VA_ARGS__}, got_[64];                                    \
        size_t nw_ = sizeof want_ / sizeof want_[0], ng_ = tok(v, s, flags, got_);    \
        int ok_ = ng_ == nw_;                                                         \
        for (size_t k_ = 0; ok_ && k_ < nw_; k_++)                                    \
            ok_ = got_[k_] == want_[k_];                                              \
        CHECK_MSG(ok_, "\"%s\": got %zu ids (first %d), want %zu (first %d)", s, ng_, \
                  ng_ ? got_[0] : -1, nw_, want_[0]);                                 \
    } while (0)

static int32_t byte_id[256];

static void test_bpe(void)
{
    n_toks = 0;
    for (int b = 0; b < 256; b++) {
        uint8_t enc[4];
        size_t k = moe_utf8_encode(moe_gpt2_byte_to_cp((uint8_t)b), enc);
        enc[k] = 0;
        byte_id[b] = add_tok((const char *)enc, MOE_TOKEN_NORMAL, 0);
    }
    int he = add_tok("he", 1, 0), ll = add_tok("ll", 1, 0), hell = add_tok("hell", 1, 0);
    int hello = add_tok("hello", 1, 0), gw = add_tok("\xc4\xa0w", 1, 0);
    int xyz = add_tok("xyz", 1, 0);
    int end = add_tok("<|end|>", MOE_TOKEN_CONTROL, 0);
    int user = add_tok("<u>", MOE_TOKEN_USER_DEFINED, 0);
    int word_end = add_tok("end", MOE_TOKEN_USER_DEFINED, 0);
    int eot = add_tok("<|im_end|>", MOE_TOKEN_NORMAL, 0);
    static const char *merge_text[] = {"h e", "l l", "he ll", "hell o", "\xc4\xa0 w", "x y",
                                       "xy z", "l o"};
    moe_str merges[8];
    for (int i = 0; i < 8; i++)
        merges[i] = (moe_str){merge_text[i], strlen(merge_text[i])};

    moe_vocab_desc d;
    desc_init(&d);
    d.model = "gpt2";
    d.pre = "gpt-2";
    d.n_tokens = (uint32_t)n_toks;
    d.merges = merges;
    d.n_merges = 8;
    d.ids[MOE_SPECIAL_BOS] = end;
    d.ids[MOE_SPECIAL_EOS] = end;
    d.add_bos = 1;
    d.add_eos = 1;
    moe_vocab *v = NULL;
    moe_err err = {{0}};
    CHECK_MSG(moe_vocab_build(&d, &v, &err) == MOE_OK, "%s", err.msg);
    if (!v)
        return;
    CHECK(moe_vocab_kind_of(v) == MOE_VOCAB_BPE);
    CHECK_EQ_STR(moe_vocab_pre(v), "gpt-2");
    CHECK_EQ_INT(moe_vocab_n_tokens(v), n_toks);
    (void)he;
    (void)ll;
    (void)hell;

    /* "hell"+"o" (rank 3) wins over "l"+"o" (rank 7) only after "he", "ll". */
    CHECK_IDS(v, "hello", 0, hello);
    CHECK_IDS(v, "hello world", 0, hello, gw, byte_id['o'], byte_id['r'], byte_id['l'],
              byte_id['d']);
    /* "xy" is no token but a merge makes it, then "xyz". */
    CHECK_IDS(v, "xyz", 0, xyz);
    /* "xy" stays a merged non-token: each byte's token instead. */
    CHECK_IDS(v, "xy", 0, byte_id['x'], byte_id['y']);
    /* Control text is text unless parse_special; user-defined always. */
    CHECK_IDS(v, "a<|end|>b", MOE_TOKENIZE_PARSE_SPECIAL, byte_id['a'], end, byte_id['b']);
    CHECK_IDS(v, "a<|end|>", 0, byte_id['a'], byte_id['<'], byte_id['|'], word_end,
              byte_id['|'], byte_id['>']);
    CHECK_IDS(v, "x<u>y", 0, byte_id['x'], user, byte_id['y']);
    CHECK_IDS(v, "<u><u>", 0, user, user);
    CHECK_IDS(v, "hi", MOE_TOKENIZE_ADD_SPECIAL, end, byte_id['h'], byte_id['i'], end);
    CHECK_IDS(v, "", MOE_TOKENIZE_ADD_SPECIAL, end, end);
    /* Invalid UTF-8 is tokenized, as U+FFFD per bad byte (like llama.cpp). */
    CHECK_IDS(v, "\xff", 0, byte_id[0xEF], byte_id[0xBF], byte_id[0xBD]);

    /* Too small a buffer: MOE_ERR_RANGE with the count needed. */
    int32_t small[2];
    size_t need = 0;
    CHECK(moe_tokenize(v, "hello world", 11, 0, small, 2, &need, &err) == MOE_ERR_RANGE);
    CHECK_EQ_INT(need, 6);
    CHECK(moe_tokenize(v, "hello world", 11, 0, NULL, 0, &need, &err) == MOE_ERR_RANGE);
    CHECK_EQ_INT(need, 6);
    CHECK(moe_tokenize(v, NULL, 3, 0, small, 2, &need, &err) == MOE_ERR_INVALID_ARG);
    CHECK(moe_tokenize(v, "", 0, 0, NULL, 0, &need, &err) == MOE_OK && need == 0);

    /* Specials and EOG: <|im_end|> becomes control and ends generation. */
    CHECK_EQ_INT(moe_vocab_special(v, MOE_SPECIAL_BOS), end);
    CHECK_EQ_INT(moe_vocab_special(v, MOE_SPECIAL_EOT), eot);
    CHECK_EQ_INT(moe_vocab_special(v, MOE_SPECIAL_NL), byte_id['\n']);
    CHECK_EQ_INT(moe_vocab_special(v, MOE_SPECIAL_SEP), -1);
    CHECK(moe_vocab_token_type(v, eot) == MOE_TOKEN_CONTROL);
    CHECK(moe_vocab_is_eog(v, end) && moe_vocab_is_eog(v, eot));
    CHECK(!moe_vocab_is_eog(v, hello) && !moe_vocab_is_eog(v, -1));
    CHECK(moe_vocab_add_bos(v) && moe_vocab_add_eos(v));
    moe_str t = moe_vocab_token_text(v, gw);
    CHECK(t.len == 3 && memcmp(t.ptr, "\xc4\xa0w", 3) == 0);
    CHECK(moe_vocab_token_text(v, n_toks).ptr == NULL);

    /* Pieces. */
    char buf[64];
    CHECK_EQ_INT(moe_token_to_piece(v, gw, false, buf, sizeof buf), 2);
    CHECK(memcmp(buf, " w", 2) == 0);
    CHECK_EQ_INT(moe_token_to_piece(v, end, false, buf, sizeof buf), 0);
    CHECK_EQ_INT(moe_token_to_piece(v, end, true, buf, sizeof buf), 7);
    CHECK_EQ_INT(moe_token_to_piece(v, user, false, buf, sizeof buf), 3);
    CHECK_EQ_INT(moe_token_to_piece(v, hello, false, buf, 2), 5); /* truncated copy */
    CHECK_EQ_INT(moe_token_to_piece(v, 99999, false, buf, sizeof buf), -1);

    /* Streaming: "中" split over three byte tokens. */
    moe_detok *dt = moe_detok_new(v, false);
    CHECK(dt != NULL);
    CHECK_EQ_INT(moe_detok_push(dt, byte_id[0xE4], buf, sizeof buf), 0);
    CHECK_EQ_INT(moe_detok_push(dt, byte_id[0xB8], buf, sizeof buf), 0);
    CHECK_EQ_INT(moe_detok_push(dt, byte_id[0xAD], buf, sizeof buf), 3);
    CHECK_EQ_STR(buf, "\xe4\xb8\xad");
    /* A held prefix that the next byte does not continue: U+FFFD, then it. */
    CHECK_EQ_INT(moe_detok_push(dt, byte_id[0xE4], buf, sizeof buf), 0);
    CHECK_EQ_INT(moe_detok_push(dt, hello, buf, sizeof buf), 8);
    CHECK_EQ_STR(buf, "\xef\xbf\xbdhello");
    CHECK_EQ_INT(moe_detok_push(dt, byte_id[0x80], buf, sizeof buf), 3);
    CHECK_EQ_INT(moe_detok_push(dt, byte_id[0xF0], buf, sizeof buf), 0);
    CHECK_EQ_INT(moe_detok_push(dt, byte_id[0x9F], buf, 1), 0);  /* still a prefix */
    CHECK_EQ_INT(moe_detok_push(dt, byte_id[0x98], buf, 1), 0);
    CHECK_EQ_INT(moe_detok_push(dt, byte_id[0x80], buf, 4), -1); /* too small: kept */
    CHECK_EQ_INT(moe_detok_push(dt, byte_id[0x80], buf, 5), 4);  /* U+1F600 */
    CHECK_EQ_STR(buf, "\xf0\x9f\x98\x80");
    CHECK_EQ_INT(moe_detok_push(dt, byte_id[0xF0], buf, sizeof buf), 0);
    CHECK_EQ_INT(moe_detok_flush(dt, buf, sizeof buf), 3);
    CHECK_EQ_STR(buf, "\xef\xbf\xbd");
    CHECK_EQ_INT(moe_detok_flush(dt, buf, sizeof buf), 0);
    CHECK_EQ_INT(moe_detok_push(dt, end, buf, sizeof buf), 0);
    CHECK_EQ_INT(moe_detok_push(dt, -5, buf, sizeof buf), -1);
    moe_detok_free(dt);
    moe_detok_free(NULL);
    moe_vocab_free(v);

    /* Whitespace stripping after special tokens (Phi-3 by name). */
    d.name = "Phi3-mini";
    d.add_bos = d.add_eos = 0;
    CHECK(moe_vocab_build(&d, &v, &err) == MOE_OK);
    if (v) {
        CHECK_IDS(v, "<u>  x", 0, user, byte_id['x']);
        CHECK_IDS(v, "a <|end|> b", MOE_TOKENIZE_PARSE_SPECIAL, byte_id['a'], byte_id[' '], end,
                  byte_id['b']);
        moe_vocab_free(v);
    }

    /* Refusals. */
    d.pre = "no-such-pre";
    CHECK(moe_vocab_build(&d, &v, &err) == MOE_ERR_UNSUPPORTED && v == NULL);
    CHECK(strstr(err.msg, "no-such-pre") != NULL);
    d.pre = "gpt-2";
    d.merges = NULL;
    CHECK(moe_vocab_build(&d, &v, &err) == MOE_ERR_FORMAT);
    d.model = "bert";
    CHECK(moe_vocab_build(&d, &v, &err) == MOE_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "bert") != NULL);
    moe_vocab_free(NULL);
}

static void test_spm(void)
{
    n_toks = 0;
    int unk = add_tok("<unk>", MOE_TOKEN_UNKNOWN, 0);
    int bos = add_tok("<s>", MOE_TOKEN_CONTROL, 0);
    int eos = add_tok("</s>", MOE_TOKEN_CONTROL, 0);
    int bytes0 = n_toks;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        add_tok(name, MOE_TOKEN_BYTE, 0);
    }
    int sp = add_tok("\xe2\x96\x81", 1, -1.0f);
    int a = add_tok("a", 1, -2.0f), b = add_tok("b", 1, -2.0f);
    int sp_a = add_tok("\xe2\x96\x81" "a", 1, -5.0f);
    int ab = add_tok("ab", 1, -3.0f);
    int sp_ab = add_tok("\xe2\x96\x81" "ab", 1, -4.0f);
    int ba = add_tok("ba", 1, -3.0f);
    int sp_b = add_tok("\xe2\x96\x81" "b", 1, -3.0f);
    int b_sp = add_tok("b\xe2\x96\x81", 1, -0.2f);
    int b_sp_a = add_tok("b\xe2\x96\x81" "a", 1, -0.1f);
    (void)unk;
    (void)sp;
    (void)sp_a;

    moe_vocab_desc d;
    desc_init(&d);
    d.model = "llama";
    d.pre = "default";
    d.n_tokens = (uint32_t)n_toks;
    moe_vocab *v = NULL;
    moe_err err = {{0}};
    CHECK_MSG(moe_vocab_build(&d, &v, &err) == MOE_OK, "%s", err.msg);
    if (!v)
        return;
    CHECK(moe_vocab_kind_of(v) == MOE_VOCAB_SPM);
    CHECK_EQ_INT(moe_vocab_special(v, MOE_SPECIAL_BOS), bos);
    CHECK_EQ_INT(moe_vocab_special(v, MOE_SPECIAL_EOS), eos);
    CHECK_EQ_INT(moe_vocab_special(v, MOE_SPECIAL_UNK), 0);
    CHECK_EQ_INT(moe_vocab_special(v, MOE_SPECIAL_NL), bytes0 + '\n');
    CHECK(moe_vocab_add_bos(v) && !moe_vocab_add_eos(v));
    CHECK(moe_vocab_is_eog(v, eos) && !moe_vocab_is_eog(v, bos));

    /* "▁ab": "ab" (-3) beats "▁a" (-5), then "▁ab" (-4). */
    CHECK_IDS(v, "ab", 0, sp_ab);
    CHECK_IDS(v, "ab", MOE_TOKENIZE_ADD_SPECIAL, bos, sp_ab);
    /* Ties go left: "▁b", "ba" and "ab" all score -3 in "▁bab". */
    CHECK_IDS(v, "bab", 0, sp_b, ab);
    /* A token across a space: the run is not cut between "b" and "▁". */
    CHECK_IDS(v, "b a", 0, sp, b_sp_a);
    CHECK_IDS(v, "bb a", 0, sp_b, b_sp_a);
    (void)b_sp;
    /* No token for 'c': byte fallback; an ill-formed run stays one symbol. */
    CHECK_IDS(v, "c", 0, sp, bytes0 + 'c');
    CHECK_IDS(v, "\xe4" "a", 0, sp, bytes0 + 0xE4, bytes0 + 'a');
    /* After a special token the text gets the space prefix again. */
    CHECK_IDS(v, "a<s>a", MOE_TOKENIZE_PARSE_SPECIAL, sp_a, bos, sp_a);
    CHECK_IDS(v, "<unk>", MOE_TOKENIZE_PARSE_SPECIAL, unk);
    (void)ba;
    (void)a;
    (void)b;

    char buf[32];
    CHECK_EQ_INT(moe_token_to_piece(v, sp_ab, false, buf, sizeof buf), 3);
    CHECK(memcmp(buf, " ab", 3) == 0);
    CHECK_EQ_INT(moe_token_to_piece(v, bytes0 + 0x41, false, buf, sizeof buf), 1);
    CHECK(buf[0] == 'A');
    CHECK_EQ_INT(moe_token_to_piece(v, unk, false, buf, sizeof buf), 0);
    moe_vocab_free(v);

    d.add_space_prefix = 0;
    CHECK(moe_vocab_build(&d, &v, &err) == MOE_OK);
    if (v) {
        CHECK_IDS(v, "ab", 0, ab);
        moe_vocab_free(v);
    }
}

int main(void)
{
    test_bpe();
    test_spm();
    TEST_DONE();
}

/* test-demo-model.c — the demo model is written, reopens as a well-formed
 * qwen3moe GGUF labelled as random weights, and is the same for the same
 * seed (different for another). */
#include "moe.h"
#include "test.h"

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)sz);
    *n = fread(buf, 1, (size_t)sz, f);
    fclose(f);
    return buf;
}

int main(void)
{
    char a[512], b[512], c[512];
    test_src_path(a, sizeof a, "");
    const char *root = getenv("MOE_BUILD_ROOT");
    snprintf(a, sizeof a, "%s/test-demo-a.gguf", root ? root : ".");
    snprintf(b, sizeof b, "%s/test-demo-b.gguf", root ? root : ".");
    snprintf(c, sizeof c, "%s/test-demo-c.gguf", root ? root : ".");
    moe_err err = {{0}};
    CHECK(moe_demo_model_write(a, 7, &err) == MOE_OK);
    CHECK(moe_demo_model_write(b, 7, &err) == MOE_OK);
    CHECK(moe_demo_model_write(c, 8, &err) == MOE_OK);

    size_t na = 0, nb = 0, nc = 0;
    char *da = slurp(a, &na), *db = slurp(b, &nb), *dc = slurp(c, &nc);
    CHECK(da && db && dc);
    CHECK(na == nb && na > 1000000 && memcmp(da, db, na) == 0);
    CHECK(na == nc && memcmp(da, dc, na) != 0);
    free(da);
    free(db);
    free(dc);

    moe_gguf *g = NULL;
    CHECK(moe_gguf_open(a, &g, &err) == MOE_OK);
    if (g) {
        CHECK_EQ_STR(moe_gguf_str_or(g, "general.architecture", ""), "qwen3moe");
        CHECK(strstr(moe_gguf_str_or(g, "general.name", ""), "random weights") != NULL);
        CHECK(moe_gguf_find_key(g, "tokenizer.chat_template") >= 0);
        const moe_gguf_tensor *t = moe_gguf_find_tensor(g, "blk.3.ffn_down_exps.weight");
        CHECK(t && t->n_dims == 3 && t->ne[0] == 256 && t->ne[1] == 256 && t->ne[2] == 8);
        CHECK(t && t->type == MOE_TYPE_Q8_0);
        t = moe_gguf_find_tensor(g, "output.weight");
        CHECK(t && t->ne[0] == 256 && t->ne[1] == 261);
        int64_t tok = moe_gguf_find_key(g, "tokenizer.ggml.tokens");
        CHECK(tok >= 0 && moe_gguf_arr_len(g, tok) == 261);
        CHECK_EQ_INT(moe_gguf_n_tensors(g), 1 + 4 * 12 + 2);
        moe_gguf_free(g);
    }
    remove(a);
    remove(b);
    remove(c);
    /* An unwritable path is an error naming it, not a crash. */
    CHECK(moe_demo_model_write("/nonexistent-dir/x.gguf", 1, &err) != MOE_OK);
    CHECK(strstr(err.msg, "/nonexistent-dir/x.gguf") != NULL);
    TEST_DONE();
}

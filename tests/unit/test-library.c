/*
 * test-library.c — the model library's pure functions (app/library):
 * model-name rules and the folder mapping, repository file-path rules,
 * source parsing, quantisation names and grouping, the pick rule, the
 * memory planner's pick (pull-plan.h) for different machines and the
 * model structure from a catalog entry,
 * Retry-After parsing, the backoff bounds, and the manifest's JSON round
 * trip and rejection of damaged manifests.
 */
#include "test.h"
#include "http.h"
#include "hub.h"
#include "library.h"
#include "manifest.h"
#include "pull-plan.h"
#include "quant-pick.h"

#include <glib/gstdio.h>

static void test_names(void)
{
    const char *good[] = { "qwen3-30b", "Qwen/Qwen3-30B-A3B", "a", "a.b_c-d/e.f", "x/y1" };
    const char *bad[] = { "", "..", "../x", "/x", "x/", "/", "a/b/c", "a\\b", "a:b", "a b",
                          ".hidden", "-x", "a--b", "a/..", "org/re..po", "a/-b", "C:x",
                          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" };
    for (size_t i = 0; i < G_N_ELEMENTS(good); i++)
        CHECK_MSG(moe_library_check_name(good[i], NULL), "%s", good[i]);
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) e = NULL;
        CHECK_MSG(!moe_library_check_name(bad[i], &e), "'%s' accepted", bad[i]);
        CHECK(e && e->code == MOE_LIBRARY_ERROR_INVALID_NAME);
        CHECK(moe_library_name_to_folder(bad[i], NULL) == NULL);
    }
    g_autofree char *f = moe_library_name_to_folder("Qwen/Qwen3-30B", NULL);
    CHECK_EQ_STR(f, "Qwen--Qwen3-30B");
    g_autofree char *n = moe_library_folder_to_name(f);
    CHECK_EQ_STR(n, "Qwen/Qwen3-30B");
    g_autofree char *n2 = moe_library_folder_to_name("plain");
    CHECK_EQ_STR(n2, "plain");
    CHECK(moe_library_folder_to_name("a--b--c") == NULL); /* not a mapping result */
    CHECK(moe_library_folder_to_name(".x") == NULL);

    g_setenv("MOEDESK_DATA_DIR", "/tmp/moe-lib-test", TRUE);
    g_autofree char *dir = moe_library_model_dir("org/m", NULL);
    CHECK_EQ_STR(dir, "/tmp/moe-lib-test/models/org--m");
}

static void test_paths(void)
{
    const char *good[] = { "a.gguf", "Q4_K_M/x-00001-of-00002.gguf", "a b (1).json", "x+y=z@1,2" };
    const char *bad[] = { "", "/a", "a/", "../a", "a/../b", "a/./b", ".git/config", "a\\b",
                          "C:/x", "a//b", "a:b", "x\n", "a/b/c/d/e/f/g/h/i" };
    for (size_t i = 0; i < G_N_ELEMENTS(good); i++)
        CHECK_MSG(moe_library_check_rel_path(good[i], NULL), "%s", good[i]);
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        CHECK_MSG(!moe_library_check_rel_path(bad[i], NULL), "'%s' accepted", bad[i]);
}

static void test_refs(void)
{
    MoeHubRef r;
    CHECK(moe_hub_ref_parse("org/repo", &r, NULL));
    CHECK(r.kind == MOE_HUB_HF && !r.revision && !r.selector);
    CHECK_EQ_STR(r.repo, "org/repo");
    moe_hub_ref_clear(&r);
    CHECK(moe_hub_ref_parse("ms:org/repo@v1.0:Q4_K_M", &r, NULL));
    CHECK(r.kind == MOE_HUB_MODELSCOPE);
    CHECK_EQ_STR(r.revision, "v1.0");
    CHECK_EQ_STR(r.selector, "Q4_K_M");
    moe_hub_ref_clear(&r);
    CHECK(moe_hub_ref_parse("hf://org/repo:sub/x.gguf", &r, NULL));
    CHECK_EQ_STR(r.selector, "sub/x.gguf");
    moe_hub_ref_clear(&r);
    const char *bad[] = { "org", "org/", "/repo", "org/repo:", "org/repo:../x.gguf", "org/repo@",
                          "a/b/c", "org/repo@a..b", "hf:", "org/re po" };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        CHECK_MSG(!moe_hub_ref_parse(bad[i], &r, NULL), "'%s' accepted", bad[i]);
        CHECK(r.repo == NULL);
    }
    CHECK(moe_hub_ref_looks_like("org/repo") && moe_hub_ref_looks_like("ms:x"));
    CHECK(!moe_hub_ref_looks_like("qwen3:30b"));
}

static void test_quants(void)
{
    static const char *cases[][2] = {
        { "Qwen3-30B-A3B-Instruct-2507-Q4_K_M.gguf", "Q4_K_M" },
        { "Qwen3-30B-A3B-Instruct-2507-UD-Q4_K_XL.gguf", "UD-Q4_K_XL" },
        { "model.Q8_0.gguf", "Q8_0" },
        { "x-IQ2_XXS.gguf", "IQ2_XXS" },
        { "x-q5_k_s.gguf", "Q5_K_S" },
        { "BF16/x-BF16-00001-of-00002.gguf", "BF16" },
        { "Q4_K_M/Kimi-K2-00003-of-00013.gguf", "Q4_K_M" },
        { "gpt-oss-20b-MXFP4.gguf", "MXFP4" },
        { "x-TQ1_0.gguf", "TQ1_0" },
        { "plain.gguf", NULL },
        { "Q4-notaquant.gguf", NULL },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *q = moe_quant_name_of(cases[i][0]);
        CHECK_MSG(g_strcmp0(q, cases[i][1]) == 0, "%s -> %s", cases[i][0], q ? q : "(null)");
    }
    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func((GDestroyNotify)moe_manifest_file_free);
    g_ptr_array_add(files, moe_manifest_file_new("m-Q8_0.gguf", 800, NULL, NULL));
    g_ptr_array_add(files, moe_manifest_file_new("m-Q4_K_M.gguf", 450, NULL, NULL));
    g_ptr_array_add(files, moe_manifest_file_new("BF16/m-BF16-00002-of-00002.gguf", 700, NULL, NULL));
    g_ptr_array_add(files, moe_manifest_file_new("BF16/m-BF16-00001-of-00002.gguf", 900, NULL, NULL));
    g_ptr_array_add(files, moe_manifest_file_new("mmproj-F16.gguf", 10, NULL, NULL));
    g_ptr_array_add(files, moe_manifest_file_new("README.md", 5, NULL, NULL));
    g_autoptr(GPtrArray) groups = moe_quant_groups(files);
    CHECK_EQ_INT(groups->len, 3);
    MoeQuantGroup *bf16 = moe_quant_find(groups, "bf16");
    CHECK(bf16 && bf16->files->len == 2 && bf16->bytes == 1600);
    CHECK_EQ_STR(((MoeManifestFile *)g_ptr_array_index(bf16->files, 0))->path,
                 "BF16/m-BF16-00001-of-00002.gguf");
    g_setenv("MOEDESK_MEMORY_BYTES", "1000", TRUE);   /* budget 900 */
    CHECK_EQ_STR(moe_quant_pick(groups, NULL)->quant, "Q8_0");
    g_setenv("MOEDESK_MEMORY_BYTES", "100000", TRUE);
    CHECK_EQ_STR(moe_quant_pick(groups, NULL)->quant, "BF16");
    g_setenv("MOEDESK_MEMORY_BYTES", "10", TRUE);     /* nothing fits: smallest */
    g_autofree char *why = NULL;
    CHECK_EQ_STR(moe_quant_pick(groups, &why)->quant, "Q4_K_M");
    CHECK(why && strstr(why, "smallest"));
    g_unsetenv("MOEDESK_MEMORY_BYTES");
}

/* The structure of tests/scripts/test_hub.py's planned model (qwen3moe,
 * 2 layers, 16 experts of 256, 2048 tokens, 1024 context). */
static void planned_model(moe_plan_model *m)
{
    memset(m, 0, sizeof *m);
    g_strlcpy(m->name, "planned-moe", sizeof m->name);
    g_strlcpy(m->arch, "qwen3moe", sizeof m->arch);
    m->n_layer = 2;
    m->n_embd = 256;
    m->n_vocab = 2048;
    m->n_head = 4;
    m->n_head_kv = 2;
    m->head_dim_k = m->head_dim_v = 64;
    m->n_expert = 16;
    m->n_expert_used = 2;
    m->n_ff_expert = 256;
    m->n_ctx_train = 1024;
    m->group_params[MOE_GROUP_EMBD_OUTPUT] = 1048832;
    m->group_params[MOE_GROUP_ATTENTION] = 394240;
    m->group_params[MOE_GROUP_ROUTER] = 8192;
    m->group_params[MOE_GROUP_ROUTED_EXPERTS] = 6291456;
}

static void machine_of(const char *json, moe_machine *out)
{
    moe_err err = { { 0 } };
    CHECK_MSG(moe_machine_parse(json, strlen(json), "test", out, &err) == MOE_OK, "%s", err.msg);
}

/* Which group the planner picks depends on the machine; the reason says
 * why; nothing fitting and nothing plannable are told apart. */
static void test_plan_pick(void)
{
    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func((GDestroyNotify)moe_manifest_file_free);
    g_ptr_array_add(files, moe_manifest_file_new("planned-F16.gguf", 15506400, NULL, NULL));
    g_ptr_array_add(files, moe_manifest_file_new("planned-Q8_0.gguf", 8256480, NULL, NULL));
    g_ptr_array_add(files, moe_manifest_file_new("planned-Q4_0.gguf", 4389856, NULL, NULL));
    g_ptr_array_add(files, moe_manifest_file_new("notes.gguf", 100, NULL, NULL)); /* no quant */
    g_ptr_array_add(files, moe_manifest_file_new("S/m-Q2_K-00001-of-00002.gguf", 50, NULL, NULL));
    g_ptr_array_add(files, moe_manifest_file_new("S/m-Q2_K-00002-of-00002.gguf", 50, NULL, NULL));
    g_autoptr(GPtrArray) groups = moe_quant_groups(files);
    CHECK_EQ_INT(groups->len, 5);

    moe_machine gpu, cpu, tiny;
    machine_of("{\"name\": \"gpu24\", \"ram_total\": \"64 GiB\", \"gpus\": [{\"name\": \"RTX 4090\","
               " \"vram_total\": \"24 GiB\"}]}", &gpu);
    machine_of("{\"name\": \"cpu22m\", \"ram_total\": \"22 MiB\"}", &cpu);
    machine_of("{\"name\": \"cpu8m\", \"ram_total\": \"8 MiB\"}", &tiny);
    g_autofree moe_plan_model *m = g_new0(moe_plan_model, 1);

    /* Q2_K (100 bytes for the whole model) would fit anywhere: drop it so
     * the tiny machine has nothing that fits. */
    CHECK(g_ptr_array_remove(groups, moe_quant_find(groups, "Q2_K")));
    MoeQuantGroup *picked = NULL;
    g_autofree char *why_gpu = NULL, *why_cpu = NULL, *why_none = NULL, *why_fail = NULL;
    planned_model(m);
    CHECK(moe_pull_plan_pick(m, groups, &gpu, &picked, &why_gpu) == MOE_PULL_PLAN_PICKED);
    CHECK(picked && strcmp(picked->quant, "F16") == 0);
    CHECK_MSG(why_gpu && strstr(why_gpu, "picked F16") && strstr(why_gpu, "all on GPU") &&
              strstr(why_gpu, "gpu24"), "%s", why_gpu);
    CHECK_EQ_INT(m->n_variants, 3); /* notes.gguf is no quantisation */
    planned_model(m);
    CHECK(moe_pull_plan_pick(m, groups, &cpu, &picked, &why_cpu) == MOE_PULL_PLAN_PICKED);
    CHECK(picked && strcmp(picked->quant, "Q8_0") == 0);
    CHECK_MSG(why_cpu && strstr(why_cpu, "on the CPU"), "%s", why_cpu);
    planned_model(m);
    CHECK(moe_pull_plan_pick(m, groups, &tiny, &picked, &why_none) == MOE_PULL_PLAN_NOTHING_FITS);
    CHECK(picked == NULL);
    CHECK_MSG(why_none && strstr(why_none, "cpu8m") && strstr(why_none, "needs") &&
              strstr(why_none, "Q4_0"), "%s", why_none);

    /* Only a file without a quantisation name: the planner cannot run. */
    g_autoptr(GPtrArray) odd_files = g_ptr_array_new_with_free_func((GDestroyNotify)moe_manifest_file_free);
    g_ptr_array_add(odd_files, moe_manifest_file_new("notes.gguf", 100, NULL, NULL));
    g_ptr_array_add(odd_files, moe_manifest_file_new("other.gguf", 200, NULL, NULL));
    g_autoptr(GPtrArray) odd = moe_quant_groups(odd_files);
    planned_model(m);
    CHECK(moe_pull_plan_pick(m, odd, &gpu, &picked, &why_fail) == MOE_PULL_PLAN_FAILED);
    CHECK(picked == NULL && why_fail && strstr(why_fail, "quantisation"));

    /* The header is read from the smallest single file, else split set. */
    CHECK_EQ_STR(moe_pull_plan_header_group(groups)->quant, "notes");
    g_autoptr(GPtrArray) split_files = g_ptr_array_new_with_free_func((GDestroyNotify)moe_manifest_file_free);
    g_ptr_array_add(split_files, moe_manifest_file_new("S/m-Q2_K-00001-of-00002.gguf", 50, NULL, NULL));
    g_ptr_array_add(split_files, moe_manifest_file_new("S/m-Q2_K-00002-of-00002.gguf", 50, NULL, NULL));
    g_ptr_array_add(split_files, moe_manifest_file_new("T/m-Q8_0-00001-of-00002.gguf", 90, NULL, NULL));
    g_ptr_array_add(split_files, moe_manifest_file_new("T/m-Q8_0-00002-of-00002.gguf", 90, NULL, NULL));
    g_autoptr(GPtrArray) splits = moe_quant_groups(split_files);
    CHECK_EQ_STR(moe_pull_plan_header_group(splits)->quant, "Q2_K");
}

/* A catalog entry gives the structure (no variants); a repository or name
 * not in it is NOT_FOUND, an entry without hparams CORRUPT. */
static void test_plan_catalog(void)
{
    g_autofree char *path = g_build_filename(g_get_tmp_dir(), "moe-lib-test-catalog.json", NULL);
    const char *text =
        "{\"schema_version\": 1, \"models\": ["
        " {\"id\": \"bare\", \"sources\": {\"gguf\": [{\"repo\": \"o/bare-GGUF\", \"quants\": []}]}},"
        " {\"id\": \"planned\", \"name\": \"Planned\", \"context_length\": 1024,"
        "  \"hparams\": {\"n_layer\": 2, \"n_embd\": 256, \"n_vocab\": 2048, \"n_head\": 4,"
        "   \"n_head_kv\": 2, \"head_dim\": 64, \"n_expert\": 16, \"n_expert_used\": 2,"
        "   \"n_ff_expert\": 256},"
        "  \"params\": {\"groups\": {\"embd_output\": 1048832, \"attention\": 394240,"
        "   \"router\": 8192, \"shared_experts\": 0, \"routed_experts\": 6291456}},"
        "  \"sources\": {\"gguf\": [{\"repo\": \"o/planned-GGUF\", \"quants\": [{\"quant\": \"Q8_0\","
        "   \"files\": [\"p-Q8_0.gguf\"], \"size_bytes\": 8256480}]}]}}]}";
    CHECK(g_file_set_contents(path, text, -1, NULL));
    g_setenv("MOEDESK_CATALOG", path, TRUE);
    g_autofree moe_plan_model *m = g_new0(moe_plan_model, 1);
    g_autoptr(GError) e1 = NULL, e2 = NULL, e3 = NULL;
    CHECK(moe_pull_plan_model_from_catalog("o/planned-GGUF", NULL, m, &e1));
    CHECK(m->n_layer == 2 && m->n_expert == 16 && m->n_ctx_train == 1024 && m->n_variants == 0);
    CHECK(m->group_params[MOE_GROUP_ROUTED_EXPERTS] == 6291456);
    CHECK(moe_pull_plan_model_from_catalog("o/other", "planned", m, NULL)); /* by name */
    CHECK(!moe_pull_plan_model_from_catalog("o/other", "x", m, &e2));
    CHECK(e2 && e2->code == MOE_LIBRARY_ERROR_NOT_FOUND);
    CHECK(!moe_pull_plan_model_from_catalog("o/bare-GGUF", NULL, m, &e3));
    CHECK(e3 && e3->code == MOE_LIBRARY_ERROR_CORRUPT && strstr(e3->message, "bare"));
    g_unsetenv("MOEDESK_CATALOG");
    g_unlink(path);
}

static void test_retry(void)
{
    CHECK_EQ_INT(moe_http_parse_retry_after("7"), 7000);
    CHECK_EQ_INT(moe_http_parse_retry_after(" 0 "), 0);
    CHECK_EQ_INT(moe_http_parse_retry_after("soon"), -1);
    CHECK_EQ_INT(moe_http_parse_retry_after(NULL), -1);
    CHECK_EQ_INT(moe_http_parse_retry_after("-5"), -1);
    CHECK_EQ_INT(moe_http_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), 0); /* past */
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    g_autoptr(GDateTime) later = g_date_time_add_seconds(now, 30);
    g_autofree char *date = soup_date_time_to_string(later, SOUP_DATE_HTTP);
    gint64 ms = moe_http_parse_retry_after(date);
    CHECK_MSG(ms > 28000 && ms <= 30000, "%" G_GINT64_FORMAT, ms);

    g_setenv("MOEDESK_RETRY_BASE_MS", "100", TRUE);
    for (guint a = 1; a <= 12; a++) {
        gint64 d = moe_http_retry_delay_ms(a, NULL);
        gint64 base = MIN((gint64)100 << (a - 1), 60000);
        CHECK_MSG(d >= base - base / 4 && d <= base + base / 4, "attempt %u: %" G_GINT64_FORMAT, a, d);
    }
    SoupMessageHeaders *h = soup_message_headers_new(SOUP_MESSAGE_HEADERS_RESPONSE);
    soup_message_headers_replace(h, "Retry-After", "3");
    CHECK_EQ_INT(moe_http_retry_delay_ms(5, h), 3000);
    soup_message_headers_replace(h, "Retry-After", "100000");
    CHECK_EQ_INT(moe_http_retry_delay_ms(1, h), -1); /* longer than the cap */
    soup_message_headers_unref(h);
    g_unsetenv("MOEDESK_RETRY_BASE_MS");
    CHECK(moe_http_status_is_transient(503) && moe_http_status_is_transient(429) &&
          !moe_http_status_is_transient(404) && !moe_http_status_is_transient(416));
}

static void test_manifest(void)
{
    g_autofree char *dir = g_dir_make_tmp("moe-manifest-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "manifest.json", NULL);
    g_autoptr(MoeManifest) m = moe_manifest_new("org/m");
    m->source = g_strdup("hf");
    m->repo = g_strdup("org/m");
    m->revision = g_strdup("0123456789012345678901234567890123456789");
    m->verified = 1700000000;
    moe_manifest_add_file(m, moe_manifest_file_new("a.gguf", 5, "AB" "cd000000000000000000000000000000000000000000000000000000000000", NULL));
    moe_manifest_add_file(m, moe_manifest_file_new("c.json", 3, NULL, "0123456789012345678901234567890123456789"));
    moe_manifest_add_file(m, moe_manifest_file_new("a.gguf", 6, NULL, NULL)); /* replaces */
    CHECK_EQ_INT(m->files->len, 2);
    CHECK_EQ_INT(moe_manifest_total_bytes(m), 9);
    CHECK(moe_manifest_save(m, path, NULL));
    g_autoptr(GError) e = NULL;
    g_autoptr(MoeManifest) back = moe_manifest_load(path, &e);
    CHECK_MSG(back != NULL, "%s", e ? e->message : "");
    if (back) {
        CHECK_EQ_STR(back->name, "org/m");
        CHECK_EQ_STR(back->state, "downloading");
        CHECK_EQ_INT(back->verified, 1700000000);
        CHECK_EQ_STR(moe_manifest_find_file(back, "c.json")->git_sha1,
                     "0123456789012345678901234567890123456789");
        CHECK_EQ_INT(moe_manifest_find_file(back, "a.gguf")->size, 6);
    }
    static const char *damaged[] = {
        "[]", "{\"name\": \"../x\", \"files\": []}", "{\"name\": \"m\"}",
        "{\"name\": \"m\", \"files\": [{\"path\": \"../a\", \"size\": 1}]}",
        "{\"name\": \"m\", \"files\": [{\"path\": \"a\", \"size\": -1}]}",
        "{\"name\": \"m\", \"files\": [{\"path\": \"a\", \"size\": 1, \"sha256\": \"xyz\"}]}",
        "{\"name\": 5, \"files\": []}", "not json",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(damaged); i++) {
        g_autoptr(GError) err = NULL;
        CHECK(g_file_set_contents(path, damaged[i], -1, NULL));
        MoeManifest *bad = moe_manifest_load(path, &err);
        CHECK_MSG(bad == NULL && err && err->code == MOE_LIBRARY_ERROR_CORRUPT && strstr(err->message, path),
                  "case %zu", i);
        moe_manifest_free(bad);
    }
    g_unlink(path);
    g_rmdir(dir);
}

int main(void)
{
    test_names();
    test_paths();
    test_refs();
    test_quants();
    test_plan_pick();
    test_plan_catalog();
    test_retry();
    test_manifest();
    TEST_DONE();
}

/*
 * test-hwprobe.c — the hardware probe and machine files: CPU feature names,
 * the machine-file parser (good files, every kind of bad input with the
 * message naming the fault), the tier machine files in tests/data/machines,
 * the MOEDESK_MACHINE override, the real probe of this machine with NVML
 * made absent (zero GPUs is not an error), and the NVML path for real
 * through tests/unit/fake-nvml.c (MOE_FAKE_NVML, set by meson, is the
 * built module; the test points MOEDESK_NVML_PATH at it).
 */
#include "moe.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

static void set_env(const char *key, const char *value)
{
#ifdef _WIN32
    _putenv_s(key, value ? value : "");
#else
    if (value)
        setenv(key, value, 1);
    else
        unsetenv(key);
#endif
}

static moe_status parse(const char *text, moe_machine *m, moe_err *err)
{
    memset(err, 0, sizeof *err);
    return moe_machine_parse(text, strlen(text), "t.json", m, err);
}

static void test_feature_names(void)
{
    for (int i = 0; i < MOE_CPU_FEATURE_COUNT; i++) {
        const moe_cpu_feature f = (moe_cpu_feature)(1u << i);
        const char *name = moe_cpu_feature_name(f);
        moe_cpu_feature back;
        CHECK(name != NULL);
        CHECK(moe_cpu_feature_from_name(name, &back) && back == f);
    }
    CHECK_EQ_STR(moe_cpu_feature_name(MOE_CPU_AVX512_VNNI), "avx512_vnni");
    CHECK(moe_cpu_feature_name((moe_cpu_feature)(MOE_CPU_AVX | MOE_CPU_AVX2)) == NULL);
    CHECK(!moe_cpu_feature_from_name("AVX2", NULL));
    CHECK(!moe_cpu_feature_from_name(NULL, NULL));
}

static void test_parse_good(void)
{
    moe_machine m;
    moe_err err;
    const char *text =
        "{ \"name\": \"box \\u00e9\\n\", \"cpu\": \"X\", \"cpu_features\": [\"avx2\", \"fma\"],\n"
        "  \"cores_logical\": 8, \"cores_physical\": 4,\n"
        "  \"ram_total\": \"1.5 GiB\", \"ram_free\": 1000000,\n"
        "  \"gpus\": [ {\"name\": \"G\", \"vram_total\": \"24 GB\", \"driver\": \"1.0\",\n"
        "              \"power_watts\": 12.5, \"compute\": false},\n"
        "            {\"vram_total\": 1024, \"vram_free\": \"512B\"} ] }  \n";
    CHECK_EQ_INT(parse(text, &m, &err), MOE_OK);
    CHECK_EQ_STR(m.name, "box \xc3\xa9\n");
    CHECK_EQ_STR(m.cpu_name, "X");
    CHECK_EQ_INT(m.cpu_features, MOE_CPU_AVX2 | MOE_CPU_FMA);
    CHECK_EQ_INT(m.n_cores_logical, 8);
    CHECK_EQ_INT(m.n_cores_physical, 4);
    CHECK_EQ_INT(m.ram_total_bytes, 1610612736); /* 1.5 x 2^30 */
    CHECK_EQ_INT(m.ram_free_bytes, 1000000);
    CHECK_EQ_INT(m.n_gpus, 2);
    CHECK_EQ_STR(m.gpus[0].name, "G");
    CHECK_EQ_INT(m.gpus[0].vram_total_bytes, 24000000000LL);
    CHECK_EQ_INT(m.gpus[0].vram_free_bytes, 24000000000LL); /* defaults to total */
    CHECK(!m.gpus[0].compute);
    CHECK_NEAR(m.gpus[0].power_watts, 12.5, 1e-9);
    CHECK_EQ_STR(m.gpus[0].driver, "1.0");
    CHECK_EQ_STR(m.gpus[1].name, "GPU 1");
    CHECK(m.gpus[1].compute);
    CHECK_EQ_INT(m.gpus[1].vram_free_bytes, 512);
    CHECK_EQ_INT(m.gpus[1].source, MOE_GPU_SOURCE_FILE);
    CHECK(m.from_file);
    CHECK_EQ_INT(moe_machine_n_compute_gpus(&m), 1);

    /* the minimum: defaults everywhere else */
    CHECK_EQ_INT(parse("{\"ram_total\": \"2 TiB\"}", &m, &err), MOE_OK);
    CHECK_EQ_INT(m.ram_total_bytes, 2199023255552LL);
    CHECK_EQ_INT(m.ram_free_bytes, m.ram_total_bytes);
    CHECK_EQ_INT(m.n_cores_logical, 1);
    CHECK_EQ_INT(m.n_gpus, 0);
    CHECK_EQ_STR(m.name, "t.json");
    CHECK(m.cpu_name[0] != '\0');
    /* physical alone sets logical too; exponent form */
    CHECK_EQ_INT(parse("{\"cores_physical\": 6, \"ram_total\": 1e9, \"gpus\": []}", &m, &err), MOE_OK);
    CHECK_EQ_INT(m.n_cores_logical, 6);
    CHECK_EQ_INT(m.ram_total_bytes, 1000000000);
}

typedef struct bad_case {
    const char *text;
    const char *needle; /* must appear in the message */
} bad_case;

static void test_parse_bad(void)
{
    static const bad_case cases[] = {
        {"", "expected '{'"},
        {"[]", "expected '{'"},
        {"{", "expected a string"},
        {"{}", "ram_total"},
        {"{\"ram_total\": 1} x", "text after"},
        {"{\"ram_totl\": 1}", "unknown key \"ram_totl\""},
        {"{\"ram_total\": 1, \"ram_total\": 2}", "repeated key \"ram_total\""},
        {"{\"ram_total\": \"4 gigs\"}", "unknown size unit"},
        {"{\"ram_total\": \"GiB\"}", "size like"},
        {"{\"ram_total\": -5}", "size out of range"},
        {"{\"ram_total\": 1.5}", "whole"},
        {"{\"ram_total\": 1e40}", "out of range"},
        /* found by fuzz-machine: a 40-digit count must not reach a cast */
        {"{\"ram_total\": 1000000000000000000000000000000000000000}", "size out of range"},
        {"{\"ram_total\": 1, \"cores_logical\": 1000000000000000000000000000000000000000}", "integer"},
        {"{\"ram_total\": 10, \"ram_free\": 11}", "ram_free is larger"},
        {"{\"ram_total\": 1, \"cores_logical\": 2, \"cores_physical\": 4}", "cores_physical is larger"},
        {"{\"ram_total\": 1, \"cores_logical\": 0}", "cores_logical"},
        {"{\"ram_total\": 1, \"cores_logical\": 2.5}", "integer"},
        {"{\"ram_total\": 1, \"cpu_features\": [\"avx3\"]}", "avx3"},
        {"{\"ram_total\": 1, \"cpu_features\": \"avx2\"}", "cpu_features"},
        {"{\"ram_total\": 1, \"gpus\": [{}]}", "vram_total"},
        {"{\"ram_total\": 1, \"gpus\": [{\"vram_total\": 1, \"vram_free\": 2}]}", "vram_free is larger"},
        {"{\"ram_total\": 1, \"gpus\": [{\"vram_total\": 1, \"vram\": 2}]}", "unknown key \"vram\" in gpus[0]"},
        {"{\"ram_total\": 1, \"gpus\": [{\"vram_total\": 1, \"compute\": 1}]}", "true or false"},
        {"{\"ram_total\": 1, \"gpus\": [{\"vram_total\": 1, \"power_watts\": -1}]}", "power"},
        {"{\"ram_total\": 1, \"gpus\": {}}", "expected '['"},
        {"{\"ram_total\": 1, \"gpus\": [{\"vram_total\": 1}", "expected ']'"},
        {"{\"name\": \"a\\qb\", \"ram_total\": 1}", "bad escape"},
        {"{\"name\": \"a\\u12\", \"ram_total\": 1}", "escape"},
        {"{\"name\": \"a\\u0000\", \"ram_total\": 1}", "NUL"},
        {"{\"name\": \"a\nb\", \"ram_total\": 1}", "control character"},
        {"{\"name\": \"abc", "unterminated"},
        {"{\"ram_total\" 1}", "expected ':'"},
        {"{\"ram_total\": 1,}", "expected a string"},
        {"{\"ram_total\": 01x}", "expected '}'"},
        {"{\"ram_total\": 1.}", "bad number"},
        {"{\"ram_total\": 1e}", "bad exponent"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        moe_machine m;
        moe_err err;
        const moe_status st = parse(cases[i].text, &m, &err);
        CHECK_MSG(st == MOE_ERR_FORMAT, "case %zu (%s) gave %d", i, cases[i].text, (int)st);
        CHECK_MSG(strstr(err.msg, cases[i].needle) != NULL, "case %zu: \"%s\" lacks \"%s\"", i,
                  err.msg, cases[i].needle);
        CHECK_MSG(strncmp(err.msg, "t.json", 6) == 0, "case %zu: message does not name the file: %s",
                  i, err.msg);
    }

    /* a name longer than the buffer is an error, not a truncation */
    char big[400];
    memset(big, 0, sizeof big);
    strcpy(big, "{\"name\": \"");
    memset(big + strlen(big), 'n', 200);
    strcat(big, "\", \"ram_total\": 1}");
    moe_machine m;
    moe_err err;
    CHECK_EQ_INT(parse(big, &m, &err), MOE_ERR_FORMAT);
    CHECK(strstr(err.msg, "too long") != NULL);

    /* 17 GPUs are one too many */
    char many[2048] = "{\"ram_total\": 1, \"gpus\": [";
    for (int i = 0; i < 17; i++)
        strcat(many, i ? ", {\"vram_total\": 1}" : "{\"vram_total\": 1}");
    strcat(many, "]}");
    CHECK_EQ_INT(parse(many, &m, &err), MOE_ERR_FORMAT);
    CHECK(strstr(err.msg, "more GPUs") != NULL);

    /* the parser never reads past len: the same text cut short fails */
    const char *ok = "{\"ram_total\": 1}";
    memset(&err, 0, sizeof err);
    CHECK_EQ_INT(moe_machine_parse(ok, strlen(ok) - 1, "cut", &m, &err), MOE_ERR_FORMAT);
    CHECK_EQ_INT(moe_machine_parse(NULL, 3, "x", &m, &err), MOE_ERR_INVALID_ARG);
}

static void test_tier_files(void)
{
    static const struct {
        const char *file;
        int n_gpus;
        uint64_t vram_total, ram_total;
    } tiers[] = {
        {"rtx4090-1x.json", 1, 24564ull << 20, 64ull << 30},
        {"rtx4090-2x.json", 2, 24564ull << 20, 128ull << 30},
        {"rtx-a6000.json", 1, 49140ull << 20, 128ull << 30},
        {"a100-80g-4x.json", 4, 81920ull << 20, 1024ull << 30},
        {"cpu-64g.json", 0, 0, 64ull << 30},
    };
    for (size_t i = 0; i < sizeof tiers / sizeof tiers[0]; i++) {
        char rel[128], path[1024];
        snprintf(rel, sizeof rel, "tests/data/machines/%s", tiers[i].file);
        test_src_path(path, sizeof path, rel);
        moe_machine m;
        moe_err err = {{0}};
        CHECK_MSG(moe_machine_load(path, &m, &err) == MOE_OK, "%s: %s", path, err.msg);
        CHECK_EQ_INT(m.n_gpus, tiers[i].n_gpus);
        CHECK_EQ_INT(moe_machine_n_compute_gpus(&m), tiers[i].n_gpus);
        CHECK_EQ_INT(m.ram_total_bytes, tiers[i].ram_total);
        if (tiers[i].n_gpus)
            CHECK_EQ_INT(m.gpus[0].vram_total_bytes, tiers[i].vram_total);
        CHECK(m.cpu_features & MOE_CPU_AVX2);
        CHECK(m.n_cores_physical <= m.n_cores_logical);
    }

    moe_machine m;
    moe_err err = {{0}};
    CHECK_EQ_INT(moe_machine_load("no/such/machine.json", &m, &err), MOE_ERR_IO);
    CHECK(strstr(err.msg, "no/such/machine.json") != NULL);
}

static void test_override(void)
{
    char path[1024];
    test_src_path(path, sizeof path, "tests/data/machines/rtx4090-2x.json");
    set_env("MOEDESK_MACHINE", path);
    moe_machine m;
    moe_err err = {{0}};
    CHECK_EQ_INT(moe_hw_probe(&m, &err), MOE_OK);
    CHECK(m.from_file);
    CHECK_EQ_INT(m.n_gpus, 2);
    CHECK(strstr(m.name, "2x RTX 4090") != NULL);

    set_env("MOEDESK_MACHINE", "no-such-machine-file.json");
    CHECK_EQ_INT(moe_hw_probe(&m, &err), MOE_ERR_IO);
    CHECK(strstr(err.msg, "no-such-machine-file.json") != NULL);
    /* the system probe ignores the override */
    CHECK_EQ_INT(moe_hw_probe_system(&m, &err), MOE_OK);
    CHECK(!m.from_file);
    set_env("MOEDESK_MACHINE", NULL);
}

/* This machine, with NVML made absent: CPU and RAM, zero compute GPUs. */
static void test_real_probe(void)
{
    set_env("MOEDESK_NVML_PATH", "no-such-dir/libnvidia-ml-absent.so");
    moe_machine m;
    moe_err err = {{0}};
    CHECK_MSG(moe_hw_probe(&m, &err) == MOE_OK, "%s", err.msg);
    CHECK(!m.from_file);
    CHECK(m.cpu_name[0] != '\0');
    CHECK(m.ram_total_bytes > 0);
    CHECK(m.ram_free_bytes <= m.ram_total_bytes);
    CHECK(m.n_cores_logical >= 1);
    CHECK(m.n_cores_physical >= 1 && m.n_cores_physical <= m.n_cores_logical);
    CHECK_EQ_INT(moe_machine_n_compute_gpus(&m), 0);
    CHECK_MSG(strstr(m.gpu_note, "not found") != NULL, "note: %s", m.gpu_note);
    /* x86 features come in a consistent order of dependence */
    if (m.cpu_features & MOE_CPU_AVX2)
        CHECK(m.cpu_features & MOE_CPU_AVX);
    if (m.cpu_features & MOE_CPU_AVX512BW)
        CHECK(m.cpu_features & MOE_CPU_AVX512F);
    CHECK((m.cpu_features >> MOE_CPU_FEATURE_COUNT) == 0);
    fprintf(stderr, "this machine: %s, %d/%d cores, %.1f GiB RAM, features 0x%x, %s\n", m.cpu_name,
            m.n_cores_physical, m.n_cores_logical, m.ram_total_bytes / 1073741824.0,
            m.cpu_features, m.gpu_note);
}

static void test_fake_nvml(void)
{
    const char *fake = getenv("MOE_FAKE_NVML");
    CHECK_MSG(fake && fake[0], "MOE_FAKE_NVML is not set (meson sets it)");
    if (!fake || !fake[0])
        return;
    set_env("MOEDESK_NVML_PATH", fake);
    moe_machine m;
    moe_err err = {{0}};
    CHECK_EQ_INT(moe_hw_probe_system(&m, &err), MOE_OK);
    CHECK_EQ_INT(moe_machine_n_compute_gpus(&m), 1);
    CHECK_EQ_STR(m.gpus[0].name, "NVIDIA GeForce RTX 4090");
    CHECK_EQ_INT(m.gpus[0].vram_total_bytes, 24ull << 30);
    CHECK_EQ_INT(m.gpus[0].vram_free_bytes, 23ull << 30);
    CHECK_EQ_STR(m.gpus[0].driver, "560.94");
    CHECK_NEAR(m.gpus[0].power_watts, 350.0, 1e-9);
    CHECK(m.gpus[0].compute);
    CHECK_EQ_INT(m.gpus[0].source, MOE_GPU_SOURCE_NVML);
    CHECK_MSG(strstr(m.gpu_note, "560.94") != NULL, "note: %s", m.gpu_note);

    set_env("FAKE_NVML_COUNT", "3");
    CHECK_EQ_INT(moe_hw_probe_system(&m, &err), MOE_OK);
    CHECK_EQ_INT(moe_machine_n_compute_gpus(&m), 3);
    set_env("FAKE_NVML_COUNT", "40"); /* more than MOE_HW_MAX_GPUS */
    CHECK_EQ_INT(moe_hw_probe_system(&m, &err), MOE_OK);
    CHECK(m.n_gpus <= MOE_HW_MAX_GPUS);
    CHECK_EQ_INT(moe_machine_n_compute_gpus(&m), MOE_HW_MAX_GPUS);
    set_env("FAKE_NVML_COUNT", NULL);

    set_env("FAKE_NVML_INIT_FAIL", "1");
    CHECK_EQ_INT(moe_hw_probe_system(&m, &err), MOE_OK);
    CHECK_EQ_INT(moe_machine_n_compute_gpus(&m), 0);
    CHECK_MSG(strstr(m.gpu_note, "nvmlInit_v2 failed") != NULL, "note: %s", m.gpu_note);
    set_env("FAKE_NVML_INIT_FAIL", NULL);
    set_env("MOEDESK_NVML_PATH", NULL);
}

int main(void)
{
    test_feature_names();
    test_parse_good();
    test_parse_bad();
    test_tier_files();
    test_override();
    test_real_probe();
    test_fake_nvml();
    TEST_DONE();
}

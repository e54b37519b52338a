/*
 * test-plan-fit.c — the memory planner's CPU-only estimate against the
 * memory the engine really uses. For each model (the demo model, written
 * here into the build dir, plus any GGUF paths given as arguments, e.g. a
 * ~136 MiB qwen3moe that tests/meson.build generates with gen_model.py) it
 *   1. plans the model (moe_plan_model_from_gguf) on a machine with no GPU
 *      and ample RAM at N_CTX tokens, and takes the CPU option's host parts;
 *   2. loads the model, creates a context with the same n_ctx and n_batch,
 *      prefills the whole context in n_batch chunks (so every KV cell,
 *      activation and scratch row is written) and decodes a few tokens;
 *   3. touches every weight byte once (a sum over each tensor's mapping):
 *      the router only picks some experts per token, so a short run leaves
 *      unpicked experts unread and unmapped, while a long session converges
 *      to all of them resident — that is the state the planner sizes for;
 *   4. measures the growth of the resident set (VmRSS, mapped file pages
 *      included) over the baseline read just before the model was loaded.
 * It asserts |estimate - measured| <= 10% of measured, the planner's weight
 * bytes = moe_model_size_bytes and its KV bytes = moe_context_kv_bytes
 * within 1%, and prints a per-component table.
 *
 * Linux only (VmRSS from /proc/self/status): tests/meson.build registers it
 * for native Linux builds, not in the cross-built (wine) engine table.
 */
#include "moe.h"
#include "test.h"

#include <stdint.h>

enum { N_CTX = 2048, N_BATCH = 512, N_DECODE = 4 };

/* VmRSS of this process in bytes, 0 if unreadable. */
static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

/* Reads every weight byte once so all pages are resident; returns the
 * byte sum so the compiler cannot drop the reads. */
static uint64_t touch_weights(const moe_gguf *g)
{
    uint64_t sum = 0;
    for (int64_t i = 0; i < moe_gguf_n_tensors(g); i++) {
        const moe_gguf_tensor *t = moe_gguf_tensor_at(g, i);
        const unsigned char *p = t->data;
        for (uint64_t j = 0; j < t->size_bytes; j += 64)
            sum += p[j];
    }
    return sum;
}

/* The CPU option at N_CTX of a plan on a big CPU-only machine. */
static int plan_cpu(const char *path, moe_plan_option *out)
{
    moe_err err = {{0}};
    moe_gguf *g = NULL;
    if (moe_gguf_open(path, &g, &err) != MOE_OK) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return -1;
    }
    moe_plan_model pm;
    memset(&pm, 0, sizeof pm);
    moe_status st = moe_plan_model_from_gguf(g, &pm, &err);
    moe_gguf_free(g);
    if (st != MOE_OK) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return -1;
    }
    static const char machine_json[] =
        "{\"name\": \"plan-fit\", \"cores_logical\": 2, \"cores_physical\": 2,"
        " \"ram_total\": \"512 GiB\"}";
    moe_machine mach;
    if (moe_machine_parse(machine_json, sizeof machine_json - 1, "plan-fit", &mach, &err) != MOE_OK) {
        fprintf(stderr, "machine: %s\n", err.msg);
        return -1;
    }
    moe_plan_params pp = moe_plan_default_params();
    pp.n_ctx[0] = N_CTX;
    pp.n_n_ctx = 1;
    pp.n_batch = N_BATCH;
    pp.kv_type = MOE_TYPE_F16;
    moe_plan *plan = NULL;
    if (moe_plan_make(&pm, &mach, &pp, &plan, &err) != MOE_OK) {
        fprintf(stderr, "plan: %s\n", err.msg);
        return -1;
    }
    int found = -1;
    for (size_t i = 0; i < moe_plan_n_options(plan); i++) {
        const moe_plan_option *o = moe_plan_option_at(plan, i);
        if (o->placement == MOE_PLACE_CPU && o->variant == 0 && o->n_ctx == N_CTX) {
            *out = *o;
            found = 0;
            break;
        }
    }
    moe_plan_free(plan);
    return found;
}

static void check_model(const char *path)
{
    moe_plan_option o;
    CHECK_MSG(plan_cpu(path, &o) == 0, "no CPU option for %s", path);
    if (plan_cpu(path, &o) != 0)
        return;

    const uint64_t base = rss_bytes();
    CHECK(base > 0);
    moe_err err = {{0}};
    moe_model *m = NULL;
    CHECK_MSG(moe_model_load(path, NULL, &m, &err) == MOE_OK, "%s: %s", path, err.msg);
    if (!m)
        return;
    const uint64_t after_load = rss_bytes();
    moe_context_params cp = moe_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_batch = N_BATCH;
    cp.n_threads = 2;
    cp.kv_type = MOE_TYPE_F16;
    moe_context *c = NULL;
    CHECK_MSG(moe_context_new(m, &cp, &c, &err) == MOE_OK, "%s: %s", path, err.msg);
    if (!c) {
        moe_model_free(m);
        return;
    }
    /* Fill the whole context: N_CTX - N_DECODE prompt tokens, then decodes. */
    moe_batch *b = moe_batch_new(N_BATCH);
    const int32_t n_vocab = moe_model_n_vocab(m);
    int32_t pos = 0;
    uint32_t s = 12345;
    while (pos < N_CTX - N_DECODE) {
        moe_batch_clear(b);
        while (b->n_tokens < N_BATCH && pos < N_CTX - N_DECODE) {
            s = s * 1103515245u + 12345u;
            moe_batch_add(b, (int32_t)((s >> 8) % (uint32_t)n_vocab), pos, 0,
                          pos == N_CTX - N_DECODE - 1);
            pos++;
        }
        CHECK_MSG(moe_decode(c, b, &err) == MOE_OK, "prefill: %s", err.msg);
    }
    for (int i = 0; i < N_DECODE; i++, pos++) {
        moe_batch_clear(b);
        moe_batch_add(b, (int32_t)((uint32_t)(pos * 7919) % (uint32_t)n_vocab), pos, 0, true);
        CHECK_MSG(moe_decode(c, b, &err) == MOE_OK, "decode: %s", err.msg);
        CHECK(moe_get_logits(c, 0) != NULL);
    }
    const uint64_t after_run = rss_bytes();
    const uint64_t sum = touch_weights(moe_model_gguf(m));
    const uint64_t after_touch = rss_bytes();
    CHECK(sum > 0);

    const uint64_t w_real = moe_model_size_bytes(m);
    const uint64_t kv_real = moe_context_kv_bytes(c);
    const uint64_t measured = after_touch > base ? after_touch - base : 0;
    const uint64_t est = o.host_bytes;
    printf("\n%s (%s, n_ctx %d, n_batch %d, CPU only)\n", moe_model_name(m), moe_model_arch(m),
           N_CTX, N_BATCH);
    printf("  %-22s %12s %12s\n", "component", "estimate", "engine");
    printf("  %-22s %9.2f MiB %9.2f MiB (moe_model_size_bytes)\n", "weights",
           mib(o.weights_host_bytes), mib(w_real));
    printf("  %-22s %9.2f MiB %9.2f MiB (moe_context_kv_bytes)\n", "KV cache (f16)",
           mib(o.kv_bytes), mib(kv_real));
    printf("  %-22s %9.2f MiB\n", "compute", mib(o.compute_host_bytes));
    printf("  %-22s %9.2f MiB\n", "overhead", mib(o.overhead_host_bytes));
    printf("  %-22s %9.2f MiB %9.2f MiB (RSS growth)\n", "total host", mib(est), mib(measured));
    printf("  RSS: baseline %.2f MiB, +%.2f after load, +%.2f after %d tokens, +%.2f with every "
           "weight touched\n", mib(base), mib(after_load - base), mib(after_run - base), pos,
           mib(measured));
    printf("  estimate - measured = %+.2f MiB (%+.1f%% of measured)\n",
           mib(est) - mib(measured), 100.0 * ((double)est - (double)measured) / (double)measured);

    CHECK_MSG(fabs((double)o.weights_host_bytes - (double)w_real) <= 0.01 * (double)w_real,
              "weights: planner %llu vs model %llu", (unsigned long long)o.weights_host_bytes,
              (unsigned long long)w_real);
    CHECK_MSG(fabs((double)o.kv_bytes - (double)kv_real) <= 0.01 * (double)kv_real,
              "KV: planner %llu vs context %llu", (unsigned long long)o.kv_bytes,
              (unsigned long long)kv_real);
    CHECK_MSG(measured > 0 && fabs((double)est - (double)measured) <= 0.10 * (double)measured,
              "%s: estimate %.2f MiB vs measured %.2f MiB", path, mib(est), mib(measured));
    moe_batch_free(b);
    moe_context_free(c);
    moe_model_free(m);
}

int main(int argc, char **argv)
{
    const char *root = getenv("MOE_BUILD_ROOT");
    char demo[512];
    snprintf(demo, sizeof demo, "%s/test-plan-fit-demo.gguf", root ? root : ".");
    moe_err err = {{0}};
    CHECK_MSG(moe_demo_model_write(demo, 1, &err) == MOE_OK, "%s", err.msg);
    check_model(demo);
    for (int i = 1; i < argc; i++)
        check_model(argv[i]);
    TEST_DONE();
}

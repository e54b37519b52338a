/*
 * model.c — the model the service serves: loading a GGUF with its
 * scheduler, the names clients may use for it, switching and idle
 * unloading.
 *
 * One model is loaded at a time (a 4090 holds one large MoE). Requests
 * hold references, so a switch or an unload frees the old model only when
 * its last request ends. Names: the model's own name (the file stem of
 * --model, or the installed model's library name), with or without an
 * Ollama-style ":latest" tag, case-insensitively.
 */
#include "svc-private.h"

#include "guard.h"

#include <library.h>
#include <manifest.h>
#include <string.h>

/* general.file_type (llama.cpp's ftype numbers) to the names users know. */
static const char *ftype_name(uint32_t ft)
{
    switch (ft) {
    case 0: return "F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 10: return "Q2_K";
    case 11: return "Q3_K_S";
    case 12: return "Q3_K_M";
    case 13: return "Q3_K_L";
    case 14: return "Q4_K_S";
    case 15: return "Q4_K_M";
    case 16: return "Q5_K_S";
    case 17: return "Q5_K_M";
    case 18: return "Q6_K";
    case 32: return "BF16";
    default: return NULL;
    }
}

static char *model_quant(const moe_model *m)
{
    const moe_gguf *g = moe_model_gguf(m);
    int64_t i = moe_gguf_find_key(g, "general.file_type");
    uint64_t ft = 0;
    if (i >= 0 && moe_gguf_get_u64(g, i, &ft) == MOE_OK && ftype_name((uint32_t)ft))
        return g_strdup(ftype_name((uint32_t)ft));
    return g_strdup("unknown");
}

static char *file_stem(const char *path)
{
    char *base = g_path_get_basename(path);
    char *dot = g_str_has_suffix(base, ".gguf") ? strrchr(base, '.') : NULL;
    if (dot)
        *dot = '\0';
    return base;
}

static svc_model *model_load_with(svc_server *srv, const char *path, const char *name,
                                  int32_t n_ctx, int32_t n_parallel, GError **error);

svc_model *svc_model_load(svc_server *srv, const char *path, const char *name, GError **error)
{
    return model_load_with(srv, path, name, srv->n_ctx, srv->n_parallel, error);
}

/* n_ctx <= 0: the model's own, at most 4096; n_parallel <= 0: the server's. */
/* The context per sequence when neither the settings nor the request name
 * one: the memory planner's pick for this machine (the probe, or
 * MOEDESK_MACHINE) — the longest of the model's trained context (at most
 * 32768), 16384, 8192, 4096 and 2048 whose n_parallel sequences' KV cache
 * fits beside the weights on the placement the engine runs (CPU). Without
 * a usable plan: min(trained, 4096). */
static int32_t planned_ctx(const moe_model *mm, int32_t n_parallel, char **reason)
{
    int32_t train = moe_model_n_ctx_train(mm);
    int32_t fallback = train > 0 && train < 4096 ? train : 4096;
    moe_plan_model pmodel;
    moe_machine machine;
    moe_err err = {0};
    if (moe_plan_model_from_gguf(moe_model_gguf(mm), &pmodel, &err) != MOE_OK ||
        moe_hw_probe(&machine, &err) != MOE_OK) {
        *reason = g_strdup_printf("no plan (%s): %d tokens", err.msg, fallback);
        return fallback;
    }
    static const int32_t tries[] = {32768, 16384, 8192, 4096, 2048};
    moe_plan_params pp = moe_plan_default_params();
    pp.n_n_ctx = 0;
    int32_t cand[G_N_ELEMENTS(tries) + 1];
    size_t n_cand = 0;
    if (train > 0 && train < 32768)
        cand[n_cand++] = train;
    for (size_t i = 0; i < G_N_ELEMENTS(tries); i++)
        if (train <= 0 || tries[i] < (train < 32768 ? train : 32769))
            cand[n_cand++] = tries[i];
    for (size_t i = 0; i < n_cand && pp.n_n_ctx < MOE_PLAN_MAX_CTX; i++)
        pp.n_ctx[pp.n_n_ctx++] = (int64_t)cand[i] * n_parallel;
    moe_plan *plan = NULL;
    int32_t chosen = fallback;
    if (moe_plan_make(&pmodel, &machine, &pp, &plan, &err) != MOE_OK) {
        *reason = g_strdup_printf("no plan (%s): %d tokens", err.msg, fallback);
        return fallback;
    }
    gboolean found = FALSE;
    for (size_t k = 0; k < pp.n_n_ctx && !found; k++)
        for (size_t i = 0; i < moe_plan_n_options(plan); i++) {
            const moe_plan_option *o = moe_plan_option_at(plan, i);
            if (o->placement == MOE_PLACE_CPU && o->fits && o->n_ctx == pp.n_ctx[k]) {
                chosen = (int32_t)(pp.n_ctx[k] / n_parallel);
                *reason = g_strdup_printf("planned for this machine: %d x %d tokens, %.1f of "
                                          "%.1f GiB host memory",
                                          n_parallel, chosen, o->host_bytes / 1073741824.0,
                                          o->host_budget_bytes / 1073741824.0);
                found = TRUE;
                break;
            }
        }
    if (!found)
        *reason = g_strdup_printf("the planner found no context that fits; %d tokens", fallback);
    moe_plan_free(plan);
    return chosen;
}

static svc_model *model_load_with(svc_server *srv, const char *path, const char *name,
                                  int32_t n_ctx, int32_t n_parallel, GError **error)
{
    moe_err err = {0};
    moe_model *mm = NULL;
    if (moe_model_load(path, NULL, &mm, &err) != MOE_OK) {
        g_set_error(error, SVC_ERROR, SVC_ERROR_MODEL_LOAD, "cannot load model %s: %s", path,
                    err.msg);
        return NULL;
    }
    svc_sched_params sp;
    svc_sched_params_init(&sp);
    sp.n_parallel = n_parallel > 0 ? n_parallel : srv->n_parallel;
    sp.n_threads = srv->n_threads;
    sp.queue_max = srv->queue_max;
    char *plan_reason = NULL;
    if (n_ctx <= 0)
        n_ctx = planned_ctx(mm, sp.n_parallel, &plan_reason);
    sp.n_ctx_per_seq = n_ctx;
    GError *e = NULL;
    svc_sched *sched = svc_sched_new(mm, &sp, &e);
    if (!sched) {
        g_set_error(error, SVC_ERROR, SVC_ERROR_MODEL_LOAD, "cannot start model %s: %s", path,
                    e->message);
        g_error_free(e);
        g_free(plan_reason);
        moe_model_free(mm);
        return NULL;
    }
    svc_model *m = g_new0(svc_model, 1);
    m->ref_count = 1;
    m->name = name ? g_strdup(name) : file_stem(path);
    m->path = g_strdup(path);
    m->quant = model_quant(mm);
    m->backend = "cpu";
    m->model = mm;
    m->sched = sched;
    m->n_ctx_per_seq = n_ctx;
    m->loaded_us = g_get_real_time();
    m->last_used_us = g_get_monotonic_time();
    g_message("loaded %s (%s, %s) from %s: %d sequences x %d tokens%s%s", m->name,
              moe_model_arch(mm), m->quant, path, sp.n_parallel, n_ctx,
              plan_reason ? "; " : "", plan_reason ? plan_reason : "");
    g_free(plan_reason);
    return m;
}

svc_model *svc_model_ref(svc_model *m)
{
    g_atomic_int_inc(&m->ref_count);
    return m;
}

void svc_model_unref(svc_model *m)
{
    if (!m || !g_atomic_int_dec_and_test(&m->ref_count))
        return;
    svc_sched_free(m->sched);
    if (m->prompt && m->prompt_free)
        m->prompt_free(m->prompt);
    moe_model_free(m->model);
    g_free(m->name);
    g_free(m->path);
    g_free(m->quant);
    g_free(m);
}

/* "name", "name:latest" and case differences all match. */
static gboolean name_matches(const char *want, const char *have)
{
    if (!g_ascii_strcasecmp(want, have))
        return TRUE;
    size_t n = strlen(have);
    return g_ascii_strncasecmp(want, have, n) == 0 && !g_ascii_strcasecmp(want + n, ":latest");
}

/* An installed model's GGUF (its first file) by library name, or NULL. */
static char *installed_model_path(svc_server *srv, const char *name)
{
    char *bare = g_strdup(name);
    char *colon = strrchr(bare, ':');
    if (colon && !g_ascii_strcasecmp(colon, ":latest"))
        *colon = '\0';
    char *result = NULL;
    GError *e = NULL;
    if (moe_library_check_name(bare, NULL)) {
        char *dir = moe_library_model_dir(bare, &e);
        MoeManifest *mf = dir ? moe_manifest_load_model(bare, NULL) : NULL;
        if (mf) {
            for (guint i = 0; i < mf->files->len && !result; i++) {
                MoeManifestFile *f = g_ptr_array_index(mf->files, i);
                if (g_str_has_suffix(f->path, ".gguf"))
                    result = g_build_filename(dir, f->path, NULL);
            }
            moe_manifest_free(mf);
        }
        g_free(dir);
    }
    g_clear_error(&e);
    g_free(bare);
    (void)srv;
    return result;
}

svc_model *svc_server_current_model(svc_server *srv)
{
    return srv->current;
}

void svc_server_unload_model(svc_server *srv)
{
    if (srv->current) {
        g_message("unloading %s", srv->current->name);
        svc_model *old = srv->current;
        srv->current = NULL;
        svc_sched_shutdown(old->sched, false);
        svc_model_unref(old);
    }
}

svc_model *svc_server_acquire_model(svc_server *srv, const char *name, GError **error)
{
    svc_model *cur = srv->current;
    if (cur && (!name || !*name || name_matches(name, cur->name))) {
        cur->last_used_us = g_get_monotonic_time();
        return svc_model_ref(cur);
    }
    if (!name || !*name) {
        if (srv->model_path) {
            svc_model *m = svc_model_load(srv, srv->model_path, srv->model_name, error);
            if (!m)
                return NULL;
            svc_server_unload_model(srv);
            srv->current = m;
            return svc_model_ref(m);
        }
        if (srv->default_model)
            return svc_server_acquire_model(srv, srv->default_model, error);
        g_set_error(error, SVC_ERROR, SVC_ERROR_MODEL_NOT_FOUND,
                    "no model is loaded; name one or start the service with --model");
        return NULL;
    }
    /* Names become folder names: nothing that could leave the models
     * folder ("../x", "/etc/x", "C:x", control characters) gets that far. */
    GError *ge = NULL;
    if (!svc_guard_model_name_ok(name, &ge)) {
        g_set_error(error, SVC_ERROR, SVC_ERROR_MODEL_NAME, "%s", ge->message);
        g_error_free(ge);
        return NULL;
    }
    /* The --model file under its name, then an installed model. */
    char *path = NULL;
    const char *load_name = NULL;
    if (srv->model_path) {
        char *stem = srv->model_name ? g_strdup(srv->model_name) : file_stem(srv->model_path);
        if (name_matches(name, stem)) {
            path = g_strdup(srv->model_path);
            load_name = srv->model_name;
        }
        g_free(stem);
    }
    char *bare = NULL;
    if (!path) {
        path = installed_model_path(srv, name);
        bare = g_strdup(name);
        char *colon = strrchr(bare, ':');
        if (colon && !g_ascii_strcasecmp(colon, ":latest"))
            *colon = '\0';
        load_name = bare;
    }
    if (!path) {
        g_set_error(error, SVC_ERROR, SVC_ERROR_MODEL_NOT_FOUND,
                    "the model '%s' does not exist (not loaded, not installed, no upstream serves it)",
                    name);
        g_free(bare);
        return NULL;
    }
    svc_model *m = svc_model_load(srv, path, load_name, error);
    g_free(path);
    g_free(bare);
    if (!m)
        return NULL;
    svc_server_unload_model(srv);
    srv->current = m;
    return svc_model_ref(m);
}

void svc_server_model_defaults(svc_server *srv, int32_t *n_parallel, int32_t *n_ctx)
{
    if (n_parallel)
        *n_parallel = srv->n_parallel;
    if (n_ctx)
        *n_ctx = srv->n_ctx;
}

const char *svc_server_default_model_path(svc_server *srv)
{
    return srv->model_path;
}

svc_model *svc_server_load_model(svc_server *srv, const char *name, const char *path,
                                 int32_t n_ctx, int32_t n_parallel, GError **error)
{
    char *file = path ? g_strdup(path) : NULL;
    char *load_name = NULL;
    if (!file && srv->model_path) {
        char *stem = srv->model_name ? g_strdup(srv->model_name) : file_stem(srv->model_path);
        if (!name || !*name || name_matches(name, stem)) {
            file = g_strdup(srv->model_path);
            load_name = g_strdup(srv->model_name);
        }
        g_free(stem);
    }
    if (!file && name && *name)
        file = installed_model_path(srv, name);
    if (!load_name && name && *name) {
        load_name = g_strdup(name);
        char *colon = strrchr(load_name, ':');
        if (colon && !g_ascii_strcasecmp(colon, ":latest"))
            *colon = '\0';
    }
    if (!file) {
        g_set_error(error, SVC_ERROR, SVC_ERROR_MODEL_NOT_FOUND,
                    "the model '%s' is not installed", name ? name : "");
        g_free(load_name);
        return NULL;
    }
    svc_model *m = model_load_with(srv, file, load_name, n_ctx, n_parallel, error);
    g_free(file);
    g_free(load_name);
    if (!m)
        return NULL;
    svc_server_unload_model(srv);
    srv->current = m;
    return svc_model_ref(m);
}

/*
 * manage-catalog.c — GET /moedesk/v1/catalog[?ctx=N]: the model catalog
 * (resources/catalog.json, read by app/catalog/catalog.c exactly as
 * `moedesk-cli plan` reads it) with the memory planner's verdict for every
 * variant on this machine, and which variants are installed.
 *
 * The machine is moe_hw_probe's: this machine, or the machine file named
 * by MOEDESK_MACHINE (as for the CLI), probed at most every
 * MG_MACHINE_TTL_US so a window polling the catalog does not re-initialise
 * NVML each time. Contexts: ?ctx=N plans N tokens; by default each model's
 * own context up to 32768 with 8192 and 4096 as fallbacks (the plan
 * command's default), and the verdicts are given at the first of them.
 *
 * An entry the planner cannot read is listed under "errors" (naming the
 * entry and field) instead of failing the whole catalog.
 */
#include "manage-plan.h"

#include <catalog.h>
#include <math.h>
#include <string.h>

#define MG_MACHINE_TTL_US (5 * G_USEC_PER_SEC)

/* ---- the machine ------------------------------------------------------------- */

gboolean mg_machine(svc_call *call, moe_machine *out)
{
    static moe_machine cached;
    static gint64 cached_us;
    static char cached_env[256];
    const char *env = g_getenv("MOEDESK_MACHINE");
    gint64 now = g_get_monotonic_time();
    if (cached_us && now - cached_us < MG_MACHINE_TTL_US && !g_strcmp0(env ? env : "", cached_env)) {
        *out = cached;
        return TRUE;
    }
    moe_err err = {{0}};
    if (moe_hw_probe(&cached, &err) != MOE_OK) {
        cached_us = 0;
        svc_call_reply_error(call, 500, "server_error", NULL, "machine_error",
                             "cannot describe this machine: %s", err.msg);
        return FALSE;
    }
    cached_us = now;
    g_strlcpy(cached_env, env ? env : "", sizeof cached_env);
    *out = cached;
    return TRUE;
}

void mg_add_machine(JsonBuilder *b, const char *name, const moe_machine *m)
{
    json_builder_set_member_name(b, name);
    json_builder_begin_object(b);
    mg_add_str(b, "name", m->name);
    mg_add_bool(b, "from_file", m->from_file);
    mg_add_str(b, "cpu", m->cpu_name);
    json_builder_set_member_name(b, "cpu_features");
    json_builder_begin_array(b);
    for (int i = 0; i < MOE_CPU_FEATURE_COUNT; i++)
        if (m->cpu_features & (1u << i))
            json_builder_add_string_value(b, moe_cpu_feature_name((moe_cpu_feature)(1u << i)));
    json_builder_end_array(b);
    mg_add_int(b, "cores_logical", m->n_cores_logical);
    mg_add_int(b, "cores_physical", m->n_cores_physical);
    mg_add_u64(b, "ram_total_bytes", m->ram_total_bytes);
    mg_add_u64(b, "ram_free_bytes", m->ram_free_bytes);
    json_builder_set_member_name(b, "gpus");
    json_builder_begin_array(b);
    for (int i = 0; i < m->n_gpus; i++) {
        const moe_gpu_info *g = &m->gpus[i];
        json_builder_begin_object(b);
        mg_add_str(b, "name", g->name);
        mg_add_str(b, "driver", g->driver[0] ? g->driver : NULL);
        mg_add_u64(b, "vram_total_bytes", g->vram_total_bytes);
        mg_add_u64(b, "vram_free_bytes", g->vram_free_bytes);
        mg_add_double(b, "power_watts", g->power_watts > 0 ? g->power_watts : NAN);
        mg_add_bool(b, "compute", g->compute);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    mg_add_str(b, "gpu_note", m->gpu_note[0] ? m->gpu_note : NULL);
    json_builder_end_object(b);
}

/* ---- installed variants ---------------------------------------------------------- */

/* TRUE if the comma-separated `list` names `quant` (case-insensitively). */
static gboolean quant_listed(const char *list, const char *quant)
{
    if (!list || !quant)
        return FALSE;
    gboolean found = FALSE;
    char **parts = g_strsplit(list, ",", -1);
    for (char **p = parts; *p && !found; p++)
        found = !g_ascii_strcasecmp(g_strstrip(*p), quant);
    g_strfreev(parts);
    return found;
}

/* The installed model holding `quant` from `repo`, or NULL. */
static const char *installed_as(GPtrArray *installed, const char *repo, const char *quant)
{
    for (guint i = 0; repo && *repo && i < installed->len; i++) {
        MoeManifest *m = g_ptr_array_index(installed, i);
        if (m->repo && !g_ascii_strcasecmp(m->repo, repo) && !g_strcmp0(m->state, "complete") &&
            quant_listed(m->quant, quant))
            return m->name;
    }
    return NULL;
}

/* ---- one catalog entry ---------------------------------------------------------- */

static const char *verdict_key(moe_verdict v)
{
    switch (v) {
    case MOE_VERDICT_FITS_GPU: return "fits_gpu";
    case MOE_VERDICT_PARTIAL: return "partial";
    case MOE_VERDICT_CPU_ONLY: return "cpu_only";
    case MOE_VERDICT_WONT_FIT: break;
    }
    return "wont_fit";
}

/* The option a verdict stands for (the CPU one when nothing fits). */
static const moe_plan_option *verdict_option(const moe_plan *plan, size_t variant, int64_t n_ctx,
                                             moe_verdict v)
{
    moe_placement want = v == MOE_VERDICT_FITS_GPU  ? MOE_PLACE_GPU
                         : v == MOE_VERDICT_PARTIAL ? MOE_PLACE_HYBRID
                                                    : MOE_PLACE_CPU;
    for (size_t i = 0; i < moe_plan_n_options(plan); i++) {
        const moe_plan_option *o = moe_plan_option_at(plan, i);
        if (o->variant == variant && o->n_ctx == n_ctx && o->placement == want)
            return o;
    }
    return NULL;
}

static const char *member_string(JsonObject *e, const char *key)
{
    JsonNode *n = json_object_get_member(e, key);
    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
               ? json_node_get_string(n) : NULL;
}

static void add_variant(JsonBuilder *b, const moe_plan_model *pm, const cli_variant_source *src,
                        const moe_plan *plan, size_t vi, int64_t n_ctx, GPtrArray *installed)
{
    const moe_plan_variant *v = &pm->variants[vi];
    gboolean is_import = src->n_files == 0;
    moe_verdict verdict = moe_plan_verdict(plan, vi, n_ctx);
    const moe_plan_option *o = verdict_option(plan, vi, n_ctx, verdict);
    json_builder_begin_object(b);
    mg_add_str(b, "name", v->name);
    mg_add_str(b, "quant", v->quant);
    uint64_t bytes = 0;
    for (int g = 0; g < MOE_GROUP_COUNT; g++)
        bytes += v->group_bytes[g];
    mg_add_u64(b, "size_bytes", v->file_bytes ? v->file_bytes : bytes);
    mg_add_bool(b, "size_estimated", v->size_estimated);
    mg_add_bool(b, "import", is_import);
    mg_add_str(b, "repo", src->repo[0] ? src->repo : NULL);
    mg_add_str(b, "file", src->file[0] ? src->file : NULL);
    mg_add_int(b, "n_files", src->n_files);
    mg_add_str(b, "verdict", moe_verdict_str(verdict));
    mg_add_str(b, "verdict_key", verdict_key(verdict));
    mg_add_str(b, "placement", o ? mg_placement_key(o->placement) : NULL);
    mg_add_u64(b, "gpu_bytes", o ? o->gpu_bytes : 0);
    mg_add_u64(b, "host_bytes", o ? o->host_bytes : 0);
    /* What to POST to /moedesk/v1/downloads (and, for an import, then to
     * /moedesk/v1/imports with this type). */
    char *source = !src->repo[0] ? NULL
                   : is_import   ? g_strdup(src->repo)
                                 : g_strdup_printf("%s:%s", src->repo, v->quant);
    mg_add_str(b, "download_source", source);
    mg_add_str(b, "import_type", is_import ? v->quant : NULL);
    g_free(source);
    const char *as = installed_as(installed, src->repo, v->quant);
    mg_add_bool(b, "installed", as != NULL);
    mg_add_str(b, "installed_as", as);
    json_builder_end_object(b);
}

/* Plans entry `e` and adds it to the "models" array; FALSE with `why` when
 * it cannot be planned. */
static gboolean add_entry(JsonBuilder *b, JsonObject *e, const moe_machine *mach, gint64 ctx,
                          GPtrArray *installed, char **why)
{
    moe_plan_model *pm = g_new0(moe_plan_model, 1);
    cli_variant_source *src = g_new0(cli_variant_source, MOE_PLAN_MAX_VARIANTS);
    moe_plan *plan = NULL;
    GError *ge = NULL;
    moe_err err = {{0}};
    gboolean ok = FALSE;
    if (!cli_catalog_to_plan_model(e, pm, src, &ge)) {
        *why = g_strdup(ge->message);
        g_error_free(ge);
        goto out;
    }
    moe_plan_params prm = moe_plan_default_params();
    prm.n_n_ctx = 0;
    if (ctx > 0) {
        prm.n_ctx[prm.n_n_ctx++] = ctx;
    } else {
        int64_t c0 = MOE_PLAN_DEFAULT_N_CTX;
        if (pm->n_ctx_train > 0 && pm->n_ctx_train < c0)
            c0 = pm->n_ctx_train;
        prm.n_ctx[prm.n_n_ctx++] = c0;
        if (c0 > 8192)
            prm.n_ctx[prm.n_n_ctx++] = 8192;
        if (c0 > 4096)
            prm.n_ctx[prm.n_n_ctx++] = 4096;
    }
    if (moe_plan_make(pm, mach, &prm, &plan, &err) != MOE_OK) {
        *why = g_strdup_printf("catalog entry %s: %s", member_string(e, "id"), err.msg);
        goto out;
    }
    json_builder_begin_object(b);
    static const char *const strings[] = {"id", "name", "publisher", "architecture",
                                          "engine_support", "engine_note", "licence"};
    for (size_t i = 0; i < G_N_ELEMENTS(strings); i++)
        mg_add_str(b, strings[i], member_string(e, strings[i]));
    JsonNode *aliases = json_object_get_member(e, "aliases");
    json_builder_set_member_name(b, "aliases");
    if (aliases && JSON_NODE_HOLDS_ARRAY(aliases))
        json_builder_add_value(b, json_node_copy(aliases));
    else
        json_builder_add_null_value(b);
    uint64_t params = 0;
    for (int g = 0; g < MOE_GROUP_COUNT; g++)
        params += pm->group_params[g];
    mg_add_u64(b, "params_total", params);
    mg_add_int(b, "context_length", pm->n_ctx_train);
    mg_add_int(b, "n_ctx", prm.n_ctx[0]);
    int64_t c = moe_plan_chosen(plan);
    json_builder_set_member_name(b, "chosen");
    if (c >= 0) {
        const moe_plan_option *o = moe_plan_option_at(plan, (size_t)c);
        json_builder_begin_object(b);
        mg_add_str(b, "variant", pm->variants[o->variant].name);
        mg_add_str(b, "placement", mg_placement_key(o->placement));
        mg_add_int(b, "n_ctx", o->n_ctx);
        mg_add_u64(b, "gpu_bytes", o->gpu_bytes);
        mg_add_u64(b, "host_bytes", o->host_bytes);
        json_builder_end_object(b);
    } else {
        json_builder_add_null_value(b);
    }
    mg_add_str(b, "reason", moe_plan_reason(plan));
    json_builder_set_member_name(b, "variants");
    json_builder_begin_array(b);
    for (size_t vi = 0; vi < pm->n_variants; vi++)
        add_variant(b, pm, &src[vi], plan, vi, prm.n_ctx[0], installed);
    json_builder_end_array(b);
    json_builder_end_object(b);
    ok = TRUE;
out:
    moe_plan_free(plan);
    g_free(src);
    g_free(pm);
    return ok;
}

static void route_catalog(svc_call *call)
{
    gint64 ctx = 0;
    if (!mg_query_int(call, "ctx", 1, 16777216, &ctx))
        return;
    moe_machine mach;
    if (!mg_machine(call, &mach))
        return;
    const char *path = cli_catalog_default_path();
    GError *e = NULL;
    cli_catalog *cat = cli_catalog_load(path, &e);
    if (!cat) {
        svc_call_reply_error(call, 500, "server_error", NULL, "catalog_error", "%s", e->message);
        g_error_free(e);
        return;
    }
    GPtrArray *installed = moe_manifest_list_installed(NULL);
    GPtrArray *errors = g_ptr_array_new_with_free_func(g_free);
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    mg_add_str(b, "catalog", cli_catalog_path(cat));
    mg_add_machine(b, "machine", &mach);
    json_builder_set_member_name(b, "models");
    json_builder_begin_array(b);
    for (guint i = 0; i < cli_catalog_n_entries(cat); i++) {
        JsonObject *entry = cli_catalog_entry_at(cat, i);
        char *why = NULL;
        if (!entry)
            g_ptr_array_add(errors, g_strdup_printf("%s: models[%u] is not an object", path, i));
        else if (!add_entry(b, entry, &mach, ctx, installed, &why))
            g_ptr_array_add(errors, why);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "errors");
    json_builder_begin_array(b);
    for (guint i = 0; i < errors->len; i++)
        json_builder_add_string_value(b, g_ptr_array_index(errors, i));
    json_builder_end_array(b);
    json_builder_end_object(b);
    mg_reply_builder(call, 200, b);
    g_object_unref(b);
    g_ptr_array_unref(errors);
    g_ptr_array_unref(installed);
    cli_catalog_free(cat);
}

void mg_catalog_register(svc_server *srv)
{
    svc_server_add_route(srv, "GET", MG_PREFIX "catalog", 0, SVC_STYLE_OPENAI, route_catalog);
}

/*
 * cmd-plan.c — `moedesk-cli plan MODEL [--ctx N[,N...]] [--machine FILE]
 * [--catalog FILE] [--kv-type f16|q8_0] [--ceiling F] [--all] [--json]`: runs the
 * memory planner for a model on this machine (or a machine file) and
 * prints every (context, quantisation, placement) option with the GPU and
 * host memory it needs, the choice and its reason, and each variant's
 * verdict. MODEL is a GGUF file (planned from its tensors) or a catalog
 * entry: id, name, alias or Hugging Face repository.
 *
 * Exit status: 0 with a plan (also when nothing fits: the plan says what
 * it would need), 1 for bad input (unknown model, unreadable machine file
 * or catalog, bad --ctx), 2 for a usage error.
 */
#include "catalog.h"
#include "cli.h"

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

typedef struct plan_input {
    moe_plan_model     model;
    cli_variant_source sources[MOE_PLAN_MAX_VARIANTS];
    const char        *kind;           /* "catalog" or "file"           */
    char               id[96];         /* catalog id or file path       */
    char               support[24];    /* engine_support, "" for a file */
    char               support_note[512];
} plan_input;

static double gib(uint64_t b)
{
    return (double)b / 1073741824.0;
}

static const char *placement_key(moe_placement p)
{
    return p == MOE_PLACE_GPU ? "gpu" : p == MOE_PLACE_HYBRID ? "hybrid" : "cpu";
}

static uint64_t variant_bytes(const moe_plan_variant *v)
{
    uint64_t s = 0;
    for (int g = 0; g < MOE_GROUP_COUNT; g++)
        s += v->group_bytes[g];
    return s;
}

static uint64_t params_total(const moe_plan_model *m)
{
    uint64_t s = 0;
    for (int g = 0; g < MOE_GROUP_COUNT; g++)
        s += m->group_params[g];
    return s;
}

/* Fills `in` from a GGUF path or a catalog entry; prints the error. */
static gboolean load_model(const char *name, const char *catalog_path, plan_input *in)
{
    memset(in, 0, sizeof *in);
    if (g_file_test(name, G_FILE_TEST_EXISTS) || g_str_has_suffix(name, ".gguf")) {
        moe_err err = {{0}};
        moe_gguf *g = NULL;
        if (moe_gguf_open(name, &g, &err) != MOE_OK ||
            moe_plan_model_from_gguf(g, &in->model, &err) != MOE_OK) {
            fprintf(stderr, "moedesk-cli plan: %s%s%s\n", g ? name : "", g ? ": " : "", err.msg);
            moe_gguf_free(g);
            return FALSE;
        }
        moe_gguf_free(g);
        in->kind = "file";
        g_strlcpy(in->id, name, sizeof in->id);
        g_strlcpy(in->sources[0].file, name, sizeof in->sources[0].file);
        in->sources[0].n_files = 1;
        return TRUE;
    }
    g_autoptr(GError) gerr = NULL;
    g_autoptr(cli_catalog) cat = cli_catalog_load(catalog_path, &gerr);
    if (!cat) {
        fprintf(stderr, "moedesk-cli plan: %s\n", gerr->message);
        return FALSE;
    }
    JsonObject *e = cli_catalog_find(cat, name);
    if (!e) {
        fprintf(stderr,
                "moedesk-cli plan: unknown model '%s': not a GGUF file, and no id, name, alias or "
                "repository in %s\n",
                name, catalog_path);
        return FALSE;
    }
    if (!cli_catalog_to_plan_model(e, &in->model, in->sources, &gerr)) {
        fprintf(stderr, "moedesk-cli plan: %s: %s\n", catalog_path, gerr->message);
        return FALSE;
    }
    in->kind = "catalog";
    g_strlcpy(in->id, json_object_get_string_member_with_default(e, "id", name), sizeof in->id);
    g_strlcpy(in->support, json_object_get_string_member_with_default(e, "engine_support", "?"),
              sizeof in->support);
    g_strlcpy(in->support_note, json_object_get_string_member_with_default(e, "engine_note", ""),
              sizeof in->support_note);
    return TRUE;
}

/* "--ctx 32768 --ctx 8192,4096" -> params; prints the error. */
static gboolean parse_contexts(char **ctx_args, const moe_plan_model *m, moe_plan_params *p)
{
    p->n_n_ctx = 0;
    for (size_t i = 0; ctx_args && ctx_args[i]; i++) {
        g_auto(GStrv) parts = g_strsplit(ctx_args[i], ",", -1);
        for (size_t k = 0; parts[k]; k++) {
            guint64 v = 0;
            if (!g_ascii_string_to_unsigned(g_strstrip(parts[k]), 10, 1, 16777216, &v, NULL)) {
                fprintf(stderr, "moedesk-cli plan: --ctx '%s' is not a context length (1..16777216)\n",
                        parts[k]);
                return FALSE;
            }
            if (p->n_n_ctx == MOE_PLAN_MAX_CTX) {
                fprintf(stderr, "moedesk-cli plan: at most %d contexts\n", MOE_PLAN_MAX_CTX);
                return FALSE;
            }
            p->n_ctx[p->n_n_ctx++] = (int64_t)v;
        }
    }
    if (p->n_n_ctx == 0) {
        /* the model's context up to 32768, then smaller fallbacks */
        int64_t c0 = MOE_PLAN_DEFAULT_N_CTX;
        if (m->n_ctx_train > 0 && m->n_ctx_train < c0)
            c0 = m->n_ctx_train;
        p->n_ctx[p->n_n_ctx++] = c0;
        if (c0 > 8192)
            p->n_ctx[p->n_n_ctx++] = 8192;
        if (c0 > 4096)
            p->n_ctx[p->n_n_ctx++] = 4096;
    }
    return TRUE;
}

static void budgets(const moe_machine *mach, double ceiling, uint64_t *gpu, uint64_t *host,
                    int *n_gpus)
{
    *gpu = 0;
    *n_gpus = 0;
    for (int i = 0; i < mach->n_gpus; i++) {
        if (!mach->gpus[i].compute)
            continue;
        const uint64_t cap = (uint64_t)((double)mach->gpus[i].vram_total_bytes * ceiling);
        *gpu += cap < mach->gpus[i].vram_free_bytes ? cap : mach->gpus[i].vram_free_bytes;
        (*n_gpus)++;
    }
    const uint64_t cap = (uint64_t)((double)mach->ram_total_bytes * ceiling);
    *host = cap < mach->ram_free_bytes ? cap : mach->ram_free_bytes;
}

/* Without --all the table shows one context: the choice's, or the first. */
static void print_text(const plan_input *in, const moe_machine *mach, const moe_plan_params *prm,
                       const moe_plan *plan, gboolean all)
{
    const moe_plan_model *m = &in->model;
    uint64_t gb, hb;
    int ng;
    budgets(mach, prm->ceiling, &gb, &hb, &ng);
    printf("model:    %s (%s, %.1f B parameters) from %s %s\n", m->name, m->arch,
           params_total(m) / 1e9, in->kind, in->id);
    if (in->support[0])
        printf("engine:   %s: %s\n", in->support, in->support_note);
    printf("machine:  %s: %d GPU%s with %.1f GiB usable, %.1f GiB usable RAM (ceiling %.0f%%)\n",
           mach->name, ng, ng == 1 ? "" : "s", gib(gb), gib(hb), prm->ceiling * 100.0);
    printf("\n  %-7s %-16s %-10s %-15s %-16s %-16s %-4s %s\n", "ctx", "variant", "weights",
           "placement", "GPU GiB", "host GiB", "fits", "source");
    const int64_t chosen = moe_plan_chosen(plan);
    const int64_t shown_ctx =
        chosen >= 0 ? moe_plan_option_at(plan, (size_t)chosen)->n_ctx : prm->n_ctx[0];
    for (size_t i = 0; i < moe_plan_n_options(plan); i++) {
        const moe_plan_option *o = moe_plan_option_at(plan, i);
        const moe_plan_variant *v = &m->variants[o->variant];
        if (!all && o->n_ctx != shown_ctx)
            continue;
        const cli_variant_source *s = &in->sources[o->variant];
        char gpu[32] = "-", host[32], weights[32], src[200];
        if (o->placement != MOE_PLACE_CPU)
            snprintf(gpu, sizeof gpu, "%.1f / %.1f", gib(o->gpu_bytes), gib(o->gpu_budget_bytes));
        snprintf(host, sizeof host, "%.1f / %.1f", gib(o->host_bytes), gib(o->host_budget_bytes));
        snprintf(weights, sizeof weights, "%s%.1f", v->size_estimated ? "~" : "", gib(variant_bytes(v)));
        if (s->n_files > 1)
            snprintf(src, sizeof src, "%s: %s (+%d)", s->repo, s->file, s->n_files - 1);
        else if (s->n_files == 1)
            snprintf(src, sizeof src, "%s%s%s", s->repo, s->repo[0] ? ": " : "", s->file);
        else
            snprintf(src, sizeof src, "import from %s", s->repo);
        printf("%c %-7lld %-16s %-10s %-15s %-16s %-16s %-4s %s\n", (int64_t)i == chosen ? '*' : ' ',
               (long long)o->n_ctx, v->name, weights, moe_placement_str(o->placement), gpu, host,
               o->fits ? "yes" : "no", src);
    }
    printf("\nverdicts at %lld tokens:\n", (long long)prm->n_ctx[0]);
    for (size_t vi = 0; vi < m->n_variants; vi++)
        printf("  %-16s %s\n", m->variants[vi].name,
               moe_verdict_str(moe_plan_verdict(plan, vi, prm->n_ctx[0])));
    if (chosen >= 0) {
        const moe_plan_option *o = moe_plan_option_at(plan, (size_t)chosen);
        printf("\nchoice:   %s, %s, %lld tokens\n", m->variants[o->variant].name,
               moe_placement_str(o->placement), (long long)o->n_ctx);
    } else {
        printf("\nchoice:   none (does not fit)\n");
    }
    printf("reason:   %s\n", moe_plan_reason(plan));
}

static void add_u64(JsonBuilder *b, const char *name, uint64_t v)
{
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, (gint64)(v > (uint64_t)G_MAXINT64 ? (uint64_t)G_MAXINT64 : v));
}

static void add_str(JsonBuilder *b, const char *name, const char *v)
{
    json_builder_set_member_name(b, name);
    if (v)
        json_builder_add_string_value(b, v);
    else
        json_builder_add_null_value(b);
}

static void print_json(const plan_input *in, const moe_machine *mach, const moe_plan_params *prm,
                       const moe_plan *plan)
{
    const moe_plan_model *m = &in->model;
    uint64_t gb, hb;
    int ng;
    budgets(mach, prm->ceiling, &gb, &hb, &ng);
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "model");
    json_builder_begin_object(b);
    add_str(b, "name", m->name);
    add_str(b, "architecture", m->arch);
    add_str(b, "source", in->kind);
    add_str(b, "id", in->id);
    add_str(b, "engine_support", in->support[0] ? in->support : NULL);
    add_u64(b, "params_total", params_total(m));
    json_builder_end_object(b);
    json_builder_set_member_name(b, "machine");
    json_builder_begin_object(b);
    add_str(b, "name", mach->name);
    json_builder_set_member_name(b, "compute_gpus");
    json_builder_add_int_value(b, ng);
    add_u64(b, "gpu_budget", gb);
    add_u64(b, "host_budget", hb);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "contexts");
    json_builder_begin_array(b);
    for (size_t i = 0; i < prm->n_n_ctx; i++)
        json_builder_add_int_value(b, prm->n_ctx[i]);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "options");
    json_builder_begin_array(b);
    for (size_t i = 0; i < moe_plan_n_options(plan); i++) {
        const moe_plan_option *o = moe_plan_option_at(plan, i);
        const moe_plan_variant *v = &m->variants[o->variant];
        json_builder_begin_object(b);
        add_str(b, "variant", v->name);
        add_str(b, "quant", v->quant);
        json_builder_set_member_name(b, "size_estimated");
        json_builder_add_boolean_value(b, v->size_estimated);
        add_u64(b, "n_ctx", (uint64_t)o->n_ctx);
        add_str(b, "placement", placement_key(o->placement));
        add_u64(b, "n_gpus", (uint64_t)o->n_gpus);
        add_u64(b, "weights_gpu", o->weights_gpu_bytes);
        add_u64(b, "weights_host", o->weights_host_bytes);
        add_u64(b, "kv", o->kv_bytes);
        add_u64(b, "compute_gpu", o->compute_gpu_bytes);
        add_u64(b, "compute_host", o->compute_host_bytes);
        add_u64(b, "overhead_gpu", o->overhead_gpu_bytes);
        add_u64(b, "overhead_host", o->overhead_host_bytes);
        add_u64(b, "gpu_bytes", o->gpu_bytes);
        add_u64(b, "host_bytes", o->host_bytes);
        add_u64(b, "gpu_budget", o->gpu_budget_bytes);
        add_u64(b, "host_budget", o->host_budget_bytes);
        add_u64(b, "expert_layers_gpu", (uint64_t)o->n_expert_layers_gpu);
        json_builder_set_member_name(b, "fits");
        json_builder_add_boolean_value(b, o->fits);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "chosen");
    const int64_t c = moe_plan_chosen(plan);
    if (c >= 0) {
        const moe_plan_option *o = moe_plan_option_at(plan, (size_t)c);
        json_builder_begin_object(b);
        add_u64(b, "option", (uint64_t)c);
        add_str(b, "variant", m->variants[o->variant].name);
        add_str(b, "placement", placement_key(o->placement));
        add_u64(b, "n_ctx", (uint64_t)o->n_ctx);
        json_builder_end_object(b);
    } else {
        json_builder_add_null_value(b);
    }
    json_builder_set_member_name(b, "verdicts");
    json_builder_begin_array(b);
    for (size_t vi = 0; vi < m->n_variants; vi++) {
        json_builder_begin_object(b);
        add_str(b, "variant", m->variants[vi].name);
        add_u64(b, "n_ctx", (uint64_t)prm->n_ctx[0]);
        add_str(b, "verdict", moe_verdict_str(moe_plan_verdict(plan, vi, prm->n_ctx[0])));
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    add_str(b, "reason", moe_plan_reason(plan));
    json_builder_end_object(b);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, TRUE);
    g_autofree char *text = json_generator_to_data(gen, NULL);
    printf("%s\n", text);
}

int cli_cmd_plan(int argc, char **argv)
{
    gboolean json = FALSE, all = FALSE;
    g_auto(GStrv) ctx_args = NULL;
    g_autofree char *machine_file = NULL, *catalog_file = NULL, *kv_type = NULL;
    double ceiling = MOE_PLAN_DEFAULT_CEILING;
    GOptionEntry entries[] = {
        {"ctx", 0, 0, G_OPTION_ARG_STRING_ARRAY, &ctx_args,
         "Context length(s) to plan, tried in order (default: the model's up to 32768, then 8192, 4096)",
         "N[,N...]"},
        {"machine", 0, 0, G_OPTION_ARG_FILENAME, &machine_file,
         "Plan for the machine FILE describes (see moedesk-cli hw --json)", "FILE"},
        {"catalog", 0, 0, G_OPTION_ARG_FILENAME, &catalog_file, "Model catalog to read", "FILE"},
        {"kv-type", 0, 0, G_OPTION_ARG_STRING, &kv_type, "KV cache type: f16 (default) or q8_0", "TYPE"},
        {"ceiling", 0, 0, G_OPTION_ARG_DOUBLE, &ceiling, "Fraction of memory to use (default 0.90)", "F"},
        {"all", 0, 0, G_OPTION_ARG_NONE, &all, "Show the options of every context tried", NULL},
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print JSON (always every option)", NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) oc =
        g_option_context_new("MODEL — plan memory for a GGUF file or a catalog model");
    g_option_context_add_main_entries(oc, entries, NULL);
    g_autoptr(GError) gerr = NULL;
    if (!g_option_context_parse(oc, &argc, &argv, &gerr) || argc != 2) {
        fprintf(stderr,
                "moedesk-cli plan: %s\nusage: moedesk-cli plan MODEL [--ctx N[,N...]] [--machine FILE] "
                "[--catalog FILE] [--kv-type f16|q8_0] [--ceiling F] [--all] [--json]\n",
                gerr ? gerr->message : "expected one MODEL (a GGUF file or a catalog name)");
        return 2;
    }
    moe_plan_params prm = moe_plan_default_params();
    prm.ceiling = ceiling;
    if (kv_type) {
        if (g_ascii_strcasecmp(kv_type, "f16") == 0)
            prm.kv_type = MOE_TYPE_F16;
        else if (g_ascii_strcasecmp(kv_type, "q8_0") == 0)
            prm.kv_type = MOE_TYPE_Q8_0;
        else {
            fprintf(stderr, "moedesk-cli plan: --kv-type '%s' is not f16 or q8_0\n", kv_type);
            return 1;
        }
    }
    if (!(ceiling > 0.0 && ceiling <= 1.0)) {
        fprintf(stderr, "moedesk-cli plan: --ceiling %g is outside (0, 1]\n", ceiling);
        return 1;
    }

    moe_machine mach;
    moe_err err = {{0}};
    if ((machine_file ? moe_machine_load(machine_file, &mach, &err) : moe_hw_probe(&mach, &err)) !=
        MOE_OK) {
        fprintf(stderr, "moedesk-cli plan: %s\n", err.msg);
        return 1;
    }
    g_autofree plan_input *in = g_new0(plan_input, 1);
    if (!load_model(argv[1], catalog_file ? catalog_file : cli_catalog_default_path(), in))
        return 1;
    if (!parse_contexts(ctx_args, &in->model, &prm))
        return 1;
    moe_plan *plan = NULL;
    if (moe_plan_make(&in->model, &mach, &prm, &plan, &err) != MOE_OK) {
        fprintf(stderr, "moedesk-cli plan: %s\n", err.msg);
        return 1;
    }
    if (json)
        print_json(in, &mach, &prm, plan);
    else
        print_text(in, &mach, &prm, plan, all);
    moe_plan_free(plan);
    return 0;
}

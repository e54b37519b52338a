/*
 * cmd-hw.c — `moedesk-cli hw [--json] [--machine FILE]`: what the hardware
 * probe sees (CPU model and SIMD features, cores, RAM, GPUs with memory,
 * driver and power draw), or what a machine file describes. The JSON form
 * is itself a machine file: save it, edit it ("what if I had two of these
 * GPUs") and hand it to `plan --machine` or MOEDESK_MACHINE.
 */
#include "cli.h"

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdio.h>

static void print_text(const moe_machine *m)
{
    printf("machine:  %s\n", m->name);
    printf("cpu:      %s, %d cores, %d threads\n", m->cpu_name, m->n_cores_physical,
           m->n_cores_logical);
    printf("features:");
    if (!m->cpu_features)
        printf(" (none known)");
    for (int i = 0; i < MOE_CPU_FEATURE_COUNT; i++)
        if (m->cpu_features & (1u << i))
            printf(" %s", moe_cpu_feature_name((moe_cpu_feature)(1u << i)));
    printf("\nram:      %.1f GiB, %.1f GiB available\n", m->ram_total_bytes / 1073741824.0,
           m->ram_free_bytes / 1073741824.0);
    if (m->n_gpus == 0)
        printf("gpus:     none\n");
    for (int i = 0; i < m->n_gpus; i++) {
        const moe_gpu_info *g = &m->gpus[i];
        printf("gpu %d:    %s, %.1f GiB, %.1f GiB free", i, g->name,
               g->vram_total_bytes / 1073741824.0, g->vram_free_bytes / 1073741824.0);
        if (g->driver[0])
            printf(", driver %s", g->driver);
        if (g->power_watts > 0)
            printf(", %.0f W", g->power_watts);
        printf("%s\n", g->compute ? "" : " (not usable for compute)");
    }
    printf("probe:    %s\n", m->gpu_note);
}

static void print_json(const moe_machine *m)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, m->name);
    json_builder_set_member_name(b, "cpu");
    json_builder_add_string_value(b, m->cpu_name);
    json_builder_set_member_name(b, "cpu_features");
    json_builder_begin_array(b);
    for (int i = 0; i < MOE_CPU_FEATURE_COUNT; i++)
        if (m->cpu_features & (1u << i))
            json_builder_add_string_value(b, moe_cpu_feature_name((moe_cpu_feature)(1u << i)));
    json_builder_end_array(b);
    json_builder_set_member_name(b, "cores_logical");
    json_builder_add_int_value(b, m->n_cores_logical);
    json_builder_set_member_name(b, "cores_physical");
    json_builder_add_int_value(b, m->n_cores_physical);
    json_builder_set_member_name(b, "ram_total");
    json_builder_add_int_value(b, (gint64)m->ram_total_bytes);
    json_builder_set_member_name(b, "ram_free");
    json_builder_add_int_value(b, (gint64)m->ram_free_bytes);
    json_builder_set_member_name(b, "gpus");
    json_builder_begin_array(b);
    for (int i = 0; i < m->n_gpus; i++) {
        const moe_gpu_info *g = &m->gpus[i];
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, g->name);
        json_builder_set_member_name(b, "vram_total");
        json_builder_add_int_value(b, (gint64)g->vram_total_bytes);
        json_builder_set_member_name(b, "vram_free");
        json_builder_add_int_value(b, (gint64)g->vram_free_bytes);
        json_builder_set_member_name(b, "driver");
        json_builder_add_string_value(b, g->driver);
        json_builder_set_member_name(b, "power_watts");
        json_builder_add_double_value(b, g->power_watts);
        json_builder_set_member_name(b, "compute");
        json_builder_add_boolean_value(b, g->compute);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, TRUE);
    g_autofree char *text = json_generator_to_data(gen, NULL);
    printf("%s\n", text);
}

int cli_cmd_hw(int argc, char **argv)
{
    gboolean json = FALSE;
    g_autofree char *machine_file = NULL;
    GOptionEntry entries[] = {
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print JSON (a machine file)", NULL},
        {"machine", 0, 0, G_OPTION_ARG_FILENAME, &machine_file,
         "Describe FILE instead of this machine", "FILE"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) oc = g_option_context_new("— describe this machine's CPU, RAM and GPUs");
    g_option_context_add_main_entries(oc, entries, NULL);
    g_autoptr(GError) gerr = NULL;
    if (!g_option_context_parse(oc, &argc, &argv, &gerr) || argc != 1) {
        fprintf(stderr, "moedesk-cli hw: %s\nusage: moedesk-cli hw [--json] [--machine FILE]\n",
                gerr ? gerr->message : "unexpected argument");
        return 2;
    }
    moe_machine m;
    moe_err err = {{0}};
    moe_status st = machine_file ? moe_machine_load(machine_file, &m, &err) : moe_hw_probe(&m, &err);
    if (st != MOE_OK) {
        fprintf(stderr, "moedesk-cli hw: %s\n", err.msg);
        return 1;
    }
    if (json)
        print_json(&m);
    else
        print_text(&m);
    return 0;
}

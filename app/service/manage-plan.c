/*
 * manage-plan.c — planning a model load (manage-plan.h): find the GGUF to
 * load, read its tensor sizes (moe_plan_model_from_gguf), and ask the
 * memory planner about n_parallel x n_ctx KV cells on this machine.
 *
 * The engine behind the service runs on the CPU, so "fits" is the CPU
 * placement's verdict: weights, KV cache, compute buffers and overheads
 * within the host budget (min(RAM x 0.9, free RAM)). The planner's own
 * choice (which would use GPUs) is reported beside it.
 *
 * A split set's first part holds only some tensors: its sizes are scaled
 * to the whole set's file size, which is what the weights occupy.
 */
#include "manage-plan.h"

#include <library.h>
#include <string.h>

const char *mg_placement_key(moe_placement p)
{
    return p == MOE_PLACE_GPU ? "gpu" : p == MOE_PLACE_HYBRID ? "hybrid" : "cpu";
}

GPtrArray *mg_plan_groups(MoeManifest *m)
{
    return moe_quant_groups(m->files);
}

void mg_load_plan_clear(mg_load_plan *lp)
{
    g_free(lp->path);
    g_free(lp->quant);
    g_free(lp->reason);
    memset(lp, 0, sizeof *lp);
}

/* Plans one file (`set_bytes`: the whole split set, 0 for one file) into
 * `lp`'s figures. FALSE with a message when the file cannot be planned. */
static gboolean plan_file(const char *path, guint64 set_bytes, int32_t n_ctx_req,
                          mg_load_plan *lp, char **why)
{
    moe_err err = {{0}};
    moe_gguf *g = NULL;
    moe_plan_model *pm = g_new0(moe_plan_model, 1);
    moe_plan *plan = NULL;
    gboolean ok = FALSE;
    if (moe_gguf_open(path, &g, &err) != MOE_OK || moe_plan_model_from_gguf(g, pm, &err) != MOE_OK)
        goto out;
    moe_plan_variant *v = &pm->variants[0];
    guint64 file_bytes = 0;
    for (int k = 0; k < MOE_GROUP_COUNT; k++)
        file_bytes += v->group_bytes[k];
    if (set_bytes > file_bytes && file_bytes > 0) {
        double scale = (double)set_bytes / (double)file_bytes;
        for (int k = 0; k < MOE_GROUP_COUNT; k++)
            v->group_bytes[k] = (uint64_t)((double)v->group_bytes[k] * scale);
        v->file_bytes = set_bytes;
    }
    int32_t n_ctx = n_ctx_req;
    if (n_ctx <= 0) /* model.c's rule: the model's own context, at most 4096 */
        n_ctx = pm->n_ctx_train > 0 && pm->n_ctx_train < 4096 ? (int32_t)pm->n_ctx_train : 4096;
    lp->n_ctx = n_ctx;
    moe_plan_params prm = moe_plan_default_params();
    prm.n_ctx[0] = (int64_t)n_ctx * lp->n_parallel;
    prm.n_n_ctx = 1;
    if (moe_plan_make(pm, &lp->machine, &prm, &plan, &err) != MOE_OK)
        goto out;
    lp->fits = FALSE;
    for (size_t i = 0; i < moe_plan_n_options(plan); i++) {
        const moe_plan_option *o = moe_plan_option_at(plan, i);
        if (o->placement != MOE_PLACE_CPU)
            continue;
        lp->fits = o->fits;
        lp->host_bytes = o->host_bytes;
        lp->host_budget_bytes = o->host_budget_bytes;
        lp->weights_bytes = o->weights_host_bytes;
        lp->kv_bytes = o->kv_bytes;
    }
    int64_t c = moe_plan_chosen(plan);
    lp->has_choice = c >= 0;
    if (c >= 0) {
        const moe_plan_option *o = moe_plan_option_at(plan, (size_t)c);
        lp->choice_placement = o->placement;
        lp->choice_gpu_bytes = o->gpu_bytes;
        lp->choice_host_bytes = o->host_bytes;
        lp->choice_n_gpus = o->n_gpus;
    }
    g_free(lp->reason);
    lp->reason = g_strdup(moe_plan_reason(plan));
    ok = TRUE;
out:
    if (!ok)
        *why = g_strdup_printf("%s: %s", path, err.msg);
    moe_plan_free(plan);
    moe_gguf_free(g);
    g_free(pm);
    return ok;
}

static char *group_path(const char *dir, MoeQuantGroup *grp)
{
    MoeManifestFile *f = g_ptr_array_index(grp->files, 0);
    char **parts = g_strsplit(f->path, "/", -1);
    char *rel = g_build_filenamev(parts);
    char *path = g_build_filename(dir, rel, NULL);
    g_strfreev(parts);
    g_free(rel);
    return path;
}

static int32_t quality_of(const char *quant)
{
    int32_t q = -1;
    if (!quant || !moe_plan_quant_info(quant, NULL, &q))
        return -1;
    return q;
}

static gboolean file_stem_is(const char *path, const char *name)
{
    char *base = g_path_get_basename(path);
    if (g_str_has_suffix(base, ".gguf"))
        base[strlen(base) - 5] = '\0';
    gboolean same = !g_ascii_strcasecmp(base, name);
    g_free(base);
    return same;
}

/* The --model file when `name` is its name; else NULL. */
static const char *default_model_for(svc_server *srv, const char *name)
{
    const char *path = svc_server_default_model_path(srv);
    if (!path)
        return NULL;
    svc_model *cur = svc_server_current_model(srv);
    if (file_stem_is(path, name) ||
        (cur && !g_strcmp0(cur->path, path) && !g_ascii_strcasecmp(cur->name, name)))
        return path;
    return NULL;
}

static gboolean plan_installed(svc_call *call, const char *name, MoeManifest *m,
                               const char *quant, int32_t n_ctx, mg_load_plan *lp)
{
    if (g_strcmp0(m->state, "complete")) {
        svc_call_reply_error(call, 409, "conflict_error", "name", "model_incomplete",
                             "%s is not completely downloaded (state %s); resume its download",
                             name, m->state);
        return FALSE;
    }
    GPtrArray *groups = mg_plan_groups(m);
    char *dir = moe_library_model_dir(name, NULL);
    gboolean ok = FALSE;
    if (!groups->len) {
        svc_call_reply_error(call, 409, "conflict_error", "name", "no_gguf",
                             "%s has no GGUF file (a Hugging Face checkpoint: import it first "
                             "with POST /moedesk/v1/imports)", name);
        goto out;
    }
    MoeQuantGroup *pick = NULL;
    if (quant) {
        pick = moe_quant_find(groups, quant);
        if (!pick) {
            GString *have = g_string_new(NULL);
            for (guint i = 0; i < groups->len; i++)
                g_string_append_printf(have, "%s%s", i ? ", " : "",
                                       ((MoeQuantGroup *)g_ptr_array_index(groups, i))->quant);
            svc_call_reply_error(call, 404, "invalid_request_error", "quant", "not_found",
                                 "%s has no quantisation %s installed (it has: %s)", name, quant,
                                 have->str);
            g_string_free(have, TRUE);
            goto out;
        }
    }
    /* Without a quant: the best quality that fits; the smallest (first)
     * when none does, so the answer says what is missing. */
    int32_t best_q = -2;
    for (guint i = 0; i < groups->len; i++) {
        MoeQuantGroup *grp = g_ptr_array_index(groups, i);
        if (pick && grp != pick)
            continue;
        char *path = group_path(dir, grp);
        char *why = NULL;
        mg_load_plan trial = *lp; /* machine and parallelism; owned strings not */
        trial.path = trial.quant = trial.reason = NULL;
        if (!plan_file(path, grp->files->len > 1 ? grp->bytes : 0, n_ctx, &trial, &why)) {
            svc_call_reply_error(call, 500, "server_error", NULL, "plan_failed",
                                 "cannot plan %s: %s", name, why);
            g_free(why);
            g_free(path);
            g_free(trial.reason);
            goto out;
        }
        int32_t q = quality_of(grp->quant);
        gboolean better = !lp->path || (trial.fits && (!lp->fits || q > best_q));
        if (better) {
            mg_load_plan_clear(lp);
            *lp = trial;
            lp->path = path;
            lp->quant = g_strdup(grp->quant);
            best_q = q;
        } else {
            g_free(path);
            g_free(trial.reason);
        }
    }
    ok = TRUE;
out:
    g_free(dir);
    g_ptr_array_unref(groups);
    return ok;
}

gboolean mg_plan_load(svc_call *call, const char *name, const char *quant, int32_t n_ctx,
                      int32_t n_parallel, mg_load_plan *lp)
{
    svc_server *srv = svc_call_server(call);
    memset(lp, 0, sizeof *lp);
    int32_t def_par = 0, def_ctx = 0;
    svc_server_model_defaults(srv, &def_par, &def_ctx);
    lp->n_parallel = n_parallel > 0 ? n_parallel : def_par;
    if (n_ctx <= 0)
        n_ctx = def_ctx;
    if (!mg_machine(call, &lp->machine))
        return FALSE;
    GError *e = NULL;
    MoeManifest *m = moe_manifest_load_model(name, &e);
    if (m) {
        gboolean ok = plan_installed(call, name, m, quant, n_ctx, lp);
        moe_manifest_free(m);
        return ok;
    }
    const char *def = g_error_matches(e, MOE_LIBRARY_ERROR, MOE_LIBRARY_ERROR_NOT_FOUND)
                          ? default_model_for(srv, name) : NULL;
    if (!def) {
        mg_reply_library_error(call, e, "name");
        g_error_free(e);
        return FALSE;
    }
    g_error_free(e);
    char *why = NULL;
    if (!plan_file(def, 0, n_ctx, lp, &why)) {
        svc_call_reply_error(call, 500, "server_error", NULL, "plan_failed", "cannot plan %s: %s",
                             name, why);
        g_free(why);
        return FALSE;
    }
    return TRUE; /* lp->path stays NULL: the server loads its --model file */
}

void mg_plan_add_json(JsonBuilder *b, const mg_load_plan *lp)
{
    json_builder_set_member_name(b, "plan");
    json_builder_begin_object(b);
    mg_add_str(b, "machine", lp->machine.name);
    mg_add_str(b, "quant", lp->quant);
    mg_add_int(b, "n_ctx_per_seq", lp->n_ctx);
    mg_add_int(b, "n_parallel", lp->n_parallel);
    mg_add_int(b, "kv_cells", (gint64)lp->n_ctx * lp->n_parallel);
    mg_add_str(b, "placement", "cpu");
    mg_add_bool(b, "fits", lp->fits);
    mg_add_u64(b, "host_bytes", lp->host_bytes);
    mg_add_u64(b, "host_budget_bytes", lp->host_budget_bytes);
    mg_add_u64(b, "weights_bytes", lp->weights_bytes);
    mg_add_u64(b, "kv_bytes", lp->kv_bytes);
    json_builder_set_member_name(b, "planner_choice");
    if (lp->has_choice) {
        json_builder_begin_object(b);
        mg_add_str(b, "placement", mg_placement_key(lp->choice_placement));
        mg_add_int(b, "n_gpus", lp->choice_n_gpus);
        mg_add_u64(b, "gpu_bytes", lp->choice_gpu_bytes);
        mg_add_u64(b, "host_bytes", lp->choice_host_bytes);
        json_builder_end_object(b);
    } else {
        json_builder_add_null_value(b);
    }
    mg_add_str(b, "reason", lp->reason);
    json_builder_end_object(b);
}

/*
 * import.c — drives an import (see import.h): reads config.json, the
 * tokenizer files and the shard headers, builds the tensor plan, picks each
 * tensor's type with moe_quant_policy, writes the key/values, then streams
 * every tensor from the mapped shards into the GGUF writer.
 *
 * Conversion works on chunks of whole rows: a chunk of source rows (in
 * permuted order for Mixtral's Q/K) is widened to float32 and quantised
 * with moe_quantize_row into the target type, the rows split between
 * threads when the target is an expensive one (K-quants run at tens of
 * MB/s per thread). A source already in the target float type is copied
 * as is. Each chunk's source pages are released (madvise) once written,
 * so resident memory stays at the buffers, whatever the model size.
 * Buffers: CHUNK_ELEMS floats and their encoding per thread.
 */
#include "import-internal.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#ifndef _WIN32
#include <sys/mman.h>
#include <unistd.h>
#endif

#define CHUNK_ELEMS ((gint64)1 << 20) /* floats converted per thread per step */

G_DEFINE_QUARK(moedesk-import-error-quark, moedesk_import_error)

/* Quantisations the importer writes, best first, with the moe_type each
 * stands for. */
static const struct {
    const char *quant;
    moe_type    type;
} k_import_types[] = {
    { "BF16", MOE_TYPE_BF16 }, { "Q8_0", MOE_TYPE_Q8_0 }, { "Q6_K", MOE_TYPE_Q6_K },
    { "Q4_K_M", MOE_TYPE_Q4_K }, { "Q4_0", MOE_TYPE_Q4_0 },
};

moe_type moedesk_import_choose_type(moe_plan_model *model, const moe_machine *machine,
                                    char **reason)
{
    moe_err err = { { 0 } };
    model->n_variants = 0;
    for (size_t i = 0; i < G_N_ELEMENTS(k_import_types); i++)
        if (moe_plan_model_add_variant(model, NULL, k_import_types[i].quant, 0, true, &err) !=
            MOE_OK)
            goto fallback;
    moe_plan *plan = NULL;
    if (moe_plan_model_check(model, &err) != MOE_OK ||
        moe_plan_make(model, machine, NULL, &plan, &err) != MOE_OK)
        goto fallback;
    const int64_t chosen = moe_plan_chosen(plan);
    moe_type type = MOE_TYPE_Q4_K;
    if (chosen >= 0) {
        const moe_plan_option *o = moe_plan_option_at(plan, (size_t)chosen);
        for (size_t i = 0; i < G_N_ELEMENTS(k_import_types); i++)
            if (strcmp(model->variants[o->variant].quant, k_import_types[i].quant) == 0)
                type = k_import_types[i].type;
    }
    if (reason)
        *reason = g_strdup_printf("%s%s", chosen >= 0 ? "" : "nothing fits, so Q4_K_M: ",
                                  moe_plan_reason(plan));
    moe_plan_free(plan);
    return type;
fallback:
    if (reason)
        *reason = g_strdup_printf("planner unavailable (%s), so Q8_0", err.msg);
    return MOE_TYPE_Q8_0;
}

/* The planner's view of the checkpoint: hyperparameters from config.json,
 * parameters per tensor group from the plan. */
static void plan_model_of(const hf_config *c, const hf_plan *plan, const char *name,
                          moe_plan_model *m)
{
    memset(m, 0, sizeof *m);
    g_strlcpy(m->name, name, sizeof m->name);
    g_strlcpy(m->arch, c->gguf_arch, sizeof m->arch);
    m->n_layer = c->n_layer;
    m->n_embd = c->n_embd;
    m->n_vocab = c->n_vocab;
    m->n_head = c->n_head;
    m->n_head_kv = c->n_head_kv;
    m->head_dim_k = m->head_dim_v = c->head_dim;
    m->n_expert = c->n_expert;
    m->n_expert_used = c->n_expert_used;
    m->n_ff_expert = c->n_ff_exp;
    gint64 ctx = 0;
    if (hf_json_int(c->root, "max_position_embeddings", "config.json", &ctx, NULL) && ctx > 0)
        m->n_ctx_train = ctx;
    for (gint64 i = 0; i < plan->n_tensors; i++) {
        const hf_plan_tensor *t = &plan->tensors[i];
        m->group_params[moe_tensor_group_of(t->name)] +=
            (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    }
}

void moedesk_import_result_clear(moedesk_import_result *r)
{
    if (!r)
        return;
    g_free(r->out_path);
    g_free(r->type_reason);
    memset(r, 0, sizeof *r);
}

/* Gives the pages wholly inside [p, p + n) back to the OS: they are
 * clean file pages of a read-only mapping, reread on a later touch. */
static void release_pages(const void *p, size_t n)
{
#if !defined(_WIN32) && defined(MADV_DONTNEED)
    static size_t page;
    if (!page)
        page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t b = ((uintptr_t)p + n) & ~(uintptr_t)(page - 1);
    if (b > a)
        madvise((void *)a, b - a, MADV_DONTNEED);
#else
    (void)p;
    (void)n;
#endif
}

/* ---- conversion ---- */

typedef struct job {
    const hf_plan_tensor         *t;
    const hf_source              *src;
    gint64                        row0, n_rows; /* output rows of this slice */
    float                        *f32;          /* n_rows * ne0 floats       */
    guint8                       *out;          /* its encoding              */
    moe_status                    st;
} job;

static void widen_row(moe_st_dtype dt, const guint8 *src, float *dst, gint64 n)
{
    if (dt == MOE_ST_F32) {
        memcpy(dst, src, (size_t)n * 4);
    } else if (dt == MOE_ST_BF16) {
        for (gint64 i = 0; i < n; i++) {
            guint32 bits = (guint32)(src[2 * i] | src[2 * i + 1] << 8) << 16;
            memcpy(&dst[i], &bits, 4);
        }
    } else {
        for (gint64 i = 0; i < n; i++)
            dst[i] = moe_f16_to_f32((uint16_t)(src[2 * i] | src[2 * i + 1] << 8));
    }
}

static void run_job(job *j)
{
    const gint64 ne0 = j->t->ne[0];
    const moe_st_dtype dt = j->src->t->dtype;
    const size_t src_row = (size_t)ne0 * moe_st_dtype_size(dt);
    const guint8 *base = (const guint8 *)j->src->t->data + (size_t)j->src->row0 * src_row;
    for (gint64 i = 0; i < j->n_rows; i++) {
        gint64 r = j->row0 + i;
        if (j->t->perm_heads)
            r = hf_plan_permuted_source_row(r, j->src->n_rows, j->t->perm_heads);
        widen_row(dt, base + (size_t)r * src_row, j->f32 + i * ne0, ne0);
    }
    j->st = moe_quantize_row(j->t->type, j->f32, j->out, j->n_rows * ne0);
}

static gpointer job_thread(gpointer p)
{
    run_job(p);
    return NULL;
}

typedef struct converter {
    moe_gguf_writer *w;
    int              n_threads;
    float           *f32;  /* n_threads * CHUNK_ELEMS (or a row) floats    */
    guint8          *out;  /* as many bytes times 4                         */
    gint64           cap;  /* floats per thread                             */
    guint64          done, total;
    const moedesk_import_options *opt;
} converter;

static gboolean is_copy(const hf_plan_tensor *t, moe_st_dtype dt)
{
    return !t->perm_heads && ((t->type == MOE_TYPE_F32 && dt == MOE_ST_F32) ||
                              (t->type == MOE_TYPE_F16 && dt == MOE_ST_F16) ||
                              (t->type == MOE_TYPE_BF16 && dt == MOE_ST_BF16));
}

static gboolean write_part(converter *cv, gint64 idx, const void *p, size_t n, GError **error)
{
    moe_err err = { { 0 } };
    if (moe_gguf_writer_write_tensor_part(cv->w, idx, p, n, &err) != MOE_OK) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_OUTPUT, "%s", err.msg);
        return FALSE;
    }
    return TRUE;
}

static void report(converter *cv, guint64 add)
{
    cv->done += add;
    if (cv->opt->progress)
        cv->opt->progress(cv->opt->progress_user, cv->done, cv->total);
}

/* One source (a whole tensor, or one expert of a stack) into tensor idx. */
static gboolean convert_source(converter *cv, gint64 idx, const hf_plan_tensor *t,
                               const hf_source *s, GError **error)
{
    const moe_safetensors_tensor *src = s->t;
    const gint64 ne0 = t->ne[0];
    const gint64 rows = s->n_rows;
    const size_t src_row = (size_t)ne0 * moe_st_dtype_size(src->dtype);
    const size_t out_row = moe_type_row_bytes(t->type, ne0);
    const guint8 *base = (const guint8 *)src->data + (size_t)s->row0 * src_row;
    const gboolean threads = cv->n_threads > 1 && moe_type_block_elems(t->type) > 1;
    const int n_thr = threads ? cv->n_threads : 1;
    const gint64 per_thread = MAX(1, cv->cap / ne0);
    for (gint64 r0 = 0; r0 < rows;) {
        const gint64 n = MIN(rows - r0, per_thread * n_thr);
        if (is_copy(t, src->dtype)) {
            if (!write_part(cv, idx, base + (size_t)r0 * src_row, (size_t)n * src_row, error))
                return FALSE;
        } else {
            job jobs[64];
            GThread *thr[64] = { 0 };
            const int k = (int)MIN((gint64)n_thr, (n + per_thread - 1) / per_thread);
            for (int i = 0; i < k; i++) {
                const gint64 a = r0 + i * per_thread, b = MIN(r0 + n, a + per_thread);
                jobs[i] = (job){ .t = t, .src = s, .row0 = a, .n_rows = b - a,
                                 .f32 = cv->f32 + (gint64)i * cv->cap,
                                 .out = cv->out + (size_t)i * (size_t)cv->cap * 4 };
                if (i > 0)
                    thr[i] = g_thread_new("import", job_thread, &jobs[i]);
            }
            run_job(&jobs[0]);
            for (int i = 1; i < k; i++)
                g_thread_join(thr[i]);
            for (int i = 0; i < k; i++) {
                if (jobs[i].st != MOE_OK) {
                    g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_OUTPUT,
                                "tensor '%s': cannot convert to %s: %s", t->name,
                                moe_type_name(t->type), moe_status_str(jobs[i].st));
                    return FALSE;
                }
                if (!write_part(cv, idx, jobs[i].out, (size_t)jobs[i].n_rows * out_row, error))
                    return FALSE;
            }
        }
        if (!t->perm_heads)
            release_pages(base + (size_t)r0 * src_row, (size_t)n * src_row);
        report(cv, (guint64)n * src_row);
        r0 += n;
    }
    if (t->perm_heads)
        release_pages(base, (size_t)rows * src_row);
    return TRUE;
}

static gboolean convert_all(converter *cv, const hf_plan *plan, GError **error)
{
    gint64 max_row = 1;
    for (gint64 i = 0; i < plan->n_tensors; i++) {
        max_row = MAX(max_row, plan->tensors[i].ne[0]);
        for (int s = 0; s < plan->tensors[i].n_src; s++) {
            const hf_source *src = &plan->tensors[i].src[s];
            cv->total += (guint64)src->n_rows * (guint64)plan->tensors[i].ne[0] *
                         moe_st_dtype_size(src->t->dtype);
        }
    }
    cv->cap = MAX(CHUNK_ELEMS, max_row);
    cv->f32 = g_try_new(float, (gsize)(cv->cap * cv->n_threads));
    cv->out = g_try_malloc((gsize)(cv->cap * cv->n_threads) * 4);
    if (!cv->f32 || !cv->out) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_OUTPUT,
                    "out of memory for the conversion buffers");
        return FALSE;
    }
    for (gint64 i = 0; i < plan->n_tensors; i++)
        for (int s = 0; s < plan->tensors[i].n_src; s++)
            if (!convert_source(cv, i, &plan->tensors[i], &plan->tensors[i].src[s], error))
                return FALSE;
    return TRUE;
}

/* ---- key/values and tensor infos ---- */

static gboolean write_header(moe_gguf_writer *w, const hf_config *cfg, const hf_vocab *vocab,
                             JsonObject *tj, JsonObject *tc, const char *dir, const char *name,
                             guint32 ftype, const hf_plan *plan, GError **error)
{
    gboolean ok = moe_gguf_writer_set_str(w, "general.architecture", cfg->gguf_arch) == MOE_OK &&
                  moe_gguf_writer_set_str(w, "general.type", "model") == MOE_OK &&
                  moe_gguf_writer_set_str(w, "general.name", name) == MOE_OK;
    if (!ok || !hf_config_write_kv(cfg, w, error))
        goto fail;
    ok = moe_gguf_writer_set_u32(w, "general.file_type", ftype) == MOE_OK &&
         moe_gguf_writer_set_u32(w, "general.quantization_version", 2) == MOE_OK;
    if (!ok || !hf_tokenizer_write_kv(dir, cfg, vocab, tj, tc, w, error))
        goto fail;
    for (gint64 i = 0; i < plan->n_tensors; i++) {
        const hf_plan_tensor *t = &plan->tensors[i];
        if (moe_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, NULL) != MOE_OK) {
            g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_OUTPUT,
                        "tensor '%s' cannot be declared as %s", t->name,
                        moe_type_name(t->type));
            return FALSE;
        }
    }
    return TRUE;
fail:
    if (error && !*error)
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_OUTPUT,
                    "writing the GGUF key/values failed (out of memory?)");
    return FALSE;
}

/* Type per tensor with llama-quantize's policy; returns general.file_type. */
static gboolean choose_types(hf_plan *plan, const hf_config *cfg, moe_type target,
                             guint32 *ftype, GError **error)
{
    moe_err err = { { 0 } };
    moe_quant_policy *p = NULL;
    if (moe_quant_policy_new(target, (int)cfg->n_layer, (int)cfg->n_expert, &p, &err) !=
        MOE_OK) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_UNSUPPORTED, "%s",
                    err.msg);
        return FALSE;
    }
    for (gint64 i = 0; i < plan->n_tensors; i++)
        moe_quant_policy_count(p, plan->tensors[i].name);
    for (gint64 i = 0; i < plan->n_tensors; i++)
        plan->tensors[i].type = moe_quant_policy_pick(p, plan->tensors[i].name,
                                                      plan->tensors[i].ne);
    *ftype = moe_quant_policy_ftype(p);
    moe_quant_policy_free(p);
    return TRUE;
}

static JsonObject *load_optional(const char *dir, const char *file, JsonParser **parser,
                                 GError **error)
{
    g_autofree char *path = g_build_filename(dir, file, NULL);
    *parser = NULL;
    if (!g_file_test(path, G_FILE_TEST_EXISTS))
        return NULL;
    return hf_json_load(dir, file, parser, error);
}

static char *default_out_path(const char *dir, const char *name, moe_type type)
{
    g_autofree char *upper = g_ascii_strup(moe_type_name(type), -1);
    g_autofree char *file = g_strdup_printf("%s-%s.gguf", name, upper);
    return g_build_filename(dir, file, NULL);
}

gboolean moedesk_import(const moedesk_import_options *opt, moedesk_import_result *result,
                        GError **error)
{
    g_return_val_if_fail(opt && opt->dir, FALSE);
    g_autoptr(hf_config) cfg = hf_config_load(opt->dir, error);
    if (!cfg)
        return FALSE;
    g_autoptr(JsonParser) tj_parser = NULL, tc_parser = NULL;
    GError *jerr = NULL;
    JsonObject *tj = load_optional(opt->dir, "tokenizer.json", &tj_parser, &jerr);
    JsonObject *tc = jerr ? NULL : load_optional(opt->dir, "tokenizer_config.json",
                                                 &tc_parser, &jerr);
    if (jerr) {
        g_propagate_error(error, jerr);
        return FALSE;
    }
    hf_vocab vocab;
    if (!hf_vocab_load(opt->dir, cfg, tj, tc, &vocab, error))
        return FALSE;
    g_autoptr(hf_checkpoint) ckpt = hf_checkpoint_open(opt->dir, error);
    hf_plan plan = { 0 };
    gboolean ok = ckpt && hf_plan_build(cfg, ckpt, &plan, error);
    g_autofree char *canon = g_canonicalize_filename(opt->dir, NULL); /* "." -> its name */
    g_autofree char *base = g_path_get_basename(canon);
    const char *name = opt->name ? opt->name : base;
    moe_type type = opt->type;
    g_autofree char *reason = NULL;
    if (ok && !opt->type_given) {
        moe_machine probed;
        moe_err perr = { { 0 } };
        const moe_machine *mach = opt->machine;
        if (!mach && moe_hw_probe(&probed, &perr) == MOE_OK)
            mach = &probed;
        g_autofree moe_plan_model *pm = g_new0(moe_plan_model, 1);
        plan_model_of(cfg, &plan, name, pm);
        if (mach) {
            type = moedesk_import_choose_type(pm, mach, &reason);
        } else {
            type = MOE_TYPE_Q8_0;
            reason = g_strdup_printf("hardware probe failed (%s), so Q8_0", perr.msg);
        }
    }
    guint32 ftype = 0;
    ok = ok && choose_types(&plan, cfg, type, &ftype, error);
    g_autofree char *out_path = opt->out_path ? g_strdup(opt->out_path)
                                              : default_out_path(opt->dir, name, type);
    moe_gguf_writer *w = moe_gguf_writer_new();
    ok = ok && w && write_header(w, cfg, &vocab, tj, tc, opt->dir, name, ftype, &plan, error);
    hf_vocab_clear(&vocab);
    g_clear_object(&tj_parser); /* the tokenizer is in the writer now */
    g_clear_object(&tc_parser);
    moe_err err = { { 0 } };
    if (ok && moe_gguf_writer_begin(w, out_path, &err) != MOE_OK) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_OUTPUT, "%s", err.msg);
        ok = FALSE;
    }
    converter cv = { .w = w, .opt = opt, .n_threads = (int)CLAMP(g_get_num_processors(), 1, 64) };
    ok = ok && convert_all(&cv, &plan, error);
    if (ok && moe_gguf_writer_finish(w, &err) != MOE_OK) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_OUTPUT, "%s", err.msg);
        ok = FALSE;
    }
    g_free(cv.f32);
    g_free(cv.out);
    moe_gguf_writer_free(w); /* on failure this removes the temporary file */
    if (ok && result) {
        memset(result, 0, sizeof *result);
        result->hf_arch = cfg->hf_name;
        result->gguf_arch = cfg->gguf_arch;
        result->type = type;
        result->type_reason = g_steal_pointer(&reason);
        result->n_tensors = plan.n_tensors;
        result->n_params = plan.n_params;
        result->in_bytes = hf_checkpoint_bytes(ckpt);
        GStatBuf sb;
        if (g_stat(out_path, &sb) == 0)
            result->out_bytes = (guint64)sb.st_size;
        result->out_path = g_steal_pointer(&out_path);
    }
    hf_plan_clear(&plan);
    return ok;
}

/*
 * api-common.c — what the API families share (api.h): the loaded model's
 * prompt builder, prompt tokens for completion-style requests, and the
 * list of models a client may name.
 */
#include "api.h"

#include <glib/gstdio.h>
#include <library.h>
#include <manifest.h>
#include <string.h>

static void prompt_model_free(void *p)
{
    svc_prompt_model_free(p);
}

svc_prompt_model *svc_prompt_for_model(svc_model *m, GError **error)
{
    if (!m->prompt) {
        svc_prompt_model *pm = svc_prompt_model_new(m->model, error);
        if (!pm)
            return NULL;
        m->prompt = pm;
        m->prompt_free = prompt_model_free;
    }
    return m->prompt;
}

gboolean svc_api_prompt_tokens(svc_prompt_model *pm, const svc_request *req, GArray **tokens,
                               GError **error)
{
    if (req->prompt_tokens) {
        GArray *a = g_array_sized_new(FALSE, FALSE, sizeof(int32_t), (guint)req->n_prompt_tokens);
        g_array_append_vals(a, req->prompt_tokens, (guint)req->n_prompt_tokens);
        *tokens = a;
        return TRUE;
    }
    const char *text = req->prompt ? req->prompt : "";
    if (req->system && *req->system && !req->raw) {
        char *joined = g_strconcat(req->system, "\n\n", text, NULL);
        gboolean ok = svc_prompt_tokenize(pm, joined, -1, TRUE, tokens, error);
        g_free(joined);
        return ok;
    }
    return svc_prompt_tokenize(pm, text, -1, TRUE, tokens, error);
}

static void model_info_free(gpointer p)
{
    svc_api_model_info *mi = p;
    g_free(mi->name);
    g_free(mi->path);
    g_free(mi->quant);
    g_free(mi->arch);
    g_free(mi->owned_by);
    g_free(mi);
}

static gint64 file_mtime(const char *path, guint64 *size)
{
    GStatBuf st;
    if (path && g_stat(path, &st) == 0) {
        if (size)
            *size = (guint64)st.st_size;
        return (gint64)st.st_mtime;
    }
    return 0;
}

GPtrArray *svc_api_list_models(svc_server *srv)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(model_info_free);
    svc_model *cur = svc_server_current_model(srv);
    if (cur) {
        svc_api_model_info *mi = g_new0(svc_api_model_info, 1);
        mi->name = g_strdup(cur->name);
        mi->path = g_strdup(cur->path);
        mi->quant = g_strdup(cur->quant);
        mi->arch = g_strdup(moe_model_arch(cur->model));
        mi->owned_by = g_strdup("moedesk");
        mi->created = file_mtime(cur->path, &mi->size);
        mi->loaded = TRUE;
        g_ptr_array_add(out, mi);
    }
    GPtrArray *installed = moe_manifest_list_installed(NULL);
    for (guint i = 0; installed && i < installed->len; i++) {
        MoeManifest *mf = g_ptr_array_index(installed, i);
        if (cur && !strcmp(mf->name, cur->name))
            continue;
        if (g_strcmp0(mf->state, "complete"))
            continue;
        const char *gguf = NULL;
        guint64 size = 0;
        for (guint j = 0; j < mf->files->len; j++) {
            MoeManifestFile *f = g_ptr_array_index(mf->files, j);
            size += f->size;
            if (!gguf && g_str_has_suffix(f->path, ".gguf"))
                gguf = f->path;
        }
        if (!gguf)
            continue; /* a safetensors checkpoint: import it first */
        svc_api_model_info *mi = g_new0(svc_api_model_info, 1);
        mi->name = g_strdup(mf->name);
        char *dir = moe_library_model_dir(mf->name, NULL);
        mi->path = dir ? g_build_filename(dir, gguf, NULL) : NULL;
        g_free(dir);
        mi->quant = g_strdup(mf->quant);
        mi->owned_by = g_strdup("moedesk");
        mi->created = mf->created;
        mi->size = size;
        g_ptr_array_add(out, mi);
    }
    if (installed)
        g_ptr_array_unref(installed);
    return out;
}

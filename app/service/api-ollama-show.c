/*
 * api-ollama-show.c — POST /api/show: what editor plugins read to decide
 * how to use a model.
 *
 *   capabilities  "completion", "tools" (the template's tool-call format is
 *                 one MoeDesk reads back), "insert" (the vocabulary has FIM
 *                 tokens), "thinking" (prompt.h decides)
 *   model_info    the GGUF's key/values as Ollama shows them: scalars as
 *                 is, long arrays (the vocabulary) empty unless "verbose";
 *                 `<arch>.context_length` is the context the service gives
 *                 each request when the model is loaded (what a client may
 *                 send without a 400), the trained length otherwise
 *   template      svc_prompt_ollama_template(): a Go-template rendition that
 *                 clients look inside (".Suffix" for fill in the middle,
 *                 ".Tools" for tool use). Prompts are still rendered from
 *                 the model's own Jinja template.
 *   parameters    "num_ctx" (served context) and the stop texts
 *   details, modelfile, modified_at
 *
 * A model that is not loaded is described from its GGUF header and
 * vocabulary (read, not loaded), so /api/show never switches models.
 */
#include "api-ollama.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

/* Arrays longer than this are shown empty unless the request is verbose
 * (Ollama hides the vocabulary, merges and token types the same way). */
#define SHOW_ARRAY_MAX 64

typedef struct show_model {
    const char *name;            /* the name the client asked for             */
    char *path;
    char *quant;
    gint64 mtime;
    svc_model *loaded;           /* a reference, or NULL                      */
    moe_gguf *gguf;              /* owned when not loaded                     */
    moe_vocab *vocab;            /* owned when not loaded                     */
    svc_prompt_model *pm;        /* owned when not loaded                     */
    const moe_gguf *g;           /* the header either way                     */
    uint64_t n_params;
} show_model;

static void show_model_clear(show_model *sm)
{
    if (!sm->loaded)
        svc_prompt_model_free(sm->pm);
    moe_vocab_free(sm->vocab);
    moe_gguf_free(sm->gguf);
    if (sm->loaded)
        svc_model_unref(sm->loaded);
    g_free(sm->path);
    g_free(sm->quant);
}

/* Finds `name` (the loaded model, else an installed one) and opens what
 * describing it takes. FALSE with an error for the client. */
static gboolean show_model_open(svc_server *srv, const char *name, show_model *sm, GError **error)
{
    memset(sm, 0, sizeof *sm);
    sm->name = name;
    svc_model *cur = svc_server_current_model(srv);
    if (cur && svc_ollama_name_matches(name, cur->name)) {
        sm->loaded = svc_model_ref(cur);
        sm->path = g_strdup(cur->path);
        sm->quant = g_strdup(cur->quant);
        sm->g = moe_model_gguf(cur->model);
        sm->pm = svc_prompt_for_model(cur, error);
        GStatBuf st;
        sm->mtime = g_stat(cur->path, &st) == 0 ? (gint64)st.st_mtime : 0;
        sm->n_params = moe_model_n_params(cur->model);
        return sm->pm != NULL;
    }
    GPtrArray *models = svc_api_list_models(srv);
    for (guint i = 0; i < models->len && !sm->path; i++) {
        const svc_api_model_info *mi = g_ptr_array_index(models, i);
        if (mi->path && svc_ollama_name_matches(name, mi->name)) {
            sm->path = g_strdup(mi->path);
            sm->quant = g_strdup(mi->quant);
            sm->mtime = mi->created;
        }
    }
    g_ptr_array_unref(models);
    if (!sm->path) {
        g_set_error(error, SVC_ERROR, SVC_ERROR_MODEL_NOT_FOUND, "model '%s' not found", name);
        return FALSE;
    }
    moe_err err = {{0}};
    if (moe_gguf_open(sm->path, &sm->gguf, &err) != MOE_OK ||
        moe_vocab_load(sm->gguf, &sm->vocab, &err) != MOE_OK) {
        g_set_error(error, SVC_ERROR, SVC_ERROR_MODEL_LOAD, "cannot read model '%s': %s", name,
                    err.msg);
        return FALSE;
    }
    sm->g = sm->gguf;
    sm->n_params = svc_ollama_gguf_n_params(sm->g);
    const char *tmpl = moe_gguf_str_or(sm->g, "tokenizer.chat_template", NULL);
    sm->pm = svc_prompt_model_new_for_vocab(sm->vocab, tmpl, name, error);
    return sm->pm != NULL;
}

/* ---- model_info ---------------------------------------------------------------------- */

static void add_number(JsonBuilder *b, moe_gguf_type t, const void *p)
{
    switch (t) {
    case MOE_GGUF_UINT8: json_builder_add_int_value(b, *(const uint8_t *)p); break;
    case MOE_GGUF_INT8: json_builder_add_int_value(b, *(const int8_t *)p); break;
    case MOE_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); json_builder_add_int_value(b, v); break; }
    case MOE_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); json_builder_add_int_value(b, v); break; }
    case MOE_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); json_builder_add_int_value(b, v); break; }
    case MOE_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); json_builder_add_int_value(b, v); break; }
    case MOE_GGUF_UINT64: { uint64_t v; memcpy(&v, p, 8); json_builder_add_int_value(b, (gint64)v); break; }
    case MOE_GGUF_INT64: { int64_t v; memcpy(&v, p, 8); json_builder_add_int_value(b, v); break; }
    case MOE_GGUF_BOOL: json_builder_add_boolean_value(b, *(const uint8_t *)p != 0); break;
    case MOE_GGUF_FLOAT32:
    case MOE_GGUF_FLOAT64: {
        double v;
        if (t == MOE_GGUF_FLOAT32) {
            float f;
            memcpy(&f, p, 4);
            v = f;
        } else {
            memcpy(&v, p, 8);
        }
        /* JSON has no NaN or infinity. */
        if (isfinite(v))
            json_builder_add_double_value(b, v);
        else
            json_builder_add_null_value(b);
        break;
    }
    default: json_builder_add_null_value(b); break;
    }
}

static size_t type_size(moe_gguf_type t)
{
    switch (t) {
    case MOE_GGUF_UINT8: case MOE_GGUF_INT8: case MOE_GGUF_BOOL: return 1;
    case MOE_GGUF_UINT16: case MOE_GGUF_INT16: return 2;
    case MOE_GGUF_UINT32: case MOE_GGUF_INT32: case MOE_GGUF_FLOAT32: return 4;
    case MOE_GGUF_UINT64: case MOE_GGUF_INT64: case MOE_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static void add_str(JsonBuilder *b, moe_str s)
{
    char *v = g_utf8_make_valid(s.ptr, (gssize)s.len);
    json_builder_add_string_value(b, v);
    g_free(v);
}

static void add_kv_value(JsonBuilder *b, const moe_gguf *g, int64_t i, gboolean verbose)
{
    moe_gguf_type t = moe_gguf_kv_type(g, i);
    if (t == MOE_GGUF_STRING) {
        moe_str s = {0};
        if (moe_gguf_get_str(g, i, &s) == MOE_OK)
            add_str(b, s);
        else
            json_builder_add_null_value(b);
        return;
    }
    if (t != MOE_GGUF_ARRAY) {
        /* Scalars: read through the array accessor's element layout. */
        uint64_t u;
        int64_t s;
        double d;
        bool v;
        if (t == MOE_GGUF_BOOL && moe_gguf_get_bool(g, i, &v) == MOE_OK)
            json_builder_add_boolean_value(b, v);
        else if ((t == MOE_GGUF_FLOAT32 || t == MOE_GGUF_FLOAT64) &&
                 moe_gguf_get_f64(g, i, &d) == MOE_OK)
            add_number(b, MOE_GGUF_FLOAT64, &d);
        else if ((t == MOE_GGUF_INT8 || t == MOE_GGUF_INT16 || t == MOE_GGUF_INT32 ||
                  t == MOE_GGUF_INT64) && moe_gguf_get_i64(g, i, &s) == MOE_OK)
            json_builder_add_int_value(b, s);
        else if (moe_gguf_get_u64(g, i, &u) == MOE_OK)
            json_builder_add_int_value(b, (gint64)u);
        else
            json_builder_add_null_value(b);
        return;
    }
    uint64_t n = moe_gguf_arr_len(g, i);
    moe_gguf_type et = moe_gguf_arr_type(g, i);
    json_builder_begin_array(b);
    if (verbose || n <= SHOW_ARRAY_MAX) {
        const uint8_t *data = moe_gguf_arr_data(g, i);
        size_t es = type_size(et);
        for (uint64_t j = 0; j < n; j++) {
            if (et == MOE_GGUF_STRING)
                add_str(b, moe_gguf_arr_str(g, i, j));
            else if (data && es)
                add_number(b, et, data + j * es);
        }
    }
    json_builder_end_array(b);
}

static void add_model_info(JsonBuilder *b, const show_model *sm, gboolean verbose)
{
    const moe_gguf *g = sm->g;
    const char *arch = moe_gguf_str_or(g, "general.architecture", "");
    char *ctx_key = g_strconcat(arch, ".context_length", NULL);
    json_builder_set_member_name(b, "model_info");
    json_builder_begin_object(b);
    gboolean has_count = FALSE;
    for (int64_t i = 0; i < moe_gguf_n_kv(g); i++) {
        const char *key = moe_gguf_key(g, i);
        if (g_str_has_prefix(key, "tokenizer.chat_template"))
            continue; /* shown as the template */
        if (!strcmp(key, "general.parameter_count"))
            has_count = TRUE;
        json_builder_set_member_name(b, key);
        if (sm->loaded && !strcmp(key, ctx_key))
            json_builder_add_int_value(b, sm->loaded->n_ctx_per_seq);
        else
            add_kv_value(b, g, i, verbose);
    }
    if (!has_count) {
        json_builder_set_member_name(b, "general.parameter_count");
        json_builder_add_int_value(b, (gint64)sm->n_params);
    }
    json_builder_end_object(b);
    g_free(ctx_key);
}

/* ---- parameters ------------------------------------------------------------------------ */

/* Ollama's "key    value" lines. */
static char *parameters_text(const show_model *sm)
{
    GString *p = g_string_new(NULL);
    if (sm->loaded)
        g_string_append_printf(p, "%-30s %d\n", "num_ctx", sm->loaded->n_ctx_per_seq);
    const svc_prompt_model *pm = sm->pm;
    if (pm->eos_text && *pm->eos_text)
        g_string_append_printf(p, "%-30s \"%s\"\n", "stop", pm->eos_text);
    if (p->len)
        g_string_truncate(p, p->len - 1);
    return g_string_free(p, FALSE);
}

/* ---- the answer ---------------------------------------------------------------------------- */

void svc_ollama_show(svc_call *call, JsonObject *body, const char *model)
{
    JsonNode *vn = json_object_get_member(body, "verbose");
    gboolean verbose = vn && JSON_NODE_HOLDS_VALUE(vn) &&
                       json_node_get_value_type(vn) == G_TYPE_BOOLEAN &&
                       json_node_get_boolean(vn);
    show_model sm;
    GError *e = NULL;
    if (!show_model_open(svc_call_server(call), model, &sm, &e)) {
        svc_call_reply_gerror(call, e);
        g_error_free(e);
        show_model_clear(&sm);
        return;
    }
    const char *arch = moe_gguf_str_or(sm.g, "general.architecture", "");
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "license");
    json_builder_add_string_value(b, moe_gguf_str_or(sm.g, "general.license", ""));
    json_builder_set_member_name(b, "modelfile");
    char *mf = g_strdup_printf("# Modelfile generated by MoeDesk\nFROM %s\n", sm.path);
    json_builder_add_string_value(b, mf);
    g_free(mf);
    json_builder_set_member_name(b, "parameters");
    char *params = parameters_text(&sm);
    json_builder_add_string_value(b, params);
    g_free(params);
    json_builder_set_member_name(b, "template");
    char *tmpl = svc_prompt_ollama_template(sm.pm);
    json_builder_add_string_value(b, tmpl);
    g_free(tmpl);
    svc_ollama_add_details(b, arch, sm.n_params, sm.quant);
    add_model_info(b, &sm, verbose);
    json_builder_set_member_name(b, "capabilities");
    JsonNode *caps = json_node_new(JSON_NODE_ARRAY);
    json_node_take_array(caps, svc_prompt_capabilities_json(sm.pm));
    json_builder_add_value(b, caps);
    json_builder_set_member_name(b, "modified_at");
    char *t = svc_ollama_time(sm.mtime * G_USEC_PER_SEC);
    json_builder_add_string_value(b, t);
    g_free(t);
    json_builder_end_object(b);
    JsonNode *root = json_builder_get_root(b);
    g_object_unref(b);
    svc_call_reply_json(call, 200, root);
    show_model_clear(&sm);
}

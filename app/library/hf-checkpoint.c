/*
 * hf-checkpoint.c — the safetensors side of an import: opens the shards of
 * a checkpoint folder and maps every Hugging Face tensor name to the GGUF
 * tensor llama.cpp's converter makes of it.
 *
 * Names (N: layer, E: expert; "model.layers.N." prefix on per-layer ones):
 *   model.embed_tokens.weight                -> token_embd.weight
 *   input_layernorm.weight                   -> blk.N.attn_norm.weight
 *   self_attn.{q,k,v}_proj.{weight,bias}     -> blk.N.attn_{q,k,v}.*
 *   self_attn.o_proj.weight                  -> blk.N.attn_output.weight
 *   self_attn.{q,k}_norm.weight              -> blk.N.attn_{q,k}_norm.weight
 *   post_attention_layernorm.weight          -> blk.N.ffn_norm.weight
 *   mlp.gate.weight | block_sparse_moe.gate.weight -> blk.N.ffn_gate_inp.weight
 *   mlp.experts.E.{gate,up,down}_proj.weight  -> blk.N.ffn_{gate,up,down}_exps
 *   block_sparse_moe.experts.E.w1/w3/w2.weight -> ffn_gate/up/down_exps
 *   mlp.shared_expert.{gate,up,down}_proj.weight -> blk.N.ffn_*_shexp.weight
 *   mlp.shared_expert_gate.weight            -> blk.N.ffn_gate_inp_shexp.weight
 *   model.norm.weight                        -> output_norm.weight
 *   lm_head.weight                           -> output.weight
 * Expert matrices [n_ff, n_embd] stack into ne = [n_embd, n_ff, n_expert]
 * (down: [n_ff, n_embd, n_expert]). transformers 5 saves the Qwen MoE
 * experts fused instead, as mlp.experts.gate_up_proj [n_expert, 2 n_ff,
 * n_embd] (gate rows first, then up) and mlp.experts.down_proj [n_expert,
 * n_embd, n_ff], with or without ".weight"; those are split the same way
 * llama.cpp's converter splits them. Mixtral's q_proj/k_proj rows are
 * permuted per head (hf_plan_permuted_source_row). rotary_emb.inv_freq
 * buffers are skipped; any other unknown tensor is an error, as in
 * llama.cpp.
 */
#include "import-internal.h"

#include <stdio.h>
#include <string.h>

struct hf_checkpoint {
    char      *dir;
    GPtrArray *files;  /* char *: shard file names, in index order    */
    GPtrArray *shards; /* moe_safetensors *, parallel to files        */
    guint64    bytes;
};

#define INDEX_FILE "model.safetensors.index.json"

static void free_shard(gpointer p)
{
    moe_safetensors_free(p);
}

void hf_checkpoint_free(hf_checkpoint *ckpt)
{
    if (!ckpt)
        return;
    if (ckpt->shards)
        g_ptr_array_free(ckpt->shards, TRUE);
    if (ckpt->files)
        g_ptr_array_free(ckpt->files, TRUE);
    g_free(ckpt->dir);
    g_free(ckpt);
}

guint64 hf_checkpoint_bytes(const hf_checkpoint *ckpt)
{
    return ckpt->bytes;
}

static gboolean open_shard(hf_checkpoint *c, const char *file, const char *listed_for,
                           GError **error)
{
    g_autofree char *path = g_build_filename(c->dir, file, NULL);
    if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
        if (listed_for)
            g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                        "%s/" INDEX_FILE " lists shard %s (for tensor '%s'), which is missing",
                        c->dir, file, listed_for);
        else
            g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                        "%s: missing", path);
        return FALSE;
    }
    moe_err err = { { 0 } };
    moe_safetensors *st = NULL;
    if (moe_safetensors_open(path, &st, &err) != MOE_OK) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT, "%s", err.msg);
        return FALSE;
    }
    c->bytes += moe_safetensors_file_bytes(st);
    g_ptr_array_add(c->files, g_strdup(file));
    g_ptr_array_add(c->shards, st);
    return TRUE;
}

/* A shard name from the index must stay inside the folder. */
static gboolean plain_file_name(const char *name)
{
    return *name && !strchr(name, '/') && !strchr(name, '\\') && strcmp(name, ".") != 0 &&
           strcmp(name, "..") != 0;
}

static gboolean open_from_index(hf_checkpoint *c, GError **error)
{
    g_autoptr(JsonParser) parser = NULL;
    JsonObject *root = hf_json_load(c->dir, INDEX_FILE, &parser, error);
    if (!root)
        return FALSE;
    JsonNode *map = hf_json_member(root, "weight_map");
    if (!map || !JSON_NODE_HOLDS_OBJECT(map)) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    "%s/" INDEX_FILE ": no \"weight_map\" object", c->dir);
        return FALSE;
    }
    JsonObject *wm = json_node_get_object(map);
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GList) names = json_object_get_members(wm);
    for (GList *l = names; l; l = l->next) {
        const char *tensor = l->data;
        const char *file = hf_json_string(wm, tensor);
        if (!file || !plain_file_name(file)) {
            g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                        "%s/" INDEX_FILE ": weight_map entry for '%s' is not a file name"
                        " in the folder", c->dir, tensor);
            return FALSE;
        }
        gpointer idx = NULL;
        if (!g_hash_table_lookup_extended(seen, file, NULL, &idx)) {
            if (!open_shard(c, file, tensor, error))
                return FALSE;
            idx = GUINT_TO_POINTER(c->shards->len - 1);
            g_hash_table_insert(seen, (gpointer)g_ptr_array_index(c->files, c->shards->len - 1),
                                idx);
        }
        moe_safetensors *st = g_ptr_array_index(c->shards, GPOINTER_TO_UINT(idx));
        if (!moe_safetensors_find(st, tensor)) {
            g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                        "%s/" INDEX_FILE " puts tensor '%s' in %s, which does not hold it",
                        c->dir, tensor, file);
            return FALSE;
        }
    }
    if (c->shards->len == 0) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    "%s/" INDEX_FILE ": weight_map is empty", c->dir);
        return FALSE;
    }
    return TRUE;
}

hf_checkpoint *hf_checkpoint_open(const char *dir, GError **error)
{
    g_autoptr(hf_checkpoint) c = g_new0(hf_checkpoint, 1);
    c->dir = g_strdup(dir);
    c->files = g_ptr_array_new_with_free_func(g_free);
    c->shards = g_ptr_array_new_with_free_func(free_shard);
    g_autofree char *index = g_build_filename(dir, INDEX_FILE, NULL);
    g_autofree char *single = g_build_filename(dir, "model.safetensors", NULL);
    if (g_file_test(index, G_FILE_TEST_EXISTS)) {
        if (!open_from_index(c, error))
            return NULL;
    } else if (g_file_test(single, G_FILE_TEST_EXISTS)) {
        if (!open_shard(c, "model.safetensors", NULL, error))
            return NULL;
    } else {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    "%s: no " INDEX_FILE " or model.safetensors", dir);
        return NULL;
    }
    return g_steal_pointer(&c);
}

/* ---- the tensor plan ---- */

gint64 hf_plan_permuted_source_row(gint64 out_row, gint64 n_rows, gint64 n_heads)
{
    const gint64 d = n_rows / n_heads;
    const gint64 h = out_row / d, r = out_row % d;
    return h * d + (r % 2) * (d / 2) + r / 2;
}

void hf_plan_clear(hf_plan *plan)
{
    for (gint64 i = 0; plan->tensors && i < plan->n_tensors; i++)
        g_free(plan->tensors[i].src);
    g_free(plan->tensors);
    memset(plan, 0, sizeof *plan);
}

/* While the plan is built: the tensors so far and, for every expected HF
 * name, where its data goes (tensor index << 16 | source index, plus 1 so
 * that no entry is NULL). */
typedef struct builder {
    GArray     *tensors; /* hf_plan_tensor */
    GHashTable *by_hf;   /* owned char * -> packed slot */
    GPtrArray  *hf_names; /* per tensor: char ** source names (owned strv) */
} builder;

static void add_tensor(builder *b, const char *gguf_name, char **hf_names, int n_src,
                       guint32 hf_n_dims, gint64 d0, gint64 d1, gint64 perm_heads)
{
    hf_plan_tensor t = { .hf_n_dims = hf_n_dims, .n_src = n_src, .perm_heads = perm_heads };
    g_strlcpy(t.name, gguf_name, sizeof t.name);
    t.hf_shape[0] = d0;
    t.hf_shape[1] = d1;
    for (int d = 0; d < MOE_GGUF_MAX_DIMS; d++)
        t.ne[d] = 1;
    if (hf_n_dims == 1) {
        t.n_dims = 1;
        t.ne[0] = d0;
    } else {
        t.n_dims = n_src > 1 ? 3 : 2;
        t.ne[0] = d1;
        t.ne[1] = d0;
        t.ne[2] = n_src > 1 ? n_src : 1;
    }
    t.src = g_new0(hf_source, n_src);
    const guint idx = b->tensors->len;
    g_array_append_val(b->tensors, t);
    for (int s = 0; s < n_src; s++)
        g_hash_table_insert(b->by_hf, g_strdup(hf_names[s]),
                            GUINT_TO_POINTER((idx << 16 | (guint)s) + 1));
    g_ptr_array_add(b->hf_names, hf_names);
}

static void add_one(builder *b, const char *gguf_name, const char *hf_name, guint32 n_dims,
                    gint64 d0, gint64 d1, gint64 perm_heads)
{
    char **names = g_new0(char *, 2);
    names[0] = g_strdup(hf_name);
    add_tensor(b, gguf_name, names, 1, n_dims, d0, d1, perm_heads);
}

/* An expert stack: HF names "<prefix>experts.<E>.<proj>". */
static void add_experts(builder *b, const hf_config *c, const char *gguf_name,
                        const char *prefix, const char *proj, gint64 d0, gint64 d1)
{
    char **names = g_new0(char *, c->n_expert + 1);
    for (gint64 e = 0; e < c->n_expert; e++)
        names[e] = g_strdup_printf("%sexperts.%d.%s", prefix, (int)e, proj);
    add_tensor(b, gguf_name, names, (int)c->n_expert, 2, d0, d1, 0);
}

static void add_layer(builder *b, const hf_config *c, int il)
{
    const gint64 E = c->n_embd, D = c->head_dim, F = c->n_ff_exp, S = c->n_ff_shexp;
    const gint64 Hq = c->n_head * D, Hkv = c->n_head_kv * D;
    const gboolean llama = c->arch == HF_ARCH_MIXTRAL;
    g_autofree char *p = g_strdup_printf("model.layers.%d.", il);
    char g[64], h[160];
#define ONE(gsuf, hsuf, nd, d0, d1, perm)                                       \
    do {                                                                        \
        g_snprintf(g, sizeof g, "blk.%d.%s", il, gsuf);                          \
        g_snprintf(h, sizeof h, "%s%s", p, hsuf);                               \
        add_one(b, g, h, nd, d0, d1, perm);                                     \
    } while (0)
    ONE("attn_norm.weight", "input_layernorm.weight", 1, E, 0, 0);
    ONE("attn_q.weight", "self_attn.q_proj.weight", 2, Hq, E, llama ? c->n_head : 0);
    ONE("attn_k.weight", "self_attn.k_proj.weight", 2, Hkv, E, llama ? c->n_head_kv : 0);
    ONE("attn_v.weight", "self_attn.v_proj.weight", 2, Hkv, E, 0);
    if (c->arch == HF_ARCH_QWEN2MOE) {
        ONE("attn_q.bias", "self_attn.q_proj.bias", 1, Hq, 0, 0);
        ONE("attn_k.bias", "self_attn.k_proj.bias", 1, Hkv, 0, 0);
        ONE("attn_v.bias", "self_attn.v_proj.bias", 1, Hkv, 0, 0);
    }
    ONE("attn_output.weight", "self_attn.o_proj.weight", 2, E, Hq, 0);
    if (c->arch == HF_ARCH_QWEN3MOE) {
        ONE("attn_q_norm.weight", "self_attn.q_norm.weight", 1, D, 0, 0);
        ONE("attn_k_norm.weight", "self_attn.k_norm.weight", 1, D, 0, 0);
    } else if (c->arch == HF_ARCH_OLMOE) {
        ONE("attn_q_norm.weight", "self_attn.q_norm.weight", 1, Hq, 0, 0);
        ONE("attn_k_norm.weight", "self_attn.k_norm.weight", 1, Hkv, 0, 0);
    }
    ONE("ffn_norm.weight", "post_attention_layernorm.weight", 1, E, 0, 0);
    const char *moe = llama ? "block_sparse_moe." : "mlp.";
    g_autofree char *gate = g_strconcat(moe, "gate.weight", NULL);
    ONE("ffn_gate_inp.weight", gate, 2, c->n_expert, E, 0);
    g_autofree char *ep = g_strconcat(p, moe, NULL);
#define EXPERTS(gsuf, proj, d0, d1)                                             \
    do {                                                                        \
        g_snprintf(g, sizeof g, "blk.%d.%s", il, gsuf);                          \
        add_experts(b, c, g, ep, proj, d0, d1);                                 \
    } while (0)
    if (llama) {
        EXPERTS("ffn_gate_exps.weight", "w1.weight", F, E);
        EXPERTS("ffn_up_exps.weight", "w3.weight", F, E);
        EXPERTS("ffn_down_exps.weight", "w2.weight", E, F);
    } else {
        EXPERTS("ffn_gate_exps.weight", "gate_proj.weight", F, E);
        EXPERTS("ffn_up_exps.weight", "up_proj.weight", F, E);
        EXPERTS("ffn_down_exps.weight", "down_proj.weight", E, F);
    }
    if (c->arch == HF_ARCH_QWEN2MOE) {
        ONE("ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight", 2, 1, E, 0);
        ONE("ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight", 2, S, E, 0);
        ONE("ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight", 2, S, E, 0);
        ONE("ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight", 2, E, S, 0);
    }
#undef ONE
#undef EXPERTS
}

static void format_shape(char *buf, size_t size, guint32 n_dims, const gint64 *shape)
{
    size_t n = (size_t)g_snprintf(buf, size, "[");
    for (guint32 d = 0; d < n_dims && n < size; d++)
        n += (size_t)g_snprintf(buf + n, size - n, "%s%" G_GINT64_FORMAT, d ? ", " : "",
                                shape[d]);
    if (n < size)
        g_snprintf(buf + n, size - n, "]");
}

static hf_plan_tensor *find_planned(builder *b, const char *gguf_name)
{
    for (guint i = 0; i < b->tensors->len; i++) {
        hf_plan_tensor *t = &g_array_index(b->tensors, hf_plan_tensor, i);
        if (strcmp(t->name, gguf_name) == 0)
            return t;
    }
    return NULL;
}

static gboolean check_dtype(const moe_safetensors_tensor *t, const char *file, GError **error)
{
    if (t->dtype == MOE_ST_F32 || t->dtype == MOE_ST_F16 || t->dtype == MOE_ST_BF16)
        return TRUE;
    g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_UNSUPPORTED,
                "%s: tensor '%s' is %s; only F32, F16 and BF16 can be imported", file,
                t->name, t->dtype_name ? t->dtype_name : "of an unknown dtype");
    return FALSE;
}

static gboolean check_shape(const moe_safetensors_tensor *t, const char *file, guint32 n_dims,
                            const gint64 *want, GError **error)
{
    gboolean same = t->n_dims == n_dims;
    for (guint32 d = 0; same && d < n_dims; d++)
        same = t->shape[d] == want[d];
    if (same)
        return TRUE;
    char got[96], exp[96];
    format_shape(got, sizeof got, t->n_dims, t->shape);
    format_shape(exp, sizeof exp, n_dims, want);
    g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                "%s: tensor '%s' has shape %s, config.json implies %s", file, t->name, got, exp);
    return FALSE;
}

/* Fills expert sources of `pt` from a fused tensor: expert e is rows
 * e * stride + offset .. + n_rows. */
static gboolean fill_fused(hf_plan_tensor *pt, const moe_safetensors_tensor *t,
                           const char *file, gint64 stride, gint64 offset, gint64 n_rows,
                           GError **error)
{
    for (int e = 0; e < pt->n_src; e++) {
        hf_source *src = &pt->src[e];
        if (src->t) {
            g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                        "%s: tensor '%s' gives expert %d of %s, which %s gives too", file,
                        t->name, e, pt->name, src->t->name);
            return FALSE;
        }
        *src = (hf_source){ .t = t, .file = file, .row0 = e * stride + offset, .n_rows = n_rows };
    }
    return TRUE;
}

/* A transformers 5 fused expert tensor of a Qwen MoE: TRUE in *handled if
 * the name is one. */
static gboolean place_fused(builder *b, const hf_config *c, const moe_safetensors_tensor *t,
                            const char *file, gboolean *handled, GError **error)
{
    *handled = FALSE;
    int il = -1, n = 0;
    if (c->arch != HF_ARCH_QWEN2MOE && c->arch != HF_ARCH_QWEN3MOE)
        return TRUE;
    if (sscanf(t->name, "model.layers.%d.mlp.experts.%n", &il, &n) != 1 || n == 0 || il < 0 ||
        il >= c->n_layer)
        return TRUE;
    const char *rest = t->name + n;
    const gboolean gate_up = strcmp(rest, "gate_up_proj") == 0 ||
                             strcmp(rest, "gate_up_proj.weight") == 0;
    const gboolean down = strcmp(rest, "down_proj") == 0 || strcmp(rest, "down_proj.weight") == 0;
    if (!gate_up && !down)
        return TRUE;
    *handled = TRUE;
    if (!check_dtype(t, file, error))
        return FALSE;
    const gint64 X = c->n_expert, E = c->n_embd, F = c->n_ff_exp;
    char name[64];
    if (gate_up) {
        const gint64 want[3] = { X, 2 * F, E };
        if (!check_shape(t, file, 3, want, error))
            return FALSE;
        g_snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", il);
        hf_plan_tensor *gate = find_planned(b, name);
        g_snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", il);
        hf_plan_tensor *up = find_planned(b, name);
        if (!gate || !up) /* cannot happen: add_layer planned both */
            goto unplanned;
        return fill_fused(gate, t, file, 2 * F, 0, F, error) &&
               fill_fused(up, t, file, 2 * F, F, F, error);
    }
    const gint64 want[3] = { X, E, F };
    if (!check_shape(t, file, 3, want, error))
        return FALSE;
    g_snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", il);
    hf_plan_tensor *dn = find_planned(b, name);
    if (dn)
        return fill_fused(dn, t, file, E, 0, E, error);
unplanned:
    g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                "%s: tensor '%s' has no planned expert tensor", file, t->name);
    return FALSE;
}

/* Places one checkpoint tensor into its slot after checking it. */
static gboolean place(builder *b, const hf_config *c, const moe_safetensors_tensor *t,
                      const char *file, GError **error)
{
    gpointer v = g_hash_table_lookup(b->by_hf, t->name);
    if (!v) {
        gboolean fused = FALSE;
        if (!place_fused(b, c, t, file, &fused, error))
            return FALSE;
        if (fused || g_str_has_suffix(t->name, "rotary_emb.inv_freq"))
            return TRUE;
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_UNSUPPORTED,
                    "%s: tensor '%s' has no GGUF counterpart in a %s model", file, t->name,
                    c->hf_name);
        return FALSE;
    }
    const guint packed = GPOINTER_TO_UINT(v) - 1;
    hf_plan_tensor *pt = &g_array_index(b->tensors, hf_plan_tensor, packed >> 16);
    hf_source *src = &pt->src[packed & 0xffff];
    if (src->t) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    strcmp(src->t->name, t->name) == 0 ? "tensor '%s' is in both %s and %s"
                                                       : "tensor '%s' (%s) duplicates %s",
                    t->name, src->file, file);
        return FALSE;
    }
    if (!check_dtype(t, file, error) ||
        !check_shape(t, file, pt->hf_n_dims, pt->hf_shape, error))
        return FALSE;
    src->t = t;
    src->file = file;
    src->row0 = 0;
    src->n_rows = t->n_dims == 1 ? 1 : t->shape[0];
    return TRUE;
}

static gboolean build(builder *b, const hf_config *c, const hf_checkpoint *ckpt,
                      GError **error)
{
    add_one(b, "token_embd.weight", "model.embed_tokens.weight", 2, c->n_vocab, c->n_embd, 0);
    for (int il = 0; il < c->n_layer; il++)
        add_layer(b, c, il);
    add_one(b, "output_norm.weight", "model.norm.weight", 1, c->n_embd, 0, 0);
    add_one(b, "output.weight", "lm_head.weight", 2, c->n_vocab, c->n_embd, 0);
    if (b->tensors->len >= (1u << 15)) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_UNSUPPORTED,
                    "config.json: %u tensors are too many", b->tensors->len);
        return FALSE;
    }
    for (guint f = 0; f < ckpt->shards->len; f++) {
        const moe_safetensors *st = g_ptr_array_index(ckpt->shards, f);
        const char *file = g_ptr_array_index(ckpt->files, f);
        for (gint64 i = 0; i < moe_safetensors_n_tensors(st); i++)
            if (!place(b, c, moe_safetensors_tensor_at(st, i), file, error))
                return FALSE;
    }
    return TRUE;
}

gboolean hf_plan_build(const hf_config *c, const hf_checkpoint *ckpt, hf_plan *plan,
                       GError **error)
{
    memset(plan, 0, sizeof *plan);
    if (c->n_expert >= (1 << 16)) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_UNSUPPORTED,
                    "config.json: %" G_GINT64_FORMAT " experts are too many", c->n_expert);
        return FALSE;
    }
    builder b = {
        .tensors = g_array_new(FALSE, TRUE, sizeof(hf_plan_tensor)),
        .by_hf = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
        .hf_names = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev),
    };
    gboolean ok = build(&b, c, ckpt, error);
    /* Every slot filled? The output projection may be tied to the
     * embeddings instead (tie_word_embeddings). */
    for (guint i = 0; ok && i < b.tensors->len; i++) {
        hf_plan_tensor *t = &g_array_index(b.tensors, hf_plan_tensor, i);
        char **names = g_ptr_array_index(b.hf_names, i);
        for (int s = 0; ok && s < t->n_src; s++) {
            if (t->src[s].t)
                continue;
            if (strcmp(t->name, "output.weight") == 0 && c->tie_embeddings) {
                g_free(t->src);
                g_array_remove_index(b.tensors, i);
                g_ptr_array_remove_index(b.hf_names, i);
                i--;
                break;
            }
            g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                        "tensor '%s' is missing from the checkpoint", names[s]);
            ok = FALSE;
        }
    }
    g_hash_table_unref(b.by_hf);
    g_ptr_array_free(b.hf_names, TRUE);
    plan->n_tensors = b.tensors->len;
    plan->tensors = (hf_plan_tensor *)(void *)g_array_free(b.tensors, FALSE);
    for (gint64 i = 0; i < plan->n_tensors; i++)
        plan->n_params += (guint64)(plan->tensors[i].ne[0] * plan->tensors[i].ne[1] *
                                    plan->tensors[i].ne[2]);
    if (!ok)
        hf_plan_clear(plan);
    return ok;
}

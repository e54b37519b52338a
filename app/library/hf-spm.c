/*
 * hf-spm.c — reads a SentencePiece tokenizer.model (Mixtral, Mistral,
 * Llama 2) into the vocabulary llama.cpp's converter writes for it.
 *
 * The file is a protobuf ModelProto; we need only its repeated field 1,
 * SentencePiece { string piece = 1; float score = 2; Type type = 3; }, and
 * skip every other field by its wire type. Protobuf in brief: each field is
 * a varint key (field number << 3 | wire type) followed by a varint (wire
 * type 0), 8 bytes (1), a varint length and that many bytes (2), or 4
 * bytes (5). Every length is checked against the bytes left, so a
 * truncated or corrupt file is an error naming the byte offset.
 *
 * Token types as llama.cpp's converter maps them: UNKNOWN (2), CONTROL
 * (3), UNUSED (5) and BYTE (6) keep their number; NORMAL and USER_DEFINED
 * pieces become NORMAL. The vocabulary has config.json's vocab_size
 * entries (else the model's); ids without a piece are "[PAD<id>]", score
 * -10000, UNUSED. Then added_tokens.json entries become USER_DEFINED, and
 * tokenizer_config.json's added_tokens_decoder entries CONTROL (special or
 * special-looking) or USER_DEFINED ("▁" as space), both with score -1000.
 */
#include "import-internal.h"

#include <string.h>

typedef struct pb {
    const guint8 *p, *end;
} pb;

static gboolean pb_varint(pb *b, guint64 *out)
{
    guint64 v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end)
            return FALSE;
        guint8 c = *b->p++;
        v |= (guint64)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return TRUE;
        }
    }
    return FALSE;
}

/* Skips a field's value of `wire` type; FALSE if it runs past the end. */
static gboolean pb_skip(pb *b, guint wire)
{
    guint64 n;
    switch (wire) {
    case 0:
        return pb_varint(b, &n);
    case 1:
        n = 8;
        break;
    case 2:
        if (!pb_varint(b, &n))
            return FALSE;
        break;
    case 5:
        n = 4;
        break;
    default:
        return FALSE;
    }
    if (n > (guint64)(b->end - b->p))
        return FALSE;
    b->p += n;
    return TRUE;
}

typedef struct piece {
    const guint8 *text;
    gsize         len;
    float         score;
    guint64       type;
} piece;

static gboolean parse_piece(pb *b, piece *out)
{
    memset(out, 0, sizeof *out);
    out->type = 1; /* NORMAL is the default */
    while (b->p < b->end) {
        guint64 key;
        if (!pb_varint(b, &key))
            return FALSE;
        const guint field = (guint)(key >> 3), wire = (guint)(key & 7);
        if (field == 1 && wire == 2) {
            guint64 n;
            if (!pb_varint(b, &n) || n > (guint64)(b->end - b->p))
                return FALSE;
            out->text = b->p;
            out->len = (gsize)n;
            b->p += n;
        } else if (field == 2 && wire == 5) {
            if (b->end - b->p < 4)
                return FALSE;
            guint32 bits = (guint32)b->p[0] | (guint32)b->p[1] << 8 |
                           (guint32)b->p[2] << 16 | (guint32)b->p[3] << 24;
            memcpy(&out->score, &bits, 4);
            b->p += 4;
        } else if (field == 3 && wire == 0) {
            if (!pb_varint(b, &out->type))
                return FALSE;
        } else if (!pb_skip(b, wire)) {
            return FALSE;
        }
    }
    return TRUE;
}

static gint32 converter_type(guint64 spm_type)
{
    switch (spm_type) {
    case 2: return MOE_TOKEN_UNKNOWN;
    case 3: return MOE_TOKEN_CONTROL;
    case 5: return MOE_TOKEN_UNUSED;
    case 6: return MOE_TOKEN_BYTE;
    default: return MOE_TOKEN_NORMAL;
    }
}

/* Collects the pieces of the ModelProto in `data`. */
static gboolean parse_model(const char *path, const guint8 *data, gsize size, GArray *pieces,
                            GError **error)
{
    pb b = { .p = data, .end = data + size };
    while (b.p < b.end) {
        guint64 key;
        if (!pb_varint(&b, &key))
            goto bad;
        if (key >> 3 == 1 && (key & 7) == 2) {
            guint64 n;
            if (!pb_varint(&b, &n) || n > (guint64)(b.end - b.p))
                goto bad;
            pb sub = { .p = b.p, .end = b.p + n };
            piece pc;
            if (!parse_piece(&sub, &pc) || !pc.text ||
                !g_utf8_validate((const char *)pc.text, (gssize)pc.len, NULL) ||
                memchr(pc.text, 0, pc.len)) {
                b.p = sub.p;
                goto bad;
            }
            g_array_append_val(pieces, pc);
            b.p += n;
        } else if (!pb_skip(&b, (guint)(key & 7))) {
            goto bad;
        }
        continue;
    bad:
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    "%s: malformed SentencePiece model near byte %" G_GSIZE_FORMAT, path,
                    (gsize)(b.p - data));
        return FALSE;
    }
    if (pieces->len == 0) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                    "%s: no pieces", path);
        return FALSE;
    }
    return TRUE;
}

static void set_token(hf_vocab *v, gint64 id, const char *text, float score, gint32 type)
{
    g_free(v->tokens[id]);
    v->tokens[id] = g_strdup(text);
    v->scores[id] = score;
    v->types[id] = type;
}

/* added_tokens.json and tokenizer_config.json's added_tokens_decoder. */
static gboolean apply_added(const char *dir, JsonObject *tc, hf_vocab *v, GError **error)
{
    g_autoptr(JsonParser) parser = NULL;
    g_autofree char *added_path = g_build_filename(dir, "added_tokens.json", NULL);
    if (g_file_test(added_path, G_FILE_TEST_EXISTS)) {
        JsonObject *added = hf_json_load(dir, "added_tokens.json", &parser, error);
        if (!added)
            return FALSE;
        g_autoptr(GList) names = json_object_get_members(added);
        for (GList *l = names; l; l = l->next) {
            gint64 id;
            if (!hf_json_int(added, l->data, "added_tokens.json", &id, error)) {
                if (error && !*error)
                    continue;
                return FALSE;
            }
            if (id >= 0 && id < v->n_tokens)
                set_token(v, id, l->data, -1000.0f, MOE_TOKEN_USER_DEFINED);
        }
    }
    JsonNode *dn = hf_json_member(tc, "added_tokens_decoder");
    if (!dn || !JSON_NODE_HOLDS_OBJECT(dn))
        return TRUE;
    JsonObject *dec = json_node_get_object(dn);
    g_autoptr(GList) ids = json_object_get_members(dec);
    for (GList *l = ids; l; l = l->next) {
        char *end = NULL;
        gint64 id = g_ascii_strtoll(l->data, &end, 10);
        JsonNode *en = json_object_get_member(dec, l->data);
        JsonObject *e = JSON_NODE_HOLDS_OBJECT(en) ? json_node_get_object(en) : NULL;
        const char *content = hf_json_string(e, "content");
        if (!end || *end || end == l->data || !content) {
            g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT,
                        "tokenizer_config.json: added_tokens_decoder[\"%s\"] is malformed",
                        (const char *)l->data);
            return FALSE;
        }
        if (id < 0 || id >= v->n_tokens)
            continue; /* the converter skips these with a warning */
        JsonNode *sp = hf_json_member(e, "special");
        gboolean special = sp && JSON_NODE_HOLDS_VALUE(sp) &&
                           json_node_get_value_type(sp) == G_TYPE_BOOLEAN &&
                           json_node_get_boolean(sp);
        if (special || hf_token_looks_special(content)) {
            set_token(v, id, content, -1000.0f, MOE_TOKEN_CONTROL);
        } else {
            g_autofree char *spaced = hf_metaspace_to_spaces(content);
            set_token(v, id, spaced, -1000.0f, MOE_TOKEN_USER_DEFINED);
        }
    }
    return TRUE;
}

gboolean hf_spm_load(const char *dir, gint64 n_vocab, JsonObject *tc, hf_vocab *v,
                     GError **error)
{
    g_autofree char *path = g_build_filename(dir, "tokenizer.model", NULL);
    g_autoptr(GMappedFile) mf = NULL;
    g_autoptr(GError) ferr = NULL;
    mf = g_mapped_file_new(path, FALSE, &ferr);
    if (!mf) {
        g_set_error(error, MOEDESK_IMPORT_ERROR, MOEDESK_IMPORT_ERROR_INPUT, "%s: %s", path,
                    ferr->message);
        return FALSE;
    }
    const guint8 *data = (const guint8 *)g_mapped_file_get_contents(mf);
    g_autoptr(GArray) pieces = g_array_new(FALSE, FALSE, sizeof(piece));
    if (!parse_model(path, data, g_mapped_file_get_length(mf), pieces, error))
        return FALSE;
    if (n_vocab <= 0)
        n_vocab = pieces->len;
    v->model = "llama";
    v->pre = g_strdup("default");
    v->source = "tokenizer.model";
    v->check_ids = TRUE;
    v->n_tokens = n_vocab;
    v->tokens = g_new0(char *, n_vocab);
    v->types = g_new0(gint32, n_vocab);
    v->scores = g_new0(float, n_vocab);
    for (gint64 i = 0; i < n_vocab; i++) {
        if (i < (gint64)pieces->len) {
            const piece *pc = &g_array_index(pieces, piece, i);
            v->tokens[i] = g_strndup((const char *)pc->text, pc->len);
            v->scores[i] = pc->score;
            v->types[i] = converter_type(pc->type);
        } else {
            v->tokens[i] = g_strdup_printf("[PAD%" G_GINT64_FORMAT "]", i);
            v->scores[i] = -10000.0f;
            v->types[i] = MOE_TOKEN_UNUSED;
        }
    }
    return apply_added(dir, tc, v, error);
}

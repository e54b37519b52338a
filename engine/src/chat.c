/*
 * chat.c — the public chat-template API (moe_chat_* in moe.h): parsing a
 * template once, and rendering a conversation with it.
 *
 * Rendering builds the variables transformers passes to a chat template —
 * messages, add_generation_prompt, tools (None when absent), documents
 * (None), bos_token, eos_token, then the caller's extra context — on top of
 * the globals (range, namespace, dict, raise_exception, strftime_now), runs
 * the interpreter in a fresh arena with the limits of jinja.h, and copies
 * the result out with malloc. Messages come either as C structs, whose
 * JSON fields (tool calls) are parsed here, or as one JSON array.
 */
#include "jinja.h"

#include "json.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct moe_chat_template {
    jj_template tpl;
};

/* Template parsing is bounded by the source size; this just stops an
 * absurd template (every byte a node) from taking gigabytes. */
#define TEMPLATE_ARENA_LIMIT (512u << 20)

moe_status moe_chat_template_parse(const char *source, size_t len, moe_chat_template **out, moe_err *err)
{
    if (!out || (!source && len))
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_chat_template_parse: NULL argument");
    *out = NULL;
    moe_chat_template *t = calloc(1, sizeof *t);
    if (!t)
        return moe_fail(err, MOE_ERR_NOMEM, "template: out of memory");
    moe_arena_init(&t->tpl.arena, TEMPLATE_ARENA_LIMIT);
    jj_token *toks;
    size_t n_toks;
    moe_status st = jj_lex(&t->tpl.arena, source ? source : "", len, &toks, &n_toks, err);
    if (st == MOE_OK)
        st = jj_parse(&t->tpl, toks, n_toks, err);
    if (st != MOE_OK) {
        if (st == MOE_ERR_NOMEM && t->tpl.arena.over_limit)
            st = moe_fail(err, MOE_ERR_RANGE, "template: too large to parse");
        moe_chat_template_free(t);
        return st;
    }
    *out = t;
    return MOE_OK;
}

void moe_chat_template_free(moe_chat_template *t)
{
    if (!t)
        return;
    moe_arena_free(&t->tpl.arena);
    free(t);
}

/* ---- building the context ------------------------------------------------------ */

static moe_status parse_json_value(jj_ctx *ctx, const char *text, const char *what, jj_value *out)
{
    moe_json_doc *doc;
    moe_err jerr = {{0}};
    moe_status st = moe_json_parse(text, strlen(text), &doc, &jerr);
    if (st != MOE_OK)
        return moe_fail(ctx->err, st, "%s: %s", what, jerr.msg);
    st = jj_value_from_json(ctx, moe_json_doc_root(doc), out);
    moe_json_doc_free(doc);
    return st;
}

/* tool_calls[i].function.arguments: a string holding a JSON object
 * becomes that object (when the caller asked for it). */
static moe_status objectify_arguments(jj_ctx *ctx, jj_value calls)
{
    if (calls.type != JJ_LIST)
        return MOE_OK;
    for (size_t i = 0; i < calls.u.l->n; i++) {
        jj_value call = calls.u.l->items[i];
        if (call.type != JJ_DICT)
            continue;
        long f = jj_dict_find_str(call.u.d, "function", 8);
        if (f < 0 || call.u.d->vals[f].type != JJ_DICT)
            continue;
        jj_dict *fn = call.u.d->vals[f].u.d;
        long k = jj_dict_find_str(fn, "arguments", 9);
        if (k < 0 || fn->vals[k].type != JJ_STR)
            continue;
        jj_value s = fn->vals[k];
        moe_json_doc *doc;
        moe_err jerr = {{0}};
        if (moe_json_parse(s.u.s.p, s.u.s.n, &doc, &jerr) != MOE_OK)
            continue; /* not JSON: leave the string as the client sent it */
        const moe_json *root = moe_json_doc_root(doc);
        moe_status st = MOE_OK;
        if (root->type == MOE_JSON_OBJECT)
            st = jj_value_from_json(ctx, root, &fn->vals[k]);
        moe_json_doc_free(doc);
        if (st != MOE_OK)
            return st;
    }
    return MOE_OK;
}

static moe_status set_str(jj_ctx *ctx, jj_dict *d, const char *key, const char *val)
{
    size_t n = strlen(val);
    char *p = jj_alloc(ctx, n + 1);
    if (!p)
        return ctx->status;
    memcpy(p, val, n + 1);
    return jj_dict_set_str(ctx, d, key, strlen(key), jj_str(p, n));
}

static moe_status message_from_struct(jj_ctx *ctx, const moe_chat_msg *m, size_t idx, bool objectify,
                                      jj_value *out)
{
    jj_value d = jj_new_dict(ctx);
    if (d.type != JJ_DICT)
        return ctx->status;
    moe_status st = set_str(ctx, d.u.d, "role", m->role ? m->role : "");
    if (st == MOE_OK)
        st = m->content ? set_str(ctx, d.u.d, "content", m->content)
                        : jj_dict_set_str(ctx, d.u.d, "content", 7, jj_none());
    if (st == MOE_OK && m->reasoning_content)
        st = set_str(ctx, d.u.d, "reasoning_content", m->reasoning_content);
    if (st == MOE_OK && m->tool_calls_json) {
        jj_value calls;
        char what[64];
        snprintf(what, sizeof what, "messages[%zu].tool_calls", idx);
        st = parse_json_value(ctx, m->tool_calls_json, what, &calls);
        if (st == MOE_OK && objectify)
            st = objectify_arguments(ctx, calls);
        if (st == MOE_OK)
            st = jj_dict_set_str(ctx, d.u.d, "tool_calls", 10, calls);
    }
    if (st == MOE_OK && m->tool_call_id)
        st = set_str(ctx, d.u.d, "tool_call_id", m->tool_call_id);
    if (st == MOE_OK && m->name)
        st = set_str(ctx, d.u.d, "name", m->name);
    *out = d;
    return st;
}

static moe_status add_global(jj_ctx *ctx, jj_scope *sc, int id)
{
    jj_func *fn = jj_alloc(ctx, sizeof *fn);
    if (!fn)
        return ctx->status;
    memset(fn, 0, sizeof *fn);
    fn->kind = JF_GLOBAL;
    fn->id = id;
    jj_value v = {.type = JJ_FUNC};
    v.u.fn = fn;
    const char *name = jj_global_name(id);
    return jj_dict_set_str(ctx, &sc->vars, name, strlen(name), v);
}

static moe_status build_context(jj_ctx *ctx, const char *messages_json, const moe_chat_params *p)
{
    moe_status st = MOE_OK;
    jj_scope *globals = jj_alloc(ctx, sizeof *globals), *vars = jj_alloc(ctx, sizeof *vars);
    if (!globals || !vars)
        return ctx->status;
    memset(globals, 0, sizeof *globals);
    memset(vars, 0, sizeof *vars);
    vars->parent = globals;
    ctx->root = vars;
    for (int id = 0; id < JG_COUNT && st == MOE_OK; id++)
        st = add_global(ctx, globals, id);
    if (st != MOE_OK)
        return st;

    jj_value messages;
    if (messages_json) {
        if ((st = parse_json_value(ctx, messages_json, "messages", &messages)) != MOE_OK)
            return st;
        if (messages.type != JJ_LIST)
            return moe_fail(ctx->err, MOE_ERR_INVALID_ARG, "messages: expected a JSON array");
        if (p->tool_args_as_objects) {
            for (size_t i = 0; i < messages.u.l->n && st == MOE_OK; i++) {
                jj_value m = messages.u.l->items[i];
                long k = m.type == JJ_DICT ? jj_dict_find_str(m.u.d, "tool_calls", 10) : -1;
                if (k >= 0)
                    st = objectify_arguments(ctx, m.u.d->vals[k]);
            }
        }
    } else {
        messages = jj_new_list(ctx, p->n_messages);
        if (messages.type != JJ_LIST)
            return ctx->status;
        if (p->n_messages && !p->messages)
            return moe_fail(ctx->err, MOE_ERR_INVALID_ARG, "moe_chat_params: messages is NULL");
        for (size_t i = 0; i < p->n_messages && st == MOE_OK; i++)
            st = message_from_struct(ctx, &p->messages[i], i, p->tool_args_as_objects,
                                     &messages.u.l->items[messages.u.l->n++]);
    }
    jj_dict *d = &vars->vars;
    if (st == MOE_OK)
        st = jj_dict_set_str(ctx, d, "messages", 8, messages);
    if (st == MOE_OK)
        st = jj_dict_set_str(ctx, d, "add_generation_prompt", 21, jj_bool(p->add_generation_prompt));
    jj_value tools = jj_none();
    if (st == MOE_OK && p->tools_json)
        st = parse_json_value(ctx, p->tools_json, "tools", &tools);
    if (st == MOE_OK)
        st = jj_dict_set_str(ctx, d, "tools", 5, tools);
    if (st == MOE_OK)
        st = jj_dict_set_str(ctx, d, "documents", 9, jj_none());
    if (st == MOE_OK && p->bos_token)
        st = set_str(ctx, d, "bos_token", p->bos_token);
    if (st == MOE_OK && p->eos_token)
        st = set_str(ctx, d, "eos_token", p->eos_token);
    if (st == MOE_OK && p->extra_context_json) {
        jj_value extra;
        if ((st = parse_json_value(ctx, p->extra_context_json, "extra_context_json", &extra)) != MOE_OK)
            return st;
        if (extra.type != JJ_DICT)
            return moe_fail(ctx->err, MOE_ERR_INVALID_ARG, "extra_context_json: expected a JSON object");
        for (size_t i = 0; i < extra.u.d->n && st == MOE_OK; i++)
            st = jj_dict_set(ctx, d, extra.u.d->keys[i], extra.u.d->vals[i]);
    }
    return st;
}

moe_status jj_chat_render(const moe_chat_template *t, const char *messages_json, const moe_chat_params *p,
                          const jj_limits *lim, char **out, size_t *out_len, moe_err *err)
{
    if (!t || !p || !out)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_chat_template_render: NULL argument");
    *out = NULL;
    if (out_len)
        *out_len = 0;
    moe_arena arena;
    moe_arena_init(&arena, lim->max_memory_bytes);
    jj_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.arena = &arena;
    ctx.lim = *lim;
    ctx.err = err;
    ctx.status = MOE_OK;
    ctx.line = 1;
    ctx.col = 1;
    ctx.now = p->now_unix ? (time_t)p->now_unix : time(NULL);

    moe_status st = build_context(&ctx, messages_json, p);
    if (st == MOE_OK && ctx.status != MOE_OK)
        st = ctx.status;
    jj_buf buf = {0};
    if (st == MOE_OK)
        st = jj_render(&ctx, &t->tpl, &buf);
    if (st == MOE_OK) {
        char *s = malloc(buf.n + 1);
        if (!s) {
            st = moe_fail(err, MOE_ERR_NOMEM, "template: out of memory");
        } else {
            if (buf.n)
                memcpy(s, buf.p, buf.n);
            s[buf.n] = 0;
            *out = s;
            if (out_len)
                *out_len = buf.n;
        }
    }
    moe_arena_free(&arena);
    return st;
}

moe_status moe_chat_template_render(const moe_chat_template *t, const moe_chat_params *p,
                                    char **out, size_t *out_len, moe_err *err)
{
    jj_limits lim;
    jj_limits_default(&lim);
    return jj_chat_render(t, NULL, p, &lim, out, out_len, err);
}

moe_status moe_chat_template_render_json(const moe_chat_template *t, const char *messages_json,
                                         const moe_chat_params *p, char **out, size_t *out_len,
                                         moe_err *err)
{
    if (!messages_json)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_chat_template_render_json: messages_json is NULL");
    jj_limits lim;
    jj_limits_default(&lim);
    return jj_chat_render(t, messages_json, p, &lim, out, out_len, err);
}

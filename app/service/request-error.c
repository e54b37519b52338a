/*
 * request-error.c — a request error written in the error shape each API's
 * clients parse: the OpenAI SDKs read error.message/type/param/code, the
 * Anthropic SDKs error.type/message under {"type":"error"}, the Ollama
 * clients a bare {"error": "..."} string, and llama.cpp's clients
 * error.code (the HTTP status) and error.message.
 */
#include "request-internal.h"

/* Copies `s` into buf (cap bytes) as valid UTF-8: a message may quote a
 * client's value cut at a byte count ("%.32s") or be cut at the buffer's
 * end, either of which can split a character, and JSON must stay UTF-8. */
static void copy_utf8(char *buf, size_t cap, const char *s)
{
    g_autofree char *valid = g_utf8_make_valid(s, -1);
    const char *end = NULL;
    g_strlcpy(buf, valid, cap);
    if (!g_utf8_validate(buf, -1, &end))
        buf[end - buf] = 0; /* the cut split the last character */
}

void rq_error_vset(svc_request_error *err, guint status, const char *type, const char *param,
                   const char *code, const char *fmt, va_list ap)
{
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    err->status = status;
    copy_utf8(err->type, sizeof err->type, type ? type : "invalid_request_error");
    copy_utf8(err->param, sizeof err->param, param ? param : "");
    copy_utf8(err->code, sizeof err->code, code ? code : "");
    copy_utf8(err->message, sizeof err->message, msg);
}

void svc_request_error_set(svc_request_error *err, guint status, const char *type,
                           const char *param, const char *code, const char *fmt, ...)
{
    va_list ap;
    if (!err)
        return;
    va_start(ap, fmt);
    rq_error_vset(err, status, type, param, code, fmt, ap);
    va_end(ap);
}

static char *to_text(JsonBuilder *b)
{
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_root(gen, root);
    return json_generator_to_data(gen, NULL);
}

/* "" reads as JSON null. */
static void member_or_null(JsonBuilder *b, const char *key, const char *value)
{
    json_builder_set_member_name(b, key);
    if (value && value[0])
        json_builder_add_string_value(b, value);
    else
        json_builder_add_null_value(b);
}

static const char *type_or_default(const svc_request_error *err)
{
    return err->type[0] ? err->type : "invalid_request_error";
}

char *svc_request_error_to_openai_json(const svc_request_error *err)
{
    g_return_val_if_fail(err != NULL, NULL);
    g_autoptr(JsonBuilder) b = json_builder_new_immutable();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "error");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "message");
    json_builder_add_string_value(b, err->message);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, type_or_default(err));
    member_or_null(b, "param", err->param);
    member_or_null(b, "code", err->code);
    json_builder_end_object(b);
    json_builder_end_object(b);
    return to_text(b);
}

/* Anthropic's error types follow the HTTP status. */
static const char *anthropic_type(guint status)
{
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    default:  return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

char *svc_request_error_to_anthropic_json(const svc_request_error *err)
{
    g_return_val_if_fail(err != NULL, NULL);
    g_autoptr(JsonBuilder) b = json_builder_new_immutable();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "error");
    json_builder_set_member_name(b, "error");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, anthropic_type(err->status));
    json_builder_set_member_name(b, "message");
    json_builder_add_string_value(b, err->message);
    json_builder_end_object(b);
    json_builder_end_object(b);
    return to_text(b);
}

char *svc_request_error_to_ollama_json(const svc_request_error *err)
{
    g_return_val_if_fail(err != NULL, NULL);
    g_autoptr(JsonBuilder) b = json_builder_new_immutable();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "error");
    json_builder_add_string_value(b, err->message);
    json_builder_end_object(b);
    return to_text(b);
}

char *svc_request_error_to_llamacpp_json(const svc_request_error *err)
{
    g_return_val_if_fail(err != NULL, NULL);
    g_autoptr(JsonBuilder) b = json_builder_new_immutable();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "error");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "code");
    json_builder_add_int_value(b, err->status);
    json_builder_set_member_name(b, "message");
    json_builder_add_string_value(b, err->message);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, type_or_default(err));
    json_builder_end_object(b);
    json_builder_end_object(b);
    return to_text(b);
}

char *svc_request_error_to_json(const svc_request_error *err, svc_api api)
{
    switch (api) {
    case SVC_API_ANTHROPIC_MESSAGES:
        return svc_request_error_to_anthropic_json(err);
    case SVC_API_OLLAMA_CHAT:
    case SVC_API_OLLAMA_GENERATE:
        return svc_request_error_to_ollama_json(err);
    case SVC_API_LLAMACPP_COMPLETION:
    case SVC_API_LLAMACPP_INFILL:
        return svc_request_error_to_llamacpp_json(err);
    case SVC_API_OPENAI_CHAT:
    case SVC_API_OPENAI_COMPLETIONS:
        break;
    }
    return svc_request_error_to_openai_json(err);
}

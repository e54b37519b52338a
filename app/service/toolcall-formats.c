/*
 * toolcall-formats.c — one block reader per tool-call markup, and the
 * format table toolcall.c drives them from.
 *
 * A block reader starts at a marker and consumes one block (one call, or a
 * section holding several), returning 0 with a reason when the block is
 * malformed; the driver then keeps the block's text as content. The
 * markups are what the templates in the shared data set write for an
 * assistant turn with tool_calls (the authoritative description of what
 * the model was trained to emit). A missing closing tag is forgiven only
 * when the reply ends right after a complete call (generation stopped on
 * an end-of-generation token the template would have put after it).
 */
#include "toolcall-internal.h"

#include "jsonguard.h"

#include <stdlib.h>
#include <string.h>

/* Trims whitespace from both ends of s[*a..*b). */
static void trim(const char *s, size_t *a, size_t *b)
{
    while (*a < *b && strchr(" \t\r\n", s[*a]))
        (*a)++;
    while (*b > *a && strchr(" \t\r\n", s[*b - 1]))
        (*b)--;
}

static void buf_add_json_string(tc_buf *b, const char *s, size_t n)
{
    size_t need = svc_json_string_encode(s, n, NULL, 0);
    char *tmp = malloc(need + 1);
    if (!tmp) {
        b->oom = true;
        return;
    }
    svc_json_string_encode(s, n, tmp, need);
    tc_buf_add(b, tmp, need);
    free(tmp);
}

/* Decodes the JSON string literal v[0..n) into a malloc'd C string. */
static char *decode_string(const char *v, size_t n)
{
    char *out = malloc(n + 1);
    if (out && svc_json_string_decode(v, n, out, n + 1) < 0) {
        free(out);
        out = NULL;
    }
    return out;
}

/* The trimmed JSON value at s[*i...]: advances *i past it; false if none. */
static bool take_value(const char *s, size_t len, size_t *i, const char **v, size_t *vn)
{
    size_t span = svc_json_value_span(s + *i, len - *i);
    if (span == 0)
        return false;
    size_t a = *i, b = *i + span;
    trim(s, &a, &b);
    *v = s + a;
    *vn = b - a;
    *i += span;
    return true;
}

/* {"name": N, "arguments"|"parameters": {...} or "<json text>"}, also
 * {"tool_name": ...} and OpenAI's {"type","function":{...}} nesting. */
static bool call_from_object(const char *o, size_t n, tc_calls *out, const char **why)
{
    const char *v, *a;
    size_t vn, an;
    if (n == 0 || o[0] != '{') {
        *why = "a tool call that is not a JSON object";
        return false;
    }
    if (svc_json_object_get(o, n, "function", &v, &vn) && v[0] == '{')
        o = v, n = vn;
    if (!(svc_json_object_get(o, n, "name", &v, &vn) ||
          svc_json_object_get(o, n, "tool_name", &v, &vn)) || v[0] != '"') {
        *why = "a tool call without a \"name\" string";
        return false;
    }
    char *name = decode_string(v, vn);
    if (!name || !name[0]) {
        free(name);
        *why = "a tool call with an empty name";
        return false;
    }
    bool ok = true;
    if (!(svc_json_object_get(o, n, "arguments", &a, &an) ||
          svc_json_object_get(o, n, "parameters", &a, &an))) {
        tc_calls_add(out, name, strlen(name), "{}", 2);
    } else if (a[0] == '{') {
        tc_calls_add(out, name, strlen(name), a, an);
    } else if (a[0] == '"') {
        /* arguments as a JSON string holding the object (OpenAI's form) */
        char *inner = decode_string(a, an);
        size_t in_n = inner ? strlen(inner) : 0;
        size_t p = 0, q = in_n;
        if (inner)
            trim(inner, &p, &q);
        if (inner && q > p && inner[p] == '{' && svc_json_value_span(inner + p, q - p) == q - p)
            tc_calls_add(out, name, strlen(name), inner + p, q - p);
        else
            ok = false, *why = "tool call arguments that are not a JSON object";
        free(inner);
    } else {
        ok = false, *why = "tool call arguments that are not a JSON object";
    }
    free(name);
    return ok;
}

/* Each element of the JSON array arr[0..n) (already validated) is a call. */
static bool calls_from_array(const char *arr, size_t n, tc_calls *out, const char **why)
{
    size_t j = tc_skip_ws(arr, n, 1);
    if (j < n && arr[j] == ']')
        return true;
    while (j < n) {
        const char *v;
        size_t vn;
        if (!take_value(arr, n, &j, &v, &vn) || !call_from_object(v, vn, out, why))
            return false;
        j = tc_skip_ws(arr, n, j);
        if (j < n && arr[j] == ']')
            return true;
        j = tc_skip_ws(arr, n, j + 1); /* ',' */
    }
    return false;
}

/* A closing tag, or the end of the reply right here. */
static bool close_or_end(const char *s, size_t len, size_t *i, const char *tag)
{
    *i = tc_skip_ws(s, len, *i);
    if (tc_starts(s + *i, len - *i, tag)) {
        *i += strlen(tag);
        return true;
    }
    return *i == len;
}

static size_t read_hermes(const char *s, size_t len, tc_calls *out, const char **why)
{
    size_t i = strlen("<tool_call>");
    const char *v;
    size_t vn;
    if (!take_value(s, len, &i, &v, &vn)) {
        *why = "unterminated or invalid JSON in <tool_call>";
        return 0;
    }
    if (!call_from_object(v, vn, out, why))
        return 0;
    if (!close_or_end(s, len, &i, "</tool_call>")) {
        *why = "<tool_call> without </tool_call>";
        return 0;
    }
    return i;
}

/* One XML-like parameter value: one newline trimmed at each end, kept as
 * JSON when it is a JSON value, else made a JSON string. */
static void add_xml_param(tc_buf *args, const char *k, size_t kn, const char *v, size_t vn)
{
    if (vn && v[0] == '\n')
        v++, vn--;
    if (vn && v[vn - 1] == '\n')
        vn--;
    tc_buf_adds(args, args->n > 1 ? "," : "");
    size_t ka = 0, kb = kn;
    trim(k, &ka, &kb);
    buf_add_json_string(args, k + ka, kb - ka);
    tc_buf_adds(args, ":");
    if (vn && !strchr(" \t\r\n", v[0]) && svc_json_value_span(v, vn) == vn)
        tc_buf_add(args, v, vn);
    else
        buf_add_json_string(args, v, vn);
}

/* <OPEN><function=NAME><parameter=K>V</parameter>...</function></CLOSE> */
static size_t read_xml_function(const char *s, size_t len, const char *open, const char *close,
                                tc_calls *out, const char **why)
{
    size_t i = tc_skip_ws(s, len, strlen(open));
    if (!tc_starts(s + i, len - i, "<function=")) {
        *why = "a tool call without <function=NAME>";
        return 0;
    }
    i += strlen("<function=");
    size_t name_end = tc_find(s + i, len - i, ">") + i;
    size_t na = i, nb = name_end;
    trim(s, &na, &nb);
    if (name_end >= len || nb == na || memchr(s + na, '\n', nb - na)) {
        *why = "an unterminated <function=NAME>";
        return 0;
    }
    tc_buf args = {0};
    tc_buf_adds(&args, "{");
    i = name_end + 1;
    for (;;) {
        i = tc_skip_ws(s, len, i);
        if (tc_starts(s + i, len - i, "<parameter=")) {
            size_t k0 = i + strlen("<parameter=");
            size_t k1 = tc_find(s + k0, len - k0, ">") + k0;
            if (k1 >= len)
                break;
            size_t v1 = tc_find(s + k1 + 1, len - k1 - 1, "</parameter>") + k1 + 1;
            if (v1 >= len)
                break;
            add_xml_param(&args, s + k0, k1 - k0, s + k1 + 1, v1 - k1 - 1);
            i = v1 + strlen("</parameter>");
        } else if (tc_starts(s + i, len - i, "</function>")) {
            i += strlen("</function>");
            tc_buf_adds(&args, "}");
            if (!close_or_end(s, len, &i, close)) {
                *why = "a tool call without its closing tag";
                tc_buf_free(&args);
                return 0;
            }
            tc_calls_add(out, s + na, nb - na, args.p, args.n);
            out->oom |= args.oom;
            tc_buf_free(&args);
            return i;
        } else {
            break;
        }
    }
    *why = "an unterminated <parameter=...> or <function=...>";
    tc_buf_free(&args);
    return 0;
}

static size_t read_qwen3_coder(const char *s, size_t len, tc_calls *out, const char **why)
{
    return read_xml_function(s, len, "<tool_call>", "</tool_call>", out, why);
}

static size_t read_seed_oss(const char *s, size_t len, tc_calls *out, const char **why)
{
    return read_xml_function(s, len, "<seed:tool_call>", "</seed:tool_call>", out, why);
}

/* <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call> */
static size_t read_glm(const char *s, size_t len, tc_calls *out, const char **why)
{
    size_t i = strlen("<tool_call>");
    size_t name_end = i;
    while (name_end < len && s[name_end] != '\n' && s[name_end] != '<')
        name_end++;
    size_t na = i, nb = name_end;
    trim(s, &na, &nb);
    if (nb == na) {
        *why = "a <tool_call> without a function name";
        return 0;
    }
    tc_buf args = {0};
    tc_buf_adds(&args, "{");
    i = name_end;
    for (;;) {
        i = tc_skip_ws(s, len, i);
        if (tc_starts(s + i, len - i, "<arg_key>")) {
            size_t k0 = i + strlen("<arg_key>");
            size_t k1 = tc_find(s + k0, len - k0, "</arg_key>") + k0;
            if (k1 >= len)
                break;
            size_t j = tc_skip_ws(s, len, k1 + strlen("</arg_key>"));
            if (!tc_starts(s + j, len - j, "<arg_value>"))
                break;
            size_t v0 = j + strlen("<arg_value>");
            size_t v1 = tc_find(s + v0, len - v0, "</arg_value>") + v0;
            if (v1 >= len)
                break;
            add_xml_param(&args, s + k0, k1 - k0, s + v0, v1 - v0);
            i = v1 + strlen("</arg_value>");
        } else if (close_or_end(s, len, &i, "</tool_call>")) {
            tc_buf_adds(&args, "}");
            tc_calls_add(out, s + na, nb - na, args.p, args.n);
            out->oom |= args.oom;
            tc_buf_free(&args);
            return i;
        } else {
            break;
        }
    }
    *why = "an unterminated <arg_key>/<arg_value> or <tool_call>";
    tc_buf_free(&args);
    return 0;
}

/* [TOOL_CALLS][{...},...] (Nemo) or [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...}
 * (Small 3.2, Devstral, Ministral 3). */
static size_t read_mistral(const char *s, size_t len, tc_calls *out, const char **why)
{
    size_t i = tc_skip_ws(s, len, strlen("[TOOL_CALLS]"));
    const char *v;
    size_t vn;
    if (i < len && s[i] == '[') {
        if (!take_value(s, len, &i, &v, &vn)) {
            *why = "unterminated or invalid JSON after [TOOL_CALLS]";
            return 0;
        }
        return calls_from_array(v, vn, out, why) ? i : 0;
    }
    size_t args_at = tc_find(s + i, len - i, "[ARGS]") + i;
    size_t id_at = tc_find(s + i, len - i, "[CALL_ID]") + i;
    size_t na = i, nb = id_at < args_at ? id_at : args_at;
    trim(s, &na, &nb);
    if (args_at >= len || nb == na) {
        *why = "[TOOL_CALLS] without NAME[ARGS]";
        return 0;
    }
    i = args_at + strlen("[ARGS]");
    if (!take_value(s, len, &i, &v, &vn) || v[0] != '{') {
        *why = "unterminated or invalid JSON after [ARGS]";
        return 0;
    }
    tc_calls_add(out, s + na, nb - na, v, vn);
    return i;
}

static size_t read_llama3(const char *s, size_t len, tc_calls *out, const char **why)
{
    size_t i = 0;
    if (tc_starts(s, len, "<|python_tag|>"))
        i = strlen("<|python_tag|>");
    const char *v;
    size_t vn;
    if (!take_value(s, len, &i, &v, &vn) || !call_from_object(v, vn, out, why)) {
        if (!*why)
            *why = "unterminated or invalid JSON tool call";
        return 0;
    }
    i = tc_skip_ws(s, len, i);
    if (i < len && s[i] == ';')
        i++;
    return i;
}

#define DS_CALLS_BEGIN "<｜tool▁calls▁begin｜>"
#define DS_CALLS_END   "<｜tool▁calls▁end｜>"
#define DS_CALL_BEGIN  "<｜tool▁call▁begin｜>"
#define DS_CALL_END    "<｜tool▁call▁end｜>"
#define DS_SEP         "<｜tool▁sep｜>"

/* R1: <call>function<sep>NAME\n```json\n{...}\n```<end>
 * V3.1: <call>NAME<sep>{...}<end> */
static size_t read_deepseek(const char *s, size_t len, tc_calls *out, const char **why)
{
    size_t i = tc_starts(s, len, DS_CALLS_BEGIN) ? strlen(DS_CALLS_BEGIN) : 0;
    size_t count = 0;
    *why = "a malformed <｜tool▁call▁begin｜> block";
    for (;;) {
        i = tc_skip_ws(s, len, i);
        if (!tc_starts(s + i, len - i, DS_CALL_BEGIN))
            break;
        i += strlen(DS_CALL_BEGIN);
        size_t sep = tc_find(s + i, len - i, DS_SEP) + i;
        if (sep >= len)
            return 0;
        size_t na = i, nb = sep;
        trim(s, &na, &nb);
        i = sep + strlen(DS_SEP);
        if (nb - na == 8 && memcmp(s + na, "function", 8) == 0) {
            na = i;
            nb = tc_find(s + i, len - i, "\n") + i;
            i = nb;
            trim(s, &na, &nb);
            i = tc_skip_ws(s, len, i);
            if (tc_starts(s + i, len - i, "```json"))
                i += strlen("```json");
        }
        const char *v;
        size_t vn;
        if (nb == na || !take_value(s, len, &i, &v, &vn) || v[0] != '{')
            return 0;
        i = tc_skip_ws(s, len, i);
        if (tc_starts(s + i, len - i, "```"))
            i += 3;
        tc_calls_add(out, s + na, nb - na, v, vn);
        count++;
        if (!close_or_end(s, len, &i, DS_CALL_END))
            return 0;
    }
    if (count == 0)
        return 0;
    if (tc_starts(s + i, len - i, DS_CALLS_END))
        i += strlen(DS_CALLS_END);
    return i;
}

/* <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0
 * <|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|> */
static size_t read_kimi(const char *s, size_t len, tc_calls *out, const char **why)
{
    static const char sec_begin[] = "<|tool_calls_section_begin|>";
    static const char sec_end[] = "<|tool_calls_section_end|>";
    static const char call_begin[] = "<|tool_call_begin|>";
    static const char arg_begin[] = "<|tool_call_argument_begin|>";
    size_t i = tc_starts(s, len, sec_begin) ? strlen(sec_begin) : 0;
    size_t count = 0;
    *why = "a malformed <|tool_call_begin|> block";
    for (;;) {
        i = tc_skip_ws(s, len, i);
        if (!tc_starts(s + i, len - i, call_begin))
            break;
        i += strlen(call_begin);
        size_t ab = tc_find(s + i, len - i, arg_begin) + i;
        if (ab >= len)
            return 0;
        size_t na = i, nb = ab;
        trim(s, &na, &nb);
        if (nb - na > 10 && memcmp(s + na, "functions.", 10) == 0)
            na += 10;
        size_t colon = nb;
        while (colon > na && s[colon - 1] >= '0' && s[colon - 1] <= '9')
            colon--;
        if (colon < nb && colon > na && s[colon - 1] == ':')
            nb = colon - 1;
        i = ab + strlen(arg_begin);
        const char *v;
        size_t vn;
        if (nb == na || !take_value(s, len, &i, &v, &vn) || v[0] != '{')
            return 0;
        tc_calls_add(out, s + na, nb - na, v, vn);
        count++;
        if (!close_or_end(s, len, &i, "<|tool_call_end|>"))
            return 0;
    }
    if (count == 0)
        return 0;
    if (tc_starts(s + i, len - i, sec_end))
        i += strlen(sec_end);
    return i;
}

/* OPEN, then JSON arrays of calls or call objects, then CLOSE (or, with no
 * CLOSE, exactly one array). */
static size_t read_json_list(const char *s, size_t len, const char *open, const char *close,
                             tc_calls *out, const char **why)
{
    size_t i = strlen(open), count = 0;
    for (;;) {
        i = tc_skip_ws(s, len, i);
        if (close && tc_starts(s + i, len - i, close)) {
            i += strlen(close);
            break;
        }
        if (i == len && count > 0)
            break;
        const char *v;
        size_t vn;
        if (i >= len || (s[i] != '[' && s[i] != '{') || !take_value(s, len, &i, &v, &vn)) {
            *why = "unterminated or invalid JSON in a tool-call list";
            return 0;
        }
        size_t before = out->n;
        if (v[0] == '[' ? !calls_from_array(v, vn, out, why) : !call_from_object(v, vn, out, why))
            return 0;
        count += out->n - before + 1;
        if (!close)
            break;
    }
    return i;
}

static size_t read_tool_calls_tag(const char *s, size_t len, tc_calls *out, const char **why)
{
    return read_json_list(s, len, "<tool_calls>", "</tool_calls>", out, why);
}

static size_t read_functools(const char *s, size_t len, tc_calls *out, const char **why)
{
    return read_json_list(s, len, "functools", NULL, out, why);
}

static size_t read_command_r(const char *s, size_t len, tc_calls *out, const char **why)
{
    return read_json_list(s, len, "<|START_ACTION|>", "<|END_ACTION|>", out, why);
}

static const tc_format formats[SVC_TOOL_FORMAT_COUNT] = {
    [SVC_TOOL_FORMAT_NONE] = {"none", {NULL}, NULL},
    [SVC_TOOL_FORMAT_HERMES] = {"hermes", {"<tool_call>", NULL}, read_hermes},
    [SVC_TOOL_FORMAT_QWEN3_CODER] = {"qwen3-coder", {"<tool_call>", NULL}, read_qwen3_coder},
    [SVC_TOOL_FORMAT_SEED_OSS] = {"seed-oss", {"<seed:tool_call>", NULL}, read_seed_oss},
    [SVC_TOOL_FORMAT_GLM] = {"glm", {"<tool_call>", NULL}, read_glm},
    [SVC_TOOL_FORMAT_MISTRAL] = {"mistral", {"[TOOL_CALLS]", NULL}, read_mistral},
    [SVC_TOOL_FORMAT_LLAMA3] = {"llama3", {"<|python_tag|>", NULL}, read_llama3},
    [SVC_TOOL_FORMAT_DEEPSEEK] = {"deepseek", {DS_CALLS_BEGIN, DS_CALL_BEGIN, NULL}, read_deepseek},
    [SVC_TOOL_FORMAT_KIMI] = {"kimi",
        {"<|tool_calls_section_begin|>", "<|tool_call_begin|>", NULL}, read_kimi},
    [SVC_TOOL_FORMAT_JSON_LIST] = {"json-list", {"<tool_calls>", NULL}, read_tool_calls_tag},
    [SVC_TOOL_FORMAT_FIREFUNCTION] = {"firefunction", {"functools[", NULL}, read_functools},
    [SVC_TOOL_FORMAT_COMMAND_R] = {"command-r", {"<|START_ACTION|>", NULL}, read_command_r},
};

const tc_format *tc_format_get(svc_tool_format f)
{
    return (unsigned)f < SVC_TOOL_FORMAT_COUNT ? &formats[f] : &formats[0];
}

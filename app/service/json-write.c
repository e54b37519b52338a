/*
 * json-write.c — json-glib's generator with the one escape it misses
 * (json-write.h).
 */
#include "json-write.h"

#include <string.h>

char *svc_json_write(JsonNode *node)
{
    JsonGenerator *gen = json_generator_new();
    json_generator_set_root(gen, node);
    char *s = json_generator_to_data(gen, NULL);
    g_object_unref(gen);
    /* The generator writes no control bytes outside strings, and 0x1f is
     * never part of a multi-byte UTF-8 sequence, so every such byte is a
     * raw U+001F inside a string. */
    if (!s || !strchr(s, 0x1f))
        return s;
    GString *out = g_string_sized_new(strlen(s) + 16);
    for (const char *p = s; *p; p++) {
        if (*p == 0x1f)
            g_string_append(out, "\\u001f");
        else
            g_string_append_c(out, *p);
    }
    g_free(s);
    return g_string_free(out, FALSE);
}

/*
 * test-svc-json.c — the service's JSON writer (svc_json_to_string) gives
 * valid JSON for every string a model can produce: all control bytes are
 * escaped (json-glib 1.6 leaves U+001F raw, which clients then reject),
 * and the text parses back to the same string.
 */
#include "test.h"

#include "svc.h"

int main(void)
{
    char raw[64];
    int n = 0;
    for (int c = 1; c < 0x20; c++)
        raw[n++] = (char)c;
    memcpy(raw + n, "a\"b\\c\xc3\xa9", 8);
    n += 8;
    raw[n] = '\0';
    JsonNode *node = json_node_new(JSON_NODE_OBJECT);
    JsonObject *o = json_object_new();
    json_object_set_string_member(o, "content", raw);
    json_node_take_object(node, o);
    char *text = svc_json_to_string(node);
    int raw_controls = 0;
    for (const char *p = text; *p; p++)
        raw_controls += (unsigned char)*p < 0x20;
    CHECK_MSG(raw_controls == 0, "%d raw control bytes in %s", raw_controls, text);
    CHECK(strstr(text, "\\u001f") != NULL);
    GError *e = NULL;
    JsonNode *back = svc_json_parse(text, -1, &e);
    CHECK(back != NULL);
    if (back) {
        const char *s = json_object_get_string_member(json_node_get_object(back), "content");
        CHECK(s && strcmp(s, raw) == 0);
        json_node_unref(back);
    }
    g_clear_error(&e);
    g_free(text);
    json_node_unref(node);
    TEST_DONE();
}

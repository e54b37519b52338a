/*
 * test-settings.c — service.json (app/service/settings.h): defaults, a full
 * file round trip through save and load, error messages that name the file
 * and the JSON path for every kind of bad field, secrets never in the
 * redacted view, the all-or-nothing patch with its keep-the-key rule, and
 * model routing by glob.
 */
#include "settings.h"
#include "test.h"

#include <glib/gstdio.h>
#include <sys/stat.h>

static const char *full_json =
    "{\"host\": \"0.0.0.0\", \"port\": 12000, \"model\": \"qwen3:30b\", \"n_parallel\": 8,"
    " \"n_ctx\": 8192, \"n_threads\": 6, \"queue_max\": 16, \"request_timeout_s\": 120,"
    " \"idle_unload_s\": 900, \"max_body_bytes\": 2048,"
    " \"allowed_hosts\": [\"box.lan\", \"192.168.1.5\"],"
    " \"cors_origins\": [\"http://localhost:3000\"],"
    " \"upstreams\": ["
    "  {\"name\": \"moonshot\", \"base_url\": \"https://api.moonshot.ai/v1\","
    "   \"api_key\": \"sk-secret-123\", \"models\": [\"kimi-*\"],"
    "   \"prices\": {\"input_per_mtok\": 0.6, \"cached_input_per_mtok\": 0.15,"
    "                \"output_per_mtok\": 2.5}},"
    "  {\"name\": \"cluster\", \"base_url\": \"http://10.0.0.2:8000/v1\","
    "   \"api_key_env\": \"TEST_SETTINGS_KEY\", \"models\": [\"big-*\", \"x?y\"],"
    "   \"fallback\": true}],"
    " \"data_sensitivity\": \"normal\"}";

static void test_defaults(void)
{
    svc_settings *s = svc_settings_new();
    CHECK_EQ_STR(s->host, "127.0.0.1");
    CHECK_EQ_INT(s->port, 11435);
    CHECK(s->model == NULL);
    CHECK_EQ_INT(s->n_parallel, 4);
    CHECK_EQ_INT(s->n_ctx, 0);
    CHECK_EQ_INT(s->queue_max, 64);
    CHECK_EQ_INT(s->request_timeout_s, 600);
    CHECK_EQ_INT(s->idle_unload_s, 0);
    CHECK_EQ_INT(s->max_body_bytes, 10 * 1024 * 1024);
    CHECK(s->allowed_hosts && !s->allowed_hosts[0]);
    CHECK(s->cors_origins && !s->cors_origins[0]);
    CHECK_EQ_INT(s->upstreams->len, 0);
    CHECK(s->data_sensitivity == SVC_DATA_SENSITIVITY_NORMAL);
    svc_settings_free(s);
    svc_settings_free(NULL);
}

static void test_load_save(const char *dir)
{
    g_autofree char *path = g_build_filename(dir, "sub", "service.json", NULL);
    g_autoptr(GError) e = NULL;
    /* Missing file: defaults. */
    svc_settings *s = svc_settings_load(path, &e);
    CHECK(s && !e);
    CHECK(s && s->port == SVC_SETTINGS_DEFAULT_PORT);
    svc_settings_free(s);

    s = svc_settings_load_from_data(full_json, -1, "service.json", &e);
    CHECK_MSG(s != NULL, "%s", e ? e->message : "");
    if (!s)
        return;
    CHECK_EQ_STR(s->host, "0.0.0.0");
    CHECK_EQ_INT(s->port, 12000);
    CHECK_EQ_STR(s->model, "qwen3:30b");
    CHECK_EQ_INT(s->n_parallel, 8);
    CHECK_EQ_INT(s->n_ctx, 8192);
    CHECK_EQ_INT(s->max_body_bytes, 2048);
    CHECK_EQ_INT(g_strv_length(s->allowed_hosts), 2);
    CHECK_EQ_STR(s->cors_origins[0], "http://localhost:3000");
    CHECK_EQ_INT(s->upstreams->len, 2);
    svc_upstream_cfg *u = g_ptr_array_index(s->upstreams, 0);
    CHECK_EQ_STR(u->api_key, "sk-secret-123");
    CHECK_NEAR(u->prices.cached_input_per_mtok, 0.15, 1e-12);
    CHECK(!u->fallback);

    /* Save: 0600, then load gives the same JSON. */
    CHECK(svc_settings_save(s, path, &e));
    GStatBuf st;
    CHECK(g_stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    svc_settings *t = svc_settings_load(path, &e);
    CHECK_MSG(t != NULL, "%s", e ? e->message : "");
    if (t) {
        g_autoptr(JsonNode) a = svc_settings_to_json(s, FALSE);
        g_autoptr(JsonNode) b = svc_settings_to_json(t, FALSE);
        CHECK(json_node_equal(a, b));
        g_autofree char *txt = json_to_string(b, FALSE);
        CHECK(strstr(txt, "sk-secret-123") != NULL); /* the file keeps the key */
    }
    svc_settings_free(t);

    /* Copy is deep. */
    svc_settings *c = svc_settings_copy(s);
    g_autoptr(JsonNode) a = svc_settings_to_json(s, FALSE);
    svc_settings_free(s);
    g_autoptr(JsonNode) b = svc_settings_to_json(c, FALSE);
    CHECK(json_node_equal(a, b));
    svc_settings_free(c);
    g_unlink(path);
    g_autofree char *sub = g_path_get_dirname(path);
    g_rmdir(sub);
}

static void test_redact(void)
{
    g_setenv("TEST_SETTINGS_KEY", "env-secret-456", TRUE);
    svc_settings *s = svc_settings_load_from_data(full_json, -1, "service.json", NULL);
    CHECK(s != NULL);
    if (!s)
        return;
    g_autoptr(JsonNode) n = svc_settings_to_json(s, TRUE);
    g_autofree char *txt = json_to_string(n, FALSE);
    CHECK(strstr(txt, "sk-secret-123") == NULL);
    CHECK(strstr(txt, "env-secret-456") == NULL);
    CHECK(strstr(txt, "\"api_key\"") == NULL);
    JsonArray *ups = json_object_get_array_member(json_node_get_object(n), "upstreams");
    CHECK(json_object_get_boolean_member(json_array_get_object_element(ups, 0), "has_api_key"));
    CHECK(json_object_get_boolean_member(json_array_get_object_element(ups, 1), "has_api_key"));
    const svc_upstream_cfg *u1 = g_ptr_array_index(s->upstreams, 1);
    CHECK_EQ_STR(svc_upstream_get_api_key(u1), "env-secret-456");
    /* A key in the environment that could inject a header is ignored. */
    g_setenv("TEST_SETTINGS_KEY", "abc\r\nX-Evil: 1", TRUE);
    CHECK(svc_upstream_get_api_key(u1) == NULL);
    g_unsetenv("TEST_SETTINGS_KEY");
    g_autoptr(JsonNode) n2 = svc_settings_to_json(s, TRUE);
    ups = json_object_get_array_member(json_node_get_object(n2), "upstreams");
    CHECK(!json_object_get_boolean_member(json_array_get_object_element(ups, 1), "has_api_key"));

    /* The redacted view sent back as a patch keeps every key. */
    CHECK(svc_settings_patch(s, json_node_get_object(n), NULL));
    const svc_upstream_cfg *u0 = g_ptr_array_index(s->upstreams, 0);
    CHECK_EQ_STR(u0->api_key, "sk-secret-123");

    /* Routing by glob, first match wins; fallback; "high" keeps it local. */
    CHECK(svc_settings_route_model(s, "kimi-k2") == u0);
    CHECK(svc_settings_route_model(s, "big-model") == g_ptr_array_index(s->upstreams, 1));
    CHECK(svc_settings_route_model(s, "xzy") == g_ptr_array_index(s->upstreams, 1));
    CHECK(svc_settings_route_model(s, "qwen3") == NULL);
    CHECK(svc_settings_route_model(s, NULL) == NULL);
    CHECK(svc_settings_fallback_upstream(s) == g_ptr_array_index(s->upstreams, 1));
    s->data_sensitivity = SVC_DATA_SENSITIVITY_HIGH;
    CHECK(svc_settings_route_model(s, "kimi-k2") == NULL);
    CHECK(svc_settings_fallback_upstream(s) == NULL);
    svc_settings_free(s);
}

typedef struct {
    const char *json;
    const char *want; /* substring of the message */
} bad_t;

static void test_bad_files(const char *dir)
{
    static const bad_t bad[] = {
        {"", "service.json: expected a JSON object"},
        {"{", "service.json: not valid JSON"},
        {"[]", "service.json: expected a JSON object"},
        {"42", "service.json: expected a JSON object"},
        {"{\"prot\": 1}", "service.json: unknown field \"prot\""},
        {"{\"port\": \"80\"}", "service.json: port: expected an integer"},
        {"{\"port\": 65536}", "service.json: port: 65536 is out of range"},
        {"{\"port\": -1}", "service.json: port:"},
        {"{\"port\": 80.5}", "service.json: port: expected an integer"},
        {"{\"port\": 1e300}", "service.json: port: expected an integer"},
        {"{\"port\": true}", "service.json: port: expected an integer"},
        {"{\"port\": null}", "service.json: port: expected an integer"},
        {"{\"host\": 1}", "service.json: host: expected a string"},
        {"{\"host\": \"\"}", "service.json: host: expected 1 to"},
        {"{\"host\": \"a b\"}", "service.json: host:"},
        {"{\"host\": null}", "service.json: host: expected a string"},
        {"{\"model\": 5}", "service.json: model: expected a string or null"},
        {"{\"model\": \"a\\nb\"}", "service.json: model: contains invalid UTF-8 or control"},
        {"{\"n_parallel\": 0}", "service.json: n_parallel: 0 is out of range"},
        {"{\"n_parallel\": 65}", "service.json: n_parallel:"},
        {"{\"n_ctx\": -5}", "service.json: n_ctx:"},
        {"{\"queue_max\": 0}", "service.json: queue_max:"},
        {"{\"request_timeout_s\": 0}", "service.json: request_timeout_s:"},
        {"{\"idle_unload_s\": -1}", "service.json: idle_unload_s:"},
        {"{\"max_body_bytes\": 10}", "service.json: max_body_bytes:"},
        {"{\"max_body_bytes\": 99999999999999}", "service.json: max_body_bytes:"},
        {"{\"allowed_hosts\": \"x\"}", "service.json: allowed_hosts: expected an array"},
        {"{\"allowed_hosts\": [1]}", "service.json: allowed_hosts[0]: expected a string"},
        {"{\"allowed_hosts\": [\"ok.lan\", \"a@b\"]}", "service.json: allowed_hosts[1]:"},
        {"{\"cors_origins\": [\"http://x/\"]}", "service.json: cors_origins[0]: expected"},
        {"{\"data_sensitivity\": \"secret\"}", "service.json: data_sensitivity: expected"},
        {"{\"upstreams\": {}}", "service.json: upstreams: expected an array"},
        {"{\"upstreams\": [1]}", "service.json: upstreams[0]: expected an object"},
        {"{\"upstreams\": [{\"name\": \"a\"}]}", "service.json: upstreams[0]: missing \"base_url\""},
        {"{\"upstreams\": [{\"base_url\": \"http://a\"}]}", "upstreams[0]: missing \"name\""},
        {"{\"upstreams\": [{\"name\": \"a\", \"base_url\": \"http://a\"},"
         " {\"name\": \"b\", \"base_url\": 7}]}",
         "service.json: upstreams[1].base_url: expected a string"},
        {"{\"upstreams\": [{\"name\": \"a\", \"base_url\": \"ftp://a\"}]}",
         "upstreams[0].base_url: expected an http:// or https:// URL"},
        {"{\"upstreams\": [{\"name\": \"a\", \"base_url\": \"https://u:p@a/v1\"}]}",
         "upstreams[0].base_url: expected a URL with a host"},
        {"{\"upstreams\": [{\"name\": \"a\", \"base_url\": \"not a url\"}]}",
         "upstreams[0].base_url:"},
        {"{\"upstreams\": [{\"name\": \"a b\", \"base_url\": \"http://a\"}]}",
         "upstreams[0].name: expected 1-64"},
        {"{\"upstreams\": [{\"name\": \"local\", \"base_url\": \"http://a\"}]}",
         "upstreams[0].name:"},
        {"{\"upstreams\": [{\"name\": \"a\", \"base_url\": \"http://a\"},"
         " {\"name\": \"a\", \"base_url\": \"http://b\"}]}",
         "upstreams[1]: the name \"a\" is used twice"},
        {"{\"upstreams\": [{\"name\": \"a\", \"base_url\": \"http://a\", \"modles\": []}]}",
         "service.json: upstreams[0]: unknown field \"modles\""},
        {"{\"upstreams\": [{\"name\": \"a\", \"base_url\": \"http://a\", \"api_key\": \"x y\"}]}",
         "upstreams[0].api_key: expected printable ASCII"},
        {"{\"upstreams\": [{\"name\": \"a\", \"base_url\": \"http://a\", \"api_key\": \"k\","
         " \"api_key_env\": \"K\"}]}", "upstreams[0]: set api_key or api_key_env, not both"},
        {"{\"upstreams\": [{\"name\": \"a\", \"base_url\": \"http://a\", \"api_key_env\": \"1X\"}]}",
         "upstreams[0].api_key_env: expected an environment variable name"},
        {"{\"upstreams\": [{\"name\": \"a\", \"base_url\": \"http://a\", \"models\": [\"\"]}]}",
         "upstreams[0].models[0]: expected 1 to"},
        {"{\"upstreams\": [{\"name\": \"a\", \"base_url\": \"http://a\", \"fallback\": 1}]}",
         "upstreams[0].fallback: expected true or false"},
        {"{\"upstreams\": [{\"name\": \"a\", \"base_url\": \"http://a\", \"prices\": []}]}",
         "upstreams[0].prices: expected an object"},
        {"{\"upstreams\": [{\"name\": \"a\", \"base_url\": \"http://a\","
         " \"prices\": {\"input_per_mtok\": -1}}]}",
         "upstreams[0].prices.input_per_mtok: expected a price"},
        {"{\"upstreams\": [{\"name\": \"a\", \"base_url\": \"http://a\","
         " \"prices\": {\"input_per_mtok\": \"1\"}}]}",
         "upstreams[0].prices.input_per_mtok: expected a number"},
        {"{\"upstreams\": [{\"name\": \"a\", \"base_url\": \"http://a\","
         " \"prices\": {\"input\": 1}}]}", "upstreams[0].prices: unknown field \"input\""},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) e = NULL;
        svc_settings *s = svc_settings_load_from_data(bad[i].json, -1, "service.json", &e);
        CHECK_MSG(s == NULL, "accepted: %s", bad[i].json);
        svc_settings_free(s);
        CHECK_MSG(e && strstr(e->message, bad[i].want), "%s: message \"%s\", wanted \"%s\"",
                  bad[i].json, e ? e->message : "(none)", bad[i].want);
        CHECK(e && e->domain == SVC_SETTINGS_ERROR);
    }
    /* The loader names the file; an unreadable path is a READ error. */
    g_autofree char *path = g_build_filename(dir, "service.json", NULL);
    CHECK(g_file_set_contents(path, "{\"port\": \"x\"}", -1, NULL));
    g_autoptr(GError) e = NULL;
    CHECK(svc_settings_load(path, &e) == NULL);
    CHECK(e && g_str_has_prefix(e->message, "service.json: port:"));
    g_clear_error(&e);
    CHECK(svc_settings_load(dir, &e) == NULL); /* a folder */
    CHECK(g_error_matches(e, SVC_SETTINGS_ERROR, SVC_SETTINGS_ERROR_READ));
    g_unlink(path);
    /* Saving where the folder cannot be made fails with a message. */
    g_clear_error(&e);
    CHECK(g_file_set_contents(path, "x", 1, NULL));
    g_autofree char *under = g_build_filename(path, "service.json", NULL);
    svc_settings *s = svc_settings_new();
    CHECK(!svc_settings_save(s, under, &e));
    CHECK(g_error_matches(e, SVC_SETTINGS_ERROR, SVC_SETTINGS_ERROR_WRITE));
    svc_settings_free(s);
    g_unlink(path);
}

static JsonObject *obj(const char *json)
{
    JsonNode *n = json_from_string(json, NULL);
    JsonObject *o = json_object_ref(json_node_get_object(n));
    json_node_unref(n);
    return o;
}

static void test_patch(void)
{
    svc_settings *s = svc_settings_load_from_data(full_json, -1, "service.json", NULL);
    if (!s)
        return;
    g_autoptr(JsonNode) before = svc_settings_to_json(s, FALSE);

    /* One bad member anywhere: nothing changes. */
    g_autoptr(JsonObject) p1 = obj("{\"port\": 9000, \"n_parallel\": 2, \"upstreams\": ["
                                   "{\"name\": \"x\", \"base_url\": \"http://x\"},"
                                   "{\"name\": \"y\", \"base_url\": 3}]}");
    g_autoptr(GError) e = NULL;
    CHECK(!svc_settings_patch(s, p1, &e));
    CHECK(e && strstr(e->message, "patch: upstreams[1].base_url: expected a string"));
    g_autoptr(JsonNode) after = svc_settings_to_json(s, FALSE);
    CHECK(json_node_equal(before, after));
    g_clear_error(&e);
    g_autoptr(JsonObject) p2 = obj("{\"port\": 9000, \"bogus\": 1}");
    CHECK(!svc_settings_patch(s, p2, &e));
    CHECK(e && strstr(e->message, "patch: unknown field \"bogus\""));
    CHECK_EQ_INT(s->port, 12000);

    /* A good patch: fields replaced, model cleared, key kept by name,
     * removed with null, a new upstream without a key has none. */
    g_autoptr(JsonObject) p3 = obj(
        "{\"port\": 9000, \"model\": null, \"cors_origins\": [],"
        " \"upstreams\": [{\"name\": \"new\", \"base_url\": \"https://n/v1\"},"
        "  {\"name\": \"moonshot\", \"base_url\": \"https://api.moonshot.cn/v1\"},"
        "  {\"name\": \"cluster\", \"base_url\": \"http://10.0.0.2:8000/v1\", \"api_key\": null}]}");
    g_clear_error(&e);
    CHECK_MSG(svc_settings_patch(s, p3, &e), "%s", e ? e->message : "");
    CHECK_EQ_INT(s->port, 9000);
    CHECK(s->model == NULL);
    CHECK(s->cors_origins[0] == NULL);
    CHECK_EQ_INT(s->upstreams->len, 3);
    const svc_upstream_cfg *n = g_ptr_array_index(s->upstreams, 0);
    const svc_upstream_cfg *m = g_ptr_array_index(s->upstreams, 1);
    const svc_upstream_cfg *c = g_ptr_array_index(s->upstreams, 2);
    CHECK(n->api_key == NULL && n->api_key_env == NULL);
    CHECK_EQ_STR(m->api_key, "sk-secret-123");
    CHECK_EQ_STR(m->base_url, "https://api.moonshot.cn/v1");
    CHECK(c->api_key == NULL && c->api_key_env == NULL);
    CHECK_EQ_INT(s->n_parallel, 8); /* untouched */
    svc_settings_free(s);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    g_autoptr(GError) e = NULL;
    g_autofree char *dir = g_dir_make_tmp("settings-XXXXXX", &e);
    CHECK(dir != NULL);
    if (!dir)
        TEST_DONE();
    test_defaults();
    test_load_save(dir);
    test_redact();
    test_bad_files(dir);
    test_patch();
    g_rmdir(dir);
    TEST_DONE();
}

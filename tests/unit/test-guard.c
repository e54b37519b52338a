/*
 * test-guard.c — the service's request safety checks (app/service/guard.h)
 * against tables of ordinary and hostile inputs: Host headers (DNS
 * rebinding tricks), CORS origins, bind addresses, model names, and paths
 * that escape a folder through "..", absolute paths and symlinks.
 */
#include "guard.h"
#include "test.h"

#include <glib/gstdio.h>
#include <unistd.h>

typedef struct {
    const char *in;
    gboolean ok;
} case_t;

static void test_host(void)
{
    static const case_t cases[] = {
        {"localhost", TRUE},
        {"LOCALHOST:11435", TRUE},
        {"localhost.", TRUE},          /* the same DNS name, made absolute */
        {"localhost.:8080", TRUE},
        {"127.0.0.1", TRUE},
        {"127.0.0.1:11435", TRUE},
        {"127.1.2.3:1", TRUE},
        {"127.255.255.255:65535", TRUE},
        {"[::1]", TRUE},
        {"[::1]:11435", TRUE},
        {"[0:0:0:0:0:0:0:1]:80", TRUE},
        {"::1", TRUE},
        {"api.example.com", TRUE},     /* configured */
        {"API.Example.COM:443", TRUE},
        {"api.example.com.", TRUE},
        {"10.0.0.5:11435", TRUE},      /* configured IP */
        {"[fe80::1]:80", TRUE},        /* configured as fe80:0::1 */
        {NULL, FALSE},
        {"", FALSE},
        {"localhost.evil.com", FALSE},
        {"localhost.evil.com:11435", FALSE},
        {"evil.com", FALSE},
        {"127.0.0.1.nip.io", FALSE},
        {"127.0.0.1.nip.io:11435", FALSE},
        {"a@localhost", FALSE},
        {"a@127.0.0.1:80", FALSE},
        {"localhost@evil.com", FALSE},
        {"evil.com#localhost", FALSE},
        {"evil.com/localhost", FALSE},
        {"evil.com\\@localhost", FALSE},
        {"localhost:", FALSE},
        {"localhost:0", FALSE},
        {"localhost:65536", FALSE},
        {"localhost:123456", FALSE},
        {"localhost:-1", FALSE},
        {"localhost:+80", FALSE},
        {"localhost:80a", FALSE},
        {"localhost:80:80", FALSE},
        {"localhost :80", FALSE},
        {" localhost", FALSE},
        {"localhost\t", FALSE},
        {"local\nhost", FALSE},
        {"localhost..", FALSE},
        {".localhost", FALSE},
        {"app.localhost", FALSE},      /* not pinned by every resolver */
        {"localhost\xc2\xa0", FALSE},
        {"l\xd0\xbe" "calhost", FALSE},/* Cyrillic o */
        {"127.0.0.1.", FALSE},
        {"127.1", FALSE},
        {"127.0.1", FALSE},
        {"0177.0.0.1", FALSE},
        {"0x7f.0.0.1", FALSE},
        {"0x7f000001", FALSE},
        {"2130706433", FALSE},
        {"127.0.0.01", FALSE},
        {"127.0.0.256", FALSE},
        {"127.0.0.1.1", FALSE},
        {"0.0.0.0", FALSE},
        {"0.0.0.0:11435", FALSE},
        {"[::]", FALSE},
        {"[::1%eth0]", FALSE},
        {"[::1%25eth0]:80", FALSE},
        {"::1%lo", FALSE},
        {"[::1", FALSE},
        {"[::1]x", FALSE},
        {"[::1]:", FALSE},
        {"[::1]:0", FALSE},
        {"[localhost]", FALSE},
        {"[127.0.0.1]", FALSE},
        {"[::ffff:127.0.0.1]", FALSE}, /* mapped: not sent by browsers, refused */
        {"[::2]", FALSE},
        {"::1:80", FALSE},
        {"[fe80::2]", FALSE},
        {"10.0.0.6", FALSE},
        {"example.com", FALSE},
        {"api.example.com.evil.com", FALSE},
        {"xapi.example.com", FALSE},
        {"%6c%6f%63%61%6c%68%6f%73%74", FALSE},
        {"local%00host", FALSE},
    };
    const char *const allowed[] = {"api.example.com", "10.0.0.5", "[fe80:0::1]", "bad entry!",
                                   NULL};
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) e = NULL;
        gboolean ok = svc_guard_host_ok(cases[i].in, allowed, &e);
        CHECK_MSG(ok == cases[i].ok, "Host \"%s\": got %d (%s)",
                  cases[i].in ? cases[i].in : "(null)", ok, e ? e->message : "no error");
        CHECK(ok == (e == NULL));
        if (e)
            CHECK(g_error_matches(e, SVC_GUARD_ERROR, SVC_GUARD_ERROR_HOST));
    }
    /* Without configured names only loopback passes. */
    CHECK(svc_guard_host_ok("localhost:1", NULL, NULL));
    CHECK(!svc_guard_host_ok("api.example.com", NULL, NULL));
    /* Overlong headers are refused without reading past the bound. */
    g_autofree char *longh = g_strnfill(4000, 'a');
    CHECK(!svc_guard_host_ok(longh, NULL, NULL));
    g_autofree char *label = g_strnfill(64, 'a');
    g_autofree char *lname = g_strconcat(label, ".localhost", NULL);
    CHECK(!svc_guard_host_ok(lname, NULL, NULL));
    /* A message names the header. */
    g_autoptr(GError) e = NULL;
    CHECK(!svc_guard_host_ok("evil.com:80", NULL, &e));
    CHECK(e && strstr(e->message, "evil.com:80"));
}

static void test_cors(void)
{
    const char *const conf[] = {"http://localhost:3000", "https://app.example.com",
                                "vscode-webview://abc123", "http://[::1]:8080", NULL};
    static const case_t cases[] = {
        {"http://localhost:3000", TRUE},
        {"HTTP://LOCALHOST:3000", TRUE},
        {"https://app.example.com", TRUE},
        {"https://app.example.com:443", TRUE},
        {"vscode-webview://abc123", TRUE},
        {"http://[::1]:8080", TRUE},
        {"http://[0:0::1]:8080", TRUE},
        {"http://localhost", FALSE},
        {"http://localhost:3001", FALSE},
        {"https://localhost:3000", FALSE},
        {"http://app.example.com", FALSE},
        {"https://app.example.com:8443", FALSE},
        {"https://app.example.com.evil.com", FALSE},
        {"https://evil.app.example.com", FALSE},
        {"https://app.example.com/", FALSE},
        {"https://app.example.com/path", FALSE},
        {"https://user@app.example.com", FALSE},
        {"https://app.example.com?x", FALSE},
        {"http://localhost:3000 ", FALSE},
        {"null", FALSE},
        {"", FALSE},
        {NULL, FALSE},
        {"*", FALSE},
        {"file://", FALSE},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        gboolean ok = svc_guard_cors_origin_ok(cases[i].in, conf);
        CHECK_MSG(ok == cases[i].ok, "Origin \"%s\": got %d", cases[i].in ? cases[i].in : "(null)",
                  ok);
    }
    /* Nothing configured: no CORS at all. */
    const char *const none[] = {NULL};
    CHECK(!svc_guard_cors_origin_ok("http://localhost:3000", none));
    CHECK(!svc_guard_cors_origin_ok("http://localhost:3000", NULL));
    /* "*" only when configured literally. */
    const char *const star[] = {"*", NULL};
    CHECK(svc_guard_cors_origin_ok("https://anything.example", star));
    CHECK(!svc_guard_cors_origin_ok(NULL, star));

    CHECK(svc_guard_origin_valid("*", NULL));
    CHECK(svc_guard_origin_valid("http://localhost:3000", NULL));
    CHECK(svc_guard_origin_valid("chrome-extension://abcdef", NULL));
    CHECK(!svc_guard_origin_valid("http://localhost:3000/", NULL));
    CHECK(!svc_guard_origin_valid("localhost:3000", NULL));
    CHECK(!svc_guard_origin_valid("http://", NULL));
    CHECK(!svc_guard_origin_valid("http://a b", NULL));
    CHECK(!svc_guard_origin_valid("http://x:99999", NULL));
    CHECK(!svc_guard_origin_valid("1http://x", NULL));
    CHECK(!svc_guard_origin_valid(NULL, NULL));
}

static void test_bind(void)
{
    static const char *const loop[] = {"127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]",
                                       "LocalHost"};
    for (size_t i = 0; i < G_N_ELEMENTS(loop); i++) {
        g_autoptr(GError) e = NULL;
        CHECK_MSG(svc_guard_bind_ok(loop[i], 0, &e), "%s: %s", loop[i], e ? e->message : "");
    }
    static const char *const open_[] = {"0.0.0.0", "::", "[::]", "192.168.1.5", "example.com",
                                        "::ffff:127.0.0.1"};
    for (size_t i = 0; i < G_N_ELEMENTS(open_); i++) {
        g_autoptr(GError) e = NULL;
        CHECK_MSG(!svc_guard_bind_ok(open_[i], 0, &e), "%s bound without a key", open_[i]);
        CHECK(e && strstr(e->message, "keys create"));
        CHECK(svc_guard_bind_ok(open_[i], 1, NULL));
    }
    static const char *const bad[] = {"", "127.1", "local host", "[::1", "::1%eth0", "a@b"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        CHECK_MSG(!svc_guard_bind_ok(bad[i], 5, NULL), "bad address \"%s\" accepted", bad[i]);
    CHECK(!svc_guard_bind_ok(NULL, 5, NULL));
    CHECK(svc_guard_host_name_valid("0.0.0.0", NULL));
    CHECK(svc_guard_host_name_valid("my-box.lan", NULL));
    CHECK(svc_guard_host_name_valid("[fe80::1]", NULL));
    CHECK(!svc_guard_host_name_valid("my box", NULL));
    CHECK(!svc_guard_host_name_valid("a:b", NULL));
}

static void test_model_names(void)
{
    static const case_t cases[] = {
        {"qwen3-30b-a3b", TRUE},
        {"qwen3:30b", TRUE},
        {"Qwen/Qwen3-30B-A3B-GGUF:Q4_K_M", TRUE},
        {"org/repo/file.gguf", TRUE},
        {"model..v2", TRUE},            /* dots inside a component are fine */
        {"..x", TRUE},
        {"\xe6\xa8\xa1\xe5\x9e\x8b", TRUE},
        {"", FALSE},
        {NULL, FALSE},
        {"..", FALSE},
        {".", FALSE},
        {"../etc/passwd", FALSE},
        {"a/../../b", FALSE},
        {"a/..", FALSE},
        {"a\\..\\b", FALSE},
        {"..\\windows", FALSE},
        {"/etc/passwd", FALSE},
        {"\\\\server\\share", FALSE},
        {"\\x", FALSE},
        {"C:\\models\\x.gguf", FALSE},
        {"c:x", FALSE},
        {"~/x", FALSE},
        {"a//b", FALSE},
        {"a/", FALSE},
        {"a/./b", FALSE},
        {"a/.. /b", FALSE},
        {"a/... /b", FALSE},
        {"name.", FALSE},
        {"name ", FALSE},
        {"a\nb", FALSE},
        {"a\tb", FALSE},
        {"a\x7f", FALSE},
        {"a\xc2\x85" "b", FALSE},       /* U+0085, a C1 control */
        {"\xff\xfe", FALSE},
        {"a\xc0\xaf..", FALSE},         /* overlong '/' */
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) e = NULL;
        gboolean ok = svc_guard_model_name_ok(cases[i].in, &e);
        CHECK_MSG(ok == cases[i].ok, "name \"%s\": got %d (%s)",
                  cases[i].in ? cases[i].in : "(null)", ok, e ? e->message : "no error");
        if (e)
            CHECK(g_error_matches(e, SVC_GUARD_ERROR, SVC_GUARD_ERROR_NAME));
    }
    char big[SVC_GUARD_MODEL_NAME_MAX + 2];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK(!svc_guard_model_name_ok(big, NULL));
    big[SVC_GUARD_MODEL_NAME_MAX] = '\0';
    CHECK(svc_guard_model_name_ok(big, NULL));
}

static void test_paths(void)
{
    g_autoptr(GError) e = NULL;
    g_autofree char *root = g_dir_make_tmp("guard-XXXXXX", &e);
    CHECK(root != NULL);
    if (!root)
        return;
    g_autofree char *models = g_build_filename(root, "models", NULL);
    g_autofree char *other = g_build_filename(root, "models-other", NULL);
    g_autofree char *sub = g_build_filename(models, "org--repo", NULL);
    CHECK(g_mkdir_with_parents(sub, 0700) == 0);
    CHECK(g_mkdir_with_parents(other, 0700) == 0);
    g_autofree char *file = g_build_filename(sub, "m.gguf", NULL);
    g_autofree char *secret = g_build_filename(other, "secret", NULL);
    CHECK(g_file_set_contents(file, "x", 1, NULL));
    CHECK(g_file_set_contents(secret, "x", 1, NULL));
    g_autofree char *link_out = g_build_filename(models, "escape", NULL);
    g_autofree char *link_in = g_build_filename(models, "alias.gguf", NULL);
    CHECK(symlink(other, link_out) == 0);
    CHECK(symlink(file, link_in) == 0);

    CHECK(svc_guard_path_inside(models, file, NULL));
    CHECK(svc_guard_path_inside(models, "org--repo/m.gguf", NULL));
    CHECK(svc_guard_path_inside(models, "org--repo/new.part", NULL)); /* not there yet */
    CHECK(svc_guard_path_inside(models, "alias.gguf", NULL));         /* link to inside */
    g_autofree char *r = svc_guard_resolve_inside(models, "alias.gguf", NULL);
    g_autofree char *rfile = realpath(file, NULL);
    CHECK(r && rfile && strcmp(r, rfile) == 0);

    static const char *const out[] = {"../models-other/secret", "escape/secret", "escape",
                                      "org--repo/../../models-other/secret", "..", ".",
                                      "org--repo/..", "missing/dir/file", "/etc/passwd",
                                      "escape/new-file", "org--repo/.."};
    for (size_t i = 0; i < G_N_ELEMENTS(out); i++) {
        g_autoptr(GError) pe = NULL;
        CHECK_MSG(!svc_guard_path_inside(models, out[i], &pe), "%s counted as inside", out[i]);
        CHECK(g_error_matches(pe, SVC_GUARD_ERROR, SVC_GUARD_ERROR_PATH));
    }
    /* A sibling whose name starts with the folder's is outside. */
    CHECK(!svc_guard_path_inside(models, secret, NULL));
    /* The folder itself is not inside itself; a missing folder fails. */
    CHECK(!svc_guard_path_inside(models, models, NULL));
    g_autofree char *gone = g_build_filename(root, "gone", NULL);
    CHECK(!svc_guard_path_inside(gone, "x", NULL));
    CHECK(!svc_guard_path_inside(NULL, "x", NULL));
    CHECK(!svc_guard_path_inside(models, "", NULL));
    /* A trailing slash on the folder changes nothing. */
    g_autofree char *slash = g_strconcat(models, "/", NULL);
    CHECK(svc_guard_path_inside(slash, "org--repo/m.gguf", NULL));
    CHECK(!svc_guard_path_inside(slash, "../models-other/secret", NULL));

    g_unlink(link_in);
    g_unlink(link_out);
    g_unlink(file);
    g_unlink(secret);
    g_rmdir(sub);
    g_rmdir(models);
    g_rmdir(other);
    g_rmdir(root);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    test_host();
    test_cors();
    test_bind();
    test_model_names();
    test_paths();
    TEST_DONE();
}

"""test_service_admin.py — the management API's settings and API-key routes
on a real moedesk-service: settings read with secrets redacted, a patch
validated as a whole (nothing saved on error), live changes applied at once
(CORS origins, allowed hosts, upstreams), restart-only changes reported;
keys created once, listed without secrets, used as callers, revoked.

usage: test_service_admin.py MOEDESK_SERVICE DEMO_MODEL.gguf [MOEDESK_CLI]
"""
import json
import os
import sys

from svc_harness import Checker, Service

exe, model = sys.argv[1], sys.argv[2]
t = Checker()
NAME = "moedesk-demo-random"

with Service(exe, model=model) as svc:
    cfg = os.path.join(svc.home, "config", "moedesk", "service.json")
    s = svc.json("GET", "/moedesk/v1/settings")
    t.eq(s["port"], 11435, "default port in the settings")

    # A bad patch: 400 naming the field, nothing written.
    st, _, body = svc.request("PATCH", "/moedesk/v1/settings",
                              {"cors_origins": ["https://ok.example"], "n_parallel": "four"})
    t.eq(st, 400, "bad patch refused")
    t.check("n_parallel" in json.loads(body)["error"]["message"], "error names the field")
    t.check(not os.path.exists(cfg), "nothing saved after a bad patch")
    st, _, _ = svc.request("GET", "/health", headers={"Origin": "https://ok.example"})
    t.eq(st, 403, "origin still refused after the bad patch")

    # A good patch: saved, applied at once, restart-only fields listed.
    secret = "sk-upstream-secret-123456"
    r = svc.json("PATCH", "/moedesk/v1/settings", {
        "cors_origins": ["https://ok.example"], "allowed_hosts": ["moedesk.lan"],
        "port": 12345,
        "upstreams": [{"name": "cloud", "base_url": "http://127.0.0.1:9/v1",
                       "api_key": secret, "models": ["cloud-*"]}]})
    t.check(os.path.exists(cfg), "settings saved")
    t.eq(r.get("restart_required"), ["port"], "port needs a restart")
    t.check(secret not in json.dumps(r), "the upstream key is not in the answer")
    t.eq(r["upstreams"][0].get("has_api_key"), True, "has_api_key flag")
    st, hdrs, _ = svc.request("GET", "/health", headers={"Origin": "https://ok.example"})
    t.eq(st, 200, "configured origin accepted at once")
    t.eq(hdrs.get("access-control-allow-origin"), "https://ok.example", "CORS header sent")
    st, hdrs, _ = svc.request("OPTIONS", "/v1/chat/completions",
                              headers={"Origin": "https://ok.example",
                                       "Access-Control-Request-Method": "POST"})
    t.eq(st, 204, "preflight answered")
    t.check("POST" in hdrs.get("access-control-allow-methods", ""), "preflight methods")
    st, _, _ = svc.request("GET", "/health", headers={"Host": "moedesk.lan:11435"})
    t.eq(st, 200, "configured Host name accepted at once")
    st, _, body = svc.request("POST", "/v1/chat/completions", {
        "model": "cloud-x", "messages": [{"role": "user", "content": "hi"}]})
    t.eq(st, 502, "the new upstream is used at once (and is unreachable)")
    t.check(secret.encode() not in body, "the upstream key is not in the error")
    s = svc.json("GET", "/moedesk/v1/settings")
    t.check(secret not in json.dumps(s), "GET never returns the upstream key")
    with open(cfg) as f:
        t.check(secret in f.read(), "the key is kept in the file")
    t.eq(oct(os.stat(cfg).st_mode & 0o777), "0o600", "settings file is private")
    # Sending back what GET answered keeps the key.
    s.pop("restart_required", None)
    svc.json("PATCH", "/moedesk/v1/settings", s)
    with open(cfg) as f:
        t.check(secret in f.read(), "round-tripped settings keep the key")

    # Idle unloading switched on while running takes effect (the service
    # started with it off).
    svc.json("PATCH", "/moedesk/v1/settings", {"idle_unload_s": 1})
    import time
    for _ in range(50):
        if svc.json("GET", "/health")["model"] is None:
            break
        time.sleep(0.1)
    t.eq(svc.json("GET", "/health")["model"], None, "idle unload set by PATCH unloads the model")
    svc.json("PATCH", "/moedesk/v1/settings", {"idle_unload_s": 0})

    # Keys.
    k = svc.json("POST", "/moedesk/v1/keys", {"name": "alice"}, expect=201)
    t.check(k["key"].startswith("mdk-") and len(k["key"]) == 47, "key format")
    st, _, _ = svc.request("POST", "/moedesk/v1/keys", {"name": "alice"})
    t.eq(st, 409, "duplicate name")
    st, _, _ = svc.request("POST", "/moedesk/v1/keys", {"name": "anonymous"})
    t.eq(st, 400, "reserved name")
    st, _, _ = svc.request("POST", "/moedesk/v1/keys", {"nom": "x"})
    t.eq(st, 400, "missing name")
    lst = svc.json("GET", "/moedesk/v1/keys")
    t.eq([x["name"] for x in lst["keys"]], ["alice"], "keys listed by name")
    t.check(k["key"] not in json.dumps(lst), "the list never shows a key")
    st, _, _ = svc.request("POST", "/v1/chat/completions",
                           {"model": NAME, "max_tokens": 2,
                            "messages": [{"role": "user", "content": "x"}]},
                           headers={"Authorization": "Bearer " + k["key"]})
    t.eq(st, 200, "request with the new key")
    st, _, _ = svc.request("DELETE", "/moedesk/v1/keys/alice")
    t.eq(st, 204, "revoke")
    st, _, _ = svc.request("DELETE", "/moedesk/v1/keys/bob")
    t.eq(st, 404, "revoke an unknown key")
    st, _, _ = svc.request("POST", "/v1/chat/completions",
                           {"model": NAME, "max_tokens": 2,
                            "messages": [{"role": "user", "content": "x"}]},
                           headers={"Authorization": "Bearer " + k["key"]})
    t.eq(st, 401, "revoked key refused")

rows = svc.usage_rows()
t.check(any(r["caller"] == "alice" for r in rows), "the key's name is the caller in usage rows")
t.done()

"""test_service_core.py — the checks every request to moedesk-service passes
before an endpoint sees it, against a real service on loopback: Host
(DNS rebinding), Origin (browser pages), unknown paths and methods, body
size, slow clients, and a clean stop on SIGTERM.

usage: test_service_core.py MOEDESK_SERVICE DEMO_MODEL.gguf
"""
import json
import os
import socket
import sys
import time

from svc_harness import Checker, Service

exe, model = sys.argv[1], sys.argv[2]
t = Checker()


def error_of(body):
    doc = json.loads(body)
    return doc.get("error", {})


with Service(exe, model=model, args=["--header-timeout", "1500"]) as svc:
    st, _, body = svc.request("GET", "/health")
    t.eq(st, 200, "GET /health")
    t.eq(json.loads(body)["status"], "ok", "/health status")

    # Host: loopback names and addresses pass, anything else is refused.
    for host in ["localhost", "localhost:%d" % svc.port, "127.0.0.1", "[::1]:%d" % svc.port,
                 "127.5.6.7"]:
        st, _, _ = svc.request("GET", "/health", headers={"Host": host})
        t.eq(st, 200, "Host %s accepted" % host)
    for host in ["evil.example", "localhost.evil.example", "127.0.0.1.nip.io",
                 "evil.example:%d" % svc.port, "localhost:abc", "[::1", "10.0.0.1", ""]:
        st, _, body = svc.request("GET", "/health", headers={"Host": host})
        # libsoup itself answers 400 to a Host it cannot parse.
        t.check(st in (400, 403) and (st == 403 or host in ("localhost:abc", "[::1")),
                "Host %r refused (got %d)" % (host, st))
        if st == 403:
            t.eq(error_of(body).get("code"), "host_not_allowed", "Host %r error code" % host)

    # A page in a browser sends an Origin: refused unless configured.
    st, hdrs, body = svc.request("GET", "/health", headers={"Origin": "https://evil.example"})
    t.eq(st, 403, "foreign Origin refused")
    t.check("access-control-allow-origin" not in hdrs, "no CORS header for a foreign Origin")

    # Unknown path and method: OpenAI-style errors.
    st, _, body = svc.request("GET", "/v1/nothing-here")
    t.eq(st, 404, "unknown path")
    e = error_of(body)
    t.check(set(e) >= {"message", "type", "param", "code"}, "404 has an OpenAI error object")
    st, _, body = svc.request("DELETE", "/health")
    t.eq(st, 405, "wrong method")

    # 10 MB body: 413 before the body is read; the service keeps serving.
    big = b"x" * (10 * 1024 * 1024 + 1)
    st, _, body = svc.request("POST", "/v1/chat/completions", body=big,
                              headers={"Content-Type": "application/json"})
    t.eq(st, 413, "body over 10 MiB")
    t.eq(error_of(body).get("code"), "request_too_large", "413 error code")
    st, _, _ = svc.request("GET", "/health")
    t.eq(st, 200, "serving after a big body")

    # Slow loris: headers that never finish are cut off after the timeout,
    # and other clients are served meanwhile.
    s = socket.create_connection(("127.0.0.1", svc.port), timeout=10)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    t0 = time.time()
    st, _, _ = svc.request("GET", "/health")
    t.eq(st, 200, "served while a slow client dawdles")
    s.settimeout(10)
    try:
        data = s.recv(100)
    except (ConnectionResetError, socket.timeout):
        data = b""
    waited = time.time() - t0
    t.eq(data, b"", "slow client's connection closed")
    t.check(1.0 <= waited < 8, "closed after the header timeout (%.1f s)" % waited)
    s.close()

    # Pipelined requests on one connection still work (keep-alive).
    raw = svc.raw(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                  b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    t.eq(raw.count(b"HTTP/1.1 200"), 2, "two pipelined requests answered")

    # One instance per user: a second service in the same home refuses to
    # start and names the running one.
    second = Service(exe, model=model, home=svc.home)
    try:
        second.start()
        second.stop()
        t.check(False, "a second instance must refuse to start")
    except RuntimeError as e:
        t.check("already running" in str(e) and str(svc.port) in str(e),
                "second instance names the running one")

rc = svc.proc.returncode

# Without --ctx the context per sequence is the memory planner's pick for
# the machine (MOEDESK_MACHINE describes a hypothetical one): 4 sequences
# of the demo model's full 4096 tokens fit in 400 MiB, only 2048 in 50 MiB.
import tempfile
for ram, want in ((400, 4096), (50, 2048)):
    mf = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump({"name": "test machine", "cpu": "x", "cpu_features": ["avx2"],
               "cores_logical": 2, "cores_physical": 2, "ram_total": "%d MiB" % ram,
               "ram_free": "%d MiB" % ram, "gpus": []}, mf)
    mf.close()
    with Service(exe, model=model, env={"MOEDESK_MACHINE": mf.name}) as planned:
        h = planned.json("GET", "/moedesk/v1/health")
        t.eq(h["model"]["n_ctx_per_seq"], want, "planned context on a %d MiB machine" % ram)
    os.unlink(mf.name)

t.eq(rc, 0, "clean exit on SIGTERM")
t.done()

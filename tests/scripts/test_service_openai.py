"""test_service_openai.py — the OpenAI and Anthropic endpoints of a real
moedesk-service (demo model, random weights) over HTTP on loopback:
shapes, streams, usage with cached tokens, batching equal to one-at-a-time,
JSON mode, bad input, a client that leaves mid-stream, API keys as callers,
and one usage row per request after a clean stop.

usage: test_service_openai.py MOEDESK_SERVICE DEMO_MODEL.gguf [MOEDESK_CLI]
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time

from svc_harness import Checker, Service, sse_events

exe, model = sys.argv[1], sys.argv[2]
cli = sys.argv[3] if len(sys.argv) > 3 else None
t = Checker()
NAME = "moedesk-demo-random"


def chat(svc, content, max_tokens=12, **kw):
    body = {"model": NAME, "messages": [{"role": "user", "content": content}],
            "max_tokens": max_tokens, "temperature": 0}
    body.update(kw)
    return svc.json("POST", "/v1/chat/completions", body)


metered = 0  # generation requests sent, each must have a usage row

with Service(exe, model=model, args=["--parallel", "4", "--ctx", "512"]) as svc:
    # -- models
    doc = svc.json("GET", "/v1/models")
    t.eq(doc["object"], "list", "/v1/models object")
    t.check(any(m["id"] == NAME for m in doc["data"]), "/v1/models lists the demo model")

    # -- non-stream chat
    r = chat(svc, "Hello there", max_tokens=8)
    metered += 1
    t.eq(r["object"], "chat.completion", "chat object")
    ch = r["choices"][0]
    t.eq(ch["message"]["role"], "assistant", "assistant role")
    t.check(isinstance(ch["message"]["content"], str), "content is a string")
    t.check(ch["finish_reason"] in ("stop", "length"), "finish_reason")
    u = r["usage"]
    t.check(0 < u["completion_tokens"] <= 8, "completion tokens within max_tokens")
    t.eq(u["total_tokens"], u["prompt_tokens"] + u["completion_tokens"], "total tokens")
    if ch["finish_reason"] == "length":
        t.eq(u["completion_tokens"], 8, "length means max_tokens generated")

    # -- greedy is deterministic, and the repeated prompt is served from the cache
    r2 = chat(svc, "Hello there", max_tokens=8)
    metered += 1
    t.eq(r2["choices"][0]["message"]["content"], ch["message"]["content"], "greedy repeat")
    t.check(r2["usage"]["prompt_tokens_details"]["cached_tokens"] > 0,
            "prefix reuse reported as cached_tokens (%r)" % r2["usage"])

    # -- stream with usage
    st, hdrs, body = svc.request("POST", "/v1/chat/completions", {
        "model": NAME, "messages": [{"role": "user", "content": "Hello there"}],
        "max_tokens": 8, "temperature": 0, "stream": True,
        "stream_options": {"include_usage": True}})
    metered += 1
    t.eq(st, 200, "stream status")
    t.check(hdrs.get("content-type", "").startswith("text/event-stream"), "SSE content type")
    ev = sse_events(body)
    t.eq(ev[-1][1], "[DONE]", "stream ends with [DONE]")
    chunks = [json.loads(d) for _, d in ev[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    t.eq(text, ch["message"]["content"], "streamed text equals the whole answer")
    t.eq(chunks[0]["choices"][0]["delta"].get("role"), "assistant", "first delta has the role")
    fins = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    t.eq(fins[-1], ch["finish_reason"], "stream finish_reason")
    t.check(all(f is None for f in fins[:-1]), "finish_reason only on the last chunk")
    t.eq(chunks[-1]["choices"], [], "usage chunk has no choices")
    t.eq(chunks[-1]["usage"]["completion_tokens"], u["completion_tokens"], "usage chunk tokens")

    # -- stream without usage: no usage chunk
    st, _, body = svc.request("POST", "/v1/chat/completions", {
        "model": NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3,
        "stream": True})
    metered += 1
    t.check(all("usage" not in json.loads(d) for _, d in sse_events(body)[:-1]),
            "no usage chunk unless asked")

    # -- curl, as scripts use it: whole and streamed (-N)
    url = "http://127.0.0.1:%d/v1/chat/completions" % svc.port
    body = json.dumps({"model": NAME, "max_tokens": 4, "temperature": 0,
                       "messages": [{"role": "user", "content": "Hello there"}]})
    out = subprocess.run(["curl", "-sS", "--fail-with-body", url, "-H",
                          "Content-Type: application/json", "-d", body],
                         capture_output=True, text=True, timeout=60)
    metered += 1
    t.eq(out.returncode, 0, "curl chat (%s)" % out.stderr.strip())
    if out.returncode == 0:
        t.eq(json.loads(out.stdout)["object"], "chat.completion", "curl chat object")
    out = subprocess.run(["curl", "-sSN", url, "-H", "Content-Type: application/json", "-d",
                          body[:-1] + ', "stream": true}'],
                         capture_output=True, text=True, timeout=60)
    metered += 1
    t.check(out.stdout.rstrip().endswith("data: [DONE]"), "curl -N stream ends with [DONE]")
    out = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", url, "-H",
                          "Host: evil.example", "-d", body], capture_output=True, text=True,
                         timeout=60)
    metered += 1
    t.eq(out.stdout, "403", "curl with a foreign Host header")

    # -- completions (plain prompt), echo, stop strings
    r = svc.json("POST", "/v1/completions", {"model": NAME, "prompt": "Once upon a time",
                                             "max_tokens": 6, "temperature": 0})
    metered += 1
    t.eq(r["object"], "text_completion", "completions object")
    t.check(isinstance(r["choices"][0]["text"], str), "completion text")

    # -- echo: the prompt leads the text, whole and streamed alike
    e = svc.json("POST", "/v1/completions", {"model": NAME, "prompt": "Once upon a time",
                                             "max_tokens": 6, "temperature": 0, "echo": True})
    metered += 1
    t.eq(e["choices"][0]["text"], "Once upon a time" + r["choices"][0]["text"], "echo (whole)")
    st, _, body = svc.request("POST", "/v1/completions", {
        "model": NAME, "prompt": "Once upon a time", "max_tokens": 6, "temperature": 0,
        "echo": True, "stream": True})
    metered += 1
    streamed = "".join(json.loads(d)["choices"][0]["text"] for _, d in sse_events(body)[:-1]
                       if json.loads(d).get("choices"))
    t.eq(streamed, e["choices"][0]["text"], "echo (streamed) equals echo (whole)")

    # -- 16 concurrent greedy requests == the same requests one at a time
    prompts = ["Request %d: %s" % (i, "x" * (i * 3)) for i in range(16)]
    alone = []
    for p in prompts:
        alone.append(chat(svc, p, max_tokens=10 + (prompts.index(p) % 5))["choices"][0]
                     ["message"]["content"])
        metered += 1
    together = [None] * 16

    def worker(i):
        together[i] = chat(svc, prompts[i], max_tokens=10 + (i % 5))["choices"][0]["message"][
            "content"]

    ths = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    metered += 16
    t.eq(together, alone, "16 concurrent greedy requests equal one-at-a-time")

    # -- JSON mode
    r = chat(svc, "Give me JSON", max_tokens=60, response_format={"type": "json_object"})
    metered += 1
    content = r["choices"][0]["message"]["content"]
    try:
        obj = json.loads(content)
        t.check(isinstance(obj, dict), "JSON mode gives an object")
    except ValueError:
        t.check(r["choices"][0]["finish_reason"] == "length",
                "JSON mode: invalid JSON only when cut by max_tokens (%r)" % content)

    # -- Anthropic messages, whole and streamed
    a = svc.json("POST", "/v1/messages", {"model": NAME, "max_tokens": 8,
                                          "system": "Be brief.",
                                          "messages": [{"role": "user", "content": "Hello"}]})
    metered += 1
    t.eq(a["type"], "message", "anthropic type")
    t.eq(a["content"][0]["type"], "text", "anthropic text block")
    t.check(a["stop_reason"] in ("end_turn", "max_tokens", "stop_sequence"), "stop_reason")
    t.check(a["usage"]["output_tokens"] > 0, "anthropic output tokens")
    st, hdrs, body = svc.request("POST", "/v1/messages", {
        "model": NAME, "max_tokens": 8, "stream": True, "temperature": 0,
        "messages": [{"role": "user", "content": "Hello"}]})
    metered += 1
    names = [e for e, _ in sse_events(body)]
    t.eq(names[0], "message_start", "anthropic stream starts with message_start")
    t.eq(names[-1], "message_stop", "anthropic stream ends with message_stop")
    t.check("message_delta" in names, "anthropic message_delta")

    # -- bad input: the right 4xx with an OpenAI error object; service keeps serving
    bad = [
        ("POST", "/v1/chat/completions", b"{not json", 400, None),
        ("POST", "/v1/chat/completions",
         {"model": NAME, "messages": [{"role": "user", "content": "x"}], "temperature": "hot"},
         400, "temperature"),
        ("POST", "/v1/chat/completions", {"model": "no-such-model",
                                          "messages": [{"role": "user", "content": "x"}]},
         404, "model"),
        ("POST", "/v1/chat/completions", {"model": NAME, "messages": []}, 400, "messages"),
        ("POST", "/v1/chat/completions", {"model": "../../etc/passwd",
                                          "messages": [{"role": "user", "content": "x"}]},
         None, "model"),
        ("POST", "/v1/chat/completions", {"model": NAME, "messages": [
            {"role": "user", "content": "word " * 700}]}, 400, "messages"),
    ]
    for method, path, b, want, param in bad:
        st, _, body = svc.request(method, path, b)
        metered += 1
        if want is None:
            t.eq(st, 400, "%s -> 400" % str(b)[:40])
        else:
            t.eq(st, want, "bad request %s" % str(b)[:60])
        try:
            e = json.loads(body)["error"]
            t.check(set(e) >= {"message", "type", "param", "code"}, "error object fields")
            if param:
                t.eq(e["param"], param, "error param for %s" % str(b)[:40])
        except (ValueError, KeyError, TypeError):
            t.check(False, "error body is an OpenAI error: %r" % body[:200])
    st, _, body = svc.request("POST", "/v1/chat/completions", {
        "model": NAME, "messages": [{"role": "user", "content": "word " * 700}]})
    metered += 1
    t.eq(json.loads(body)["error"]["code"], "context_length_exceeded", "over the context")

    # -- a client that leaves mid-stream is cancelled; the service keeps serving
    s = socket.create_connection(("127.0.0.1", svc.port), timeout=30)
    req = json.dumps({"model": NAME, "messages": [{"role": "user", "content": "Long story"}],
                      "max_tokens": 400, "stream": True, "temperature": 0}).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(req) + req)
    got = s.recv(4096)
    t.check(b"200" in got.split(b"\r\n")[0], "stream started before the client left")
    s.close()
    metered += 1
    time.sleep(1.0)
    h = svc.json("GET", "/health")
    t.eq(h.get("slots_processing"), 0, "the abandoned stream's slot is free again")

    # -- API keys: the caller in usage rows is the key's name; a revoked key is refused
    if cli:
        env = svc.env()
        key = subprocess.run([cli, "keys", "create", "editor"], env=env, capture_output=True,
                             text=True).stdout.strip()
        t.check(key.startswith("mdk-"), "key created (%r)" % key[:8])
        chat(svc, "With a key", max_tokens=2, **{})
        metered += 1
        st, _, _ = svc.request("POST", "/v1/chat/completions",
                               {"model": NAME, "max_tokens": 2,
                                "messages": [{"role": "user", "content": "keyed"}]},
                               headers={"Authorization": "Bearer " + key})
        metered += 1
        t.eq(st, 200, "request with a valid key")
        subprocess.run([cli, "keys", "revoke", "editor"], env=env, check=True,
                       capture_output=True)
        time.sleep(1.2)
        st, _, body = svc.request("POST", "/v1/chat/completions",
                                  {"model": NAME, "max_tokens": 2,
                                   "messages": [{"role": "user", "content": "revoked"}]},
                                  headers={"Authorization": "Bearer " + key})
        metered += 1
        t.eq(st, 401, "revoked key refused")
        st, _, _ = svc.request("POST", "/v1/chat/completions",
                               {"model": NAME, "max_tokens": 2,
                                "messages": [{"role": "user", "content": "dummy key"}]},
                               headers={"Authorization": "Bearer sk-no-key-required"})
        metered += 1
        t.eq(st, 200, "a client's placeholder key over loopback is anonymous")

    # -- /metrics counts what was served
    st, hdrs, body = svc.request("GET", "/metrics")
    t.eq(st, 200, "/metrics")
    t.check(b"moedesk_requests_total" in body, "/metrics has request counters")

rows = svc.usage_rows()
t.eq(len(rows), metered, "one usage row per generation request after a clean stop")
if rows:
    ok = [r for r in rows if r["http_status"] == 200 and r["endpoint"] == "/v1/chat/completions"]
    t.check(all(r["route"] == "local" and r["backend"] == "cpu" for r in ok), "route and backend")
    t.check(all(r["completion_tokens"] > 0 for r in ok), "completion tokens recorded")
    t.check(any(r["cached_tokens"] > 0 for r in ok), "cached tokens recorded")
    t.check(any(r["error_kind"] == "client_disconnected" for r in rows),
            "the abandoned stream is recorded as client_disconnected")
    if cli:
        t.check(any(r["caller"] == "editor" for r in rows), "caller = API key name")
    t.check(all(r["ttft_ms"] >= 0 for r in ok), "time to first token recorded")
t.done()

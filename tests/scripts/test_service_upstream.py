"""test_service_upstream.py — hybrid deployment end to end: a second
moedesk-service is the upstream ("cluster") of the first, configured in the
first one's service.json (issue #5, "Upstreams"):

  - chat whole and streamed through the first service give the same greedy
    text as asking the second directly; the explicit "cluster/remote-demo"
    prefix works; the usage chunk is passed on only when asked for;
  - a message containing U+001F is served locally and forwarded;
  - the first service's usage rows have route "cluster" and the upstream's
    token counts; the second records the upstream key's name as caller;
  - the upstream's key never appears in the first service's log or answers;
    a wrong key is a 502 upstream_auth, an unreachable upstream a 502
    upstream_unreachable, both as OpenAI errors (streamed requests too);
  - with --parallel 1 --queue 1 a fallback upstream takes what the local
    queue cannot (route = its name) instead of 429s;
  - with data_sensitivity "high" nothing is forwarded: no routing (404), no
    fallback (429), and the upstream sees no request.

usage: test_service_upstream.py MOEDESK_SERVICE DEMO_MODEL.gguf MOEDESK_CLI
"""
import atexit
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading

from svc_harness import Checker, Service, sse_events

exe, model, cli = sys.argv[1], sys.argv[2], sys.argv[3]
t = Checker()
LOCAL = "moedesk-demo-random"


def home_with_settings(settings):
    home = tempfile.mkdtemp(prefix="moedesk-svc-")
    d = os.path.join(home, "config", "moedesk")
    os.makedirs(d)
    with open(os.path.join(d, "service.json"), "w") as f:
        json.dump(settings, f)
    return home


def chat_body(model_name, content, max_tokens=12, stream=False, usage=False, bias=None):
    b = {"model": model_name, "messages": [{"role": "user", "content": content}],
         "max_tokens": max_tokens, "temperature": 0}
    if stream:
        b["stream"] = True
        if usage:
            b["stream_options"] = {"include_usage": True}
    if bias:
        b["logit_bias"] = bias
    return b


def stream_text(data):
    ev = sse_events(data)
    chunks = [json.loads(d) for _, d in ev if d != "[DONE]"]
    text = "".join(c["choices"][0]["delta"].get("content") or ""
                   for c in chunks if c.get("choices"))
    usage = [c["usage"] for c in chunks if c.get("usage")]
    return text, usage, ev[-1][1] if ev else None


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


seen = []  # every answer body and header block from the first services


def ask(svc, b, path="/v1/chat/completions", ua="upstream-test"):
    st, hdrs, data = svc.request("POST", path, b, headers={"User-Agent": ua})
    seen.append(data)
    seen.append(json.dumps(hdrs).encode())
    return st, hdrs, data


# The upstream: the demo model under the name remote-demo, with an API key
# made for the first service (its name is the caller there).
remote = Service(exe, model=model, args=["--name", "remote-demo", "--parallel", "4"])
key = subprocess.run([cli, "keys", "create", "cluster"], env=remote.env(), capture_output=True,
                     text=True, check=True).stdout.strip()
t.check(key.startswith("mdk-"), "upstream key created")
remote.start()
# A second upstream for the fallback: the demo model under its own name, as
# a fallback gets the local model's name.
spill = Service(exe, model=model, args=["--parallel", "4"]).start()


@atexit.register
def _kill_upstreams():
    """A failed check that raises must not leave the upstreams running."""
    for s in (remote, spill):
        if s.proc and s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()
dead_port = free_port()

upstreams = [
    {"name": "cluster", "base_url": "http://127.0.0.1:%d/v1" % remote.port, "api_key": key,
     "models": ["remote-*"]},
    {"name": "badkey", "base_url": "http://127.0.0.1:%d/v1" % remote.port,
     "api_key": "mdk-" + "A" * 43, "models": ["badkey-*"]},
    {"name": "deadend", "base_url": "http://127.0.0.1:%d/v1" % dead_port, "api_key": "sk-dead",
     "models": ["dead-*"]},
]

# ---- routing by model name -----------------------------------------------------
with Service(exe, model=model, home=home_with_settings({"upstreams": upstreams})) as svc:
    q = "Tell me about the upstream"
    direct = remote.json("POST", "/v1/chat/completions", chat_body("remote-demo", q))
    st, _, data = ask(svc, chat_body("remote-demo", q))
    t.eq(st, 200, "forwarded chat status")
    fwd = json.loads(data)
    t.eq(fwd["choices"][0]["message"]["content"], direct["choices"][0]["message"]["content"],
         "forwarded chat = asking the upstream directly (greedy)")
    t.eq(fwd["usage"]["completion_tokens"], direct["usage"]["completion_tokens"],
         "forwarded usage")
    usage_whole = fwd["usage"]

    st, hdrs, data = ask(svc, chat_body("remote-demo", q, stream=True))
    t.eq(st, 200, "forwarded stream status")
    t.check(hdrs.get("content-type", "").startswith("text/event-stream"), "forwarded SSE")
    text, usage, last = stream_text(data)
    t.eq(text, direct["choices"][0]["message"]["content"], "forwarded stream text")
    t.eq(last, "[DONE]", "forwarded stream ends with [DONE]")
    t.eq(usage, [], "no usage chunk unless the client asked")
    st, _, data = ask(svc, chat_body("remote-demo", q, stream=True, usage=True))
    text, usage, _ = stream_text(data)
    t.eq(len(usage), 1, "usage chunk passed on when asked")
    t.eq(text, direct["choices"][0]["message"]["content"], "forwarded stream text (usage)")

    st, _, data = ask(svc, chat_body("cluster/remote-demo", q))
    t.eq(st, 200, "explicit upstream prefix")
    t.eq(json.loads(data)["choices"][0]["message"]["content"],
         direct["choices"][0]["message"]["content"], "explicit prefix text")

    st, _, data = ask(svc, {"model": "remote-demo", "prompt": "Once upon", "max_tokens": 5,
                            "temperature": 0}, path="/v1/completions")
    t.eq(st, 200, "forwarded /v1/completions")
    t.eq(json.loads(data)["object"], "text_completion", "forwarded completion object")

    # The local model is still served locally.
    st, _, data = ask(svc, chat_body(LOCAL, q))
    t.eq(st, 200, "local model still local")

    # U+001F (which json-glib 1.6 writes raw) in a message: the chat
    # template's input here and the forwarded body there stay JSON.
    for name in (LOCAL, "remote-demo"):
        st, _, data = ask(svc, chat_body(name, "unit\x1fseparator"), ua="upstream-test-us")
        t.eq(st, 200, "%s: a message with U+001F (%r)" % (name, data[:120]))

    # Errors: wrong key, unreachable upstream; streamed requests alike.
    for name, code in [("badkey/remote-demo", "upstream_auth"), ("dead-model", "upstream_unreachable")]:
        for stream in (False, True):
            st, hdrs, data = ask(svc, chat_body(name, q, stream=stream))
            t.eq(st, 502, "%s%s: 502" % (name, " stream" if stream else ""))
            try:
                e = json.loads(data)["error"]
                t.check(set(e) >= {"message", "type", "param", "code"}, "%s: OpenAI error" % name)
                t.eq(e["code"], code, "%s: error code" % name)
            except (ValueError, KeyError, TypeError):
                t.check(False, "%s: error body %r" % (name, data[:200]))
    st, _, _ = svc.request("GET", "/health")
    t.eq(st, 200, "still serving after upstream errors")

log = "".join(svc.stderr_lines)
rows = svc.usage_rows()
fwd_rows = [r for r in rows if r["route"] == "cluster"]
t.eq(len(fwd_rows), 6, "rows routed to cluster")
t.check(all(r["http_status"] == 200 for r in fwd_rows), "cluster rows are 200")
w = [r for r in fwd_rows if r["model"] == "remote-demo" and r["endpoint"] == "/v1/chat/completions"
     and r["client"] == "upstream-test"]
t.check(all(r["prompt_tokens"] == usage_whole["prompt_tokens"] and
            r["completion_tokens"] == usage_whole["completion_tokens"] for r in w),
        "cluster rows carry the upstream's token counts (%r)"
        % [(r["prompt_tokens"], r["completion_tokens"]) for r in w])
t.eq(len(w), 3, "rows of the forwarded chats (whole, stream, stream with usage)")
t.check(all(r["ttft_ms"] is not None and r["ttft_ms"] >= 0 for r in w[1:]), "streams have a TTFT")
errs = {(r["route"], r["http_status"], r["error_kind"]) for r in rows if r["http_status"] == 502}
t.eq(errs, {("badkey", 502, "upstream_auth"), ("deadend", 502, "upstream_unreachable")},
     "error rows: route and error kind")
t.eq(len(rows), 12, "one row per request")
# The key: never logged, never returned.
for secret in (key, "A" * 43, "sk-dead"):
    t.check(secret not in log, "upstream key not in the log")
    t.check(not any(secret.encode() in d for d in seen), "upstream key not in any answer")

# ---- fallback when the local queue is full --------------------------------------
bias = {tok: -100 for tok in subprocess.run(
    [cli, "tokenize", "-m", model, "--parse-special"], input="<|im_end|><|endoftext|>",
    capture_output=True, text=True, check=True).stdout.split()}
fallback_cfg = {"upstreams": [
    {"name": "spill", "base_url": "http://127.0.0.1:%d/v1" % spill.port, "fallback": True}]}


def burst(svc, n, max_tokens):
    res = [None] * n

    def one(i):
        res[i] = ask(svc, chat_body(LOCAL, "Burst %d" % i, max_tokens=max_tokens, bias=bias,
                                    stream=i % 2 == 1))
    ths = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    return res


with Service(exe, model=model, args=["--parallel", "1", "--queue", "1"],
             home=home_with_settings(fallback_cfg)) as svc:
    res = burst(svc, 8, 400)
statuses = sorted(r[0] for r in res)
t.eq(statuses, [200] * 8, "fallback: every request of the burst served, no 429")
rows = svc.usage_rows()
routes = sorted(r["route"] for r in rows)
print("fallback: routes %r" % routes)
t.check(routes.count("spill") >= 1, "fallback: some requests went to the fallback")
t.check(routes.count("local") >= 1, "fallback: some were served locally")
t.check(all(r["completion_tokens"] == 400 for r in rows),
        "fallback: full answers both ways (%r)" % [r["completion_tokens"] for r in rows])

# ---- data_sensitivity high: nothing leaves the machine --------------------------
high_cfg = {"upstreams": upstreams + fallback_cfg["upstreams"], "data_sensitivity": "high"}
with Service(exe, model=model, args=["--parallel", "1", "--queue", "1"],
             home=home_with_settings(high_cfg)) as svc:
    st, _, data = ask(svc, chat_body("remote-demo", "Secret"))
    t.eq(st, 404, "high sensitivity: an upstream model is not forwarded")
    st, _, data = ask(svc, chat_body("cluster/remote-demo", "Secret"))
    t.check(st in (400, 404), "high sensitivity: explicit prefix not forwarded (%d)" % st)
    res = burst(svc, 6, 400)
    codes = sorted(r[0] for r in res)
    t.check(429 in codes and set(codes) <= {200, 429},
            "high sensitivity: a full queue gives 429, no fallback (%r)" % codes)
rows = svc.usage_rows()
t.check(all(r["route"] == "local" for r in rows), "high sensitivity: every row is local")

for s in (remote, spill):
    t.eq(s.stop(), 0, "upstream service exits 0")
t.eq(len(spill.usage_rows()), routes.count("spill"),
     "the fallback upstream saw only the fallback requests")
rr = remote.usage_rows()
t.check(len(rr) >= 6 and all(r["caller"] in ("cluster", "anonymous") for r in rr),
        "upstream rows: callers")
t.eq(sum(1 for r in rr if r["caller"] == "cluster"), 6,
     "upstream saw the forwarded requests with the key's name as caller")
t.eq(sum(1 for r in rr if r["http_status"] == 401), 2, "upstream refused the wrong key")
t.done()

"""test_service_ollama.py — the Ollama-compatible endpoints of a real
moedesk-service at the HTTP level (the official client is exercised by
tests/node/service-ollama.mjs): NDJSON framing, Ollama's error shape and
statuses, load and unload requests, /api/show on models with and without
FIM tokens (a loaded one and an installed one read from its header), the
context checks (options.num_ctx and the loaded context: refused, never
truncated), metering, and /api/pull streaming progress from the fixture
hub into the library, after which the pulled model is listed and served.

usage: test_service_ollama.py MOEDESK_SERVICE DEMO_MODEL.gguf FIM_MODEL.gguf [FIXTURE_HUB]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from svc_harness import Checker, Service

exe, demo, fim = sys.argv[1], sys.argv[2], sys.argv[3]
hub_exe = sys.argv[4] if len(sys.argv) > 4 else None
t = Checker()
DEMO = os.path.basename(demo)[:-5]


def ndjson(data):
    return [json.loads(line) for line in data.decode().split("\n") if line.strip()]


def ollama_error(status, body, want, what):
    t.eq(status, want, what + ": status")
    try:
        doc = json.loads(body)
    except ValueError:
        t.check(False, what + ": JSON error body, got %r" % body[:200])
        return ""
    t.check(isinstance(doc.get("error"), str) and doc["error"],
            what + ": Ollama error {\"error\": string}, got %r" % doc)
    return doc.get("error") or ""


with Service(exe, model=demo) as svc:
    v = svc.json("GET", "/api/version")
    t.check(isinstance(v.get("version"), str) and
            tuple(int(x) for x in v["version"].split(".")) >= (0, 6, 4),
            "/api/version is an Ollama version clients accept: %r" % v)

    tags = svc.json("GET", "/api/tags")["models"]
    t.eq([m["name"] for m in tags], [DEMO + ":latest"], "/api/tags")
    # The demo model is written in Q8_0 (general.file_type 7).
    t.eq(tags[0]["details"]["quantization_level"], "Q8_0", "demo model quantisation")

    show = svc.json("POST", "/api/show", {"model": DEMO})
    t.eq(show.get("capabilities"), ["completion"], "demo capabilities (no FIM, no tools)")
    t.check(".Suffix" not in show.get("template", "x.Suffix"), "no .Suffix without FIM tokens")
    t.check(show["model_info"].get("qwen3moe.context_length", 0) > 0, "context length")
    n_ctx = show["model_info"]["qwen3moe.context_length"]
    verbose = svc.json("POST", "/api/show", {"model": DEMO + ":latest", "verbose": True})
    t.check(len(verbose["model_info"]["tokenizer.ggml.tokens"]) > 256, "verbose shows the vocabulary")
    st, _, body = svc.request("POST", "/api/show", {"model": "nope"})
    ollama_error(st, body, 404, "show unknown model")
    st, _, body = svc.request("POST", "/api/show", {})
    ollama_error(st, body, 400, "show without a model")

    # Streams: NDJSON, one object per line, the last one done with counts.
    req = {"model": DEMO, "messages": [{"role": "user", "content": "hi"}],
           "options": {"temperature": 0, "num_predict": 6}}
    st, hdrs, data = svc.request("POST", "/api/chat", req)
    t.eq(st, 200, "chat stream status")
    t.check(hdrs.get("content-type", "").startswith("application/x-ndjson"), "NDJSON content type")
    lines = ndjson(data)
    t.check(len(lines) >= 2 and all(not x["done"] for x in lines[:-1]) and lines[-1]["done"],
            "chunks then one done object")
    final = lines[-1] if lines else {}
    for k in ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration",
              "eval_count", "eval_duration"):
        t.check(isinstance(final.get(k), int) and final[k] >= 0, "final has %s" % k)
    t.eq(final.get("message", {}).get("content"), "", "final chunk carries no text")
    t.check(final.get("done_reason") in ("stop", "length"), "done_reason")
    whole = svc.json("POST", "/api/chat", dict(req, stream=False))
    t.eq(whole["message"]["content"], "".join(x["message"]["content"] for x in lines),
         "whole = streamed")
    t.eq(whole["model"], DEMO, "the model name is echoed")

    gen = svc.json("POST", "/api/generate", {"model": DEMO, "prompt": "hi", "system": "Be brief.",
                                             "stream": False, "options": {"num_predict": 3}})
    raw = svc.json("POST", "/api/generate", {"model": DEMO + ":latest", "prompt": "hi",
                                             "raw": True, "stream": False,
                                             "options": {"num_predict": 3}})
    t.eq(raw["model"], DEMO + ":latest", "the name is echoed as sent")
    t.check(gen["prompt_eval_count"] > raw["prompt_eval_count"] + len("Be brief."),
            "non-raw generate goes through the chat template with the system prompt")
    t.check(raw["prompt_eval_count"] <= 3, "raw generate is the prompt as is")
    t.check(raw["eval_count"] <= 3 and isinstance(raw["response"], str), "num_predict honoured")

    # Loading and unloading with an empty prompt or message list.
    doc = svc.json("POST", "/api/generate", {"model": DEMO})
    t.eq((doc.get("done"), doc.get("done_reason")), (True, "load"), "empty generate loads")
    doc = svc.json("POST", "/api/chat", {"model": DEMO, "messages": [], "stream": False})
    t.eq((doc.get("done_reason"), doc["message"]["content"]), ("load", ""), "empty chat loads")
    t.eq(len(svc.json("GET", "/api/ps")["models"]), 1, "loaded")
    doc = svc.json("POST", "/api/generate", {"model": DEMO, "keep_alive": 0, "stream": False})
    t.eq(doc.get("done_reason"), "unload", "keep_alive 0 unloads")
    t.eq(svc.json("GET", "/api/ps")["models"], [], "nothing loaded after unload")
    svc.json("POST", "/api/generate", {"model": DEMO, "stream": False})
    t.eq(len(svc.json("GET", "/api/ps")["models"]), 1, "loaded again on request")

    # Errors: Ollama's shape and status, before any stream begins.
    long_text = "x" * (n_ctx + 10)
    cases = [
        ({"model": DEMO, "messages": [{"role": "user", "content": "hi " * 20}],
          "options": {"num_ctx": 16}}, 400, "num_ctx", "prompt over options.num_ctx"),
        ({"model": DEMO, "messages": [{"role": "user", "content": long_text}]}, 400, "context",
         "prompt over the loaded context"),
        ({"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}, 404,
         "no-such-model", "unknown model"),
        ({"model": DEMO, "messages": [{"role": "user", "content": "hi", "images": ["AAAA"]}]},
         400, "image", "images"),
        ({"model": DEMO, "messages": [{"role": "user", "content": "hi"}],
          "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, 400,
         "tools", "tools on a model whose template has none"),
        ({"model": DEMO, "messages": "hi"}, 400, "messages", "messages not an array"),
        ({"model": DEMO, "messages": [{"role": "user", "content": "hi"}],
          "options": {"temperature": "warm"}}, 400, "temperature", "bad option type"),
    ]
    for body, status, word, what in cases:
        for stream in (True, False):
            st, _, data = svc.request("POST", "/api/chat", dict(body, stream=stream))
            msg = ollama_error(st, data, status, "%s (stream %s)" % (what, stream))
            t.check(word in msg, "%s: message mentions %r: %r" % (what, word, msg))
    st, _, data = svc.request("POST", "/api/generate", {"model": DEMO, "prompt": "def f(",
                                                        "suffix": "):", "stream": False})
    msg = ollama_error(st, data, 400, "suffix on a model without FIM tokens")
    t.check("insert" in msg and "FIM" in msg, "the error says why: %r" % msg)
    st, _, data = svc.request("POST", "/api/generate", b"{\"model\":", {"Content-Type":
                                                                         "application/json"})
    ollama_error(st, data, 400, "malformed JSON")
    for path in ("/api/embed", "/api/embeddings"):
        st, _, data = svc.request("POST", path, {"model": DEMO, "input": "x"})
        msg = ollama_error(st, data, 501, path)
        t.check("embedding" in msg, "%s says embeddings are not supported" % path)
    st, _, _ = svc.request("GET", "/health")
    t.eq(st, 200, "still serving")

rows = svc.usage_rows()
chat_rows = [r for r in rows if r["endpoint"] == "/api/chat"]
t.check(any(r["http_status"] == 200 and r["completion_tokens"] >= 1 for r in chat_rows),
        "/api/chat rows with tokens")
t.check(any(r["http_status"] == 400 and r["error_kind"] for r in chat_rows),
        "refused chats are metered with an error kind")
t.check(any(r["endpoint"] == "/api/generate" for r in rows), "/api/generate rows")
t.check(all(r["model"] == DEMO for r in rows if r["http_status"] == 200),
        "usage rows name the model without the :latest tag")
t.check(not any(r["endpoint"] in ("/api/tags", "/api/show", "/api/ps") for r in rows),
        "model listing is not metered")

# /api/pull from the fixture hub, then the pulled model is listed and used.
if hub_exe:
    root = tempfile.mkdtemp(prefix="moedesk-ollama-hub-")
    repo_dir = os.path.join(root, "test-org", "fim-GGUF")
    os.makedirs(repo_dir)
    shutil.copy(fim, os.path.join(repo_dir, "fim-F32.gguf"))
    hub = subprocess.Popen([hub_exe, "--root", root], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    port = int(hub.stdout.readline().split()[0])
    env = {"HF_ENDPOINT": "http://127.0.0.1:%d" % port, "no_proxy": "127.0.0.1,localhost",
           "MOEDESK_RETRY_BASE_MS": "50", "HF_TOKEN": ""}
    try:
        with Service(exe, model=demo, env=env) as svc:
            st, hdrs, data = svc.request("POST", "/api/pull", {"model": "hf.co/test-org/fim-GGUF"})
            t.eq(st, 200, "pull status")
            lines = ndjson(data)
            statuses = [x.get("status", "") for x in lines]
            t.eq(statuses[:1], ["pulling manifest"], "pull starts with the manifest")
            t.eq(statuses[-1:], ["success"], "pull ends with success: %r" % lines[-3:])
            prog = [x for x in lines if x.get("status", "").startswith("pulling fim-F32.gguf")]
            t.check(prog and prog[-1].get("completed") == prog[-1].get("total") ==
                    os.path.getsize(fim), "file progress reaches its size: %r" % prog[-1:])
            names = [m["name"] for m in svc.json("GET", "/api/tags")["models"]]
            t.check("test-org/fim-GGUF:latest" in names, "pulled model listed: %r" % names)
            show = svc.json("POST", "/api/show", {"model": "test-org/fim-GGUF"})
            t.check("insert" in show.get("capabilities", []) and ".Suffix" in show["template"],
                    "show on an installed, unloaded model reads its header")
            t.eq(svc.json("GET", "/api/ps")["models"][0]["name"], DEMO + ":latest",
                 "show did not switch models")
            doc = svc.json("POST", "/api/generate", {"model": "test-org/fim-GGUF:latest",
                                                     "prompt": "a", "suffix": "b",
                                                     "stream": False,
                                                     "options": {"num_predict": 2}})
            t.check(doc.get("done") is True, "the pulled model serves a FIM request")
            st, _, data = svc.request("POST", "/api/pull", {"model": "test-org/missing-GGUF",
                                                            "stream": False})
            ollama_error(st, data, 404, "pull of a missing repository")
            st, _, data = svc.request("POST", "/api/pull", {"model": "test-org/missing-GGUF"})
            last = ndjson(data)[-1] if st == 200 and data.strip() else {}
            t.check(isinstance(last.get("error"), str), "streamed pull failure ends with an error"
                    " line: %r" % data[-200:])
    finally:
        hub.stdin.close()
        hub.terminate()
        hub.wait()
        shutil.rmtree(root, ignore_errors=True)

t.done()

"""test_service_llamacpp.py — the llama.cpp-native endpoints of a real
moedesk-service (/completion, /infill, /props, /tokenize, /detokenize) as
llama.vscode, Continue and Tabby call them: replies and streams in
llama-server's shape, timings that add up, prefix reuse reported, FIM
prompts built from the model's tokens (and a clear 400 for a model without
them), and bad bodies answered with llama-server's error object.

usage: test_service_llamacpp.py MOEDESK_SERVICE DEMO_MODEL.gguf FIM_MODEL.gguf
"""
import json
import math
import os
import sys

from svc_harness import Checker, Service, sse_events

exe, demo, fim = sys.argv[1], sys.argv[2], sys.argv[3]
t = Checker()


def llama_error(t, status, body, want_status, what):
    """A llama-server error: {"error": {"code": status, "message", "type"}}."""
    t.eq(status, want_status, what + ": status")
    try:
        e = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        t.check(False, what + ": llama.cpp error object, got %r" % body[:200])
        return {}
    t.eq(e.get("code"), want_status, what + ": error.code")
    t.check(isinstance(e.get("message"), str) and e["message"], what + ": error.message")
    t.check(isinstance(e.get("type"), str) and e["type"], what + ": error.type")
    return e


def check_timings(t, doc, what):
    tm = doc.get("timings")
    t.check(isinstance(tm, dict), what + ": timings object")
    if not isinstance(tm, dict):
        return
    for k in ("prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second",
              "predicted_n", "predicted_ms", "predicted_per_token_ms", "predicted_per_second",
              "cache_n"):
        t.check(k in tm and isinstance(tm[k], (int, float)) and math.isfinite(tm[k])
                and tm[k] >= 0, "%s: timings.%s finite and >= 0 (%r)" % (what, k, tm.get(k)))
    t.eq(tm.get("predicted_n"), doc.get("tokens_predicted"), what + ": predicted_n")
    t.eq(tm.get("cache_n"), doc.get("tokens_cached"), what + ": cache_n = tokens_cached")
    t.eq(tm.get("prompt_n", 0) + tm.get("cache_n", 0), doc.get("tokens_evaluated"),
         what + ": prompt_n + cache_n = prompt tokens")
    t.check(tm.get("prompt_n", 0) >= 1, what + ": at least one prompt token evaluated")
    if tm.get("predicted_n", 0) > 1 and tm.get("predicted_ms", 0) > 0:
        rate = tm["predicted_n"] * 1000.0 / tm["predicted_ms"]
        t.check(abs(rate - tm["predicted_per_second"]) <= 1e-6 * rate + 1e-6,
                what + ": predicted_per_second = n / ms")


def stream(svc, path, body):
    """POST with stream:true; returns (status, content-type, [event dicts])."""
    st, hdrs, data = svc.request("POST", path, dict(body, stream=True))
    events = []
    if st == 200:
        for _, payload in sse_events(data):
            events.append(json.loads(payload))
    return st, hdrs.get("content-type", ""), events, data


def tokenize(svc, text, **kw):
    return svc.json("POST", "/tokenize", dict(content=text, **kw))["tokens"]


with Service(exe, model=demo) as svc:
    # /props: what llama.vscode and scripts read first.
    props = svc.json("GET", "/props")
    gs = props.get("default_generation_settings", {})
    t.check(isinstance(gs.get("n_ctx"), int) and gs["n_ctx"] > 0, "/props n_ctx")
    n_ctx = gs.get("n_ctx", 4096)
    t.eq(os.path.realpath(props.get("model_path", "")), os.path.realpath(demo), "/props model_path")
    t.check(props.get("total_slots", 0) >= 1, "/props total_slots")
    t.check("<|im_start|>" in props.get("chat_template", ""), "/props chat_template")
    t.eq(gs.get("params", {}).get("n_predict"), -1, "/props default n_predict")

    # /tokenize and /detokenize round trip, special tokens parsed or not.
    text = "Hello, world! <|im_start|>user\nhé"
    ids = tokenize(svc, text)
    t.check(all(isinstance(i, int) for i in ids) and ids, "/tokenize ids")
    im_start = tokenize(svc, "<|im_start|>")
    t.eq(len(im_start), 1, "<|im_start|> is one token with parse_special")
    t.check(im_start[0] in ids, "special token inside text parsed")
    plain = tokenize(svc, "<|im_start|>", parse_special=False)
    t.check(len(plain) > 1, "parse_special:false keeps it as text")
    back = svc.json("POST", "/detokenize", {"tokens": ids})["content"]
    t.eq(back, text, "/detokenize(/tokenize(text)) == text")
    pieces = svc.json("POST", "/tokenize", {"content": text, "with_pieces": True})["tokens"]
    t.eq([p["id"] for p in pieces], ids, "with_pieces ids")
    joined = b""
    for p in pieces:
        joined += p["piece"].encode() if isinstance(p["piece"], str) else bytes(p["piece"])
    t.eq(joined.decode(), text, "pieces (strings or byte lists) concatenate to the text")

    # /completion, whole answer.
    req = {"prompt": "The quick brown fox", "n_predict": 8, "temperature": 0, "seed": 1}
    doc = svc.json("POST", "/completion", req)
    t.check(isinstance(doc.get("content"), str), "/completion content")
    t.eq(doc.get("stop"), True, "/completion stop")
    t.check(doc.get("stop_type") in ("eos", "limit"), "stop_type %r" % doc.get("stop_type"))
    t.check(1 <= doc.get("tokens_predicted", 0) <= 8, "tokens_predicted within n_predict")
    if doc.get("stop_type") == "limit":
        t.eq(doc.get("tokens_predicted"), 8, "limit means n_predict tokens")
    n_prompt = len(tokenize(svc, req["prompt"], add_special=True))
    t.eq(doc.get("tokens_evaluated"), n_prompt, "tokens_evaluated = prompt tokens")
    t.eq(doc.get("generation_settings", {}).get("n_ctx"), n_ctx, "generation_settings.n_ctx")
    t.eq(doc.get("generation_settings", {}).get("n_predict"), 8, "generation_settings.n_predict")
    t.eq(doc.get("prompt"), req["prompt"], "prompt as processed")
    check_timings(t, doc, "/completion")

    # The same prompt again: its prefix comes from the cache, same text.
    again = svc.json("POST", "/completion", req)
    t.eq(again.get("content"), doc.get("content"), "greedy completion repeats")
    t.check(again.get("tokens_cached", 0) >= n_prompt - 1 >= 1,
            "second request reuses the prefix (tokens_cached %r of %d)"
            % (again.get("tokens_cached"), n_prompt))
    check_timings(t, again, "/completion again")

    # Token ids as the prompt: the same completion.
    ids_doc = svc.json("POST", "/completion", dict(req, prompt=tokenize(svc, req["prompt"],
                                                                         add_special=True)))
    t.eq(ids_doc.get("content"), doc.get("content"), "token-id prompt = text prompt")

    # Streamed: SSE data lines, partial chunks then one final object.
    st, ctype, events, raw = stream(svc, "/completion", req)
    t.eq(st, 200, "stream status")
    t.check(ctype.startswith("text/event-stream"), "stream content type %r" % ctype)
    t.check(b"[DONE]" not in raw, "no [DONE] line (llama-server's native stream)")
    t.check(len(events) >= 2, "at least one chunk and the final object")
    if events:
        final = events[-1]
        t.eq(final.get("stop"), True, "final chunk stop")
        t.check(all(e.get("stop") is False for e in events[:-1]), "earlier chunks stop:false")
        t.check(all(isinstance(e.get("tokens"), list) for e in events[:-1]),
                "chunks carry their token ids")
        text_streamed = "".join(e.get("content", "") for e in events)
        t.eq(text_streamed, doc.get("content"), "streamed text = whole text")
        check_timings(t, final, "stream final")

    # A stop word ends the text before it.
    if doc.get("content"):
        word = doc["content"][len(doc["content"]) // 2:][:2]
        if word.strip():
            sw = svc.json("POST", "/completion", dict(req, stop=[word]))
            if sw.get("stop_type") == "word":
                t.eq(sw.get("stopping_word"), word, "stopping_word")
                t.check(word not in sw.get("content", ""), "text stops before the stop word")

    # /infill on a model without FIM tokens: a 400 that says which.
    st, _, body = svc.request("POST", "/infill", {"input_prefix": "def f(", "input_suffix": ")"})
    e = llama_error(t, st, body, 400, "/infill without FIM tokens")
    msg = e.get("message", "")
    t.check("FIM" in msg and "prefix" in msg and "middle" in msg,
            "the error names the missing FIM tokens: %r" % msg)

    # Bad bodies: llama-server's error shape, the right 4xx.
    bad = [
        ("/completion", b"{not json", "malformed JSON"),
        ("/completion", {"n_predict": 4}, "no prompt"),
        ("/completion", {"prompt": 5}, "prompt of the wrong type"),
        ("/completion", {"prompt": "x", "n_predict": "many"}, "n_predict of the wrong type"),
        ("/completion", {"prompt": "x", "temperature": "hot"}, "temperature of the wrong type"),
        ("/completion", {"prompt": [1, "a", 2.5]}, "token array with a float"),
        ("/completion", {"prompt": "x", "grammar": "root ::= \"a\""}, "grammar refused"),
        ("/completion", [1, 2], "a JSON array body"),
        ("/infill", {"input_prefix": 3}, "input_prefix of the wrong type"),
        ("/infill", {"input_extra": [{"filename": 1}]}, "input_extra with a bad filename"),
        ("/tokenize", {"text": "x"}, "tokenize without content"),
        ("/tokenize", {"content": "x", "add_special": "yes"}, "add_special of the wrong type"),
        ("/detokenize", {"tokens": [-1]}, "negative token id"),
        ("/detokenize", {"tokens": [10 ** 9]}, "token id past the vocabulary"),
        ("/detokenize", {"tokens": "1 2"}, "tokens not an array"),
    ]
    for path, body, what in bad:
        st, _, data = svc.request("POST", path, body,
                                  headers={"Content-Type": "application/json"})
        llama_error(t, st, data, 400, what)
    st, _, data = svc.request("POST", "/completion", {"prompt": [10 ** 8], "n_predict": 2})
    t.check(400 <= st < 500, "token id past the vocabulary in a prompt: 4xx (%d)" % st)

    # Over the context: refused with llama-server's type, never cut.
    st, _, data = svc.request("POST", "/completion", {"prompt": "ab" * n_ctx, "n_predict": 4})
    e = llama_error(t, st, data, 400, "prompt over the context")
    t.eq(e.get("type"), "exceed_context_size_error", "over-context error type")
    # n_predict past the context is capped at the room left, not an error.
    long_prompt = "ab" * (n_ctx // 2 - 8)
    room = n_ctx - len(tokenize(svc, long_prompt, add_special=True))
    big = svc.json("POST", "/completion", {"prompt": long_prompt, "n_predict": 10 * n_ctx,
                                           "temperature": 0, "ignore_eos": True})
    t.eq(big.get("stop_type"), "limit", "n_predict beyond the context stops at the limit")
    t.eq(big.get("tokens_predicted"), room, "capped to the %d tokens left" % room)

    st, _, _ = svc.request("GET", "/health")
    t.eq(st, 200, "still serving")

usage = svc.usage_rows()
eps = [r["endpoint"] for r in usage]
t.check("/completion" in eps and "/infill" in eps, "usage rows for /completion and /infill")
t.check(all(r["endpoint"] not in ("/tokenize", "/detokenize", "/props") for r in usage),
        "tokenize/detokenize/props are not metered")
ok_rows = [r for r in usage if r["endpoint"] == "/completion" and r["http_status"] == 200]
t.check(ok_rows and all(r["completion_tokens"] >= 1 and r["prompt_tokens"] >= 1 for r in ok_rows),
        "completion rows carry token counts")

with Service(exe, model=fim) as svc:
    pre = "def add(a, b):\n    "
    suf = "\n    return c\n"
    req = {"input_prefix": pre, "input_suffix": suf, "n_predict": 6, "temperature": 0}
    doc = svc.json("POST", "/infill", req)
    t.check(isinstance(doc.get("content"), str), "/infill content")
    t.eq(doc.get("stop"), True, "/infill stop")
    check_timings(t, doc, "/infill")
    p = doc.get("prompt", "")
    t.check(p.endswith("<|fim_prefix|>" + pre + "<|fim_suffix|>" + suf + "<|fim_middle|>"),
            "FIM prompt in PSM order: %r" % p[-120:])
    n_fim = len(tokenize(svc, p))
    t.eq(doc.get("tokens_evaluated"), n_fim, "tokens_evaluated = FIM prompt tokens")

    # `prompt` goes after FIM_MID, as plain text.
    doc2 = svc.json("POST", "/infill", dict(req, prompt="    c = <|fim_pad|>"))
    t.check(doc2.get("prompt", "").endswith("<|fim_middle|>    c = <|fim_pad|>"),
            "prompt after FIM_MID")
    t.eq(doc2.get("tokens_evaluated"),
         n_fim + len(tokenize(svc, "    c = <|fim_pad|>", parse_special=False)),
         "the prompt's special-token text is not parsed")

    # input_extra: the repo-level layout with the model's repo/file tokens.
    extra = [{"filename": "util.py", "text": "def sub(a, b):\n    return a - b\n"}]
    doc3 = svc.json("POST", "/infill", dict(req, input_extra=extra))
    p3 = doc3.get("prompt", "")
    t.check("<|file_sep|>util.py\ndef sub(a, b)" in p3 and p3.index("util.py") <
            p3.index("<|fim_prefix|>"), "input_extra before the FIM prefix: %r" % p3[:160])

    # Streamed infill = whole infill.
    st, _, events, _ = stream(svc, "/infill", req)
    t.eq(st, 200, "/infill stream status")
    t.eq("".join(e.get("content", "") for e in events), doc.get("content"),
         "streamed infill text = whole infill text")
    if events:
        check_timings(t, events[-1], "/infill stream final")

    # More context than fits (llama.vscode sends whole rings of chunks): the
    # far context goes, the text at the cursor stays, and the reply says so.
    props = svc.json("GET", "/props")
    ctx = props["default_generation_settings"]["n_ctx"]
    lines = ["line %04d\n" % i for i in range(ctx // 4)]   # ~2.5 ctx bytes
    big_pre = "".join(lines)
    big_suf = "".join("tail %04d\n" % i for i in range(ctx // 8))
    chunks = [{"filename": "f%d.py" % i, "text": "x = %d\n" % i * 50} for i in range(8)]
    doc4 = svc.json("POST", "/infill", {"input_prefix": big_pre, "input_suffix": big_suf,
                                        "input_extra": chunks, "n_predict": 16,
                                        "temperature": 0})
    p4 = doc4.get("prompt", "")
    t.eq(doc4.get("truncated"), True, "over-long infill is trimmed, and says so")
    t.check(doc4.get("tokens_evaluated", ctx) <= ctx - 16, "trimmed prompt leaves room for "
            "n_predict (%r of %d)" % (doc4.get("tokens_evaluated"), ctx))
    t.check("<|fim_prefix|>" in p4 and lines[-1] + "<|fim_suffix|>tail 0000\n" in p4,
            "the prefix's last line and the suffix's first line stay")
    pre_kept = p4[p4.index("<|fim_prefix|>") + 14:p4.index("<|fim_suffix|>")] if \
        "<|fim_prefix|>" in p4 and "<|fim_suffix|>" in p4 else ""
    t.check(big_pre.endswith(pre_kept) and pre_kept.startswith("line ") and
            len(pre_kept) > len(big_pre) // 8, "the prefix loses whole lines at its start, "
            "and keeps most of the room (%d bytes)" % len(pre_kept))
    t.check("f0.py" not in p4, "the oldest extra chunk went first")
    t.eq(doc.get("truncated"), False, "a prompt that fits is not trimmed")

    # n_predict 0: llama.vscode's cache warm-up, nothing generated.
    warm = svc.json("POST", "/infill", dict(req, n_predict=0, input_suffix=suf + "# warm\n"))
    t.eq(warm.get("content"), "", "n_predict 0 generates nothing")
    t.eq(warm.get("stop_type"), "limit", "n_predict 0 stops at the limit")

t.done()

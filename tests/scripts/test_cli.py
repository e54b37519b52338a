#!/usr/bin/python3
"""End-to-end tests of moedesk-cli's engine commands (inspect, tokenize,
demo-model) as a user runs them: real processes, real files, exit codes and
the one-line errors bad input must get.

usage: test_cli.py MOEDESK_CLI
Needs MOE_SHARED_DATA (the shared vocab files) and MOE_BUILD_ROOT.
"""
import json
import os
import subprocess
import sys
import tempfile

CLI = sys.argv[1]
SHARED = os.environ["MOE_SHARED_DATA"]
VOCAB = os.path.join(SHARED, "vocab")
failures = 0
checks = 0


def check(cond, what):
    global failures, checks
    checks += 1
    if not cond:
        failures += 1
        print(f"FAIL: {what}", file=sys.stderr)


def run(*args, stdin=b""):
    p = subprocess.run([CLI, *args], input=stdin, capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def cases(path):
    """The .inp format: cases separated by lines '__ggml_vocab_test__'."""
    with open(path, encoding="utf-8") as f:
        parts = f.read().split("\n__ggml_vocab_test__\n")
    if parts and parts[-1] == "":
        parts.pop()
    return parts


def test_inspect():
    path = os.path.join(VOCAB, "ggml-vocab-qwen2.gguf")
    rc, out, err = run("inspect", path)
    check(rc == 0, f"inspect exit {rc}: {err}")
    check("gpt2 / pre qwen2" in out, f"inspect shows the tokenizer: {out}")
    rc, out, err = run("inspect", "--json", path)
    check(rc == 0, "inspect --json exit")
    info = json.loads(out)
    check(info["tokenizer"] == "gpt2" and info["tokenizer_pre"] == "qwen2", "json tokenizer")
    check(info["n_vocab"] > 150000, f"json n_vocab {info['n_vocab']}")
    check(info["chat_template"] in (True, False), "json chat_template is a bool")


def test_tokenize_conformance():
    for name in ("qwen2", "llama-spm"):
        model = os.path.join(VOCAB, f"ggml-vocab-{name}.gguf")
        inp = cases(model + ".inp")
        with open(model + ".out", encoding="utf-8") as f:
            expected = [line.split() for line in f.read().split("\n")]
        for i, text in enumerate(inp):
            rc, out, err = run("tokenize", "--model", model, stdin=text.encode("utf-8"))
            check(rc == 0, f"{name} case {i} exit {rc}: {err}")
            check(out.split() == expected[i], f"{name} case {i} {text!r}: {out.split()} != {expected[i]}")
            check(out.endswith("\n") and out.count("\n") == 1, f"{name} case {i}: one line")


def test_tokenize_special():
    model = os.path.join(VOCAB, "ggml-vocab-qwen2.gguf")
    text = b"<|im_start|>user"
    _, plain, _ = run("tokenize", "--model", model, stdin=text)
    _, special, _ = run("tokenize", "--model", model, "--parse-special", stdin=text)
    check(len(special.split()) < len(plain.split()), f"--parse-special makes a control token: {special} vs {plain}")


def test_bad_input(tmp):
    rc, out, err = run("inspect", os.path.join(tmp, "missing.gguf"))
    check(rc == 1 and "missing.gguf" in err and err.count("\n") == 1, f"missing file: {rc} {err!r}")
    notgguf = os.path.join(tmp, "not-a-model.gguf")
    with open(notgguf, "wb") as f:
        f.write(b"this is not a gguf file at all" * 10)
    rc, out, err = run("inspect", notgguf)
    check(rc == 1 and "not-a-model.gguf" in err and err.count("\n") == 1, f"not gguf: {rc} {err!r}")
    trunc = os.path.join(tmp, "truncated.gguf")
    with open(os.path.join(VOCAB, "ggml-vocab-llama-spm.gguf"), "rb") as f:
        data = f.read(5000)
    with open(trunc, "wb") as f:
        f.write(data)
    for args in (("inspect", trunc), ("tokenize", "--model", trunc)):
        rc, out, err = run(*args)
        check(rc == 1 and "truncated.gguf" in err and err.count("\n") == 1, f"{args[0]} truncated: {rc} {err!r}")
    rc, out, err = run("tokenize")
    check(rc == 2 and "--model" in err, f"tokenize without --model: {rc} {err!r}")
    rc, out, err = run("no-such-command")
    check(rc == 2 and "no-such-command" in err, "unknown command")


def test_demo_model(tmp):
    a, b = os.path.join(tmp, "a.gguf"), os.path.join(tmp, "b.gguf")
    check(run("demo-model", a)[0] == 0 and run("demo-model", b)[0] == 0, "demo-model writes")
    with open(a, "rb") as fa, open(b, "rb") as fb:
        check(fa.read() == fb.read(), "demo model is deterministic")
    rc, out, err = run("inspect", a)
    check(rc == 0 and "random weights" in out and "qwen3moe" in out, f"demo model labelled: {out}")
    rc, out, err = run("tokenize", "--model", a, stdin="héllo".encode())
    check(rc == 0 and len(out.split()) == 6, f"demo vocab is byte-level: {out}")


def test_quantize(tmp):
    demo = os.path.join(tmp, "demo.gguf")
    check(run("demo-model", demo)[0] == 0, "demo-model for quantize")
    for typ in ("q4_k", "q4_0", "f16", "q8_0"):
        out = os.path.join(tmp, f"demo-{typ}.gguf")
        rc, _, err = run("quantize", demo, out, typ, "-t", "2")
        check(rc == 0 and os.path.exists(out), f"quantize {typ}: {rc} {err}")
        rc, js, err = run("inspect", "--json", out)
        if rc != 0:
            check(False, f"inspect quantized {typ}: {err}")
            continue
        types = json.loads(js)["tensor_types"]
        # norms and the router stay f32; the big matrices take the target
        # (q4_k is llama.cpp's Q4_K_M mixture: some tensors q6_k)
        check("f32" in types, f"{typ}: 1-D tensors stay f32: {types}")
        check(typ in types and types[typ]["params"] > 0, f"{typ}: target type present: {types}")
    bad_out = os.path.join(tmp, "never.gguf")
    rc, _, err = run("quantize", demo, bad_out, "q3_xyz")
    check(rc == 1 and "q3_xyz" in err and not os.path.exists(bad_out), f"bad type: {rc} {err}")
    rc, _, err = run("quantize", os.path.join(tmp, "nope.gguf"), bad_out, "q8_0")
    check(rc == 1 and "nope.gguf" in err and not os.path.exists(bad_out)
          and not os.path.exists(bad_out + ".part"), f"missing input: {rc} {err}")


def test_chat(tmp):
    demo = os.path.join(tmp, "chat-demo.gguf")
    check(run("demo-model", demo)[0] == 0, "demo-model for chat")
    script = "hello there\nsecond turn\n/reset\nthird\n".encode()
    rc, out, err = run("chat", "-m", demo, "--temp", "0", "-n", "16", "-t", "2", stdin=script)
    check(rc == 0, f"chat exit {rc}: {err}")
    check("random weights" in err and "DEMO MODEL" in err, f"chat labels the demo model: {err}")
    stats = [l for l in err.splitlines() if l.startswith("[") and "prompt tokens" in l]
    check(len(stats) == 3, f"three replies: {stats}")
    if len(stats) == 3:
        total = [int(l[1:].split()[0]) for l in stats]
        new = [int(l.split("(")[1].split()[0]) for l in stats]
        # turn 2 re-uses the cached prefix of turn 1; after /reset only the
        # template's opening is shared
        check(total[1] > total[0] and new[1] < total[1], f"prefix reuse: {stats}")
        check(new[2] <= total[2], f"after reset: {stats}")
        check(all("16 generated" in l or "stop" in l for l in stats), f"-n 16 respected: {stats}")
    # greedy is deterministic: the same conversation gives the same replies
    rc2, out2, _ = run("chat", "-m", demo, "--temp", "0", "-n", "16", "-t", "2", stdin=script)
    check(rc2 == 0 and out2 == out, "greedy chat is deterministic")
    # a sampled chat with a seed is reproducible too
    a = run("chat", "-m", demo, "--seed", "5", "-n", "12", stdin=b"hi\n")[1]
    b = run("chat", "-m", demo, "--seed", "5", "-n", "12", stdin=b"hi\n")[1]
    check(a == b, "seeded chat is reproducible")
    rc, out, err = run("chat", "-m", os.path.join(tmp, "absent.gguf"), stdin=b"hi\n")
    check(rc == 1 and "absent.gguf" in err, f"chat with a missing model: {rc} {err!r}")
    rc, out, err = run("chat", "-m", demo, "-n", "0", stdin=b"hi\n")
    check(rc == 2, f"chat -n 0 is a usage error: {rc}")
    rc, out, err = run("chat", stdin=b"hi\n")
    check(rc == 2 and "--model" in err, f"chat without a model: {rc} {err!r}")


def test_run(tmp):
    demo = os.path.join(tmp, "run-demo.gguf")
    check(run("demo-model", demo)[0] == 0, "demo-model for run")
    rc, out, err = run("run", "-m", demo, "-p", "Once upon a time", "--temp", "0", "-n", "20", "-t", "2")
    check(rc == 0, f"run exit {rc}: {err}")
    check("20 generated" in err, f"run -n 20: {err}")
    rc2, out2, _ = run("run", "-m", demo, "-p", "Once upon a time", "--temp", "0", "-n", "20", "-t", "1")
    check(out2 == out, "greedy run is deterministic and independent of the thread count")
    rc, out3, err = run("run", "-m", demo, "-p", "Once upon a time", "--temp", "0", "-n", "20", "--chat")
    check(rc == 0 and "prompt tokens" in err, f"run --chat: {err}")
    # --chat wraps the text in the template: a longer prompt than the raw one
    raw_n = int(run("run", "-m", demo, "-p", "Once upon a time", "-n", "1")[2].split("[")[1].split()[0])
    chat_n = int(err.split("[")[1].split()[0])
    check(chat_n > raw_n, f"--chat applies the template: {chat_n} vs {raw_n}")
    rc, _, err = run("run", "-m", demo)
    check(rc == 2 and "-p" in err, f"run without -p: {rc} {err!r}")
    rc, _, err = run("run", "-m", demo, "-p", "x" * 20000, "-c", "256")
    check(rc == 1 and "context" in err, f"prompt longer than the context: {rc} {err!r}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_inspect()
        test_tokenize_conformance()
        test_tokenize_special()
        test_bad_input(tmp)
        test_demo_model(tmp)
        test_quantize(tmp)
        test_chat(tmp)
        test_run(tmp)
    print(f"{checks} checks, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

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


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_inspect()
        test_tokenize_conformance()
        test_tokenize_special()
        test_bad_input(tmp)
        test_demo_model(tmp)
        test_quantize(tmp)
    print(f"{checks} checks, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

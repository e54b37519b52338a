#!/usr/bin/python3
"""Test `cli-engine`: the engine commands of moedesk-cli on a tiny model.

  eval   writes exactly the logits libmoe gives (compared byte for byte with
         tests/tools/moe-eval on the same model, tokens and settings), and
         refuses bad input with a clear message and exit status 1 (token id
         outside the vocabulary, more tokens than the context, a token list
         that is not numbers, a missing model file) or 2 (usage).
  bench  runs and prints its JSON summary with positive speeds.

usage: test_cli_engine.py --cli PATH/moedesk-cli --eval PATH/moe-eval
Needs /usr/bin/python3 with numpy (the model generator).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable or "/usr/bin/python3"
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print(f"FAIL: {msg}", flush=True)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--eval", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="moe-cli-") as tmp:
        model = os.path.join(tmp, "tiny.gguf")
        r = run([PY, os.path.join(HERE, "gen_model.py"), "--arch", "qwen3moe", "--sharp", "8",
                 "-o", model])
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            return 1
        tokens = [101, 2020, 3003, 404, 5050, 606, 7070, 808, 9090, 1010, 111, 1212]
        a, b = os.path.join(tmp, "cli.f32"), os.path.join(tmp, "tool.f32")
        r = run([args.cli, "eval", "--model", model, "--tokens", " ".join(map(str, tokens)),
                 "--logits", a, "-t", "2", "-b", "5"])
        check(r.returncode == 0, f"eval exited {r.returncode}: {r.stderr.strip()}")
        r2 = run([args.eval, model, "--tokens", ",".join(map(str, tokens)), "--logits", b,
                  "--threads", "2", "--batch", "5"])
        check(r2.returncode == 0, f"moe-eval exited {r2.returncode}: {r2.stderr.strip()}")
        if r.returncode == 0 and r2.returncode == 0:
            da, db = open(a, "rb").read(), open(b, "rb").read()
            n_vocab = json.loads(r2.stdout)["n_vocab"]
            check(len(da) == len(tokens) * n_vocab * 4,
                  f"eval wrote {len(da)} bytes, expected {len(tokens)} x {n_vocab} floats")
            check(da == db, "eval's logits differ from libmoe's (moe-eval)")

        def bad(extra, status, needle, what):
            r = run([args.cli, "eval", "--logits", os.path.join(tmp, "bad.f32")] + extra)
            check(r.returncode == status and needle in r.stderr,
                  f"{what}: exit {r.returncode} (want {status}), stderr {r.stderr.strip()!r} "
                  f"lacks {needle!r}")

        bad(["--model", model, "--tokens", "1 2 999999"], 1, "outside the vocabulary",
            "token id too large")
        bad(["--model", model, "--tokens", "1 -3"], 1, "outside the vocabulary", "negative token id")
        bad(["--model", model, "--tokens", " ".join(["5"] * 20), "-c", "8"], 1,
            "do not fit in the context", "prompt longer than the context")
        bad(["--model", model, "--tokens", "1 two 3"], 1, "is not a token id", "non-numeric token")
        bad(["--model", os.path.join(tmp, "missing.gguf"), "--tokens", "1"], 1, "missing.gguf",
            "missing model file")
        bad(["--tokens", "1 2"], 2, "--model", "no --model")
        bad(["--model", model, "--tokens", "1", "--kv-type", "q4_k"], 1, "not supported",
            "unsupported KV cache type")

        r = run([args.cli, "bench", "--model", model, "-p", "16", "-n", "4", "-r", "2", "-t", "2",
                 "--json"])
        check(r.returncode == 0, f"bench exited {r.returncode}: {r.stderr.strip()}")
        if r.returncode == 0:
            j = json.loads(r.stdout)
            check(j["prefill_tok_s"] > 0 and j["decode_tok_s"] > 0, f"bench speeds {j}")
            check(j["reps"] == 2 and j["n_prompt"] == 16 and j["n_gen"] == 4, f"bench echo {j}")
            check(j["peak_rss_bytes"] >= 0 and j["weight_bytes_per_token"] > 0, f"bench memory {j}")
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

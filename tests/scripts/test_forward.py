#!/usr/bin/python3
"""Test `forward-vs-reference`: the engine's forward pass (tests/tools/
moe-eval, i.e. libmoe's moe_decode) against the numpy reference
(ref_forward.py) and against llama.cpp (tests/node/llama-logits.mjs).

For each architecture (qwen3moe, qwen2moe, llama/Mixtral, olmoe) at F32 and
Q8_0, on a small random model with sharp distributions (gen_model.py
--sharp 8) and a seeded sequence of 48 tokens. The engine runs twice: with
an F32 KV cache (the configuration llama-logits.mjs gives llama.cpp, so the
two compute the same thing) and with its default F16 cache.

  F32 model, F32 cache: vs reference and vs llama.cpp, top-1 equal at every
      position and every probability within 1e-3.
      F16 cache: top-1 equal everywhere, probabilities within 5e-3 (the
      cache rounds K and V to 11 significant bits).
  Q8_0 model (activations quantised to Q8_0 as ggml does), F32 cache:
      vs the reference with --emulate-ggml (which rounds activations the
      same way) and vs llama.cpp: top-1 equal at >= 95% of positions, every
      disagreement a near tie of the other side's top two (logit gap < 0.5),
      mean |difference of the top-1 probability| <= 0.05.
      The plain reference (exact activations, HF on dequantised weights)
      differs from all three by the quantisation of activations, and where
      that flips a router's choice the logits move by whole units: against
      it top-1 must agree at >= 85% of positions (the bar test_reference.py
      holds llama.cpp to); the disagreements are reported.
      F16 cache vs llama.cpp (whose cache is F32): the same 85% bar, near
      ties and mean top-1 difference.
  Greedy generation of 64 tokens with the F32 cache identical to
  llama.cpp's, except after a near tie: at the first step where they part,
  the engine's own top-two logit gap must be below the tie threshold (1e-2
  for F32, 0.5 for Q8_0); after that point they are not compared. (With the
  F16 cache a rounding can flip a router's choice of expert, which moves
  the logits discontinuously, so its continuation is only reported.)

usage: test_forward.py --eval PATH/moe-eval [--node PATH] [--keep DIR]
Needs /usr/bin/python3 with numpy, node and tests/node/node_modules.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("MOE_SOURCE_ROOT") or os.path.normpath(os.path.join(HERE, "..", ".."))
NODE_SCRIPT = os.path.join(SRC, "tests", "node", "llama-logits.mjs")
PY = sys.executable or "/usr/bin/python3"

ARCHES = ("qwen3moe", "qwen2moe", "llama", "olmoe")
EXTRA = {"qwen3moe": ["--head-dim", "32"]}   # q wider than the residual, as in Qwen3
N_TOKENS = 48
N_GENERATE = 64
SHARP = "8"
F32_P_TOL = 1e-3
F32_F16KV_P_TOL = 5e-3
Q8_MIN_AGREE = 0.95
PLAIN_MIN_AGREE = 0.85
Q8_MEAN_TOP1_DP = 0.05
NEAR_TIE = {"f32": 1e-2, "q8_0": 0.5}
Q8_TIE = 0.5

failures = []


def fail(msg):
    failures.append(msg)
    print(f"FAIL: {msg}", flush=True)


def run(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n exited {res.returncode}: {res.stderr.strip()}")
    return res.stdout


def softmax_rows(logits):
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def engine(tool, model, tokens, out, kv):
    res = json.loads(run([tool, model, "--tokens", ",".join(map(str, tokens)), "--logits", out,
                          "--generate", str(N_GENERATE), "--kv", kv, "--threads", "2"]))
    logits = np.fromfile(out, dtype="<f4").reshape(len(tokens), res["n_vocab"]).astype(np.float64)
    return logits, res


def reference(model, tokens, out, emulate=False):
    res = json.loads(run([PY, os.path.join(HERE, "ref_forward.py"), model, "--tokens",
                          ",".join(map(str, tokens)), "--logits", out] +
                         (["--emulate-ggml"] if emulate else [])))
    return np.fromfile(out, dtype="<f4").reshape(len(tokens), res["n_vocab"]).astype(np.float64)


def llama_cpp(node, model, tokens, out):
    res = json.loads(run([node, NODE_SCRIPT, "--model", model, "--tokens", ",".join(map(str, tokens)),
                          "--probs", out, "--generate", str(N_GENERATE)]))
    p = np.fromfile(out, dtype="<f4").reshape(len(tokens), res["n_vocab"]).astype(np.float64)
    return p, res["generated"]


def check_f32(label, p_ours, p_other, tol):
    top_o, top_r = p_ours.argmax(axis=1), p_other.argmax(axis=1)
    bad = np.nonzero(top_o != top_r)[0]
    if bad.size:
        fail(f"{label}: top-1 differs at positions {bad.tolist()}")
    dp = float(np.abs(p_ours - p_other).max())
    if dp > tol:
        fail(f"{label}: max |dp| = {dp:.3g} > {tol}")
    return dp


def check_q8(label, p_ours, p_other, min_agree=Q8_MIN_AGREE, ties=True):
    """p_other: the comparison side's probabilities; its log gives its logits
    up to a constant per row, which is all a gap needs."""
    top_o, top_r = p_ours.argmax(axis=1), p_other.argmax(axis=1)
    agree = float(np.mean(top_o == top_r))
    if agree < min_agree:
        fail(f"{label}: top-1 agreement {agree:.2f} < {min_agree}")
    if not ties:
        return agree, float(np.mean(np.abs(p_ours.max(axis=1) - p_other.max(axis=1))))
    with np.errstate(divide="ignore"):
        lr = np.log(p_other)
    for i in np.nonzero(top_o != top_r)[0]:
        gap = lr[i, top_r[i]] - lr[i, top_o[i]]
        if gap >= Q8_TIE:
            fail(f"{label}: position {i}: engine picks {top_o[i]}, {gap:.3f} logits below "
                 f"the other side's {top_r[i]} (not a near tie)")
    rows = np.arange(len(top_r))
    dtop = float(np.mean(np.abs(p_ours[rows, top_r] - p_other[rows, top_r])))
    if dtop > Q8_MEAN_TOP1_DP:
        fail(f"{label}: mean |top-1 probability difference| {dtop:.3f} > {Q8_MEAN_TOP1_DP}")
    return agree, dtop


def check_greedy(label, ours, gaps, theirs, tie):
    for j, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            if gaps[j] >= tie:
                fail(f"{label}: greedy step {j}: engine {a}, llama.cpp {b}, engine's top-two gap "
                     f"{gaps[j]:.4f} is not a near tie (< {tie})")
                return f"differs at {j} (not a tie)"
            return f"identical up to a near tie at step {j} (gap {gaps[j]:.4f})"
    if len(ours) != len(theirs):
        fail(f"{label}: {len(ours)} vs {len(theirs)} generated tokens")
    return "identical"


def one_arch(args, tmp, arch):
    rng = np.random.default_rng(11)
    tokens = rng.integers(100, 30000, N_TOKENS).tolist()
    for dtype in ("f32", "q8_0"):
        t0 = time.time()
        label = f"{arch}/{dtype}"
        base = os.path.join(tmp, f"{arch}-{dtype}")
        model = base + ".gguf"
        run([PY, os.path.join(HERE, "gen_model.py"), "--arch", arch, "--dtype", dtype,
             "--sharp", SHARP, "-o", model] + EXTRA.get(arch, []))
        p_llama, gen_llama = llama_cpp(args.node, model, tokens, base + ".probs")
        p_ref = softmax_rows(reference(model, tokens, base + ".ref"))
        logits32, res32 = engine(args.eval, model, tokens, base + ".ours32", "f32")
        logits16, res16 = engine(args.eval, model, tokens, base + ".ours16", "f16")
        p32, p16 = softmax_rows(logits32), softmax_rows(logits16)
        if p32.shape != p_ref.shape or p32.shape != p_llama.shape:
            fail(f"{label}: shapes engine {p32.shape}, reference {p_ref.shape}, "
                 f"llama.cpp {p_llama.shape}")
            continue
        if dtype == "f32":
            d1 = check_f32(label + " vs reference", p32, p_ref, F32_P_TOL)
            d2 = check_f32(label + " vs llama.cpp", p32, p_llama, F32_P_TOL)
            d3 = check_f32(label + " F16 cache vs llama.cpp", p16, p_llama, F32_F16KV_P_TOL)
            summary = f"max|dp| ref {d1:.1e}, llama.cpp {d2:.1e}, F16 cache {d3:.1e}"
        else:
            p_emu = softmax_rows(reference(model, tokens, base + ".emu", emulate=True))
            a1, t1 = check_q8(label + " vs emulated reference", p32, p_emu)
            a2, t2 = check_q8(label + " vs llama.cpp", p32, p_llama)
            a0, _ = check_q8(label + " vs plain reference", p32, p_ref, PLAIN_MIN_AGREE, ties=False)
            a3, t3 = check_q8(label + " F16 cache vs llama.cpp", p16, p_llama, PLAIN_MIN_AGREE)
            summary = (f"top-1 agreement ref {a1:.2f} (plain {a0:.2f}), llama.cpp {a2:.2f} "
                       f"(F16 cache {a3:.2f}); mean |dp top-1| ref {t1:.3f}, llama.cpp {t2:.3f}")
        g = check_greedy(label + " greedy", res32["generated"], res32["gen_gap"], gen_llama,
                         NEAR_TIE[dtype])
        same16 = next((j for j, (a, b) in enumerate(zip(res16["generated"], gen_llama)) if a != b),
                      None)
        g += "; F16 cache " + ("identical" if same16 is None else f"parts at step {same16}")
        print(f"{label:14s} {summary}; greedy {N_GENERATE}: {g}  ({time.time() - t0:.1f} s)",
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--node", default="node")
    ap.add_argument("--eval", required=True, help="path of the moe-eval tool")
    ap.add_argument("--keep", help="write models and outputs here and keep them")
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(SRC, "tests", "node", "node_modules", "node-llama-cpp")):
        print("tests/node/node_modules/node-llama-cpp is missing: run 'npm ci' in tests/node",
              file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="moe-fwd-") as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        for arch in ARCHES:
            try:
                one_arch(args, work, arch)
            except (RuntimeError, ValueError, OSError) as e:
                fail(f"{arch}: {e}")
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

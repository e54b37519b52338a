#!/usr/bin/python3
"""Independent reference for libmoe's sampling chain.

Re-implements, in float64 numpy and from the contract in engine/include/moe.h
("Sampling") only, the chain penalties -> logit bias -> greedy | top-k ->
top-p -> min-p -> temperature, on random logits and parameters, and compares
the final candidate probabilities with those printed by sampler-tool (a thin
wrapper over moe_sampler_probs).

The C side computes in float32 and this side in float64, so a case whose
top-p or min-p cut lies within rounding distance of a token is "close": there
either of the two neighbouring cuts is accepted. Every other case must match
the candidate set exactly and each probability within 1e-4 relative + 1e-6.

Usage: test_sampler_ref.py PATH/TO/sampler-tool [--cases N] [--seed S]
"""
import argparse
import subprocess
import sys

import numpy as np

FLT_MAX = float(np.finfo(np.float32).max)


def f32(x):
    return float(np.float32(x))


def clean(v):
    v = np.where(np.isnan(v), -np.inf, v)
    return np.where(v > FLT_MAX, FLT_MAX, v)


def reference(case):
    """Returns (error, {token: prob}, close) for one case."""
    n = case["n_vocab"]
    if n < 1:
        return True, {}, False
    l = clean(np.array(case["logits"], dtype=np.float64))
    last_n = case["last_n"]
    rp, pres, freq = case["repeat"], case["presence"], case["frequency"]
    if last_n > 0 and (rp != 1.0 or pres != 0.0 or freq != 0.0):
        window = case["recent"][-last_n:] if case["recent"] else []
        counts = {}
        for t in window:
            if 0 <= t < n:
                counts[t] = counts.get(t, 0) + 1
        for t, c in counts.items():
            v = l[t]
            v = v / rp if v > 0 else v * rp
            l[t] = v - (c * freq + pres)
    merged = {}
    for t, b in case["bias"]:
        merged[t] = merged.get(t, 0.0) + b
    for t, b in merged.items():
        l[t] = l[t] + b
    l = clean(l)
    top = l.max()
    if top == -np.inf:
        return True, {}, False
    if case["temperature"] == 0.0:
        return False, {int(np.argmax(l)): 1.0}, False

    ids = np.arange(n)
    finite = l > -np.inf
    order = np.lexsort((ids[finite], -l[finite]))
    cand = ids[finite][order]
    close = False
    k = case["top_k"]
    if 0 < k < n:
        cand = cand[:k]
    top_p = case["top_p"]
    if top_p < 1.0:
        w = np.exp(l[cand] - top)
        cum = np.cumsum(w)
        target = top_p * cum[-1]
        m = int(np.searchsorted(cum, target, side="left")) + 1
        m = min(max(m, 1), len(cand))
        tol = 1e-5 * cum[-1]
        if abs(cum[m - 1] - target) < tol or (m >= 2 and abs(cum[m - 2] - target) < tol):
            close = True
        cand = cand[:m]
    min_p = case["min_p"]
    if min_p > 0.0:
        thr = top + np.log(min_p)
        keep = l[cand] >= thr
        keep[0] = True
        if np.any(np.abs(l[cand] - thr) < 1e-5 * max(1.0, abs(thr))):
            close = True
        cand = cand[keep]
    w = np.exp((l[cand] - top) / case["temperature"])
    p = w / w.sum()
    return False, {int(t): float(q) for t, q in zip(cand, p)}, close


def random_case(rng, n_vocab=None):
    n = n_vocab or int(rng.choice([1, 2, 5, 40, 300, 3000, 20000]))
    scale = float(rng.choice([0.3, 2.0, 6.0, 25.0]))
    logits = (rng.standard_normal(n) * scale).astype(np.float32)
    if rng.random() < 0.3:
        logits[rng.integers(0, n, size=max(1, n // 50))] = np.nan
    if rng.random() < 0.2:
        logits[rng.integers(0, n, size=max(1, n // 20))] = -np.inf
    if rng.random() < 0.3 and n > 2:  # ties
        logits[rng.integers(0, n, size=max(2, n // 10))] = logits[0]
    if rng.random() < 0.03:
        logits[rng.integers(0, n)] = np.inf
    if rng.random() < 0.02:
        logits[:] = np.nan
    temperature = float(rng.choice([0.0, 0.25, 0.7, 1.0, 1.6]))
    top_k = int(rng.choice([0, 0, 1, 5, 40, n, n + 3]))
    top_p = float(rng.choice([1.0, 0.0, rng.random(), 0.9, 0.95]))
    min_p = float(rng.choice([0.0, 0.0, rng.random() * 0.3, 0.05]))
    pen_on = rng.random() < 0.5
    recent = [int(t) for t in rng.integers(-2, n + 2, size=int(rng.integers(0, 80)))]
    bias = []
    for _ in range(int(rng.integers(0, 4))):
        b = float(rng.choice([-np.inf, rng.normal() * 3]))
        bias.append((int(rng.integers(0, n)), f32(b)))
    return {
        "n_vocab": n,
        "temperature": f32(temperature),
        "top_k": top_k,
        "top_p": f32(top_p),
        "min_p": f32(min_p),
        "repeat": f32(rng.choice([1.0, 1.1, 1.5, 0.8])) if pen_on else 1.0,
        "last_n": int(rng.choice([0, 4, 64])) if pen_on else 64,
        "presence": f32(rng.normal() * 0.5) if pen_on else 0.0,
        "frequency": f32(rng.normal() * 0.5) if pen_on else 0.0,
        "recent": recent,
        "bias": bias,
        "logits": [float(x) for x in logits],
    }


def fmt(x):
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


def serialize(case):
    out = [
        f'{case["n_vocab"]} {fmt(case["temperature"])} {case["top_k"]} {fmt(case["top_p"])} '
        f'{fmt(case["min_p"])} {fmt(case["repeat"])} {case["last_n"]} '
        f'{fmt(case["presence"])} {fmt(case["frequency"])}',
        f'{len(case["recent"])} ' + " ".join(str(t) for t in case["recent"]),
        f'{len(case["bias"])} ' + " ".join(f"{t} {fmt(b)}" for t, b in case["bias"]),
        " ".join(fmt(x) for x in case["logits"]),
    ]
    return "\n".join(out) + "\n"


def parse_output(text):
    results = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        head = lines[i].split(maxsplit=3)
        i += 1
        if head[2] == "error":
            results.append((True, {}))
            continue
        n_total = int(head[3])
        probs = {}
        for line in lines[i:i + n_total]:
            t, p = line.split()
            probs[int(t)] = float(p)
        i += n_total
        results.append((False, probs))
    return results


def compare(i, case, ours, ref):
    err_ours, p_ours = ours
    err_ref, p_ref, close = ref
    if err_ours or err_ref:
        if err_ours != err_ref:
            return f"case {i}: error mismatch (ours {err_ours}, reference {err_ref})"
        return None
    # Tokens the reference gives a weight that float32 cannot hold.
    p_ref = {t: p for t, p in p_ref.items() if p > 1e-35 or t in p_ours}
    s_ours, s_ref = set(p_ours), set(p_ref)
    if s_ours != s_ref:
        diff = s_ours ^ s_ref
        if not (close and len(diff) == 1):
            return (f"case {i}: candidate sets differ: {len(s_ours)} vs {len(s_ref)} "
                    f"(e.g. {sorted(diff)[:5]}), params "
                    f"{ {k: v for k, v in case.items() if k not in ('logits', 'recent')} }")
        return None  # a legitimate rounding-distance cut; probabilities shift
    for t in s_ref:
        if abs(p_ours[t] - p_ref[t]) > 1e-4 * p_ref[t] + 1e-6:
            return f"case {i}: token {t}: prob {p_ours[t]:.9g} vs reference {p_ref[t]:.9g}"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("--cases", type=int, default=400)
    ap.add_argument("--seed", type=int, default=20240917)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    cases = [random_case(rng) for _ in range(args.cases)]
    cases += [random_case(rng, 151936) for _ in range(4)]
    cases.append(dict(random_case(rng, 10), logits=[float("nan")] * 10, bias=[]))
    stdin = "".join(serialize(c) for c in cases)
    proc = subprocess.run([args.tool], input=stdin, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(f"sampler-tool failed ({proc.returncode}): {proc.stderr}", file=sys.stderr)
        return 1
    results = parse_output(proc.stdout)
    if len(results) != len(cases):
        print(f"sampler-tool answered {len(results)} of {len(cases)} cases", file=sys.stderr)
        return 1
    failures, n_close, n_cut = [], 0, 0
    for i, (case, ours) in enumerate(zip(cases, results)):
        ref = reference(case)
        n_close += ref[2]
        n_cut += (not ref[0]) and len(ref[1]) < case["n_vocab"]
        msg = compare(i, case, ours, ref)
        if msg:
            failures.append(msg)
    for msg in failures[:20]:
        print(msg, file=sys.stderr)
    print(f"{len(cases)} cases ({n_cut} with tokens cut, {n_close} near a rounding boundary), "
          f"{len(failures)} failed")
    # The comparison must have had something to compare.
    return 1 if failures or n_cut < len(cases) // 4 else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""CPU inference benchmark: libmoe (`moedesk-cli bench`) against llama.cpp
(node-llama-cpp, tests/bench/bench-llama.mjs) on the same GGUF files, with
the same thread count, prompt length and number of greedy decode steps.

The two engines run alternately, one repetition each per round, so a change
in the load of a shared machine hits both alike. Reported per model: the
median and the best of the rounds for prefill and decode tokens/s, the
ratios ours/llama.cpp of both, peak RSS against file + KV cache, and the
decode roofline (weight bytes read per token / measured read bandwidth;
medians). Prints a Markdown table for docs/benchmarks.md.

usage: cpu-inference.py --cli build/app/moedesk-cli MODEL.gguf [MODEL.gguf ...]
                        [-p 512] [-n 128] [-t 2] [--rounds 5] [--node node]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--node", default="node")
    ap.add_argument("models", nargs="+")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    print(f"machine: lscpu model name '{cpu_model()}', {os.cpu_count()} CPUs; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average at start {loadavg()}")
    rows = []
    for model in args.models:
        ours, theirs = [], []
        for r in range(args.rounds):
            ours.append(run_json([args.cli, "bench", "--model", model, "-p", str(args.p), "-n",
                                  str(args.n), "-t", str(args.t), "-r", "1", "--json"]))
            theirs.append(run_json([args.node, os.path.join(HERE, "bench-llama.mjs"), model, "-p",
                                    str(args.p), "-n", str(args.n), "-t", str(args.t), "-r", "1"]))
            print(f"{os.path.basename(model)} round {r + 1}: ours {ours[-1]['prefill_tok_s']:.1f} / "
                  f"{ours[-1]['decode_tok_s']:.1f}, llama.cpp {theirs[-1]['prefill_tok_s']:.1f} / "
                  f"{theirs[-1]['decode_tok_s']:.1f} tok/s (prefill / decode); load {loadavg()}",
                  flush=True)
        med = lambda v: statistics.median(v)
        op = [o["prefill_tok_s"] for o in ours]
        od = [o["decode_tok_s"] for o in ours]
        tp = [t["prefill_tok_s"] for t in theirs]
        td = [t["decode_tok_s"] for t in theirs]
        bw = med([o["read_bandwidth_bytes_s"] for o in ours])
        per_tok = ours[0]["weight_bytes_per_token"]
        rows.append({
            "model": os.path.basename(model), "file": ours[0]["file_bytes"], "kv": ours[0]["kv_bytes"],
            "rss": max(o["peak_rss_bytes"] for o in ours),
            "op": (med(op), max(op)), "od": (med(od), max(od)),
            "tp": (med(tp), max(tp)), "td": (med(td), max(td)),
            "bw": bw, "per_tok": per_tok,
        })
    print(f"load average at end {loadavg()}\n")
    print(f"| model | engine | prefill {args.p} tok/s (median / best) | decode {args.n} tok/s "
          f"(median / best) |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | libmoe | {r['op'][0]:.1f} / {r['op'][1]:.1f} | "
              f"{r['od'][0]:.1f} / {r['od'][1]:.1f} |")
        print(f"| | llama.cpp | {r['tp'][0]:.1f} / {r['tp'][1]:.1f} | "
              f"{r['td'][0]:.1f} / {r['td'][1]:.1f} |")
        print(f"| | ratio | {r['op'][0] / r['tp'][0]:.2f} / {r['op'][1] / r['tp'][1]:.2f} | "
              f"{r['od'][0] / r['td'][0]:.2f} / {r['od'][1] / r['td'][1]:.2f} |")
    print()
    for r in rows:
        budget = (r["file"] + r["kv"]) * 1.10
        print(f"- {r['model']}: peak RSS {r['rss'] / 1e9:.3f} GB; file {r['file'] / 1e9:.3f} GB + "
              f"KV cache {r['kv'] / 1e6:.1f} MB, +10% = {budget / 1e9:.3f} GB "
              f"({'within' if r['rss'] <= budget else 'OVER'}). Decode roofline: "
              f"{r['per_tok'] / 1e6:.1f} MB of weights per token / {r['bw'] / 1e9:.1f} GB/s read "
              f"bandwidth = {r['bw'] / r['per_tok']:.0f} tok/s; median decode is "
              f"{100 * r['od'][0] / (r['bw'] / r['per_tok']):.0f}% of it.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""bench-service.py — what moedesk-service costs and gives over HTTP on this
machine (issue #5, "Benchmarks"), for docs/benchmarks.md:

  1. Time to first token over HTTP vs the engine in-process. A streamed
     /v1/completions request with max_tokens 1 and a prompt that shares no
     prefix with the one before (one sequence slot, so nothing is reused):
     the client's time from sending the request to the first SSE bytes,
     against `moedesk-cli bench -p N -n 0`'s prefill time for the same number
     of evaluated tokens (the CLI samples the first token from exactly that
     forward pass). Short blocks of CLI repetitions and HTTP requests
     alternate, so load from other jobs hits both alike; the overhead is
     the median over blocks of (HTTP median - engine median).
  2. Aggregate throughput at 1, 4 and 16 concurrent streamed chat requests
     (16 slots, distinct prompts, end tokens banned so each makes exactly
     --gen tokens): completion tokens per second of wall time, TTFT and
     per-request decode rate. With --bench-scheduler, the same sizes through
     the scheduler in-process (tests/bench/bench-scheduler.c) for comparison.
  3. Prefix reuse on a multi-turn chat (one slot): turn k continues the
     conversation the slot holds (warm) vs the same request after an
     unrelated one evicted it (cold); TTFT per turn and the speed-up.

Not run by `meson test`; the numbers go to docs/benchmarks.md with the
command that made them. Stdlib only (Debian's /usr/bin/python3).

usage: bench-service.py --service EXE --cli CLI [--bench-scheduler EXE]
                        [-t THREADS] [--reps N] [--prompt N] [--gen N]
                        [--turns N] MODEL.gguf [MODEL.gguf ...]
"""
import argparse
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from svc_harness import Service, sse_events  # noqa: E402

WORDS = ("river stone window garden copper lantern orbit meadow harbor signal "
         "velvet summit canyon ember falcon glacier island jasmine kettle ledger "
         "marble nectar oasis pebble quartz ribbon saddle timber umbrella valley "
         "willow yarrow zephyr anchor beacon cobalt dune fable grotto hollow").split()


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def pct(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def dechunk(data):
    out = b""
    while data:
        line, _, rest = data.partition(b"\r\n")
        size = int(line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2:]
    return out


def stream_post(port, path, body, timeout=900, ua="bench-service"):
    """One streamed request on a fresh connection (Connection: close).
    Returns dict(ttft, total, text, usage); times in seconds from the moment
    the request was sent (after connect)."""
    payload = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    head = (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"User-Agent: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
            % (path.encode(), port, ua.encode(), len(payload)))
    buf = b""
    ttft = None
    t0 = time.perf_counter()
    s.sendall(head + payload)
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
        if ttft is None and b"data: " in buf:
            ttft = time.perf_counter() - t0
    total = time.perf_counter() - t0
    s.close()
    hdr, _, raw = buf.partition(b"\r\n\r\n")
    status = int(hdr.split(b" ", 2)[1])
    if status != 200:
        raise RuntimeError("%s: status %d: %r" % (path, status, raw[:300]))
    if b"transfer-encoding: chunked" in hdr.lower():
        raw = dechunk(raw)
    text, usage = "", None
    for _, d in sse_events(raw):
        if d == "[DONE]":
            continue
        c = json.loads(d)
        if c.get("usage"):
            usage = c["usage"]
        for ch in c.get("choices") or []:
            text += (ch.get("delta") or {}).get("content") or ch.get("text") or ""
    return dict(ttft=ttft, total=total, text=text, usage=usage)


def end_token_bias(cli, model):
    """Bans the chat template's end tokens when each is one token, so every
    request makes exactly max_tokens (random weights end at random)."""
    bias = {}
    for s in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>"):
        out = subprocess.run([cli, "tokenize", "-m", model, "--parse-special"], input=s,
                             capture_output=True, text=True).stdout.split()
        if len(out) == 1:
            bias[out[0]] = -100
    return bias


def cli_prefill_ms(cli, model, threads, n_tokens, reps):
    """Per-repetition prefill times (ms) of `moedesk-cli bench -n 0`."""
    r = subprocess.run([cli, "bench", "-m", model, "-t", str(threads), "-p", str(n_tokens),
                        "-n", "0", "-r", str(reps), "--no-bandwidth"],
                       capture_output=True, text=True, check=True)
    rates = [float(m) for m in re.findall(r"prefill ([0-9.]+) tok/s", r.stderr)]
    return [n_tokens / x * 1000.0 for x in rates]


def bench_ttft(args, model):
    rng = random.Random(1)
    svc = Service(args.service, model=model,
                  args=["--parallel", "1", "--ctx", "1024", "--threads", str(args.threads)]).start()
    name = svc.json("GET", "/health")["model"]
    text = words(rng, args.ttft_words)
    try:
        def one(i):
            # The same text after a different first character each time: the
            # same number of tokens, and no prefix shared with the request
            # before (the only one the slot remembers).
            prompt = chr(ord("A") + i % 26) + " " + text
            r = stream_post(svc.port, "/v1/completions",
                            {"model": name, "prompt": prompt, "max_tokens": 1,
                             "temperature": 0, "stream": True,
                             "stream_options": {"include_usage": True}})
            u = r["usage"]
            return r["ttft"] * 1000.0, u["prompt_tokens"] - u["prompt_tokens_details"]["cached_tokens"]
        for i in range(5):
            one(i)  # warm-up: pages the weights in
        http, evaluated, engine, diffs = [], [], [], []
        n_eval = one(5)[1]
        # Short alternating blocks, so a change in the machine's load (other
        # jobs) hits both sides of a block alike; the overhead is the median
        # of the blocks' differences.
        size = args.block
        for block in range(max(1, args.reps // size)):
            # The CLI's first repetition pages in and wakes its threads: dropped.
            e = cli_prefill_ms(args.cli, model, args.threads, n_eval, size + 1)[1:]
            h = []
            for i in range(size):
                ms, n = one(100 * block + i)
                h.append(ms)
                evaluated.append(n)
            engine += e
            http += h
            diffs.append(statistics.median(h) - statistics.median(e))
    finally:
        svc.stop()
    return dict(n_eval=statistics.median(evaluated), n_eval_min=min(evaluated),
                n_eval_max=max(evaluated), http=http, engine=engine, diffs=diffs)


def run_concurrency(svc, name, c, rounds, n_words, n_gen, bias, seed):
    rng = random.Random(seed)
    agg, ttfts = [], []
    for rnd in range(rounds):
        res = [None] * c
        bodies = [{"model": name, "max_tokens": n_gen, "temperature": 0, "stream": True,
                   "stream_options": {"include_usage": True}, "logit_bias": bias,
                   "messages": [{"role": "user", "content": "%d %s" % (rnd * 100 + i,
                                                                         words(rng, n_words))}]}
                  for i in range(c)]

        def go(i):
            res[i] = stream_post(svc.port, "/v1/chat/completions", bodies[i],
                                 ua="bench-c%d" % c)
        t0 = time.perf_counter()
        ths = [threading.Thread(target=go, args=(i,)) for i in range(c)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        wall = time.perf_counter() - t0
        tokens = sum(r["usage"]["completion_tokens"] for r in res)
        agg.append(tokens / wall)
        ttfts.append(statistics.mean(r["ttft"] for r in res) * 1000.0)
    return statistics.median(agg), statistics.median(ttfts)


def bench_throughput(args, model, bias):
    svc = Service(args.service, model=model,
                  args=["--parallel", "16", "--ctx", "512",
                        "--threads", str(args.threads)]).start()
    name = svc.json("GET", "/health")["model"]
    out = []
    try:
        run_concurrency(svc, name, 1, 1, args.prompt_words, 8, bias, 7)  # warm-up
        prompt_tokens = None
        for c in (1, 4, 16):
            out.append((c,) + run_concurrency(svc, name, c, args.rounds, args.prompt_words,
                                              args.gen, bias, c))
        r = svc.json("POST", "/v1/chat/completions", {
            "model": name, "max_tokens": 1,
            "messages": [{"role": "user", "content": "0 " + words(random.Random(3),
                                                                  args.prompt_words)}]})
        prompt_tokens = r["usage"]["prompt_tokens"]
    finally:
        svc.stop()
    # Each request's decode rate as the scheduler measured it (usage rows).
    rates = {}
    for row in svc.usage_rows():
        m = re.match(r"bench-c(\d+)$", row["client"] or "")
        if m and row["decode_tps"]:
            rates.setdefault(int(m.group(1)), []).append(row["decode_tps"])
    out = [(c, agg, ttft, statistics.median(rates.get(c, [float("nan")])))
           for c, agg, ttft in out]
    return out, prompt_tokens


def bench_multiturn(args, model, bias):
    rng = random.Random(5)
    system = "You are a careful assistant. " + words(rng, args.prompt_words)
    users = [words(rng, 24) for _ in range(args.turns)]
    svc = Service(args.service, model=model,
                  args=["--parallel", "1", "--ctx", "4096", "--threads", str(args.threads)]).start()
    name = svc.json("GET", "/health")["model"]

    def turn_body(k, answers, max_tokens):
        msgs = [{"role": "system", "content": system}]
        for j in range(k):
            msgs.append({"role": "user", "content": users[j]})
            msgs.append({"role": "assistant", "content": answers[j]})
        msgs.append({"role": "user", "content": users[k]})
        return {"model": name, "messages": msgs, "max_tokens": max_tokens, "temperature": 0,
                "stream": True, "stream_options": {"include_usage": True}, "logit_bias": bias}

    def evict():
        stream_post(svc.port, "/v1/completions",
                    {"model": name, "prompt": "Z unrelated " + words(rng, 8), "max_tokens": 1,
                     "stream": True})
    warm = [[] for _ in range(args.turns)]
    cold = [[] for _ in range(args.turns)]
    cached = [0] * args.turns
    prompt = [0] * args.turns
    try:
        answers = []
        for rep in range(args.rounds):
            evict()
            answers_now = []
            for k in range(args.turns):
                r = stream_post(svc.port, "/v1/chat/completions",
                                turn_body(k, answers_now, args.gen))
                answers_now.append(r["text"])
                warm[k].append(r["ttft"] * 1000.0)
                cached[k] = r["usage"]["prompt_tokens_details"]["cached_tokens"]
                prompt[k] = r["usage"]["prompt_tokens"]
            answers = answers_now
        for rep in range(args.rounds):
            for k in range(args.turns):
                evict()
                r = stream_post(svc.port, "/v1/chat/completions", turn_body(k, answers, 1))
                cold[k].append(r["ttft"] * 1000.0)
    finally:
        svc.stop()
    return prompt, cached, [statistics.median(w) for w in warm], [statistics.median(c) for c in cold]


def bench_scheduler_rows(args, model):
    if not args.bench_scheduler:
        return None
    r = subprocess.run([args.bench_scheduler, model, "-t", str(args.threads), "-p",
                        str(args.sched_prompt), "-n", str(args.gen), "-r", str(args.rounds),
                        "--turns", "1"], capture_output=True, text=True, check=True)
    rows = {}
    for line in r.stdout.splitlines():
        if line.startswith("| turn"):
            break  # the multi-turn table follows
        m = re.match(r"\|\s*(\d+) \| +([0-9.]+) \| +([0-9.]+) \|", line)
        if m:
            rows[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--service", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--bench-scheduler")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=120, help="TTFT samples per side")
    ap.add_argument("--block", type=int, default=5, help="TTFT samples per alternating block")
    ap.add_argument("--ttft-words", type=int, default=6, help="prompt words for the TTFT test")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per concurrency / chat")
    ap.add_argument("--prompt-words", type=int, default=24)
    ap.add_argument("--sched-prompt", type=int, default=64,
                    help="bench-scheduler prompt tokens (match the chat prompts)")
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--turns", type=int, default=4)
    args = ap.parse_args()
    load = os.getloadavg()
    print("bench-service: %d threads, %d TTFT samples, %d rounds, %d-word prompts, %d tokens "
          "generated; %s UTC, load average %.1f"
          % (args.threads, args.reps, args.rounds, args.prompt_words, args.gen,
             time.strftime("%Y-%m-%d %H:%M", time.gmtime()), load[0]))
    for model in args.models:
        t0 = time.time()
        print("\n### %s\n" % os.path.basename(model), flush=True)
        bias = end_token_bias(args.cli, model)
        r = bench_ttft(args, model)
        h, e = r["http"], r["engine"]
        print("Time to first token, %s prompt tokens evaluated (%d-%d), %d + %d samples:\n"
              % (r["n_eval"], r["n_eval_min"], r["n_eval_max"], len(h), len(e)))
        print("| | median ms | P95 ms |\n|---|---|---|")
        print("| HTTP stream, first SSE bytes | %.2f | %.2f |" % (pct(h, 50), pct(h, 95)))
        print("| engine prefill (moedesk-cli bench) | %.2f | %.2f |" % (pct(e, 50), pct(e, 95)))
        print("| difference | %.2f | %.2f |" % (pct(h, 50) - pct(e, 50), pct(h, 95) - pct(e, 95)))
        d = r["diffs"]
        print("\n**Service overhead: %.2f ms** (median of %d blocks' differences of medians; "
              "blocks from %.2f to %.2f ms, quartiles %.2f / %.2f)\n"
              % (pct(d, 50), len(d), min(d), max(d), pct(d, 25), pct(d, 75)), flush=True)
        rows, n_prompt = bench_throughput(args, model, bias)
        sched = bench_scheduler_rows(args, model)
        print("Concurrent streams (%d prompt tokens, %d generated each, median of %d rounds):\n"
              % (n_prompt, args.gen, args.rounds))
        print("| streams | aggregate tok/s | TTFT mean ms | decode tok/s per stream (median) |%s"
              % (" in-process scheduler tok/s |" if sched else ""))
        print("|---|---|---|---|%s" % ("---|" if sched else ""))
        for c, agg, ttft, rate in rows:
            extra = " %.1f |" % sched[c][0] if sched and c in sched else ""
            print("| %d | %.1f | %.1f | %.1f |%s" % (c, agg, ttft, rate, extra))
        print(flush=True)
        prompt, cached, warm, cold = bench_multiturn(args, model, bias)
        print("Multi-turn chat (%d turns, %d tokens per answer), TTFT median of %d:\n"
              % (args.turns, args.gen, args.rounds))
        print("| turn | prompt tokens | cached (warm) | TTFT warm ms | TTFT cold ms | speed-up |")
        print("|---|---|---|---|---|---|")
        for k in range(args.turns):
            print("| %d | %d | %d | %.1f | %.1f | %.2fx |"
                  % (k + 1, prompt[k], cached[k], warm[k], cold[k], cold[k] / warm[k]))
        print("\nwhole chat: TTFT sum %.0f ms warm, %.0f ms cold (%.2fx); %s took %.0f s"
              % (sum(warm), sum(cold), sum(cold) / sum(warm), os.path.basename(model),
                 time.time() - t0), flush=True)
    print("\nload average at the end: %.1f" % os.getloadavg()[0])


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Synthetic MoeDesk request logs with known distributions, as CSV for
`moedesk-cli usage import-csv` (the columns of the usage store's `requests`
table).

Each --span START:WEEKS:ROWS adds WEEKS weeks of traffic from the UTC date
START, about ROWS requests a week, growing 4 % a week. Weeks listed with
--skip (a UTC date inside the week) get no rows, to make an empty week.
The mix: local Qwen3 models on CUDA (power measured for most rows), Kimi on
the Moonshot API, Qwen on OpenRouter, DeepSeek, a self-hosted "cluster"
upstream and one model nobody has a price for; six callers, each mostly on
its own client. The "ci" key sends long prompts in bursts, and the last
three weeks of each span get slower time to first token, so the report's
alerts and tail hints have something real to find; in each span's last
week the "ci" key floods the local coder model with very long prompts for
one hour (Wednesday 14:00 UTC).

Usage: gen_usage.py --out FILE [--seed N] --span 2026-02-23:16:3000 ...
"""
import argparse
import csv
import datetime as dt
import math
import random

COLUMNS = ["start_ms", "caller", "client", "endpoint", "model", "route", "backend",
           "quant", "prompt_tokens", "cached_tokens", "completion_tokens", "ttft_ms",
           "total_ms", "decode_tps", "http_status", "error_kind", "finish_reason",
           "gpu_power_w", "busy_ms"]

# (model, route, weight)
MODELS = [
    ("qwen3-30b-a3b", "local", 45),
    ("qwen3-coder-30b-a3b", "local", 17),
    ("kimi-k2.6", "moonshot", 14),
    ("qwen/qwen3-30b-a3b-instruct-2507", "openrouter", 9),
    ("deepseek-v4-flash", "deepseek", 6),
    ("kimi-k3", "cluster", 6),
    ("glm-9-experimental", "openrouter", 3),
]
# (caller, weight, usual client)
CALLERS = [
    ("gui", 28, "moedesk/0.1.0"),
    ("cli", 9, "moedesk-cli/0.1.0"),
    ("anonymous", 5, "curl/7.88.1"),
    ("alice", 22, "continue/1.2.3"),
    ("bob", 16, "openai-python/1.40.0"),
    ("ci", 20, "ci-runner/2.3, build \"nightly\""),
]
OTHER_CLIENTS = ["curl/7.88.1", "openai-python/1.40.0", "continue/1.2.3"]


def pick(rng, items, weight_index):
    total = sum(i[weight_index] for i in items)
    x = rng.uniform(0, total)
    for item in items:
        x -= item[weight_index]
        if x <= 0:
            return item
    return items[-1]


def request(rng, start_ms, slow_factor):
    model, route, _ = pick(rng, MODELS, 2)
    caller, _, client = pick(rng, CALLERS, 1)
    if rng.random() < 0.1:
        client = rng.choice(OTHER_CLIENTS)
    local = route == "local"
    prompt = int(rng.lognormvariate(math.log(700), 0.9))
    if caller == "ci" and rng.random() < 0.25:
        prompt *= 8          # long prompts from CI, in bursts
    prompt = max(1, min(prompt, 200000))
    cached = int(prompt * rng.choice([0, 0, 0.3, 0.6, 0.9]))
    completion = max(1, int(rng.lognormvariate(math.log(180), 0.8)))
    if local:
        ttft = int((20 + prompt / 60.0) * slow_factor * rng.lognormvariate(0, 0.35))
        tps = rng.uniform(35, 90)
    else:
        ttft = int(rng.lognormvariate(math.log(450), 0.5) * slow_factor)
        tps = rng.uniform(25, 70)
    total = ttft + int(completion / tps * 1000) + rng.randint(0, 40)
    status, error, finish = 200, "", rng.choice(["stop", "stop", "stop", "length", "tool_calls"])
    roll = rng.random()
    if roll < 0.015:
        status, error, finish, completion = 500, "engine_error", "", 0
        ttft_s, total = "", rng.randint(5, 3000)
    elif roll < 0.025:
        status, error, finish, completion = 429, "rate_limited", "", 0
        ttft_s, total = "", rng.randint(1, 80)
    elif roll < 0.03:
        status, error, finish = 200, "client_disconnected", ""
        ttft_s = str(ttft)
    else:
        ttft_s = str(ttft)
    decode = repr(round(tps, 3)) if completion > 0 and not error else ""
    power = repr(round(rng.uniform(240, 430), 1)) if local and rng.random() < 0.7 else ""
    return [
        start_ms, caller, client, "/v1/chat/completions", model, route,
        "cuda" if local else "", "Q4_K_M" if local else "", prompt, cached, completion,
        ttft_s, total, decode, status, error, finish, power, total if local else 0,
    ]


def incident(rng, week_base_ms):
    """Wednesday 14:00-15:00 UTC of a span's last week: the CI key floods
    the local coder model with very long prompts, which queue and crawl."""
    rows = []
    hour = week_base_ms + (2 * 86400 + 14 * 3600) * 1000
    for _ in range(70):
        prompt = rng.randint(20000, 40000)
        ttft = int(prompt / 12 * rng.uniform(0.8, 1.3))
        completion = rng.randint(200, 900)
        tps = rng.uniform(12, 25)
        total = ttft + int(completion / tps * 1000)
        power = repr(round(rng.uniform(380, 440), 1))
        rows.append([hour + rng.randrange(3600 * 1000), "ci", "ci-runner/2.3, build \"nightly\"",
                     "/v1/chat/completions", "qwen3-coder-30b-a3b", "local", "cuda", "Q4_K_M",
                     prompt, 0, completion, str(ttft), total, repr(round(tps, 3)), 200, "",
                     "stop", power, total])
    return rows


def generate(spans, skip, seed):
    rng = random.Random(seed)
    rows = []
    skip_weeks = set()
    for s in skip:
        d = dt.date.fromisoformat(s)
        skip_weeks.add(d - dt.timedelta(days=d.weekday()))
    for start, weeks, per_week in spans:
        first = dt.datetime.combine(dt.date.fromisoformat(start), dt.time(), dt.timezone.utc)
        for w in range(weeks):
            week_start = first + dt.timedelta(weeks=w)
            monday = (week_start - dt.timedelta(days=week_start.weekday())).date()
            if monday in skip_weeks:
                continue
            n = int(per_week * (1.04 ** w) * rng.uniform(0.9, 1.1))
            slow = 1.0 + 0.35 * max(0, w - (weeks - 4))   # last three weeks get slower
            base = int(week_start.timestamp() * 1000)
            for _ in range(n):
                # Daytime-heavy: two thirds between 07:00 and 19:00 UTC.
                day = rng.randrange(7)
                if rng.random() < 0.67:
                    sec = rng.randrange(7 * 3600, 19 * 3600)
                else:
                    sec = rng.randrange(0, 86400)
                ms = base + (day * 86400 + sec) * 1000 + rng.randrange(1000)
                rows.append(request(rng, ms, slow))
            if w == weeks - 1:
                rows.extend(incident(rng, base))
    rows.sort(key=lambda r: r[0])
    return rows


def write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        w.writerows(rows)


def parse_span(text):
    start, weeks, per_week = text.split(":")
    return start, int(weeks), int(per_week)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--span", action="append", type=parse_span, required=True)
    ap.add_argument("--skip", action="append", default=[])
    args = ap.parse_args()
    rows = generate(args.span, args.skip, args.seed)
    write_csv(args.out, rows)
    print(f"{len(rows)} rows -> {args.out}")


if __name__ == "__main__":
    main()

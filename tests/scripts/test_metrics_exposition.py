#!/usr/bin/python3
"""test_metrics_exposition.py — the service's /metrics text checked by an
independent parser of the Prometheus text exposition format 0.0.4.

usage: test_metrics_exposition.py METRICS_FEED

METRICS_FEED (tests/tools/metrics-feed.c) feeds JSON-lines observations
into the C registry and prints its exposition. This script

1. proves its own validator rejects broken texts (so a pass means
   something),
2. feeds a random but seeded stream of requests with hostile label values
   (quotes, backslashes, newlines, control characters, invalid-looking
   text, long values) and gauges,
3. validates the grammar: every sample's family declared by TYPE before
   it, HELP/TYPE at most once, families contiguous, names and label names
   well formed, label values escaped (only \\\\, \\" and \\n), float values
   in Go's syntax, no duplicate series, counters >= 0; histograms with
   increasing le ending at +Inf, non-decreasing cumulative counts, +Inf
   bucket == _count, _sum and _count present;
4. compares every counter, bucket, sum and gauge with values computed here
   from the same stream (Python's own bucketing and label cleaning).

Stdlib only.
"""
import json
import math
import random
import re
import subprocess
import sys

NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
FLOAT_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|NaN|[+-]Inf")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


class ExpositionError(Exception):
    pass


def parse_float(text, where):
    if not FLOAT_RE.fullmatch(text):
        raise ExpositionError(f"{where}: bad value {text!r}")
    return float(text.replace("Inf", "inf"))


def parse_labels(s, i, where):
    """Parses {a="x",...} starting at s[i] == '{'; returns (dict, next index)."""
    labels = {}
    i += 1
    while True:
        if i < len(s) and s[i] == "}":
            return labels, i + 1
        m = LABEL_RE.match(s, i)
        if not m:
            raise ExpositionError(f"{where}: bad label name at column {i}")
        name = m.group(0)
        if name.startswith("__"):
            raise ExpositionError(f"{where}: reserved label name {name}")
        if name in labels:
            raise ExpositionError(f"{where}: label {name} twice")
        i = m.end()
        if s[i:i + 2] != '="':
            raise ExpositionError(f"{where}: expected =\" after {name}")
        i += 2
        value = []
        while True:
            if i >= len(s):
                raise ExpositionError(f"{where}: unterminated label value")
            c = s[i]
            if c == "\\":
                nxt = s[i + 1:i + 2]
                if nxt not in ("\\", '"', "n"):
                    raise ExpositionError(f"{where}: bad escape \\{nxt}")
                value.append("\n" if nxt == "n" else nxt)
                i += 2
            elif c == '"':
                i += 1
                break
            else:
                value.append(c)
                i += 1
        labels[name] = "".join(value)
        if i < len(s) and s[i] == ",":
            i += 1
        elif i < len(s) and s[i] == "}":
            continue
        else:
            raise ExpositionError(f"{where}: expected , or }} after a label")


def validate(text):
    """Checks the exposition; returns {(sample name, frozenset(labels)): value}."""
    if not text.endswith("\n"):
        raise ExpositionError("text does not end with a newline")
    types, helps, samples = {}, set(), {}
    done, current = set(), None
    hist = {}  # (family, labels without le) -> {"le": [...], "counts": [...], ...}
    for n, line in enumerate(text[:-1].split("\n"), 1):
        where = f"line {n}"
        if line == "":
            raise ExpositionError(f"{where}: empty line")
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                fam = parts[2]
                if not NAME_RE.fullmatch(fam):
                    raise ExpositionError(f"{where}: bad metric name {fam!r}")
                if fam in done or (current and current != fam and fam in types):
                    raise ExpositionError(f"{where}: {fam} declared after its samples")
                if parts[1] == "HELP":
                    if fam in helps:
                        raise ExpositionError(f"{where}: second HELP for {fam}")
                    helps.add(fam)
                    doc = parts[3] if len(parts) > 3 else ""
                    if re.search(r"\\[^\\n]", doc.replace("\\\\", "")):
                        raise ExpositionError(f"{where}: bad escape in HELP")
                else:
                    if fam in types:
                        raise ExpositionError(f"{where}: second TYPE for {fam}")
                    if len(parts) != 4 or parts[3] not in TYPES:
                        raise ExpositionError(f"{where}: bad TYPE line")
                    types[fam] = parts[3]
                if current and current != fam:
                    done.add(current)
                current = fam
            continue
        m = NAME_RE.match(line)
        if not m:
            raise ExpositionError(f"{where}: bad metric name")
        name, i = m.group(0), m.end()
        labels = {}
        if i < len(line) and line[i] == "{":
            labels, i = parse_labels(line, i, where)
        rest = line[i:]
        if not rest.startswith(" "):
            raise ExpositionError(f"{where}: expected a space before the value")
        fields = rest[1:].split(" ")
        if len(fields) not in (1, 2):
            raise ExpositionError(f"{where}: expected value [timestamp]")
        value = parse_float(fields[0], where)
        if len(fields) == 2 and not re.fullmatch(r"-?\d+", fields[1]):
            raise ExpositionError(f"{where}: bad timestamp")
        # The family this sample belongs to.
        fam, suffix = name, ""
        if name not in types:
            for suf in ("_bucket", "_sum", "_count"):
                base = name[: -len(suf)]
                if name.endswith(suf) and types.get(base) in ("histogram", "summary") and \
                        (suf != "_bucket" or types[base] == "histogram"):
                    fam, suffix = base, suf
                    break
            else:
                raise ExpositionError(f"{where}: {name} has no TYPE before it")
        elif types[name] == "histogram":
            raise ExpositionError(f"{where}: bare sample of histogram {name}")
        if fam in done:
            raise ExpositionError(f"{where}: {fam} samples are not contiguous")
        if current != fam:
            if current:
                done.add(current)
            current = fam
        key = (name, frozenset(labels.items()))
        if key in samples:
            raise ExpositionError(f"{where}: duplicate series {name} {labels}")
        samples[key] = value
        kind = types[fam]
        if kind == "counter" and not value >= 0:
            raise ExpositionError(f"{where}: counter {name} is {value}")
        if kind == "histogram":
            base_labels = {k: v for k, v in labels.items() if k != "le"}
            h = hist.setdefault((fam, frozenset(base_labels.items())),
                                {"le": [], "counts": [], "sum": None, "count": None})
            if suffix == "_bucket":
                if "le" not in labels:
                    raise ExpositionError(f"{where}: bucket without le")
                le = parse_float(labels["le"], where)
                if h["le"] and not le > h["le"][-1]:
                    raise ExpositionError(f"{where}: le {le} not above {h['le'][-1]}")
                if h["counts"] and value < h["counts"][-1]:
                    raise ExpositionError(f"{where}: cumulative count falls")
                if value < 0 or value != math.floor(value):
                    raise ExpositionError(f"{where}: bucket count {value}")
                h["le"].append(le)
                h["counts"].append(value)
            elif "le" in labels:
                raise ExpositionError(f"{where}: le on {name}")
            else:
                h[suffix[1:]] = value
    for (fam, lbl), h in hist.items():
        where = f"{fam}{dict(lbl)}"
        if not h["le"] or h["le"][-1] != math.inf:
            raise ExpositionError(f"{where}: no +Inf bucket")
        if h["count"] is None or h["sum"] is None:
            raise ExpositionError(f"{where}: _sum or _count missing")
        if h["counts"][-1] != h["count"]:
            raise ExpositionError(f"{where}: +Inf bucket {h['counts'][-1]} != _count {h['count']}")
    return samples


# ---- 1. the validator rejects broken texts ----

GOOD = """# HELP a_total Things.\n# TYPE a_total counter\na_total{x="1"} 3\n\
# TYPE h histogram\nh_bucket{le="0.5"} 1\nh_bucket{le="+Inf"} 2\nh_sum 0.7\nh_count 2\n\
# TYPE g gauge\ng -1.5e3\n"""
BAD = {
    "sample before TYPE": "a_total 1\n# TYPE a_total counter\n",
    "undeclared": "# TYPE a counter\nb 1\n",
    "falling buckets": "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
                       "h_sum 1\nh_count 1\n",
    "+Inf != count": "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n",
    "no +Inf": "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_sum 1\nh_count 2\n",
    "le not increasing": "# TYPE h histogram\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\n"
                         "h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
    "bucket without le": "# TYPE h histogram\nh_bucket 1\nh_sum 1\nh_count 1\n",
    "no _sum": "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",
    "bad escape": "# TYPE g gauge\ng{a=\"x\\ty\"} 1\n",
    "raw quote": "# TYPE g gauge\ng{a=\"x\"y\"} 1\n",
    "unterminated": "# TYPE g gauge\ng{a=\"xy} 1\n",
    "duplicate series": "# TYPE g gauge\ng{a=\"1\"} 1\ng{a=\"1\"} 2\n",
    "label twice": "# TYPE g gauge\ng{a=\"1\",a=\"2\"} 1\n",
    "interleaved": "# TYPE g gauge\n# TYPE k gauge\ng 1\nk 1\ng{a=\"2\"} 1\n",
    "negative counter": "# TYPE c counter\nc -1\n",
    "python-only float": "# TYPE g gauge\ng 1_0\n",
    "word value": "# TYPE g gauge\ng infinity\n",
    "no newline at end": "# TYPE g gauge\ng 1",
    "bad name": "# TYPE 1g gauge\n1g 1\n",
    "TYPE twice": "# TYPE g gauge\n# TYPE g gauge\ng 1\n",
    "bad type": "# TYPE g meter\ng 1\n",
    "empty line": "# TYPE g gauge\n\ng 1\n",
    "two spaces": "# TYPE g gauge\ng  1\n",
    "bare histogram": "# TYPE h histogram\nh 1\n",
}
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


try:
    validate(GOOD)
except ExpositionError as e:
    check(False, f"good text refused: {e}")
for what, text in BAD.items():
    try:
        validate(text)
        check(False, f"validator accepted: {what}")
    except ExpositionError:
        pass

# ---- 2. a seeded stream into the C registry ----

BOUNDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]
HOSTILE = ["qwen3", "kimi-k2", 'say "hi"', "back\\slash", "new\nline", "tab\there",
           "cr\rhere", "del\x7f", "模型", "{}=,#", "le", "", " spaced ", "x" * 300,
           "é" * 100, "\\n literal", 'end\\"']
ROUTES = ["local", "moonshot", "a\"b", "up\nstream"]
# 17 models x 4 routes x 3 endpoints x 4 statuses stays under the registry's
# 1000-series cap, so every label set is its own series.
ENDPOINTS = ["/v1/chat/completions", "/api/chat", "/v1/messages"]


def clean(v):
    """The registry's label cleaning, written from its documented rule."""
    v = "".join("_" if (ord(c) < 0x20 and c != "\n") or c == "\x7f" else c for c in v)
    # At most 128 bytes, cut at a character boundary.
    return v.encode()[:128].decode("utf-8", "ignore")


rng = random.Random(20240517)
lines, expect = [], {}


def add(key, amount):
    expect[key] = expect.get(key, 0) + amount


hists = {}
for _ in range(3000):
    model, route = rng.choice(HOSTILE), rng.choice(ROUTES)
    endpoint, status = rng.choice(ENDPOINTS), rng.choice([200, 200, 200, 400, 429, 500])
    p, c, o = rng.randint(0, 5000), rng.randint(0, 100), rng.randint(0, 900)
    ttft = rng.choice([None, rng.uniform(0, 0.2), rng.expovariate(2), rng.choice(BOUNDS)])
    dur = rng.choice([rng.uniform(0, 200), rng.expovariate(0.5), rng.choice(BOUNDS)])
    lines.append(json.dumps({"model": model, "route": route, "endpoint": endpoint,
                             "status": status, "prompt": p, "cached": c, "completion": o,
                             "ttft": ttft, "duration": dur}))
    mr = frozenset({("model", clean(model)), ("route", clean(route))})
    add(("moedesk_requests_total", mr | {("endpoint", endpoint), ("status", str(status))}), 1)
    add(("moedesk_prompt_tokens_total", mr), p)
    add(("moedesk_cached_tokens_total", mr), c)
    add(("moedesk_completion_tokens_total", mr), o)
    for fam, v in (("moedesk_time_to_first_token_seconds", ttft),
                   ("moedesk_request_duration_seconds", dur)):
        if v is None:
            continue
        h = hists.setdefault((fam, mr), [0] * (len(BOUNDS) + 1) + [0.0])
        idx = next((i for i, b in enumerate(BOUNDS) if v <= b), len(BOUNDS))
        h[idx] += 1
        h[-1] += v
gauges = [("queue_depth", None, 7), ("running_sequences", None, 4), ("kv_used", None, 1234.5),
          ("kv_total", None, 65536), ("model_loaded", 'm"1', 1), ("model_loaded", "m2", 1),
          ("upstream_up", "moonshot", 0), ("upstream_up", "a\\b", 1)]
for g, label, value in gauges:
    lines.append(json.dumps({"gauge": g, "label": label, "value": value}))
lines.append(json.dumps({"clear": "model_loaded"}))
lines.append(json.dumps({"gauge": "model_loaded", "label": "m3\nx", "value": 1}))

feed = subprocess.run([sys.argv[1]], input="\n".join(lines) + "\n", capture_output=True,
                      text=True, timeout=120)
check(feed.returncode == 0, f"metrics-feed failed: {feed.stderr}")
text = feed.stdout

# ---- 3. grammar ----
try:
    samples = validate(text)
except ExpositionError as e:
    check(False, f"exposition invalid: {e}")
    samples = {}

# ---- 4. values ----
for (name, lbl), want in expect.items():
    got = samples.get((name, lbl))
    check(got == want, f"{name}{dict(lbl)}: got {got}, want {want}")
for (fam, lbl), h in hists.items():
    cum = 0
    for i, b in enumerate(BOUNDS + [math.inf]):
        cum += h[i]
        le = "+Inf" if b == math.inf else repr(float(b)).removesuffix(".0")
        got = samples.get((fam + "_bucket", lbl | {("le", le)}))
        check(got == cum, f"{fam} {dict(lbl)} le={le}: got {got}, want {cum}")
    got_sum = samples.get((fam + "_sum", lbl))
    check(got_sum is not None and math.isclose(got_sum, h[-1], rel_tol=1e-9, abs_tol=1e-9),
          f"{fam}_sum {dict(lbl)}: got {got_sum}, want {h[-1]}")
    check(samples.get((fam + "_count", lbl)) == cum, f"{fam}_count {dict(lbl)}")
n_counter = sum(1 for (n, _) in samples if n.endswith("_total"))
check(n_counter == len(expect), f"{n_counter} counter series, expected {len(expect)}")
for name, lbl, want in [("moedesk_queue_depth", (), 7), ("moedesk_running_sequences", (), 4),
                        ("moedesk_kv_cache_used_cells", (), 1234.5),
                        ("moedesk_kv_cache_total_cells", (), 65536),
                        ("moedesk_model_loaded", (("model", "m3\nx"),), 1),
                        ("moedesk_upstream_up", (("upstream", "moonshot"),), 0),
                        ("moedesk_upstream_up", (("upstream", "a\\b"),), 1)]:
    got = samples.get((name, frozenset(lbl)))
    check(got == want, f"gauge {name}{lbl}: got {got}, want {want}")
check(not any(n == "moedesk_model_loaded" and ("model", "m2") in l for (n, l) in samples),
      "cleared gauge still shown")

print(f"metrics exposition: {len(samples)} samples, {len(BAD)} broken texts refused, "
      f"{failures} failures")
sys.exit(1 if failures else 0)

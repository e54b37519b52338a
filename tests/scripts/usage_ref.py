"""Independent reference for MoeDesk's weekly report, computed from raw
request rows (never from the store's roll-ups), following docs/report.md:

- weeks start at local midnight on the configured weekday (zoneinfo), are
  labelled with the ISO week holding their fourth day;
- percentiles: nearest rank, rank = ceil(p * n / 100), reported as the
  largest millisecond of the latency bucket holding that rank; buckets are
  1 ms wide below 100 ms, then edge[b+1] = edge[b] + max(1, edge[b] // 100);
- costs, changes, four-week averages, alerts, the slow tail, the API
  comparison and the verdict as documented.

compare() walks the expected structure against the CLI's JSON: integers and
strings must match exactly, floats to a relative 1e-9 (sums of floats are
added in a different order).
"""
import bisect
import csv
import datetime as dt
import json
import math
from zoneinfo import ZoneInfo

N_BUCKETS = 1531
CLAMP_MS = 86400000
WEEKS_PER_MONTH = 365.25 / 12.0 / 7.0

METRICS = [  # key, better
    ("calls", 1), ("prompt_tokens", 1), ("cached_tokens", 0), ("completion_tokens", 1),
    ("total_tokens", 1), ("ttft_p50_ms", -1), ("ttft_p95_ms", -1), ("latency_p50_ms", -1),
    ("latency_p95_ms", -1), ("decode_tps", 1), ("error_rate", -1), ("cost", 0),
    ("cost_per_1k_tokens", -1),
]
DIMS = ["model", "route", "caller", "client"]
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def _edges():
    e, out = 0, []
    for _ in range(N_BUCKETS + 1):
        out.append(e)
        e += max(1, e // 100)
    return out


EDGES = _edges()


def bucket(ms):
    ms = max(0, min(ms, CLAMP_MS - 1))
    return bisect.bisect_right(EDGES, ms) - 1


def bucket_hi(b):
    return EDGES[b + 1] - 1


def hist_percentile(buckets, pct):
    """Nearest rank over a list of bucket indices (the documented rule)."""
    if not buckets:
        return None
    s = sorted(buckets)
    rank = (len(s) * pct + 99) // 100
    return bucket_hi(s[rank - 1])


def exact_percentile(values, pct):
    s = sorted(values)
    return s[(len(s) * pct + 99) // 100 - 1]


# ---- rows ---------------------------------------------------------------

def load_rows(path, first_id=1):
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        for i, r in enumerate(csv.DictReader(f)):
            rows.append({
                "id": first_id + i,
                "start_ms": int(r["start_ms"]), "caller": r["caller"], "client": r["client"],
                "model": r["model"], "route": r["route"],
                "prompt": int(r["prompt_tokens"] or 0), "cached": int(r["cached_tokens"] or 0),
                "completion": int(r["completion_tokens"] or 0),
                "ttft": int(r["ttft_ms"]) if r["ttft_ms"] else -1,
                "total": int(r["total_ms"]),
                "tps": float(r["decode_tps"]) if r["decode_tps"] else 0.0,
                "status": int(r["http_status"]), "error": r["error_kind"],
                "power": float(r["gpu_power_w"]) if r["gpu_power_w"] else -1.0,
                "busy": int(r["busy_ms"] or 0),
            })
    return rows


def is_error(r):
    return r["status"] >= 400 or bool(r["error"])


# ---- weeks --------------------------------------------------------------

def label_of(first_day):
    y, w, _ = (first_day + dt.timedelta(days=3)).isocalendar()
    return f"{y:04d}-W{w:02d}"


def midnight_ms(tz, day):
    return int(dt.datetime(day.year, day.month, day.day, tzinfo=tz).timestamp() * 1000)


def week_from_label(label, tz, week_start):
    y, w = int(label[:4]), int(label[6:])
    monday = dt.date.fromisocalendar(y, w, 1)
    k = DAYS.index(week_start)
    first = monday + dt.timedelta(days=k if k + 3 <= 6 else k - 7)
    return first


def week_info(first, tz):
    return {"label": label_of(first), "first": first,
            "start_ms": midnight_ms(tz, first),
            "end_ms": midnight_ms(tz, first + dt.timedelta(days=7))}


# ---- accumulation -------------------------------------------------------

class Acc:
    def __init__(self):
        self.calls = self.errors = self.prompt = self.cached = self.completion = 0
        self.ttft, self.total = [], []
        self.decode_tokens, self.decode_s = 0, 0.0
        self.upstream_usd = 0.0
        self.unpriced = 0
        self.busy = self.busy_unmeasured = 0
        self.energy = 0.0
        self.lp = self.lc = self.lcomp = 0

    def add(self, r, price):
        self.calls += 1
        err = is_error(r)
        self.errors += err
        self.prompt += r["prompt"]
        self.cached += r["cached"]
        self.completion += r["completion"]
        if not err:
            self.total.append(bucket(r["total"]))
            if r["ttft"] >= 0:
                self.ttft.append(bucket(r["ttft"]))
            if r["tps"] > 0 and r["completion"] > 0:
                self.decode_tokens += r["completion"]
                self.decode_s += r["completion"] / r["tps"]
        if r["route"] == "local":
            self.busy += r["busy"]
            if r["power"] >= 0:
                self.energy += r["power"] * r["busy"]
            else:
                self.busy_unmeasured += r["busy"]
            self.lp += r["prompt"]
            self.lc += r["cached"]
            self.lcomp += r["completion"]
        elif price:
            self.upstream_usd += price_usd(price, r["prompt"], r["cached"], r["completion"])
        else:
            self.unpriced += r["prompt"] + r["completion"]

    def kwh(self, st):
        return (self.energy + st["gpu_watts"] * self.busy_unmeasured) / 3.6e9

    def figures(self, st, fixed_share):
        tokens = self.prompt + self.completion
        cost = self.upstream_usd * st["usd_rate"] + self.kwh(st) * st["kwh_price"] + fixed_share
        return {
            "calls": self.calls, "prompt_tokens": self.prompt, "cached_tokens": self.cached,
            "completion_tokens": self.completion, "total_tokens": tokens,
            "ttft_p50_ms": hist_percentile(self.ttft, 50),
            "ttft_p95_ms": hist_percentile(self.ttft, 95),
            "latency_p50_ms": hist_percentile(self.total, 50),
            "latency_p95_ms": hist_percentile(self.total, 95),
            "decode_tps": self.decode_tokens / self.decode_s if self.decode_s > 0 else None,
            "error_rate": self.errors / self.calls if self.calls else None,
            "cost": cost,
            "cost_per_1k_tokens": cost / tokens * 1000 if tokens else None,
        }


def price_usd(p, prompt, cached, completion):
    return ((prompt - cached) * p["input"] + cached * p["cached_input"]
            + completion * p["output"]) / 1e6


def load_prices(builtin_path, user_path=None):
    table = []

    def add(path):
        with open(path, encoding="utf-8") as f:
            for e in json.load(f)["entries"]:
                e = dict(e)
                if e.get("cached_input") is None:
                    e["cached_input"] = e["input"]
                table[:] = [t for t in table
                            if (t["provider"], t["model"]) != (e["provider"], e["model"])]
                table.append(e)
    add(builtin_path)
    if user_path:
        add(user_path)
    return table


def find_price(table, provider, model):
    wild = None
    for p in table:
        if p["provider"] == provider:
            if p["model"] == model:
                return p
            if p["model"] == "*":
                wild = p
    return wild


def fixed_per_week(st):
    return (st["hardware_price"] / st["amortisation_months"] + st["fixed_monthly"]) / WEEKS_PER_MONTH


# ---- the report ---------------------------------------------------------

def change(prev, cur):
    if cur is None:
        return None
    if prev is None or prev == 0:
        if cur == 0:
            return None if prev is None else 0.0
        return "new"
    return (cur - prev) / prev * 100.0


def worse(better, p, q, min_pct):
    if better < 0:
        return q > p * (1 + min_pct / 100.0)
    return q < p * (1 - min_pct / 100.0)


def report(rows, st, prices, week_label, n_weeks):
    """st: settings dict (timezone, week_start, usd_rate, hardware_price,
    amortisation_months, gpu_watts, kwh_price, fixed_monthly, compare,
    sensitivity, api_below_tokens, local_above_tokens, alert_pct,
    trend_min_pct, tail_rows)."""
    tz = ZoneInfo(st["timezone"])
    target = week_from_label(week_label, tz, st["week_start"])
    total_weeks = n_weeks + 4
    weeks = [week_info(target + dt.timedelta(weeks=i - total_weeks + 1), tz)
             for i in range(total_weeks)]
    starts = [w["start_ms"] for w in weeks]
    first_ms = min(r["start_ms"] for r in rows)
    accs = [{"total": Acc(), "dims": {d: {} for d in DIMS}, "unpriced": set()} for _ in weeks]
    for r in rows:
        if r["start_ms"] < starts[0] or r["start_ms"] >= weeks[-1]["end_ms"]:
            continue
        i = bisect.bisect_right(starts, r["start_ms"]) - 1
        a = accs[i]
        price = None if r["route"] == "local" else find_price(prices, r["route"], r["model"])
        if r["route"] != "local" and price is None:
            a["unpriced"].add(f'{r["route"]}/{r["model"]}')
        a["total"].add(r, price)
        for d in DIMS:
            a["dims"][d].setdefault(r[d], Acc()).add(r, price)
    fixed = fixed_per_week(st)
    out_weeks = []
    for w, a in zip(weeks, accs):
        has = w["end_ms"] > first_ms
        f = a["total"].figures(st, fixed if has else 0)
        if not has:
            f = {k: None for k, _ in METRICS}
        busy = a["total"].busy
        breakdown = {}
        for d in DIMS:
            groups = []
            for name, g in a["dims"][d].items():
                share = fixed * g.busy / busy if busy > 0 else 0.0
                groups.append({"name": name, "figures": g.figures(st, share)})
            groups.sort(key=lambda g: (-g["figures"]["calls"], g["name"].encode()))
            breakdown[d] = groups
        t = a["total"]
        out_weeks.append({
            "week": w["label"], "start_ms": w["start_ms"], "end_ms": w["end_ms"],
            "has_data": has, "figures": f, "breakdown": breakdown,
            "cost": {"upstream": t.upstream_usd * st["usd_rate"],
                     "electricity": t.kwh(st) * st["kwh_price"],
                     "fixed": fixed if has else 0.0, "local_kwh": t.kwh(st),
                     "local_busy_ms": t.busy, "local_tokens": t.lp + t.lcomp,
                     "unpriced_tokens": t.unpriced,
                     "unpriced_routes": sorted(a["unpriced"])},
            "_acc": t,
        })
    for i, w in enumerate(out_weeks):
        ch, avg, vs = {}, {}, {}
        for k, _ in METRICS:
            cur = w["figures"][k]
            ch[k] = change(out_weeks[i - 1]["figures"][k], cur) if i > 0 else None
            vals = [o["figures"][k] for o in out_weeks[max(0, i - 4):i]
                    if o["figures"][k] is not None]
            avg[k] = sum(vals) / len(vals) if vals else None
            vs[k] = (None if cur is None or avg[k] is None or avg[k] == 0
                     else (cur - avg[k]) / avg[k] * 100.0)
        w["change_pct"], w["avg4"], w["vs_avg4_pct"] = ch, avg, vs

    cur = out_weeks[-1]
    if cur["figures"]["calls"] in (None, 0):
        raise ValueError("no data in the reported week")
    alerts = []
    w0, w1, w2 = out_weeks[-3], out_weeks[-2], out_weeks[-1]
    for k, better in METRICS:
        a, b, c = w0["figures"][k], w1["figures"][k], w2["figures"][k]
        if better and None not in (a, b, c) and worse(better, a, b, st["trend_min_pct"]) \
                and worse(better, b, c, st["trend_min_pct"]):
            alerts.append({"kind": "trend", "metric": k})
    for k, _ in METRICS:
        d = w2["vs_avg4_pct"][k]
        if d is not None and abs(d) > st["alert_pct"]:
            alerts.append({"kind": "off_average", "metric": k})

    # Recommendation over the last four weeks with data.
    last4 = [w for w in out_weeks[-4:] if w["has_data"]]
    monthly = (sum(w["figures"]["total_tokens"] for w in last4) / len(last4) * WEEKS_PER_MONTH
               if last4 else 0)
    if st["sensitivity"] == "high":
        verdict = "local"
    elif monthly < st["api_below_tokens"]:
        verdict = "api"
    elif monthly <= st["local_above_tokens"]:
        verdict = "hybrid"
    else:
        verdict = "local"

    # API comparison for the reported week's local tokens.
    t = cur["_acc"]
    elec = t.kwh(st) * st["kwh_price"]
    comps = []
    for key in st["compare"]:
        provider, model = key.split("/", 1)
        p = find_price(prices, provider, model)
        c = {"api": key, "priced": p is not None}
        if p:
            api = price_usd(p, t.lp, t.lc, t.lcomp) * st["usd_rate"]
            running = api - elec - st["fixed_monthly"] / WEEKS_PER_MONTH
            c.update(api_cost=api, local_cost=elec + fixed, saving=api - elec - fixed,
                     payback_months=(0.0 if st["hardware_price"] <= 0 else
                                     st["hardware_price"] / (running * WEEKS_PER_MONTH)
                                     if running > 0 else None))
        else:
            c.update(api_cost=None, local_cost=elec + fixed, saving=None, payback_months=None)
        comps.append(c)

    # Slow tail: ok requests of the week slower than its latency P95.
    thr = cur["figures"]["latency_p95_ms"]
    wk = weeks[-1]
    tail_rows = [r for r in rows if wk["start_ms"] <= r["start_ms"] < wk["end_ms"]
                 and not is_error(r) and r["total"] > thr]
    tail_rows.sort(key=lambda r: (-r["total"], r["start_ms"], r["id"]))

    def top(key_fn):
        counts = {}
        for r in tail_rows:
            k = key_fn(r)
            counts[k] = counts.get(k, 0) + 1
        if not counts:
            return None, 0
        best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].encode()))[0]
        return best

    def call_share(dim, name):
        for g in cur["breakdown"][dim]:
            if g["name"] == name:
                return g["figures"]["calls"] / cur["figures"]["calls"]
        return 0

    tail = {"threshold_ms": thr, "count": len(tail_rows),
            "slowest": [{"start_ms": r["start_ms"], "caller": r["caller"], "client": r["client"],
                         "model": r["model"], "route": r["route"],
                         "prompt_tokens": r["prompt"], "completion_tokens": r["completion"],
                         "ttft_ms": r["ttft"] if r["ttft"] >= 0 else None,
                         "total_ms": r["total"]} for r in tail_rows[:st["tail_rows"]]]}
    if tail_rows:
        n = len(tail_rows)
        caller, nc = top(lambda r: r["caller"])
        model, nm = top(lambda r: r["model"])
        hour, nh = top(lambda r: dt.datetime.fromtimestamp(r["start_ms"] // 1000, tz)
                       .strftime("%Y-%m-%d %H:00"))
        tail["top_caller"] = {"name": caller, "tail_share": nc / n,
                              "call_share": call_share("caller", caller)}
        tail["top_model"] = {"name": model, "tail_share": nm / n,
                             "call_share": call_share("model", model)}
        tail["top_hour"] = {"name": hour, "tail_share": nh / n}
        tail["tail_mean_prompt_tokens"] = sum(r["prompt"] for r in tail_rows) / n
        tail["week_mean_prompt_tokens"] = cur["figures"]["prompt_tokens"] / cur["figures"]["calls"]

    for w in out_weeks:
        del w["_acc"]
    return {"week": week_label, "weeks": out_weeks[4:], "alerts": alerts,
            "cost_comparison": comps, "tail": tail,
            "recommendation": {"verdict": verdict, "monthly_tokens": monthly,
                               "weeks_used": len(last4)}}


# ---- comparison ---------------------------------------------------------

def compare(expected, actual, path="$", errors=None, limit=25):
    """Differences between expected (a subset) and actual, as strings."""
    if errors is None:
        errors = []
    if len(errors) >= limit:
        return errors
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            errors.append(f"{path}: expected an object, got {actual!r}")
            return errors
        for k, v in expected.items():
            if k not in actual:
                errors.append(f"{path}.{k}: missing")
            else:
                compare(v, actual[k], f"{path}.{k}", errors, limit)
    elif isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            errors.append(f"{path}: expected {len(expected)} items, got "
                          f"{len(actual) if isinstance(actual, list) else actual!r}")
            return errors
        for i, (e, a) in enumerate(zip(expected, actual)):
            compare(e, a, f"{path}[{i}]", errors, limit)
    elif isinstance(expected, bool) or expected is None or isinstance(expected, str):
        if expected != actual:
            errors.append(f"{path}: expected {expected!r}, got {actual!r}")
    elif isinstance(expected, int):
        if not isinstance(actual, int) or isinstance(actual, bool) or actual != expected:
            errors.append(f"{path}: expected {expected!r}, got {actual!r}")
    elif isinstance(expected, float):
        if not isinstance(actual, (int, float)) or isinstance(actual, bool) or \
                not math.isclose(expected, actual, rel_tol=1e-9, abs_tol=1e-12):
            errors.append(f"{path}: expected {expected!r}, got {actual!r}")
    return errors

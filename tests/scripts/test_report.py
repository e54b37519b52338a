#!/usr/bin/python3
"""The weekly report against an independent reference (usage_ref.py).

Generates ~120k synthetic requests over two spans of weeks (gen_usage.py),
imports them with `moedesk-cli usage import-csv`, then for each scenario
writes settings.ini, runs `moedesk-cli report weekly --format json` and
compares every figure of every shown week, the breakdowns, costs, changes,
four-week averages, alerts, slow tail, API comparison and verdict with the
reference computed from the raw CSV rows (so the store's hourly roll-ups
are checked against raw-row figures). Scenarios cover the Berlin DST
changes (167- and 169-hour weeks), ISO week 53 of 2026, Sunday-start weeks,
a half-hour zone (partial hours read from raw rows), weeks before the first
request, an empty week and a week after it ("new"). Percentiles are also
checked against exact nearest-rank values: never below, at most 1 % above.

Usage: test_report.py MOEDESK_CLI   (MOE_SOURCE_ROOT from meson)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_usage  # noqa: E402
import usage_ref as ref  # noqa: E402

SPANS = [("2026-02-23", 16, 3000), ("2026-09-28", 15, 3000)]
SKIP = ["2026-11-11"]  # UTC week 2026-W46 gets no rows

USER_PRICES = {
    "entries": [
        # A self-hosted upstream priced flat, and an override of a built-in entry.
        {"provider": "cluster", "model": "*", "input": 0.5, "cached_input": 0.1, "output": 2.0},
        {"provider": "moonshot", "model": "kimi-k2.6", "input": 1.0, "cached_input": 0.2,
         "output": 4.5, "source": "test", "checked": "2026-11-29", "confirmed": True},
    ]
}

DEFAULTS = dict(timezone="UTC", week_start="monday", usd_rate=1.0, hardware_price=2500.0,
                amortisation_months=36.0, gpu_watts=350.0, kwh_price=0.30, fixed_monthly=0.0,
                compare=["openai/gpt-5.4-mini", "deepseek/deepseek-v4-flash",
                         "moonshot/kimi-k2.6", "openrouter/qwen/qwen3-30b-a3b-instruct-2507"],
                sensitivity="normal", api_below_tokens=1e8, local_above_tokens=5e8,
                alert_pct=30.0, trend_min_pct=1.0, tail_rows=10)

SCENARIOS = [
    ("berlin-spring-dst", dict(timezone="Europe/Berlin"), "2026-W14", 12),
    ("berlin-autumn-dst", dict(timezone="Europe/Berlin", tail_rows=25), "2026-W44", 12),
    ("iso-week-53", dict(timezone="UTC"), "2026-W53", 12),
    ("new-york-sunday-eur", dict(timezone="America/New_York", week_start="sunday",
                                 currency="EUR", usd_rate=0.92, hardware_price=4000.0,
                                 fixed_monthly=25.0, sensitivity="high", gpu_watts=300.0,
                                 compare=["openai/gpt-5.5", "cluster/anything", "nobody/none"]),
     "2027-W01", 6),
    ("kolkata-half-hour", dict(timezone="Asia/Kolkata", alert_pct=10.0), "2026-W12", 5),
    ("empty-week-then-new", dict(timezone="UTC"), "2026-W47", 4),
    ("before-first-data", dict(timezone="UTC", api_below_tokens=1e6,
                               local_above_tokens=2e7), "2026-W10", 12),
    ("one-week-only", dict(timezone="Europe/Berlin", kwh_price=0.45), "2026-W40", 1),
]


def write_settings(path, st):
    with open(path, "w", encoding="utf-8") as f:
        f.write("[report]\n")
        for k, v in st.items():
            if k == "compare":
                v = ";".join(v)
            f.write(f"{k} = {v}\n")


def run(cli, args, env):
    p = subprocess.run([cli] + args, capture_output=True, text=True, env=env)
    return p


def check_percentile_bounds(rows, week, tz_name, failures, name):
    """Reported P50/P95 against exact nearest rank on the week's raw rows."""
    start, end = week["start_ms"], week["end_ms"]
    ok_rows = [r for r in rows if start <= r["start_ms"] < end and not ref.is_error(r)]
    for key, field in (("ttft", "ttft"), ("latency", "total")):
        values = [r[field] for r in ok_rows if r[field] >= 0]
        for pct in (50, 95):
            got = week["figures"][f"{key}_p{pct}_ms"]
            if not values:
                if got is not None:
                    failures.append(f"{name} {week['week']}: {key} P{pct} should be null")
                continue
            exact = ref.exact_percentile(values, pct)
            if not (exact <= got <= exact * 1.01):
                failures.append(f"{name} {week['week']}: {key} P{pct} = {got}, exact {exact}")
            if exact < 200 and got != exact:
                failures.append(f"{name} {week['week']}: {key} P{pct} = {got} != exact {exact}")


def main():
    cli = os.path.abspath(sys.argv[1])
    root = os.environ.get("MOE_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
    tmp = tempfile.mkdtemp(prefix="moedesk-report-")
    failures = []
    try:
        csv_path = os.path.join(tmp, "usage.csv")
        rows_raw = gen_usage.generate(SPANS, SKIP, seed=7)
        gen_usage.write_csv(csv_path, rows_raw)
        db = os.path.join(tmp, "usage.sqlite3")
        cfg = os.path.join(tmp, "config")
        os.makedirs(cfg)
        env = dict(os.environ, MOEDESK_CONFIG_DIR=cfg, TZ="UTC")
        p = run(cli, ["usage", "import-csv", csv_path, "--db", db], env)
        if p.returncode != 0:
            print(p.stdout, p.stderr)
            return 1
        print(p.stdout.strip())
        rows = ref.load_rows(csv_path)
        with open(os.path.join(cfg, "prices.json"), "w", encoding="utf-8") as f:
            json.dump(USER_PRICES, f)
        prices = ref.load_prices(os.path.join(root, "resources", "prices.json"),
                                 os.path.join(cfg, "prices.json"))

        for name, overrides, week, n_weeks in SCENARIOS:
            st = dict(DEFAULTS, **overrides)
            write_settings(os.path.join(cfg, "settings.ini"), st)
            p = run(cli, ["report", "weekly", "--db", db, "--week", week, "--weeks",
                          str(n_weeks), "--format", "json"], env)
            if p.returncode != 0:
                failures.append(f"{name}: exit {p.returncode}: {p.stderr.strip()}")
                continue
            actual = json.loads(p.stdout)
            expected = ref.report(rows, st, prices, week, n_weeks)
            errs = ref.compare(expected, actual)
            failures += [f"{name}: {e}" for e in errs]
            for w in actual["weeks"]:
                if w["figures"]["calls"]:
                    check_percentile_bounds(rows, w, st["timezone"], failures, name)
            weeks = {w["week"]: w for w in actual["weeks"]}
            hours = {k: (w["end_ms"] - w["start_ms"]) / 3.6e6 for k, w in weeks.items()}
            if name == "berlin-spring-dst" and hours.get("2026-W13") != 167:
                failures.append(f"{name}: 2026-W13 should last 167 h, got {hours.get('2026-W13')}")
            if name == "berlin-autumn-dst" and hours.get("2026-W43") != 169:
                failures.append(f"{name}: 2026-W43 should last 169 h, got {hours.get('2026-W43')}")
            if name == "iso-week-53":
                w53 = weeks.get("2026-W53")
                if not w53 or not w53["start"].startswith("2026-12-28") or \
                        not w53["end"].startswith("2027-01-04"):
                    failures.append(f"{name}: 2026-W53 should run 2026-12-28 to 2027-01-03")
            if name == "empty-week-then-new":
                empty, after = weeks["2026-W46"], weeks["2026-W47"]
                if empty["figures"]["calls"] != 0 or empty["figures"]["ttft_p95_ms"] is not None \
                        or not empty["has_data"]:
                    failures.append(f"{name}: 2026-W46 should be an empty week with data before it")
                if after["change_pct"]["calls"] != "new":
                    failures.append(f"{name}: calls after an empty week should change by 'new'")
            if name == "before-first-data" and actual["weeks"][0]["has_data"]:
                failures.append(f"{name}: weeks before the first request must have no data")
            if name == "new-york-sunday-eur" and actual["recommendation"]["verdict"] != "local":
                failures.append(f"{name}: high sensitivity must recommend local")
            print(f"{name}: {len(errs)} differences")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures[:60]:
        print("FAIL", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

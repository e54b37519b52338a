#!/usr/bin/python3
"""The human outputs of `moedesk-cli report weekly` render and agree with
the JSON:

- Markdown has every section of the weekly template; the "Next week" text a
  user wrote survives a rewrite of the same file (and the placeholder comes
  back when the section is empty); -o onto a symlink writes through it;
- HTML is well formed (every non-void tag closed, in order), holds the four
  SVG charts (calls and tokens as bars, TTFT P95 and cost per 1k as lines)
  with one bar/point per week, and headless Chromium renders it to a
  non-blank 1280x2400 PNG (written to $MOE_SCREENSHOT_OUT when set: that is
  how docs/screenshots/report-weekly.png is made);
- CSV has one row per week and scope with the same numbers as the JSON.

Usage: test_report_render.py MOEDESK_CLI [CHROMIUM]
"""
import csv
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from html.parser import HTMLParser

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_usage  # noqa: E402

VOID = {"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "wbr", "source",
        "line", "rect", "circle", "polyline", "path"}
SECTIONS = ["# MoeDesk weekly report", "## Totals and week over week", "## Latency",
            "## Usage by route, model, caller and client", "## Cost", "## Anomalies",
            "### Slowest requests (P95 tail)", "## Recommendation", "## History",
            "## Next week"]


class Checker(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.svgs = [], [], []

    def handle_starttag(self, tag, attrs):
        if tag == "svg":
            self.svgs.append({"rect": 0, "circle": 0, "polyline": 0})
        elif self.svgs and tag in ("rect", "circle", "polyline") and "svg" in self.stack:
            self.svgs[-1][tag] += 1
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()


def png_check(path):
    """(width, height, share of non-zero bytes in the filtered image data)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, size = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    return size[0], size[1], sum(1 for b in raw[::97] if b) / len(raw[::97])


def main():
    cli = os.path.abspath(sys.argv[1])
    chromium = sys.argv[2] if len(sys.argv) > 2 else None
    tmp = tempfile.mkdtemp(prefix="moedesk-render-")
    fails = []
    try:
        csv_path, db = os.path.join(tmp, "u.csv"), os.path.join(tmp, "u.sqlite3")
        gen_usage.write_csv(csv_path, gen_usage.generate(
            [("2026-09-28", 15, 1500)], ["2026-11-11"], seed=3))
        cfg = os.path.join(tmp, "cfg")
        os.makedirs(cfg)
        with open(os.path.join(cfg, "settings.ini"), "w") as f:
            f.write("[report]\ntimezone = UTC\ncurrency = EUR\nusd_rate = 0.92\n"
                    "hardware_price = 2400\n")
        env = dict(os.environ, MOEDESK_CONFIG_DIR=cfg)
        subprocess.run([cli, "usage", "import-csv", csv_path, "--db", db], env=env, check=True,
                       capture_output=True)
        base = [cli, "report", "weekly", "--db", db, "--week", "2027-W01", "--weeks", "12"]

        def report(fmt, out=None):
            args = base + ["--format", fmt] + (["-o", out] if out else [])
            p = subprocess.run(args, env=env, capture_output=True, text=True)
            if p.returncode != 0:
                raise RuntimeError(f"{fmt}: exit {p.returncode}: {p.stderr}")
            return p.stdout
        data = json.loads(report("json"))

        # Markdown: template sections, then the user's "Next week" text kept.
        md_path = os.path.join(tmp, "weekly.md")
        report("md", md_path)
        md = open(md_path, encoding="utf-8").read()
        for s in SECTIONS:
            if f"\n{s}" not in "\n" + md:
                fails.append(f"markdown: section '{s}' missing")
        if "<!-- Plans and actions" not in md:
            fails.append("markdown: empty Next week section should hold the placeholder")
        note = "- Move the CI key to the cluster route.\n- Check TTFT after the driver update."
        open(md_path, "w", encoding="utf-8").write(md.replace(
            md[md.index("## Next week"):], "## Next week\n\n" + note + "\n"))
        report("md", md_path)
        md2 = open(md_path, encoding="utf-8").read()
        if not md2.rstrip().endswith(note) or "<!-- Plans and actions" in md2:
            fails.append("markdown: the user's Next week text was not kept")
        if md2.count("## Next week") != 1:
            fails.append("markdown: Next week section duplicated")
        # -o onto a symlink writes through it; the link stays a link.
        real, link = os.path.join(tmp, "real.md"), os.path.join(tmp, "link.md")
        open(real, "w").write("old\n")
        os.symlink(real, link)
        report("md", link)
        if not os.path.islink(link) or "## Totals and week over week" not in open(real).read():
            fails.append("markdown -o SYMLINK should write through the link, not replace it")
        stdout_md = report("md")
        if "<!-- Plans and actions" not in stdout_md:
            fails.append("markdown to stdout should carry the placeholder")

        # HTML: balanced tags, four charts with one mark per week.
        html_path = os.path.join(tmp, "weekly.html")
        report("html", html_path)
        html = open(html_path, encoding="utf-8").read()
        chk = Checker()
        chk.feed(html)
        chk.close()
        if chk.errors or chk.stack:
            fails.append(f"html: unbalanced tags: {chk.errors[:3]} open {chk.stack[:5]}")
        weeks = data["weeks"]
        with_calls = sum(1 for w in weeks if w["figures"]["calls"])
        with_ttft = sum(1 for w in weeks if w["figures"]["ttft_p95_ms"] is not None)
        if len(chk.svgs) != 4:
            fails.append(f"html: expected 4 charts, got {len(chk.svgs)}")
        else:
            calls, tokens, ttft, cost = chk.svgs
            if calls["rect"] != with_calls:
                fails.append(f"html: calls chart has {calls['rect']} bars, expected {with_calls}")
            if tokens["rect"] < with_calls:
                fails.append("html: tokens chart is missing bars")
            if ttft["circle"] != with_ttft or ttft["polyline"] < 1:
                fails.append(f"html: TTFT chart has {ttft['circle']} points, expected {with_ttft}")
            if cost["polyline"] < 1:
                fails.append("html: cost chart has no line")
        for needle in ("MoeDesk weekly report — 2027-W01", "Recommendation", "EUR"):
            if needle not in html:
                fails.append(f"html: '{needle}' missing")

        # CSV: same numbers as the JSON.
        rows = list(csv.DictReader(io.StringIO(report("csv"))))
        expected_rows = sum(1 + sum(len(v) for v in w["breakdown"].values()) for w in weeks)
        if len(rows) != expected_rows:
            fails.append(f"csv: {len(rows)} rows, expected {expected_rows}")
        totals = [r for r in rows if r["scope"] == "total"]
        for r, w in zip(totals, weeks):
            for k, v in w["figures"].items():
                got = r[k]
                if v is None:
                    ok = got == ""
                elif isinstance(v, int):
                    ok = got == str(v)
                else:
                    ok = abs(float(got) - v) <= 1e-12 * max(1.0, abs(v))
                if not ok:
                    fails.append(f"csv {w['week']} {k}: {got!r} vs json {v!r}")

        # Headless Chromium screenshot.
        if chromium:
            png = os.path.join(tmp, "report-weekly.png")
            profile = tempfile.mkdtemp(prefix="moedesk-chromium-")
            p = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                "--disable-quic", "--no-first-run",
                                "--disable-background-networking", "--disable-component-update",
                                "--disable-sync", f"--user-data-dir={profile}",
                                f"--screenshot={png}", "--window-size=1280,2400",
                                "file://" + html_path],
                               capture_output=True, text=True, timeout=180)
            shutil.rmtree(profile, ignore_errors=True)
            if not os.path.exists(png):
                fails.append(f"chromium wrote no screenshot (exit {p.returncode}): "
                             f"{p.stderr[-500:]}")
            else:
                w, h, ink = png_check(png)
                if (w, h) != (1280, 2400):
                    fails.append(f"screenshot is {w}x{h}, expected 1280x2400")
                if ink < 0.02:
                    fails.append(f"screenshot looks blank ({ink:.3%} non-zero filtered bytes)")
                print(f"screenshot {w}x{h}, {ink:.1%} non-zero filtered bytes")
                out = os.environ.get("MOE_SCREENSHOT_OUT")
                if out:
                    shutil.copyfile(png, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in fails:
        print("FAIL", f)
    print(f"{len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Adds up meson test results from one or more build folders.

Reads each BUILD/meson-logs/testlog.json (one JSON object per test) and
prints the plain summary line CI reads: `N passed, N failed[, N skipped]`.
Extra failures (e.g. a build step that broke, so its tests never ran) are
passed with --extra-failed. Exit status 1 if anything failed.
"""
import argparse
import json
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("builds", nargs="*")
    ap.add_argument("--extra-failed", type=int, default=0)
    args = ap.parse_args()
    passed = failed = skipped = 0
    failed += args.extra_failed
    for b in args.builds:
        path = os.path.join(b, "meson-logs", "testlog.json")
        if not os.path.exists(path):
            print(f"tally: {path}: missing (tests did not run)", file=sys.stderr)
            failed += 1
            continue
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                rec = json.loads(line)
                res = rec.get("result", "")
                if res in ("OK", "EXPECTEDFAIL"):
                    passed += 1
                elif res == "SKIP":
                    skipped += 1
                    print(f"tally: skipped: {b}: {rec.get('name')}", file=sys.stderr)
                else:
                    failed += 1
                    print(f"tally: {res}: {b}: {rec.get('name')}", file=sys.stderr)
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

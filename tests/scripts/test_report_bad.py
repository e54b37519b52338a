#!/usr/bin/python3
"""Bad input to `moedesk-cli report weekly` and `usage import-csv`: each case
must exit 1 (2 for a malformed command line), print one clear error naming
the thing at fault, and leave the database file byte for byte as it was
(SHA-256 before and after).

Cases: a file of garbage, another program's SQLite file, a database held
under an exclusive lock by another connection, a missing database (not
created), a week with no data, a week that does not exist, an unknown
format, a bad settings file, a malformed price file, and a CSV import with
a bad row (nothing imported).

Usage: test_report_bad.py MOEDESK_CLI
"""
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_usage  # noqa: E402


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    cli = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="moedesk-bad-")
    fails = []
    try:
        cfg = os.path.join(tmp, "cfg")
        os.makedirs(cfg)
        with open(os.path.join(cfg, "settings.ini"), "w") as f:
            f.write("[report]\ntimezone = UTC\n")
        env = dict(os.environ, MOEDESK_CONFIG_DIR=cfg)
        csv_path, db = os.path.join(tmp, "u.csv"), os.path.join(tmp, "u.sqlite3")
        gen_usage.write_csv(csv_path, gen_usage.generate([("2026-03-02", 3, 400)], [], seed=5))
        subprocess.run([cli, "usage", "import-csv", csv_path, "--db", db], env=env, check=True,
                       capture_output=True)

        def expect(name, args, want_exit, needles, path=None, env_=None):
            before = sha(path) if path else None
            t0 = time.time()
            p = subprocess.run([cli] + args, env=env_ or env, capture_output=True, text=True)
            took = time.time() - t0
            err = p.stderr.strip()
            if p.returncode != want_exit:
                fails.append(f"{name}: exit {p.returncode}, expected {want_exit}: {err}")
            if p.stdout.strip() and want_exit:
                fails.append(f"{name}: printed a report on failure")
            for n in needles:
                if n not in err:
                    fails.append(f"{name}: error should mention {n!r}: {err!r}")
            if err.count("\n") > 0:
                fails.append(f"{name}: error should be one line: {err!r}")
            if path and sha(path) != before:
                fails.append(f"{name}: {path} changed")
            print(f"{name}: exit {p.returncode} in {took:.1f} s: {err}")
            return took

        weekly = ["report", "weekly", "--format", "json"]
        # Sanity: the good database reports.
        expect("good", weekly + ["--db", db, "--week", "2026-W11"], 0, [], db)

        junk = os.path.join(tmp, "junk.sqlite3")
        with open(junk, "wb") as f:
            f.write(bytes((i * 131 + 7) % 256 for i in range(16384)))
        expect("corrupt file", weekly + ["--db", junk, "--week", "2026-W11"], 1,
               [junk, "not a database"], junk)

        other = os.path.join(tmp, "other.sqlite3")
        con = sqlite3.connect(other)
        con.execute("CREATE TABLE notes (x)")
        con.commit()
        con.close()
        expect("foreign database", weekly + ["--db", other, "--week", "2026-W11"], 1,
               [other, "not a MoeDesk usage database"], other)

        locked = os.path.join(tmp, "locked.sqlite3")
        shutil.copyfile(db, locked)
        # Hash first: closing any descriptor of the file in this process would
        # drop the holder's POSIX locks.
        before = sha(locked)
        holder = sqlite3.connect(locked, isolation_level=None)
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("SELECT count(*) FROM requests").fetchone()
        took = expect("locked database", weekly + ["--db", locked, "--week", "2026-W11"], 1,
                      [locked, "locked"])
        holder.execute("ROLLBACK")
        holder.close()
        if sha(locked) != before:
            fails.append("locked database: file changed")
        if took > 30:
            fails.append(f"locked database: took {took:.0f} s to give up")

        missing = os.path.join(tmp, "nope", "usage.sqlite3")
        expect("missing database", weekly + ["--db", missing, "--week", "2026-W11"], 1,
               [missing, "no such usage database"])
        if os.path.exists(missing):
            fails.append("missing database: a file was created")

        expect("week without data", weekly + ["--db", db, "--week", "2026-W20"], 1,
               [db, "no usage recorded in week 2026-W20", "2026-05-11"], db)
        expect("week that does not exist", weekly + ["--db", db, "--week", "2025-W53"], 1,
               ["2025-W53", "ISO weeks 1 to 52"], db)
        expect("malformed week", weekly + ["--db", db, "--week", "W11"], 1, ["'W11'"], db)
        expect("unknown format", ["report", "weekly", "--db", db, "--week", "2026-W11",
                                  "--format", "xml"], 1, ["unknown format 'xml'"], db)
        expect("unknown option", ["report", "weekly", "--db", db, "--colour"], 2,
               ["--colour"], db)

        bad_cfg = os.path.join(tmp, "badcfg")
        os.makedirs(bad_cfg)
        with open(os.path.join(bad_cfg, "settings.ini"), "w") as f:
            f.write("[report]\ntimezone = Mars/Olympus_Mons\n")
        expect("bad time zone", weekly + ["--db", db, "--week", "2026-W11"], 1,
               ["settings.ini", "timezone", "Mars/Olympus_Mons"], db,
               dict(env, MOEDESK_CONFIG_DIR=bad_cfg))
        with open(os.path.join(bad_cfg, "settings.ini"), "w") as f:
            f.write("[report]\nkwh_price = cheap\n")
        expect("bad number", weekly + ["--db", db, "--week", "2026-W11"], 1,
               ["settings.ini", "kwh_price", "not a number"], db,
               dict(env, MOEDESK_CONFIG_DIR=bad_cfg))
        with open(os.path.join(bad_cfg, "settings.ini"), "w") as f:
            f.write("[report]\n")
        with open(os.path.join(bad_cfg, "prices.json"), "w") as f:
            f.write('{"entries": [{"provider": "x", "model": "y", "input": -1, "output": 2}]}')
        expect("bad price file", weekly + ["--db", db, "--week", "2026-W11"], 1,
               ["prices.json", "entries[0]"], db, dict(env, MOEDESK_CONFIG_DIR=bad_cfg))

        bad_csv = os.path.join(tmp, "bad.csv")
        with open(csv_path, encoding="utf-8") as f:
            lines = f.readlines()
        lines[5] = lines[5].replace(",200,", ",twohundred,", 1) if ",200," in lines[5] \
            else lines[5].replace(",", ",x", 1)
        with open(bad_csv, "w", encoding="utf-8") as f:
            f.writelines(lines)
        expect("bad csv row", ["usage", "import-csv", bad_csv, "--db", db], 1,
               [bad_csv + ":6:"], db)
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        n = con.execute("SELECT count(*) FROM requests").fetchone()[0]
        con.close()
        if n != len(lines) - 1:
            fails.append(f"bad csv row: database has {n} rows, expected {len(lines) - 1}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in fails:
        print("FAIL", f)
    print(f"{len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""test_keys_cli.py — `moedesk-cli keys` end to end in a throw-away data
folder, checked independently with Python's sqlite3 and hashlib: the key's
format, that only its SHA-256 is on disk, the exit codes (0 ok, 1 failure,
2 usage), the "shown only once" notice, list and revoke.

usage: test_keys_cli.py MOEDESK_CLI
"""
import hashlib
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

CLI = sys.argv[1]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def run(env, *args):
    p = subprocess.run([CLI, "keys", *args], env=env, capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout, p.stderr


with tempfile.TemporaryDirectory() as tmp:
    env = dict(os.environ, MOEDESK_DATA_DIR=os.path.join(tmp, "data"))
    db_path = os.path.join(tmp, "data", "keys.sqlite3")

    rc, out, err = run(env, "list")
    check(rc == 0 and "no API keys" in out, f"empty list: {rc} {out!r} {err!r}")

    rc, out, err = run(env, "create", "ci-bot")
    key = out.strip()
    check(rc == 0, f"create: rc {rc}, {err!r}")
    check(re.fullmatch(r"mdk-[A-Za-z0-9_-]{43}", key) is not None, f"key format: {key!r}")
    check("only this once" in err, f"create notice: {err!r}")
    check(key not in err, "the key is printed only on stdout")

    rc2, out2, _ = run(env, "create", "second")
    check(rc2 == 0 and out2.strip() != key, "a second key differs")

    # Only the hash is stored.
    con = sqlite3.connect(db_path)
    rows = dict(con.execute("SELECT name, hash FROM keys").fetchall())
    con.close()
    check(rows.get("ci-bot") == hashlib.sha256(key.encode()).hexdigest(), f"stored hash {rows}")
    with open(db_path, "rb") as f:
        check(key[4:].encode() not in f.read(), "plaintext key in the database file")
    check(os.stat(db_path).st_mode & 0o777 == 0o600, "database mode 0600")

    for args, want, what in [
        (("create", "ci-bot"), 1, "duplicate name"),
        (("create", "CI-BOT"), 1, "duplicate name in another case"),
        (("create", "gui"), 2, "reserved name"),
        (("create", "anonymous"), 2, "reserved name"),
        (("create", "a b"), 2, "bad name"),
        (("create", "x" * 65), 2, "long name"),
        (("create",), 2, "missing name"),
        (("create", "a", "b"), 2, "extra argument"),
        (("revoke", "nobody"), 1, "revoke unknown"),
        (("frob",), 2, "unknown subcommand"),
        ((), 2, "no subcommand"),
    ]:
        rc, out, err = run(env, *args)
        check(rc == want, f"{what}: {args} gave {rc}, wanted {want} ({err.strip()!r})")
        check(rc == 0 or "mdk-" not in out, f"{what}: printed a key")

    rc, out, err = run(env, "revoke", "ci-bot")
    check(rc == 0 and "revoked" in out, f"revoke: {rc} {out!r} {err!r}")
    rc, out, err = run(env, "revoke", "ci-bot")
    check(rc == 1, "revoking twice fails")
    rc, out, err = run(env, "list")
    lines = out.splitlines()
    check(rc == 0 and len(lines) == 3, f"list: {out!r}")
    check(any(l.startswith("ci-bot") and "revoked" in l for l in lines), "ci-bot revoked")
    check(any(l.startswith("second") and "active" in l for l in lines), "second active")
    con = sqlite3.connect(db_path)
    revoked = con.execute("SELECT revoked_at FROM keys WHERE name='ci-bot'").fetchone()[0]
    con.close()
    check(isinstance(revoked, int) and revoked > 0, "revoked_at set")

    rc, out, _ = run(env, "--help")
    check(rc == 0 and "keys create NAME" in out, "help")

    # A database that is not SQLite is a one-line error, exit 1.
    bad_env = dict(os.environ, MOEDESK_DATA_DIR=os.path.join(tmp, "bad"))
    os.makedirs(os.path.join(tmp, "bad"))
    with open(os.path.join(tmp, "bad", "keys.sqlite3"), "wb") as f:
        f.write(b"not a database" * 300)
    rc, out, err = run(bad_env, "list")
    check(rc == 1 and "keys.sqlite3" in err and len(err.strip().splitlines()) == 1,
          f"bad database: {rc} {err!r}")

print("keys CLI: %d failures" % failures)
sys.exit(1 if failures else 0)

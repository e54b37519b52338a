#!/usr/bin/python3
"""Team scale against a real PostgreSQL server that this test starts itself
(initdb into a temporary directory, a Unix socket only, trust auth; as root
the server runs as the `postgres` user via runuser).

- two gateways (two usage databases) export into one table; rows are keyed
  by (gateway_id, local_id), so exporting again, or everything again with
  --all, changes no count;
- `report weekly --postgres` over both gateways equals the independent
  reference computed from the union of their raw rows (usage_ref.py);
- `usage export --continuous` picks up rows added while it runs and exits 0
  on SIGTERM.

There is no silent skip: without PostgreSQL server binaries the test fails
and says what to install.

Usage: test_usage_pg.py MOEDESK_CLI   (MOE_SOURCE_ROOT from meson)
"""
import glob
import json
import os
import pwd
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_usage  # noqa: E402
import usage_ref as ref  # noqa: E402


def pg_bin():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return os.path.dirname(found[-1]) if found else None


class Server:
    def __init__(self, tmp):
        self.bin = pg_bin()
        if not self.bin:
            raise SystemExit("FAIL: PostgreSQL server binaries not found "
                             "(/usr/lib/postgresql/*/bin/initdb): install the postgresql package")
        self.root = os.geteuid() == 0
        self.dir = os.path.join(tmp, "pg")
        self.data = os.path.join(self.dir, "data")
        self.sock = os.path.join(self.dir, "sock")
        os.makedirs(self.sock)
        self.port = random.randint(20000, 60000)
        if self.root:
            os.chmod(tmp, 0o755)
            ent = pwd.getpwnam("postgres")
            for d in (self.dir, self.sock):
                os.chown(d, ent.pw_uid, ent.pw_gid)
        self.conninfo = f"host={self.sock} port={self.port} user=postgres dbname=postgres"
        self.started = False

    def _run(self, args, **kw):
        cmd = (["runuser", "-u", "postgres", "--"] if self.root else []) + args
        return subprocess.run(cmd, capture_output=True, text=True, **kw)

    def start(self):
        p = self._run([os.path.join(self.bin, "initdb"), "-D", self.data, "-U", "postgres",
                       "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"])
        if p.returncode:
            raise SystemExit(f"FAIL: initdb: {p.stderr}")
        opts = f"-k {self.sock} -c listen_addresses='' -p {self.port} -F"
        p = self._run([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-o", opts,
                       "-l", os.path.join(self.dir, "log"), "-w", "-t", "60", "start"])
        if p.returncode:
            log = open(os.path.join(self.dir, "log")).read()[-2000:]
            raise SystemExit(f"FAIL: pg_ctl start: {p.stderr}\n{log}")
        self.started = True

    def stop(self):
        if self.started:
            self._run([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "fast",
                       "-w", "stop"])

    def query(self, sql):
        p = subprocess.run([os.path.join(self.bin, "psql"), self.conninfo, "-Atc", sql],
                           capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"psql: {p.stderr}")
        return p.stdout.strip()


def main():
    cli = os.path.abspath(sys.argv[1])
    root = os.environ.get("MOE_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
    tmp = tempfile.mkdtemp(prefix="moedesk-pg-")
    fails = []
    server = None
    try:
        server = Server(tmp)
        server.start()
        url = server.conninfo
        cfg = os.path.join(tmp, "cfg")
        os.makedirs(cfg)
        with open(os.path.join(cfg, "settings.ini"), "w") as f:
            f.write("[report]\ntimezone = Europe/Berlin\n")
        env = dict(os.environ, MOEDESK_CONFIG_DIR=cfg)

        def cli_run(args):
            return subprocess.run([cli] + args, env=env, capture_output=True, text=True)

        gateways = []
        for name, seed in (("a", 11), ("b", 12)):
            csv_path = os.path.join(tmp, f"{name}.csv")
            gen_usage.write_csv(csv_path, gen_usage.generate([("2026-09-28", 10, 800)], [],
                                                             seed=seed))
            db = os.path.join(tmp, f"{name}.sqlite3")
            p = cli_run(["usage", "import-csv", csv_path, "--db", db])
            if p.returncode:
                raise SystemExit(f"FAIL: import: {p.stderr}")
            gateways.append((db, csv_path, ref.load_rows(csv_path)))
        n_total = sum(len(g[2]) for g in gateways)

        for db, _, rows in gateways:
            p = cli_run(["usage", "export", "--postgres", url, "--db", db, "--batch", "700"])
            if p.returncode or f"exported {len(rows)} rows" not in p.stdout:
                fails.append(f"export {db}: exit {p.returncode}: {p.stdout} {p.stderr}")
        count = int(server.query("SELECT count(*) FROM moedesk_requests"))
        gw = int(server.query("SELECT count(DISTINCT gateway_id) FROM moedesk_requests"))
        if count != n_total or gw != 2:
            fails.append(f"after export: {count} rows from {gw} gateways, expected {n_total} from 2")

        # Idempotent: nothing new, then everything again as upserts.
        db_a = gateways[0][0]
        p = cli_run(["usage", "export", "--postgres", url, "--db", db_a])
        if p.returncode or "exported" in p.stdout.replace("0 rows exported in total", ""):
            fails.append(f"second export should send nothing: {p.stdout} {p.stderr}")
        p = cli_run(["usage", "export", "--postgres", url, "--db", db_a, "--all"])
        if p.returncode or f"exported {len(gateways[0][2])} rows" not in p.stdout:
            fails.append(f"--all export: {p.stdout} {p.stderr}")
        count = int(server.query("SELECT count(*) FROM moedesk_requests"))
        if count != n_total:
            fails.append(f"after --all: {count} rows, expected {n_total}")

        # One report over both gateways.
        prices = ref.load_prices(os.path.join(root, "resources", "prices.json"))
        st = dict(timezone="Europe/Berlin", week_start="monday", usd_rate=1.0,
                  hardware_price=2500.0, amortisation_months=36.0, gpu_watts=350.0,
                  kwh_price=0.30, fixed_monthly=0.0,
                  compare=["openai/gpt-5.4-mini", "deepseek/deepseek-v4-flash",
                           "moonshot/kimi-k2.6", "openrouter/qwen/qwen3-30b-a3b-instruct-2507"],
                  sensitivity="normal", api_below_tokens=1e8, local_above_tokens=5e8,
                  alert_pct=30.0, trend_min_pct=1.0, tail_rows=10)
        union = gateways[0][2] + gateways[1][2]
        for week, n in (("2026-W49", 8), ("2026-W44", 4)):
            p = cli_run(["report", "weekly", "--postgres", url, "--week", week, "--weeks", str(n),
                         "--format", "json"])
            if p.returncode:
                fails.append(f"report {week} over postgres: {p.stderr}")
                continue
            actual = json.loads(p.stdout)
            errs = ref.compare(ref.report(union, st, prices, week, n), actual)
            fails += [f"report {week}: {e}" for e in errs]
            print(f"report {week} over postgres: {len(errs)} differences")

        # Continuous export picks up new rows, then stops cleanly on SIGTERM.
        more = os.path.join(tmp, "more.csv")
        extra = gen_usage.generate([("2026-12-07", 1, 300)], [], seed=13)
        gen_usage.write_csv(more, extra)
        proc = subprocess.Popen([cli, "usage", "export", "--postgres", url, "--db", db_a,
                                 "--continuous", "--interval", "1"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        p = cli_run(["usage", "import-csv", more, "--db", db_a])
        if p.returncode:
            fails.append(f"import while exporting: {p.stderr}")
        want = n_total + len(extra)
        deadline = time.time() + 30
        while time.time() < deadline and \
                int(server.query("SELECT count(*) FROM moedesk_requests")) < want:
            time.sleep(0.3)
        got = int(server.query("SELECT count(*) FROM moedesk_requests"))
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            fails.append("continuous export did not stop on SIGTERM")
        if got != want:
            fails.append(f"continuous export: {got} rows in postgres, expected {want}")
        if proc.returncode != 0:
            fails.append(f"continuous export exit {proc.returncode}: {err}")
        print(f"continuous export: {got} rows, exit {proc.returncode}")
    finally:
        if server:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    for f in fails:
        print("FAIL", f)
    print(f"{len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

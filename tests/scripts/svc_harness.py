"""svc_harness.py — start a real moedesk-service for a test and talk to it.

Each Service runs in a throw-away home (XDG_DATA_HOME, XDG_CONFIG_HOME,
XDG_CACHE_HOME and MOEDESK_DATA_DIR under a temporary directory), listens
on a free loopback port (--port 0; the port is read from the first stdout
line) and is stopped with SIGTERM, which must exit 0. It runs with
--no-tray unless tray=True, so a test run on a desktop does not put icons
on the user's panel. Stdlib only, so the tests run with Debian's
/usr/bin/python3.

    with Service(service_exe, model=demo_gguf) as svc:
        status, headers, body = svc.request("GET", "/health")
        doc = svc.json("POST", "/v1/chat/completions", {...})
"""
import http.client
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time


class Service:
    def __init__(self, exe, model=None, args=(), env=None, home=None, start_timeout=60,
                 tray=False):
        self.exe = exe
        self.model = model
        self.args = list(args) + ([] if tray else ["--no-tray"])
        self.extra_env = env or {}
        self._own_home = home is None
        self.home = home or tempfile.mkdtemp(prefix="moedesk-svc-")
        self.start_timeout = start_timeout
        self.proc = None
        self.port = None
        self.stderr_lines = []

    # -- paths in the throw-away home
    @property
    def data_dir(self):
        return os.path.join(self.home, "data", "moedesk")

    @property
    def usage_db(self):
        return os.path.join(self.data_dir, "usage.sqlite3")

    def env(self):
        e = dict(os.environ)
        e.update({
            "HOME": self.home,
            "XDG_DATA_HOME": os.path.join(self.home, "data"),
            "XDG_CONFIG_HOME": os.path.join(self.home, "config"),
            "XDG_CACHE_HOME": os.path.join(self.home, "cache"),
            "MOEDESK_DATA_DIR": self.data_dir,
            "G_DEBUG": "fatal-criticals",
        })
        e.update(self.extra_env)
        return e

    def start(self):
        cmd = [self.exe, "--port", "0"]
        if self.model:
            cmd += ["--model", self.model]
        cmd += self.args
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=self.env(), text=True)
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        deadline = time.time() + self.start_timeout
        line = ""
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if line or self.proc.poll() is not None:
                break
        m = re.search(r"listening on http://[^:]+:(\d+)", line or "")
        if not m:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("moedesk-service did not start: %r\nstderr:\n%s"
                               % (line, "".join(self.stderr_lines)))
        self.port = int(m.group(1))
        threading.Thread(target=self._drain_stdout, daemon=True).start()
        return self

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def _drain_stdout(self):
        for _ in self.proc.stdout:
            pass

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Stops the service; returns its exit code."""
        if not self.proc or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("moedesk-service did not stop within %d s after %s"
                               % (timeout, sig))

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        rc = self.stop()
        if exc[0] is None and rc != 0:
            raise RuntimeError("moedesk-service exited with %r\nstderr:\n%s"
                               % (rc, "".join(self.stderr_lines)))

    # -- HTTP
    def conn(self, timeout=120):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=120):
        """Returns (status, headers dict (lower-case names), body bytes)."""
        c = self.conn(timeout)
        h = {"Host": "127.0.0.1:%d" % self.port}
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        elif isinstance(body, str):
            body = body.encode()
        h.update(headers or {})
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        return r.status, hdrs, data

    def json(self, method, path, body=None, headers=None, expect=200, timeout=120):
        status, hdrs, data = self.request(method, path, body, headers, timeout)
        if expect is not None and status != expect:
            raise AssertionError("%s %s: expected %d, got %d: %s"
                                 % (method, path, expect, status, data[:500]))
        return json.loads(data) if data else None

    def raw(self, data, timeout=30):
        """Sends raw bytes on a fresh socket; returns everything read back."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        s.sendall(data)
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except socket.timeout:
            pass
        s.close()
        return out

    # -- usage rows
    def usage_rows(self):
        if not os.path.exists(self.usage_db):
            return []
        db = sqlite3.connect("file:%s?mode=ro" % self.usage_db, uri=True)
        db.row_factory = sqlite3.Row
        try:
            cols = [r[1] for r in db.execute("PRAGMA table_info(requests)")]
            if not cols:
                return []
            return [dict(r) for r in db.execute("SELECT * FROM requests ORDER BY id")]
        finally:
            db.close()


def sse_events(data):
    """Splits an SSE body into (event, data) pairs."""
    events = []
    for block in data.decode().split("\n\n"):
        if not block.strip():
            continue
        ev, payload = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                ev = line[6:].strip()
            elif line.startswith("data:"):
                payload.append(line[5:].lstrip())
        events.append((ev, "\n".join(payload)))
    return events


class Checker:
    """Counts checks; the script exits 1 if any failed."""

    def __init__(self):
        self.failed = 0
        self.passed = 0

    def check(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL:", what, flush=True)

    def eq(self, got, want, what):
        self.check(got == want, "%s: got %r, want %r" % (what, got, want))

    def done(self):
        print("%d checks passed, %d failed" % (self.passed, self.failed))
        raise SystemExit(1 if self.failed else 0)

"""test_service_durability.py — what happens to requests and usage rows when
moedesk-service stops, dies or changes its model (issue #5: clean
shutdown, metering after kill -9, model switching and idle unloading):

  a. SIGTERM while requests run: the running and queued ones finish within
     the grace period (10 s: short requests all do) or are cancelled after
     it (more work than 10 s); new requests get 503; the process exits 0;
     every request has its usage row.
  b. kill -9 while requests run: every request that finished more than a
     second before the kill has its row (the store commits every 250 ms);
     the database passes integrity_check; a restarted service appends.
  c. a second model installed in the data folder (a copy of the demo model
     with a manifest) is loaded by name and answers the same greedy text;
     switching back works; with --idle-unload 1 the model is unloaded after
     a second idle (/health says model null) and the next request loads it.

usage: test_service_durability.py MOEDESK_SERVICE DEMO_MODEL.gguf MOEDESK_CLI
"""
import atexit
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time

from svc_harness import Checker, Service, sse_events

exe, model = sys.argv[1], sys.argv[2]
cli = sys.argv[3]
t = Checker()
NAME = "moedesk-demo-random"


def body(content, max_tokens, stream=False, temperature=0, seed=0, model_name=NAME, bias=None):
    b = {"model": model_name, "messages": [{"role": "user", "content": content}],
         "max_tokens": max_tokens, "temperature": temperature, "seed": seed}
    if stream:
        b["stream"] = True
    if bias:
        b["logit_bias"] = bias
    return b


def end_token_bias():
    """logit_bias that bans the demo model's end-of-turn tokens, so a request
    runs to max_tokens (ids from moedesk-cli tokenize)."""
    out = subprocess.run([cli, "tokenize", "-m", model, "--parse-special"],
                         input="<|im_end|><|endoftext|>", capture_output=True, text=True,
                         check=True).stdout.split()
    return {tok: -100 for tok in out}


def outcome(status, data, stream):
    """'ok' for a complete answer, 'cancelled' for an error answer or a cut
    stream, with the error code when there is one."""
    if status == 200 and stream:
        ev = sse_events(data) if data else []
        if ev and ev[-1][1] == "[DONE]":
            return "ok", None
        for _, d in ev:
            try:
                e = json.loads(d).get("error")
            except ValueError:
                return "bad answer", d[:100]
            if e:
                return "cancelled", e.get("code")
        return "cancelled", None
    if status == 200:
        try:
            json.loads(data)["choices"][0]
        except (ValueError, KeyError, TypeError, IndexError):
            return "bad answer", data[:100]
        return "ok", None
    try:
        return "cancelled", json.loads(data)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return "cancelled", None


def fire(svc, bodies, out, user_agent):
    """Sends each body on its own thread; out[i] = (status, data, stream)."""
    def one(i, b):
        try:
            st, _, data = svc.request("POST", "/v1/chat/completions", b,
                                      headers={"User-Agent": "%s-%d" % (user_agent, i)},
                                      timeout=90)
            out[i] = (st, data, b.get("stream", False), time.monotonic())
        except OSError as e:
            out[i] = (None, repr(e).encode(), b.get("stream", False), time.monotonic())
    ths = [threading.Thread(target=one, args=(i, b)) for i, b in enumerate(bodies)]
    for th in ths:
        th.start()
    return ths


running = []  # services started outside a with block


@atexit.register
def _kill_running():
    """A failed check that raises must not leave a service running."""
    for s in running:
        if s.proc and s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


def wait_accepted(svc, n, timeout=15):
    """Waits until n requests are running or queued."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        h = svc.json("GET", "/health")
        if h.get("slots_processing", 0) + h.get("queued", 0) >= n:
            return True
        time.sleep(0.05)
    return False


# ---- a1. SIGTERM: requests that can finish within the grace period do -------
bias = end_token_bias()
t.eq(len(bias), 2, "the demo model's end tokens")
svc = Service(exe, model=model, args=["--parallel", "2", "--queue", "8"]).start()
running.append(svc)
out = [None] * 6
# 200 tokens each (end tokens banned): 0.1-0.3 s alone, so all six finish
# well within the grace period even on a slow (ASan) build.
ths = fire(svc, [body("Short story %d" % i, 200, stream=i % 2 == 1, temperature=1.0, seed=i,
                      bias=bias) for i in range(6)], out, "term-a1")
t.check(wait_accepted(svc, 5), "a1: requests running before SIGTERM")
svc.proc.send_signal(signal.SIGTERM)
# Once the signal is handled every request is refused (GET /health too);
# then a generation request must get 503 and its own row.
late = None
deadline = time.time() + 10
while time.time() < deadline:
    try:
        if svc.request("GET", "/health", timeout=10)[0] == 503:
            late = svc.request("POST", "/v1/chat/completions", body("Too late", 4),
                               headers={"User-Agent": "term-a1-late"}, timeout=30)
            break
    except OSError:
        break  # the listener is closed: everything has finished
    time.sleep(0.01)
t.check(late is not None, "a1: refusing requests while the running ones finish")
rc = svc.proc.wait(timeout=60)
for th in ths:
    th.join(60)
t.eq(rc, 0, "a1: exit 0 after SIGTERM")
t.eq([outcome(o[0], o[1], o[2])[0] for o in out], ["ok"] * 6,
     "a1: requests running at SIGTERM finish")
metered = 6
if late is not None:
    metered += 1
    t.eq(late[0], 503, "a1: a request after SIGTERM gets 503")
    t.eq(json.loads(late[2])["error"]["code"], "shutting_down", "a1: 503 says shutting_down")
rows = svc.usage_rows()
t.eq(len(rows), metered, "a1: one usage row per request")
t.eq(sorted(r["http_status"] for r in rows if r["client"].startswith("term-a1-")
            and r["client"] != "term-a1-late"), [200] * 6, "a1: rows of the finished requests")

# ---- a2. SIGTERM: more work than the grace period allows is cancelled -------
svc = Service(exe, model=model, args=["--parallel", "1", "--queue", "32"]).start()
running.append(svc)
N2 = 16
out = [None] * N2
# With its end tokens banned each request makes 4,000 tokens (2-3 s here
# alone, 10 s and more with other tests running), so sixteen of them one at
# a time outlast the 10 s grace period on any machine.
ths = fire(svc, [body("Long story %d" % i, 4000, stream=i % 2 == 1, temperature=1.0, seed=i,
                      bias=bias) for i in range(N2)], out, "term-a2")
t.check(wait_accepted(svc, N2), "a2: all requests accepted before SIGTERM")
t0 = time.monotonic()
svc.proc.send_signal(signal.SIGTERM)
rc = svc.proc.wait(timeout=60)
stop_s = time.monotonic() - t0
for th in ths:
    th.join(60)
t.eq(rc, 0, "a2: exit 0 after SIGTERM with requests cut short")
t.check(9.5 <= stop_s < 20, "a2: waited the grace period, then stopped (%.1f s)" % stop_s)
t.check(all(o is not None for o in out), "a2: every client got an answer or a closed connection")
outs = [outcome(o[0], o[1], o[2]) if o and o[0] is not None else ("closed", None)
        for o in out]
n_ok = sum(1 for o in outs if o[0] == "ok")
n_cut = sum(1 for o in outs if o[0] != "ok")
print("a2: stopped %.1f s after SIGTERM: %d finished, %d cancelled %r"
      % (stop_s, n_ok, n_cut, sorted(set(o[1] for o in outs if o[0] != "ok"), key=str)))
t.eq([o for o in outs if o[0] == "bad answer"], [], "a2: answers are well-formed")
t.check(n_cut >= 1, "a2: what could not finish was cancelled")
for (st, data, stream, _), o in zip(out, outs):
    if o[0] != "ok" and st is not None and not stream:
        t.eq(st, 503, "a2: a cancelled whole answer is a 503")
rows = svc.usage_rows()
print("a2: rows (status, error kind): %r"
      % sorted(set((r["http_status"], r["error_kind"]) for r in rows), key=str))
t.eq(len(rows), N2, "a2: one usage row per request, finished or cancelled")
t.check(all(r["error_kind"] for r in rows if r["http_status"] != 200 or
            r["finish_reason"] is None), "a2: cancelled rows say why")

# ---- b. kill -9: rows of requests finished > 1 s before the kill survive ----
svc = Service(exe, model=model, args=["--parallel", "4"]).start()
running.append(svc)
home = svc.home
done = []          # (client id, monotonic end time) of complete answers
stop_flag = threading.Event()
dlock = threading.Lock()


def loop(w):
    i = 0
    while not stop_flag.is_set():
        ua = "kill-%d-%d" % (w, i)
        i += 1
        try:
            st, _, data = svc.request("POST", "/v1/chat/completions",
                                      body("Kill test %s" % ua, 2 + i % 6),
                                      headers={"User-Agent": ua}, timeout=30)
        except OSError:
            return
        if st == 200:
            with dlock:
                done.append((ua, time.monotonic()))


ths = [threading.Thread(target=loop, args=(w,)) for w in range(4)]
for th in ths:
    th.start()
time.sleep(3.0)
t_kill = time.monotonic()
svc.proc.kill()
svc.proc.wait()
stop_flag.set()
for th in ths:
    th.join(30)
db = sqlite3.connect(svc.usage_db)
t.eq(db.execute("PRAGMA integrity_check").fetchone()[0], "ok", "b: integrity_check after kill -9")
clients = set(r[0] for r in db.execute("SELECT client FROM requests"))
n_before = db.execute("SELECT count(*) FROM requests").fetchone()[0]
max_id = db.execute("SELECT max(id) FROM requests").fetchone()[0] or 0
db.close()
old = [ua for ua, te in done if te < t_kill - 1.0]
recent = [ua for ua, te in done if te >= t_kill - 1.0]
missing = [ua for ua in old if ua not in clients]
print("b: %d requests finished more than 1 s before kill -9, %d in the last second "
      "(%d of those recorded), %d rows" % (len(old), len(recent),
                                            sum(1 for ua in recent if ua in clients), n_before))
t.check(len(old) >= 20, "b: enough requests before the kill (%d)" % len(old))
t.eq(missing[:5], [], "b: rows of requests finished more than a second before the kill")
# The restarted service opens the same database and keeps appending.
with Service(exe, model=model, home=home) as svc2:
    for i in range(3):
        svc2.json("POST", "/v1/chat/completions", body("After restart %d" % i, 3),
                  headers={"User-Agent": "restart-%d" % i})
rows = svc2.usage_rows()
t.eq(len(rows), n_before + 3, "b: restarted service appends its rows")
t.check(all(r["id"] > max_id for r in rows if r["client"].startswith("restart-")),
        "b: new rows come after the old ones")
shutil.rmtree(home, ignore_errors=True)

# ---- c. switching models by name; idle unload --------------------------------
with Service(exe, model=model, args=["--parallel", "2", "--idle-unload", "1"]) as svc:
    # A second model: the demo file installed under another name.
    folder = os.path.join(svc.data_dir, "models", "demo-copy")
    os.makedirs(folder)
    shutil.copyfile(model, os.path.join(folder, "demo-copy.gguf"))
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump({"name": "demo-copy", "source": "hf", "repo": "local/demo-copy",
                   "quant": "Q8_0", "state": "complete",
                   "files": [{"path": "demo-copy.gguf", "size": os.path.getsize(model)}]}, f)
    ids = [m["id"] for m in svc.json("GET", "/v1/models")["data"]]
    t.check("demo-copy" in ids and NAME in ids, "c: /v1/models lists both models (%r)" % ids)
    a = svc.json("POST", "/v1/chat/completions", body("Switch me", 12))
    t.eq(svc.json("GET", "/health")["model"], NAME, "c: the --model file is loaded")
    b = svc.json("POST", "/v1/chat/completions", body("Switch me", 12, model_name="demo-copy"))
    t.eq(b["model"], "demo-copy", "c: answer from the model asked for")
    t.eq(svc.json("GET", "/health")["model"], "demo-copy", "c: switched to demo-copy")
    t.eq(b["choices"][0]["message"]["content"], a["choices"][0]["message"]["content"],
         "c: same weights, same greedy text")
    c = svc.json("POST", "/v1/chat/completions", body("Switch me", 12, stream=False))
    t.eq(svc.json("GET", "/health")["model"], NAME, "c: switched back by name")
    t.eq(c["choices"][0]["message"]["content"], a["choices"][0]["message"]["content"],
         "c: same text after switching back")
    st, _, data = svc.request("POST", "/v1/chat/completions",
                              body("x", 2, model_name="demo-copy/../../demo-copy"))
    t.check(st in (400, 404), "c: a path in a model name is refused (%d)" % st)
    # Idle unload after a second (checked every second), reload on demand.
    deadline = time.time() + 8
    h = svc.json("GET", "/health")
    while h["model"] is not None and time.time() < deadline:
        time.sleep(0.2)
        h = svc.json("GET", "/health")
    t.eq(h["model"], None, "c: unloaded after a second idle")
    t.check("slots_processing" not in h, "c: no slots while nothing is loaded")
    d = svc.json("POST", "/v1/chat/completions", body("Switch me", 12))
    t.eq(d["choices"][0]["message"]["content"], a["choices"][0]["message"]["content"],
         "c: the next request loads it again")
    t.eq(svc.json("GET", "/health")["model"], NAME, "c: loaded again")
    st, _, _ = svc.request("GET", "/metrics")
    t.eq(st, 200, "c: /metrics after the switches")
rows = svc.usage_rows()
t.eq([r["model"] for r in rows],
     [NAME, "demo-copy", NAME, "demo-copy/../../demo-copy", NAME], "c: rows name the model")
t.done()

#!/usr/bin/python3
"""test_service_manage.py — moedesk-service's Management API (/moedesk/v1/,
docs/api.md) end to end: a real service with the demo model in a throw-away
home, the fixture hub (tests/tools/fixture-hub.c) standing in for Hugging
Face, and the CLI for reference answers.

Checks: health; the catalog's planner verdicts on a machine file equal
`moedesk-cli plan --json`'s and installed variants are marked; names that
would escape the models folder give 400; downloads start, stream NDJSON
progress, pause (the .part stays), resume by Range and complete with the
hub's sha256, fail with a reason, are cancelled keeping or discarding their
parts; verify passes, then reports "hash mismatch" for a flipped byte;
load with a plan (context and slots as asked; refused when it cannot fit),
unload, delete (refused while loaded); import of a generated Hugging Face
checkpoint on a worker thread; the weekly report in JSON (equal to the
CLI's), Markdown, HTML and CSV, recent requests, bad parameters (400 naming
them), and corrupt databases (500 with the store's message, file
unchanged); a clean stop while a download runs.

usage: test_service_manage.py MOEDESK_SERVICE DEMO_MODEL.gguf
(moedesk-cli and fixture-hub are found under $MOE_BUILD_ROOT)
"""
import hashlib
import http.client
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from svc_harness import Checker, Service  # noqa: E402
import gen_usage  # noqa: E402

EXE, DEMO = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
BUILD = os.environ.get("MOE_BUILD_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(EXE)))
SRC = os.environ.get("MOE_SOURCE_ROOT") or os.path.dirname(os.path.dirname(HERE))
CLI = os.path.join(BUILD, "app", "moedesk-cli")
HUB = os.path.join(BUILD, "tests", "fixture-hub")
MACHINE = os.path.join(SRC, "tests", "data", "machines", "rtx4090-1x.json")
TMP = tempfile.mkdtemp(prefix="moedesk-manage-")
ROOT = os.path.join(TMP, "hub")
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
t = Checker()
P = "/moedesk/v1"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def error_of(body):
    try:
        return json.loads(body).get("error") or {}
    except ValueError:
        return {}


# ---- the fixture hub -----------------------------------------------------------

def make_hub():
    for repo, name in [("demo-GGUF", "demo-Q8_0.gguf"), ("big-GGUF", "big-Q8_0.gguf"),
                       ("gone-GGUF", "gone-Q8_0.gguf")]:
        d = os.path.join(ROOT, "test-org", repo)
        os.makedirs(d)
        shutil.copyfile(DEMO, os.path.join(d, name))


make_hub()
hub = subprocess.Popen([HUB, "--root", ROOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                       text=True)
HUB_PORT, _ = map(int, hub.stdout.readline().split())
HUB_BASE = "http://127.0.0.1:%d" % HUB_PORT


def control(what, **query):
    q = "&".join("%s=%s" % (k, urllib.parse.quote(str(v), safe="")) for k, v in query.items())
    req = urllib.request.Request("%s/_control/%s?%s" % (HUB_BASE, what, q),
                                 method="POST" if what != "stats" else "GET")
    with OPENER.open(req, timeout=10) as r:
        body = r.read()
    return json.loads(body) if what == "stats" else body


def hub_stats(path):
    return control("stats")["files"].get(path, {"bytes": 0, "requests": 0, "range_starts": []})


# ---- a catalog with one entry that points at the fixture hub -----------------------

with open(os.path.join(SRC, "resources", "catalog.json")) as f:
    CATALOG = json.load(f)
demo_entry = json.loads(json.dumps(CATALOG["models"][0]))
demo_entry.update(id="demo-moe", name="Demo-MoE", aliases=["demo:moe"])
demo_entry["sources"] = {"gguf": [{"repo": "test-org/demo-GGUF", "quants": [
    {"quant": "Q8_0", "files": ["demo-Q8_0.gguf"], "size_bytes": os.path.getsize(DEMO),
     "size_estimated": False}]}]}
CATALOG["models"].append(demo_entry)
CATALOG_PATH = os.path.join(TMP, "catalog.json")
with open(CATALOG_PATH, "w") as f:
    json.dump(CATALOG, f)

ENV = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
ENV.update({"HF_ENDPOINT": HUB_BASE, "no_proxy": "127.0.0.1,localhost",
            "MOEDESK_RETRY_BASE_MS": "50", "MOEDESK_RETRY_ATTEMPTS": "2",
            "MOEDESK_MACHINE": MACHINE, "MOEDESK_CATALOG": CATALOG_PATH})
for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "MOEDESK_CONFIG_DIR"):
    ENV.pop(k, None)


def models_dir(svc):
    return os.path.join(svc.data_dir, "models")


def model_dir(svc, name):
    return os.path.join(models_dir(svc), name.replace("/", "--"))


def wait_job(svc, kind, job_id, pred, what, timeout=60):
    deadline = time.time() + timeout
    doc = None
    while time.time() < deadline:
        doc = svc.json("GET", "%s/%s/%s" % (P, kind, job_id))
        if pred(doc):
            return doc
        time.sleep(0.05)
    t.check(False, "%s (last: %s)" % (what, json.dumps(doc)[:600]))
    return doc


class EventReader(threading.Thread):
    """Reads a job's NDJSON events stream until it ends."""

    def __init__(self, svc, path):
        super().__init__(daemon=True)
        self.conn = http.client.HTTPConnection("127.0.0.1", svc.port, timeout=120)
        self.conn.request("GET", path, headers={"Host": "127.0.0.1:%d" % svc.port})
        self.resp = self.conn.getresponse()
        self.lines = []
        self.bad = []
        self.start()

    def run(self):
        while True:
            line = self.resp.readline()
            if not line:
                break
            try:
                self.lines.append(json.loads(line))
            except ValueError:
                self.bad.append(line)
        self.conn.close()


# ---- the checks -------------------------------------------------------------------

def check_health(svc):
    doc = svc.json("GET", P + "/health")
    t.eq(doc["status"], "ok", "health status")
    t.check(doc["version"] and doc["uptime_s"] >= 0, "health: version and uptime")
    t.eq(doc["model"]["name"], "moedesk-demo-random", "health: the loaded model")
    t.eq(doc["scheduler"]["n_parallel"], 4, "health: scheduler slots")
    t.eq(doc["jobs"], {"downloads_active": 0, "imports_active": 0, "verifications_active": 0},
         "health: no jobs yet")
    t.check(doc["usage"] and doc["usage"]["database"].endswith("usage.sqlite3"),
            "health: the usage database")


def cli_plan(model_id, *extra):
    p = subprocess.run([CLI, "plan", model_id, "--machine", MACHINE, "--catalog", CATALOG_PATH,
                        "--json"] + list(extra), capture_output=True, text=True, env=ENV)
    return json.loads(p.stdout) if p.returncode == 0 else None


def check_catalog(svc, installed=None):
    doc = svc.json("GET", P + "/catalog")
    with open(MACHINE) as f:
        mach = json.load(f)
    t.eq(doc["machine"]["name"], mach["name"], "catalog: the MOEDESK_MACHINE file is the machine")
    t.check(doc["machine"]["from_file"], "catalog: machine from a file")
    t.eq(doc["errors"], [], "catalog: every entry planned")
    t.eq(len(doc["models"]), len(CATALOG["models"]), "catalog: every entry listed")
    by_id = {m["id"]: m for m in doc["models"]}
    for entry in CATALOG["models"][:3] + [demo_entry]:
        ref = cli_plan(entry["id"])
        m = by_id.get(entry["id"])
        if not t.check(ref is not None and m is not None, "catalog: %s planned" % entry["id"]):
            continue
        want = {v["variant"]: v["verdict"] for v in ref["verdicts"]}
        got = {v["name"]: v["verdict"] for v in m["variants"]}
        t.eq(got, want, "catalog: %s verdicts equal moedesk-cli plan's" % entry["id"])
        t.eq(m["chosen"]["variant"] if m["chosen"] else None,
             ref["chosen"]["variant"] if ref["chosen"] else None,
             "catalog: %s choice equals the CLI's" % entry["id"])
        t.eq(m["n_ctx"], ref["contexts"][0], "catalog: %s verdict context" % entry["id"])
    # A context of our own.
    doc4k = svc.json("GET", P + "/catalog?ctx=4096")
    ref = cli_plan(CATALOG["models"][0]["id"], "--ctx", "4096")
    m = [x for x in doc4k["models"] if x["id"] == CATALOG["models"][0]["id"]][0]
    t.eq({v["name"]: v["verdict"] for v in m["variants"]},
         {v["variant"]: v["verdict"] for v in ref["verdicts"]}, "catalog ?ctx=4096 verdicts")
    st, _, body = svc.request("GET", P + "/catalog?ctx=lots")
    t.eq(st, 400, "catalog ?ctx=lots")
    t.eq(error_of(body).get("param"), "ctx", "catalog: the bad parameter is named")
    demo = by_id["demo-moe"]["variants"][0]
    t.eq(demo["download_source"], "test-org/demo-GGUF:Q8_0", "catalog: what to download")
    t.eq(demo["installed"], bool(installed), "catalog: installed flag (%s)" % bool(installed))
    t.eq(demo["installed_as"], installed, "catalog: installed as")


def check_names(svc):
    outside = os.path.join(svc.data_dir, "etc")
    for method, path in [("DELETE", P + "/models/..%2Fetc"),
                         ("GET", P + "/models/%2E%2E%2F%2E%2E%2Fetc"),
                         ("POST", P + "/models/..%2F..%2Fetc/verify"),
                         ("POST", P + "/models/a%5C..%5Cetc/load"),
                         ("DELETE", P + "/models/.hidden"),
                         ("DELETE", P + "/models/a/b/c"),
                         ("POST", P + "/models/org/-x/verify"),
                         ("GET", P + "/models/a..b")]:
        st, _, body = svc.request(method, path, body=b"{}" if method == "POST" else None)
        t.eq(st, 400, "%s %s refused" % (method, path))
    # The ones libsoup lets through reach us and get our error object.
    st, _, body = svc.request("DELETE", P + "/models/.hidden")
    e = error_of(body)
    t.eq((e.get("code"), e.get("param")), ("invalid_model_name", "name"),
         "a bad name in a path: invalid_model_name")
    for body in [{"source": "../evil"}, {"source": "org/.."}, {"source": "a\\b/c"}]:
        st, _, resp = svc.request("POST", P + "/downloads", body=body)
        t.eq(st, 400, "download source %r refused" % body["source"])
        t.eq(error_of(resp).get("param"), "source", "the bad source is named")
    st, _, resp = svc.request("POST", P + "/downloads", body={"source": "no-such-model"})
    t.eq(st, 404, "an unknown plain model name: 404")
    for body, param in [({"model": "../x"}, "model"), ({"dir": "relative/dir"}, "dir"),
                        ({"dir": TMP, "name": "../x"}, "dir"), ({}, "model"),
                        ({"model": "a", "dir": "/tmp"}, "model")]:
        st, _, resp = svc.request("POST", P + "/imports", body=body)
        t.eq(st, 400, "import %r refused" % body)
        t.eq(error_of(resp).get("param"), param, "import %r: parameter named" % body)
    st, _, resp = svc.request("POST", P + "/downloads", body="{not json")
    t.eq(st, 400, "a body that is not JSON")
    st, _, resp = svc.request("POST", P + "/downloads", body={"source": 7})
    t.eq((st, error_of(resp).get("param")), (400, "source"), "a source that is not a string")
    t.check(not os.path.exists(outside) and not os.path.exists(os.path.join(TMP, "etc")),
            "nothing was created outside the models folder")


DEMO_SHA = sha256(DEMO)


def check_download_pause_resume(svc):
    control("reset")
    control("fault", path="test-org/demo-GGUF/demo-Q8_0.gguf", kind="slow", rate=1500000,
            count=-1)
    st, hdrs, body = svc.request("POST", P + "/downloads", body={"source": "test-org/demo-GGUF:Q8_0"})
    t.eq(st, 202, "download accepted")
    job = json.loads(body)
    t.eq(hdrs.get("location"), "%s/downloads/%s" % (P, job["id"]), "Location of the job")
    t.eq(job["kind"], "download", "job kind")
    events = EventReader(svc, "%s/downloads/%s/events" % (P, job["id"]))
    t.eq(events.resp.status, 200, "events stream opened")
    t.check("ndjson" in (events.resp.getheader("Content-Type") or ""), "events are NDJSON")
    # The same source again is the same download.
    st, _, body = svc.request("POST", P + "/downloads", body={"source": "test-org/demo-GGUF:Q8_0"})
    t.eq((st, json.loads(body)["id"]), (200, job["id"]), "the same source joins the download")
    wait_job(svc, "downloads", job["id"], lambda d: d["bytes_done"] > 1500000,
             "the download makes progress")
    doc = svc.json("POST", "%s/downloads/%s/pause" % (P, job["id"]))
    t.eq(doc["state"], "paused", "pause answers once paused")
    t.check(0 < doc["bytes_done"] < doc["bytes_total"], "paused part-way: %d of %d"
            % (doc["bytes_done"], doc["bytes_total"]))
    dest = os.path.join(model_dir(svc, "test-org/demo-GGUF"), "demo-Q8_0.gguf")
    part = dest + ".part"
    t.check(os.path.exists(part) and os.path.getsize(part) > 0, "the .part stays while paused")
    t.check(not os.path.exists(dest), "nothing installed while paused")
    paused_at = os.path.getsize(part)
    st, _, body = svc.request("POST", "%s/downloads/%s/pause" % (P, job["id"]))
    t.eq((st, json.loads(body)["state"]), (200, "paused"), "pausing twice is harmless")
    h = svc.json("GET", P + "/health")
    t.eq(h["jobs"]["downloads_active"], 1, "health counts the paused download")
    control("reset")  # full speed for the rest
    doc = svc.json("POST", "%s/downloads/%s/resume" % (P, job["id"]))
    t.eq(doc["state"], "running", "resume starts it again")
    doc = wait_job(svc, "downloads", job["id"], lambda d: d["state"] in ("completed", "failed"),
                   "the resumed download ends")
    t.eq(doc["state"], "completed", "the resumed download completes")
    t.eq(doc["result"]["model"], "test-org/demo-GGUF", "installed under the repo's name")
    t.check(os.path.exists(dest) and sha256(dest) == DEMO_SHA, "installed bytes have the hub's sha256")
    t.check(not os.path.exists(part), "no .part left")
    starts = hub_stats("test-org/demo-GGUF/demo-Q8_0.gguf")["range_starts"]
    t.check(any(0 < s <= paused_at for s in starts),
            "resumed with a Range request from the part (starts %s, part %d)"
            % (starts, paused_at))
    events.join(30)
    states = [e["state"] for e in events.lines]
    t.check(not events.is_alive(), "the events stream ended after completion")
    t.eq(events.bad, [], "every event line is JSON")
    t.eq(states[-1:], ["completed"], "the last event is the final state")
    t.check("paused" in states and states.index("paused") < len(states) - 1,
            "the stream went on through a pause: %s" % states)
    t.check(sum(1 for e in events.lines if e["state"] == "running") >= 3,
            "progress events while running")
    done = [e["bytes_done"] for e in events.lines if e["state"] == "running"]
    t.check(max(done) > 1500000, "progress events carry byte counts")
    lst = svc.json("GET", P + "/downloads")["downloads"]
    t.check(any(d["id"] == job["id"] and d["state"] == "completed" for d in lst),
            "GET /downloads lists it")
    st, _, _ = svc.request("GET", P + "/downloads/dl-999")
    t.eq(st, 404, "an unknown download id")
    st, _, _ = svc.request("POST", "%s/downloads/%s/resume" % (P, job["id"]))
    t.eq(st, 409, "a completed download cannot be resumed")


def check_download_cancel(svc):
    path = "test-org/big-GGUF/big-Q8_0.gguf"
    mdir = model_dir(svc, "test-org/big-GGUF")
    part = os.path.join(mdir, "big-Q8_0.gguf.part")
    control("reset")
    control("fault", path=path, kind="slow", rate=1000000, count=-1)
    job = svc.json("POST", P + "/downloads", {"source": "test-org/big-GGUF:Q8_0"}, expect=202)
    wait_job(svc, "downloads", job["id"], lambda d: d["bytes_done"] > 500000, "big download runs")
    doc = svc.json("DELETE", "%s/downloads/%s?discard=1" % (P, job["id"]))
    t.eq(doc["state"], "cancelled", "cancel answers once cancelled")
    t.check(not os.path.exists(part), "?discard=1 removes the .part")
    t.check(not os.path.exists(mdir), "?discard=1 removes the folder this download made")
    st, _, _ = svc.request("GET", "%s/downloads/%s" % (P, job["id"]))
    t.eq(st, 404, "a cancelled download is forgotten")
    job = svc.json("POST", P + "/downloads", {"source": "test-org/big-GGUF:Q8_0"}, expect=202)
    wait_job(svc, "downloads", job["id"], lambda d: d["bytes_done"] > 500000, "again")
    doc = svc.json("DELETE", "%s/downloads/%s" % (P, job["id"]))
    t.eq(doc["state"], "cancelled", "cancel without discard")
    t.check(os.path.exists(part) and os.path.getsize(part) > 0, "cancel keeps the .part")
    kept = os.path.getsize(part)
    control("reset")
    job = svc.json("POST", P + "/downloads", {"source": "test-org/big-GGUF:Q8_0"}, expect=202)
    doc = wait_job(svc, "downloads", job["id"], lambda d: d["state"] in ("completed", "failed"),
                   "the third start ends")
    t.eq(doc["state"], "completed", "a new download of the same source completes")
    starts = hub_stats(path)["range_starts"]
    t.check(any(s > 0 and s <= kept for s in starts), "it resumed the kept part (%s)" % starts)
    t.check(sha256(os.path.join(mdir, "big-Q8_0.gguf")) == DEMO_SHA, "and the bytes are right")
    # A repository the hub does not have: the job fails with a reason.
    job = svc.json("POST", P + "/downloads", {"source": "test-org/missing-GGUF"}, expect=202)
    doc = wait_job(svc, "downloads", job["id"], lambda d: d["state"] in ("completed", "failed"),
                   "a download of a missing repository ends")
    t.eq(doc["state"], "failed", "a missing repository fails")
    t.eq(doc["error"]["code"], "not_found", "and says not_found")
    t.check("test-org/missing-GGUF" in doc["error"]["message"], "naming the repository")


def check_models_and_verify(svc):
    doc = svc.json("GET", P + "/models")
    names = [m["name"] for m in doc["models"]]
    t.check("test-org/demo-GGUF" in names and "test-org/big-GGUF" in names,
            "installed models listed: %s" % names)
    m = [x for x in doc["models"] if x["name"] == "test-org/demo-GGUF"][0]
    t.eq((m["state"], m["quant"], m["ggufs"][0]["quant"]), ("complete", "Q8_0", "Q8_0"),
         "model state and quantisation")
    t.eq(m["files"][0]["sha256"], DEMO_SHA, "the manifest's hash")
    t.eq(doc["loaded"]["name"], "moedesk-demo-random", "the loaded model is shown")
    one = svc.json("GET", P + "/models/test-org/demo-GGUF")
    t.eq(one["name"], "test-org/demo-GGUF", "GET one model")
    st, _, _ = svc.request("GET", P + "/models/test-org/none")
    t.eq(st, 404, "GET a model that is not installed")

    doc = svc.json("POST", P + "/models/test-org/demo-GGUF/verify?wait=1")
    t.eq((doc["kind"], doc["state"], doc["ok"]), ("verification", "completed", True),
         "verify passes a fresh install")
    t.eq([r["status"] for r in doc["results"]], ["OK"], "one file OK")
    path = os.path.join(model_dir(svc, "test-org/demo-GGUF"), "demo-Q8_0.gguf")
    with open(path, "r+b") as f:
        f.seek(4000000)
        b = f.read(1)
        f.seek(4000000)
        f.write(bytes([b[0] ^ 0x10]))
    st, hdrs, body = svc.request("POST", P + "/models/test-org/demo-GGUF/verify")
    t.eq(st, 202, "verify runs as a job")
    job = json.loads(body)
    doc = wait_job(svc, "verifications", job["id"], lambda d: d["state"] != "running",
                   "verify ends")
    t.eq((doc["state"], doc["ok"], doc["error"]["code"]), ("failed", False, "verify_failed"),
         "verify fails for a changed byte")
    t.eq(doc["results"][0]["status"], "hash mismatch", "a changed byte: hash mismatch")
    with open(path, "r+b") as f:
        f.seek(4000000)
        f.write(b)
    lst = svc.json("GET", P + "/verifications")["verifications"]
    t.eq(len(lst), 2, "both verifications listed")
    doc = svc.json("DELETE", "%s/verifications/%s" % (P, job["id"]))
    t.eq(doc["state"], "failed", "a finished verification is forgotten as it was")
    st, _, _ = svc.request("GET", "%s/verifications/%s" % (P, job["id"]))
    t.eq(st, 404, "and is gone")
    st, _, _ = svc.request("POST", P + "/models/test-org/none/verify")
    t.eq(st, 404, "verify a model that is not installed")
    st, _, _ = svc.request("POST", P + "/models/test-org/demo-GGUF/frobnicate", body=b"{}")
    t.eq(st, 404, "an unknown model action")


def check_load_unload_delete(svc):
    doc = svc.json("POST", P + "/models/test-org/demo-GGUF/load", {"ctx": 512, "parallel": 2})
    t.eq(doc["loaded"]["name"], "test-org/demo-GGUF", "loaded by library name")
    t.eq((doc["loaded"]["n_ctx_per_seq"], doc["loaded"]["n_parallel"]), (512, 2),
         "loaded with the context and slots asked for")
    t.check(doc["plan"]["fits"] and doc["plan"]["kv_cells"] == 1024, "the plan: %s" % doc["plan"])
    t.eq(doc["plan"]["quant"], "Q8_0", "the plan names the file's quantisation")
    h = svc.json("GET", P + "/health")
    t.eq((h["model"]["name"], h["scheduler"]["n_parallel"], h["scheduler"]["n_ctx_per_seq"]),
         ("test-org/demo-GGUF", 2, 512), "health shows the new model")
    ml = svc.json("GET", P + "/models")
    t.check([m["loaded"] for m in ml["models"] if m["name"] == "test-org/demo-GGUF"] == [True],
            "the installed model is marked loaded")
    for body, param in [({"ctx": -1}, "ctx"), ({"parallel": 65}, "parallel"),
                        ({"ctx": 1 << 20, "parallel": 32}, "ctx"),
                        ({"quant": 4}, "quant"), ({"force": "yes"}, "force")]:
        st, _, resp = svc.request("POST", P + "/models/test-org/demo-GGUF/load", body)
        t.eq((st, error_of(resp).get("param")), (400, param), "load %r refused" % body)
    st, _, resp = svc.request("POST", P + "/models/test-org/demo-GGUF/load", {"quant": "Q2_K"})
    t.eq((st, error_of(resp).get("param")), (404, "quant"), "a quantisation not installed")
    st, _, resp = svc.request("DELETE", P + "/models/test-org/demo-GGUF")
    t.eq((st, error_of(resp).get("code")), (409, "model_loaded"), "the loaded model is not deleted")
    doc = svc.json("POST", P + "/unload")
    t.eq(doc["unloaded"], "test-org/demo-GGUF", "unload names the model")
    t.eq(svc.json("GET", P + "/health")["model"], None, "nothing loaded")
    t.eq(svc.json("POST", P + "/unload")["unloaded"], None, "unloading nothing")
    doc = svc.json("POST", P + "/models/moedesk-demo-random/load", {})
    t.eq(doc["loaded"]["name"], "moedesk-demo-random", "the --model file loads by its name")
    st, _, _ = svc.request("POST", P + "/models/test-org/none/load", {})
    t.eq(st, 404, "load a model that is not installed")
    doc = svc.json("POST", P + "/models/test-org/demo-GGUF/load", {})
    doc = svc.json("DELETE", P + "/models/test-org/demo-GGUF?force=1")
    t.eq((doc["deleted"], doc["unloaded"]), ("test-org/demo-GGUF", True),
         "force deletes the loaded model after unloading it")
    t.check(not os.path.exists(model_dir(svc, "test-org/demo-GGUF")), "its folder is gone")
    doc = svc.json("DELETE", P + "/models/test-org/big-GGUF")
    t.eq(doc["bytes_freed"], os.path.getsize(DEMO), "delete reports the bytes freed")
    st, _, _ = svc.request("DELETE", P + "/models/test-org/big-GGUF")
    t.eq(st, 404, "deleting twice: 404")


def check_import(svc):
    import gen_hf_checkpoint as gen
    import gen_model
    ckpt = os.path.join(TMP, "tiny-ckpt")
    gen.generate(ckpt, gen_model.ModelConfig("qwen3moe", sharp=8.0), shards=2, policy="mixed",
                 name="tiny")
    st, _, body = svc.request("POST", P + "/imports", {"dir": "/nonexistent/ckpt"})
    t.eq((st, error_of(body).get("param")), (400, "dir"), "import of a missing folder")
    st, _, body = svc.request("POST", P + "/imports", {"model": "test-org/none"})
    t.eq((st, error_of(body).get("param")), (404, "model"), "import of a model not installed")
    st, _, body = svc.request("POST", P + "/imports", {"dir": ckpt, "type": "q3_k"})
    t.eq((st, error_of(body).get("param")), (400, "type"), "an unknown import type")
    st, _, body = svc.request("POST", P + "/imports", {"dir": ckpt, "name": "../x"})
    t.eq((st, error_of(body).get("param")), (400, "name"), "an import into a bad name")
    st, _, body = svc.request("POST", P + "/imports",
                              {"dir": ckpt, "name": "test-org/tiny-imported", "type": "q8_0"})
    t.eq(st, 202, "import accepted")
    job = json.loads(body)
    events = EventReader(svc, "%s/imports/%s/events" % (P, job["id"]))
    doc = wait_job(svc, "imports", job["id"], lambda d: d["state"] != "running", "import ends",
                   timeout=240)
    t.eq(doc["state"], "completed", "import completes: %s" % (doc.get("error"),))
    if doc["state"] != "completed":
        return
    t.eq((doc["result"]["type"], doc["result"]["architecture"]), ("Q8_0", "qwen3moe"),
         "import result")
    out = os.path.join(model_dir(svc, "test-org/tiny-imported"), doc["result"]["path"])
    t.check(os.path.exists(out) and os.path.getsize(out) == doc["result"]["bytes_out"],
            "the GGUF is in the models folder")
    t.check(doc["bytes_done"] == doc["bytes_total"] > 0, "import progress reached the end")
    events.join(30)
    t.eq([e["state"] for e in events.lines][-1:], ["completed"], "import events end completed")
    m = svc.json("GET", P + "/models/test-org/tiny-imported")
    t.eq((m["source"], m["quant"], m["state"]), ("import", "Q8_0", "complete"),
         "the import is an installed model")
    v = svc.json("POST", P + "/models/test-org/tiny-imported/verify?wait=1")
    t.eq(v["state"], "completed", "the imported model verifies")
    doc = svc.json("POST", P + "/models/test-org/tiny-imported/load", {"ctx": 256})
    t.eq(doc["loaded"]["name"], "test-org/tiny-imported", "the imported model loads")
    svc.json("POST", P + "/unload")
    doc = svc.json("DELETE", "%s/imports/%s" % (P, job["id"]))
    t.eq(doc["id"], job["id"], "a finished import is forgotten")


# ---- usage ----------------------------------------------------------------------

def usage_env(data_dir, config_dir):
    return dict(ENV, MOEDESK_DATA_DIR=data_dir, MOEDESK_CONFIG_DIR=config_dir)


def import_rows(db, env):
    csv_path = os.path.join(TMP, "usage.csv")
    gen_usage.write_csv(csv_path, gen_usage.generate([("2026-03-02", 3, 400)], [], seed=5))
    p = subprocess.run([CLI, "usage", "import-csv", csv_path, "--db", db], env=env,
                       capture_output=True, text=True)
    t.eq(p.returncode, 0, "usage rows imported: %s" % p.stderr.strip())


def strip_generated(doc):
    doc = dict(doc)
    doc.pop("generated_at", None)
    doc.pop("generated_ms", None)
    return doc


def check_usage(svc, db, env):
    st, hdrs, body = svc.request("GET", P + "/usage/report?week=2026-W11&weeks=4&format=json")
    t.eq(st, 200, "report json: %s" % body[:300])
    t.check(hdrs.get("content-type", "").startswith("application/json"), "report json type")
    got = json.loads(body)
    p = subprocess.run([CLI, "report", "weekly", "--week", "2026-W11", "--weeks", "4",
                        "--format", "json", "--db", db], env=env, capture_output=True, text=True)
    want = json.loads(p.stdout) if p.returncode == 0 else None
    t.eq(strip_generated(got), strip_generated(want or {}), "report json equals the CLI's")
    st, hdrs, body = svc.request("GET", P + "/usage/report?week=2026-W11&weeks=4&format=md")
    t.eq(st, 200, "report md")
    t.check(hdrs.get("content-type", "").startswith("text/markdown"), "report md type")
    t.check(b"2026-W11" in body and body.lstrip().startswith(b"#"), "report md text")
    for fmt, ctype, needle in [("html", "text/html", b"<svg"), ("csv", "text/csv", b",")]:
        st, hdrs, body = svc.request("GET", P + "/usage/report?week=2026-W11&format=" + fmt)
        t.check(st == 200 and hdrs.get("content-type", "").startswith(ctype) and needle in body,
                "report %s" % fmt)
    for query, status, param in [("week=2026-W99", 400, "week"), ("week=W11", 400, "week"),
                                 ("format=xml", 400, "format"), ("weeks=0", 400, "weeks"),
                                 ("weeks=105", 400, "weeks"), ("weeks=two", 400, "weeks"),
                                 ("week=2026-W30", 404, "week")]:
        st, _, body = svc.request("GET", P + "/usage/report?" + query)
        e = error_of(body)
        t.eq((st, e.get("param")), (status, param), "report ?%s" % query)
        t.check(e.get("message"), "report ?%s has a message" % query)
    doc = svc.json("GET", P + "/usage/requests?limit=3")
    ids = [r["id"] for r in doc["requests"]]
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    top = [r[0] for r in con.execute("SELECT id FROM requests ORDER BY id DESC LIMIT 3")]
    row = con.execute("SELECT model, prompt_tokens FROM requests WHERE id = ?", (top[0],)).fetchone()
    con.close()
    t.eq(ids, top, "recent requests, newest first")
    t.eq((doc["requests"][0]["model"], doc["requests"][0]["prompt_tokens"]), tuple(row),
         "a recent request's fields")
    st, _, body = svc.request("GET", P + "/usage/requests?limit=0")
    t.eq((st, error_of(body).get("param")), (400, "limit"), "requests ?limit=0")


def check_corrupt_databases(env_base):
    """--no-usage: the report opens the data folder's database read-only."""
    cases = []
    junk_home = tempfile.mkdtemp(prefix="moedesk-svc-", dir=TMP)
    data = os.path.join(junk_home, "data", "moedesk")
    os.makedirs(data)
    junk = os.path.join(data, "usage.sqlite3")
    with open(junk, "wb") as f:
        f.write(bytes((i * 131 + 7) % 256 for i in range(16384)))
    cases.append((junk_home, junk, "not a database"))
    blob_home = tempfile.mkdtemp(prefix="moedesk-svc-", dir=TMP)
    data = os.path.join(blob_home, "data", "moedesk")
    os.makedirs(data)
    db = os.path.join(data, "usage.sqlite3")
    import_rows(db, dict(env_base, MOEDESK_DATA_DIR=data))
    con = sqlite3.connect(db)
    con.execute("UPDATE hourly SET total_hist = X'FFFFFFFFFFFFFFFFFF'")
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    cases.append((blob_home, db, "malformed latency histogram"))
    for home, path, needle in cases:
        before = sha256(path)
        with Service(EXE, model=DEMO, home=home, args=["--no-usage"], env=env_base) as svc:
            st, _, body = svc.request("GET", P + "/usage/report?week=2026-W11&format=md")
            e = error_of(body)
            t.eq(st, 500, "corrupt database (%s): 500" % needle)
            t.check(needle in e.get("message", "") and path in e.get("message", ""),
                    "the store's message names the file: %r" % e.get("message"))
            st, _, _ = svc.request("GET", P + "/health")
            t.eq(st, 200, "serving after a corrupt database")
        t.eq(sha256(path), before, "the corrupt database is untouched (%s)" % needle)
    empty_home = tempfile.mkdtemp(prefix="moedesk-svc-", dir=TMP)
    with Service(EXE, model=DEMO, home=empty_home, args=["--no-usage"], env=env_base) as svc:
        st, _, body = svc.request("GET", P + "/usage/report")
        t.eq((st, error_of(body).get("code")), (404, "no_usage_database"), "no database at all")
    t.check(not os.path.exists(os.path.join(empty_home, "data", "moedesk", "usage.sqlite3")),
            "and none was created")


def check_small_machine(env_base):
    """A machine with 16 MiB of RAM: nothing fits, a load is refused."""
    small = os.path.join(TMP, "small-machine.json")
    with open(small, "w") as f:
        json.dump({"name": "a very small machine", "ram_total": "16 MiB", "cores_logical": 2,
                   "cores_physical": 1}, f)
    home = tempfile.mkdtemp(prefix="moedesk-svc-", dir=TMP)
    with Service(EXE, model=DEMO, home=home, env=dict(env_base, MOEDESK_MACHINE=small)) as svc:
        doc = svc.json("GET", P + "/catalog")
        t.eq(doc["machine"]["name"], "a very small machine", "catalog on the small machine")
        verdicts = {v["verdict_key"] for m in doc["models"] for v in m["variants"]}
        t.eq(verdicts, {"wont_fit"}, "nothing fits 16 MiB")
        st, _, body = svc.request("POST", P + "/models/moedesk-demo-random/load", {"ctx": 1024})
        e = error_of(body)
        t.eq((st, e.get("code")), (409, "does_not_fit"), "a load that cannot fit is refused")
        t.check("16" in e.get("message", "") or "MiB" in e.get("message", "") or
                "GiB" in e.get("message", ""), "the refusal says what it needs: %r"
                % e.get("message"))
        t.eq(svc.json("GET", P + "/health")["model"]["n_ctx_per_seq"], 4096,
             "the refused load left the model as it was")
        doc = svc.json("POST", P + "/models/moedesk-demo-random/load", {"ctx": 1024, "force": True})
        t.eq((doc["loaded"]["n_ctx_per_seq"], doc["plan"]["fits"]), (1024, False),
             "force loads it anyway, and says it does not fit")


def check_stop_during_download(env_base):
    home = tempfile.mkdtemp(prefix="moedesk-svc-", dir=TMP)
    control("reset")
    control("fault", path="test-org/gone-GGUF/gone-Q8_0.gguf", kind="slow", rate=500000,
            count=-1)
    svc = Service(EXE, model=DEMO, home=home, env=env_base).start()
    job = svc.json("POST", P + "/downloads", {"source": "test-org/gone-GGUF:Q8_0"}, expect=202)
    events = EventReader(svc, "%s/downloads/%s/events" % (P, job["id"]))
    wait_job(svc, "downloads", job["id"], lambda d: d["bytes_done"] > 200000, "download runs")
    t0 = time.time()
    rc = svc.stop()
    t.eq(rc, 0, "clean exit on SIGTERM during a download")
    t.check(time.time() - t0 < 8, "the stop did not wait for the download (%.1f s)"
            % (time.time() - t0))
    events.join(5)
    t.check(not events.is_alive(), "the events stream ended with the service")
    part = os.path.join(home, "data", "moedesk", "models", "test-org--gone-GGUF",
                        "gone-Q8_0.gguf.part")
    t.check(os.path.exists(part) and os.path.getsize(part) > 0, "the .part is kept for later")
    t.check(not os.path.exists(part[:-5] + ".part.lock"), "its lock is released")
    control("reset")


def main():
    try:
        env_base = dict(ENV)
        home = tempfile.mkdtemp(prefix="moedesk-svc-", dir=TMP)
        data = os.path.join(home, "data", "moedesk")
        config = os.path.join(home, "config", "moedesk")
        os.makedirs(data)
        os.makedirs(config)
        with open(os.path.join(config, "settings.ini"), "w") as f:
            f.write("[report]\ntimezone = UTC\n")
        db = os.path.join(data, "usage.sqlite3")
        import_rows(db, usage_env(data, config))
        with Service(EXE, model=DEMO, home=home, env=env_base) as svc:
            check_health(svc)
            check_catalog(svc)
            check_names(svc)
            check_download_pause_resume(svc)
            check_catalog(svc, installed="test-org/demo-GGUF")
            check_download_cancel(svc)
            check_models_and_verify(svc)
            check_load_unload_delete(svc)
            check_import(svc)
            check_usage(svc, db, usage_env(data, config))
        t.eq(svc.proc.returncode, 0, "clean exit")
        check_corrupt_databases(env_base)
        check_small_machine(env_base)
        check_stop_during_download(env_base)
        errs = "".join(svc.stderr_lines)
        t.check("Sanitizer" not in errs and "runtime error" not in errs, "no sanitizer reports")
    finally:
        hub.stdin.close()
        hub.wait(10)
        shutil.rmtree(TMP, ignore_errors=True)
    t.done()


main()

#!/usr/bin/python3
"""test_hub.py — moedesk-cli pull / verify / list / rm end to end against
the fixture hub (tests/tools/fixture-hub.c) on 127.0.0.1.

Usage: test_hub.py MOEDESK_CLI FIXTURE_HUB

Builds a throw-away hub folder (small GGUF files written with
gguf_write.py, a split set, a sharded safetensors checkpoint written with
st_write.py), starts the fixture hub, and drives the real CLI with
injected faults: connection cut mid-file, 500 then success, 429 with
Retry-After (seconds and HTTP date), 404, a wrong byte, a slow server, a
server that ignores Range, a file size limit (RLIMIT_FSIZE, the portable
stand-in for a full disk), kill -9 mid-download, a lock held by another
process, two concurrent pulls, tokens and redirects, ModelScope, catalog
names, unsafe names; then verify against corrupted, missing, truncated and
structurally broken files. Every model lives under a temporary
MOEDESK_DATA_DIR. Exits 1 on the first failed check."""
import hashlib
import json
import os
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402
from gguf_read import GGML_F16, GGML_F32, GGML_Q4_0, GGML_Q8_0  # noqa: E402
from gguf_write import FILE_TYPE, GGUFWriter  # noqa: E402
import st_write  # noqa: E402

CLI, HUB = sys.argv[1], sys.argv[2]
TMP = tempfile.mkdtemp(prefix="moedesk-hub-test-")
ROOT = os.path.join(TMP, "hub")
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
N_CHECKS = 0


def check(cond, what, detail=""):
    global N_CHECKS
    N_CHECKS += 1
    if not cond:
        print("FAIL:", what, detail if isinstance(detail, str) else repr(detail))
        sys.exit(1)
    print("ok:", what)


# ---- test data ----------------------------------------------------------

def gguf(path, rows, kv=None, names=("a", "b"), ttype=GGML_Q8_0):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    w = GGUFWriter(path)
    w.add_string("general.architecture", "llama")
    for k, v in (kv or {}).items():
        w.add_uint32(k, v)
    rng = np.random.default_rng(rows)
    for n in names:
        w.add_tensor(n, (rows, 256), ttype,
                     lambda: rng.standard_normal((rows, 256)).astype(np.float32))
    w.write()


def planned_gguf(path, ttype, n_embd=256, n_layer=2, n_head=4, n_head_kv=2, head_dim=64,
                 n_expert=16, n_expert_used=2, n_ff=256, n_vocab=2048, ctx=1024):
    """A small Qwen3-MoE file the memory planner can read: the metadata and
    tensor names llama.cpp uses, random weights."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    a = "qwen3moe"
    w = GGUFWriter(path)
    w.add_string("general.architecture", a)
    w.add_string("general.name", "planned-moe")
    w.add_uint32("general.file_type", FILE_TYPE[ttype])
    for k, v in (("block_count", n_layer), ("context_length", ctx), ("embedding_length", n_embd),
                 ("expert_feed_forward_length", n_ff), ("attention.head_count", n_head),
                 ("attention.head_count_kv", n_head_kv), ("attention.key_length", head_dim),
                 ("attention.value_length", head_dim), ("expert_count", n_expert),
                 ("expert_used_count", n_expert_used)):
        w.add_uint32("%s.%s" % (a, k), v)
    rng = np.random.default_rng(1)

    def t(name, shape, tt):
        w.add_tensor(name, shape, tt, lambda: rng.standard_normal(shape).astype(np.float32))
    t("token_embd.weight", (n_vocab, n_embd), ttype)
    for i in range(n_layer):
        b = "blk.%d." % i
        t(b + "attn_norm.weight", (n_embd,), GGML_F32)
        t(b + "attn_q.weight", (n_head * head_dim, n_embd), ttype)
        t(b + "attn_k.weight", (n_head_kv * head_dim, n_embd), ttype)
        t(b + "attn_v.weight", (n_head_kv * head_dim, n_embd), ttype)
        t(b + "attn_output.weight", (n_embd, n_head * head_dim), ttype)
        t(b + "ffn_norm.weight", (n_embd,), GGML_F32)
        t(b + "ffn_gate_inp.weight", (n_expert, n_embd), GGML_F32)
        t(b + "ffn_gate_exps.weight", (n_expert, n_ff, n_embd), ttype)
        t(b + "ffn_up_exps.weight", (n_expert, n_ff, n_embd), ttype)
        t(b + "ffn_down_exps.weight", (n_expert, n_embd, n_ff), ttype)
    t("output_norm.weight", (n_embd,), GGML_F32)
    t("output.weight", (n_vocab, n_embd), ttype)
    w.write()


# The planned model at three quantisations (F16 ~15.5 MB, Q8_0 ~8.3 MB,
# Q4_0 ~4.4 MB), in a repository the catalog does not know (pull reads a
# header) and in one it does (pull plans from the catalog entry).
PLANNED = {"F16": GGML_F16, "Q8_0": GGML_Q8_0, "Q4_0": GGML_Q4_0}
PLAN_REPO = "test-org/planned-GGUF"
PLAN_CAT_REPO = "test-org/planned-cat-GGUF"


def make_hub():
    for q, tt in PLANNED.items():
        planned_gguf(os.path.join(ROOT, PLAN_REPO, "planned-%s.gguf" % q), tt)
        os.makedirs(os.path.join(ROOT, PLAN_CAT_REPO), exist_ok=True)
        os.link(os.path.join(ROOT, PLAN_REPO, "planned-%s.gguf" % q),
                os.path.join(ROOT, PLAN_CAT_REPO, "planned-%s.gguf" % q))
    g = os.path.join(ROOT, "test-org", "tiny-GGUF")
    gguf(os.path.join(g, "tiny-Q8_0.gguf"), 2048)            # ~1.1 MB
    gguf(os.path.join(g, "tiny-Q4_K_M.gguf"), 1024)          # ~0.56 MB
    for k in (1, 2):
        gguf(os.path.join(g, "BF16", "tiny-BF16-%05d-of-00002.gguf" % k), 1024,
             {"split.no": k - 1, "split.count": 2, "split.tensors.count": 4},
             names=("a%d" % k, "b%d" % k), ttype=GGML_F32)
    with open(os.path.join(g, "config.json"), "w") as f:
        f.write('{"model_type": "tiny"}\n')
    # A split set whose second part is big (for slow and kill tests).
    t = os.path.join(ROOT, "test-org", "two-GGUF")
    gguf(os.path.join(t, "two-Q8_0-00001-of-00002.gguf"), 512,
         {"split.no": 0, "split.count": 2, "split.tensors.count": 4})
    gguf(os.path.join(t, "two-Q8_0-00002-of-00002.gguf"), 12000,
         {"split.no": 1, "split.count": 2, "split.tensors.count": 4}, names=("c", "d"))
    s = os.path.join(ROOT, "test-org", "tiny-st")
    os.makedirs(s)
    st_write.write_sharded(s, "model", [
        [("model.embed.weight", "BF16", (64, 32), None), ("model.norm", "F32", (32,), None)],
        [("lm_head.weight", "F16", (64, 32), None)],
    ], {"format": "pt"})
    with open(os.path.join(s, "config.json"), "w") as f:
        json.dump({"architectures": ["TinyForCausalLM"]}, f)
    with open(os.path.join(s, "README.md"), "w") as f:
        f.write("not downloaded\n")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---- the fixture hub ------------------------------------------------------

make_hub()
hub = subprocess.Popen([HUB, "--root", ROOT, "--page-size", "3"], stdin=subprocess.PIPE,
                       stdout=subprocess.PIPE, text=True)
PORT, CDN_PORT = map(int, hub.stdout.readline().split())
BASE = "http://127.0.0.1:%d" % PORT


def control(what, **query):
    q = "&".join("%s=%s" % (k, urllib.parse.quote(str(v), safe="")) for k, v in query.items())
    req = urllib.request.Request("%s/_control/%s?%s" % (BASE, what, q),
                                 method="POST" if what != "stats" else "GET")
    with OPENER.open(req, timeout=10) as r:
        body = r.read()
    return json.loads(body) if what == "stats" else body


def stats(path):
    return control("stats")["files"].get(path, {"bytes": 0, "requests": 0, "range_starts": []})


# ---- running the CLI --------------------------------------------------------

BASE_ENV = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
BASE_ENV.update({
    "HF_ENDPOINT": BASE, "MODELSCOPE_ENDPOINT": BASE, "no_proxy": "127.0.0.1,localhost",
    "MOEDESK_RETRY_BASE_MS": "50", "MOEDESK_PROGRESS": "plain",
    "MOEDESK_PROGRESS_INTERVAL_MS": "200", "MOEDESK_MEMORY_BYTES": "3000000",
    "MOEDESK_CATALOG": os.path.join(TMP, "catalog.json"), "HOME": TMP,
})
BASE_ENV.pop("HF_TOKEN", None)
BASE_ENV.pop("HUGGING_FACE_HUB_TOKEN", None)
with open(BASE_ENV["MOEDESK_CATALOG"], "w") as f:
    json.dump({"schema_version": 1, "models": [
        # No structure: the planner cannot use this entry.
        {"id": "tiny-moe", "name": "Tiny-MoE", "aliases": ["tiny:moe"],
         "sources": {"gguf": [{"repo": "test-org/tiny-GGUF", "quants": []}]}},
        # The planned model, described as the real catalog describes models.
        {"id": "planned-moe", "name": "Planned-MoE", "architecture": "qwen3moe",
         "context_length": 1024,
         "hparams": {"n_layer": 2, "n_embd": 256, "n_vocab": 2048, "n_head": 4, "n_head_kv": 2,
                     "head_dim": 64, "n_expert": 16, "n_expert_used": 2, "n_ff_expert": 256},
         "params": {"total": 7742720, "active": 2024448, "groups": {
             "embd_output": 1048832, "attention": 394240, "router": 8192,
             "shared_experts": 0, "routed_experts": 6291456}},
         "sources": {"gguf": [{"repo": PLAN_CAT_REPO, "quants": [
             {"quant": q, "files": ["planned-%s.gguf" % q],
              "size_bytes": os.path.getsize(os.path.join(ROOT, PLAN_REPO, "planned-%s.gguf" % q))}
             for q in PLANNED]}]}}]}, f)


def check_sanitizers(text, what):
    """ASan/UBSan builds: any report fails the test, whatever the exit code."""
    if "Sanitizer" in text or "runtime error:" in text:
        print("FAIL: sanitizer report from", what)
        print(text)
        sys.exit(1)


def data_dir(tag):
    d = os.path.join(TMP, "data-" + tag)
    os.makedirs(d, exist_ok=True)
    return d


def cli(data, *args, env=None, timeout=60, limit_fsize=None):
    e = dict(BASE_ENV, MOEDESK_DATA_DIR=data, **(env or {}))

    def pre():
        if limit_fsize:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_fsize, limit_fsize))
    t = time.monotonic()
    r = subprocess.run([CLI] + list(args), env=e, capture_output=True, text=True,
                       timeout=timeout, preexec_fn=pre)
    r.elapsed = time.monotonic() - t
    r.all = r.stdout + r.stderr
    check_sanitizers(r.all, args)
    return r


def model_dir(data, name):
    return os.path.join(data, "models", name.replace("/", "--"))


def manifest(data, name):
    with open(os.path.join(model_dir(data, name), "manifest.json")) as f:
        return json.load(f)


REPO = "test-org/tiny-GGUF"
Q8 = REPO + "/tiny-Q8_0.gguf"
SRC_Q8 = os.path.join(ROOT, REPO, "tiny-Q8_0.gguf")
Q8_SIZE = os.path.getsize(SRC_Q8)


def fresh_pull(tag, *args, **kw):
    control("reset")
    return cli(data_dir(tag), "pull", *args, **kw)


# ---- the cases ----------------------------------------------------------------

def test_names():
    d = data_dir("names")
    for bad in ["../evil", "/etc/passwd", "a/b/c", "org/..", "a\\b", "..", "org/-x", "a--b/c",
                "", "org/re po"]:
        for cmd in (["pull", bad], ["verify", bad], ["rm", bad]):
            r = cli(d, *cmd)
            check(r.returncode != 0, "%s refuses %r" % (cmd[0], bad), r.all)
    r = cli(d, "pull", "../evil")
    check("invalid" in r.all, "a bad name is called invalid", r.all)
    r = cli(d, "rm", "../../" + os.path.basename(TMP))
    check(r.returncode != 0 and os.path.isdir(TMP), "rm cannot reach outside models/", r.all)
    r = cli(d, "pull", "no-such-model")
    check(r.returncode == 1 and "unknown model 'no-such-model'" in r.all,
          "an unknown plain name is reported", r.all)
    check(not os.path.exists(os.path.join(d, "evil")), "nothing was created outside models/")


def test_pick_and_manifest():
    d = data_dir("main")
    r = fresh_pull("main", REPO)
    check(r.returncode == 0, "pull ORG/REPO succeeds", r.all)
    # The test repository's files have no model metadata: the planner cannot
    # run, and pull says so before falling back to the size rule.
    check("memory planner cannot run" in r.all and "missing or zero llama.block_count" in r.all,
          "a header without model keys: pull says the planner cannot run, and why", r.all)
    check("picked Q8_0" in r.all, "the size rule then picks the largest quant under 0.9 x memory",
          r.all)
    m = manifest(d, REPO)
    check(m["state"] == "complete" and m["quant"] == "Q8_0" and m["source"] == "hf",
          "manifest state, quant, source", m)
    check(m["revision"] == hashlib.sha1(REPO.encode()).hexdigest(), "manifest revision is the commit", m)
    f = m["files"][0]
    check(f["path"] == "tiny-Q8_0.gguf" and f["size"] == Q8_SIZE and f["sha256"] == sha256(SRC_Q8),
          "manifest file entry", f)
    check(sha256(os.path.join(model_dir(d, REPO), "tiny-Q8_0.gguf")) == f["sha256"],
          "installed bytes are the hub's")
    check("verified" in m, "pull records a verified time", m)
    left = [n for n in os.listdir(model_dir(d, REPO)) if ".part" in n]
    check(not left, "no .part, sidecar or lock left behind", left)
    r = cli(d, "pull", REPO + ":q4_k_m")
    check(r.returncode == 0 and os.path.exists(os.path.join(model_dir(d, REPO), "tiny-Q4_K_M.gguf")),
          "a quant named in any case is pulled", r.all)
    r = cli(d, "pull", REPO + ":BF16")
    check(r.returncode == 0, "a split set quant is pulled", r.all)
    for k in (1, 2):
        check(os.path.exists(os.path.join(model_dir(d, REPO), "BF16",
                                          "tiny-BF16-%05d-of-00002.gguf" % k)), "split part %d" % k)
    r = cli(d, "pull", REPO + ":config.json")
    check(r.returncode == 0, "a single non-LFS file (git blob id) is pulled and checked", r.all)
    m = manifest(d, REPO)
    check(len(m["files"]) == 5 and "BF16" in m["quant"], "one manifest for the repository", m)
    check(any(f.get("git_sha1") for f in m["files"]), "non-LFS files carry the git blob id", m)
    r = cli(d, "pull", REPO + ":Q2_K")
    check(r.returncode == 1 and "has no quantisation Q2_K" in r.all and "Q8_0" in r.all,
          "an unknown quant lists those there are", r.all)
    r = cli(d, "list")
    lines = r.stdout.splitlines()
    check(r.returncode == 0 and lines[1].split()[0] == REPO, "list: the name comes first", r.stdout)
    control("reset")
    r = cli(d, "pull", REPO)
    check(r.returncode == 0 and stats(Q8)["requests"] == 0 and "already present" in r.all,
          "pulling again fetches nothing", r.all)


def test_verify():
    d = data_dir("main")
    md = model_dir(d, REPO)
    r = cli(d, "verify", REPO)
    check(r.returncode == 0 and "all 5 files OK" in r.stdout, "verify passes a fresh install", r.all)
    q8 = os.path.join(md, "tiny-Q8_0.gguf")
    with open(q8, "r+b") as f:
        f.seek(5000)
        b = f.read(1)
        f.seek(5000)
        f.write(bytes([b[0] ^ 1]))
    part2 = os.path.join(md, "BF16", "tiny-BF16-00002-of-00002.gguf")
    os.rename(part2, part2 + ".moved")
    cfg = os.path.join(md, "config.json")
    os.truncate(cfg, 5)
    r = cli(d, "verify", REPO)
    out = {l[15:].split(":")[0]: l for l in r.stdout.splitlines() if len(l) > 15}
    check(r.returncode == 1, "verify exits 1 when a file is bad", r.all)
    check(out.get("tiny-Q8_0.gguf", "").startswith("hash mismatch"), "a changed byte: hash mismatch", r.stdout)
    check(out.get("BF16/tiny-BF16-00002-of-00002.gguf", "").startswith("missing"),
          "a deleted split part: missing", r.stdout)
    check(out.get("config.json", "").startswith("size mismatch"), "a truncated file: size mismatch", r.stdout)
    check(out.get("tiny-Q4_K_M.gguf", "").startswith("OK"), "an intact file: OK", r.stdout)
    # Structure: a file whose hash matches a manifest that was updated to a
    # broken file (as if the repository itself published it).
    os.rename(part2 + ".moved", part2)
    r = cli(d, "pull", REPO)  # repairs? no: the manifest still lists them; pull only fetches missing
    m = manifest(d, REPO)
    with open(q8, "r+b") as f:
        f.write(b"XXXX")  # bad magic
    for e in m["files"]:
        p = os.path.join(md, *e["path"].split("/"))
        if e["path"] in ("tiny-Q8_0.gguf",):
            e["sha256"] = sha256(p)
        if e["path"] == "config.json":
            e["size"] = 5
            e.pop("git_sha1", None)
    with open(os.path.join(md, "manifest.json"), "w") as f:
        json.dump(m, f)
    r = cli(d, "verify", REPO)
    check(r.returncode == 1 and any(l.startswith("corrupt") and "tiny-Q8_0.gguf" in l
                                    for l in r.stdout.splitlines()),
          "a GGUF whose header does not parse: corrupt", r.stdout)
    check(sum(l.startswith("OK") for l in r.stdout.splitlines()) == 4, "the rest is OK", r.stdout)


def test_safetensors():
    d = data_dir("st")
    name = "test-org/tiny-st"
    r = fresh_pull("st", name)
    check(r.returncode == 0, "pull a safetensors checkpoint", r.all)
    files = sorted(f["path"] for f in manifest(d, name)["files"])
    check(files == ["config.json", "model-00001-of-00002.safetensors",
                    "model-00002-of-00002.safetensors", "model.safetensors.index.json"],
          "checkpoint files chosen (README left out)", files)
    r = cli(d, "verify", name)
    check(r.returncode == 0, "verify a checkpoint", r.all)
    md = model_dir(d, name)

    def rewrite(rel, data):
        p = os.path.join(md, rel)
        with open(p, "wb") as f:
            f.write(data)
        m = manifest(d, name)
        for e in m["files"]:
            if e["path"] == rel:
                e["size"] = len(data)
                e.pop("git_sha1", None)
                e["sha256"] = hashlib.sha256(data).hexdigest()
        with open(os.path.join(md, "manifest.json"), "w") as f:
            json.dump(m, f)

    shard1 = os.path.join(md, "model-00001-of-00002.safetensors")
    good1 = open(shard1, "rb").read()
    bad = struct.pack("<Q", 1 << 40) + good1[8:]
    rewrite("model-00001-of-00002.safetensors", bad)
    r = cli(d, "verify", name)
    check(r.returncode == 1 and "corrupt        model-00001-of-00002.safetensors" in r.stdout,
          "a shard whose header length lies: corrupt", r.stdout)
    hlen = struct.unpack("<Q", good1[:8])[0]
    hdr = json.loads(good1[8:8 + hlen])
    hdr["model.norm"]["data_offsets"][1] += 4  # tensor past its extent
    text = json.dumps(hdr).encode()
    text += b" " * (-len(text) % 8)
    rewrite("model-00001-of-00002.safetensors", struct.pack("<Q", len(text)) + text + good1[8 + hlen:])
    r = cli(d, "verify", name)
    check(r.returncode == 1 and "corrupt        model-00001-of-00002.safetensors" in r.stdout,
          "a tensor extent outside the file: corrupt", r.stdout)
    rewrite("model-00001-of-00002.safetensors", good1)
    idx = json.load(open(os.path.join(md, "model.safetensors.index.json")))
    idx["weight_map"]["lm_head.weight"] = "model-00001-of-00002.safetensors"
    rewrite("model.safetensors.index.json", json.dumps(idx).encode())
    r = cli(d, "verify", name)
    check(r.returncode == 1 and "does not have it" in r.stdout,
          "weight_map sending a tensor to the wrong shard: corrupt", r.stdout)
    idx["weight_map"]["lm_head.weight"] = "model-00003-of-00003.safetensors"
    rewrite("model.safetensors.index.json", json.dumps(idx).encode())
    r = cli(d, "verify", name)
    check(r.returncode == 1 and "not an installed file" in r.stdout,
          "weight_map naming a missing shard: corrupt", r.stdout)


def test_cut_and_retries():
    r = fresh_pull("cut", Q8.rsplit("/", 1)[0] + ":tiny-Q8_0.gguf", env={})
    check(r.returncode == 0, "baseline pull", r.all)
    control("reset")
    control("fault", path=Q8, kind="cut", at=300000)
    r = cli(data_dir("cut2"), "pull", REPO + ":tiny-Q8_0.gguf")
    s = stats(Q8)
    check(r.returncode == 0, "a connection cut mid-file is resumed", r.all)
    check(300000 in s["range_starts"], "the retry asks for the rest with Range", s)
    check(s["bytes"] == Q8_SIZE, "nothing is downloaded twice after a cut", s)
    check(sha256(os.path.join(model_dir(data_dir("cut2"), REPO), "tiny-Q8_0.gguf")) == sha256(SRC_Q8),
          "the resumed file hashes right")

    control("reset")
    control("fault", path=Q8, kind="status", code=500, count=2)
    r = cli(data_dir("e500"), "pull", REPO + ":tiny-Q8_0.gguf")
    check(r.returncode == 0 and stats(Q8)["requests"] == 3, "500, 500, then success", r.all)
    check("HTTP 500" in r.all and "retrying" in r.all, "the retries are shown", r.all)

    control("reset")
    control("fault", path=Q8, kind="status", code=429, retry_after="1")
    r = cli(data_dir("e429"), "pull", REPO + ":tiny-Q8_0.gguf")
    check(r.returncode == 0 and r.elapsed >= 1.0, "429 with Retry-After: 1 waits a second",
          "%s %.2f" % (r.all, r.elapsed))
    control("reset")
    control("fault", path=Q8, kind="status", code=429, retry_after="date:2")
    r = cli(data_dir("e429d"), "pull", REPO + ":tiny-Q8_0.gguf")
    check(r.returncode == 0 and r.elapsed >= 0.9, "429 with an HTTP-date Retry-After waits",
          "%s %.2f" % (r.all, r.elapsed))

    control("reset")
    control("fault", path=Q8, kind="stall", at=200000)
    r = cli(data_dir("stall"), "pull", REPO + ":tiny-Q8_0.gguf", env={"MOEDESK_HTTP_TIMEOUT_S": "1"})
    s = stats(Q8)
    check(r.returncode == 0 and 200000 in s["range_starts"] and r.elapsed < 20,
          "a server that stops sending: timeout, then resume", (r.all, s))

    control("reset")
    control("fault", path=Q8, kind="status", code=503, count=-1)
    r = cli(data_dir("e503"), "pull", REPO + ":tiny-Q8_0.gguf", env={"MOEDESK_RETRY_ATTEMPTS": "3"})
    check(r.returncode == 1 and "giving up after 3 attempts" in r.all and stats(Q8)["requests"] == 3,
          "a server that keeps failing: bounded attempts", r.all)

    control("reset")
    control("fault", path=Q8, kind="cut", at=400000)
    control("fault", path=Q8, kind="norange", count=-1)
    r = cli(data_dir("norange"), "pull", REPO + ":tiny-Q8_0.gguf")
    s = stats(Q8)
    check(r.returncode == 0 and s["bytes"] == 400000 + Q8_SIZE,
          "a server ignoring Range: restart from zero, file right", (r.all, s))


def test_errors():
    r = fresh_pull("err", REPO + ":missing.gguf")
    check(r.returncode == 1 and "missing.gguf not found in repository test-org/tiny-GGUF" in r.all,
          "a file not in the repository is named", r.all)
    r = fresh_pull("err", "test-org/nope")
    check(r.returncode == 1 and "repository test-org/nope" in r.all and "404" in r.all,
          "a repository not on the hub is named", r.all)
    control("reset")
    control("fault", path=Q8, kind="status", code=404, count=-1)
    r = cli(data_dir("err"), "pull", REPO + ":tiny-Q8_0.gguf")
    check(r.returncode == 1 and "test-org/tiny-GGUF: tiny-Q8_0.gguf: not found" in r.all,
          "404 on download names repository and file", r.all)
    d = data_dir("corrupt")
    control("reset")
    control("fault", path=Q8, kind="corrupt", at=1000, count=-1)
    r = cli(d, "pull", REPO + ":tiny-Q8_0.gguf")
    check(r.returncode == 1 and "sha256 mismatch" in r.all and "tiny-Q8_0.gguf" in r.all,
          "a wrong byte: sha256 mismatch naming the file", r.all)
    md = model_dir(d, REPO)
    check(not any(n.startswith("tiny-Q8_0.gguf") for n in os.listdir(md)),
          "nothing installed and no part kept after a mismatch", os.listdir(md))
    check(manifest(d, REPO)["state"] == "downloading", "the manifest says the pull did not finish")
    r = fresh_pull("space", REPO + ":tiny-Q8_0.gguf", env={"MOEDESK_TEST_FREE_BYTES": "1000"})
    check(r.returncode == 1 and "not enough disk space in" in r.all and stats(Q8)["bytes"] == 0,
          "too little free space is refused before downloading", r.all)


def test_disk_full():
    d = data_dir("fsize")
    control("reset")
    r = cli(d, "pull", REPO + ":tiny-Q8_0.gguf", limit_fsize=600000)
    part = os.path.join(model_dir(d, REPO), "tiny-Q8_0.gguf.part")
    check(r.returncode == 1 and "partial file is kept" in r.all and "File too large" in r.all,
          "a full disk (file size limit) is a clear error", r.all)
    check(os.path.exists(part) and 0 < os.path.getsize(part) <= 600000 and
          os.path.exists(part + ".json"), "the part and its sidecar are kept")
    have = os.path.getsize(part)
    control("reset")
    r = cli(d, "pull", REPO + ":tiny-Q8_0.gguf")
    s = stats(Q8)
    check(r.returncode == 0 and s["range_starts"] == [have] and s["bytes"] == Q8_SIZE - have,
          "the next pull resumes where the disk filled up", (r.all, s))


def test_kill_and_locks():
    repo = "test-org/two-GGUF"
    p1, p2 = repo + "/two-Q8_0-00001-of-00002.gguf", repo + "/two-Q8_0-00002-of-00002.gguf"
    size2 = os.path.getsize(os.path.join(ROOT, p2))
    d = data_dir("kill")
    control("reset")
    control("fault", path=p2, kind="slow", rate=1500000)
    env = dict(BASE_ENV, MOEDESK_DATA_DIR=d)
    proc = subprocess.Popen([CLI, "pull", repo + ":Q8_0"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    part = os.path.join(model_dir(d, repo), "two-Q8_0-00002-of-00002.gguf.part")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not os.path.exists(part) or os.path.getsize(part) < 1500000):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    have = os.path.getsize(part)
    check(1500000 <= have < size2, "killed mid-download with a part on disk", have)
    check(open(part + ".lock").read().strip() == str(proc.pid), "the dead process's lock is left")
    check(os.path.exists(os.path.join(model_dir(d, repo), "two-Q8_0-00001-of-00002.gguf")),
          "the small part had finished before the kill")
    time.sleep(0.5)  # let the hub notice the dead connection before counting anew
    control("reset")
    r = cli(d, "pull", repo)
    s1, s2 = stats(p1), stats(p2)
    check(r.returncode == 0, "pull by repo id after kill -9 finishes", r.all)
    check(s1["requests"] == 0, "the finished file is not downloaded again", s1)
    check(s2["range_starts"] == [have] and s2["bytes"] == size2 - have,
          "the killed file resumes where its part ends", (have, size2, s2))
    r = cli(d, "verify", repo)
    check(r.returncode == 0, "the resumed model verifies", r.all)

    # A live process holding the lock.
    d = data_dir("lock")
    md = model_dir(d, REPO)
    os.makedirs(md)
    lock = os.path.join(md, "tiny-Q8_0.gguf.part.lock")
    with open(lock, "w") as f:
        f.write("%d\n" % hub.pid)
    control("reset")
    r = cli(d, "pull", "--no-wait", REPO + ":tiny-Q8_0.gguf")
    check(r.returncode == 1 and "already being downloaded by pid %d" % hub.pid in r.all,
          "--no-wait reports the pid holding the lock", r.all)
    proc = subprocess.Popen([CLI, "pull", REPO + ":tiny-Q8_0.gguf"], env=dict(BASE_ENV, MOEDESK_DATA_DIR=d),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)
    check(proc.poll() is None, "without --no-wait it waits")
    os.unlink(lock)
    out, _ = proc.communicate(timeout=30)
    check_sanitizers(out, "pull waiting for a lock")
    check(proc.returncode == 0 and "waiting for it" in out, "and finishes once the lock is gone", out)

    # Two pulls of the same model at once share one download.
    d = data_dir("twin")
    control("reset")
    control("fault", path=Q8, kind="slow", rate=800000)
    env = dict(BASE_ENV, MOEDESK_DATA_DIR=d)
    a = subprocess.Popen([CLI, "pull", REPO + ":tiny-Q8_0.gguf"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(0.3)
    b = subprocess.Popen([CLI, "pull", REPO + ":tiny-Q8_0.gguf"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    oa, _ = a.communicate(timeout=30)
    ob, _ = b.communicate(timeout=30)
    check_sanitizers(oa + ob, "concurrent pulls")
    check(a.returncode == 0 and b.returncode == 0, "both concurrent pulls succeed", oa + ob)
    check(stats(Q8)["bytes"] == Q8_SIZE, "the file was downloaded once", stats(Q8))


def test_slow_progress():
    control("reset")
    control("fault", path=Q8, kind="slow", rate=400000)
    r = cli(data_dir("slow"), "pull", REPO + ":tiny-Q8_0.gguf")
    check(r.returncode == 0, "a slow download finishes", r.all)
    rows = []
    for line in r.stderr.splitlines():
        if line.startswith("progress") and "[done=" in line:
            kv = dict(x.split("=") for x in line.split("[", 1)[1].rstrip("]").split())
            rows.append({k: float(v) for k, v in kv.items()})
    mid = [x for x in rows if 0.2 * Q8_SIZE < x["done"] < 0.9 * Q8_SIZE]
    check(len(mid) >= 3, "progress lines while downloading", r.stderr)
    check(all(150000 < x["rate"] < 1000000 for x in mid), "the rate is near 400 kB/s",
          [x["rate"] for x in mid])
    etas = [x["eta"] for x in mid]
    check(all(0 <= e <= 6 for e in etas) and etas[-1] <= etas[0], "the ETA is sane and falls", etas)
    check(all(abs(x["eta"] - (x["total"] - x["done"]) / x["rate"]) <= 1.5 for x in mid),
          "the ETA is what is left over the rate")


def test_token_redirect_modelscope_catalog():
    control("reset")
    control("fault", path=Q8, kind="redirect")
    r = cli(data_dir("token"), "pull", REPO + ":tiny-Q8_0.gguf", env={"HF_TOKEN": "hf_SECRETtoken123"})
    check(r.returncode == 0, "a redirect to another origin is followed", r.all)
    reqs = control("stats")["requests"]
    hub_reqs = [q for q in reqs if q["port"] == PORT and not q["path"].startswith("/_control")]
    cdn = [q for q in reqs if q["port"] == CDN_PORT]
    check(hub_reqs and all(q.get("auth") == "Bearer hf_SECRETtoken123" for q in hub_reqs),
          "the token goes to the hub", hub_reqs)
    check(cdn and not any("auth" in q for q in cdn), "but not to the other origin", cdn)
    check("SECRET" not in r.all, "the token is never printed")

    d = data_dir("ms")
    control("reset")
    r = cli(d, "pull", "ms:test-org/tiny-GGUF:Q4_K_M")
    m = manifest(d, REPO)
    check(r.returncode == 0 and m["source"] == "modelscope" and m["files"][0]["sha256"] ==
          sha256(os.path.join(ROOT, REPO, "tiny-Q4_K_M.gguf")), "ModelScope pull", r.all)
    check(cli(d, "verify", REPO).returncode == 0, "ModelScope model verifies")

    d = data_dir("catalog")
    r = cli(d, "pull", "tiny:moe")
    check(r.returncode == 0 and os.path.isdir(model_dir(d, "tiny-moe")),
          "a catalog alias installs under the catalog id", r.all)
    check(cli(d, "verify", "tiny-moe").returncode == 0, "verify by catalog id")
    check(cli(d, "verify", REPO).returncode == 0, "verify by repository id")
    r = cli(d, "rm", REPO)
    check(r.returncode == 0 and not os.path.exists(model_dir(d, "tiny-moe")), "rm by repository id", r.all)
    r = cli(d, "list")
    check("no models installed" in r.stdout, "list after rm", r.stdout)
    r = cli(d, "rm", "tiny-moe")
    check(r.returncode == 1 and "no installed model" in r.all, "rm of a missing model", r.all)


def machine_file(tag, **desc):
    path = os.path.join(TMP, "machine-%s.json" % tag)
    with open(path, "w") as f:
        json.dump(dict(name=tag, **desc), f)
    return path


def installed_ggufs(data, name):
    d = model_dir(data, name)
    return sorted(n for n in os.listdir(d) if n.endswith(".gguf")) if os.path.isdir(d) else []


def test_planner_pick():
    # Scaled-down machines for the scaled-down model: a GPU box (24 GB
    # GPU), a CPU-only box where F16 (~24.6 MiB planned) does not fit but
    # Q8_0 (~17.7 MiB) does, and one where nothing fits (Q4_0 needs ~14 MiB).
    gpu = machine_file("gpu24", ram_total="64 GiB", cores_logical=16,
                       gpus=[{"name": "NVIDIA GeForce RTX 4090", "vram_total": "24 GiB"}])
    cpu = machine_file("cpu22m", ram_total="22 MiB", cores_logical=4)
    tiny = machine_file("cpu8m", ram_total="8 MiB")
    header = PLAN_REPO + "/planned-Q4_0.gguf"  # the smallest single file
    q4_size = os.path.getsize(os.path.join(ROOT, header))

    d = data_dir("plan-gpu")
    control("reset")
    r = cli(d, "pull", "--machine", gpu, PLAN_REPO, env={"MOEDESK_TEST_HEADER_BYTES": "300"})
    check(r.returncode == 0 and installed_ggufs(d, PLAN_REPO) == ["planned-F16.gguf"],
          "24 GB GPU machine: the planner picks F16", r.all)
    check("picked F16" in r.all and "all on GPU" in r.all and "gpu24" in r.all and
          "GGUF header of planned-Q4_0.gguf" in r.all, "the reason names the placement, the"
          " machine and where the structure came from", r.all)
    s = stats(header)
    check(s["requests"] >= 2 and s["range_starts"][0] == 0 and s["range_starts"] == sorted(s["range_starts"])
          and s["bytes"] < 65536 and s["bytes"] < q4_size,
          "the header is read with growing Range requests, not the whole file", s)
    check(manifest(d, PLAN_REPO)["quant"] == "F16", "the manifest records the pick")

    d = data_dir("plan-cpu")
    control("reset")
    r = cli(d, "pull", "--machine", cpu, PLAN_REPO)
    check(r.returncode == 0 and installed_ggufs(d, PLAN_REPO) == ["planned-Q8_0.gguf"],
          "small CPU-only machine: the planner picks Q8_0", r.all)
    check("picked Q8_0" in r.all and "on the CPU" in r.all, "the reason says CPU", r.all)
    check(stats(header)["requests"] == 1 and stats(header)["bytes"] <= 4 << 20,
          "one Range request of at most 4 MiB reads the header", stats(header))
    r = cli(d, "pull", PLAN_REPO, env={"MOEDESK_MACHINE": cpu})
    check(r.returncode == 0 and "picked Q8_0" in r.all and "already present" in r.all,
          "MOEDESK_MACHINE describes the machine too; the pick is already there", r.all)

    d = data_dir("plan-none")
    control("reset")
    r = cli(d, "pull", "--machine", tiny, PLAN_REPO)
    check(r.returncode == 1 and "no quantisation in %s fits" % PLAN_REPO in r.all and
          "needs" in r.all and PLAN_REPO + ":Q4_0" in r.all,
          "nothing fits: pull stops, says what the smallest needs and how to force one", r.all)
    check(installed_ggufs(d, PLAN_REPO) == [] and
          all(stats(PLAN_REPO + "/planned-%s.gguf" % q)["requests"] == 0 for q in ("F16", "Q8_0")),
          "nothing was downloaded")
    r = cli(d, "pull", "--machine", tiny, PLAN_REPO + ":q4_0")
    check(r.returncode == 0 and installed_ggufs(d, PLAN_REPO) == ["planned-Q4_0.gguf"] and
          "memory planner" not in r.all, "a named quant overrides the planner", r.all)
    control("reset")
    r = cli(d, "pull", "--machine", tiny, PLAN_REPO + ":planned-F16.gguf")
    check(r.returncode == 0 and "planned-F16.gguf" in installed_ggufs(d, PLAN_REPO) and
          stats(header)["requests"] == 0, "a named file overrides the planner (no header read)",
          r.all)

    d = data_dir("plan-cat")
    control("reset")
    r = cli(d, "pull", "--machine", cpu, PLAN_CAT_REPO)
    check(r.returncode == 0 and installed_ggufs(d, PLAN_CAT_REPO) == ["planned-Q8_0.gguf"] and
          "structure from the catalog" in r.all, "a catalog repository is planned from its entry",
          r.all)
    check(all(stats(PLAN_CAT_REPO + "/planned-%s.gguf" % q)["requests"] == 0 for q in ("F16", "Q4_0")),
          "without reading any header")
    r = cli(data_dir("plan-cat-gpu"), "pull", "--machine", gpu, "planned-moe")
    check(r.returncode == 0 and installed_ggufs(data_dir("plan-cat-gpu"), "planned-moe") ==
          ["planned-F16.gguf"], "by catalog name on the GPU machine: F16", r.all)
    r = cli(d, "pull", "--machine", os.path.join(TMP, "no-such-machine.json"), PLAN_REPO)
    check(r.returncode == 1 and "no-such-machine.json" in r.all, "a bad --machine is reported",
          r.all)


def main():
    t0 = time.monotonic()
    try:
        for t in (test_names, test_pick_and_manifest, test_verify, test_safetensors,
                  test_cut_and_retries, test_errors, test_disk_full, test_kill_and_locks,
                  test_slow_progress, test_token_redirect_modelscope_catalog,
                  test_planner_pick):
            print("==", t.__name__)
            t()
    finally:
        hub.stdin.close()
        hub.wait(timeout=10)
    check(hub.returncode == 0, "the fixture hub exits cleanly", hub.returncode)
    print("%d checks passed in %.1f s" % (N_CHECKS, time.monotonic() - t0))


if __name__ == "__main__":
    main()

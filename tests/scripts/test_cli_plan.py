#!/usr/bin/python3
"""End-to-end tests of `moedesk-cli hw` and `moedesk-cli plan` as a user runs
them: real processes, the tier machine files of tests/data/machines, the
shipped catalog, a tiny GGUF model written here, the fake NVML module, and
the one-line errors (exit 1) that bad input must get.

usage: test_cli_plan.py MOEDESK_CLI FAKE_NVML_MODULE
Needs MOE_SOURCE_ROOT and MOE_SHARED_DATA (meson's test_env).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

CLI = sys.argv[1]
FAKE_NVML = sys.argv[2]
ROOT = os.environ["MOE_SOURCE_ROOT"]
MACHINES = os.path.join(ROOT, "tests", "data", "machines")
CATALOG = os.path.join(ROOT, "resources", "catalog.json")
failures = 0
checks = 0


def check(cond, what):
    global failures, checks
    checks += 1
    if not cond:
        failures += 1
        print(f"FAIL: {what}", file=sys.stderr)


def run(*args, env_extra=None):
    env = dict(os.environ)
    env.pop("MOEDESK_MACHINE", None)
    env["MOEDESK_CATALOG"] = CATALOG
    env.update(env_extra or {})
    p = subprocess.run([CLI, *args], capture_output=True, timeout=120, env=env)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def machine(name):
    return os.path.join(MACHINES, name)


def one_line_error(rc, err, needle, what):
    check(rc == 1, f"{what}: exit {rc}, expected 1 ({err!r})")
    check(err.count("\n") == 1 and needle in err, f"{what}: one line naming {needle!r}: {err!r}")


def test_hw(tmp):
    rc, out, err = run("hw", env_extra={"MOEDESK_NVML_PATH": os.path.join(tmp, "absent.so")})
    check(rc == 0, f"hw exit {rc}: {err}")
    check("cpu:" in out and "ram:" in out and "gpus:     none" in out, f"hw text: {out}")
    rc, out, err = run("hw", "--json")
    check(rc == 0, f"hw --json exit {rc}: {err}")
    info = json.loads(out)
    check(info["ram_total"] > 0 and info["cpu"], f"hw --json: {info}")
    check(1 <= info["cores_physical"] <= info["cores_logical"], "cores ordered")
    check(isinstance(info["cpu_features"], list) and isinstance(info["gpus"], list), "lists")
    # the JSON is a machine file: it reads back as the same machine
    path = os.path.join(tmp, "this.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(out)
    rc, again, err = run("hw", "--json", "--machine", path)
    check(rc == 0 and json.loads(again) == info, f"hw --json round trip: {err}")
    rc, again, err = run("hw", "--json", env_extra={"MOEDESK_MACHINE": path})
    check(rc == 0 and json.loads(again) == info, "MOEDESK_MACHINE round trip")

    # the NVML path for real, through the fake driver library
    rc, out, err = run("hw", env_extra={"MOEDESK_NVML_PATH": FAKE_NVML})
    check(rc == 0 and "NVIDIA GeForce RTX 4090, 24.0 GiB, 23.0 GiB free, driver 560.94, 350 W" in out,
          f"hw with fake NVML: {out} {err}")
    rc, out, err = run("hw", "--json", env_extra={"MOEDESK_NVML_PATH": FAKE_NVML, "FAKE_NVML_COUNT": "2"})
    gpus = json.loads(out)["gpus"] if rc == 0 else []
    check(len(gpus) == 2 and gpus[0]["vram_total"] == 24 << 30 and gpus[0]["driver"] == "560.94"
          and gpus[0]["compute"] is True, f"hw --json with two fake GPUs: {gpus}")

    rc, out, err = run("hw", "--machine", machine("rtx4090-2x.json"))
    check(rc == 0 and out.count("NVIDIA GeForce RTX 4090") == 2, "hw --machine 2x 4090")

    rc, out, err = run("hw", "--machine", os.path.join(tmp, "missing.json"))
    one_line_error(rc, err, "missing.json", "hw missing machine file")
    bad = os.path.join(tmp, "typo.json")
    with open(bad, "w") as f:
        f.write('{"ram_total": "64 GiB", "gpus": [{"vram_totl": 1}]}')
    rc, out, err = run("hw", "--machine", bad)
    one_line_error(rc, err, 'unknown key "vram_totl" in gpus[0]', "hw typo in machine file")
    check("typo.json" in err, "the message names the file")
    rc, out, err = run("hw", "extra")
    check(rc == 2, "hw with an extra argument is a usage error")


# (model, machine, expected "choice:" line)
EXPECTED = [
    ("qwen3-30b-a3b", "rtx4090-1x.json", "Q4_K_M, all on GPU, 32768 tokens"),
    ("Qwen3-30B-A3B-Instruct-2507", "rtx4090-2x.json", "Q8_0, all on GPU, 32768 tokens"),
    ("qwen3-30b-a3b-instruct-2507", "rtx-a6000.json", "Q8_0, all on GPU, 32768 tokens"),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "a100-80g-4x.json", "BF16 (import), all on GPU, 32768 tokens"),
    ("qwen3:30b-a3b", "cpu-64g.json", "Q8_0, CPU only, 32768 tokens"),
    ("unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF", "rtx4090-1x.json", "Q4_K_M, all on GPU, 32768 tokens"),
    ("mixtral-8x7b", "rtx4090-1x.json", "Q8_0, experts in RAM, 32768 tokens"),
    ("olmoe", "cpu-64g.json", "BF16 (import), CPU only, 4096 tokens"),
    ("kimi-k3", "a100-80g-4x.json", "UD-IQ1_M, experts in RAM, 32768 tokens"),
    ("kimi-k3", "rtx4090-1x.json", "none (does not fit)"),
]


def test_plan_choices():
    for model, mach, want in EXPECTED:
        rc, out, err = run("plan", model, "--machine", machine(mach))
        check(rc == 0, f"plan {model} on {mach}: exit {rc}: {err}")
        line = next((l for l in out.splitlines() if l.startswith("choice:")), "")
        check(line == "choice:   " + want, f"plan {model} on {mach}: {line!r}, expected {want!r}")
        check("reason:" in out, f"plan {model} on {mach} gives a reason")
    rc, out, err = run("plan", "kimi-k3", "--machine", machine("rtx4090-1x.json"))
    check("does not fit: the smallest option, UD-IQ1_S" in out and "GiB of RAM" in out,
          f"kimi-k3 on a 4090 says what it needs: {out}")
    check("engine:   upstream-only" in out, "kimi-k3 is marked upstream-only")
    # MOEDESK_MACHINE is the default machine
    rc, out, err = run("plan", "qwen3-30b-a3b", env_extra={"MOEDESK_MACHINE": machine("cpu-64g.json")})
    check("choice:   Q8_0, CPU only" in out, f"plan honours MOEDESK_MACHINE: {out}")
    # --all shows every context tried; the default only the chosen one's
    _, short, _ = run("plan", "qwen3-30b-a3b", "--machine", machine("rtx4090-1x.json"))
    _, full, _ = run("plan", "qwen3-30b-a3b", "--machine", machine("rtx4090-1x.json"), "--all")
    check(" 8192 " not in short and " 8192 " in full, "--all adds the fallback contexts")


def test_plan_json():
    rc, out, err = run("plan", "mixtral-8x7b", "--machine", machine("rtx4090-1x.json"), "--ctx", "32768,8192",
                       "--json")
    check(rc == 0, f"plan --json exit {rc}: {err}")
    p = json.loads(out)
    check(p["contexts"] == [32768, 8192], f"contexts {p['contexts']}")
    n_variants = len(p["verdicts"])
    check(len(p["options"]) == 2 * n_variants * 3, "options: contexts x variants x 3 placements")
    for o in p["options"]:
        if o["placement"] != "cpu":
            check(o["gpu_bytes"] == o["weights_gpu"] + o["kv"] + o["compute_gpu"] + o["overhead_gpu"],
                  f"GPU parts add up: {o}")
            host = o["weights_host"] + o["compute_host"] + o["overhead_host"]
        else:
            check(o["gpu_bytes"] == 0 and o["n_gpus"] == 0, "CPU option uses no GPU")
            host = o["weights_host"] + o["kv"] + o["compute_host"] + o["overhead_host"]
        check(o["host_bytes"] == host, f"host parts add up: {o}")
        check(o["fits"] == (o["host_bytes"] <= o["host_budget"] and
                            (o["placement"] == "cpu" or o["gpu_bytes"] <= o["gpu_budget"])),
              f"fits agrees with the numbers: {o}")
    c = p["chosen"]
    check(c is not None and c["variant"] == "Q8_0" and c["placement"] == "hybrid" and c["n_ctx"] == 32768,
          f"chosen {c}")
    check(p["options"][c["option"]]["fits"], "the chosen option fits")
    check(all(v["verdict"] in ("fits on GPU", "partial offload", "CPU only", "won't fit") for v in p["verdicts"]),
          "verdict strings")
    check(p["model"]["engine_support"] == "yes" and p["machine"]["compute_gpus"] == 1, "model and machine")
    # a q8_0 cache is 34/32 of a 2-byte one... per 32 elements: 17/32 of f16
    _, f16, _ = run("plan", "qwen3-30b-a3b", "--machine", machine("cpu-64g.json"), "--ctx", "32768", "--json")
    _, q8, _ = run("plan", "qwen3-30b-a3b", "--machine", machine("cpu-64g.json"), "--ctx", "32768", "--json",
                   "--kv-type", "q8_0")
    kv16, kv8 = json.loads(f16)["options"][0]["kv"], json.loads(q8)["options"][0]["kv"]
    check(kv16 == 3221225472 and kv8 * 32 == kv16 * 17, f"kv f16 {kv16}, q8_0 {kv8}")


def gguf_tiny(path):
    """A tiny qwen3moe GGUF (F32 tensors of zeros), written by hand."""
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b
    kvs = [("general.architecture", 8, s("qwen3moe")), ("general.name", 8, s("tiny planner model"))]
    for k, v in (("block_count", 2), ("embedding_length", 64), ("attention.head_count", 4),
                 ("attention.head_count_kv", 2), ("attention.key_length", 16), ("attention.value_length", 16),
                 ("expert_count", 4), ("expert_used_count", 2), ("expert_feed_forward_length", 32),
                 ("context_length", 2048)):
        kvs.append(("qwen3moe." + k, 4, struct.pack("<I", v)))
    tensors = [("token_embd.weight", [64, 100]), ("output_norm.weight", [64]), ("output.weight", [64, 100])]
    for l in range(2):
        for name, shape in (("attn_norm", [64]), ("attn_q", [64, 64]), ("attn_k", [64, 32]),
                            ("attn_v", [64, 32]), ("attn_output", [64, 64]), ("ffn_norm", [64]),
                            ("ffn_gate_inp", [64, 4]), ("ffn_gate_exps", [64, 32, 4]),
                            ("ffn_up_exps", [64, 32, 4]), ("ffn_down_exps", [32, 64, 4])):
            tensors.append((f"blk.{l}.{name}.weight", shape))
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
    for k, t, v in kvs:
        out += s(k) + struct.pack("<I", t) + v
    offset = 0
    sizes = []
    for name, shape in tensors:
        n = 1
        for d in shape:
            n *= d
        out += s(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        out += struct.pack("<IQ", 0, offset)  # F32
        sizes.append(n * 4)
        offset += (n * 4 + 31) // 32 * 32
    out += b"\0" * (-len(out) % 32)
    for size in sizes:
        out += b"\0" * ((size + 31) // 32 * 32)
    with open(path, "wb") as f:
        f.write(out)


def test_plan_gguf(tmp):
    path = os.path.join(tmp, "tiny.gguf")
    gguf_tiny(path)
    rc, out, err = run("plan", path, "--machine", machine("rtx4090-1x.json"), "--json")
    check(rc == 0, f"plan GGUF exit {rc}: {err}")
    p = json.loads(out) if rc == 0 else {}
    if p:
        check(p["model"]["source"] == "file" and p["model"]["architecture"] == "qwen3moe", f"{p['model']}")
        check(p["contexts"] == [2048], "a GGUF's default context is its own (2048)")
        o = p["options"][0]
        # KV: 2 layers x 2 x 2 heads x 16 x 2048 x 2 B
        check(o["kv"] == 2 * 2 * 2 * 16 * 2048 * 2, f"kv {o['kv']}")
        check(p["chosen"]["variant"] == "F32 (file)" and p["chosen"]["placement"] == "gpu", f"{p['chosen']}")
    # a vocabulary-only GGUF has no model hyperparameters
    vocab = os.path.join(os.environ.get("MOE_SHARED_DATA", ""), "vocab", "ggml-vocab-qwen2.gguf")
    if os.path.exists(vocab):
        rc, out, err = run("plan", vocab, "--machine", machine("cpu-64g.json"))
        one_line_error(rc, err, "no weight tensors", "plan on a vocabulary-only GGUF")
        check("ggml-vocab-qwen2.gguf" in err, "the message names the file")
    bad = os.path.join(tmp, "not-a-model.gguf")
    with open(bad, "wb") as f:
        f.write(b"not a gguf at all" * 10)
    rc, out, err = run("plan", bad, "--machine", machine("cpu-64g.json"))
    one_line_error(rc, err, "not-a-model.gguf", "plan on a non-GGUF file")


def test_plan_bad_input(tmp):
    rc, out, err = run("plan", "no-such-model", "--machine", machine("cpu-64g.json"))
    one_line_error(rc, err, "unknown model 'no-such-model'", "plan unknown model")
    rc, out, err = run("plan", "qwen3-30b-a3b", "--machine", os.path.join(tmp, "nomachine.json"))
    one_line_error(rc, err, "nomachine.json", "plan missing machine file")
    rc, out, err = run("plan", "qwen3-30b-a3b", "--machine", machine("cpu-64g.json"), "--ctx", "lots")
    one_line_error(rc, err, "--ctx 'lots'", "plan bad --ctx")
    rc, out, err = run("plan", "qwen3-30b-a3b", "--machine", machine("cpu-64g.json"), "--ctx", "0")
    one_line_error(rc, err, "--ctx '0'", "plan zero context")
    rc, out, err = run("plan", "qwen3-30b-a3b", "--machine", machine("cpu-64g.json"), "--kv-type", "q4")
    one_line_error(rc, err, "--kv-type 'q4'", "plan bad KV type")
    rc, out, err = run("plan", "qwen3-30b-a3b", "--machine", machine("cpu-64g.json"), "--ceiling", "1.5")
    one_line_error(rc, err, "--ceiling", "plan bad ceiling")
    rc, out, err = run("plan", "qwen3-30b-a3b", "--machine", machine("cpu-64g.json"),
                       "--catalog", os.path.join(tmp, "nocatalog.json"))
    one_line_error(rc, err, "nocatalog.json", "plan missing catalog")
    cat = os.path.join(tmp, "v2.json")
    with open(cat, "w") as f:
        f.write('{"schema_version": 2, "models": []}')
    rc, out, err = run("plan", "qwen3-30b-a3b", "--machine", machine("cpu-64g.json"), "--catalog", cat)
    one_line_error(rc, err, "schema_version", "plan catalog of another version")
    broken = os.path.join(tmp, "broken.json")
    with open(broken, "w") as f:
        f.write('{"schema_version": 1, "models": [{"id": "x", "hparams": {"n_layer": "many"}}]}')
    rc, out, err = run("plan", "x", "--machine", machine("cpu-64g.json"), "--catalog", broken)
    one_line_error(rc, err, "n_layer", "plan catalog entry with a wrong type")
    rc, out, err = run("plan")
    check(rc == 2 and "usage" in err, "plan without MODEL is a usage error")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_hw(tmp)
        test_plan_choices()
        test_plan_json()
        test_plan_gguf(tmp)
        test_plan_bad_input(tmp)
    print(f"{checks} checks, {failures} failed", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

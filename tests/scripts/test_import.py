#!/usr/bin/python3
"""Tests `moedesk-cli import` end to end (meson tests import-hf and, with
--node, import-vs-llama).

For each architecture, gen_hf_checkpoint.py writes a random Hugging Face
checkpoint (sharded safetensors in F32/BF16/F16 with an index, or a single
file; per-expert or transformers 5's fused expert tensors; tokenizer.json in both merges forms, tokenizer.model for Mixtral,
tokenizer_config.json, chat template inline or as chat_template.jinja) and,
from the same weights, the GGUF llama.cpp's converter would write. Then:

  equality   import at f32: every key/value and every tensor (bytes) of the
             imported file equals the converter-equivalent one, libmoe's
             tokenizer (moedesk-cli tokenize) splits the vocabulary's test
             text the same with both, the reference forward pass
             (ref_forward.py) gives the same logits on both, and so does
             libmoe's (moedesk-cli eval), within 1e-3 of the reference. Mixtral from tokenizer.json alone: the same except
             tokenizer.ggml.scores, whose order must match the original
             SentencePiece scores wherever those differ.
  q8_0       per-tensor types follow llama-quantize's policy and Q8_0 bytes
             equal gguf_write.py's reference quantiser on the F32 weights;
             without --type the planner picks (BF16 on a 64 GB CPU machine).
  bad input  missing config.json, unknown architecture, a shard the index
             lists but is missing, an index entry pointing at the wrong shard,
             a shape that contradicts config.json, a truncated shard: exit
             status 1, one line naming the culprit, no output file left.
  memory     a >= 200 MB checkpoint imports with peak RSS (VmHWM, which the
             CLI reports) under 3 x the largest expert stack + 100 MB.
  --node     llama.cpp (node-llama-cpp) tokenises ~55 strings identically
             with the imported and the converter-equivalent file
             (tests/node/import-tokenize.mjs), and runs both to the same
             next-token probabilities (tests/node/llama-logits.mjs).

usage: test_import.py --cli MOEDESK_CLI [--node NODE [--only-node]] [--keep DIR]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_hf_checkpoint as gen  # noqa: E402
import gen_model  # noqa: E402
from gguf_read import GGML_F32, GGML_Q8_0, GGUFFile  # noqa: E402
from gguf_write import quantize_q8_0  # noqa: E402

GGML_BF16 = 30
NAME = "imported"
TOKENS = [9707, 11, 1879, 0, 576, 374, 264, 1273, 13, 151644, 872, 198]
TOKENS_SPM = [1, 15043, 29892, 3186, 29991, 910, 338, 263, 1243, 29889, 13, 2]

# (label, arch, shards, dtype policy, tokenizer.model, fused experts)
CASES = [
    ("qwen3moe", "qwen3moe", 2, "mixed", True, False),
    ("qwen2moe", "qwen2moe", 3, "bf16", True, False),
    ("mixtral", "llama", 1, "f32", True, False),
    ("mixtral-json", "llama", 2, "mixed", False, False),
    ("olmoe", "olmoe", 2, "mixed", True, False),
    ("qwen3moe-fused", "qwen3moe", 2, "mixed", True, True),
]

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what, file=sys.stderr)
    return ok


def run_cli(cli, *args):
    return subprocess.run([cli, "import", "--quiet", *args], capture_output=True, text=True)


def values_equal(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    return a == b


def compare_files(label, direct, imported, skip_keys=()):
    a, b = GGUFFile(direct), GGUFFile(imported)
    check(set(a.kv) == set(b.kv), f"{label}: key sets differ: only converter "
          f"{sorted(set(a.kv) - set(b.kv))}, only imported {sorted(set(b.kv) - set(a.kv))}")
    for k in sorted(set(a.kv) & set(b.kv)):
        if k in skip_keys:
            continue
        check(a.kv_types[k] == b.kv_types[k], f"{label}: {k} type {a.kv_types[k]} vs {b.kv_types[k]}")
        check(values_equal(a.kv[k], b.kv[k]), f"{label}: {k} differs")
    check(set(a.tensors) == set(b.tensors), f"{label}: tensor sets differ")
    for n in sorted(set(a.tensors) & set(b.tensors)):
        x, y = a.tensors[n], b.tensors[n]
        if check(x.ne == y.ne and x.ggml_type == y.ggml_type,
                 f"{label}: {n} is {y.ne} type {y.ggml_type}, want {x.ne} type {x.ggml_type}"):
            check(np.array_equal(a.raw(n), b.raw(n)), f"{label}: {n} data differs")
    return a, b


def ref_logits(path, tokens, out):
    subprocess.run([sys.executable, os.path.join(HERE, "ref_forward.py"), path,
                    "--tokens", ",".join(map(str, tokens)), "--logits", out],
                   check=True, capture_output=True)
    return np.fromfile(out, dtype="<f4")


def make_case(work, label, arch, shards, policy, spm, fused):
    d = os.path.join(work, label)
    cfg = gen_model.ModelConfig(arch, sharp=8.0)
    gen.generate(d, cfg, shards=shards, policy=policy, gguf=d + "-direct.gguf", name=NAME,
                 tokenizer_model=spm, fused=fused)
    return d


def test_equality(cli, work, label, arch, d):
    out = d + "-f32.gguf"
    r = run_cli(cli, d, "--type", "f32", "--name", NAME, "-o", out)
    if not check(r.returncode == 0, f"{label}: import failed: {r.stderr.strip()}"):
        return
    skip = ("tokenizer.ggml.scores",) if label == "mixtral-json" else ()
    a, b = compare_files(label, d + "-direct.gguf", out, skip)
    if skip:   # scores from merge ranks: same order as the SentencePiece scores
        sa, sb = a.kv["tokenizer.ggml.scores"], b.kv["tokenizer.ggml.scores"]
        ty = a.kv["tokenizer.ggml.token_type"]
        idx = [i for i in range(len(sa)) if ty[i] == 1 and sa[i] > -1e8]
        order = sorted(idx, key=lambda i: -sa[i])
        merged = [i for i in order if sb[i] > -len(sa)]   # tokens some merge produces
        check(all(sb[p] > sb[q] for p, q in zip(merged, merged[1:])),
              f"{label}: score order differs from the SentencePiece scores")
        check(len(merged) > 20000, f"{label}: only {len(merged)} merged tokens scored")
    # libmoe's own tokenizer reads both files the same way.
    vocab = "ggml-vocab-llama-spm.gguf" if arch == "llama" else "ggml-vocab-qwen2.gguf"
    with open(os.path.join(gen_model.default_vocab_dir(), vocab + ".inp"), "rb") as f:
        text = f.read() + "<|im_start|>user\n<think>hi</think><|im_end|></s>".encode()
    for flags in ([], ["--add-special", "--parse-special"]):
        ids = [subprocess.run([cli, "tokenize", "-m", p, *flags], input=text,
                              capture_output=True).stdout for p in (d + "-direct.gguf", out)]
        check(len(ids[0]) > 100 and ids[0] == ids[1],
              f"{label}: moedesk-cli tokenize {' '.join(flags)} differs between the files")
    tokens = TOKENS_SPM if arch == "llama" else TOKENS
    la = ref_logits(d + "-direct.gguf", tokens, d + "-direct.f32")
    lb = ref_logits(out, tokens, d + "-imported.f32")
    check(la.size == lb.size and la.size > 0 and np.array_equal(la, lb),
          f"{label}: reference logits differ")
    # libmoe's forward pass (moedesk-cli eval, F32 KV cache): the same bytes
    # from both files, and the reference's logits to float32 rounding.
    eng = []
    for path in (d + "-direct.gguf", out):
        r = subprocess.run([cli, "eval", "-m", path, "--tokens", " ".join(map(str, tokens)),
                            "--logits", path + ".eval", "--kv-type", "f32"],
                           capture_output=True, text=True)
        if not check(r.returncode == 0, f"{label}: moedesk-cli eval failed: {r.stderr.strip()}"):
            return
        eng.append(np.fromfile(path + ".eval", dtype="<f4"))
    check(np.array_equal(eng[0], eng[1]), f"{label}: moedesk-cli eval logits differ between files")
    if check(eng[1].size == la.size, f"{label}: eval wrote {eng[1].size} logits, want {la.size}"):
        err = float(np.abs(eng[1] - la).max())
        check(err < 1e-3, f"{label}: eval differs from the reference by {err:g}")
    print(f"{label}: {len(b.kv)} keys, {len(b.tensors)} tensors equal; tokens, reference and"
          " engine logits equal", flush=True)


def test_q8_0(cli, d):
    out = d + "-q8_0.gguf"
    r = run_cli(cli, d, "--type", "q8_0", "--name", NAME, "-o", out)
    if not check(r.returncode == 0, f"q8_0: import failed: {r.stderr.strip()}"):
        return
    a, b = GGUFFile(d + "-direct.gguf"), GGUFFile(out)
    check(b.kv.get("general.file_type") == 7, "q8_0: general.file_type is not 7")
    n_q8 = 0
    for n, t in b.tensors.items():
        keep_f32 = len([s for s in t.ne if s > 1]) < 2 or "ffn_gate_inp" in n
        want = GGML_F32 if keep_f32 else GGML_Q8_0
        if not check(t.ggml_type == want, f"q8_0: {n} has type {t.ggml_type}, want {want}"):
            continue
        ref = a.raw(n) if want == GGML_F32 else quantize_q8_0(a.tensor(n))
        n_q8 += want == GGML_Q8_0
        check(np.array_equal(b.raw(n), ref), f"q8_0: {n} bytes differ from the reference")
    check(n_q8 > 10, f"q8_0: only {n_q8} Q8_0 tensors")
    # The engine runs the Q8_0 file; with sharp logits its top token agrees
    # with the F32 file's nearly everywhere (Q8_0 moves logits by ~0.05).
    r = subprocess.run([cli, "eval", "-m", out, "--tokens", " ".join(map(str, TOKENS)),
                        "--logits", out + ".eval"], capture_output=True, text=True)
    f32 = d + "-f32.gguf.eval"
    if check(r.returncode == 0, f"q8_0: moedesk-cli eval failed: {r.stderr.strip()}") and \
            os.path.exists(f32):
        q = np.fromfile(out + ".eval", dtype="<f4").reshape(len(TOKENS), -1)
        f = np.fromfile(f32, dtype="<f4").reshape(len(TOKENS), -1)
        agree = float(np.mean(q.argmax(1) == f.argmax(1)))
        check(agree >= 0.75, f"q8_0: top-1 agrees with F32 at only {agree:.0%} of positions")
    print(f"q8_0: {len(b.tensors)} tensors, {n_q8} Q8_0 bit-identical to the reference", flush=True)
    # No --type: the planner's choice for a 64 GB CPU-only machine is BF16.
    machine = os.path.join(os.environ.get("MOE_SOURCE_ROOT", os.path.join(HERE, "..", "..")),
                           "tests", "data", "machines", "cpu-64g.json")
    out = d + "-auto.gguf"
    r = run_cli(cli, d, "-o", out, "--machine", machine)
    if check(r.returncode == 0, f"default type: {r.stderr.strip()}"):
        check(GGUFFile(out).kv.get("general.file_type") == 32 and "type bf16:" in r.stdout,
              f"default type: not BF16: {r.stdout.strip()}")


def test_bad_inputs(cli, work):
    base = os.path.join(work, "bad-base")
    cfg = gen_model.ModelConfig("llama")
    gen.generate(base, cfg, shards=2, policy="mixed")

    def edit_json(name, fn):
        def apply(d):
            p = os.path.join(d, name)
            with open(p) as f:
                j = json.load(f)
            fn(j)
            with open(p, "w") as f:
                json.dump(j, f)
        return apply

    def truncate(d):
        p = os.path.join(d, "model-00002-of-00002.safetensors")
        os.truncate(p, os.path.getsize(p) - 1000)

    def misplace(j):
        k = "model.layers.1.self_attn.q_proj.weight"
        j["weight_map"][k] = "model-00001-of-00002.safetensors" \
            if j["weight_map"][k].startswith("model-00002") else "model-00002-of-00002.safetensors"

    cases = [
        ("missing config", lambda d: os.remove(os.path.join(d, "config.json")),
         r"config\.json: missing"),
        ("unknown arch", edit_json("config.json",
                                   lambda j: j.update(architectures=["GPT2LMHeadModel"])),
         r'"GPT2LMHeadModel" is not supported'),
        ("missing shard", lambda d: os.remove(os.path.join(d, "model-00002-of-00002.safetensors")),
         r"lists shard model-00002-of-00002\.safetensors .*missing"),
        ("wrong shard", edit_json("model.safetensors.index.json", misplace),
         r"tensor 'model\.layers\.1\.self_attn\.q_proj\.weight' in model-0000\d-of-00002"
         r"\.safetensors, which does not hold it"),
        ("shape mismatch", edit_json("config.json", lambda j: j.update(intermediate_size=48)),
         r"tensor 'model\.layers\.0\.block_sparse_moe\.experts\.0\.w1\.weight' has shape "
         r"\[32, 64\], config\.json implies \[48, 64\]"),
        ("truncated shard", truncate, r"model-00002-of-00002\.safetensors"),
    ]
    for label, breaker, want in cases:
        d = os.path.join(work, "bad-" + label.replace(" ", "-"))
        shutil.copytree(base, d)
        breaker(d)
        out = os.path.join(work, "bad-out.gguf")
        r = run_cli(cli, d, "--type", "f32", "-o", out)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 1, f"bad input '{label}': exit status {r.returncode}")
        check(len(lines) == 1 and re.search(want, lines[0]) is not None,
              f"bad input '{label}': message {r.stderr.strip()!r} does not match {want!r}")
        check(not os.path.exists(out) and not os.path.exists(out + ".tmp"),
              f"bad input '{label}': output left behind")
        print(f"bad input '{label}': {lines[0] if lines else ''}", flush=True)
        shutil.rmtree(d)


def test_memory(cli, work):
    d = os.path.join(work, "big")
    cfg = gen_model.ModelConfig("llama", n_embd=512, n_ff_exp=1024, n_expert=16, n_layer=4,
                                n_head=8, n_head_kv=4, head_dim=64)
    info = gen.generate(d, cfg, shards=3, policy="bf16")
    stack = cfg.n_expert * cfg.n_ff_exp * cfg.n_embd * 2
    check(info["bytes"] >= 200e6, f"memory: checkpoint only {info['bytes'] / 1e6:.0f} MB")
    r = run_cli(cli, d, "--type", "q8_0", "-o", d + ".gguf")
    if not check(r.returncode == 0, f"memory: import failed: {r.stderr.strip()}"):
        return
    m = re.search(r"peak memory ([0-9.]+) MB", r.stdout)
    if not check(m is not None, f"memory: no peak memory in {r.stdout!r}"):
        return
    peak = float(m.group(1)) * 1e6
    bound = 3 * stack + 100e6
    check(peak < bound, f"memory: peak {peak / 1e6:.1f} MB >= bound {bound / 1e6:.1f} MB")
    print(f"memory: {info['bytes'] / 1e6:.0f} MB checkpoint, largest expert stack "
          f"{stack / 1e6:.1f} MB, peak RSS {peak / 1e6:.1f} MB (bound {bound / 1e6:.1f} MB)",
          flush=True)
    os.remove(d + ".gguf")
    shutil.rmtree(d)


def test_llama(node, label, arch, d):
    """llama.cpp: same tokens for ~55 strings, same probabilities."""
    vocab = "ggml-vocab-llama-spm.gguf" if arch == "llama" else "ggml-vocab-qwen2.gguf"
    inp = os.path.join(gen_model.default_vocab_dir(), vocab + ".inp")
    direct, imported = d + "-direct.gguf", d + "-f32.gguf"
    r = subprocess.run([node, os.path.join(HERE, "..", "node", "import-tokenize.mjs"), direct,
                        imported, inp], capture_output=True, text=True)
    check(r.returncode == 0, f"{label}: llama.cpp tokenisation differs:\n{r.stderr[-2000:]}")
    probs = []
    tokens = TOKENS_SPM if arch == "llama" else TOKENS
    for path in (direct, imported):
        out = path + ".probs"
        r = subprocess.run([node, os.path.join(HERE, "..", "node", "llama-logits.mjs"),
                            "--model", path, "--tokens", ",".join(map(str, tokens)),
                            "--probs", out], capture_output=True, text=True)
        if not check(r.returncode == 0, f"{label}: llama.cpp cannot run {path}: {r.stderr[-1500:]}"):
            return
        probs.append(np.fromfile(out, dtype="<f4"))
    check(np.array_equal(probs[0], probs[1]), f"{label}: llama.cpp probabilities differ")
    print(f"{label}: llama.cpp tokenises and runs both files identically", flush=True)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--node")
    ap.add_argument("--only-node", action="store_true")
    ap.add_argument("--keep", help="work in this folder and keep it")
    args = ap.parse_args(argv)
    work = args.keep or tempfile.mkdtemp(prefix="test-import-")
    os.makedirs(work, exist_ok=True)
    try:
        dirs = {}
        for label, arch, shards, policy, spm, fused in CASES:
            dirs[label] = make_case(work, label, arch, shards, policy, spm, fused)
            if args.only_node:
                r = run_cli(args.cli, dirs[label], "--type", "f32", "--name", NAME,
                            "-o", dirs[label] + "-f32.gguf")
                check(r.returncode == 0, f"{label}: import failed: {r.stderr.strip()}")
            else:
                test_equality(args.cli, work, label, arch, dirs[label])
            if args.node:
                test_llama(args.node, label, arch, dirs[label])
        if not args.only_node:
            test_q8_0(args.cli, dirs["qwen2moe"])
            test_bad_inputs(args.cli, work)
            test_memory(args.cli, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

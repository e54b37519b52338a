#!/usr/bin/python3
"""tokenize-vs-llama.py -- the MoeDesk tokenizer against llama.cpp's, id for
id, on one vocabulary.

  tokenize-vs-llama.py --tool TOK_TOOL --node NODE --vocab VOCAB.gguf
                       --work DIR [--pre PRE] [--inp FILE.inp] [--size BYTES]
                       [--whole]

With --pre, VOCAB is first copied with tokenizer.ggml.pre set to PRE (our
GGUF writer, `tok-tool set-pre`), to try a pre-tokenizer no shipped test
vocabulary uses. The cases are the strings of FILE.inp (default: VOCAB.inp
if present, else the shared qwen2 one) plus a mixed-language text of about
BYTES bytes (tests/scripts/gen-mixed-text.py) cut into pieces; --whole adds
the whole text as one more case. Every case is tokenized with and without
add_special and parse_special:

  * valid UTF-8 cases: reference from llama.cpp via node-llama-cpp
    (tests/node/tokenize-ref.mjs);
  * the same text with ill-formed UTF-8 spliced in: reference from the same
    libllama through ctypes (tests/scripts/llama_tokenize_ref.py);
  * the EOG id set and the EOT and newline ids: from node-llama-cpp.

Any difference fails, with the first few shown.
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("MOE_SOURCE_ROOT", os.path.join(HERE, "..", ".."))


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write("command failed: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
        sys.exit(1)
    return r.stdout


def read_lines(path):
    meta, eog, special, ids = None, None, None, {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("meta "):
                meta = line
            elif line.startswith("eog:"):
                eog = line
            elif line.startswith("special "):
                special = line
            elif line:
                key, _, rest = line.partition(":")
                ids[key] = rest.split()
    return meta, eog, special, ids


def split_cases(path):
    with open(path, "rb") as f:
        data = f.read()
    sep = b"\n__ggml_vocab_test__\n"
    cases, pos = [], 0
    while pos < len(data):
        nxt = data.find(sep, pos)
        if nxt < 0:
            cases.append(data[pos:])
            break
        cases.append(data[pos:nxt])
        pos = nxt + len(sep)
    return cases


def compare(what, ref_path, ours_path, cases_path, failures):
    _, _, _, ref = read_lines(ref_path)
    _, _, _, ours = read_lines(ours_path)
    cases = split_cases(cases_path)
    bad = [k for k in ref if ref[k] != ours.get(k)]
    missing = [k for k in ours if k not in ref]
    print("%s: %d of %d tokenizations identical" % (what, len(ref) - len(bad), len(ref)))
    if not ref or missing:
        failures.append("%s: %d reference lines, %d of ours without one" % (what, len(ref),
                                                                           len(missing)))
    for k in bad[:5]:
        case, flags = k.split()
        text = cases[int(case)]
        r, o = ref[k], ours.get(k, [])
        i = 0
        while i < min(len(r), len(o)) and r[i] == o[i]:
            i += 1
        print("  case %s flags %s (%d bytes): first difference at id %d\n"
              "    text %r\n    llama.cpp %s\n    ours      %s"
              % (case, flags, len(text), i, text[:200], r[max(0, i - 3):i + 8],
                 o[max(0, i - 3):i + 8]))
    if bad:
        failures.append("%s: %d tokenizations differ" % (what, len(bad)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--pre")
    ap.add_argument("--inp")
    ap.add_argument("--size", type=int, default=100000)
    ap.add_argument("--whole", action="store_true")
    a = ap.parse_args()
    # node runs in tests/node (to find its packages): make every path absolute.
    a.tool, a.vocab, a.work = (os.path.abspath(x) for x in (a.tool, a.vocab, a.work))
    a.inp = os.path.abspath(a.inp) if a.inp else None

    os.makedirs(a.work, exist_ok=True)
    vocab = a.vocab
    name = os.path.basename(vocab).replace(".gguf", "") + ("-" + a.pre if a.pre else "")
    if a.pre:
        vocab = os.path.join(a.work, name + ".gguf")
        run([a.tool, "set-pre", a.vocab, vocab, a.pre])
    inp = a.inp
    if not inp:
        inp = a.vocab + ".inp"
        if not os.path.exists(inp):
            inp = os.path.join(ROOT, "..", "shared", "data", "vocab", "ggml-vocab-qwen2.gguf.inp")
    gen = os.path.join(HERE, "gen-mixed-text.py")
    py = sys.executable

    valid = os.path.join(a.work, name + ".valid.inp")
    mixed = os.path.join(a.work, name + ".mixed.inp")
    run([py, gen, "cases", mixed, str(a.size), "1"] + (["--whole"] if a.whole else []))
    with open(inp, "rb") as f, open(mixed, "rb") as g, open(valid, "wb") as o:
        o.write(f.read())
        o.write(g.read())
    invalid = os.path.join(a.work, name + ".invalid.inp")
    run([py, gen, "cases", invalid, str(max(a.size // 4, 4000)), "2", "--invalid"])

    ref_node = os.path.join(a.work, name + ".valid.node")
    ref_raw = os.path.join(a.work, name + ".invalid.llama")
    ours_valid = os.path.join(a.work, name + ".valid.ours")
    ours_invalid = os.path.join(a.work, name + ".invalid.ours")
    run([a.node, os.path.join(ROOT, "tests", "node", "tokenize-ref.mjs"), vocab, valid, ref_node],
        cwd=os.path.join(ROOT, "tests", "node"))
    run([py, os.path.join(HERE, "llama_tokenize_ref.py"), vocab, invalid, ref_raw])
    run([a.tool, "ids", vocab, valid, ours_valid])
    run([a.tool, "ids", vocab, invalid, ours_invalid])

    failures = []
    compare(name + " (valid UTF-8, node-llama-cpp)", ref_node, ours_valid, valid, failures)
    compare(name + " (ill-formed UTF-8, libllama)", ref_raw, ours_invalid, invalid, failures)

    meta_node, eog_node, special_node, _ = read_lines(ref_node)
    meta_raw, _, _, _ = read_lines(ref_raw)
    meta_ours, _, _, _ = read_lines(ours_valid)
    for label, ref_meta in (("node", meta_node), ("libllama", meta_raw)):
        ref_f = dict(x.split("=") for x in ref_meta.split()[1:])
        our_f = dict(x.split("=") for x in meta_ours.split()[1:])
        for k in ("bos", "eos"):
            if ref_f[k] != our_f[k]:
                failures.append("%s: %s %s vs ours %s" % (label, k, ref_f[k], our_f[k]))
    if ref_raw and read_lines(ref_raw)[0].split()[1:3] != meta_ours.split()[1:3]:
        failures.append("add_bos/add_eos: llama.cpp %s, ours %s"
                        % (meta_raw.split()[1:3], meta_ours.split()[1:3]))
    ours_eog = run([a.tool, "eog", vocab]).splitlines()
    if ours_eog[0].split() != eog_node.split():
        failures.append("EOG set: llama.cpp %s, ours %s" % (eog_node, ours_eog[0]))
    if ours_eog[1].split() != special_node.split():
        failures.append("special ids: llama.cpp %s, ours %s" % (special_node, ours_eog[1]))
    print("EOG: llama.cpp %s; ours %s" % (eog_node[:80], ours_eog[0][:80]))

    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Checks resources/catalog.json against its schema (resources/catalog.schema.md)
and against itself: field types and allowed values, unique ids and aliases,
split-file names that count up to their total, parameter counts equal to what
tests/scripts/catalog_figures.py computes from the entry's own hyperparameters,
every file size plausible for its quantisation (effective bits per weight
within -20%/+35% of the nominal), and the sizes of standard llama-quantize
files within 0.5% of the mixture computed from the tensor shapes.

usage: test_catalog.py   (reads MOE_SOURCE_ROOT)
"""
import json
import os
import re
import sys

ROOT = os.environ.get("MOE_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "scripts"))
import catalog_figures as cf  # noqa: E402

failures = 0
checks = 0


def check(cond, what):
    global failures, checks
    checks += 1
    if not cond:
        failures += 1
        print(f"FAIL: {what}", file=sys.stderr)


# Nominal bits per weight, as moe_plan_quant_info has them (engine/src/planner-model.c).
BPW = {"F32": 32, "BF16": 16, "F16": 16, "Q8_K": 8.5, "Q8_0": 8.5, "Q6_K": 6.5625, "Q5_K": 5.5,
       "Q5_1": 6, "Q5_0": 5.5, "Q4_K": 4.5, "MXFP4": 4.25, "IQ4_NL": 4.5, "IQ4_XS": 4.25,
       "Q4_1": 5, "Q4_0": 4.5, "Q3_K": 3.4375, "IQ3_M": 3.4375, "IQ3_S": 3.4375, "IQ3_XS": 3.3,
       "IQ3_XXS": 3.0625, "Q2_K": 2.625, "IQ2_M": 2.5, "IQ2_S": 2.5, "IQ2_XS": 2.3125,
       "IQ2_XXS": 2.0625, "TQ2_0": 2.0625, "IQ1_M": 1.75, "TQ1_0": 1.6875, "IQ1_S": 1.5625}
MIXTURES = {"BF16": "bf16", "Q8_0": "q8_0", "Q6_K": "q6_k", "Q4_K_M": "q4_k_m", "Q4_0": "q4_0"}


def nominal_bpw(quant):
    s = quant.upper()
    s = s[3:] if s.startswith("UD-") else s
    best = None
    for fam in BPW:
        if s == fam or s.startswith(fam + "_"):
            if best is None or len(fam) > len(best):
                best = fam
    return BPW[best] if best else None


def check_entry(e, seen_names):
    mid = e.get("id", "?")
    for key, typ in (("id", str), ("name", str), ("publisher", str), ("aliases", list),
                     ("architecture", str), ("engine_support", str), ("engine_note", str),
                     ("licence", str), ("context_length", int), ("hparams", dict),
                     ("params", dict), ("sources", dict)):
        check(isinstance(e.get(key), typ), f"{mid}: field {key} is a {typ.__name__}")
    check(re.fullmatch(r"[a-z0-9][a-z0-9.\-]*", mid or "") is not None, f"{mid}: id is lower-case kebab")
    check(e.get("engine_support") in ("yes", "planned", "upstream-only"), f"{mid}: engine_support")
    if e.get("engine_support") == "yes":
        check(e.get("architecture") in ("qwen3moe", "qwen2moe", "llama", "olmoe"),
              f"{mid}: engine_support yes only for the engine's architectures")
    for n in [mid, e.get("name", "")] + list(e.get("aliases", [])):
        k = n.lower()
        check(k not in seen_names or seen_names[k] == mid, f"{mid}: name/alias {n!r} also names {seen_names.get(k)}")
        seen_names[k] = mid

    hp = e["hparams"]
    for key in ("n_layer", "n_embd", "n_vocab", "n_head", "n_expert", "n_expert_used", "n_ff_expert"):
        check(isinstance(hp.get(key), int) and hp[key] > 0, f"{mid}: hparams.{key} positive integer")
    check(hp.get("n_expert_used", 0) <= hp.get("n_expert", 0), f"{mid}: n_expert_used <= n_expert")
    mla = hp.get("kv_lora_rank", 0) > 0
    if mla:
        check(hp.get("qk_rope_head_dim", 0) > 0, f"{mid}: MLA needs qk_rope_head_dim")
    else:
        check(hp.get("n_head_kv", 0) > 0 and hp.get("head_dim", 0) > 0, f"{mid}: n_head_kv and head_dim")

    m = dict(hp, architecture=e["architecture"])
    groups, total, active = cf.totals(m)
    p = e["params"]
    check(p.get("groups") == groups, f"{mid}: params.groups {p.get('groups')} != computed {groups}")
    check(p.get("total") == total == sum(p.get("groups", {}).values()), f"{mid}: params.total")
    check(p.get("active") == active, f"{mid}: params.active {p.get('active')} != {active}")
    check(0 < active < total, f"{mid}: 0 < active < total")

    src = e["sources"]
    st = src.get("safetensors")
    check(isinstance(st, dict) and re.fullmatch(r"[\w.\-]+/[\w.\-]+", st.get("repo", "")) is not None,
          f"{mid}: sources.safetensors.repo is owner/name")
    gg = src.get("gguf", [])
    check(isinstance(gg, list) and len(gg) > 0, f"{mid}: at least one GGUF repository")
    for r in gg:
        repo = r.get("repo", "")
        check(re.fullmatch(r"[\w.\-]+/[\w.\-]+", repo) is not None, f"{mid}: gguf repo {repo!r}")
        check(len(r.get("quants", [])) > 0, f"{mid}: {repo} lists quants")
        for qd in r.get("quants", []):
            quant = qd.get("quant", "")
            what = f"{mid}: {repo} {quant}"
            bpw = nominal_bpw(quant)
            check(bpw is not None, f"{what}: quantisation known to the planner")
            files = qd.get("files", [])
            check(isinstance(files, list) and len(files) > 0, f"{what}: files listed")
            check(all(isinstance(f, str) and f.endswith(".gguf") for f in files), f"{what}: .gguf files")
            if len(files) > 1:
                for i, f in enumerate(files, 1):
                    check(re.search(rf"-{i:05d}-of-{len(files):05d}\.gguf$", f) is not None,
                          f"{what}: split file {f} is part {i} of {len(files)}")
            size = qd.get("size_bytes")
            check(isinstance(size, int) and size > 0, f"{what}: size_bytes positive integer")
            check(isinstance(qd.get("size_estimated"), bool), f"{what}: size_estimated boolean")
            if qd.get("size_estimated"):
                check(isinstance(qd.get("size_note"), str) and qd["size_note"],
                      f"{what}: an estimated size says how it was made")
            if bpw and isinstance(size, int):
                eff = size * 8 / total
                check(0.8 * bpw <= eff <= 1.35 * bpw,
                      f"{what}: {eff:.3f} bits per weight is implausible for {quant} (nominal {bpw})")
            # exact sizes, and estimates made from the mixture, must agree with
            # it (gpt-oss files keep their MXFP4 experts in every "quant")
            mixture_based = not qd.get("size_estimated") or "mixture" in qd.get("size_note", "")
            if (quant in MIXTURES and mixture_based and e["architecture"] != "gpt-oss"
                    and isinstance(size, int)):
                data = sum(cf.mixture_bytes(m, MIXTURES[quant]).values())
                check(abs(size - data) <= 0.005 * size,
                      f"{what}: {size} B is not within 0.5% of the computed mixture's {data} B")


def main():
    with open(os.path.join(ROOT, "resources", "catalog.json"), encoding="utf-8") as f:
        cat = json.load(f)
    check(isinstance(cat.get("_source"), str) and "2026" in cat["_source"], "_source note with a date")
    check(cat.get("schema_version") == 1, "schema_version 1")
    models = cat.get("models", [])
    ids = [e.get("id") for e in models]
    check(len(ids) == len(set(ids)), "unique ids")
    for want in ("qwen3-30b-a3b-instruct-2507", "qwen3-coder-30b-a3b-instruct", "mixtral-8x7b-instruct-v0.1",
                 "olmoe-1b-7b-0924-instruct", "qwen1.5-moe-a2.7b-chat", "deepseek-v2-lite-chat",
                 "moonlight-16b-a3b-instruct", "gpt-oss-20b", "kimi-k2-instruct", "kimi-k3"):
        check(want in ids, f"catalog has {want}")
    seen = {}
    for e in models:
        check_entry(e, seen)
    # the published totals the figures script must reproduce
    by_id = {e["id"]: e for e in models}
    check(by_id["qwen3-30b-a3b-instruct-2507"]["params"]["total"] == 30532122624, "Qwen3-30B-A3B total")
    k3 = by_id["kimi-k3"]["params"]["total"]
    check(abs(k3 + 447_000_000 - 2_779_930_000_000) < 5_000_000_000, f"Kimi K3 total {k3}")
    print(f"{checks} checks, {failures} failed", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Generates small random-weight MoE models as GGUF files for MoeDesk's tests.

Why: the engine must be checked against llama.cpp and against an independent
reference (ref_forward.py) on every supported architecture, without
downloading real checkpoints. A generated file carries exactly llama.cpp's
metadata keys and tensor names, so llama.cpp loads it (that is the proof the
layout is right), plus a real tokenizer copied from a vocabulary GGUF.

Architectures (names as in GGUF's general.architecture):
  qwen3moe  Qwen3-MoE: per-head q/k RMSNorm, softmax router with top-k
            renormalised, head_dim free (may differ from n_embd / n_head).
  qwen2moe  Qwen1.5/2-MoE: q/k/v biases, softmax router without
            renormalisation, plus a shared expert with a sigmoid gate.
  llama     Mixtral (llama with experts): softmax router, top-k renormalised;
            Q/K rows are stored in llama.cpp's interleaved-pair RoPE order.
  olmoe     OLMoE: q/k RMSNorm over the whole projection, softmax router
            without renormalisation. llama.cpp sizes attn_k_norm as n_embd,
            so n_head_kv must equal n_head; head_dim must be n_embd / n_head.

Weights are Gaussian (seeded per tensor, so a file depends only on its
options), scaled by fan-in so activations stay O(1). `--sharp S` multiplies
the output projection by S so next-token distributions have a clear top-1
(logit spread ~S): random models otherwise give near-ties that make top-1
comparisons between implementations meaningless.

Matrices (token_embd, attention, experts, shared expert, output) are stored
in --dtype; norms, biases and router weights (ffn_gate_inp*) stay F32, as
llama.cpp's own quantiser keeps them.

Usage:
  gen_model.py --arch qwen3moe -o tiny.gguf [--dtype q8_0] [--sharp 8]
  gen_model.py --preset bench-1b --dtype q8_0 -o bench.gguf
"""
import argparse
import os
import sys
import zlib

import numpy as np

from gguf_read import GGUFFile
from gguf_write import FILE_TYPE, GGML_F32, GGML_TYPE_BY_NAME, GGUFWriter

HERE = os.path.dirname(os.path.abspath(__file__))

ARCHES = ("qwen3moe", "qwen2moe", "llama", "olmoe")

# Per-architecture facts used by the generator (not by the reference).
ARCH_DEFAULTS = {
    "qwen3moe": dict(vocab_file="ggml-vocab-qwen2.gguf", rope_base=1e6, eps=1e-6),
    "qwen2moe": dict(vocab_file="ggml-vocab-qwen2.gguf", rope_base=1e6, eps=1e-6),
    "llama": dict(vocab_file="ggml-vocab-llama-spm.gguf", rope_base=1e6, eps=1e-5),
    "olmoe": dict(vocab_file="ggml-vocab-qwen2.gguf", rope_base=1e4, eps=1e-5),
}

# Tiny defaults: a model of each arch generates and runs in about a second.
TINY = dict(n_embd=64, n_layer=2, n_head=4, n_head_kv=2, head_dim=16,
            n_expert=8, n_expert_used=2, n_ff_exp=32, n_ff_shexp=64,
            ctx=4096)

PRESETS = {
    # The benchmark model of the issue: Qwen3-MoE shape, ~1.2B total and
    # ~0.3B active parameters (embeddings excluded from "active").
    "bench-1b": dict(arch="qwen3moe", n_embd=1024, n_layer=12, n_head=16,
                     n_head_kv=4, head_dim=64, n_expert=32, n_expert_used=4,
                     n_ff_exp=768, ctx=40960),
}

# Producers yield at most this many floats at a time (bounds peak memory).
CHUNK_ELEMS = 1 << 22


def default_vocab_dir():
    shared = os.environ.get("MOE_SHARED_DATA")
    if shared:
        return os.path.join(shared, "vocab")
    return os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data", "vocab"))


def gaussian(seed, tag, name, shape, std, mean=0.0):
    """Producer of a seeded N(mean, std^2) tensor, yielded in row chunks.
    The seed mixes the model seed, `tag` (the arch, so two arches never
    share weights) and the tensor name, so each tensor is independent of
    the order tensors are written in."""
    def produce():
        rng = np.random.default_rng([seed, zlib.crc32(f"{tag}/{name}".encode())])
        per_row = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        if len(shape) == 1:
            yield rng.standard_normal(shape, dtype=np.float32) * np.float32(std) + np.float32(mean)
            return
        step = max(1, CHUNK_ELEMS // per_row)
        for r0 in range(0, shape[0], step):
            n = min(step, shape[0] - r0)
            x = rng.standard_normal((n,) + tuple(shape[1:]), dtype=np.float32)
            yield x * np.float32(std) + np.float32(mean)
    return produce


class ModelConfig:
    """All options of one generated model; fields mirror the CLI."""

    def __init__(self, arch, **kw):
        if arch not in ARCHES:
            raise ValueError(f"unknown arch {arch!r}; choose one of {', '.join(ARCHES)}")
        self.arch = arch
        vals = dict(TINY)
        vals.update(ARCH_DEFAULTS[arch])
        vals.update(dtype="f32", sharp=1.0, seed=1, router_scale=2.0, vocab=None)
        given = {k: v for k, v in kw.items() if v is not None}
        vals.update(given)
        self.__dict__.update(vals)
        if self.arch in ("qwen2moe", "olmoe") and "head_dim" not in given:
            self.head_dim = self.n_embd // self.n_head
        if self.arch == "olmoe" and "n_head_kv" not in given:
            self.n_head_kv = self.n_head
        self.check()

    def check(self):
        if self.n_head % self.n_head_kv:
            raise ValueError("n_head must be a multiple of n_head_kv")
        if self.head_dim % 2:
            raise ValueError("head_dim must be even (RoPE rotates pairs)")
        if self.n_expert_used > self.n_expert:
            raise ValueError("n_expert_used must not exceed n_expert")
        if self.arch in ("qwen2moe", "olmoe") and self.head_dim * self.n_head != self.n_embd:
            raise ValueError(f"{self.arch}: head_dim * n_head must equal n_embd "
                             "(llama.cpp sizes attn_q as n_embd x n_embd)")
        if self.arch == "olmoe" and self.n_head_kv != self.n_head:
            raise ValueError("olmoe: llama.cpp sizes attn_k_norm as n_embd, "
                             "so n_head_kv must equal n_head")


def tensor_plan(cfg, n_vocab):
    """[(name, numpy shape, kind, std, mean)] in file order. kind 'mat' is
    stored in cfg.dtype, 'f32' always as F32."""
    E, D, F = cfg.n_embd, cfg.head_dim, cfg.n_ff_exp
    Hq, Hkv, X = cfg.n_head * D, cfg.n_head_kv * D, cfg.n_expert
    inv = lambda n: 1.0 / np.sqrt(n)
    plan = [("token_embd.weight", (n_vocab, E), "mat", 1.0, 0.0)]
    for i in range(cfg.n_layer):
        b = f"blk.{i}."
        plan.append((b + "attn_norm.weight", (E,), "f32", 0.1, 1.0))
        plan += [(b + "attn_q.weight", (Hq, E), "mat", inv(E), 0.0),
                 (b + "attn_k.weight", (Hkv, E), "mat", inv(E), 0.0),
                 (b + "attn_v.weight", (Hkv, E), "mat", inv(E), 0.0)]
        if cfg.arch == "qwen2moe":
            plan += [(b + "attn_q.bias", (Hq,), "f32", 0.5, 0.0),
                     (b + "attn_k.bias", (Hkv,), "f32", 0.5, 0.0),
                     (b + "attn_v.bias", (Hkv,), "f32", 0.5, 0.0)]
        plan.append((b + "attn_output.weight", (E, Hq), "mat", inv(Hq), 0.0))
        if cfg.arch == "qwen3moe":
            plan += [(b + "attn_q_norm.weight", (D,), "f32", 0.1, 1.0),
                     (b + "attn_k_norm.weight", (D,), "f32", 0.1, 1.0)]
        if cfg.arch == "olmoe":
            plan += [(b + "attn_q_norm.weight", (Hq,), "f32", 0.1, 1.0),
                     (b + "attn_k_norm.weight", (Hkv,), "f32", 0.1, 1.0)]
        plan.append((b + "ffn_norm.weight", (E,), "f32", 0.1, 1.0))
        plan.append((b + "ffn_gate_inp.weight", (X, E), "f32", cfg.router_scale * inv(E), 0.0))
        plan += [(b + "ffn_gate_exps.weight", (X, F, E), "mat", inv(E), 0.0),
                 (b + "ffn_up_exps.weight", (X, F, E), "mat", inv(E), 0.0),
                 (b + "ffn_down_exps.weight", (X, E, F), "mat", inv(F), 0.0)]
        if cfg.arch == "qwen2moe":
            S = cfg.n_ff_shexp
            plan += [(b + "ffn_gate_inp_shexp.weight", (E,), "f32", inv(E), 0.0),
                     (b + "ffn_gate_shexp.weight", (S, E), "mat", inv(E), 0.0),
                     (b + "ffn_up_shexp.weight", (S, E), "mat", inv(E), 0.0),
                     (b + "ffn_down_shexp.weight", (E, S), "mat", inv(S), 0.0)]
    plan.append(("output_norm.weight", (E,), "f32", 0.1, 1.0))
    plan.append(("output.weight", (n_vocab, E), "mat", cfg.sharp * inv(E), 0.0))
    return plan


def add_metadata(w, cfg, vocab, n_vocab, mat_type):
    a = cfg.arch
    w.add_string("general.architecture", a)
    w.add_string("general.name", f"moedesk-test-{a}")
    w.add_uint32("general.alignment", 32)
    w.add_uint32("general.file_type", FILE_TYPE[mat_type])
    w.add_uint32(f"{a}.block_count", cfg.n_layer)
    w.add_uint32(f"{a}.context_length", cfg.ctx)
    w.add_uint32(f"{a}.embedding_length", cfg.n_embd)
    # llama and olmoe size their experts from feed_forward_length; the qwen
    # MoEs read expert_feed_forward_length and carry a dense width here.
    if a in ("llama", "olmoe"):
        w.add_uint32(f"{a}.feed_forward_length", cfg.n_ff_exp)
    else:
        w.add_uint32(f"{a}.feed_forward_length", cfg.n_ff_exp * cfg.n_expert_used)
        w.add_uint32(f"{a}.expert_feed_forward_length", cfg.n_ff_exp)
    if a == "qwen2moe":
        w.add_uint32(f"{a}.expert_shared_feed_forward_length", cfg.n_ff_shexp)
    w.add_uint32(f"{a}.attention.head_count", cfg.n_head)
    w.add_uint32(f"{a}.attention.head_count_kv", cfg.n_head_kv)
    if a in ("qwen3moe", "llama"):
        w.add_uint32(f"{a}.attention.key_length", cfg.head_dim)
        w.add_uint32(f"{a}.attention.value_length", cfg.head_dim)
    if a == "llama":
        w.add_uint32(f"{a}.rope.dimension_count", cfg.head_dim)
        w.add_uint32(f"{a}.vocab_size", n_vocab)
    w.add_float32(f"{a}.rope.freq_base", cfg.rope_base)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", cfg.eps)
    w.add_uint32(f"{a}.expert_count", cfg.n_expert)
    w.add_uint32(f"{a}.expert_used_count", cfg.n_expert_used)
    for key in vocab.kv:
        if key.startswith("tokenizer."):
            w.copy_kv(vocab, key)


def generate(path, cfg, log=None):
    """Write the model `cfg` to `path`; returns a dict of sizes."""
    vocab_path = cfg.vocab or os.path.join(default_vocab_dir(), cfg.vocab_file)
    vocab = GGUFFile(vocab_path)
    tokens = vocab.kv.get("tokenizer.ggml.tokens")
    if not tokens:
        raise ValueError(f"{vocab_path}: no tokenizer.ggml.tokens")
    n_vocab = len(tokens)
    mat_type = GGML_TYPE_BY_NAME[cfg.dtype]
    w = GGUFWriter(path)
    add_metadata(w, cfg, vocab, n_vocab, mat_type)
    total = active = 0
    for name, shape, kind, std, mean in tensor_plan(cfg, n_vocab):
        ttype = mat_type if kind == "mat" else GGML_F32
        w.add_tensor(name, shape, ttype, gaussian(cfg.seed, cfg.arch, name, shape, std, mean))
        n = int(np.prod(shape))
        total += n
        if "_exps" in name:
            n = n * cfg.n_expert_used // cfg.n_expert
        if name != "token_embd.weight":
            active += n
    size = w.write()
    vocab.close()
    info = dict(path=path, n_vocab=n_vocab, params_total=total,
                params_active=active, bytes=size)
    if log:
        log(f"{path}: {cfg.arch} {cfg.dtype}, n_vocab {n_vocab}, "
            f"{total / 1e6:.1f}M params ({active / 1e6:.1f}M active), {size / 2**20:.1f} MiB")
    return info


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--arch", choices=ARCHES)
    ap.add_argument("--preset", choices=sorted(PRESETS))
    ap.add_argument("--dtype", choices=sorted(GGML_TYPE_BY_NAME), default=None)
    for opt in ("n-embd", "n-layer", "n-head", "n-head-kv", "head-dim", "n-expert",
                "n-expert-used", "n-ff-exp", "n-ff-shexp", "ctx", "seed"):
        ap.add_argument("--" + opt, type=int)
    ap.add_argument("--sharp", type=float, help="scale of the output projection (default 1)")
    ap.add_argument("--router-scale", type=float, help="scale of router weights (default 2)")
    ap.add_argument("--rope-base", type=float)
    ap.add_argument("--eps", type=float, help="RMSNorm epsilon")
    ap.add_argument("--vocab", help="vocabulary GGUF to copy tokenizer.* from")
    args = ap.parse_args(argv)
    if not args.arch and not args.preset:
        ap.error("give --arch or --preset")
    return args


def config_from_args(args):
    kw = dict(PRESETS.get(args.preset, {}))
    arch = args.arch or kw.pop("arch")
    kw.pop("arch", None)
    for k in ("n_embd", "n_layer", "n_head", "n_head_kv", "head_dim", "n_expert",
              "n_expert_used", "n_ff_exp", "n_ff_shexp", "ctx", "seed", "sharp",
              "router_scale", "rope_base", "eps", "vocab", "dtype"):
        v = getattr(args, k)
        if v is not None:
            kw[k] = v
    return ModelConfig(arch, **kw)


def main(argv):
    args = parse_args(argv)
    try:
        cfg = config_from_args(args)
        generate(args.output, cfg, log=lambda s: print(s, file=sys.stderr))
    except (ValueError, OSError) as e:
        print(f"gen_model: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/python3
"""Independent reference forward pass (numpy) for MoeDesk's MoE architectures.

Why: the C engine's logits must be checked against an implementation that
shares none of its code. This one is written from the Hugging Face modeling
code of each architecture (modeling_qwen3_moe, modeling_qwen2_moe,
modeling_mixtral, modeling_olmoe), computes in float64, and reads weights
from the GGUF with our own reader (gguf_read.py), dequantising F16/BF16/
Q8_0/Q4_0 exactly as stored. It was validated against llama.cpp by
test_reference.py.

The math, per architecture (x: residual stream, one row per position):
  h = RMSNorm(x) * w_attn_norm           RMSNorm(v) = v / sqrt(mean(v^2) + eps)
  q, k, v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv)   biases: qwen2moe only
  olmoe:    q = RMSNorm(q) * w_q_norm, k = RMSNorm(k) * w_k_norm over the
            whole projection (all heads together), before splitting heads
  qwen3moe: the same per head (over head_dim), after splitting heads
  RoPE, HF rotate-half form: for i < d/2, the pair (x[i], x[i + d/2]) is
  rotated by pos * base^(-2i/d). GGUF files of arch `llama` store Wq/Wk
  rows permuted (llama.cpp's converter) so that llama.cpp rotates adjacent
  pairs (x[2i], x[2i+1]); we undo that permutation on load and then use the
  same rotate-half form, i.e. we follow HF on HF-ordered weights.
  attention: causal softmax(q k^T / sqrt(d)) v; with GQA, query head j uses
  kv head j // (n_head / n_head_kv); out = concat(heads) Wo^T; x += out
  h = RMSNorm(x) * w_ffn_norm
  router: p = softmax(h Wr^T) over all experts; top-k experts by p;
     qwen3moe, llama (Mixtral): weights p_topk / sum(p_topk)
     qwen2moe, olmoe:           weights p_topk (not renormalised)
  expert e: W_down[e] (silu(W_gate[e] h) * W_up[e] h); moe = sum_k w_k e_k(h)
  qwen2moe: moe += sigmoid(h . w_shexp_gate) * W_down_sh (silu(W_gate_sh h) * W_up_sh h)
  x += moe; after the last layer logits = (RMSNorm(x) * w_out_norm) Wout^T

Output: float32 little-endian logits [n_tokens, n_vocab] row-major, the
format `moedesk-cli eval --logits FILE` writes.

--emulate-ggml: by default activations are exact (float64) and only the
weights carry the file's quantisation, as in HF on dequantised weights.
ggml's CPU matmul instead rounds the activation operand to the weight's
"vec_dot" type first: to Q8_0 blocks (scale max|x|/127 as f16, round half
to even of x*127/max) for Q8_0/Q4_0 weights, to F16 for F16 weights, to
BF16 for BF16. With this flag the reference does the same, which takes the
comparison with llama.cpp (or an engine that quantises activations the same
way) from ~0.1 to ~1e-4 in logits on Q8_0 files.

usage: ref_forward.py MODEL.gguf --tokens 1,2,3 [--logits OUT.f32]
                      [--generate N] [--top K] [--emulate-ggml]
"""
import argparse
import json
import sys

import numpy as np

from gguf_read import (GGML_BF16, GGML_F16, GGML_Q4_0, GGML_Q8_0, GGUFError,
                       GGUFFile)

SUPPORTED = ("qwen3moe", "qwen2moe", "llama", "olmoe")
RENORM_TOPK = {"qwen3moe": True, "llama": True, "qwen2moe": False, "olmoe": False}

# Output projection is applied this many vocabulary rows at a time so a
# large vocabulary at n_embd 1024+ never needs a float64 copy of the matrix;
# up to OUT_CACHE_ELEMS elements it is decoded once and kept (tiny models).
OUT_ROWS = 16384
OUT_CACHE_ELEMS = 1 << 24


def rms_norm(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def round_q8_0_activations(x):
    """x (rows, n) rounded through Q8_0 as ggml's CPU quantize_row_q8_0 does
    for activations (n a multiple of 32). Returns (rounded x, margin): the
    margin is the smallest distance, in quantisation steps, of any x*127/max
    from a rounding boundary (k + 0.5); see RefModel.q8_margin."""
    x32 = np.ascontiguousarray(x, dtype=np.float32)
    blocks = x32.reshape(-1, 32)
    amax = np.max(np.abs(blocks), axis=1, keepdims=True)
    d16 = (amax / np.float32(127.0)).astype(np.float16).astype(np.float64)
    with np.errstate(divide="ignore"):
        inv = np.where(amax != 0, np.float32(127.0) / amax, np.float32(0.0)).astype(np.float32)
    v = blocks * inv
    q = np.rint(v).astype(np.float64)                  # round half to even
    margin = float(np.min(np.abs(np.abs(v - np.floor(v)) - np.float32(0.5)))) if v.size else 1.0
    return (q * d16).reshape(x.shape), margin


def round_bf16(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def rope_rotate_half(x, pos, base):
    """x: (T, heads, d) in HF order; rotates (x[i], x[i+d/2]) by pos*base^(-2i/d)."""
    d = x.shape[-1]
    inv_freq = 1.0 / (base ** (np.arange(0, d, 2, dtype=np.float64) / d))   # (d/2,)
    ang = np.asarray(pos, dtype=np.float64)[:, None] * inv_freq[None, :]    # (T, d/2)
    cos = np.concatenate([np.cos(ang), np.cos(ang)], axis=-1)[:, None, :]
    sin = np.concatenate([np.sin(ang), np.sin(ang)], axis=-1)[:, None, :]
    half = d // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rot * sin


def unpermute_llama_rows(w, n_heads):
    """Undo llama.cpp's Q/K row permutation: GGUF row 2j+s of a head holds
    HF row s*d/2 + j. w: (n_heads*d, n_in) -> same shape in HF order."""
    rows, n_in = w.shape
    d = rows // n_heads
    return w.reshape(n_heads, d // 2, 2, n_in).transpose(0, 2, 1, 3).reshape(rows, n_in)


class RefModel:
    """Hyperparameters and lazily loaded weights of one GGUF model. Small
    tensors are decoded once and cached as float64; expert tensors are
    decoded per selected expert; embeddings per looked-up row."""

    def __init__(self, path, emulate_ggml=False):
        self.emulate_ggml = emulate_ggml
        # Smallest distance of any Q8_0-rounded activation from a rounding
        # boundary, in quantisation steps (emulate_ggml only). ggml computes
        # in float32, we in float64: an activation within ~1e-5 steps of a
        # boundary may round the other way in ggml, so an exact match is
        # only to be expected while this stays above that.
        self.q8_margin = float("inf")
        self.g = GGUFFile(path, string_arrays=False)
        g = self.g
        self.arch = g.arch
        if self.arch not in SUPPORTED:
            raise GGUFError(f"{path}: architecture {self.arch!r} not supported "
                            f"(supported: {', '.join(SUPPORTED)})")
        req = lambda k: self._key(k, required=True)
        self.n_layer = int(req("block_count"))
        self.n_embd = int(req("embedding_length"))
        self.n_head = int(req("attention.head_count"))
        self.n_head_kv = int(self._key("attention.head_count_kv", self.n_head))
        self.head_dim = int(self._key("attention.key_length", self.n_embd // self.n_head))
        v_dim = int(self._key("attention.value_length", self.head_dim))
        if v_dim != self.head_dim:
            raise GGUFError(f"{path}: value_length {v_dim} != key_length {self.head_dim}")
        n_rot = int(self._key("rope.dimension_count", self.head_dim))
        if n_rot != self.head_dim:
            raise GGUFError(f"{path}: partial RoPE (n_rot {n_rot}) is not used by these archs")
        self.rope_base = float(self._key("rope.freq_base", 10000.0))
        self.eps = float(req("attention.layer_norm_rms_epsilon"))
        self.n_expert = int(req("expert_count"))
        self.n_expert_used = int(req("expert_used_count"))
        self.n_vocab = g.tensors["token_embd.weight"].shape[0]
        self.out_name = "output.weight" if "output.weight" in g.tensors else "token_embd.weight"
        self._cache = {}

    def _key(self, suffix, default=None, required=False):
        key = f"{self.arch}.{suffix}"
        if key in self.g.kv:
            return self.g.kv[key]
        if required:
            raise GGUFError(f"{self.g.path}: missing key {key}")
        return default

    def act(self, x, name):
        """The activation operand of a matmul with weight `name`, rounded
        as ggml would when emulate_ggml is set (see the module doc)."""
        if not self.emulate_ggml:
            return x
        t = self.g.tensors[name].ggml_type
        if t in (GGML_Q8_0, GGML_Q4_0):
            x, margin = round_q8_0_activations(x)
            self.q8_margin = min(self.q8_margin, margin)
            return x
        if t == GGML_F16:   # via float32, as ggml converts from float32
            return x.astype(np.float32).astype(np.float16).astype(np.float64)
        if t == GGML_BF16:
            return round_bf16(x)
        return x

    def mm(self, x, name):
        """x @ W^T for a whole (cached) weight."""
        return self.act(x, name) @ self.w(name).T

    def mm_expert(self, x, name, e):
        return self.act(x, name) @ self.expert(name, e).T

    def has(self, name):
        return name in self.g.tensors

    def w(self, name):
        """Whole tensor as float64 (cached)."""
        if name not in self._cache:
            t = self.g.tensor(name).astype(np.float64)
            if self.arch == "llama" and name.endswith(("attn_q.weight", "attn_k.weight")):
                heads = self.n_head if "attn_q" in name else self.n_head_kv
                t = unpermute_llama_rows(t, heads)
            self._cache[name] = t
        return self._cache[name]

    def expert(self, name, e):
        """Expert e's matrix from a 3-D expert tensor, float64."""
        return self.g.tensor(name, rows=slice(e, e + 1))[0].astype(np.float64)

    def embed(self, tokens):
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.size and (tokens.min() < 0 or tokens.max() >= self.n_vocab):
            raise ValueError(f"token id out of range [0, {self.n_vocab})")
        return self.g.tensor("token_embd.weight", rows=tokens).astype(np.float64)


def attention(m, il, h, pos):
    b = f"blk.{il}."
    T, H, Hkv, D = h.shape[0], m.n_head, m.n_head_kv, m.head_dim
    q, k, v = m.mm(h, b + "attn_q.weight"), m.mm(h, b + "attn_k.weight"), m.mm(h, b + "attn_v.weight")
    for name, arr in (("attn_q.bias", q), ("attn_k.bias", k), ("attn_v.bias", v)):
        if m.has(b + name):
            arr += m.w(b + name)
    if m.arch == "olmoe":      # norm over the whole projection
        q = rms_norm(q, m.w(b + "attn_q_norm.weight"), m.eps)
        k = rms_norm(k, m.w(b + "attn_k_norm.weight"), m.eps)
    q, k, v = q.reshape(T, H, D), k.reshape(T, Hkv, D), v.reshape(T, Hkv, D)
    if m.arch == "qwen3moe":   # norm per head
        q = rms_norm(q, m.w(b + "attn_q_norm.weight"), m.eps)
        k = rms_norm(k, m.w(b + "attn_k_norm.weight"), m.eps)
    q = rope_rotate_half(q, pos, m.rope_base)
    k = rope_rotate_half(k, pos, m.rope_base)
    group = H // Hkv
    kx = np.repeat(k, group, axis=1)          # (T, H, D): head j uses kv head j // group
    vx = np.repeat(v, group, axis=1)
    scores = np.einsum("thd,shd->hts", q, kx) / np.sqrt(D)
    causal = np.triu(np.ones((T, T), dtype=bool), k=1)
    scores[:, causal] = -np.inf
    att = softmax(scores, axis=-1)
    out = np.einsum("hts,shd->thd", att, vx).reshape(T, H * D)
    return m.mm(out, b + "attn_output.weight")


def route(m, il, h):
    """(expert ids (T, k), weights (T, k)) for the normalised input h."""
    logits = m.mm(h, f"blk.{il}.ffn_gate_inp.weight")                 # (T, n_expert)
    p = softmax(logits, axis=-1)
    top = np.argsort(-p, axis=-1, kind="stable")[:, :m.n_expert_used]
    w = np.take_along_axis(p, top, axis=-1)
    if RENORM_TOPK[m.arch]:
        w = w / np.sum(w, axis=-1, keepdims=True)
    return top, w


def moe(m, il, h):
    b = f"blk.{il}."
    top, wts = route(m, il, h)
    out = np.zeros_like(h)
    for e in np.unique(top):
        rows, slot = np.nonzero(top == e)
        x = h[rows]
        g = m.mm_expert(x, b + "ffn_gate_exps.weight", e)
        u = m.mm_expert(x, b + "ffn_up_exps.weight", e)
        y = m.mm_expert(silu(g) * u, b + "ffn_down_exps.weight", e)
        out[rows] += wts[rows, slot][:, None] * y
    if m.arch == "qwen2moe":
        # the gate is a vector (n_embd; llama.cpp's converter stores it as
        # the [n_embd, 1] matrix HF has): one logit per position
        gate = 1.0 / (1.0 + np.exp(-(m.act(h, b + "ffn_gate_inp_shexp.weight")
                                     @ m.w(b + "ffn_gate_inp_shexp.weight").reshape(-1))))
        g = m.mm(h, b + "ffn_gate_shexp.weight")
        u = m.mm(h, b + "ffn_up_shexp.weight")
        out += gate[:, None] * m.mm(silu(g) * u, b + "ffn_down_shexp.weight")
    return out


def output_logits(m, x):
    """Logits (rows, n_vocab) float64 of final hidden states x."""
    x = m.act(rms_norm(x, m.w("output_norm.weight"), m.eps), m.out_name)
    if m.n_vocab * m.n_embd <= OUT_CACHE_ELEMS:
        if "output" not in m._cache:
            m._cache["output"] = m.g.tensor(m.out_name).astype(np.float64)
        return x @ m._cache["output"].T
    out = np.empty((x.shape[0], m.n_vocab), dtype=np.float64)
    for r0 in range(0, m.n_vocab, OUT_ROWS):
        r1 = min(m.n_vocab, r0 + OUT_ROWS)
        wo = m.g.tensor(m.out_name, rows=slice(r0, r1)).astype(np.float64)
        out[:, r0:r1] = x @ wo.T
    return out


def forward(m, tokens, last_only=False):
    """Logits for every position (or only the last), float64 (T, n_vocab)."""
    x = m.embed(tokens)
    pos = np.arange(len(tokens))
    for il in range(m.n_layer):
        b = f"blk.{il}."
        x = x + attention(m, il, rms_norm(x, m.w(b + "attn_norm.weight"), m.eps), pos)
        x = x + moe(m, il, rms_norm(x, m.w(b + "ffn_norm.weight"), m.eps))
    if last_only:
        x = x[-1:]
    return output_logits(m, x)


def greedy(m, tokens, n):
    """n tokens of greedy continuation (recomputes the prefix each step)."""
    seq, out = list(tokens), []
    for _ in range(n):
        nxt = int(np.argmax(forward(m, seq, last_only=True)[0]))
        out.append(nxt)
        seq.append(nxt)
    return out


def main(argv):
    ap = argparse.ArgumentParser(description="reference forward pass over a GGUF MoE model")
    ap.add_argument("model")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--logits", help="write float32 [n_tokens, n_vocab] here")
    ap.add_argument("--generate", type=int, default=0, help="greedy tokens to generate")
    ap.add_argument("--top", type=int, default=1, help="top-k per position in the JSON")
    ap.add_argument("--emulate-ggml", action="store_true",
                    help="round matmul activations as ggml's CPU backend does")
    args = ap.parse_args(argv)
    try:
        tokens = [int(t) for t in args.tokens.split(",") if t.strip()]
        if not tokens:
            raise ValueError("--tokens: no token ids given")
        m = RefModel(args.model, emulate_ggml=args.emulate_ggml)
        logits = forward(m, tokens)
        margin = m.q8_margin
        if args.logits:
            logits.astype("<f4").tofile(args.logits)
        k = max(1, min(args.top, m.n_vocab))
        part = np.argpartition(-logits, k - 1, axis=-1)[:, :k]
        order = np.argsort(-np.take_along_axis(logits, part, axis=-1), axis=-1, kind="stable")
        top = np.take_along_axis(part, order, axis=-1)
        res = dict(arch=m.arch, n_vocab=m.n_vocab, n_tokens=len(tokens),
                   top=top.tolist(), generated=greedy(m, tokens, args.generate))
        if args.emulate_ggml and margin != float("inf"):
            res["q8_margin"] = margin     # of the teacher-forced pass
        print(json.dumps(res))
    except (GGUFError, ValueError, OSError) as e:
        print(f"ref_forward: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/python3
"""Writes small random Hugging Face checkpoints for the importer's tests,
plus the GGUF file llama.cpp's converter would make of each.

Why: `moedesk-cli import` must turn a real HF folder (config.json,
tokenizer.json, tokenizer_config.json, sharded safetensors with an index)
into exactly the GGUF that convert_hf_to_gguf.py writes. We cannot run the
converter (no torch/transformers here), so this script writes both sides
from the same random weights: the checkpoint, and a "direct" GGUF built in
Python by its own HF->GGUF mapping (names, expert stacking, Mixtral's Q/K
row permutation, hyperparameter keys, vocabulary and special tokens), which
shares no code with the C importer. The test then compares the two files.

Architectures: qwen3moe, qwen2moe, llama (MixtralForCausalLM), olmoe, with
the tiny shapes of gen_model.py. Vocabularies come from
$MOE_SHARED_DATA/vocab: the Qwen2 one (qwen archs and OLMoE) is written as a
byte-level BPE tokenizer.json; the Llama SentencePiece one (Mixtral) as
tokenizer.model (protobuf) and as tokenizer.json (BPE with byte fallback,
merges derived from the pieces' scores as transformers' converter does).

--fused-experts writes a Qwen MoE's experts as transformers 5 saves them
(mlp.experts.gate_up_proj and mlp.experts.down_proj per layer).

Dtypes: --dtype f32 | bf16 | mixed (default: expert and embedding matrices
BF16, routers F16, the rest F32). Values are rounded to their dtype before
they go into the direct GGUF, which is F32 throughout, so an F32 import
must equal it byte for byte.

Usage:
  gen_hf_checkpoint.py --arch qwen3moe -o DIR [--gguf DIRECT.gguf]
      [--shards 3] [--dtype mixed] [--no-tokenizer-model] [--n-embd ...]
"""
import argparse
import json
import os
import struct
import sys
import zlib

import numpy as np

import gen_model
from gguf_read import GGUFFile, T_BOOL, T_FLOAT32, T_INT32, T_STRING, T_UINT32
from gguf_write import GGML_BF16, GGML_F32, GGUFWriter, encode

HF_ARCH = {"qwen3moe": "Qwen3MoeForCausalLM", "qwen2moe": "Qwen2MoeForCausalLM",
           "llama": "MixtralForCausalLM", "olmoe": "OlmoeForCausalLM"}
TEMPLATES = {"qwen3moe": "Qwen-Qwen3-0.6B.jinja", "qwen2moe": "Qwen-Qwen2.5-7B-Instruct.jinja",
             "llama": "mistralai-Mistral-Nemo-Instruct-2407.jinja",
             "olmoe": "ibm-granite-granite-3.3-2B-Instruct.jinja"}
QWEN2_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?"
               "[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
# Added tokens placed on the Qwen2 vocabulary's unused ids: (id, text, special).
QWEN_EXTRA = [(151646, "<|object_ref_start|>", True), (151647, "<think>", False),
              (151648, "</think>", False), (151649, "<tool_call>", False),
              (151650, "<|fim_prefix|>", False)]
ST_DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (None, 2)}
CHUNK_ROWS_ELEMS = 1 << 22


def shared_dir():
    return os.path.dirname(gen_model.default_vocab_dir())


# ---- weights -------------------------------------------------------------

def hf_plan(cfg, n_vocab, fused=False):
    """[(hf_name, shape, std, mean, role)] in checkpoint order. role picks
    the dtype under --dtype mixed: 'big' (experts, embeddings), 'router',
    'other'. fused: the Qwen experts as transformers 5 saves them, one
    gate_up_proj [n_expert, 2 n_ff, n_embd] and one down_proj
    [n_expert, n_embd, n_ff] per layer."""
    E, D, F = cfg.n_embd, cfg.head_dim, cfg.n_ff_exp
    Hq, Hkv, X = cfg.n_head * D, cfg.n_head_kv * D, cfg.n_expert
    inv = lambda n: 1.0 / np.sqrt(n)
    mixtral = cfg.arch == "llama"
    plan = [("model.embed_tokens.weight", (n_vocab, E), 1.0, 0.0, "big")]
    for i in range(cfg.n_layer):
        p = f"model.layers.{i}."
        plan.append((p + "input_layernorm.weight", (E,), 0.1, 1.0, "other"))
        for proj, rows in (("q", Hq), ("k", Hkv), ("v", Hkv)):
            plan.append((p + f"self_attn.{proj}_proj.weight", (rows, E), inv(E), 0.0, "other"))
            if cfg.arch == "qwen2moe":
                plan.append((p + f"self_attn.{proj}_proj.bias", (rows,), 0.5, 0.0, "other"))
        plan.append((p + "self_attn.o_proj.weight", (E, Hq), inv(Hq), 0.0, "other"))
        if cfg.arch == "qwen3moe":
            plan += [(p + "self_attn.q_norm.weight", (D,), 0.1, 1.0, "other"),
                     (p + "self_attn.k_norm.weight", (D,), 0.1, 1.0, "other")]
        if cfg.arch == "olmoe":
            plan += [(p + "self_attn.q_norm.weight", (Hq,), 0.1, 1.0, "other"),
                     (p + "self_attn.k_norm.weight", (Hkv,), 0.1, 1.0, "other")]
        plan.append((p + "post_attention_layernorm.weight", (E,), 0.1, 1.0, "other"))
        moe = p + ("block_sparse_moe." if mixtral else "mlp.")
        plan.append((moe + "gate.weight", (X, E), cfg.router_scale * inv(E), 0.0, "router"))
        names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
        if fused:
            plan += [(moe + "experts.gate_up_proj", (X, 2 * F, E), inv(E), 0.0, "big"),
                     (moe + "experts.down_proj", (X, E, F), inv(F), 0.0, "big")]
        for e in range(0 if fused else X):
            plan += [(moe + f"experts.{e}.{names[0]}.weight", (F, E), inv(E), 0.0, "big"),
                     (moe + f"experts.{e}.{names[1]}.weight", (F, E), inv(E), 0.0, "big"),
                     (moe + f"experts.{e}.{names[2]}.weight", (E, F), inv(F), 0.0, "big")]
        if cfg.arch == "qwen2moe":
            S = cfg.n_ff_shexp
            plan += [(p + "mlp.shared_expert.gate_proj.weight", (S, E), inv(E), 0.0, "other"),
                     (p + "mlp.shared_expert.up_proj.weight", (S, E), inv(E), 0.0, "other"),
                     (p + "mlp.shared_expert.down_proj.weight", (E, S), inv(S), 0.0, "other"),
                     (p + "mlp.shared_expert_gate.weight", (1, E), inv(E), 0.0, "router")]
    plan.append(("model.norm.weight", (E,), 0.1, 1.0, "other"))
    plan.append(("lm_head.weight", (n_vocab, E), cfg.sharp * inv(E), 0.0, "big"))
    return plan


def dtype_for(role, policy):
    if policy == "f32":
        return "F32"
    if policy == "bf16":
        return "BF16"
    return {"big": "BF16", "router": "F16", "other": "F32"}[role]


def round_to(x, st_dtype):
    """float32 values exactly representable in `st_dtype`."""
    if st_dtype == "F32":
        return x
    if st_dtype == "F16":
        return x.astype(np.float16).astype(np.float32)
    b = encode(x, GGML_BF16).view("<u2").astype(np.uint32) << 16
    return b.view(np.float32).reshape(x.shape)


def to_bytes(x, st_dtype):
    if st_dtype == "BF16":
        return encode(x, GGML_BF16).tobytes()
    return np.ascontiguousarray(x, dtype=ST_DTYPES[st_dtype][0]).astype(
        np.dtype(ST_DTYPES[st_dtype][0]).newbyteorder("<")).tobytes()


class Weights:
    """The checkpoint's tensors as seeded producers (values already rounded
    to their safetensors dtype)."""

    def __init__(self, cfg, n_vocab, policy, fused=False):
        self.cfg = cfg
        self.fused = fused
        self.entries = {}
        self.order = []
        for name, shape, std, mean, role in hf_plan(cfg, n_vocab, fused):
            self.entries[name] = (shape, std, mean, dtype_for(role, policy))
            self.order.append(name)

    def chunks(self, name):
        """Yields float32 row chunks of tensor `name`."""
        shape, std, mean, dt = self.entries[name]
        rng = np.random.default_rng([self.cfg.seed, zlib.crc32(f"{self.cfg.arch}/{name}".encode())])
        per_row = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
        if len(shape) == 1:
            x = rng.standard_normal(shape, dtype=np.float32) * np.float32(std) + np.float32(mean)
            yield round_to(x, dt)
            return
        step = max(1, CHUNK_ROWS_ELEMS // per_row)
        for r0 in range(0, shape[0], step):
            n = min(step, shape[0] - r0)
            x = rng.standard_normal((n,) + tuple(shape[1:]), dtype=np.float32)
            yield round_to(x * np.float32(std) + np.float32(mean), dt)

    def full(self, name):
        return np.concatenate(list(self.chunks(name)), axis=0)


# ---- safetensors -----------------------------------------------------------

def write_safetensors(path, names, weights):
    header, offset = {}, 0
    for n in names:
        shape, _, _, dt = weights.entries[n]
        size = int(np.prod(shape)) * ST_DTYPES[dt][1]
        header[n] = {"dtype": dt, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    header["__metadata__"] = {"format": "pt"}
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * ((-len(blob)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for n in names:
            for chunk in weights.chunks(n):
                f.write(to_bytes(chunk, weights.entries[n][3]))
    return offset


def write_shards(out_dir, weights, n_shards):
    """Splits the tensors into n_shards files of similar size (an index
    when n_shards > 1). Returns the total tensor bytes."""
    sizes = [int(np.prod(weights.entries[n][0])) * ST_DTYPES[weights.entries[n][3]][1]
             for n in weights.order]
    total = sum(sizes)
    if n_shards <= 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), weights.order, weights)
        return total
    groups, acc = [[] for _ in range(n_shards)], 0
    for n, s in zip(weights.order, sizes):
        groups[min(n_shards - 1, acc * n_shards // total)].append(n)
        acc += s
    weight_map = {}
    for k, names in enumerate(groups):
        file = f"model-{k + 1:05d}-of-{n_shards:05d}.safetensors"
        write_safetensors(os.path.join(out_dir, file), names, weights)
        weight_map.update({n: file for n in names})
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    return total


# ---- config.json -------------------------------------------------------------

def config_json(cfg, n_vocab):
    c = {"architectures": [HF_ARCH[cfg.arch]], "model_type": cfg.arch,
         "hidden_size": cfg.n_embd, "num_hidden_layers": cfg.n_layer,
         "num_attention_heads": cfg.n_head, "num_key_value_heads": cfg.n_head_kv,
         "max_position_embeddings": cfg.ctx, "rms_norm_eps": cfg.eps,
         "rope_theta": cfg.rope_base, "vocab_size": n_vocab, "hidden_act": "silu",
         "tie_word_embeddings": False, "torch_dtype": "bfloat16",
         "num_experts_per_tok": cfg.n_expert_used}
    if cfg.arch in ("qwen3moe", "qwen2moe"):
        c.update(num_experts=cfg.n_expert, moe_intermediate_size=cfg.n_ff_exp,
                 intermediate_size=cfg.n_ff_exp * cfg.n_expert_used,
                 bos_token_id=151643, eos_token_id=151645, norm_topk_prob=cfg.arch == "qwen3moe")
        if cfg.arch == "qwen3moe":
            c["head_dim"] = cfg.head_dim
        else:
            c["shared_expert_intermediate_size"] = cfg.n_ff_shexp
    elif cfg.arch == "llama":
        c.update(num_local_experts=cfg.n_expert, intermediate_size=cfg.n_ff_exp,
                 head_dim=None, bos_token_id=1, eos_token_id=2, rope_scaling=None)
        if cfg.head_dim * cfg.n_head != cfg.n_embd:
            c["head_dim"] = cfg.head_dim
    else:
        c.update(num_experts=cfg.n_expert, intermediate_size=cfg.n_ff_exp,
                 bos_token_id=None, eos_token_id=151643, pad_token_id=1, clip_qkv=None)
    return c


# ---- tokenizer files -----------------------------------------------------------

def added_token(i, text, special):
    return {"id": i, "content": text, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": not special, "special": special}


def decoder_entry(text, special):
    return {"content": text, "lstrip": False, "normalized": not special, "rstrip": False,
            "single_word": False, "special": special}


def qwen_tokenizer(vocab, arch):
    """(tokenizer.json dict, tokenizer_config dict, chat template in a file?)
    for the byte-level BPE vocabulary of the Qwen2 GGUF."""
    tokens = vocab.kv["tokenizer.ggml.tokens"]
    types = vocab.kv["tokenizer.ggml.token_type"]
    merges = list(vocab.kv["tokenizer.ggml.merges"])
    base = {t: i for i, t in enumerate(tokens) if types[i] == 1}
    added = [(i, tokens[i], True) for i in range(len(tokens)) if types[i] == 3] + QWEN_EXTRA
    if arch == "qwen3moe":   # transformers >= 4.45 writes merges as pairs
        merges = [m.split(" ", 1) for m in merges]
    if arch == "olmoe":
        pre = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
               "use_regex": True}
    else:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]}
    tj = {"version": "1.0", "truncation": None, "padding": None,
          "added_tokens": [added_token(*a) for a in added],
          "normalizer": {"type": "NFC"}, "pre_tokenizer": pre,
          "post_processor": {"type": "ByteLevel", "add_prefix_space": False,
                             "trim_offsets": False, "use_regex": False},
          "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                      "use_regex": False},
          "model": {"type": "BPE", "dropout": None, "unk_token": None,
                    "continuing_subword_prefix": "", "end_of_word_suffix": "",
                    "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                    "vocab": base, "merges": merges}}
    tc = {"add_prefix_space": False, "bos_token": None, "clean_up_tokenization_spaces": False,
          "errors": "replace", "model_max_length": 131072, "split_special_tokens": False,
          "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
          "added_tokens_decoder": {str(i): decoder_entry(t, s) for i, t, s in added}}
    if arch == "olmoe":   # dict form of a special token; template in its own file
        tc.update(eos_token={"content": "<|endoftext|>", "special": True},
                  pad_token="<|im_end|>")
    else:
        tc.update(add_bos_token=False, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    return tj, tc


def spm_merges(pieces, scores, types):
    """transformers' SentencePieceExtractor: every split of a normal piece
    into two pieces is a merge, ranked by the piece's score (stable)."""
    vocab = {p: i for i, p in enumerate(pieces)}
    merges = []
    for i, piece in enumerate(pieces):
        if types[i] != 1:
            continue
        local = [(piece[:k], piece[k:]) for k in range(1, len(piece))
                 if piece[:k] in vocab and piece[k:] in vocab]
        local.sort(key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
        merges += [(lr, scores[i]) for lr in local]
    merges.sort(key=lambda m: -m[1])
    return [f"{l} {r}" for (l, r), _ in merges]


def pb_varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def pb_bytes(field, payload):
    return pb_varint(field << 3 | 2) + pb_varint(len(payload)) + payload


def spm_model_proto(pieces, scores, types):
    """A SentencePiece ModelProto: the pieces (type omitted when NORMAL, as
    protobuf omits defaults), plus small trainer and normalizer specs so a
    reader must skip fields it does not need."""
    out = bytearray()
    for p, s, t in zip(pieces, scores, types):
        msg = pb_bytes(1, p.encode("utf-8")) + pb_varint(2 << 3 | 5) + struct.pack("<f", s)
        if t != 1:
            msg += pb_varint(3 << 3 | 0) + pb_varint(int(t))
        out += pb_bytes(1, msg)
    out += pb_bytes(2, pb_varint(3 << 3 | 0) + pb_varint(2) + pb_varint(4 << 3 | 0) +
                    pb_varint(len(pieces)))
    out += pb_bytes(3, pb_bytes(1, b"identity") + pb_varint(3 << 3 | 0) + pb_varint(1))
    return bytes(out)


def mixtral_tokenizer(vocab):
    pieces = vocab.kv["tokenizer.ggml.tokens"]
    scores = [float(s) for s in vocab.kv["tokenizer.ggml.scores"]]
    types = [int(t) for t in vocab.kv["tokenizer.ggml.token_type"]]
    specials = [(0, "<unk>"), (1, "<s>"), (2, "</s>")]
    tj = {"version": "1.0", "truncation": None, "padding": None,
          "added_tokens": [added_token(i, t, True) for i, t in specials],
          "normalizer": {"type": "Sequence", "normalizers": [
              {"type": "Prepend", "prepend": "\u2581"},
              {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
          "pre_tokenizer": None,
          "post_processor": {"type": "TemplateProcessing",
                             "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                        {"Sequence": {"id": "A", "type_id": 0}}],
                             "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "<s>", "type_id": 1}},
                                      {"Sequence": {"id": "B", "type_id": 1}}],
                             "special_tokens": {"<s>": {"id": "<s>", "ids": [1],
                                                        "tokens": ["<s>"]}}},
          "decoder": {"type": "Sequence", "decoders": [
              {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
              {"type": "ByteFallback"}, {"type": "Fuse"},
              {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
          "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                    "continuing_subword_prefix": None, "end_of_word_suffix": None,
                    "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                    "vocab": {p: i for i, p in enumerate(pieces)},
                    "merges": spm_merges(pieces, scores, types)}}
    tc = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
          "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None, "legacy": True,
          "clean_up_tokenization_spaces": False, "model_max_length": 1000000000000000019884624838656,
          "sp_model_kwargs": {}, "spaces_between_special_tokens": False,
          "tokenizer_class": "LlamaTokenizer", "use_default_system_prompt": False,
          "added_tokens_decoder": {str(i): decoder_entry(t, True) for i, t in specials}}
    return tj, tc, spm_model_proto(pieces, scores, types)


# ---- what llama.cpp's converter writes (the "direct" GGUF) ---------------------

SPECIAL_TYPES = ("bos", "eos", "unk", "sep", "pad", "cls", "mask")
SPECIAL_KEYS = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id",
                "sep": "seperator_token_id", "pad": "padding_token_id",
                "mask": "mask_token_id"}   # cls: gguf-py has no key for it


def _content(v):
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get("content"), str):
        return v["content"]
    return None


def special_kvs(tj, tc, config, n_check):
    """gguf-py SpecialVocab's decisions for the files this script writes
    (TemplateProcessing "single" with a leading special token; no EOS
    rewriting needed here)."""
    ids, add = {}, {}
    bos = _content(tc.get("bos_token"))
    pp = tj.get("post_processor") or {}
    for proc in pp.get("processors", [pp]):
        if proc.get("type") == "TemplateProcessing":
            single = proc.get("single", [])
            first = single[0].get("SpecialToken", {}).get("id") if len(single) > 1 else None
            if first:
                add["bos"] = first == bos
    added = tj.get("added_tokens", [])

    def put(typ, tid):
        if not isinstance(tid, int) or isinstance(tid, bool) or typ in ids:
            return
        if n_check is not None and tid >= n_check:
            return
        ids[typ] = tid
    for typ in SPECIAL_TYPES:
        if isinstance(tc.get(f"add_{typ}_token"), bool):
            add[typ] = tc[f"add_{typ}_token"]
        c = _content(tc.get(f"{typ}_token"))
        if c is not None:
            put(typ, next((a["id"] for a in added if a["content"] == c), None))
    for typ in SPECIAL_TYPES:
        put(typ, config.get(f"{typ}_token_id"))
    kv = {f"tokenizer.ggml.{SPECIAL_KEYS[t]}": (T_UINT32, v, None)
          for t, v in ids.items() if t in SPECIAL_KEYS}
    for t in ("bos", "eos", "sep"):
        if t in add:
            kv[f"tokenizer.ggml.add_{t}_token"] = (T_BOOL, add[t], None)
    return kv


def looks_special(t):
    return (t in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or
            (t.startswith("<|") and t.endswith("|>")) or
            (t.startswith("<unused") and t.endswith(">")))


def tokenizer_kvs(arch, tj, tc, config, spm=None):
    """{key: (value type, value, element type)} of every tokenizer key."""
    n_vocab = config["vocab_size"]
    kv = {}
    if arch == "llama":
        pieces, scores, types = spm
        tokens = [f"[PAD{i}]" for i in range(n_vocab)]
        sc, ty = [-10000.0] * n_vocab, [5] * n_vocab
        for i in range(min(n_vocab, len(pieces))):
            tokens[i], sc[i] = pieces[i], scores[i]
            ty[i] = types[i] if types[i] in (2, 3, 5, 6) else 1
        for sid, e in tc.get("added_tokens_decoder", {}).items():
            i = int(sid)
            tokens[i], sc[i] = e["content"], -1000.0
            ty[i] = 3 if e.get("special") or looks_special(e["content"]) else 4
        kv["tokenizer.ggml.model"] = (T_STRING, "llama", None)
        kv["tokenizer.ggml.pre"] = (T_STRING, "default", None)
        kv["tokenizer.ggml.tokens"] = (9, tokens, T_STRING)
        kv["tokenizer.ggml.scores"] = (9, np.array(sc, dtype=np.float32), T_FLOAT32)
        kv["tokenizer.ggml.token_type"] = (9, np.array(ty, dtype=np.int32), T_INT32)
        kv.update(special_kvs(tj, tc, config, n_vocab))
    else:
        tokens, ty = [None] * n_vocab, [1] * n_vocab
        for t, i in tj["model"]["vocab"].items():
            tokens[i] = t
        for a in tj["added_tokens"]:
            special = a["special"] or looks_special(a["content"])
            tokens[a["id"]] = a["content"] if special else a["content"].replace("\u2581", " ")
            ty[a["id"]] = 3 if special else 4
        for i in range(n_vocab):
            if tokens[i] is None:
                tokens[i], ty[i] = f"[PAD{i}]", 5
        merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
        kv["tokenizer.ggml.model"] = (T_STRING, "gpt2", None)
        kv["tokenizer.ggml.pre"] = (T_STRING, "gpt-2" if arch == "olmoe" else "qwen2", None)
        kv["tokenizer.ggml.tokens"] = (9, tokens, T_STRING)
        kv["tokenizer.ggml.token_type"] = (9, np.array(ty, dtype=np.int32), T_INT32)
        kv["tokenizer.ggml.merges"] = (9, merges, T_STRING)
        kv.update(special_kvs(tj, tc, config, None))
    return kv


def hparam_kvs(arch, c):
    """The converter's <arch>.* keys from config.json `c` (the subset of
    rules these configs exercise)."""
    kv = {}
    u32 = lambda k, v: kv.__setitem__(f"{arch}.{k}", (T_UINT32, int(v), None))
    f32 = lambda k, v: kv.__setitem__(f"{arch}.{k}", (T_FLOAT32, float(v), None))
    u32("block_count", c["num_hidden_layers"])
    if c.get("max_position_embeddings") is not None:
        u32("context_length", c["max_position_embeddings"])
    u32("embedding_length", c["hidden_size"])
    if c.get("intermediate_size") is not None:
        u32("feed_forward_length", c["intermediate_size"])
    u32("attention.head_count", c["num_attention_heads"])
    if c.get("num_key_value_heads") is not None:
        u32("attention.head_count_kv", c["num_key_value_heads"])
    f32("rope.freq_base", c["rope_theta"])
    f32("attention.layer_norm_rms_epsilon", 1e-5 if arch == "olmoe" else c["rms_norm_eps"])
    u32("expert_count", c.get("num_local_experts") or c.get("num_experts"))
    u32("expert_used_count", c["num_experts_per_tok"])
    if c.get("head_dim") is not None:
        u32("attention.key_length", c["head_dim"])
        u32("attention.value_length", c["head_dim"])
    if arch in ("qwen2moe", "qwen3moe"):
        u32("expert_feed_forward_length", c["moe_intermediate_size"])
        if c.get("shared_expert_intermediate_size") is not None:
            u32("expert_shared_feed_forward_length", c["shared_expert_intermediate_size"])
    if arch == "llama":
        u32("vocab_size", c["vocab_size"])
        u32("rope.dimension_count", c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"])
    return kv


def permute_rows(w, n_heads):
    """llama.cpp's converter order for Q/K: within each head, the two halves
    of the rotary dimensions are interleaved (HF row j*d/2 + i -> 2i + j)."""
    rows = w.shape[0]
    return w.reshape(n_heads, 2, rows // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_tensors(cfg, weights):
    """[(gguf name, numpy shape, producer)] of the converted model."""
    out = []
    one = lambda g, h, fn=None: out.append(
        (g, weights.entries[h][0], (lambda h=h, fn=fn: fn(weights.full(h)) if fn else weights.full(h))))
    mixtral = cfg.arch == "llama"
    one("token_embd.weight", "model.embed_tokens.weight")
    for i in range(cfg.n_layer):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        one(b + "attn_norm.weight", p + "input_layernorm.weight")
        one(b + "attn_q.weight", p + "self_attn.q_proj.weight",
            (lambda w: permute_rows(w, cfg.n_head)) if mixtral else None)
        one(b + "attn_k.weight", p + "self_attn.k_proj.weight",
            (lambda w: permute_rows(w, cfg.n_head_kv)) if mixtral else None)
        one(b + "attn_v.weight", p + "self_attn.v_proj.weight")
        if cfg.arch == "qwen2moe":
            for x in "qkv":
                one(b + f"attn_{x}.bias", p + f"self_attn.{x}_proj.bias")
        one(b + "attn_output.weight", p + "self_attn.o_proj.weight")
        if cfg.arch in ("qwen3moe", "olmoe"):
            one(b + "attn_q_norm.weight", p + "self_attn.q_norm.weight")
            one(b + "attn_k_norm.weight", p + "self_attn.k_norm.weight")
        one(b + "ffn_norm.weight", p + "post_attention_layernorm.weight")
        moe = p + ("block_sparse_moe." if mixtral else "mlp.")
        one(b + "ffn_gate_inp.weight", moe + "gate.weight")
        projs = (("gate", "w1"), ("up", "w3"), ("down", "w2")) if mixtral else \
            (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj"))
        if weights.fused:   # the converter splits gate_up_proj into halves
            F, gu = cfg.n_ff_exp, moe + "experts.gate_up_proj"
            shape = (cfg.n_expert, F, cfg.n_embd)
            out.append((b + "ffn_gate_exps.weight", shape, lambda gu=gu, F=F: weights.full(gu)[:, :F]))
            out.append((b + "ffn_up_exps.weight", shape, lambda gu=gu, F=F: weights.full(gu)[:, F:]))
            out.append((b + "ffn_down_exps.weight", weights.entries[moe + "experts.down_proj"][0],
                        lambda dn=moe + "experts.down_proj": weights.full(dn)))
            projs = ()
        for g, h in projs:
            names = [moe + f"experts.{e}.{h}.weight" for e in range(cfg.n_expert)]
            shape = (cfg.n_expert,) + tuple(weights.entries[names[0]][0])
            out.append((b + f"ffn_{g}_exps.weight", shape,
                        lambda names=names: (weights.full(n)[None] for n in names)))
        if cfg.arch == "qwen2moe":
            one(b + "ffn_gate_inp_shexp.weight", p + "mlp.shared_expert_gate.weight")
            for g in ("gate", "up", "down"):
                one(b + f"ffn_{g}_shexp.weight", p + f"mlp.shared_expert.{g}_proj.weight")
    one("output_norm.weight", "model.norm.weight")
    one("output.weight", "lm_head.weight")
    return out


def write_direct_gguf(path, cfg, weights, config, tok_kv, name):
    w = GGUFWriter(path)
    w.add_string("general.architecture", cfg.arch)
    w.add_string("general.type", "model")
    w.add_string("general.name", name)
    for key, (vt, v, et) in list(hparam_kvs(cfg.arch, config).items()) + [
            ("general.file_type", (T_UINT32, 0, None)),
            ("general.quantization_version", (T_UINT32, 2, None))] + list(tok_kv.items()):
        w.add(key, vt, v, et)
    for gname, shape, producer in gguf_tensors(cfg, weights):
        w.add_tensor(gname, shape, GGML_F32, producer)
    return w.write()


# ---- the folder ------------------------------------------------------------------

def generate(out_dir, cfg, shards=2, policy="mixed", gguf=None, name=None,
             tokenizer_model=True, tokenizer_json=True, fused=False):
    """Writes the checkpoint folder (and the direct GGUF when `gguf`).
    Returns a dict of facts for the test."""
    os.makedirs(out_dir, exist_ok=True)
    vocab = GGUFFile(os.path.join(gen_model.default_vocab_dir(), cfg.vocab_file))
    n_vocab = len(vocab.kv["tokenizer.ggml.tokens"])
    config = config_json(cfg, n_vocab)
    spm = None
    if cfg.arch == "llama":
        tj, tc, proto = mixtral_tokenizer(vocab)
        spm = (vocab.kv["tokenizer.ggml.tokens"], [float(s) for s in vocab.kv["tokenizer.ggml.scores"]],
               [int(t) for t in vocab.kv["tokenizer.ggml.token_type"]])
        if tokenizer_model:
            with open(os.path.join(out_dir, "tokenizer.model"), "wb") as f:
                f.write(proto)
    else:
        tj, tc = qwen_tokenizer(vocab, cfg.arch)
    with open(os.path.join(shared_dir(), "templates", TEMPLATES[cfg.arch]), encoding="utf-8") as f:
        template = f.read()
    if cfg.arch == "olmoe":
        with open(os.path.join(out_dir, "chat_template.jinja"), "w", encoding="utf-8") as f:
            f.write(template)
    else:
        tc["chat_template"] = template
    if tokenizer_json:
        with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False, indent=2)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    weights = Weights(cfg, n_vocab, policy, fused and cfg.arch in ("qwen2moe", "qwen3moe"))
    total = write_shards(out_dir, weights, shards)
    info = dict(dir=out_dir, bytes=total, n_vocab=n_vocab, config=config)
    if gguf:
        tok_kv = tokenizer_kvs(cfg.arch, tj, tc, config, spm)
        tok_kv["tokenizer.chat_template"] = (T_STRING, template, None)
        write_direct_gguf(gguf, cfg, weights, config, tok_kv, name or f"moedesk-test-{cfg.arch}")
        info["gguf"] = gguf
    vocab.close()
    return info


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", required=True, help="checkpoint folder to write")
    ap.add_argument("--arch", choices=gen_model.ARCHES, required=True)
    ap.add_argument("--gguf", help="also write the converter's GGUF here (F32)")
    ap.add_argument("--name", help="general.name of the direct GGUF")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--dtype", choices=("f32", "bf16", "mixed"), default="mixed")
    ap.add_argument("--no-tokenizer-model", action="store_true",
                    help="llama: only tokenizer.json (BPE with byte fallback)")
    ap.add_argument("--fused-experts", action="store_true",
                    help="qwen: experts fused per layer, as transformers 5 saves them")
    for opt in ("n-embd", "n-layer", "n-head", "n-head-kv", "head-dim", "n-expert",
                "n-expert-used", "n-ff-exp", "n-ff-shexp", "ctx", "seed"):
        ap.add_argument("--" + opt, type=int)
    ap.add_argument("--sharp", type=float)
    args = ap.parse_args(argv)
    kw = {k: getattr(args, k) for k in ("n_embd", "n_layer", "n_head", "n_head_kv", "head_dim",
                                         "n_expert", "n_expert_used", "n_ff_exp", "n_ff_shexp",
                                         "ctx", "seed", "sharp")}
    try:
        cfg = gen_model.ModelConfig(args.arch, **kw)
        info = generate(args.output, cfg, args.shards, args.dtype, args.gguf, args.name,
                        tokenizer_model=not args.no_tokenizer_model, fused=args.fused_experts)
    except (ValueError, OSError) as e:
        print(f"gen_hf_checkpoint: {e}", file=sys.stderr)
        return 1
    print(f"{args.output}: {HF_ARCH[args.arch]}, {info['bytes'] / 2**20:.1f} MiB of tensors"
          + (f"; direct GGUF {args.gguf}" if args.gguf else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/python3
"""fim_model.py — a tiny random-weight model whose vocabulary has
fill-in-the-middle tokens, for the service's FIM tests (/infill, Ollama's
`suffix`, OpenAI completions with `suffix`).

Why: the demo model (moedesk-demo-random.gguf) is byte-level ChatML with no
FIM tokens, and the shared vocabularies have none either. This takes the
demo model's tokenizer (256 byte tokens + ChatML specials, its chat
template), appends Qwen2.5-Coder's six FIM/repo control tokens and writes a
tiny qwen3moe model over that vocabulary with gen_model.py. The engine
finds FIM tokens by their texts, as llama.cpp does, so no extra keys are
needed. Same input, same bytes out.

usage: fim_model.py DEMO_MODEL.gguf OUT.gguf
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gen_model import ModelConfig, generate  # noqa: E402
from gguf_read import T_ARRAY, T_INT32, T_STRING, GGUFFile  # noqa: E402
from gguf_write import GGUFWriter  # noqa: E402

# Qwen2.5-Coder's texts, in its order (prefix, middle, suffix, pad, repo, file).
FIM_TOKENS = ["<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
              "<|repo_name|>", "<|file_sep|>"]
TOKEN_CONTROL = 3


def write_vocab(demo_path, out_path):
    """A vocabulary GGUF: the demo model's tokenizer.* keys plus FIM_TOKENS."""
    src = GGUFFile(demo_path)
    tokens = list(src.kv["tokenizer.ggml.tokens"])
    n_old = len(tokens)
    for t in FIM_TOKENS:
        if t in tokens:
            raise ValueError(f"{demo_path}: already has {t}")
    w = GGUFWriter(out_path)
    w.add_string("general.architecture", "qwen3moe")
    for key in src.kv:
        if not key.startswith("tokenizer."):
            continue
        vtype, etype = src.kv_types[key]
        if key == "tokenizer.ggml.tokens":
            w.add_array(key, T_STRING, tokens + FIM_TOKENS)
        elif vtype == T_ARRAY and len(src.kv[key]) == n_old:
            # per-token arrays (types, scores) grow with the vocabulary
            extra = [TOKEN_CONTROL] * len(FIM_TOKENS) if key == "tokenizer.ggml.token_type" \
                else [0] * len(FIM_TOKENS)
            w.add_array(key, etype, list(src.kv[key]) + extra)
        else:
            w.copy_kv(src, key)
    if "tokenizer.ggml.token_type" not in src.kv:
        w.add_array("tokenizer.ggml.token_type", T_INT32,
                    [1] * n_old + [TOKEN_CONTROL] * len(FIM_TOKENS))
    w.write()
    src.close()


def make(demo_path, out_path):
    with tempfile.TemporaryDirectory(prefix="moedesk-fim-") as tmp:
        vocab = os.path.join(tmp, "vocab.gguf")
        write_vocab(demo_path, vocab)
        cfg = ModelConfig("qwen3moe", vocab=vocab, n_embd=64, n_layer=2, ctx=4096, seed=7,
                          sharp=4.0)
        generate(out_path, cfg)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    try:
        make(sys.argv[1], sys.argv[2])
    except (ValueError, OSError, KeyError) as e:
        print(f"fim_model: {e}", file=sys.stderr)
        sys.exit(1)

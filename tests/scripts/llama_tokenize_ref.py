#!/usr/bin/python3
"""llama_tokenize_ref.py -- llama.cpp's token ids for arbitrary bytes.

tests/node/tokenize-ref.mjs asks llama.cpp through node-llama-cpp, whose
JavaScript strings can only carry valid UTF-8. This script calls the very
same library (libllama from the node-llama-cpp npm package) through ctypes
with raw bytes, so ill-formed UTF-8 and add_special can be checked too.

usage: llama_tokenize_ref.py VOCAB.gguf CASES OUT
  CASES in llama.cpp's .inp format; OUT as tokenize-ref.mjs writes it:
  "meta add_bos=.. add_eos=.. bos=.. eos=.." then "<case> <flags>: ids" for
  flags 0..3 (bit 0 add_special, bit 1 parse_special).
(env MOE_SOURCE_ROOT = source tree, to find tests/node/node_modules)
"""
import ctypes
import os
import sys

SEP = b"\n__ggml_vocab_test__\n"


class ModelParams(ctypes.Structure):
    # struct llama_model_params of the llama.cpp release node-llama-cpp
    # 3.21.1 ships (include/llama.h there).
    _fields_ = [
        ("devices", ctypes.c_void_p),
        ("tensor_buft_overrides", ctypes.c_void_p),
        ("n_gpu_layers", ctypes.c_int32),
        ("split_mode", ctypes.c_int),
        ("load_mode", ctypes.c_int),
        ("lazy_mode", ctypes.c_int),
        ("main_gpu", ctypes.c_int32),
        ("tensor_split", ctypes.c_void_p),
        ("progress_callback", ctypes.c_void_p),
        ("progress_callback_user_data", ctypes.c_void_p),
        ("kv_overrides", ctypes.c_void_p),
        ("vocab_only", ctypes.c_bool),
        ("check_tensors", ctypes.c_bool),
        ("use_extra_bufts", ctypes.c_bool),
        ("no_host", ctypes.c_bool),
        ("no_alloc", ctypes.c_bool),
        ("load_mtp", ctypes.c_bool),
    ]


LOG_CB = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_quiet = LOG_CB(lambda level, text, user: None)


def load_llama():
    root = os.environ.get("MOE_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
    bins = os.path.join(root, "tests", "node", "node_modules", "@node-llama-cpp", "linux-x64",
                        "bins", "linux-x64")
    names = sorted(os.listdir(bins))
    for dep in ["libggml-base.so"] + [n for n in names if n.startswith("libggml.")]:
        ctypes.CDLL(os.path.join(bins, dep), mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(os.path.join(bins, [n for n in names if n.startswith("libllama.")][0]))
    lib.llama_log_set(_quiet, None)
    lib.llama_backend_init()
    lib.llama_model_default_params.restype = ModelParams
    lib.llama_model_load_from_file.restype = ctypes.c_void_p
    lib.llama_model_load_from_file.argtypes = [ctypes.c_char_p, ModelParams]
    lib.llama_model_get_vocab.restype = ctypes.c_void_p
    lib.llama_model_get_vocab.argtypes = [ctypes.c_void_p]
    lib.llama_model_free.argtypes = [ctypes.c_void_p]
    lib.llama_tokenize.restype = ctypes.c_int32
    lib.llama_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32,
                                   ctypes.POINTER(ctypes.c_int32), ctypes.c_int32,
                                   ctypes.c_bool, ctypes.c_bool]
    for fn in ("llama_vocab_get_add_bos", "llama_vocab_get_add_eos"):
        getattr(lib, fn).restype = ctypes.c_bool
        getattr(lib, fn).argtypes = [ctypes.c_void_p]
    for fn in ("llama_vocab_bos", "llama_vocab_eos"):
        getattr(lib, fn).restype = ctypes.c_int32
        getattr(lib, fn).argtypes = [ctypes.c_void_p]
    return lib


def split_cases(data):
    cases, pos = [], 0
    while pos < len(data):
        nxt = data.find(SEP, pos)
        if nxt < 0:
            cases.append(data[pos:])
            break
        cases.append(data[pos:nxt])
        pos = nxt + len(SEP)
    return cases


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    vocab_path, cases_path, out_path = sys.argv[1:]
    lib = load_llama()
    params = lib.llama_model_default_params()
    params.vocab_only = True
    params.n_gpu_layers = 0
    model = lib.llama_model_load_from_file(vocab_path.encode(), params)
    if not model:
        sys.exit("llama.cpp could not load " + vocab_path)
    vocab = lib.llama_model_get_vocab(model)

    def tokenize(text, add, parse):
        cap = len(text) + 8
        buf = (ctypes.c_int32 * cap)()
        n = lib.llama_tokenize(vocab, text, len(text), buf, cap, add, parse)
        if n < 0:
            cap = -n
            buf = (ctypes.c_int32 * cap)()
            n = lib.llama_tokenize(vocab, text, len(text), buf, cap, add, parse)
        return list(buf[:n])

    lines = ["meta add_bos=%d add_eos=%d bos=%d eos=%d" % (
        lib.llama_vocab_get_add_bos(vocab), lib.llama_vocab_get_add_eos(vocab),
        lib.llama_vocab_bos(vocab), lib.llama_vocab_eos(vocab))]
    with open(cases_path, "rb") as f:
        cases = split_cases(f.read())
    for i, text in enumerate(cases):
        for flags in range(4):
            ids = tokenize(text, bool(flags & 1), bool(flags & 2))
            lines.append("%d %d: %s" % (i, flags, " ".join(str(t) for t in ids)))
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    lib.llama_model_free(model)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""test_quant_vs_llama.py — libmoe's block formats against llama.cpp's own.

llama.cpp's reference (de)quantisers are called through ctypes from
libggml-base.so as shipped in the node-llama-cpp npm package (tests/node);
ours through the quant-tool executable (argv[1]). Asserts:

  * half / bfloat16: every f16 -> f32 and a dense set of f32 -> f16/bf16
    (all rounding ties, subnormals, overflow edges, inf, NaN) bit-identical;
  * Q8_0 and Q4_0 quantisation byte-identical on every test array;
  * Q4_K and Q6_K quantisation: our RMSE <= llama.cpp's on every array;
  * dequantisation of llama.cpp-made Q8_0/Q4_0/Q4_K/Q6_K blocks, and of
    random block bytes, bit-identical to llama.cpp's dequantize_row_*.

Usage: test_quant_vs_llama.py QUANT_TOOL   (env MOE_SOURCE_ROOT = source tree)
"""
import atexit
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

BLOCK = {"q8_0": (32, 34), "q4_0": (32, 18), "q4_k": (256, 144), "q6_k": (256, 210)}
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def load_ggml():
    root = os.environ.get("MOE_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
    path = os.path.join(root, "tests", "node", "node_modules", "@node-llama-cpp",
                        "linux-x64", "bins", "linux-x64", "libggml-base.so")
    lib = ctypes.CDLL(path)
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    names = ["quantize_row_q8_0_ref", "quantize_row_q4_0_ref", "quantize_row_q4_K_ref",
             "quantize_row_q6_K_ref", "dequantize_row_q8_0", "dequantize_row_q4_0",
             "dequantize_row_q4_K", "dequantize_row_q6_K", "ggml_fp16_to_fp32_row",
             "ggml_fp32_to_fp16_row", "ggml_bf16_to_fp32_row", "ggml_fp32_to_bf16_row_ref"]
    for n in names:
        getattr(lib, n).argtypes = [p, p, i64]
        getattr(lib, n).restype = None
    return lib


LIB = load_ggml()
TOOL = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="moe-quant-")
atexit.register(shutil.rmtree, TMP, ignore_errors=True)


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def llama_quantize(qtype, x):
    blk, nbytes = BLOCK[qtype]
    out = np.zeros(len(x) // blk * nbytes, dtype=np.uint8)
    fn = {"q8_0": "quantize_row_q8_0_ref", "q4_0": "quantize_row_q4_0_ref",
          "q4_k": "quantize_row_q4_K_ref", "q6_k": "quantize_row_q6_K_ref"}[qtype]
    getattr(LIB, fn)(ptr(x), ptr(out), len(x))
    return out


def llama_dequantize(qtype, data):
    blk, nbytes = BLOCK[qtype]
    n = len(data) // nbytes * blk
    out = np.zeros(n, dtype=np.float32)
    fn = {"q8_0": "dequantize_row_q8_0", "q4_0": "dequantize_row_q4_0",
          "q4_k": "dequantize_row_q4_K", "q6_k": "dequantize_row_q6_K"}[qtype]
    getattr(LIB, fn)(ptr(data), ptr(out), n)
    return out


def tool(mode, qtype, data):
    src = os.path.join(TMP, "in.bin")
    dst = os.path.join(TMP, "out.bin")
    data.tofile(src)
    subprocess.run([TOOL, mode, qtype, src, dst], check=True)
    return np.fromfile(dst, dtype=np.uint8 if mode == "quantize" else np.float32)


def ours_quantize(qtype, x):
    return tool("quantize", qtype, np.ascontiguousarray(x, dtype=np.float32))


def ours_dequantize(qtype, data):
    return tool("dequantize", qtype, np.ascontiguousarray(data, dtype=np.uint8))


def same_bits(a, b):
    """Bit-identical floats, except that where b is NaN a only has to be NaN
    too: a NaN scale's sign and payload travel through a subtraction
    differently depending on how the compiler orders it (clang and gcc
    differ), and no real file has NaN scales."""
    if a.shape != b.shape:
        return False
    nan = np.isnan(b)
    return (np.array_equal(a.view(np.uint32)[~nan], b.view(np.uint32)[~nan]) and
            bool(np.all(np.isnan(a[nan]))))


def test_arrays():
    """Named float32 arrays, each a multiple of 256 long."""
    rng = np.random.default_rng(1234)
    n = 256 * 48
    a = {}
    a["zeros"] = np.zeros(n)
    a["normal"] = rng.standard_normal(n)
    a["uniform"] = rng.uniform(-1, 1, n)
    a["laplace"] = rng.laplace(0, 0.02, n)
    a["negatives"] = -np.abs(rng.standard_normal(n))
    a["positives"] = np.abs(rng.standard_normal(n)) + 0.5
    out = rng.standard_normal(n)
    idx = rng.choice(n, n // 100, replace=False)
    out[idx] *= 200.0
    a["outliers"] = out
    a["tiny"] = rng.standard_normal(n) * 1e-6
    a["tinier"] = rng.standard_normal(n) * 1e-9
    a["huge"] = rng.standard_normal(n) * 3e3
    consts = np.repeat(rng.uniform(-5, 5, n // 32), 32)
    consts[: 256 * 2] = 3.7  # whole super-blocks constant, positive
    consts[256 * 2: 256 * 4] = -2.5  # and negative
    a["constant_blocks"] = consts
    scales = np.repeat(10.0 ** rng.uniform(-5, 3, n // 32), 32)
    a["mixed_scales"] = rng.standard_normal(n) * scales
    sparse = rng.standard_normal(n)
    sparse[rng.random(n) < 0.9] = 0.0
    a["sparse"] = sparse
    a["int_grid"] = rng.integers(-8, 8, n).astype(np.float64)
    # Rounding ties: with amax 127 the Q8_0 step is exactly 1, so the .5
    # values sit on ties; with max -8 the Q4_0 step is exactly 1 too.
    ties = rng.integers(-126, 126, n) + 0.5
    ties[::32] = 127.0
    a["ties_q8"] = ties
    ties4 = rng.integers(-7, 7, n) + 0.5
    ties4[::32] = -8.0
    a["ties_q4"] = ties4
    first_max = rng.standard_normal(n)
    first_max[::32] = 4.0
    first_max[5::32] = -4.0  # same magnitude, later: Q4_0 must pick the first
    a["equal_magnitudes"] = first_max
    one_hot = np.zeros(n)
    one_hot[::37] = rng.standard_normal(len(one_hot[::37])) * 10
    a["one_hot"] = one_hot
    return {k: v.astype(np.float32) for k, v in a.items()}


def rmse(x, y):
    return float(np.sqrt(np.mean((x.astype(np.float64) - y.astype(np.float64)) ** 2)))


def test_half_conversions():
    # f16 -> f32: all 65536 patterns.
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    ref = np.zeros(65536, dtype=np.float32)
    LIB.ggml_fp16_to_fp32_row(ptr(h), ptr(ref), 65536)
    check(same_bits(ours_dequantize("f16", h.view(np.uint8)), ref), "f16->f32 differs")
    # f32 -> f16 / bf16: every f16/bf16 value's neighbourhood (the value, the
    # tie halfway to the next one, one ulp either side of the tie) plus
    # random bit patterns, inf and NaN.
    rng = np.random.default_rng(7)
    base = np.arange(0, 1 << 16, dtype=np.uint32)
    f16_as_f32 = ref.view(np.uint32)
    f16_as_f32 = f16_as_f32[np.isfinite(ref)]
    mids = []
    for off in (0, 1 << 12, (1 << 12) - 1, (1 << 12) + 1, 1 << 11, (1 << 13) - 1):
        mids.append(f16_as_f32 + off)
    bf = base << 16
    for off in (0, 1 << 15, (1 << 15) - 1, (1 << 15) + 1):
        mids.append(bf + off)
    # subnormal half ties: k * 2^-25 exactly for all small k
    mids.append(np.arange(0, 4096, dtype=np.float32).astype(np.float32).view(np.uint32))
    sub = (np.arange(1, 2048 * 2, dtype=np.float64) * 2.0 ** -25).astype(np.float32)
    mids.append(sub.view(np.uint32))
    mids.append((-sub).view(np.uint32))
    mids.append(rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32))
    special = np.array([0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffc12345,
                        0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001, 0x33000000,
                        0x33000001, 0x80000000], dtype=np.uint32)
    mids.append(special)
    x = np.concatenate(mids).astype(np.uint32).view(np.float32)
    ref16 = np.zeros(len(x), dtype=np.uint16)
    LIB.ggml_fp32_to_fp16_row(ptr(x), ptr(ref16), len(x))
    ours16 = ours_quantize("f16", x).view(np.uint16)
    bad = np.nonzero(ours16 != ref16)[0]
    check(len(bad) == 0, "f32->f16 differs at %d inputs, e.g. %s" %
          (len(bad), [(hex(int(x.view(np.uint32)[i])), hex(int(ours16[i])), hex(int(ref16[i])))
                      for i in bad[:5]]))
    finite = np.isfinite(x)
    with np.errstate(over="ignore"):
        np16 = x[finite].astype(np.float16).view(np.uint16)
    check(np.array_equal(ours16[finite], np16),
          "f32->f16 differs from numpy on finite inputs")
    refbf = np.zeros(len(x), dtype=np.uint16)
    LIB.ggml_fp32_to_bf16_row_ref(ptr(x), ptr(refbf), len(x))
    oursbf = ours_quantize("bf16", x).view(np.uint16)
    check(np.array_equal(oursbf, refbf), "f32->bf16 differs (%d inputs)" %
          int(np.sum(oursbf != refbf)))
    refb = np.zeros(65536, dtype=np.float32)
    LIB.ggml_bf16_to_fp32_row(ptr(h), ptr(refb), 65536)
    check(same_bits(ours_dequantize("bf16", h.view(np.uint8)), refb), "bf16->f32 differs")


def test_quantisers(arrays):
    for name, x in arrays.items():
        for q in ("q8_0", "q4_0"):
            ref = llama_quantize(q, x)
            ours = ours_quantize(q, x)
            nbad = int(np.sum(ref != ours)) if ref.shape == ours.shape else -1
            check(nbad == 0, "%s %s: %d bytes differ from llama.cpp" % (name, q, nbad))
        for q in ("q4_k", "q6_k"):
            ref = llama_quantize(q, x)
            ours = ours_quantize(q, x)
            r_ref = rmse(x, llama_dequantize(q, ref))
            r_ours = rmse(x, llama_dequantize(q, ours))
            print("%-17s %s rmse ours %.6g llama %.6g (%.3f)" %
                  (name, q, r_ours, r_ref, r_ours / r_ref if r_ref else 1.0))
            check(r_ours <= r_ref * (1 + 1e-6) + 1e-30,
                  "%s %s: rmse %.6g worse than llama.cpp's %.6g" % (name, q, r_ours, r_ref))


def test_dequantisers(arrays):
    rng = np.random.default_rng(99)
    for q in ("q8_0", "q4_0", "q4_k", "q6_k"):
        for name, x in arrays.items():
            blocks = llama_quantize(q, x)
            check(same_bits(ours_dequantize(q, blocks), llama_dequantize(q, blocks)),
                  "%s %s: dequantisation differs from llama.cpp" % (name, q))
        # Random bytes: every code and scale pattern, NaN/inf scales included.
        blk, nbytes = BLOCK[q]
        raw = rng.integers(0, 256, nbytes * 512, dtype=np.uint64).astype(np.uint8)
        ref = llama_dequantize(q, raw)
        check(same_bits(ours_dequantize(q, raw), ref), "%s: random blocks dequantise differently" % q)


def main():
    arrays = test_arrays()
    test_half_conversions()
    test_quantisers(arrays)
    test_dequantisers(arrays)
    if failures:
        print("%d failures" % len(failures), file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

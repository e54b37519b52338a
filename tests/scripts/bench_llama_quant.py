#!/usr/bin/python3
"""bench_llama_quant.py — llama.cpp's reference quantisers' throughput on
this machine, for comparison with tests/bench/bench-quant.c (same MB/s
unit: f32 bytes; one thread; best of three). Calls libggml-base.so from
the node-llama-cpp npm package through ctypes. Not a test.

Usage: bench_llama_quant.py [MIB]   (run from the source root)
"""
import ctypes
import sys
import time

import numpy as np

LIB = ("tests/node/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/"
       "libggml-base.so")


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    n = mib * 1024 * 1024 // 4
    lib = ctypes.CDLL(LIB)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(n) * 0.02).astype(np.float32)
    out = np.zeros(n * 4, dtype=np.uint8)
    y = np.zeros(n, dtype=np.float32)
    print("| type | llama.cpp quantise MB/s | llama.cpp dequantise MB/s |\n|---|---:|---:|")
    for name, q, d in [("q8_0", "quantize_row_q8_0_ref", "dequantize_row_q8_0"),
                       ("q4_0", "quantize_row_q4_0_ref", "dequantize_row_q4_0"),
                       ("q4_k", "quantize_row_q4_K_ref", "dequantize_row_q4_K"),
                       ("q6_k", "quantize_row_q6_K_ref", "dequantize_row_q6_K")]:
        fq, fd = getattr(lib, q), getattr(lib, d)
        for f in (fq, fd):
            f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        tq = td = 1e30
        for _ in range(3):
            t0 = time.perf_counter()
            fq(x.ctypes.data, out.ctypes.data, n)
            t1 = time.perf_counter()
            fd(out.ctypes.data, y.ctypes.data, n)
            t2 = time.perf_counter()
            tq, td = min(tq, t1 - t0), min(td, t2 - t1)
        print("| %s | %.1f | %.1f |" % (name, n * 4 / 1e6 / tq, n * 4 / 1e6 / td))


if __name__ == "__main__":
    main()

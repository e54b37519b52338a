#!/usr/bin/python3
"""A small GGUF version 3 writer for MoeDesk's test-model generator.

Why: the tests need model files whose every byte we control (random weights,
exact metadata), written without the C engine under test and without
llama.cpp's gguf-py. Written from the public GGUF format description.

What it writes: typed metadata (every scalar type, strings, arrays of numbers
and of strings) and tensors in F32, F16, Q8_0 or Q4_0, 32-byte aligned.
Tensors are declared first with a producer callable and encoded one at a
time while the file is written, so peak memory is about one tensor (or one
chunk of one, when the producer yields chunks) however big the model.

Quantisation follows ggml's reference (deterministic) quantisers, so a
tensor quantised here is bit-identical to what llama.cpp's reference path
would produce from the same floats:
  Q8_0: per 32 values d = max|x| / 127 (float32), stored as f16 (round to
        nearest even), q = roundf(x * (1/d)) with roundf rounding halves away
        from zero, where 1/d is taken from the float32 d (not the f16 one).
  Q4_0: per 32 values m = the value of largest magnitude (first if tied),
        d = m / -8, q = min(15, trunc(x * (1/d) + 8.5)); byte j holds
        element j in its low nibble and element j+16 in its high nibble.

Shapes are numpy shapes (outermost first); the writer stores them reversed
as GGUF's ne (innermost first): shape (rows, cols) -> ne = [cols, rows].
"""
import struct

import numpy as np

from gguf_read import (GGML_BF16, GGML_F16, GGML_F32, GGML_Q4_0, GGML_Q8_0,
                       GGML_TYPES, SCALAR_FORMATS, T_ARRAY, T_BOOL, T_FLOAT32,
                       T_INT32, T_STRING, T_UINT32, T_UINT64)

GGML_TYPE_BY_NAME = {"f32": GGML_F32, "f16": GGML_F16, "bf16": GGML_BF16,
                     "q8_0": GGML_Q8_0, "q4_0": GGML_Q4_0}

# general.file_type values (llama.cpp's llama_ftype) for whole-model types.
FILE_TYPE = {GGML_F32: 0, GGML_F16: 1, GGML_Q4_0: 2, GGML_Q8_0: 7, GGML_BF16: 32}


def round_half_away(x):
    """C roundf() on a float32 array: halves go away from zero. Computed on
    the fraction so that no addition can round first (x + 0.5 would turn
    0.49999997 into 1.0 in float32)."""
    a = np.abs(x)
    r = np.floor(a)
    r += (a - r) >= np.float32(0.5)
    return np.copysign(r, x)


def quantize_q8_0(x):
    """float32 array (size a multiple of 32) -> Q8_0 bytes as uint8 array."""
    blocks = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, 32)
    amax = np.max(np.abs(blocks), axis=1, keepdims=True)
    d = amax / np.float32(127.0)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1.0) / d, np.float32(0.0)).astype(np.float32)
    q = round_half_away(blocks * inv).astype(np.int8)
    out = np.empty((blocks.shape[0], 34), dtype=np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8)
    out[:, 2:] = q.view(np.uint8)
    return out.reshape(-1)


def quantize_q4_0(x):
    """float32 array (size a multiple of 32) -> Q4_0 bytes as uint8 array."""
    blocks = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, 32)
    idx = np.argmax(np.abs(blocks), axis=1)               # first largest magnitude
    m = blocks[np.arange(blocks.shape[0]), idx][:, None]
    d = m / np.float32(-8.0)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1.0) / d, np.float32(0.0)).astype(np.float32)
    v = blocks * inv + np.float32(8.5)
    q = np.minimum(np.trunc(v), 15).astype(np.uint8)    # v >= 0.5, so trunc == floor
    out = np.empty((blocks.shape[0], 18), dtype=np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.reshape(-1)


def encode(x, ggml_type):
    """float array -> bytes of `ggml_type` (uint8 numpy array)."""
    x = np.asarray(x, dtype=np.float32).reshape(-1)
    if ggml_type == GGML_F32:
        return x.astype("<f4").view(np.uint8)
    if ggml_type == GGML_F16:
        return x.astype("<f2").view(np.uint8)
    if ggml_type == GGML_BF16:
        # round to nearest even on the upper 16 bits (NaN not expected here)
        u = x.view(np.uint32).astype(np.uint64)
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        return u.astype("<u2").view(np.uint8)
    if ggml_type == GGML_Q8_0:
        return quantize_q8_0(x)
    if ggml_type == GGML_Q4_0:
        return quantize_q4_0(x)
    raise ValueError(f"cannot encode ggml type {ggml_type}")


def _pack_string(s):
    b = s.encode("utf-8", errors="surrogateescape") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


class GGUFWriter:
    """Collects metadata and tensor declarations, then `write()`s the file.

    add_tensor(name, shape, ggml_type, producer): `producer()` is called
    once, during write(), and returns a float array of `shape` or an
    iterable of arrays that concatenate along the outermost axis to it."""

    def __init__(self, path, alignment=32):
        self.path = path
        self.alignment = alignment
        self._kv = []          # (key, encoded bytes)
        self._keys = set()
        self._tensors = []     # (name, shape, ggml_type, producer)

    # -- metadata ---------------------------------------------------------
    def add(self, key, vtype, value, etype=None):
        """Add one entry of GGUF value type `vtype` (array: element type
        `etype`). Keys must be unique."""
        if key in self._keys:
            raise ValueError(f"duplicate key {key}")
        self._keys.add(key)
        body = struct.pack("<I", vtype) + self._encode_value(vtype, value, etype)
        self._kv.append((key, _pack_string(key) + body))

    @staticmethod
    def _encode_value(vtype, value, etype):
        if vtype in SCALAR_FORMATS:
            return struct.pack(SCALAR_FORMATS[vtype][0], value)
        if vtype == T_STRING:
            return _pack_string(value)
        if vtype == T_ARRAY:
            head = struct.pack("<IQ", etype, len(value))
            if etype == T_STRING:
                return head + b"".join(_pack_string(s) for s in value)
            if etype in SCALAR_FORMATS:
                dt = np.dtype(SCALAR_FORMATS[etype][1]).newbyteorder("<")
                return head + np.asarray(value).astype(dt).tobytes()
            raise ValueError(f"unsupported array element type {etype}")
        raise ValueError(f"unsupported value type {vtype}")

    def add_uint32(self, key, v):
        self.add(key, T_UINT32, int(v))

    def add_uint64(self, key, v):
        self.add(key, T_UINT64, int(v))

    def add_int32(self, key, v):
        self.add(key, T_INT32, int(v))

    def add_float32(self, key, v):
        self.add(key, T_FLOAT32, float(v))

    def add_bool(self, key, v):
        self.add(key, T_BOOL, bool(v))

    def add_string(self, key, v):
        self.add(key, T_STRING, v)

    def add_array(self, key, etype, values):
        self.add(key, T_ARRAY, values, etype)

    def copy_kv(self, src, key):
        """Copy entry `key` from a gguf_read.GGUFFile keeping its types."""
        vtype, etype = src.kv_types[key]
        self.add(key, vtype, src.kv[key], etype)

    # -- tensors ----------------------------------------------------------
    def add_tensor(self, name, shape, ggml_type, producer):
        blk = GGML_TYPES[ggml_type][1]
        if shape[-1] % blk:
            raise ValueError(f"tensor {name}: row length {shape[-1]} is not a "
                             f"multiple of the block size {blk}")
        self._tensors.append((name, tuple(int(s) for s in shape), ggml_type, producer))

    @staticmethod
    def _n_bytes(shape, ggml_type):
        _, blk, size = GGML_TYPES[ggml_type]
        n = 1
        for s in shape:
            n *= s
        return n // blk * size

    def _pad(self, n):
        return (-n) % self.alignment

    def write(self):
        """Write the file; returns the total size in bytes."""
        header = [b"GGUF", struct.pack("<IQQ", 3, len(self._tensors), len(self._kv))]
        header += [blob for _, blob in self._kv]
        offset = 0
        for name, shape, ggml_type, _ in self._tensors:
            ne = list(reversed(shape))
            header.append(_pack_string(name) + struct.pack("<I", len(ne))
                          + struct.pack(f"<{len(ne)}Q", *ne)
                          + struct.pack("<IQ", ggml_type, offset))
            n = self._n_bytes(shape, ggml_type)
            offset += n + self._pad(n)
        head = b"".join(header)
        with open(self.path, "wb") as f:
            f.write(head)
            f.write(b"\0" * self._pad(len(head)))
            for name, shape, ggml_type, producer in self._tensors:
                written = self._write_tensor(f, name, shape, ggml_type, producer)
                f.write(b"\0" * self._pad(written))
            return f.tell()

    def _write_tensor(self, f, name, shape, ggml_type, producer):
        data = producer()
        chunks = [data] if isinstance(data, np.ndarray) else data
        written = 0
        for chunk in chunks:
            chunk = np.asarray(chunk, dtype=np.float32)
            enc = encode(chunk, ggml_type)
            f.write(enc.tobytes())
            written += enc.size
        want = self._n_bytes(shape, ggml_type)
        if written != want:
            raise ValueError(f"tensor {name}: producer gave {written} bytes, "
                             f"shape {shape} needs {want}")
        return written

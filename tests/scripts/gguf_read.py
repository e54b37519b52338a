#!/usr/bin/python3
"""A minimal GGUF (version 2/3) reader for MoeDesk's test scripts.

It exists so the Python side of the tests (the model generator, which copies
the tokenizer out of a real vocabulary GGUF, and the reference forward pass)
never depends on the C engine it is meant to check, nor on llama.cpp's
gguf-py. Written from the public GGUF format description: a little-endian
header, typed key/value pairs, tensor descriptors, then an aligned data
section. Tensor data is memory-mapped; `tensor()` returns float32 numpy
arrays (dequantising F16, BF16, Q8_0 and Q4_0), so memory use is bounded by
what the caller asks for.

Shapes: GGUF lists dimensions innermost first (`ne[0]` is contiguous); this
reader reports numpy shapes, i.e. reversed: ne = [cols, rows] -> (rows, cols).

Usage as a script: `gguf_read.py FILE` prints the metadata and tensor table.
"""
import mmap
import struct
import sys

import numpy as np

GGUF_MAGIC = b"GGUF"

# Value types of metadata entries (GGUF spec).
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, \
    T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(13)

# struct format and numpy dtype of each fixed-size value type.
SCALAR_FORMATS = {
    T_UINT8: ("<B", np.uint8), T_INT8: ("<b", np.int8),
    T_UINT16: ("<H", np.uint16), T_INT16: ("<h", np.int16),
    T_UINT32: ("<I", np.uint32), T_INT32: ("<i", np.int32),
    T_FLOAT32: ("<f", np.float32), T_BOOL: ("<?", np.bool_),
    T_UINT64: ("<Q", np.uint64), T_INT64: ("<q", np.int64),
    T_FLOAT64: ("<d", np.float64),
}

# Tensor element types (ggml numbering) this reader can turn into floats:
# name -> (type id, elements per block, bytes per block).
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0, GGML_BF16 = 0, 1, 2, 8, 30
GGML_TYPES = {
    GGML_F32: ("F32", 1, 4),
    GGML_F16: ("F16", 1, 2),
    GGML_Q4_0: ("Q4_0", 32, 18),
    GGML_Q8_0: ("Q8_0", 32, 34),
    GGML_BF16: ("BF16", 1, 2),
}


class GGUFError(Exception):
    """Raised for a malformed or unsupported file; the message names the spot."""


class TensorInfo:
    """One tensor descriptor: name, ggml type, ne (innermost first), offset
    relative to the data section."""

    def __init__(self, name, ne, ggml_type, offset):
        self.name = name
        self.ne = list(ne)
        self.ggml_type = ggml_type
        self.offset = offset

    @property
    def shape(self):
        """numpy shape (outermost first)."""
        return tuple(reversed(self.ne))

    @property
    def n_elements(self):
        n = 1
        for d in self.ne:
            n *= d
        return n

    @property
    def n_bytes(self):
        if self.ggml_type not in GGML_TYPES:
            raise GGUFError(f"tensor {self.name}: unsupported ggml type {self.ggml_type}")
        _, blk, size = GGML_TYPES[self.ggml_type]
        return self.n_elements // blk * size

    @property
    def type_name(self):
        return GGML_TYPES.get(self.ggml_type, (f"type{self.ggml_type}",))[0]


class GGUFFile:
    """A parsed GGUF file. `kv` maps key -> Python value (arrays of numbers
    as numpy arrays, arrays of strings as lists of str); `kv_types` maps key
    -> (value type, element type or None) so a writer can copy entries
    exactly. `tensors` keeps file order."""

    def __init__(self, path, string_arrays=True):
        """string_arrays=False skips decoding arrays of strings (the
        tokenizer's tokens and merges); their value is then None. Readers
        that only need tensors open files faster that way."""
        self.path = path
        self._string_arrays = string_arrays
        with open(path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._pos = 0
        self.kv = {}
        self.kv_types = {}
        self.tensors = {}
        self._parse()

    # -- low-level readers; each checks bounds so a truncated file fails
    #    with the offset instead of a struct error.
    def _take(self, n):
        end = self._pos + n
        if end > len(self._map):
            raise GGUFError(f"{self.path}: truncated at byte {self._pos} (need {n} more)")
        b = self._map[self._pos:end]
        self._pos = end
        return b

    def _scalar(self, fmt):
        return struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0]

    def _string(self):
        n = self._scalar("<Q")
        return self._take(n).decode("utf-8", errors="surrogateescape")

    def _string_array(self, n, key):
        # The hot loop of a tokenizer-carrying file (150k+ strings): unpack
        # straight from the map instead of going through _take().
        buf, pos, size = self._map, self._pos, len(self._map)
        unpack = struct.Struct("<Q").unpack_from
        out = [] if self._string_arrays else None
        done = 0
        while done < n and pos + 8 <= size:
            length = unpack(buf, pos)[0]
            if pos + 8 + length > size:
                break
            if out is not None:
                out.append(buf[pos + 8:pos + 8 + length].decode("utf-8", errors="surrogateescape"))
            pos += 8 + length
            done += 1
        if done != n:
            raise GGUFError(f"{self.path}: key {key}: string array truncated at byte {pos} "
                            f"(element {done} of {n})")
        self._pos = pos
        return out

    def _value(self, vtype, key):
        if vtype in SCALAR_FORMATS:
            return self._scalar(SCALAR_FORMATS[vtype][0])
        if vtype == T_STRING:
            return self._string()
        if vtype == T_ARRAY:
            etype = self._scalar("<I")
            n = self._scalar("<Q")
            if etype in SCALAR_FORMATS:
                dt = np.dtype(SCALAR_FORMATS[etype][1]).newbyteorder("<")
                raw = self._take(n * dt.itemsize)
                return np.frombuffer(raw, dtype=dt).copy()
            if etype == T_STRING:
                return self._string_array(n, key)
            raise GGUFError(f"{self.path}: key {key}: unsupported array element type {etype}")
        raise GGUFError(f"{self.path}: key {key}: unknown value type {vtype} at byte {self._pos}")

    def _parse(self):
        if self._take(4) != GGUF_MAGIC:
            raise GGUFError(f"{self.path}: not a GGUF file (bad magic)")
        self.version = self._scalar("<I")
        if self.version not in (2, 3):
            raise GGUFError(f"{self.path}: unsupported GGUF version {self.version}")
        n_tensors = self._scalar("<Q")
        n_kv = self._scalar("<Q")
        for _ in range(n_kv):
            key = self._string()
            vtype = self._scalar("<I")
            etype = None
            if vtype == T_ARRAY:
                # peek the element type so copies keep it
                etype = struct.unpack("<I", self._map[self._pos:self._pos + 4])[0]
            self.kv[key] = self._value(vtype, key)
            self.kv_types[key] = (vtype, etype)
        for _ in range(n_tensors):
            name = self._string()
            n_dims = self._scalar("<I")
            ne = [self._scalar("<Q") for _ in range(n_dims)]
            ggml_type = self._scalar("<I")
            offset = self._scalar("<Q")
            self.tensors[name] = TensorInfo(name, ne, ggml_type, offset)
        self.alignment = int(self.kv.get("general.alignment", 32))
        pad = (-self._pos) % self.alignment
        self.data_offset = self._pos + pad
        for ti in self.tensors.values():
            if ti.ggml_type not in GGML_TYPES:
                continue
            end = self.data_offset + ti.offset + ti.n_bytes
            if end > len(self._map):
                raise GGUFError(f"{self.path}: tensor {ti.name} data ends at byte {end}, "
                                f"past the end of the file ({len(self._map)})")

    @property
    def arch(self):
        return self.kv.get("general.architecture")

    def get(self, key, default=None):
        """Value of `key`; '{arch}' in the key is replaced by the architecture."""
        return self.kv.get(key.replace("{arch}", str(self.arch)), default)

    def raw(self, name):
        """The tensor's bytes as a read-only uint8 numpy view of the map."""
        ti = self.tensors[name]
        start = self.data_offset + ti.offset
        return np.frombuffer(self._map, dtype=np.uint8, count=ti.n_bytes, offset=start)

    def tensor(self, name, rows=None):
        """The tensor as float32 with its numpy shape. With `rows` (a slice or
        index array over the outermost dimension) only those rows are
        decoded: used for embedding look-ups and per-expert slices."""
        if name not in self.tensors:
            raise GGUFError(f"{self.path}: no tensor named {name}")
        ti = self.tensors[name]
        shape = ti.shape
        row_elems = ti.n_elements // shape[0] if shape else 1
        _, blk, bsize = GGML_TYPES[ti.ggml_type]
        row_bytes = row_elems // blk * bsize
        raw = self.raw(name).reshape(shape[0], row_bytes)
        if rows is not None:
            raw = raw[rows]
        out = dequantize(raw.reshape(-1), ti.ggml_type)
        lead = raw.shape[:-1]
        return out.reshape(tuple(lead) + tuple(shape[1:]))

    def close(self):
        self._map.close()


def dequantize(raw, ggml_type):
    """Decode a flat uint8 array of `ggml_type` data into flat float32."""
    if ggml_type == GGML_F32:
        return raw.view("<f4").astype(np.float32)
    if ggml_type == GGML_F16:
        return raw.view("<f2").astype(np.float32)
    if ggml_type == GGML_BF16:
        return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
    if ggml_type == GGML_Q8_0:
        blocks = raw.reshape(-1, 34)
        d = blocks[:, :2].copy().view("<f2").astype(np.float32)      # (nb, 1)
        q = blocks[:, 2:].view(np.int8).astype(np.float32)            # (nb, 32)
        return (q * d).reshape(-1)
    if ggml_type == GGML_Q4_0:
        blocks = raw.reshape(-1, 18)
        d = blocks[:, :2].copy().view("<f2").astype(np.float32)
        qs = blocks[:, 2:]
        lo = (qs & 0x0F).astype(np.int8) - 8     # elements 0..15
        hi = (qs >> 4).astype(np.int8) - 8       # elements 16..31
        q = np.concatenate([lo, hi], axis=1).astype(np.float32)
        return (q * d).reshape(-1)
    raise GGUFError(f"cannot dequantize ggml type {ggml_type}")


def _summary(value):
    if isinstance(value, list):
        head = ", ".join(repr(v) for v in value[:4])
        return f"[{len(value)} strings: {head}, ...]"
    if isinstance(value, np.ndarray):
        return f"[{value.size} x {value.dtype}: {value[:4].tolist()} ...]"
    return repr(value)


def main(argv):
    if len(argv) != 2:
        print("usage: gguf_read.py FILE", file=sys.stderr)
        return 2
    g = GGUFFile(argv[1])
    print(f"GGUF v{g.version}, {len(g.kv)} keys, {len(g.tensors)} tensors, "
          f"data at {g.data_offset}")
    for k, v in g.kv.items():
        print(f"  {k} = {_summary(v)}")
    for ti in g.tensors.values():
        print(f"  {ti.name:32s} {ti.type_name:5s} ne={ti.ne} offset={ti.offset}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

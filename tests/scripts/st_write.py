"""st_write.py — writes small .safetensors files for tests, with only the
standard library (struct + json): an 8-byte little-endian header length,
the JSON header padded with spaces to a multiple of 8, then the tensor data
in header order. Used by the hub/verify tests and to make the fuzz seeds
(run as a script: `st_write.py DIR` writes the seed files)."""
import json
import os
import struct
import sys

DTYPE_SIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2,
              "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4,
              "F64": 8, "I64": 8, "U64": 8}


def encode(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, data bytes or None for a fill).
    Returns the file's bytes."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    blobs = []
    offset = 0
    for name, dtype, shape, data in tensors:
        n = DTYPE_SIZE[dtype]
        for d in shape:
            n *= d
        if data is None:
            data = bytes((offset + i) % 251 for i in range(n))
        assert len(data) == n, name
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + n]}
        blobs.append(data)
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write(path, tensors, metadata=None):
    with open(path, "wb") as f:
        f.write(encode(tensors, metadata))


def write_sharded(folder, prefix, shards, metadata=None):
    """shards: list of tensor lists. Writes PREFIX-0000K-of-0000N.safetensors
    and PREFIX.safetensors.index.json; returns the file names."""
    names = []
    weight_map = {}
    total = 0
    for k, tensors in enumerate(shards, 1):
        name = "%s-%05d-of-%05d.safetensors" % (prefix, k, len(shards))
        write(os.path.join(folder, name), tensors, metadata)
        names.append(name)
        for t in tensors:
            weight_map[t[0]] = name
            n = DTYPE_SIZE[t[1]]
            for d in t[2]:
                n *= d
            total += n
    index = prefix + ".safetensors.index.json"
    with open(os.path.join(folder, index), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    return names + [index]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "small.safetensors"),
          [("model.embed.weight", "F16", (4, 3), None), ("model.norm", "F32", (3,), None),
           ("scalar", "I64", (), None), ("empty", "BF16", (0, 2), None)],
          {"format": "pt", "note": "caf\u00e9"})
    write(os.path.join(out, "empty.safetensors"), [])
    write(os.path.join(out, "u8.safetensors"), [("x", "U8", (2, 2, 2), None)])


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""check-gguf-py.py — gguf-py (llama.cpp's Python GGUF reader) reads files
that libmoe writes.

Copies SOURCE through libmoe (tests/tools/gguf-copy, with general.alignment
64), then reads both files with gguf-py's GGUFReader from the llama.cpp
source that node-llama-cpp ships, and checks: every key/value of SOURCE is
in the copy with the same type and value; the extra keys of every type that
gguf-copy adds have their known values; the tensors have the expected
names, shapes, types, 64-aligned offsets and exact bytes.
  usage: check-gguf-py.py GGUF_COPY_EXE LLAMA_SRC_DIR SOURCE.gguf OUT_DIR
"""
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print('FAIL: ' + what, file=sys.stderr)


def fields(reader):
    """name -> (value types, contents), without the header pseudo-fields."""
    return {name: (list(f.types), f.contents()) for name, f in reader.fields.items()
            if not name.startswith('GGUF.')}


EXPECTED_EXTRAS = {
    'general.alignment': 64,
    'moedesk.test.u8': 250, 'moedesk.test.i8': -7, 'moedesk.test.u16': 65000,
    'moedesk.test.i16': -32000, 'moedesk.test.u32': 4000000000, 'moedesk.test.i32': -2000000000,
    'moedesk.test.f32': 0.25, 'moedesk.test.bool': True, 'moedesk.test.str': 'h\u00e9llo',
    'moedesk.test.u64': 18000000000000000000, 'moedesk.test.i64': -9000000000000000000,
    'moedesk.test.f64': -1.5e-300,
    'moedesk.test.arr_u8': [0, 1, 255], 'moedesk.test.arr_i8': [-128, 127],
    'moedesk.test.arr_u16': [1, 65535], 'moedesk.test.arr_i16': [-32768, 32767],
    'moedesk.test.arr_u32': [0, 4294967295], 'moedesk.test.arr_i32': [-5, 5],
    'moedesk.test.arr_f32': [1.5, -2.25], 'moedesk.test.arr_bool': [True, False, True],
    'moedesk.test.arr_u64': [0, 18446744073709551615], 'moedesk.test.arr_i64': [-1, 1],
    'moedesk.test.arr_f64': [3.5, -0.125], 'moedesk.test.arr_str': ['a', '', '\u4e2d'],
}


def expected_tensors():
    f32 = b''.join(struct.pack('<f', i * 0.5 - 3.0) for i in range(24))
    q8 = bytes((j * 7 + 3) % 256 for j in range(2 * 2 * 34))
    # name -> (shape ne[0] first, ggml type number, bytes)
    return {'interop.f32': ([8, 3], 0, f32), 'interop.q8_0': ([64, 2], 8, q8)}


def check_kvs(src, out):
    for name, (types, value) in src.items():
        check(name in out, 'key %s missing from the copy' % name)
        if name in out:
            check(out[name][0] == types, 'key %s: types %s vs %s' % (name, out[name][0], types))
            check(out[name][1] == value, 'key %s: value differs' % name)
    for name, value in EXPECTED_EXTRAS.items():
        got = out.get(name, (None, None))[1]
        check(got == value, 'key %s: %r, want %r' % (name, got, value))
    extra = set(out) - set(src) - set(EXPECTED_EXTRAS)
    check(not extra, 'unexpected keys %s' % sorted(extra))


def check_tensors(reader):
    want = expected_tensors()
    got = {t.name: t for t in reader.tensors}
    check(set(got) == set(want), 'tensors %s' % sorted(got))
    for name, (shape, ttype, data) in want.items():
        t = got.get(name)
        if t is None:
            continue
        check([int(x) for x in t.shape] == shape, '%s shape %s' % (name, list(t.shape)))
        check(int(t.tensor_type) == ttype, '%s type %s' % (name, t.tensor_type))
        check(t.data_offset % 64 == 0, '%s data offset %d not 64-aligned' % (name, t.data_offset))
        check(t.data.tobytes() == data, '%s bytes differ' % name)


def main(argv):
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    copy_exe, llama_src, source, out_dir = argv[1:]
    subprocess.run(['bash', os.path.join(HERE, 'llama-cpp-src.sh'), llama_src], check=True)
    sys.path.insert(0, os.path.join(llama_src, 'gguf-py'))
    from gguf import GGUFReader

    os.makedirs(out_dir, exist_ok=True)
    copy = os.path.join(out_dir, 'gguf-py-' + os.path.basename(source))
    subprocess.run([copy_exe, '--alignment', '64', source, copy], check=True)
    try:
        out_reader = GGUFReader(copy)
        check_kvs(fields(GGUFReader(source)), fields(out_reader))
        check_tensors(out_reader)
    finally:
        os.remove(copy)
    print('%d failures' % len(failures))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))

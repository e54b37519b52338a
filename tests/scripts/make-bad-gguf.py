#!/usr/bin/python3
"""make-bad-gguf.py — writes the hand-made GGUF fixtures of tests/data/.

bad-gguf/: small files that are each broken in one way (truncations, lying
counts and lengths, bad shapes, types, alignments and offsets, duplicates,
split sets with a missing part...). bad-gguf/EXPECTED lists, per file, the
status moe_gguf_open must return and a substring its message must contain;
test-gguf-bad checks both. good-gguf/: a few small valid files (every value
type, several tensor types, a non-default alignment) that must open; they
also seed the fuzzer.

Built with struct only, from the GGUF layout (little-endian):
  "GGUF" u32 version, u64 n_tensors, u64 n_kv, key/values, tensor infos,
  padding to the alignment, data.
Rerun after changing a case and commit the outputs:
  /usr/bin/python3 tests/scripts/make-bad-gguf.py
"""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
T_F32, T_F16, T_Q4_0, T_Q8_0, T_BF16 = 0, 1, 2, 8, 30


def gstr(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack('<Q', len(b)) + b


def kv(key, vtype, payload):
    return gstr(key) + struct.pack('<I', vtype) + payload


def kv_u32(key, v):
    return kv(key, U32, struct.pack('<I', v))


def kv_str(key, v):
    return kv(key, STR, gstr(v))


def kv_arr(key, etype, fmt, values):
    body = b''.join(struct.pack('<' + fmt, v) for v in values)
    return kv(key, ARR, struct.pack('<IQ', etype, len(values)) + body)


def tinfo(name, dims, ttype=T_F32, offset=0):
    out = gstr(name) + struct.pack('<I', len(dims))
    out += b''.join(struct.pack('<q', d) for d in dims)
    return out + struct.pack('<IQ', ttype, offset)


def gguf(kvs=(), tensors=(), data=b'', alignment=32, version=3, magic=b'GGUF',
         n_kv=None, n_tensors=None, pad=True):
    """A file image; counts default to the lists' lengths. pad=False stops
    right after the tensor infos (to cut into them)."""
    n_kv = len(kvs) if n_kv is None else n_kv
    n_tensors = len(tensors) if n_tensors is None else n_tensors
    head = magic + struct.pack('<IQQ', version, n_tensors, n_kv)
    body = head + b''.join(kvs) + b''.join(tensors)
    if not pad:
        return body
    return body + b'\0' * (-len(body) % alignment) + data


ARCH = kv_str('general.architecture', 'test')
DATA32 = bytes(range(32))          # one f32 tensor of 8 elements
GOOD = gguf([ARCH], [tinfo('w', [8])], DATA32)


def bad_cases():
    """(file name, expected status, expected message substring, bytes)."""
    c = []

    def add(name, status, substr, image):
        c.append((name, status, substr, image))

    add('empty.gguf', 'FORMAT', 'truncated header', b'')
    add('truncated-header.gguf', 'FORMAT', 'truncated header', b'GGUF\x03\x00\x00')
    add('truncated-in-kv.gguf', 'FORMAT', 'truncated',
        gguf([ARCH, kv_u32('x.count', 7)], pad=False)[:-2])
    add('truncated-tensor-info.gguf', 'FORMAT', 'truncated tensor data offset',
        gguf([ARCH], [tinfo('w' * 40, [8]), tinfo('v' * 40, [8], offset=32)], pad=False)[:-6])
    add('truncated-tensor-data.gguf', 'FORMAT', 'runs past end of file', GOOD[:-5])
    add('bad-magic.gguf', 'FORMAT', 'bad magic', b'GGML' + GOOD[4:])
    add('version-1.gguf', 'UNSUPPORTED', 'unsupported GGUF version 1 (',
        gguf([ARCH], [tinfo('w', [8])], DATA32, version=1))
    add('version-99.gguf', 'UNSUPPORTED', 'unsupported GGUF version 99',
        gguf([ARCH], [tinfo('w', [8])], DATA32, version=99))
    add('big-endian.gguf', 'UNSUPPORTED', 'big-endian', b'GGUF\x00\x00\x00\x03' + GOOD[8:])
    add('kv-count-huge.gguf', 'FORMAT', 'key/value count',
        gguf([ARCH], [tinfo('w', [8])], DATA32, n_kv=1 << 62))
    add('tensor-count-huge.gguf', 'FORMAT', 'tensor count',
        gguf([ARCH], [tinfo('w', [8])], DATA32, n_tensors=1 << 40))
    add('tensor-count-lying.gguf', 'FORMAT', 'tensor count 2 is more than',
        gguf([ARCH], [tinfo('w', [8])], n_tensors=2))
    add('string-past-eof.gguf', 'FORMAT', 'string value length 1000 runs past end of file',
        gguf([kv('general.name', STR, struct.pack('<Q', 1000) + b'abc')]))
    add('key-past-eof.gguf', 'FORMAT', 'key length',
        b'GGUF' + struct.pack('<IQQ', 3, 0, 1) + struct.pack('<Q', 1 << 63) + b'k' * 16)
    add('array-length-huge.gguf', 'FORMAT', 'array length',
        gguf([kv('x.arr', ARR, struct.pack('<IQ', U32, 1 << 61) + b'\0' * 16)]))
    add('string-array-length-huge.gguf', 'FORMAT', 'array length',
        gguf([kv('x.strs', ARR, struct.pack('<IQ', STR, 1 << 40) + gstr('a'))]))
    add('string-array-elem-past-eof.gguf', 'FORMAT', 'string array element length',
        gguf([kv('x.strs', ARR, struct.pack('<IQ', STR, 2) + gstr('a') +
                 struct.pack('<Q', 99) + b'b')]))
    add('nested-array.gguf', 'UNSUPPORTED', 'arrays of arrays',
        gguf([kv('x.nest', ARR, struct.pack('<IQ', ARR, 1) + struct.pack('<IQ', U8, 1) + b'\1')]))
    add('unknown-kv-type.gguf', 'FORMAT', 'unknown value type 13',
        gguf([ARCH, kv('x.odd', 13, b'\0' * 8)]))
    add('unknown-array-type.gguf', 'FORMAT', 'unknown array element type 77',
        gguf([kv('x.arr', ARR, struct.pack('<IQ', 77, 1) + b'\0' * 8)]))
    add('bool-value-2.gguf', 'FORMAT', 'bool value 2',
        gguf([ARCH, kv('x.flag', BOOL, b'\2')]))
    add('empty-key.gguf', 'FORMAT', 'empty key', gguf([kv('', U8, b'\1')]))
    add('key-with-nul.gguf', 'FORMAT', 'NUL byte', gguf([kv('a\0b', U8, b'\1')]))
    add('duplicate-key.gguf', 'FORMAT', "duplicate key (key 'general.architecture')",
        gguf([ARCH, kv_u32('x.n', 1), ARCH]))
    add('n-dims-0.gguf', 'FORMAT', 'n_dims 0', gguf([ARCH], [tinfo('w', [])], DATA32))
    add('n-dims-5.gguf', 'FORMAT', 'n_dims 5',
        gguf([ARCH], [tinfo('w', [8, 1, 1, 1, 1])], DATA32))
    add('dim-zero.gguf', 'FORMAT', 'dimension 1 is 0', gguf([ARCH], [tinfo('w', [8, 0])], DATA32))
    add('dim-negative.gguf', 'FORMAT', 'dimension 0 is -5',
        gguf([ARCH], [tinfo('w', [-5])], DATA32))
    add('dim-overflow.gguf', 'FORMAT', 'element count overflows',
        gguf([ARCH], [tinfo('w', [1 << 32, 1 << 32])], DATA32))
    add('size-overflow.gguf', 'FORMAT', 'size in bytes overflows',
        gguf([ARCH], [tinfo('w', [1 << 31, 1 << 31])], DATA32))
    add('unknown-tensor-type.gguf', 'UNSUPPORTED', 'unknown tensor type 1000',
        gguf([ARCH], [tinfo('w', [8], ttype=1000)], DATA32))
    # 4 was ggml's Q4_2, removed long ago: not a type any file may hold.
    add('unsupported-ggml-type.gguf', 'UNSUPPORTED', 'unknown tensor type 4',
        gguf([ARCH], [tinfo('w', [32], ttype=4)], b'\0' * 32))
    add('row-not-block-multiple.gguf', 'FORMAT', 'not a multiple of the q8_0 block size 32',
        gguf([ARCH], [tinfo('w', [33], ttype=T_Q8_0)], b'\0' * 64))
    add('empty-tensor-name.gguf', 'FORMAT', 'empty tensor name',
        gguf([ARCH], [tinfo('', [8])], DATA32))
    add('alignment-0.gguf', 'FORMAT', 'general.alignment 0 is not a power of two',
        gguf([kv_u32('general.alignment', 0)], [tinfo('w', [8])], DATA32))
    add('alignment-3.gguf', 'FORMAT', 'general.alignment 3 is not a power of two',
        gguf([kv_u32('general.alignment', 3)], [tinfo('w', [8])], DATA32, alignment=3))
    add('alignment-wrong-type.gguf', 'FORMAT', 'must be uint32',
        gguf([kv('general.alignment', U64, struct.pack('<Q', 64))], [tinfo('w', [8])], DATA32))
    add('tensor-offset-unaligned.gguf', 'FORMAT', 'not aligned to 32',
        gguf([ARCH], [tinfo('w', [8], offset=4)], b'\0' * 4 + DATA32))
    add('tensor-extent-past-eof.gguf', 'FORMAT', 'runs past end of file',
        gguf([ARCH], [tinfo('w', [8]), tinfo('v', [8], offset=1 << 20)], DATA32 * 2))
    add('tensor-offset-overflow.gguf', 'FORMAT', 'runs past end of file',
        gguf([ARCH], [tinfo('w', [8], offset=(1 << 64) - 32)], DATA32))
    add('duplicate-tensor.gguf', 'FORMAT', "duplicate tensor (tensor 'w')",
        gguf([ARCH], [tinfo('w', [8]), tinfo('w', [8], offset=32)], DATA32 * 2))
    add('split-no-missing.gguf', 'FORMAT', 'split.no is missing',
        gguf([ARCH, kv('split.count', U16, struct.pack('<H', 3))]))
    add('split-no-too-big.gguf', 'FORMAT', 'split.no must be',
        gguf([ARCH, kv('split.count', U16, struct.pack('<H', 2)),
              kv('split.no', U16, struct.pack('<H', 2))]))
    add('split-bad-name.gguf', 'FORMAT', "does not end in '-00001-of-00002.gguf'",
        gguf([ARCH, kv('split.count', U16, struct.pack('<H', 2)),
              kv('split.no', U16, struct.pack('<H', 0))]))
    add('lonely-00001-of-00002.gguf', 'IO', 'missing part 2 of 2',
        gguf([ARCH, kv('split.count', U16, struct.pack('<H', 2)),
              kv('split.no', U16, struct.pack('<H', 0))]))
    return c


def good_cases():
    """Small valid files: every value type, several tensor types."""
    kvs = [
        kv_u32('general.alignment', 64), ARCH,
        kv('v.u8', U8, b'\xff'), kv('v.i8', I8, b'\x80'),
        kv('v.u16', U16, struct.pack('<H', 65535)), kv('v.i16', I16, struct.pack('<h', -2)),
        kv('v.i32', I32, struct.pack('<i', -7)), kv('v.f32', F32, struct.pack('<f', 0.5)),
        kv('v.bool', BOOL, b'\1'), kv('v.u64', U64, struct.pack('<Q', 1 << 40)),
        kv('v.i64', I64, struct.pack('<q', -(1 << 40))), kv('v.f64', F64, struct.pack('<d', 2.5)),
        kv_str('v.empty', ''),
        kv_arr('v.arr_f32', F32, 'f', [1.0, 2.0, 3.0]),
        kv_arr('v.arr_bool', BOOL, 'B', [0, 1]),
        kv('v.strs', ARR, struct.pack('<IQ', STR, 3) + gstr('a') + gstr('') + gstr('ccc')),
        kv('v.no_strs', ARR, struct.pack('<IQ', STR, 0)),
    ]
    tensors = [tinfo('w.f32', [8, 2]), tinfo('w.f16', [4], T_F16, 64),
               tinfo('w.q8_0', [32], T_Q8_0, 128), tinfo('w.q4_0', [32, 2], T_Q4_0, 192)]
    data = (bytes(range(64)) + bytes(range(8)) + b'\0' * 56 + bytes(range(34)) + b'\0' * 30 +
            bytes(range(36)))
    return [('all-types.gguf', gguf(kvs, tensors, data, alignment=64)),
            ('one-tensor.gguf', GOOD),
            ('no-tensors.gguf', gguf([ARCH, kv_u32('x.n', 3)])),
            ('empty-header.gguf', gguf([]))]


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'data')
    bad_dir, good_dir = os.path.join(root, 'bad-gguf'), os.path.join(root, 'good-gguf')
    os.makedirs(bad_dir, exist_ok=True)
    os.makedirs(good_dir, exist_ok=True)
    lines = ['# file<TAB>status<TAB>substring of the message; written by make-bad-gguf.py']
    for name, status, substr, image in bad_cases():
        with open(os.path.join(bad_dir, name), 'wb') as f:
            f.write(image)
        lines.append('%s\t%s\t%s' % (name, status, substr))
    with open(os.path.join(bad_dir, 'EXPECTED'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    for name, image in good_cases():
        with open(os.path.join(good_dir, name), 'wb') as f:
            f.write(image)
    return 0


if __name__ == '__main__':
    sys.exit(main())

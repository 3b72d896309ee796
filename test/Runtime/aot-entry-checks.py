# An AOT entry point checks the buffers it is given before it launches
# anything, and reports the first problem through fffGetLastError(); it used
# to accept all of these silently. Without a CUDA driver a good call gets as
# far as the launch (and reports the kernel unavailable), so a check's own
# message proves that the call stopped before launching.
#
# REQUIRES: numpy
# RUN: rm -rf %t && mkdir -p %t
# RUN: %fff_src_root/scripts/fff-aot.sh %S/Inputs/rms_norm_dynamic.mlir %t/norm.so chip=sm_90
# RUN: env FFF_CUDA_DRIVER=%t/no-such-driver.so %python %s %t/norm.so | FileCheck %s

import ctypes
import sys

import numpy as np

lib = ctypes.CDLL(sys.argv[1])
lib.fffGetLastError.restype = ctypes.c_char_p
assert b"cannot load the CUDA driver" in lib.fffGetLastError()

HIDDEN = 768


def aligned(shape, offset_bytes=0):
    """A zeroed uint16 array whose data starts `offset_bytes` past a 64-byte
    boundary."""
    count = int(np.prod(shape))
    raw = np.zeros(count * 2 + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset_bytes
    return raw[start:start + count * 2].view(np.uint16).reshape(shape)


def memref(array, sizes=None, strides=None, offset=0, pointer=None):
    """MLIR's expanded memref ABI: allocated and aligned pointers, offset,
    sizes, strides (in elements)."""
    address = array.ctypes.data if pointer is None else pointer
    sizes = list(array.shape) if sizes is None else sizes
    strides = [s // array.itemsize for s in array.strides] if strides is None else strides
    return [ctypes.c_void_p(address)] * 2 + [ctypes.c_int64(v) for v in [offset, *sizes, *strides]]


def call(name, x, g, y):
    lib.rms_norm(*x, *g, *y)
    error = lib.fffGetLastError()
    print(f"{name}: {error.decode() if error else '(no error)'}")


rows = 4
x, g, y = aligned((rows, HIDDEN)), aligned((HIDDEN,)), aligned((rows, HIDDEN))

# CHECK: good: kernel rms_norm_bf16_768_warp_per_row is unavailable: its module did not load
call("good", memref(x), memref(g), memref(y))

# CHECK: short gamma: {{.*}}'fff.rms_norm' op scale dim 0 (D) is not 768, which input dim 1 requires
call("short gamma", memref(x), memref(g, sizes=[3]), memref(y))
# CHECK: fewer output rows: @rms_norm: the buffer for result #0 has the wrong size in dim 0
call("fewer output rows", memref(x), memref(g), memref(y, sizes=[rows - 1, HIDDEN]))
# CHECK: wrong static dim: @rms_norm: argument #0 (memref<?x768xbf16>) has dim 1 of size other than 768
call("wrong static dim", memref(x, sizes=[rows * 2, HIDDEN // 2], strides=[HIDDEN // 2, 1]), memref(g), memref(y))
# CHECK: negative rows: @rms_norm: argument #0 (memref<?x768xbf16>) has a negative size in dim 0
call("negative rows", memref(x, sizes=[-1, HIDDEN]), memref(g), memref(y))
# CHECK: strided rows: @rms_norm: argument #0 (memref<?x768xbf16>) is not contiguous in row-major order
call("strided rows", memref(x, sizes=[rows // 2, HIDDEN], strides=[2 * HIDDEN, 1]), memref(g), memref(y, sizes=[rows // 2, HIDDEN]))
# CHECK: transposed: @rms_norm: argument #2 (memref<?x768xbf16>) is not contiguous in row-major order
call("transposed", memref(x), memref(g), memref(y, strides=[1, rows]))
# CHECK: offset view: @rms_norm: argument #1 (memref<?xbf16>) has a nonzero offset; pass the address of its first element
call("offset view", memref(x), memref(g, offset=8), memref(y))
# CHECK: misaligned: @rms_norm: argument #0 (memref<?x768xbf16>) is not 16-byte aligned
call("misaligned", memref(aligned((rows, HIDDEN), offset_bytes=2)), memref(g), memref(y))
# CHECK: null: @rms_norm: argument #2 (memref<?x768xbf16>) is a null pointer but not empty
call("null", memref(x), memref(g), memref(y, pointer=0))

# Views whose strides do not matter: a single row, and an empty batch.
# CHECK: one row, any stride: kernel rms_norm_bf16_768_warp_per_row is unavailable
call("one row, any stride", memref(x[:1], strides=[12345, 1]), memref(g), memref(y[:1], strides=[7, 1]))
# CHECK: empty batch: (no error)
call("empty batch", memref(x, sizes=[0, HIDDEN]), memref(g), memref(y, sizes=[0, HIDDEN], pointer=0))

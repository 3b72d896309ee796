# scripts/fff-aot.sh --target cpu: a module as a shared library of native
# code for this CPU, whose functions take host buffers in the memref C ABI
# with the results as trailing out-parameters, as the GPU libraries do. It
# exports its entry points and fffGetLastError only; its results match a
# float64 numpy reference, are the same bits with one thread as with all,
# and a buffer that contradicts the signature is reported, not computed on.
#
# REQUIRES: numpy
# RUN: rm -rf %t && mkdir -p %t
# RUN: %fff_src_root/scripts/fff-aot.sh --target cpu %S/Inputs/pre_ln_tree_block.mlir %t/block.so
# RUN: %fff_src_root/scripts/fff-aot.sh --target cpu %S/Inputs/pre_ln_tree_block.mlir %t/block1.so threads=1
# RUN: nm -D --defined-only %t/block.so | FileCheck %s --check-prefix=EXPORTS
# RUN: nm -D --defined-only %t/block.so | count 2
# EXPORTS-DAG: T block
# EXPORTS-DAG: T fffGetLastError
# RUN: not %fff_src_root/scripts/fff-aot.sh --target tpu %S/Inputs/pre_ln_tree_block.mlir %t/x.so 2>&1 | FileCheck %s --check-prefix=TARGET
# TARGET: unknown target 'tpu': expected cuda or cpu
# RUN: %python %s %t/block.so %t/block1.so | FileCheck %s
# CHECK: ok: matches the reference
# CHECK: ok: the same bits with one thread
# CHECK: ok: reported: {{.*}}

import ctypes
import math
import sys

import numpy as np

DEPTH, WIDTH, NODES = 3, 64, 15
rng = np.random.default_rng(7)
# Enough rows for both ops to use threads (2^17 elements, 2^19 multiply-adds).
rows = 20000
x = rng.standard_normal((rows, WIDTH)).astype(np.float32)
g = rng.standard_normal(WIDTH).astype(np.float32)
wi = (rng.standard_normal((1, NODES, WIDTH)) / 8).astype(np.float32)
wo = (rng.standard_normal((1, NODES, WIDTH)) / 4).astype(np.float32)


def memref(array):
    """The memref C ABI's arguments for a contiguous array."""
    strides = [s // array.itemsize for s in array.strides]
    pointer = ctypes.c_void_p(array.ctypes.data)
    return [pointer, pointer, ctypes.c_int64(0)] + [ctypes.c_int64(v) for v in list(array.shape) + strides]


def call(library, x, out):
    lib = ctypes.CDLL(library)
    lib.fffGetLastError.restype = ctypes.c_char_p
    lib.block(*memref(x), *memref(g), *memref(wi), *memref(wo), *memref(out))
    return lib.fffGetLastError()


def reference(x):
    x = x.astype(np.float64)
    mean = x.mean(1, keepdims=True)
    n = (x - mean) / np.sqrt(((x - mean) ** 2).mean(1, keepdims=True) + 1e-5) * g
    y = x.copy()
    erf = np.vectorize(math.erf)
    node = np.zeros(rows, np.int64)
    for _ in range(DEPTH + 1):
        logit = np.einsum("rd,rd->r", n, wi[0, node])
        y += (0.5 * logit * (1 + erf(logit / math.sqrt(2))))[:, None] * wo[0, node]
        node = 2 * node + 1 + (logit > 0)
    return y


y = np.empty_like(x)
assert call(sys.argv[1], x, y) is None
error = np.linalg.norm(y - reference(x)) / np.linalg.norm(reference(x))
assert error < 2e-5, error
print(f"ok: matches the reference (relative error {error:.1e})")

y1 = np.empty_like(x)
assert call(sys.argv[2], x, y1) is None
assert np.array_equal(y, y1)
print("ok: the same bits with one thread")

short = np.empty((rows - 1, WIDTH), np.float32)
message = call(sys.argv[1], x, short)
assert message is not None and b"block" in message, message
print(f"ok: reported: {message.decode()}")

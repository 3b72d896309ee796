# End to end through fff's own host code: an AOT library from
# scripts/fff-aot.sh (kernels as PTX, host code, fff's CUDA runtime) loads
# the emulator named by FFF_CUDA_DRIVER, which JIT-loads its module; the
# memref entry point runs RMSNorm on device buffers of random bf16 data
# (full and tail blocks, a view into a larger buffer, an empty batch), compared
# with float64 numpy. The launch's statistics show perfectly coalesced
# 128-bit traffic: 16 sectors a request, each byte touched once.
#
# REQUIRES: numpy
# RUN: rm -rf %t && mkdir -p %t
# RUN: %fff_src_root/scripts/fff-aot.sh %fff_src_root/test/Runtime/Inputs/rms_norm_768.mlir %t/norm.so chip=sm_90
# RUN: env FFF_EMU_STATS=%t/stats.jsonl %python %s %emulator %t/norm.so %t/stats.jsonl | FileCheck %s
# CHECK: rms_norm_768 on the emulator: 37 rows, relative error {{.*}}
# CHECK: all {{[0-9]+}} checks passed

import ctypes
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from cudadriver import Driver
from emulatortest import Checks
from fffcheck import from_bf16_bits, to_bf16_bits

emulator, library_path, stats_path = sys.argv[1:]
# fff's runtime dlopens this path: the same library instance, whose
# allocations the kernels will see.
os.environ["FFF_CUDA_DRIVER"] = emulator
driver = Driver(emulator)
library = ctypes.CDLL(library_path)
library.fffGetLastError.restype = ctypes.c_char_p
checks = Checks()
checks.check(library.fffGetLastError() is None, "the library's module loaded")

HIDDEN, EPSILON = 768, 1e-5
rng = np.random.default_rng(768)


def memref(allocated, aligned, shape):
    """MLIR's memref ABI: the allocated and aligned pointers, the offset (fff
    takes 0: the aligned pointer is the first element), sizes, strides."""
    strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    return [ctypes.c_void_p(allocated), ctypes.c_void_p(aligned)] + [ctypes.c_int64(v) for v in (0, *shape, *strides)]


def rms_norm(x, g):
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + EPSILON) * g


def run(rows, offset_rows=0):
    """y = rms_norm(x[offset_rows:]) on device buffers; returns (y, x, g)."""
    x = to_bf16_bits(rng.standard_normal((offset_rows + rows, HIDDEN)) * 3)
    g = to_bf16_bits(1 + 0.1 * rng.standard_normal(HIDDEN))
    y = driver.alloc(max(rows, 1) * HIDDEN * 2)
    x_base, g_base = driver.upload(x), driver.upload(g)
    library.rms_norm_768(*memref(x_base, x_base + offset_rows * HIDDEN * 2, (rows, HIDDEN)),
                         *memref(g_base, g_base, (HIDDEN,)), *memref(y, y, (rows, HIDDEN)))
    error = library.fffGetLastError()
    checks.check(error is None, f"{rows} rows: {error}")
    return driver.download(y, (rows, HIDDEN), np.uint16), x[offset_rows:], g


def relative_error(y, x, g):
    reference = rms_norm(from_bf16_bits(x).astype(np.float64), from_bf16_bits(g).astype(np.float64))
    return np.linalg.norm(from_bf16_bits(y) - reference) / np.linalg.norm(reference)


# 37 rows: nine full blocks of 4 rows (a warp a row) and a tail of 1.
error = relative_error(*run(37))
print(f"rms_norm_768 on the emulator: 37 rows, relative error {error:.2e}")
checks.check(error < 6e-3, f"37 rows: relative error {error}")
error = relative_error(*run(5, offset_rows=2))
checks.check(error < 6e-3, f"a view 2 rows in: relative error {error}")
run(0)

with open(stats_path) as f:
    launches = [json.loads(line) for line in f]
checks.check(len(launches) == 2, f"{len(launches)} launches recorded (the empty batch launches nothing)")
first = launches[0]
checks.check(first["kernel"] == "rms_norm_bf16_768_warp_per_row" and first["grid"] == [10, 1, 1] and
             first["block"] == [128, 1, 1], f"{first['kernel']} {first['grid']} {first['block']}")
checks.check(first["sectors_per_request"] == 16, f"sectors per request: {first['sectors_per_request']}")
moved = 37 * HIDDEN * 2 * 2 + HIDDEN * 2  # x and y, and gamma
checks.check(first["global_unique_bytes"] == moved, f"unique bytes {first['global_unique_bytes']}, wanted {moved}")
checks.check(first["divergent_branches"] == 0 and first["shared_bank_conflicts"] == 0, "no divergence, no conflicts")

checks.finish()

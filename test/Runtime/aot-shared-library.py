# scripts/fff-aot.sh turns a module into a self-contained shared library: its
# functions are exported in the memref C ABI, the runtime is linked in, and
# it loads (and fails softly, with one recorded error) on a machine without a
# CUDA driver. Where a driver is present this test only checks loading.
#
# RUN: rm -rf %t && mkdir -p %t
# RUN: %fff_src_root/scripts/fff-aot.sh %S/Inputs/rms_norm_768.mlir %t/norm.so chip=sm_90
# It exports its entry points and fff's runtime API, nothing else: neither
# the runtime's internals nor the libstdc++ linked into it (830 symbols
# before), which could clash with another library's in the same process.
# RUN: nm -D --defined-only %t/norm.so | FileCheck %s --check-prefix=EXPORTS
# RUN: nm -D --defined-only %t/norm.so | count 3
# EXPORTS-DAG: T fffGetLastError
# EXPORTS-DAG: T fffSetStream
# EXPORTS-DAG: T rms_norm_768
# RUN: nm -D --undefined-only %t/norm.so | FileCheck %s --check-prefix=IMPORTS --implicit-check-not=cu --implicit-check-not=mlir
# IMPORTS: dlopen
# RUN: %python %s %t/norm.so | FileCheck %s
# CHECK: loaded
#
# The same library called from C.
# RUN: cc -I %fff_src_root/include %S/Inputs/call_from_c.c %t/norm.so -Wl,-rpath,%t -o %t/call_from_c
# RUN: %t/call_from_c 2>/dev/null | FileCheck %s --check-prefix=C
# C: {{CUDA driver present|call: kernel rms_norm_bf16_768_warp_per_row is unavailable: its module did not load}}

import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])
lib.fffGetLastError.restype = ctypes.c_char_p
error = lib.fffGetLastError()
if error is None:
    print("loaded with a CUDA driver")
    sys.exit(0)
assert b"CUDA" in error, error
assert lib.fffGetLastError() is None, "the error is cleared once read"

# Without a driver a call launches nothing and records why, never crashes.
rows, hidden = 2, 768
x = (ctypes.c_uint16 * (rows * hidden))()
g = (ctypes.c_uint16 * hidden)()
y = (ctypes.c_uint16 * (rows * hidden))()
def memref2d(buffer):
    return [ctypes.c_void_p(ctypes.addressof(buffer))] * 2 + [ctypes.c_int64(v) for v in (0, rows, hidden, hidden, 1)]
def memref1d(buffer):
    return [ctypes.c_void_p(ctypes.addressof(buffer))] * 2 + [ctypes.c_int64(v) for v in (0, hidden, 1)]
lib.rms_norm_768(*memref2d(x), *memref1d(g), *memref2d(y))
error = lib.fffGetLastError()
assert error is not None and b"kernel" in error, error
print(f"loaded without a CUDA driver; a call reported: {error.decode()}")

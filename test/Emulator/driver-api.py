# The driver API around the interpreter: initialization, the device and its
# attributes, contexts (primary and created, the per-thread stack), memory
# (allocation, copies, memset, range checks, fresh memory reading 0xff),
# module-scope .global (initialized) and .shared variables, streams,
# events, launches through the `extra` parameter buffer, error
# names and strings, and cuGetProcAddress resolving each name for the ABI
# of the requested CUDA version. The library exports the driver API and
# nothing else, and prints nothing to stdout.
#
# REQUIRES: numpy
# RUN: %python %s %emulator | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import ctypes
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from cudadriver import Driver
from emulatortest import Checks, module

CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_NOT_INITIALIZED = 3
CUDA_ERROR_INVALID_DEVICE = 101
CUDA_ERROR_INVALID_CONTEXT = 201
CUDA_ERROR_INVALID_HANDLE = 400
CUDA_ERROR_NOT_FOUND = 500

path = sys.argv[1]
checks = Checks()
lib = ctypes.CDLL(path)
count = ctypes.c_int()
checks.check(lib.cuDeviceGetCount(ctypes.byref(count)) == CUDA_ERROR_NOT_INITIALIZED, "calls before cuInit")

driver = Driver(path)
lib = driver.lib
version = ctypes.c_int()
checks.check(lib.cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value == 13000, "driver version")
checks.check(lib.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value == 1, "one device")
device = ctypes.c_int()
checks.check(lib.cuDeviceGet(ctypes.byref(device), 1) == CUDA_ERROR_INVALID_DEVICE, "device 1 does not exist")
name = ctypes.create_string_buffer(64)
checks.check(lib.cuDeviceGetName(name, 64, 0) == 0 and b"H200" in name.value, f"device name {name.value}")
attributes = {75: 9, 76: 0, 10: 32, 1: 1024, 8: 49152, 16: 132, 2: 1024, 4: 64}
for attribute, expected in attributes.items():
    value = ctypes.c_int()
    checks.check(lib.cuDeviceGetAttribute(ctypes.byref(value), attribute, 0) == 0 and value.value == expected,
                 f"attribute {attribute}: {value.value}, wanted {expected}")
checks.check(lib.cuDeviceGetAttribute(ctypes.byref(ctypes.c_int()), 9999, 0) == CUDA_ERROR_INVALID_VALUE,
             "an unknown attribute")
total = ctypes.c_size_t()
checks.check(lib.cuDeviceTotalMem_v2(ctypes.byref(total), 0) == 0 and total.value > 2**37, "total memory")

# Contexts: the primary one is current; a created one is pushed, popped,
# pushed again and destroyed.
current = ctypes.c_void_p()
lib.cuCtxGetCurrent(ctypes.byref(current))
checks.check(current.value == driver.context.value, "the primary context is current")
created = ctypes.c_void_p()
checks.check(lib.cuCtxCreate_v2(ctypes.byref(created), 0, 0) == 0, "cuCtxCreate")
lib.cuCtxGetCurrent(ctypes.byref(current))
checks.check(current.value == created.value, "a created context becomes current")
popped = ctypes.c_void_p()
checks.check(lib.cuCtxPopCurrent_v2(ctypes.byref(popped)) == 0 and popped.value == created.value, "cuCtxPopCurrent")
lib.cuCtxGetCurrent(ctypes.byref(current))
checks.check(current.value == driver.context.value, "popping restores the primary context")
checks.check(lib.cuCtxPushCurrent_v2(created) == 0, "cuCtxPushCurrent")
checks.check(lib.cuCtxDestroy_v2(created) == 0, "cuCtxDestroy")
lib.cuCtxGetCurrent(ctypes.byref(current))
checks.check(current.value == driver.context.value, "destroying a context pops it")
checks.check(lib.cuCtxDestroy_v2(driver.context) == CUDA_ERROR_INVALID_CONTEXT, "the primary context is not destroyed")
checks.check(lib.cuCtxSynchronize() == 0, "cuCtxSynchronize")

# Memory.
data = np.arange(1000, dtype=np.uint8)
pointer = driver.alloc(1000)
checks.equal(driver.download(pointer, (1000,), np.uint8), np.full(1000, 0xFF, np.uint8), "fresh memory is 0xff")
lib.cuMemsetD8_v2.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t]
checks.check(lib.cuMemsetD8_v2(pointer, 7, 1000) == 0, "cuMemsetD8")
checks.equal(driver.download(pointer, (1000,), np.uint8), np.full(1000, 7, np.uint8), "memset contents")
source = driver.upload(data)
lib.cuMemcpyDtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t]
checks.check(lib.cuMemcpyDtoD_v2(pointer, source, 1000) == 0, "cuMemcpyDtoD")
checks.equal(driver.download(pointer, (1000,), np.uint8), data, "device-to-device contents")
checks.check(lib.cuMemcpyDtoD_v2(pointer + 1, source, 1000) == CUDA_ERROR_INVALID_VALUE, "a copy past the end")
checks.check(lib.cuMemFree_v2(ctypes.c_uint64(pointer + 8)) == CUDA_ERROR_INVALID_VALUE, "freeing inside a buffer")
checks.check(lib.cuMemFree_v2(ctypes.c_uint64(pointer)) == 0, "cuMemFree")

# Streams and events; asynchronous copies on a stream.
stream, start, end, untimed = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
checks.check(lib.cuStreamCreate(ctypes.byref(stream), 1) == 0, "cuStreamCreate")
result = np.zeros(1000, np.uint8)
lib.cuMemcpyHtoDAsync_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
lib.cuMemcpyDtoHAsync_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
checks.check(lib.cuEventCreate(ctypes.byref(start), 0) == 0 and lib.cuEventCreate(ctypes.byref(end), 0) == 0,
             "cuEventCreate")
checks.check(lib.cuEventCreate(ctypes.byref(untimed), 2) == 0, "cuEventCreate without timing")
checks.check(lib.cuEventRecord(start, stream) == 0, "cuEventRecord")
checks.check(lib.cuMemcpyHtoDAsync_v2(source, (data[::-1].copy()).ctypes.data, 1000, stream) == 0 and
             lib.cuMemcpyDtoHAsync_v2(result.ctypes.data, source, 1000, stream) == 0, "asynchronous copies")
checks.check(lib.cuEventRecord(end, stream) == 0 and lib.cuEventRecord(untimed, stream) == 0, "cuEventRecord")
checks.check(lib.cuStreamSynchronize(stream) == 0 and lib.cuEventSynchronize(end) == 0, "synchronizing")
checks.equal(result, data[::-1], "asynchronous copy contents")
milliseconds = ctypes.c_float(-1)
checks.check(lib.cuEventElapsedTime(ctypes.byref(milliseconds), start, end) == 0 and milliseconds.value >= 0,
             "cuEventElapsedTime")
checks.check(lib.cuEventElapsedTime(ctypes.byref(milliseconds), start, untimed) == CUDA_ERROR_INVALID_HANDLE,
             "an event without timing")
checks.check(lib.cuEventDestroy_v2(start) == 0 and lib.cuStreamDestroy_v2(stream) == 0, "destroying")
checks.check(lib.cuStreamDestroy_v2(stream) == CUDA_ERROR_INVALID_HANDLE, "a destroyed stream")

# Parameters through `extra`: a buffer laid out as the kernel declares them.
ptx = module("""
.visible .entry store(.param .u64 out, .param .u32 value)
{
  .reg .b32 %v;
  .reg .b64 %out;
  ld.param.u64 %out, [out];
  ld.param.u32 %v, [value];
  st.global.b32 [%out], %v;
  ret;
}""")
function = driver.function(driver.load(ptx), "store")
out = driver.alloc(4)
parameters = (ctypes.c_uint64 * 2)(out, 0xC0FFEE)
size = ctypes.c_size_t(12)
extra = (ctypes.c_void_p * 5)(1, ctypes.cast(parameters, ctypes.c_void_p), 2,
                              ctypes.cast(ctypes.pointer(size), ctypes.c_void_p), 0)
launch = lambda params, extras: lib.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, None, params, extras)
checks.check(launch(None, extra) == 0, "a launch with CU_LAUNCH_PARAM_BUFFER_POINTER")
checks.equal(driver.download(out, (1,), np.uint32), [0xC0FFEE], "the parameter buffer's value")
checks.check(launch(None, None) == CUDA_ERROR_INVALID_VALUE, "a launch without parameters")
checks.check(lib.cuLaunchKernel(ctypes.c_void_p(12345), 1, 1, 1, 1, 1, 1, 0, None, None, None) ==
             CUDA_ERROR_INVALID_HANDLE, "a launch of no function")

# Module-scope variables: an initialized .global array, a zeroed .global
# word read by name, and a .shared array.
ptx = module("""
.global .align 4 .b32 table[4] = {10, 20, 30, 40};
.global .align 8 .u64 zero;
.shared .align 4 .b32 slots[32];
.visible .entry lookup(.param .u64 out)
{
  .reg .b32 %tid, %v, %w;
  .reg .b64 %address, %offset, %z;
  mov.u32 %tid, %tid.x;
  mov.u64 %address, table;
  mul.wide.u32 %offset, %tid, 4;
  add.s64 %address, %address, %offset;
  ld.global.b32 %v, [%address];
  ld.global.b64 %z, [zero];
  cvt.u32.u64 %w, %z;
  add.s32 %v, %v, %w;
  mov.u64 %address, slots;
  add.s64 %address, %address, %offset;
  st.shared.b32 [%address], %v;
  ld.shared.b32 %w, [slots+4];
  add.s32 %v, %v, %w;
  ld.param.u64 %address, [out];
  add.s64 %address, %address, %offset;
  st.global.b32 [%address], %v;
  ret;
}""")
out = driver.alloc(16)
driver.launch(driver.function(driver.load(ptx), "lookup"), (1,), (4,), ctypes.c_uint64(out))
checks.equal(driver.download(out, (4,), np.uint32), [30, 40, 50, 60], "module-scope variables")

# Errors by name.
text = ctypes.c_char_p()
checks.check(lib.cuGetErrorName(700, ctypes.byref(text)) == 0 and text.value == b"CUDA_ERROR_ILLEGAL_ADDRESS",
             "cuGetErrorName")
checks.check(lib.cuGetErrorString(1, ctypes.byref(text)) == 0 and text.value, "cuGetErrorString")
checks.check(lib.cuGetErrorString(9999, ctypes.byref(text)) == CUDA_ERROR_INVALID_VALUE and text.value is None,
             "an undefined error code")

# cuGetProcAddress: each name in the ABI of the version asked for.
lib.cuGetProcAddress_v2.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64,
                                    ctypes.POINTER(ctypes.c_int)]
lib.cuGetProcAddress.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64]


def address_of(symbol):
    return ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value


for symbol, version, implementation, status in (
        ("cuMemAlloc", 12000, "cuMemAlloc_v2", 0), ("cuMemAlloc", 2000, None, 1),
        ("cuCtxCreate", 4000, "cuCtxCreate_v2", 0), ("cuCtxCreate", 12050, None, 1),
        ("cuCtxSynchronize", 12000, "cuCtxSynchronize", 0), ("cuCtxSynchronize", 13000, "cuCtxSynchronize_v2", 0),
        ("cuLaunchKernel", 12000, "cuLaunchKernel", 0), ("cuLaunchKernel", 3000, None, 2),
        ("cuGetProcAddress", 12000, "cuGetProcAddress_v2", 0), ("cuTensorMapEncodeTiled", 12000, None, 1)):
    function_pointer, found = ctypes.c_void_p(), ctypes.c_int(-1)
    result = lib.cuGetProcAddress_v2(symbol.encode(), ctypes.byref(function_pointer), version, 0,
                                     ctypes.byref(found))
    expected = address_of(implementation) if implementation else None
    checks.check(function_pointer.value == expected and found.value == status and
                 (result == 0) == (implementation is not None),
                 f"cuGetProcAddress({symbol}, {version}): {result}, status {found.value}")
function_pointer = ctypes.c_void_p()
checks.check(lib.cuGetProcAddress(b"cuInit", ctypes.byref(function_pointer), 12000, 0) == 0 and
             function_pointer.value == address_of("cuInit"), "the four-argument cuGetProcAddress")

# Exports: the driver API only.
symbols = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
names = [line.split()[-1] for line in symbols.splitlines() if line.strip()]
checks.check(names and all(name.startswith("cu") for name in names),
             f"exports beyond the driver API: {[n for n in names if not n.startswith('cu')][:5]}")

# Errors go to stderr with the fff-emulator prefix; stdout stays empty.
program = f"""
import ctypes, sys
sys.path.insert(0, {os.path.join(os.path.dirname(__file__), 'Inputs')!r})
from cudadriver import Driver
driver = Driver({path!r})
handle = ctypes.c_void_p()
driver.lib.cuModuleLoadData(ctypes.byref(handle), b".version 8.0\\n.target sm_90\\n.address_size 64\\n.file 1 \\"x\\"")
"""
quiet = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
checks.check(quiet.returncode == 0 and quiet.stdout == "", f"stdout: {quiet.stdout!r}")
checks.check(quiet.stderr.startswith("fff-emulator: CUDA_ERROR_INVALID_PTX: line 4: unsupported directive"),
             f"stderr: {quiet.stderr!r}")

checks.finish()

"""Running fff's AOT libraries on the PTX emulator, for tests: the
emulator's driver API for buffers and streams, MLIR's memref calling
convention, and building and calling a library.

The emulator must be the library FFF_CUDA_DRIVER names, so that fff's CUDA
runtime and the test share one instance of it, and its buffers.
"""

import ctypes
import json
import os
import re
import subprocess

import numpy as np


class Device:
    """The emulator's driver API, for buffers and streams."""

    def __init__(self, path):
        lib = self.lib = ctypes.CDLL(path)
        lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
        lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        lib.cuStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
        lib.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
        context = ctypes.c_void_p()
        assert lib.cuInit(0) == 0 and lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0) == 0
        lib.cuCtxSetCurrent(context)

    def alloc(self, nbytes):
        pointer = ctypes.c_uint64()
        assert self.lib.cuMemAlloc_v2(ctypes.byref(pointer), max(nbytes, 1)) == 0
        return pointer.value

    def upload(self, array, pad_before=0, pad_after=0):
        """A device copy of `array` inside an allocation with `pad_before` and
        `pad_after` bytes around it; returns the copy's address."""
        array = np.ascontiguousarray(array)
        base = self.alloc(pad_before + array.nbytes + pad_after)
        assert self.lib.cuMemcpyHtoD_v2(base + pad_before, array.ctypes.data, array.nbytes) == 0
        return base + pad_before

    def download(self, pointer, shape, dtype):
        array = np.empty(shape, dtype)
        assert self.lib.cuMemcpyDtoH_v2(array.ctypes.data, pointer, array.nbytes) == 0
        return array

    def stream(self):
        stream = ctypes.c_void_p()
        assert self.lib.cuStreamCreate(ctypes.byref(stream), 0) == 0
        return stream


def memref(pointer, shape):
    """MLIR's memref ABI for a contiguous buffer at `pointer`."""
    strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    return [ctypes.c_void_p(pointer)] * 2 + [ctypes.c_int64(v) for v in (0, *shape, *strides)]


def build(aot, work, name, functions, options=""):
    """An AOT library of `functions` (MLIR text), compiled by `aot`
    (scripts/fff-aot.sh) in `work` with the GPU pipeline's `options`."""
    source = os.path.join(work, f"{name}.mlir")
    with open(source, "w") as f:
        f.write("\n".join(functions))
    library = os.path.join(work, f"{name}.so")
    subprocess.run([aot, source, library, options], check=True)
    lib = ctypes.CDLL(library)
    lib.fffGetLastError.restype = ctypes.c_char_p
    lib.fffSetStream.argtypes = [ctypes.c_void_p]
    error = lib.fffGetLastError()
    assert error is None, f"{name}: {error}"
    return lib


def call(device, lib, name, inputs, outputs, pads=(0, 0)):
    """Calls @name on device copies of `inputs` (numpy arrays in storage
    types) with buffers for `outputs` ([(shape, dtype)]); returns the
    outputs, or the error fff reported."""
    args = []
    for array in inputs:
        args += memref(device.upload(array, *pads), array.shape)
    results = [(device.alloc(int(np.prod(shape)) * np.dtype(dtype).itemsize), shape, dtype)
               for shape, dtype in outputs]
    for pointer, shape, _ in results:
        args += memref(pointer, shape)
    getattr(lib, name)(*args)
    error = lib.fffGetLastError()
    if error:
        return error.decode()
    return [device.download(pointer, shape, dtype) for pointer, shape, dtype in results]


def launches(stats):
    """The kernels launched so far, in order, from the emulator's statistics
    file (FFF_EMU_STATS)."""
    if not os.path.exists(stats):
        return []
    with open(stats) as f:
        return [json.loads(line)["kernel"] for line in f]


def launched_phases(stats, pattern):
    """The phases (`pattern`'s first group, searched in each kernel's name)
    of the kernels launched so far, sorted."""
    return sorted({m.group(1) for m in (re.search(pattern, k) for k in launches(stats)) if m})

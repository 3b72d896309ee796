"""ctypes bindings to a CUDA driver library (fff's PTX emulator, in these
tests): the calls the tests make, each result checked, device buffers as
numpy arrays."""

import ctypes

import numpy as np


class CudaError(Exception):
    def __init__(self, code, name, message):
        super().__init__(f"{name} ({code}): {message}")
        self.code, self.name, self.message = code, name, message


class Driver:
    def __init__(self, path):
        lib = self.lib = ctypes.CDLL(path)
        lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
        lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        lib.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
        lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                            ctypes.c_char_p]
        lib.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
            ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
        lib.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
        self.check(lib.cuInit(0))
        self.context = ctypes.c_void_p()
        self.check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), 0))
        self.check(lib.cuCtxSetCurrent(self.context))

    def error_name(self, code):
        text = ctypes.c_char_p()
        self.lib.cuGetErrorName(code, ctypes.byref(text))
        return text.value.decode() if text.value else str(code)

    def error_string(self, code):
        text = ctypes.c_char_p()
        self.lib.cuGetErrorString(code, ctypes.byref(text))
        return text.value.decode() if text.value else ""

    def check(self, code):
        if code:
            raise CudaError(code, self.error_name(code), self.error_string(code))

    def reset(self):
        """Clears a sticky error by resetting the primary context (which frees
        its modules and buffers)."""
        self.check(self.lib.cuDevicePrimaryCtxReset_v2(0))
        self.check(self.lib.cuCtxSetCurrent(self.context))

    def load(self, ptx):
        module = ctypes.c_void_p()
        self.check(self.lib.cuModuleLoadData(ctypes.byref(module), ptx.encode()))
        return module

    def function(self, module, name):
        function = ctypes.c_void_p()
        self.check(self.lib.cuModuleGetFunction(ctypes.byref(function), module, name.encode()))
        return function

    def alloc(self, nbytes):
        pointer = ctypes.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(pointer), nbytes))
        return pointer.value

    def upload(self, array):
        array = np.ascontiguousarray(array)
        pointer = self.alloc(max(array.nbytes, 1))
        self.check(self.lib.cuMemcpyHtoD_v2(pointer, array.ctypes.data, array.nbytes))
        return pointer

    def download(self, pointer, shape, dtype):
        array = np.empty(shape, dtype)
        self.check(self.lib.cuMemcpyDtoH_v2(array.ctypes.data, pointer, array.nbytes))
        return array

    def launch_result(self, function, grid, block, *args, shared=0):
        """Launches with kernel arguments given as ctypes values; returns the
        driver's result code."""
        grid = tuple(grid) + (1,) * (3 - len(grid))
        block = tuple(block) + (1,) * (3 - len(block))
        values = (ctypes.c_void_p * max(len(args), 1))(
            *[ctypes.cast(ctypes.pointer(arg), ctypes.c_void_p) for arg in args])
        return self.lib.cuLaunchKernel(function, *grid, *block, shared, None, values, None)

    def launch(self, function, grid, block, *args, shared=0):
        self.check(self.launch_result(function, grid, block, *args, shared=shared))

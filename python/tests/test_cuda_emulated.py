"""fff.compile(target="cuda") in-process, on fff's PTX emulator standing in
for the CUDA driver: host code JIT-compiled, kernels loaded by fff's
runtime, arguments as CUDA arrays (here the emulator's device memory behind
__cuda_array_interface__, as torch CUDA tensors would be), results in
caller-allocated `out=` buffers."""

import ctypes
import os

import numpy as np
import pytest

import fff
from conftest import TOLERANCE, dequantize, quantize, relative_error, rms_norm, tree_ffn

DRIVER = os.environ.get("FFF_CUDA_DRIVER", "")
pytestmark = pytest.mark.skipif("emulator" not in DRIVER,
                                reason="needs FFF_CUDA_DRIVER set to fff's PTX emulator (build it first)")


class EmulatedArray:
    """A device buffer of the emulator's, with the CUDA array interface."""

    driver = None

    def __init__(self, array, offset_bytes=0):
        if EmulatedArray.driver is None:
            lib = ctypes.CDLL(DRIVER)
            lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
            lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
            lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
            context = ctypes.c_void_p()
            assert lib.cuInit(0) == 0 and lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0) == 0
            lib.cuCtxSetCurrent(context)
            EmulatedArray.driver = lib
        self.array = np.ascontiguousarray(array)
        pointer = ctypes.c_uint64()
        assert self.driver.cuMemAlloc_v2(ctypes.byref(pointer), max(self.array.nbytes, 1) + offset_bytes) == 0
        self.pointer = pointer.value + offset_bytes
        self.driver.cuMemcpyHtoD_v2(self.pointer, self.array.ctypes.data, self.array.nbytes)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.array.shape, "typestr": self.array.dtype.str, "data": (self.pointer, False),
                "strides": None, "version": 3}

    def numpy(self):
        result = np.empty_like(self.array)
        self.driver.cuMemcpyDtoH_v2(result.ctypes.data, self.pointer, result.nbytes)
        return result


RMS_NORM = """
func.func @rms_norm(%x: tensor<?x{h}x{t}>, %g: tensor<{h}x{t}>) -> tensor<?x{h}x{t}> {{
  %y = fff.rms_norm %x scale(%g : tensor<{h}x{t}>) : tensor<?x{h}x{t}>
  return %y : tensor<?x{h}x{t}>
}}
"""


@pytest.mark.parametrize("dtype, hidden", [("bf16", 768), ("f32", 1000), ("f16", 4096)])
def test_rms_norm(dtype, hidden, rng):
    exe = fff.compile(RMS_NORM.format(h=hidden, t=dtype), target="cuda", chip="sm_90")
    x_arr, x = quantize(rng.standard_normal((6, hidden)), dtype)
    g_arr, g = quantize(rng.standard_normal(hidden), dtype)
    y = EmulatedArray(np.zeros_like(x_arr))
    assert exe.rms_norm(EmulatedArray(x_arr), EmulatedArray(g_arr), out=y) is y
    assert relative_error(dequantize(y.numpy(), dtype), rms_norm(x, g)) < TOLERANCE[dtype]


def test_tree_ffn_both_kernels(rng):
    depth, width = 4, 64
    nodes = 2 ** (depth + 1) - 1
    ir = f"""
func.func @tree(%x: tensor<?x{width}xf32>, %wi: tensor<1x{nodes}x{width}xf32>, %bi: tensor<1x{nodes}xf32>,
                %wo: tensor<1x{nodes}x{width}xf32>, %bo: tensor<{width}xf32>) -> tensor<?x{width}xf32> {{
  %y = fff.tree_ffn %x, %wi bias(%bi : tensor<1x{nodes}xf32>), %wo bias(%bo : tensor<{width}xf32>) {{depth = {depth} : i64}}
      : tensor<?x{width}xf32>, tensor<1x{nodes}x{width}xf32>, tensor<1x{nodes}x{width}xf32>
  return %y : tensor<?x{width}xf32>
}}"""
    args = [rng.standard_normal(s).astype(np.float32) * k for s, k in
            [((5, width), 1.0), ((1, nodes, width), width ** -0.5), ((1, nodes), 0.3),
             ((1, nodes, width), 1.0), ((width,), 0.1)]]
    reference = tree_ffn(*[a.astype(np.float64) for a in args], depth)
    for variant in ("latency", "throughput"):
        exe = fff.compile(ir, target="cuda", tree_variant=variant)
        y = EmulatedArray(np.zeros((5, width), np.float32))
        exe.tree(*[EmulatedArray(a) for a in args], out=y)
        assert relative_error(y.numpy(), reference) < TOLERANCE["f32"], variant


def test_bad_buffers_are_errors_before_any_launch(rng):
    exe = fff.compile(RMS_NORM.format(h=768, t="bf16"), target="cuda")
    x = rng.standard_normal((4, 768)).astype(np.float32).view(np.uint32).astype(np.uint16)
    g = np.ones(768, np.uint16)
    y = EmulatedArray(np.full((4, 768), 7, np.uint16))
    with pytest.raises(fff.FFFError, match=r"argument #0 \(memref<\?x768xbf16>\) is not 16-byte aligned"):
        exe.rms_norm(EmulatedArray(x, offset_bytes=2), EmulatedArray(g), out=y)
    with pytest.raises(fff.FFFError, match="the buffer for result #0 has the wrong size in dim 0"):
        exe.rms_norm(EmulatedArray(x), EmulatedArray(g), out=EmulatedArray(np.zeros((3, 768), np.uint16)))
    # Nothing was written.
    assert (y.numpy() == 7).all()
    with pytest.raises(fff.FFFError, match="pass out= buffers for its results, or torch CUDA tensors"):
        exe.rms_norm(EmulatedArray(x), EmulatedArray(g))
    with pytest.raises(fff.FFFError, match="argument #1 is not a CUDA array"):
        exe.rms_norm(EmulatedArray(x), g, out=y)

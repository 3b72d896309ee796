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
        self.array = np.array(array, order="C")  # ascontiguousarray makes 0-d arrays 1-d
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
    torch = pytest.importorskip("torch")
    with pytest.raises(fff.FFFError, match=r"argument #0 is a torch.sparse_coo tensor; fff takes dense"):
        exe.rms_norm(torch.ones(4, 768, dtype=torch.bfloat16).to_sparse(), EmulatedArray(g), out=y)


def test_a_unit_the_fused_kernel_cannot_take_runs_as_separate_kernels(rng):
    """Gemma's first RMSNorm, whose input is x times a 0-d tensor computed
    where the norm reads it: raised and fused, then split back into an
    elementwise kernel and a norm kernel (the fused kernel takes no 0-d
    inputs); both results against numpy, on rows with a tail (1000 wide)."""
    hidden = 1000
    ir = f"""
#id = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @gemma_norm(%x: tensor<?x{hidden}xf32>, %c: tensor<f32>, %w: tensor<{hidden}xf32>)
    -> (tensor<?x{hidden}xf32>, tensor<?x{hidden}xf32>) {{
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x{hidden}xf32>
  %e = tensor.empty(%n) : tensor<?x{hidden}xf32>
  %scaled = linalg.generic {{indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%x, %c : tensor<?x{hidden}xf32>, tensor<f32>) outs(%e : tensor<?x{hidden}xf32>) {{
  ^bb0(%v: f32, %k: f32, %o: f32):
    %m = arith.mulf %v, %k : f32
    linalg.yield %m : f32
  }} -> tensor<?x{hidden}xf32>
  %e1 = tensor.empty(%n) : tensor<?x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %ss = linalg.generic {{indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}}
      ins(%scaled : tensor<?x{hidden}xf32>) outs(%init : tensor<?x1xf32>) {{
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %t = arith.addf %sq, %acc : f32
    linalg.yield %t : f32
  }} -> tensor<?x1xf32>
  %y = linalg.generic {{indexing_maps = [#id, #keep, #col, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%scaled, %ss, %w : tensor<?x{hidden}xf32>, tensor<?x1xf32>, tensor<{hidden}xf32>)
      outs(%e : tensor<?x{hidden}xf32>) {{
  ^bb0(%v: f32, %q: f32, %g: f32, %o: f32):
    %cnt = arith.constant {hidden}.0 : f32
    %eps = arith.constant 1.0e-6 : f32
    %mean = arith.divf %q, %cnt : f32
    %a = arith.addf %mean, %eps : f32
    %r = math.rsqrt %a : f32
    %nv = arith.mulf %v, %r : f32
    %out = arith.mulf %nv, %g : f32
    linalg.yield %out : f32
  }} -> tensor<?x{hidden}xf32>
  return %scaled, %y : tensor<?x{hidden}xf32>, tensor<?x{hidden}xf32>
}}"""
    lowered = fff.lower(ir, "builtin.module(fff-raise-norms, fff-fuse-norms, convert-fff-to-gpu)")
    # The unit is gone; the norm has its kernel, the product is linalg for
    # the linalg lowering's kernels later in the pipeline.
    assert "fff.fusion ins" not in lowered and lowered.count("gpu.launch_func") == 1, lowered
    exe = fff.compile(ir, target="cuda", chip="sm_90")
    x = rng.standard_normal((5, hidden)).astype(np.float32)
    c = np.array(31.6, np.float32)
    w = rng.uniform(0.5, 1.5, hidden).astype(np.float32)
    scaled, y = EmulatedArray(np.zeros_like(x)), EmulatedArray(np.zeros_like(x))
    exe.gemma_norm(EmulatedArray(x), EmulatedArray(c), EmulatedArray(w), out=(scaled, y))
    s = x.astype(np.float64) * float(c)
    assert relative_error(scaled.numpy(), s) < TOLERANCE["f32"]
    assert relative_error(y.numpy(), rms_norm(s, w.astype(np.float64), eps=1e-6)) < TOLERANCE["f32"]

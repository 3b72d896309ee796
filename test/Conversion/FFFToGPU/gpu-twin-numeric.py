# The GPU norm kernels' arithmetic, checked on the CPU: every strategy
# (warp per row, block per row, looped) runs as its CPU twin through
# `fff-run --gpu-twin` (same lane-to-data mapping, tails, masking and
# shuffle-butterfly reduction order as the kernel) and is compared against
# float64 numpy references on random data.
#
# REQUIRES: numpy
# RUN: %python %s fff-opt | FileCheck %s
# CHECK-DAG: strategies covered: block_per_row, looped, warp_per_row
# CHECK: all {{[0-9]+}} checks passed

import re
import subprocess
import sys

import numpy as np

from fffcheck import TOLERANCE, Checker, dequantize, quantize, run, tensor_type

fff_opt = sys.argv[1]
rng = np.random.default_rng(4096)
check = Checker()
strategies = set()


def case(dtype, shape, static_shape, normalized_rank=1, offset=0.5):
    x_arr, x = quantize(rng.standard_normal(shape) * 2.0 + offset, dtype)
    pshape = shape[-normalized_rank:]
    g_arr, g = quantize(rng.standard_normal(pshape), dtype)
    b_arr, b = quantize(rng.standard_normal(pshape), dtype)
    xt, pt = tensor_type(static_shape, dtype), tensor_type(pshape, dtype)
    st = tensor_type(list(static_shape[:-normalized_rank]) + [1] * normalized_rank, "f32")
    nr = f"normalized_rank {normalized_rank}"
    mlir = f"""
func.func @norms(%x: {xt}, %g: {pt}, %b: {pt}) -> ({xt}, {st}, {st}, {xt}) {{
  %y, %mean, %rstd = fff.layer_norm %x scale(%g : {pt}) bias(%b : {pt}) {nr} return_stats : {xt}
  %r = fff.rms_norm %x scale(%g : {pt}) {nr} {{epsilon = 1.0e-06 : f32}} : {xt}
  return %y, %mean, %rstd, %r : {xt}, {st}, {st}, {xt}
}}"""
    gpu_ir = subprocess.run([fff_opt, "--convert-fff-to-gpu", "-"], input=mlir, capture_output=True,
                            text=True, check=True).stdout
    kinds = re.findall(r'kind = "(\w+)"', gpu_ir)
    strategies.update(kinds)
    y, mean, rstd, r = run(mlir, "norms", [x_arr, g_arr, b_arr], 4, extra_flags=["--gpu-twin"])

    axes = tuple(range(x.ndim - normalized_rank, x.ndim))
    ref_mean = x.mean(axis=axes, keepdims=True)
    ref_rstd = 1 / np.sqrt(((x - ref_mean) ** 2).mean(axis=axes, keepdims=True) + 1e-5)
    ref_y = (x - ref_mean) * ref_rstd * g + b
    ref_r = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + 1e-6) * g
    name = f"{dtype} {list(shape)} ({'/'.join(sorted(set(kinds)))})"
    tol = TOLERANCE[dtype]
    check.close(f"layer_norm twin {name}", dequantize(y, dtype), ref_y, tol)
    check.close(f"layer_norm twin mean {name}", mean, ref_mean, TOLERANCE["f32"], scale=1 / ref_rstd)
    check.close(f"layer_norm twin rstd {name}", rstd, ref_rstd, TOLERANCE["f32"])
    check.close(f"rms_norm twin {name}", dequantize(r, dtype), ref_r, tol)


for dtype in ("f32", "f16", "bf16"):
    for hidden in (1, 3, 127, 768, 1000, 4096, 8192, 32768):
        rows = 5 if hidden <= 8192 else 2
        case(dtype, (rows, hidden), (None, hidden))
    # A dynamic row size (looped, scalar loads) and two normalized dims.
    case(dtype, (3, 300), (None, None))
    case(dtype, (3, 4, 96), (None, 4, 96), normalized_rank=2)
# normalized_rank equal to the rank: the whole tensor is one row.
case("f32", (6, 50), (6, 50), normalized_rank=2)
case("bf16", (3, 4, 96), (3, 4, 96), normalized_rank=3)
# A large common offset: the looped kernel's shifted sums must not cancel.
case("f32", (2, 32768), (None, 32768), offset=1000.0)
case("f32", (4, 768), (None, 768), offset=1000.0)

print("strategies covered: " + ", ".join(sorted(strategies)))
check.finish()

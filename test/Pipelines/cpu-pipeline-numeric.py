# Upstream linalg-on-tensors IR, as frontends emit it, runs correctly through
# --fff-cpu-pipeline and fff-run: a dense feedforward in f32 and a residual
# add with a dynamic batch in f16 and bf16.
#
# REQUIRES: numpy
# RUN: %python %s %S/cpu-pipeline.mlir | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import sys

import numpy as np

from fffcheck import TOLERANCE, Checker, dequantize, quantize, run, tensor_type

rng = np.random.default_rng(3)
check = Checker()

mlir = open(sys.argv[1]).read()
x = rng.standard_normal((5, 16)).astype(np.float32)
w1 = rng.standard_normal((16, 32)).astype(np.float32) / 4
w2 = rng.standard_normal((32, 16)).astype(np.float32) / 6
(y,) = run(mlir, "dense_ffn", [x, w1, w2], 1)
ref = np.tanh(x.astype(np.float64) @ w1) @ w2
check.close("dense_ffn f32 [5, 16]", y, ref, TOLERANCE["f32"])

for dtype in ("f16", "bf16"):
    t = tensor_type((None, 40), dtype)
    residual = f"""
func.func @residual(%x: {t}, %h: {t}) -> {t} {{
  %y = arith.addf %x, %h : {t}
  %z = arith.mulf %y, %y : {t}
  return %z : {t}
}}"""
    a_arr, a = quantize(rng.standard_normal((7, 40)), dtype)
    b_arr, b = quantize(rng.standard_normal((7, 40)), dtype)
    (z,) = run(residual, "residual", [a_arr, b_arr], 1)
    # Elementwise ops on f16/bf16 tensors round after each op, as torch does.
    s_arr, s = quantize(a + b, dtype)
    check.close(f"residual {dtype} [7, 40]", dequantize(z, dtype), s * s, TOLERANCE[dtype])
check.finish()

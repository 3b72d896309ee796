# The fused unit's kernel arithmetic (residual add on loaded vectors,
# LayerNorm, per-column shift and ReLU on the normalized vectors, both
# results stored) checked on the CPU through its twin (`fff-run --gpu-twin`),
# against float64 numpy with bf16 rounding where the IR rounds.
#
# REQUIRES: numpy
# RUN: %python %s %S/Inputs/pre_ln_fused.mlir fff-opt | FileCheck %s
# CHECK: all 3 checks passed

import subprocess
import sys

import numpy as np

from fffcheck import TOLERANCE, Checker, dequantize, from_bf16_bits, quantize, run, to_bf16_bits

source, fff_opt = sys.argv[1:]
mlir = open(source).read()
# The twin must really lower the unit (not fall back to the plain CPU path).
twin = subprocess.run([fff_opt, "--fff-fuse-norms", "--convert-fff-to-gpu=cpu-twin", "-"], input=mlir,
                      capture_output=True, text=True, check=True).stdout
assert "fff." not in twin, twin

bf16 = lambda v: from_bf16_bits(to_bf16_bits(v)).astype(np.float64)
rng = np.random.default_rng(31)
rows = 13
x_bits, x = quantize(rng.standard_normal((rows, 768)) * 2 + 0.5, "bf16")
r_bits, r = quantize(rng.standard_normal((rows, 768)), "bf16")
g_bits, g = quantize(rng.standard_normal(768), "bf16")
b_bits, b = quantize(rng.standard_normal(768), "bf16")
s_bits, shift = quantize(rng.standard_normal(768), "bf16")

total, y = run(mlir, "pre_ln", [x_bits, r_bits, g_bits, b_bits, s_bits], 2, extra_flags=["--gpu-twin"])
s = bf16(x + r)
mean = s.mean(-1, keepdims=True)
n = bf16((s - mean) / np.sqrt(((s - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b)
ref = bf16(np.maximum(n + shift, 0.0))

check = Checker()
check.equal("residual sum is the bf16 sum", dequantize(total, "bf16"), s)
check.close("fused output", dequantize(y, "bf16"), ref, TOLERANCE["bf16"])
check.equal("ReLU leaves no negative output", bool((dequantize(y, "bf16") >= 0).all()), True)
check.finish()

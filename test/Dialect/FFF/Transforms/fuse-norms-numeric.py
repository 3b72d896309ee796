# A fused unit computes what its ops computed before fusion: the residual
# block of fuse-norms.mlir through fff-run, unfused and fused, on random
# data, and against a float64 numpy reference.
#
# REQUIRES: numpy
# RUN: %python %s %S/fuse-norms.mlir fff-opt | FileCheck %s
# CHECK: all 5 checks passed

import subprocess
import sys

import numpy as np

from fffcheck import TOLERANCE, Checker, dequantize, run

source, fff_opt = sys.argv[1:]
mlir = open(source).read().split("// -----")[0]
fused = subprocess.run([fff_opt, "--fff-fuse-norms", "-"], input=mlir, capture_output=True, text=True,
                       check=True).stdout
assert "fff.fusion" in fused, fused

rng = np.random.default_rng(5)
x, res, other = (rng.standard_normal((9, 64)).astype(np.float32) for _ in range(3))
g, bias = (rng.standard_normal(64).astype(np.float32) for _ in range(2))
args = [x, res, g, bias, other]
check = Checker()
plain = run(mlir, "residual_norm_epilogue", args, 2)
together = run(fused, "residual_norm_epilogue", args, 2)
check.equal("fused residual sum equals unfused", together[0], plain[0])
check.equal("fused epilogue equals unfused", together[1], plain[1])

s = x.astype(np.float64) + res
n = s / np.sqrt((s * s).mean(-1, keepdims=True) + 1e-5) * g
h = np.tanh((n + bias) * other)
check.close("residual sum", together[0], s, TOLERANCE["f32"])
check.close("fused unit bf16 output", dequantize(together[1], "bf16"), h, TOLERANCE["bf16"])
check.equal("bf16 output travels as raw bits", together[1].dtype, np.dtype(np.uint16))
check.finish()

# A function that returns one value twice and an argument as it is runs
# through the CPU pipeline (fff-run) with every result right; before
# fff-fresh-result-buffers, bufferization refused it on the CPU and crashed
# on the GPU (emulated run: test/Runtime/emulated-linalg-kernels.py).
#
# REQUIRES: numpy
# RUN: %python %s | FileCheck %s
# CHECK: all 3 checks passed

import numpy as np

from fffcheck import TOLERANCE, Checker, run

MLIR = """
func.func @returns(%x: tensor<?x6xf32>, %a: tensor<?x6xf32>)
    -> (tensor<?x6xf32>, tensor<?x6xf32>, tensor<?x6xf32>) {
  %h = arith.addf %x, %a : tensor<?x6xf32>
  return %h, %h, %x : tensor<?x6xf32>, tensor<?x6xf32>, tensor<?x6xf32>
}
"""
rng = np.random.default_rng(7)
x = rng.standard_normal((5, 6)).astype(np.float32)
a = rng.standard_normal((5, 6)).astype(np.float32)
first, second, argument = run(MLIR, "returns", [x, a], 3)
check = Checker()
expected = x.astype(np.float64) + a
check.close("first return of x + a", first, expected, TOLERANCE["f32"])
check.close("second return of x + a", second, expected, TOLERANCE["f32"])
check.close("the argument returned as it is", argument, x, TOLERANCE["f32"])
check.finish()

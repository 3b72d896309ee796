# fff-run --huge-pages (the CPU pipeline's huge-pages option): a result of
# 32 MiB, which then comes from the module's own huge-page allocation
# function, holds the same bits as one from malloc, and matches a float64
# numpy reference.
#
# REQUIRES: numpy
# RUN: %python %s | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import numpy as np

from fffcheck import TOLERANCE, Checker, run

rng = np.random.default_rng(3)
check = Checker()
rows, hidden = 4096, 2048  # 32 MiB of f32: the smallest buffer on huge pages
x = (rng.standard_normal((rows, hidden)) * 3 + 1).astype(np.float32)
gamma = rng.standard_normal(hidden).astype(np.float32)
t, p = f"tensor<?x{hidden}xf32>", f"tensor<{hidden}xf32>"
mlir = f"func.func @f(%x: {t}, %g: {p}) -> {t} {{\n  %y = fff.rms_norm %x scale(%g : {p}) : {t}\n  return %y : {t}\n}}"

(huge,) = run(mlir, "f", [x, gamma], 1, extra_flags=["--huge-pages"])
(plain,) = run(mlir, "f", [x, gamma], 1)
x64 = x.astype(np.float64)
reference = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-5) * gamma
check.close("rms_norm 4096x2048 f32 on huge pages", huge, reference, TOLERANCE["f32"])
check.equal("the same bits as from malloc", huge, plain)
check.finish()

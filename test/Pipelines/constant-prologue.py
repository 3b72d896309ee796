# A fused unit whose elementwise prologue yields a constant from outside its
# body (found by scripts/fff-fuzz.py, seed 20261130, mutant 1583): both
# pipelines and the GPU twin used to crash looking the yielded value up
# among the body's. The result matches numpy through the vector norms, the
# scalar reference, the GPU kernel's CPU twin, and the GPU kernel itself on
# fff's PTX emulator (an AOT library).
#
# REQUIRES: numpy
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %emulator %fff_src_root/scripts/fff-aot.sh %t | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import os
import subprocess
import sys

import numpy as np

import emulated
from fffcheck import FFF_OPT, TOLERANCE, Checker, run

emulator, aot, work = sys.argv[1:]
os.environ["FFF_CUDA_DRIVER"] = emulator

MLIR = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @f(%x: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.5 : f32
  %n = tensor.dim %x, %c0 : tensor<?x32xf32>
  %e = tensor.empty(%n) : tensor<?x32xf32>
  %up = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x32xf32>) outs(%e : tensor<?x32xf32>) {
  ^bb0(%v: f32, %out: f32):
    linalg.yield %two : f32
  } -> tensor<?x32xf32>
  %e1 = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?xf32>) -> tensor<?xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%up : tensor<?x32xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%up, %ss : tensor<?x32xf32>, tensor<?xf32>) outs(%e : tensor<?x32xf32>) {
  ^bb0(%v: f32, %q: f32, %out: f32):
    %inv = arith.constant 0.03125 : f32
    %eps = arith.constant 1.0e-6 : f32
    %ms = arith.mulf %q, %inv : f32
    %a = arith.addf %ms, %eps : f32
    %rs = math.rsqrt %a : f32
    %o = arith.mulf %v, %rs : f32
    linalg.yield %o : f32
  } -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}
"""

check = Checker()
for pipeline in ("--fff-gpu-pipeline", "--fff-cpu-pipeline=gpu-twin"):
    proc = subprocess.run([FFF_OPT, pipeline, "-"], input=MLIR, capture_output=True, text=True)
    check.equal(f"{pipeline} lowers it (exit {proc.returncode}: {proc.stderr.strip()[:200]})", proc.returncode, 0)

x = np.random.default_rng(5).standard_normal((7, 32)).astype(np.float32)
expected = np.full((7, 32), 2.5 / np.sqrt(2.5**2 + 1e-6))
for flags in ([], ["--reference"], ["--gpu-twin"]):
    (y,) = run(MLIR, "f", [x], 1, extra_flags=flags)
    check.close(f"fff-run {' '.join(flags) or '(vector norms)'}", y, expected, TOLERANCE["f32"])

device = emulated.Device(emulator)
library = emulated.build(aot, work, "constant_prologue", [MLIR])
(y,) = emulated.call(device, library, "f", [x], [((7, 32), np.float32)])
check.close("the GPU kernel on the PTX emulator", y, expected, TOLERANCE["f32"])
check.finish()

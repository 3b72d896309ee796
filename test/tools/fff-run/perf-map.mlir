// fff-run --perf-map names the compiled functions for perf: the entry, its
// C wrapper, and the threaded loop's outlined body, each a line of start,
// size and name, the sizes from each start to the next.
//
// REQUIRES: numpy
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; np.save('%t/x.npy', np.ones((4096, 64), np.float32))"
// RUN: fff-run %s -e norm --arg %t/x.npy --out %t/y.npy --threads 2 --perf-map 2> %t/log
// RUN: FileCheck %s --check-prefix=LOG < %t/log
// RUN: %python %fff_src_root/test/Inputs/perf_map.py %t/log print | FileCheck %s
// RUN: %python %fff_src_root/test/Inputs/perf_map.py %t/log remove
// LOG: fff-run: wrote /tmp/perf-{{[0-9]+}}.map
// CHECK-DAG: {{^[0-9a-f]+ [0-9a-f]+ norm$}}
// CHECK-DAG: {{^[0-9a-f]+ [0-9a-f]+ _mlir_ciface_norm$}}
// CHECK-DAG: {{^[0-9a-f]+ [0-9a-f]+ parallel_compute_fn}}

func.func @norm(%x: tensor<4096x64xf32>) -> tensor<4096x64xf32> {
  %y = fff.rms_norm %x {epsilon = 1.0e-5 : f32} : tensor<4096x64xf32>
  return %y : tensor<4096x64xf32>
}

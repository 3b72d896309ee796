// tree_ffn_grad has no GPU kernel yet: the GPU conversion stops with a
// one-line error that names the op and the pipeline that runs it; with
// cpu-twin, it is left for the CPU path.
//
// RUN: not fff-opt %s --convert-fff-to-gpu 2>&1 | FileCheck %s
// RUN: fff-opt %s --convert-fff-to-gpu=cpu-twin | FileCheck %s --check-prefix=TWIN

// CHECK: tree-ffn-grad-refusal.mlir:[[# @LINE + 4]]:21: error: 'fff.tree_ffn_grad' op has no GPU lowering yet; use --fff-cpu-pipeline
// TWIN-LABEL: func.func @tree_ffn_grad
// TWIN:         fff.tree_ffn_grad
func.func @tree_ffn_grad(%dy: tensor<?x4xf32>, %x: tensor<?x8xf32>, %wi: tensor<2x3x8xf32>, %wo: tensor<2x3x4xf32>) -> tensor<?x8xf32> {
  %dx, %dwi, %dwo = fff.tree_ffn_grad %dy, %x, %wi, %wo {depth = 1 : i64} : tensor<?x4xf32>, tensor<?x8xf32>, tensor<2x3x8xf32>, tensor<2x3x4xf32>
  return %dx : tensor<?x8xf32>
}

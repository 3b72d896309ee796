// The GPU pipeline lowers a module completely or fails with an error that
// names the op left over; it never exits 0 with host code half lowered,
// and never crashes.
//
// RUN: not fff-opt %s --allow-unregistered-dialect --fff-gpu-pipeline --split-input-file 2>&1 | FileCheck %s
// RUN: fff-opt %s --allow-unregistered-dialect --convert-fff-to-gpu --split-input-file | FileCheck %s --check-prefix=CONVERTED
// RUN: not fff-opt %fff_src_root/test/Dialect/FFF/ops.mlir --allow-unregistered-dialect --fff-gpu-pipeline 2>&1 | FileCheck %s --check-prefix=OPS

// A row reduction outside fff ops (it exited 0 with linalg ops left in
// llvm.func before).
// CHECK: error: 'linalg.fill' op was not lowered by fff-gpu-pipeline: fff cannot compile it yet
func.func @row_sum(%x: tensor<?x8xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %rows = tensor.dim %x, %c0 : tensor<?x8xf32>
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty(%rows) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<?xf32>) -> tensor<?xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                         iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x8xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %sum : tensor<?xf32>
}

// -----

// An op of an unregistered dialect next to an fff op (a segfault in the GPU
// conversion before): the fff op gets its kernel, and the other op stops
// the pipeline.
// CONVERTED-LABEL: func.func @unregistered
// CONVERTED:         "foo.bar"
// CONVERTED:         gpu.launch_func @fff_kernels::@rms_norm_f32_8_warp_per_row
// CHECK: gpu-pipeline-refusals.mlir:[[# @LINE + 2]]:8: error: op was not bufferized
func.func @unregistered(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = "foo.bar"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %z = fff.rms_norm %y : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// The dialect's own op tests, with their unregistered ops (a segfault
// before); their dynamic tree count has no kernel.
// OPS: error: 'fff.tree_ffn' op has no GPU kernel for a dynamic number of trees; use --fff-cpu-pipeline

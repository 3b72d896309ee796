// The GPU pipeline lowers a module completely or fails with an error that
// names the op left over; it never exits 0 with host code half lowered,
// and never crashes.
//
// RUN: not fff-opt %s --allow-unregistered-dialect --fff-gpu-pipeline --split-input-file 2>&1 | FileCheck %s
// RUN: fff-opt %s --allow-unregistered-dialect --convert-fff-to-gpu --split-input-file | FileCheck %s --check-prefix=CONVERTED
// RUN: not fff-opt %fff_src_root/test/Dialect/FFF/ops.mlir --allow-unregistered-dialect --fff-gpu-pipeline 2>&1 | FileCheck %s --check-prefix=OPS

// Host code that reads a tensor's element (to branch on it, here) would
// read device memory on the CPU: refused, naming the op. (A module with
// only linalg work compiles: see gpu-pipeline-whole-modules.mlir.)
// CHECK: gpu-pipeline-refusals.mlir:[[# @LINE + 5]]:8: error: 'memref.load' op accesses buffer elements in host code, but the GPU pipeline keeps buffers in device memory
func.func @element_on_host(%x: tensor<?x8xf32>, %i: index) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %y = arith.addf %x, %x : tensor<?x8xf32>
  %e = tensor.extract %y[%i, %c0] : tensor<?x8xf32>
  %positive = arith.cmpf ogt, %e, %zero : f32
  %r = scf.if %positive -> tensor<?x8xf32> {
    scf.yield %y : tensor<?x8xf32>
  } else {
    scf.yield %x : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

// A linalg body calling a function has no kernel.
// CHECK: gpu-pipeline-refusals.mlir:[[# @LINE + 4]]:8: error: 'linalg.generic' op cannot become a GPU kernel: its body holds 'func.call', which has no GPU lowering
func.func private @scale(f32) -> f32
func.func @call_in_body(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = func.call @scale(%a) : (f32) -> f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %y : tensor<8xf32>
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


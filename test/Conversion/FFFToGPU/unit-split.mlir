// A fused norm unit that the fused norm kernel cannot take (here its
// prologue reads a 0-d tensor: Gemma's embeddings * sqrt(hidden)) is split
// back, with a remark that says why: the norm becomes a kernel of its own
// and the prologue an ordinary elementwise kernel. The module lowers whole.
// RUN: fff-opt %s --convert-fff-to-gpu --verify-diagnostics | FileCheck %s
// RUN: fff-opt %s --fff-gpu-pipeline 2>&1 | FileCheck %s --check-prefix=PIPELINE

// CHECK-LABEL: func.func @scaled_rms_norm
// CHECK-NOT:     fff.fusion
// CHECK:         linalg.generic
// CHECK:         gpu.launch_func @{{.*}}rms_norm
// CHECK-NOT:     fff.rms_norm

// PIPELINE:      remark: runs as separate kernels
// PIPELINE-NOT:  error
// PIPELINE:      gpu.binary
#vec = affine_map<(d0) -> (d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>
func.func @scaled_rms_norm(%x: tensor<4x16xf32>, %c: tensor<f32>, %g: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %e = tensor.empty() : tensor<4x16xf32>
  // expected-remark @+1 {{runs as separate kernels: the fused norm kernel does not take an input that is neither a row tensor nor a per-column parameter}}
  %r:2 = fff.fusion ins(%x, %c, %e, %g : tensor<4x16xf32>, tensor<f32>, tensor<4x16xf32>, tensor<16xf32>) {
  ^bb0(%a: tensor<4x16xf32>, %s: tensor<f32>, %o: tensor<4x16xf32>, %w: tensor<16xf32>):
    %scaled = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel", "parallel"]}
        ins(%a, %s : tensor<4x16xf32>, tensor<f32>) outs(%o : tensor<4x16xf32>) {
    ^bb0(%v: f32, %k: f32, %out: f32):
      %m = arith.mulf %v, %k : f32
      linalg.yield %m : f32
    } -> tensor<4x16xf32>
    %y = fff.rms_norm %scaled scale(%w : tensor<16xf32>) {epsilon = 1.0e-6 : f32} : tensor<4x16xf32>
    fff.yield %scaled, %y : tensor<4x16xf32>, tensor<4x16xf32>
  } -> tensor<4x16xf32>, tensor<4x16xf32>
  return %r#0, %r#1 : tensor<4x16xf32>, tensor<4x16xf32>
}


// A prologue that reads an i1 mask: a buffer of i1 holds a byte an element,
// a vector of i1 a bit a lane, so the kernel's vector loads would misread
// it. The unit is split back; the select becomes an elementwise kernel.
// CHECK-LABEL: func.func @masked_layer_norm
// CHECK-NOT:     fff.fusion
// CHECK:         gpu.launch_func @{{.*}}layer_norm
func.func @masked_layer_norm(%x: tensor<4x16xf32>, %keep: tensor<4x16xi1>) -> tensor<4x16xf32> {
  // expected-remark @+1 {{runs as separate kernels: the fused norm kernel does not take an input or result of i1 (a byte an element in memory, a bit a lane in a vector)}}
  %r = fff.fusion ins(%x, %keep : tensor<4x16xf32>, tensor<4x16xi1>) {
  ^bb0(%a: tensor<4x16xf32>, %k: tensor<4x16xi1>):
    %zero = arith.constant dense<0.0> : tensor<4x16xf32>
    %masked = arith.select %k, %a, %zero : tensor<4x16xi1>, tensor<4x16xf32>
    %y = fff.layer_norm %masked : tensor<4x16xf32>
    fff.yield %y : tensor<4x16xf32>
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

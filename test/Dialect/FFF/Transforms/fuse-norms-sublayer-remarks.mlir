// RUN: fff-opt %s --fff-fuse-norms --split-input-file --verify-diagnostics | FileCheck %s

// Where a norm is next to a tree layer but the two cannot be one unit,
// fff-fuse-norms says why, and both stay outside any sublayer unit.

// An op outside the unit (the matmul) reads the norm's result, and its
// result is used inside the unit, between the norm and the residual add.
// CHECK-LABEL: func @op_in_between
// CHECK-NOT:     fff.fusion
// CHECK:         fff.tree_ffn
func.func @op_in_between(%x: tensor<4x16xf32>, %w: tensor<16x16xf32>, %acc: tensor<4x16xf32>,
                         %wi: tensor<1x3x16xf32>, %wo: tensor<1x3x16xf32>) -> tensor<4x16xf32> {
  %n = fff.rms_norm %x : tensor<4x16xf32>
  %p = linalg.matmul ins(%n, %w : tensor<4x16xf32>, tensor<16x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %s = arith.addf %n, %p : tensor<4x16xf32>
  // expected-remark @+1 {{not fused with the rms_norm before it: an op outside the unit needs one of its values between the two}}
  %t = fff.tree_ffn %n, %wi, %wo {depth = 1 : i64} : tensor<4x16xf32>, tensor<1x3x16xf32>, tensor<1x3x16xf32>
  %y = arith.addf %s, %t : tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// The tree layer is in another block than its norm.
// CHECK-LABEL: func @different_blocks
// CHECK-NOT:     fff.fusion
// CHECK:         scf.if
// CHECK:           fff.tree_ffn
func.func @different_blocks(%x: tensor<4x16xf32>, %c: i1, %wi: tensor<1x3x16xf32>, %wo: tensor<1x3x16xf32>) -> tensor<4x16xf32> {
  %n = fff.rms_norm %x : tensor<4x16xf32>
  %y = scf.if %c -> tensor<4x16xf32> {
    // expected-remark @+1 {{not fused with the rms_norm before it: they are in different blocks}}
    %t = fff.tree_ffn %n, %wi, %wo {depth = 1 : i64} : tensor<4x16xf32>, tensor<1x3x16xf32>, tensor<1x3x16xf32>
    scf.yield %t : tensor<4x16xf32>
  } else {
    scf.yield %n : tensor<4x16xf32>
  }
  return %y : tensor<4x16xf32>
}

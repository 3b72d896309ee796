// RUN: fff-opt %s --fff-outline-ops --split-input-file | FileCheck %s

// Identical ops share one private function; an op that differs in any
// attribute or type gets its own; a unit is outlined whole.
// CHECK-LABEL: func.func @layers
// CHECK-SAME:    (%[[X:.*]]: tensor<?x64xf32>, %[[A:.*]]: tensor<?x64xf32>)
// CHECK:         %[[N0:.*]] = call @fff_rms_norm(%[[X]]) : (tensor<?x64xf32>) -> tensor<?x64xf32>
// CHECK:         %[[N1:.*]] = call @fff_rms_norm(%[[N0]])
// CHECK:         %[[N2:.*]] = call @fff_rms_norm_0(%[[N1]])
// CHECK:         %[[N3:.*]] = call @fff_rms_norm_1(%{{.*}}) : (tensor<4x64xf32>) -> tensor<4x64xf32>
// CHECK:         %[[U:.*]] = call @fff_fused_layer_norm(%[[N2]], %[[A]])
// CHECK:         return %[[U]], %[[N3]]
// CHECK:       func.func private @fff_rms_norm(%[[ARG:.*]]: tensor<?x64xf32>) -> tensor<?x64xf32>
// CHECK-NEXT:    %[[Y:.*]] = fff.rms_norm %[[ARG]] : tensor<?x64xf32>
// CHECK-NEXT:    return %[[Y]]
// CHECK:       func.func private @fff_rms_norm_0
// CHECK-NEXT:    fff.rms_norm %{{.*}} {epsilon = 1.000000e-03 : f32}
// CHECK:       func.func private @fff_rms_norm_1
// CHECK:       func.func private @fff_fused_layer_norm(%{{.*}}: tensor<?x64xf32>, %{{.*}}: tensor<?x64xf32>) -> tensor<?x64xf32>
// CHECK-NEXT:    fff.fusion
// CHECK:           fff.layer_norm
// CHECK:           fff.yield
func.func @layers(%x: tensor<?x64xf32>, %a: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<4x64xf32>) {
  %n0 = fff.rms_norm %x : tensor<?x64xf32>
  %n1 = fff.rms_norm %n0 : tensor<?x64xf32>
  %n2 = fff.rms_norm %n1 {epsilon = 1.0e-3 : f32} : tensor<?x64xf32>
  %s = tensor.extract_slice %n2[0, 0] [4, 64] [1, 1] : tensor<?x64xf32> to tensor<4x64xf32>
  %n3 = fff.rms_norm %s : tensor<4x64xf32>
  %u = fff.fusion ins(%n2, %a : tensor<?x64xf32>, tensor<?x64xf32>) {
  ^bb0(%p: tensor<?x64xf32>, %q: tensor<?x64xf32>):
    %h = arith.addf %p, %q : tensor<?x64xf32>
    %l = fff.layer_norm %h : tensor<?x64xf32>
    fff.yield %l : tensor<?x64xf32>
  } -> tensor<?x64xf32>
  return %u, %n3 : tensor<?x64xf32>, tensor<4x64xf32>
}

// -----

// A function already named like an outlined one keeps its name.
// CHECK-LABEL: func.func @fff_tree_ffn
// CHECK:         call @fff_tree_ffn_0
// CHECK:       func.func private @fff_tree_ffn_0
func.func @fff_tree_ffn(%x: tensor<2x8xf32>, %w: tensor<1x3x8xf32>) -> tensor<2x8xf32> {
  %y = fff.tree_ffn %x, %w, %w {depth = 1 : i64} : tensor<2x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>
  return %y : tensor<2x8xf32>
}

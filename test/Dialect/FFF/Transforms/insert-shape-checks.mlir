// RUN: fff-opt %s --fff-insert-shape-checks --split-input-file | FileCheck %s

// A dynamic extent is checked against a static one of the same symbol; the
// checks read only arguments, so they run at the function's entry.
// CHECK-LABEL: func.func @scale_against_row
// CHECK-SAME:    (%[[X:.*]]: tensor<?x8xf32>, %[[G:.*]]: tensor<?xf32>)
// CHECK:         %[[D:.*]] = tensor.dim %[[G]], %{{.*}} : tensor<?xf32>
// CHECK:         %[[OK:.*]] = arith.cmpi eq, %[[D]], %c8
// CHECK:         cf.assert %[[OK]], "{{.*}}insert-shape-checks.mlir:{{[0-9]+}}:8: 'fff.layer_norm' op scale dim 0 (D) is not 8, which input dim 1 requires"
// CHECK-NEXT:    fff.layer_norm
func.func @scale_against_row(%x: tensor<?x8xf32>, %g: tensor<?xf32>) -> tensor<?x8xf32> {
  %y = fff.layer_norm %x scale(%g : tensor<?xf32>) : tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// Two dynamic extents are checked against each other, and the first
// against its minimum.
// CHECK-LABEL: func.func @both_dynamic
// CHECK-SAME:    (%[[X:.*]]: tensor<?x?xbf16>, %[[G:.*]]: tensor<?xbf16>)
// CHECK-DAG:     %[[DG:.*]] = tensor.dim %[[G]], %c0
// CHECK-DAG:     %[[DX:.*]] = tensor.dim %[[X]], %c1
// CHECK:         %[[EQ:.*]] = arith.cmpi eq, %[[DG]], %[[DX]]
// CHECK:         cf.assert %[[EQ]], "{{.*}}'fff.rms_norm' op scale dim 0 (D) does not match input dim 1"
// CHECK:         %[[GE:.*]] = arith.cmpi sge, %[[DX]], %c1
// CHECK:         cf.assert %[[GE]], "{{.*}}'fff.rms_norm' op input dim 1 (D) is below 1: there is nothing to normalize over"
func.func @both_dynamic(%x: tensor<?x?xbf16>, %g: tensor<?xbf16>) -> tensor<?x?xbf16> {
  %y = fff.rms_norm %x scale(%g : tensor<?xbf16>) : tensor<?x?xbf16>
  return %y : tensor<?x?xbf16>
}

// -----

// Static extents need nothing at run time.
// CHECK-LABEL: func.func @all_static
// CHECK-NOT:     cf.assert
func.func @all_static(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = fff.rms_norm %x scale(%g : tensor<8xf32>) : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// The depth fixes N; K and Din must agree across the weights and be at
// least 1. The batch B is free.
// CHECK-LABEL: func.func @tree
// CHECK-DAG:     cf.assert %{{.*}}, "{{.*}}'fff.tree_ffn' op w_in dim 2 (Din) does not match input dim 1"
// CHECK-DAG:     cf.assert %{{.*}}, "{{.*}}'fff.tree_ffn' op input dim 1 (Din) is below 1: a tree layer needs an input row"
// CHECK-DAG:     cf.assert %{{.*}}, "{{.*}}'fff.tree_ffn' op w_out dim 0 (K) does not match w_in dim 0"
// CHECK-DAG:     cf.assert %{{.*}}, "{{.*}}'fff.tree_ffn' op w_in dim 0 (K) is below 1: a tree layer needs at least one tree"
// CHECK-DAG:     cf.assert %{{.*}}, "{{.*}}'fff.tree_ffn' op w_in dim 1 (N) is not 15, which depth 3 (N = 2^(depth+1)-1) requires"
// CHECK-DAG:     cf.assert %{{.*}}, "{{.*}}'fff.tree_ffn' op b_in dim 1 (N) is not 15, which depth 3 (N = 2^(depth+1)-1) requires"
// CHECK-DAG:     cf.assert %{{.*}}, "{{.*}}'fff.tree_ffn' op w_out dim 1 (N) is not 15, which depth 3 (N = 2^(depth+1)-1) requires"
// CHECK-DAG:     cf.assert %{{.*}}, "{{.*}}'fff.tree_ffn' op b_out dim 0 (Dout) is not 8, which w_out dim 2 requires"
// CHECK-NOT:     cf.assert
// CHECK:         fff.tree_ffn
func.func @tree(%x: tensor<?x?xf32>, %wi: tensor<?x?x?xf32>, %bi: tensor<?x?xf32>, %wo: tensor<?x?x8xf32>, %bo: tensor<?xf32>) -> tensor<?x8xf32> {
  %y = fff.tree_ffn %x, %wi bias(%bi : tensor<?x?xf32>), %wo bias(%bo : tensor<?xf32>) {depth = 3 : i64}
      : tensor<?x?xf32>, tensor<?x?x?xf32>, tensor<?x?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// CHECK-LABEL: func.func @leaf
// CHECK-DAG:     cf.assert %{{.*}}, "{{.*}}'fff.leaf_tree_ffn' op node_w dim 0 (R) is not 3, which depth 2 (R = 2^depth-1) requires"
// CHECK-DAG:     cf.assert %{{.*}}, "{{.*}}'fff.leaf_tree_ffn' op w1 dim 0 (L) is not 4, which depth 2 (L = 2^depth) requires"
// CHECK-DAG:     cf.assert %{{.*}}, "{{.*}}'fff.leaf_tree_ffn' op b1 dim 1 (W) does not match w1 dim 2"
// CHECK-DAG:     cf.assert %{{.*}}, "{{.*}}'fff.leaf_tree_ffn' op w1 dim 2 (W) is below 1: a leaf needs at least one hidden unit"
// CHECK-DAG:     cf.assert %{{.*}}, "{{.*}}'fff.leaf_tree_ffn' op w2 dim 1 (W) does not match w1 dim 2"
func.func @leaf(%x: tensor<?x8xf32>, %nw: tensor<?x8xf32>, %nb: tensor<3xf32>, %w1: tensor<?x8x?xf32>, %b1: tensor<4x?xf32>, %w2: tensor<4x?x8xf32>, %b2: tensor<4x8xf32>) -> tensor<?x8xf32> {
  %y = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 2 : i64}
      : tensor<?x8xf32>, tensor<?x8xf32>, tensor<3xf32>, tensor<?x8x?xf32>, tensor<4x?xf32>, tensor<4x?x8xf32>, tensor<4x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// A norm inside a fused unit is checked before the unit, on the unit's
// inputs; its input is an elementwise sum inside the unit, with the
// extents of the sum's operands.
// CHECK-LABEL: func.func @fused
// CHECK-SAME:    (%[[A:.*]]: tensor<?x?xf32>, %[[B:.*]]: tensor<?x?xf32>, %[[G:.*]]: tensor<?xf32>)
// CHECK-DAG:     %[[DG:.*]] = tensor.dim %[[G]], %c0
// CHECK-DAG:     %[[DA:.*]] = tensor.dim %[[A]], %c1
// CHECK:         arith.cmpi eq, %[[DG]], %[[DA]]
// CHECK:         cf.assert
// CHECK:         cf.assert
// CHECK:         fff.fusion
// CHECK-NOT:     cf.assert
func.func @fused(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>, %g: tensor<?xf32>) -> tensor<?x?xf32> {
  %0 = fff.fusion ins(%a, %b, %g : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>) {
  ^bb0(%x: tensor<?x?xf32>, %r: tensor<?x?xf32>, %gamma: tensor<?xf32>):
    %s = arith.addf %x, %r : tensor<?x?xf32>
    %n = fff.rms_norm %s scale(%gamma : tensor<?xf32>) : tensor<?x?xf32>
    fff.yield %n : tensor<?x?xf32>
  } -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

// Extents of values computed in the function are checked where the op is,
// after the checks that run at the entry.
// CHECK-LABEL: func.func @computed_input
// CHECK:         cf.assert %{{.*}}, "{{.*}}op scale dim 0 (D) is not 8
// CHECK:         %[[Y:.*]] = tensor.cast
// CHECK:         tensor.dim %[[Y]]
// CHECK:         cf.assert %{{.*}}, "{{.*}}op input dim 1 (D) is below 1
// CHECK-NEXT:    fff.rms_norm %[[Y]]
func.func @computed_input(%x: tensor<?x8xf32>, %g: tensor<?xf32>) -> tensor<?x?xf32> {
  %n = fff.rms_norm %x scale(%g : tensor<?xf32>) : tensor<?x8xf32>
  %y = tensor.cast %n : tensor<?x8xf32> to tensor<?x?xf32>
  %z = fff.rms_norm %y : tensor<?x?xf32>
  return %z : tensor<?x?xf32>
}

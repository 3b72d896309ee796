// RUN: fff-opt %s --fff-fuse-norms --split-input-file | FileCheck %s

// A pre-LN residual: the add before the norm (its sum also returned), then
// the epilogue: bias, a multiply by another tensor, an activation and a
// cast, all in one unit.
// CHECK-LABEL: func @residual_norm_epilogue
// CHECK:         %[[U:.*]]:2 = fff.fusion ins(
// CHECK:           %[[SUM:.*]] = arith.addf
// CHECK:           %[[N:.*]] = fff.rms_norm %[[SUM]]
// CHECK:           linalg.generic {{.*}} ins(%[[N]],
// CHECK:           arith.mulf
// CHECK:           math.tanh
// CHECK:           %[[OUT:.*]] = arith.truncf
// CHECK:           fff.yield %[[SUM]], %[[OUT]] : tensor<?x64xf32>, tensor<?x64xbf16>
// CHECK:         return %[[U]]#0, %[[U]]#1
func.func @residual_norm_epilogue(%x: tensor<?x64xf32>, %res: tensor<?x64xf32>, %g: tensor<64xf32>,
                                  %bias: tensor<64xf32>, %other: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xbf16>) {
  %s = arith.addf %x, %res : tensor<?x64xf32>
  %n = fff.rms_norm %s scale(%g : tensor<64xf32>) : tensor<?x64xf32>
  %c0 = arith.constant 0 : index
  %d = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%d) : tensor<?x64xf32>
  %biased = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                            iterator_types = ["parallel", "parallel"]}
      ins(%n, %bias : tensor<?x64xf32>, tensor<64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %t = arith.addf %a, %b : f32
    linalg.yield %t : f32
  } -> tensor<?x64xf32>
  %m = arith.mulf %biased, %other : tensor<?x64xf32>
  %r = math.tanh %m : tensor<?x64xf32>
  %h = arith.truncf %r : tensor<?x64xf32> to tensor<?x64xbf16>
  return %s, %h : tensor<?x64xf32>, tensor<?x64xbf16>
}

// -----

// Scale/shift with (1 + scale), as adaptive norms write it; constants are
// cloned into the unit rather than passed in.
// CHECK-LABEL: func @modulated_layer_norm
// CHECK:         fff.fusion ins(%arg0, %arg1, %arg2 : tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>)
// CHECK:           arith.constant dense<1.000000e+00>
// CHECK:           fff.layer_norm
// CHECK:           arith.addf
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK:           fff.yield
// CHECK-NOT:     arith.
func.func @modulated_layer_norm(%x: tensor<8x32xf32>, %scale: tensor<8x32xf32>, %shift: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %one = arith.constant dense<1.0> : tensor<8x32xf32>
  %n = fff.layer_norm %x : tensor<8x32xf32>
  %s1 = arith.addf %one, %scale : tensor<8x32xf32>
  %y = arith.mulf %n, %s1 : tensor<8x32xf32>
  %z = arith.addf %y, %shift : tensor<8x32xf32>
  return %z : tensor<8x32xf32>
}

// -----

// Work that is not pointwise over the norm's shape stays outside: a matmul
// consumer, and an elementwise op of another shape. With nothing to fuse,
// the norm stays as it is.
// CHECK-LABEL: func @not_pointwise
// CHECK-NOT:     fff.fusion
// CHECK:         %[[N:.*]] = fff.rms_norm
// CHECK:         linalg.matmul ins(%[[N]]
func.func @not_pointwise(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %acc: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %n = fff.rms_norm %x : tensor<4x16xf32>
  %y = linalg.matmul ins(%n, %w : tensor<4x16xf32>, tensor<16x8xf32>) outs(%acc : tensor<4x8xf32>) -> tensor<4x8xf32>
  %z = arith.addf %y, %acc : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// A value of the unit used by something outside it that the unit's later
// ops also need: forming the unit would move the value after its use, so
// the norm is left unfused.
// CHECK-LABEL: func @use_in_between
// CHECK-NOT:     fff.fusion
func.func @use_in_between(%x: tensor<4x16xf32>, %w: tensor<16x16xf32>, %acc: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %n = fff.rms_norm %x : tensor<4x16xf32>
  %p = linalg.matmul ins(%n, %w : tensor<4x16xf32>, tensor<16x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %z = arith.addf %n, %p : tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// -----

// LLaMA's sublayer: the residual h = x + a feeds the norm and, after a
// matmul of the norm, the next residual add. That add depends on the unit
// through the matmul, so it is dropped from the unit, which keeps the first
// add and the norm and returns both.
// CHECK-LABEL: func @residual_used_after_the_sublayer
// CHECK:         %[[UNIT:.*]]:2 = fff.fusion ins(%arg0, %arg1 :
// CHECK:           %[[H:.*]] = arith.addf
// CHECK:           %[[N:.*]] = fff.rms_norm %[[H]]
// CHECK:           fff.yield %[[H]], %[[N]]
// CHECK:         %[[P:.*]] = linalg.matmul ins(%[[UNIT]]#1
// CHECK:         arith.addf %[[UNIT]]#0, %[[P]]
func.func @residual_used_after_the_sublayer(%x: tensor<4x16xf32>, %a: tensor<4x16xf32>, %w: tensor<16x16xf32>, %acc: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %h = arith.addf %x, %a : tensor<4x16xf32>
  %n = fff.rms_norm %h : tensor<4x16xf32>
  %p = linalg.matmul ins(%n, %w : tensor<4x16xf32>, tensor<16x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  %z = arith.addf %h, %p : tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// -----

// A pre-LN FFN sublayer, h + tree(norm(h)), with the residual add that makes
// h: one unit holding the norm and the tree layer, its weights inputs.
// CHECK-LABEL: func @pre_ln_sublayer
// CHECK:         %[[U:.*]]:2 = fff.fusion ins(%arg0, %arg1, %arg2, %arg3 :
// CHECK:           %[[H:.*]] = arith.addf
// CHECK:           %[[N:.*]] = fff.layer_norm %[[H]]
// CHECK:           %[[T:.*]] = fff.tree_ffn %[[N]],
// CHECK:           %[[Y:.*]] = arith.addf %[[H]], %[[T]]
// CHECK:           fff.yield %[[H]], %[[Y]]
// CHECK:         return %[[U]]#0, %[[U]]#1
func.func @pre_ln_sublayer(%x: tensor<?x16xf32>, %a: tensor<?x16xf32>, %wi: tensor<1x7x16xf32>, %wo: tensor<1x7x16xf32>)
    -> (tensor<?x16xf32>, tensor<?x16xf32>) {
  %h = arith.addf %x, %a : tensor<?x16xf32>
  %n = fff.layer_norm %h : tensor<?x16xf32>
  %t = fff.tree_ffn %n, %wi, %wo {depth = 2 : i64} : tensor<?x16xf32>, tensor<1x7x16xf32>, tensor<1x7x16xf32>
  %y = arith.addf %h, %t : tensor<?x16xf32>
  return %h, %y : tensor<?x16xf32>, tensor<?x16xf32>
}

// -----

// A post-LN sublayer, as BERT writes it: norm(h + tree(h)).
// CHECK-LABEL: func @post_ln_sublayer
// CHECK:         %[[U:.*]] = fff.fusion ins(%arg0,
// CHECK:           %[[T:.*]] = fff.leaf_tree_ffn %{{.*}},
// CHECK:           %[[S:.*]] = arith.addf %{{.*}}, %[[T]]
// CHECK:           %[[N:.*]] = fff.rms_norm %[[S]]
// CHECK:           fff.yield %[[N]]
// CHECK:         return %[[U]]
func.func @post_ln_sublayer(%h: tensor<?x16xf32>, %nw: tensor<1x16xf32>, %nb: tensor<1xf32>,
                            %w1: tensor<2x16x4xf32>, %b1: tensor<2x4xf32>,
                            %w2: tensor<2x4x16xf32>, %b2: tensor<2x16xf32>) -> tensor<?x16xf32> {
  %t = fff.leaf_tree_ffn %h, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 1 : i64}
         : tensor<?x16xf32>, tensor<1x16xf32>, tensor<1xf32>, tensor<2x16x4xf32>, tensor<2x4xf32>,
           tensor<2x4x16xf32>, tensor<2x16xf32>
  %s = arith.addf %h, %t : tensor<?x16xf32>
  %n = fff.rms_norm %s : tensor<?x16xf32>
  return %n : tensor<?x16xf32>
}

// RUN: fff-opt %s --convert-fff-to-loops --split-input-file | FileCheck %s

// Layer norm: a pivot per row, the sum of x - pivot, the shift to the mean,
// the sum of squared deviations (x - pivot) - shift, per row rstd and the
// offset -shift * rstd, then one elementwise op that widens, takes
// fma(x - pivot, rstd, offset), applies gamma and beta and narrows back to
// bf16; the mean it returns is pivot + shift.
// CHECK-DAG:   #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[ROW:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG:   #[[COL:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG:   #[[PIVOT:.*]] = affine_map<(d0) -> (d0, 0)>
// CHECK-LABEL: func @layer_norm
// CHECK-NOT:     fff.
// CHECK:         %[[PIV:.*]] = linalg.generic {indexing_maps = [#[[PIVOT]], {{.*}}], iterator_types = ["parallel"]}
// CHECK:         %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}}, %[[PIV]] : tensor<?x768xbf16>, tensor<?xf32>)
// CHECK:           arith.extf {{.*}} : bf16 to f32
// CHECK:           arith.subf
// CHECK:         %[[SHIFT:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<?xf32>)
// CHECK:         %[[SQ:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}}, %[[PIV]], %[[SHIFT]] : tensor<?x768xbf16>, tensor<?xf32>, tensor<?xf32>)
// CHECK:           %[[FROM_PIVOT:.*]] = arith.subf %{{.*}}, %{{.*}} : f32
// CHECK:           arith.subf %[[FROM_PIVOT]], %{{.*}} : f32
// CHECK:         %[[RSTD:.*]] = linalg.generic {{.*}} ins(%[[SQ]] : tensor<?xf32>)
// CHECK:           math.rsqrt
// CHECK:         %[[OFFSET:.*]] = linalg.generic {{.*}} ins(%[[SHIFT]], %[[RSTD]] : tensor<?xf32>, tensor<?xf32>)
// CHECK:           arith.negf
// CHECK:         linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ROW]], #[[ROW]], #[[COL]], #[[COL]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%{{.*}}, %[[PIV]], %[[RSTD]], %[[OFFSET]], %{{.*}}, %{{.*}} : tensor<?x768xbf16>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<768xbf16>, tensor<768xbf16>) outs(%{{.*}} : tensor<?x768xbf16>)
// CHECK:           math.fma
// CHECK:           arith.truncf {{.*}} : f32 to bf16
// CHECK:         %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[PIV]], %[[SHIFT]] : tensor<?xf32>, tensor<?xf32>)
// CHECK:         tensor.expand_shape %[[MEAN]] {{\[\[}}0, 1]] output_shape [%{{.*}}, 1] : tensor<?xf32> into tensor<?x1xf32>
// CHECK:         tensor.expand_shape %[[RSTD]] {{\[\[}}0, 1]] output_shape [%{{.*}}, 1] : tensor<?xf32> into tensor<?x1xf32>
func.func @layer_norm(%x: tensor<?x768xbf16>, %g: tensor<768xbf16>, %b: tensor<768xbf16>)
    -> (tensor<?x768xbf16>, tensor<?x1xf32>, tensor<?x1xf32>) {
  %y, %mean, %rstd = fff.layer_norm %x scale(%g : tensor<768xbf16>) bias(%b : tensor<768xbf16>) return_stats : tensor<?x768xbf16>
  return %y, %mean, %rstd : tensor<?x768xbf16>, tensor<?x1xf32>, tensor<?x1xf32>
}

// -----

// RMS norm over two dims: one reduction, one elementwise op, f32 throughout.
// CHECK-LABEL: func @rms_norm
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "reduction", "reduction"]} ins(%{{.*}} : tensor<?x4x8xf32>) outs(%{{.*}} : tensor<?xf32>)
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-NOT:       arith.extf
// CHECK:           math.rsqrt
// CHECK-NOT:     linalg.generic
// CHECK:         return
func.func @rms_norm(%x: tensor<?x4x8xf32>) -> tensor<?x4x8xf32> {
  %y = fff.rms_norm %x normalized_rank 2 : tensor<?x4x8xf32>
  return %y : tensor<?x4x8xf32>
}

// -----

// tree_ffn: rows x trees x levels, a dot product per level, the y update, and
// the branch `logit > 0` (exactly zero goes left). The rows are split across
// threads (scf.parallel) from 2^19 multiply-adds, else looped over in one.
// CHECK-LABEL: func @tree_ffn
// CHECK:         bufferization.to_buffer %{{.*}} read_only : tensor<?x8xf16> to memref<?x8xf16>
// CHECK:         %[[ACC:.*]] = memref.alloc(%{{.*}}) : memref<?x4xf32>
// CHECK:         %[[LARGE:.*]] = arith.cmpi uge, %{{.*}}, %c524288
// CHECK:         scf.if %[[LARGE]] {
// CHECK:           scf.parallel
// CHECK:         } else {
// CHECK:         scf.for %[[ROW:.*]] =
// CHECK:           scf.for %[[TREE:.*]] =
// CHECK:             scf.for {{.*}} iter_args(%[[NODE:.*]] = %{{.*}}) -> (index)
// CHECK:               %[[LOGIT:.*]] = scf.for {{.*}} -> (f32)
// CHECK:               math.erf
// CHECK:               scf.for
// CHECK:                 memref.store {{.*}}, %[[ACC]][%[[ROW]], %{{.*}}] : memref<?x4xf32>
// CHECK:               arith.cmpf ogt, %{{.*}}, %{{.*}} : f32
// CHECK:         arith.truncf {{.*}} : f32 to f16
// CHECK:         bufferization.to_tensor %{{.*}} restrict writable : memref<?x4xf16> to tensor<?x4xf16>
func.func @tree_ffn(%x: tensor<?x8xf16>, %wi: tensor<2x3x8xf16>, %bi: tensor<2x3xf16>, %wo: tensor<2x3x4xf16>) -> tensor<?x4xf16> {
  %y = fff.tree_ffn %x, %wi bias(%bi : tensor<2x3xf16>), %wo {depth = 1 : i64} : tensor<?x8xf16>, tensor<2x3x8xf16>, tensor<2x3x4xf16>
  return %y : tensor<?x4xf16>
}

// -----

// zero_goes_right: the branch is `logit >= 0`, forward and backward.
// CHECK-LABEL: func @zero_goes_right
// CHECK:         arith.cmpf oge, %{{.*}}, %{{.*}} : f32
// CHECK-NOT:     arith.cmpf ogt
// CHECK:         arith.cmpf oge, %{{.*}}, %{{.*}} : f32
// CHECK-NOT:     arith.cmpf ogt
func.func @zero_goes_right(%x: tensor<?x8xf32>, %wi: tensor<1x3x8xf32>, %wo: tensor<1x3x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %y = fff.tree_ffn %x, %wi, %wo {depth = 1 : i64, zero_goes_right} : tensor<?x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>
  %dx, %dwi, %dwo = fff.tree_ffn_grad %y, %x, %wi, %wo {depth = 1 : i64, zero_goes_right} : tensor<?x8xf32>, tensor<?x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>
  return %y, %dx : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// tree_ffn_grad: (1) each row walks its trees again (the logit, act and
// act' of it, dy . w_out), records its visit's node, dl and act(l), adds
// into its dx row, and branches on `logit > 0`; (2) a counting sort of each
// tree's visits by node, which copies each visit's row, dl and act(l) into
// grouped order; (3) a loop over column slabs of dw_in and dw_out
// (threaded), each summing, per node, its visits' terms in row order. Then
// db_in and db_out, and every gradient narrowed to bf16.
// CHECK-LABEL: func @tree_ffn_grad
// CHECK:         %[[NODES:.*]] = memref.alloc(%{{.*}}) : memref<?xindex>
// CHECK:         %[[SLOPES:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK:         %[[ACTS:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK:         %[[DX:.*]] = memref.alloc(%{{.*}}) : memref<?x8xf32>
// CHECK:         scf.parallel (%[[ROW:.*]]) =
// CHECK:           scf.for {{.*}} iter_args(%[[NODE:.*]] = %{{.*}}) -> (index)
// CHECK:             scf.for {{.*}} -> (f32)
// CHECK:             math.erf
// CHECK:             math.exp
// CHECK:             scf.for {{.*}} -> (f32)
// CHECK:             memref.store %[[NODE]], %[[NODES]]
// CHECK:             memref.store %{{.*}}, %[[SLOPES]]
// CHECK:             memref.store %{{.*}}, %[[ACTS]]
// CHECK:             memref.store %{{.*}}, %[[DX]][%[[ROW]], %{{.*}}] : memref<?x8xf32>
// CHECK:             arith.cmpf ogt
// CHECK:         %[[STARTS:.*]] = memref.alloc(%{{.*}}) : memref<?xindex>
// CHECK:         %[[MEMBERS:.*]] = memref.alloc(%{{.*}}) : memref<?xindex>
// CHECK:         %[[MEMBER_ROWS:.*]] = memref.alloc(%{{.*}}) : memref<?xindex>
// CHECK:         %[[MEMBER_SLOPES:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK:         %[[MEMBER_ACTS:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK:         memref.store %{{.*}}, %[[MEMBERS]]
// CHECK:         memref.store %{{.*}}, %[[MEMBER_ROWS]]
// CHECK:         %[[SLOPE:.*]] = memref.load %[[SLOPES]]
// CHECK:         memref.store %[[SLOPE]], %[[MEMBER_SLOPES]]
// CHECK:         %[[ACT:.*]] = memref.load %[[ACTS]]
// CHECK:         memref.store %[[ACT]], %[[MEMBER_ACTS]]
// CHECK:         %[[DWIN:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x3x8xf32>
// CHECK:         %[[DWOUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x3x4xf32>
// CHECK:         arith.ceildivui %{{.*}}, %c64
// CHECK:         scf.parallel
// CHECK:           scf.if
// CHECK:             memref.load %[[STARTS]]
// CHECK:             scf.for
// CHECK:               memref.load %[[MEMBER_ROWS]]
// CHECK:               memref.load %[[MEMBER_SLOPES]]
// CHECK:               memref.store %{{.*}}, %[[DWIN]]
// CHECK:           } else {
// CHECK:               memref.load %[[MEMBER_ACTS]]
// CHECK:               memref.store %{{.*}}, %[[DWOUT]]
// CHECK:         arith.truncf {{.*}} : f32 to bf16
// CHECK:         bufferization.to_tensor %{{.*}} restrict writable : memref<?x8xbf16> to tensor<?x8xbf16>
// CHECK:         bufferization.to_tensor %{{.*}} restrict writable : memref<2x3x8xbf16> to tensor<2x3x8xbf16>
// CHECK:         bufferization.to_tensor %{{.*}} restrict writable : memref<2x3x4xbf16> to tensor<2x3x4xbf16>
// CHECK:         bufferization.to_tensor %{{.*}} restrict writable : memref<2x3xbf16> to tensor<2x3xbf16>
// CHECK:         bufferization.to_tensor %{{.*}} restrict writable : memref<4xbf16> to tensor<4xbf16>
func.func @tree_ffn_grad(%dy: tensor<?x4xbf16>, %x: tensor<?x8xbf16>, %wi: tensor<2x3x8xbf16>, %bi: tensor<2x3xbf16>,
                         %wo: tensor<2x3x4xbf16>)
    -> (tensor<?x8xbf16>, tensor<2x3x8xbf16>, tensor<2x3x4xbf16>, tensor<2x3xbf16>, tensor<4xbf16>) {
  %dx, %dwi, %dwo, %dbi, %dbo = fff.tree_ffn_grad %dy, %x, %wi bias(%bi : tensor<2x3xbf16>), %wo bias_grad {depth = 1 : i64}
         : tensor<?x4xbf16>, tensor<?x8xbf16>, tensor<2x3x8xbf16>, tensor<2x3x4xbf16>
  return %dx, %dwi, %dwo, %dbi, %dbo : tensor<?x8xbf16>, tensor<2x3x8xbf16>, tensor<2x3x4xbf16>, tensor<2x3xbf16>, tensor<4xbf16>
}

// -----

// leaf_tree_ffn: `depth` routing steps with `score >= 0`, then the leaf MLP.
// CHECK-LABEL: func @leaf_tree_ffn
// CHECK:         %[[HIDDEN:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK:         scf.for
// CHECK:           %[[NODE:.*]] = scf.for {{.*}} -> (index)
// CHECK:             arith.cmpf oge
// CHECK:           %[[LEAF:.*]] = arith.subi %[[NODE]], %{{.*}} : index
// CHECK:           memref.store {{.*}}, %[[HIDDEN]]
// CHECK:           arith.maximumf
// CHECK:         bufferization.to_tensor %{{.*}} restrict writable : memref<?x5xf32> to tensor<?x5xf32>
func.func @leaf_tree_ffn(%x: tensor<?x8xf32>, %nw: tensor<3x8xf32>, %nb: tensor<3xf32>, %w1: tensor<4x8x2xf32>,
                         %b1: tensor<4x2xf32>, %w2: tensor<4x2x5xf32>, %b2: tensor<4x5xf32>) -> tensor<?x5xf32> {
  %y = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 2 : i64}
         : tensor<?x8xf32>, tensor<3x8xf32>, tensor<3xf32>, tensor<4x8x2xf32>, tensor<4x2xf32>, tensor<4x2x5xf32>, tensor<4x5xf32>
  return %y : tensor<?x5xf32>
}

// -----

// leaf_tree_ffn_grad: (1) a loop over rows (threaded) that routes each row
// with `score >= 0` as the forward does; (2) a counting sort of the rows by
// leaf, and the tiles (a leaf, a first position) cut from it; w1 and w2
// transposed; (3) a loop over the tiles (threaded) that records each row's
// act(pre) and dpre and stores its dx row; (4) a loop over blocks of the
// leaves' dw1 and dw2 rows (threaded), each summing over its leaf's rows,
// the first dw2 block of a leaf also db1 and db2. Then every gradient
// narrowed to bf16.
// CHECK-LABEL: func @leaf_tree_ffn_grad
// CHECK:         %[[LEAF_OF:.*]] = memref.alloc(%{{.*}}) : memref<?xindex>
// CHECK:         scf.parallel (%[[ROW:.*]]) =
// CHECK:           %[[NODE:.*]] = scf.for {{.*}} -> (index)
// CHECK:             arith.cmpf oge
// CHECK:           %[[LEAF:.*]] = arith.subi %[[NODE]], %{{.*}} : index
// CHECK:           memref.store %[[LEAF]], %[[LEAF_OF]][%[[ROW]]]
// CHECK:         %[[STARTS:.*]] = memref.alloc(%{{.*}}) : memref<?xindex>
// CHECK:         %[[MEMBERS:.*]] = memref.alloc(%{{.*}}) : memref<?xindex>
// CHECK:         memref.store %{{.*}}, %[[MEMBERS]]
// CHECK:         %[[TILE_LEAF:.*]] = memref.alloc(%{{.*}}) : memref<?xindex>
// CHECK:         %[[TILE_FIRST:.*]] = memref.alloc(%{{.*}}) : memref<?xindex>
// CHECK:         %[[TILES:.*]] = scf.for {{.*}} -> (index)
// CHECK:         %[[ACT:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x?xf32>
// CHECK:         %[[DPRE:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x?xf32>
// CHECK:         %[[DX:.*]] = memref.alloc(%{{.*}}) : memref<?x8xf32>
// CHECK:         memref.expand_shape {{.*}} into memref<4x?x?xf32>
// CHECK:         memref.expand_shape {{.*}} into memref<4x?x?xf32>
// CHECK:         scf.parallel (%[[TILE:.*]]) = (%{{.*}}) to (%[[TILES]])
// CHECK:           memref.load %[[TILE_LEAF]][%[[TILE]]]
// CHECK:           memref.load %[[TILE_FIRST]][%[[TILE]]]
// CHECK:           memref.store %{{.*}}, %[[ACT]]
// CHECK:           memref.store %{{.*}}, %[[DPRE]]
// CHECK:           math.erf
// CHECK:           memref.store %{{.*}}, %[[DPRE]]
// CHECK:           memref.store %{{.*}}, %[[ACT]]
// CHECK:           memref.store %{{.*}}, %[[DX]]
// CHECK:         %[[DW1:.*]] = memref.alloc() : memref<4x8x2xf32>
// CHECK:         %[[DB1:.*]] = memref.alloc() : memref<4x2xf32>
// CHECK:         %[[DW2:.*]] = memref.alloc() : memref<4x2x5xf32>
// CHECK:         %[[DB2:.*]] = memref.alloc() : memref<4x5xf32>
// CHECK:         scf.parallel
// CHECK:           scf.if
// CHECK:             memref.load %[[STARTS]]
// CHECK:               memref.load %[[MEMBERS]]
// CHECK:               memref.store %{{.*}}, %[[DW1]]
// CHECK:           } else {
// CHECK:               memref.store %{{.*}}, %[[DW2]]
// CHECK:             scf.if
// CHECK:               memref.store %{{.*}}, %[[DB1]]
// CHECK:               memref.store %{{.*}}, %[[DB2]]
// CHECK:         arith.truncf {{.*}} : f32 to bf16
// CHECK:         bufferization.to_tensor %{{.*}} restrict writable : memref<?x8xbf16> to tensor<?x8xbf16>
// CHECK:         bufferization.to_tensor %{{.*}} restrict writable : memref<4x8x2xbf16> to tensor<4x8x2xbf16>
// CHECK:         bufferization.to_tensor %{{.*}} restrict writable : memref<4x2xbf16> to tensor<4x2xbf16>
// CHECK:         bufferization.to_tensor %{{.*}} restrict writable : memref<4x2x5xbf16> to tensor<4x2x5xbf16>
// CHECK:         bufferization.to_tensor %{{.*}} restrict writable : memref<4x5xbf16> to tensor<4x5xbf16>
func.func @leaf_tree_ffn_grad(%dy: tensor<?x5xbf16>, %x: tensor<?x8xbf16>, %nw: tensor<3x8xbf16>, %nb: tensor<3xbf16>,
                              %w1: tensor<4x8x2xbf16>, %b1: tensor<4x2xbf16>, %w2: tensor<4x2x5xbf16>)
    -> (tensor<?x8xbf16>, tensor<4x8x2xbf16>, tensor<4x2xbf16>, tensor<4x2x5xbf16>, tensor<4x5xbf16>) {
  %dx, %dw1, %db1, %dw2, %db2 = fff.leaf_tree_ffn_grad %dy, %x, %nw, %nb, %w1, %b1, %w2
         {depth = 2 : i64, activation = #fff.activation<gelu>}
         : tensor<?x5xbf16>, tensor<?x8xbf16>, tensor<3x8xbf16>, tensor<3xbf16>, tensor<4x8x2xbf16>, tensor<4x2xbf16>, tensor<4x2x5xbf16>
  return %dx, %dw1, %db1, %dw2, %db2 : tensor<?x8xbf16>, tensor<4x8x2xbf16>, tensor<4x2xbf16>, tensor<4x2x5xbf16>, tensor<4x5xbf16>
}

// -----

// layer_norm_grad: one generic for the rows' sum(g) and sum(g * xhat) (the
// statistics read at (row, 0)), one for dx, narrowed to bf16, and one for
// dgamma and dbeta that reduces over the rows, each then narrowed.
// CHECK-DAG:   #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[STAT:.*]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-DAG:   #[[COL:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG:   #[[ROW:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func @layer_norm_grad
// CHECK-NOT:     fff.
// CHECK:         %[[SUMS:.*]]:2 = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[STAT]], #[[STAT]], #[[COL]], #[[ROW]], #[[ROW]]], iterator_types = ["parallel", "reduction"]}
// CHECK:         %[[DX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[SUMS]]#0, %[[SUMS]]#1 :
// CHECK:           arith.truncf {{.*}} : f32 to bf16
// CHECK:         %[[PARAMS:.*]]:2 = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[STAT]], #[[STAT]], #[[COL]], #[[COL]]], iterator_types = ["reduction", "parallel"]}
// CHECK:         %[[DG:.*]] = linalg.generic {{.*}} ins(%[[PARAMS]]#0 : tensor<768xf32>) outs(%{{.*}} : tensor<768xbf16>)
// CHECK:         %[[DB:.*]] = linalg.generic {{.*}} ins(%[[PARAMS]]#1 : tensor<768xf32>) outs(%{{.*}} : tensor<768xbf16>)
// CHECK:         return %[[DX]], %[[DG]], %[[DB]]
func.func @layer_norm_grad(%dy: tensor<?x768xbf16>, %x: tensor<?x768xbf16>, %m: tensor<?x1xf32>, %r: tensor<?x1xf32>, %g: tensor<768xbf16>)
    -> (tensor<?x768xbf16>, tensor<768xbf16>, tensor<768xbf16>) {
  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %m, %r scale(%g : tensor<768xbf16>) bias_grad : tensor<?x768xbf16>, tensor<?x1xf32>
  return %dx, %dg, %db : tensor<?x768xbf16>, tensor<768xbf16>, tensor<768xbf16>
}

// -----

// rms_norm_grad without rstd recomputes it as the forward does: sum(x^2),
// rsqrt(mean + epsilon) per row, then sum(g * xhat) and dx.
// CHECK-LABEL: func @rms_norm_grad
// CHECK:         %[[SQ:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<?x768xf32>)
// CHECK:         %[[RSTD:.*]] = linalg.generic {{.*}} ins(%[[SQ]] : tensor<?xf32>)
// CHECK:           math.rsqrt
// CHECK:         %[[GX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}}, %{{.*}}, %[[RSTD]] :
// CHECK:         %[[DX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%{{.*}}, %{{.*}}, %[[RSTD]], %[[GX]] :
// CHECK:         return %[[DX]]
func.func @rms_norm_grad(%dy: tensor<?x768xf32>, %x: tensor<?x768xf32>) -> tensor<?x768xf32> {
  %dx = fff.rms_norm_grad %dy, %x : tensor<?x768xf32>
  return %dx : tensor<?x768xf32>
}

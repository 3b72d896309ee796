// RUN: fff-opt %s --convert-fff-trees-to-vector="vector-bits=512 cache-bytes=2097152 integer-bf16" --split-input-file | FileCheck %s
// RUN: fff-opt %s --convert-fff-trees-to-vector="vector-bits=256 cache-bytes=2097152 integer-bf16" --split-input-file | FileCheck %s --check-prefix=AVX2
// RUN: not fff-opt %s --convert-fff-trees-to-vector=vector-bits=300 --split-input-file 2>&1 | FileCheck %s --check-prefix=BITS
// RUN: not fff-opt %s --convert-fff-trees-to-vector=cache-bytes=-1 --split-input-file 2>&1 | FileCheck %s --check-prefix=CACHE

// BITS: vector-bits must be 0 (this host's), 128, 256 or 512, not 300
// CACHE: cache-bytes must be 0 (this host's) or positive, not -1

// UltraFastBERT-1x11: 6 KiB of weights per node. The subtrees below level 5
// (127 nodes, 762 KiB) are the largest that fit in half of a 2 MiB cache, so
// each token walks levels 0-4 in token order, the tokens are counting-sorted
// by the node they reached (32 buckets), and they walk levels 5-11 in that
// order. Dot products keep four vector partial sums (64 elements a step).
// Each walk records its nodes and logits, whose activations are then taken
// a vector at a time; after the last level, one output pass starts four
// vectors of the token's sums from b_out and adds the scaled rows of w_out
// of all twelve levels into them in registers, then stores them: the output
// row is written once, and never read.
// AVX2 has 16 vector registers, not 32: four tokens keep two partial sums
// each (8 x 2 vectors a step), and four tokens' output pass keeps three
// vectors each in registers (a token alone, four).
// AVX2-LABEL: func.func @ultrafastbert
// AVX2:         scf.parallel
// AVX2:           scf.for {{.*}} step %c16{{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// AVX2-COUNT-8:     math.fma
// AVX2:         } {fff.strategy = {{{.*}}lanes = 8 : i64{{.*}}token_accumulators = 2 : i64, vector_bits = 256 : i64, walk_tokens = 4 : i64}}
// AVX2:         scf.parallel
// AVX2:           scf.if
// AVX2:             scf.if
// AVX2:               scf.for {{.*}} step %c24
// AVX2:             } else {
// AVX2:               scf.for {{.*}} step %c32
// CHECK-LABEL: func.func @ultrafastbert
// CHECK-SAME:    %[[BO:[^:]*]]: tensor<768xf32>)
// CHECK:         %[[BOB:.*]] = bufferization.to_buffer %[[BO]] read_only
// CHECK:         %[[SUMS:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x768xf32>
// A layer that moves 32 MiB or more (its input, weights and result) writes
// its result with streaming stores, which skip reading each line they
// overwrite, where the result's rows start on whole vectors (64 bytes).
// CHECK:         %[[LARGE:.*]] = arith.cmpi uge, %{{.*}}, %c33554432
// CHECK:         memref.extract_aligned_pointer_as_index %[[SUMS]]
// CHECK:         %[[ALIGNED:.*]] = arith.andi
// CHECK-NEXT:    %[[STREAMED:.*]] = arith.andi %[[LARGE]], %[[ALIGNED]]
// CHECK:         %[[NODES:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?xindex>
// CHECK:         %[[ORDER:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?xindex>
// CHECK:         %[[PATH:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x12xindex>
// CHECK:         %[[SCALES:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x12xf32>
// CHECK:         scf.for %[[TREE:.*]] = %{{.*}} to %{{.*}} step
// Tokens walk four at a time, their dot products interleaved (4 x 4
// partial sums: AVX-512's 32 registers hold them), so that one token's
// chain of dependent sums does not leave the core idle; the tokens left
// over walk one at a time.
// CHECK:           %[[GROUPS:.*]] = arith.divui %{{.*}}, %c4
// CHECK:           scf.parallel (%[[GROUP:.*]]) = (%{{.*}}) to (%[[GROUPS]])
// CHECK:             %[[ROW:.*]] = arith.muli %[[GROUP]], %c4
// CHECK:             scf.for %[[LEVEL:.*]] = %c0{{.*}} to %c5{{.*}} step %{{.*}} iter_args(%[[NODE:[^ ]*]] = %{{.*}}) -> (index, index, index, index)
// CHECK:               scf.for {{.*}} step %c64{{.*}} -> ({{(vector<16xf32>, )+}}vector<16xf32>)
// CHECK-COUNT-16:        math.fma
// CHECK:               vector.maskedload
// CHECK-COUNT-4:       vector.reduction <add>, %{{.*}} fastmath<reassoc> : vector<16xf32> into f32
// CHECK:               memref.store %[[NODE]], %[[PATH]][%[[ROW]], %[[LEVEL]]]
// CHECK:               memref.store %{{.*}}, %[[SCALES]][%[[ROW]], %[[LEVEL]]]
// CHECK:               arith.cmpf ogt
// CHECK:             vector.maskedload %[[SCALES]][%[[ROW]], %{{.*}}]
// CHECK:             math.erf %{{.*}} : vector<16xf32>
// CHECK:             vector.maskedstore %[[SCALES]][%[[ROW]], %{{.*}}]
// CHECK:             memref.store %{{.*}}, %[[NODES]][%[[ROW]]]
// CHECK:           } {fff.strategy = {accumulators = 4 : i64, bf16_rounding = "integer", cache_bytes = 2097152 : i64, lanes = 16 : i64, min_parallel_work = 524288 : i64, min_streamed_bytes = 33554432 : i64, sort_level = 5 : i64, token_accumulators = 4 : i64, vector_bits = 512 : i64, walk_tokens = 4 : i64}}
// CHECK:           %[[GROUPED:.*]] = arith.muli %[[GROUPS]], %c4
// CHECK:           scf.for %{{.*}} = %[[GROUPED]] to
// CHECK:             scf.for %{{.*}} = %c0{{.*}} to %c5{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (index)
// The stable counting sort: a count per node of level 5 (31 to 62), their
// running sums, then each token's position.
// CHECK:           %[[COUNTS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<33xindex>
// CHECK:           memref.store %{{.*}}, %[[COUNTS]]
// CHECK:           %[[FIRST:.*]] = memref.load %[[NODES]]
// CHECK:           arith.subi %[[FIRST]], %c31
// CHECK:           memref.store %{{.*}}, %[[ORDER]]
// CHECK:           scf.parallel (%[[SORTED_GROUP:.*]]) =
// CHECK:             %[[POSITION:.*]] = arith.muli %[[SORTED_GROUP]], %c4
// CHECK:             %[[TOKEN:.*]] = memref.load %[[ORDER]][%[[POSITION]]]
// CHECK:             %[[START:.*]] = memref.load %[[NODES]][%[[TOKEN]]]
// CHECK:             scf.for %{{.*}} = %c5{{.*}} to %c12{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[START]], {{.*}}) -> (index, index, index, index)
// CHECK:             math.erf %{{.*}} : vector<16xf32>
// Tokens walking together from one node of level 5 share the path above
// it: their output pass loads each weight vector of levels 0-5 once for all
// four, then each token's own for levels 6-11, its sums in the same order.
// The output pass of a streamed result comes first; each token group's
// streaming stores are fenced before it ends (they are weakly ordered).
// CHECK:             scf.if %[[STREAMED]] {
// CHECK:               arith.andi
// CHECK:               %[[SAME:.*]] = arith.andi
// CHECK-NEXT:          scf.if %[[SAME]] {
// CHECK:                 vector.store %{{.*}}, %[[SUMS]][%[[TOKEN]], %{{.*}}] {alignment = 64 : i64, nontemporal = true}
// CHECK:               llvm.call @llvm.x86.sse.sfence()
// CHECK:             } else {
// CHECK:             arith.andi
// CHECK:             %[[SAME:.*]] = arith.andi
// CHECK-NEXT:        scf.if %[[SAME]] {
// CHECK:               scf.for %{{.*}} step %c64
// CHECK:                 scf.for %{{.*}} = %c0{{.*}} to %c6{{.*}} -> ({{(vector<16xf32>, )+}}vector<16xf32>)
// CHECK-COUNT-4:           vector.load %{{.*}} : memref<1x4095x768xf32>, vector<16xf32>
// CHECK-COUNT-16:          math.fma
// CHECK:                 scf.for %{{.*}} = %c6{{.*}} to %c12{{.*}} -> ({{(vector<16xf32>, )+}}vector<16xf32>)
// CHECK-COUNT-16:          vector.load %{{.*}} : memref<1x4095x768xf32>, vector<16xf32>
// CHECK-COUNT-16:          math.fma
// CHECK:                 vector.store %{{.*}}, %[[SUMS]][%[[TOKEN]], %{{.*}}]
// CHECK:             } else {
// CHECK:             scf.for %{{.*}} step %c64
// CHECK-COUNT-4:       vector.load %[[BOB]][%{{.*}}] : memref<768xf32>, vector<16xf32>
// CHECK:               scf.for %{{.*}} = %c0{{.*}} to %c12{{.*}} step %{{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:                 memref.load %[[PATH]][%[[TOKEN]], %{{.*}}]
// CHECK:                 memref.load %[[SCALES]][%[[TOKEN]], %{{.*}}]
// CHECK-COUNT-4:         math.fma
// CHECK-COUNT-4:       vector.store %{{.*}}, %[[SUMS]][%[[TOKEN]], %{{.*}}]
// CHECK:         bufferization.to_tensor %[[SUMS]] restrict writable
func.func @ultrafastbert(%x: tensor<?x768xf32>, %wi: tensor<1x4095x768xf32>, %bi: tensor<1x4095xf32>,
                         %wo: tensor<1x4095x768xf32>, %bo: tensor<768xf32>) -> tensor<?x768xf32> {
  %y = fff.tree_ffn %x, %wi bias(%bi : tensor<1x4095xf32>), %wo bias(%bo : tensor<768xf32>) {depth = 11 : i64}
         : tensor<?x768xf32>, tensor<1x4095x768xf32>, tensor<1x4095x768xf32>
  return %y : tensor<?x768xf32>
}

// -----

// A tree whose weights fit in the cache is walked in token order, with no
// sort. bf16 weights are widened as they are loaded; the f32 sums are
// narrowed into the result when the last tree is done; rows of 40 take two
// accumulators and a masked tail.
// CHECK-LABEL: func.func @small_bf16
// CHECK-NOT:     memref<?xindex>
// CHECK:         %[[SUMS:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x40xf32>
// CHECK:         %[[RESULT:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x40xbf16>
// CHECK:         scf.for
// CHECK:           scf.parallel
// CHECK:             scf.for %{{.*}} = %c0{{.*}} to %c3{{.*}} step
// CHECK:               vector.load {{.*}} : memref<2x7x40xbf16>, vector<16xbf16>
// CHECK:               arith.extf {{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK:               vector.maskedload
// CHECK:             scf.if
// CHECK:               arith.truncf {{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK:               vector.store %{{.*}}, %[[RESULT]]
// CHECK:           } {fff.strategy = {accumulators = 2 : i64, bf16_rounding = "integer", cache_bytes = 2097152 : i64, lanes = 16 : i64, min_parallel_work = 524288 : i64, min_streamed_bytes = 33554432 : i64, sort_level = 0 : i64, token_accumulators = 2 : i64, vector_bits = 512 : i64, walk_tokens = 4 : i64}}
// CHECK:         bufferization.to_tensor %[[RESULT]] restrict writable
func.func @small_bf16(%x: tensor<?x40xbf16>, %wi: tensor<2x7x40xbf16>, %wo: tensor<2x7x40xbf16>) -> tensor<?x40xbf16> {
  %y = fff.tree_ffn %x, %wi, %wo {depth = 2 : i64, activation = #fff.activation<silu>}
         : tensor<?x40xbf16>, tensor<2x7x40xbf16>, tensor<2x7x40xbf16>
  return %y : tensor<?x40xbf16>
}

// -----

// leaf_tree_ffn: each token is routed to its leaf in token order (zero goes
// right), four tokens walking together, the tokens are sorted by leaf, and
// each computes its leaf's MLP: 64 hidden units at a time as four vectors of
// FMAs over the row, then, for each four output vectors held in registers,
// the scaled rows of w2 of the block's units.
// CHECK-LABEL: func.func @leaf
// CHECK:         %[[SUMS:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x96xf32>
// CHECK:         %[[LEAVES:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?xindex>
// CHECK:         scf.parallel (%[[GROUP:.*]]) =
// CHECK:           %[[ROW:.*]] = arith.muli %[[GROUP]], %c4
// CHECK:           scf.for %{{.*}} = %c0{{.*}} to %c3{{.*}} step {{.*}} -> (index, index, index, index)
// CHECK-COUNT-4:     arith.cmpf oge
// CHECK:           memref.store %{{.*}}, %[[LEAVES]][%[[ROW]]]
// CHECK:         } {fff.strategy = {accumulators = 4 : i64, bf16_rounding = "integer", cache_bytes = 2097152 : i64, lanes = 16 : i64, min_parallel_work = 524288 : i64, min_streamed_bytes = 0 : i64, sort_level = 3 : i64, token_accumulators = 4 : i64, vector_bits = 512 : i64, walk_tokens = 4 : i64}}
// CHECK:         %[[ORDER:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?xindex>
// CHECK:         memref.alloc() {alignment = 64 : i64} : memref<9xindex>
// CHECK:         arith.shrui %{{.*}}, %c0
// CHECK:         memref.store %{{.*}}, %[[ORDER]]
// Tokens are then taken four at a time: when all four reached one leaf,
// they compute its MLP together, each vector of w1 and w2 loaded once for
// the four (4 tokens x 4 vectors of hidden units: 16 partial sums);
// otherwise each alone, in a loop.
// CHECK:         scf.parallel (%[[GROUP:.*]]) =
// CHECK:           %[[POSITION:.*]] = arith.muli %[[GROUP]], %c4
// CHECK:           %[[TOKEN:.*]] = memref.load %[[ORDER]][%[[POSITION]]]
// CHECK:           %[[LEAF:.*]] = memref.load %[[LEAVES]][%[[TOKEN]]]
// CHECK:           arith.andi
// CHECK:           %[[TOGETHER:.*]] = arith.andi
// CHECK-NEXT:      scf.if %[[TOGETHER]] {
// CHECK:             scf.for %{{.*}} step %c64
// CHECK:               scf.for {{.*}} -> ({{(vector<16xf32>, )+}}vector<16xf32>)
// CHECK-COUNT-4:         vector.load %{{.*}}[%[[LEAF]], %{{.*}}, %{{.*}}] : memref<8x96x100xf32>, vector<16xf32>
// CHECK-COUNT-16:        math.fma
// CHECK:               math.tanh
// CHECK:               scf.for %{{.*}} step %c64
// CHECK:                 scf.for {{.*}} -> ({{(vector<16xf32>, )+}}vector<16xf32>)
// CHECK:                   vector.extract %{{.*}}[%{{.*}}] : f32 from vector<16xf32>
// CHECK-COUNT-4:           vector.load %{{.*}}[%[[LEAF]], %{{.*}}, %{{.*}}] : memref<8x100x96xf32>, vector<16xf32>
// CHECK-COUNT-16:          math.fma
// CHECK:                 vector.store %{{.*}}, %[[SUMS]][%[[TOKEN]], %{{.*}}]
// A ragged last block of hidden units: one masked vector per token, whose
// sum over the row keeps four partial sums.
// CHECK:               scf.for %{{.*}} step %c16
// CHECK:                 vector.create_mask
// CHECK:                 scf.for {{.*}} step %c4{{.*}} -> ({{(vector<16xf32>, )+}}vector<16xf32>)
// CHECK:           } else {
// CHECK:             scf.for %{{.*}} = %[[POSITION]] to
// CHECK:               memref.load %[[ORDER]]
// CHECK:               scf.for %{{.*}} step %c64
// CHECK:                 scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-4:           math.fma
func.func @leaf(%x: tensor<?x96xf32>, %nw: tensor<7x96xf32>, %nb: tensor<7xf32>, %w1: tensor<8x96x100xf32>,
                %b1: tensor<8x100xf32>, %w2: tensor<8x100x96xf32>, %b2: tensor<8x96xf32>) -> tensor<?x96xf32> {
  %y = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 3 : i64, activation = #fff.activation<gelu_tanh>}
         : tensor<?x96xf32>, tensor<7x96xf32>, tensor<7xf32>, tensor<8x96x100xf32>, tensor<8x100xf32>, tensor<8x100x96xf32>, tensor<8x96xf32>
  return %y : tensor<?x96xf32>
}

// -----

// In a tree deeper than 10 levels, tokens are sorted by their leaf's
// ancestor at level 10: 1024 buckets, the leaf index shifted right by 2.
// CHECK-LABEL: func.func @deep_leaf
// CHECK:         memref.alloc() {alignment = 64 : i64} : memref<1025xindex>
// CHECK:         arith.shrui %{{.*}}, %c2
// CHECK:         sort_level = 10 : i64
func.func @deep_leaf(%x: tensor<?x4xf32>, %nw: tensor<4095x4xf32>, %nb: tensor<4095xf32>, %w1: tensor<4096x4x2xf32>,
                     %b1: tensor<4096x2xf32>, %w2: tensor<4096x2x4xf32>, %b2: tensor<4096x4xf32>) -> tensor<?x4xf32> {
  %y = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 12 : i64}
         : tensor<?x4xf32>, tensor<4095x4xf32>, tensor<4095xf32>, tensor<4096x4x2xf32>, tensor<4096x2xf32>, tensor<4096x2x4xf32>, tensor<4096x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

// An elementwise op that alone reads the layer's result (a residual add,
// then a cast to bf16) is applied to each vector of a token's output row as
// the layer writes it: the f32 sums, then the add of the residual's vector
// at the same place, then the rounding, stored into the bf16 result; the
// layer's own result is never stored.
// CHECK-LABEL: func.func @residual_epilogue
// CHECK-SAME:    (%[[X:.*]]: tensor<?x32xf32>, %{{.*}}, %{{.*}}, %[[R:.*]]: tensor<?x32xf32>)
// CHECK:         %[[OUT:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x32xbf16>
// CHECK:         %[[RB:.*]] = bufferization.to_buffer %[[R]] read_only
// CHECK:         %[[RV:.*]] = vector.load %[[RB]][%[[ROW:.*]], %[[J:.*]]] : memref<?x32xf32>, vector<16xf32>
// CHECK:         %[[SUM:.*]] = arith.addf %{{.*}}, %[[RV]] : vector<16xf32>
// CHECK:         %[[NARROW:.*]] = arith.truncf %[[SUM]] : vector<16xf32> to vector<16xbf16>
// CHECK:         vector.store %[[NARROW]], %[[OUT]][%[[ROW]], %[[J]]]
// CHECK-NOT:     linalg.generic
// CHECK:         %[[RESULT:.*]] = bufferization.to_tensor %[[OUT]]
// CHECK:         return %[[RESULT]]
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @residual_epilogue(%x: tensor<?x32xf32>, %wi: tensor<1x7x32xf32>, %wo: tensor<1x7x32xf32>,
                             %r: tensor<?x32xf32>) -> tensor<?x32xbf16> {
  %c0 = arith.constant 0 : index
  %y = fff.tree_ffn %x, %wi, %wo {depth = 2 : i64} : tensor<?x32xf32>, tensor<1x7x32xf32>, tensor<1x7x32xf32>
  %rows = tensor.dim %x, %c0 : tensor<?x32xf32>
  %e = tensor.empty(%rows) : tensor<?x32xbf16>
  %s = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%y, %r : tensor<?x32xf32>, tensor<?x32xf32>) outs(%e : tensor<?x32xbf16>) {
  ^bb0(%a: f32, %b: f32, %o: bf16):
    %sum = arith.addf %a, %b : f32
    %n = arith.truncf %sum : f32 to bf16
    linalg.yield %n : bf16
  } -> tensor<?x32xbf16>
  return %s : tensor<?x32xbf16>
}

// -----

// Not applied as it writes: an elementwise op whose other input is computed
// after the layer, and one that is not alone in reading the layer's result.
// CHECK-LABEL: func.func @not_epilogues
// CHECK:         scf.parallel
// CHECK:         linalg.generic
// CHECK:         scf.parallel
// CHECK:         linalg.generic
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @not_epilogues(%x: tensor<?x32xf32>, %wi: tensor<1x7x32xf32>, %wo: tensor<1x7x32xf32>)
    -> (tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>) {
  %c0 = arith.constant 0 : index
  %rows = tensor.dim %x, %c0 : tensor<?x32xf32>
  %e = tensor.empty(%rows) : tensor<?x32xf32>
  %y = fff.tree_ffn %x, %wi, %wo {depth = 2 : i64} : tensor<?x32xf32>, tensor<1x7x32xf32>, tensor<1x7x32xf32>
  %later = arith.negf %x : tensor<?x32xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %later : tensor<?x32xf32>, tensor<?x32xf32>) outs(%e : tensor<?x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %sum = arith.addf %a, %b : f32
    linalg.yield %sum : f32
  } -> tensor<?x32xf32>
  %y2 = fff.tree_ffn %x, %wi, %wo {depth = 2 : i64} : tensor<?x32xf32>, tensor<1x7x32xf32>, tensor<1x7x32xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y2 : tensor<?x32xf32>) outs(%e : tensor<?x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %twice = arith.addf %a, %a : f32
    linalg.yield %twice : f32
  } -> tensor<?x32xf32>
  return %s, %t, %y2 : tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}

// -----

// tree_ffn_grad: the scalar lowering's phases (TreeGradBuilder) with vector
// code. Per tree, tokens walk in groups as in the forward (the strategy
// recorded as `fff.strategy`, its sort level 0 for a tree this small), their
// dl dot products and dx rows in vector FMAs. Then, per column slab of 4
// vectors (64 f32 columns), every row's slab is packed into a buffer of its
// own, and a node's visits are multiply-added from it into four vectors
// carried through the loop over its visits, stored once, rounded to the
// gradient's bf16 (masked: the rows are narrower than a slab).
// CHECK-LABEL: func @tree_ffn_grad
// CHECK:         scf.for
// CHECK:           scf.parallel
// CHECK:             math.fma {{.*}} : vector<16xf32>
// CHECK:             vector.maskedstore %{{.*}} : memref<?x8xf32>, vector<16xi1>, vector<16xf32>
// CHECK:           } {fff.strategy = {{{.*}}sort_level = 0 : i64{{.*}}walk_tokens = 4 : i64}}
// CHECK:         arith.ceildivui %{{.*}}, %c64
// CHECK:         scf.parallel
// CHECK:           %[[PACKED:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x64xf32>
// CHECK:           scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:             memref.prefetch %[[PACKED]]
// CHECK-COUNT-4:     vector.fma {{.*}} : vector<16xf32>
// CHECK:           }
// CHECK-COUNT-4:   vector.maskedstore %{{.*}} : memref<2x3x8xbf16>, vector<16xi1>, vector<16xbf16>
func.func @tree_ffn_grad(%dy: tensor<?x4xbf16>, %x: tensor<?x8xbf16>, %wi: tensor<2x3x8xbf16>, %wo: tensor<2x3x4xbf16>)
    -> (tensor<?x8xbf16>, tensor<2x3x8xbf16>, tensor<2x3x4xbf16>) {
  %dx, %dwi, %dwo = fff.tree_ffn_grad %dy, %x, %wi, %wo {depth = 1 : i64}
         : tensor<?x4xbf16>, tensor<?x8xbf16>, tensor<2x3x8xbf16>, tensor<2x3x4xbf16>
  return %dx, %dwi, %dwo : tensor<?x8xbf16>, tensor<2x3x8xbf16>, tensor<2x3x4xbf16>
}

// -----

// A tree whose weights (255 nodes of 8 KiB) are more than half the 2 MiB
// cache: its walk, as the forward's, regroups tokens by the node they
// reached at level 1, with a counting sort between the two token loops.
// Its f32 weight gradients, rows of whole slabs, start on a cache line and
// are stored a whole line at a time past the caches (x86's streaming
// stores, fenced at the end of each slab: they are weakly ordered).
// CHECK-LABEL: func @tree_ffn_grad_regrouped
// CHECK:         scf.parallel
// CHECK:         } {fff.strategy = {{{.*}}sort_level = 1 : i64{{.*}}}
// CHECK:         scf.for
// CHECK:         scf.parallel
// CHECK:         } {fff.strategy = {{{.*}}sort_level = 1 : i64{{.*}}}
// CHECK:         memref.alloc() {alignment = 64 : i64} : memref<1x255x1024xf32>
// CHECK-COUNT-4: vector.store {{.*}} {alignment = 64 : i64, nontemporal = true} : memref<1x255x1024xf32>, vector<16xf32>
// CHECK:         llvm.call @llvm.x86.sse.sfence()
// CHECK:       } {fff.strategy = {{{.*}}slab_columns = 64 : i64, stream_gradients = true{{.*}}}
func.func @tree_ffn_grad_regrouped(%dy: tensor<?x1024xf32>, %x: tensor<?x1024xf32>, %wi: tensor<1x255x1024xf32>, %wo: tensor<1x255x1024xf32>)
    -> (tensor<?x1024xf32>, tensor<1x255x1024xf32>, tensor<1x255x1024xf32>) {
  %dx, %dwi, %dwo = fff.tree_ffn_grad %dy, %x, %wi, %wo {depth = 7 : i64}
         : tensor<?x1024xf32>, tensor<?x1024xf32>, tensor<1x255x1024xf32>, tensor<1x255x1024xf32>
  return %dx, %dwi, %dwo : tensor<?x1024xf32>, tensor<1x255x1024xf32>, tensor<1x255x1024xf32>
}

// -----

// zero_goes_right: every walk, the forward's and the backward's, branches
// on `logit >= 0`.
// CHECK-LABEL: func @zero_goes_right
// CHECK-NOT:     arith.cmpf ogt
// CHECK:         arith.cmpf oge
// CHECK-NOT:     arith.cmpf ogt
// CHECK:         return
func.func @zero_goes_right(%x: tensor<?x32xf32>, %wi: tensor<1x7x32xf32>, %wo: tensor<1x7x32xf32>)
    -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  %y = fff.tree_ffn %x, %wi, %wo {depth = 2 : i64, zero_goes_right}
         : tensor<?x32xf32>, tensor<1x7x32xf32>, tensor<1x7x32xf32>
  %dx, %dwi, %dwo = fff.tree_ffn_grad %y, %x, %wi, %wo {depth = 2 : i64, zero_goes_right}
         : tensor<?x32xf32>, tensor<?x32xf32>, tensor<1x7x32xf32>, tensor<1x7x32xf32>
  return %y, %dx : tensor<?x32xf32>, tensor<?x32xf32>
}

// RUN: fff-opt %s --convert-fff-trees-to-vector="vector-bits=512 cache-bytes=2097152" | FileCheck %s

// leaf_tree_ffn_grad as vector code: the forward's strategy (its routing dot
// products, so the backward routes each row as the forward did) recorded on
// every threaded loop; then, 256 leaves of 12 hidden units, each row
// operation four rows at a time, a 12-wide row one masked vector (a full
// vector's lanes and no more), each vector of the matrix loaded once for
// the four rows and multiplied into four sums kept in registers across the
// loop, then stored once.
// CHECK-LABEL: func.func @fastfeedforward
// The route: dot products of x and node_w into four partial sums.
// CHECK:         scf.parallel
// CHECK:           math.fma {{.*}} : vector<16xf32>
// CHECK:         } {fff.strategy = {accumulators = 4 : i64, {{.*}}lanes = 16 : i64, min_parallel_work = 524288 : i64, min_streamed_bytes = 0 : i64, sort_level = 8 : i64
// pre = b1 + x @ w1 for a group of four rows: each starts from b1's row.
// CHECK:         scf.parallel
// CHECK:           %[[MASK:.*]] = vector.create_mask %{{.*}} : vector<16xi1>
// CHECK:           %[[B1:.*]] = vector.maskedload %{{.*}}, %[[MASK]], %{{.*}} : memref<256x12xf32>
// CHECK:           %{{.*}}:4 = scf.for %{{.*}} = %{{.*}} to %c768 step %{{.*}} iter_args(%[[S0:.*]] = %{{.*}}, %[[S1:.*]] = %{{.*}}, %[[S2:.*]] = %{{.*}}, %[[S3:.*]] = %{{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:             %[[W:.*]] = vector.maskedload %{{.*}}, %[[MASK]], %{{.*}} : memref<256x768x12xf32>
// CHECK:             vector.fma %{{.*}}, %[[W]], %[[S0]]
// CHECK:             vector.fma %{{.*}}, %[[W]], %[[S1]]
// CHECK:             vector.fma %{{.*}}, %[[W]], %[[S2]]
// CHECK:             vector.fma %{{.*}}, %[[W]], %[[S3]]
// CHECK-COUNT-4:   vector.maskedstore
// The sums over a leaf's rows: four gradient rows at a time, the source
// row's vector loaded once for them.
// CHECK:         scf.parallel
// CHECK:           scf.for {{.*}} iter_args
// CHECK:             %[[SOURCE:.*]] = vector.maskedload %{{.*}} : memref<?x?xf32>
// CHECK-COUNT-4:     vector.fma %{{.*}}, %[[SOURCE]], %{{.*}}
func.func @fastfeedforward(%dy: tensor<?x768xf32>, %x: tensor<?x768xf32>, %nw: tensor<255x768xf32>,
                           %nb: tensor<255xf32>, %w1: tensor<256x768x12xf32>, %b1: tensor<256x12xf32>,
                           %w2: tensor<256x12x768xf32>)
    -> (tensor<?x768xf32>, tensor<256x768x12xf32>, tensor<256x12xf32>, tensor<256x12x768xf32>, tensor<256x768xf32>) {
  %dx, %dw1, %db1, %dw2, %db2 = fff.leaf_tree_ffn_grad %dy, %x, %nw, %nb, %w1, %b1, %w2 {depth = 8 : i64}
         : tensor<?x768xf32>, tensor<?x768xf32>, tensor<255x768xf32>, tensor<255xf32>, tensor<256x768x12xf32>,
           tensor<256x12xf32>, tensor<256x12x768xf32>
  return %dx, %dw1, %db1, %dw2, %db2
      : tensor<?x768xf32>, tensor<256x768x12xf32>, tensor<256x12xf32>, tensor<256x12x768xf32>, tensor<256x768xf32>
}

// RUN: fff-opt %s --convert-fff-to-gpu --split-input-file -verify-diagnostics | FileCheck %s
// RUN: fff-opt %s --convert-fff-to-gpu=cpu-twin --split-input-file | FileCheck %s --check-prefix=TWIN

// A tree backward is seven launches (TreeGradStrategy): the walk, which is
// the forward's throughput kernel with dx as its output and w_in's rows as
// its output rows, storing each visit's node, dl and act(logit) ([B, K * L]
// scratch); a stable counting sort of each tree's visits by node (count,
// scan, scatter over [K * N * chunks] counts); the weight sums, a block per
// chunk of 256 sorted visits (partial rows for nodes that span chunks),
// then a block per node adding those in chunk order; and db_out. No atomics
// anywhere.
// CHECK-LABEL: func @tree_grad
// CHECK:         %[[NODES:.*]] = memref.alloc(%{{.*}}) : memref<?x6xi32>
// CHECK:         gpu.launch_func @fff_kernels::@tree_ffn_grad_bf16_32x64_depth2_trees2_walk {{.*}} threads in (%c256{{.*}} args({{.*}}, %[[NODES]] : memref<?x6xi32>,
// CHECK-DAG:     %[[COUNTS:.*]] = memref.alloc() : memref<3584xi32>
// CHECK-DAG:     %[[STARTS:.*]] = memref.alloc() : memref<16xi32>
// CHECK-DAG:     %[[MEMBERS:.*]] = memref.alloc(%{{.*}}) : memref<2x?xi32>
// CHECK:         gpu.launch_func @fff_kernels::@tree_ffn_grad_bf16_32x64_depth2_trees2_count blocks in (%c2,
// CHECK:         gpu.launch_func @fff_kernels::@tree_ffn_grad_bf16_32x64_depth2_trees2_scan blocks in (%c2
// CHECK:         gpu.launch_func @fff_kernels::@tree_ffn_grad_bf16_32x64_depth2_trees2_scatter blocks in (%c2,
// CHECK:         %[[CHUNKS:.*]] = arith.ceildivui %{{.*}}, %c256
// CHECK:         %[[PARTIALS:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x?xf32>
// CHECK:         gpu.launch_func @fff_kernels::@tree_ffn_grad_bf16_32x64_depth2_trees2_chunk_sums {{.*}} threads in (%c128
// CHECK:         gpu.launch_func @fff_kernels::@tree_ffn_grad_bf16_32x64_depth2_trees2_node_sums blocks in (%c14, {{.*}} threads in (%c128
// CHECK:         gpu.launch_func @fff_kernels::@tree_ffn_grad_bf16_32x64_depth2_trees2_output_bias
// CHECK-NOT:     gpu.launch_func
// CHECK:       gpu.func @tree_ffn_grad_bf16_32x64_depth2_trees2_walk({{.*}}) workgroup({{.*}}) kernel attributes {fff.strategy = {entries_per_token = 6 : i64, grad_output = {steps = 1 : i64, vector_width = 8 : i64, vectors_per_step = 1 : i64}, {{.*}}kind = "warp_per_token", {{.*}}staged_levels = 0 : i64, {{.*}}variant = "throughput"}
// CHECK:         gpu.shuffle xor
// CHECK:         scf.if
// CHECK:           memref.store {{.*}} : memref<?x6xi32>
// CHECK:           memref.store {{.*}} : memref<?x6xf32>
// CHECK:           memref.store {{.*}} : memref<?x6xf32>
// CHECK:       gpu.func @tree_ffn_grad_bf16_32x64_depth2_trees2_count({{.*}}) kernel attributes {fff.strategy = {kind = "tree_grad_count", sort_chunks = 256 : i64, threads = 256 : i64}
// CHECK:       gpu.func @tree_ffn_grad_bf16_32x64_depth2_trees2_scan({{.*}}) workgroup({{.*}} : memref<256xi32, #gpu.address_space<workgroup>>{{.*}}) kernel attributes {fff.strategy = {kind = "tree_grad_scan", sort_chunks = 256 : i64, threads = 256 : i64}
// CHECK:         gpu.barrier
// CHECK:         gpu.barrier
// CHECK:       gpu.func @tree_ffn_grad_bf16_32x64_depth2_trees2_scatter({{.*}}) kernel attributes {fff.strategy = {kind = "tree_grad_scatter", sort_chunks = 256 : i64, threads = 256 : i64}
// CHECK:       gpu.func @tree_ffn_grad_bf16_32x64_depth2_trees2_chunk_sums({{.*}}) kernel attributes {fff.strategy = {kind = "tree_grad_chunk_sums", max_registers = 96 : i64, threads = 128 : i64, visits_per_chunk = 256 : i64}
// CHECK:         scf.while
// CHECK:         math.fma {{.*}} : f32
// CHECK:         arith.truncf {{.*}} : f32 to bf16
// CHECK:       gpu.func @tree_ffn_grad_bf16_32x64_depth2_trees2_node_sums({{.*}}) kernel attributes {fff.strategy = {kind = "tree_grad_node_sums", threads = 128 : i64, visits_per_chunk = 256 : i64}
// CHECK:         arith.addf {{.*}} : f32
// CHECK:       gpu.func @tree_ffn_grad_bf16_32x64_depth2_trees2_output_bias({{.*}}) kernel attributes {fff.strategy = {kind = "tree_grad_output_bias", threads = 128 : i64}
// TWIN-LABEL: func @tree_grad
// TWIN:         fff.tree_ffn_grad
// TWIN-NOT:     gpu.launch_func
func.func @tree_grad(%dy: tensor<?x64xbf16>, %x: tensor<?x32xbf16>, %wi: tensor<2x7x32xbf16>, %bi: tensor<2x7xbf16>, %wo: tensor<2x7x64xbf16>)
    -> (tensor<?x32xbf16>, tensor<2x7x32xbf16>, tensor<2x7x64xbf16>, tensor<2x7xbf16>, tensor<64xbf16>) {
  %dx, %dwi, %dwo, %dbi, %dbo = fff.tree_ffn_grad %dy, %x, %wi bias(%bi : tensor<2x7xbf16>), %wo bias_grad {depth = 2 : i64} : tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<2x7x32xbf16>, tensor<2x7x64xbf16>
  return %dx, %dwi, %dwo, %dbi, %dbo : tensor<?x32xbf16>, tensor<2x7x32xbf16>, tensor<2x7x64xbf16>, tensor<2x7xbf16>, tensor<64xbf16>
}

// -----

// Deep trees get fewer sort chunks, so that the counts stay within 16 MiB
// a tree: 2^21 - 1 nodes, 2 chunks.
// CHECK-LABEL: func @deep
// CHECK:         memref.alloc() : memref<4194302xi32>
// CHECK:       gpu.func @tree_ffn_grad_f32_4x8_depth20_count({{.*}}) kernel attributes {fff.strategy = {kind = "tree_grad_count", sort_chunks = 2 : i64
func.func @deep(%dy: tensor<?x8xf32>, %x: tensor<?x4xf32>, %wi: tensor<1x2097151x4xf32>, %wo: tensor<1x2097151x8xf32>) -> tensor<1x2097151x4xf32> {
  %dx, %dwi, %dwo = fff.tree_ffn_grad %dy, %x, %wi, %wo {depth = 20 : i64} : tensor<?x8xf32>, tensor<?x4xf32>, tensor<1x2097151x4xf32>, tensor<1x2097151x8xf32>
  return %dwi : tensor<1x2097151x4xf32>
}

// -----

// A shape the walk's kernel cannot take stops the conversion with the
// reason; with cpu-twin, the op is left for the CPU path.
// TWIN-LABEL: func @too_many_visits
// TWIN:         fff.tree_ffn_grad
func.func @too_many_visits(%dy: tensor<?x4xf32>, %x: tensor<?x8xf32>, %wi: tensor<100x4095x8xf32>, %wo: tensor<100x4095x4xf32>) -> tensor<?x8xf32> {
  // expected-error @below {{'fff.tree_ffn_grad' op has no GPU kernel for more than 1024 visited rows per token (trees * (depth + 1)); use --fff-cpu-pipeline}}
  %dx, %dwi, %dwo = fff.tree_ffn_grad %dy, %x, %wi, %wo {depth = 11 : i64} : tensor<?x4xf32>, tensor<?x8xf32>, tensor<100x4095x8xf32>, tensor<100x4095x4xf32>
  return %dx : tensor<?x8xf32>
}

// -----

// zero_goes_right: the forward's kernels and the backward's walk branch on
// `logit >= 0` (GELU's polynomial compares with olt only).
// CHECK-LABEL: func @zero_goes_right
// CHECK:       gpu.func @tree_ffn_f32_32x32_depth2_latency
// CHECK-NOT:   arith.cmpf ogt
// CHECK:       arith.cmpf oge
// CHECK:       gpu.func @tree_ffn_f32_32x32_depth2_throughput
// CHECK-NOT:   arith.cmpf ogt
// CHECK:       arith.cmpf oge
// CHECK:       gpu.func @tree_ffn_grad_f32_32x32_depth2_walk
// CHECK-NOT:   arith.cmpf ogt
// CHECK:       arith.cmpf oge
func.func @zero_goes_right(%x: tensor<?x32xf32>, %wi: tensor<1x7x32xf32>, %wo: tensor<1x7x32xf32>)
    -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  %y = fff.tree_ffn %x, %wi, %wo {depth = 2 : i64, zero_goes_right}
         : tensor<?x32xf32>, tensor<1x7x32xf32>, tensor<1x7x32xf32>
  %dx, %dwi, %dwo = fff.tree_ffn_grad %y, %x, %wi, %wo {depth = 2 : i64, zero_goes_right}
         : tensor<?x32xf32>, tensor<?x32xf32>, tensor<1x7x32xf32>, tensor<1x7x32xf32>
  return %y, %dx : tensor<?x32xf32>, tensor<?x32xf32>
}

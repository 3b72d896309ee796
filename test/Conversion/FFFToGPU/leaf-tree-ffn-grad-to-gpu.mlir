// RUN: fff-opt %s --convert-fff-to-gpu --split-input-file -verify-diagnostics | FileCheck %s
// RUN: fff-opt %s --convert-fff-to-gpu=cpu-twin --split-input-file | FileCheck %s --check-prefix=TWIN

// A leaf tree's backward is five launches (TreeGradStrategy): the walk,
// which is the leaf forward kernel that then takes each unit's dpre, stores
// the row's leaf ([B, 1]) and each unit's dpre and act(pre) ([B, W]) and
// writes dx itself; a stable counting sort of the rows by leaf (count, scan,
// scatter over [L * chunks] counts); and the leaves' sums, a block per leaf
// and 128 columns. No output-bias kernel: db2 is per leaf. No atomics.
// CHECK-LABEL: func @leaf_grad
// CHECK:         %[[LEAVES:.*]] = memref.alloc(%{{.*}}) : memref<?x1xi32>
// CHECK:         %[[DPRE:.*]] = memref.alloc(%{{.*}}) : memref<?x12xf32>
// CHECK:         %[[ACT:.*]] = memref.alloc(%{{.*}}) : memref<?x12xf32>
// CHECK:         gpu.launch_func @fff_kernels::@leaf_tree_ffn_grad_bf16_32x64_depth3_walk {{.*}} threads in (%c128{{.*}} args({{.*}}, %[[LEAVES]] : memref<?x1xi32>, %[[DPRE]] : memref<?x12xf32>, %[[ACT]] : memref<?x12xf32>)
// CHECK-DAG:     memref.alloc() : memref<2048xi32>
// CHECK-DAG:     memref.alloc() : memref<9xi32>
// CHECK-DAG:     memref.alloc(%{{.*}}) : memref<1x?xi32>
// CHECK:         gpu.launch_func @fff_kernels::@leaf_tree_ffn_grad_bf16_32x64_depth3_count blocks in (%c1
// CHECK:         gpu.launch_func @fff_kernels::@leaf_tree_ffn_grad_bf16_32x64_depth3_scan blocks in (%c1
// CHECK:         gpu.launch_func @fff_kernels::@leaf_tree_ffn_grad_bf16_32x64_depth3_scatter blocks in (%c1
// CHECK:         %[[COLUMN_BLOCKS:.*]] = arith.ceildivui %{{.*}}, %c128
// CHECK:         gpu.launch_func @fff_kernels::@leaf_tree_ffn_grad_bf16_32x64_depth3_sums {{.*}} threads in (%c128
// CHECK-NOT:     gpu.launch_func
// CHECK:       gpu.func @leaf_tree_ffn_grad_bf16_32x64_depth3_walk({{.*}}) workgroup({{.*}}) kernel attributes {fff.strategy = {dx_units_per_step = 8 : i64, {{.*}}grad_output = {steps = 1 : i64, vector_width = 8 : i64, vectors_per_step = 1 : i64}, grad_rows_per_step = 4 : i64, hidden_units_per_pass = 12 : i64, {{.*}}kind = "warp_per_token", {{.*}}max_registers = 168 : i64, {{.*}}resident_blocks = 396 : i64, {{.*}}tokens_per_block = 4 : i64, {{.*}}variant = "throughput"}
// CHECK:         gpu.shuffle xor
// CHECK:         scf.if
// CHECK:           memref.store {{.*}} : memref<?x1xi32>
// CHECK:           memref.store {{.*}} : memref<?x12xf32>
// CHECK:           memref.store {{.*}} : memref<?x12xf32>
// CHECK:         arith.truncf {{.*}} : f32 to bf16
// CHECK:         memref.store {{.*}} : memref<?x32xbf16>
// CHECK:       gpu.func @leaf_tree_ffn_grad_bf16_32x64_depth3_count({{.*}}) kernel attributes {fff.strategy = {kind = "tree_grad_count", sort_chunks = 256 : i64, threads = 256 : i64}
// CHECK:       gpu.func @leaf_tree_ffn_grad_bf16_32x64_depth3_scan({{.*}}) workgroup({{.*}}) kernel attributes {fff.strategy = {kind = "tree_grad_scan", sort_chunks = 256 : i64, threads = 256 : i64}
// CHECK:       gpu.func @leaf_tree_ffn_grad_bf16_32x64_depth3_scatter({{.*}}) kernel attributes {fff.strategy = {kind = "tree_grad_scatter", sort_chunks = 256 : i64, threads = 256 : i64}
// CHECK:       gpu.func @leaf_tree_ffn_grad_bf16_32x64_depth3_sums({{.*}}) kernel attributes {fff.strategy = {kind = "tree_grad_sums", threads = 128 : i64, units_per_pass = 12 : i64}
// CHECK:         math.fma {{.*}} : f32
// CHECK:         arith.truncf {{.*}} : f32 to bf16
// TWIN-LABEL: func @leaf_grad
// TWIN:         fff.leaf_tree_ffn_grad
// TWIN-NOT:     gpu.launch_func
func.func @leaf_grad(%dy: tensor<?x64xbf16>, %x: tensor<?x32xbf16>, %nw: tensor<7x32xbf16>, %nb: tensor<7xbf16>,
                     %w1: tensor<8x32x12xbf16>, %b1: tensor<8x12xbf16>, %w2: tensor<8x12x64xbf16>)
    -> (tensor<?x32xbf16>, tensor<8x32x12xbf16>, tensor<8x12xbf16>, tensor<8x12x64xbf16>, tensor<8x64xbf16>) {
  %dx, %dw1, %db1, %dw2, %db2 = fff.leaf_tree_ffn_grad %dy, %x, %nw, %nb, %w1, %b1, %w2 {depth = 3 : i64, activation = #fff.activation<gelu>}
      : tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<7x32xbf16>, tensor<7xbf16>, tensor<8x32x12xbf16>, tensor<8x12xbf16>, tensor<8x12x64xbf16>
  return %dx, %dw1, %db1, %dw2, %db2 : tensor<?x32xbf16>, tensor<8x32x12xbf16>, tensor<8x12xbf16>, tensor<8x12x64xbf16>, tensor<8x64xbf16>
}

// -----

// Wider leaves take one row of w2 per walk over dy, and the hidden layer and
// the sums in passes: 48 units are two passes of 32 over x and three of 16
// over each leaf's rows.
// CHECK-LABEL: func @wide_leaves
// CHECK:       gpu.func @leaf_tree_ffn_grad_f32_64x64_depth1_walk({{.*}}) kernel attributes {fff.strategy = {{{.*}}hidden_units_per_pass = 32 : i64
// CHECK-NOT:     grad_rows_per_step
// CHECK:       gpu.func @leaf_tree_ffn_grad_f32_64x64_depth1_sums({{.*}}) kernel attributes {fff.strategy = {kind = "tree_grad_sums", threads = 128 : i64, units_per_pass = 16 : i64}
func.func @wide_leaves(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>, %nw: tensor<1x64xf32>, %nb: tensor<1xf32>,
                       %w1: tensor<2x64x48xf32>, %b1: tensor<2x48xf32>, %w2: tensor<2x48x64xf32>) -> tensor<2x64x48xf32> {
  %dx, %dw1, %db1, %dw2, %db2 = fff.leaf_tree_ffn_grad %dy, %x, %nw, %nb, %w1, %b1, %w2 {depth = 1 : i64}
      : tensor<?x64xf32>, tensor<?x64xf32>, tensor<1x64xf32>, tensor<1xf32>, tensor<2x64x48xf32>, tensor<2x48xf32>, tensor<2x48x64xf32>
  return %dw1 : tensor<2x64x48xf32>
}

// -----

// A dynamic leaf width has no kernel: the conversion stops with the reason;
// with cpu-twin, the op is left for the CPU path.
// TWIN-LABEL: func @dynamic_leaf_width
// TWIN:         fff.leaf_tree_ffn_grad
func.func @dynamic_leaf_width(%dy: tensor<?x8xf32>, %x: tensor<?x8xf32>, %nw: tensor<1x8xf32>, %nb: tensor<1xf32>,
                              %w1: tensor<2x8x?xf32>, %b1: tensor<2x?xf32>, %w2: tensor<2x?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @below {{'fff.leaf_tree_ffn_grad' op has no GPU kernel for a dynamic leaf width; use --fff-cpu-pipeline}}
  %dx, %dw1, %db1, %dw2, %db2 = fff.leaf_tree_ffn_grad %dy, %x, %nw, %nb, %w1, %b1, %w2 {depth = 1 : i64}
      : tensor<?x8xf32>, tensor<?x8xf32>, tensor<1x8xf32>, tensor<1xf32>, tensor<2x8x?xf32>, tensor<2x?xf32>, tensor<2x?x8xf32>
  return %dx : tensor<?x8xf32>
}

// RUN: fff-opt %s --convert-fff-to-gpu --split-input-file --verify-diagnostics | FileCheck %s
// RUN: fff-opt %s --convert-fff-to-gpu=cpu-twin --split-input-file | FileCheck %s --check-prefix=TWIN
// RUN: not fff-opt %s --convert-fff-to-gpu=tree-variant=fast --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD-VARIANT
// The error cases at the end make this run fail, hence `not`:
// RUN: not fff-opt %s --convert-fff-to-gpu="tree-variant=throughput tree-staging=false" --split-input-file 2>/dev/null | FileCheck %s --check-prefix=UNSTAGED

// BAD-VARIANT: error: unknown tree-variant 'fast'; expected auto, latency or throughput

// UltraFastBERT-1x11's layer. Two kernels; the host runs the latency one
// for batches of up to 2048 tokens and the throughput one, on at most 264
// resident blocks, for larger batches. An empty batch launches no blocks,
// which fff's runtime skips.
// CHECK-LABEL: func @ultrafastbert_1x11
// CHECK:         %[[SMALL:.*]] = arith.cmpi ule, %{{.*}}, %c2048
// CHECK:         scf.if %[[SMALL]] {
// CHECK:           gpu.launch_func @fff_kernels::@tree_ffn_bf16_768x768_depth11_latency blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%c128, %{{.*}}, %{{.*}})
// CHECK:         } else {
// CHECK:           arith.minui %{{.*}}, %c264
// CHECK:           gpu.launch_func @fff_kernels::@tree_ffn_bf16_768x768_depth11_throughput blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%c256, %{{.*}}, %{{.*}})

// The latency kernel: a warp per token, 4 a block. x stays in registers (3
// vectors of 8 x bf16 a lane, loaded once). Each step of the walk loads the
// node's and both children's rows with 128-bit loads (9 a lane), sums all
// three with interleaved shuffle butterflies, picks the child's logit after
// the node's decision, and records two rows with act(logit) (the erf in GELU
// is a polynomial). The output sums the 12 recorded rows per vector,
// unrolled, and stores each vector once. No loop is left for LLVM or ptxas
// to unroll.
// CHECK:       gpu.func @tree_ffn_bf16_768x768_depth11_latency
// CHECK-SAME:    workgroup(%[[COEF:.*]] : memref<4x12xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[ROWS:.*]] : memref<4x12xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-SAME:    fff.strategy = {entries_per_token = 12 : i64, in = {steps = 1 : i64, vector_width = 8 : i64, vectors_per_step = 3 : i64}, input_in_registers = true, kind = "warp_per_token", levels_per_step = 2 : i64, max_registers = 128 : i64, out = {steps = 1 : i64, vector_width = 8 : i64, vectors_per_step = 3 : i64}, resident_blocks = 0 : i64, staged_levels = 0 : i64, tokens_per_block = 4 : i64, unroll_entries = true, variant = "latency"}
// CHECK-SAME:    known_block_size = array<i32: 128, 1, 1>, nvvm.maxnreg = 128 : i32
// CHECK-COUNT-3: vector.load %arg0{{.*}} {alignment = 16 : i64} : memref<?x768xbf16>, vector<8xbf16>
// CHECK:         scf.for
// CHECK:           scf.for {{.*}} to %c6
// CHECK-COUNT-9:     vector.load %arg1{{.*}} {alignment = 16 : i64} : memref<4095x768xbf16>, vector<8xbf16>
// CHECK-COUNT-3:     gpu.shuffle xor %{{.*}}, %c16_i32
// CHECK-COUNT-3:     gpu.shuffle xor %{{.*}}, %c8_i32
// CHECK-COUNT-3:     memref.load %arg2
// CHECK:             arith.cmpf ogt
// CHECK:             arith.select
// CHECK-NOT:         math.erf
// CHECK:             memref.store %{{.*}}, %[[COEF]]
// CHECK:             memref.store %{{.*}}, %[[ROWS]]
// CHECK:             memref.store %{{.*}}, %[[COEF]]
// CHECK:             memref.store %{{.*}}, %[[ROWS]]
// CHECK:           } {loop_annotation = #loop_annotation}
// CHECK-COUNT-3: vector.load %arg4
// CHECK-COUNT-36: vector.load %arg3
// CHECK-NOT:     vector.load %arg3
// CHECK-COUNT-3: vector.store %{{.*}}, %arg5{{.*}} {alignment = 16 : i64} : memref<?x768xbf16>, vector<8xbf16>
// CHECK-NOT:     vector.store
// CHECK:         gpu.return

// The throughput kernel: 8 warps a block, each looping over tokens. The
// block first copies the top 4 levels' 15 input and output rows to shared
// memory (aligned for 128-bit accesses); the walk takes them from there,
// then the other 8 levels from global memory, one level a step. The output
// reads the staged rows for entries of the top levels.
// CHECK:       gpu.func @tree_ffn_bf16_768x768_depth11_throughput
// CHECK-SAME:    workgroup({{.*}} : memref<8x12xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, {{.*}} : memref<8x12xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[STAGED_IN:[^ ]*]] : memref<15x768xbf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[STAGED_OUT:[^ ]*]] : memref<15x768xbf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-SAME:    levels_per_step = 1 : i64
// CHECK-SAME:    resident_blocks = 264 : i64, staged_levels = 4 : i64, tokens_per_block = 8 : i64, unroll_entries = true, variant = "throughput"
// CHECK:         scf.for %{{.*}} = %thread_id_x to %c1440 step %c256
// CHECK:           vector.store %{{.*}}, %[[STAGED_IN]]
// CHECK:         scf.for %{{.*}} = %thread_id_x to %c1440 step %c256
// CHECK:           vector.store %{{.*}}, %[[STAGED_OUT]]
// CHECK:         gpu.barrier
// CHECK:         %[[STRIDE:.*]] = arith.muli %grid_dim_x, %c8
// CHECK:         scf.for %[[TOKEN:.*]] = %{{.*}} to %{{.*}} step %[[STRIDE]]
// CHECK:           scf.for {{.*}} to %c4
// CHECK-COUNT-3:     vector.load %[[STAGED_IN]]
// CHECK:           scf.for {{.*}} to %c8
// CHECK-COUNT-3:     vector.load %arg1
// CHECK-COUNT-12:  vector.load %[[STAGED_OUT]]
// CHECK-COUNT-24:  vector.load %arg3
// CHECK-COUNT-3:   vector.store %{{.*}}, %arg5[%[[TOKEN]]
// With tree-variant=throughput only that kernel is launched, at any batch;
// with tree-staging=false it stages nothing (for measuring what staging buys).
// UNSTAGED-LABEL: func @ultrafastbert_1x11
// UNSTAGED-NOT:   cmpi ule
// UNSTAGED:       gpu.launch_func @fff_kernels::@tree_ffn_bf16_768x768_depth11_throughput
// UNSTAGED-NOT:   gpu.launch_func
// UNSTAGED:       gpu.func @tree_ffn_bf16_768x768_depth11_throughput
// UNSTAGED-SAME:    workgroup({{[^)]*}}memref<8x12xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// UNSTAGED-SAME:    staged_levels = 0 : i64
// UNSTAGED-NOT:   gpu.barrier
// TWIN-LABEL: func @ultrafastbert_1x11
// TWIN-NOT:     gpu.launch_func
// TWIN:         scf.if
// TWIN:           memref.alloca() : memref<12xf32>
// TWIN:           memref.alloca() : memref<12xi32>
// TWIN:           scf.for
// TWIN:             arith.xori
// TWIN:         } else {
// TWIN:           memref.alloca() {alignment = 16 : i64} : memref<15x768xbf16>
// TWIN-NOT:     math.erf
func.func @ultrafastbert_1x11(%x: tensor<?x768xbf16>, %wi: tensor<1x4095x768xbf16>, %bi: tensor<1x4095xbf16>,
                              %wo: tensor<1x4095x768xbf16>, %bo: tensor<768xbf16>) -> tensor<?x768xbf16> {
  %y = fff.tree_ffn %x, %wi bias(%bi : tensor<1x4095xbf16>), %wo bias(%bo : tensor<768xbf16>) {depth = 11 : i64}
       : tensor<?x768xbf16>, tensor<1x4095x768xbf16>, tensor<1x4095x768xbf16>
  return %y : tensor<?x768xbf16>
}

// -----

// Wide rows: a lane walks x in steps (a loop), rereading it from L1 at each
// level: the latency kernel takes 8 steps of 4 vectors, each loading the x
// vectors once and the three rows' vectors beside them (16 loads). Its
// output takes 3 steps of 3 vectors; 250 output vectors do not fill the
// last step, so its vectors are clamped and their stores masked. The
// throughput kernel walks one row a level, in 4 steps of 8 vectors. Too wide
// to stage.
// CHECK-LABEL: gpu.func @tree_ffn_f32_4096x1000_depth4_latency
// CHECK-SAME:    in = {steps = 8 : i64, vector_width = 4 : i64, vectors_per_step = 4 : i64}, input_in_registers = false
// CHECK-SAME:    out = {steps = 3 : i64, vector_width = 4 : i64, vectors_per_step = 3 : i64}
// CHECK:         scf.for {{.*}} to %c8 {{.*}} -> (vector<4xf32>, vector<4xf32>, vector<4xf32>)
// CHECK-COUNT-16:  vector.load
// CHECK:         gpu.shuffle xor
// CHECK:         arith.maximumf
// CHECK:         scf.for {{.*}} to %c3
// CHECK:           arith.minui
// CHECK-COUNT-15:  vector.load %arg2
// CHECK:           scf.if
// CHECK-NEXT:        vector.store
// CHECK-LABEL: gpu.func @tree_ffn_f32_4096x1000_depth4_throughput
// CHECK-SAME:    in = {steps = 4 : i64, vector_width = 4 : i64, vectors_per_step = 8 : i64}
// CHECK-SAME:    staged_levels = 0 : i64
// CHECK:         scf.for {{.*}} to %c4 {{.*}} -> (vector<4xf32>)
// CHECK-COUNT-16:  vector.load
func.func @wide(%x: tensor<?x4096xf32>, %wi: tensor<1x31x4096xf32>, %wo: tensor<1x31x1000xf32>) -> tensor<?x1000xf32> {
  %0 = fff.tree_ffn %x, %wi, %wo {depth = 4 : i64, activation = #fff.activation<relu>}
       : tensor<?x4096xf32>, tensor<1x31x4096xf32>, tensor<1x31x1000xf32>
  return %0 : tensor<?x1000xf32>
}

// -----

// A dynamic input width: scalar loads in a masked loop of dynamic length.
// Two trees record 2 * 3 rows, in one launch.
// CHECK-LABEL: gpu.func @tree_ffn_f16_dynamicx16_depth2_trees2_latency
// CHECK-SAME:    entries_per_token = 6 : i64, in = {steps = "dynamic", vector_width = 1 : i64, vectors_per_step = 1 : i64}
// CHECK:         scf.for %{{.*}} = %c0 to %c2
// CHECK:           arith.ceildivui
// CHECK:           vector.load {{.*}} : memref<?x?xf16>, vector<1xf16>
// CHECK:           arith.select
func.func @dynamic_width(%x: tensor<?x?xf16>, %wi: tensor<2x7x?xf16>, %wo: tensor<2x7x16xf16>) -> tensor<?x16xf16> {
  %0 = fff.tree_ffn %x, %wi, %wo {depth = 2 : i64} : tensor<?x?xf16>, tensor<2x7x?xf16>, tensor<2x7x16xf16>
  return %0 : tensor<?x16xf16>
}

// -----

// leaf_tree_ffn: the routing walk (s >= 0 goes right; depth 3 is a step of
// two levels and one of one), then the leaf's hidden layer, each lane adding
// x[d] times w1's row d (16 contiguous values) for its elements d; the 16
// hidden units' butterflies interleave; each unit is recorded against its
// row of w2, and the output summed as for tree_ffn over the leaf's bias.
// CHECK-LABEL: gpu.func @leaf_tree_ffn_f32_100x36_depth3_latency
// CHECK-SAME:    entries_per_token = 16 : i64
// CHECK:         scf.for {{.*}} to %c1
// CHECK:           arith.cmpf oge
// CHECK:         scf.for {{.*}} to %c1
// CHECK:           arith.cmpf oge
// CHECK:         vector.load %arg3{{.*}} {alignment = 16 : i64} : memref<800x16xf32>, vector<16xf32>
// CHECK:         vector.fma {{.*}} : vector<16xf32>
// CHECK-COUNT-80: gpu.shuffle xor
// CHECK:         vector.load %arg6{{.*}} : memref<8x36xf32>, vector<4xf32>
// CHECK:         vector.load %arg5{{.*}} : memref<128x36xf32>, vector<4xf32>
func.func @leaf(%x: tensor<?x100xf32>, %nw: tensor<7x100xf32>, %nb: tensor<7xf32>, %w1: tensor<8x100x16xf32>,
                %b1: tensor<8x16xf32>, %w2: tensor<8x16x36xf32>, %b2: tensor<8x36xf32>) -> tensor<?x36xf32> {
  %y = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 3 : i64}
       : tensor<?x100xf32>, tensor<7x100xf32>, tensor<7xf32>, tensor<8x100x16xf32>, tensor<8x16xf32>, tensor<8x16x36xf32>, tensor<8x36xf32>
  return %y : tensor<?x36xf32>
}

// -----

// Shapes no tree kernel takes stay, with the reason (in twin mode they take
// the CPU path instead).
func.func @dynamic_trees(%x: tensor<4x8xf32>, %w: tensor<?x3x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'fff.tree_ffn' op has no GPU kernel for a dynamic number of trees; use --fff-cpu-pipeline}}
  %0 = fff.tree_ffn %x, %w, %w {depth = 1 : i64} : tensor<4x8xf32>, tensor<?x3x8xf32>, tensor<?x3x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @too_many_rows(%x: tensor<4x8xf32>, %w: tensor<400x7x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'fff.tree_ffn' op has no GPU kernel for more than 1024 visited rows per token (trees * (depth + 1)); use --fff-cpu-pipeline}}
  %0 = fff.tree_ffn %x, %w, %w {depth = 2 : i64} : tensor<4x8xf32>, tensor<400x7x8xf32>, tensor<400x7x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// 2^62 trees (what --fff-check-input refuses at the front of the pipelines):
// the strategy divided by a record count that had overflowed to zero.
func.func @huge_tree_count(%x: tensor<?x64xf32>, %w: tensor<4611686018427387904x15x64xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'fff.tree_ffn' op has no GPU kernel for a tree count or row width past 2^24; use --fff-cpu-pipeline}}
  %0 = fff.tree_ffn %x, %w, %w {depth = 3 : i64} : tensor<?x64xf32>, tensor<4611686018427387904x15x64xf32>, tensor<4611686018427387904x15x64xf32>
  return %0 : tensor<?x64xf32>
}

// -----

func.func @wide_leaf(%x: tensor<?x8xf32>, %nw: tensor<1x8xf32>, %nb: tensor<1xf32>, %w1: tensor<2x8x65xf32>,
                     %b1: tensor<2x65xf32>, %w2: tensor<2x65x8xf32>, %b2: tensor<2x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'fff.leaf_tree_ffn' op has no GPU kernel for a leaf wider than 64; use --fff-cpu-pipeline}}
  %y = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 1 : i64}
       : tensor<?x8xf32>, tensor<1x8xf32>, tensor<1xf32>, tensor<2x8x65xf32>, tensor<2x65xf32>, tensor<2x65x8xf32>, tensor<2x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// The leaf tree's backward takes the forward's limits: no GPU kernel for a
// leaf wider than 64.
func.func @wide_leaf_grad(%dy: tensor<?x5xf32>, %x: tensor<?x8xf32>, %nw: tensor<1x8xf32>, %nb: tensor<1xf32>,
                          %w1: tensor<2x8x65xf32>, %b1: tensor<2x65xf32>, %w2: tensor<2x65x5xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'fff.leaf_tree_ffn_grad' op has no GPU kernel for a leaf wider than 64; use --fff-cpu-pipeline}}
  %r:5 = fff.leaf_tree_ffn_grad %dy, %x, %nw, %nb, %w1, %b1, %w2 {depth = 1 : i64}
         : tensor<?x5xf32>, tensor<?x8xf32>, tensor<1x8xf32>, tensor<1xf32>, tensor<2x8x65xf32>, tensor<2x65xf32>, tensor<2x65x5xf32>
  return %r#0 : tensor<?x8xf32>
}

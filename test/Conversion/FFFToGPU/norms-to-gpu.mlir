// RUN: fff-opt %s --convert-fff-to-gpu --split-input-file --verify-diagnostics | FileCheck %s

// The strategy follows from the row size and element type alone, and is
// recorded on each kernel. Short rows: a warp per row, four rows a block,
// 128-bit loads (4 x f32, 8 x bf16). Kernels are named after what they do.
// CHECK-LABEL: func @warp_per_row
// CHECK:         gpu.launch_func @fff_kernels::@layer_norm_f32_768_warp_per_row blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%c128, %{{.*}}, %{{.*}})
// CHECK:         gpu.launch_func @fff_kernels::@rms_norm_bf16_768_warp_per_row
// CHECK:       gpu.module @fff_kernels
// CHECK:         gpu.func @layer_norm_f32_768_warp_per_row({{.*}}) kernel attributes {fff.strategy = {kind = "warp_per_row", max_registers = 64 : i64, rows_per_block = 4 : i64, threads_per_row = 32 : i64, vector_width = 4 : i64, vectors_per_thread = 6 : i64}, known_block_size = array<i32: 128, 1, 1>, nvvm.maxnreg = 64 : i32}
// CHECK-NOT:       workgroup
// CHECK:           vector.load {{.*}} {alignment = 16 : i64} : memref<?x768xf32>, vector<4xf32>
// CHECK:           gpu.shuffle xor
// CHECK:           llvm.call_intrinsic "llvm.nvvm.sqrt.rn.f"
// CHECK:           vector.store {{.*}} {alignment = 16 : i64} : memref<?x768xf32>, vector<4xf32>
// CHECK:         gpu.func @rms_norm_bf16_768_warp_per_row({{.*}}) kernel attributes {fff.strategy = {kind = "warp_per_row", max_registers = 64 : i64, rows_per_block = 4 : i64, threads_per_row = 32 : i64, vector_width = 8 : i64, vectors_per_thread = 3 : i64}
func.func @warp_per_row(%x: tensor<?x768xf32>, %h: tensor<?x768xbf16>) -> (tensor<?x768xf32>, tensor<?x768xbf16>) {
  %0 = fff.layer_norm %x : tensor<?x768xf32>
  %1 = fff.rms_norm %h : tensor<?x768xbf16>
  return %0, %1 : tensor<?x768xf32>, tensor<?x768xbf16>
}

// -----

// A row size with no wide divisor gets scalar loads; the lanes whose last
// vector can fall past the row (127 = 3 * 32 + 31) load a clamped index and
// zero it.
// CHECK-LABEL: gpu.func @rms_norm_f16_127_warp_per_row
// CHECK:         arith.minui
// CHECK:         vector.load {{.*}} : memref<?x127xf16>, vector<1xf16>
// CHECK:         arith.select
// CHECK-SAME:    vector<1xf16>
func.func @odd_row(%x: tensor<?x127xf16>, %g: tensor<127xf16>) -> tensor<?x127xf16> {
  %0 = fff.rms_norm %x scale(%g : tensor<127xf16>) : tensor<?x127xf16>
  return %0 : tensor<?x127xf16>
}

// -----

// Long rows: a block per row, partial sums across warps through 32 floats of
// shared memory, one barrier pair per reduction.
// CHECK-LABEL: gpu.func @layer_norm_f32_8192_block_per_row
// CHECK-SAME:    workgroup(%[[SMEM:[^ ]*]] : memref<32xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-SAME:    kind = "block_per_row", max_registers = 64 : i64, rows_per_block = 1 : i64, threads_per_row = 256 : i64, vector_width = 4 : i64, vectors_per_thread = 8 : i64
// CHECK:         memref.store %{{.*}}, %[[SMEM]][%{{.*}}] : memref<32xf32, #gpu.address_space<workgroup>>
// CHECK:         gpu.barrier
// CHECK:         memref.load %[[SMEM]]
// CHECK:         gpu.barrier
// CHECK-LABEL: gpu.func @rms_norm_bf16_16384_block_per_row
// CHECK-SAME:    threads_per_row = 512 : i64, vector_width = 8 : i64, vectors_per_thread = 4 : i64
func.func @block_per_row(%x: tensor<?x8192xf32>, %h: tensor<?x16384xbf16>) -> (tensor<?x8192xf32>, tensor<?x16384xbf16>) {
  %0 = fff.layer_norm %x : tensor<?x8192xf32>
  %1 = fff.rms_norm %h : tensor<?x16384xbf16>
  return %0, %1 : tensor<?x8192xf32>, tensor<?x16384xbf16>
}

// -----

// Rows too long for registers, or of dynamic size: two loops over the row.
// CHECK-LABEL: gpu.func @layer_norm_f32_32768_looped
// CHECK-SAME:    kind = "looped", max_registers = 64 : i64, rows_per_block = 1 : i64, threads_per_row = 512 : i64, vector_width = 4 : i64, vectors_per_thread = 0 : i64
// CHECK:         scf.for {{.*}} iter_args
// CHECK:         scf.for
// CHECK-LABEL: gpu.func @layer_norm_bf16_dynamic_looped
// CHECK-SAME:    vector_width = 1 : i64
func.func @looped(%x: tensor<?x32768xf32>, %d: tensor<?x?xbf16>) -> (tensor<?x32768xf32>, tensor<?x?xbf16>) {
  %0 = fff.layer_norm %x : tensor<?x32768xf32>
  %1 = fff.layer_norm %d : tensor<?x?xbf16>
  return %0, %1 : tensor<?x32768xf32>, tensor<?x?xbf16>
}

// -----

// Two norms of one kind get distinct kernels.
// CHECK-LABEL: func @same_kernel_twice
// CHECK:         gpu.launch_func @fff_kernels::@rms_norm_f32_64_warp_per_row
// CHECK:         gpu.launch_func @fff_kernels::@rms_norm_f32_64_warp_per_row_1
func.func @same_kernel_twice(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %0 = fff.rms_norm %x : tensor<?x64xf32>
  %1 = fff.rms_norm %0 : tensor<?x64xf32>
  return %1 : tensor<?x64xf32>
}

// -----

// Results are allocated in their final shapes, which the kernel sees as a
// [rows, row size] matrix and [rows] statistics.
// CHECK-LABEL: func @shapes
// CHECK-DAG:     %[[OUT:.*]] = memref.alloc(%{{.*}}) : memref<?x4x64xf32>
// CHECK-DAG:     %[[MEAN:.*]] = memref.alloc(%{{.*}}) : memref<?x1x1xf32>
// CHECK-DAG:     memref.collapse_shape %[[OUT]] {{\[\[}}0], [1, 2]] : memref<?x4x64xf32> into memref<?x256xf32>
// CHECK-DAG:     memref.collapse_shape %[[MEAN]] {{\[\[}}0, 1, 2]] : memref<?x1x1xf32> into memref<?xf32>
// CHECK:         bufferization.to_tensor %[[OUT]] restrict writable
func.func @shapes(%x: tensor<?x4x64xf32>, %g: tensor<4x64xf32>) -> (tensor<?x4x64xf32>, tensor<?x1x1xf32>, tensor<?x1x1xf32>) {
  %0:3 = fff.layer_norm %x scale(%g : tensor<4x64xf32>) normalized_rank 2 return_stats : tensor<?x4x64xf32>
  return %0#0, %0#1, %0#2 : tensor<?x4x64xf32>, tensor<?x1x1xf32>, tensor<?x1x1xf32>
}

// -----

// A unit whose layer norm's mean and rstd it yields (the training forward
// of a mixed-precision norm saves them for the backward) is one kernel: it
// stores the statistics per row beside the unit's row results.
// CHECK-LABEL: func @unit_with_stats
// CHECK-NOT:     fff.fusion
// CHECK:         %[[MEAN:.*]] = memref.alloc{{.*}} : memref<?x1xf32>
// CHECK:         %[[RSTD:.*]] = memref.alloc{{.*}} : memref<?x1xf32>
// CHECK:         %[[MEAN_ROWS:.*]] = memref.collapse_shape %[[MEAN]]
// CHECK:         %[[RSTD_ROWS:.*]] = memref.collapse_shape %[[RSTD]]
// CHECK:         gpu.launch_func @fff_kernels::@fused_layer_norm_f32_64_warp_per_row {{.*}} args(%{{.*}} : memref<64xf32>, %{{.*}} : memref<64xf32>, %[[MEAN_ROWS]] : memref<?xf32>, %[[RSTD_ROWS]] : memref<?xf32>,
// CHECK:         return %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x64xbf16>, tensor<?x1xf32>, tensor<?x1xf32>
func.func @unit_with_stats(%x: tensor<?x64xbf16>, %g: tensor<64xf32>, %b: tensor<64xf32>)
    -> (tensor<?x64xbf16>, tensor<?x1xf32>, tensor<?x1xf32>) {
  %y, %m, %r = fff.fusion ins(%x, %g, %b : tensor<?x64xbf16>, tensor<64xf32>, tensor<64xf32>) {
  ^bb0(%a: tensor<?x64xbf16>, %ga: tensor<64xf32>, %ba: tensor<64xf32>):
    %wide = arith.extf %a : tensor<?x64xbf16> to tensor<?x64xf32>
    %n:3 = fff.layer_norm %wide scale(%ga : tensor<64xf32>) bias(%ba : tensor<64xf32>) return_stats : tensor<?x64xf32>
    %narrow = arith.truncf %n#0 : tensor<?x64xf32> to tensor<?x64xbf16>
    fff.yield %narrow, %n#1, %n#2 : tensor<?x64xbf16>, tensor<?x1xf32>, tensor<?x1xf32>
  } -> tensor<?x64xbf16>, tensor<?x1xf32>, tensor<?x1xf32>
  return %y, %m, %r : tensor<?x64xbf16>, tensor<?x1xf32>, tensor<?x1xf32>
}

// -----

// A fused unit the kernel emitter cannot evaluate is split back, with the
// reason: its norm gets a kernel of its own, the pointwise ops stay for
// the linalg lowering (unit-split.mlir has more).
// CHECK-LABEL: func @unit_using_stats
// CHECK-NOT:     fff.fusion
// CHECK:         gpu.launch_func @fff_kernels::@layer_norm_f32_8
// CHECK:         arith.mulf %{{.*}} : tensor<4x1xf32>
func.func @unit_using_stats(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>) {
  // expected-remark @+1 {{runs as separate kernels: the fused norm kernel does not take work on the norm's mean or rstd}}
  %0:2 = fff.fusion ins(%x : tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %n:3 = fff.layer_norm %a return_stats : tensor<4x8xf32>
    %y = arith.addf %n#0, %a : tensor<4x8xf32>
    %v = arith.mulf %n#2, %n#2 : tensor<4x1xf32>
    fff.yield %y, %v : tensor<4x8xf32>, tensor<4x1xf32>
  } -> tensor<4x8xf32>, tensor<4x1xf32>
  return %0#0, %0#1 : tensor<4x8xf32>, tensor<4x1xf32>
}

// RUN: fff-opt %s --convert-linalg-to-gpu-kernels --canonicalize --split-input-file --verify-diagnostics | FileCheck %s

// A matmul takes the tiled contraction kernel: 64x64 output tiles over 16
// deep K slices staged in shared memory (A's slice padded by a column),
// 4x4 f32 accumulators a thread, marked unoptimized. The grid covers the
// tiles; an empty M launches no blocks.
// CHECK-LABEL: func.func @matmul
// CHECK:         %[[M:.*]] = memref.dim %arg0, %c0
// CHECK:         %[[TILES:.*]] = arith.ceildivui %[[M]], %c64
// CHECK:         gpu.launch_func @fff_kernels::@matmul_f32_tiled_64x64x16 blocks in (%[[TILES]], %c1, %c1) threads in (%c256, %c1, %c1) args(%arg0 : memref<?x64xf32>, %arg1 : memref<64x32xf32>, %arg2 : memref<?x32xf32>, %[[M]] : index, %c32 : index, %c64 : index)
// CHECK:       gpu.func @matmul_f32_tiled_64x64x16
// CHECK-SAME:    workgroup(%{{.*}} : memref<16x65xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<16x64xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-SAME:    fff.strategy = {kind = "tiled_contraction", max_registers = 128 : i64, threads = array<i64: 16, 16>, tile = array<i64: 64, 64, 16>, unoptimized = true}
// CHECK:         scf.for {{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK:           gpu.barrier
// CHECK-COUNT-16:  math.fma
// CHECK:           gpu.barrier
// CHECK-COUNT-16:  scf.if
func.func @matmul(%a: memref<?x64xf32>, %b: memref<64x32xf32>, %c: memref<?x32xf32>) {
  linalg.matmul ins(%a, %b : memref<?x64xf32>, memref<64x32xf32>) outs(%c : memref<?x32xf32>)
  return
}

// -----

// bf16 operands and result: widened to f32 when staged, summed in f32, the
// sum with C rounded once. A small M takes the 16 x 256 tile.
// CHECK-LABEL: func.func @matmul_bf16_few_rows
// CHECK:       gpu.func @matmul_bf16_tiled_16x256x16
// CHECK-SAME:    workgroup(%{{.*}} : memref<16x17xf32, #gpu.address_space<workgroup>> {{.*}}, %{{.*}} : memref<16x256xf32, #gpu.address_space<workgroup>>
// CHECK-SAME:    threads = array<i64: 4, 64>, tile = array<i64: 16, 256, 16>
// CHECK:         arith.extf {{.*}} : bf16 to f32
// CHECK:         arith.truncf {{.*}} : f32 to bf16
func.func @matmul_bf16_few_rows(%a: memref<8x96xbf16>, %b: memref<96x300xbf16>, %c: memref<8x300xbf16>) {
  linalg.matmul ins(%a, %b : memref<8x96xbf16>, memref<96x300xbf16>) outs(%c : memref<8x300xbf16>)
  return
}

// -----

// A generic contraction as torch-mlir's Linear on [batch, seq, hidden]
// becomes after reshapes fold: two M dims (taken as one), a weight read
// transposed. The grid is the tiles of all rows.
// CHECK-LABEL: func.func @linear_two_m_dims
// CHECK:         gpu.launch_func @fff_kernels::@generic_f32_tiled_64x64x16
// CHECK:       gpu.func @generic_f32_tiled_64x64x16
#x = affine_map<(b, s, o, i) -> (b, s, i)>
#w = affine_map<(b, s, o, i) -> (o, i)>
#y = affine_map<(b, s, o, i) -> (b, s, o)>
func.func @linear_two_m_dims(%x: memref<?x8x64xf32>, %w: memref<48x64xf32>, %y: memref<?x8x48xf32>) {
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x8x64xf32>, memref<48x64xf32>) outs(%y : memref<?x8x48xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Not a multiply-accumulate (the product is scaled first): the loop-nest
// kernel, a thread per output, the reduction loop carrying the output in a
// register and storing it once.
// CHECK-LABEL: func.func @scaled_product
// CHECK:         gpu.launch_func @fff_kernels::@generic_f32_thread_per_point
// CHECK:       gpu.func @generic_f32_thread_per_point
// CHECK-SAME:    fff.strategy = {kind = "thread_per_point", max_registers = 64 : i64, threads_per_block = 256 : i64}
// CHECK:         %[[INIT:.*]] = memref.load %arg2
// CHECK:         %[[SUM:.*]] = scf.for {{.*}} iter_args(%[[ACC:.*]] = %[[INIT]]) -> (f32)
// CHECK:           arith.mulf
// CHECK:           arith.mulf
// CHECK:           arith.addf %[[ACC]]
// CHECK:         memref.store %[[SUM]], %arg2
#a = affine_map<(i, j, k) -> (i, k)>
#b = affine_map<(i, j, k) -> (k, j)>
#c = affine_map<(i, j, k) -> (i, j)>
func.func @scaled_product(%a: memref<4x8xf32>, %b: memref<8x4xf32>, %c: memref<4x4xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x8xf32>, memref<8x4xf32>) outs(%c : memref<4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %half = arith.constant 0.5 : f32
    %p = arith.mulf %x, %y : f32
    %q = arith.mulf %p, %half : f32
    %s = arith.addf %acc, %q : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Pointwise work with a broadcast operand and a scalar from outside the
// op (a kernel parameter), and a fill: a thread each per element, the
// points numbered with the last dim fastest. A memref.copy becomes a copy
// kernel.
// CHECK-LABEL: func.func @pointwise
// CHECK:         gpu.launch_func @fff_kernels::@fill_f32_thread_per_point {{.*}} args(%arg3 : f32, %arg2 : memref<?x16xf32>
// CHECK:         gpu.launch_func @fff_kernels::@generic_f32_thread_per_point {{.*}} args(%arg0 : memref<?x16xf32>, %arg1 : memref<16xf32>, %arg2 : memref<?x16xf32>, %{{.*}} : index, %c16 : index, %arg3 : f32)
// CHECK:         gpu.launch_func @fff_kernels::@copy_f32_thread_per_point
// CHECK:       gpu.func @generic_f32_thread_per_point
// CHECK:         %[[COL:.*]] = arith.remui %{{.*}}, %arg4
// CHECK:         %[[REST:.*]] = arith.divui
// CHECK:         %[[ROW:.*]] = arith.remui %[[REST]], %arg3
// CHECK:         memref.load %arg0[%[[ROW]], %[[COL]]]
// CHECK:         memref.load %arg1[%[[COL]]]
// CHECK:         arith.addf
// CHECK:         arith.mulf {{.*}}, %arg5
// CHECK:         memref.store {{.*}}, %arg2[%[[ROW]], %[[COL]]]
#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
func.func @pointwise(%x: memref<?x16xf32>, %bias: memref<16xf32>, %y: memref<?x16xf32>, %scale: f32, %z: memref<?x16xf32>) {
  linalg.fill ins(%scale : f32) outs(%y : memref<?x16xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %bias : memref<?x16xf32>, memref<16xf32>) outs(%y : memref<?x16xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.addf %a, %b : f32
    %t = arith.mulf %s, %scale : f32
    linalg.yield %t : f32
  }
  memref.copy %y, %z : memref<?x16xf32> to memref<?x16xf32>
  return
}

// -----

// A reduction over the leading dim: a thread per column, walking the rows.
// CHECK-LABEL: func.func @column_sum
// CHECK:       gpu.func @generic_f32_thread_per_point
// CHECK:         %[[COL:.*]] = arith.remui
// CHECK:         %[[INIT:.*]] = memref.load %arg1[%[[COL]]]
// CHECK:         %[[SUM:.*]] = scf.for %[[ROW:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %[[INIT]])
// CHECK:           memref.load %arg0[%[[ROW]], %[[COL]]]
// CHECK:         memref.store %[[SUM]], %arg1[%[[COL]]]
#in = affine_map<(i, j) -> (i, j)>
#out = affine_map<(i, j) -> (j)>
func.func @column_sum(%x: memref<4x8xf32>, %y: memref<8xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Parallel points that share an output element (the iterators say i is
// parallel, but every i writes all of y): one thread walks both loops, the
// output read and written at each step, rather than race.
// CHECK-LABEL: func.func @shared_outputs
// CHECK:         gpu.launch_func @fff_kernels::@generic_f32_serial blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
// CHECK:       gpu.func @generic_f32_serial
// CHECK-SAME:    kind = "serial"
// CHECK:         scf.for %[[I:.*]] =
// CHECK:           scf.for %[[J:.*]] =
// CHECK:             memref.load %arg1[%[[J]]]
// CHECK:             memref.store {{.*}}, %arg1[%[[J]]]
func.func @shared_outputs(%x: memref<4x8xf32>, %y: memref<8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

func.func private @scale(f32) -> f32

func.func @call_in_body(%x: memref<8xf32>, %y: memref<8xf32>) {
  // expected-error @below {{'linalg.generic' op cannot become a GPU kernel: its body holds 'func.call', which has no GPU lowering}}
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%x : memref<8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = func.call @scale(%a) : (f32) -> f32
    linalg.yield %s : f32
  }
  return
}

// -----

func.func @on_tensors(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @below {{'linalg.copy' op is still on tensors; convert-linalg-to-gpu-kernels runs after bufferization}}
  %z = linalg.copy ins(%x : tensor<8xf32>) outs(%y : tensor<8xf32>) -> tensor<8xf32>
  return %z : tensor<8xf32>
}

// -----

// A repeated layer's ops share one kernel: the two scalings by 2.0 (on
// other buffers) launch the same kernel; the scaling by 3.0 and the one
// whose operands are swapped in its body get their own.
// CHECK-LABEL: func.func @repeated
// CHECK:         gpu.launch_func @fff_kernels::@[[TWO:generic_f32_thread_per_point]] blocks
// CHECK:         gpu.launch_func @fff_kernels::@[[TWO]] blocks
// CHECK:         gpu.launch_func @fff_kernels::@[[THREE:generic_f32_thread_per_point_1]] blocks
// CHECK:         gpu.launch_func @fff_kernels::@[[SUB:generic_f32_thread_per_point_2]] blocks
// CHECK:         gpu.launch_func @fff_kernels::@[[SWAPPED:generic_f32_thread_per_point_3]] blocks
// CHECK-COUNT-4: gpu.func @generic_f32_thread_per_point
// CHECK-NOT:     gpu.func
#id = affine_map<(i) -> (i)>
func.func @repeated(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>, %w: memref<8xf32>) {
  %two = arith.constant 2.0 : f32
  %three = arith.constant 3.0 : f32
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : memref<8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.mulf %a, %two : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%z : memref<8xf32>) outs(%w : memref<8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.mulf %a, %two : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : memref<8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.mulf %a, %three : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : memref<8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.subf %a, %out : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : memref<8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.subf %out, %a : f32
    linalg.yield %s : f32
  }
  return
}

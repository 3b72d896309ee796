// RUN: fff-opt %s --convert-fff-norms-to-vector="vector-bits=512 integer-bf16" | FileCheck %s

// A LayerNorm backward over rows of 768 f32. The rows fall into
// max(1, min(rows, 64)) blocks of ceil(rows / blocks) rows, a function of the
// shape alone; each block (threaded from 2^17 elements, the strategy
// recorded on the loop) zeroes its partial dgamma and dbeta rows, then, if
// it has rows, sums g and g * xhat over its first row. Its row loop carries
// a row's sums (rstd, mean(g * xhat), mean(g), mean) and, in the loop that
// sums the next row (the block's last row sums itself again), writes the
// row's dx and adds its dy * xhat and dy into the partials: the passes are
// pipelined. The partial rows are then summed in block order, a vector of
// columns at a time.
// Where dy, x and dx (rows * 768 * 4 bytes each) move 32 MiB or more, more
// than the caches hold, and dx's buffer and rows start on whole vectors
// (64 bytes), dx is written with streaming stores (it would leave the
// caches before anyone read it), each block's fenced before the block
// ends; the partial rows, read back at every row, are stored the ordinary
// way. Otherwise the same loops store dx the ordinary way.
// CHECK-LABEL: func.func @layer_norm_grad
// CHECK:         %[[FEWER:.*]] = arith.minui %[[ROWS:.*]], %c64
// CHECK:         %[[BLOCKS:.*]] = arith.maxui %c1{{.*}}, %[[FEWER]]
// CHECK:         %[[PER_BLOCK:.*]] = arith.ceildivui %[[ROWS]], %[[BLOCKS]]
// CHECK:         %[[DGAMMA_PARTS:.*]] = memref.alloc(%[[BLOCKS]], %{{.*}}) {alignment = 64 : i64} : memref<?x?xf32>
// CHECK:         %[[DBETA_PARTS:.*]] = memref.alloc(%[[BLOCKS]], %{{.*}}) {alignment = 64 : i64} : memref<?x?xf32>
// CHECK:         %[[X_AND_DY:.*]] = arith.muli %{{.*}}, %c2
// CHECK:         %[[MOVED:.*]] = arith.addi %{{.*}}, %[[X_AND_DY]]
// CHECK:         %[[LARGE:.*]] = arith.cmpi uge, %[[MOVED]], %c33554432
// CHECK:         %[[DX_START:.*]] = memref.extract_aligned_pointer_as_index %[[DX:.*]] : memref<?x768xf32>
// CHECK:         %[[STREAM:.*]] = arith.andi %[[LARGE]], %{{.*}}
// CHECK:         scf.if %[[STREAM]] {
// CHECK:         scf.if
// CHECK:           scf.parallel (%[[BLOCK:.*]]) = (%{{.*}}) to (%[[BLOCKS]])
// CHECK:             %[[FIRST:.*]] = arith.muli %[[BLOCK]], %[[PER_BLOCK]]
// CHECK:             %[[LAST:.*]] = arith.minui
// CHECK:             vector.store %{{.*}}, %[[DGAMMA_PARTS]][%[[BLOCK]], %{{.*}}]
// CHECK:             vector.store %{{.*}}, %[[DBETA_PARTS]][%[[BLOCK]], %{{.*}}]
// CHECK:             %[[ANY:.*]] = arith.cmpi ult, %[[FIRST]], %[[LAST]]
// CHECK:             scf.if %[[ANY]] {
// CHECK:               scf.for {{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:               scf.for %[[ROW:.*]] = %[[FIRST]] to %[[LAST]] step %{{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:                 %[[NEXT:.*]] = arith.minui %{{.*}}, %{{.*}} : index
// CHECK:                 memref.load %{{.*}}[%[[NEXT]]] : memref<?xf32>
// CHECK:                 scf.for {{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:                   vector.store %{{.*}}, %[[DX]][%[[ROW]], %{{.*}}] {alignment = 64 : i64, nontemporal = true} : memref<?x768xf32>, vector<16xf32>
// CHECK:                   %[[PART:.*]] = vector.load %[[DGAMMA_PARTS]][%[[BLOCK]], %{{.*}}]
// CHECK:                   %[[SUM:.*]] = arith.addf %[[PART]], %{{.*}} : vector<16xf32>
// CHECK:                   vector.store %[[SUM]], %[[DGAMMA_PARTS]][%[[BLOCK]], %{{.*}}] : memref<?x?xf32>
// CHECK:                   vector.load %{{.*}}[%[[NEXT]], %{{.*}}] : memref<?x768xf32>, vector<16xf32>
// CHECK:               llvm.call @llvm.x86.sse.sfence()
// CHECK:           } {fff.strategy = {accumulators = 4 : i64, bf16_rounding = "integer", lanes = 16 : i64, min_parallel_elements = 131072 : i64, min_streamed_bytes = 33554432 : i64, row_blocks = 64 : i64, vector_bits = 512 : i64}}
// CHECK:         } else {
// CHECK:           scf.for %{{.*}} = %{{.*}} to %[[BLOCKS]]
// CHECK:       } else {
// CHECK:         scf.parallel
// CHECK:                   vector.store %{{.*}}, %[[DX]][%{{.*}}, %{{.*}}] : memref<?x768xf32>, vector<16xf32>
// CHECK-NOT:     nontemporal
// CHECK:         %[[DGAMMA:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?xf32>
// CHECK:         scf.for %[[J:.*]] =
// CHECK:           %[[TOTAL:.*]] = scf.for %[[K:.*]] = %{{.*}} to %[[BLOCKS]] step %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (vector<16xf32>)
// CHECK:             vector.load %[[DGAMMA_PARTS]][%[[K]], %[[J]]]
// CHECK:           vector.store %[[TOTAL]], %[[DGAMMA]][%[[J]]]
// CHECK:         memref.cast %[[DGAMMA]] : memref<?xf32> to memref<768xf32>
// CHECK:         return
func.func @layer_norm_grad(%dy: tensor<?x768xf32>, %x: tensor<?x768xf32>, %m: tensor<?x1xf32>, %r: tensor<?x1xf32>, %g: tensor<768xf32>)
    -> (tensor<?x768xf32>, tensor<768xf32>, tensor<768xf32>) {
  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %m, %r scale(%g : tensor<768xf32>) bias_grad : tensor<?x768xf32>, tensor<?x1xf32>
  return %dx, %dg, %db : tensor<?x768xf32>, tensor<768xf32>, tensor<768xf32>
}

// An RMSNorm backward without rstd and without scale: one pass sums x^2 and
// dy * x (two sums of four accumulators), rstd follows; no partials.
// CHECK-LABEL: func.func @rms_norm_grad
// CHECK-NOT:     memref<?x?xf32>
// CHECK:         scf.for {{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:         math.rsqrt
// CHECK:         return
func.func @rms_norm_grad(%dy: tensor<?x768xf32>, %x: tensor<?x768xf32>) -> tensor<?x768xf32> {
  %dx = fff.rms_norm_grad %dy, %x : tensor<?x768xf32>
  return %dx : tensor<?x768xf32>
}

// A backward unit's pointwise work, as elementwise fusion leaves it: dy is
// computed from the incoming gradient and a dropout mask (bf16) as each
// vector is read, and dh = dresidual + dx is written in f32 in place of dx.
// No generic is left, and neither dy nor dx has a buffer: the only
// [rows, 4096] allocation is dh's.
// CHECK-LABEL: func.func @rms_norm_grad_fused
// CHECK-NOT:     linalg.generic
// CHECK:         memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x4096xf32>
// CHECK-NOT:     memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x4096xbf16>
// CHECK:         scf.for
// CHECK:           vector.load %{{.*}} : memref<?x4096xbf16>, vector<16xbf16>
// CHECK:           vector.load %{{.*}} : memref<?x4096xbf16>, vector<16xbf16>
// CHECK:           arith.mulf %{{.*}}, %{{.*}} : vector<16xbf16>
// CHECK:           arith.extf %{{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK:         arith.extf %{{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK:         arith.addf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK:         vector.store %{{.*}} : memref<?x4096xf32>, vector<16xf32>
// CHECK-NOT:     linalg.generic
// CHECK:         return
#rows = affine_map<(i, j) -> (i, j)>
func.func @rms_norm_grad_fused(%grad: tensor<?x4096xbf16>, %mask: tensor<?x4096xbf16>, %x: tensor<?x4096xbf16>,
                               %g: tensor<4096xbf16>, %dres: tensor<?x4096xf32>) -> (tensor<?x4096xf32>, tensor<4096xbf16>) {
  %c0 = arith.constant 0 : index
  %rows = tensor.dim %x, %c0 : tensor<?x4096xbf16>
  %e16 = tensor.empty(%rows) : tensor<?x4096xbf16>
  %dy = linalg.generic {indexing_maps = [#rows, #rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%grad, %mask : tensor<?x4096xbf16>, tensor<?x4096xbf16>) outs(%e16 : tensor<?x4096xbf16>) {
  ^bb0(%a: bf16, %m: bf16, %o: bf16):
    %t = arith.mulf %a, %m : bf16
    linalg.yield %t : bf16
  } -> tensor<?x4096xbf16>
  %dx, %dg = fff.rms_norm_grad %dy, %x scale(%g : tensor<4096xbf16>) : tensor<?x4096xbf16>
  %e32 = tensor.empty(%rows) : tensor<?x4096xf32>
  %dh = linalg.generic {indexing_maps = [#rows, #rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%dx, %dres : tensor<?x4096xbf16>, tensor<?x4096xf32>) outs(%e32 : tensor<?x4096xf32>) {
  ^bb0(%d: bf16, %r: f32, %o: f32):
    %w = arith.extf %d : bf16 to f32
    %s = arith.addf %w, %r : f32
    linalg.yield %s : f32
  } -> tensor<?x4096xf32>
  return %dh, %dg : tensor<?x4096xf32>, tensor<4096xbf16>
}

// A mixed-type norm's backward (torch's bf16 x with f32 parameters): the f32
// norm reads dy and x through the casts that widen them and writes dx
// through the one that narrows it. No generic is left and no row is stored
// in f32: the only row allocation is dx's, in bf16; the tail's masked lanes
// of widened x are zero, as sum(x^2) needs.
// CHECK-LABEL: func.func @rms_norm_grad_mixed
// CHECK-NOT:     linalg.generic
// CHECK-NOT:     memref<?x1000xf32>
// CHECK:         memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x1000xbf16>
// CHECK-NOT:     memref<?x1000xf32>
// CHECK:         scf.for
// CHECK:           vector.load %[[X:.*]][%{{.*}}, %{{.*}}] : memref<?x1000xbf16>, vector<16xbf16>
// CHECK:           arith.extf %{{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK:         scf.for
// CHECK:           %[[MASKED:.*]] = vector.maskedload %[[X]]
// CHECK:           %[[WIDE:.*]] = arith.extf %[[MASKED]] : vector<16xbf16> to vector<16xf32>
// CHECK:           arith.select %{{.*}}, %[[WIDE]], %{{.*}} : vector<16xi1>, vector<16xf32>
// CHECK-NOT:     linalg.generic
// CHECK-NOT:     memref<?x1000xf32>
// CHECK:         return
func.func @rms_norm_grad_mixed(%dy: tensor<?x1000xbf16>, %x: tensor<?x1000xbf16>, %g: tensor<1000xf32>)
    -> (tensor<?x1000xbf16>, tensor<1000xf32>) {
  %c0 = arith.constant 0 : index
  %rows = tensor.dim %x, %c0 : tensor<?x1000xbf16>
  %e32 = tensor.empty(%rows) : tensor<?x1000xf32>
  %dy_wide = linalg.generic {indexing_maps = [#rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%dy : tensor<?x1000xbf16>) outs(%e32 : tensor<?x1000xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %w = arith.extf %a : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<?x1000xf32>
  %x_wide = linalg.generic {indexing_maps = [#rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x1000xbf16>) outs(%e32 : tensor<?x1000xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %w = arith.extf %a : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<?x1000xf32>
  %dx_wide, %dg = fff.rms_norm_grad %dy_wide, %x_wide scale(%g : tensor<1000xf32>) : tensor<?x1000xf32>
  %e16 = tensor.empty(%rows) : tensor<?x1000xbf16>
  %dx = linalg.generic {indexing_maps = [#rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%dx_wide : tensor<?x1000xf32>) outs(%e16 : tensor<?x1000xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %n = arith.truncf %a : f32 to bf16
    linalg.yield %n : bf16
  } -> tensor<?x1000xbf16>
  return %dx, %dg : tensor<?x1000xbf16>, tensor<1000xf32>
}

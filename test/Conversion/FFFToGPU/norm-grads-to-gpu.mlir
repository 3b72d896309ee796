// RUN: fff-opt %s --convert-fff-to-gpu --split-input-file | FileCheck %s
// RUN: fff-opt %s --convert-fff-to-gpu=cpu-twin --split-input-file | FileCheck %s --check-prefix=TWIN
// RUN: fff-opt %s --convert-fff-to-gpu --split-input-file 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK

// A norm backward is two launches: dx with per-block partial rows of
// dgamma and dbeta (f32 scratch buffers, one row per block of a grid of at
// most 264), then the column sums, which add the partial rows in block
// order. Short rows take a warp each, eight warps a block, whose partial
// rows meet in shared memory (one [512] f32 buffer per gradient).
// CHECK-LABEL: func @warp_per_row
// CHECK:         %[[DGAMMA:.*]] = memref.alloc() : memref<512xbf16>
// CHECK:         %[[GP:.*]] = memref.alloc(%[[BLOCKS:.*]]) : memref<?x512xf32>
// CHECK:         %[[DBETA:.*]] = memref.alloc() : memref<512xbf16>
// CHECK:         %[[BP:.*]] = memref.alloc(%[[BLOCKS]]) : memref<?x512xf32>
// CHECK:         gpu.launch_func @fff_kernels::@layer_norm_grad_bf16_512_warp_per_row blocks in (%[[BLOCKS]], {{.*}}) threads in (%c256, {{.*}}) args({{.*}}, %[[GP]] : memref<?x512xf32>, %[[BP]] : memref<?x512xf32>, {{.*}})
// CHECK:         gpu.launch_func @fff_kernels::@layer_norm_grad_bf16_512_column_sums {{.*}} threads in (%c256{{.*}} args(%[[GP]] : memref<?x512xf32>, %[[BP]] : memref<?x512xf32>, %[[DGAMMA]] : memref<512xbf16>, %[[DBETA]] : memref<512xbf16>, %{{.*}} : index)
// CHECK:       gpu.func @layer_norm_grad_bf16_512_warp_per_row({{.*}}) workgroup({{.*}} : memref<512xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, {{.*}} : memref<512xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel attributes {fff.strategy = {kind = "warp_per_row", max_registers = 128 : i64, partial_blocks = 264 : i64, rows_per_block = 8 : i64, threads_per_row = 32 : i64, vector_width = 8 : i64, vectors_per_thread = 2 : i64}
// CHECK:         scf.for {{.*}} step %c8 iter_args
// CHECK:           vector.load {{.*}} {alignment = 16 : i64} : memref<?x512xbf16>, vector<8xbf16>
// CHECK:           gpu.shuffle xor
// CHECK:         gpu.barrier
// CHECK:       gpu.func @layer_norm_grad_bf16_512_column_sums({{.*}}) kernel attributes {fff.strategy = {kind = "column_sums", partial_blocks = 264 : i64, threads = 256 : i64}
// CHECK:         scf.for
// CHECK:           memref.load {{.*}} : memref<?x512xf32>
// CHECK:         arith.truncf {{.*}} : f32 to bf16
// TWIN-LABEL: func @warp_per_row
// TWIN:         fff.layer_norm_grad
// TWIN-NOT:     gpu.launch_func
func.func @warp_per_row(%dy: tensor<?x512xbf16>, %x: tensor<?x512xbf16>, %m: tensor<?x1xf32>, %r: tensor<?x1xf32>, %g: tensor<512xbf16>)
    -> (tensor<?x512xbf16>, tensor<512xbf16>, tensor<512xbf16>) {
  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %m, %r scale(%g : tensor<512xbf16>) bias_grad : tensor<?x512xbf16>, tensor<?x1xf32>
  return %dx, %dg, %db : tensor<?x512xbf16>, tensor<512xbf16>, tensor<512xbf16>
}

// -----

// Longer rows take a block each, the partial rows straight from registers;
// an rms_norm_grad without rstd sums x^2 for it with g * x.
// CHECK-LABEL: func @block_per_row
// CHECK:         gpu.launch_func @fff_kernels::@rms_norm_grad_f32_4096_block_per_row {{.*}} threads in (%c256,
// CHECK:         gpu.launch_func @fff_kernels::@rms_norm_grad_f32_4096_column_sums
// CHECK:       gpu.func @rms_norm_grad_f32_4096_block_per_row({{.*}}) workgroup({{.*}} : memref<32xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel attributes {fff.strategy = {kind = "block_per_row", max_registers = 128 : i64, partial_blocks = 264 : i64, rows_per_block = 1 : i64, threads_per_row = 256 : i64, vector_width = 4 : i64, vectors_per_thread = 4 : i64}
// CHECK:         llvm.call_intrinsic "llvm.nvvm.sqrt.rn.f"
func.func @block_per_row(%dy: tensor<?x4096xf32>, %x: tensor<?x4096xf32>, %g: tensor<4096xf32>) -> (tensor<?x4096xf32>, tensor<4096xf32>) {
  %dx, %dg = fff.rms_norm_grad %dy, %x scale(%g : tensor<4096xf32>) : tensor<?x4096xf32>
  return %dx, %dg : tensor<?x4096xf32>, tensor<4096xf32>
}

// -----

// A dynamic row size: the looped kernel, whose threads keep their columns'
// partial sums in the block's partial row.
// CHECK-LABEL: func @looped
// CHECK:         memref.alloc(%{{.*}}, %{{.*}}) : memref<?x?xf32>
// CHECK:         gpu.launch_func @fff_kernels::@layer_norm_grad_bf16_dynamic_looped
// CHECK:         gpu.launch_func @fff_kernels::@layer_norm_grad_bf16_dynamic_column_sums
// CHECK:       gpu.func @layer_norm_grad_bf16_dynamic_looped({{.*}}) kernel attributes {fff.strategy = {kind = "looped", max_registers = 128 : i64, partial_blocks = 264 : i64, rows_per_block = 1 : i64, threads_per_row = 256 : i64, vector_width = 1 : i64, vectors_per_thread = 0 : i64}
func.func @looped(%dy: tensor<?x?xbf16>, %x: tensor<?x?xbf16>, %m: tensor<?x1xf32>, %r: tensor<?x1xf32>) -> (tensor<?x?xbf16>, tensor<?xbf16>) {
  %dx, %db = fff.layer_norm_grad %dy, %x, %m, %r bias_grad : tensor<?x?xbf16>, tensor<?x1xf32>
  return %dx, %db : tensor<?x?xbf16>, tensor<?xbf16>
}

// -----

// A parameter gradient nothing uses is not computed: no partial rows, no
// column sums, and the kernel takes no partial buffer.
// CHECK-LABEL: func @dx_only
// CHECK:         memref.alloc
// CHECK-NOT:     memref.alloc
// CHECK:         gpu.launch_func @fff_kernels::@layer_norm_grad_f32_256_warp_per_row {{.*}} args(%{{.*}} : memref<?x256xf32>, %{{.*}} : memref<?x256xf32>, %{{.*}} : memref<256xf32>, %{{.*}} : memref<?xf32>, %{{.*}} : memref<?xf32>, %{{.*}} : memref<?x256xf32>, %{{.*}} : index, %{{.*}} : index)
// CHECK-NOT:     column_sums
// CHECK:         return
// CHECK-NOT:   gpu.barrier
func.func @dx_only(%dy: tensor<?x256xf32>, %x: tensor<?x256xf32>, %m: tensor<?x1xf32>, %r: tensor<?x1xf32>, %g: tensor<256xf32>) -> tensor<?x256xf32> {
  %dx, %dg = fff.layer_norm_grad %dy, %x, %m, %r scale(%g : tensor<256xf32>) : tensor<?x256xf32>, tensor<?x1xf32>
  return %dx : tensor<?x256xf32>
}

// -----

// A norm over the whole tensor is one row of 300, dy seen as x is.
// CHECK-LABEL: func @one_row
// CHECK:         tensor.expand_shape %arg1 {{.*}} into tensor<1x6x50xf32>
// CHECK:         tensor.expand_shape %arg0 {{.*}} into tensor<1x6x50xf32>
// CHECK:         gpu.launch_func @fff_kernels::@rms_norm_grad_f32_300_warp_per_row {{.*}} args({{.*}} : memref<1x300xf32>, {{.*}} : memref<1x300xf32>, {{.*}} : memref<300xf32>, {{.*}} : memref<1x300xf32>, {{.*}} : memref<?x300xf32>,
// CHECK:         gpu.launch_func @fff_kernels::@rms_norm_grad_f32_300_column_sums
func.func @one_row(%dy: tensor<6x50xf32>, %x: tensor<6x50xf32>, %g: tensor<6x50xf32>) -> (tensor<6x50xf32>, tensor<6x50xf32>) {
  %dx, %dg = fff.rms_norm_grad %dy, %x scale(%g : tensor<6x50xf32>) normalized_rank 2 : tensor<6x50xf32>
  return %dx, %dg : tensor<6x50xf32>, tensor<6x50xf32>
}

// -----

// A backward's fused unit is the backward's two kernels: the first computes
// dy from the unit's inputs as it reads it (grad * mask * 1.25) and adds
// the residual gradient to dx as it writes it, so that only dh is stored;
// dgamma is the column sums' as ever. The kernel takes the unit's inputs
// that the prologue and epilogue read, then dh's matrix, and never a dy
// or dx matrix of its own. In twin mode the unit stays for the CPU path.
// CHECK-LABEL: func @fused_unit
// CHECK:         %[[DGAMMA:.*]] = memref.alloc() : memref<768xf32>
// CHECK:         %[[DH:.*]] = memref.alloc() : memref<100x768xf32>
// CHECK:         gpu.launch_func @fff_kernels::@fused_rms_norm_grad_f32_768_block_per_row {{.*}} args(%{{.*}} : memref<100x768xf32>, %{{.*}} : memref<768xf32>, %{{.*}} : memref<?x768xf32>, %{{.*}} : index, %{{.*}} : index, %{{.*}} : memref<100x768xf32>, %{{.*}} : memref<100x768xf32>, %{{.*}} : memref<100x768xf32>, %[[DH]] : memref<100x768xf32>)
// CHECK:         gpu.launch_func @fff_kernels::@rms_norm_grad_f32_768_column_sums {{.*}}, %[[DGAMMA]] : memref<768xf32>
// CHECK-NOT:     fff.fusion
// CHECK:       gpu.func @fused_rms_norm_grad_f32_768_block_per_row
// CHECK:         %[[GRAD:.*]] = vector.load %arg5
// CHECK:         %[[MASK:.*]] = vector.load %arg6
// CHECK-NEXT:    %[[MASKED:.*]] = arith.mulf %[[GRAD]], %[[MASK]] : vector<4xf32>
// CHECK-NEXT:    arith.mulf %[[MASKED]], %{{.*}} : vector<4xf32>
// CHECK:         gpu.shuffle xor
// CHECK:         %[[DRES:.*]] = vector.load %arg7
// CHECK-NEXT:    %[[SUM:.*]] = arith.addf %[[DRES]], %{{.*}} : vector<4xf32>
// CHECK:         vector.store %[[SUM]], %arg8
// TWIN-LABEL: func @fused_unit
// TWIN:         fff.fusion
// TWIN-NOT:     gpu.launch_func
func.func @fused_unit(%grad: tensor<100x768xf32>, %mask: tensor<100x768xf32>, %x: tensor<100x768xf32>,
                      %g: tensor<768xf32>, %dres: tensor<100x768xf32>) -> (tensor<100x768xf32>, tensor<768xf32>) {
  %dh, %dg = fff.fusion ins(%grad, %mask, %x, %g, %dres : tensor<100x768xf32>, tensor<100x768xf32>, tensor<100x768xf32>, tensor<768xf32>, tensor<100x768xf32>) {
  ^bb0(%a: tensor<100x768xf32>, %m: tensor<100x768xf32>, %b: tensor<100x768xf32>, %gamma: tensor<768xf32>, %r: tensor<100x768xf32>):
    %scale = arith.constant dense<1.25> : tensor<100x768xf32>
    %masked = arith.mulf %a, %m : tensor<100x768xf32>
    %dy = arith.mulf %masked, %scale : tensor<100x768xf32>
    %dx, %dgamma = fff.rms_norm_grad %dy, %b scale(%gamma : tensor<768xf32>) : tensor<100x768xf32>
    %sum = arith.addf %r, %dx : tensor<100x768xf32>
    fff.yield %sum, %dgamma : tensor<100x768xf32>, tensor<768xf32>
  } -> tensor<100x768xf32>, tensor<768xf32>
  return %dh, %dg : tensor<100x768xf32>, tensor<768xf32>
}

// -----

// LLaMA's bf16 RMSNorm: dy cast down from the f32 gradient, dx cast up for
// the f32 residual stream; the backward rounds dx to bf16 before the cast.
// CHECK-LABEL: func @fused_casts
// CHECK:         gpu.launch_func @fff_kernels::@fused_rms_norm_grad_bf16_4096_block_per_row
// CHECK:       gpu.func @fused_rms_norm_grad_bf16_4096_block_per_row
// CHECK:         %[[GRAD:.*]] = vector.load %arg5{{.*}} : memref<?x4096xf32>, vector<8xf32>
// CHECK-NEXT:    arith.truncf %[[GRAD]] : vector<8xf32> to vector<8xbf16>
// CHECK:         scf.if %true {
// CHECK-NEXT:      %[[DX:.*]] = arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK-NEXT:      %[[WIDE:.*]] = arith.extf %[[DX]] : vector<8xbf16> to vector<8xf32>
// CHECK:           %[[DRES:.*]] = vector.load %arg6
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[WIDE]], %[[DRES]] : vector<8xf32>
// CHECK:           vector.store %[[SUM]], %arg7
func.func @fused_casts(%grad: tensor<?x4096xf32>, %x: tensor<?x4096xbf16>, %g: tensor<4096xbf16>,
                       %dres: tensor<?x4096xf32>) -> (tensor<?x4096xf32>, tensor<4096xbf16>) {
  %dh, %dg = fff.fusion ins(%grad, %x, %g, %dres : tensor<?x4096xf32>, tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<?x4096xf32>) {
  ^bb0(%a: tensor<?x4096xf32>, %b: tensor<?x4096xbf16>, %gamma: tensor<4096xbf16>, %r: tensor<?x4096xf32>):
    %dy = arith.truncf %a : tensor<?x4096xf32> to tensor<?x4096xbf16>
    %dx, %dgamma = fff.rms_norm_grad %dy, %b scale(%gamma : tensor<4096xbf16>) : tensor<?x4096xbf16>
    %wide = arith.extf %dx : tensor<?x4096xbf16> to tensor<?x4096xf32>
    %sum = arith.addf %wide, %r : tensor<?x4096xf32>
    fff.yield %sum, %dgamma : tensor<?x4096xf32>, tensor<4096xbf16>
  } -> tensor<?x4096xf32>, tensor<4096xbf16>
  return %dh, %dg : tensor<?x4096xf32>, tensor<4096xbf16>
}

// -----

// A mixed-precision LayerNorm (bf16 rows, f32 parameters), as the torch
// backend trains it: dy and x are widened as they are read, x from its bf16
// rows in both passes, and dx narrowed before the bf16 residual add. The
// widened x never goes through memory.
// The kernel's parameters: gamma, the statistics, dgamma's partial rows
// (the only f32 matrix), the sizes, then dy, x, the residual gradient and
// dh, all bf16.
// CHECK-LABEL: func @mixed_precision
// CHECK:         gpu.launch_func @fff_kernels::@fused_layer_norm_grad_f32_768_block_per_row
// CHECK:       gpu.func @fused_layer_norm_grad_f32_768_block_per_row(%{{.*}}: memref<768xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?x768xf32>, %{{.*}}: index, %{{.*}}: index, %[[DY:.*]]: memref<?x768xbf16>, %[[X:.*]]: memref<?x768xbf16>, %{{.*}}: memref<?x768xbf16>, %{{.*}}: memref<?x768xbf16>)
// CHECK:         vector.load %[[X]]{{.*}} : memref<?x768xbf16>, vector<4xbf16>
// CHECK:         vector.load %[[DY]]{{.*}} : memref<?x768xbf16>, vector<4xbf16>
func.func @mixed_precision(%dy: tensor<?x768xbf16>, %x: tensor<?x768xbf16>, %m: tensor<?x1xf32>, %r: tensor<?x1xf32>,
                           %g: tensor<768xf32>, %dres: tensor<?x768xbf16>) -> (tensor<?x768xbf16>, tensor<768xf32>) {
  %dh, %dg = fff.fusion ins(%dy, %x, %m, %r, %g, %dres : tensor<?x768xbf16>, tensor<?x768xbf16>, tensor<?x1xf32>, tensor<?x1xf32>, tensor<768xf32>, tensor<?x768xbf16>) {
  ^bb0(%a: tensor<?x768xbf16>, %b: tensor<?x768xbf16>, %ma: tensor<?x1xf32>, %ra: tensor<?x1xf32>, %w: tensor<768xf32>, %d: tensor<?x768xbf16>):
    %dy_wide = arith.extf %a : tensor<?x768xbf16> to tensor<?x768xf32>
    %x_wide = arith.extf %b : tensor<?x768xbf16> to tensor<?x768xf32>
    %dx_wide, %dw = fff.layer_norm_grad %dy_wide, %x_wide, %ma, %ra scale(%w : tensor<768xf32>) : tensor<?x768xf32>, tensor<?x1xf32>
    %dx = arith.truncf %dx_wide : tensor<?x768xf32> to tensor<?x768xbf16>
    %sum = arith.addf %d, %dx : tensor<?x768xbf16>
    fff.yield %sum, %dw : tensor<?x768xbf16>, tensor<768xf32>
  } -> tensor<?x768xbf16>, tensor<768xf32>
  return %dh, %dg : tensor<?x768xbf16>, tensor<768xf32>
}

// -----

// A scale computed inside the unit is read once per column, not per row
// vector: the unit runs as separate kernels, with a remark.
// REMARK: remark: runs as separate kernels: the fused norm kernel does not take statistics or a scale computed inside the unit
// CHECK-LABEL: func @computed_scale
// CHECK:         gpu.launch_func @fff_kernels::@rms_norm_grad_f32_256_warp_per_row
func.func @computed_scale(%dy: tensor<?x256xf32>, %x: tensor<?x256xf32>, %w: tensor<256xbf16>) -> (tensor<?x256xf32>, tensor<256xf32>) {
  %dx, %dg = fff.fusion ins(%dy, %x, %w : tensor<?x256xf32>, tensor<?x256xf32>, tensor<256xbf16>) {
  ^bb0(%a: tensor<?x256xf32>, %b: tensor<?x256xf32>, %c: tensor<256xbf16>):
    %wide = arith.extf %c : tensor<256xbf16> to tensor<256xf32>
    %d, %dw = fff.rms_norm_grad %a, %b scale(%wide : tensor<256xf32>) : tensor<?x256xf32>
    fff.yield %d, %dw : tensor<?x256xf32>, tensor<256xf32>
  } -> tensor<?x256xf32>, tensor<256xf32>
  return %dx, %dg : tensor<?x256xf32>, tensor<256xf32>
}

// -----

// x and dy broadcast from parameters inside the unit: no input has x's
// shape to size the kernel's rows from, so the unit runs as separate
// kernels.
// REMARK: remark: runs as separate kernels: the fused norm kernel does not take a unit without an input of x's shape
// CHECK-LABEL: func @no_row_input
// CHECK:         gpu.launch_func @fff_kernels::@rms_norm_grad_f32_256_warp_per_row
func.func @no_row_input(%p: tensor<256xf32>, %q: tensor<256xf32>) -> tensor<4x256xf32> {
  %dx = fff.fusion ins(%p, %q : tensor<256xf32>, tensor<256xf32>) {
  ^bb0(%a: tensor<256xf32>, %c: tensor<256xf32>):
    %e = tensor.empty() : tensor<4x256xf32>
    %x = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                         iterator_types = ["parallel", "parallel"]} ins(%a : tensor<256xf32>) outs(%e : tensor<4x256xf32>) {
    ^bb1(%v: f32, %o: f32):
      linalg.yield %v : f32
    } -> tensor<4x256xf32>
    %dy = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                         iterator_types = ["parallel", "parallel"]} ins(%c : tensor<256xf32>) outs(%e : tensor<4x256xf32>) {
    ^bb1(%v: f32, %o: f32):
      linalg.yield %v : f32
    } -> tensor<4x256xf32>
    %d = fff.rms_norm_grad %dy, %x : tensor<4x256xf32>
    fff.yield %d : tensor<4x256xf32>
  } -> tensor<4x256xf32>
  return %dx : tensor<4x256xf32>
}

// -----

// A unit the kernels cannot take (a per-row dy scale, neither a row tensor
// nor a per-column parameter) runs as separate kernels, with a remark.
// REMARK: remark: runs as separate kernels: the fused norm kernel does not take an input that is neither a row tensor nor a per-column parameter
// CHECK-LABEL: func @per_row_scale
// CHECK:         gpu.launch_func @fff_kernels::@layer_norm_grad_f32_256_warp_per_row
func.func @per_row_scale(%grad: tensor<16x256xf32>, %s: tensor<16x1xf32>, %x: tensor<16x256xf32>,
                         %m: tensor<16x1xf32>, %r: tensor<16x1xf32>) -> tensor<16x256xf32> {
  %dx = fff.fusion ins(%grad, %s, %x, %m, %r : tensor<16x256xf32>, tensor<16x1xf32>, tensor<16x256xf32>, tensor<16x1xf32>, tensor<16x1xf32>) {
  ^bb0(%a: tensor<16x256xf32>, %sa: tensor<16x1xf32>, %b: tensor<16x256xf32>, %ma: tensor<16x1xf32>, %ra: tensor<16x1xf32>):
    %e = tensor.empty() : tensor<16x256xf32>
    %dy = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>],
                          iterator_types = ["parallel", "parallel"]} ins(%a, %sa : tensor<16x256xf32>, tensor<16x1xf32>) outs(%e : tensor<16x256xf32>) {
    ^bb1(%p: f32, %q: f32, %o: f32):
      %t = arith.mulf %p, %q : f32
      linalg.yield %t : f32
    } -> tensor<16x256xf32>
    %d = fff.layer_norm_grad %dy, %b, %ma, %ra : tensor<16x256xf32>, tensor<16x1xf32>
    fff.yield %d : tensor<16x256xf32>
  } -> tensor<16x256xf32>
  return %dx : tensor<16x256xf32>
}

// -----

// dy under an i1 mask: a buffer of i1 holds a byte an element, a vector of
// i1 a bit a lane, so the unit runs as separate kernels.
// REMARK: remark: runs as separate kernels: the fused norm kernel does not take an input or result of i1 (a byte an element in memory, a bit a lane in a vector)
// CHECK-LABEL: func @i1_mask
// CHECK:         gpu.launch_func @fff_kernels::@rms_norm_grad_bf16_1024_block_per_row
func.func @i1_mask(%grad: tensor<?x1024xbf16>, %keep: tensor<?x1024xi1>, %x: tensor<?x1024xbf16>,
                   %g: tensor<1024xbf16>) -> (tensor<?x1024xbf16>, tensor<1024xbf16>) {
  %dx, %dg = fff.fusion ins(%grad, %keep, %x, %g : tensor<?x1024xbf16>, tensor<?x1024xi1>, tensor<?x1024xbf16>, tensor<1024xbf16>) {
  ^bb0(%a: tensor<?x1024xbf16>, %k: tensor<?x1024xi1>, %b: tensor<?x1024xbf16>, %w: tensor<1024xbf16>):
    %dy = arith.select %k, %a, %a : tensor<?x1024xi1>, tensor<?x1024xbf16>
    %d, %dw = fff.rms_norm_grad %dy, %b scale(%w : tensor<1024xbf16>) : tensor<?x1024xbf16>
    fff.yield %d, %dw : tensor<?x1024xbf16>, tensor<1024xbf16>
  } -> tensor<?x1024xbf16>, tensor<1024xbf16>
  return %dx, %dg : tensor<?x1024xbf16>, tensor<1024xbf16>
}

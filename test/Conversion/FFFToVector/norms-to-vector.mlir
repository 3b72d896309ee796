// RUN: fff-opt %s --convert-fff-norms-to-vector="vector-bits=512 integer-bf16" --split-input-file | FileCheck %s
// RUN: fff-opt %s --convert-fff-norms-to-vector="vector-bits=256 integer-bf16" --split-input-file | FileCheck %s --check-prefix=AVX2
// RUN: not fff-opt %s --convert-fff-norms-to-vector=vector-bits=300 --split-input-file 2>&1 | FileCheck %s --check-prefix=BITS

// BITS: vector-bits must be 0 (this host's), 128, 256 or 512, not 300

// A row of 768 f32: 16 lanes, four accumulators, 64 elements a step. Norms
// of 2^17 elements or more split their rows across threads (scf.parallel,
// which records the strategy); smaller ones loop over them in one.
// Fresh buffers start on a cache line (alignment 64), so that no vector
// access of a row straddles two.
// CHECK-LABEL: func.func @layer_norm_stats
// CHECK-SAME:    (%[[X:.*]]: tensor<?x768xf32>, %[[G:.*]]: tensor<768xf32>, %[[B:.*]]: tensor<768xf32>)
// CHECK:         %[[XB:.*]] = bufferization.to_buffer %[[X]] read_only
// CHECK:         %[[Y:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x768xf32>
// CHECK:         %[[MEAN:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x1xf32>
// A result of 32 MiB or more whose buffer and rows start on whole vectors
// (64 bytes) is written with streaming stores, each row's fenced; else with
// ordinary ones. Either way the rows are threaded when large.
// CHECK:         %[[RESULT_ROW_BYTES:.*]] = arith.muli %{{.*}}, %c4
// CHECK:         %[[BYTES:.*]] = arith.muli %{{.*}}, %[[RESULT_ROW_BYTES]]
// CHECK:         %[[LARGE:.*]] = arith.cmpi uge, %[[BYTES]], %c33554432
// CHECK:         %[[ROW_BYTES:.*]] = arith.muli %{{.*}}, %c4
// CHECK:         %[[START:.*]] = memref.extract_aligned_pointer_as_index %[[Y]]
// CHECK:         arith.remui %[[ROW_BYTES]], %c64
// CHECK:         arith.remui %[[START]], %c64
// CHECK:         %[[ALIGNED:.*]] = arith.andi
// CHECK:         %[[STREAM:.*]] = arith.andi %[[LARGE]], %[[ALIGNED]]
// CHECK:         scf.if %[[STREAM]] {
// CHECK:           scf.parallel
// CHECK:             vector.store %{{.*}}, %[[Y]][%{{.*}}] {alignment = 64 : i64, nontemporal = true}
// CHECK:             llvm.call @llvm.x86.sse.sfence()
// CHECK:           } {fff.strategy = {accumulators = 4 : i64, bf16_rounding = "integer", lanes = 16 : i64, min_parallel_elements = 131072 : i64, min_streamed_bytes = 33554432 : i64, vector_bits = 512 : i64}}
// CHECK:           scf.for
// CHECK:             vector.store {{.*}} nontemporal = true
// CHECK:             llvm.call @llvm.x86.sse.sfence()
// CHECK:       } else {
// CHECK:         %[[ELEMENTS:.*]] = arith.muli
// CHECK:         %[[LARGE:.*]] = arith.cmpi uge, %[[ELEMENTS]], %c131072
// CHECK:         scf.if %[[LARGE]] {
// CHECK:         scf.parallel (%[[ROW:.*]]) =
// CHECK:           scf.if
// CHECK:             memref.load %[[XB]][%[[ROW]], %{{.*}}]
// CHECK:           scf.for {{.*}} step %c64{{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-4:     vector.load %[[XB]][%[[ROW]], %{{.*}}] : memref<?x768xf32>, vector<16xf32>
// CHECK:           scf.for
// CHECK:             vector.create_mask
// CHECK:             vector.maskedload
// CHECK:           vector.reduction <add>, %{{.*}} fastmath<reassoc> : vector<16xf32> into f32
// The second reduction (centred squares), then the output row:
// CHECK:           vector.reduction <add>
// CHECK:           math.rsqrt
// CHECK:           scf.for
// CHECK:             math.fma
// CHECK:             vector.store %{{.*}}, %[[Y]][%[[ROW]], %{{.*}}] : memref<?x768xf32>, vector<16xf32>
// CHECK:           scf.for
// CHECK:             vector.maskedstore %[[Y]]
// CHECK:           memref.store
// CHECK:           memref.store
// CHECK:         } {fff.strategy = {accumulators = 4 : i64, bf16_rounding = "integer", lanes = 16 : i64, min_parallel_elements = 131072 : i64, min_streamed_bytes = 33554432 : i64, vector_bits = 512 : i64}}
// CHECK-NEXT:    } else {
// CHECK:           scf.for %{{.*}} = %c0{{.*}} to %{{.*}} step %c1
// CHECK:         bufferization.to_tensor %[[Y]] restrict writable
// AVX2-LABEL: func.func @layer_norm_stats
// AVX2:         } {fff.strategy = {accumulators = 4 : i64, bf16_rounding = "integer", lanes = 8 : i64, min_parallel_elements = 131072 : i64, min_streamed_bytes = 33554432 : i64, vector_bits = 256 : i64}}
func.func @layer_norm_stats(%x: tensor<?x768xf32>, %g: tensor<768xf32>, %b: tensor<768xf32>)
    -> (tensor<?x768xf32>, tensor<?x1xf32>, tensor<?x1xf32>) {
  %y, %m, %r = fff.layer_norm %x scale(%g : tensor<768xf32>) bias(%b : tensor<768xf32>) return_stats : tensor<?x768xf32>
  return %y, %m, %r : tensor<?x768xf32>, tensor<?x1xf32>, tensor<?x1xf32>
}

// -----

// bf16 rows are widened as they are loaded and narrowed as they are stored;
// the bf16 scale is widened once, before the rows; a short row gets as many
// accumulators as it has vectors (40 / 16 = 2); a 3-D input is viewed as
// rows of its trailing dim.
// CHECK-LABEL: func.func @rms_norm_bf16
// CHECK:         memref.collapse_shape %{{.*}} {{\[}}[0, 1], [2]] : memref<3x?x40xbf16> into memref<?x40xbf16>
// CHECK:         %[[SCALE:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?xf32>
// CHECK:         scf.for
// CHECK:           arith.extf {{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK:           vector.store %{{.*}}, %[[SCALE]]
// CHECK:         scf.parallel
// CHECK:           vector.load {{.*}} : memref<?x40xbf16>, vector<16xbf16>
// CHECK:           arith.extf {{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK:           vector.load %[[SCALE]]
// CHECK:           arith.truncf {{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK:         } {fff.strategy = {accumulators = 2 : i64, bf16_rounding = "integer", lanes = 16 : i64, min_parallel_elements = 131072 : i64, min_streamed_bytes = 33554432 : i64, vector_bits = 512 : i64}}
func.func @rms_norm_bf16(%x: tensor<3x?x40xbf16>, %g: tensor<40xbf16>) -> tensor<3x?x40xbf16> {
  %y = fff.rms_norm %x scale(%g : tensor<40xbf16>) : tensor<3x?x40xbf16>
  return %y : tensor<3x?x40xbf16>
}

// -----

// A norm over every dim is one row; a fused unit is inlined, its norm then
// lowered like any other.
// CHECK-LABEL: func.func @one_row_in_a_unit
// CHECK-NOT:     fff.
// CHECK:         memref.expand_shape %{{.*}} {{\[}}[0, 1]] output_shape [1, 32] : memref<32xf32> into memref<1x32xf32>
// CHECK:         scf.parallel
func.func @one_row_in_a_unit(%x: tensor<4x8xf32>, %a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = fff.fusion ins(%x, %a : tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%p: tensor<4x8xf32>, %q: tensor<4x8xf32>):
    %h = arith.addf %p, %q : tensor<4x8xf32>
    %n = fff.rms_norm %h normalized_rank 2 : tensor<4x8xf32>
    fff.yield %n : tensor<4x8xf32>
  } -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A unit's elementwise prologue that only the norm reads (a residual add in
// bf16, with a captured scalar) is computed as the norm reads each row: no
// buffer for its result, no loop of its own.
// CHECK-LABEL: func.func @residual_prologue
// CHECK-NOT:     linalg.generic
// CHECK:         scf.parallel
// CHECK:           %[[A:.*]] = vector.load %{{.*}} : memref<?x96xbf16>, vector<16xbf16>
// CHECK:           %[[B:.*]] = vector.load %{{.*}} : memref<?x96xbf16>, vector<16xbf16>
// CHECK:           %[[SUM:.*]] = arith.addf %[[A]], %[[B]] : vector<16xbf16>
// CHECK:           arith.mulf %[[SUM]], %{{.*}} : vector<16xbf16>
// CHECK:           arith.extf %{{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK-NOT:     linalg.generic
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @residual_prologue(%x: tensor<?x96xbf16>, %a: tensor<?x96xbf16>, %s: bf16) -> tensor<?x96xbf16> {
  %c0 = arith.constant 0 : index
  %rows = tensor.dim %x, %c0 : tensor<?x96xbf16>
  %e = tensor.empty(%rows) : tensor<?x96xbf16>
  %y = fff.fusion ins(%x, %a, %e, %s : tensor<?x96xbf16>, tensor<?x96xbf16>, tensor<?x96xbf16>, bf16) {
  ^bb0(%p: tensor<?x96xbf16>, %q: tensor<?x96xbf16>, %o: tensor<?x96xbf16>, %scale: bf16):
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%p, %q : tensor<?x96xbf16>, tensor<?x96xbf16>) outs(%o : tensor<?x96xbf16>) {
    ^bb1(%u: bf16, %v: bf16, %w: bf16):
      %t = arith.addf %u, %v : bf16
      %r = arith.mulf %t, %scale : bf16
      linalg.yield %r : bf16
    } -> tensor<?x96xbf16>
    %n = fff.layer_norm %h : tensor<?x96xbf16>
    fff.yield %n : tensor<?x96xbf16>
  } -> tensor<?x96xbf16>
  return %y : tensor<?x96xbf16>
}

// -----

// A mixed-type norm (torch's bf16 x with f32 parameters): the f32 norm reads
// x through the cast that widens it and writes its result through the
// elementwise epilogue that alone reads it (the cast that narrows it, here
// with a residual add in bf16): the result is rounded to bf16 once, as the
// unfused ops round it, and only the epilogue's rows are stored. No
// generic is left and no f32 row is allocated.
// CHECK-LABEL: func.func @mixed_type_epilogue
// CHECK-NOT:     linalg.generic
// CHECK-NOT:     memref<?x100xf32>
// CHECK:         memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x100xbf16>
// CHECK-NOT:     memref<?x100xf32>
// CHECK:         scf.parallel
// CHECK:           %[[GAMMA:.*]] = vector.load %{{.*}} : memref<100xf32>, vector<16xf32>
// CHECK-NEXT:      %[[Y:.*]] = arith.mulf %{{.*}}, %[[GAMMA]] : vector<16xf32>
// CHECK-NEXT:      %[[RESIDUAL:.*]] = vector.load %{{.*}} : memref<?x100xbf16>, vector<16xbf16>
// CHECK-NEXT:      %[[NARROW:.*]] = arith.truncf %[[Y]] : vector<16xf32> to vector<16xbf16>
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[NARROW]], %[[RESIDUAL]] : vector<16xbf16>
// CHECK-NEXT:      vector.store %[[SUM]], %{{.*}} : memref<?x100xbf16>, vector<16xbf16>
// CHECK:           vector.maskedstore %{{.*}} : memref<?x100xbf16>, vector<16xi1>, vector<16xbf16>
// CHECK-NOT:     linalg.generic
// CHECK-NOT:     memref<?x100xf32>
// CHECK:         return
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @mixed_type_epilogue(%x: tensor<?x100xbf16>, %g: tensor<100xf32>, %r: tensor<?x100xbf16>)
    -> tensor<?x100xbf16> {
  %c0 = arith.constant 0 : index
  %rows = tensor.dim %x, %c0 : tensor<?x100xbf16>
  %e32 = tensor.empty(%rows) : tensor<?x100xf32>
  %e16 = tensor.empty(%rows) : tensor<?x100xbf16>
  %y = fff.fusion ins(%x, %g, %r, %e32, %e16 : tensor<?x100xbf16>, tensor<100xf32>, tensor<?x100xbf16>,
                                            tensor<?x100xf32>, tensor<?x100xbf16>) {
  ^bb0(%p: tensor<?x100xbf16>, %w: tensor<100xf32>, %q: tensor<?x100xbf16>, %o32: tensor<?x100xf32>,
       %o16: tensor<?x100xbf16>):
    %wide = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%p : tensor<?x100xbf16>) outs(%o32 : tensor<?x100xf32>) {
    ^bb1(%u: bf16, %v: f32):
      %t = arith.extf %u : bf16 to f32
      linalg.yield %t : f32
    } -> tensor<?x100xf32>
    %n = fff.rms_norm %wide scale(%w : tensor<100xf32>) : tensor<?x100xf32>
    %out = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%n, %q : tensor<?x100xf32>, tensor<?x100xbf16>) outs(%o16 : tensor<?x100xbf16>) {
    ^bb1(%u: f32, %v: bf16, %z: bf16):
      %t = arith.truncf %u : f32 to bf16
      %s = arith.addf %t, %v : bf16
      linalg.yield %s : bf16
    } -> tensor<?x100xbf16>
    fff.yield %out : tensor<?x100xbf16>
  } -> tensor<?x100xbf16>
  return %y : tensor<?x100xbf16>
}

// -----

// An epilogue that only narrows the f32 result (a mixed-type norm's cast
// back to bf16) is the store's own rounding: the row goes straight into a
// bf16 buffer. The result's extent, read to size the cast's init, does not
// keep the epilogue apart.
// CHECK-LABEL: func.func @narrowing_epilogue
// CHECK-NOT:     linalg.generic
// CHECK-NOT:     memref.alloc{{.*}}memref<?x64xf32>
// CHECK:         %[[Y:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x64xbf16>
// CHECK:         scf.parallel
// CHECK:           arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK-NEXT:      vector.store %{{.*}}, %[[Y]]
// CHECK-NOT:     linalg.generic
// CHECK-NOT:     memref.alloc{{.*}}memref<?x64xf32>
// CHECK:         return
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @narrowing_epilogue(%x: tensor<?x64xf32>) -> tensor<?x64xbf16> {
  %y = fff.fusion ins(%x : tensor<?x64xf32>) {
  ^bb0(%p: tensor<?x64xf32>):
    %c0 = arith.constant 0 : index
    %n = fff.rms_norm %p : tensor<?x64xf32>
    %rows = tensor.dim %n, %c0 : tensor<?x64xf32>
    %e = tensor.empty(%rows) : tensor<?x64xbf16>
    %out = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%n : tensor<?x64xf32>) outs(%e : tensor<?x64xbf16>) {
    ^bb1(%u: f32, %z: bf16):
      %t = arith.truncf %u : f32 to bf16
      linalg.yield %t : bf16
    } -> tensor<?x64xbf16>
    fff.yield %out : tensor<?x64xbf16>
  } -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// RUN: fff-opt %s --fff-raise-norms --split-input-file | FileCheck %s

// Fused, IREE-like RMSNorm: the square is inside the reduction, the mean is
// a multiplication by 1/N, the reduction drops the dim, and 1/sqrt stands
// for rsqrt.
// CHECK-LABEL: func @rms_fused_non_keepdim
// CHECK-NOT:     linalg.generic
// CHECK:         %[[Y:.*]] = fff.rms_norm %arg0 {epsilon = 9.99999997E-7 : f32} : tensor<?x512xf32>
// CHECK:         return %[[Y]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @rms_fused_non_keepdim(%x: tensor<?x512xf32>) -> tensor<?x512xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x512xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x512xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %ey = tensor.empty(%n) : tensor<?x512xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss : tensor<?x512xf32>, tensor<?xf32>) outs(%ey : tensor<?x512xf32>) {
  ^bb0(%v: f32, %s: f32, %out: f32):
    %invn = arith.constant 0.001953125 : f32
    %eps = arith.constant 1.0e-6 : f32
    %one = arith.constant 1.0 : f32
    %m = arith.mulf %s, %invn : f32
    %a = arith.addf %m, %eps : f32
    %r = math.sqrt %a : f32
    %inv = arith.divf %one, %r : f32
    %o = arith.mulf %v, %inv : f32
    linalg.yield %o : f32
  } -> tensor<?x512xf32>
  return %y : tensor<?x512xf32>
}

// -----

// LayerNorm with var = E[x^2] - E[x]^2, an f16 input upcast before and the
// result cast back after, a 3-D input with dynamic leading dims, and gamma
// and beta in one fused elementwise op.
// CHECK-LABEL: func @layer_norm_moments_f16
// CHECK-NOT:     linalg.generic
// CHECK:         fff.layer_norm %arg0 scale(%arg1 : tensor<64xf16>) bias(%arg2 : tensor<64xf16>) : tensor<?x?x64xf16>
// CHECK-NOT:     linalg.generic
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row3 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#col3 = affine_map<(d0, d1, d2) -> (d2)>
func.func @layer_norm_moments_f16(%x: tensor<?x?x64xf16>, %g: tensor<64xf16>, %b: tensor<64xf16>) -> tensor<?x?x64xf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %d0 = tensor.dim %x, %c0 : tensor<?x?x64xf16>
  %d1 = tensor.dim %x, %c1 : tensor<?x?x64xf16>
  %e = tensor.empty(%d0, %d1) : tensor<?x?x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %sum = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<?x?x64xf16>) outs(%init : tensor<?x?x1xf32>) {
  ^bb0(%v: f16, %acc: f32):
    %w = arith.extf %v : f16 to f32
    %s = arith.addf %w, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x?x1xf32>
  %sumsq = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<?x?x64xf16>) outs(%init : tensor<?x?x1xf32>) {
  ^bb0(%v: f16, %acc: f32):
    %w = arith.extf %v : f16 to f32
    %sq = arith.mulf %w, %w : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<?x?x1xf32>
  %ey = tensor.empty(%d0, %d1) : tensor<?x?x64xf16>
  %y = linalg.generic {indexing_maps = [#id3, #row3, #row3, #col3, #col3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %sum, %sumsq, %g, %b : tensor<?x?x64xf16>, tensor<?x?x1xf32>, tensor<?x?x1xf32>, tensor<64xf16>, tensor<64xf16>) outs(%ey : tensor<?x?x64xf16>) {
  ^bb0(%v: f16, %s: f32, %ss: f32, %gv: f16, %bv: f16, %out: f16):
    %n = arith.constant 64.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %w = arith.extf %v : f16 to f32
    %mean = arith.divf %s, %n : f32
    %ex2 = arith.divf %ss, %n : f32
    %m2 = arith.mulf %mean, %mean : f32
    %var = arith.subf %ex2, %m2 : f32
    %a = arith.addf %var, %eps : f32
    %r = math.rsqrt %a : f32
    %c = arith.subf %w, %mean : f32
    %t = arith.mulf %c, %r : f32
    %gw = arith.extf %gv : f16 to f32
    %bw = arith.extf %bv : f16 to f32
    %sc = arith.mulf %gw, %t : f32
    %o = arith.addf %sc, %bw : f32
    %o16 = arith.truncf %o : f32 to f16
    linalg.yield %o16 : f16
  } -> tensor<?x?x64xf16>
  return %y : tensor<?x?x64xf16>
}

// -----

// Normalizing the two trailing dims: normalized_rank 2, N = 4 * 8.
// CHECK-LABEL: func @rms_two_dims
// CHECK:         fff.rms_norm %arg0 normalized_rank 2 : tensor<?x4x8xf32>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row3 = affine_map<(d0, d1, d2) -> (d0)>
func.func @rms_two_dims(%x: tensor<?x4x8xf32>) -> tensor<?x4x8xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x4x8xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %ss = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x : tensor<?x4x8xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %ey = tensor.empty(%n) : tensor<?x4x8xf32>
  %y = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %ss : tensor<?x4x8xf32>, tensor<?xf32>) outs(%ey : tensor<?x4x8xf32>) {
  ^bb0(%v: f32, %s: f32, %out: f32):
    %cnt = arith.constant 32.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %cnt : f32
    %a = arith.addf %m, %eps : f32
    %r = math.rsqrt %a : f32
    %o = arith.mulf %r, %v : f32
    linalg.yield %o : f32
  } -> tensor<?x4x8xf32>
  return %y : tensor<?x4x8xf32>
}

// -----

// Near miss: unbiased variance (divides by N - 1) is not a LayerNorm.
// CHECK-LABEL: func @unbiased_variance
// CHECK-NOT:     fff.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @unbiased_variance(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x16xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x16xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %sq = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x16xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %q = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %q : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %ey = tensor.empty(%n) : tensor<?x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum, %sq : tensor<?x16xf32>, tensor<?xf32>, tensor<?xf32>) outs(%ey : tensor<?x16xf32>) {
  ^bb0(%v: f32, %s: f32, %ss: f32, %out: f32):
    %cnt = arith.constant 16.0 : f32
    %cnt1 = arith.constant 15.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %mean = arith.divf %s, %cnt : f32
    %ex2 = arith.divf %ss, %cnt1 : f32
    %m2 = arith.mulf %mean, %mean : f32
    %var = arith.subf %ex2, %m2 : f32
    %a = arith.addf %var, %eps : f32
    %r = math.rsqrt %a : f32
    %c = arith.subf %v, %mean : f32
    %o = arith.mulf %c, %r : f32
    linalg.yield %o : f32
  } -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// Near miss: eps outside the square root.
// CHECK-LABEL: func @eps_outside_sqrt
// CHECK-NOT:     fff.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @eps_outside_sqrt(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x16xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x16xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %q = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %q : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %ey = tensor.empty(%n) : tensor<?x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss : tensor<?x16xf32>, tensor<?xf32>) outs(%ey : tensor<?x16xf32>) {
  ^bb0(%v: f32, %s: f32, %out: f32):
    %cnt = arith.constant 16.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %cnt : f32
    %root = math.sqrt %m : f32
    %d = arith.addf %root, %eps : f32
    %o = arith.divf %v, %d : f32
    linalg.yield %o : f32
  } -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// Near miss: normalizing over the leading dim.
// CHECK-LABEL: func @leading_dim
// CHECK-NOT:     fff.
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @leading_dim(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<16xf32>) -> tensor<16xf32>
  %ss = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%init : tensor<16xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %q = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %q : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  %ey = tensor.empty() : tensor<8x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss : tensor<8x16xf32>, tensor<16xf32>) outs(%ey : tensor<8x16xf32>) {
  ^bb0(%v: f32, %s: f32, %out: f32):
    %cnt = arith.constant 8.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %cnt : f32
    %a = arith.addf %m, %eps : f32
    %r = math.rsqrt %a : f32
    %o = arith.mulf %v, %r : f32
    linalg.yield %o : f32
  } -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// An intermediate with another use (the sum of squares is also returned):
// the norm is raised, and the other use keeps its producer.
// CHECK-LABEL: func @shared_intermediate
// CHECK:         %[[SS:.*]] = linalg.generic
// CHECK:         %[[Y:.*]] = fff.rms_norm %arg0 : tensor<?x16xf32>
// CHECK:         return %[[Y]], %[[SS]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @shared_intermediate(%x: tensor<?x16xf32>) -> (tensor<?x16xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x16xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x16xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %q = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %q : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %ey = tensor.empty(%n) : tensor<?x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss : tensor<?x16xf32>, tensor<?xf32>) outs(%ey : tensor<?x16xf32>) {
  ^bb0(%v: f32, %s: f32, %out: f32):
    %cnt = arith.constant 16.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %cnt : f32
    %a = arith.addf %m, %eps : f32
    %r = math.rsqrt %a : f32
    %o = arith.mulf %v, %r : f32
    linalg.yield %o : f32
  } -> tensor<?x16xf32>
  return %y, %ss : tensor<?x16xf32>, tensor<?xf32>
}

// -----

// StableHLO-style keepdim: a reduction that drops the dim, reshaped back with
// tensor.expand_shape and broadcast; and the norm inside collapse/expand of a
// 3-D input, which stay around the raised op.
// CHECK-LABEL: func @expand_shape_keepdim
// CHECK:         %[[FLAT:.*]] = tensor.collapse_shape %arg0
// CHECK:         %[[Y:.*]] = fff.rms_norm %[[FLAT]] : tensor<?x32xf32>
// CHECK:         tensor.expand_shape %[[Y]]
// CHECK-NOT:     linalg.generic
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
func.func @expand_shape_keepdim(%x3: tensor<?x4x32xf32>) -> tensor<?x4x32xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %x = tensor.collapse_shape %x3 [[0, 1], [2]] : tensor<?x4x32xf32> into tensor<?x32xf32>
  %n = tensor.dim %x, %c0 : tensor<?x32xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x32xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %q = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %q : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %kept = tensor.expand_shape %ss [[0, 1]] output_shape [%n, 1] : tensor<?xf32> into tensor<?x1xf32>
  %ey = tensor.empty(%n) : tensor<?x32xf32>
  %y = linalg.generic {indexing_maps = [#id, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %kept : tensor<?x32xf32>, tensor<?x1xf32>) outs(%ey : tensor<?x32xf32>) {
  ^bb0(%v: f32, %s: f32, %out: f32):
    %cnt = arith.constant 32.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %cnt : f32
    %a = arith.addf %m, %eps : f32
    %r = math.rsqrt %a : f32
    %o = arith.mulf %v, %r : f32
    linalg.yield %o : f32
  } -> tensor<?x32xf32>
  %b = tensor.dim %x3, %c0 : tensor<?x4x32xf32>
  %y3 = tensor.expand_shape %y [[0, 1], [2]] output_shape [%b, 4, 32] : tensor<?x32xf32> into tensor<?x4x32xf32>
  return %y3 : tensor<?x4x32xf32>
}

// -----

// A keepdim reshape whose reassociation index is past the rank (the
// verifier wraps it to 0) is read as an opaque input, not through: no
// crash, no raising.
// CHECK-LABEL: func.func @reassociation_past_rank
// CHECK-NOT:     fff.rms_norm
#id_wrap = affine_map<(d0, d1) -> (d0, d1)>
#row_wrap = affine_map<(d0, d1) -> (d0)>
#keep_wrap = affine_map<(d0, d1) -> (d0, 0)>
func.func @reassociation_past_rank(%x: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x32xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %ss = linalg.generic {indexing_maps = [#id_wrap, #row_wrap], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x32xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %q = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %q : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %kept = tensor.expand_shape %ss [[4294967296, 1]] output_shape [%n, 1] : tensor<?xf32> into tensor<?x1xf32>
  %ey = tensor.empty(%n) : tensor<?x32xf32>
  %y = linalg.generic {indexing_maps = [#id_wrap, #keep_wrap, #id_wrap], iterator_types = ["parallel", "parallel"]}
      ins(%x, %kept : tensor<?x32xf32>, tensor<?x1xf32>) outs(%ey : tensor<?x32xf32>) {
  ^bb0(%v: f32, %s: f32, %out: f32):
    %cnt = arith.constant 32.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %cnt : f32
    %a = arith.addf %m, %eps : f32
    %r = math.rsqrt %a : f32
    %o = arith.mulf %v, %r : f32
    linalg.yield %o : f32
  } -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// RUN: fff-opt %s --fff-raise-norms --split-input-file | FileCheck %s

// The dx of a hand-written RMSNorm's backward, as AOTAutograd decomposes it
// (the gradients of rsqrt, mean and pow in turn; torch-mlir-backward-numeric.py
// raises torch-mlir's own output of a training step):
//   dx = g * rstd + (sum(g * x) * -0.5 * rstd^3 / N) * (x * 2),  g = dy * w,
// raised to fff.rms_norm_grad, and the near misses beside it.

#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>

// One saved rstd, read in both places: the op takes it.
// CHECK-LABEL: func @saved_rstd
// CHECK:         %[[DX:.*]], %{{.*}} = fff.rms_norm_grad %arg0, %arg1 rstd(%arg2 : tensor<?x1xf32>) scale(%arg3 : tensor<64xf32>) : tensor<?x64xf32>
// CHECK-NEXT:    return %[[DX]]
func.func @saved_rstd(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>, %r: tensor<?x1xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %es = tensor.empty(%n) : tensor<?x1xf32>
  %z = linalg.fill ins(%zero : f32) outs(%es : tensor<?x1xf32>) -> tensor<?x1xf32>
  %s = linalg.generic {indexing_maps = [#id, #col, #id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%dy, %w, %x : tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32>) outs(%z : tensor<?x1xf32>) {
  ^bb0(%d: f32, %g: f32, %a: f32, %acc: f32):
    %gd = arith.mulf %d, %g : f32
    %t = arith.mulf %gd, %a : f32
    %sum = arith.addf %t, %acc : f32
    linalg.yield %sum : f32
  } -> tensor<?x1xf32>
  %dx = linalg.generic {indexing_maps = [#id, #col, #id, #keep, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %w, %x, %r, %s : tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%d: f32, %g: f32, %a: f32, %rs: f32, %sm: f32, %out: f32):
    %three = arith.constant 3 : i64
    %half = arith.constant -5.000000e-01 : f32
    %count = arith.constant 6.400000e+01 : f32
    %two = arith.constant 2.000000e+00 : f32
    %gd = arith.mulf %d, %g : f32
    %direct = arith.mulf %gd, %rs : f32
    %cube = math.fpowi %rs, %three : f32, i64
    %scaled = arith.mulf %sm, %half : f32
    %c = arith.mulf %scaled, %cube : f32
    %q = arith.divf %c, %count : f32
    %x2 = arith.mulf %a, %two : f32
    %p = arith.mulf %q, %x2 : f32
    %sum = arith.addf %direct, %p : f32
    linalg.yield %sum : f32
  } -> tensor<?x64xf32>
  return %dx : tensor<?x64xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>

// A training step traced whole: rstd = rsqrt(mean(x^2) + eps) is computed
// here, so the backward recomputes it (with that epsilon) and the forward
// is an fff.rms_norm of its own.
// CHECK-LABEL: func @recomputed_rstd
// CHECK:         %[[Y:.*]] = fff.rms_norm %arg0 scale(%arg1 : tensor<64xf32>) {epsilon = 9.99999997E-7 : f32} : tensor<8x64xf32>
// CHECK:         %[[DX:.*]], %{{.*}} = fff.rms_norm_grad %arg2, %arg0 scale(%arg1 : tensor<64xf32>) {epsilon = 9.99999997E-7 : f32} : tensor<8x64xf32>
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[Y]], %[[DX]]
func.func @recomputed_rstd(%x: tensor<8x64xf32>, %w: tensor<64xf32>, %dy: tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x64xf32>
  %es = tensor.empty() : tensor<8x1xf32>
  %z = linalg.fill ins(%zero : f32) outs(%es : tensor<8x1xf32>) -> tensor<8x1xf32>
  %ss = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x64xf32>) outs(%z : tensor<8x1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %sum = arith.addf %sq, %acc : f32
    linalg.yield %sum : f32
  } -> tensor<8x1xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ss : tensor<8x1xf32>) outs(%es : tensor<8x1xf32>) {
  ^bb0(%v: f32, %out: f32):
    %count = arith.constant 6.400000e+01 : f32
    %eps = arith.constant 9.99999997E-7 : f32
    %m = arith.divf %v, %count : f32
    %sh = arith.addf %m, %eps : f32
    %rs = math.rsqrt %sh : f32
    linalg.yield %rs : f32
  } -> tensor<8x1xf32>
  %y = linalg.generic {indexing_maps = [#id, #keep, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %r, %w : tensor<8x64xf32>, tensor<8x1xf32>, tensor<64xf32>) outs(%e : tensor<8x64xf32>) {
  ^bb0(%a: f32, %rs: f32, %g: f32, %out: f32):
    %h = arith.mulf %a, %rs : f32
    %o = arith.mulf %g, %h : f32
    linalg.yield %o : f32
  } -> tensor<8x64xf32>
  %s = linalg.generic {indexing_maps = [#id, #col, #id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%dy, %w, %x : tensor<8x64xf32>, tensor<64xf32>, tensor<8x64xf32>) outs(%z : tensor<8x1xf32>) {
  ^bb0(%d: f32, %g: f32, %a: f32, %acc: f32):
    %gd = arith.mulf %d, %g : f32
    %t = arith.mulf %gd, %a : f32
    %sum = arith.addf %t, %acc : f32
    linalg.yield %sum : f32
  } -> tensor<8x1xf32>
  %dx = linalg.generic {indexing_maps = [#id, #col, #id, #keep, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %w, %x, %r, %s : tensor<8x64xf32>, tensor<64xf32>, tensor<8x64xf32>, tensor<8x1xf32>, tensor<8x1xf32>) outs(%e : tensor<8x64xf32>) {
  ^bb0(%d: f32, %g: f32, %a: f32, %rs: f32, %sm: f32, %out: f32):
    %three = arith.constant 3 : i64
    %half = arith.constant -5.000000e-01 : f32
    %count = arith.constant 6.400000e+01 : f32
    %two = arith.constant 2.000000e+00 : f32
    %gd = arith.mulf %d, %g : f32
    %direct = arith.mulf %gd, %rs : f32
    %cube = math.fpowi %rs, %three : f32, i64
    %scaled = arith.mulf %sm, %half : f32
    %c = arith.mulf %scaled, %cube : f32
    %q = arith.divf %c, %count : f32
    %x2 = arith.mulf %a, %two : f32
    %p = arith.mulf %q, %x2 : f32
    %sum = arith.addf %direct, %p : f32
    linalg.yield %sum : f32
  } -> tensor<8x64xf32>
  return %y, %dx : tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>

// AOTAutograd's backward alone saves rstd twice (rsqrt and its alias): two
// arguments, which may differ, are not one rstd.
// CHECK-LABEL: func @two_saved_tensors
// CHECK-NOT:     fff.rms_norm_grad
func.func @two_saved_tensors(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>, %r: tensor<?x1xf32>, %r2: tensor<?x1xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %es = tensor.empty(%n) : tensor<?x1xf32>
  %z = linalg.fill ins(%zero : f32) outs(%es : tensor<?x1xf32>) -> tensor<?x1xf32>
  %s = linalg.generic {indexing_maps = [#id, #col, #id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%dy, %w, %x : tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32>) outs(%z : tensor<?x1xf32>) {
  ^bb0(%d: f32, %g: f32, %a: f32, %acc: f32):
    %gd = arith.mulf %d, %g : f32
    %t = arith.mulf %gd, %a : f32
    %sum = arith.addf %t, %acc : f32
    linalg.yield %sum : f32
  } -> tensor<?x1xf32>
  %dx = linalg.generic {indexing_maps = [#id, #col, #id, #keep, #keep, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %w, %x, %r, %s, %r2 : tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x1xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%d: f32, %g: f32, %a: f32, %rs: f32, %sm: f32, %rs2: f32, %out: f32):
    %three = arith.constant 3 : i64
    %half = arith.constant -5.000000e-01 : f32
    %count = arith.constant 6.400000e+01 : f32
    %two = arith.constant 2.000000e+00 : f32
    %gd = arith.mulf %d, %g : f32
    %direct = arith.mulf %gd, %rs : f32
    %cube = math.fpowi %rs2, %three : f32, i64
    %scaled = arith.mulf %sm, %half : f32
    %c = arith.mulf %scaled, %cube : f32
    %q = arith.divf %c, %count : f32
    %x2 = arith.mulf %a, %two : f32
    %p = arith.mulf %q, %x2 : f32
    %sum = arith.addf %direct, %p : f32
    linalg.yield %sum : f32
  } -> tensor<?x64xf32>
  return %dx : tensor<?x64xf32>
}


// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>

// -0.25 for -0.5: not the mean's gradient.
// CHECK-LABEL: func @another_constant
// CHECK-NOT:     fff.rms_norm_grad
func.func @another_constant(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>, %r: tensor<?x1xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %es = tensor.empty(%n) : tensor<?x1xf32>
  %z = linalg.fill ins(%zero : f32) outs(%es : tensor<?x1xf32>) -> tensor<?x1xf32>
  %s = linalg.generic {indexing_maps = [#id, #col, #id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%dy, %w, %x : tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32>) outs(%z : tensor<?x1xf32>) {
  ^bb0(%d: f32, %g: f32, %a: f32, %acc: f32):
    %gd = arith.mulf %d, %g : f32
    %t = arith.mulf %gd, %a : f32
    %sum = arith.addf %t, %acc : f32
    linalg.yield %sum : f32
  } -> tensor<?x1xf32>
  %dx = linalg.generic {indexing_maps = [#id, #col, #id, #keep, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %w, %x, %r, %s : tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%d: f32, %g: f32, %a: f32, %rs: f32, %sm: f32, %out: f32):
    %three = arith.constant 3 : i64
    %half = arith.constant -2.500000e-01 : f32
    %count = arith.constant 6.400000e+01 : f32
    %two = arith.constant 2.000000e+00 : f32
    %gd = arith.mulf %d, %g : f32
    %direct = arith.mulf %gd, %rs : f32
    %cube = math.fpowi %rs, %three : f32, i64
    %scaled = arith.mulf %sm, %half : f32
    %c = arith.mulf %scaled, %cube : f32
    %q = arith.divf %c, %count : f32
    %x2 = arith.mulf %a, %two : f32
    %p = arith.mulf %q, %x2 : f32
    %sum = arith.addf %direct, %p : f32
    linalg.yield %sum : f32
  } -> tensor<?x64xf32>
  return %dx : tensor<?x64xf32>
}


// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>

// rstd^2 for rstd^3.
// CHECK-LABEL: func @rstd_squared
// CHECK-NOT:     fff.rms_norm_grad
func.func @rstd_squared(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>, %r: tensor<?x1xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %es = tensor.empty(%n) : tensor<?x1xf32>
  %z = linalg.fill ins(%zero : f32) outs(%es : tensor<?x1xf32>) -> tensor<?x1xf32>
  %s = linalg.generic {indexing_maps = [#id, #col, #id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%dy, %w, %x : tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32>) outs(%z : tensor<?x1xf32>) {
  ^bb0(%d: f32, %g: f32, %a: f32, %acc: f32):
    %gd = arith.mulf %d, %g : f32
    %t = arith.mulf %gd, %a : f32
    %sum = arith.addf %t, %acc : f32
    linalg.yield %sum : f32
  } -> tensor<?x1xf32>
  %dx = linalg.generic {indexing_maps = [#id, #col, #id, #keep, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %w, %x, %r, %s : tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%d: f32, %g: f32, %a: f32, %rs: f32, %sm: f32, %out: f32):
    %three = arith.constant 2 : i64
    %half = arith.constant -5.000000e-01 : f32
    %count = arith.constant 6.400000e+01 : f32
    %two = arith.constant 2.000000e+00 : f32
    %gd = arith.mulf %d, %g : f32
    %direct = arith.mulf %gd, %rs : f32
    %cube = math.fpowi %rs, %three : f32, i64
    %scaled = arith.mulf %sm, %half : f32
    %c = arith.mulf %scaled, %cube : f32
    %q = arith.divf %c, %count : f32
    %x2 = arith.mulf %a, %two : f32
    %p = arith.mulf %q, %x2 : f32
    %sum = arith.addf %direct, %p : f32
    linalg.yield %sum : f32
  } -> tensor<?x64xf32>
  return %dx : tensor<?x64xf32>
}


// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>

// The sum of dy * x, without gamma, beside g = dy * w.
// CHECK-LABEL: func @sum_of_dy_x
// CHECK-NOT:     fff.rms_norm_grad
func.func @sum_of_dy_x(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>, %r: tensor<?x1xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %es = tensor.empty(%n) : tensor<?x1xf32>
  %z = linalg.fill ins(%zero : f32) outs(%es : tensor<?x1xf32>) -> tensor<?x1xf32>
  %s = linalg.generic {indexing_maps = [#id, #col, #id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%dy, %w, %x : tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32>) outs(%z : tensor<?x1xf32>) {
  ^bb0(%d: f32, %g: f32, %a: f32, %acc: f32):
    %t = arith.mulf %d, %a : f32
    %sum = arith.addf %t, %acc : f32
    linalg.yield %sum : f32
  } -> tensor<?x1xf32>
  %dx = linalg.generic {indexing_maps = [#id, #col, #id, #keep, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %w, %x, %r, %s : tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%d: f32, %g: f32, %a: f32, %rs: f32, %sm: f32, %out: f32):
    %three = arith.constant 3 : i64
    %half = arith.constant -5.000000e-01 : f32
    %count = arith.constant 6.400000e+01 : f32
    %two = arith.constant 2.000000e+00 : f32
    %gd = arith.mulf %d, %g : f32
    %direct = arith.mulf %gd, %rs : f32
    %cube = math.fpowi %rs, %three : f32, i64
    %scaled = arith.mulf %sm, %half : f32
    %c = arith.mulf %scaled, %cube : f32
    %q = arith.divf %c, %count : f32
    %x2 = arith.mulf %a, %two : f32
    %p = arith.mulf %q, %x2 : f32
    %sum = arith.addf %direct, %p : f32
    linalg.yield %sum : f32
  } -> tensor<?x64xf32>
  return %dx : tensor<?x64xf32>
}

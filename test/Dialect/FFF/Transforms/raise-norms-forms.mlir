// RUN: fff-opt %s --fff-raise-norms --split-input-file | FileCheck %s

// The forms real frontends write norms in, beyond the basic ones of
// raise-norms.mlir, and the near misses beside each.

// Post-LN: the norm's input is a residual add (an elementwise op, not a
// block argument). The add stays, the norm reads its result.
// CHECK-LABEL: func @layer_norm_of_residual_add
// CHECK:         %[[H:.*]] = linalg.generic
// CHECK:           arith.addf
// CHECK-NOT:     linalg.generic
// CHECK:         %[[Y:.*]] = fff.layer_norm %[[H]] scale(%arg2 : tensor<32xf32>) bias(%arg3 : tensor<32xf32>) {epsilon = 9.99999996E-13 : f32} : tensor<?x32xf32>
// CHECK:         return %[[Y]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @layer_norm_of_residual_add(%x: tensor<?x32xf32>, %r: tensor<?x32xf32>, %g: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<?x32xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x32xf32>
  %e = tensor.empty(%n) : tensor<?x32xf32>
  %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %r : tensor<?x32xf32>, tensor<?x32xf32>) outs(%e : tensor<?x32xf32>) {
  ^bb0(%a: f32, %c: f32, %out: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<?x32xf32>
  %e1 = tensor.empty(%n) : tensor<?x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%h : tensor<?x32xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %centred = linalg.generic {indexing_maps = [#id, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%h, %sum : tensor<?x32xf32>, tensor<?x1xf32>) outs(%e : tensor<?x32xf32>) {
  ^bb0(%v: f32, %s: f32, %out: f32):
    %cnt = arith.constant 32.0 : f32
    %m = arith.divf %s, %cnt : f32
    %c = arith.subf %v, %m : f32
    linalg.yield %c : f32
  } -> tensor<?x32xf32>
  %ss = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%centred : tensor<?x32xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %sq, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %y = linalg.generic {indexing_maps = [#id, #keep, #col, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%centred, %ss, %g, %b : tensor<?x32xf32>, tensor<?x1xf32>, tensor<32xf32>, tensor<32xf32>) outs(%e : tensor<?x32xf32>) {
  ^bb0(%c: f32, %s: f32, %gv: f32, %bv: f32, %out: f32):
    %cnt = arith.constant 32.0 : f32
    %eps = arith.constant 1.0e-12 : f32
    %var = arith.divf %s, %cnt : f32
    %a = arith.addf %var, %eps : f32
    %rs = math.rsqrt %a : f32
    %t = arith.mulf %c, %rs : f32
    %sc = arith.mulf %t, %gv : f32
    %o = arith.addf %sc, %bv : f32
    linalg.yield %o : f32
  } -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// LayerNorm of a Linear with bias: the input is the bias add after a
// matmul; the matmul and the add stay.
// CHECK-LABEL: func @layer_norm_of_linear
// CHECK:         linalg.matmul
// CHECK:         %[[H:.*]] = linalg.generic
// CHECK-NOT:     linalg.generic
// CHECK:         fff.layer_norm %[[H]] : tensor<8x16xf32>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @layer_norm_of_linear(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %bias: tensor<16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<8x4xf32>, tensor<4x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %h = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias : tensor<8x16xf32>, tensor<16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %c: f32, %out: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%h : tensor<8x16xf32>) outs(%init : tensor<8xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%h, %sum : tensor<8x16xf32>, tensor<8xf32>) outs(%init : tensor<8xf32>) {
  ^bb0(%v: f32, %s: f32, %acc: f32):
    %inv = arith.constant 0.0625 : f32
    %m = arith.mulf %s, %inv : f32
    %c = arith.subf %v, %m : f32
    %sq = arith.mulf %c, %c : f32
    %t = arith.addf %acc, %sq : f32
    linalg.yield %t : f32
  } -> tensor<8xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%h, %sum, %ss : tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%v: f32, %s: f32, %q: f32, %out: f32):
    %inv = arith.constant 0.0625 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.mulf %s, %inv : f32
    %var = arith.mulf %q, %inv : f32
    %a = arith.addf %var, %eps : f32
    %rs = math.rsqrt %a : f32
    %c = arith.subf %v, %m : f32
    %o = arith.mulf %c, %rs : f32
    linalg.yield %o : f32
  } -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Flax's LayerNorm with its fast variance: one reduction computes the sum
// and the sum of squares together, var = max(0, E[x^2] - E[x]^2), and the
// scale multiplies rsqrt before the centred input does.
// CHECK-LABEL: func @flax_fast_variance
// CHECK-NOT:     linalg.generic
// CHECK:         %[[Y:.*]] = fff.layer_norm %arg0 scale(%arg1 : tensor<48xf32>) bias(%arg2 : tensor<48xf32>) {epsilon = 9.99999997E-7 : f32} : tensor<?x48xf32>
// CHECK:         return %[[Y]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @flax_fast_variance(%x: tensor<?x48xf32>, %scale: tensor<48xf32>, %bias: tensor<48xf32>) -> tensor<?x48xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x48xf32>
  %e1 = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?xf32>) -> tensor<?xf32>
  %moments:2 = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x48xf32>) outs(%init, %init : tensor<?xf32>, tensor<?xf32>) {
  ^bb0(%v: f32, %s: f32, %q: f32):
    %sq = arith.mulf %v, %v : f32
    %s1 = arith.addf %s, %v : f32
    %q1 = arith.addf %q, %sq : f32
    linalg.yield %s1, %q1 : f32, f32
  } -> (tensor<?xf32>, tensor<?xf32>)
  %e = tensor.empty(%n) : tensor<?x48xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #row, #col, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %moments#0, %moments#1, %scale, %bias : tensor<?x48xf32>, tensor<?xf32>, tensor<?xf32>, tensor<48xf32>, tensor<48xf32>) outs(%e : tensor<?x48xf32>) {
  ^bb0(%v: f32, %s: f32, %q: f32, %sc: f32, %bv: f32, %out: f32):
    %cnt = arith.constant 48.0 : f32
    %eps = arith.constant 1.0e-6 : f32
    %z = arith.constant 0.0 : f32
    %mean = arith.divf %s, %cnt : f32
    %mean2 = arith.divf %q, %cnt : f32
    %msq = arith.mulf %mean, %mean : f32
    %d = arith.subf %mean2, %msq : f32
    %var = arith.maximumf %z, %d : f32
    %a = arith.addf %var, %eps : f32
    %rs = math.rsqrt %a : f32
    %mul = arith.mulf %rs, %sc : f32
    %c = arith.subf %v, %mean : f32
    %t = arith.mulf %c, %mul : f32
    %o = arith.addf %t, %bv : f32
    linalg.yield %o : f32
  } -> tensor<?x48xf32>
  return %y : tensor<?x48xf32>
}

// -----

// The same with a clamp at 1e-3 instead of zero is not a LayerNorm.
// CHECK-LABEL: func @flax_clamp_not_at_zero
// CHECK-NOT:     fff.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @flax_clamp_not_at_zero(%x: tensor<?x48xf32>) -> tensor<?x48xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x48xf32>
  %e1 = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?xf32>) -> tensor<?xf32>
  %moments:2 = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x48xf32>) outs(%init, %init : tensor<?xf32>, tensor<?xf32>) {
  ^bb0(%v: f32, %s: f32, %q: f32):
    %sq = arith.mulf %v, %v : f32
    %s1 = arith.addf %s, %v : f32
    %q1 = arith.addf %q, %sq : f32
    linalg.yield %s1, %q1 : f32, f32
  } -> (tensor<?xf32>, tensor<?xf32>)
  %e = tensor.empty(%n) : tensor<?x48xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %moments#0, %moments#1 : tensor<?x48xf32>, tensor<?xf32>, tensor<?xf32>) outs(%e : tensor<?x48xf32>) {
  ^bb0(%v: f32, %s: f32, %q: f32, %out: f32):
    %cnt = arith.constant 48.0 : f32
    %eps = arith.constant 1.0e-6 : f32
    %floor = arith.constant 1.0e-3 : f32
    %mean = arith.divf %s, %cnt : f32
    %mean2 = arith.divf %q, %cnt : f32
    %msq = arith.mulf %mean, %mean : f32
    %d = arith.subf %mean2, %msq : f32
    %var = arith.maximumf %floor, %d : f32
    %a = arith.addf %var, %eps : f32
    %rs = math.rsqrt %a : f32
    %c = arith.subf %v, %mean : f32
    %o = arith.mulf %c, %rs : f32
    linalg.yield %o : f32
  } -> tensor<?x48xf32>
  return %y : tensor<?x48xf32>
}

// -----

// Division by sqrt(var + eps), then gamma and beta, on a 4-D input
// normalized over its two trailing dims with dynamic leading dims.
// CHECK-LABEL: func @divide_by_sqrt_4d
// CHECK-NOT:     linalg.generic
// CHECK:         fff.layer_norm %arg0 scale(%arg1 : tensor<4x8xf32>) bias(%arg2 : tensor<4x8xf32>) normalized_rank 2 : tensor<?x?x4x8xf32>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#row = affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>
#par = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
func.func @divide_by_sqrt_4d(%x: tensor<?x?x4x8xf32>, %g: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<?x?x4x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %d0 = tensor.dim %x, %c0 : tensor<?x?x4x8xf32>
  %d1 = tensor.dim %x, %c1 : tensor<?x?x4x8xf32>
  %e1 = tensor.empty(%d0, %d1) : tensor<?x?x1x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x?x1x1xf32>) -> tensor<?x?x1x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%x : tensor<?x?x4x8xf32>) outs(%init : tensor<?x?x1x1xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x?x1x1xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %sum : tensor<?x?x4x8xf32>, tensor<?x?x1x1xf32>) outs(%init : tensor<?x?x1x1xf32>) {
  ^bb0(%v: f32, %s: f32, %acc: f32):
    %cnt = arith.constant 32.0 : f32
    %m = arith.divf %s, %cnt : f32
    %c = arith.subf %v, %m : f32
    %sq = arith.mulf %c, %c : f32
    %t = arith.addf %acc, %sq : f32
    linalg.yield %t : f32
  } -> tensor<?x?x1x1xf32>
  %e = tensor.empty(%d0, %d1) : tensor<?x?x4x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #row, #par, #par, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %sum, %ss, %g, %b : tensor<?x?x4x8xf32>, tensor<?x?x1x1xf32>, tensor<?x?x1x1xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<?x?x4x8xf32>) {
  ^bb0(%v: f32, %s: f32, %q: f32, %gv: f32, %bv: f32, %out: f32):
    %cnt = arith.constant 32.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %cnt : f32
    %var = arith.divf %q, %cnt : f32
    %a = arith.addf %var, %eps : f32
    %sd = math.sqrt %a : f32
    %c = arith.subf %v, %m : f32
    %n = arith.divf %c, %sd : f32
    %sc = arith.mulf %n, %gv : f32
    %o = arith.addf %sc, %bv : f32
    linalg.yield %o : f32
  } -> tensor<?x?x4x8xf32>
  return %y : tensor<?x?x4x8xf32>
}

// -----

// Near miss: divided by sqrt(var) + eps (eps outside the root).
// CHECK-LABEL: func @divide_by_sqrt_plus_eps
// CHECK-NOT:     fff.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @divide_by_sqrt_plus_eps(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x16xf32>
  %e1 = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?xf32>) -> tensor<?xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x16xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss : tensor<?x16xf32>, tensor<?xf32>) outs(%e : tensor<?x16xf32>) {
  ^bb0(%v: f32, %q: f32, %out: f32):
    %cnt = arith.constant 16.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %ms = arith.divf %q, %cnt : f32
    %sd = math.sqrt %ms : f32
    %a = arith.addf %sd, %eps : f32
    %o = arith.divf %v, %a : f32
    linalg.yield %o : f32
  } -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// Near miss: an extra divisor, (x / sqrt(mean(x^2) + eps)) / 2.
// CHECK-LABEL: func @extra_divisor
// CHECK-NOT:     fff.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @extra_divisor(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x16xf32>
  %e1 = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?xf32>) -> tensor<?xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x16xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss : tensor<?x16xf32>, tensor<?xf32>) outs(%e : tensor<?x16xf32>) {
  ^bb0(%v: f32, %q: f32, %out: f32):
    %cnt = arith.constant 16.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %two = arith.constant 2.0 : f32
    %ms = arith.divf %q, %cnt : f32
    %a = arith.addf %ms, %eps : f32
    %sd = math.sqrt %a : f32
    %n1 = arith.divf %v, %sd : f32
    %o = arith.divf %n1, %two : f32
    linalg.yield %o : f32
  } -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// Gemma in bf16: x upcast to f32, normalized, multiplied by the f32
// (1 + w), rounded once. The norm is raised in f32 on the upcast tensor,
// with (1 + w) as its scale; the casts stay for fusion to take.
// CHECK-LABEL: func @gemma_bf16
// CHECK:         %[[UP:.*]] = linalg.generic
// CHECK:           arith.extf
// CHECK:         %[[SCALE:.*]] = linalg.generic
// CHECK:           arith.addf
// CHECK:         %[[Y:.*]] = fff.rms_norm %[[UP]] scale(%[[SCALE]] : tensor<32xf32>) {epsilon = 9.99999997E-7 : f32} : tensor<?x32xf32>
// CHECK:         linalg.generic {{.*}} ins(%[[Y]]
// CHECK:           arith.truncf
#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>
#v = affine_map<(d0) -> (d0)>
func.func @gemma_bf16(%x: tensor<?x32xbf16>, %w: tensor<32xbf16>) -> tensor<?x32xbf16> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x32xbf16>
  %e = tensor.empty(%n) : tensor<?x32xf32>
  %up = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x32xbf16>) outs(%e : tensor<?x32xf32>) {
  ^bb0(%v: bf16, %out: f32):
    %f = arith.extf %v : bf16 to f32
    linalg.yield %f : f32
  } -> tensor<?x32xf32>
  %e1 = tensor.empty(%n) : tensor<?x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %ss = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%up : tensor<?x32xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %normed = linalg.generic {indexing_maps = [#id, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%up, %ss : tensor<?x32xf32>, tensor<?x1xf32>) outs(%e : tensor<?x32xf32>) {
  ^bb0(%v: f32, %q: f32, %out: f32):
    %cnt = arith.constant 32.0 : f32
    %eps = arith.constant 1.0e-6 : f32
    %ms = arith.divf %q, %cnt : f32
    %a = arith.addf %ms, %eps : f32
    %rs = math.rsqrt %a : f32
    %o = arith.mulf %v, %rs : f32
    linalg.yield %o : f32
  } -> tensor<?x32xf32>
  %ew = tensor.empty() : tensor<32xf32>
  %scale = linalg.generic {indexing_maps = [#v, #v], iterator_types = ["parallel"]}
      ins(%w : tensor<32xbf16>) outs(%ew : tensor<32xf32>) {
  ^bb0(%v: bf16, %out: f32):
    %one = arith.constant 1.0 : f32
    %f = arith.extf %v : bf16 to f32
    %s = arith.addf %f, %one : f32
    linalg.yield %s : f32
  } -> tensor<32xf32>
  %scaled = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%normed, %scale : tensor<?x32xf32>, tensor<32xf32>) outs(%e : tensor<?x32xf32>) {
  ^bb0(%v: f32, %s: f32, %out: f32):
    %o = arith.mulf %v, %s : f32
    linalg.yield %o : f32
  } -> tensor<?x32xf32>
  %eb = tensor.empty(%n) : tensor<?x32xbf16>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%scaled : tensor<?x32xf32>) outs(%eb : tensor<?x32xbf16>) {
  ^bb0(%v: f32, %out: bf16):
    %t = arith.truncf %v : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// A bf16 input normalized in f32 and used in f32 (no cast back): the norm
// is raised on the upcast tensor.
// CHECK-LABEL: func @bf16_input_f32_result
// CHECK:         %[[UP:.*]] = linalg.generic
// CHECK:           arith.extf
// CHECK-NOT:     linalg.generic
// CHECK:         %[[Y:.*]] = fff.rms_norm %[[UP]] {epsilon = 9.99999997E-7 : f32} : tensor<?x32xf32>
// CHECK:         return %[[Y]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @bf16_input_f32_result(%x: tensor<?x32xbf16>) -> tensor<?x32xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x32xbf16>
  %e = tensor.empty(%n) : tensor<?x32xf32>
  %up = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x32xbf16>) outs(%e : tensor<?x32xf32>) {
  ^bb0(%v: bf16, %out: f32):
    %f = arith.extf %v : bf16 to f32
    linalg.yield %f : f32
  } -> tensor<?x32xf32>
  %e1 = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?xf32>) -> tensor<?xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%up : tensor<?x32xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%up, %ss : tensor<?x32xf32>, tensor<?xf32>) outs(%e : tensor<?x32xf32>) {
  ^bb0(%v: f32, %q: f32, %out: f32):
    %inv = arith.constant 0.03125 : f32
    %eps = arith.constant 1.0e-6 : f32
    %ms = arith.mulf %q, %inv : f32
    %a = arith.addf %ms, %eps : f32
    %rs = math.rsqrt %a : f32
    %o = arith.mulf %v, %rs : f32
    linalg.yield %o : f32
  } -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// Near miss: the mean subtracted is another tensor's (x - mean(r)).
// CHECK-LABEL: func @mean_of_another_tensor
// CHECK-NOT:     fff.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @mean_of_another_tensor(%x: tensor<?x16xf32>, %r: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x16xf32>
  %e1 = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?xf32>) -> tensor<?xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%r : tensor<?x16xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %sum : tensor<?x16xf32>, tensor<?xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%v: f32, %s: f32, %acc: f32):
    %cnt = arith.constant 16.0 : f32
    %m = arith.divf %s, %cnt : f32
    %c = arith.subf %v, %m : f32
    %sq = arith.mulf %c, %c : f32
    %t = arith.addf %acc, %sq : f32
    linalg.yield %t : f32
  } -> tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum, %ss : tensor<?x16xf32>, tensor<?xf32>, tensor<?xf32>) outs(%e : tensor<?x16xf32>) {
  ^bb0(%v: f32, %s: f32, %q: f32, %out: f32):
    %cnt = arith.constant 16.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %cnt : f32
    %var = arith.divf %q, %cnt : f32
    %a = arith.addf %var, %eps : f32
    %rs = math.rsqrt %a : f32
    %c = arith.subf %v, %m : f32
    %o = arith.mulf %c, %rs : f32
    linalg.yield %o : f32
  } -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// Gemma's first RMSNorm: its input is `x * c` (the embeddings times
// sqrt(hidden), a 0-d tensor), computed in the same region and read by the
// norm through that product; gamma is `1 + w`. The product stays for fusion.
// CHECK-LABEL: func @rms_norm_of_scaled_input
// CHECK:         %[[SCALED:.*]] = linalg.generic
// CHECK:         %[[GAMMA:.*]] = linalg.generic
// CHECK:         %[[Y:.*]] = fff.rms_norm %[[SCALED]] scale(%[[GAMMA]] : tensor<16xf32>) {epsilon = 9.99999997E-7 : f32} : tensor<4x16xf32>
// CHECK:         return %[[SCALED]], %[[Y]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>
#col = affine_map<(d0, d1) -> (d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#vec = affine_map<(d0) -> (d0)>
func.func @rms_norm_of_scaled_input(%x: tensor<4x16xf32>, %c: tensor<f32>, %w: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %two = arith.constant 2 : i64
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %n = arith.constant 16.0 : f32
  %eps = arith.constant 1.0e-6 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %scaled = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %c : tensor<4x16xf32>, tensor<f32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %m = arith.mulf %v, %s : f32
    linalg.yield %m : f32
  } -> tensor<4x16xf32>
  %ew = tensor.empty() : tensor<16xf32>
  %gamma = linalg.generic {indexing_maps = [#vec, #vec], iterator_types = ["parallel"]}
      ins(%w : tensor<16xf32>) outs(%ew : tensor<16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %a = arith.addf %v, %one : f32
    linalg.yield %a : f32
  } -> tensor<16xf32>
  %squares = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%scaled : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %p = math.fpowi %v, %two : f32, i64
    linalg.yield %p : f32
  } -> tensor<4x16xf32>
  %e1 = tensor.empty() : tensor<4x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x1xf32>) -> tensor<4x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%squares : tensor<4x16xf32>) outs(%init : tensor<4x1xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %t = arith.addf %v, %acc : f32
    linalg.yield %t : f32
  } -> tensor<4x1xf32>
  %rstd = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%sum : tensor<4x1xf32>) outs(%e1 : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %mean = arith.divf %v, %n : f32
    %a = arith.addf %mean, %eps : f32
    %r = math.rsqrt %a : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %normed = linalg.generic {indexing_maps = [#id, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%scaled, %rstd : tensor<4x16xf32>, tensor<4x1xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%v: f32, %r: f32, %o: f32):
    %m = arith.mulf %v, %r : f32
    linalg.yield %m : f32
  } -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%normed, %gamma : tensor<4x16xf32>, tensor<16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%v: f32, %g: f32, %o: f32):
    %m = arith.mulf %v, %g : f32
    linalg.yield %m : f32
  } -> tensor<4x16xf32>
  return %scaled, %y : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Near miss: the mean of squares is x's, but the row multiplied is x * c,
// whose c (a scalar tensor) is no per-column gamma.
// CHECK-LABEL: func @scaled_row_over_unscaled_rms
// CHECK-NOT:     fff.
#id = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>
#keep = affine_map<(d0, d1) -> (d0, 0)>
func.func @scaled_row_over_unscaled_rms(%x: tensor<4x16xf32>, %c: tensor<f32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 16.0 : f32
  %eps = arith.constant 1.0e-6 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %e1 = tensor.empty() : tensor<4x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x1xf32>) -> tensor<4x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x16xf32>) outs(%init : tensor<4x1xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %t = arith.addf %sq, %acc : f32
    linalg.yield %t : f32
  } -> tensor<4x1xf32>
  %y = linalg.generic {indexing_maps = [#id, #scalar, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %c, %sum : tensor<4x16xf32>, tensor<f32>, tensor<4x1xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%v: f32, %s: f32, %q: f32, %o: f32):
    %mean = arith.divf %q, %n : f32
    %a = arith.addf %mean, %eps : f32
    %r = math.rsqrt %a : f32
    %vs = arith.mulf %v, %s : f32
    %m = arith.mulf %vs, %r : f32
    linalg.yield %m : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// The Flax fast-variance form with the statistics computed together: one
// multi-result reduction (sum, sum of squares), then one multi-result
// elementwise op giving the mean and the rstd, which the last op reads.
// CHECK-LABEL: func @flax_statistics_together
// CHECK-NOT:     linalg.generic
// CHECK:         %[[Y:.*]] = fff.layer_norm %arg0 scale(%arg1 : tensor<48xf32>) bias(%arg2 : tensor<48xf32>) {epsilon = 9.99999997E-7 : f32} : tensor<?x48xf32>
// CHECK:         return %[[Y]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#vec = affine_map<(d0) -> (d0)>
func.func @flax_statistics_together(%x: tensor<?x48xf32>, %scale: tensor<48xf32>, %bias: tensor<48xf32>) -> tensor<?x48xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x48xf32>
  %e1 = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?xf32>) -> tensor<?xf32>
  %moments:2 = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x48xf32>) outs(%init, %init : tensor<?xf32>, tensor<?xf32>) {
  ^bb0(%v: f32, %s: f32, %q: f32):
    %sq = arith.mulf %v, %v : f32
    %s1 = arith.addf %s, %v : f32
    %q1 = arith.addf %q, %sq : f32
    linalg.yield %s1, %q1 : f32, f32
  } -> (tensor<?xf32>, tensor<?xf32>)
  %stats:2 = linalg.generic {indexing_maps = [#vec, #vec, #vec, #vec], iterator_types = ["parallel"]}
      ins(%moments#0, %moments#1 : tensor<?xf32>, tensor<?xf32>) outs(%e1, %e1 : tensor<?xf32>, tensor<?xf32>) {
  ^bb0(%s: f32, %q: f32, %o1: f32, %o2: f32):
    %cnt = arith.constant 48.0 : f32
    %eps = arith.constant 1.0e-6 : f32
    %z = arith.constant 0.0 : f32
    %mean = arith.divf %s, %cnt : f32
    %mean2 = arith.divf %q, %cnt : f32
    %msq = arith.mulf %mean, %mean : f32
    %d = arith.subf %mean2, %msq : f32
    %var = arith.maximumf %z, %d : f32
    %a = arith.addf %var, %eps : f32
    %rs = math.rsqrt %a : f32
    linalg.yield %mean, %rs : f32, f32
  } -> (tensor<?xf32>, tensor<?xf32>)
  %e = tensor.empty(%n) : tensor<?x48xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #row, #col, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %stats#0, %stats#1, %scale, %bias : tensor<?x48xf32>, tensor<?xf32>, tensor<?xf32>, tensor<48xf32>, tensor<48xf32>) outs(%e : tensor<?x48xf32>) {
  ^bb0(%v: f32, %mean: f32, %rs: f32, %sc: f32, %bv: f32, %out: f32):
    %mul = arith.mulf %rs, %sc : f32
    %c = arith.subf %v, %mean : f32
    %t = arith.mulf %c, %mul : f32
    %o = arith.addf %t, %bv : f32
    linalg.yield %o : f32
  } -> tensor<?x48xf32>
  return %y : tensor<?x48xf32>
}

// -----

// Gemma 3n's RMSNorm: x * pow(mean(x^2) + eps, -0.5), pow by -0.5 being
// rsqrt; pow by -0.25 is no norm and stays.
// CHECK-LABEL: func @rms_norm_by_pow_minus_half
// CHECK:         %[[Y:.*]] = fff.rms_norm %arg0 scale(%arg1 : tensor<64xf32>) {epsilon = 9.99999997E-7 : f32} : tensor<?x64xf32>
// CHECK:         return %[[Y]]
// CHECK-LABEL: func @pow_minus_quarter
// CHECK-NOT:     fff.rms_norm
// CHECK:         math.powf
#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @rms_norm_by_pow_minus_half(%x: tensor<?x64xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %e1 = tensor.empty(%n) : tensor<?x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %ss = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x64xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %two = arith.constant 2.0 : f32
    %sq = math.powf %v, %two : f32
    %s = arith.addf %sq, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %y = linalg.generic {indexing_maps = [#id, #keep, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss, %w : tensor<?x64xf32>, tensor<?x1xf32>, tensor<64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%v: f32, %s: f32, %wv: f32, %out: f32):
    %cnt = arith.constant 64.0 : f32
    %eps = arith.constant 1.0e-6 : f32
    %half = arith.constant -0.5 : f32
    %ms = arith.divf %s, %cnt : f32
    %a = arith.addf %ms, %eps : f32
    %r = math.powf %a, %half : f32
    %t = arith.mulf %v, %r : f32
    %o = arith.mulf %t, %wv : f32
    linalg.yield %o : f32
  } -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
func.func @pow_minus_quarter(%x: tensor<?x64xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %e1 = tensor.empty(%n) : tensor<?x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %ss = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x64xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %sq, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %y = linalg.generic {indexing_maps = [#id, #keep, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss, %w : tensor<?x64xf32>, tensor<?x1xf32>, tensor<64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%v: f32, %s: f32, %wv: f32, %out: f32):
    %cnt = arith.constant 64.0 : f32
    %eps = arith.constant 1.0e-6 : f32
    %quarter = arith.constant -0.25 : f32
    %ms = arith.divf %s, %cnt : f32
    %a = arith.addf %ms, %eps : f32
    %r = math.powf %a, %quarter : f32
    %t = arith.mulf %v, %r : f32
    %o = arith.mulf %t, %wv : f32
    linalg.yield %o : f32
  } -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

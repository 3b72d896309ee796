// RUN: fff-opt %s --fff-raise-norms --split-input-file | FileCheck %s

// The dx of a LayerNorm backward, as torch's decomposition of
// native_layer_norm_backward writes it (torch-mlir and AOTAutograd emit it;
// raise-norm-grads-numeric.py raises torch-mlir's own output):
//   dx = (rstd / N) * ((g * N - sum(g)) - xhat * sum(g * xhat)),
//   xhat = (x - mean) * rstd, g = dy * gamma,
// raised to fff.layer_norm_grad, and the near misses beside it.

#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>

// A dynamic batch; the op reads dy, x, the saved mean and rstd and gamma.
// Only dx is raised: its dgamma, which nothing uses, is not computed.
// CHECK-LABEL: func @layer_norm_grad
// CHECK:         %[[DX:.*]], %{{.*}} = fff.layer_norm_grad %arg0, %arg1, %arg2, %arg3 scale(%arg4 : tensor<64xf32>) : tensor<?x64xf32>, tensor<?x1xf32>
// CHECK-NEXT:    return %[[DX]]

func.func @layer_norm_grad(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>, %m: tensor<?x1xf32>, %r: tensor<?x1xf32>, %g: tensor<64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %xhat = linalg.generic {indexing_maps = [#id, #keep, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m, %r : tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %mean: f32, %rs: f32, %out: f32):
    %c = arith.subf %a, %mean : f32
    %h = arith.mulf %c, %rs : f32
    linalg.yield %h : f32
  } -> tensor<?x64xf32>
  %gy = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %g : tensor<?x64xf32>, tensor<64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %w: f32, %out: f32):
    %p = arith.mulf %a, %w : f32
    linalg.yield %p : f32
  } -> tensor<?x64xf32>
  %e1 = tensor.empty(%n) : tensor<?x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %sum_g = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%gy : tensor<?x64xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %sum_gx = linalg.generic {indexing_maps = [#id, #id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%gy, %xhat : tensor<?x64xf32>, tensor<?x64xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%a: f32, %h: f32, %acc: f32):
    %p = arith.mulf %a, %h : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %dx = linalg.generic {indexing_maps = [#keep, #id, #keep, #id, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %gy, %sum_g, %xhat, %sum_gx : tensor<?x1xf32>, tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x64xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%rs: f32, %gv: f32, %sg: f32, %h: f32, %sgx: f32, %out: f32):
    %n64 = arith.constant 64.0 : f32
    %proj = arith.mulf %h, %sgx : f32
    %gn = arith.mulf %gv, %n64 : f32
    %t1 = arith.subf %gn, %sg : f32
    %t2 = arith.subf %t1, %proj : f32
    %scale = arith.divf %rs, %n64 : f32
    %d = arith.mulf %scale, %t2 : f32
    linalg.yield %d : f32
  } -> tensor<?x64xf32>
  return %dx : tensor<?x64xf32>
}


// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>

// 1/N as a multiplication; the products the other way round.
// CHECK-LABEL: func @scaled_by_one_over_n
// CHECK:         fff.layer_norm_grad %arg0, %arg1, %arg2, %arg3 scale(%arg4 : tensor<64xf32>)
func.func @scaled_by_one_over_n(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>, %m: tensor<?x1xf32>, %r: tensor<?x1xf32>, %g: tensor<64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %xhat = linalg.generic {indexing_maps = [#id, #keep, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m, %r : tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %mean: f32, %rs: f32, %out: f32):
    %c = arith.subf %a, %mean : f32
    %h = arith.mulf %c, %rs : f32
    linalg.yield %h : f32
  } -> tensor<?x64xf32>
  %gy = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %g : tensor<?x64xf32>, tensor<64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %w: f32, %out: f32):
    %p = arith.mulf %a, %w : f32
    linalg.yield %p : f32
  } -> tensor<?x64xf32>
  %e1 = tensor.empty(%n) : tensor<?x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %sum_g = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%gy : tensor<?x64xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %sum_gx = linalg.generic {indexing_maps = [#id, #id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%gy, %xhat : tensor<?x64xf32>, tensor<?x64xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%a: f32, %h: f32, %acc: f32):
    %p = arith.mulf %a, %h : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %dx = linalg.generic {indexing_maps = [#keep, #id, #keep, #id, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %gy, %sum_g, %xhat, %sum_gx : tensor<?x1xf32>, tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x64xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%rs: f32, %gv: f32, %sg: f32, %h: f32, %sgx: f32, %out: f32):
    %n64 = arith.constant 64.0 : f32
    %proj = arith.mulf %sgx, %h : f32
    %gn = arith.mulf %gv, %n64 : f32
    %t1 = arith.subf %gn, %sg : f32
    %t2 = arith.subf %t1, %proj : f32
    %inv = arith.constant 0.015625 : f32
    %scale = arith.mulf %inv, %rs : f32
    %d = arith.mulf %t2, %scale : f32
    linalg.yield %d : f32
  } -> tensor<?x64xf32>
  return %dx : tensor<?x64xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>

// Near miss: N is 63, not the row's 64.
// CHECK-LABEL: func @wrong_count
// CHECK-NOT:     fff.layer_norm_grad
func.func @wrong_count(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>, %m: tensor<?x1xf32>, %r: tensor<?x1xf32>, %g: tensor<64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %xhat = linalg.generic {indexing_maps = [#id, #keep, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m, %r : tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %mean: f32, %rs: f32, %out: f32):
    %c = arith.subf %a, %mean : f32
    %h = arith.mulf %c, %rs : f32
    linalg.yield %h : f32
  } -> tensor<?x64xf32>
  %gy = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %g : tensor<?x64xf32>, tensor<64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %w: f32, %out: f32):
    %p = arith.mulf %a, %w : f32
    linalg.yield %p : f32
  } -> tensor<?x64xf32>
  %e1 = tensor.empty(%n) : tensor<?x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %sum_g = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%gy : tensor<?x64xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %sum_gx = linalg.generic {indexing_maps = [#id, #id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%gy, %xhat : tensor<?x64xf32>, tensor<?x64xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%a: f32, %h: f32, %acc: f32):
    %p = arith.mulf %a, %h : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %dx = linalg.generic {indexing_maps = [#keep, #id, #keep, #id, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %gy, %sum_g, %xhat, %sum_gx : tensor<?x1xf32>, tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x64xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%rs: f32, %gv: f32, %sg: f32, %h: f32, %sgx: f32, %out: f32):
    %n64 = arith.constant 64.0 : f32
    %proj = arith.mulf %h, %sgx : f32
    %gn = arith.mulf %gv, %n64 : f32
    %t1 = arith.subf %gn, %sg : f32
    %t2 = arith.subf %t1, %proj : f32
    %n63 = arith.constant 63.0 : f32
    %scale = arith.divf %rs, %n63 : f32
    %d = arith.mulf %scale, %t2 : f32
    linalg.yield %d : f32
  } -> tensor<?x64xf32>
  return %dx : tensor<?x64xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>

// Near miss: no - sum(g) term (not a LayerNorm's gradient).
// CHECK-LABEL: func @without_sum_of_g
// CHECK-NOT:     fff.layer_norm_grad
func.func @without_sum_of_g(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>, %m: tensor<?x1xf32>, %r: tensor<?x1xf32>, %g: tensor<64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %xhat = linalg.generic {indexing_maps = [#id, #keep, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m, %r : tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %mean: f32, %rs: f32, %out: f32):
    %c = arith.subf %a, %mean : f32
    %h = arith.mulf %c, %rs : f32
    linalg.yield %h : f32
  } -> tensor<?x64xf32>
  %gy = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %g : tensor<?x64xf32>, tensor<64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %w: f32, %out: f32):
    %p = arith.mulf %a, %w : f32
    linalg.yield %p : f32
  } -> tensor<?x64xf32>
  %e1 = tensor.empty(%n) : tensor<?x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %sum_g = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%gy : tensor<?x64xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %sum_gx = linalg.generic {indexing_maps = [#id, #id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%gy, %xhat : tensor<?x64xf32>, tensor<?x64xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%a: f32, %h: f32, %acc: f32):
    %p = arith.mulf %a, %h : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %dx = linalg.generic {indexing_maps = [#keep, #id, #keep, #id, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %gy, %sum_g, %xhat, %sum_gx : tensor<?x1xf32>, tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x64xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%rs: f32, %gv: f32, %sg: f32, %h: f32, %sgx: f32, %out: f32):
    %n64 = arith.constant 64.0 : f32
    %proj = arith.mulf %h, %sgx : f32
    %gn = arith.mulf %gv, %n64 : f32
    %t1 = arith.subf %gn, %sg : f32
    %t2 = arith.subf %gn, %proj : f32
    %scale = arith.divf %rs, %n64 : f32
    %d = arith.mulf %scale, %t2 : f32
    linalg.yield %d : f32
  } -> tensor<?x64xf32>
  return %dx : tensor<?x64xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>

// Near miss: xhat scaled by another tensor than the rstd outside.
// CHECK-LABEL: func @other_rstd_in_xhat
// CHECK-NOT:     fff.layer_norm_grad
func.func @other_rstd_in_xhat(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>, %m: tensor<?x1xf32>, %r: tensor<?x1xf32>, %g: tensor<64xf32>, %r2: tensor<?x1xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %xhat = linalg.generic {indexing_maps = [#id, #keep, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m, %r2 : tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %mean: f32, %rs: f32, %out: f32):
    %c = arith.subf %a, %mean : f32
    %h = arith.mulf %c, %rs : f32
    linalg.yield %h : f32
  } -> tensor<?x64xf32>
  %gy = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %g : tensor<?x64xf32>, tensor<64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %w: f32, %out: f32):
    %p = arith.mulf %a, %w : f32
    linalg.yield %p : f32
  } -> tensor<?x64xf32>
  %e1 = tensor.empty(%n) : tensor<?x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %sum_g = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%gy : tensor<?x64xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %sum_gx = linalg.generic {indexing_maps = [#id, #id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%gy, %xhat : tensor<?x64xf32>, tensor<?x64xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%a: f32, %h: f32, %acc: f32):
    %p = arith.mulf %a, %h : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %dx = linalg.generic {indexing_maps = [#keep, #id, #keep, #id, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %gy, %sum_g, %xhat, %sum_gx : tensor<?x1xf32>, tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x64xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%rs: f32, %gv: f32, %sg: f32, %h: f32, %sgx: f32, %out: f32):
    %n64 = arith.constant 64.0 : f32
    %proj = arith.mulf %h, %sgx : f32
    %gn = arith.mulf %gv, %n64 : f32
    %t1 = arith.subf %gn, %sg : f32
    %t2 = arith.subf %t1, %proj : f32
    %scale = arith.divf %rs, %n64 : f32
    %d = arith.mulf %scale, %t2 : f32
    linalg.yield %d : f32
  } -> tensor<?x64xf32>
  return %dx : tensor<?x64xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>

// Near miss: the projection added, not subtracted.
// CHECK-LABEL: func @plus_instead_of_minus
// CHECK-NOT:     fff.layer_norm_grad
func.func @plus_instead_of_minus(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>, %m: tensor<?x1xf32>, %r: tensor<?x1xf32>, %g: tensor<64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %xhat = linalg.generic {indexing_maps = [#id, #keep, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m, %r : tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %mean: f32, %rs: f32, %out: f32):
    %c = arith.subf %a, %mean : f32
    %h = arith.mulf %c, %rs : f32
    linalg.yield %h : f32
  } -> tensor<?x64xf32>
  %gy = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %g : tensor<?x64xf32>, tensor<64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %w: f32, %out: f32):
    %p = arith.mulf %a, %w : f32
    linalg.yield %p : f32
  } -> tensor<?x64xf32>
  %e1 = tensor.empty(%n) : tensor<?x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %sum_g = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%gy : tensor<?x64xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %sum_gx = linalg.generic {indexing_maps = [#id, #id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%gy, %xhat : tensor<?x64xf32>, tensor<?x64xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%a: f32, %h: f32, %acc: f32):
    %p = arith.mulf %a, %h : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %dx = linalg.generic {indexing_maps = [#keep, #id, #keep, #id, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %gy, %sum_g, %xhat, %sum_gx : tensor<?x1xf32>, tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x64xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%rs: f32, %gv: f32, %sg: f32, %h: f32, %sgx: f32, %out: f32):
    %n64 = arith.constant 64.0 : f32
    %proj = arith.mulf %h, %sgx : f32
    %gn = arith.mulf %gv, %n64 : f32
    %t1 = arith.subf %gn, %sg : f32
    %t2 = arith.addf %t1, %proj : f32
    %scale = arith.divf %rs, %n64 : f32
    %d = arith.mulf %scale, %t2 : f32
    linalg.yield %d : f32
  } -> tensor<?x64xf32>
  return %dx : tensor<?x64xf32>
}


// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>

// dgamma and dbeta as torch-mlir writes them: dy * xhat in an op of its own,
// then sums over the rows, of it and of dy. They become the raised op's
// results (dbeta through bias_grad); a sum over the rows of dy * x (not
// xhat) stays linalg.
// CHECK-LABEL: func @parameter_gradients
// CHECK:         %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = fff.layer_norm_grad %arg0, %arg1, %arg2, %arg3 scale(%arg4 : tensor<64xf32>) bias_grad : tensor<?x64xf32>, tensor<?x1xf32>
// CHECK:         %[[OTHER:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]
// CHECK:         return %[[DX]], %[[DG]], %[[DB]], %[[OTHER]]
func.func @parameter_gradients(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>, %m: tensor<?x1xf32>, %r: tensor<?x1xf32>, %g: tensor<64xf32>)
    -> (tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %xhat = linalg.generic {indexing_maps = [#id, #keep, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m, %r : tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %mean: f32, %rs: f32, %out: f32):
    %c = arith.subf %a, %mean : f32
    %h = arith.mulf %c, %rs : f32
    linalg.yield %h : f32
  } -> tensor<?x64xf32>
  %gy = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %g : tensor<?x64xf32>, tensor<64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %w: f32, %out: f32):
    %p = arith.mulf %a, %w : f32
    linalg.yield %p : f32
  } -> tensor<?x64xf32>
  %e1 = tensor.empty(%n) : tensor<?x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x1xf32>) -> tensor<?x1xf32>
  %sum_g = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%gy : tensor<?x64xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %sum_gx = linalg.generic {indexing_maps = [#id, #id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%gy, %xhat : tensor<?x64xf32>, tensor<?x64xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%a: f32, %h: f32, %acc: f32):
    %p = arith.mulf %a, %h : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %dx = linalg.generic {indexing_maps = [#keep, #id, #keep, #id, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %gy, %sum_g, %xhat, %sum_gx : tensor<?x1xf32>, tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x64xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%rs: f32, %gv: f32, %sg: f32, %h: f32, %sgx: f32, %out: f32):
    %n64 = arith.constant 64.0 : f32
    %proj = arith.mulf %h, %sgx : f32
    %gn = arith.mulf %gv, %n64 : f32
    %t1 = arith.subf %gn, %sg : f32
    %t2 = arith.subf %t1, %proj : f32
    %scale = arith.divf %rs, %n64 : f32
    %d = arith.mulf %scale, %t2 : f32
    linalg.yield %d : f32
  } -> tensor<?x64xf32>
  %dyxhat = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %xhat : tensor<?x64xf32>, tensor<?x64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %h: f32, %out: f32):
    %p = arith.mulf %a, %h : f32
    linalg.yield %p : f32
  } -> tensor<?x64xf32>
  %ecol = tensor.empty() : tensor<64xf32>
  %zcol = linalg.fill ins(%zero : f32) outs(%ecol : tensor<64xf32>) -> tensor<64xf32>
  %dgamma = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dyxhat : tensor<?x64xf32>) outs(%zcol : tensor<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %dbeta = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<?x64xf32>) outs(%zcol : tensor<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %other = linalg.generic {indexing_maps = [#id, #id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy, %x : tensor<?x64xf32>, tensor<?x64xf32>) outs(%zcol : tensor<64xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %dx, %dgamma, %dbeta, %other : tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
}

// Round-trips every fff op in every form: static and dynamic dims, each
// element type, with and without the optional operands and results.
// RUN: fff-opt %s --allow-unregistered-dialect | fff-opt --allow-unregistered-dialect | FileCheck %s
// RUN: fff-opt %s --allow-unregistered-dialect --mlir-print-op-generic \
// RUN:   | fff-opt --allow-unregistered-dialect | FileCheck %s

// CHECK-LABEL: func @layer_norm_forms
func.func @layer_norm_forms(%x: tensor<8x768xf32>, %g: tensor<768xf32>, %b: tensor<768xf32>) {
  // CHECK: fff.layer_norm %{{.*}} : tensor<8x768xf32>
  %0 = fff.layer_norm %x : tensor<8x768xf32>
  // CHECK: fff.layer_norm %{{.*}} scale(%{{.*}} : tensor<768xf32>) : tensor<8x768xf32>
  %1 = fff.layer_norm %x scale(%g : tensor<768xf32>) : tensor<8x768xf32>
  // CHECK: fff.layer_norm %{{.*}} bias(%{{.*}} : tensor<768xf32>) : tensor<8x768xf32>
  %2 = fff.layer_norm %x bias(%b : tensor<768xf32>) : tensor<8x768xf32>
  // CHECK: fff.layer_norm %{{.*}} scale(%{{.*}} : tensor<768xf32>) bias(%{{.*}} : tensor<768xf32>) {epsilon = 9.99999996E-13 : f32} : tensor<8x768xf32>
  %3 = fff.layer_norm %x scale(%g : tensor<768xf32>) bias(%b : tensor<768xf32>) {epsilon = 1.0e-12 : f32} : tensor<8x768xf32>
  // The default epsilon (1e-5) is not printed.
  // CHECK: fff.layer_norm %{{.*}} : tensor<8x768xf32>
  %4 = fff.layer_norm %x {epsilon = 1.0e-05 : f32} : tensor<8x768xf32>
  // CHECK: %{{.*}}, %[[MEAN:.*]], %[[RSTD:.*]] = fff.layer_norm %{{.*}} return_stats : tensor<8x768xf32>
  %5:3 = fff.layer_norm %x return_stats : tensor<8x768xf32>
  // CHECK: "test.use"(%[[MEAN]], %[[RSTD]]) : (tensor<8x1xf32>, tensor<8x1xf32>) -> ()
  "test.use"(%5#1, %5#2) : (tensor<8x1xf32>, tensor<8x1xf32>) -> ()
  return
}

// CHECK-LABEL: func @layer_norm_dynamic
func.func @layer_norm_dynamic(%x: tensor<?x?x64xbf16>, %g: tensor<?x64xbf16>, %b: tensor<16x64xbf16>) {
  // CHECK: fff.layer_norm %{{.*}} scale(%{{.*}} : tensor<?x64xbf16>) bias(%{{.*}} : tensor<16x64xbf16>) normalized_rank 2 return_stats : tensor<?x?x64xbf16>
  %0:3 = fff.layer_norm %x scale(%g : tensor<?x64xbf16>) bias(%b : tensor<16x64xbf16>) normalized_rank 2 return_stats : tensor<?x?x64xbf16>
  // CHECK: "test.use"(%{{.*}}) : (tensor<?x1x1xf32>) -> ()
  "test.use"(%0#1) : (tensor<?x1x1xf32>) -> ()
  // normalized_rank equal to the input rank normalizes everything.
  // CHECK: fff.layer_norm %{{.*}} normalized_rank 3 return_stats : tensor<?x?x64xbf16>
  %1:3 = fff.layer_norm %x normalized_rank 3 return_stats : tensor<?x?x64xbf16>
  // CHECK: "test.use"(%{{.*}}) : (tensor<1x1x1xf32>) -> ()
  "test.use"(%1#2) : (tensor<1x1x1xf32>) -> ()
  return
}

// CHECK-LABEL: func @layer_norm_f16
func.func @layer_norm_f16(%x: tensor<?x1000xf16>, %g: tensor<1000xf16>) -> tensor<?x1000xf16> {
  // CHECK: fff.layer_norm %{{.*}} scale(%{{.*}} : tensor<1000xf16>) : tensor<?x1000xf16>
  %0 = fff.layer_norm %x scale(%g : tensor<1000xf16>) : tensor<?x1000xf16>
  return %0 : tensor<?x1000xf16>
}

// CHECK-LABEL: func @rms_norm_forms
func.func @rms_norm_forms(%x32: tensor<4x4096xf32>, %x16: tensor<?x4096xf16>, %xbf: tensor<?x?x3xbf16>,
                          %g32: tensor<4096xf32>, %g16: tensor<4096xf16>, %gbf: tensor<?x3xbf16>) {
  // CHECK: fff.rms_norm %{{.*}} : tensor<4x4096xf32>
  %0 = fff.rms_norm %x32 : tensor<4x4096xf32>
  // CHECK: fff.rms_norm %{{.*}} scale(%{{.*}} : tensor<4096xf32>) {epsilon = 9.99999997E-7 : f32} : tensor<4x4096xf32>
  %1 = fff.rms_norm %x32 scale(%g32 : tensor<4096xf32>) {epsilon = 1.0e-06 : f32} : tensor<4x4096xf32>
  // CHECK: fff.rms_norm %{{.*}} scale(%{{.*}} : tensor<4096xf16>) : tensor<?x4096xf16>
  %2 = fff.rms_norm %x16 scale(%g16 : tensor<4096xf16>) : tensor<?x4096xf16>
  // CHECK: fff.rms_norm %{{.*}} scale(%{{.*}} : tensor<?x3xbf16>) normalized_rank 2 : tensor<?x?x3xbf16>
  %3 = fff.rms_norm %xbf scale(%gbf : tensor<?x3xbf16>) normalized_rank 2 : tensor<?x?x3xbf16>
  // Zero epsilon is allowed.
  // CHECK: fff.rms_norm %{{.*}} {epsilon = 0.000000e+00 : f32} : tensor<4x4096xf32>
  %4 = fff.rms_norm %x32 {epsilon = 0.0 : f32} : tensor<4x4096xf32>
  return
}

// CHECK-LABEL: func @tree_ffn_forms
func.func @tree_ffn_forms(%x: tensor<?x768xf32>, %w_in: tensor<1x4095x768xf32>, %b_in: tensor<1x4095xf32>,
                          %w_out: tensor<1x4095x768xf32>, %b_out: tensor<768xf32>) {
  // CHECK: %{{.*}} = fff.tree_ffn %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<1x4095xf32>), %{{.*}} bias(%{{.*}} : tensor<768xf32>) {depth = 11 : i64} : tensor<?x768xf32>, tensor<1x4095x768xf32>, tensor<1x4095x768xf32>
  %0 = fff.tree_ffn %x, %w_in bias(%b_in : tensor<1x4095xf32>), %w_out bias(%b_out : tensor<768xf32>) {depth = 11 : i64}
         : tensor<?x768xf32>, tensor<1x4095x768xf32>, tensor<1x4095x768xf32>
  // CHECK: fff.tree_ffn %{{.*}}, %{{.*}}, %{{.*}} {depth = 11 : i64} : tensor<?x768xf32>
  %1 = fff.tree_ffn %x, %w_in, %w_out {depth = 11 : i64, activation = #fff.activation<gelu>}
         : tensor<?x768xf32>, tensor<1x4095x768xf32>, tensor<1x4095x768xf32>
  // CHECK: fff.tree_ffn %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<1x4095xf32>), %{{.*}} {activation = #fff.activation<relu>, depth = 11 : i64}
  %2 = fff.tree_ffn %x, %w_in bias(%b_in : tensor<1x4095xf32>), %w_out {depth = 11 : i64, activation = #fff.activation<relu>}
         : tensor<?x768xf32>, tensor<1x4095x768xf32>, tensor<1x4095x768xf32>
  // CHECK: fff.tree_ffn %{{.*}}, %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<768xf32>) {activation = #fff.activation<gelu_tanh>, depth = 11 : i64}
  %3 = fff.tree_ffn %x, %w_in, %w_out bias(%b_out : tensor<768xf32>) {depth = 11 : i64, activation = #fff.activation<gelu_tanh>}
         : tensor<?x768xf32>, tensor<1x4095x768xf32>, tensor<1x4095x768xf32>
  // The authors' inference walk: a logit of exactly 0 goes right.
  // CHECK: fff.tree_ffn %{{.*}}, %{{.*}}, %{{.*}} {depth = 11 : i64, zero_goes_right} : tensor<?x768xf32>
  %4 = fff.tree_ffn %x, %w_in, %w_out {depth = 11 : i64, zero_goes_right}
         : tensor<?x768xf32>, tensor<1x4095x768xf32>, tensor<1x4095x768xf32>
  // CHECK: fff.tree_ffn_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {depth = 11 : i64, zero_goes_right} : tensor<?x768xf32>
  %dx, %dwi, %dwo = fff.tree_ffn_grad %x, %x, %w_in, %w_out {depth = 11 : i64, zero_goes_right}
         : tensor<?x768xf32>, tensor<?x768xf32>, tensor<1x4095x768xf32>, tensor<1x4095x768xf32>
  // CHECK: "test.use"(%{{.*}}) : (tensor<?x768xf32>) -> ()
  "test.use"(%0) : (tensor<?x768xf32>) -> ()
  return
}

// CHECK-LABEL: func @tree_ffn_shapes
func.func @tree_ffn_shapes(%x16: tensor<5x3xf16>, %w_in16: tensor<3x1x3xf16>, %w_out16: tensor<3x1x7xf16>,
                           %xbf: tensor<?x?xbf16>, %w_inbf: tensor<?x?x?xbf16>, %w_outbf: tensor<2x?x?xbf16>) {
  // Depth 0 (one neuron per tree), K = 3 trees, Din != Dout, f16.
  // CHECK: fff.tree_ffn %{{.*}}, %{{.*}}, %{{.*}} {activation = #fff.activation<silu>, depth = 0 : i64}
  %0 = fff.tree_ffn %x16, %w_in16, %w_out16 {depth = 0 : i64, activation = #fff.activation<silu>}
         : tensor<5x3xf16>, tensor<3x1x3xf16>, tensor<3x1x7xf16>
  // CHECK: "test.use"(%{{.*}}) : (tensor<5x7xf16>) -> ()
  "test.use"(%0) : (tensor<5x7xf16>) -> ()
  // Everything dynamic, bf16; the result keeps the dynamic dims.
  // CHECK: fff.tree_ffn %{{.*}}, %{{.*}}, %{{.*}} {activation = #fff.activation<identity>, depth = 20 : i64}
  %1 = fff.tree_ffn %xbf, %w_inbf, %w_outbf {depth = 20 : i64, activation = #fff.activation<identity>}
         : tensor<?x?xbf16>, tensor<?x?x?xbf16>, tensor<2x?x?xbf16>
  // CHECK: "test.use"(%{{.*}}) : (tensor<?x?xbf16>) -> ()
  "test.use"(%1) : (tensor<?x?xbf16>) -> ()
  return
}

// CHECK-LABEL: func @leaf_tree_ffn_forms
func.func @leaf_tree_ffn_forms(%x: tensor<?x64xf32>, %nw: tensor<7x64xf32>, %nb: tensor<7xf32>,
                               %w1: tensor<8x64x16xf32>, %b1: tensor<8x16xf32>,
                               %w2: tensor<8x16x32xf32>, %b2: tensor<8x32xf32>) {
  // CHECK: fff.leaf_tree_ffn %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {depth = 3 : i64} : tensor<?x64xf32>, tensor<7x64xf32>, tensor<7xf32>, tensor<8x64x16xf32>, tensor<8x16xf32>, tensor<8x16x32xf32>, tensor<8x32xf32>
  %0 = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 3 : i64}
         : tensor<?x64xf32>, tensor<7x64xf32>, tensor<7xf32>, tensor<8x64x16xf32>, tensor<8x16xf32>, tensor<8x16x32xf32>, tensor<8x32xf32>
  // The default activation is relu, so it is not printed.
  // CHECK: fff.leaf_tree_ffn {{.*}} {depth = 3 : i64}
  %1 = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 3 : i64, activation = #fff.activation<relu>}
         : tensor<?x64xf32>, tensor<7x64xf32>, tensor<7xf32>, tensor<8x64x16xf32>, tensor<8x16xf32>, tensor<8x16x32xf32>, tensor<8x32xf32>
  // CHECK: "test.use"(%{{.*}}) : (tensor<?x32xf32>) -> ()
  "test.use"(%0) : (tensor<?x32xf32>) -> ()
  return
}

// CHECK-LABEL: func @leaf_tree_ffn_dtypes
func.func @leaf_tree_ffn_dtypes(%x: tensor<2x3xbf16>, %nw: tensor<1x3xbf16>, %nb: tensor<1xbf16>,
                                %w1: tensor<2x3x1xbf16>, %b1: tensor<2x1xbf16>,
                                %w2: tensor<2x1x5xbf16>, %b2: tensor<2x5xbf16>,
                                %xh: tensor<?x?xf16>, %nwh: tensor<?x?xf16>, %nbh: tensor<?xf16>,
                                %w1h: tensor<?x?x?xf16>, %b1h: tensor<?x?xf16>,
                                %w2h: tensor<?x?x?xf16>, %b2h: tensor<?x?xf16>) {
  // CHECK: fff.leaf_tree_ffn {{.*}} {activation = #fff.activation<gelu>, depth = 1 : i64} : tensor<2x3xbf16>
  %0 = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 1 : i64, activation = #fff.activation<gelu>}
         : tensor<2x3xbf16>, tensor<1x3xbf16>, tensor<1xbf16>, tensor<2x3x1xbf16>, tensor<2x1xbf16>, tensor<2x1x5xbf16>, tensor<2x5xbf16>
  // CHECK: "test.use"(%{{.*}}) : (tensor<2x5xbf16>) -> ()
  "test.use"(%0) : (tensor<2x5xbf16>) -> ()
  // CHECK: fff.leaf_tree_ffn {{.*}} {depth = 8 : i64} : tensor<?x?xf16>
  %1 = fff.leaf_tree_ffn %xh, %nwh, %nbh, %w1h, %b1h, %w2h, %b2h {depth = 8 : i64}
         : tensor<?x?xf16>, tensor<?x?xf16>, tensor<?xf16>, tensor<?x?x?xf16>, tensor<?x?xf16>, tensor<?x?x?xf16>, tensor<?x?xf16>
  return
}

// CHECK-LABEL: func @leaf_tree_ffn_grad_forms
func.func @leaf_tree_ffn_grad_forms(%dy: tensor<?x32xf32>, %x: tensor<?x64xf32>, %nw: tensor<7x64xf32>,
                                    %nb: tensor<7xf32>, %w1: tensor<8x64x16xf32>, %b1: tensor<8x16xf32>,
                                    %w2: tensor<8x16x32xf32>, %dyh: tensor<2x5xbf16>, %xh: tensor<2x3xbf16>,
                                    %nwh: tensor<1x3xbf16>, %nbh: tensor<1xbf16>, %w1h: tensor<2x3x1xbf16>,
                                    %b1h: tensor<2x1xbf16>, %w2h: tensor<2x1x5xbf16>) {
  // dx, dw1, db1, dw2, then db2 [L, Dout] in the input's element type.
  // CHECK: %dx, %dw1, %db1, %dw2, %db2 = fff.leaf_tree_ffn_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {depth = 3 : i64} : tensor<?x32xf32>, tensor<?x64xf32>, tensor<7x64xf32>, tensor<7xf32>, tensor<8x64x16xf32>, tensor<8x16xf32>, tensor<8x16x32xf32>
  %dx, %dw1, %db1, %dw2, %db2 = fff.leaf_tree_ffn_grad %dy, %x, %nw, %nb, %w1, %b1, %w2 {depth = 3 : i64}
         : tensor<?x32xf32>, tensor<?x64xf32>, tensor<7x64xf32>, tensor<7xf32>, tensor<8x64x16xf32>, tensor<8x16xf32>, tensor<8x16x32xf32>
  // CHECK: "test.use"(%dx, %dw1, %db1, %dw2, %db2) : (tensor<?x64xf32>, tensor<8x64x16xf32>, tensor<8x16xf32>, tensor<8x16x32xf32>, tensor<8x32xf32>) -> ()
  "test.use"(%dx, %dw1, %db1, %dw2, %db2) : (tensor<?x64xf32>, tensor<8x64x16xf32>, tensor<8x16xf32>, tensor<8x16x32xf32>, tensor<8x32xf32>) -> ()
  // CHECK: fff.leaf_tree_ffn_grad {{.*}} {activation = #fff.activation<gelu>, depth = 1 : i64} : tensor<2x5xbf16>
  %r:5 = fff.leaf_tree_ffn_grad %dyh, %xh, %nwh, %nbh, %w1h, %b1h, %w2h {depth = 1 : i64, activation = #fff.activation<gelu>}
         : tensor<2x5xbf16>, tensor<2x3xbf16>, tensor<1x3xbf16>, tensor<1xbf16>, tensor<2x3x1xbf16>, tensor<2x1xbf16>, tensor<2x1x5xbf16>
  // CHECK: "test.use"(%db2_4) : (tensor<2x5xbf16>) -> ()
  "test.use"(%r#4) : (tensor<2x5xbf16>) -> ()
  return
}

// CHECK-LABEL: func @fusion_forms
func.func @fusion_forms(%x: tensor<?x768xf32>, %r: tensor<?x768xf32>, %g: tensor<768xf32>) -> (tensor<?x768xf32>, tensor<?x768xf32>) {
  // CHECK: %{{.*}}:2 = fff.fusion ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x768xf32>, tensor<?x768xf32>, tensor<768xf32>) {
  // CHECK:   fff.yield %{{.*}}, %{{.*}} : tensor<?x768xf32>, tensor<?x768xf32>
  // CHECK: } -> tensor<?x768xf32>, tensor<?x768xf32>
  %sum, %y = fff.fusion ins(%x, %r, %g : tensor<?x768xf32>, tensor<?x768xf32>, tensor<768xf32>) {
  ^bb0(%a: tensor<?x768xf32>, %b: tensor<?x768xf32>, %gamma: tensor<768xf32>):
    %s = arith.addf %a, %b : tensor<?x768xf32>
    %n = fff.rms_norm %s scale(%gamma : tensor<768xf32>) : tensor<?x768xf32>
    fff.yield %s, %n : tensor<?x768xf32>, tensor<?x768xf32>
  } -> tensor<?x768xf32>, tensor<?x768xf32>
  return %sum, %y : tensor<?x768xf32>, tensor<?x768xf32>
}

// A backward unit: dy's dropout mask, the norm backward, the residual
// stream's gradient added to dx.
// CHECK-LABEL: func @backward_fusion_forms
func.func @backward_fusion_forms(%dy: tensor<?x768xf32>, %mask: tensor<?x768xf32>, %x: tensor<?x768xf32>,
                                 %g: tensor<768xf32>, %dres: tensor<?x768xf32>) -> (tensor<?x768xf32>, tensor<768xf32>) {
  // CHECK: %{{.*}}:2 = fff.fusion ins(
  // CHECK:   fff.rms_norm_grad
  // CHECK:   fff.yield %{{.*}}, %{{.*}} : tensor<?x768xf32>, tensor<768xf32>
  // CHECK: } -> tensor<?x768xf32>, tensor<768xf32>
  %dh, %dg = fff.fusion ins(%dy, %mask, %x, %g, %dres : tensor<?x768xf32>, tensor<?x768xf32>, tensor<?x768xf32>, tensor<768xf32>, tensor<?x768xf32>) {
  ^bb0(%a: tensor<?x768xf32>, %m: tensor<?x768xf32>, %b: tensor<?x768xf32>, %gamma: tensor<768xf32>, %r: tensor<?x768xf32>):
    %masked = arith.mulf %a, %m : tensor<?x768xf32>
    %dx, %dgamma = fff.rms_norm_grad %masked, %b scale(%gamma : tensor<768xf32>) : tensor<?x768xf32>
    %sum = arith.addf %r, %dx : tensor<?x768xf32>
    fff.yield %sum, %dgamma : tensor<?x768xf32>, tensor<768xf32>
  } -> tensor<?x768xf32>, tensor<768xf32>
  return %dh, %dg : tensor<?x768xf32>, tensor<768xf32>
}

// CHECK-LABEL: func @norm_grad_forms
func.func @norm_grad_forms(%dy: tensor<?x768xbf16>, %x: tensor<?x768xbf16>, %m: tensor<?x1xf32>, %r: tensor<?x1xf32>, %g: tensor<768xbf16>) {
  // CHECK: %dx, %dgamma, %dbeta = fff.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale(%{{.*}} : tensor<768xbf16>) bias_grad : tensor<?x768xbf16>, tensor<?x1xf32>
  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %m, %r scale(%g : tensor<768xbf16>) bias_grad : tensor<?x768xbf16>, tensor<?x1xf32>
  // CHECK: %dx_0 = fff.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x768xbf16>, tensor<?x1xf32>
  %dx2 = fff.layer_norm_grad %dy, %x, %m, %r : tensor<?x768xbf16>, tensor<?x1xf32>
  // Without scale, dbeta has the input's normalized shape.
  // CHECK: %dx_1, %dbeta_2 = fff.layer_norm_grad %{{.*}} bias_grad : tensor<?x768xbf16>, tensor<?x1xf32>
  %dx3, %db3 = fff.layer_norm_grad %dy, %x, %m, %r bias_grad : tensor<?x768xbf16>, tensor<?x1xf32>
  // CHECK: %dx_3, %dgamma_4 = fff.rms_norm_grad %{{.*}}, %{{.*}} scale(%{{.*}} : tensor<768xbf16>) {epsilon = 9.99999997E-7 : f32} : tensor<?x768xbf16>
  %dx4, %dg4 = fff.rms_norm_grad %dy, %x scale(%g : tensor<768xbf16>) {epsilon = 1.0e-06 : f32} : tensor<?x768xbf16>
  // CHECK: fff.rms_norm_grad %{{.*}}, %{{.*}} rstd(%{{.*}} : tensor<?x1xf32>) : tensor<?x768xbf16>
  %dx5 = fff.rms_norm_grad %dy, %x rstd(%r : tensor<?x1xf32>) : tensor<?x768xbf16>
  "test.use"(%dx, %dg, %db, %dx2, %dx3, %db3, %dx4, %dg4, %dx5) : (tensor<?x768xbf16>, tensor<768xbf16>, tensor<768xbf16>, tensor<?x768xbf16>, tensor<?x768xbf16>, tensor<768xbf16>, tensor<?x768xbf16>, tensor<768xbf16>, tensor<?x768xbf16>) -> ()
  return
}

// CHECK-LABEL: func @tree_ffn_grad_forms
func.func @tree_ffn_grad_forms(%dy: tensor<?x768xf32>, %x: tensor<?x768xf32>, %w_in: tensor<1x4095x768xf32>,
                               %b_in: tensor<1x4095xf32>, %w_out: tensor<1x4095x768xf32>,
                               %dy16: tensor<5x7xbf16>, %x16: tensor<5x3xbf16>, %wi16: tensor<2x1x3xbf16>,
                               %wo16: tensor<2x1x7xbf16>) {
  // Both biases: dx, dw_in, dw_out, then db_in and db_out.
  // CHECK: %dx, %dw_in, %dw_out, %db_in, %db_out = fff.tree_ffn_grad %{{.*}}, %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<1x4095xf32>), %{{.*}} bias_grad {depth = 11 : i64} : tensor<?x768xf32>, tensor<?x768xf32>, tensor<1x4095x768xf32>, tensor<1x4095x768xf32>
  %dx, %dwi, %dwo, %dbi, %dbo = fff.tree_ffn_grad %dy, %x, %w_in bias(%b_in : tensor<1x4095xf32>), %w_out bias_grad
         {depth = 11 : i64} : tensor<?x768xf32>, tensor<?x768xf32>, tensor<1x4095x768xf32>, tensor<1x4095x768xf32>
  // CHECK: "test.use"(%db_in, %db_out) : (tensor<1x4095xf32>, tensor<768xf32>) -> ()
  "test.use"(%dbi, %dbo) : (tensor<1x4095xf32>, tensor<768xf32>) -> ()
  // No biases, depth 0, Din != Dout, bf16: three results.
  // CHECK: %dx_0, %dw_in_1, %dw_out_2 = fff.tree_ffn_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {activation = #fff.activation<relu>, depth = 0 : i64} : tensor<5x7xbf16>, tensor<5x3xbf16>, tensor<2x1x3xbf16>, tensor<2x1x7xbf16>
  %dx2, %dwi2, %dwo2 = fff.tree_ffn_grad %dy16, %x16, %wi16, %wo16 {depth = 0 : i64, activation = #fff.activation<relu>}
         : tensor<5x7xbf16>, tensor<5x3xbf16>, tensor<2x1x3xbf16>, tensor<2x1x7xbf16>
  // CHECK: "test.use"(%dx_0, %dw_in_1, %dw_out_2) : (tensor<5x3xbf16>, tensor<2x1x3xbf16>, tensor<2x1x7xbf16>) -> ()
  "test.use"(%dx2, %dwi2, %dwo2) : (tensor<5x3xbf16>, tensor<2x1x3xbf16>, tensor<2x1x7xbf16>) -> ()
  return
}

// One case per verifier message. Each must be rejected with a clear error.
// RUN: fff-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// layer_norm / rms_norm
//===----------------------------------------------------------------------===//

func.func @norm_negative_epsilon(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'fff.layer_norm' op epsilon must be finite and non-negative, got -1}}
  %0 = fff.layer_norm %x {epsilon = -1.0 : f32} : tensor<4x8xf32>
  return
}

// -----

func.func @norm_nan_epsilon(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'fff.rms_norm' op epsilon must be finite and non-negative, got nan}}
  %0 = fff.rms_norm %x {epsilon = 0x7FC00000 : f32} : tensor<4x8xf32>
  return
}

// -----

func.func @norm_inf_epsilon(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'fff.rms_norm' op epsilon must be finite and non-negative, got INF}}
  %0 = fff.rms_norm %x {epsilon = 0x7F800000 : f32} : tensor<4x8xf32>
  return
}

// -----

func.func @norm_zero_normalized_rank(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'fff.layer_norm' op normalized_rank must be in [1, 2] (the input rank), got 0}}
  %0 = fff.layer_norm %x normalized_rank 0 : tensor<4x8xf32>
  return
}

// -----

func.func @norm_normalized_rank_too_large(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'fff.rms_norm' op normalized_rank must be in [1, 2] (the input rank), got 3}}
  %0 = fff.rms_norm %x normalized_rank 3 : tensor<4x8xf32>
  return
}

// -----

// With return_stats the check happens while inferring the stats' shape.
func.func @norm_normalized_rank_too_large_stats(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'fff.layer_norm' op normalized_rank must be in [1, 2] (the input rank), got 3}}
  %0:3 = fff.layer_norm %x normalized_rank 3 return_stats : tensor<4x8xf32>
  return
}

// -----

func.func @norm_rank0_input(%x: tensor<f32>) {
  // expected-error @+1 {{'fff.layer_norm' op normalized_rank must be in [1, 0] (the input rank), got 1}}
  %0 = fff.layer_norm %x : tensor<f32>
  return
}

// -----

func.func @norm_empty_row(%x: tensor<4x0xf32>) {
  // expected-error @+1 {{'fff.rms_norm' op input dim 1 (D) is 0, but must be at least 1: there is nothing to normalize over}}
  %0 = fff.rms_norm %x : tensor<4x0xf32>
  return
}

// -----

func.func @norm_scale_element_type(%x: tensor<4x8xf32>, %g: tensor<8xf16>) {
  // expected-error @+1 {{'fff.layer_norm' op scale element type 'f16' does not match input element type 'f32'}}
  %0 = fff.layer_norm %x scale(%g : tensor<8xf16>) : tensor<4x8xf32>
  return
}

// -----

func.func @norm_bias_element_type(%x: tensor<4x8xbf16>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'fff.layer_norm' op bias element type 'f32' does not match input element type 'bf16'}}
  %0 = fff.layer_norm %x bias(%b : tensor<8xf32>) : tensor<4x8xbf16>
  return
}

// -----

func.func @norm_scale_rank(%x: tensor<4x8xf32>, %g: tensor<4x8xf32>) {
  // expected-error @+1 {{'fff.rms_norm' op scale must have rank 1 (normalized_rank), got 2}}
  %0 = fff.rms_norm %x scale(%g : tensor<4x8xf32>) : tensor<4x8xf32>
  return
}

// -----

func.func @norm_scale_shape(%x: tensor<?x768xf32>, %g: tensor<512xf32>) {
  // expected-error @+1 {{'fff.layer_norm' op scale dim 0 (D) is 512, but input dim 1 requires 768}}
  %0 = fff.layer_norm %x scale(%g : tensor<512xf32>) : tensor<?x768xf32>
  return
}

// -----

func.func @norm_bias_shape_rank2(%x: tensor<2x3x4xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+1 {{'fff.layer_norm' op bias dim 1 (D1) is 5, but input dim 2 requires 4}}
  %0 = fff.layer_norm %x bias(%b : tensor<3x5xf32>) normalized_rank 2 : tensor<2x3x4xf32>
  return
}

// -----

func.func @norm_integer_input(%x: tensor<4x8xi32>) {
  // expected-error @+1 {{'fff.rms_norm' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4x8xi32>'}}
  %0 = "fff.rms_norm"(%x) : (tensor<4x8xi32>) -> tensor<4x8xi32>
  return
}

// -----

func.func @norm_f64_input(%x: tensor<4x8xf64>) {
  // expected-error @+1 {{'fff.layer_norm' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4x8xf64>'}}
  %0 = "fff.layer_norm"(%x) <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<4x8xf64>) -> tensor<4x8xf64>
  return
}

// -----

func.func @norm_result_type(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'fff.rms_norm' op failed to verify that all of {input, output} have same type}}
  %0 = "fff.rms_norm"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf16>
  return
}

// -----

func.func @layer_norm_result_type(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{'fff.layer_norm' op inferred type(s) 'tensor<4x8xf32>' are incompatible with return type(s) of operation 'tensor<4x8xbf16>'}}
  // expected-error @+1 {{'fff.layer_norm' op failed to infer returned types}}
  %0 = "fff.layer_norm"(%x) <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  return
}

// -----

func.func @layer_norm_stats_without_flag(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{'fff.layer_norm' op inferred type(s) 'tensor<4x8xf32>' are incompatible with return type(s) of operation 'tensor<4x8xf32>', 'tensor<4x1xf32>', 'tensor<4x1xf32>'}}
  // expected-error @+1 {{'fff.layer_norm' op failed to infer returned types}}
  %0:3 = "fff.layer_norm"(%x) <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  return
}

// -----

func.func @layer_norm_stats_shape(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{'fff.layer_norm' op inferred type(s) 'tensor<4x8xf32>', 'tensor<4x1xf32>', 'tensor<4x1xf32>' are incompatible with return type(s) of operation 'tensor<4x8xf32>', 'tensor<4xf32>', 'tensor<4xf32>'}}
  // expected-error @+1 {{'fff.layer_norm' op failed to infer returned types}}
  %0:3 = "fff.layer_norm"(%x) <{operandSegmentSizes = array<i32: 1, 0, 0>, return_stats}> : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @norm_unranked(%x: tensor<*xf32>) {
  // expected-error @+1 {{'fff.rms_norm' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<*xf32>'}}
  %0 = "fff.rms_norm"(%x) : (tensor<*xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @layer_norm_unranked_stats(%x: tensor<*xf32>) {
  // expected-error @+1 {{'fff.layer_norm' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<*xf32>'}}
  %0:3 = "fff.layer_norm"(%x) <{operandSegmentSizes = array<i32: 1, 0, 0>, return_stats}> : (tensor<*xf32>) -> (tensor<*xf32>, tensor<1xf32>, tensor<1xf32>)
  return
}

// -----

func.func @norm_unknown_keyword(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{expected ':'}}
  %0 = fff.rms_norm %x bias(%x : tensor<4x8xf32>) : tensor<4x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// layer_norm_grad / rms_norm_grad
//===----------------------------------------------------------------------===//

func.func @grad_stats_rank(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %m: tensor<4xf32>) {
  // expected-error @+1 {{'fff.layer_norm_grad' op mean must have the input's rank 2 (its leading dims, then ones), got 1}}
  %0 = fff.layer_norm_grad %dy, %x, %m, %m : tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @grad_stats_rows(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %m: tensor<5x1xf32>) {
  // expected-error @+1 {{'fff.layer_norm_grad' op mean dim 0 (R0) is 5, but input dim 0 requires 4}}
  %0 = fff.layer_norm_grad %dy, %x, %m, %m : tensor<4x8xf32>, tensor<5x1xf32>
  return
}

// -----

func.func @grad_stats_not_per_row(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %m: tensor<4x2xf32>) {
  // expected-error @+1 {{'fff.layer_norm_grad' op mean dim 1 (per-row) is 2, but a per-row statistic requires 1}}
  %0 = fff.layer_norm_grad %dy, %x, %m, %m : tensor<4x8xf32>, tensor<4x2xf32>
  return
}

// -----

func.func @grad_dy_type(%dy: tensor<4x8xf16>, %x: tensor<4x8xf32>, %m: tensor<4x1xf32>) {
  // expected-error @+1 {{'fff.layer_norm_grad' op failed to verify that all of {grad_output, input, grad_input} have same type}}
  %0 = "fff.layer_norm_grad"(%dy, %x, %m, %m) : (tensor<4x8xf16>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @grad_scale_extent(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %m: tensor<4x1xf32>, %g: tensor<7xf32>) {
  // expected-error @+1 {{'fff.layer_norm_grad' op scale dim 0 (D) is 7, but input dim 1 requires 8}}
  %0:2 = fff.layer_norm_grad %dy, %x, %m, %m scale(%g : tensor<7xf32>) : tensor<4x8xf32>, tensor<4x1xf32>
  return
}

// -----

func.func @grad_normalized_rank(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %m: tensor<4x1xf32>) {
  // expected-error @+1 {{'fff.layer_norm_grad' op normalized_rank must be in [1, 2] (the input rank), got 0}}
  %0:2 = fff.layer_norm_grad %dy, %x, %m, %m bias_grad normalized_rank 0 : tensor<4x8xf32>, tensor<4x1xf32>
  return
}

// -----

func.func @rms_grad_epsilon(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>) {
  // expected-error @+1 {{'fff.rms_norm_grad' op epsilon must be finite and non-negative, got -1}}
  %0 = fff.rms_norm_grad %dy, %x {epsilon = -1.0 : f32} : tensor<4x8xf32>
  return
}

// -----

func.func @rms_grad_rstd_type(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %r: tensor<4x1xf16>) {
  // expected-error @+1 {{'fff.rms_norm_grad' op operand #2 must be ranked tensor of 32-bit float values, but got 'tensor<4x1xf16>'}}
  %0 = fff.rms_norm_grad %dy, %x rstd(%r : tensor<4x1xf16>) : tensor<4x8xf32>
  return
}

// -----

func.func @rms_grad_scale_type(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %g: tensor<8xf16>) {
  // expected-error @+1 {{'fff.rms_norm_grad' op scale element type 'f16' does not match input element type 'f32'}}
  %0:2 = fff.rms_norm_grad %dy, %x scale(%g : tensor<8xf16>) : tensor<4x8xf32>
  return
}

// -----

func.func @rms_grad_empty_rows(%dy: tensor<4x0xf32>, %x: tensor<4x0xf32>) {
  // expected-error @+1 {{'fff.rms_norm_grad' op input dim 1 (D) is 0, but must be at least 1: there is nothing to normalize over}}
  %0 = fff.rms_norm_grad %dy, %x : tensor<4x0xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// tree_ffn_grad
//===----------------------------------------------------------------------===//

// -----

func.func @tree_grad_depth(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<1x3x8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn_grad' op depth must be in [0, 20], got 21}}
  %0:3 = fff.tree_ffn_grad %dy, %x, %w, %w {depth = 21 : i64} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>
  return
}

// -----

func.func @tree_grad_element_type(%dy: tensor<4x8xbf16>, %x: tensor<4x8xf32>, %w: tensor<1x3x8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn_grad' op grad_output element type 'bf16' does not match input element type 'f32'}}
  %0:3 = fff.tree_ffn_grad %dy, %x, %w, %w {depth = 1 : i64} : tensor<4x8xbf16>, tensor<4x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>
  return
}

// -----

func.func @tree_grad_rows(%dy: tensor<5x8xf32>, %x: tensor<4x8xf32>, %w: tensor<1x3x8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn_grad' op input dim 0 (B) is 4, but grad_output dim 0 requires 5}}
  %0:3 = fff.tree_ffn_grad %dy, %x, %w, %w {depth = 1 : i64} : tensor<5x8xf32>, tensor<4x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>
  return
}

// -----

func.func @tree_grad_output_width(%dy: tensor<4x6xf32>, %x: tensor<4x8xf32>, %w: tensor<1x3x8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn_grad' op w_out dim 2 (Dout) is 8, but grad_output dim 1 requires 6}}
  %0:3 = fff.tree_ffn_grad %dy, %x, %w, %w {depth = 1 : i64} : tensor<4x6xf32>, tensor<4x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>
  return
}

// -----

func.func @tree_grad_nodes(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<1x7x8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn_grad' op w_in dim 1 (N) is 7, but depth 1 (N = 2^(depth+1)-1) requires 3}}
  %0:3 = fff.tree_ffn_grad %dy, %x, %w, %w {depth = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<1x7x8xf32>, tensor<1x7x8xf32>
  return
}

// -----

func.func @tree_grad_bias_shape(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<1x3x8xf32>, %b: tensor<1x4xf32>) {
  // expected-error @+1 {{'fff.tree_ffn_grad' op b_in dim 1 (N) is 4, but depth 1 (N = 2^(depth+1)-1) requires 3}}
  %0:4 = fff.tree_ffn_grad %dy, %x, %w bias(%b : tensor<1x4xf32>), %w {depth = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// tree_ffn
//===----------------------------------------------------------------------===//

// -----

func.func @tree_depth_too_large(%x: tensor<4x8xf32>, %w: tensor<1x?x8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op depth must be in [0, 20], got 21}}
  %0 = fff.tree_ffn %x, %w, %w {depth = 21 : i64} : tensor<4x8xf32>, tensor<1x?x8xf32>, tensor<1x?x8xf32>
  return
}

// -----

func.func @tree_depth_negative(%x: tensor<4x8xf32>, %w: tensor<1x?x8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op depth must be in [0, 20], got -1}}
  %0 = fff.tree_ffn %x, %w, %w {depth = -1 : i64} : tensor<4x8xf32>, tensor<1x?x8xf32>, tensor<1x?x8xf32>
  return
}

// -----

func.func @tree_missing_depth(%x: tensor<4x8xf32>, %w: tensor<1x1x8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op requires attribute 'depth'}}
  %0 = fff.tree_ffn %x, %w, %w : tensor<4x8xf32>, tensor<1x1x8xf32>, tensor<1x1x8xf32>
  return
}

// -----

func.func @tree_node_count(%x: tensor<4x768xf32>, %w: tensor<1x7x768xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op w_in dim 1 (N) is 7, but depth 11 (N = 2^(depth+1)-1) requires 4095}}
  %0 = fff.tree_ffn %x, %w, %w {depth = 11 : i64} : tensor<4x768xf32>, tensor<1x7x768xf32>, tensor<1x7x768xf32>
  return
}

// -----

func.func @tree_input_width(%x: tensor<4x768xf32>, %w: tensor<1x3x512xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op w_in dim 2 (Din) is 512, but input dim 1 requires 768}}
  %0 = fff.tree_ffn %x, %w, %w {depth = 1 : i64} : tensor<4x768xf32>, tensor<1x3x512xf32>, tensor<1x3x512xf32>
  return
}

// -----

func.func @tree_tree_count(%x: tensor<4x8xf32>, %wi: tensor<2x3x8xf32>, %wo: tensor<3x3x8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op w_out dim 0 (K) is 3, but w_in dim 0 requires 2}}
  %0 = fff.tree_ffn %x, %wi, %wo {depth = 1 : i64} : tensor<4x8xf32>, tensor<2x3x8xf32>, tensor<3x3x8xf32>
  return
}

// -----

func.func @tree_out_nodes(%x: tensor<4x8xf32>, %wi: tensor<2x?x8xf32>, %wo: tensor<2x7x8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op w_out dim 1 (N) is 7, but depth 1 (N = 2^(depth+1)-1) requires 3}}
  %0 = fff.tree_ffn %x, %wi, %wo {depth = 1 : i64} : tensor<4x8xf32>, tensor<2x?x8xf32>, tensor<2x7x8xf32>
  return
}

// -----

func.func @tree_b_in_shape(%x: tensor<4x8xf32>, %w: tensor<2x3x8xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op b_in dim 1 (N) is 4, but depth 1 (N = 2^(depth+1)-1) requires 3}}
  %0 = fff.tree_ffn %x, %w bias(%b : tensor<2x4xf32>), %w {depth = 1 : i64} : tensor<4x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>
  return
}

// -----

func.func @tree_b_in_trees(%x: tensor<4x8xf32>, %w: tensor<2x3x8xf32>, %b: tensor<1x3xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op b_in dim 0 (K) is 1, but w_in dim 0 requires 2}}
  %0 = fff.tree_ffn %x, %w bias(%b : tensor<1x3xf32>), %w {depth = 1 : i64} : tensor<4x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>
  return
}

// -----

func.func @tree_b_out_shape(%x: tensor<4x8xf32>, %wi: tensor<1x3x8xf32>, %wo: tensor<1x3x16xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op b_out dim 0 (Dout) is 8, but w_out dim 2 requires 16}}
  %0 = fff.tree_ffn %x, %wi, %wo bias(%b : tensor<8xf32>) {depth = 1 : i64} : tensor<4x8xf32>, tensor<1x3x8xf32>, tensor<1x3x16xf32>
  return
}

// -----

func.func @tree_weight_element_type(%x: tensor<4x8xf32>, %wi: tensor<1x3x8xf16>, %wo: tensor<1x3x8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op w_in element type 'f16' does not match input element type 'f32'}}
  %0 = fff.tree_ffn %x, %wi, %wo {depth = 1 : i64} : tensor<4x8xf32>, tensor<1x3x8xf16>, tensor<1x3x8xf32>
  return
}

// -----

func.func @tree_bias_element_type(%x: tensor<4x8xbf16>, %w: tensor<1x3x8xbf16>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op b_out element type 'f32' does not match input element type 'bf16'}}
  %0 = fff.tree_ffn %x, %w, %w bias(%b : tensor<8xf32>) {depth = 1 : i64} : tensor<4x8xbf16>, tensor<1x3x8xbf16>, tensor<1x3x8xbf16>
  return
}

// -----

func.func @tree_input_rank(%x: tensor<2x4x8xf32>, %w: tensor<1x3x8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op expects a rank-2 input and rank-3 output weights to infer its result type}}
  %0 = fff.tree_ffn %x, %w, %w {depth = 1 : i64} : tensor<2x4x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>
  return
}

// -----

func.func @tree_w_in_rank(%x: tensor<4x8xf32>, %wi: tensor<3x8xf32>, %wo: tensor<1x3x8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op operand #1 must be 3D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<3x8xf32>'}}
  %0 = fff.tree_ffn %x, %wi, %wo {depth = 1 : i64} : tensor<4x8xf32>, tensor<3x8xf32>, tensor<1x3x8xf32>
  return
}

// -----

func.func @tree_result_type(%x: tensor<4x8xf32>, %w: tensor<1x3x8xf32>) {
  // expected-error @+2 {{'fff.tree_ffn' op inferred type(s) 'tensor<4x8xf32>' are incompatible with return type(s) of operation 'tensor<4x9xf32>'}}
  // expected-error @+1 {{'fff.tree_ffn' op failed to infer returned types}}
  %0 = "fff.tree_ffn"(%x, %w, %w) <{depth = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 0, 1, 0>}> : (tensor<4x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>) -> tensor<4x9xf32>
  return
}

// -----

func.func @tree_unknown_activation(%x: tensor<4x8xf32>, %w: tensor<1x3x8xf32>) {
  // expected-error @+2 {{expected ::fff::Activation to be one of: gelu, gelu_tanh, relu, silu, identity}}
  // expected-error @+1 {{failed to parse FFF_ActivationAttr parameter 'value'}}
  %0 = fff.tree_ffn %x, %w, %w {depth = 1 : i64, activation = #fff.activation<tanh>} : tensor<4x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>
  return
}

// -----

func.func @tree_activation_wrong_attr(%x: tensor<4x8xf32>, %w: tensor<1x3x8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op attribute 'activation' failed to satisfy constraint: activation function: gelu, gelu_tanh, relu, silu or identity}}
  %0 = fff.tree_ffn %x, %w, %w {depth = 1 : i64, activation = "relu"} : tensor<4x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>
  return
}

//===----------------------------------------------------------------------===//
// leaf_tree_ffn
//===----------------------------------------------------------------------===//

// -----

// Empty extents that make no sense for a tree layer (each crashed or read
// out of bounds in a kernel before the verifier rejected it).
func.func @tree_no_trees(%x: tensor<4x8xf32>, %w: tensor<0x3x8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op w_in dim 0 (K) is 0, but must be at least 1: a tree layer needs at least one tree}}
  %0 = fff.tree_ffn %x, %w, %w {depth = 1 : i64} : tensor<4x8xf32>, tensor<0x3x8xf32>, tensor<0x3x8xf32>
  return
}

// -----

func.func @tree_empty_input_row(%x: tensor<4x0xf32>, %wi: tensor<1x3x0xf32>, %wo: tensor<1x3x8xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op input dim 1 (Din) is 0, but must be at least 1: a tree layer needs an input row}}
  %0 = fff.tree_ffn %x, %wi, %wo {depth = 1 : i64} : tensor<4x0xf32>, tensor<1x3x0xf32>, tensor<1x3x8xf32>
  return
}

// -----

func.func @tree_empty_output_row(%x: tensor<?x8xf32>, %wi: tensor<1x3x8xf32>, %wo: tensor<1x3x0xf32>) {
  // expected-error @+1 {{'fff.tree_ffn' op w_out dim 2 (Dout) is 0, but must be at least 1: a tree layer needs an output row}}
  %0 = fff.tree_ffn %x, %wi, %wo {depth = 1 : i64} : tensor<?x8xf32>, tensor<1x3x8xf32>, tensor<1x3x0xf32>
  return
}

// -----

func.func @leaf_depth_zero(%x: tensor<4x8xf32>, %nw: tensor<0x8xf32>, %nb: tensor<0xf32>, %w1: tensor<1x8x2xf32>, %b1: tensor<1x2xf32>, %w2: tensor<1x2x8xf32>, %b2: tensor<1x8xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn' op depth must be in [1, 20], got 0}}
  %0 = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 0 : i64} : tensor<4x8xf32>, tensor<0x8xf32>, tensor<0xf32>, tensor<1x8x2xf32>, tensor<1x2xf32>, tensor<1x2x8xf32>, tensor<1x8xf32>
  return
}

// -----

func.func @leaf_routing_nodes(%x: tensor<4x8xf32>, %nw: tensor<3x8xf32>, %nb: tensor<3xf32>, %w1: tensor<8x8x2xf32>, %b1: tensor<8x2xf32>, %w2: tensor<8x2x8xf32>, %b2: tensor<8x8xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn' op node_w dim 0 (R) is 3, but depth 3 (R = 2^depth-1) requires 7}}
  %0 = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 3 : i64} : tensor<4x8xf32>, tensor<3x8xf32>, tensor<3xf32>, tensor<8x8x2xf32>, tensor<8x2xf32>, tensor<8x2x8xf32>, tensor<8x8xf32>
  return
}

// -----

func.func @leaf_routing_bias(%x: tensor<4x8xf32>, %nw: tensor<1x8xf32>, %nb: tensor<2xf32>, %w1: tensor<2x8x2xf32>, %b1: tensor<2x2xf32>, %w2: tensor<2x2x8xf32>, %b2: tensor<2x8xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn' op node_b dim 0 (R) is 2, but depth 1 (R = 2^depth-1) requires 1}}
  %0 = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 1 : i64} : tensor<4x8xf32>, tensor<1x8xf32>, tensor<2xf32>, tensor<2x8x2xf32>, tensor<2x2xf32>, tensor<2x2x8xf32>, tensor<2x8xf32>
  return
}

// -----

func.func @leaf_routing_width(%x: tensor<4x8xf32>, %nw: tensor<1x9xf32>, %nb: tensor<1xf32>, %w1: tensor<2x8x2xf32>, %b1: tensor<2x2xf32>, %w2: tensor<2x2x8xf32>, %b2: tensor<2x8xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn' op node_w dim 1 (Din) is 9, but input dim 1 requires 8}}
  %0 = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 1 : i64} : tensor<4x8xf32>, tensor<1x9xf32>, tensor<1xf32>, tensor<2x8x2xf32>, tensor<2x2xf32>, tensor<2x2x8xf32>, tensor<2x8xf32>
  return
}

// -----

func.func @leaf_leaf_count(%x: tensor<4x8xf32>, %nw: tensor<1x8xf32>, %nb: tensor<1xf32>, %w1: tensor<4x8x2xf32>, %b1: tensor<2x2xf32>, %w2: tensor<2x2x8xf32>, %b2: tensor<2x8xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn' op w1 dim 0 (L) is 4, but depth 1 (L = 2^depth) requires 2}}
  %0 = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 1 : i64} : tensor<4x8xf32>, tensor<1x8xf32>, tensor<1xf32>, tensor<4x8x2xf32>, tensor<2x2xf32>, tensor<2x2x8xf32>, tensor<2x8xf32>
  return
}

// -----

func.func @leaf_w1_input_width(%x: tensor<4x8xf32>, %nw: tensor<1x?xf32>, %nb: tensor<1xf32>, %w1: tensor<2x16x2xf32>, %b1: tensor<2x2xf32>, %w2: tensor<2x2x8xf32>, %b2: tensor<2x8xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn' op w1 dim 1 (Din) is 16, but input dim 1 requires 8}}
  %0 = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 1 : i64} : tensor<4x8xf32>, tensor<1x?xf32>, tensor<1xf32>, tensor<2x16x2xf32>, tensor<2x2xf32>, tensor<2x2x8xf32>, tensor<2x8xf32>
  return
}

// -----

func.func @leaf_hidden_width(%x: tensor<4x8xf32>, %nw: tensor<1x8xf32>, %nb: tensor<1xf32>, %w1: tensor<2x8x2xf32>, %b1: tensor<2x3xf32>, %w2: tensor<2x2x8xf32>, %b2: tensor<2x8xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn' op b1 dim 1 (W) is 3, but w1 dim 2 requires 2}}
  %0 = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 1 : i64} : tensor<4x8xf32>, tensor<1x8xf32>, tensor<1xf32>, tensor<2x8x2xf32>, tensor<2x3xf32>, tensor<2x2x8xf32>, tensor<2x8xf32>
  return
}

// -----

func.func @leaf_w2_width(%x: tensor<4x8xf32>, %nw: tensor<1x8xf32>, %nb: tensor<1xf32>, %w1: tensor<2x8x2xf32>, %b1: tensor<2x2xf32>, %w2: tensor<2x4x8xf32>, %b2: tensor<2x8xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn' op w2 dim 1 (W) is 4, but w1 dim 2 requires 2}}
  %0 = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 1 : i64} : tensor<4x8xf32>, tensor<1x8xf32>, tensor<1xf32>, tensor<2x8x2xf32>, tensor<2x2xf32>, tensor<2x4x8xf32>, tensor<2x8xf32>
  return
}

// -----

func.func @leaf_output_width(%x: tensor<4x8xf32>, %nw: tensor<1x8xf32>, %nb: tensor<1xf32>, %w1: tensor<2x8x2xf32>, %b1: tensor<2x2xf32>, %w2: tensor<2x2x8xf32>, %b2: tensor<2x5xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn' op b2 dim 1 (Dout) is 5, but w2 dim 2 requires 8}}
  %0 = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 1 : i64} : tensor<4x8xf32>, tensor<1x8xf32>, tensor<1xf32>, tensor<2x8x2xf32>, tensor<2x2xf32>, tensor<2x2x8xf32>, tensor<2x5xf32>
  return
}

// -----

func.func @leaf_element_type(%x: tensor<4x8xf16>, %nw: tensor<1x8xf16>, %nb: tensor<1xf16>, %w1: tensor<2x8x2xf16>, %b1: tensor<2x2xbf16>, %w2: tensor<2x2x8xf16>, %b2: tensor<2x8xf16>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn' op b1 element type 'bf16' does not match input element type 'f16'}}
  %0 = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 1 : i64} : tensor<4x8xf16>, tensor<1x8xf16>, tensor<1xf16>, tensor<2x8x2xf16>, tensor<2x2xbf16>, tensor<2x2x8xf16>, tensor<2x8xf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// leaf_tree_ffn_grad
//===----------------------------------------------------------------------===//

// -----

func.func @leaf_grad_depth(%dy: tensor<4x6xf32>, %x: tensor<4x8xf32>, %nw: tensor<0x8xf32>, %nb: tensor<0xf32>, %w1: tensor<1x8x2xf32>, %b1: tensor<1x2xf32>, %w2: tensor<1x2x6xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn_grad' op depth must be in [1, 20], got 0}}
  %0:5 = fff.leaf_tree_ffn_grad %dy, %x, %nw, %nb, %w1, %b1, %w2 {depth = 0 : i64} : tensor<4x6xf32>, tensor<4x8xf32>, tensor<0x8xf32>, tensor<0xf32>, tensor<1x8x2xf32>, tensor<1x2xf32>, tensor<1x2x6xf32>
  return
}

// -----

func.func @leaf_grad_element_type(%dy: tensor<4x6xbf16>, %x: tensor<4x8xf32>, %nw: tensor<1x8xf32>, %nb: tensor<1xf32>, %w1: tensor<2x8x2xf32>, %b1: tensor<2x2xf32>, %w2: tensor<2x2x6xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn_grad' op grad_output element type 'bf16' does not match input element type 'f32'}}
  %0:5 = fff.leaf_tree_ffn_grad %dy, %x, %nw, %nb, %w1, %b1, %w2 {depth = 1 : i64} : tensor<4x6xbf16>, tensor<4x8xf32>, tensor<1x8xf32>, tensor<1xf32>, tensor<2x8x2xf32>, tensor<2x2xf32>, tensor<2x2x6xf32>
  return
}

// -----

func.func @leaf_grad_rows(%dy: tensor<5x6xf32>, %x: tensor<4x8xf32>, %nw: tensor<1x8xf32>, %nb: tensor<1xf32>, %w1: tensor<2x8x2xf32>, %b1: tensor<2x2xf32>, %w2: tensor<2x2x6xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn_grad' op input dim 0 (B) is 4, but grad_output dim 0 requires 5}}
  %0:5 = fff.leaf_tree_ffn_grad %dy, %x, %nw, %nb, %w1, %b1, %w2 {depth = 1 : i64} : tensor<5x6xf32>, tensor<4x8xf32>, tensor<1x8xf32>, tensor<1xf32>, tensor<2x8x2xf32>, tensor<2x2xf32>, tensor<2x2x6xf32>
  return
}

// -----

func.func @leaf_grad_output_width(%dy: tensor<4x5xf32>, %x: tensor<4x8xf32>, %nw: tensor<1x8xf32>, %nb: tensor<1xf32>, %w1: tensor<2x8x2xf32>, %b1: tensor<2x2xf32>, %w2: tensor<2x2x6xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn_grad' op w2 dim 2 (Dout) is 6, but grad_output dim 1 requires 5}}
  %0:5 = fff.leaf_tree_ffn_grad %dy, %x, %nw, %nb, %w1, %b1, %w2 {depth = 1 : i64} : tensor<4x5xf32>, tensor<4x8xf32>, tensor<1x8xf32>, tensor<1xf32>, tensor<2x8x2xf32>, tensor<2x2xf32>, tensor<2x2x6xf32>
  return
}

// -----

func.func @leaf_grad_leaf_count(%dy: tensor<4x6xf32>, %x: tensor<4x8xf32>, %nw: tensor<3x8xf32>, %nb: tensor<3xf32>, %w1: tensor<2x8x2xf32>, %b1: tensor<2x2xf32>, %w2: tensor<2x2x6xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn_grad' op w1 dim 0 (L) is 2, but depth 2 (L = 2^depth) requires 4}}
  %0:5 = fff.leaf_tree_ffn_grad %dy, %x, %nw, %nb, %w1, %b1, %w2 {depth = 2 : i64} : tensor<4x6xf32>, tensor<4x8xf32>, tensor<3x8xf32>, tensor<3xf32>, tensor<2x8x2xf32>, tensor<2x2xf32>, tensor<2x2x6xf32>
  return
}

// -----

func.func @leaf_grad_hidden_width(%dy: tensor<4x6xf32>, %x: tensor<4x8xf32>, %nw: tensor<1x8xf32>, %nb: tensor<1xf32>, %w1: tensor<2x8x2xf32>, %b1: tensor<2x2xf32>, %w2: tensor<2x3x6xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn_grad' op w2 dim 1 (W) is 3, but w1 dim 2 requires 2}}
  %0:5 = fff.leaf_tree_ffn_grad %dy, %x, %nw, %nb, %w1, %b1, %w2 {depth = 1 : i64} : tensor<4x6xf32>, tensor<4x8xf32>, tensor<1x8xf32>, tensor<1xf32>, tensor<2x8x2xf32>, tensor<2x2xf32>, tensor<2x3x6xf32>
  return
}

// -----

func.func @leaf_w2_rank(%x: tensor<4x8xf32>, %nw: tensor<1x8xf32>, %nb: tensor<1xf32>, %w1: tensor<2x8x2xf32>, %b1: tensor<2x2xf32>, %w2: tensor<2x8xf32>, %b2: tensor<2x8xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn' op expects a rank-2 input and rank-3 output weights to infer its result type}}
  %0 = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 1 : i64} : tensor<4x8xf32>, tensor<1x8xf32>, tensor<1xf32>, tensor<2x8x2xf32>, tensor<2x2xf32>, tensor<2x8xf32>, tensor<2x8xf32>
  return
}

// -----

func.func @leaf_node_b_rank(%x: tensor<4x8xf32>, %nw: tensor<1x8xf32>, %nb: tensor<1x1xf32>, %w1: tensor<2x8x2xf32>, %b1: tensor<2x2xf32>, %w2: tensor<2x2x8xf32>, %b2: tensor<2x8xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn' op operand #2 must be 1D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<1x1xf32>'}}
  %0 = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 1 : i64} : tensor<4x8xf32>, tensor<1x8xf32>, tensor<1x1xf32>, tensor<2x8x2xf32>, tensor<2x2xf32>, tensor<2x2x8xf32>, tensor<2x8xf32>
  return
}

//===----------------------------------------------------------------------===//
// fusion
//===----------------------------------------------------------------------===//

// -----

func.func @fusion_without_norm(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'fff.fusion' op must contain exactly one layer_norm, rms_norm, layer_norm_grad or rms_norm_grad, found 0}}
  %0 = fff.fusion ins(%x : tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %s = arith.addf %a, %a : tensor<4x8xf32>
    fff.yield %s : tensor<4x8xf32>
  } -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @fusion_two_norms(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'fff.fusion' op must contain exactly one layer_norm, rms_norm, layer_norm_grad or rms_norm_grad, found 2}}
  %0 = fff.fusion ins(%x : tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %n = fff.rms_norm %a : tensor<4x8xf32>
    %m = fff.layer_norm %n : tensor<4x8xf32>
    fff.yield %m : tensor<4x8xf32>
  } -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @fusion_yield_types(%x: tensor<4x8xf32>) -> tensor<4x8xf16> {
  // expected-error @+1 {{'fff.fusion' op yields 'tensor<4x8xf32>' but its results are 'tensor<4x8xf16>'}}
  %0 = fff.fusion ins(%x : tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %n = fff.rms_norm %a : tensor<4x8xf32>
    fff.yield %n : tensor<4x8xf32>
  } -> tensor<4x8xf16>
  return %0 : tensor<4x8xf16>
}

// -----

func.func @fusion_block_arguments(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'fff.fusion' op block arguments must have the types of the inputs}}
  %0 = fff.fusion ins(%x : tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x8xf16>):
    %n = fff.rms_norm %a : tensor<4x8xf16>
    %w = arith.extf %n : tensor<4x8xf16> to tensor<4x8xf32>
    fff.yield %w : tensor<4x8xf32>
  } -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @fusion_two_trees(%x: tensor<4x8xf32>, %w: tensor<1x3x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'fff.fusion' op may contain at most one tree layer, found 2}}
  %0 = fff.fusion ins(%x, %w : tensor<4x8xf32>, tensor<1x3x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<1x3x8xf32>):
    %n = fff.rms_norm %a : tensor<4x8xf32>
    %t = fff.tree_ffn %n, %b, %b {depth = 1 : i64} : tensor<4x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>
    %u = fff.tree_ffn %t, %b, %b {depth = 1 : i64} : tensor<4x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>
    fff.yield %u : tensor<4x8xf32>
  } -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @fusion_backward_with_tree(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<1x3x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'fff.fusion' op holds a norm backward and a tree layer: a backward unit holds one norm backward and pointwise ops}}
  %0 = fff.fusion ins(%dy, %x, %w : tensor<4x8xf32>, tensor<4x8xf32>, tensor<1x3x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %c: tensor<1x3x8xf32>):
    %dx = fff.rms_norm_grad %a, %b : tensor<4x8xf32>
    %t = fff.tree_ffn %dx, %c, %c {depth = 1 : i64} : tensor<4x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>
    fff.yield %t : tensor<4x8xf32>
  } -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @fusion_unrelated_tree(%x: tensor<4x8xf32>, %w: tensor<1x3x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'fff.fusion' op holds a tree layer and a norm neither of which reads the other}}
  %0 = fff.fusion ins(%x, %w : tensor<4x8xf32>, tensor<1x3x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<1x3x8xf32>):
    %n = fff.rms_norm %a : tensor<4x8xf32>
    %t = fff.tree_ffn %a, %b, %b {depth = 1 : i64} : tensor<4x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>
    %s = arith.addf %n, %t : tensor<4x8xf32>
    fff.yield %s : tensor<4x8xf32>
  } -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @fusion_nested(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = fff.fusion ins(%x : tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %n = fff.rms_norm %a : tensor<4x8xf32>
    // expected-error @+1 {{'fff.fusion' op cannot be part of a fused norm unit}}
    %m = fff.fusion ins(%n : tensor<4x8xf32>) {
    ^bb0(%b: tensor<4x8xf32>):
      %r = fff.rms_norm %b : tensor<4x8xf32>
      fff.yield %r : tensor<4x8xf32>
    } -> tensor<4x8xf32>
    fff.yield %m : tensor<4x8xf32>
  } -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @fusion_captures(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-note @+1 {{required by region isolation constraints}}
  %0 = fff.fusion ins(%x : tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    // expected-error @+1 {{using value defined outside the region}}
    %s = arith.addf %a, %y : tensor<4x8xf32>
    %n = fff.rms_norm %s : tensor<4x8xf32>
    fff.yield %n : tensor<4x8xf32>
  } -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @leaf_zero_width(%x: tensor<4x8xf32>, %nw: tensor<1x8xf32>, %nb: tensor<1xf32>, %w1: tensor<2x8x0xf32>, %b1: tensor<2x0xf32>, %w2: tensor<2x0x8xf32>, %b2: tensor<2x8xf32>) {
  // expected-error @+1 {{'fff.leaf_tree_ffn' op w1 dim 2 (W) is 0, but must be at least 1: a leaf needs at least one hidden unit}}
  %0 = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 1 : i64} : tensor<4x8xf32>, tensor<1x8xf32>, tensor<1xf32>, tensor<2x8x0xf32>, tensor<2x0xf32>, tensor<2x0x8xf32>, tensor<2x8xf32>
  return
}

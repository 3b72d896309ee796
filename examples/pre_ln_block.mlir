// A pre-LN transformer block whose feedforward sublayers are fast feedforward
// layers, written directly in the fff dialect. It uses all four fff ops:
//
//   h1 = x  + tree_ffn(layer_norm(x))        UltraFastBERT-1x11 feedforward
//   y  = h1 + leaf_tree_ffn(rms_norm(h1))    original FFF with 8 MLP leaves
//
// The batch (token) dimension is dynamic.
func.func @pre_ln_block(
    %x: tensor<?x768xf32>,
    %ln_gamma: tensor<768xf32>, %ln_beta: tensor<768xf32>,
    %w_in: tensor<1x4095x768xf32>, %b_in: tensor<1x4095xf32>,
    %w_out: tensor<1x4095x768xf32>, %b_out: tensor<768xf32>,
    %rms_gamma: tensor<768xf32>,
    %node_w: tensor<7x768xf32>, %node_b: tensor<7xf32>,
    %w1: tensor<8x768x32xf32>, %b1: tensor<8x32xf32>,
    %w2: tensor<8x32x768xf32>, %b2: tensor<8x768xf32>) -> tensor<?x768xf32> {
  %ln = fff.layer_norm %x scale(%ln_gamma : tensor<768xf32>)
          bias(%ln_beta : tensor<768xf32>) {epsilon = 1.0e-12 : f32}
          : tensor<?x768xf32>
  %ffn = fff.tree_ffn %ln, %w_in bias(%b_in : tensor<1x4095xf32>),
           %w_out bias(%b_out : tensor<768xf32>) {depth = 11 : i64}
           : tensor<?x768xf32>, tensor<1x4095x768xf32>, tensor<1x4095x768xf32>
  %h1 = arith.addf %x, %ffn : tensor<?x768xf32>

  %rms = fff.rms_norm %h1 scale(%rms_gamma : tensor<768xf32>)
           {epsilon = 1.0e-06 : f32} : tensor<?x768xf32>
  %leaf = fff.leaf_tree_ffn %rms, %node_w, %node_b, %w1, %b1, %w2, %b2
            {depth = 3 : i64, activation = #fff.activation<gelu>}
            : tensor<?x768xf32>, tensor<7x768xf32>, tensor<7xf32>,
              tensor<8x768x32xf32>, tensor<8x32xf32>, tensor<8x32x768xf32>,
              tensor<8x768xf32>
  %y = arith.addf %h1, %leaf : tensor<?x768xf32>
  return %y : tensor<?x768xf32>
}

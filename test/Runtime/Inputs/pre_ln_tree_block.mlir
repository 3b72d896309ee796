// A pre-LN block with a tree layer, for the CPU AOT library test.
func.func @block(%x: tensor<?x64xf32>, %g: tensor<64xf32>, %wi: tensor<1x15x64xf32>, %wo: tensor<1x15x64xf32>) -> tensor<?x64xf32> {
  %n = fff.layer_norm %x scale(%g : tensor<64xf32>) : tensor<?x64xf32>
  %t = fff.tree_ffn %n, %wi, %wo {depth = 3 : i64} : tensor<?x64xf32>, tensor<1x15x64xf32>, tensor<1x15x64xf32>
  %y = arith.addf %x, %t : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

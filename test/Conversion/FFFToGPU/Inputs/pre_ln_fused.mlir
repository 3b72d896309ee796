// A pre-LN step: residual add, LayerNorm, then a per-column shift and ReLU
// in a linalg.generic; the sum is also returned.
func.func @pre_ln(%x: tensor<?x768xbf16>, %res: tensor<?x768xbf16>, %g: tensor<768xbf16>, %b: tensor<768xbf16>, %shift: tensor<768xbf16>) -> (tensor<?x768xbf16>, tensor<?x768xbf16>) {
  %s = arith.addf %x, %res : tensor<?x768xbf16>
  %n = fff.layer_norm %s scale(%g : tensor<768xbf16>) bias(%b : tensor<768xbf16>) : tensor<?x768xbf16>
  %c0 = arith.constant 0 : index
  %d = tensor.dim %x, %c0 : tensor<?x768xbf16>
  %e = tensor.empty(%d) : tensor<?x768xbf16>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%n, %shift : tensor<?x768xbf16>, tensor<768xbf16>) outs(%e : tensor<?x768xbf16>) {
  ^bb0(%a: bf16, %sh: bf16, %o: bf16):
    %af = arith.extf %a : bf16 to f32
    %sf = arith.extf %sh : bf16 to f32
    %one = arith.constant 1.0 : f32
    %t = arith.addf %af, %sf : f32
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %t, %zero : f32
    %rb = arith.truncf %r : f32 to bf16
    linalg.yield %rb : bf16
  } -> tensor<?x768xbf16>
  return %s, %y : tensor<?x768xbf16>, tensor<?x768xbf16>
}

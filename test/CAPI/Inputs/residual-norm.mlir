// A residual add that fff-fuse-norms puts in one unit with the norm.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @residual_rms_norm(%x: tensor<?x64xf32>, %a: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %a : tensor<?x64xf32>, tensor<?x64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<?x64xf32>
  %y = fff.rms_norm %h : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

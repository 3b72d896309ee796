// Exported by export.py with torch 2.15.0+cu132, transformers 5.24.0 and torch-mlir (linalg-on-tensors). Do not edit; rerun the script.
#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#map2 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func @t5_layer_norm(%arg0: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
    %c2_i64 = arith.constant 2 : i64
    %c1 = arith.constant 1 : index
    %c0 = arith.constant 0 : index
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant dense_resource<torch_tensor_64_torch.float32> : tensor<64xf32>
    %cst_1 = arith.constant 9.9999999999999995E-7 : f64
    %cst_2 = arith.constant 6.400000e+01 : f32
    %dim = tensor.dim %arg0, %c0 : tensor<?x?x64xf32>
    %dim_3 = tensor.dim %arg0, %c1 : tensor<?x?x64xf32>
    %0 = tensor.empty(%dim, %dim_3) : tensor<?x?x64xf32>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0 : tensor<?x?x64xf32>) outs(%0 : tensor<?x?x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %10 = math.fpowi %in, %c2_i64 : f32, i64
      linalg.yield %10 : f32
    } -> tensor<?x?x64xf32>
    %2 = tensor.empty(%dim, %dim_3) : tensor<?x?x1xf32>
    %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
    %4 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "reduction"]} ins(%1 : tensor<?x?x64xf32>) outs(%3 : tensor<?x?x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %10 = arith.addf %in, %out : f32
      linalg.yield %10 : f32
    } -> tensor<?x?x1xf32>
    %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%4 : tensor<?x?x1xf32>) outs(%2 : tensor<?x?x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %10 = arith.divf %in, %cst_2 : f32
      linalg.yield %10 : f32
    } -> tensor<?x?x1xf32>
    %6 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%5 : tensor<?x?x1xf32>) outs(%2 : tensor<?x?x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %10 = arith.truncf %cst_1 : f64 to f32
      %11 = arith.addf %in, %10 : f32
      linalg.yield %11 : f32
    } -> tensor<?x?x1xf32>
    %7 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%6 : tensor<?x?x1xf32>) outs(%2 : tensor<?x?x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %10 = math.rsqrt %in : f32
      linalg.yield %10 : f32
    } -> tensor<?x?x1xf32>
    %8 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0, %7 : tensor<?x?x64xf32>, tensor<?x?x1xf32>) outs(%0 : tensor<?x?x64xf32>) {
    ^bb0(%in: f32, %in_4: f32, %out: f32):
      %10 = arith.mulf %in, %in_4 : f32
      linalg.yield %10 : f32
    } -> tensor<?x?x64xf32>
    %9 = linalg.generic {indexing_maps = [#map2, #map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%cst_0, %8 : tensor<64xf32>, tensor<?x?x64xf32>) outs(%0 : tensor<?x?x64xf32>) {
    ^bb0(%in: f32, %in_4: f32, %out: f32):
      %10 = arith.mulf %in, %in_4 : f32
      linalg.yield %10 : f32
    } -> tensor<?x?x64xf32>
    return %9 : tensor<?x?x64xf32>
  }
}

{-#
  dialect_resources: {
    builtin: {
      torch_tensor_64_torch.float32: "0x0400000034C09B3F5C62F53FBFFD563F9EDCDE3F3373743FD6C95B3FA1D9BB3F86DCCB3FA891903F6C351D3E76B8D03FC39A9C3FB51E713FAA27403FCC89573FC888473F2469C43FE69FE43FD246F03E0A0CAB3F12E67E3F1C84B43FB7B0AC3F1BAA7A3FAE2E283FEB43A83FC0FCC83E8861CE3EE83FFA3F28F7BE3F9E52EF3FC366873FD739AE3F3CE5663F2C11D73F34CE7C3EA4FCF73E2E13BB3E86D41C409D3DA33F5C64883F0708853F14D66D3F16926D3F9453B43F90C2253FF1926C3F6263573F905F763F5EDA013FA9ABB43F44A15E3F8256473F5A9EC23F7C2DBC3F44AFDB3F5943573F11AC703FE0D993BDE624113F00D531BE8D024D3F1D4EB93F5F91403F"
    }
  }
#-}

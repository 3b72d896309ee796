// Exported by export.py with torch 2.15.0+cu132, transformers 5.24.0 and torch-mlir (linalg-on-tensors). Do not edit; rerun the script.
#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#map2 = affine_map<(d0) -> (d0)>
#map3 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func @gemma_rms_norm_f32(%arg0: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
    %c2_i64 = arith.constant 2 : i64
    %c1 = arith.constant 1 : index
    %c0 = arith.constant 0 : index
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant dense_resource<torch_tensor_64_torch.float32> : tensor<64xf32>
    %cst_1 = arith.constant 9.9999999999999995E-7 : f64
    %cst_2 = arith.constant 6.400000e+01 : f32
    %cst_3 = arith.constant 1.000000e+00 : f32
    %dim = tensor.dim %arg0, %c0 : tensor<?x?x64xf32>
    %dim_4 = tensor.dim %arg0, %c1 : tensor<?x?x64xf32>
    %0 = tensor.empty(%dim, %dim_4) : tensor<?x?x64xf32>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0 : tensor<?x?x64xf32>) outs(%0 : tensor<?x?x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %12 = math.fpowi %in, %c2_i64 : f32, i64
      linalg.yield %12 : f32
    } -> tensor<?x?x64xf32>
    %2 = tensor.empty(%dim, %dim_4) : tensor<?x?x1xf32>
    %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
    %4 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "reduction"]} ins(%1 : tensor<?x?x64xf32>) outs(%3 : tensor<?x?x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %12 = arith.addf %in, %out : f32
      linalg.yield %12 : f32
    } -> tensor<?x?x1xf32>
    %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%4 : tensor<?x?x1xf32>) outs(%2 : tensor<?x?x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %12 = arith.divf %in, %cst_2 : f32
      linalg.yield %12 : f32
    } -> tensor<?x?x1xf32>
    %6 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%5 : tensor<?x?x1xf32>) outs(%2 : tensor<?x?x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %12 = arith.truncf %cst_1 : f64 to f32
      %13 = arith.addf %in, %12 : f32
      linalg.yield %13 : f32
    } -> tensor<?x?x1xf32>
    %7 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%6 : tensor<?x?x1xf32>) outs(%2 : tensor<?x?x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %12 = math.rsqrt %in : f32
      linalg.yield %12 : f32
    } -> tensor<?x?x1xf32>
    %8 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0, %7 : tensor<?x?x64xf32>, tensor<?x?x1xf32>) outs(%0 : tensor<?x?x64xf32>) {
    ^bb0(%in: f32, %in_5: f32, %out: f32):
      %12 = arith.mulf %in, %in_5 : f32
      linalg.yield %12 : f32
    } -> tensor<?x?x64xf32>
    %9 = tensor.empty() : tensor<64xf32>
    %10 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel"]} ins(%cst_0 : tensor<64xf32>) outs(%9 : tensor<64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %12 = arith.addf %in, %cst_3 : f32
      linalg.yield %12 : f32
    } -> tensor<64xf32>
    %11 = linalg.generic {indexing_maps = [#map, #map3, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%8, %10 : tensor<?x?x64xf32>, tensor<64xf32>) outs(%0 : tensor<?x?x64xf32>) {
    ^bb0(%in: f32, %in_5: f32, %out: f32):
      %12 = arith.mulf %in, %in_5 : f32
      linalg.yield %12 : f32
    } -> tensor<?x?x64xf32>
    return %11 : tensor<?x?x64xf32>
  }
}

{-#
  dialect_resources: {
    builtin: {
      torch_tensor_64_torch.float32: "0x0400000037A8F43D5132443F7DAF783FD989953DF39B443E08D8A0BEFF7237BED272433C6DC1C7BE9B5749BD847CABBE83FAFEBD47BB0DBEF82F94BF6A6828BF5779EEBD87CC3A3EE27866BF6608C53DD9758D3E1B80FF3DAAE0BC3E95B095BE2BCECC3E15E8CCBEFCED05BEB8FE813E1E4069BEC07B07BF71F2E7BDB21558BE2EC8033F91F38DBE706E6F3F378D89BE506587BF6D8ED53ECB8E923FB186E03E7CCF86BFE7358D3E3FCD623F48FC98BE570E7E3DFB4D17BD45E02BBF602693BDF0CF383F311659BFF568F93EF0469B3F27CF6A3FE195073FF07610BEAF4B0FBD75C63E3ECCCB333F451981BFB008193F00E4B6BE68BCCF3EA6FE223EB15487BDF2B5BB3E"
    }
  }
#-}

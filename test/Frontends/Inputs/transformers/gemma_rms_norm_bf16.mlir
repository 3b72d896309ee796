// Exported by export.py with torch 2.15.0+cu132, transformers 5.24.0 and torch-mlir (linalg-on-tensors). Do not edit; rerun the script.
#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#map2 = affine_map<(d0) -> (d0)>
#map3 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func @gemma_rms_norm_bf16(%arg0: tensor<?x?x64xbf16>) -> tensor<?x?x64xbf16> {
    %c2_i64 = arith.constant 2 : i64
    %c1 = arith.constant 1 : index
    %c0 = arith.constant 0 : index
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant dense_resource<torch_tensor_64_torch.bfloat16> : tensor<64xbf16>
    %cst_1 = arith.constant 9.9999999999999995E-7 : f64
    %cst_2 = arith.constant 6.400000e+01 : f32
    %cst_3 = arith.constant 1.000000e+00 : f32
    %dim = tensor.dim %arg0, %c0 : tensor<?x?x64xbf16>
    %dim_4 = tensor.dim %arg0, %c1 : tensor<?x?x64xbf16>
    %0 = tensor.empty(%dim, %dim_4) : tensor<?x?x64xf32>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0 : tensor<?x?x64xbf16>) outs(%0 : tensor<?x?x64xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %16 = arith.extf %in : bf16 to f32
      linalg.yield %16 : f32
    } -> tensor<?x?x64xf32>
    %2 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%1 : tensor<?x?x64xf32>) outs(%0 : tensor<?x?x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %16 = math.fpowi %in, %c2_i64 : f32, i64
      linalg.yield %16 : f32
    } -> tensor<?x?x64xf32>
    %3 = tensor.empty(%dim, %dim_4) : tensor<?x?x1xf32>
    %4 = linalg.fill ins(%cst : f32) outs(%3 : tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
    %5 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "reduction"]} ins(%2 : tensor<?x?x64xf32>) outs(%4 : tensor<?x?x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %16 = arith.addf %in, %out : f32
      linalg.yield %16 : f32
    } -> tensor<?x?x1xf32>
    %6 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%5 : tensor<?x?x1xf32>) outs(%3 : tensor<?x?x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %16 = arith.divf %in, %cst_2 : f32
      linalg.yield %16 : f32
    } -> tensor<?x?x1xf32>
    %7 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%6 : tensor<?x?x1xf32>) outs(%3 : tensor<?x?x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %16 = arith.truncf %cst_1 : f64 to f32
      %17 = arith.addf %in, %16 : f32
      linalg.yield %17 : f32
    } -> tensor<?x?x1xf32>
    %8 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%7 : tensor<?x?x1xf32>) outs(%3 : tensor<?x?x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %16 = math.rsqrt %in : f32
      linalg.yield %16 : f32
    } -> tensor<?x?x1xf32>
    %9 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%1, %8 : tensor<?x?x64xf32>, tensor<?x?x1xf32>) outs(%0 : tensor<?x?x64xf32>) {
    ^bb0(%in: f32, %in_5: f32, %out: f32):
      %16 = arith.mulf %in, %in_5 : f32
      linalg.yield %16 : f32
    } -> tensor<?x?x64xf32>
    %10 = tensor.empty() : tensor<64xf32>
    %11 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel"]} ins(%cst_0 : tensor<64xbf16>) outs(%10 : tensor<64xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %16 = arith.extf %in : bf16 to f32
      linalg.yield %16 : f32
    } -> tensor<64xf32>
    %12 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel"]} ins(%11 : tensor<64xf32>) outs(%10 : tensor<64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %16 = arith.addf %in, %cst_3 : f32
      linalg.yield %16 : f32
    } -> tensor<64xf32>
    %13 = linalg.generic {indexing_maps = [#map, #map3, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%9, %12 : tensor<?x?x64xf32>, tensor<64xf32>) outs(%0 : tensor<?x?x64xf32>) {
    ^bb0(%in: f32, %in_5: f32, %out: f32):
      %16 = arith.mulf %in, %in_5 : f32
      linalg.yield %16 : f32
    } -> tensor<?x?x64xf32>
    %14 = tensor.empty(%dim, %dim_4) : tensor<?x?x64xbf16>
    %15 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%13 : tensor<?x?x64xf32>) outs(%14 : tensor<?x?x64xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %16 = arith.truncf %in : f32 to bf16
      linalg.yield %16 : bf16
    } -> tensor<?x?x64xbf16>
    return %15 : tensor<?x?x64xbf16>
  }
}

{-#
  dialect_resources: {
    builtin: {
      torch_tensor_64_torch.bfloat16: "0x0200000005BFADBEFBBB1BBEBB3DCE3EC1BE50BF2B3FA93F813E123F693ED63E95BF0B3F04BF223E253F9BBED83EC63E153E753E103F243D45BEF63DC4BE313F3BBF94BDAF3F0DBF75BF9BBD293FDA3D773E2C3CC13D4B3FB03EF4BEA8BFF3BE58BEF33DFE3DA2BE8BBF60BF10BED13E083F7D3E9B3F78BEE53DD7BE2A3F1B3FFFBE8A3D"
    }
  }
#-}

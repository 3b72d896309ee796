// RUN: fff-opt %s --fff-raise-norms | FileCheck %s

// A norm of another norm's result, times 2 (torch-mlir's form of
// `F.rms_norm(F.rms_norm(x, (48,), w) * 2, (48,), w)`). Decomposed, the
// outer norm's input reads as more factors than a match looks through;
// once the inner norm is raised, the next round of raising takes the outer.
// CHECK-LABEL: func.func @forward
// CHECK:         %[[INNER:.*]] = fff.rms_norm %arg0 scale(%arg1 : tensor<48xf32>) {epsilon = 1.1920929E-7 : f32}
// CHECK:         %[[TWICE:.*]] = linalg.generic
// CHECK-SAME:      ins(%[[INNER]] :
// CHECK:         %[[OUTER:.*]] = fff.rms_norm %[[TWICE]] scale(%arg1 : tensor<48xf32>) {epsilon = 1.1920929E-7 : f32}
// CHECK:         return %[[OUTER]]
#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#map2 = affine_map<(d0, d1, d2) -> (d2)>

  func.func @forward(%arg0: tensor<3x5x48xf32>, %arg1: tensor<48xf32>) -> tensor<3x5x48xf32> {
    %c2_i64 = arith.constant 2 : i64
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 4.800000e+01 : f32
    %cst_1 = arith.constant 1.1920929E-7 : f32
    %cst_2 = arith.constant 2.000000e+00 : f32
    %0 = tensor.empty() : tensor<3x5x48xf32>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0 : tensor<3x5x48xf32>) outs(%0 : tensor<3x5x48xf32>) {
    ^bb0(%in: f32, %out: f32):
      %18 = math.fpowi %in, %c2_i64 : f32, i64
      linalg.yield %18 : f32
    } -> tensor<3x5x48xf32>
    %2 = tensor.empty() : tensor<3x5x1xf32>
    %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<3x5x1xf32>) -> tensor<3x5x1xf32>
    %4 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "reduction"]} ins(%1 : tensor<3x5x48xf32>) outs(%3 : tensor<3x5x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %18 = arith.addf %in, %out : f32
      linalg.yield %18 : f32
    } -> tensor<3x5x1xf32>
    %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%4 : tensor<3x5x1xf32>) outs(%2 : tensor<3x5x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %18 = arith.divf %in, %cst_0 : f32
      linalg.yield %18 : f32
    } -> tensor<3x5x1xf32>
    %6 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%5 : tensor<3x5x1xf32>) outs(%2 : tensor<3x5x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %18 = arith.addf %in, %cst_1 : f32
      linalg.yield %18 : f32
    } -> tensor<3x5x1xf32>
    %7 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%6 : tensor<3x5x1xf32>) outs(%2 : tensor<3x5x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %18 = math.rsqrt %in : f32
      linalg.yield %18 : f32
    } -> tensor<3x5x1xf32>
    %8 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0, %7 : tensor<3x5x48xf32>, tensor<3x5x1xf32>) outs(%0 : tensor<3x5x48xf32>) {
    ^bb0(%in: f32, %in_3: f32, %out: f32):
      %18 = arith.mulf %in, %in_3 : f32
      linalg.yield %18 : f32
    } -> tensor<3x5x48xf32>
    %9 = linalg.generic {indexing_maps = [#map, #map2, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%8, %arg1 : tensor<3x5x48xf32>, tensor<48xf32>) outs(%0 : tensor<3x5x48xf32>) {
    ^bb0(%in: f32, %in_3: f32, %out: f32):
      %18 = arith.mulf %in, %in_3 : f32
      linalg.yield %18 : f32
    } -> tensor<3x5x48xf32>
    %10 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%9 : tensor<3x5x48xf32>) outs(%0 : tensor<3x5x48xf32>) {
    ^bb0(%in: f32, %out: f32):
      %18 = arith.mulf %in, %cst_2 : f32
      linalg.yield %18 : f32
    } -> tensor<3x5x48xf32>
    %11 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%10 : tensor<3x5x48xf32>) outs(%0 : tensor<3x5x48xf32>) {
    ^bb0(%in: f32, %out: f32):
      %18 = math.fpowi %in, %c2_i64 : f32, i64
      linalg.yield %18 : f32
    } -> tensor<3x5x48xf32>
    %12 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "reduction"]} ins(%11 : tensor<3x5x48xf32>) outs(%3 : tensor<3x5x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %18 = arith.addf %in, %out : f32
      linalg.yield %18 : f32
    } -> tensor<3x5x1xf32>
    %13 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%12 : tensor<3x5x1xf32>) outs(%2 : tensor<3x5x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %18 = arith.divf %in, %cst_0 : f32
      linalg.yield %18 : f32
    } -> tensor<3x5x1xf32>
    %14 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%13 : tensor<3x5x1xf32>) outs(%2 : tensor<3x5x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %18 = arith.addf %in, %cst_1 : f32
      linalg.yield %18 : f32
    } -> tensor<3x5x1xf32>
    %15 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%14 : tensor<3x5x1xf32>) outs(%2 : tensor<3x5x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %18 = math.rsqrt %in : f32
      linalg.yield %18 : f32
    } -> tensor<3x5x1xf32>
    %16 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%10, %15 : tensor<3x5x48xf32>, tensor<3x5x1xf32>) outs(%0 : tensor<3x5x48xf32>) {
    ^bb0(%in: f32, %in_3: f32, %out: f32):
      %18 = arith.mulf %in, %in_3 : f32
      linalg.yield %18 : f32
    } -> tensor<3x5x48xf32>
    %17 = linalg.generic {indexing_maps = [#map, #map2, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%16, %arg1 : tensor<3x5x48xf32>, tensor<48xf32>) outs(%0 : tensor<3x5x48xf32>) {
    ^bb0(%in: f32, %in_3: f32, %out: f32):
      %18 = arith.mulf %in, %in_3 : f32
      linalg.yield %18 : f32
    } -> tensor<3x5x48xf32>
    return %17 : tensor<3x5x48xf32>
  }

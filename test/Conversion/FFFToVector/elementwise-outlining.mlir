// RUN: fff-opt %s --convert-elementwise-to-vector=vector-bits=512 | FileCheck %s

// Each kind of elementwise op is lowered once, in a private function its
// ops call: two layers' identical GELU-scaled adds share one function,
// whose payload's captured constant it holds and whose captured scalar
// (not a constant) it takes after the op's operands; an add of another
// type is another kind.
// CHECK-LABEL: func.func @two_layers
// CHECK-SAME:    (%[[X:.*]]: tensor<?x64xf32>, %[[Y:.*]]: tensor<?x64xf32>, %[[S:.*]]: f32, %[[H:.*]]: tensor<?x64xbf16>)
// CHECK:         %[[A:.*]] = call @fff_elementwise(%[[X]], %[[Y]], %{{.*}}, %[[S]])
// CHECK:         %[[B:.*]] = call @fff_elementwise(%[[A]], %[[Y]], %{{.*}}, %[[S]])
// CHECK:         call @fff_elementwise_0(%[[H]], %[[H]], %{{.*}})
// CHECK-NOT:     linalg.generic
// CHECK:       func.func private @fff_elementwise(%[[XA:.*]]: tensor<?x64xf32>, %[[YA:.*]]: tensor<?x64xf32>, %{{.*}}: tensor<?x64xf32>, %[[SA:.*]]: f32) -> tensor<?x64xf32>
// CHECK:         %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK:         scf.parallel
// CHECK-DAG:       vector.broadcast %[[SA]] : f32 to vector<16xf32>
// CHECK-DAG:       vector.broadcast %[[HALF]] : f32 to vector<16xf32>
// CHECK:         return
// CHECK:       func.func private @fff_elementwise_0(%{{.*}}: tensor<?x64xbf16>, %{{.*}}: tensor<?x64xbf16>, %{{.*}}: tensor<?x64xbf16>) -> tensor<?x64xbf16>
// CHECK:         vector.load {{.*}} vector<16xbf16>
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @two_layers(%x: tensor<?x64xf32>, %y: tensor<?x64xf32>, %s: f32, %h: tensor<?x64xbf16>)
    -> (tensor<?x64xf32>, tensor<?x64xbf16>) {
  %c0 = arith.constant 0 : index
  %half = arith.constant 0.5 : f32
  %rows = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%rows) : tensor<?x64xf32>
  %a = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<?x64xf32>, tensor<?x64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %q, %half : f32
    %t = arith.mulf %m, %s : f32
    %r = arith.addf %p, %t : f32
    linalg.yield %r : f32
  } -> tensor<?x64xf32>
  %b = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a, %y : tensor<?x64xf32>, tensor<?x64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %q, %half : f32
    %t = arith.mulf %m, %s : f32
    %r = arith.addf %p, %t : f32
    linalg.yield %r : f32
  } -> tensor<?x64xf32>
  %eh = tensor.empty(%rows) : tensor<?x64xbf16>
  %c = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%h, %h : tensor<?x64xbf16>, tensor<?x64xbf16>) outs(%eh : tensor<?x64xbf16>) {
  ^bb0(%p: bf16, %q: bf16, %o: bf16):
    %r = arith.addf %p, %q : bf16
    linalg.yield %r : bf16
  } -> tensor<?x64xbf16>
  return %b, %c : tensor<?x64xf32>, tensor<?x64xbf16>
}

// RUN: fff-opt %s --fff-bf16-arith-in-f32 | FileCheck %s
// RUN: fff-opt %s --fff-bf16-arith-in-f32 --canonicalize --arith-expand="include-bf16" | FileCheck %s --check-prefix=KEPT

// Each bf16 op in f32, its result rounded to bf16: (a + b) * c rounds the
// sum before the product. The casts carry no `contract`.
// CHECK-LABEL: func @sum_then_product
// CHECK-DAG:     %[[A:.*]] = arith.extf %arg0 : vector<8xbf16> to vector<8xf32>
// CHECK-DAG:     %[[B:.*]] = arith.extf %arg1 : vector<8xbf16> to vector<8xf32>
// CHECK:         %[[S:.*]] = arith.addf %[[A]], %[[B]] : vector<8xf32>
// CHECK:         %[[SB:.*]] = arith.truncf %[[S]] : vector<8xf32> to vector<8xbf16>
// CHECK:         %[[SW:.*]] = arith.extf %[[SB]] : vector<8xbf16> to vector<8xf32>
// CHECK:         %[[P:.*]] = arith.mulf %[[SW]], %{{.*}} : vector<8xf32>
// CHECK:         arith.truncf %[[P]] : vector<8xf32> to vector<8xbf16>
// CHECK-NOT:     contract
// The rounding between the two survives canonicalization and bf16's
// expansion into integer ops.
// KEPT-LABEL: func @sum_then_product
// KEPT:         arith.addf {{.*}} : vector<8xf32>
// KEPT:         arith.shrui
// KEPT:         arith.mulf {{.*}} : vector<8xf32>
func.func @sum_then_product(%a: vector<8xbf16>, %b: vector<8xbf16>, %c: vector<8xbf16>) -> vector<8xbf16> {
  %s = arith.addf %a, %b : vector<8xbf16>
  %p = arith.mulf %s, %c : vector<8xbf16>
  return %p : vector<8xbf16>
}

// f32 and f16 stay; a cast written in the input keeps its flags.
// CHECK-LABEL: func @others_stay
// CHECK:         arith.addf %arg0, %arg0 : f32
// CHECK:         arith.addf %arg1, %arg1 : f16
// CHECK:         arith.extf %arg2 fastmath<contract> : bf16 to f32
func.func @others_stay(%x: f32, %h: f16, %b: bf16) -> (f32, f16, f32) {
  %0 = arith.addf %x, %x : f32
  %1 = arith.addf %h, %h : f16
  %2 = arith.extf %b fastmath<contract> : bf16 to f32
  return %0, %1, %2 : f32, f16, f32
}

// RUN: fff-opt %s --fff-approximate-math | FileCheck %s

// The activations' functions become inline polynomials, on scalars and on
// vectors alike; other math (and f64) is left to the usual lowerings.
// CHECK-LABEL: func.func @activations
// CHECK-NOT:     math.erf
// CHECK-NOT:     math.exp
// CHECK-NOT:     math.tanh
// CHECK:         math.fma {{.*}} : vector<16xf32>
// CHECK:         return
func.func @activations(%x: f32, %v: vector<16xf32>) -> (f32, vector<16xf32>, vector<16xf32>) {
  %e = math.erf %x : f32
  %t = math.tanh %v : vector<16xf32>
  %x2 = math.exp %v : vector<16xf32>
  return %e, %t, %x2 : f32, vector<16xf32>, vector<16xf32>
}

// CHECK-LABEL: func.func @left_alone
// CHECK:         math.sin
// CHECK:         math.rsqrt
// CHECK:         math.erf %{{.*}} : f64
func.func @left_alone(%x: f32, %v: vector<16xf32>, %d: f64) -> (f32, vector<16xf32>, f64) {
  %s = math.sin %x : f32
  %r = math.rsqrt %v : vector<16xf32>
  %e = math.erf %d : f64
  return %s, %r, %e : f32, vector<16xf32>, f64
}

// RUN: fff-opt %s --convert-fff-to-gpu --verify-diagnostics | FileCheck %s

// A unit that yields one of its inputs as it is (fff-fuzz seed 881884607,
// mutant 528: the split read the unit's block argument after inlining it).
// CHECK-LABEL: func.func @yields_its_input
// CHECK:         return %arg0
func.func @yields_its_input(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-remark @+1 {{runs as separate kernels: the fused norm kernel does not take work on the norm's mean or rstd}}
  %0:2 = fff.fusion ins(%x : tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %n:3 = fff.layer_norm %a return_stats : tensor<4x8xf32>
    %y = arith.addf %n#0, %a : tensor<4x8xf32>
    %v = arith.mulf %n#2, %n#2 : tensor<4x1xf32>
    fff.yield %a, %v : tensor<4x8xf32>, tensor<4x1xf32>
  } -> tensor<4x8xf32>, tensor<4x1xf32>
  return %0#0 : tensor<4x8xf32>
}

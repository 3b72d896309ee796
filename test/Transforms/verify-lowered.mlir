// RUN: fff-opt %s --fff-verify-lowered --split-input-file --verify-diagnostics
// RUN: not fff-opt %s --fff-verify-lowered=pipeline=fff-cpu-pipeline --split-input-file 2>&1 | FileCheck %s --check-prefix=NAMED
// NAMED: error: 'func.func' op was not lowered by fff-cpu-pipeline: fff cannot compile it yet

// LLVM dialect only: nothing to report.
llvm.func @lowered(%x: f32) -> f32 {
  llvm.return %x : f32
}

// -----

// expected-error @+1 {{'func.func' op was not lowered: fff cannot compile it yet}}
func.func @left_over() {
  return
}

// -----

llvm.func @half_lowered(%x: f32) -> f32 {
  // expected-error @+1 {{'arith.addf' op was not lowered: fff cannot compile it yet}}
  %y = arith.addf %x, %x : f32
  llvm.return %y : f32
}

// -----

llvm.func @cast_left(%x: i64) -> i64 {
  // expected-error @+1 {{'builtin.unrealized_conversion_cast' op was not lowered: fff cannot compile it yet}}
  %i = builtin.unrealized_conversion_cast %x : i64 to index
  %back = builtin.unrealized_conversion_cast %i : index to i64
  llvm.return %back : i64
}

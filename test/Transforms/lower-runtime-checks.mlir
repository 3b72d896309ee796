// RUN: fff-opt %s --fff-lower-runtime-checks --split-input-file --verify-diagnostics | FileCheck %s

// A failed check reports its message and returns poison results; the rest
// of the function runs only when the check holds.
// CHECK:       llvm.mlir.global internal constant @[[MESSAGE:.*]]("rows differ\00")
// CHECK:       llvm.func @fffReportCheckFailure(!llvm.ptr)
// CHECK-LABEL: func.func @check
// CHECK:         cf.cond_br %{{.*}}, ^[[CONTINUE:.*]], ^[[FAILED:.*]]
// CHECK:       ^[[FAILED]]:
// CHECK-NEXT:    %[[ADDRESS:.*]] = llvm.mlir.addressof @[[MESSAGE]]
// CHECK-NEXT:    llvm.call @fffReportCheckFailure(%[[ADDRESS]])
// CHECK-NEXT:    %[[POISON:.*]] = ub.poison : memref<?xf32>
// CHECK-NEXT:    return %[[POISON]]
// CHECK:       ^[[CONTINUE]]:
// CHECK-NEXT:    memref.alloc
func.func @check(%a: index, %b: index) -> memref<?xf32> {
  %same = arith.cmpi eq, %a, %b : index
  cf.assert %same, "rows differ"
  %alloc = memref.alloc(%a) : memref<?xf32>
  return %alloc : memref<?xf32>
}

// -----

func.func @nested(%c: i1, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    // expected-error @+1 {{'cf.assert' op is inside a nested region, where it cannot return early; run convert-scf-to-cf first}}
    cf.assert %c, "in a loop"
  }
  return
}

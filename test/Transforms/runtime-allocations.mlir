// RUN: fff-opt %s --fff-runtime-allocations | FileCheck %s
// RUN: fff-opt %s --fff-runtime-allocations --finalize-memref-to-llvm=use-generic-functions | FileCheck %s --check-prefix=LOWERED
// After fff-huge-page-allocations, whose definitions already say noalias,
// the pass leaves them as they are.
// RUN: fff-opt %s --fff-huge-page-allocations --fff-runtime-allocations | FileCheck %s --check-prefix=DEFINED

// The allocation functions memref lowering calls with use-generic-functions
// are declared for the host to define (fff-run and the Python package bind
// them to the host buffer cache), the allocating ones noalias as malloc is.
// CHECK-DAG: llvm.func @_mlir_memref_to_llvm_alloc(i64) -> (!llvm.ptr {llvm.noalias})
// CHECK-DAG: llvm.func @_mlir_memref_to_llvm_aligned_alloc(i64, i64) -> (!llvm.ptr {llvm.noalias})
// CHECK-DAG: llvm.func @_mlir_memref_to_llvm_free(!llvm.ptr)

// LOWERED-LABEL: func.func @result
// LOWERED:         llvm.call @_mlir_memref_to_llvm_alloc
// LOWERED-LABEL: func.func @scratch
// LOWERED:         llvm.call @_mlir_memref_to_llvm_alloc
// LOWERED:         llvm.call @_mlir_memref_to_llvm_free

// DEFINED: llvm.func internal @_mlir_memref_to_llvm_alloc(%{{.*}}: i64) -> (!llvm.ptr {llvm.noalias}) attributes {passthrough = ["noinline"]}
// DEFINED-NOT: llvm.func @_mlir_memref_to_llvm_alloc
func.func @result(%n: index) -> memref<?xf32> {
  %a = memref.alloc(%n) : memref<?xf32>
  return %a : memref<?xf32>
}

func.func @scratch(%n: index) {
  %a = memref.alloc(%n) {alignment = 64 : i64} : memref<?xf32>
  memref.dealloc %a : memref<?xf32>
  return
}

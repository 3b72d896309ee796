// RUN: fff-opt %s --fff-huge-page-allocations | FileCheck %s
// RUN: fff-opt %s --fff-huge-page-allocations=min-bytes=1024 | FileCheck %s --check-prefix=MIN
// RUN: fff-opt %s --fff-huge-page-allocations --finalize-memref-to-llvm=use-generic-functions | FileCheck %s --check-prefix=LOWERED
// RUN: not fff-opt %s --fff-huge-page-allocations=min-bytes=-1 2>&1 | FileCheck %s --check-prefix=ERROR

// ERROR: min-bytes must be 0 or positive, not -1

// The module defines the allocation functions memref lowering calls with
// use-generic-functions, internal to it: from 32 MiB, whole 2 MiB pages on a
// 2 MiB boundary, advised MADV_HUGEPAGE (14); below, malloc; free for all.
// CHECK-DAG:   llvm.func @madvise(!llvm.ptr, i64, i32) -> i32
// CHECK-DAG:   llvm.func @free(!llvm.ptr)
// CHECK-DAG:   llvm.func @aligned_alloc(i64, i64) -> !llvm.ptr
// CHECK-DAG:   llvm.func @malloc(i64) -> !llvm.ptr
// CHECK-LABEL: llvm.func internal @_mlir_memref_to_llvm_free(
// CHECK-SAME:      %[[P:.*]]: !llvm.ptr)
// CHECK:         llvm.call @free(%[[P]])
// CHECK-LABEL: llvm.func internal @_mlir_memref_to_llvm_aligned_alloc(
// CHECK-SAME:      %[[ALIGN:.*]]: i64, %[[SIZE:.*]]: i64) -> (!llvm.ptr {llvm.noalias})
// CHECK:         llvm.icmp "uge" %[[SIZE]], %{{.*}}
// CHECK:         llvm.call @aligned_alloc(%[[ALIGN]], %[[SIZE]])
// CHECK-LABEL: llvm.func internal @_mlir_memref_to_llvm_alloc(
// CHECK-SAME:      %[[BYTES:.*]]: i64) -> (!llvm.ptr {llvm.noalias}) attributes {passthrough = ["noinline"]}
// CHECK:         %[[THRESHOLD:.*]] = llvm.mlir.constant(33554432 : i64)
// CHECK:         %[[LARGE:.*]] = llvm.icmp "uge" %[[BYTES]], %[[THRESHOLD]]
// CHECK:         llvm.cond_br %[[LARGE]], ^[[HUGE:.*]], ^[[SMALL:.*]]
// CHECK:       ^[[SMALL]]:
// CHECK:         %[[PLAIN:.*]] = llvm.call @malloc(%[[BYTES]])
// CHECK:         llvm.br ^[[DONE:.*]](%[[PLAIN]] : !llvm.ptr)
// CHECK:       ^[[HUGE]]:
// CHECK:         %[[MASK:.*]] = llvm.mlir.constant(2097151 : i64)
// CHECK:         %[[PAD:.*]] = llvm.add %[[BYTES]], %[[MASK]]
// CHECK:         %[[ROUNDED:.*]] = llvm.and %[[PAD]]
// CHECK:         %[[PAGE:.*]] = llvm.mlir.constant(2097152 : i64)
// CHECK:         %[[BUFFER:.*]] = llvm.call @aligned_alloc(%[[PAGE]], %[[ROUNDED]])
// CHECK:         %[[ADVICE:.*]] = llvm.mlir.constant(14 : i32)
// CHECK:         llvm.call @madvise(%[[BUFFER]], %[[ROUNDED]], %[[ADVICE]])
// CHECK:         llvm.br ^[[DONE]](%[[BUFFER]] : !llvm.ptr)
// CHECK:       ^[[DONE]](%[[RESULT:.*]]: !llvm.ptr):
// CHECK:         llvm.return %[[RESULT]]

// MIN-LABEL: llvm.func internal @_mlir_memref_to_llvm_alloc
// MIN:         llvm.mlir.constant(1024 : i64)

// LOWERED-LABEL: func.func @result
// LOWERED:         llvm.call @_mlir_memref_to_llvm_alloc
// LOWERED-LABEL: func.func @scratch
// LOWERED:         llvm.call @_mlir_memref_to_llvm_alloc
// LOWERED:         llvm.call @_mlir_memref_to_llvm_free
func.func @result(%n: index) -> memref<?xf32> {
  %a = memref.alloc(%n) : memref<?xf32>
  return %a : memref<?xf32>
}

func.func @scratch(%n: index) {
  %a = memref.alloc(%n) {alignment = 64 : i64} : memref<?xf32>
  memref.dealloc %a : memref<?xf32>
  return
}

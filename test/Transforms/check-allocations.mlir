// RUN: fff-opt %s --fff-check-allocations --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @heap
// CHECK:         %[[ALLOC:.*]] = memref.alloc(%[[N:.*]]) : memref<?x4xf32>
// CHECK:         %[[EMPTY:.*]] = arith.cmpi eq, %{{.*}}, %c0
// CHECK:         %[[ADDRESS:.*]] = memref.extract_aligned_pointer_as_index %[[ALLOC]]
// CHECK:         %[[ALLOCATED:.*]] = arith.cmpi ne, %[[ADDRESS]], %c0
// CHECK:         %[[OK:.*]] = arith.ori %[[EMPTY]], %[[ALLOCATED]]
// CHECK:         cf.assert %[[OK]], "out of memory: cannot allocate a memref<?x4xf32>"
// An empty buffer may have a null pointer; stack allocations and kernels'
// workgroup memory are not heap allocations.
// CHECK-NOT:     cf.assert
func.func @heap(%n: index) {
  %a = memref.alloc(%n) : memref<?x4xf32>
  %b = memref.alloc() : memref<0x4xf32>
  %c = memref.alloca() : memref<4xf32>
  return
}

// -----

// Device allocations are checked the same way.
// CHECK-LABEL: func.func @device
// CHECK:         %[[ALLOC:.*]] = gpu.alloc (%{{.*}}) : memref<?xf32>
// CHECK:         %[[ADDRESS:.*]] = memref.extract_aligned_pointer_as_index %[[ALLOC]]
// CHECK:         cf.assert %{{.*}}, "out of memory: cannot allocate a memref<?xf32>"
func.func @device(%n: index) {
  %a = gpu.alloc (%n) : memref<?xf32>
  return
}

// RUN: fff-opt %s --fff-check-entry-buffers=alignment=16 --split-input-file | FileCheck %s
// RUN: fff-opt %s --fff-check-entry-buffers --split-input-file | FileCheck %s --check-prefix=NATURAL

// Each memref argument is read through a fully dynamic type (same
// descriptor), checked, and viewed as its declared type for the body.
// CHECK-LABEL: func.func @entry
// CHECK-SAME:    (%[[X:.*]]: memref<?x?xf32, strided<[?, ?], offset: ?>>, %[[I:.*]]: index)
// CHECK:         %{{.*}}, %[[OFFSET:.*]], %[[SIZES:.*]]:2, %[[STRIDES:.*]]:2 = memref.extract_strided_metadata %[[X]]
// CHECK:         arith.cmpi sge, %[[SIZES]]#0, %c0
// CHECK:         cf.assert %{{.*}}, "@entry: argument #0 (memref<?x768xf32>) has a negative size in dim 0"
// CHECK:         arith.cmpi eq, %[[SIZES]]#1, %c768
// CHECK:         cf.assert %{{.*}}, "@entry: argument #0 (memref<?x768xf32>) has dim 1 of size other than 768"
// CHECK:         arith.cmpi eq, %[[OFFSET]], %c0
// CHECK:         cf.assert %{{.*}}, "@entry: argument #0 (memref<?x768xf32>) has a nonzero offset; pass the address of its first element"
// CHECK:         cf.assert %{{.*}}, "@entry: argument #0 (memref<?x768xf32>) is not contiguous in row-major order"
// CHECK:         %[[ADDRESS:.*]] = memref.extract_aligned_pointer_as_index %[[X]]
// CHECK:         cf.assert %{{.*}}, "@entry: argument #0 (memref<?x768xf32>) is a null pointer but not empty"
// CHECK:         arith.remui %[[ADDRESS]], %c16
// CHECK:         cf.assert %{{.*}}, "@entry: argument #0 (memref<?x768xf32>) is not 16-byte aligned"
// CHECK:         %[[VIEW:.*]] = memref.reinterpret_cast %[[X]] to offset: [0], sizes: [%[[SIZES]]#0, 768], strides: [768, 1]
// CHECK-SAME:      to memref<?x768xf32>
// CHECK:         memref.load %[[VIEW]][%[[I]], %[[I]]]
// NATURAL-LABEL: func.func @entry
// NATURAL:         cf.assert %{{.*}}, "@entry: argument #0 (memref<?x768xf32>) is not 4-byte aligned"
func.func @entry(%x: memref<?x768xf32>, %i: index) -> f32 {
  %v = memref.load %x[%i, %i] : memref<?x768xf32>
  return %v : f32
}

// -----

// Private functions are called by fff's own code, which passes what their
// types say; views with their own layout are not the ABI's.
// CHECK-LABEL: func.func private @helper
// CHECK-NOT:     cf.assert
// CHECK-LABEL: func.func @strided
// CHECK-NOT:     cf.assert
func.func private @helper(%x: memref<4xf32>) {
  return
}
func.func @strided(%x: memref<4xf32, strided<[2]>>) {
  return
}

// -----

// A returned allocation's extents are tied to the sizes it was allocated
// with (for when it becomes the caller's buffer).
// CHECK-LABEL: func.func @result
// CHECK:         %[[ALLOC:.*]] = memref.alloc(%[[N:.*]]) : memref<?x8xf32>
// CHECK:         %[[DIM:.*]] = memref.dim %[[ALLOC]], %c0
// CHECK-NEXT:    %[[SAME:.*]] = arith.cmpi eq, %[[DIM]], %[[N]]
// CHECK-NEXT:    cf.assert %[[SAME]], "@result: the buffer for result #0 has the wrong size in dim 0"
func.func @result(%n: index) -> memref<?x8xf32> {
  %alloc = memref.alloc(%n) : memref<?x8xf32>
  return %alloc : memref<?x8xf32>
}

// -----

// A second run leaves the arguments of the first alone: the five checks
// are the static argument's.
// CHECK-LABEL: func.func @twice
// CHECK-COUNT-5: cf.assert {{.*}}argument #1
// CHECK-NOT:     cf.assert
func.func @twice(%x: memref<?xf16, strided<[?], offset: ?>>, %y: memref<8xf16>) {
  return
}

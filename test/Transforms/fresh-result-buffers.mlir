// RUN: fff-opt %s --fff-fresh-result-buffers | FileCheck %s

// A buffer returned twice: its second return is a copy in a fresh buffer
// of the same (dynamic) shape. An argument returned as it is: a copy too.
// The first return of a buffer the function allocated stays as it is.
// CHECK-LABEL: func.func @returns
// CHECK-SAME:    (%[[X:.*]]: memref<?x6xf32>, %[[N:.*]]: index)
// CHECK:         %[[H:.*]] = memref.alloc(%[[N]]) : memref<?x6xf32>
// CHECK:         %[[ROWS:.*]] = memref.dim %[[H]], %{{.*}} : memref<?x6xf32>
// CHECK:         %[[COPY:.*]] = memref.alloc(%[[ROWS]]) : memref<?x6xf32>
// CHECK:         memref.copy %[[H]], %[[COPY]]
// CHECK:         %[[XROWS:.*]] = memref.dim %[[X]], %{{.*}} : memref<?x6xf32>
// CHECK:         %[[ARG:.*]] = memref.alloc(%[[XROWS]]) : memref<?x6xf32>
// CHECK:         memref.copy %[[X]], %[[ARG]]
// CHECK:         return %[[H]], %[[COPY]], %[[ARG]]
func.func @returns(%x: memref<?x6xf32>, %n: index)
    -> (memref<?x6xf32>, memref<?x6xf32>, memref<?x6xf32>) {
  %h = memref.alloc(%n) : memref<?x6xf32>
  return %h, %h, %x : memref<?x6xf32>, memref<?x6xf32>, memref<?x6xf32>
}

// On tensors, only the second return of a value needs a copy: one-shot
// bufferization takes an argument returned as it is.
// CHECK-LABEL: func.func @tensors
// CHECK-SAME:    (%[[X:.*]]: tensor<?x6xf32>, %[[A:.*]]: tensor<?x6xf32>)
// CHECK:         %[[H:.*]] = arith.addf %[[X]], %[[A]]
// CHECK:         %[[COPY:.*]] = bufferization.alloc_tensor() copy(%[[H]])
// CHECK:         return %[[H]], %[[COPY]], %[[X]]
func.func @tensors(%x: tensor<?x6xf32>, %a: tensor<?x6xf32>)
    -> (tensor<?x6xf32>, tensor<?x6xf32>, tensor<?x6xf32>) {
  %h = arith.addf %x, %a : tensor<?x6xf32>
  return %h, %h, %x : tensor<?x6xf32>, tensor<?x6xf32>, tensor<?x6xf32>
}

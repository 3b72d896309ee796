// RUN: fff-opt %s --fff-upload-device-constants | FileCheck %s

// Host code's address of a listed constant becomes its device copy's,
// from fffDeviceConstant with the constant's size and a slot global that
// keeps the copy; other globals (the checks' messages, say) are untouched.
// CHECK-NOT:   fff.device_constants
// CHECK:       llvm.func @fffDeviceConstant(!llvm.ptr, !llvm.ptr, i64) -> !llvm.ptr
// CHECK:       llvm.mlir.global internal constant @weights
// CHECK:       llvm.mlir.global internal @weights_device() {addr_space = 0 : i32} : !llvm.ptr {
// CHECK:         %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK:         llvm.return %[[NULL]] : !llvm.ptr
// CHECK-LABEL: llvm.func @forward
// CHECK:         %[[HOST:.*]] = llvm.mlir.addressof @weights : !llvm.ptr
// CHECK:         %[[BYTES:.*]] = llvm.mlir.constant(24 : i64) : i64
// CHECK:         %[[SLOT:.*]] = llvm.mlir.addressof @weights_device : !llvm.ptr
// CHECK:         %[[DEVICE:.*]] = llvm.call @fffDeviceConstant(%[[SLOT]], %[[HOST]], %[[BYTES]])
// CHECK:         llvm.getelementptr %[[DEVICE]][0, 0]
// CHECK:         llvm.mlir.addressof @message
// CHECK-NOT:     llvm.call @fffDeviceConstant
module attributes {fff.device_constants = [@weights]} {
  llvm.mlir.global internal constant @weights(dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]> : tensor<6xf32>) : !llvm.array<6 x f32>
  llvm.mlir.global internal constant @message("a check\00")
  llvm.func @use(!llvm.ptr, !llvm.ptr)
  llvm.func @forward() {
    %w = llvm.mlir.addressof @weights : !llvm.ptr
    %first = llvm.getelementptr %w[0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.array<6 x f32>
    %m = llvm.mlir.addressof @message : !llvm.ptr
    llvm.call @use(%first, %m) : (!llvm.ptr, !llvm.ptr) -> ()
    llvm.return
  }
}

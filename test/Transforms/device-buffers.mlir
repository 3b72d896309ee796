// RUN: fff-opt %s --fff-device-buffers --split-input-file --verify-diagnostics | FileCheck %s

// A temporary moves to the device and is freed after the last launch that
// reads it, through a view; a buffer freed by the IR keeps its own free.
// CHECK-LABEL: func.func @temporaries
// CHECK:         %[[T:.*]] = gpu.alloc (%arg1) : memref<?x8xf32>
// CHECK:         %[[U:.*]] = gpu.alloc () : memref<8xf32>
// CHECK:         gpu.launch_func @kernels::@write {{.*}} args(%[[T]] : memref<?x8xf32>)
// CHECK:         %[[FLAT:.*]] = memref.collapse_shape %[[T]]
// CHECK:         gpu.launch_func @kernels::@read {{.*}} args(%[[FLAT]] : memref<?xf32>, %arg0 : memref<?xf32>)
// CHECK-NEXT:    gpu.dealloc %[[T]] : memref<?x8xf32>
// CHECK:         gpu.dealloc %[[U]] : memref<8xf32>
// CHECK-NOT:     gpu.dealloc
// CHECK:         return
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @write(%t: memref<?x8xf32>) kernel { gpu.return }
    gpu.func @read(%t: memref<?xf32>, %y: memref<?xf32>) kernel { gpu.return }
  }
  func.func @temporaries(%y: memref<?xf32>, %n: index) {
    %c1 = arith.constant 1 : index
    %t = memref.alloc(%n) : memref<?x8xf32>
    %u = memref.alloc() : memref<8xf32>
    gpu.launch_func @kernels::@write blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%t : memref<?x8xf32>)
    %flat = memref.collapse_shape %t [[0, 1]] : memref<?x8xf32> into memref<?xf32>
    gpu.launch_func @kernels::@read blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%flat : memref<?xf32>, %y : memref<?xf32>)
    memref.dealloc %u : memref<8xf32>
    return
  }
}

// -----

// The shape torch-mlir computes for a view stays on the host, written there
// and freed after the reshape; the data moves to the device.
// CHECK-LABEL: func.func @view_with_computed_shape
// CHECK:         %[[SHAPE:.*]] = memref.alloc() : memref<2xindex>
// CHECK:         memref.store %arg1, %[[SHAPE]]
// CHECK:         %[[VIEW:.*]] = memref.reshape %arg0(%[[SHAPE]])
// CHECK-NEXT:    memref.dealloc %[[SHAPE]] : memref<2xindex>
func.func @view_with_computed_shape(%x: memref<?xf32>, %rows: index) -> memref<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %shape = memref.alloc() : memref<2xindex>
  memref.store %rows, %shape[%c0] : memref<2xindex>
  memref.store %c4, %shape[%c1] : memref<2xindex>
  %view = memref.reshape %x(%shape) : (memref<?xf32>, memref<2xindex>) -> memref<?x4xf32>
  return %view : memref<?x4xf32>
}

// -----

// Weights baked into the IR: listed for fff-upload-device-constants, and
// checked to have been copied.
// CHECK: module attributes {fff.device_constants = [@weights]}
// CHECK-LABEL: func.func @constant
// CHECK:         %[[W:.*]] = memref.get_global @weights : memref<4xf32>
// CHECK:         %[[ADDRESS:.*]] = memref.extract_aligned_pointer_as_index %[[W]]
// CHECK:         %[[COPIED:.*]] = arith.cmpi ne, %[[ADDRESS]], %c0
// CHECK:         cf.assert %[[COPIED]], "cannot copy the constant @weights to the GPU"
memref.global "private" constant @weights : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
func.func @constant() -> memref<4xf32> {
  %w = memref.get_global @weights : memref<4xf32>
  return %w : memref<4xf32>
}

// -----

func.func @host_read(%x: memref<4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  // expected-error @below {{'memref.load' op accesses buffer elements in host code, but the GPU pipeline keeps buffers in device memory}}
  %v = memref.load %x[%c0] : memref<4xf32>
  return %v : f32
}

// -----

func.func @stack() {
  // expected-error @below {{'memref.alloca' op allocates a host stack buffer, which GPU kernels cannot reach}}
  %a = memref.alloca() : memref<4xf32>
  return
}

// -----

memref.global "private" @counter : memref<1xi32> = dense<0>
func.func @mutable_global() {
  // expected-error @below {{'memref.get_global' op reads a mutable global, which GPU kernels cannot share with the host}}
  %g = memref.get_global @counter : memref<1xi32>
  return
}

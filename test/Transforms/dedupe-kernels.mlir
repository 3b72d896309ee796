// RUN: fff-opt %s --fff-dedupe-kernels | FileCheck %s

// Of four kernels, two are copies (another name, the same attributes and
// body): one stays and both launches use it. A kernel that differs in a
// constant of its body, or in an attribute (its strategy), stays apart.
// CHECK-LABEL: func.func @f
// CHECK:         gpu.launch_func @kernels::@scale blocks
// CHECK:         gpu.launch_func @kernels::@scale blocks
// CHECK:         gpu.launch_func @kernels::@scale_2 blocks
// CHECK:         gpu.launch_func @kernels::@scale_3 blocks
// CHECK:       gpu.module @kernels
// CHECK:         gpu.func @scale(
// CHECK-NOT:     gpu.func @scale_1
// CHECK:         gpu.func @scale_2(
// CHECK:           arith.constant 3.0
// CHECK:         gpu.func @scale_3(
// CHECK-SAME:      fff.strategy
module attributes {gpu.container_module} {
  func.func @f(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @kernels::@scale blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @kernels::@scale_1 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @kernels::@scale_2 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @kernels::@scale_3 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    return
  }
  gpu.module @kernels {
    gpu.func @scale(%a: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %two = arith.constant 2.0 : f32
      %x = memref.load %a[%c0] : memref<4xf32>
      %y = arith.mulf %x, %two : f32
      memref.store %y, %a[%c0] : memref<4xf32>
      gpu.return
    }
    gpu.func @scale_1(%a: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %two = arith.constant 2.0 : f32
      %x = memref.load %a[%c0] : memref<4xf32>
      %y = arith.mulf %x, %two : f32
      memref.store %y, %a[%c0] : memref<4xf32>
      gpu.return
    }
    gpu.func @scale_2(%a: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %three = arith.constant 3.0 : f32
      %x = memref.load %a[%c0] : memref<4xf32>
      %y = arith.mulf %x, %three : f32
      memref.store %y, %a[%c0] : memref<4xf32>
      gpu.return
    }
    gpu.func @scale_3(%a: memref<4xf32>) kernel attributes {fff.strategy = {kind = "other"}} {
      %c0 = arith.constant 0 : index
      %two = arith.constant 2.0 : f32
      %x = memref.load %a[%c0] : memref<4xf32>
      %y = arith.mulf %x, %two : f32
      memref.store %y, %a[%c0] : memref<4xf32>
      gpu.return
    }
  }
}

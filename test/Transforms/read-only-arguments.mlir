// RUN: fff-opt %s --fff-read-only-arguments | FileCheck %s

// A public function's tensor arguments become read-only for bufferization;
// an argument the IR already marks keeps its mark, and buffers, scalars
// and private functions are left alone.
// CHECK-LABEL: func.func @public
// CHECK-SAME:    %{{.*}}: tensor<?x8xf32> {bufferization.writable = false}
// CHECK-SAME:    %{{.*}}: tensor<8xf32> {bufferization.writable = true}
// CHECK-SAME:    %{{.*}}: memref<8xf32>,
// CHECK-SAME:    %{{.*}}: f32)
func.func @public(%x: tensor<?x8xf32>, %y: tensor<8xf32> {bufferization.writable = true},
                  %z: memref<8xf32>, %s: f32) {
  return
}

// CHECK-LABEL: func.func private @helper
// CHECK-SAME:    (%{{.*}}: tensor<8xf32>)
func.func private @helper(%x: tensor<8xf32>) {
  return
}

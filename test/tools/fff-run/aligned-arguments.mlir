// fff-run hands a function its arrays on 64-byte boundaries, as torch's CPU
// tensors are: malloc starts a large buffer 16 bytes past a cache line, and a
// 64-byte vector load of a row of it touches two lines. The function returns
// each argument's address modulo 64, for a large array (1.2 MB, which malloc
// maps afresh) and a small one.
//
// REQUIRES: numpy
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; np.save('%t/large.npy', np.arange(300000, dtype=np.float32).reshape(100000, 3)); np.save('%t/small.npy', np.arange(5, dtype=np.int16))"
// RUN: fff-run %s -e offsets --arg %t/large.npy --arg %t/small.npy --out %t/offsets.npy
// RUN: %python -c "import numpy as np; print('offsets', np.load('%t/offsets.npy').tolist())" | FileCheck %s
// CHECK: offsets [0, 0]

func.func @offsets(%large: tensor<?x3xf32>, %small: tensor<5xi16>) -> tensor<2xi64> {
  %l = bufferization.to_buffer %large read_only : tensor<?x3xf32> to memref<?x3xf32>
  %s = bufferization.to_buffer %small read_only : tensor<5xi16> to memref<5xi16>
  %pl = memref.extract_aligned_pointer_as_index %l : memref<?x3xf32> -> index
  %ps = memref.extract_aligned_pointer_as_index %s : memref<5xi16> -> index
  %line = arith.constant 64 : index
  %ol = arith.remui %pl, %line : index
  %os = arith.remui %ps, %line : index
  %il = arith.index_cast %ol : index to i64
  %is = arith.index_cast %os : index to i64
  %offsets = tensor.from_elements %il, %is : tensor<2xi64>
  return %offsets : tensor<2xi64>
}

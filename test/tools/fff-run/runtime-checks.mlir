// Extents that contradict each other at run time, allocations that fail and
// a module's own failed assertions are one-line errors with exit code 1,
// never a wrong answer, an out-of-bounds read or a crash. Each case runs on
// the CPU lowering and on the GPU kernels' CPU twins (--gpu-twin).
//
// REQUIRES: numpy
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; r = np.random.default_rng(0); s = lambda n, *shape: np.save('%t/' + n + '.npy', r.standard_normal(shape).astype(np.float32)); s('x', 4, 8); s('g3', 3); s('g8', 8); s('g100k', 100000); s('w3', 1, 3, 8); s('w15', 1, 15, 8); s('w1', 1, 1, 8); s('big', 3000, 3000); s('y5', 5, 8); np.save('%t/empty_rows.npy', np.zeros((4, 0), np.float32))"

// The same call with agreeing extents succeeds, so that each failure below
// is the failure of its inputs alone.
// RUN: fff-run %s -e layer_norm --arg %t/x.npy --arg %t/g8.npy --out %t/y.npy
// RUN: fff-run %s -e tree_ffn --arg %t/x.npy --arg %t/w15.npy --arg %t/w15.npy --out %t/y.npy

// A gamma shorter or longer than the rows (the CPU lowering used to read
// past its end, and accepted the longer one).
// RUN: not fff-run %s -e layer_norm --arg %t/x.npy --arg %t/g3.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=SHORT-GAMMA < %t/err && count 1 < %t/err
// RUN: not fff-run %s -e layer_norm --arg %t/x.npy --arg %t/g3.npy --out %t/y.npy --gpu-twin 2> %t/err
// RUN: FileCheck %s --check-prefix=SHORT-GAMMA < %t/err && count 1 < %t/err
// SHORT-GAMMA: fff-run: error: {{.*}}runtime-checks.mlir:{{[0-9]+}}:8: 'fff.layer_norm' op scale dim 0 (D) does not match input dim 1
// RUN: not fff-run %s -e layer_norm --arg %t/x.npy --arg %t/g100k.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=SHORT-GAMMA < %t/err && count 1 < %t/err

// Rows of size 0 at run time (statistics over nothing; a segfault before).
// RUN: not fff-run %s -e rms_norm --arg %t/empty_rows.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=EMPTY < %t/err && count 1 < %t/err
// RUN: not fff-run %s -e rms_norm --arg %t/empty_rows.npy --out %t/y.npy --gpu-twin 2> %t/err
// RUN: FileCheck %s --check-prefix=EMPTY < %t/err && count 1 < %t/err
// EMPTY: fff-run: error: {{.*}}'fff.rms_norm' op input dim 1 (D) is below 1: there is nothing to normalize over

// A tree whose node count does not match its depth: N = 3 at depth 3 read
// out of bounds, and a 1-node weight at depth 20 crashed.
// RUN: not fff-run %s -e tree_ffn --arg %t/x.npy --arg %t/w3.npy --arg %t/w3.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=NODES < %t/err && count 1 < %t/err
// RUN: not fff-run %s -e tree_ffn --arg %t/x.npy --arg %t/w3.npy --arg %t/w3.npy --out %t/y.npy --gpu-twin 2> %t/err
// RUN: FileCheck %s --check-prefix=NODES < %t/err && count 1 < %t/err
// NODES: fff-run: error: {{.*}}'fff.tree_ffn' op w_in dim 1 (N) is not 15, which depth 3 (N = 2^(depth+1)-1) requires
// RUN: not fff-run %s -e deep_tree_ffn --arg %t/x.npy --arg %t/w1.npy --arg %t/w1.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=DEEP < %t/err && count 1 < %t/err
// RUN: not fff-run %s -e deep_tree_ffn --arg %t/x.npy --arg %t/w1.npy --arg %t/w1.npy --out %t/y.npy --gpu-twin 2> %t/err
// RUN: FileCheck %s --check-prefix=DEEP < %t/err && count 1 < %t/err
// DEEP: fff-run: error: {{.*}}'fff.tree_ffn' op w_in dim 1 (N) is not 2097151, which depth 20 (N = 2^(depth+1)-1) requires

// A result too large to allocate (malloc's null was written through).
// RUN: not fff-run %s -e outer --arg %t/big.npy --arg %t/big.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=ALLOC < %t/err && count 1 < %t/err
// ALLOC: fff-run: error: out of memory: cannot allocate a memref<?x?x?x?xf32>

// A module's own assertion, such as torch-mlir's broadcast checks (an
// LLVM crash banner and abort before).
// RUN: not fff-run %s -e broadcast_assert --arg %t/x.npy --arg %t/y5.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=ASSERT < %t/err && count 1 < %t/err
// ASSERT: fff-run: error: mismatched size for broadcast

func.func @layer_norm(%x: tensor<?x?xf32>, %g: tensor<?xf32>) -> tensor<?x?xf32> {
  %y = fff.layer_norm %x scale(%g : tensor<?xf32>) : tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

func.func @rms_norm(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %y = fff.rms_norm %x : tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

func.func @tree_ffn(%x: tensor<?x8xf32>, %wi: tensor<1x?x8xf32>, %wo: tensor<1x?x8xf32>) -> tensor<?x8xf32> {
  %y = fff.tree_ffn %x, %wi, %wo {depth = 3 : i64} : tensor<?x8xf32>, tensor<1x?x8xf32>, tensor<1x?x8xf32>
  return %y : tensor<?x8xf32>
}

func.func @deep_tree_ffn(%x: tensor<?x8xf32>, %wi: tensor<1x?x8xf32>, %wo: tensor<1x?x8xf32>) -> tensor<?x8xf32> {
  %y = fff.tree_ffn %x, %wi, %wo {depth = 20 : i64} : tensor<?x8xf32>, tensor<1x?x8xf32>, tensor<1x?x8xf32>
  return %y : tensor<?x8xf32>
}

// [a, b, c, d] filled with ones: 3000^4 floats.
func.func @outer(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>) -> tensor<?x?x?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = tensor.dim %x, %c0 : tensor<?x?xf32>
  %b = tensor.dim %x, %c1 : tensor<?x?xf32>
  %c = tensor.dim %y, %c0 : tensor<?x?xf32>
  %d = tensor.dim %y, %c1 : tensor<?x?xf32>
  %empty = tensor.empty(%a, %b, %c, %d) : tensor<?x?x?x?xf32>
  %one = arith.constant 1.0 : f32
  %filled = linalg.fill ins(%one : f32) outs(%empty : tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32>
  return %filled : tensor<?x?x?x?xf32>
}

func.func @broadcast_assert(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %rows = tensor.dim %x, %c0 : tensor<?x8xf32>
  %other = tensor.dim %y, %c0 : tensor<?x8xf32>
  %same = arith.cmpi eq, %rows, %other : index
  cf.assert %same, "mismatched size for broadcast"
  %sum = arith.addf %x, %y : tensor<?x8xf32>
  return %sum : tensor<?x8xf32>
}

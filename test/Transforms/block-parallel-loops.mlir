// RUN: fff-opt %s --fff-block-parallel-loops --split-input-file | FileCheck %s
// RUN: fff-opt %s --fff-block-parallel-loops=threads=3 --split-input-file | FileCheck %s --check-prefix=THREE
// RUN: not fff-opt %s --fff-block-parallel-loops=threads=-1 --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: threads must be 0 (the runtime's workers) or positive, not -1

// A row loop becomes one block of rows per worker thread of the async
// runtime (no more blocks than rows), each a serial loop over its rows in
// order, with the strategy kept.
// CHECK-LABEL: func.func @rows
// CHECK-SAME:    (%[[BUFFER:.*]]: memref<?xf32>, %[[LOWER:.*]]: index, %[[UPPER:.*]]: index)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : index
// CHECK:         %[[SPAN:.*]] = arith.subi %[[UPPER]], %[[LOWER]] : index
// CHECK:         %[[NONNEGATIVE:.*]] = arith.maxsi %[[SPAN]], %[[C0]] : index
// CHECK:         %[[ROWS:.*]] = arith.ceildivui %[[NONNEGATIVE]], %[[C2]] : index
// CHECK:         %[[WORKERS:.*]] = async.runtime.num_worker_threads : index
// CHECK:         %[[BLOCKS:.*]] = arith.minui %[[ROWS]], %[[WORKERS]] : index
// CHECK:         %[[SOME:.*]] = arith.maxui %[[BLOCKS]], %[[C1]] : index
// CHECK:         %[[SIZE:.*]] = arith.ceildivui %[[ROWS]], %[[SOME]] : index
// CHECK:         scf.parallel (%[[BLOCK:.*]]) = (%[[C0]]) to (%[[BLOCKS]]) step (%[[C1]]) {
// CHECK:           %[[FIRST:.*]] = arith.muli %[[BLOCK]], %[[SIZE]] : index
// CHECK:           %[[NEXT:.*]] = arith.addi %[[FIRST]], %[[SIZE]] : index
// CHECK:           %[[END:.*]] = arith.minui %[[NEXT]], %[[ROWS]] : index
// CHECK:           %[[END_OFFSET:.*]] = arith.muli %[[END]], %[[C2]] : index
// CHECK:           %[[END_ROW:.*]] = arith.addi %[[LOWER]], %[[END_OFFSET]] : index
// CHECK:           %[[FIRST_OFFSET:.*]] = arith.muli %[[FIRST]], %[[C2]] : index
// CHECK:           %[[FIRST_ROW:.*]] = arith.addi %[[LOWER]], %[[FIRST_OFFSET]] : index
// CHECK:           scf.for %[[ROW:.*]] = %[[FIRST_ROW]] to %[[END_ROW]] step %[[C2]] {
// CHECK:             memref.store %{{.*}}, %[[BUFFER]][%[[ROW]]] : memref<?xf32>
// CHECK:           }
// CHECK:           scf.reduce
// CHECK:         } {fff.strategy = {lanes = 16 : i64}}

// With threads=3, three blocks at most.
// THREE-LABEL: func.func @rows
// THREE-NOT:     async.runtime.num_worker_threads
// THREE:         %[[THREE:.*]] = arith.constant 3 : index
// THREE:         arith.minui %{{.*}}, %[[THREE]] : index
func.func @rows(%buffer: memref<?xf32>, %lower: index, %upper: index) {
  %c2 = arith.constant 2 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%row) = (%lower) to (%upper) step (%c2) {
    memref.store %one, %buffer[%row] : memref<?xf32>
    scf.reduce
  } {fff.strategy = {lanes = 16 : i64}}
  return
}

// -----

// Loops over two dims, or with reductions, are left as they are.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:     async.runtime.num_worker_threads
// CHECK:         scf.parallel (%{{.*}}, %{{.*}}) = (%{{.*}}, %{{.*}}) to
// CHECK:         scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) init
func.func @left_alone(%buffer: memref<?x?xf32>, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %n) step (%c1, %c1) {
    memref.store %zero, %buffer[%i, %j] : memref<?x?xf32>
    scf.reduce
  }
  %sum = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%zero) -> f32 {
    %v = memref.load %buffer[%i, %i] : memref<?x?xf32>
    scf.reduce(%v : f32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %a, %b : f32
      scf.reduce.return %s : f32
    }
  }
  return %sum : f32
}

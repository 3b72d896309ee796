// RUN: fff-opt %s --convert-elementwise-to-vector="vector-bits=512 outline=0" --split-input-file | FileCheck %s
// RUN: fff-opt %s --convert-elementwise-to-vector="vector-bits=256 outline=0" --split-input-file | FileCheck %s --check-prefix=AVX2
// RUN: not fff-opt %s --convert-elementwise-to-vector=vector-bits=300 --split-input-file 2>&1 | FileCheck %s --check-prefix=BITS

// BITS: vector-bits must be 0 (this host's), 128, 256 or 512, not 300

// A residual add: a loop over rows, threaded from 2^15 elements on (the
// strategy recorded on it), each row 16 lanes at a time, then its tail
// element by element with the payload as written.
// CHECK-LABEL: func.func @residual_add
// CHECK-SAME:    (%[[X:.*]]: tensor<?x1000xf32>, %[[Y:.*]]: tensor<?x1000xf32>)
// CHECK-DAG:     %[[XB:.*]] = bufferization.to_buffer %[[X]] read_only
// CHECK-DAG:     %[[YB:.*]] = bufferization.to_buffer %[[Y]] read_only
// CHECK:         %[[SUM:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x1000xf32>
// CHECK:         %[[LARGE:.*]] = arith.cmpi uge, %{{.*}}, %c32768
// CHECK:         scf.if %[[LARGE]] {
// CHECK:           scf.parallel (%[[ROW:.*]]) =
// CHECK:             %[[WHOLE:.*]] = arith.muli %{{.*}}, %c16
// CHECK:             scf.for %[[J:.*]] = %{{.*}} to %[[WHOLE]] step %c16
// CHECK:               %[[A:.*]] = vector.load %[[XB]][%[[ROW]], %[[J]]] : memref<?x1000xf32>, vector<16xf32>
// CHECK:               %[[B:.*]] = vector.load %[[YB]][%[[ROW]], %[[J]]] : memref<?x1000xf32>, vector<16xf32>
// CHECK:               %[[S:.*]] = arith.addf %[[A]], %[[B]] : vector<16xf32>
// CHECK:               vector.store %[[S]], %[[SUM]][%[[ROW]], %[[J]]]
// CHECK:             scf.for %[[K:.*]] = %[[WHOLE]] to %{{.*}} step %c1
// CHECK:               %[[AS:.*]] = memref.load %[[XB]][%[[ROW]], %[[K]]]
// CHECK:               %[[BS:.*]] = memref.load %[[YB]][%[[ROW]], %[[K]]]
// CHECK:               %[[SS:.*]] = arith.addf %[[AS]], %[[BS]] : f32
// CHECK:               memref.store %[[SS]], %[[SUM]][%[[ROW]], %[[K]]]
// CHECK:           } {fff.strategy = {lanes = 16 : i64, min_parallel_elements = 32768 : i64, vector_bits = 512 : i64}}
// CHECK:         } else {
// CHECK:           scf.for
// CHECK:         bufferization.to_tensor %[[SUM]]
// CHECK-NOT:     linalg.generic
// AVX2-LABEL: func.func @residual_add
// AVX2:         vector.load {{.*}} vector<8xf32>
// AVX2:         fff.strategy = {lanes = 8 : i64, min_parallel_elements = 32768 : i64, vector_bits = 256 : i64}
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @residual_add(%x: tensor<?x1000xf32>, %y: tensor<?x1000xf32>) -> tensor<?x1000xf32> {
  %c0 = arith.constant 0 : index
  %rows = tensor.dim %x, %c0 : tensor<?x1000xf32>
  %e = tensor.empty(%rows) : tensor<?x1000xf32>
  %r = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<?x1000xf32>, tensor<?x1000xf32>) outs(%e : tensor<?x1000xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x1000xf32>
  return %r : tensor<?x1000xf32>
}

// -----

// Rank 3: the two leading dims flattened into rows and split again per
// row. A bias along the row is a vector load; a scale per row (a size-1 dim
// read at 0) and a scalar operand are read once per row and broadcast; a
// captured constant is broadcast. 16-bit elements are loaded as they are.
// CHECK-LABEL: func.func @broadcasts
// CHECK-SAME:    (%[[X:.*]]: tensor<?x?x64xbf16>, %[[B:.*]]: tensor<64xf32>, %[[S:.*]]: tensor<?x?x1xf32>, %[[T:.*]]: f32)
// CHECK-DAG:     %[[XB:.*]] = bufferization.to_buffer %[[X]]
// CHECK-DAG:     %[[BB:.*]] = bufferization.to_buffer %[[B]]
// CHECK-DAG:     %[[SB:.*]] = bufferization.to_buffer %[[S]]
// CHECK:         scf.parallel (%[[ROW:.*]]) =
// CHECK:           %[[AT:.*]]:2 = affine.delinearize_index %[[ROW]] into
// CHECK:           %[[SCALE:.*]] = memref.load %[[SB]][%[[AT]]#0, %[[AT]]#1, %c0
// CHECK-DAG:       %[[SCALES:.*]] = vector.broadcast %[[SCALE]] : f32 to vector<16xf32>
// CHECK-DAG:       %[[TS:.*]] = vector.broadcast %[[T]] : f32 to vector<16xf32>
// CHECK:           scf.for %[[J:.*]] =
// CHECK:             %[[XV:.*]] = vector.load %[[XB]][%[[AT]]#0, %[[AT]]#1, %[[J]]] : memref<?x?x64xbf16>, vector<16xbf16>
// CHECK:             %[[BV:.*]] = vector.load %[[BB]][%[[J]]] : memref<64xf32>, vector<16xf32>
// CHECK:             %[[W:.*]] = arith.extf %[[XV]] : vector<16xbf16> to vector<16xf32>
// CHECK:             %[[M:.*]] = arith.mulf %[[W]], %[[SCALES]] : vector<16xf32>
// CHECK:             %[[P:.*]] = arith.addf %[[M]], %[[BV]] : vector<16xf32>
// CHECK:             %[[Q:.*]] = arith.addf %[[P]], %[[TS]] : vector<16xf32>
// CHECK:             %[[TWO:.*]] = arith.constant 2.0
// CHECK:             %[[TWOS:.*]] = vector.broadcast %[[TWO]] : f32 to vector<16xf32>
// CHECK:             %[[R:.*]] = arith.mulf %[[Q]], %[[TWOS]] : vector<16xf32>
// CHECK:             arith.truncf %[[R]] : vector<16xf32> to vector<16xbf16>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @broadcasts(%x: tensor<?x?x64xbf16>, %b: tensor<64xf32>, %s: tensor<?x?x1xf32>, %t: f32) -> tensor<?x?x64xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = tensor.dim %x, %c0 : tensor<?x?x64xbf16>
  %d1 = tensor.dim %x, %c1 : tensor<?x?x64xbf16>
  %e = tensor.empty(%d0, %d1) : tensor<?x?x64xbf16>
  %r = linalg.generic {indexing_maps = [#id3, affine_map<(d0, d1, d2) -> (d2)>,
                                        affine_map<(d0, d1, d2) -> (d0, d1, 0)>,
                                        affine_map<(d0, d1, d2) -> ()>, #id3],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %b, %s, %t : tensor<?x?x64xbf16>, tensor<64xf32>, tensor<?x?x1xf32>, f32)
      outs(%e : tensor<?x?x64xbf16>) {
  ^bb0(%xv: bf16, %bv: f32, %sv: f32, %tv: f32, %o: bf16):
    %w = arith.extf %xv : bf16 to f32
    %m = arith.mulf %w, %sv : f32
    %p = arith.addf %m, %bv : f32
    %q = arith.addf %p, %tv : f32
    %two = arith.constant 2.0 : f32
    %r = arith.mulf %q, %two : f32
    %n = arith.truncf %r : f32 to bf16
    linalg.yield %n : bf16
  } -> tensor<?x?x64xbf16>
  return %r : tensor<?x?x64xbf16>
}

// -----

// What the vector loops do not take stays a linalg.generic, for
// convert-linalg-to-loops: a transposed input (its row is not contiguous),
// a reduction, an index-dependent payload, a payload that reads its result
// (an accumulation), i1 tensors (LLVM packs vectors of i1 into bits; a
// buffer holds a byte each), an op that is not elementwise, math.fpowi
// (whose exponent would become a vector, which LLVM's powi does not take),
// an input whose innermost dim is a broadcast one after the row's (its row
// is not contiguous), and a rank-0 op.
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-9: linalg.generic
// CHECK-NOT:     vector.load
func.func @left_alone(%x: tensor<8x16xf32>, %m: tensor<8x16xi1>, %zero_d: tensor<f32>, %column: tensor<16x1xf32>)
    -> (tensor<16x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xi1>, tensor<8x16xf32>,
        tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32>) {
  %e = tensor.empty() : tensor<8x16xf32>
  %et = tensor.empty() : tensor<16x8xf32>
  %e8 = tensor.empty() : tensor<8xf32>
  %ei1 = tensor.empty() : tensor<8x16xi1>
  %e0 = tensor.empty() : tensor<f32>
  %transposed = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>],
                                iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%et : tensor<16x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<16x8xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                         iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x16xf32>) outs(%e8 : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %indexed = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                             iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i32
    %f = arith.sitofp %ii : i32 to f32
    %s = arith.addf %a, %f : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  %accumulated = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                                 iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%x : tensor<8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  %masks = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                           iterator_types = ["parallel", "parallel"]}
      ins(%m : tensor<8x16xi1>) outs(%ei1 : tensor<8x16xi1>) {
  ^bb0(%a: i1, %o: i1):
    %t = arith.constant true
    %n = arith.xori %a, %t : i1
    linalg.yield %n : i1
  } -> tensor<8x16xi1>
  %extracted = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                               iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %c0 = arith.constant 0 : index
    %first = tensor.extract %x[%c0, %c0] : tensor<8x16xf32>
    %s = arith.addf %a, %first : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  %two = arith.constant 2 : i64
  %squared = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                             iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %p = math.fpowi %a, %two : f32, i64
    linalg.yield %p : f32
  } -> tensor<8x16xf32>
  %across = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, 0)>, affine_map<(d0, d1) -> (d0, d1)>],
                            iterator_types = ["parallel", "parallel"]}
      ins(%column : tensor<16x1xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<8x16xf32>
  %scalar = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%zero_d : tensor<f32>) outs(%e0 : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.addf %a, %a : f32
    linalg.yield %d : f32
  } -> tensor<f32>
  return %transposed, %sum, %indexed, %accumulated, %masks, %extracted, %squared, %across, %scalar
      : tensor<16x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xi1>, tensor<8x16xf32>,
        tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32>
}

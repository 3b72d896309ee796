// On a host with AVX512-BF16, f32 results are rounded to bf16 with
// vcvtneps2bf16 (x86vector's cvt.packed.f32_to_bf16). It reads subnormal
// inputs as zero and keeps a NaN's payload, so values that are either are
// rounded by arith.truncf instead: the same bits as integer-bf16, which
// never uses the instruction. vfpclassps (LLVM's x86 intrinsic, called by
// its name) finds them. A norm checks each row as a whole, and writes it
// again with arith.truncf if any lane needed it; the tree layers check each
// vector. The choice is recorded in fff.strategy. (bf16-rounding.py checks
// the bits.)
//
// REQUIRES: host-avx512bf16
// RUN: fff-opt %s --convert-fff-norms-to-vector=vector-bits=512 | FileCheck %s
// RUN: fff-opt %s --convert-fff-norms-to-vector=vector-bits=256 | FileCheck %s --check-prefix=AVX2
// RUN: fff-opt %s --convert-fff-norms-to-vector=vector-bits=128 | FileCheck %s --check-prefix=SSE
// RUN: fff-opt %s --convert-fff-norms-to-vector="vector-bits=512 integer-bf16" | FileCheck %s --check-prefix=INTEGER
// RUN: fff-opt %s --convert-fff-trees-to-vector=vector-bits=512 | FileCheck %s --check-prefix=TREE
// RUN: fff-opt %s --fff-cpu-pipeline | FileCheck %s --check-prefix=LLVM

// CHECK:         llvm.func @llvm.x86.avx512.fpclass.ps.512(vector<16xf32>, i32) -> vector<16xi1>
// CHECK-LABEL: func.func @rms_norm_bf16
// The row's whole vectors, then its masked tail, each collecting the lanes
// that are NaNs or subnormals (classes 0x01 | 0x20 | 0x80).
// CHECK:         %[[NONE:.*]] = arith.constant dense<false> : vector<16xi1>
// CHECK:         %[[WHOLE:.*]] = scf.for %{{.*}} iter_args(%[[SEEN:.*]] = %[[NONE]]) -> (vector<16xi1>) {
// CHECK:           %[[CONVERTED:.*]] = x86vector.avx512.cvt.packed.f32_to_bf16 %[[Y:.*]] : vector<16xf32> -> vector<16xbf16>
// CHECK:           vector.store %[[CONVERTED]]
// CHECK:           %[[CLASSES:.*]] = arith.constant 161 : i32
// CHECK:           %[[SPECIAL:.*]] = llvm.call @llvm.x86.avx512.fpclass.ps.512(%[[Y]], %[[CLASSES]])
// CHECK:           %[[MORE:.*]] = arith.ori %[[SEEN]], %[[SPECIAL]] : vector<16xi1>
// CHECK:           scf.yield %[[MORE]]
// CHECK:         %[[ALL:.*]] = scf.for %{{.*}} iter_args(%[[SEEN:.*]] = %[[WHOLE]]) -> (vector<16xi1>) {
// CHECK:           %[[TAIL:.*]] = vector.create_mask
// CHECK:           x86vector.avx512.cvt.packed.f32_to_bf16
// CHECK:           vector.maskedstore
// CHECK:           %[[SPECIAL:.*]] = llvm.call @llvm.x86.avx512.fpclass.ps.512
// CHECK:           %[[INSIDE:.*]] = arith.andi %[[SPECIAL]], %[[TAIL]] : vector<16xi1>
// CHECK:           %[[MORE:.*]] = arith.ori %[[SEEN]], %[[INSIDE]] : vector<16xi1>
// CHECK:           scf.yield %[[MORE]]
// If any lane was, the row again, rounded by arith.truncf alone.
// CHECK:         %[[ANY:.*]] = vector.reduction <or>, %[[ALL]] : vector<16xi1> into i1
// CHECK:         scf.if %[[ANY]] {
// CHECK-NOT:       x86vector
// CHECK:           arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK:           vector.store
// CHECK-NOT:       x86vector
// CHECK:           arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK:           vector.maskedstore
// CHECK:         }
// CHECK:         fff.strategy = {accumulators = 4 : i64, bf16_rounding = "avx512bf16", lanes = 16 : i64

// AVX2:          llvm.func @llvm.x86.avx512.fpclass.ps.256(vector<8xf32>, i32) -> vector<8xi1>
// AVX2:          x86vector.avx512.cvt.packed.f32_to_bf16 %{{.*}} : vector<8xf32> -> vector<8xbf16>
// AVX2:          llvm.call @llvm.x86.avx512.fpclass.ps.256
// AVX2:          fff.strategy = {accumulators = 4 : i64, bf16_rounding = "avx512bf16", lanes = 8 : i64

// The instruction has no 4-lane form.
// SSE-NOT:       x86vector
// SSE-NOT:       fpclass
// SSE:           fff.strategy = {accumulators = 4 : i64, bf16_rounding = "integer", lanes = 4 : i64

// INTEGER-NOT:   x86vector
// INTEGER-NOT:   fpclass
// INTEGER:       fff.strategy = {accumulators = 4 : i64, bf16_rounding = "integer", lanes = 16 : i64

// A tree layer's sums: each vector takes arith.truncf where it holds a NaN
// or a subnormal, in a branch.
// TREE-LABEL:  func.func @tree_ffn_bf16
// TREE:          %[[CONVERTED:.*]] = x86vector.avx512.cvt.packed.f32_to_bf16 %[[Y:.*]] : vector<16xf32> -> vector<16xbf16>
// TREE:          %[[SPECIAL:.*]] = llvm.call @llvm.x86.avx512.fpclass.ps.512(%[[Y]], %{{.*}})
// TREE:          %[[ANY:.*]] = vector.reduction <or>, %[[SPECIAL]] : vector<16xi1> into i1
// TREE:          %[[ROUNDED:.*]] = scf.if %[[ANY]] -> (vector<16xbf16>) {
// TREE:            %[[TRUNC:.*]] = arith.truncf %[[Y]] : vector<16xf32> to vector<16xbf16>
// TREE:            scf.yield %[[TRUNC]]
// TREE:          } else {
// TREE:            scf.yield %[[CONVERTED]]
// TREE:          }
// TREE:          vector.store %[[ROUNDED]]

// LLVM:          llvm.func @llvm.x86.avx512.fpclass.ps.512(vector<16xf32>, i32) -> vector<16xi1>
// LLVM:          llvm.call_intrinsic "llvm.x86.avx512bf16.cvtneps2bf16.512"
// LLVM:          llvm.call @llvm.x86.avx512.fpclass.ps.512
func.func @rms_norm_bf16(%x: tensor<?x768xbf16>, %g: tensor<768xbf16>) -> tensor<?x768xbf16> {
  %y = fff.rms_norm %x scale(%g : tensor<768xbf16>) : tensor<?x768xbf16>
  return %y : tensor<?x768xbf16>
}

func.func @tree_ffn_bf16(%x: tensor<?x40xbf16>, %wi: tensor<1x7x40xbf16>, %wo: tensor<1x7x40xbf16>) -> tensor<?x40xbf16> {
  %y = fff.tree_ffn %x, %wi, %wo {depth = 2 : i64} : tensor<?x40xbf16>, tensor<1x7x40xbf16>, tensor<1x7x40xbf16>
  return %y : tensor<?x40xbf16>
}

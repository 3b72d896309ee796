// On a host with AVX512-BF16, f32 results are rounded to bf16 with
// vcvtneps2bf16 (x86vector's cvt.packed.f32_to_bf16). It reads subnormal
// inputs as zero and keeps a NaN's payload, so a vector holding either is
// rounded by arith.truncf instead, in a branch: the same bits as
// integer-bf16, which never uses the instruction. The choice is recorded in
// fff.strategy. (bf16-rounding.py checks the bits.)
//
// REQUIRES: host-avx512bf16
// RUN: fff-opt %s --convert-fff-norms-to-vector=vector-bits=512 | FileCheck %s
// RUN: fff-opt %s --convert-fff-norms-to-vector=vector-bits=256 | FileCheck %s --check-prefix=AVX2
// RUN: fff-opt %s --convert-fff-norms-to-vector=vector-bits=128 | FileCheck %s --check-prefix=SSE
// RUN: fff-opt %s --convert-fff-norms-to-vector="vector-bits=512 integer-bf16" | FileCheck %s --check-prefix=INTEGER
// RUN: fff-opt %s --fff-cpu-pipeline | FileCheck %s --check-prefix=LLVM

// CHECK-LABEL: func.func @rms_norm_bf16
// CHECK:         %[[CONVERTED:.*]] = x86vector.avx512.cvt.packed.f32_to_bf16 %[[Y:.*]] : vector<16xf32> -> vector<16xbf16>
// CHECK:         %[[SPECIAL:.*]] = "llvm.intr.is.fpclass"(%[[Y]]) <{bit = 147 : i32}> : (vector<16xf32>) -> vector<16xi1>
// CHECK:         %[[ANY:.*]] = vector.reduction <or>, %[[SPECIAL]] : vector<16xi1> into i1
// CHECK:         %[[ROUNDED:.*]] = scf.if %[[ANY]] -> (vector<16xbf16>) {
// CHECK:           %[[TRUNC:.*]] = arith.truncf %[[Y]] : vector<16xf32> to vector<16xbf16>
// CHECK:           scf.yield %[[TRUNC]]
// CHECK:         } else {
// CHECK:           scf.yield %[[CONVERTED]]
// CHECK:         }
// CHECK:         vector.store %[[ROUNDED]]
// CHECK:         fff.strategy = {accumulators = 4 : i64, bf16_rounding = "avx512bf16", lanes = 16 : i64

// AVX2:          x86vector.avx512.cvt.packed.f32_to_bf16 %{{.*}} : vector<8xf32> -> vector<8xbf16>
// AVX2:          fff.strategy = {accumulators = 4 : i64, bf16_rounding = "avx512bf16", lanes = 8 : i64

// The instruction has no 4-lane form.
// SSE-NOT:       x86vector
// SSE:           fff.strategy = {accumulators = 4 : i64, bf16_rounding = "integer", lanes = 4 : i64

// INTEGER-NOT:   x86vector
// INTEGER-NOT:   fpclass
// INTEGER:       fff.strategy = {accumulators = 4 : i64, bf16_rounding = "integer", lanes = 16 : i64

// LLVM:          llvm.call_intrinsic "llvm.x86.avx512bf16.cvtneps2bf16.512"
func.func @rms_norm_bf16(%x: tensor<?x768xbf16>, %g: tensor<768xbf16>) -> tensor<?x768xbf16> {
  %y = fff.rms_norm %x scale(%g : tensor<768xbf16>) : tensor<?x768xbf16>
  return %y : tensor<?x768xbf16>
}

// A module that holds the name of the intrinsic fff calls (vfpclassps's)
// as something else keeps it, and gets the same check through
// llvm.intr.is.fpclass; one that holds the streaming-store fence's name gets
// ordinary stores. Neither is an error.
//
// REQUIRES: host-avx512bf16
// RUN: fff-opt %s --convert-fff-norms-to-vector=vector-bits=512 | FileCheck %s
// RUN: fff-opt %s --fff-cpu-pipeline -o /dev/null

// CHECK:       llvm.func @llvm.x86.avx512.fpclass.ps.512(f32) -> f32
// CHECK-NOT:   llvm.func @llvm.x86.avx512.fpclass
// CHECK:       func.func private @llvm.x86.sse.sfence(i32)
// CHECK-LABEL: func.func @rms_norm_bf16
// CHECK-NOT:     nontemporal
// CHECK:         x86vector.avx512.cvt.packed.f32_to_bf16
// CHECK-NOT:     llvm.call @llvm.x86.avx512.fpclass
// CHECK:         "llvm.intr.is.fpclass"(%{{.*}}) <{bit = 147 : i32}> : (vector<16xf32>) -> vector<16xi1>
llvm.func @llvm.x86.avx512.fpclass.ps.512(f32) -> f32
func.func private @llvm.x86.sse.sfence(i32)

func.func @rms_norm_bf16(%x: tensor<?x768xbf16>, %g: tensor<768xbf16>) -> tensor<?x768xbf16> {
  %y = fff.rms_norm %x scale(%g : tensor<768xbf16>) : tensor<?x768xbf16>
  return %y : tensor<?x768xbf16>
}

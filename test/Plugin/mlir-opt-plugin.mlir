// Debian's mlir-opt (mlir-22-tools) loads build/lib/FFFPlugin.so as a
// dialect and a pass plugin; both pipelines then give fff-opt's output,
// byte for byte (the GPU output but for how long PTX generation took).
//
// REQUIRES: mlir-opt
// RUN: mlir-opt %s --load-dialect-plugin=%fff_obj_root/lib/FFFPlugin.so --load-pass-plugin=%fff_obj_root/lib/FFFPlugin.so --pass-pipeline='builtin.module(fff-cpu-pipeline)' > %t.plugin.cpu
// RUN: fff-opt %s --fff-cpu-pipeline > %t.fff.cpu
// RUN: diff %t.plugin.cpu %t.fff.cpu
// RUN: mlir-opt %s --load-dialect-plugin=%fff_obj_root/lib/FFFPlugin.so --load-pass-plugin=%fff_obj_root/lib/FFFPlugin.so --pass-pipeline='builtin.module(fff-gpu-pipeline{chip=sm_90})' | sed -e 's/LLVMIRToISATimeInMs = [0-9]*/LLVMIRToISATimeInMs = 0/' > %t.plugin.gpu
// RUN: fff-opt %s --fff-gpu-pipeline=chip=sm_90 | sed -e 's/LLVMIRToISATimeInMs = [0-9]*/LLVMIRToISATimeInMs = 0/' > %t.fff.gpu
// RUN: diff %t.plugin.gpu %t.fff.gpu
// RUN: FileCheck %s < %t.plugin.gpu
// CHECK: gpu.binary @fff_kernels
//
// fff's own passes are there too (a plugin's passes are named in a
// pipeline: mlir-opt parsed its flags before it loaded them).
// RUN: mlir-opt %s --load-dialect-plugin=%fff_obj_root/lib/FFFPlugin.so --load-pass-plugin=%fff_obj_root/lib/FFFPlugin.so --pass-pipeline='builtin.module(fff-raise-norms, fff-fuse-norms, convert-fff-to-gpu)' | FileCheck %s --check-prefix=KERNEL
// KERNEL: gpu.func @fused_rms_norm_bf16_768_warp_per_row

func.func @residual_rms_norm(%x: tensor<?x768xbf16>, %r: tensor<?x768xbf16>, %g: tensor<768xbf16>) -> tensor<?x768xbf16> {
  %s = arith.addf %x, %r : tensor<?x768xbf16>
  %y = fff.rms_norm %s scale(%g : tensor<768xbf16>) : tensor<?x768xbf16>
  return %y : tensor<?x768xbf16>
}

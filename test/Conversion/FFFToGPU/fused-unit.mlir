// A pre-LN block's residual add, norm and epilogue become exactly one GPU
// kernel; the host code allocates nothing and launches once.
// RUN: fff-opt %S/Inputs/pre_ln_fused.mlir --fff-fuse-norms --convert-fff-to-gpu | FileCheck %s --check-prefix=KERNEL
// RUN: fff-opt %S/Inputs/pre_ln_fused.mlir --fff-gpu-pipeline | FileCheck %s --check-prefix=HOST
// RUN: fff-opt %S/Inputs/pre_ln_fused.mlir --fff-gpu-pipeline | fff-translate --fff-extract-ptx | FileCheck %s --check-prefix=PTX
// RUN: %if ptxas %{ fff-opt %S/Inputs/pre_ln_fused.mlir --fff-gpu-pipeline | fff-translate --fff-extract-ptx | %ptxas -arch=sm_90 -v - -o /dev/null 2>&1 | FileCheck %s --check-prefix=PTXAS %}

// KERNEL-LABEL: func.func @pre_ln
// KERNEL-COUNT-1: gpu.launch_func @fff_kernels::@fused_layer_norm_bf16_768_warp_per_row
// KERNEL-NOT:     gpu.launch_func
// KERNEL:         gpu.func @fused_layer_norm_bf16_768_warp_per_row
// The prologue (the residual add) runs on loaded vectors ...
// KERNEL:           arith.addf {{.*}} : vector<8xbf16>
// KERNEL:           gpu.shuffle xor
// ... and the epilogue on the normalized ones, both results stored.
// KERNEL:           arith.maximumf {{.*}} : vector<8xf32>
// KERNEL:           vector.store {{.*}} : memref<?x768xbf16>, vector<8xbf16>

// HOST-LABEL: llvm.func @pre_ln
// HOST-NOT:     malloc
// HOST-COUNT-1: gpu.launch_func
// HOST-NOT:     gpu.launch_func

// PTX-COUNT-1: .entry
// PTX-NOT:     .entry
// PTX:         ld.global.v4

// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

// RUN: fff-opt %s --fff-verify-lowered=allow-gpu-launches --verify-diagnostics

// Compiled kernels and launches on LLVM values are what the translation to
// LLVM IR takes.
module attributes {gpu.container_module} {
  gpu.binary @kernels [#gpu.object<#nvvm.target, "ptx">]
  llvm.func @launch(%n: i64, %p: !llvm.ptr) {
    gpu.launch_func @kernels::@k blocks in (%n, %n, %n) threads in (%n, %n, %n) : i64 args(%p : !llvm.ptr)
    llvm.return
  }
}

// fff's C API from C: a program linked against libFFFCAPI.so alone (no
// MLIR library, no C++) runs both pipelines, extracts PTX, describes the
// functions, and gets a pipeline's first error as one line.
//
// RUN: cc -std=c11 -Wall -Werror -I %fff_src_root/include -I %llvm_include_dir %S/Inputs/compile.c -L %fff_obj_root/lib -lFFFCAPI -Wl,-rpath,%fff_obj_root/lib -o %t.compile
// RUN: readelf -d %t.compile | FileCheck %s --check-prefix=NEEDS --implicit-check-not=libMLIR --implicit-check-not=libLLVM --implicit-check-not=libstdc++
// NEEDS: (NEEDED) Shared library: [libFFFCAPI.so]
// RUN: %t.compile %s fff-cpu-pipeline --print | FileCheck %s --check-prefix=CPU
// CPU: llvm.func @rms_norm
// RUN: %t.compile %s 'fff-gpu-pipeline{chip=sm_90}' --ptx | FileCheck %s --check-prefix=PTX
// PTX: .entry rms_norm_bf16_768_warp_per_row
// A fused unit's terminator is one to the MLIR library the program runs with:
// RUN: %t.compile %S/Inputs/residual-norm.mlir 'builtin.module(fff-fuse-norms)' --print | FileCheck %s --check-prefix=FUSED
// FUSED: fff.fusion
// FUSED: fff.yield
// RUN: %t.compile %S/Inputs/residual-norm.mlir fff-cpu-pipeline --print | FileCheck %s --check-prefix=FUSED-CPU
// FUSED-CPU: llvm.func @residual_rms_norm
// RUN: %t.compile %s none --describe | FileCheck %s --check-prefix=DESCRIBE
// DESCRIBE: [{"arguments":[{"element":"bf16","shape":[-1,768]},{"element":"bf16","shape":[768]}],"name":"rms_norm","results":[{"element":"bf16","shape":[-1,768]}]}]
// RUN: not %t.compile %s 'fff-gpu-pipeline{chip=sm_95}' --print 2>&1 | FileCheck %s --check-prefix=ERROR
// ERROR: unknown GPU chip 'sm_95'
// RUN: not %t.compile %s 'fff-cpu-pipeline{bogus=3}' --print 2>&1 | FileCheck %s --check-prefix=OPTION
// OPTION: bad option for fff-cpu-pipeline: no such option bogus
// RUN: not %t.compile %s 'no-such-pass' --print 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: no-such-pass

func.func @rms_norm(%x: tensor<?x768xbf16>, %g: tensor<768xbf16>) -> tensor<?x768xbf16> {
  %y = fff.rms_norm %x scale(%g : tensor<768xbf16>) : tensor<?x768xbf16>
  return %y : tensor<?x768xbf16>
}

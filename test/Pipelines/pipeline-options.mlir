// A pipeline's options are checked as it is added: an unknown option or a
// value of the wrong type is an error that names the pipeline (the option
// parser's own message named none, and a caller of fff's C API got only
// "failed to add").
//
// RUN: not fff-opt %s --pass-pipeline='builtin.module(fff-cpu-pipeline{bogus=3})' 2>&1 | FileCheck %s --check-prefix=CPU-UNKNOWN
// CPU-UNKNOWN: error: bad option for fff-cpu-pipeline: no such option bogus
// RUN: not fff-opt %s --fff-cpu-pipeline=threads=many 2>&1 | FileCheck %s --check-prefix=CPU-VALUE
// CPU-VALUE: error: bad option value for fff-cpu-pipeline in 'threads=many'
// RUN: not fff-opt %s --pass-pipeline='builtin.module(fff-gpu-pipeline{bogus=3})' 2>&1 | FileCheck %s --check-prefix=GPU-UNKNOWN
// GPU-UNKNOWN: error: bad option for fff-gpu-pipeline: no such option bogus
// RUN: not fff-opt %s --fff-gpu-pipeline=opt-level=x 2>&1 | FileCheck %s --check-prefix=GPU-VALUE
// GPU-VALUE: error: bad option value for fff-gpu-pipeline in 'opt-level=x'

func.func @rms_norm(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = fff.rms_norm %x : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

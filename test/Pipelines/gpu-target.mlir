// The GPU pipeline's chip and PTX features are checked before anything
// runs: a chip LLVM's NVPTX backend does not know, or a PTX version too old
// for it, is a one-line error (an LLVM abort before).
//
// RUN: not fff-opt %s --fff-gpu-pipeline=chip=sm_95 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: unknown GPU chip 'sm_95': LLVM's NVPTX backend knows sm_XX names such as sm_80, sm_90 or sm_90a
// RUN: not fff-opt %s --fff-gpu-pipeline=chip=sm_70 2>&1 | FileCheck %s --check-prefix=OLD
// OLD: error: GPU chip 'sm_70' is older than sm_75, the oldest fff compiles for
// RUN: not fff-opt %s --fff-gpu-pipeline="chip=sm_100 features=+ptx80" 2>&1 | FileCheck %s --check-prefix=PTX
// PTX: error: features '+ptx80' select PTX 8.0, but sm_100 needs PTX 8.6 or newer
// RUN: not fff-opt %s --fff-gpu-pipeline=features=+bogus 2>&1 | FileCheck %s --check-prefix=FEATURE
// FEATURE: error: unknown NVPTX feature '+bogus': expected +name, such as +ptx80
//
// Without a PTX version, the pipeline takes 8.0, or the chip's minimum when
// that is newer.
// RUN: fff-opt %s --fff-gpu-pipeline | fff-translate --fff-extract-ptx | FileCheck %s --check-prefix=SM90
// SM90: .version 8.0
// SM90: .target sm_90
// RUN: fff-opt %s --fff-gpu-pipeline=chip=sm_100 | fff-translate --fff-extract-ptx | FileCheck %s --check-prefix=SM100
// SM100: .version 8.6
// SM100: .target sm_100
// RUN: fff-opt %s --fff-gpu-pipeline="chip=sm_120 features=+ptx88" | fff-translate --fff-extract-ptx | FileCheck %s --check-prefix=SM120
// SM120: .version 8.8
// SM120: .target sm_120

func.func @rms_norm(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = fff.rms_norm %x : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

//===- GPUTarget.h - the NVPTX chip and PTX version to compile for -*- C++
//-*-===//

#ifndef FFF_PIPELINES_GPUTARGET_H
#define FFF_PIPELINES_GPUTARGET_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace fff {

/// What LLVM's NVPTX backend compiles kernels for.
struct GPUTarget {
  /// An SM architecture such as sm_90.
  std::string chip;
  /// NVPTX features, among them the PTX ISA version (+ptx80).
  std::string features;
};

/// Resolves the GPU pipeline's `chip` and `features` options. Fails, with a
/// one-line reason, for a chip LLVM's NVPTX backend does not know, a feature
/// it does not have, or a PTX version too old for the chip (where LLVM would
/// abort). Without a PTX version in `features`, PTX 8.0 is used, or the
/// chip's minimum when that is newer.
llvm::Expected<GPUTarget> resolveGPUTarget(llvm::StringRef chip,
                                           llvm::StringRef features);

} // namespace fff

#endif // FFF_PIPELINES_GPUTARGET_H

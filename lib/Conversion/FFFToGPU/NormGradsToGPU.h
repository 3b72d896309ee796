//===- NormGradsToGPU.h - norm backward ops to GPU kernels ------*- C++ -*-===//

#ifndef FFF_LIB_CONVERSION_FFFTOGPU_NORMGRADSTOGPU_H
#define FFF_LIB_CONVERSION_FFFTOGPU_NORMGRADSTOGPU_H

#include "mlir/IR/PatternMatch.h"

namespace fff {

/// The patterns lowering fff.layer_norm_grad and fff.rms_norm_grad to
/// their two kernels' launches. GPU only: the CPU twin mode leaves the ops
/// to the CPU path.
void populateNormGradsToGPUPatterns(mlir::RewritePatternSet &patterns);

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOGPU_NORMGRADSTOGPU_H

//===- NormGradsToGPU.h - norm backward ops to GPU kernels ------*- C++ -*-===//

#ifndef FFF_LIB_CONVERSION_FFFTOGPU_NORMGRADSTOGPU_H
#define FFF_LIB_CONVERSION_FFFTOGPU_NORMGRADSTOGPU_H

#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"

#include <string>

namespace fff {

/// The patterns lowering fff.layer_norm_grad and fff.rms_norm_grad to
/// their two kernels' launches. GPU only: the CPU twin mode leaves the ops
/// to the CPU path.
void populateNormGradsToGPUPatterns(mlir::RewritePatternSet &patterns);

/// Why `unit`, a norm backward's fused unit, cannot be the backward's
/// kernels with dy's prologue and dx's epilogue evaluated per vector, or ""
/// when it can.
std::string whyNormGradUnitIsNotOneKernel(FusionOp unit);

/// Lowers `unit` (whose converted inputs are `inputs`), for which
/// whyNormGradUnitIsNotOneKernel is "", to the backward's kernels.
mlir::LogicalResult
lowerNormGradUnit(FusionOp unit, mlir::ValueRange inputs,
                  mlir::ConversionPatternRewriter &rewriter);

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOGPU_NORMGRADSTOGPU_H

//===- TreeGradToGPU.h - fff.tree_ffn_grad to GPU kernels -------*- C++ -*-===//

#ifndef FFF_LIB_CONVERSION_FFFTOGPU_TREEGRADTOGPU_H
#define FFF_LIB_CONVERSION_FFFTOGPU_TREEGRADTOGPU_H

#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/IR/PatternMatch.h"

#include <string>

namespace fff {

/// The pattern lowering fff.tree_ffn_grad to its kernels' launches.
void populateTreeGradToGPUPatterns(mlir::RewritePatternSet &patterns);

/// Why `op` has no GPU kernels, or "" when it has them.
std::string whyTreeGradHasNoGPUKernel(TreeFFNGradOp op);

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOGPU_TREEGRADTOGPU_H

//===- TreeGradToGPU.h - the tree gradient ops to GPU kernels ---*- C++ -*-===//

#ifndef FFF_LIB_CONVERSION_FFFTOGPU_TREEGRADTOGPU_H
#define FFF_LIB_CONVERSION_FFFTOGPU_TREEGRADTOGPU_H

#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/IR/PatternMatch.h"

#include <string>

namespace fff {

/// The patterns lowering fff.tree_ffn_grad and fff.leaf_tree_ffn_grad to
/// their kernels' launches.
void populateTreeGradToGPUPatterns(mlir::RewritePatternSet &patterns);

/// Why the tree gradient op `op` has no GPU kernels, or "" when it has
/// them.
std::string whyTreeGradHasNoGPUKernel(mlir::Operation *op);

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOGPU_TREEGRADTOGPU_H

//===- TreeFFNToGPU.h - fff tree layers to GPU kernels ----------*- C++ -*-===//

#ifndef FFF_LIB_CONVERSION_FFFTOGPU_TREEFFNTOGPU_H
#define FFF_LIB_CONVERSION_FFFTOGPU_TREEFFNTOGPU_H

#include <string>

namespace mlir {
class Operation;
class RewritePatternSet;
} // namespace mlir

namespace fff {

/// Patterns lowering fff.tree_ffn and fff.leaf_tree_ffn to one kernel launch
/// each (or, with `cpuTwin`, to the kernel's CPU twin).
void populateTreeOpsToGPUPatterns(mlir::RewritePatternSet &patterns,
                                  bool cpuTwin);

/// Why the tree op `op` has no GPU kernel, or "" when it has one.
std::string whyTreeOpHasNoGPUKernel(mlir::Operation *op);

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOGPU_TREEFFNTOGPU_H

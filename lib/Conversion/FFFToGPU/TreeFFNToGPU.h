//===- TreeFFNToGPU.h - fff tree layers to GPU kernels ----------*- C++ -*-===//

#ifndef FFF_LIB_CONVERSION_FFFTOGPU_TREEFFNTOGPU_H
#define FFF_LIB_CONVERSION_FFFTOGPU_TREEFFNTOGPU_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/LogicalResult.h"

#include <string>

namespace mlir {
class Operation;
class RewritePatternSet;
} // namespace mlir

namespace fff {

/// Patterns lowering fff.tree_ffn and fff.leaf_tree_ffn to their kernels'
/// launches (or, with `cpuTwin`, to the kernels' CPU twins): both variants,
/// chosen by batch size, for `treeVariant` "auto"; only the one named by
/// "latency" or "throughput". Fails for any other `treeVariant`. Without
/// `staging`, no kernel stages rows in shared memory.
llvm::LogicalResult
populateTreeOpsToGPUPatterns(mlir::RewritePatternSet &patterns, bool cpuTwin,
                             llvm::StringRef treeVariant, bool staging);

/// Why the tree op `op` has no GPU kernel, or "" when it has one.
std::string whyTreeOpHasNoGPUKernel(mlir::Operation *op);

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOGPU_TREEFFNTOGPU_H

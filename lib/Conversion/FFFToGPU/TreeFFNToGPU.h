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

struct TreeProblem;
struct TreeStrategy;

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

/// The name of `op`'s kernel with `strategy` for `host`, e.g.
/// tree_ffn_bf16_768x768_depth11_latency.
std::string treeKernelName(mlir::Operation *op, const TreeStrategy &strategy,
                           const TreeProblem &host);

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOGPU_TREEFFNTOGPU_H

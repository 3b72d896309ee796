//===- FFFToGPU.h - fff ops to GPU kernels ----------------------*- C++ -*-===//

#ifndef FFF_CONVERSION_FFFTOGPU_FFFTOGPU_H
#define FFF_CONVERSION_FFFTOGPU_FFFTOGPU_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/LogicalResult.h"

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace fff {

/// Patterns lowering fff.layer_norm, fff.rms_norm, fff.fusion,
/// fff.tree_ffn and fff.leaf_tree_ffn to one kernel launch each, with the
/// strategies from KernelStrategy.h; with `cpuTwin`, to the kernels'
/// CPU-executable twins instead. Tree ops get both their latency and
/// throughput kernels, picked by batch size, unless `treeVariant` names one
/// ("latency" or "throughput"; "auto" for both); fails for any other name.
/// Without `treeStaging`, throughput kernels stage no rows.
/// Kernels may use math ops that convert-fff-to-gpu then approximates by
/// polynomials.
llvm::LogicalResult populateFFFToGPUPatterns(
    mlir::RewritePatternSet &patterns, bool cpuTwin = false,
    llvm::StringRef treeVariant = "auto", bool treeStaging = true);

} // namespace fff

#endif // FFF_CONVERSION_FFFTOGPU_FFFTOGPU_H

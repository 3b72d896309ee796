//===- TreeFFNToGPU.h - fff tree layers to GPU kernels ----------*- C++ -*-===//

#ifndef FFF_LIB_CONVERSION_FFFTOGPU_TREEFFNTOGPU_H
#define FFF_LIB_CONVERSION_FFFTOGPU_TREEFFNTOGPU_H

#include "TreeKernel.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/LogicalResult.h"

#include <functional>
#include <string>

namespace fff {

/// What the tree kernels are asked for: the CPU twins instead of kernels;
/// one variant only (latency or throughput) rather than both, picked by
/// batch size; and whether throughput kernels may stage rows.
struct TreeKernelOptions {
  bool cpuTwin = false;
  std::optional<TreeStrategy::Variant> variant;
  bool staging = true;
};

/// The options of convert-fff-to-gpu's flags; fails for a `treeVariant`
/// other than auto, latency and throughput.
llvm::FailureOr<TreeKernelOptions>
parseTreeKernelOptions(bool cpuTwin, llvm::StringRef treeVariant, bool staging);

/// Patterns lowering fff.tree_ffn and fff.leaf_tree_ffn to their kernels'
/// launches (or to the kernels' CPU twins).
void populateTreeOpsToGPUPatterns(mlir::RewritePatternSet &patterns,
                                  const TreeKernelOptions &options);

/// The size of `tensor`'s dim `dim`, or nullopt when dynamic.
std::optional<int64_t> staticDim(mlir::Value tensor, int64_t dim);

/// The static shape of the tree op `op` (tree_ffn, leaf_tree_ffn or their
/// _grad ops) that the strategies depend on, or failure with the reason in
/// `whyNot`.
llvm::FailureOr<TreeShape> treeShapeOf(mlir::Operation *op,
                                       std::string &whyNot);

/// Why the tree op `op` has no GPU kernel, or "" when it has one.
std::string whyTreeOpHasNoGPUKernel(mlir::Operation *op);

/// The strategies of the kernels `op` gets (latency first), with
/// `fusedRowBytesPerToken` of shared memory per token for a fused
/// sublayer's rows; failure, with the reason, when no kernel fits.
llvm::FailureOr<llvm::SmallVector<TreeStrategy>>
treeStrategiesFor(mlir::Operation *op, const TreeKernelOptions &options,
                  int64_t fusedRowBytesPerToken, std::string &whyNot);

/// Fills `p`'s weights, activation and shape from the tree op `op`, whose
/// operands have the host values `operands` (tensors); x, y and the row
/// count are the caller's.
void describeTreeWeights(mlir::ImplicitLocOpBuilder &b, mlir::Operation *op,
                         mlir::ValueRange operands, TreeProblem &p);

/// Runs `emit` for the one strategy, or for both under a branch on `rows`
/// with `builder` inside each side: the latency kernel for batches of up to
/// kTreeLatencyBoundTokens, the throughput kernel for larger ones.
void emitByBatchSize(mlir::OpBuilder &builder, mlir::Location loc,
                     mlir::Value rows, llvm::ArrayRef<TreeStrategy> strategies,
                     llvm::function_ref<void(const TreeStrategy &)> emit);

/// What a kernel built around the tree kernel (a fused sublayer's) adds to
/// it: its name, shared buffers after the tree's, parameters beyond the
/// tree's (rebound to the kernel's arguments), and `complete`, which
/// finishes the problem (its rows, its hooks) once those are the kernel's;
/// in the twin, given host copies of the shared buffers.
struct TreeKernelExtension {
  std::string name;
  llvm::SmallVector<mlir::Type> sharedBuffers;
  llvm::SmallVector<mlir::Value *> parameters;
  std::function<void(TreeProblem &, llvm::ArrayRef<mlir::Value> shared)>
      complete;
};

/// Builds the kernel of the tree op (or unit) `op` for `host` with
/// `strategy`, with `extension` if given, and launches it over the tokens;
/// or, with `cpuTwin`, emits its twin.
void buildTreeKernel(mlir::RewriterBase &rewriter, mlir::Operation *op,
                     const TreeStrategy &strategy, const TreeProblem &host,
                     bool cpuTwin,
                     const TreeKernelExtension *extension = nullptr);

/// <op>_<type>_<Din>x<Dout>_depth<d>[_trees<k>]_<suffix>: what a profiler
/// shows for a kernel of the tree op `op`.
std::string treeOpKernelName(mlir::Operation *op, mlir::Type elementType,
                             std::optional<int64_t> inWidth,
                             std::optional<int64_t> outWidth, int64_t trees,
                             llvm::StringRef suffix);

/// The name of `op`'s kernel with `strategy` for `host`, e.g.
/// tree_ffn_bf16_768x768_depth11_latency.
std::string treeKernelName(mlir::Operation *op, const TreeStrategy &strategy,
                           const TreeProblem &host);

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOGPU_TREEFFNTOGPU_H

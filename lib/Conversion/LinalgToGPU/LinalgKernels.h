//===- LinalgKernels.h - linalg ops on buffers as GPU kernels ---*- C++ -*-===//
//
// The two kernels every linalg op left in host code becomes: a tiled
// contraction for multiply-accumulate ops, and a loop nest with a thread
// per parallel point for everything else. Each replaces the op by a launch
// of a kernel in `gpu.module @fff_kernels`.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_LINALGTOGPU_LINALGKERNELS_H
#define FFF_LIB_CONVERSION_LINALGTOGPU_LINALGKERNELS_H

#include "fff/Conversion/FFFToGPU/KernelStrategy.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"

namespace fff {

/// The loop dims of a contraction the tiled kernel takes: batch dims, and
/// M, N and K dims (at least one each). Several M (or N, K) dims are taken
/// as one, numbered with the last fastest: a Linear on [batch, seq, hidden]
/// has two M dims.
struct ContractionDims {
  llvm::SmallVector<unsigned, 2> batch, m, n, k;
};

/// The dims of `op` (a linalg.generic on buffers) if the tiled kernel can
/// compute it: out += a * b over one reduction dim, with floats of at most
/// 32 bits, possibly widened before the product, and indexing maps that
/// are projected permutations. Anything else takes the loop-nest kernel.
std::optional<ContractionDims>
matchTiledContraction(mlir::linalg::GenericOp op);

/// Replaces `op` by a launch of a tiled contraction kernel named `name`:
/// `kernel`, the kernel of an identical op, when set; otherwise one made
/// here, which `kernel` is set to.
void emitContractionKernel(mlir::RewriterBase &rewriter,
                           mlir::linalg::GenericOp op,
                           const ContractionDims &dims,
                           const ContractionStrategy &strategy,
                           llvm::StringRef name, mlir::gpu::GPUFuncOp &kernel);

/// Whether two points of `op`'s parallel loops may write the same output
/// element: an output map that leaves out a parallel dim, names a
/// reduction dim, or is not a plain projection.
bool parallelPointsShareOutputs(mlir::linalg::GenericOp op);

/// Replaces `op` by a launch of a loop-nest kernel named `name`: `kernel`
/// as for emitContractionKernel.
void emitLoopNestKernel(mlir::RewriterBase &rewriter,
                        mlir::linalg::GenericOp op,
                        const LoopNestStrategy &strategy, llvm::StringRef name,
                        mlir::gpu::GPUFuncOp &kernel);

/// Why the body of `op` cannot run in a kernel (an op of a dialect with no
/// GPU lowering, a value from outside that is neither a scalar nor a
/// buffer), or "" if it can.
std::string whyBodyCannotRunOnGPU(mlir::linalg::GenericOp op);

/// The op's loop extents as host index values.
llvm::SmallVector<mlir::Value> loopSizes(mlir::OpBuilder &b,
                                         mlir::linalg::LinalgOp op);

/// The values `op`'s body uses from outside it: those a kernel can clone
/// (constants), and those it must take as parameters.
struct BodyCaptures {
  llvm::SmallVector<mlir::Value> cloned, parameters;
  explicit BodyCaptures(mlir::linalg::GenericOp op);
};

} // namespace fff

#endif // FFF_LIB_CONVERSION_LINALGTOGPU_LINALGKERNELS_H

//===- NormKernel.h - the per-row code of fff's norm kernels ----*- C++ -*-===//
//
// A norm kernel normalizes rows, a group of lanes per row, with the
// strategy KernelStrategy.h picks (warp per row, block per row, looped),
// as the body of a kernel or as its CPU twin. A fused sublayer kernel
// embeds one warp's row of it (emitNormRow).
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_FFFTOGPU_NORMKERNEL_H
#define FFF_LIB_CONVERSION_FFFTOGPU_NORMKERNEL_H

#include "fff/Conversion/FFFToGPU/KernelStrategy.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <functional>

namespace fff {

/// The buffers and parameters one norm kernel works on, with the input
/// viewed as a [rows, rowSize] matrix.
struct NormProblem {
  bool subtractMean; // layer_norm; rms_norm does not centre
  float epsilon;
  mlir::Value input, gamma, beta, output; // [rows, rowSize], [rowSize], ..
  mlir::Value mean, rstd;               // [rows] f32, or null
  mlir::Value rows, rowSize;            // index values
  std::optional<int64_t> staticRowSize;
  mlir::Type elementType;

  /// Where a fused unit computes the norm's input per vector instead of
  /// loading `input`, and stores its results instead of `output`: given the
  /// row, the vector index, the input vector (storage type) and the
  /// normalized vector (f32, after gamma and beta).
  std::function<mlir::Value(mlir::ImplicitLocOpBuilder &, mlir::Value row,
                            mlir::Value chunk)>
      loadInput;
  std::function<void(mlir::ImplicitLocOpBuilder &, mlir::Value row,
                     mlir::Value chunk, mlir::Value input,
                     mlir::Value normalized)>
      storeOutputs;

  /// A fused unit (null for a plain norm) and its buffers: one per unit
  /// input (a [rows, rowSize] matrix or a [rowSize] parameter), then one
  /// [rows, rowSize] matrix per unit result.
  FusionOp unit;
  llvm::SmallVector<mlir::Value> unitBuffers;
};


/// The body of a norm kernel: `threadId` and `blockId` are the thread's;
/// `sharedPartials`, 32 f32 of workgroup memory, is needed when a row takes
/// more than one warp.
void emitNormKernel(mlir::ImplicitLocOpBuilder &b, const NormStrategy &strategy,
                    const NormProblem &problem, mlir::Value threadId,
                    mlir::Value blockId, mlir::Value sharedPartials);

/// The CPU twin of that kernel: every row in turn, every lane in turn.
void emitNormTwin(mlir::ImplicitLocOpBuilder &b, const NormStrategy &strategy,
                  const NormProblem &problem);

/// Row `row` alone, as one warp of another kernel normalizes it: on the GPU
/// with this thread's `lane` (strategy.threadsPerRow must be a warp), in
/// the twin (`lane` null) every lane in turn.
void emitNormRow(mlir::ImplicitLocOpBuilder &b, const NormStrategy &strategy,
                 const NormProblem &problem, mlir::Value row,
                 mlir::Value lane);

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOGPU_NORMKERNEL_H

//===- NormGradKernel.h - the bodies of fff's norm backward kernels -*- C++
//-*-===//
//
// A norm backward runs as two kernels (NormGradStrategy in KernelStrategy.h):
// dx with per-block partial dgamma/dbeta rows, then the column sums of the
// partial rows. Both are GPU code only: the emulator runs them in CI, and
// convert-fff-to-gpu's twin mode leaves the backward ops to the CPU path.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_FFFTOGPU_NORMGRADKERNEL_H
#define FFF_LIB_CONVERSION_FFFTOGPU_NORMGRADKERNEL_H

#include "fff/Conversion/FFFToGPU/KernelStrategy.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <functional>
#include <optional>

namespace fff {

/// The buffers and parameters of one norm backward, with dy, x and dx as
/// [rows, rowSize] matrices.
struct NormGradProblem {
  bool subtractMean; // layer_norm_grad; rms_norm_grad does not centre
  /// rms_norm_grad's epsilon, for the rstd it recomputes when `rstd` is null.
  float epsilon;
  /// [rows, rowSize], .., [rowSize]|null; dy, x and dx are null where a
  /// fused unit computes and consumes them.
  mlir::Value gradOutput, input, gamma;
  mlir::Value mean, rstd; // [rows] f32; null when absent
  mlir::Value gradInput;  // [rows, rowSize]
  /// [blocks, rowSize] f32: the blocks' partial sums of dy * xhat (for
  /// dgamma) and of dy (for dbeta); null where that gradient is not wanted.
  mlir::Value gammaPartials, betaPartials;
  mlir::Value rows, rowSize; // index values
  std::optional<int64_t> staticRowSize;
  mlir::Type elementType;

  /// Where a fused unit computes dy per vector instead of loading
  /// `gradOutput` (a vector in dy's storage type), and consumes dx instead
  /// of storing it in `gradInput` (an f32 vector): given the row and the
  /// vector index.
  std::function<mlir::Value(mlir::ImplicitLocOpBuilder &, mlir::Value row,
                            mlir::Value chunk)>
      loadGradOutput;
  /// The same for x, where the unit computes it (a widening cast of a
  /// half-precision input): a vector in x's type.
  std::function<mlir::Value(mlir::ImplicitLocOpBuilder &, mlir::Value row,
                            mlir::Value chunk)>
      loadInput;
  std::function<void(mlir::ImplicitLocOpBuilder &, mlir::Value row,
                     mlir::Value chunk, mlir::Value gradInput)>
      storeGradInput;
};

/// The first kernel's body: `threadId` and `blockId` are the thread's;
/// `sharedPartials` is 32 f32 of workgroup memory for rows that take more
/// than one warp; `sharedColumns` holds a [rowSize] f32 workgroup buffer
/// per wanted parameter gradient (gamma's first) when a block has several
/// row groups.
void emitNormGradKernel(mlir::ImplicitLocOpBuilder &b,
                        const NormGradStrategy &strategy,
                        const NormGradProblem &problem, mlir::Value threadId,
                        mlir::Value blockId, mlir::Value sharedPartials,
                        llvm::ArrayRef<mlir::Value> sharedColumns);

/// The second kernel's body: `gradients[i]` ([rowSize], storage type) gets
/// the sum over the rows of `partials[i]` ([blocks, rowSize] f32), in row
/// order.
void emitColumnSumsKernel(mlir::ImplicitLocOpBuilder &b,
                          const NormGradStrategy &strategy,
                          mlir::ValueRange partials, mlir::ValueRange gradients,
                          mlir::Value rowSize, mlir::Value threadId,
                          mlir::Value blockId);

/// The number of partial rows (the first kernel's grid) and the rows each
/// takes, for `rows` rows; the kernel recomputes them the same way.
std::pair<mlir::Value, mlir::Value>
partialBlocksAndRows(mlir::ImplicitLocOpBuilder &b,
                     const NormGradStrategy &strategy, mlir::Value rows);

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOGPU_NORMGRADKERNEL_H

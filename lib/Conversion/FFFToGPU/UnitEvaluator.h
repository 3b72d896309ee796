//===- UnitEvaluator.h - a fused unit's values, a vector at a time -*- C++
//-*-===//
//
// Fused units (fff.fusion) become one kernel whose per-vector code evaluates
// the unit's pointwise ops around its fff ops: the prologue that computes a
// norm's input, the epilogue that consumes its output.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_FFFTOGPU_UNITEVALUATOR_H
#define FFF_LIB_CONVERSION_FFFTOGPU_UNITEVALUATOR_H

#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/DenseMap.h"

namespace fff {

/// Evaluates a unit's tensor values at one vector of one row: block
/// arguments load from their buffers, elementwise ops run on vectors.
/// Values can be seeded (a kernel's own results, such as the normalized
/// row), and everything else the unit computes from them and its inputs is
/// computed on demand, once.
class UnitVectorEvaluator {
public:
  /// `buffers` holds one buffer per unit input: a [rows, width] matrix, a
  /// [width] parameter, or null for an input the kernel never reads.
  UnitVectorEvaluator(mlir::ImplicitLocOpBuilder &b, FusionOp unit,
                      llvm::ArrayRef<mlir::Value> buffers, int64_t width,
                      mlir::Value row, mlir::Value chunk)
      : b(b), unit(unit), buffers(buffers), width(width), row(row),
        chunk(chunk) {}

  void seed(mlir::Value tensor, mlir::Value vector) { values[tensor] = vector; }

  /// `tensor`'s vector at this row and vector index.
  mlir::Value get(mlir::Value tensor);

  /// `vector` stored at this row and vector index of `buffer`.
  void store(mlir::Value vector, mlir::Value buffer);

private:
  mlir::VectorType vectorOf(mlir::Type type);
  mlir::Value column();
  llvm::MaybeAlign alignment(mlir::Type vectorType);
  mlir::Value splat(mlir::Attribute scalar, mlir::Type type);
  mlir::Value compute(mlir::Value tensor);
  mlir::Operation *cloneVectorized(mlir::Operation &op,
                                   mlir::IRMapping &mapping);
  mlir::Value vectorized(mlir::Value scalar, mlir::IRMapping &mapping);

  mlir::ImplicitLocOpBuilder &b;
  FusionOp unit;
  llvm::ArrayRef<mlir::Value> buffers;
  int64_t width;
  mlir::Value row, chunk;
  llvm::DenseMap<mlir::Value, mlir::Value> values;
};

/// Why the evaluator cannot take `op`, a pointwise op of a unit whose rows
/// have rank `rank`, or "" when it can: elementwise ops, linalg.generic
/// reading each input elementwise or per column, scalar and splat
/// constants.
std::string whyUnitEvaluatorCannotTake(mlir::Operation &op, int64_t rank);

/// Why the evaluator cannot take one of the ops of `unit`'s body other than
/// `kernelOps` (the fff ops whose kernel it feeds), or "" when it can take
/// them all.
std::string whyUnitEvaluatorCannotTakeBody(
    FusionOp unit, llvm::ArrayRef<mlir::Operation *> kernelOps, int64_t rank);

/// Why the evaluator cannot load or store a tensor of `type` (a unit's
/// input or result) a vector at a time, or "" when it can: floats and
/// integers of whole bytes. A buffer of i1 holds a byte per element, where
/// a vector of i1 packs its lanes into bits.
std::string whyUnitEvaluatorCannotMove(mlir::Type type);

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOGPU_UNITEVALUATOR_H

//===- RowEmitter.h - CPU vector code over a norm's rows --------*- C++ -*-===//
//
// What the norm lowerings (forward, NormsToVector.cpp, and backward,
// NormGradsToVector.cpp) share: a norm's buffers viewed as [rows, n], its
// affine parameters widened once, and the vector loops over one row.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_FFFTOVECTOR_ROWEMITTER_H
#define FFF_LIB_CONVERSION_FFFTOVECTOR_ROWEMITTER_H

#include "LaneWise.h"
#include "VectorEmitter.h"
#include "fff/Conversion/FFFToVector/CPUNormStrategy.h"
#include "fff/Conversion/RowLoops.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <optional>

namespace fff {

/// The rows of a norm as buffers, and the vector code over one row: `x` and
/// `y` viewed as [rows, n], the affine parameters as [n].
class RowEmitter : public VectorEmitter {
public:
  RowEmitter(mlir::ImplicitLocOpBuilder &b, const CPUNormStrategy &strategy)
      : VectorEmitter(b, strategy), strategy(strategy) {}

  /// A fresh buffer shaped like `type`, whose dynamic extents are those of
  /// `like` (a buffer of the same rank).
  mlir::Value alloc(mlir::RankedTensorType type, mlir::Value like) {
    return VectorEmitter::alloc(type, type.getElementType(), [&](int64_t dim) {
      return mlir::memref::DimOp::create(b, like, dim).getResult();
    });
  }

  /// An empty tensor shaped like `type`, whose dynamic extents are those of
  /// `like` (a buffer of the same rank): what stands for a result that an
  /// epilogue took over, so that nothing stores it.
  mlir::Value emptyLike(mlir::RankedTensorType type, mlir::Value like) {
    llvm::SmallVector<mlir::Value> extents;
    for (int64_t dim = 0; dim < type.getRank(); ++dim)
      if (type.isDynamicDim(dim))
        extents.push_back(mlir::memref::DimOp::create(b, like, dim));
    return mlir::tensor::EmptyOp::create(b, type.getShape(),
                                         type.getElementType(), extents);
  }

  /// The vector at (row, column) of `epilogue`, an elementwise op that
  /// alone reads a producer's result: its body on `result` (the producer's
  /// f32 vector, rounded first to the result's `element` type, as a store
  /// would) and on its other operands' rows (`inputs`: [rows, n] views, null
  /// in the result's place).
  mlir::Value evaluateEpilogue(mlir::linalg::GenericOp epilogue,
                               mlir::ArrayRef<mlir::Value> inputs,
                               mlir::Value result, mlir::Type element,
                               mlir::Value row, mlir::Value column,
                               mlir::Value mask) {
    mlir::Value rounded = element.isF32() ? result : narrow(result, element);
    llvm::SmallVector<mlir::Value> operands;
    for (mlir::Value source : inputs)
      operands.push_back(source ? loadRaw(source, {row, column}, mask)
                                : rounded);
    return evaluateLaneWise(b, *epilogue.getBody(), operands, getLanes())
        .front();
  }

  /// `buffer` viewed as [rows, n]: its first `leadingRank` dims and the rest
  /// each collapsed into one (no leading dims: one row).
  mlir::Value rowsView(mlir::Value buffer, int64_t leadingRank) {
    int64_t rank = mlir::cast<mlir::MemRefType>(buffer.getType()).getRank();
    if (leadingRank == 0) {
      mlir::Value flat = flatView(buffer);
      auto flatType = mlir::cast<mlir::MemRefType>(flat.getType());
      int64_t extent = flatType.getDimSize(0);
      mlir::OpFoldResult n =
          mlir::ShapedType::isDynamic(extent)
              ? mlir::OpFoldResult(mlir::memref::DimOp::create(b, flat, 0))
              : mlir::OpFoldResult(b.getIndexAttr(extent));
      auto type = mlir::MemRefType::get({1, extent}, flatType.getElementType());
      return mlir::memref::ExpandShapeOp::create(
          b, type, flat, llvm::ArrayRef<mlir::ReassociationIndices>{{0, 1}},
          llvm::ArrayRef<mlir::OpFoldResult>{b.getIndexAttr(1), n});
    }
    if (rank == 2 && leadingRank == 1)
      return buffer;
    mlir::ReassociationIndices leading, normalized;
    for (int64_t dim = 0; dim < rank; ++dim)
      (dim < leadingRank ? leading : normalized).push_back(dim);
    return mlir::memref::CollapseShapeOp::create(
        b, buffer,
        llvm::ArrayRef<mlir::ReassociationIndices>{leading, normalized});
  }

  /// `buffer` with all its dims collapsed into one; null stays null.
  mlir::Value flatView(mlir::Value buffer) {
    if (!buffer)
      return mlir::Value();
    int64_t rank = mlir::cast<mlir::MemRefType>(buffer.getType()).getRank();
    if (rank == 1)
      return buffer;
    mlir::ReassociationIndices all;
    for (int64_t dim = 0; dim < rank; ++dim)
      all.push_back(dim);
    return mlir::memref::CollapseShapeOp::create(
        b, buffer, llvm::ArrayRef<mlir::ReassociationIndices>{all});
  }

  /// `parameter` (a scale or bias of `n` elements; null stays null) in f32:
  /// a 16-bit one is widened once, into a fresh buffer, rather than for
  /// every row.
  mlir::Value widenedOnce(mlir::Value parameter, mlir::Value n) {
    if (!parameter || mlir::cast<mlir::MemRefType>(parameter.getType())
                          .getElementType()
                          .isF32())
      return parameter;
    mlir::Value wide = VectorEmitter::alloc(
        mlir::MemRefType::get({mlir::ShapedType::kDynamic}, b.getF32Type()), n);
    auto widen = [&](mlir::Value j, mlir::Value mask) {
      store(load(parameter, j, mask), wide, j, mask);
    };
    forEachStep(
        n, lanes, [&](mlir::Value j) { widen(j, mlir::Value()); }, widen);
    return wide;
  }

  /// Loads the f32 vector of a norm's input at (row, column), under a mask
  /// if given.
  using RowLoader = llvm::function_ref<mlir::Value(
      mlir::Value row, mlir::Value column, mlir::Value mask)>;

  /// The sum over row `row` of the norm's input of term(x), one f32.
  mlir::Value reduceRow(RowLoader x, mlir::Value row, mlir::Value n,
                        llvm::function_ref<mlir::Value(mlir::Value)> term) {
    return reduce(
        n, strategy.accumulators,
        [&](mlir::Value j, mlir::Value partial,
            mlir::Value mask) -> mlir::Value {
          mlir::Value contribution = term(x(row, j, mask));
          // term(0) need not be 0: masked-off lanes add nothing.
          if (mask)
            contribution =
                mlir::arith::SelectOp::create(b, mask, contribution, zeros());
          return mlir::arith::AddFOp::create(b, partial, contribution);
        });
  }

  /// y[row, :] = compute(x[row, :], column, mask), a vector at a time; the
  /// last vector of a ragged row is masked.
  void
  writeRow(RowLoader x, mlir::Value y, mlir::Value row, mlir::Value n,
           llvm::function_ref<mlir::Value(mlir::Value x, mlir::Value column,
                                          mlir::Value mask)>
               compute) {
    writeCheckedRow(n,
                    mlir::cast<mlir::MemRefType>(y.getType()).getElementType(),
                    [&](mlir::Value j, mlir::Value mask) {
                      mlir::Value value = compute(x(row, j, mask), j, mask);
                      store(value, y, {row, j}, mask);
                      return value;
                    });
  }

  /// rsqrt(sum / n + epsilon).
  mlir::Value reciprocalRoot(mlir::Value sum, mlir::Value inverseCount,
                             mlir::Value epsilon) {
    mlir::Value mean = mlir::arith::MulFOp::create(b, sum, inverseCount);
    return mlir::math::RsqrtOp::create(
        b, mlir::arith::AddFOp::create(b, mean, epsilon));
  }

  /// The loop over [0, rows), whose `body` builds one row; threaded for
  /// norms of at least `strategy.minParallelElements` elements.
  void forEachRow(mlir::Value rows, mlir::Value n,
                  llvm::function_ref<void(mlir::Value row)> body) {
    buildRowLoop(b, rows, mlir::arith::MulIOp::create(b, rows, n),
                 strategy.minParallelElements, strategy.toAttr(b.getContext()),
                 body);
  }

private:
  const CPUNormStrategy &strategy;
};

/// The product of a norm's normalized extents, when all are static and it
/// fits in int64_t (past that, the row is treated as of unknown size).
inline std::optional<int64_t> staticRowSize(mlir::RankedTensorType type,
                                            int64_t normalizedRank) {
  std::optional<int64_t> size = 1;
  for (int64_t extent : type.getShape().take_back(normalizedRank)) {
    if (mlir::ShapedType::isDynamic(extent))
      return std::nullopt;
    size = llvm::checkedMul(*size, extent);
    if (!size)
      return std::nullopt;
  }
  return size;
}

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOVECTOR_ROWEMITTER_H

//===- RowView.h - a norm's tensors as the matrices kernels take -*- C++
//-*-===//
//
// The host side of every norm kernel, forward and backward: the tensors a
// norm works on, viewed as [rows, rowSize] buffers (the leading dims, then
// the normalized dims), per-row statistics as [rows] vectors, parameters as
// [rowSize] vectors, and results allocated in their final shape.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_FFFTOGPU_ROWVIEW_H
#define FFF_LIB_CONVERSION_FFFTOGPU_ROWVIEW_H

#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <optional>

namespace fff {

/// The dims [begin, end), as one reassociation group.
mlir::ReassociationIndices dimRange(int64_t begin, int64_t end);

/// `input` and tensors of its shape as [rows, rowSize] buffers: the dims
/// before the trailing `normalizedRank`, then those. With no leading dims,
/// a unit row dim is added first.
struct RowView {
  RowView(mlir::ImplicitLocOpBuilder &b, mlir::Value input,
          int64_t normalizedRank);

  /// `tensor`, of the input's shape, as a read-only [rows, rowSize] buffer.
  mlir::Value matrixOf(mlir::ImplicitLocOpBuilder &b, mlir::Value tensor) const;

  /// A fresh buffer shaped like `resultType` (an op result), with the
  /// input's dynamic sizes; results are allocated in their final shape so
  /// that bufferization can hand them to the caller as out-params.
  mlir::Value allocResult(mlir::ImplicitLocOpBuilder &b,
                          mlir::RankedTensorType resultType) const;

  /// An output buffer of the input's shape seen as the [rows, rowSize]
  /// matrix a kernel writes.
  mlir::Value outputMatrix(mlir::ImplicitLocOpBuilder &b,
                           mlir::Value output) const;

  /// A buffer of any shape seen as one flat vector: a [lead..., 1...]
  /// statistics buffer as one value per row, a parameter or its gradient
  /// as [rowSize].
  static mlir::Value flatBuffer(mlir::ImplicitLocOpBuilder &b,
                                mlir::Value buffer);
  static mlir::Value toTensor(mlir::ImplicitLocOpBuilder &b,
                              mlir::Value buffer);

  /// The element type of the rows.
  mlir::Type elementType() const;

  llvm::SmallVector<mlir::OpFoldResult> originalSizes;
  bool unitRowAdded = false;
  llvm::SmallVector<mlir::ReassociationIndices> matrixGroups, paramGroups;
  mlir::Value matrix, rows, rowSize;
  std::optional<int64_t> staticRowSize;
};

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOGPU_ROWVIEW_H

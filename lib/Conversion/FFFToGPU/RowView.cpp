//===- RowView.cpp - a norm's tensors as the matrices kernels take --------===//

#include "RowView.h"

#include "LaneEmitter.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace fff;

ReassociationIndices fff::dimRange(int64_t begin, int64_t end) {
  return llvm::to_vector_of<int64_t, 2>(llvm::seq<int64_t>(begin, end));
}

namespace {
/// `tensor` with a unit dim in front, for a norm over all of its dims.
Value withUnitRowDim(ImplicitLocOpBuilder &b, Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  SmallVector<int64_t> shape{1};
  llvm::append_range(shape, type.getShape());
  SmallVector<ReassociationIndices> expand;
  expand.push_back({0, 1});
  for (int64_t d = 2; d <= type.getRank(); ++d)
    expand.push_back({d});
  return tensor::ExpandShapeOp::create(
      b, RankedTensorType::get(shape, type.getElementType()), tensor, expand);
}
} // namespace

RowView::RowView(ImplicitLocOpBuilder &b, Value input, int64_t normalizedRank) {
  auto type = cast<RankedTensorType>(input.getType());
  originalSizes = tensor::getMixedSizes(b, b.getLoc(), input);
  int64_t rank = type.getRank();
  int64_t lead = rank - normalizedRank;
  if (lead == 0) {
    unitRowAdded = true;
    rank += 1;
    lead = 1;
  }
  ReassociationIndices rowDims, normalizedDims;
  for (int64_t d = 0; d < rank; ++d)
    (d < lead ? rowDims : normalizedDims).push_back(d);
  matrixGroups = {rowDims, normalizedDims};
  paramGroups = {dimRange(0, rank - lead)};
  matrix = matrixOf(b, input);
  auto matrixType = cast<MemRefType>(matrix.getType());
  rows = memref::DimOp::create(b, matrix, 0);
  rowSize = memref::DimOp::create(b, matrix, 1);
  staticRowSize = matrixType.isDynamicDim(1)
                      ? std::nullopt
                      : std::optional<int64_t>(matrixType.getDimSize(1));
}

Value RowView::matrixOf(ImplicitLocOpBuilder &b, Value tensor) const {
  return collapsedBuffer(b, unitRowAdded ? withUnitRowDim(b, tensor) : tensor,
                         matrixGroups);
}

Value RowView::allocResult(ImplicitLocOpBuilder &b,
                           RankedTensorType resultType) const {
  SmallVector<Value> dynamicSizes;
  for (int64_t d = 0; d < resultType.getRank(); ++d)
    if (resultType.isDynamicDim(d))
      dynamicSizes.push_back(
          getValueOrCreateConstantIndexOp(b, b.getLoc(), originalSizes[d]));
  return memref::AllocOp::create(
      b, MemRefType::get(resultType.getShape(), resultType.getElementType()),
      dynamicSizes);
}

Value RowView::outputMatrix(ImplicitLocOpBuilder &b, Value output) const {
  if (unitRowAdded) {
    Value flat = flatBuffer(b, output);
    auto flatType = cast<MemRefType>(flat.getType());
    return memref::ExpandShapeOp::create(
        b,
        MemRefType::get({1, flatType.getDimSize(0)}, flatType.getElementType()),
        flat, ArrayRef<ReassociationIndices>{{0, 1}},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1),
                               memref::getMixedSize(b, b.getLoc(), flat, 0)});
  }
  if (cast<MemRefType>(output.getType()).getRank() == 2)
    return output;
  return memref::CollapseShapeOp::create(b, output, matrixGroups);
}

Value RowView::flatBuffer(ImplicitLocOpBuilder &b, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  if (type.getRank() == 1)
    return buffer;
  return memref::CollapseShapeOp::create(
      b, buffer, ArrayRef<ReassociationIndices>{dimRange(0, type.getRank())});
}

Value RowView::toTensor(ImplicitLocOpBuilder &b, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  return bufferization::ToTensorOp::create(
      b, RankedTensorType::get(type.getShape(), type.getElementType()), buffer,
      /*restrict=*/true, /*writable=*/true);
}

Type RowView::elementType() const {
  return cast<MemRefType>(matrix.getType()).getElementType();
}

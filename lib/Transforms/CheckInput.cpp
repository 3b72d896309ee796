//===- CheckInput.cpp - reject IR that upstream passes mishandle ----------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

namespace fff {
#define GEN_PASS_DEF_CHECKINPUT
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// A `dim` op's constant index outside its operand's rank.
LogicalResult checkDimIndex(Operation *op, Value source, Value index) {
  auto type = dyn_cast<ShapedType>(source.getType());
  APInt constant;
  if (!type || !type.hasRank() ||
      !matchPattern(index, m_ConstantInt(&constant)))
    return success();
  int64_t value = constant.getSExtValue();
  if (value >= 0 && value < type.getRank())
    return success();
  return op->emitOpError() << "index " << value << " is out of range for rank "
                           << type.getRank();
}

/// A reshape's reassociation must name each dim of the expanded side once,
/// in order.
LogicalResult checkReassociation(Operation *op,
                                 ArrayRef<ReassociationIndices> groups,
                                 int64_t expandedRank) {
  int64_t next = 0;
  for (const ReassociationIndices &group : groups)
    for (int64_t dim : group)
      if (dim != next++)
        return op->emitOpError()
               << "reassociation names dim " << dim << " where dim " << next - 1
               << " of " << expandedRank << " is expected";
  if (next != expandedRank)
    return op->emitOpError() << "reassociation covers " << next << " of "
                             << expandedRank << " dims";
  return success();
}

/// An expand_shape's static output_shape entries and its result type must
/// agree on which extents are static.
template <typename ExpandOp> LogicalResult checkExpandShape(ExpandOp op) {
  ShapedType type = op.getResultType();
  if (failed(
          checkReassociation(op, op.getReassociationIndices(), type.getRank())))
    return failure();
  for (auto [dim, extent] : llvm::enumerate(op.getStaticOutputShape())) {
    if (ShapedType::isDynamic(extent) == type.isDynamicDim(dim))
      continue;
    return op.emitOpError()
           << "output_shape dim " << dim << " is "
           << (ShapedType::isDynamic(extent) ? "dynamic" : "static")
           << " but the result type's is not";
  }
  return success();
}

struct CheckInputPass : fff::impl::CheckInputBase<CheckInputPass> {
  void runOnOperation() override {
    WalkResult result = getOperation()->walk([](Operation *op) {
      LogicalResult checked =
          llvm::TypeSwitch<Operation *, LogicalResult>(op)
              .Case([](tensor::DimOp dim) {
                return checkDimIndex(dim, dim.getSource(), dim.getIndex());
              })
              .Case([](memref::DimOp dim) {
                return checkDimIndex(dim, dim.getSource(), dim.getIndex());
              })
              .Case([](tensor::ExpandShapeOp expand) {
                return checkExpandShape(expand);
              })
              .Case([](memref::ExpandShapeOp expand) {
                return checkExpandShape(expand);
              })
              .Case([](tensor::CollapseShapeOp collapse) {
                return checkReassociation(collapse,
                                          collapse.getReassociationIndices(),
                                          collapse.getSrcType().getRank());
              })
              .Default([](Operation *) { return success(); });
      return failed(checked) ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

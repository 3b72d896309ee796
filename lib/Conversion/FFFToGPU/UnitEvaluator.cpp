//===- UnitEvaluator.cpp - a fused unit's values, a vector at a time ------===//

#include "UnitEvaluator.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace fff;

Value UnitVectorEvaluator::get(Value tensor) {
  if (Value known = values.lookup(tensor))
    return known;
  Value vector = compute(tensor);
  values[tensor] = vector;
  return vector;
}

void UnitVectorEvaluator::store(Value vector, Value buffer) {
  vector::StoreOp::create(b, vector, buffer, ValueRange{row, column()},
                          /*nontemporal=*/false, alignment(vector.getType()));
}

VectorType UnitVectorEvaluator::vectorOf(Type type) {
  return VectorType::get({width}, getElementTypeOrSelf(type));
}

Value UnitVectorEvaluator::column() {
  return arith::MulIOp::create(b, chunk,
                               arith::ConstantIndexOp::create(b, width));
}

/// Rows start at multiples of the vector width: a vector is aligned to its
/// size, up to 16 bytes.
llvm::MaybeAlign UnitVectorEvaluator::alignment(Type vectorType) {
  Type element = getElementTypeOrSelf(vectorType);
  return llvm::MaybeAlign(
      std::min<int64_t>(16, width * (element.getIntOrFloatBitWidth() / 8)));
}

Value UnitVectorEvaluator::splat(Attribute scalar, Type type) {
  return arith::ConstantOp::create(
      b, DenseElementsAttr::get(vectorOf(type), scalar));
}

Value UnitVectorEvaluator::compute(Value tensor) {
  if (auto arg = dyn_cast<BlockArgument>(tensor)) {
    Value buffer = buffers[arg.getArgNumber()];
    SmallVector<Value> indices;
    if (cast<MemRefType>(buffer.getType()).getRank() == 2)
      indices.push_back(row);
    indices.push_back(column());
    VectorType type = vectorOf(tensor.getType());
    return vector::LoadOp::create(b, type, buffer, indices,
                                  /*nontemporal=*/false, alignment(type));
  }
  Operation *op = tensor.getDefiningOp();
  DenseElementsAttr dense;
  if (matchPattern(op, m_Constant(&dense)))
    return splat(dense.getSplatValue<Attribute>(), tensor.getType());
  IRMapping mapping;
  if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
    for (auto [input, arg] :
         llvm::zip(generic.getDpsInputs(), generic.getRegionInputArgs()))
      mapping.map(arg, get(input));
    for (Operation &inner : generic.getBody()->without_terminator())
      cloneVectorized(inner, mapping);
    // The body may yield a constant from outside it.
    return vectorized(generic.getBody()->getTerminator()->getOperand(0),
                      mapping);
  }
  for (Value operand : op->getOperands())
    mapping.map(operand, get(operand));
  return cloneVectorized(*op, mapping)->getResult(0);
}

/// The vector `scalar` maps to: what `mapping` holds, or for a constant
/// from outside the body, the constant in every lane.
Value UnitVectorEvaluator::vectorized(Value scalar, IRMapping &mapping) {
  if (!mapping.contains(scalar)) {
    Attribute constant;
    matchPattern(scalar, m_Constant(&constant));
    mapping.map(scalar, splat(constant, scalar.getType()));
  }
  return mapping.lookup(scalar);
}

/// Clones a scalar or tensor elementwise op onto vectors.
Operation *UnitVectorEvaluator::cloneVectorized(Operation &op,
                                                IRMapping &mapping) {
  for (Value operand : op.getOperands())
    vectorized(operand, mapping);
  if (matchPattern(&op, m_Constant())) {
    Attribute scalar;
    matchPattern(op.getResult(0), m_Constant(&scalar));
    Value vector = splat(scalar, op.getResult(0).getType());
    mapping.map(op.getResult(0), vector);
    return vector.getDefiningOp();
  }
  Operation *clone = b.clone(op, mapping);
  for (OpResult result : clone->getResults())
    result.setType(vectorOf(result.getType()));
  return clone;
}

namespace {

/// A trailing projection (d0, ..., dn) -> (dk, ..., dn): how a per-column
/// parameter is read.
bool isTrailingProjection(AffineMap map, int64_t rank) {
  if (map.getNumDims() != unsigned(rank) ||
      map.getNumResults() > unsigned(rank))
    return false;
  int64_t first = rank - map.getNumResults();
  for (auto [i, expr] : llvm::enumerate(map.getResults()))
    if (expr != getAffineDimExpr(first + i, map.getContext()))
      return false;
  return true;
}

bool isScalarConstant(Value value) {
  return value.getType().isIntOrFloat() && matchPattern(value, m_Constant());
}

} // namespace

std::string fff::whyUnitEvaluatorCannotTake(Operation &op, int64_t rank) {
  if (op.getNumResults() == 1 && isScalarConstant(op.getResult(0)))
    return ""; // used by linalg.generic bodies, as a splat
  DenseElementsAttr dense;
  if (matchPattern(&op, m_Constant(&dense)))
    return dense.isSplat() ? "" : "a constant tensor that is not a splat";
  if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
    for (OpOperand *input : generic.getDpsInputOperands()) {
      AffineMap map = generic.getMatchingIndexingMap(input);
      if (!map.isIdentity() && !isTrailingProjection(map, rank))
        return "a linalg.generic input that is neither elementwise nor "
               "per-column";
    }
    if (!generic.getRegionOutputArgs()[0].use_empty())
      return "a linalg.generic that reads its output";
    bool closed = true;
    generic.getBody()->walk([&](Operation *inner) {
      for (Value operand : inner->getOperands())
        if (!generic.getRegion().isAncestor(operand.getParentRegion()) &&
            !isScalarConstant(operand))
          closed = false;
    });
    if (!closed)
      return "a linalg.generic body that uses a non-constant value from "
             "outside";
    return "";
  }
  if (!op.hasTrait<OpTrait::Elementwise>() || op.getNumRegions() != 0)
    return "an op that is not elementwise (" +
           op.getName().getStringRef().str() + ")";
  return "";
}

std::string fff::whyUnitEvaluatorCannotTakeBody(FusionOp unit,
                                                ArrayRef<Operation *> kernelOps,
                                                int64_t rank) {
  for (Operation &op : unit.getBody().front().without_terminator()) {
    if (llvm::is_contained(kernelOps, &op))
      continue;
    if (std::string whyNot = whyUnitEvaluatorCannotTake(op, rank);
        !whyNot.empty())
      return whyNot;
  }
  return "";
}

std::string fff::whyUnitEvaluatorCannotMove(Type type) {
  Type element = getElementTypeOrSelf(type);
  if (isa<FloatType>(element) ||
      (element.isInteger() && element.getIntOrFloatBitWidth() % 8 == 0))
    return "";
  std::string name;
  llvm::raw_string_ostream os(name);
  os << "an input or result of " << element
     << " (a byte an element in memory, a bit a lane in a vector)";
  return name;
}

//===- LaneWise.cpp - elementwise payloads evaluated on vectors -*- C++ -*-===//

#include "LaneWise.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;

bool fff::isLaneWisePayload(Block &body) {
  for (Operation &op : body.without_terminator()) {
    bool elementwise = OpTrait::hasElementwiseMappableTraits(&op) &&
                       op.getNumRegions() == 0 && op.getNumResults() == 1 &&
                       op.getResult(0).getType().isIntOrIndexOrFloat();
    if (!elementwise && !isa<arith::ConstantOp>(op))
      return false;
    // Its exponent would become a vector, and LLVM's powi takes a scalar.
    if (isa<math::FPowIOp>(op))
      return false;
    // A masked-off lane (a zero) would divide by zero and trap.
    if (isa<arith::DivSIOp, arith::DivUIOp, arith::CeilDivSIOp,
            arith::CeilDivUIOp, arith::FloorDivSIOp, arith::RemSIOp,
            arith::RemUIOp>(op))
      return false;
    for (Value operand : op.getOperands())
      if (operand.getParentBlock() != &body &&
          !operand.getType().isIntOrIndexOrFloat())
        return false;
  }
  return llvm::all_of(body.getTerminator()->getOperands(), [&](Value value) {
    return value.getParentBlock() == &body ||
           value.getType().isIntOrIndexOrFloat();
  });
}

bool fff::isVectorElement(Type type) {
  if (isa<FloatType>(type))
    return true;
  auto integer = dyn_cast<IntegerType>(type);
  return integer && llvm::is_contained({8u, 16u, 32u, 64u}, integer.getWidth());
}

bool fff::isSameShapeElementwise(linalg::GenericOp generic) {
  if (generic->getNumResults() != 1 || generic.getNumDpsInits() != 1 ||
      !generic.hasPureTensorSemantics() ||
      generic.payloadUsesValueFromOperand(generic.getDpsInitOperand(0)) ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isIdentity(); }))
    return false;
  auto resultType = cast<RankedTensorType>(generic->getResult(0).getType());
  if (!isVectorElement(resultType.getElementType()))
    return false;
  for (Value operand : generic.getDpsInputs()) {
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    if (!type || type.getShape() != resultType.getShape() ||
        !isVectorElement(type.getElementType()))
      return false;
  }
  return isLaneWisePayload(*generic.getBody());
}

linalg::GenericOp fff::elementwisePrologue(Value input) {
  auto generic = input.getDefiningOp<linalg::GenericOp>();
  if (!generic || !input.hasOneUse() || generic.getNumDpsInputs() == 0 ||
      !isSameShapeElementwise(generic))
    return {};
  return generic;
}

bool fff::isNarrowingEpilogue(linalg::GenericOp epilogue) {
  Block &body = *epilogue.getBody();
  if (epilogue.getNumDpsInputs() != 1 || body.getOperations().size() != 2)
    return false;
  auto narrow = dyn_cast<arith::TruncFOp>(body.front());
  return narrow && narrow.getIn() == body.getArgument(0) &&
         narrow.getIn().getType().isF32() && !narrow.getRoundingmodeAttr() &&
         body.getTerminator()->getOperand(0) == narrow.getResult();
}

linalg::GenericOp fff::elementwiseEpilogue(Value result, Operation *producer,
                                           bool extentsKept) {
  SmallVector<Operation *> readers;
  for (Operation *user : result.getUsers())
    if (!(extentsKept && isa<tensor::DimOp>(user)))
      readers.push_back(user);
  if (readers.size() != 1)
    return {};
  auto generic = dyn_cast<linalg::GenericOp>(readers.front());
  if (!generic || !isSameShapeElementwise(generic))
    return {};
  DominanceInfo dominance;
  for (Value input : generic.getDpsInputs())
    if (input != result && !dominance.properlyDominates(input, producer))
      return {};
  return generic;
}

SmallVector<Value> fff::evaluateLaneWise(ImplicitLocOpBuilder &b, Block &body,
                                         ValueRange operands, int64_t lanes) {
  auto lanesOf = [&](Type type) -> Type {
    return lanes ? VectorType::get({lanes}, type) : type;
  };
  IRMapping values;
  values.map(body.getArguments().take_front(operands.size()), operands);
  // A scalar from outside the body (a captured constant) is the same in
  // every lane.
  auto valueOf = [&](Value value) {
    if (!values.contains(value))
      values.map(value, lanes ? vector::BroadcastOp::create(
                                    b, lanesOf(value.getType()), value)
                              : value);
    return values.lookup(value);
  };
  for (Operation &op : body.without_terminator()) {
    for (Value operand : op.getOperands())
      valueOf(operand);
    Operation *copy = b.clone(op, values);
    if (lanes && isa<arith::ConstantOp>(op)) {
      values.map(op.getResult(0), vector::BroadcastOp::create(
                                      b, lanesOf(op.getResult(0).getType()),
                                      copy->getResult(0)));
      continue;
    }
    for (Value result : copy->getResults())
      result.setType(lanesOf(result.getType()));
    values.map(op.getResults(), copy->getResults());
  }
  // The body may yield a value from outside it.
  SmallVector<Value> results;
  for (Value yielded : body.getTerminator()->getOperands())
    results.push_back(valueOf(yielded));
  return results;
}

//===- FFFOps.cpp - fff operations: verifiers and type inference -*- C++ -*-===//

#include "fff/Dialect/FFF/IR/FFFOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>

using namespace mlir;
using namespace fff;

#include "fff/Dialect/FFF/IR/FFFEnums.cpp.inc"

namespace {

/// Checks operand shapes against a symbolic signature such as
/// `w_in: [K, N, Din]`. Every static extent bound to the same symbol must
/// agree; dynamic extents agree with anything. Ranks are checked by ODS before
/// the custom verifiers run, so `check` only sees operands of the right rank.
class ShapeSignature {
public:
  explicit ShapeSignature(Operation *op) : op(op) {}

  /// Fixes `symbol` to `value`, which an attribute implies; `reason` names it.
  void require(StringRef symbol, int64_t value, const Twine &reason) {
    bindings[symbol] = {value, reason.str()};
  }

  /// Checks `type` (null for an absent optional operand) against `dims`.
  LogicalResult check(StringRef name, Type type, ArrayRef<StringRef> dims) {
    auto shaped = dyn_cast_if_present<ShapedType>(type);
    if (!shaped)
      return success();
    for (auto [index, symbol] : llvm::enumerate(dims)) {
      int64_t extent = shaped.getDimSize(index);
      if (ShapedType::isDynamic(extent))
        continue;
      std::string source = (name + " dim " + Twine(index)).str();
      auto [it, inserted] = bindings.try_emplace(symbol, Binding{extent, source});
      if (inserted || it->second.value == extent)
        continue;
      return op->emitOpError()
             << name << " dim " << index << " (" << symbol << ") is " << extent
             << ", but " << it->second.source << " requires "
             << it->second.value;
    }
    return success();
  }

private:
  struct Binding {
    int64_t value;
    std::string source;
  };
  Operation *op;
  llvm::StringMap<Binding> bindings;
};

/// Checks that every named value (null = absent) has `elementType`.
LogicalResult
verifyElementTypes(Operation *op, Type elementType,
                   ArrayRef<std::pair<StringRef, Value>> namedValues) {
  for (auto [name, value] : namedValues) {
    if (!value)
      continue;
    Type actual = cast<ShapedType>(value.getType()).getElementType();
    if (actual != elementType)
      return op->emitOpError()
             << name << " element type " << actual
             << " does not match input element type " << elementType;
  }
  return success();
}

LogicalResult verifyDepth(Operation *op, int64_t depth, int64_t minDepth) {
  if (depth < minDepth || depth > kMaxTreeDepth)
    return op->emitOpError() << "depth must be in [" << minDepth << ", "
                             << kMaxTreeDepth << "], got " << depth;
  return success();
}

/// Emits the normalized_rank range error, through `emit` so that type
/// inference (which has only a location) and verifiers share the message.
template <typename EmitFn>
LogicalResult checkNormalizedRank(int64_t normalizedRank, int64_t inputRank,
                                  EmitFn emit) {
  if (normalizedRank >= 1 && normalizedRank <= inputRank)
    return success();
  emit() << "normalized_rank must be in [1, " << inputRank
         << "] (the input rank), got " << normalizedRank;
  return failure();
}

/// Shared verification of layer_norm and rms_norm: epsilon, normalized_rank,
/// and affine parameters shaped like the normalized (trailing) dims of input.
LogicalResult
verifyNorm(Operation *op, Value input, float epsilon, int64_t normalizedRank,
           ArrayRef<std::pair<StringRef, Value>> affineParams) {
  if (!(epsilon >= 0.0f) || std::isinf(epsilon))
    return op->emitOpError()
           << "epsilon must be finite and non-negative, got " << epsilon;

  auto inputType = cast<RankedTensorType>(input.getType());
  if (failed(checkNormalizedRank(normalizedRank, inputType.getRank(),
                                 [&] { return op->emitOpError(); })))
    return failure();

  if (failed(verifyElementTypes(op, inputType.getElementType(), affineParams)))
    return failure();

  ArrayRef<int64_t> normalizedShape =
      inputType.getShape().take_back(normalizedRank);
  // Statistics over zero elements are undefined (0/0).
  for (auto [index, extent] : llvm::enumerate(normalizedShape))
    if (extent == 0)
      return op->emitOpError()
             << "normalized dim " << inputType.getRank() - normalizedRank + index
             << " is empty; there is nothing to normalize over";
  for (auto [name, param] : affineParams) {
    if (!param)
      continue;
    auto paramType = cast<RankedTensorType>(param.getType());
    if (paramType.getRank() != normalizedRank)
      return op->emitOpError()
             << name << " must have rank " << normalizedRank
             << " (normalized_rank), got " << paramType.getRank();
    for (auto [index, pair] :
         llvm::enumerate(llvm::zip(paramType.getShape(), normalizedShape))) {
      auto [paramExtent, inputExtent] = pair;
      if (ShapedType::isDynamic(paramExtent) ||
          ShapedType::isDynamic(inputExtent) || paramExtent == inputExtent)
        continue;
      return op->emitOpError()
             << name << " dim " << index << " is " << paramExtent
             << ", but the normalized input dim "
             << inputType.getRank() - normalizedRank + index << " is "
             << inputExtent;
    }
  }
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// LayerNormOp
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  // While parsing, attributes that were not spelled out have no value yet:
  // defaults are filled in only when the op is created.
  Properties props;
  if (properties)
    props = *properties.as<Properties *>();
  populateDefaultProperties(OperationName(getOperationName(), context), props);
  LayerNormOp::Adaptor adaptor(operands, attributes, props, regions);
  Type inputType = adaptor.getInput().getType();
  inferredReturnTypes.push_back(inputType);
  if (!adaptor.getReturnStats())
    return success();

  // mean and rstd keep torch.native_layer_norm's shape: the leading dims,
  // then one 1 per normalized dim.
  auto rankedInput = dyn_cast<RankedTensorType>(inputType);
  if (!rankedInput)
    return emitOptionalError(location,
                             "'fff.layer_norm' op input must be a ranked "
                             "tensor to return mean and rstd");
  int64_t normalizedRank = adaptor.getNormalizedRank();
  if (failed(checkNormalizedRank(
          normalizedRank, rankedInput.getRank(), [&]() -> InFlightDiagnostic {
            if (location)
              return mlir::emitError(*location, "'fff.layer_norm' op ");
            return InFlightDiagnostic();
          })))
    return failure();
  SmallVector<int64_t> statsShape(
      rankedInput.getShape().drop_back(normalizedRank));
  statsShape.append(normalizedRank, 1);
  auto statsType = RankedTensorType::get(statsShape, Float32Type::get(context));
  inferredReturnTypes.append(2, statsType);
  return success();
}

void LayerNormOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getOutput(), "normed");
  if (Value mean = getMean()) {
    setNameFn(mean, "mean");
    setNameFn(getRstd(), "rstd");
  }
}

LogicalResult LayerNormOp::verify() {
  return verifyNorm(*this, getInput(), getEpsilon().convertToFloat(),
                    getNormalizedRank(),
                    {{"scale", getGamma()}, {"bias", getBeta()}});
}

//===----------------------------------------------------------------------===//
// RMSNormOp
//===----------------------------------------------------------------------===//

LogicalResult RMSNormOp::verify() {
  return verifyNorm(*this, getInput(), getEpsilon().convertToFloat(),
                    getNormalizedRank(), {{"scale", getGamma()}});
}

//===----------------------------------------------------------------------===//
// TreeFFNOp and LeafTreeFFNOp
//===----------------------------------------------------------------------===//

/// Both tree ops produce `[B, Dout]` in the input's element type, with B from
/// the input and Dout from dim 2 of the output-side weights.
static LogicalResult inferTreeResult(std::optional<Location> location,
                                     StringRef opName, Value input,
                                     Value outWeights,
                                     SmallVectorImpl<Type> &inferred) {
  auto inputType = dyn_cast<RankedTensorType>(input.getType());
  auto weightType = dyn_cast<RankedTensorType>(outWeights.getType());
  if (!inputType || inputType.getRank() != 2 || !weightType ||
      weightType.getRank() != 3)
    return emitOptionalError(location, "'", opName,
                             "' op expects a rank-2 input and rank-3 output "
                             "weights to infer its result type");
  inferred.push_back(RankedTensorType::get(
      {inputType.getDimSize(0), weightType.getDimSize(2)},
      inputType.getElementType()));
  return success();
}

LogicalResult TreeFFNOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  TreeFFNOp::Adaptor adaptor(operands, attributes, properties, regions);
  return inferTreeResult(location, getOperationName(), adaptor.getInput(),
                         adaptor.getWOut(), inferredReturnTypes);
}

LogicalResult TreeFFNOp::verify() {
  if (failed(verifyDepth(*this, getDepth(), /*minDepth=*/0)))
    return failure();
  if (failed(verifyElementTypes(*this, getInput().getType().getElementType(),
                                {{"w_in", getWIn()},
                                 {"b_in", getBIn()},
                                 {"w_out", getWOut()},
                                 {"b_out", getBOut()}})))
    return failure();

  ShapeSignature signature(*this);
  signature.require("N", getNumNodes(),
                    "depth " + Twine(getDepth()) + " (N = 2^(depth+1)-1)");
  auto type = [](Value v) { return v ? v.getType() : Type(); };
  if (failed(signature.check("input", type(getInput()), {"B", "Din"})) ||
      failed(signature.check("w_in", type(getWIn()), {"K", "N", "Din"})) ||
      failed(signature.check("b_in", type(getBIn()), {"K", "N"})) ||
      failed(signature.check("w_out", type(getWOut()), {"K", "N", "Dout"})) ||
      failed(signature.check("b_out", type(getBOut()), {"Dout"})))
    return failure();
  return success();
}

LogicalResult LeafTreeFFNOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  LeafTreeFFNOp::Adaptor adaptor(operands, attributes, properties, regions);
  return inferTreeResult(location, getOperationName(), adaptor.getInput(),
                         adaptor.getW2(), inferredReturnTypes);
}

LogicalResult LeafTreeFFNOp::verify() {
  if (failed(verifyDepth(*this, getDepth(), /*minDepth=*/1)))
    return failure();
  if (failed(verifyElementTypes(*this, getInput().getType().getElementType(),
                                {{"node_w", getNodeW()},
                                 {"node_b", getNodeB()},
                                 {"w1", getW1()},
                                 {"b1", getB1()},
                                 {"w2", getW2()},
                                 {"b2", getB2()}})))
    return failure();

  ShapeSignature signature(*this);
  std::string depth = "depth " + std::to_string(getDepth());
  signature.require("R", getNumRoutingNodes(), depth + " (R = 2^depth-1)");
  signature.require("L", getNumLeaves(), depth + " (L = 2^depth)");
  if (failed(signature.check("input", getInput().getType(), {"B", "Din"})) ||
      failed(signature.check("node_w", getNodeW().getType(), {"R", "Din"})) ||
      failed(signature.check("node_b", getNodeB().getType(), {"R"})) ||
      failed(signature.check("w1", getW1().getType(), {"L", "Din", "W"})) ||
      failed(signature.check("b1", getB1().getType(), {"L", "W"})) ||
      failed(signature.check("w2", getW2().getType(), {"L", "W", "Dout"})) ||
      failed(signature.check("b2", getB2().getType(), {"L", "Dout"})))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// FusionOp
//===----------------------------------------------------------------------===//

Operation *FusionOp::getNorm() {
  for (Operation &op : getBody().front())
    if (isa<LayerNormOp, RMSNormOp>(op))
      return &op;
  return nullptr;
}

LogicalResult FusionOp::verify() {
  Block &body = getBody().front();
  if (body.getArgumentTypes() != getInputs().getTypes())
    return emitOpError("block arguments must have the types of the inputs");
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yields ")
           << yield.getValues().getTypes() << " but its results are "
           << getResultTypes();
  unsigned norms = 0;
  for (Operation &op : body.without_terminator()) {
    if (isa<LayerNormOp, RMSNormOp>(op)) {
      ++norms;
      continue;
    }
    if (isa<FFFDialect>(op.getDialect()))
      return op.emitOpError("cannot be part of a fused norm unit");
  }
  if (norms != 1)
    return emitOpError("must contain exactly one layer_norm or rms_norm, found ")
           << norms;
  return success();
}

#define GET_OP_CLASSES
#include "fff/Dialect/FFF/IR/FFFOps.cpp.inc"

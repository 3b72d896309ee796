//===- FFFOps.cpp - fff operations: verifiers and type inference -*- C++ -*-===//

#include "fff/Dialect/FFF/IR/FFFOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"

#include <cmath>

using namespace mlir;
using namespace fff;

#include "fff/Dialect/FFF/IR/FFFEnums.cpp.inc"
#include "fff/Dialect/FFF/IR/FFFInterfaces.cpp.inc"

namespace {

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
/// and the element types and ranks of the affine parameters. Their extents
/// are the shape contract's.
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

  for (auto [name, param] : affineParams) {
    if (!param)
      continue;
    auto paramType = cast<RankedTensorType>(param.getType());
    if (paramType.getRank() != normalizedRank)
      return op->emitOpError()
             << name << " must have rank " << normalizedRank
             << " (normalized_rank), got " << paramType.getRank();
  }
  return cast<ShapeContractOpInterface>(op).getShapeContract().verify(op);
}

/// A norm's contract: each normalized dim of the input (D, or D0, D1, ...
/// for several), matched by the affine parameters, and not empty. A
/// backward adds `likeInput` (dy, shaped as the input) and `rowStats`
/// (mean, rstd: the input's leading extents R0, R1, ..., then ones).
ShapeContract
normContract(Value input, int64_t normalizedRank,
             ArrayRef<std::pair<StringRef, Value>> affineParams,
             ArrayRef<std::pair<StringRef, Value>> likeInput = {},
             ArrayRef<std::pair<StringRef, Value>> rowStats = {}) {
  int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
  bool tiesRows = !likeInput.empty() || !rowStats.empty();
  SmallVector<std::string> names;
  for (int64_t i = 0; i < rank - normalizedRank; ++i)
    names.push_back(tiesRows ? "R" + std::to_string(i) : "");
  for (int64_t i = 0; i < normalizedRank; ++i)
    names.push_back(normalizedRank == 1 ? "D" : "D" + std::to_string(i));
  SmallVector<StringRef> inputDims(names.begin(), names.end());
  ArrayRef<StringRef> normalized =
      ArrayRef<StringRef>(inputDims).take_back(normalizedRank);
  SmallVector<StringRef> statsDims(
      ArrayRef<StringRef>(inputDims).drop_back(normalizedRank));
  statsDims.append(normalizedRank, "per-row");

  ShapeContract contract;
  contract.bind("input", input, inputDims);
  for (auto [name, value] : likeInput)
    contract.bind(name, value, inputDims);
  for (auto [name, param] : affineParams)
    contract.bind(name, param, normalized);
  for (auto [name, value] : rowStats)
    contract.bind(name, value, statsDims);
  if (!rowStats.empty())
    contract.require("per-row", 1, "a per-row statistic");
  for (StringRef symbol : normalized)
    contract.requireAtLeast(symbol, 1, "there is nothing to normalize over");
  return contract;
}

/// `OpTy`'s properties as parsed, with the defaults of the attributes not
/// spelled out, which type inference reads before the op exists.
template <typename OpTy>
typename OpTy::Properties withDefaults(MLIRContext *context,
                                       OpaqueProperties properties) {
  typename OpTy::Properties props;
  if (properties)
    props = *properties.as<typename OpTy::Properties *>();
  OpTy::populateDefaultProperties(
      OperationName(OpTy::getOperationName(), context), props);
  return props;
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
  auto props = withDefaults<LayerNormOp>(context, properties);
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

ShapeContract LayerNormOp::getShapeContract() {
  return normContract(getInput(), getNormalizedRank(),
                      {{"scale", getGamma()}, {"bias", getBeta()}});
}

LogicalResult LayerNormOp::verify() {
  return verifyNorm(*this, getInput(), getEpsilon().convertToFloat(),
                    getNormalizedRank(),
                    {{"scale", getGamma()}, {"bias", getBeta()}});
}

//===----------------------------------------------------------------------===//
// RMSNormOp
//===----------------------------------------------------------------------===//

ShapeContract RMSNormOp::getShapeContract() {
  return normContract(getInput(), getNormalizedRank(), {{"scale", getGamma()}});
}

LogicalResult RMSNormOp::verify() {
  return verifyNorm(*this, getInput(), getEpsilon().convertToFloat(),
                    getNormalizedRank(), {{"scale", getGamma()}});
}

//===----------------------------------------------------------------------===//
// LayerNormGradOp and RMSNormGradOp
//===----------------------------------------------------------------------===//

/// The gradient of a norm's affine parameter: shaped like `gamma` when there
/// is one, else like the normalized dims of `input`, with the input's
/// element type.
static Type paramGradType(RankedTensorType inputType, Value gamma,
                          int64_t normalizedRank) {
  if (gamma)
    return gamma.getType();
  return RankedTensorType::get(inputType.getShape().take_back(normalizedRank),
                               inputType.getElementType());
}

/// dx, then the parameter gradients a norm's backward returns: `withScale`
/// gives dgamma, `withBias` dbeta.
static LogicalResult inferNormGradTypes(std::optional<Location> location,
                                        StringRef opName, Value input,
                                        Value gamma, int64_t normalizedRank,
                                        bool withBias,
                                        SmallVectorImpl<Type> &inferred) {
  auto inputType = dyn_cast<RankedTensorType>(input.getType());
  if (!inputType)
    return emitOptionalError(location, "'", opName,
                             "' op input must be a ranked tensor");
  inferred.push_back(inputType);
  if (!gamma && !withBias)
    return success();
  if (failed(checkNormalizedRank(
          normalizedRank, inputType.getRank(), [&]() -> InFlightDiagnostic {
            if (location)
              return mlir::emitError(*location, "'") << opName << "' op ";
            return InFlightDiagnostic();
          })))
    return failure();
  if (gamma)
    inferred.push_back(paramGradType(inputType, gamma, normalizedRank));
  if (withBias)
    inferred.push_back(paramGradType(inputType, gamma, normalizedRank));
  return success();
}

/// What both backward ops check beyond the forward's rules: the statistics'
/// rank, and (via the contract) their extents.
static LogicalResult
verifyNormGrad(Operation *op, Value input, float epsilon,
               int64_t normalizedRank, Value gamma,
               ArrayRef<std::pair<StringRef, Value>> stats) {
  auto inputType = cast<RankedTensorType>(input.getType());
  for (auto [name, value] : stats) {
    if (!value)
      continue;
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getRank() != inputType.getRank())
      return op->emitOpError()
             << name << " must have the input's rank " << inputType.getRank()
             << " (its leading dims, then ones), got " << type.getRank();
  }
  return verifyNorm(op, input, epsilon, normalizedRank, {{"scale", gamma}});
}

/// A norm backward's result extents, from its input's: dx has all of them,
/// each parameter gradient the normalized (trailing) ones.
static LogicalResult
reifyNormGradShapes(OpBuilder &b, Operation *op, Value input,
                    ReifiedRankedShapedTypeDims &reifiedReturnShapes) {
  SmallVector<OpFoldResult> extents =
      tensor::getMixedSizes(b, op->getLoc(), input);
  for (Type type : op->getResultTypes()) {
    int64_t rank = cast<RankedTensorType>(type).getRank();
    reifiedReturnShapes.emplace_back(ArrayRef(extents).take_back(rank));
  }
  return success();
}

LogicalResult LayerNormGradOp::reifyResultShapes(
    OpBuilder &b, ReifiedRankedShapedTypeDims &reifiedReturnShapes) {
  return reifyNormGradShapes(b, *this, getInput(), reifiedReturnShapes);
}

LogicalResult RMSNormGradOp::reifyResultShapes(
    OpBuilder &b, ReifiedRankedShapedTypeDims &reifiedReturnShapes) {
  return reifyNormGradShapes(b, *this, getInput(), reifiedReturnShapes);
}

LogicalResult LayerNormGradOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto props = withDefaults<LayerNormGradOp>(context, properties);
  LayerNormGradOp::Adaptor adaptor(operands, attributes, props, regions);
  return inferNormGradTypes(location, getOperationName(), adaptor.getInput(),
                            adaptor.getGamma(), adaptor.getNormalizedRank(),
                            adaptor.getBiasGrad(), inferredReturnTypes);
}

void LayerNormGradOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getGradInput(), "dx");
  if (Value gammaGrad = getGammaGrad())
    setNameFn(gammaGrad, "dgamma");
  if (Value betaGrad = getBetaGrad())
    setNameFn(betaGrad, "dbeta");
}

ShapeContract LayerNormGradOp::getShapeContract() {
  return normContract(getInput(), getNormalizedRank(), {{"scale", getGamma()}},
                      {{"grad_output", getGradOutput()}},
                      {{"mean", getMean()}, {"rstd", getRstd()}});
}

LogicalResult LayerNormGradOp::verify() {
  return verifyNormGrad(*this, getInput(), /*epsilon=*/0.0f,
                        getNormalizedRank(), getGamma(),
                        {{"mean", getMean()}, {"rstd", getRstd()}});
}

LogicalResult RMSNormGradOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  auto props = withDefaults<RMSNormGradOp>(context, properties);
  RMSNormGradOp::Adaptor adaptor(operands, attributes, props, regions);
  return inferNormGradTypes(location, getOperationName(), adaptor.getInput(),
                            adaptor.getGamma(), adaptor.getNormalizedRank(),
                            /*withBias=*/false, inferredReturnTypes);
}

void RMSNormGradOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getGradInput(), "dx");
  if (Value gammaGrad = getGammaGrad())
    setNameFn(gammaGrad, "dgamma");
}

ShapeContract RMSNormGradOp::getShapeContract() {
  return normContract(getInput(), getNormalizedRank(), {{"scale", getGamma()}},
                      {{"grad_output", getGradOutput()}},
                      {{"rstd", getRstd()}});
}

LogicalResult RMSNormGradOp::verify() {
  return verifyNormGrad(*this, getInput(), getEpsilon().convertToFloat(),
                        getNormalizedRank(), getGamma(), {{"rstd", getRstd()}});
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

  return getShapeContract().verify(*this);
}

/// What every tree layer needs: a non-empty input row and output row.
static void requireNonEmptyRows(ShapeContract &contract) {
  contract.requireAtLeast("Din", 1, "a tree layer needs an input row");
  contract.requireAtLeast("Dout", 1, "a tree layer needs an output row");
}

/// What tree_ffn and tree_ffn_grad require of their weights, after their
/// rows are bound: K trees of the depth's N nodes, Din wide in and Dout out.
static void bindTreeWeights(ShapeContract &contract, Value wIn, Value bIn,
                            Value wOut, int64_t numNodes, int64_t depth) {
  contract.bind("w_in", wIn, {"K", "N", "Din"});
  contract.bind("b_in", bIn, {"K", "N"});
  contract.bind("w_out", wOut, {"K", "N", "Dout"});
  contract.require("N", numNodes,
                   "depth " + Twine(depth) + " (N = 2^(depth+1)-1)");
  contract.requireAtLeast("K", 1, "a tree layer needs at least one tree");
  requireNonEmptyRows(contract);
}

ShapeContract TreeFFNOp::getShapeContract() {
  ShapeContract contract;
  contract.bind("input", getInput(), {"B", "Din"});
  bindTreeWeights(contract, getWIn(), getBIn(), getWOut(), getNumNodes(),
                  getDepth());
  contract.bind("b_out", getBOut(), {"Dout"});
  return contract;
}

LogicalResult TreeFFNGradOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  TreeFFNGradOp::Adaptor adaptor(operands, attributes, properties, regions);
  auto inputType = dyn_cast<RankedTensorType>(adaptor.getInput().getType());
  auto wOutType = dyn_cast<RankedTensorType>(adaptor.getWOut().getType());
  if (!inputType || !wOutType || wOutType.getRank() != 3)
    return emitOptionalError(location, "'", getOperationName(),
                             "' op expects ranked input and rank-3 w_out "
                             "to infer its result types");
  inferredReturnTypes.push_back(inputType);
  inferredReturnTypes.push_back(adaptor.getWIn().getType());
  inferredReturnTypes.push_back(wOutType);
  if (Value bIn = adaptor.getBIn())
    inferredReturnTypes.push_back(bIn.getType());
  if (adaptor.getBiasOutGrad())
    inferredReturnTypes.push_back(RankedTensorType::get(
        {wOutType.getDimSize(2)}, inputType.getElementType()));
  return success();
}

void TreeFFNGradOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getGradInput(), "dx");
  setNameFn(getGradWIn(), "dw_in");
  setNameFn(getGradWOut(), "dw_out");
  if (Value bInGrad = getBInGrad())
    setNameFn(bInGrad, "db_in");
  if (Value bOutGrad = getBOutGrad())
    setNameFn(bOutGrad, "db_out");
}

LogicalResult TreeFFNGradOp::verify() {
  if (failed(verifyDepth(*this, getDepth(), /*minDepth=*/0)))
    return failure();
  if (failed(verifyElementTypes(*this, getInput().getType().getElementType(),
                                {{"grad_output", getGradOutput()},
                                 {"w_in", getWIn()},
                                 {"b_in", getBIn()},
                                 {"w_out", getWOut()}})))
    return failure();
  return getShapeContract().verify(*this);
}

ShapeContract TreeFFNGradOp::getShapeContract() {
  ShapeContract contract;
  contract.bind("grad_output", getGradOutput(), {"B", "Dout"});
  contract.bind("input", getInput(), {"B", "Din"});
  bindTreeWeights(contract, getWIn(), getBIn(), getWOut(), getNumNodes(),
                  getDepth());
  return contract;
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

  return getShapeContract().verify(*this);
}

/// What leaf_tree_ffn and leaf_tree_ffn_grad require of their routing
/// nodes and leaves, after their rows are bound: R = 2^depth - 1 nodes and
/// L = 2^depth leaves of W hidden units, Din wide in and Dout out.
static void bindLeafTree(ShapeContract &contract, Value nodeW, Value nodeB,
                         Value w1, Value b1, Value w2, int64_t depth) {
  contract.bind("node_w", nodeW, {"R", "Din"});
  contract.bind("node_b", nodeB, {"R"});
  contract.bind("w1", w1, {"L", "Din", "W"});
  contract.bind("b1", b1, {"L", "W"});
  contract.bind("w2", w2, {"L", "W", "Dout"});
  std::string what = "depth " + std::to_string(depth);
  contract.require("R", (int64_t(1) << depth) - 1, what + " (R = 2^depth-1)");
  contract.require("L", int64_t(1) << depth, what + " (L = 2^depth)");
  contract.requireAtLeast("W", 1, "a leaf needs at least one hidden unit");
  requireNonEmptyRows(contract);
}

ShapeContract LeafTreeFFNOp::getShapeContract() {
  ShapeContract contract;
  contract.bind("input", getInput(), {"B", "Din"});
  bindLeafTree(contract, getNodeW(), getNodeB(), getW1(), getB1(), getW2(),
               getDepth());
  contract.bind("b2", getB2(), {"L", "Dout"});
  return contract;
}

LogicalResult LeafTreeFFNGradOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  LeafTreeFFNGradOp::Adaptor adaptor(operands, attributes, properties, regions);
  auto inputType = dyn_cast<RankedTensorType>(adaptor.getInput().getType());
  auto w2Type = dyn_cast<RankedTensorType>(adaptor.getW2().getType());
  if (!inputType || !w2Type || w2Type.getRank() != 3)
    return emitOptionalError(location, "'", getOperationName(),
                             "' op expects a ranked input and rank-3 w2 to "
                             "infer its result types");
  inferredReturnTypes.push_back(inputType);
  inferredReturnTypes.push_back(adaptor.getW1().getType());
  inferredReturnTypes.push_back(adaptor.getB1().getType());
  inferredReturnTypes.push_back(w2Type);
  inferredReturnTypes.push_back(
      RankedTensorType::get({w2Type.getDimSize(0), w2Type.getDimSize(2)},
                            inputType.getElementType()));
  return success();
}

void LeafTreeFFNGradOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getGradInput(), "dx");
  setNameFn(getGradW1(), "dw1");
  setNameFn(getGradB1(), "db1");
  setNameFn(getGradW2(), "dw2");
  setNameFn(getGradB2(), "db2");
}

LogicalResult LeafTreeFFNGradOp::verify() {
  if (failed(verifyDepth(*this, getDepth(), /*minDepth=*/1)))
    return failure();
  if (failed(verifyElementTypes(*this, getInput().getType().getElementType(),
                                {{"grad_output", getGradOutput()},
                                 {"node_w", getNodeW()},
                                 {"node_b", getNodeB()},
                                 {"w1", getW1()},
                                 {"b1", getB1()},
                                 {"w2", getW2()}})))
    return failure();
  return getShapeContract().verify(*this);
}

ShapeContract LeafTreeFFNGradOp::getShapeContract() {
  ShapeContract contract;
  contract.bind("grad_output", getGradOutput(), {"B", "Dout"});
  contract.bind("input", getInput(), {"B", "Din"});
  bindLeafTree(contract, getNodeW(), getNodeB(), getW1(), getB1(), getW2(),
               getDepth());
  return contract;
}

//===----------------------------------------------------------------------===//
// FusionOp
//===----------------------------------------------------------------------===//

Operation *FusionOp::getNorm() {
  for (Operation &op : getBody().front())
    if (isa<LayerNormOp, RMSNormOp, LayerNormGradOp, RMSNormGradOp>(op))
      return &op;
  return nullptr;
}

bool FusionOp::isBackward() {
  return isa_and_present<LayerNormGradOp, RMSNormGradOp>(getNorm());
}

Operation *FusionOp::getTreeLayer() {
  for (Operation &op : getBody().front())
    if (isa<TreeFFNOp, LeafTreeFFNOp>(op))
      return &op;
  return nullptr;
}

/// Whether `to` depends on `from` through ops of `block`.
static bool dependsOn(Operation *to, Operation *from, Block *block) {
  SmallVector<Operation *> work{to};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (op == from)
      return true;
    if (!seen.insert(op).second)
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && def->getBlock() == block)
        work.push_back(def);
  }
  return false;
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
  unsigned norms = 0, trees = 0;
  for (Operation &op : body.without_terminator()) {
    if (isa<LayerNormOp, RMSNormOp, LayerNormGradOp, RMSNormGradOp>(op)) {
      ++norms;
      continue;
    }
    if (isa<TreeFFNOp, LeafTreeFFNOp>(op)) {
      ++trees;
      continue;
    }
    if (isa_and_present<FFFDialect>(op.getDialect()))
      return op.emitOpError("cannot be part of a fused norm unit");
  }
  if (norms != 1)
    return emitOpError("must contain exactly one layer_norm, rms_norm, "
                       "layer_norm_grad or rms_norm_grad, found ")
           << norms;
  if (trees && isBackward())
    return emitOpError("holds a norm backward and a tree layer: a backward "
                       "unit holds one norm backward and pointwise ops");
  if (trees > 1)
    return emitOpError("may contain at most one tree layer, found ") << trees;
  // A sublayer: one of the two feeds the other.
  if (Operation *tree = getTreeLayer(); tree &&
      !dependsOn(tree, getNorm(), &body) && !dependsOn(getNorm(), tree, &body))
    return emitOpError("holds a tree layer and a norm neither of which "
                       "reads the other");
  return success();
}

#define GET_OP_CLASSES
#include "fff/Dialect/FFF/IR/FFFOps.cpp.inc"

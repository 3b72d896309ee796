//===- FuseNorms.cpp - norms and their pointwise neighbours -----*- C++ -*-===//

#include "fff/Dialect/FFF/Transforms/Passes.h"

#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"

namespace fff {
#define GEN_PASS_DEF_FUSENORMS
#include "fff/Dialect/FFF/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// Pointwise work on whole tensors of `shape`: what a norm kernel can do
/// per element on the way in or out.
bool isElementwiseOver(Operation *op, ArrayRef<int64_t> shape) {
  if (op->getNumResults() != 1)
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type || type.getShape() != shape)
    return false;
  if (auto generic = dyn_cast<linalg::GenericOp>(op))
    return generic.getNumReductionLoops() == 0 &&
           generic.getIndexingMapMatchingResult(generic->getResult(0))
               .isIdentity();
  return op->hasTrait<OpTrait::Elementwise>() &&
         llvm::all_of(op->getOperandTypes(), llvm::IsaPred<RankedTensorType>);
}

/// The ops of one unit, in block order.
using Unit = llvm::SetVector<Operation *>;

Unit collectUnit(Operation *norm) {
  Unit unit;
  auto shape = cast<RankedTensorType>(norm->getResult(0).getType()).getShape();
  Operation *prologue = norm->getOperand(0).getDefiningOp();
  if (prologue && prologue->getBlock() == norm->getBlock() &&
      isElementwiseOver(prologue, shape))
    unit.insert(prologue);
  unit.insert(norm);
  for (Operation *op = norm->getNextNode(); op; op = op->getNextNode()) {
    bool consumesUnit = llvm::any_of(op->getOperands(), [&](Value v) {
      return v.getDefiningOp() && unit.contains(v.getDefiningOp());
    });
    // Its other operands are defined before it, so before the fusion that
    // replaces the unit at its last op; formFusion checks the uses.
    if (consumesUnit && isElementwiseOver(op, shape))
      unit.insert(op);
  }
  // Pointwise side computations that only the unit uses, such as the
  // `1 + scale` of a modulated norm, join it too.
  for (bool changed = true; changed;) {
    changed = false;
    SmallVector<Operation *> snapshot(unit.begin(), unit.end());
    for (Operation *op : snapshot) {
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (!def || unit.contains(def) || def->getBlock() != norm->getBlock() ||
            !isElementwiseOver(def, shape) ||
            !llvm::all_of(def->getUsers(),
                          [&](Operation *user) { return unit.contains(user); }))
          continue;
        unit.insert(def);
        changed = true;
      }
    }
  }
  // Block order, so that cloning the unit keeps definitions before uses.
  SmallVector<Operation *> ordered = unit.takeVector();
  llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  unit.insert(ordered.begin(), ordered.end());
  return unit;
}

/// A constant a kernel can hold as an immediate: a scalar or a splat.
bool isImmediate(Operation *op) {
  Attribute value;
  if (!matchPattern(op, m_Constant(&value)))
    return false;
  auto dense = dyn_cast<DenseElementsAttr>(value);
  return !isa<ElementsAttr>(value) || (dense && dense.isSplat());
}

/// Values the unit computes that something outside it uses.
SmallVector<Value> escapingValues(const Unit &unit) {
  SmallVector<Value> values;
  for (Operation *op : unit)
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(),
                       [&](Operation *user) { return !unit.contains(user); }))
        values.push_back(result);
  return values;
}

/// Whether something outside the unit uses one of its values before the
/// unit's last op, where the fusion replacing the unit will be. That is
/// also the case when a unit op depends on another through outside ops
/// (a residual add whose other operand is computed from the norm).
bool usedBeforeEnd(const Unit &unit) {
  Operation *last = unit.back();
  for (Value value : escapingValues(unit))
    for (Operation *user : value.getUsers())
      if (!unit.contains(user) && user->getBlock() == last->getBlock() &&
          user->isBeforeInBlock(last))
        return true;
  return false;
}

/// Drops epilogue ops from the end of the unit until no outside op needs a
/// unit value before the fusion is placed; false if even the norm and its
/// prologue cannot be.
bool trimToFormable(Unit &unit, Operation *norm) {
  while (usedBeforeEnd(unit)) {
    if (unit.back() == norm)
      return false;
    unit.pop_back();
  }
  return true;
}

/// Replaces the unit by an fff.fusion placed where its last op was.
LogicalResult formFusion(Unit unit, Operation *norm) {
  if (!trimToFormable(unit, norm) || unit.size() == 1)
    return failure(); // a norm alone is its own unit already
  Operation *last = unit.back();
  SmallVector<Value> escaping = escapingValues(unit);

  // Inputs: every value from outside, except scalar and splat constants,
  // which are cloned (a kernel makes them immediates); a tensor of weights
  // stays an input, a buffer the kernel reads.
  llvm::SetVector<Value> inputs;
  llvm::SetVector<Operation *> constants;
  for (Operation *op : unit)
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && unit.contains(def))
          continue;
        if (op->isAncestor(operand.getParentRegion()->getParentOp()))
          continue; // defined inside the op's own regions
        if (def && isImmediate(def))
          constants.insert(def);
        else
          inputs.insert(operand);
      }
    });

  OpBuilder builder(last);
  auto fusion = FusionOp::create(builder, unit.front()->getLoc(),
                                 ValueRange(escaping).getTypes(),
                                 inputs.getArrayRef());
  Block *body = builder.createBlock(&fusion.getBody());
  IRMapping mapping;
  for (Value input : inputs)
    mapping.map(input, body->addArgument(input.getType(), input.getLoc()));
  for (Operation *constant : constants)
    builder.clone(*constant, mapping);
  for (Operation *op : unit)
    builder.clone(*op, mapping);
  SmallVector<Value> yielded;
  for (Value value : escaping)
    yielded.push_back(mapping.lookup(value));
  YieldOp::create(builder, fusion.getLoc(), yielded);

  for (auto [value, result] : llvm::zip(escaping, fusion.getResults()))
    value.replaceUsesWithIf(result, [&](OpOperand &use) {
      return !unit.contains(use.getOwner());
    });
  for (Operation *op : llvm::reverse(unit))
    op->erase();
  return success();
}

struct FuseNormsPass : fff::impl::FuseNormsBase<FuseNormsPass> {
  void runOnOperation() override {
    SmallVector<Operation *> norms;
    getOperation()->walk([&](Operation *op) {
      if (isa<LayerNormOp, RMSNormOp>(op) && !op->getParentOfType<FusionOp>())
        norms.push_back(op);
    });
    for (Operation *norm : norms)
      (void)formFusion(collectUnit(norm), norm);
  }
};

} // namespace

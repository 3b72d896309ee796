//===- FuseNorms.cpp - norms and their pointwise neighbours -----*- C++ -*-===//

#include "fff/Dialect/FFF/Transforms/Passes.h"

#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "fff/Dialect/FFF/Transforms/Fusion.h"
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

/// The shape of an op's first result, or {} if it is not a ranked tensor.
ArrayRef<int64_t> resultShape(Operation *op) {
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return type ? type.getShape() : ArrayRef<int64_t>();
}

/// A unit grown from its fff ops (`seeds`: a norm, and maybe a tree layer
/// it reads or that reads it): the elementwise op producing each seed's
/// first operand (a residual add), every later elementwise op that consumes
/// a unit value over one of the seeds' row shapes, and the pointwise side
/// computations only the unit uses.
Unit collectUnit(ArrayRef<Operation *> seeds) {
  Unit unit;
  Block *block = seeds.front()->getBlock();
  SmallVector<ArrayRef<int64_t>> shapes;
  for (Operation *seed : seeds)
    shapes.push_back(resultShape(seed));
  auto isRowwise = [&](Operation *op) {
    return llvm::any_of(shapes, [&](ArrayRef<int64_t> shape) {
      return isElementwiseOver(op, shape);
    });
  };
  for (Operation *seed : seeds) {
    Operation *prologue = seed->getOperand(0).getDefiningOp();
    if (prologue && prologue->getBlock() == block &&
        isElementwiseOver(prologue, resultShape(seed)))
      unit.insert(prologue);
    unit.insert(seed);
  }
  Operation *first = *llvm::min_element(
      seeds, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  for (Operation *op = first->getNextNode(); op; op = op->getNextNode()) {
    bool consumesUnit = llvm::any_of(op->getOperands(), [&](Value v) {
      return v.getDefiningOp() && unit.contains(v.getDefiningOp());
    });
    // Its other operands are defined before it, so before the fusion that
    // replaces the unit at its last op; formFusion checks the uses.
    if (consumesUnit && isRowwise(op))
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
        if (!def || unit.contains(def) || def->getBlock() != block ||
            !isRowwise(def) ||
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
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
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
/// unit value before the fusion is placed; false if even the seeds (the fff
/// ops) and their prologues cannot be.
bool trimToFormable(Unit &unit, ArrayRef<Operation *> seeds) {
  while (usedBeforeEnd(unit)) {
    if (llvm::is_contained(seeds, unit.back()))
      return false;
    unit.pop_back();
  }
  return true;
}

/// Replaces the unit by an fff.fusion placed where its last op was; fails
/// (changing nothing) if the unit cannot be placed anywhere.
LogicalResult formFusion(Unit unit, ArrayRef<Operation *> seeds) {
  if (!trimToFormable(unit, seeds) || unit.size() == 1)
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
  auto fusion =
      FusionOp::create(builder, unit.front()->getLoc(),
                       ValueRange(escaping).getTypes(), inputs.getArrayRef());
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
    value.replaceUsesWithIf(
        result, [&](OpOperand &use) { return !unit.contains(use.getOwner()); });
  for (Operation *op : llvm::reverse(unit))
    op->erase();
  return success();
}

/// The norm that reads `tree`'s result through elementwise ops (a residual
/// add), for a post-LN sublayer; null if none does within a few steps.
Operation *normReadingTree(Operation *tree) {
  ArrayRef<int64_t> shape = resultShape(tree);
  SmallVector<Value> frontier{tree->getResult(0)};
  for (int step = 0; step < 4 && !frontier.empty(); ++step) {
    SmallVector<Value> next;
    for (Value value : frontier)
      for (Operation *user : value.getUsers()) {
        if (user->getBlock() != tree->getBlock())
          continue;
        if (isa<LayerNormOp, RMSNormOp>(user) && user->getOperand(0) == value)
          return user;
        if (isElementwiseOver(user, shape))
          next.push_back(user->getResult(0));
      }
    frontier = std::move(next);
  }
  return nullptr;
}

/// Forms the unit of a transformer's FFN sublayer around `tree`: with the
/// norm whose result it reads (pre-LN) or that reads its result (post-LN),
/// and the pointwise work around them. Says why in a remark when a norm is
/// there but the unit cannot be formed.
void formSublayer(Operation *tree) {
  Operation *norm = tree->getOperand(0).getDefiningOp();
  bool normFirst = norm && isa<LayerNormOp, RMSNormOp>(norm);
  if (!normFirst)
    norm = normReadingTree(tree);
  if (!norm || norm->getParentOfType<FusionOp>())
    return;
  StringRef name = norm->getName().stripDialect();
  if (norm->getBlock() != tree->getBlock()) {
    tree->emitRemark("not fused with the ")
        << name << " " << (normFirst ? "before" : "after")
        << " it: they are in different blocks";
    return;
  }
  SmallVector<Operation *> seeds{norm, tree};
  if (!normFirst)
    std::swap(seeds[0], seeds[1]);
  if (failed(formFusion(collectUnit(seeds), seeds)))
    tree->emitRemark("not fused with the ")
        << name << " " << (normFirst ? "before" : "after")
        << " it: an op outside the unit needs one of its values between "
           "the two";
}

struct FuseNormsPass : fff::impl::FuseNormsBase<FuseNormsPass> {
  void runOnOperation() override {
    // Whole sublayers first, then the norms left.
    SmallVector<Operation *> trees;
    getOperation()->walk([&](Operation *op) {
      if (isa<TreeFFNOp, LeafTreeFFNOp>(op) && !op->getParentOfType<FusionOp>())
        trees.push_back(op);
    });
    for (Operation *tree : trees)
      formSublayer(tree);
    // A norm backward's unit: the prologue computes its dy, the epilogue
    // reads its dx (its first operand and result, as a norm's).
    SmallVector<Operation *> norms;
    getOperation()->walk([&](Operation *op) {
      if (isa<LayerNormOp, RMSNormOp, LayerNormGradOp, RMSNormGradOp>(op) &&
          !op->getParentOfType<FusionOp>())
        norms.push_back(op);
    });
    for (Operation *norm : norms)
      (void)fuseNormWithNeighbours(norm);
  }
};

} // namespace

LogicalResult fff::fuseNormWithNeighbours(Operation *norm) {
  return formFusion(collectUnit({norm}), {norm});
}

void fff::inlineUnit(RewriterBase &rewriter, FusionOp unit, ValueRange inputs) {
  Block &body = unit.getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  // A unit may yield one of its inputs as it is; the block's arguments are
  // gone once it is inlined.
  SmallVector<Value> results;
  for (Value value : yield.getValues()) {
    auto arg = dyn_cast<BlockArgument>(value);
    results.push_back(
        arg && arg.getOwner() == &body ? inputs[arg.getArgNumber()] : value);
  }
  rewriter.inlineBlockBefore(&body, unit, inputs);
  rewriter.replaceOp(unit, results);
  rewriter.eraseOp(yield);
}

//===- LoopNestKernel.cpp - any linalg op, a thread per point
//--------------===//
//
// The kernel for linalg ops without a better one: thread t takes the t-th
// point of the op's parallel loops (last loop fastest), walks the reduction
// loops itself with the outputs carried in registers, and evaluates the
// op's body exactly as written.
//
//===----------------------------------------------------------------------===//

#include "LinalgKernels.h"

#include "../GPUCommon/KernelModule.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace fff;

SmallVector<Value> fff::loopSizes(OpBuilder &b, linalg::LinalgOp op) {
  SmallVector<Value> sizes;
  for (Range range : op.createLoopRanges(b, op.getLoc()))
    sizes.push_back(
        getValueOrCreateConstantIndexOp(b, op.getLoc(), range.size));
  return sizes;
}

fff::BodyCaptures::BodyCaptures(linalg::GenericOp op) {
  llvm::SetVector<Value> used;
  getUsedValuesDefinedAbove(op.getRegion(), used);
  for (Value value : used) {
    Operation *def = value.getDefiningOp();
    bool constant = def && def->hasTrait<OpTrait::ConstantLike>() &&
                    def->getNumResults() == 1 &&
                    value.getType().isIntOrIndexOrFloat();
    (constant ? cloned : parameters).push_back(value);
  }
}

bool fff::parallelPointsShareOutputs(linalg::GenericOp op) {
  auto iterators = op.getIteratorTypesArray();
  return llvm::any_of(op.getDpsInitsMutable(), [&](OpOperand &init) {
    AffineMap map = op.getMatchingIndexingMap(&init);
    if (!llvm::all_of(map.getResults(),
                      llvm::IsaPred<AffineDimExpr, AffineConstantExpr>))
      return true;
    return llvm::any_of(llvm::enumerate(iterators), [&](auto dim) {
      bool parallel = dim.value() == utils::IteratorType::parallel;
      return map.isFunctionOfDim(dim.index()) != parallel;
    });
  });
}

std::string fff::whyBodyCannotRunOnGPU(linalg::GenericOp op) {
  std::string why;
  op.getBody()->walk([&](Operation *inner) {
    Dialect *dialect = inner->getDialect();
    bool allowed =
        isa_and_present<arith::ArithDialect, math::MathDialect,
                        index::IndexDialect, scf::SCFDialect>(dialect) ||
        isa<affine::AffineApplyOp, memref::LoadOp, memref::DimOp,
            linalg::YieldOp>(inner) ||
        (isa<linalg::IndexOp>(inner) && inner->getParentOp() == op);
    if (allowed)
      return WalkResult::advance();
    why = "its body holds '" + inner->getName().getStringRef().str() +
          "', which has no GPU lowering";
    return WalkResult::interrupt();
  });
  if (!why.empty())
    return why;
  for (Value value : BodyCaptures(op).parameters)
    if (!value.getType().isIntOrIndexOrFloat() &&
        !isa<MemRefType>(value.getType())) {
      llvm::raw_string_ostream os(why);
      os << "its body uses a value of type " << value.getType()
         << " from outside";
      return why;
    }
  return "";
}

namespace {

/// The number of points of `op`'s parallel loops, given its loop extents:
/// one thread each (one in all, `serial`).
Value parallelPoints(ImplicitLocOpBuilder &b, linalg::GenericOp op, bool serial,
                     ArrayRef<Value> sizes) {
  Value product = arith::ConstantIndexOp::create(b, 1);
  if (serial)
    return product;
  for (auto [d, iterator] : llvm::enumerate(op.getIteratorTypesArray()))
    if (iterator == utils::IteratorType::parallel)
      product = arith::MulIOp::create(b, product, sizes[d]);
  return product;
}

/// Emits the kernel body for one op: the evaluation of its body at a point,
/// and the loops around it.
class LoopNestEmitter {
public:
  /// A thread per point of the parallel loops (the point dims), walking the
  /// reduction loops; `serial`, one thread walking every loop. `operands`
  /// are the kernel's values of the op's operands, `sizes` of its loop
  /// extents; `captured` maps the body's values from outside.
  LoopNestEmitter(linalg::GenericOp op, bool serial, ValueRange operands,
                  ArrayRef<Value> sizes, const IRMapping &captured)
      : op(op), operands(operands.begin(), operands.end()),
        sizes(sizes.begin(), sizes.end()), captured(captured) {
    for (auto [d, iterator] : llvm::enumerate(op.getIteratorTypesArray()))
      (serial || iterator == utils::IteratorType::reduction ? walkedDims
                                                            : pointDims)
          .push_back(d);
  }

  /// Computes and stores the op's outputs at parallel point `point`.
  void emitPoint(ImplicitLocOpBuilder &b, Value point) {
    SmallVector<Value> index(op.getNumLoops());
    Value rest = point;
    for (unsigned d : llvm::reverse(pointDims)) {
      index[d] = arith::RemUIOp::create(b, rest, sizes[d]);
      rest = arith::DivUIOp::create(b, rest, sizes[d]);
    }
    if (walkedDims.empty()) {
      storeOutputs(b, index, evaluate(b, index, loadOutputs(b, index, true)));
      return;
    }
    if (outputsIgnoreWalkedDims()) {
      // Outputs in registers across the walked loops, stored once.
      Value zero = arith::ConstantIndexOp::create(b, 0);
      for (unsigned d : walkedDims)
        index[d] = zero;
      SmallVector<Value> results =
          reduce(b, index, 0, loadOutputs(b, index, false));
      // The loops left their induction variables in the index, which the
      // outputs' maps may still name (as (d0, 0) does d1, without using it).
      for (unsigned d : walkedDims)
        index[d] = zero;
      storeOutputs(b, index, results);
      return;
    }
    // An output indexed by a walked dim: read and written each step.
    reduceInMemory(b, index, 0);
  }

private:
  bool outputsIgnoreWalkedDims() {
    return llvm::all_of(op.getDpsInitsMutable(), [&](OpOperand &init) {
      AffineMap map = op.getMatchingIndexingMap(&init);
      return llvm::none_of(walkedDims,
                           [&](unsigned d) { return map.isFunctionOfDim(d); });
    });
  }

  /// `map` applied to the loop index.
  static SmallVector<Value> apply(ImplicitLocOpBuilder &b, AffineMap map,
                                  ArrayRef<Value> index) {
    SmallVector<Value> indices;
    for (AffineExpr expr : map.getResults()) {
      if (auto dim = dyn_cast<AffineDimExpr>(expr))
        indices.push_back(index[dim.getPosition()]);
      else if (auto constant = dyn_cast<AffineConstantExpr>(expr))
        indices.push_back(
            arith::ConstantIndexOp::create(b, constant.getValue()));
      else
        indices.push_back(affine::AffineApplyOp::create(
            b, AffineMap::get(map.getNumDims(), 0, expr), index));
    }
    return indices;
  }

  /// Operand `operand`'s element at the loop index; a scalar operand is
  /// its own value everywhere.
  Value load(ImplicitLocOpBuilder &b, OpOperand &operand,
             ArrayRef<Value> index) {
    Value value = operands[operand.getOperandNumber()];
    if (!isa<MemRefType>(value.getType()))
      return value;
    return memref::LoadOp::create(
        b, value, apply(b, op.getMatchingIndexingMap(&operand), index));
  }

  /// The outputs' current values; with `onlyIfRead`, null for outputs the
  /// body never reads (nothing to load).
  SmallVector<Value> loadOutputs(ImplicitLocOpBuilder &b, ArrayRef<Value> index,
                                 bool onlyIfRead) {
    SmallVector<Value> values;
    for (OpOperand &init : op.getDpsInitsMutable()) {
      bool read = !op.getMatchingBlockArgument(&init).use_empty();
      values.push_back(onlyIfRead && !read ? Value() : load(b, init, index));
    }
    return values;
  }

  void storeOutputs(ImplicitLocOpBuilder &b, ArrayRef<Value> index,
                    ValueRange results) {
    for (auto [init, result] : llvm::zip(op.getDpsInitsMutable(), results))
      memref::StoreOp::create(
          b, result, operands[init.getOperandNumber()],
          apply(b, op.getMatchingIndexingMap(&init), index));
  }

  /// The body at the loop index, given the outputs' values.
  SmallVector<Value> evaluate(ImplicitLocOpBuilder &b, ArrayRef<Value> index,
                              ArrayRef<Value> outputs) {
    IRMapping mapping = captured;
    for (OpOperand *input : op.getDpsInputOperands())
      if (!op.getMatchingBlockArgument(input).use_empty())
        mapping.map(op.getMatchingBlockArgument(input), load(b, *input, index));
    for (auto [init, value] : llvm::zip(op.getDpsInitsMutable(), outputs))
      if (value)
        mapping.map(op.getMatchingBlockArgument(&init), value);
    for (Operation &inner : op.getBody()->without_terminator()) {
      if (auto loopIndex = dyn_cast<linalg::IndexOp>(inner))
        mapping.map(loopIndex.getResult(), index[loopIndex.getDim()]);
      else
        b.clone(inner, mapping);
    }
    return llvm::map_to_vector(
        op.getBody()->getTerminator()->getOperands(),
        [&](Value v) { return mapping.lookupOrDefault(v); });
  }

  /// Walked loops from `level` in, the outputs' values carried through.
  SmallVector<Value> reduce(ImplicitLocOpBuilder &b,
                            SmallVectorImpl<Value> &index, unsigned level,
                            ValueRange carried) {
    if (level == walkedDims.size())
      return evaluate(b, index, llvm::to_vector(carried));
    unsigned dim = walkedDims[level];
    Value zero = arith::ConstantIndexOp::create(b, 0);
    Value one = arith::ConstantIndexOp::create(b, 1);
    auto loop = scf::ForOp::create(
        b, zero, sizes[dim], one, carried,
        [&](OpBuilder &nested, Location loc, Value iv, ValueRange iterArgs) {
          ImplicitLocOpBuilder inner(loc, nested);
          index[dim] = iv;
          scf::YieldOp::create(inner,
                               reduce(inner, index, level + 1, iterArgs));
        });
    return loop.getResults();
  }

  void reduceInMemory(ImplicitLocOpBuilder &b, SmallVectorImpl<Value> &index,
                      unsigned level) {
    if (level == walkedDims.size()) {
      storeOutputs(b, index, evaluate(b, index, loadOutputs(b, index, true)));
      return;
    }
    unsigned dim = walkedDims[level];
    scf::ForOp::create(
        b, arith::ConstantIndexOp::create(b, 0), sizes[dim],
        arith::ConstantIndexOp::create(b, 1), ValueRange{},
        [&](OpBuilder &nested, Location loc, Value iv, ValueRange) {
          ImplicitLocOpBuilder inner(loc, nested);
          index[dim] = iv;
          reduceInMemory(inner, index, level + 1);
          scf::YieldOp::create(inner);
        });
  }

  linalg::GenericOp op;
  SmallVector<Value> operands, sizes;
  const IRMapping &captured;
  SmallVector<unsigned> pointDims, walkedDims;
};

} // namespace

void fff::emitLoopNestKernel(RewriterBase &rewriter, linalg::GenericOp op,
                             const LoopNestStrategy &strategy, StringRef name,
                             gpu::GPUFuncOp &kernel) {
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  SmallVector<Value> sizes = loopSizes(b, op);
  BodyCaptures captures(op);
  SmallVector<Value> operands(op->getOperands());
  llvm::append_range(operands, sizes);
  llvm::append_range(operands, captures.parameters);

  KernelSpec spec;
  spec.name = name.str();
  spec.threadsPerBlock = strategy.threadsPerBlock;
  spec.maxRegisters = strategy.maxRegisters;
  spec.strategy = strategy.toAttr(rewriter.getContext());
  if (!kernel) {
    kernel = createKernel(rewriter, op, spec, operands);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(&kernel.front());
    ImplicitLocOpBuilder kb(op.getLoc(), rewriter);
    ValueRange args = kernel.getArguments();
    unsigned numOperands = op->getNumOperands();
    SmallVector<Value> kernelSizes(args.slice(numOperands, sizes.size()));
    IRMapping captured;
    for (auto [value, arg] : llvm::zip(
             captures.parameters, args.drop_front(numOperands + sizes.size())))
      captured.map(value, arg);
    for (Value value : captures.cloned)
      kb.clone(*value.getDefiningOp(), captured);

    LoopNestEmitter emitter(op, strategy.serial, args.take_front(numOperands),
                            kernelSizes, captured);
    Value point = arith::AddIOp::create(
        kb,
        arith::MulIOp::create(
            kb, gpu::BlockIdOp::create(kb, gpu::Dimension::x),
            arith::ConstantIndexOp::create(kb, strategy.threadsPerBlock)),
        gpu::ThreadIdOp::create(kb, gpu::Dimension::x));
    Value inRange = arith::CmpIOp::create(
        kb, arith::CmpIPredicate::ult, point,
        parallelPoints(kb, op, strategy.serial, kernelSizes));
    auto ifInRange = scf::IfOp::create(kb, inRange);
    kb.setInsertionPoint(ifInRange.thenBlock()->getTerminator());
    emitter.emitPoint(kb, point);
    kb.setInsertionPointAfter(ifInRange);
    gpu::ReturnOp::create(kb);
  }

  Value blocks = arith::CeilDivUIOp::create(
      b, parallelPoints(b, op, strategy.serial, sizes),
      arith::ConstantIndexOp::create(b, strategy.threadsPerBlock));
  launchKernel(b, kernel, blocks, strategy.threadsPerBlock, operands);
  rewriter.eraseOp(op);
}

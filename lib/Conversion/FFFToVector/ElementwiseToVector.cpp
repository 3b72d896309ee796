//===- ElementwiseToVector.cpp - elementwise linalg to CPU vectors -*- C++ -*-//
//
// The CPU pipeline's lowering of the elementwise tensor work around fff's
// ops: residual adds, casts, scales, activations. convert-linalg-to-loops
// would give each a scalar loop nest on one thread; here each becomes a
// loop over its rows (threaded when large, RowLoops.h) that computes a row
// a vector at a time, applying the payload lane by lane (LaneWise.h), and
// its tail element by element. An element goes through the same ops in
// either form, so the bits do not change.
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/Passes.h"

#include "LaneWise.h"
#include "VectorEmitter.h"
#include "fff/Conversion/FFFToVector/CPUElementwiseStrategy.h"
#include "fff/Conversion/RowLoops.h"
#include "fff/Transforms/IdenticalOps.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"

namespace fff {
#define GEN_PASS_DEF_CONVERTELEMENTWISETOVECTOR
#include "fff/Conversion/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// Whether `map`, an input's indexing map, reads the iteration's dims in
/// order, each at most once, or the constant 0 (a broadcast dim), with the
/// iteration's last dim, if read, as the input's innermost: a row of the
/// input is then contiguous along the last dim, or does not depend on it.
bool isOrderedBroadcast(AffineMap map) {
  int64_t last = -1;
  for (AffineExpr result : map.getResults()) {
    if (last == int64_t(map.getNumDims()) - 1)
      return false; // something after the last dim
    if (auto constant = dyn_cast<AffineConstantExpr>(result)) {
      if (constant.getValue() != 0)
        return false;
      continue;
    }
    auto dim = dyn_cast<AffineDimExpr>(result);
    if (!dim || int64_t(dim.getPosition()) <= last)
      return false;
    last = dim.getPosition();
  }
  return true;
}

/// Whether `op` is elementwise work this lowering takes (see the pass's
/// description).
bool isVectorizableElementwise(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumLoops() == 0 ||
      op.getNumParallelLoops() != op.getNumLoops())
    return false;
  for (OpOperand &init : op.getDpsInitsMutable()) {
    auto type = dyn_cast<RankedTensorType>(init.get().getType());
    if (!type || !isVectorElement(type.getElementType()) ||
        !op.getMatchingIndexingMap(&init).isIdentity() ||
        op.payloadUsesValueFromOperand(&init))
      return false;
  }
  for (OpOperand *input : op.getDpsInputOperands()) {
    Type type = input->get().getType();
    if (type.isIntOrIndexOrFloat())
      continue;
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !isVectorElement(tensor.getElementType()) ||
        !isOrderedBroadcast(op.getMatchingIndexingMap(input)))
      return false;
  }
  return isLaneWisePayload(*op.getBody());
}

/// One elementwise op's loops: the row loop over its leading dims,
/// flattened, and in each row the vectors, then the tail.
class ElementwiseEmitter : public VectorEmitter {
public:
  ElementwiseEmitter(ImplicitLocOpBuilder &b,
                     const CPUElementwiseStrategy &strategy,
                     linalg::GenericOp op)
      : VectorEmitter(b, strategy), strategy(strategy), op(op),
        rank(op.getNumLoops()) {}

  /// Builds the loops; returns the results as tensors.
  SmallVector<Value> emit() {
    Value like = op.getDpsInits().front();
    for (int64_t dim = 0; dim < rank; ++dim)
      extents.push_back(tensor::DimOp::create(b, like, dim));
    for (OpOperand *input : op.getDpsInputOperands()) {
      Value value = input->get();
      inputs.push_back(
          isa<RankedTensorType>(value.getType()) ? readBuffer(value) : value);
    }
    for (Value init : op.getDpsInits()) {
      auto type = cast<RankedTensorType>(init.getType());
      outputs.push_back(alloc(type, type.getElementType(),
                              [&](int64_t dim) { return extents[dim]; }));
    }
    Value rows = index(1);
    for (Value extent : ArrayRef(extents).drop_back())
      rows = arith::MulIOp::create(b, rows, extent);
    Value n = extents.back();
    buildRowLoop(b, rows, arith::MulIOp::create(b, rows, n),
                 strategy.minParallelElements, strategy.toAttr(b.getContext()),
                 [&](Value row) { emitRow(row, n); });
    SmallVector<Value> results;
    for (auto [buffer, result] : llvm::zip(outputs, op.getResults()))
      results.push_back(toTensor(buffer, result.getType()));
    return results;
  }

private:
  /// Row `row` of the iteration space: the leading dims' indices, then its
  /// vectors and its tail.
  void emitRow(Value row, Value n) {
    SmallVector<Value> leading;
    if (rank == 2) {
      leading.push_back(row);
    } else if (rank > 2) {
      auto split = affine::AffineDelinearizeIndexOp::create(
          b, row, ArrayRef(extents).drop_back(), /*hasOuterBound=*/true);
      llvm::append_range(leading, split.getResults());
    }
    // An input that does not vary along the row is read once for it.
    SmallVector<Value> rowInvariant(inputs.size());
    for (auto [k, input] : llvm::enumerate(inputs)) {
      if (!isa<MemRefType>(input.getType()))
        rowInvariant[k] = input;
      else if (!readsAlongRow(k))
        rowInvariant[k] = memref::LoadOp::create(
            b, input, indicesOf(inputMap(k), leading, Value()));
    }
    Value vectorsEnd = roundDown(n, lanes);
    SmallVector<Value> splats;
    for (Value scalar : rowInvariant)
      splats.push_back(
          scalar ? vector::BroadcastOp::create(
                       b, VectorType::get({lanes}, scalar.getType()), scalar)
                 : Value());
    forLoop(index(0), vectorsEnd, lanes,
            [&](Value j) { emitElements(leading, j, lanes, splats); });
    forLoop(vectorsEnd, n, 1, [&](Value j) {
      emitElements(leading, j, /*width=*/0, rowInvariant);
    });
  }

  /// The elements [j, j + width) of the row at `leading` (one element, as
  /// scalars, for `width` 0): each input's, the payload on them, the
  /// results stored.
  void emitElements(ArrayRef<Value> leading, Value j, int64_t width,
                    ArrayRef<Value> rowInvariant) {
    SmallVector<Value> operands;
    for (auto [k, input] : llvm::enumerate(inputs)) {
      if (rowInvariant[k]) {
        operands.push_back(rowInvariant[k]);
        continue;
      }
      SmallVector<Value> indices = indicesOf(inputMap(k), leading, j);
      operands.push_back(loadAt(input, indices, width));
    }
    SmallVector<Value> values =
        evaluateLaneWise(b, *op.getBody(), operands, width);
    SmallVector<Value> indices(leading);
    indices.push_back(j);
    for (auto [value, output] : llvm::zip(values, outputs)) {
      if (width)
        vector::StoreOp::create(b, value, output, indices);
      else
        memref::StoreOp::create(b, value, output, indices);
    }
  }

  /// The element at `indices` of `buffer`, or the vector there (`width`
  /// is 0 or the lanes).
  Value loadAt(Value buffer, ValueRange indices, int64_t width) {
    if (!width)
      return memref::LoadOp::create(b, buffer, indices);
    return loadRaw(buffer, indices, Value());
  }

  AffineMap inputMap(int64_t k) {
    return op.getMatchingIndexingMap(op.getDpsInputOperand(k));
  }

  /// Whether input `k` varies along the row (its map selects the last dim).
  bool readsAlongRow(int64_t k) {
    AffineMap map = inputMap(k);
    return map.getNumResults() > 0 &&
           map.getResults().back() ==
               getAffineDimExpr(rank - 1, b.getContext());
  }

  /// The indices `map` selects, with the leading dims at `leading` and the
  /// last at `j`.
  SmallVector<Value> indicesOf(AffineMap map, ArrayRef<Value> leading,
                               Value j) {
    SmallVector<Value> indices;
    for (AffineExpr result : map.getResults()) {
      auto dim = dyn_cast<AffineDimExpr>(result);
      if (!dim)
        indices.push_back(index(0));
      else if (int64_t(dim.getPosition()) == rank - 1)
        indices.push_back(j);
      else
        indices.push_back(leading[dim.getPosition()]);
    }
    return indices;
  }

  const CPUElementwiseStrategy &strategy;
  linalg::GenericOp op;
  int64_t rank;
  /// The iteration space's extents (the results').
  SmallVector<Value> extents;
  /// The inputs: buffers, or scalars as the op takes them.
  SmallVector<Value> inputs;
  SmallVector<Value> outputs;
};

/// What `op`'s payload reads from outside it, split into constants (which
/// an outlined function holds) and other values (which it takes as
/// parameters), each in the order the payload first reads them: the same
/// order for identical ops (IdenticalOps.h).
struct Captured {
  explicit Captured(linalg::GenericOp op) {
    op.getBody()->walk([&](Operation *inner) {
      for (Value value : inner->getOperands()) {
        if (op->isAncestor(value.getParentRegion()->getParentOp()))
          continue;
        (matchPattern(value, m_Constant()) ? constants : values).insert(value);
      }
    });
  }
  llvm::SetVector<Value> constants, values;
};

struct ConvertElementwiseToVectorPass
    : fff::impl::ConvertElementwiseToVectorBase<
          ConvertElementwiseToVectorPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkVectorBits(module, vectorBits)))
      return signalPassFailure();
    CPUTarget target{vectorBits, /*integerBf16=*/false};
    CPUElementwiseStrategy strategy = selectCPUElementwiseStrategy(target);
    SmallVector<Operation *> ops;
    module->walk([&](linalg::GenericOp op) {
      if (isVectorizableElementwise(op))
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    auto lower = [&](linalg::GenericOp op) {
      rewriter.setInsertionPoint(op);
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      ElementwiseEmitter emitter(b, strategy, op);
      rewriter.replaceOp(op, emitter.emit());
    };
    if (!outline) {
      for (Operation *op : ops)
        lower(cast<linalg::GenericOp>(op));
      return;
    }
    // A model repeats its layers' elementwise ops: each kind is lowered once,
    // in a function that its ops call.
    SymbolTable symbols(module);
    SmallVector<unsigned> kinds = kindsOfIdenticalOps(ops);
    SmallVector<func::FuncOp> functions(ops.size());
    for (auto [index, op] : llvm::enumerate(ops)) {
      auto generic = cast<linalg::GenericOp>(op);
      Captured captured(generic);
      func::FuncOp &function = functions[kinds[index]];
      if (!function) {
        Operation *copy;
        std::tie(function, copy) = outlineOp(
            rewriter, symbols, module, generic, "fff_elementwise",
            captured.values.getArrayRef(), captured.constants.getArrayRef());
        lower(cast<linalg::GenericOp>(copy));
      }
      SmallVector<Value> arguments(generic->getOperands());
      llvm::append_range(arguments, captured.values);
      rewriter.setInsertionPoint(generic);
      rewriter.replaceOp(generic,
                         func::CallOp::create(rewriter, generic.getLoc(),
                                              function, arguments));
    }
  }
};

} // namespace

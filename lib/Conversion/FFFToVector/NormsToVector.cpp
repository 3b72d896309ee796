//===- NormsToVector.cpp - fff norms to CPU vector loops --------*- C++ -*-===//
//
// The CPU pipeline's lowering of fff's norms: a loop over rows (split across
// threads when the norm is large, RowLoops.h) whose body is vector code.
// convert-fff-to-loops keeps the scalar linalg form as
// the reference the tests and GPU kernels are checked against; this one is
// written for speed, with the same arithmetic per element:
//
// - reductions keep `accumulators` vector partial sums (each add then waits
//   on the one issued that many steps earlier, not on the one before), which
//   meet only at the end of the row;
// - 16-bit rows are widened to f32 as they are loaded and narrowed as they
//   are stored, so that all arithmetic is in f32, as in the reference;
// - a row's tail is a masked load and store, never a scalar loop;
// - a fused unit's elementwise prologue that only the norm reads is
//   evaluated lane by lane as each row is read, and its elementwise
//   epilogue that alone reads the norm's result (the cast that narrows a
//   mixed-type norm's f32 result, a residual add) as each row is written,
//   so that neither the prologue's result nor the norm's is stored;
// - rows are independent, so the parallel loop's split cannot change a bit.
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/Passes.h"

#include "LaneWise.h"
#include "RowEmitter.h"
#include "VectorEmitter.h"
#include "fff/Conversion/FFFToVector/CPUNormStrategy.h"
#include "fff/Conversion/RowLoops.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "fff/Dialect/FFF/Transforms/Fusion.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/Support/CheckedArithmetic.h"

namespace fff {
#define GEN_PASS_DEF_CONVERTFFFNORMSTOVECTOR
#include "fff/Conversion/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// The elementwise op that alone reads `op`'s normalized result and gives a
/// float row of f32, f16 or bf16 (what a norm's rows hold); null otherwise.
static linalg::GenericOp normEpilogue(Operation *op) {
  linalg::GenericOp epilogue =
      elementwiseEpilogue(op->getResult(0), op, /*extentsKept=*/true);
  if (!epilogue)
    return {};
  Type element =
      cast<RankedTensorType>(epilogue->getResult(0).getType()).getElementType();
  return element.isF32() || element.isF16() || element.isBF16()
             ? epilogue
             : linalg::GenericOp();
}

/// What both norms share: the strategy, the buffers, the row loop, and how
/// a row of the input is read and of the result written.
struct NormRows {
  NormRows(ImplicitLocOpBuilder &b, Operation *op, Value input,
           int64_t normalizedRank, const CPUTarget &target)
      : b(b), type(cast<RankedTensorType>(input.getType())),
        leadingRank(type.getRank() - normalizedRank),
        strategy(
            selectCPUNormStrategy(staticRowSize(type, normalizedRank), target)),
        emit(b, strategy), prologue(elementwisePrologue(input)),
        epilogue(normEpilogue(op)), normalized(op->getResult(0)) {
    SmallVector<Value> sources{input};
    if (prologue)
      sources = llvm::to_vector(prologue.getDpsInputs());
    for (Value source : sources) {
      Value buffer = emit.readBuffer(source);
      if (!shapeSource)
        shapeSource = buffer;
      inputs.push_back(emit.rowsView(buffer, leadingRank));
    }
    outputType = epilogue
                     ? cast<RankedTensorType>(epilogue->getResult(0).getType())
                     : type;
    if (epilogue)
      for (Value source : epilogue.getDpsInputs())
        epilogueInputs.push_back(
            source == normalized
                ? Value()
                : emit.rowsView(emit.readBuffer(source), leadingRank));
    resultBuffer = emit.alloc(outputType, shapeSource);
    y = emit.rowsView(resultBuffer, leadingRank);
    rows = memref::DimOp::create(b, inputs.front(), 0);
    n = memref::DimOp::create(b, inputs.front(), 1);
    Value count = arith::UIToFPOp::create(
        b, b.getF32Type(), arith::IndexCastUIOp::create(b, b.getI64Type(), n));
    inverseCount = arith::DivFOp::create(b, emit.f32(1.0), count);
  }

  /// The input's f32 vector at (row, column), under `mask` if given.
  Value load(Value row, Value column, Value mask) {
    if (!prologue)
      return emit.load(inputs.front(), {row, column}, mask);
    SmallVector<Value> operands;
    for (Value input : inputs)
      operands.push_back(emit.loadRaw(input, {row, column}, mask));
    return emit.widen(evaluatePrologue(operands, strategy.lanes));
  }

  /// `load` as a callable for the row emitter (which keeps only a reference
  /// to it: the caller holds it while the rows are built).
  auto loader() {
    return [this](Value row, Value column, Value mask) {
      return load(row, column, mask);
    };
  }

  /// y[row, :] = compute(x[row, :], column, mask), a vector at a time, the
  /// f32 result through the epilogue where there is one.
  void
  writeRow(Value row,
           function_ref<Value(Value x, Value column, Value mask)> compute) {
    auto input = loader();
    // The buffer has the epilogue's type, to which a store of the f32
    // result rounds it.
    if (!epilogue || isNarrowingEpilogue(epilogue))
      return emit.writeRow(input, y, row, n, compute);
    // The epilogue's result has the buffer's type: stores round nothing.
    auto write = [&](Value j, Value mask) {
      Value value = compute(input(row, j, mask), j, mask);
      emit.store(emit.evaluateEpilogue(epilogue, epilogueInputs, value,
                                       type.getElementType(), row, j, mask),
                 y, {row, j}, mask);
    };
    emit.forEachStep(
        n, strategy.lanes, [&](Value j) { write(j, Value()); }, write);
  }

  /// The input's first element of `row`, in f32.
  Value loadFirst(Value row) {
    SmallVector<Value> operands;
    for (Value input : inputs)
      operands.push_back(
          memref::LoadOp::create(b, input, ValueRange{row, emit.index(0)}));
    Value first =
        prologue ? evaluatePrologue(operands, /*lanes=*/0) : operands.front();
    if (!first.getType().isF32())
      first = arith::ExtFOp::create(b, b.getF32Type(), first);
    return first;
  }

  /// The prologue's body on `operands`: scalars (`lanes` 0) or vectors of
  /// `lanes`.
  Value evaluatePrologue(ValueRange operands, int64_t lanes) {
    return evaluateLaneWise(b, *prologue.getBody(), operands, lanes).front();
  }

  /// `body(row)` for each row, threaded when large (RowEmitter::forEachRow).
  /// A result of `strategy.minStreamedBytes` or more whose rows start on
  /// whole vectors is written with streaming stores; each row's are fenced
  /// before the next row, so that all are ordered before the loop ends.
  void forEachRow(function_ref<void(Value row)> body) {
    if (strategy.minStreamedBytes == 0 || failed(emit.declareStreamingFence()))
      return emit.forEachRow(rows, n, body);
    emit.withStreamingStoresWhere(resultIsStreamable(), [&] {
      emit.forEachRow(rows, n, [&](Value row) {
        body(row);
        if (emit.streamingStores)
          emit.fenceStreamingStores();
      });
    });
  }

  /// Whether the result is large enough to stream, and every whole vector
  /// of it starts on a multiple of the vector's size: the buffer's start
  /// and each row's length are multiples of it.
  Value resultIsStreamable() {
    int64_t elementBytes = outputType.getElementTypeBitWidth() / 8;
    Value bytes = arith::MulIOp::create(
        b, rows, arith::MulIOp::create(b, n, emit.index(elementBytes)));
    Value large = arith::CmpIOp::create(b, arith::CmpIPredicate::uge, bytes,
                                        emit.index(strategy.minStreamedBytes));
    return arith::AndIOp::create(b, large,
                                 emit.startsOnWholeVectors(resultBuffer, n));
  }

  /// Replaces the norm's op with `results`, its normalized result first,
  /// which the epilogue, where there is one, gives in its place; and erases
  /// the prologue, which the norm now computes itself.
  void replace(Operation *op, SmallVector<Value> results,
               ConversionPatternRewriter &rewriter) {
    if (epilogue) {
      rewriter.replaceOp(epilogue, results.front());
      // The norm's own result had no reader but the epilogue: it is never
      // stored.
      results.front() = emit.emptyLike(type, shapeSource);
    }
    rewriter.replaceOp(op, results);
    if (prologue)
      rewriter.eraseOp(prologue);
  }

  ImplicitLocOpBuilder &b;
  RankedTensorType type;
  int64_t leadingRank;
  CPUNormStrategy strategy;
  RowEmitter emit;
  /// The elementwise ops that compute the input for the norm alone and that
  /// alone read its result; null where there are none.
  linalg::GenericOp prologue, epilogue;
  /// The norm's normalized result, which the epilogue reads.
  Value normalized;
  /// The input, or the prologue's operands, as [rows, n].
  SmallVector<Value> inputs;
  /// The epilogue's operands as [rows, n]; null for the norm's result.
  SmallVector<Value> epilogueInputs;
  /// What the result buffer holds: the norm's result, or the epilogue's.
  RankedTensorType outputType;
  Value shapeSource, resultBuffer, y, rows, n, inverseCount;
};

/// A norm's pattern, for `target`.
template <typename NormOp>
struct NormToVectorPattern : OpConversionPattern<NormOp> {
  NormToVectorPattern(MLIRContext *context, const CPUTarget &target)
      : OpConversionPattern<NormOp>(context), target(target) {}

  CPUTarget target;
};

struct LayerNormToVector : NormToVectorPattern<LayerNormOp> {
  using NormToVectorPattern::NormToVectorPattern;

  LogicalResult
  matchAndRewrite(LayerNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    NormRows norm(b, op, adaptor.getInput(), op.getNormalizedRank(), target);
    RowEmitter &emit = norm.emit;
    Value gamma = emit.widenedOnce(
        emit.flatView(emit.readBuffer(adaptor.getGamma())), norm.n);
    Value beta = emit.widenedOnce(
        emit.flatView(emit.readBuffer(adaptor.getBeta())), norm.n);
    Value epsilon = emit.f32(op.getEpsilon().convertToFloat());
    Value meanBuffer, rstdBuffer, means, rstds;
    if (op.getReturnStats()) {
      auto statsType = cast<RankedTensorType>(op.getMean().getType());
      meanBuffer = emit.alloc(statsType, norm.shapeSource);
      rstdBuffer = emit.alloc(statsType, norm.shapeSource);
      means = emit.flatView(meanBuffer);
      rstds = emit.flatView(rstdBuffer);
    }

    auto input = norm.loader();
    norm.forEachRow([&](Value row) {
      // The reference's numerics: sums of x - pivot (the row's first
      // element), then of the centred squares, which stay accurate when
      // |mean| >> stddev. An empty row has no pivot.
      Value hasElements = arith::CmpIOp::create(b, arith::CmpIPredicate::ugt,
                                                norm.n, emit.index(0));
      auto pivotIf = scf::IfOp::create(
          b, hasElements,
          [&](OpBuilder &nested, Location) {
            BuildInside inside(b, nested);
            scf::YieldOp::create(b, norm.loadFirst(row));
          },
          [&](OpBuilder &nested, Location) {
            BuildInside inside(b, nested);
            scf::YieldOp::create(b, ValueRange{emit.f32(0.0)});
          });
      Value pivot = pivotIf.getResult(0);
      Value pivotLanes = emit.splat(pivot);
      Value shiftedSum = emit.reduceRow(input, row, norm.n, [&](Value x) {
        return arith::SubFOp::create(b, x, pivotLanes).getResult();
      });
      Value meanShift = arith::MulFOp::create(b, shiftedSum, norm.inverseCount);
      Value meanShiftLanes = emit.splat(meanShift);
      Value squares = emit.reduceRow(input, row, norm.n, [&](Value x) {
        Value centred = arith::SubFOp::create(
            b, arith::SubFOp::create(b, x, pivotLanes), meanShiftLanes);
        return arith::MulFOp::create(b, centred, centred).getResult();
      });
      Value rstd = emit.reciprocalRoot(squares, norm.inverseCount, epsilon);
      // ((x - pivot) - shift) * rstd = fma(x - pivot, rstd, -shift * rstd).
      Value offset =
          arith::NegFOp::create(b, arith::MulFOp::create(b, meanShift, rstd));
      Value rstdLanes = emit.splat(rstd), offsetLanes = emit.splat(offset);
      norm.writeRow(row, [&](Value x, Value column, Value mask) {
        Value shifted = arith::SubFOp::create(b, x, pivotLanes);
        Value y = math::FmaOp::create(b, shifted, rstdLanes, offsetLanes);
        if (gamma)
          y = arith::MulFOp::create(b, y, emit.load(gamma, column, mask));
        if (beta)
          y = arith::AddFOp::create(b, y, emit.load(beta, column, mask));
        return y;
      });
      if (means) {
        memref::StoreOp::create(b, arith::AddFOp::create(b, pivot, meanShift),
                                means, row);
        memref::StoreOp::create(b, rstd, rstds, row);
      }
    });

    SmallVector<Value> results{
        emit.toTensor(norm.resultBuffer, norm.outputType)};
    if (op.getReturnStats()) {
      results.push_back(emit.toTensor(meanBuffer, op.getMean().getType()));
      results.push_back(emit.toTensor(rstdBuffer, op.getRstd().getType()));
    }
    norm.replace(op, results, rewriter);
    return success();
  }
};

struct RMSNormToVector : NormToVectorPattern<RMSNormOp> {
  using NormToVectorPattern::NormToVectorPattern;

  LogicalResult
  matchAndRewrite(RMSNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    NormRows norm(b, op, adaptor.getInput(), op.getNormalizedRank(), target);
    RowEmitter &emit = norm.emit;
    Value gamma = emit.widenedOnce(
        emit.flatView(emit.readBuffer(adaptor.getGamma())), norm.n);
    Value epsilon = emit.f32(op.getEpsilon().convertToFloat());

    auto input = norm.loader();
    norm.forEachRow([&](Value row) {
      Value squares = emit.reduceRow(input, row, norm.n, [&](Value x) {
        return arith::MulFOp::create(b, x, x).getResult();
      });
      Value scale =
          emit.splat(emit.reciprocalRoot(squares, norm.inverseCount, epsilon));
      norm.writeRow(row, [&](Value x, Value column, Value mask) {
        Value y = arith::MulFOp::create(b, x, scale);
        if (gamma)
          y = arith::MulFOp::create(b, y, emit.load(gamma, column, mask));
        return y;
      });
    });
    norm.replace(op, {emit.toTensor(norm.resultBuffer, norm.outputType)},
                 rewriter);
    return success();
  }
};

struct ConvertFFFNormsToVectorPass
    : fff::impl::ConvertFFFNormsToVectorBase<ConvertFFFNormsToVectorPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(checkVectorBits(getOperation(), vectorBits)))
      return signalPassFailure();
    // Units are inlined first, so that the patterns see the ops around
    // each norm as they are (the conversion would map a unit's block
    // arguments to its inputs only when it ends, and the epilogue check
    // reads what the epilogue's operands are defined by).
    SmallVector<FusionOp> units;
    getOperation()->walk([&](FusionOp unit) { units.push_back(unit); });
    IRRewriter rewriter(&getContext());
    for (FusionOp unit : units) {
      rewriter.setInsertionPoint(unit);
      inlineUnit(rewriter, unit, unit.getInputs());
    }
    ConversionTarget target(getContext());
    target.addIllegalOp<LayerNormOp, RMSNormOp, LayerNormGradOp, RMSNormGradOp,
                        FusionOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    populateFFFNormsToVectorPatterns(patterns,
                                     CPUTarget{vectorBits, integerBf16});
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void fff::populateFFFNormsToVectorPatterns(RewritePatternSet &patterns,
                                           const CPUTarget &target) {
  // A fused unit's body runs as written on the CPU; its norm is then one of
  // these.
  populateInlineFusionPatterns(patterns);
  patterns.add<LayerNormToVector, RMSNormToVector>(patterns.getContext(),
                                                   target);
  populateFFFNormGradsToVectorPatterns(patterns, target);
}

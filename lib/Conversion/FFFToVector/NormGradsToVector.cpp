//===- NormGradsToVector.cpp - norm backward to CPU vector loops -*- C++
//-*-===//
//
// convert-fff-norms-to-vector's lowering of fff.layer_norm_grad and
// fff.rms_norm_grad, with the arithmetic of the reference lowering
// (NormGradsToLoops.cpp) per element. Each row of dy and x is read twice,
// which costs one pass over memory when the row fits in the cache:
//
// 1. the row's sums (sum(g) and sum(g * xhat); for an rms_norm_grad
//    without rstd, sum(x^2) and sum(g * x), from which rstd and
//    sum(g * xhat) = rstd * sum(g * x) follow), in several vector
//    accumulators;
// 2. dx, and, in the same loop, the row's dy * xhat and dy added into its
//    block's partial dgamma and dbeta rows.
//
// A row's second pass runs inside the loop of the next row's first (see
// GradRows::build), so that memory is read while it runs: on this project's
// 2-core machine, a 4096x768 f32 LayerNorm backward with its tensors out of
// the caches took 2.30-2.40 ms so, against 2.57-2.61 ms a pass at a time
// (torch's x + dy, which moves the same bytes, 1.43-1.53 ms).
//
// The pointwise work that AOTAutograd's backward graphs put around a norm's
// backward is applied as the rows stream: an elementwise prologue that
// computes dy for this op alone (a dropout mask and scale, a cast) as dy is
// read, one that computes x for it alone (the cast that widens a bf16 x for
// an f32 norm: torch's mixed-type norms) as x is read, and an elementwise
// epilogue that alone reads dx (the residual stream's gradient added to it,
// `dh = dresidual + dx`; a cast) as dx is written, so that neither dy, x's
// widening nor dx is stored.
//
// Where dy, x and dx move more than the caches hold (min_streamed_bytes),
// dx is written with streaming stores, which skip reading its lines first:
// here, a 4096x768 f32 backward (37.7 MB) took 1.92 ms so against 2.13 for
// LayerNorm, 1.65 against 1.96 for RMSNorm (medians of 30 interleaved
// cold calls, the same bits). The partial rows, read back at every row,
// are stored the ordinary way.
//
// Rows are grouped into `row_blocks` blocks (fewer for fewer rows), a
// function of the shape alone; the blocks run across threads, each summing
// its rows in order into partial rows of its own, and the partial rows are
// then summed in block order. So dgamma and dbeta have the same bits for
// any thread count, and no two threads write one location.
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/FFFToVector/FFFToVector.h"

#include "LaneWise.h"
#include "RowEmitter.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace fff;

namespace {

/// An operand of a norm backward read as [rows, n] rows: the tensor itself,
/// or the elementwise prologue that computes it for this op alone (a
/// dropout's mask on dy, a cast that widens dy or x), evaluated lane by lane
/// as its own operands are read, so that its result is never stored.
struct RowOperand {
  RowOperand(RowEmitter &emit, Value operand, int64_t leadingRank)
      : prologue(elementwisePrologue(operand)) {
    for (Value source :
         prologue ? ValueRange(prologue.getDpsInputs()) : ValueRange(operand)) {
      buffers.push_back(emit.readBuffer(source));
      rows.push_back(emit.rowsView(buffers.back(), leadingRank));
    }
  }

  /// The f32 vector at (row, column), under `mask` if given, its masked-off
  /// lanes zero.
  Value load(ImplicitLocOpBuilder &b, RowEmitter &emit, Value row, Value column,
             Value mask) {
    if (!prologue)
      return emit.load(rows.front(), {row, column}, mask);
    SmallVector<Value> operands;
    for (Value source : rows)
      operands.push_back(emit.loadRaw(source, {row, column}, mask));
    Value value = emit.widen(
        evaluateLaneWise(b, *prologue.getBody(), operands, emit.getLanes())
            .front());
    // The prologue of zeros need not be zero (dy = grad + c), and the sums
    // and partials take every lane.
    return mask ? arith::SelectOp::create(b, mask, value, emit.zeros())
                      .getResult()
                : value;
  }

  /// The elementwise op read in the operand's place; null where there is
  /// none.
  linalg::GenericOp prologue;
  /// The operand's buffer, or its prologue's operands' (one shape), and
  /// their [rows, n] views.
  SmallVector<Value> buffers, rows;
};

/// What both backward ops share: dy, x and dx as [rows, n], gamma widened,
/// the parameter gradients' partial rows, and the loops over blocks of rows.
/// A parameter gradient nothing uses (dgamma where raising found only dx)
/// is not computed.
struct GradRows {
  /// The rows of `op`, a norm backward, whose operands `adaptor` holds.
  template <typename GradOp>
  GradRows(ImplicitLocOpBuilder &b, GradOp op, typename GradOp::Adaptor adaptor,
           const CPUTarget &target)
      : GradRows(b, op, adaptor.getGradOutput(), adaptor.getInput(),
                 adaptor.getGamma(), op.getNormalizedRank(), op.getParamGrads(),
                 target) {}

  GradRows(ImplicitLocOpBuilder &b, Operation *op, Value gradOutput,
           Value input, Value gamma, int64_t normalizedRank,
           ValueRange paramGrads, const CPUTarget &target)
      : b(b), type(cast<RankedTensorType>(input.getType())),
        leadingRank(type.getRank() - normalizedRank),
        strategy(selectCPUNormGradStrategy(staticRowSize(type, normalizedRank),
                                           target)),
        emit(b, strategy), dy(emit, gradOutput, leadingRank),
        x(emit, input, leadingRank),
        epilogue(
            elementwiseEpilogue(op->getResult(0), op, /*extentsKept=*/true)) {
    // dgamma sums dy * xhat, dbeta dy: with a scale the first gradient is
    // dgamma.
    for (auto [i, result] : llvm::enumerate(paramGrads))
      if (!result.use_empty())
        summed.push_back({i, gamma && i == 0});
    xBuffer = x.buffers.front();
    if (epilogue) {
      for (Value source : epilogue.getDpsInputs())
        epilogueInputs.push_back(
            source == op->getResult(0)
                ? Value()
                : emit.rowsView(emit.readBuffer(source), leadingRank));
      outputType = cast<RankedTensorType>(epilogue->getResult(0).getType());
    } else {
      outputType = type;
    }
    dxBuffer = emit.alloc(outputType, xBuffer);
    dx = emit.rowsView(dxBuffer, leadingRank);
    rows = memref::DimOp::create(b, x.rows.front(), 0);
    n = memref::DimOp::create(b, x.rows.front(), 1);
    this->gamma = emit.widenedOnce(emit.flatView(emit.readBuffer(gamma)), n);
    Value count = arith::UIToFPOp::create(
        b, b.getF32Type(), arith::IndexCastUIOp::create(b, b.getI64Type(), n));
    inverseCount = arith::DivFOp::create(b, emit.f32(1.0), count);

    // max(1, min(rows, row_blocks)) blocks of ceil(rows / blocks) rows.
    Value one = emit.index(1);
    blocks = arith::MaxUIOp::create(
        b, one,
        arith::MinUIOp::create(b, rows, emit.index(strategy.rowBlocks)));
    rowsPerBlock = arith::CeilDivUIOp::create(b, rows, blocks);
    for (size_t i = 0; i < summed.size(); ++i)
      partials.push_back(emit.VectorEmitter::alloc(
          MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                          b.getF32Type()),
          ValueRange{blocks, n}));
  }

  /// dy's and x's f32 vectors at (row, column), under `mask` if given,
  /// their masked-off lanes zero.
  Value loadGradOutput(Value row, Value column, Value mask) {
    return dy.load(b, emit, row, column, mask);
  }
  Value loadInput(Value row, Value column, Value mask) {
    return x.load(b, emit, row, column, mask);
  }

  /// Stores dx's f32 vector `value` at (row, column): rounded to dx's type,
  /// and through the epilogue where there is one.
  void storeInputGrad(Value value, Value row, Value column, Value mask) {
    // dx's buffer has the epilogue's type, to which a store of the f32
    // vector rounds it.
    if (epilogue && !isNarrowingEpilogue(epilogue))
      value = emit.evaluateEpilogue(epilogue, epilogueInputs, value,
                                    type.getElementType(), row, column, mask);
    emit.streamingStores = streamDx;
    emit.store(value, dx, {row, column}, mask);
    emit.streamingStores = false;
  }

  Value scaledGrad(Value dyValue, Value column, Value mask) {
    if (!gamma)
      return dyValue;
    return arith::MulFOp::create(b, dyValue, emit.load(gamma, column, mask));
  }

  /// What a row's first pass gives its second, as splat vectors: rstd,
  /// mean(g * xhat), and for layer_norm mean(g) and the row's mean (null
  /// for rms_norm).
  struct RowSums {
    Value rstd, meanGXhat, meanG, mean;

    SmallVector<Value> values() const {
      SmallVector<Value> all{rstd, meanGXhat};
      for (Value value : {meanG, mean})
        if (value)
          all.push_back(value);
      return all;
    }
    /// The RowSums of `values`, laid out as `like`'s.
    static RowSums like(const RowSums &like, ValueRange values) {
      RowSums sums{values[0], values[1], Value(), Value()};
      size_t next = 2;
      if (like.meanG)
        sums.meanG = values[next++];
      if (like.mean)
        sums.mean = values[next++];
      return sums;
    }
  };
  /// A row's second pass at one vector of columns (j, under `mask`).
  using ColumnStep = function_ref<void(Value j, Value mask)>;

  /// For each row: `sums(row, alongside)` takes the row's first pass (its
  /// sums over the row, calling `alongside(j, mask)`, where given, once
  /// for each vector of columns it reads) and returns its RowSums;
  /// `xhat(x, sums)` is the normalized vector. Then the second pass: dx
  /// and the partials.
  ///
  /// The passes are pipelined: a row's second pass runs in the loop of
  /// the next row's first. The second pass reads its row from the cache;
  /// alone, it would leave memory idle while it runs (the hardware fetches
  /// ahead only of reads that miss), and the next row's first pass would
  /// then wait for every line it reads.
  void build(function_ref<RowSums(Value row, ColumnStep alongside)> sums,
             function_ref<Value(Value x, const RowSums &)> xhat) {
    auto secondPass = [&](Value row, Value block, const RowSums &rowSums,
                          Value j, Value mask) {
      Value dyValue = loadGradOutput(row, j, mask);
      Value xhatValue = xhat(loadInput(row, j, mask), rowSums);
      Value g = scaledGrad(dyValue, j, mask);
      Value centred = arith::SubFOp::create(
          b, g, arith::MulFOp::create(b, xhatValue, rowSums.meanGXhat));
      if (rowSums.meanG)
        centred = arith::SubFOp::create(b, centred, rowSums.meanG);
      storeInputGrad(arith::MulFOp::create(b, rowSums.rstd, centred), row, j,
                     mask);
      // Masked-off lanes load as zero, so they add zero to the partials.
      for (auto [sum, partial] : llvm::zip_equal(summed, partials)) {
        Value term = sum.timesXhat
                         ? arith::MulFOp::create(b, dyValue, xhatValue)
                         : dyValue;
        Value total = arith::AddFOp::create(
            b, emit.load(partial, {block, j}, mask), term);
        emit.store(total, partial, {block, j}, mask);
      }
    };

    Value work = arith::MulIOp::create(b, rows, n);
    auto rowLoop = [&] {
      buildRowLoop(
          b, blocks, work, strategy.minParallelElements,
          strategy.toAttr(b.getContext()), [&](Value block) {
            Value first = arith::MulIOp::create(b, block, rowsPerBlock);
            Value last = arith::MinUIOp::create(
                b, rows, arith::AddIOp::create(b, first, rowsPerBlock));
            for (Value partial : partials)
              fillRow(partial, block);
            // The last blocks of a few rows, and every block of none, are
            // empty.
            Value any = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                              first, last);
            scf::IfOp::create(b, any, [&](OpBuilder &nested, Location) {
              BuildInside inside(b, nested);
              Value lastRow = arith::SubIOp::create(b, last, emit.index(1));
              RowSums firstSums = sums(first, nullptr);
              scf::ForOp::create(
                  b, first, last, emit.index(1), firstSums.values(),
                  [&](OpBuilder &nested, Location, Value row,
                      ValueRange carried) {
                    BuildInside inside(b, nested);
                    RowSums rowSums = RowSums::like(firstSums, carried);
                    // The block's last row takes its own first pass again,
                    // from the cache, beside its second.
                    Value next = arith::MinUIOp::create(
                        b, lastRow,
                        arith::AddIOp::create(b, row, emit.index(1)));
                    RowSums nextSums = sums(next, [&](Value j, Value mask) {
                      secondPass(row, block, rowSums, j, mask);
                    });
                    scf::YieldOp::create(b, nextSums.values());
                  });
              if (streamDx)
                emit.fenceStreamingStores();
              scf::YieldOp::create(b);
            });
          });
    };
    if (strategy.minStreamedBytes == 0 || failed(emit.declareStreamingFence()))
      return rowLoop();
    // Only dx streams: the partial rows are read back at every row.
    emit.withStreamingStoresWhere(dxIsStreamable(), [&] {
      streamDx = emit.streamingStores;
      emit.streamingStores = false;
      rowLoop();
      streamDx = false;
    });
  }

  /// Whether dx's stores skip the caches: the rows the call streams (dy, x
  /// and dx) do not fit in them, so dx would leave them before anyone read
  /// it, and dx's rows start on whole vectors.
  Value dxIsStreamable() {
    auto bytes = [&](Type element) {
      return arith::MulIOp::create(
          b, arith::MulIOp::create(b, rows, n),
          emit.index(element.getIntOrFloatBitWidth() / 8));
    };
    Value streamed = arith::AddIOp::create(
        b, bytes(outputType.getElementType()),
        arith::MulIOp::create(b, bytes(type.getElementType()), emit.index(2)));
    Value large = arith::CmpIOp::create(b, arith::CmpIPredicate::uge, streamed,
                                        emit.index(strategy.minStreamedBytes));
    return arith::AndIOp::create(b, large,
                                 emit.startsOnWholeVectors(dxBuffer, n));
  }

  /// The parameter gradients `results` stand for: each summed one's
  /// partial rows added in block order and narrowed to its type; an empty
  /// tensor for each one nothing uses.
  SmallVector<Value> parameterGradients(ValueRange results) {
    SmallVector<Value> gradients;
    for (Value result : results) {
      auto resultType = cast<RankedTensorType>(result.getType());
      SmallVector<Value> extents;
      for (int64_t dim = 0; dim < resultType.getRank(); ++dim)
        if (resultType.isDynamicDim(dim))
          extents.push_back(
              memref::DimOp::create(b, xBuffer, leadingRank + dim));
      gradients.push_back(tensor::EmptyOp::create(
          b, resultType.getShape(), resultType.getElementType(), extents));
    }
    for (auto [sum, partial] : llvm::zip_equal(summed, partials)) {
      Value result = results[sum.result];
      auto resultType = cast<RankedTensorType>(result.getType());
      Value buffer = emit.VectorEmitter::alloc(
          MemRefType::get({ShapedType::kDynamic}, resultType.getElementType()),
          n);
      auto column = [&](Value j, Value mask) {
        auto loop = scf::ForOp::create(
            b, emit.index(0), blocks, emit.index(1), ValueRange{emit.zeros()},
            [&](OpBuilder &nested, Location, Value block, ValueRange sum) {
              BuildInside inside(b, nested);
              scf::YieldOp::create(
                  b, ValueRange{arith::AddFOp::create(
                         b, sum[0], emit.load(partial, {block, j}, mask))});
            });
        emit.store(loop.getResult(0), buffer, j, mask);
      };
      emit.forEachStep(
          n, emit.getLanes(), [&](Value j) { column(j, Value()); }, column);
      gradients[sum.result] = reshape(buffer, resultType);
    }
    return gradients;
  }

  /// Replaces `op` (and its prologues and epilogue) with the results: dx,
  /// or the epilogue's result, then the parameter gradients.
  void replace(Operation *op, ConversionPatternRewriter &rewriter) {
    SmallVector<Value> values{emit.toTensor(dxBuffer, outputType)};
    if (epilogue) {
      rewriter.replaceOp(epilogue, values.front());
      // dx had no reader but the epilogue: it is never stored.
      values.front() = emit.emptyLike(type, xBuffer);
    }
    llvm::append_range(values,
                       parameterGradients(op->getResults().drop_front()));
    rewriter.replaceOp(op, values);
    for (linalg::GenericOp prologue : {dy.prologue, x.prologue})
      if (prologue)
        rewriter.eraseOp(prologue);
  }

  ImplicitLocOpBuilder &b;
  RankedTensorType type;
  int64_t leadingRank;
  CPUNormGradStrategy strategy;
  RowEmitter emit;
  /// dy and x, each read through its prologue where it has one.
  RowOperand dy, x;
  /// The elementwise op that alone reads dx; null where there is none.
  linalg::GenericOp epilogue;
  /// The epilogue's operands as [rows, n]; null for dx itself.
  SmallVector<Value> epilogueInputs;
  /// What dx's buffer holds: dx, or the epilogue's result.
  RankedTensorType outputType;
  /// A parameter gradient that is computed: its result's position, and
  /// whether it sums dy * xhat (dgamma) or dy (dbeta).
  struct Summed {
    size_t result;
    bool timesXhat;
  };
  SmallVector<Summed, 2> summed;
  /// x's buffer, or its prologue's first operand's: the extents.
  Value xBuffer;
  Value dx, dxBuffer, gamma, rows, n, inverseCount, blocks, rowsPerBlock;
  /// While the row loop is built: whether dx's whole vectors are stored
  /// non-temporally (dxIsStreamable).
  bool streamDx = false;
  SmallVector<Value> partials;

private:
  void fillRow(Value buffer, Value row) {
    auto zero = [&](Value j, Value mask) {
      emit.store(emit.zeros(), buffer, {row, j}, mask);
    };
    emit.forEachStep(
        n, emit.getLanes(), [&](Value j) { zero(j, Value()); }, zero);
  }

  /// The flat [n] buffer as the result tensor of `type` (the normalized
  /// shape).
  Value reshape(Value flat, RankedTensorType type) {
    Type element = type.getElementType();
    if (type.hasStaticShape())
      flat = memref::CastOp::create(
          b, MemRefType::get({type.getNumElements()}, element), flat);
    if (type.getRank() == 1)
      return emit.toTensor(flat, type);
    SmallVector<OpFoldResult> sizes;
    for (int64_t dim = 0; dim < type.getRank(); ++dim)
      sizes.push_back(type.isDynamicDim(dim)
                          ? OpFoldResult(memref::DimOp::create(
                                             b, xBuffer, leadingRank + dim)
                                             .getResult())
                          : OpFoldResult(b.getIndexAttr(type.getDimSize(dim))));
    ReassociationIndices all;
    for (int64_t dim = 0; dim < type.getRank(); ++dim)
      all.push_back(dim);
    Value view = memref::ExpandShapeOp::create(
        b, MemRefType::get(type.getShape(), element), flat,
        ArrayRef<ReassociationIndices>{all}, sizes);
    return emit.toTensor(view, type);
  }
};

/// A backward pattern, for `target`.
template <typename GradOp>
struct GradToVectorPattern : OpConversionPattern<GradOp> {
  GradToVectorPattern(MLIRContext *context, const CPUTarget &target)
      : OpConversionPattern<GradOp>(context), target(target) {}

  CPUTarget target;
};

struct LayerNormGradToVector : GradToVectorPattern<LayerNormGradOp> {
  using GradToVectorPattern::GradToVectorPattern;

  LogicalResult
  matchAndRewrite(LayerNormGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    GradRows grad(b, op, adaptor, target);
    RowEmitter &emit = grad.emit;
    Value means = emit.flatView(emit.readBuffer(adaptor.getMean()));
    Value rstds = emit.flatView(emit.readBuffer(adaptor.getRstd()));
    auto xhat = [&](Value x, const GradRows::RowSums &sums) -> Value {
      return arith::MulFOp::create(b, arith::SubFOp::create(b, x, sums.mean),
                                   sums.rstd);
    };
    grad.build(
        [&](Value row, GradRows::ColumnStep alongside) {
          GradRows::RowSums rowSums;
          rowSums.mean = emit.splat(memref::LoadOp::create(b, means, row));
          rowSums.rstd = emit.splat(memref::LoadOp::create(b, rstds, row));
          SmallVector<Value> sums = emit.reduceEach(
              grad.n, grad.strategy.accumulators, 2,
              [&](int64_t sum, Value j, Value partial, Value mask) -> Value {
                if (sum == 0 && alongside)
                  alongside(j, mask);
                Value g =
                    grad.scaledGrad(grad.loadGradOutput(row, j, mask), j, mask);
                // Masked-off lanes of dy load as zero: g is zero there.
                Value term =
                    sum == 0
                        ? g
                        : arith::MulFOp::create(
                              b, g, xhat(grad.loadInput(row, j, mask), rowSums))
                              .getResult();
                return arith::AddFOp::create(b, partial, term);
              });
          rowSums.meanG =
              emit.splat(arith::MulFOp::create(b, sums[0], grad.inverseCount));
          rowSums.meanGXhat =
              emit.splat(arith::MulFOp::create(b, sums[1], grad.inverseCount));
          return rowSums;
        },
        xhat);
    grad.replace(op, rewriter);
    return success();
  }
};

struct RMSNormGradToVector : GradToVectorPattern<RMSNormGradOp> {
  using GradToVectorPattern::GradToVectorPattern;

  LogicalResult
  matchAndRewrite(RMSNormGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    GradRows grad(b, op, adaptor, target);
    RowEmitter &emit = grad.emit;
    Value rstds = emit.flatView(emit.readBuffer(adaptor.getRstd()));
    Value epsilon = emit.f32(op.getEpsilon().convertToFloat());
    auto xhat = [&](Value x, const GradRows::RowSums &sums) -> Value {
      return arith::MulFOp::create(b, x, sums.rstd);
    };
    grad.build(
        [&](Value row, GradRows::ColumnStep alongside) {
          auto gradTimesX = [&](Value j, Value mask) -> Value {
            Value g =
                grad.scaledGrad(grad.loadGradOutput(row, j, mask), j, mask);
            return arith::MulFOp::create(b, g, grad.loadInput(row, j, mask));
          };
          GradRows::RowSums rowSums;
          Value gXSum;
          if (rstds) {
            Value rstd = memref::LoadOp::create(b, rstds, row);
            rowSums.rstd = emit.splat(rstd);
            gXSum = emit.reduce(grad.n, grad.strategy.accumulators,
                                [&](Value j, Value partial, Value mask) {
                                  if (alongside)
                                    alongside(j, mask);
                                  return arith::AddFOp::create(
                                             b, partial, gradTimesX(j, mask))
                                      .getResult();
                                });
            gXSum = arith::MulFOp::create(b, gXSum, rstd);
          } else {
            // sum(x^2), for rstd as the forward computes it, and sum(g * x)
            // in one pass: sum(g * xhat) = rstd * sum(g * x).
            SmallVector<Value> sums = emit.reduceEach(
                grad.n, grad.strategy.accumulators, 2,
                [&](int64_t sum, Value j, Value partial, Value mask) -> Value {
                  Value term;
                  if (sum == 0) {
                    if (alongside)
                      alongside(j, mask);
                    Value xValue = grad.loadInput(row, j, mask);
                    term = arith::MulFOp::create(b, xValue, xValue);
                  } else {
                    term = gradTimesX(j, mask);
                  }
                  return arith::AddFOp::create(b, partial, term);
                });
            Value rstd =
                emit.reciprocalRoot(sums[0], grad.inverseCount, epsilon);
            rowSums.rstd = emit.splat(rstd);
            gXSum = arith::MulFOp::create(b, sums[1], rstd);
          }
          rowSums.meanGXhat =
              emit.splat(arith::MulFOp::create(b, gXSum, grad.inverseCount));
          return rowSums;
        },
        xhat);
    grad.replace(op, rewriter);
    return success();
  }
};

} // namespace

void fff::populateFFFNormGradsToVectorPatterns(RewritePatternSet &patterns,
                                               const CPUTarget &target) {
  patterns.add<LayerNormGradToVector, RMSNormGradToVector>(
      patterns.getContext(), target);
}

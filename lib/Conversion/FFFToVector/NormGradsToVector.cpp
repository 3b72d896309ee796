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
// Rows are grouped into `row_blocks` blocks (fewer for fewer rows), a
// function of the shape alone; the blocks run across threads, each summing
// its rows in order into partial rows of its own, and the partial rows are
// then summed in block order. So dgamma and dbeta have the same bits for
// any thread count, and no two threads write one location.
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/FFFToVector/FFFToVector.h"

#include "RowEmitter.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace fff;

namespace {

/// What both backward ops share: dy, x and dx as [rows, n], gamma widened,
/// the parameter gradients' partial rows, and the loops over blocks of rows.
/// A parameter gradient nothing uses (dgamma where raising found only dx)
/// is not computed.
struct GradRows {
  /// The rows of `op`, a norm backward, whose operands `adaptor` holds.
  template <typename GradOp>
  GradRows(ImplicitLocOpBuilder &b, GradOp op, typename GradOp::Adaptor adaptor,
           const CPUTarget &target)
      : GradRows(b, adaptor.getGradOutput(), adaptor.getInput(),
                 adaptor.getGamma(), op.getNormalizedRank(), op.getParamGrads(),
                 target) {}

  GradRows(ImplicitLocOpBuilder &b, Value gradOutput, Value input, Value gamma,
           int64_t normalizedRank, ValueRange paramGrads,
           const CPUTarget &target)
      : b(b), type(cast<RankedTensorType>(input.getType())),
        leadingRank(type.getRank() - normalizedRank),
        strategy(selectCPUNormGradStrategy(staticRowSize(type, normalizedRank),
                                           target)),
        emit(b, strategy) {
    // dgamma sums dy * xhat, dbeta dy: with a scale the first gradient is
    // dgamma.
    for (auto [i, result] : llvm::enumerate(paramGrads))
      if (!result.use_empty())
        summed.push_back({i, gamma && i == 0});
    xBuffer = emit.readBuffer(input);
    x = emit.rowsView(xBuffer, leadingRank);
    dy = emit.rowsView(emit.readBuffer(gradOutput), leadingRank);
    dxBuffer = emit.alloc(type, xBuffer);
    dx = emit.rowsView(dxBuffer, leadingRank);
    rows = memref::DimOp::create(b, x, 0);
    n = memref::DimOp::create(b, x, 1);
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

  /// A row's per-element terms: g = dy * gamma and xhat, from the f32
  /// vectors of dy and x at `column`.
  using Terms = std::pair<Value, Value>;

  Value scaledGrad(Value dyValue, Value column, Value mask) {
    if (!gamma)
      return dyValue;
    return arith::MulFOp::create(b, dyValue, emit.load(gamma, column, mask));
  }

  /// For each row: `sums(row)` returns the per-row (rstd, mean(g * xhat),
  /// mean(g)) as splat vectors (mean(g) null for rms_norm), and
  /// `xhat(row, x)` the normalized vector; then dx and the partials.
  void build(function_ref<std::tuple<Value, Value, Value>(Value row)> sums,
             function_ref<Value(Value x)> xhat) {
    auto writeRow = [&](Value row, Value block) {
      auto [rstd, meanGXhat, meanG] = sums(row);
      auto step = [&](Value j, Value mask) {
        Value dyValue = emit.load(dy, {row, j}, mask);
        Value xhatValue = xhat(emit.load(x, {row, j}, mask));
        Value g = scaledGrad(dyValue, j, mask);
        Value centred = arith::SubFOp::create(
            b, g, arith::MulFOp::create(b, xhatValue, meanGXhat));
        if (meanG)
          centred = arith::SubFOp::create(b, centred, meanG);
        emit.store(arith::MulFOp::create(b, rstd, centred), dx, {row, j}, mask);
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
      emit.forEachStep(
          n, emit.getLanes(), [&](Value j) { step(j, Value()); }, step);
    };

    Value work = arith::MulIOp::create(b, rows, n);
    buildRowLoop(b, blocks, work, strategy.minParallelElements,
                 strategy.toAttr(b.getContext()), [&](Value block) {
                   Value first = arith::MulIOp::create(b, block, rowsPerBlock);
                   Value last = arith::MinUIOp::create(
                       b, rows, arith::AddIOp::create(b, first, rowsPerBlock));
                   for (Value partial : partials)
                     fillRow(partial, block);
                   emit.forLoop(first, last, 1,
                                [&](Value row) { writeRow(row, block); });
                 });
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

  /// dx, then the parameter gradients `paramGrads` stand for.
  SmallVector<Value> results(ValueRange paramGrads) {
    SmallVector<Value> values{emit.toTensor(dxBuffer, type)};
    llvm::append_range(values, parameterGradients(paramGrads));
    return values;
  }

  ImplicitLocOpBuilder &b;
  RankedTensorType type;
  int64_t leadingRank;
  CPUNormGradStrategy strategy;
  RowEmitter emit;
  /// A parameter gradient that is computed: its result's position, and
  /// whether it sums dy * xhat (dgamma) or dy (dbeta).
  struct Summed {
    size_t result;
    bool timesXhat;
  };
  SmallVector<Summed, 2> summed;
  Value xBuffer, x, dy, dx, dxBuffer, gamma, rows, n, inverseCount, blocks,
      rowsPerBlock;
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
    Value meanLanes, rstdLanes;
    auto xhat = [&](Value x) -> Value {
      return arith::MulFOp::create(b, arith::SubFOp::create(b, x, meanLanes),
                                   rstdLanes);
    };
    grad.build(
        [&](Value row) {
          meanLanes = emit.splat(memref::LoadOp::create(b, means, row));
          rstdLanes = emit.splat(memref::LoadOp::create(b, rstds, row));
          SmallVector<Value> sums = emit.reduceEach(
              grad.n, grad.strategy.accumulators, 2,
              [&](int64_t sum, Value j, Value partial, Value mask) -> Value {
                Value g = grad.scaledGrad(emit.load(grad.dy, {row, j}, mask), j,
                                          mask);
                // Masked-off lanes of dy load as zero: g is zero there.
                Value term =
                    sum == 0
                        ? g
                        : arith::MulFOp::create(
                              b, g, xhat(emit.load(grad.x, {row, j}, mask)))
                              .getResult();
                return arith::AddFOp::create(b, partial, term);
              });
          Value meanG =
              emit.splat(arith::MulFOp::create(b, sums[0], grad.inverseCount));
          Value meanGXhat =
              emit.splat(arith::MulFOp::create(b, sums[1], grad.inverseCount));
          return std::make_tuple(rstdLanes, meanGXhat, meanG);
        },
        xhat);
    rewriter.replaceOp(op, grad.results(op.getParamGrads()));
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
    Value rstdLanes;
    auto xhat = [&](Value x) -> Value {
      return arith::MulFOp::create(b, x, rstdLanes);
    };
    grad.build(
        [&](Value row) {
          auto gradTimesX = [&](Value j, Value mask) -> Value {
            Value g =
                grad.scaledGrad(emit.load(grad.dy, {row, j}, mask), j, mask);
            return arith::MulFOp::create(b, g,
                                         emit.load(grad.x, {row, j}, mask));
          };
          Value gXSum;
          if (rstds) {
            Value rstd = memref::LoadOp::create(b, rstds, row);
            rstdLanes = emit.splat(rstd);
            gXSum = emit.reduce(grad.n, grad.strategy.accumulators,
                                [&](Value j, Value partial, Value mask) {
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
                    Value xValue = emit.load(grad.x, {row, j}, mask);
                    term = arith::MulFOp::create(b, xValue, xValue);
                  } else {
                    term = gradTimesX(j, mask);
                  }
                  return arith::AddFOp::create(b, partial, term);
                });
            Value rstd =
                emit.reciprocalRoot(sums[0], grad.inverseCount, epsilon);
            rstdLanes = emit.splat(rstd);
            gXSum = arith::MulFOp::create(b, sums[1], rstd);
          }
          Value meanGXhat =
              emit.splat(arith::MulFOp::create(b, gXSum, grad.inverseCount));
          return std::make_tuple(rstdLanes, meanGXhat, Value());
        },
        xhat);
    rewriter.replaceOp(op, grad.results(op.getParamGrads()));
    return success();
  }
};

} // namespace

void fff::populateFFFNormGradsToVectorPatterns(RewritePatternSet &patterns,
                                               const CPUTarget &target) {
  patterns.add<LayerNormGradToVector, RMSNormGradToVector>(
      patterns.getContext(), target);
}

//===- NormGradsToLoops.cpp - norm backward reference lowering --*- C++ -*-===//
//
// convert-fff-to-loops' lowering of fff.layer_norm_grad and
// fff.rms_norm_grad: linalg.generic ops on tensors that spell out
// DESIGN.md's gradient formulas, in f32. Each generic iterates over the
// input's full index space; which dims it reduces says what it computes:
//
// - per-row sums (over the normalized dims): sum(g) and sum(g * xhat);
// - dx, elementwise;
// - dgamma and dbeta, sums over the leading (row) dims, which loop in row
//   order: a fixed order, whatever runs them.
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/FFFToLoops/FFFToLoops.h"

#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace fff;

namespace {

/// A generic's operand and how the full index space reads it.
struct Indexed {
  Value value;
  AffineMap map;
};

/// The index space of a norm's backward: the input's dims, the first
/// `leadingRank` of them indexing rows.
class GradSpace {
public:
  GradSpace(ImplicitLocOpBuilder &b, Value input, int64_t normalizedRank)
      : b(b), rank(cast<RankedTensorType>(input.getType()).getRank()),
        leadingRank(rank - normalizedRank),
        sizes(tensor::getMixedSizes(b, b.getLoc(), input)) {
    MLIRContext *context = b.getContext();
    identity = AffineMap::getMultiDimIdentityMap(rank, context);
    leading = AffineMap::get(
        rank, 0, identity.getResults().take_front(leadingRank), context);
    normalized = AffineMap::get(
        rank, 0, identity.getResults().drop_front(leadingRank), context);
    SmallVector<AffineExpr> statsExprs(
        identity.getResults().take_front(leadingRank));
    statsExprs.append(normalizedRank, getAffineConstantExpr(0, context));
    stats = AffineMap::get(rank, 0, statsExprs, context);
  }

  Indexed element(Value value) const { return {value, identity}; }
  Indexed row(Value value) const { return {value, leading}; }
  Indexed statistic(Value value) const { return {value, stats}; }
  Indexed parameter(Value value) const { return {value, normalized}; }

  /// 1 / N, as an f32.
  Value inverseRowCount() const {
    return arith::DivFOp::create(b, f32(1.0), rowCount());
  }

  /// N, the elements of one row, as an f32.
  Value rowCount() const {
    Value count = arith::ConstantIndexOp::create(b, 1);
    for (OpFoldResult size : ArrayRef(sizes).drop_front(leadingRank))
      count = arith::MulIOp::create(
          b, count, getValueOrCreateConstantIndexOp(b, b.getLoc(), size));
    return arith::UIToFPOp::create(
        b, b.getF32Type(),
        arith::IndexCastUIOp::create(b, b.getI64Type(), count));
  }

  /// Sums of `terms` over each row: one f32 tensor over the leading dims
  /// per term.
  SmallVector<Value>
  sumRows(ArrayRef<Indexed> inputs, unsigned terms,
          function_ref<SmallVector<Value>(ValueRange)> term) {
    return sum(inputs, terms, /*overRows=*/false, term);
  }

  /// Sums of `terms` over the rows: one f32 tensor shaped like the
  /// normalized dims per term.
  SmallVector<Value>
  sumColumns(ArrayRef<Indexed> inputs, unsigned terms,
             function_ref<SmallVector<Value>(ValueRange)> term) {
    return sum(inputs, terms, /*overRows=*/true, term);
  }

  /// compute(inputs) at every element, as `type`.
  Value map(ArrayRef<Indexed> inputs, RankedTensorType type,
            function_ref<Value(ValueRange)> compute) {
    Value init = tensor::EmptyOp::create(b, sizes, type.getElementType());
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    return build(inputs, {{init, identity}}, iterators,
                 [&](ValueRange args, ValueRange) {
                   return SmallVector<Value>{
                       narrow(compute(args), type.getElementType())};
                 })
        .front();
  }

  /// An f32 tensor of normalized-dims shape, narrowed to `type`'s element
  /// type.
  Value narrowParameter(Value wide, RankedTensorType type) {
    if (type.getElementType().isF32())
      return wide;
    auto wideType = cast<RankedTensorType>(wide.getType());
    MLIRContext *context = b.getContext();
    AffineMap all =
        AffineMap::getMultiDimIdentityMap(wideType.getRank(), context);
    Value init = tensor::EmptyOp::create(
        b, tensor::getMixedSizes(b, b.getLoc(), wide), type.getElementType());
    auto generic = linalg::GenericOp::create(
        b, init.getType(), wide, init, ArrayRef<AffineMap>{all, all},
        SmallVector<utils::IteratorType>(wideType.getRank(),
                                         utils::IteratorType::parallel),
        [&](OpBuilder &nested, Location loc, ValueRange args) {
          ImplicitLocOpBuilder nb(loc, nested);
          linalg::YieldOp::create(nb, ValueRange{arith::TruncFOp::create(
                                          nb, type.getElementType(), args[0])});
        });
    return generic.getResult(0);
  }

  Value f32(double value) const {
    return arith::ConstantOp::create(b, b.getF32FloatAttr(value));
  }

private:
  SmallVector<Value> sum(ArrayRef<Indexed> inputs, unsigned terms,
                         bool overRows,
                         function_ref<SmallVector<Value>(ValueRange)> term) {
    ArrayRef<OpFoldResult> kept = overRows
                                      ? ArrayRef(sizes).drop_front(leadingRank)
                                      : ArrayRef(sizes).take_front(leadingRank);
    Value zero = f32(0.0);
    SmallVector<Indexed> inits;
    for (unsigned i = 0; i < terms; ++i) {
      Value empty = tensor::EmptyOp::create(b, kept, b.getF32Type());
      inits.push_back({linalg::FillOp::create(b, zero, empty).getResult(0),
                       overRows ? normalized : leading});
    }
    SmallVector<utils::IteratorType> iterators;
    for (int64_t dim = 0; dim < rank; ++dim)
      iterators.push_back((dim < leadingRank) == overRows
                              ? utils::IteratorType::reduction
                              : utils::IteratorType::parallel);
    return build(
        inputs, inits, iterators, [&](ValueRange args, ValueRange partials) {
          SmallVector<Value> sums;
          for (auto [partial, value] : llvm::zip_equal(partials, term(args)))
            sums.push_back(arith::AddFOp::create(b, partial, value));
          return sums;
        });
  }

  /// A linalg.generic over the full index space whose body sees its inputs
  /// widened to f32 and its outputs' current values.
  SmallVector<Value>
  build(ArrayRef<Indexed> inputs, ArrayRef<Indexed> inits,
        ArrayRef<utils::IteratorType> iterators,
        function_ref<SmallVector<Value>(ValueRange, ValueRange)> body) {
    SmallVector<Value> inputValues, initValues;
    SmallVector<AffineMap> maps;
    SmallVector<Type> resultTypes;
    for (const Indexed &input : inputs) {
      inputValues.push_back(input.value);
      maps.push_back(input.map);
    }
    for (const Indexed &init : inits) {
      initValues.push_back(init.value);
      resultTypes.push_back(init.value.getType());
      maps.push_back(init.map);
    }
    auto generic = linalg::GenericOp::create(
        b, resultTypes, inputValues, initValues, maps, iterators,
        [&](OpBuilder &nested, Location loc, ValueRange args) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nested.getInsertionBlock(),
                              nested.getInsertionPoint());
          SmallVector<Value> wide;
          for (Value arg : args.take_front(inputs.size()))
            wide.push_back(arg.getType().isF32()
                               ? arg
                               : arith::ExtFOp::create(b, b.getF32Type(), arg)
                                     .getResult());
          linalg::YieldOp::create(b,
                                  body(wide, args.drop_front(inputs.size())));
        });
    return SmallVector<Value>(generic.getResults());
  }

  Value narrow(Value value, Type type) {
    if (type.isF32())
      return value;
    return arith::TruncFOp::create(b, type, value);
  }

  ImplicitLocOpBuilder &b;
  int64_t rank, leadingRank;
  SmallVector<OpFoldResult> sizes;
  AffineMap identity, leading, normalized, stats;
};

/// dx = rstd * (g - xhat * mean(g * xhat) [- mean(g)]), the part both norms
/// share; `args` hold g, xhat, rstd and the per-row means.
Value inputGradient(ImplicitLocOpBuilder &b, Value g, Value xhat, Value rstd,
                    Value meanGXhat, Value meanG) {
  Value centred =
      arith::SubFOp::create(b, g, arith::MulFOp::create(b, xhat, meanGXhat));
  if (meanG)
    centred = arith::SubFOp::create(b, centred, meanG);
  return arith::MulFOp::create(b, rstd, centred);
}

/// The parameter gradients of a norm: dgamma = sum(dy * xhat) if asked for,
/// dbeta = sum(dy) if asked for; `xhat(args)` rebuilds xhat from the inputs
/// whose first is dy.
SmallVector<Value> parameterGradients(GradSpace &space,
                                      ArrayRef<Indexed> inputs,
                                      ValueRange gradResults, bool gamma,
                                      bool beta,
                                      function_ref<Value(ValueRange)> xhat,
                                      ImplicitLocOpBuilder &b) {
  if (!gamma && !beta)
    return {};
  SmallVector<Value> wide = space.sumColumns(
      inputs, unsigned(gamma) + unsigned(beta), [&](ValueRange args) {
        SmallVector<Value> terms;
        if (gamma)
          terms.push_back(arith::MulFOp::create(b, args[0], xhat(args)));
        if (beta)
          terms.push_back(args[0]);
        return terms;
      });
  SmallVector<Value> narrowed;
  for (auto [value, result] : llvm::zip_equal(wide, gradResults)) {
    // The sums have the input's normalized extents, the result may have
    // gamma's (static where the input's are dynamic).
    auto type = cast<RankedTensorType>(result.getType());
    Value gradient = space.narrowParameter(value, type);
    if (gradient.getType() != type)
      gradient = tensor::CastOp::create(b, type, gradient);
    narrowed.push_back(gradient);
  }
  return narrowed;
}

struct LayerNormGradLowering : OpConversionPattern<LayerNormGradOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(LayerNormGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    GradSpace space(b, adaptor.getInput(), op.getNormalizedRank());
    Value inverseCount = space.inverseRowCount();
    Value gamma = adaptor.getGamma();

    // Inputs of every generic: dy, x, mean, rstd[, gamma].
    SmallVector<Indexed> inputs{space.element(adaptor.getGradOutput()),
                                space.element(adaptor.getInput()),
                                space.statistic(adaptor.getMean()),
                                space.statistic(adaptor.getRstd())};
    if (gamma)
      inputs.push_back(space.parameter(gamma));
    auto xhat = [&](ValueRange args) -> Value {
      return arith::MulFOp::create(
          b, arith::SubFOp::create(b, args[1], args[2]), args[3]);
    };
    auto scaledGrad = [&](ValueRange args) -> Value {
      return gamma ? arith::MulFOp::create(b, args[0], args[4]).getResult()
                   : args[0];
    };

    SmallVector<Value> rowSums = space.sumRows(inputs, 2, [&](ValueRange args) {
      Value g = scaledGrad(args);
      return SmallVector<Value>{
          g, arith::MulFOp::create(b, g, xhat(args)).getResult()};
    });
    SmallVector<Indexed> dxInputs(inputs);
    dxInputs.push_back(space.row(rowSums[0]));
    dxInputs.push_back(space.row(rowSums[1]));
    unsigned sums = dxInputs.size() - 2;
    Value dx =
        space.map(dxInputs, op.getGradInput().getType(), [&](ValueRange args) {
          Value meanG = arith::MulFOp::create(b, args[sums], inverseCount);
          Value meanGXhat =
              arith::MulFOp::create(b, args[sums + 1], inverseCount);
          return inputGradient(b, scaledGrad(args), xhat(args), args[3],
                               meanGXhat, meanG);
        });

    SmallVector<Value> results{dx};
    llvm::append_range(results,
                       parameterGradients(space, ArrayRef(inputs).take_front(4),
                                          op.getParamGrads(), bool(gamma),
                                          op.getBiasGrad(), xhat, b));
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct RMSNormGradLowering : OpConversionPattern<RMSNormGradOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(RMSNormGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    GradSpace space(b, adaptor.getInput(), op.getNormalizedRank());
    Value inverseCount = space.inverseRowCount();
    Value gamma = adaptor.getGamma();

    // rstd as given, or recomputed from x as the forward computes it.
    Indexed rstd;
    if (adaptor.getRstd()) {
      rstd = space.statistic(adaptor.getRstd());
    } else {
      Value epsilon = space.f32(op.getEpsilon().convertToFloat());
      Value squares = space.sumRows(
          {space.element(adaptor.getInput())}, 1, [&](ValueRange args) {
            return SmallVector<Value>{
                arith::MulFOp::create(b, args[0], args[0]).getResult()};
          })[0];
      auto rowType = cast<RankedTensorType>(squares.getType());
      auto rowMap =
          AffineMap::getMultiDimIdentityMap(rowType.getRank(), b.getContext());
      Value init = tensor::EmptyOp::create(
          b, tensor::getMixedSizes(b, b.getLoc(), squares), b.getF32Type());
      Value perRow =
          linalg::GenericOp::create(
              b, rowType, squares, init, ArrayRef<AffineMap>{rowMap, rowMap},
              SmallVector<utils::IteratorType>(rowType.getRank(),
                                               utils::IteratorType::parallel),
              [&](OpBuilder &nested, Location loc, ValueRange args) {
                ImplicitLocOpBuilder nb(loc, nested);
                Value meanSquare =
                    arith::MulFOp::create(nb, args[0], inverseCount);
                linalg::YieldOp::create(
                    nb,
                    ValueRange{math::RsqrtOp::create(
                        nb, arith::AddFOp::create(nb, meanSquare, epsilon))});
              })
              .getResult(0);
      rstd = space.row(perRow);
    }

    // Inputs of every generic: dy, x, rstd[, gamma].
    SmallVector<Indexed> inputs{space.element(adaptor.getGradOutput()),
                                space.element(adaptor.getInput()), rstd};
    if (gamma)
      inputs.push_back(space.parameter(gamma));
    auto xhat = [&](ValueRange args) -> Value {
      return arith::MulFOp::create(b, args[1], args[2]);
    };
    auto scaledGrad = [&](ValueRange args) -> Value {
      return gamma ? arith::MulFOp::create(b, args[0], args[3]).getResult()
                   : args[0];
    };

    Value gXhatSum = space.sumRows(inputs, 1, [&](ValueRange args) {
      return SmallVector<Value>{
          arith::MulFOp::create(b, scaledGrad(args), xhat(args)).getResult()};
    })[0];
    SmallVector<Indexed> dxInputs(inputs);
    dxInputs.push_back(space.row(gXhatSum));
    unsigned sum = dxInputs.size() - 1;
    Value dx =
        space.map(dxInputs, op.getGradInput().getType(), [&](ValueRange args) {
          Value meanGXhat = arith::MulFOp::create(b, args[sum], inverseCount);
          return inputGradient(b, scaledGrad(args), xhat(args), args[2],
                               meanGXhat, Value());
        });

    SmallVector<Value> results{dx};
    llvm::append_range(results,
                       parameterGradients(space, ArrayRef(inputs).take_front(3),
                                          op.getParamGrads(), bool(gamma),
                                          /*beta=*/false, xhat, b));
    rewriter.replaceOp(op, results);
    return success();
  }
};

} // namespace

void fff::populateNormGradsToLoopsPatterns(RewritePatternSet &patterns) {
  patterns.add<LayerNormGradLowering, RMSNormGradLowering>(
      patterns.getContext());
}

//===- FFFToLoops.cpp - fff to linalg/scf reference lowering ----*- C++ -*-===//
//
// The CPU lowering of every fff op. It is written for clarity first: it is
// the executable form of DESIGN.md's semantics that the numeric tests check
// and that the GPU kernels are compared against.
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/FFFToLoops/FFFToLoops.h"
#include "fff/Conversion/Passes.h"

#include "BufferLoops.h"

#include "fff/Conversion/FFFToVector/CPUTreeStrategy.h"
#include "fff/Conversion/RowLoops.h"

#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "fff/Dialect/FFF/Transforms/Fusion.h"
#include "fff/Dialect/FFF/Utils/Activation.h"
#include "fff/Dialect/FFF/Utils/Routing.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Transforms/DialectConversion.h"

namespace fff {
#define GEN_PASS_DEF_CONVERTFFFTOLOOPS
#include "fff/Conversion/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;
using namespace fff::loops;

namespace {

//===----------------------------------------------------------------------===//
// Norms: linalg.generic on tensors
//===----------------------------------------------------------------------===//

/// Index bookkeeping for a norm over the trailing `normalizedRank` dims of
/// `input`: the "leading" dims index rows, the "normalized" dims are reduced.
struct NormGeometry {
  NormGeometry(ImplicitLocOpBuilder &b, Value input, int64_t normalizedRank)
      : input(input), rank(cast<RankedTensorType>(input.getType()).getRank()),
        leadingRank(rank - normalizedRank) {
    MLIRContext *ctx = b.getContext();
    identityMap = AffineMap::getMultiDimIdentityMap(rank, ctx);
    leadingMap = AffineMap::get(
        rank, 0, identityMap.getResults().take_front(leadingRank), ctx);
    normalizedMap = AffineMap::get(
        rank, 0, identityMap.getResults().drop_front(leadingRank), ctx);
    sizes = tensor::getMixedSizes(b, b.getLoc(), input);
  }

  /// An f32 tensor over the leading dims, filled with zeros.
  Value zeroRowTensor(ImplicitLocOpBuilder &b) const {
    Value empty = tensor::EmptyOp::create(
        b, ArrayRef(sizes).take_front(leadingRank), b.getF32Type());
    return linalg::FillOp::create(b, f32Constant(b, 0.0), empty).getResult(0);
  }

  /// An f32 tensor over the leading dims whose element is
  /// `compute(rowValues)`, where `rowValues` are the elements of `rowInputs`
  /// (tensors over the leading dims) at the same row.
  Value mapRows(
      ImplicitLocOpBuilder &b, ValueRange rowInputs,
      function_ref<Value(ImplicitLocOpBuilder &, ValueRange)> compute) const {
    AffineMap identity =
        AffineMap::getMultiDimIdentityMap(leadingRank, b.getContext());
    Value init = zeroRowTensor(b);
    auto generic = linalg::GenericOp::create(
        b, init.getType(), rowInputs, init,
        SmallVector<AffineMap>(rowInputs.size() + 1, identity),
        SmallVector<utils::IteratorType>(leadingRank,
                                         utils::IteratorType::parallel),
        [&](OpBuilder &nested, Location loc, ValueRange args) {
          ImplicitLocOpBuilder nb(loc, nested);
          linalg::YieldOp::create(nb,
                                  ValueRange{compute(nb, args.drop_back())});
        });
    return generic.getResult(0);
  }

  /// The first normalized element of each row, in f32. Summing `x - pivot`
  /// instead of `x` keeps the f32 mean accurate when |mean| >> stddev.
  Value rowPivot(ImplicitLocOpBuilder &b) const {
    MLIRContext *ctx = b.getContext();
    SmallVector<AffineExpr> firstElement;
    for (int64_t dim = 0; dim < rank; ++dim)
      firstElement.push_back(dim < leadingRank ? getAffineDimExpr(dim, ctx)
                                               : getAffineConstantExpr(0, ctx));
    AffineMap pivotMap = AffineMap::get(leadingRank, 0, firstElement, ctx);
    AffineMap identity = AffineMap::getMultiDimIdentityMap(leadingRank, ctx);
    Value init = zeroRowTensor(b);
    auto generic = linalg::GenericOp::create(
        b, init.getType(), input, init, ArrayRef<AffineMap>{pivotMap, identity},
        SmallVector<utils::IteratorType>(leadingRank,
                                         utils::IteratorType::parallel),
        [&](OpBuilder &nested, Location loc, ValueRange args) {
          ImplicitLocOpBuilder nb(loc, nested);
          linalg::YieldOp::create(nb, ValueRange{toF32(nb, args[0])});
        });
    return generic.getResult(0);
  }

  /// N, the number of normalized elements per row, as an f32 value.
  Value normalizedCount(ImplicitLocOpBuilder &b) const {
    Value count = arith::ConstantIndexOp::create(b, 1);
    for (OpFoldResult size : ArrayRef(sizes).drop_front(leadingRank))
      count = arith::MulIOp::create(
          b, count, getValueOrCreateConstantIndexOp(b, b.getLoc(), size));
    Value asInt = arith::IndexCastUIOp::create(b, b.getI64Type(), count);
    return arith::UIToFPOp::create(b, b.getF32Type(), asInt);
  }

  /// sum over the normalized dims of `term(x)`, one f32 per row. `term` sees
  /// the f32 value of x and the values of `rowInputs` (tensors over the
  /// leading dims).
  Value reduceRows(
      ImplicitLocOpBuilder &b, ValueRange rowInputs,
      function_ref<Value(ImplicitLocOpBuilder &, Value x, ValueRange rowValues)>
          term) const {
    SmallVector<Value> inputs{input};
    inputs.append(rowInputs.begin(), rowInputs.end());
    SmallVector<AffineMap> maps(1, identityMap);
    maps.append(rowInputs.size() + 1, leadingMap);
    SmallVector<utils::IteratorType> iterators(leadingRank,
                                               utils::IteratorType::parallel);
    iterators.append(rank - leadingRank, utils::IteratorType::reduction);
    Value init = zeroRowTensor(b);
    auto generic = linalg::GenericOp::create(
        b, init.getType(), inputs, init, maps, iterators,
        [&](OpBuilder &nested, Location loc, ValueRange args) {
          ImplicitLocOpBuilder nb(loc, nested);
          Value x = toF32(nb, args.front());
          Value t = term(nb, x, args.drop_front().drop_back());
          linalg::YieldOp::create(nb,
                                  ValueRange{accumulate(nb, args.back(), t)});
        });
    return generic.getResult(0);
  }

  /// Elementwise op over the whole input producing `resultType`. `compute`
  /// gets the f32 value of x, the row values (`rowInputs`, indexed by the
  /// leading dims) and the affine values (`paramInputs`, indexed by the
  /// normalized dims, widened to f32).
  Value
  mapElements(ImplicitLocOpBuilder &b, RankedTensorType resultType,
              ValueRange rowInputs, ValueRange paramInputs,
              function_ref<Value(ImplicitLocOpBuilder &, Value x,
                                 ValueRange rowValues, ValueRange paramValues)>
                  compute) const {
    SmallVector<Value> inputs{input};
    inputs.append(rowInputs.begin(), rowInputs.end());
    inputs.append(paramInputs.begin(), paramInputs.end());
    SmallVector<AffineMap> maps(1, identityMap);
    maps.append(rowInputs.size(), leadingMap);
    maps.append(paramInputs.size(), normalizedMap);
    maps.push_back(identityMap);
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    Value init = tensor::EmptyOp::create(b, sizes, resultType.getElementType());
    auto generic = linalg::GenericOp::create(
        b, resultType, inputs, init, maps, iterators,
        [&](OpBuilder &nested, Location loc, ValueRange args) {
          ImplicitLocOpBuilder nb(loc, nested);
          ValueRange rowValues = args.slice(1, rowInputs.size());
          SmallVector<Value> paramValues;
          for (Value param :
               args.slice(1 + rowInputs.size(), paramInputs.size()))
            paramValues.push_back(toF32(nb, param));
          Value y =
              compute(nb, toF32(nb, args.front()), rowValues, paramValues);
          linalg::YieldOp::create(
              nb, ValueRange{fromF32(nb, y, resultType.getElementType())});
        });
    return generic.getResult(0);
  }

  Value input;
  int64_t rank;
  int64_t leadingRank;
  AffineMap identityMap, leadingMap, normalizedMap;
  SmallVector<OpFoldResult> sizes;
};

/// Multiplies by gamma and adds beta where present.
Value applyAffine(ImplicitLocOpBuilder &b, Value y, Value gamma, Value beta,
                  ValueRange paramValues) {
  unsigned next = 0;
  if (gamma)
    y = arith::MulFOp::create(b, y, paramValues[next++]);
  if (beta)
    y = arith::AddFOp::create(b, y, paramValues[next++]);
  return y;
}

/// rsqrt(sum * invCount + epsilon)
Value reciprocalStdDev(ImplicitLocOpBuilder &b, Value sum, Value invCount,
                       Value epsilon) {
  Value variance = arith::MulFOp::create(b, sum, invCount);
  return math::RsqrtOp::create(b, arith::AddFOp::create(b, variance, epsilon));
}

struct LayerNormLowering : OpConversionPattern<LayerNormOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(LayerNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    NormGeometry geometry(b, adaptor.getInput(), op.getNormalizedRank());
    Value invCount = arith::DivFOp::create(b, f32Constant(b, 1.0),
                                           geometry.normalizedCount(b));
    Value epsilon = f32Constant(b, op.getEpsilon().convertToFloat());

    // Two passes over each row: the mean, then the centred sum of squares,
    // which stays accurate where E[x^2] - E[x]^2 would cancel. Both work on
    // values shifted by a pivot (the row's first element), x - pivot, which
    // is exact for values near the pivot, and the centring keeps the shift
    // apart: (x - pivot) - (mean - pivot). Subtracting a rounded mean from x
    // instead would lose the bits that |mean| >> stddev leaves to the
    // deviations.
    Value pivot = geometry.rowPivot(b);
    Value shiftedSum = geometry.reduceRows(
        b, pivot, [](ImplicitLocOpBuilder &nb, Value x, ValueRange row) {
          return arith::SubFOp::create(nb, x, row[0]).getResult();
        });
    Value meanShift = geometry.mapRows(
        b, shiftedSum, [&](ImplicitLocOpBuilder &nb, ValueRange row) {
          return arith::MulFOp::create(nb, row[0], invCount).getResult();
        });
    auto centre = [](ImplicitLocOpBuilder &nb, Value x, Value pivot,
                     Value meanShift) -> Value {
      return arith::SubFOp::create(nb, arith::SubFOp::create(nb, x, pivot),
                                   meanShift);
    };
    Value centredSquares = geometry.reduceRows(
        b, ValueRange{pivot, meanShift},
        [&](ImplicitLocOpBuilder &nb, Value x, ValueRange row) {
          Value centred = centre(nb, x, row[0], row[1]);
          return arith::MulFOp::create(nb, centred, centred).getResult();
        });

    // Per row, rstd and the offset -shift * rstd, so that each element
    // costs a subtraction and a fused multiply-add:
    // ((x - pivot) - shift) * rstd = fma(x - pivot, rstd, -shift * rstd).
    Value rstd = geometry.mapRows(
        b, centredSquares, [&](ImplicitLocOpBuilder &nb, ValueRange row) {
          return reciprocalStdDev(nb, row[0], invCount, epsilon);
        });
    Value offset =
        geometry.mapRows(b, ValueRange{meanShift, rstd},
                         [&](ImplicitLocOpBuilder &nb, ValueRange row) {
                           Value scaled =
                               arith::MulFOp::create(nb, row[0], row[1]);
                           return arith::NegFOp::create(nb, scaled).getResult();
                         });
    SmallVector<Value> params;
    for (Value param : {adaptor.getGamma(), adaptor.getBeta()})
      if (param)
        params.push_back(param);
    Value normalized = geometry.mapElements(
        b, op.getOutput().getType(), ValueRange{pivot, rstd, offset}, params,
        [&](ImplicitLocOpBuilder &nb, Value x, ValueRange row,
            ValueRange paramValues) {
          Value shifted = arith::SubFOp::create(nb, x, row[0]);
          Value y = math::FmaOp::create(nb, shifted, row[1], row[2]);
          return applyAffine(nb, y, adaptor.getGamma(), adaptor.getBeta(),
                             paramValues);
        });

    SmallVector<Value> results{normalized};
    if (op.getReturnStats()) {
      Value mean = geometry.mapRows(
          b, ValueRange{pivot, meanShift},
          [&](ImplicitLocOpBuilder &nb, ValueRange row) {
            return arith::AddFOp::create(nb, row[0], row[1]).getResult();
          });
      results.push_back(expandStats(b, op.getMean(), mean));
      results.push_back(expandStats(b, op.getRstd(), rstd));
    }
    rewriter.replaceOp(op, results);
    return success();
  }

  /// Reshapes a per-row tensor to torch's stats shape: leading dims, then
  /// `normalized_rank` ones.
  static Value expandStats(ImplicitLocOpBuilder &b, Value statsResult,
                           Value perRow) {
    auto resultType = cast<RankedTensorType>(statsResult.getType());
    auto rowType = cast<RankedTensorType>(perRow.getType());
    SmallVector<ReassociationIndices> reassociation;
    for (int64_t dim = 0; dim < rowType.getRank(); ++dim)
      reassociation.push_back({dim});
    // The trailing ones join the last leading dim's group; with no leading
    // dims the reassociation is empty (a scalar expanded to all ones).
    if (!reassociation.empty())
      for (int64_t dim = rowType.getRank(); dim < resultType.getRank(); ++dim)
        reassociation.back().push_back(dim);
    return tensor::ExpandShapeOp::create(b, resultType, perRow, reassociation);
  }
};

struct RMSNormLowering : OpConversionPattern<RMSNormOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(RMSNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    NormGeometry geometry(b, adaptor.getInput(), op.getNormalizedRank());
    Value invCount = arith::DivFOp::create(b, f32Constant(b, 1.0),
                                           geometry.normalizedCount(b));
    Value epsilon = f32Constant(b, op.getEpsilon().convertToFloat());

    Value sumSquares = geometry.reduceRows(
        b, {}, [](ImplicitLocOpBuilder &nb, Value x, ValueRange) {
          return arith::MulFOp::create(nb, x, x).getResult();
        });
    SmallVector<Value> params;
    if (adaptor.getGamma())
      params.push_back(adaptor.getGamma());
    Value normalized = geometry.mapElements(
        b, op.getOutput().getType(), sumSquares, params,
        [&](ImplicitLocOpBuilder &nb, Value x, ValueRange row,
            ValueRange paramValues) {
          Value rrms = reciprocalStdDev(nb, row[0], invCount, epsilon);
          Value y = arith::MulFOp::create(nb, x, rrms);
          return applyAffine(nb, y, adaptor.getGamma(), Value(), paramValues);
        });
    rewriter.replaceOp(op, normalized);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Tree ops: scf loops over buffers
//===----------------------------------------------------------------------===//

struct TreeFFNLowering : OpConversionPattern<TreeFFNOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TreeFFNOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    BufferLoopBuilder lb(b);
    Value x = lb.buffer(adaptor.getInput());
    Value wIn = lb.buffer(adaptor.getWIn());
    Value bIn = lb.buffer(adaptor.getBIn());
    Value wOut = lb.buffer(adaptor.getWOut());
    Value bOut = lb.buffer(adaptor.getBOut());
    Value rows = lb.dim(x, 0), inWidth = lb.dim(x, 1);
    Value trees = lb.dim(wIn, 0), outWidth = lb.dim(wOut, 2);
    Value levels = lb.index(op.getDepth() + 1);
    Value zero = f32Constant(b, 0.0);

    RankedTensorType resultType = op.getOutput().getType();
    Value acc = lb.allocMatrix(resultType, b.getF32Type(), rows, outWidth);
    // Tokens are independent: each walks its trees into its own row of acc.
    Value work = arith::MulIOp::create(
        b,
        arith::MulIOp::create(b, rows, arith::MulIOp::create(b, trees, levels)),
        arith::AddIOp::create(b, inWidth, outWidth));
    buildRowLoop(
        b, rows, work, kMinParallelTreeWork, /*strategy=*/{}, [&](Value row) {
          lb.loop(outWidth, [&](Value j) {
            Value init = bOut ? lb.load(bOut, j) : zero;
            memref::StoreOp::create(b, init, acc, ValueRange{row, j});
          });
          lb.loop(trees, [&](Value tree) {
            lb.loop(levels, lb.index(0), [&](Value, ValueRange carried) {
              Value node = carried[0];
              Value logit = lb.dot(
                  inWidth,
                  [&](Value i) {
                    return lb.load(x, {row, i});
                  },
                  [&](Value i) {
                    return lb.load(wIn, {tree, node, i});
                  });
              if (bIn)
                logit =
                    arith::AddFOp::create(b, logit, lb.load(bIn, {tree, node}));
              Value activated =
                  buildActivation(b, b.getLoc(), op.getActivation(), logit);
              lb.accumulateRow(acc, row, outWidth, activated, [&](Value j) {
                return lb.load(wOut, {tree, node, j});
              });
              Value goRight = arith::CmpFOp::create(
                  b, goRightPredicate(op.getZeroGoesRight()), logit, zero);
              return SmallVector<Value>{lb.child(node, goRight)};
            });
          });
        });
    rewriter.replaceOp(op, lb.finish(acc, resultType, rows, outWidth));
    return success();
  }
};

struct LeafTreeFFNLowering : OpConversionPattern<LeafTreeFFNOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(LeafTreeFFNOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    BufferLoopBuilder lb(b);
    Value x = lb.buffer(adaptor.getInput());
    Value nodeW = lb.buffer(adaptor.getNodeW());
    Value nodeB = lb.buffer(adaptor.getNodeB());
    Value w1 = lb.buffer(adaptor.getW1()), b1 = lb.buffer(adaptor.getB1());
    Value w2 = lb.buffer(adaptor.getW2()), b2 = lb.buffer(adaptor.getB2());
    Value rows = lb.dim(x, 0), inWidth = lb.dim(x, 1);
    Value hiddenWidth = lb.dim(w1, 2), outWidth = lb.dim(w2, 2);
    Value zero = f32Constant(b, 0.0);

    RankedTensorType resultType = op.getOutput().getType();
    Value acc = lb.allocMatrix(resultType, b.getF32Type(), rows, outWidth);
    // One row's hidden activations, reused across rows.
    Value hidden = memref::AllocOp::create(
        b, MemRefType::get({ShapedType::kDynamic}, b.getF32Type()),
        ValueRange{hiddenWidth});
    lb.loop(rows, [&](Value row) {
      auto routingScore = [&](Value node) -> Value {
        Value dot = lb.dot(
            inWidth,
            [&](Value i) {
              return lb.load(x, {row, i});
            },
            [&](Value i) {
              return lb.load(nodeW, {node, i});
            });
        return arith::AddFOp::create(b, dot, lb.load(nodeB, node));
      };
      Value levels = lb.index(op.getDepth());
      Value node = lb.loop(levels, lb.index(0), [&](Value, ValueRange carried) {
        // Zero goes right here (s >= 0), as in the original FFF code.
        Value goRight =
            arith::CmpFOp::create(b, goRightPredicate(/*zeroGoesRight=*/true),
                                  routingScore(carried[0]), zero);
        return SmallVector<Value>{lb.child(carried[0], goRight)};
      })[0];
      Value leaf =
          arith::SubIOp::create(b, node, lb.index(op.getNumRoutingNodes()));

      // hidden = act(x[row] @ w1[leaf] + b1[leaf]), accumulated row by row of
      // w1 so that the inner loop walks contiguous memory.
      lb.loop(hiddenWidth, [&](Value w) {
        memref::StoreOp::create(b, lb.load(b1, {leaf, w}), hidden, w);
      });
      lb.loop(inWidth, [&](Value i) {
        Value xi = lb.load(x, {row, i});
        lb.loop(hiddenWidth, [&](Value w) {
          Value old = memref::LoadOp::create(b, hidden, w);
          Value update =
              arith::MulFOp::create(b, xi, lb.load(w1, {leaf, i, w}));
          memref::StoreOp::create(b, arith::AddFOp::create(b, old, update),
                                  hidden, w);
        });
      });

      // acc[row] = b2[leaf] + act(hidden) @ w2[leaf]
      lb.loop(outWidth, [&](Value j) {
        memref::StoreOp::create(b, lb.load(b2, {leaf, j}), acc,
                                ValueRange{row, j});
      });
      lb.loop(hiddenWidth, [&](Value w) {
        Value activated = buildActivation(b, b.getLoc(), op.getActivation(),
                                          memref::LoadOp::create(b, hidden, w));
        lb.accumulateRow(acc, row, outWidth, activated, [&](Value j) {
          return lb.load(w2, {leaf, w, j});
        });
      });
    });
    rewriter.replaceOp(op, lb.finish(acc, resultType, rows, outWidth));
    return success();
  }
};

/// On the CPU a fused unit runs its body as written.
struct InlineFusion : OpConversionPattern<FusionOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(FusionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    inlineUnit(rewriter, op, adaptor.getInputs());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

struct ConvertFFFToLoopsPass
    : fff::impl::ConvertFFFToLoopsBase<ConvertFFFToLoopsPass> {
  void runOnOperation() override {
    ConversionTarget target(getContext());
    target.addIllegalDialect<FFFDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    populateFFFToLoopsPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void fff::populateInlineFusionPatterns(RewritePatternSet &patterns) {
  patterns.add<InlineFusion>(patterns.getContext());
}

void fff::populateFFFToLoopsPatterns(RewritePatternSet &patterns) {
  populateInlineFusionPatterns(patterns);
  populateNormGradsToLoopsPatterns(patterns);
  populateTreeGradsToLoopsPatterns(patterns);
  populateLeafTreeGradsToLoopsPatterns(patterns);
  patterns.add<LayerNormLowering, RMSNormLowering, TreeFFNLowering,
               LeafTreeFFNLowering>(patterns.getContext());
}

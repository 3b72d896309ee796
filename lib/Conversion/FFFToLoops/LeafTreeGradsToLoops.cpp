//===- LeafTreeGradsToLoops.cpp - leaf_tree_ffn backward as loops -*- C++ -*-===//
//
// convert-fff-to-loops' lowering of fff.leaf_tree_ffn_grad. A leaf's weight
// gradients are sums over the rows routed to it, and any subset of the rows
// may be, so the lowering groups the rows by leaf and sums each group in
// row order: a fixed order, whatever the threads. Three phases:
//
// 1. Rows (threaded over rows). Each row is routed as the forward routes it
//    and records its leaf, act(pre) and dpre = (dy @ w2[leaf]^T) * act'(pre)
//    (f32, [B, W]); its dx row is dpre @ w1[leaf]^T.
// 2. Group (serial; O(B + L)). A stable counting sort of the rows by leaf.
// 3. Sums (threaded over blocks of weight-gradient rows). A block is up to
//    kSumRows rows of one leaf's dw1 [Din, W] or dw2 [W, Dout], summed over
//    the leaf's rows in row order; each leaf's first dw2 block also sums its
//    db1 and db2. Blocks split the work however the rows spread over the
//    leaves, and no two threads write one element.
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/FFFToLoops/FFFToLoops.h"

#include "BufferLoops.h"

#include "fff/Conversion/FFFToVector/CPUTreeStrategy.h"
#include "fff/Conversion/RowLoops.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "fff/Dialect/FFF/Utils/Activation.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace fff;
using namespace fff::loops;

/// Rows of dw1 or dw2 that one iteration of the threaded sums owns: a
/// 768-wide layer's dw1 has 24 blocks per leaf to spread over the threads,
/// and a block's f32 sums (32 rows of W or of Dout) stay in the cache while
/// the leaf's rows stream past.
static constexpr int64_t kSumRows = 32;

namespace {

class LeafTreeGradBuilder {
public:
  LeafTreeGradBuilder(ImplicitLocOpBuilder &b, LeafTreeFFNGradOp op,
                      LeafTreeFFNGradOp::Adaptor adaptor)
      : b(b), lb(b), op(op) {
    dy = lb.buffer(adaptor.getGradOutput());
    x = lb.buffer(adaptor.getInput());
    nodeW = lb.buffer(adaptor.getNodeW());
    nodeB = lb.buffer(adaptor.getNodeB());
    w1 = lb.buffer(adaptor.getW1());
    b1 = lb.buffer(adaptor.getB1());
    w2 = lb.buffer(adaptor.getW2());
    rows = lb.dim(x, 0);
    inWidth = lb.dim(x, 1);
    hiddenWidth = lb.dim(w1, 2);
    outWidth = lb.dim(w2, 2);
    leaves = lb.index(op.getNumLeaves());
  }

  SmallVector<Value> build() {
    Value dx = rowPhase();
    group();
    auto [dw1, db1, dw2, db2] = sums();
    return {lb.finish(dx, op.getGradInput().getType(), rows, inWidth),
            lb.finish(dw1, op.getGradW1().getType(),
                      {leaves, inWidth, hiddenWidth}),
            lb.finish(db1, op.getGradB1().getType(), leaves, hiddenWidth),
            lb.finish(dw2, op.getGradW2().getType(),
                      {leaves, hiddenWidth, outWidth}),
            lb.finish(db2, op.getGradB2().getType(), leaves, outWidth)};
  }

private:
  Value add(Value lhs, Value rhs) { return arith::AddIOp::create(b, lhs, rhs); }
  Value mul(Value lhs, Value rhs) { return arith::MulIOp::create(b, lhs, rhs); }

  /// acc[at..., j] += scale * source(j) for j in [0, n), acc f32.
  void addScaled(Value acc, ValueRange at, Value n, Value scale,
                 function_ref<Value(Value)> source) {
    lb.loop(n, [&](Value j) {
      SmallVector<Value> indices(at);
      indices.push_back(j);
      Value old = memref::LoadOp::create(b, acc, indices);
      Value term = arith::MulFOp::create(b, scale, source(j));
      memref::StoreOp::create(b, arith::AddFOp::create(b, old, term), acc,
                              indices);
    });
  }

  /// The leaf `row` is routed to, as the forward routes it: a score of
  /// exactly 0 goes right.
  Value route(Value row) {
    Value zero = f32Constant(b, 0.0);
    Value node = lb.loop(lb.index(op.getDepth()), lb.index(0),
                         [&](Value, ValueRange carried) {
                           Value score = arith::AddFOp::create(
                               b,
                               lb.dot(
                                   inWidth,
                                   [&](Value i) {
                                     return lb.load(x, {row, i});
                                   },
                                   [&](Value i) {
                                     return lb.load(nodeW, {carried[0], i});
                                   }),
                               lb.load(nodeB, carried[0]));
                           Value goRight = arith::CmpFOp::create(
                               b, arith::CmpFPredicate::OGE, score, zero);
                           return SmallVector<Value>{
                               lb.child(carried[0], goRight)};
                         })[0];
    return arith::SubIOp::create(b, node, lb.index(op.getNumRoutingNodes()));
  }

  /// Phase 1; returns dx's f32 rows.
  Value rowPhase() {
    leafOf = lb.allocVector(b.getIndexType(), rows);
    activated = lb.allocScratchMatrix(b.getF32Type(), rows, hiddenWidth);
    dpre = lb.allocScratchMatrix(b.getF32Type(), rows, hiddenWidth);
    Value dx = lb.allocMatrix(op.getGradInput().getType(), b.getF32Type(),
                              rows, inWidth);
    Value perRow = add(mul(lb.index(op.getDepth()), inWidth),
                       mul(hiddenWidth, add(mul(inWidth, lb.index(2)),
                                            outWidth)));
    buildRowLoop(b, rows, mul(rows, perRow), kMinParallelTreeWork,
                 /*strategy=*/{}, [&](Value row) {
                   Value leaf = route(row);
                   memref::StoreOp::create(b, leaf, leafOf, row);
                   // pre = x[row] @ w1[leaf] + b1[leaf], a row of w1 at a
                   // time so that the inner loop walks contiguous memory.
                   lb.loop(hiddenWidth, [&](Value w) {
                     memref::StoreOp::create(b, lb.load(b1, {leaf, w}),
                                             activated, ValueRange{row, w});
                   });
                   lb.loop(inWidth, [&](Value i) {
                     addScaled(activated, {row}, hiddenWidth,
                               lb.load(x, {row, i}), [&](Value w) {
                                 return lb.load(w1, {leaf, i, w});
                               });
                   });
                   lb.loop(hiddenWidth, [&](Value w) {
                     Value pre = memref::LoadOp::create(b, activated,
                                                        ValueRange{row, w});
                     Value back = lb.dot(
                         outWidth,
                         [&](Value j) { return lb.load(dy, {row, j}); },
                         [&](Value j) { return lb.load(w2, {leaf, w, j}); });
                     Value slope = buildActivationSlope(
                         b, b.getLoc(), op.getActivation(), pre);
                     memref::StoreOp::create(
                         b, arith::MulFOp::create(b, back, slope), dpre,
                         ValueRange{row, w});
                     memref::StoreOp::create(
                         b,
                         buildActivation(b, b.getLoc(), op.getActivation(),
                                         pre),
                         activated, ValueRange{row, w});
                   });
                   lb.loop(inWidth, [&](Value i) {
                     Value sum = lb.dot(
                         hiddenWidth,
                         [&](Value w) {
                           return memref::LoadOp::create(b, dpre,
                                                         ValueRange{row, w});
                         },
                         [&](Value w) { return lb.load(w1, {leaf, i, w}); });
                     memref::StoreOp::create(b, sum, dx, ValueRange{row, i});
                   });
                 });
    return dx;
  }

  /// Phase 2: leafStart[leaf] .. leafStart[leaf + 1] index `members`, the
  /// rows routed to the leaf in row order.
  void group() {
    Value one = lb.index(1);
    leafStart = lb.allocVector(b.getIndexType(), add(leaves, one));
    members = lb.allocVector(b.getIndexType(), rows);
    Value cursor = lb.allocVector(b.getIndexType(), leaves);
    lb.loop(add(leaves, one), [&](Value at) {
      memref::StoreOp::create(b, lb.index(0), leafStart, at);
    });
    // Counts, in the slot after each leaf's, then their prefix sums.
    lb.loop(rows, [&](Value row) {
      Value at = add(memref::LoadOp::create(b, leafOf, row), one);
      Value count = memref::LoadOp::create(b, leafStart, at);
      memref::StoreOp::create(b, add(count, one), leafStart, at);
    });
    lb.loop(leaves, [&](Value leaf) {
      Value start = memref::LoadOp::create(b, leafStart, leaf);
      Value next = add(leaf, one);
      Value count = memref::LoadOp::create(b, leafStart, next);
      memref::StoreOp::create(b, add(start, count), leafStart, next);
      memref::StoreOp::create(b, start, cursor, leaf);
    });
    lb.loop(rows, [&](Value row) {
      Value leaf = memref::LoadOp::create(b, leafOf, row);
      Value position = memref::LoadOp::create(b, cursor, leaf);
      memref::StoreOp::create(b, row, members, position);
      memref::StoreOp::create(b, add(position, one), cursor, leaf);
    });
  }

  /// Calls `body(row)` for each row routed to `leaf`, in row order.
  void forEachMember(Value leaf, function_ref<void(Value row)> body) {
    Value begin = memref::LoadOp::create(b, leafStart, leaf);
    Value end = memref::LoadOp::create(b, leafStart, add(leaf, lb.index(1)));
    lb.loopBetween(begin, end, [&](Value position) {
      body(memref::LoadOp::create(b, members, position));
    });
  }

  /// Rows [first, first + kSumRows) of `grad` [L, rows, width] (f32) for
  /// `leaf`, clipped to `gradRows`: the sum over the leaf's rows r of
  /// scale(r, k) * source(r, j) for gradient row k and column j.
  void sumBlock(Value grad, Value leaf, Value first, Value gradRows,
                Value width, function_ref<Value(Value r, Value k)> scale,
                function_ref<Value(Value r, Value j)> source) {
    Value last =
        arith::MinUIOp::create(b, add(first, lb.index(kSumRows)), gradRows);
    Value zero = f32Constant(b, 0.0);
    lb.loopBetween(first, last, [&](Value k) {
      lb.loop(width, [&](Value j) {
        memref::StoreOp::create(b, zero, grad, ValueRange{leaf, k, j});
      });
    });
    forEachMember(leaf, [&](Value r) {
      lb.loopBetween(first, last, [&](Value k) {
        addScaled(grad, {leaf, k}, width, scale(r, k),
                  [&](Value j) { return source(r, j); });
      });
    });
  }

  /// db1 and db2 of `leaf`: its rows' dpre and dy, in row order.
  void sumBiases(Value db1, Value db2, Value leaf) {
    Value zero = f32Constant(b, 0.0);
    lb.loop(hiddenWidth, [&](Value w) {
      memref::StoreOp::create(b, zero, db1, ValueRange{leaf, w});
    });
    lb.loop(outWidth, [&](Value j) {
      memref::StoreOp::create(b, zero, db2, ValueRange{leaf, j});
    });
    Value one = f32Constant(b, 1.0);
    forEachMember(leaf, [&](Value r) {
      addScaled(db1, {leaf}, hiddenWidth, one, [&](Value w) {
        return memref::LoadOp::create(b, dpre, ValueRange{r, w});
      });
      addScaled(db2, {leaf}, outWidth, one,
                [&](Value j) { return lb.load(dy, {r, j}); });
    });
  }

  /// Phase 3: dw1, db1, dw2, db2 in f32.
  std::tuple<Value, Value, Value, Value> sums() {
    Value dw1 = lb.alloc(op.getGradW1().getType(), b.getF32Type(),
                         {leaves, inWidth, hiddenWidth});
    Value db1 = lb.alloc(op.getGradB1().getType(), b.getF32Type(),
                         {leaves, hiddenWidth});
    Value dw2 = lb.alloc(op.getGradW2().getType(), b.getF32Type(),
                         {leaves, hiddenWidth, outWidth});
    Value db2 = lb.alloc(op.getGradB2().getType(), b.getF32Type(),
                         {leaves, outWidth});
    Value blockRows = lb.index(kSumRows);
    Value inBlocks = arith::CeilDivUIOp::create(b, inWidth, blockRows);
    Value hiddenBlocks = arith::CeilDivUIOp::create(b, hiddenWidth, blockRows);
    Value blocksPerLeaf = add(inBlocks, hiddenBlocks);
    Value work = mul(rows, mul(hiddenWidth, add(inWidth, outWidth)));
    buildRowLoop(
        b, mul(leaves, blocksPerLeaf), work, kMinParallelTreeWork,
        /*strategy=*/{}, [&](Value unit) {
          Value leaf = arith::DivUIOp::create(b, unit, blocksPerLeaf);
          Value block = arith::RemUIOp::create(b, unit, blocksPerLeaf);
          Value isW1 = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                             block, inBlocks);
          scf::IfOp::create(
              b, isW1,
              [&](OpBuilder &nested, Location) {
                BuildInside inside(b, nested);
                // dw1[leaf, i, w] = sum of x[r, i] * dpre[r, w].
                sumBlock(
                    dw1, leaf, mul(block, blockRows), inWidth, hiddenWidth,
                    [&](Value r, Value i) { return lb.load(x, {r, i}); },
                    [&](Value r, Value w) {
                      return memref::LoadOp::create(b, dpre, ValueRange{r, w});
                    });
                scf::YieldOp::create(b);
              },
              [&](OpBuilder &nested, Location) {
                BuildInside inside(b, nested);
                // dw2[leaf, w, j] = sum of act(pre)[r, w] * dy[r, j].
                Value hiddenBlock = arith::SubIOp::create(b, block, inBlocks);
                sumBlock(
                    dw2, leaf, mul(hiddenBlock, blockRows), hiddenWidth,
                    outWidth,
                    [&](Value r, Value w) {
                      return memref::LoadOp::create(b, activated,
                                                    ValueRange{r, w});
                    },
                    [&](Value r, Value j) { return lb.load(dy, {r, j}); });
                Value first = arith::CmpIOp::create(
                    b, arith::CmpIPredicate::eq, hiddenBlock, lb.index(0));
                scf::IfOp::create(b, first, [&](OpBuilder &inner, Location) {
                  BuildInside inside(b, inner);
                  sumBiases(db1, db2, leaf);
                  scf::YieldOp::create(b);
                });
                scf::YieldOp::create(b);
              });
        });
    return {dw1, db1, dw2, db2};
  }

  ImplicitLocOpBuilder &b;
  BufferLoopBuilder lb;
  LeafTreeFFNGradOp op;
  Value dy, x, nodeW, nodeB, w1, b1, w2;
  Value rows, inWidth, hiddenWidth, outWidth, leaves;
  /// Phase 1's records: each row's leaf [B], act(pre) and dpre [B, W].
  Value leafOf, activated, dpre;
  /// Phase 2's grouping.
  Value leafStart, members;
};

struct LeafTreeFFNGradLowering : OpConversionPattern<LeafTreeFFNGradOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(LeafTreeFFNGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    rewriter.replaceOp(op, LeafTreeGradBuilder(b, op, adaptor).build());
    return success();
  }
};

} // namespace

void fff::populateLeafTreeGradsToLoopsPatterns(RewritePatternSet &patterns) {
  patterns.add<LeafTreeFFNGradLowering>(patterns.getContext());
}

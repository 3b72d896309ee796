//===- LeafTreeGradsToLoops.cpp - leaf_tree_ffn backward as loops -*- C++ -*-===//
//
// convert-fff-to-loops' lowering of fff.leaf_tree_ffn_grad. A leaf's weight
// gradients are sums over the rows routed to it, and any subset of the rows
// may be, so the lowering groups the rows by leaf and sums each group in
// row order: a fixed order, whatever the threads. Four phases:
//
// 1. Route (threaded over rows). Each row is routed as the forward routes
//    it.
// 2. Group (serial; O(B + L)). A stable counting sort of the rows by leaf,
//    cut into tiles of up to kTileRows rows of one leaf.
// 3. Rows (threaded over tiles). Each row records act(pre) and dpre =
//    (dy @ w2[leaf]^T) * act'(pre) (f32, [B, W]); its dx row is
//    dpre @ w1[leaf]^T. Each is a sum of scaled rows of a matrix (w1, and
//    w2 and w1 transposed, made first, once).
//    A tile's rows share a leaf, whose weights stay in the cache from one
//    row to the next.
// 4. Sums (threaded over blocks of weight-gradient rows). A block is up to
//    kSumRows rows of one leaf's dw1 [Din, W] or dw2 [W, Dout], summed over
//    the leaf's rows in row order; each leaf's first dw2 block also sums its
//    db1 and db2. Blocks split the work however the rows spread over the
//    leaves, and no two threads write one element.
//
// The phases are LeafTreeGradBuilder's (LeafTreeGradBuilder.h); this file
// holds its scalar row operations, which convert-fff-trees-to-vector's
// lowering replaces with vector code (LeafTreeGradsToVector.cpp).
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/FFFToLoops/FFFToLoops.h"

#include "LeafTreeGradBuilder.h"

#include "fff/Conversion/FFFToVector/CPUTreeStrategy.h"
#include "fff/Conversion/RowLoops.h"
#include "fff/Dialect/FFF/Utils/Activation.h"
#include "fff/Dialect/FFF/Utils/Routing.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace fff;
using namespace fff::loops;

/// Rows of dw1 or dw2 that one iteration of the threaded sums owns: a
/// 768-wide layer's dw1 has 24 blocks per leaf to spread over the threads,
/// and a block's f32 sums (32 rows of W or of Dout) stay in the cache while
/// the leaf's rows stream past.
static constexpr int64_t kSumRows = 32;

/// Rows of one leaf that phase 3 computes one after the other, as one unit
/// of its threaded loop: the leaf's weights, read by the first, are in the
/// cache for the others.
static constexpr int64_t kTileRows = 16;

LeafTreeGradBuilder::LeafTreeGradBuilder(ImplicitLocOpBuilder &b,
                                         LeafTreeFFNGradOp op,
                                         LeafTreeFFNGradOp::Adaptor adaptor)
    : b(b), lb(b), op(op) {
  dy = lb.buffer(adaptor.getGradOutput());
  x = lb.buffer(adaptor.getInput());
  nodeW = lb.buffer(adaptor.getNodeW());
  nodeB = lb.buffer(adaptor.getNodeB());
  w1 = lb.buffer(adaptor.getW1());
  b1 = lb.buffer(adaptor.getB1());
  w2 = lb.buffer(adaptor.getW2());
  // Static widths as constants, so that the vector lowering sizes its
  // chunks to them.
  auto extent = [&](Value buffer, int64_t dim) -> Value {
    int64_t size = cast<MemRefType>(buffer.getType()).getDimSize(dim);
    return ShapedType::isDynamic(size) ? lb.dim(buffer, dim) : lb.index(size);
  };
  rows = extent(x, 0);
  inWidth = extent(x, 1);
  hiddenWidth = extent(w1, 2);
  outWidth = extent(w2, 2);
  leaves = lb.index(op.getNumLeaves());
}

SmallVector<Value> LeafTreeGradBuilder::build() {
  routePhase();
  group();
  Value dx = rowPhase();
  auto [dw1, db1, dw2, db2] = sums();
  return {lb.finish(dx, op.getGradInput().getType(), rows, inWidth),
          lb.finish(dw1, op.getGradW1().getType(),
                    {leaves, inWidth, hiddenWidth}),
          lb.finish(db1, op.getGradB1().getType(), leaves, hiddenWidth),
          lb.finish(dw2, op.getGradW2().getType(),
                    {leaves, hiddenWidth, outWidth}),
          lb.finish(db2, op.getGradB2().getType(), leaves, outWidth)};
}

Value LeafTreeGradBuilder::routingDot(Value row, Value node) {
  return lb.dot(
      inWidth, [&](Value i) { return lb.load(x, {row, i}); },
      [&](Value i) { return lb.load(nodeW, {node, i}); });
}

void LeafTreeGradBuilder::addScaled(Value acc, ValueRange accAt, Value n,
                                    Value scale, Value source,
                                    ValueRange sourceAt) {
  lb.loop(n, [&](Value j) {
    SmallVector<Value> at = rowElement(accAt, j);
    Value old = memref::LoadOp::create(b, acc, at);
    Value term = arith::MulFOp::create(
        b, scale, lb.load(source, rowElement(sourceAt, j)));
    memref::StoreOp::create(b, arith::AddFOp::create(b, old, term), acc, at);
  });
}

void LeafTreeGradBuilder::rowsTimesMatrix(Value out, ValueRange rowsOf,
                                          Value n, Value bias,
                                          ValueRange biasAt, Value lhs,
                                          Value m, Value rhs,
                                          ValueRange rhsAt) {
  for (Value row : rowsOf) {
    lb.loop(n, [&](Value j) {
      Value start =
          bias ? lb.load(bias, rowElement(biasAt, j)) : f32Constant(b, 0);
      memref::StoreOp::create(b, start, out, ValueRange{row, j});
    });
    lb.loop(m, [&](Value i) {
      addScaled(out, {row}, n, lb.load(lhs, {row, i}), rhs,
                rowElement(rhsAt, i));
    });
  }
}

std::pair<Value, Value> LeafTreeGradBuilder::memberRange(Value leaf) {
  return {memref::LoadOp::create(b, leafStart, leaf),
          memref::LoadOp::create(b, leafStart, add(leaf, lb.index(1)))};
}

void LeafTreeGradBuilder::sumOverRows(Value leaf, Value grad, Value n,
                                      Value scales, ValueRange ks,
                                      Value source) {
  SmallVector<SmallVector<Value>> gradRows;
  for (Value k : ks)
    gradRows.push_back({leaf, k});
  if (!scales)
    gradRows.push_back({leaf});
  for (ValueRange gradAt : gradRows)
    lb.loop(n, [&](Value j) {
      memref::StoreOp::create(b, f32Constant(b, 0), grad,
                              rowElement(gradAt, j));
    });
  auto [begin, end] = memberRange(leaf);
  lb.loopBetween(begin, end, [&](Value position) {
    Value row = memref::LoadOp::create(b, members, position);
    for (auto [t, gradAt] : llvm::enumerate(gradRows)) {
      Value scale = scales ? lb.load(scales, {row, ks[t]}) : f32Constant(b, 1);
      addScaled(grad, gradAt, n, scale, source, {row});
    }
  });
}

/// `body(items)` for [first, last) in groups of groupSize(): a group past
/// the end repeats the last item, whose results are then computed, and
/// stored, twice alike (first < last).
void LeafTreeGradBuilder::forEachGroup(
    Value first, Value last, function_ref<void(ValueRange items)> body) {
  int64_t size = groupSize();
  Value final = arith::SubIOp::create(b, last, lb.index(1));
  scf::ForOp::create(
      b, first, last, lb.index(size), ValueRange{},
      [&](OpBuilder &nested, Location, Value start, ValueRange) {
        BuildInside inside(b, nested);
        SmallVector<Value> items;
        for (int64_t t = 0; t < size; ++t)
          items.push_back(t == 0 ? start
                                 : Value(arith::MinUIOp::create(
                                       b, add(start, lb.index(t)), final)));
        body(items);
        scf::YieldOp::create(b);
      });
}

/// The leaf `row` is routed to, as the forward routes it: a score of exactly
/// 0 goes right.
Value LeafTreeGradBuilder::route(Value row) {
  Value zero = f32Constant(b, 0.0);
  Value node =
      lb.loop(lb.index(op.getDepth()), lb.index(0),
              [&](Value, ValueRange carried) {
                Value score = arith::AddFOp::create(
                    b, routingDot(row, carried[0]), lb.load(nodeB, carried[0]));
                Value goRight = arith::CmpFOp::create(
                    b, goRightPredicate(/*zeroGoesRight=*/true), score, zero);
                return SmallVector<Value>{lb.child(carried[0], goRight)};
              })[0];
  return arith::SubIOp::create(b, node, lb.index(op.getNumRoutingNodes()));
}

/// Phase 1: every row's leaf, in leafOf.
void LeafTreeGradBuilder::routePhase() {
  leafOf = lb.allocVector(b.getIndexType(), rows);
  buildRowLoop(b, rows, mul(rows, mul(lb.index(op.getDepth()), inWidth)),
               kMinParallelTreeWork, strategy(), [&](Value row) {
                 memref::StoreOp::create(b, route(row), leafOf, row);
               });
}

/// Phase 2: leafStart[leaf] .. leafStart[leaf + 1] index `members`, the rows
/// routed to the leaf in row order; and the tiles of phase 3, each up to
/// kTileRows of one leaf's members: tileLeaf[t] and tileFirst[t] (a
/// position in `members`) for t < tileCount.
void LeafTreeGradBuilder::group() {
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
  // Each leaf's tiles; a leaf has ceil(count / kTileRows), so there are at
  // most ceil(B / kTileRows) + L.
  Value tileRows = lb.index(kTileRows);
  Value maxTiles = add(arith::CeilDivUIOp::create(b, rows, tileRows), leaves);
  tileLeaf = lb.allocVector(b.getIndexType(), maxTiles);
  tileFirst = lb.allocVector(b.getIndexType(), maxTiles);
  tileCount = lb.loop(leaves, lb.index(0), [&](Value leaf, ValueRange n) {
    Value begin = memref::LoadOp::create(b, leafStart, leaf);
    Value end = memref::LoadOp::create(b, leafStart, add(leaf, one));
    Value tiles = arith::CeilDivUIOp::create(
        b, arith::SubIOp::create(b, end, begin), tileRows);
    lb.loop(tiles, [&](Value k) {
      Value at = add(n[0], k);
      memref::StoreOp::create(b, leaf, tileLeaf, at);
      memref::StoreOp::create(b, add(begin, mul(k, tileRows)), tileFirst, at);
    });
    return SmallVector<Value>{add(n[0], tiles)};
  })[0];
}

/// `weights` [L, rows, cols] as [L, cols, rows] in f32, so that the row
/// operations of phase 3 read rows of it: dx's row is a sum of rows of w1
/// transposed (scaled by dpre) rather than Din dot products of W, and
/// dpre's a sum of rows of w2 transposed rather than W of Dout.
Value LeafTreeGradBuilder::transposeLeaves(Value weights, Value weightRows,
                                          Value weightCols) {
  Value units = mul(leaves, weightCols);
  Value transposed =
      lb.allocScratchMatrix(b.getF32Type(), units, weightRows);
  buildRowLoop(b, units, mul(units, weightRows), kMinParallelTreeWork,
               strategy(), [&](Value unit) {
                 Value leaf = arith::DivUIOp::create(b, unit, weightCols);
                 Value col = arith::RemUIOp::create(b, unit, weightCols);
                 lb.loop(weightRows, [&](Value row) {
                   memref::StoreOp::create(b, lb.load(weights, {leaf, row, col}),
                                           transposed, ValueRange{unit, row});
                 });
               });
  return memref::ExpandShapeOp::create(
      b,
      MemRefType::get(
          {op.getNumLeaves(), ShapedType::kDynamic, ShapedType::kDynamic},
          b.getF32Type()),
      transposed, ArrayRef<ReassociationIndices>{{0, 1}, {2}},
      ArrayRef<OpFoldResult>{b.getIndexAttr(op.getNumLeaves()), weightCols,
                             weightRows});
}

/// Phase 3; returns dx's f32 rows.
Value LeafTreeGradBuilder::rowPhase() {
  activated = lb.allocScratchMatrix(b.getF32Type(), rows, hiddenWidth);
  dpre = lb.allocScratchMatrix(b.getF32Type(), rows, hiddenWidth);
  Value dx = lb.allocMatrix(op.getGradInput().getType(), b.getF32Type(), rows,
                            inWidth);
  Value w1t = transposeLeaves(w1, inWidth, hiddenWidth);
  Value w2t = transposeLeaves(w2, hiddenWidth, outWidth);
  Value perRow = mul(hiddenWidth, add(mul(inWidth, lb.index(2)), outWidth));
  buildRowLoop(
      b, tileCount, mul(rows, perRow), kMinParallelTreeWork, strategy(),
      [&](Value tile) {
        Value leaf = memref::LoadOp::create(b, tileLeaf, tile);
        Value first = memref::LoadOp::create(b, tileFirst, tile);
        Value last = arith::MinUIOp::create(
            b, add(first, lb.index(kTileRows)), memberRange(leaf).second);
        forEachGroup(first, last, [&](ValueRange positions) {
          SmallVector<Value> group;
          for (Value position : positions)
            group.push_back(memref::LoadOp::create(b, members, position));
          // pre = b1[leaf] + x[row] @ w1[leaf].
          rowsTimesMatrix(activated, group, hiddenWidth, b1, {leaf}, x,
                          inWidth, w1, {leaf});
          // dpre = (dy[row] @ w2[leaf]^T) * act'(pre), summed into dpre
          // first; pre becomes act(pre).
          rowsTimesMatrix(dpre, group, hiddenWidth, Value(), {}, dy, outWidth,
                          w2t, {leaf});
          // Once for a row the group repeats.
          auto differentiate = [&](Value row) {
            lb.loop(hiddenWidth, [&](Value w) {
              Value pre =
                  memref::LoadOp::create(b, activated, ValueRange{row, w});
              Value back = memref::LoadOp::create(b, dpre, ValueRange{row, w});
              Value slope =
                  buildActivationSlope(b, b.getLoc(), op.getActivation(), pre);
              memref::StoreOp::create(b, arith::MulFOp::create(b, back, slope),
                                      dpre, ValueRange{row, w});
              memref::StoreOp::create(
                  b, buildActivation(b, b.getLoc(), op.getActivation(), pre),
                  activated, ValueRange{row, w});
            });
          };
          for (auto [t, row] : llvm::enumerate(group)) {
            if (t == 0) {
              differentiate(row);
              continue;
            }
            Value fresh = arith::CmpIOp::create(
                b, arith::CmpIPredicate::ne, positions[t], positions[t - 1]);
            scf::IfOp::create(b, fresh, [&](OpBuilder &nested, Location) {
              BuildInside inside(b, nested);
              differentiate(row);
              scf::YieldOp::create(b);
            });
          }
          // dx[row] = dpre[row] @ w1[leaf]^T.
          rowsTimesMatrix(dx, group, inWidth, Value(), {}, dpre, hiddenWidth,
                          w1t, {leaf});
        });
      });
  return dx;
}

/// Phase 4: dw1, db1, dw2, db2 in f32.
std::tuple<Value, Value, Value, Value> LeafTreeGradBuilder::sums() {
  Value dw1 = lb.alloc(op.getGradW1().getType(), b.getF32Type(),
                       {leaves, inWidth, hiddenWidth});
  Value db1 = lb.alloc(op.getGradB1().getType(), b.getF32Type(),
                       {leaves, hiddenWidth});
  Value dw2 = lb.alloc(op.getGradW2().getType(), b.getF32Type(),
                       {leaves, hiddenWidth, outWidth});
  Value db2 =
      lb.alloc(op.getGradB2().getType(), b.getF32Type(), {leaves, outWidth});
  Value blockRows = lb.index(kSumRows);
  Value inBlocks = arith::CeilDivUIOp::create(b, inWidth, blockRows);
  Value hiddenBlocks = arith::CeilDivUIOp::create(b, hiddenWidth, blockRows);
  Value blocksPerLeaf = add(inBlocks, hiddenBlocks);
  Value work = mul(rows, mul(hiddenWidth, add(inWidth, outWidth)));
  // Gradient rows [first, first + kSumRows) of a block, clipped to `count`,
  // in groups.
  auto forEachBlockGroup = [&](Value first, Value count,
                               function_ref<void(ValueRange ks)> body) {
    Value last =
        arith::MinUIOp::create(b, add(first, lb.index(kSumRows)), count);
    forEachGroup(first, last, body);
  };
  buildRowLoop(
      b, mul(leaves, blocksPerLeaf), work, kMinParallelTreeWork, strategy(),
      [&](Value unit) {
        Value leaf = arith::DivUIOp::create(b, unit, blocksPerLeaf);
        Value block = arith::RemUIOp::create(b, unit, blocksPerLeaf);
        Value isW1 = arith::CmpIOp::create(b, arith::CmpIPredicate::ult, block,
                                           inBlocks);
        scf::IfOp::create(
            b, isW1,
            [&](OpBuilder &nested, Location) {
              BuildInside inside(b, nested);
              // dw1[leaf, i, :] = sum of x[r, i] * dpre[r, :].
              forEachBlockGroup(mul(block, blockRows), inWidth,
                                [&](ValueRange is) {
                                  sumOverRows(leaf, dw1, hiddenWidth, x, is,
                                              dpre);
                                });
              scf::YieldOp::create(b);
            },
            [&](OpBuilder &nested, Location) {
              BuildInside inside(b, nested);
              // dw2[leaf, w, :] = sum of act(pre)[r, w] * dy[r, :].
              Value hiddenBlock = arith::SubIOp::create(b, block, inBlocks);
              forEachBlockGroup(mul(hiddenBlock, blockRows), hiddenWidth,
                                [&](ValueRange ws) {
                                  sumOverRows(leaf, dw2, outWidth, activated,
                                              ws, dy);
                                });
              // A leaf's first dw2 block also sums its db1 and db2.
              Value firstBlock = arith::CmpIOp::create(
                  b, arith::CmpIPredicate::eq, hiddenBlock, lb.index(0));
              scf::IfOp::create(b, firstBlock, [&](OpBuilder &inner, Location) {
                BuildInside inside(b, inner);
                sumOverRows(leaf, db1, hiddenWidth, Value(), {}, dpre);
                sumOverRows(leaf, db2, outWidth, Value(), {}, dy);
                scf::YieldOp::create(b);
              });
              scf::YieldOp::create(b);
            });
      });
  return {dw1, db1, dw2, db2};
}

namespace {

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

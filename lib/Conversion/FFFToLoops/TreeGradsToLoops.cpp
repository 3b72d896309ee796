//===- TreeGradsToLoops.cpp - tree_ffn backward as scalar loops -*- C++ -*-===//
//
// convert-fff-to-loops' lowering of fff.tree_ffn_grad. Weight gradients are
// sums over the rows that visited each node, and a node is visited by any
// subset of the rows, so the lowering groups the rows by node and sums each
// group in row order: a fixed order, whatever the threads. Three phases:
//
// 1. Walk (threaded over rows). Each row walks each tree as the forward
//    does and records, per tree and level, the node it visited, dl =
//    dot(dy, w_out[node]) * act'(l) and act(l); its dx row is the sum of
//    dl * w_in[node] over its trees and levels, in that order.
// 2. Group (serial; O(rows * trees * levels)). Per tree, a stable counting
//    sort of the visits by node.
// 3. Accumulate (threaded over column slabs of dw_in and dw_out). Each slab
//    of `slabColumns()` columns is one thread's: for each node, the sum
//    over its visits, in row order, of dl * x[row] (dw_in) or act(l) *
//    dy[row] (dw_out) along the slab. Slabs split the work evenly however
//    the rows spread over the nodes (the root has every row, a leaf a few),
//    and no two threads write one element.
//
// db_in (the visits' dl, per node) and db_out (dy's column sums) are summed
// serially, in row order.
//
// The phases are TreeGradBuilder's (TreeGradBuilder.h); this file holds its
// scalar loops, which convert-fff-trees-to-vector's lowering replaces with
// vector code in walkTree and accumulateSlab.
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/FFFToLoops/FFFToLoops.h"

#include "TreeGradBuilder.h"

#include "fff/Conversion/FFFToVector/CPUTreeStrategy.h"
#include "fff/Conversion/RowLoops.h"
#include "fff/Dialect/FFF/Utils/Activation.h"
#include "fff/Dialect/FFF/Utils/Routing.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace fff;
using namespace fff::loops;

/// Columns of dw_in or dw_out that one iteration of the scalar accumulation
/// loop owns: 256 bytes of f32 per row (a few cache lines), so that a
/// slab's reads of x or dy rows are whole lines, and a 768-wide layer has
/// 24 slabs to spread over the threads.
static constexpr int64_t kGradSlabColumns = 64;

TreeGradBuilder::TreeGradBuilder(ImplicitLocOpBuilder &b, TreeFFNGradOp op,
                                 TreeFFNGradOp::Adaptor adaptor)
    : b(b), lb(b), op(op) {
  s.dy = lb.buffer(adaptor.getGradOutput());
  s.x = lb.buffer(adaptor.getInput());
  s.wIn = lb.buffer(adaptor.getWIn());
  s.bIn = lb.buffer(adaptor.getBIn());
  s.wOut = lb.buffer(adaptor.getWOut());
  s.rows = lb.dim(s.x, 0);
  s.inWidth = lb.dim(s.x, 1);
  s.outWidth = lb.dim(s.wOut, 2);
  s.trees = lb.dim(s.wIn, 0);
  s.nodes = lb.index(op.getNumNodes());
  s.levels = lb.index(op.getDepth() + 1);
}

int64_t TreeGradBuilder::slabColumns() const { return kGradSlabColumns; }

SmallVector<Value> TreeGradBuilder::build() {
  Value dx = walk();
  group();
  auto [dwIn, dwOut] = accumulateWeights();
  SmallVector<Value> results{
      lb.finish(dx, op.getGradInput().getType(), {s.rows, s.inWidth}),
      lb.finish(dwIn, op.getGradWIn().getType(), {s.trees, s.nodes, s.inWidth}),
      lb.finish(dwOut, op.getGradWOut().getType(),
                {s.trees, s.nodes, s.outWidth})};
  if (Value dbIn = op.getBInGrad())
    results.push_back(lb.finish(accumulateInputBias(),
                                cast<RankedTensorType>(dbIn.getType()),
                                {s.trees, s.nodes}));
  if (Value dbOut = op.getBOutGrad())
    results.push_back(lb.finish(accumulateOutputBias(),
                                cast<RankedTensorType>(dbOut.getType()),
                                ValueRange{s.outWidth}));
  return results;
}

Value TreeGradBuilder::allocWalkBuffers() {
  Value visits = mul(mul(s.rows, s.trees), s.levels);
  s.visitedNode = lb.allocVector(b.getIndexType(), visits);
  s.visitSlope = lb.allocVector(b.getF32Type(), visits);
  s.visitActivation = lb.allocVector(b.getF32Type(), visits);
  return lb.allocMatrix(op.getGradInput().getType(), b.getF32Type(), s.rows,
                        s.inWidth);
}

Value TreeGradBuilder::walk() {
  Value dx = allocWalkBuffers();
  Value zero = f32Constant(b, 0.0);
  Value visits = mul(mul(s.rows, s.trees), s.levels);
  Value work = mul(visits, add(s.inWidth, mul(s.outWidth, lb.index(2))));
  buildRowLoop(b, s.rows, work, kMinParallelTreeWork, strategy(),
               [&](Value row) {
                 lb.loop(s.inWidth, [&](Value i) {
                   memref::StoreOp::create(b, zero, dx, ValueRange{row, i});
                 });
                 lb.loop(s.trees, [&](Value tree) { walkTree(row, tree, dx); });
               });
  return dx;
}

/// One row's walk of one tree: records its visits, adds into dx[row] (f32).
void TreeGradBuilder::walkTree(Value row, Value tree, Value dx) {
  Value zero = f32Constant(b, 0.0);
  Value first = firstVisit(row, tree);
  lb.loop(s.levels, lb.index(0), [&](Value level, ValueRange carried) {
    Value node = carried[0];
    Value logit = dot(s.inWidth, s.x, {row}, s.wIn, {tree, node});
    if (s.bIn)
      logit = arith::AddFOp::create(b, logit, lb.load(s.bIn, {tree, node}));
    Value activated = buildActivation(b, b.getLoc(), op.getActivation(), logit);
    Value slope =
        buildActivationSlope(b, b.getLoc(), op.getActivation(), logit);
    Value dl = arith::MulFOp::create(
        b, dot(s.outWidth, s.dy, {row}, s.wOut, {tree, node}), slope);
    Value visit = add(first, level);
    memref::StoreOp::create(b, node, s.visitedNode, visit);
    memref::StoreOp::create(b, dl, s.visitSlope, visit);
    memref::StoreOp::create(b, activated, s.visitActivation, visit);
    addScaledRow(dx, row, dl, s.wIn, {tree, node}, s.inWidth);
    // As the forward routes the row.
    Value goRight = arith::CmpFOp::create(
        b, goRightPredicate(op.getZeroGoesRight()), logit, zero);
    return SmallVector<Value>{lb.child(node, goRight)};
  });
}

Value TreeGradBuilder::dot(Value n, Value lhs, ValueRange lhsAt, Value rhs,
                           ValueRange rhsAt) {
  return lb.dot(
      n, [&](Value j) { return lb.load(lhs, rowElement(lhsAt, j)); },
      [&](Value j) { return lb.load(rhs, rowElement(rhsAt, j)); });
}

void TreeGradBuilder::addScaledRow(Value acc, Value row, Value scale,
                                   Value source, ValueRange sourceAt, Value n) {
  lb.accumulateRow(acc, row, n, scale, [&](Value j) {
    return lb.load(source, rowElement(sourceAt, j));
  });
}

/// Phase 2: the counting sort of every tree's visits by node.
void TreeGradBuilder::group() {
  Value one = lb.index(1);
  Value bucketsPerTree = add(s.nodes, one);
  s.bucketStart =
      lb.allocVector(b.getIndexType(), mul(s.trees, bucketsPerTree));
  Value visitsPerTree = mul(s.rows, s.levels);
  s.members = lb.allocVector(b.getIndexType(), mul(s.trees, visitsPerTree));
  s.memberRows = lb.allocVector(b.getIndexType(), mul(s.trees, visitsPerTree));
  s.memberSlope = lb.allocVector(b.getF32Type(), mul(s.trees, visitsPerTree));
  s.memberActivation =
      lb.allocVector(b.getF32Type(), mul(s.trees, visitsPerTree));
  Value cursor = lb.allocVector(b.getIndexType(), s.nodes);
  lb.loop(s.trees, [&](Value tree) {
    Value base = mul(tree, bucketsPerTree);
    lb.loop(bucketsPerTree, [&](Value bucket) {
      memref::StoreOp::create(b, lb.index(0), s.bucketStart,
                              ValueRange{add(base, bucket)});
    });
    // Counts, in the bucket after each node's, then their prefix sums.
    forEachVisit(tree, [&](Value, Value, Value node) {
      Value at = add(add(base, node), one);
      Value count = memref::LoadOp::create(b, s.bucketStart, at);
      memref::StoreOp::create(b, add(count, one), s.bucketStart, at);
    });
    lb.loop(s.nodes, [&](Value node) {
      Value at = add(base, node);
      Value start = memref::LoadOp::create(b, s.bucketStart, at);
      Value next = add(at, one);
      Value count = memref::LoadOp::create(b, s.bucketStart, next);
      memref::StoreOp::create(b, add(start, count), s.bucketStart, next);
      memref::StoreOp::create(b, start, cursor, node);
    });
    // Visits in row order, so that each bucket lists its rows in order.
    Value memberBase = mul(tree, visitsPerTree);
    forEachVisit(tree, [&](Value visit, Value row, Value node) {
      Value position = memref::LoadOp::create(b, cursor, node);
      Value at = add(memberBase, position);
      memref::StoreOp::create(b, visit, s.members, at);
      memref::StoreOp::create(b, row, s.memberRows, at);
      memref::StoreOp::create(
          b, memref::LoadOp::create(b, s.visitSlope, visit), s.memberSlope, at);
      memref::StoreOp::create(
          b, memref::LoadOp::create(b, s.visitActivation, visit),
          s.memberActivation, at);
      memref::StoreOp::create(b, add(position, one), cursor, node);
    });
  });
}

/// Phase 3: dw_in and dw_out, in f32 (or their own element type, see
/// storesSlabSumsOnce), shaped like the weights, each on a cache line
/// (kGradAlignment).
std::pair<Value, Value> TreeGradBuilder::accumulateWeights() {
  auto element = [&](Value result) {
    return storesSlabSumsOnce()
               ? cast<RankedTensorType>(result.getType()).getElementType()
               : Type(b.getF32Type());
  };
  Value dwIn = lb.alloc(op.getGradWIn().getType(), element(op.getGradWIn()),
                        {s.trees, s.nodes, s.inWidth}, kGradAlignment);
  Value dwOut =
      lb.alloc(op.getGradWOut().getType(), element(op.getGradWOut()),
               {s.trees, s.nodes, s.outWidth}, kGradAlignment);
  Value columns = lb.index(slabColumns());
  Value inSlabs = arith::CeilDivUIOp::create(b, s.inWidth, columns);
  Value outSlabs = arith::CeilDivUIOp::create(b, s.outWidth, columns);
  Value visits = mul(mul(s.rows, s.trees), s.levels);
  Value work = mul(visits, add(s.inWidth, s.outWidth));
  buildRowLoop(
      b, add(inSlabs, outSlabs), work, kMinParallelTreeWork, strategy(),
      [&](Value slab) {
        Value isIn =
            arith::CmpIOp::create(b, arith::CmpIPredicate::ult, slab, inSlabs);
        scf::IfOp::create(
            b, isIn,
            [&](OpBuilder &nested, Location) {
              BuildInside inside(b, nested);
              accumulateSlab(dwIn, s.x, s.memberSlope, s.inWidth, slab);
              scf::YieldOp::create(b);
            },
            [&](OpBuilder &nested, Location) {
              BuildInside inside(b, nested);
              accumulateSlab(dwOut, s.dy, s.memberActivation, s.outWidth,
                             arith::SubIOp::create(b, slab, inSlabs));
              scf::YieldOp::create(b);
            });
      });
  return {dwIn, dwOut};
}

void TreeGradBuilder::accumulateSlab(Value grad, Value source, Value scale,
                                     Value width, Value slab) {
  Value columns = lb.index(slabColumns());
  Value first = mul(slab, columns);
  Value last = arith::MinUIOp::create(b, add(first, columns), width);
  Value zero = f32Constant(b, 0.0);
  auto slabColumnLoop = [&](function_ref<void(Value)> body) {
    lb.loopBetween(first, last, body);
  };
  lb.loop(s.trees, [&](Value tree) {
    lb.loop(s.nodes, [&](Value node) {
      slabColumnLoop([&](Value j) {
        memref::StoreOp::create(b, zero, grad, ValueRange{tree, node, j});
      });
      foldVisits(
          tree, node, {}, [&](Value, Value row, Value member, ValueRange) {
            Value factor = memref::LoadOp::create(b, scale, member);
            slabColumnLoop([&](Value j) {
              Value old =
                  memref::LoadOp::create(b, grad, ValueRange{tree, node, j});
              Value term =
                  arith::MulFOp::create(b, factor, lb.load(source, {row, j}));
              memref::StoreOp::create(b, arith::AddFOp::create(b, old, term),
                                      grad, ValueRange{tree, node, j});
            });
            return SmallVector<Value>{};
          });
    });
  });
}

/// db_in in f32 [trees, nodes]: each node's visits' dl, in row order.
Value TreeGradBuilder::accumulateInputBias() {
  Value dbIn = lb.alloc(cast<RankedTensorType>(op.getBInGrad().getType()),
                        b.getF32Type(), {s.trees, s.nodes});
  lb.loop(s.trees, [&](Value tree) {
    lb.loop(s.nodes, [&](Value node) {
      Value sum = foldVisits(
          tree, node, f32Constant(b, 0.0),
          [&](Value, Value, Value member, ValueRange acc) {
            Value dl = memref::LoadOp::create(b, s.memberSlope, member);
            return SmallVector<Value>{arith::AddFOp::create(b, acc[0], dl)};
          })[0];
      memref::StoreOp::create(b, sum, dbIn, ValueRange{tree, node});
    });
  });
  return dbIn;
}

/// db_out in f32 [Dout]: dy's column sums, in row order.
Value TreeGradBuilder::accumulateOutputBias() {
  Value dbOut = lb.alloc(cast<RankedTensorType>(op.getBOutGrad().getType()),
                         b.getF32Type(), {s.outWidth});
  lb.loop(s.outWidth, [&](Value j) {
    memref::StoreOp::create(b, f32Constant(b, 0.0), dbOut, j);
  });
  lb.loop(s.rows, [&](Value row) {
    lb.loop(s.outWidth, [&](Value j) {
      Value acc = memref::LoadOp::create(b, dbOut, j);
      memref::StoreOp::create(
          b, arith::AddFOp::create(b, acc, lb.load(s.dy, {row, j})), dbOut, j);
    });
  });
  return dbOut;
}

void TreeGradBuilder::forEachVisit(
    Value tree, function_ref<void(Value visit, Value row, Value node)> body) {
  lb.loop(s.rows, [&](Value row) {
    Value first = firstVisit(row, tree);
    lb.loop(s.levels, [&](Value level) {
      Value visit = add(first, level);
      body(visit, row, memref::LoadOp::create(b, s.visitedNode, visit));
    });
  });
}

SmallVector<Value> TreeGradBuilder::foldVisits(
    Value tree, Value node, ValueRange inits,
    function_ref<SmallVector<Value>(Value, Value, Value, ValueRange)> body) {
  Value bucket = add(mul(tree, add(s.nodes, lb.index(1))), node);
  Value begin = memref::LoadOp::create(b, s.bucketStart, bucket);
  Value end = memref::LoadOp::create(b, s.bucketStart,
                                     ValueRange{add(bucket, lb.index(1))});
  Value memberBase = mul(tree, mul(s.rows, s.levels));
  auto loop = scf::ForOp::create(
      b, begin, end, lb.index(1), inits,
      [&](OpBuilder &nested, Location, Value position, ValueRange carried) {
        BuildInside inside(b, nested);
        Value at = add(memberBase, position);
        Value visit = memref::LoadOp::create(b, s.members, at);
        Value row = memref::LoadOp::create(b, s.memberRows, at);
        scf::YieldOp::create(b, body(visit, row, at, carried));
      });
  return llvm::to_vector_of<Value>(loop.getResults());
}

Value TreeGradBuilder::memberRowAhead(Value member, int64_t distance) {
  Value last = arith::SubIOp::create(b, mul(s.trees, mul(s.rows, s.levels)),
                                     lb.index(1));
  Value ahead =
      arith::MinUIOp::create(b, add(member, lb.index(distance)), last);
  return memref::LoadOp::create(b, s.memberRows, ahead);
}

namespace {

struct TreeFFNGradLowering : OpConversionPattern<TreeFFNGradOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TreeFFNGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    rewriter.replaceOp(op, TreeGradBuilder(b, op, adaptor).build());
    return success();
  }
};

} // namespace

void fff::populateTreeGradsToLoopsPatterns(RewritePatternSet &patterns) {
  patterns.add<TreeFFNGradLowering>(patterns.getContext());
}

//===- TreeGradsToLoops.cpp - tree_ffn backward as loops over buffers -*- C++
//-*-===//
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
//    of `kGradSlabColumns` columns is one thread's: for each node, the sum
//    over its visits, in row order, of dl * x[row] (dw_in) or act(l) *
//    dy[row] (dw_out) along the slab. Slabs split the work evenly however
//    the rows spread over the nodes (the root has every row, a leaf a few),
//    and no two threads write one element.
//
// db_in (the visits' dl, per node) and db_out (dy's column sums) are summed
// serially, in row order.
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

namespace {

/// Columns of dw_in or dw_out that one iteration of the accumulation loop
/// owns: 256 bytes of f32 per row (a few cache lines), so that a slab's
/// reads of x or dy rows are whole lines, and a 768-wide layer has 24
/// slabs to spread over the threads.
constexpr int64_t kGradSlabColumns = 64;

/// The values the phases share.
struct TreeGradState {
  Value dy, x, wIn, bIn, wOut;
  Value rows, inWidth, outWidth, trees, nodes, levels;
  /// Per visit (row, tree, level), flat index (row * trees + tree) *
  /// levels + level: the node visited, dl, and act(l).
  Value visitedNode, visitSlope, visitActivation;
  /// Per tree, the visits grouped by node: bucketStart[tree * (nodes + 1) +
  /// node] is where node's visits start in members[tree * rows * levels
  /// ...], which holds their flat indices in row order.
  Value bucketStart, members;
};

class TreeGradBuilder {
public:
  TreeGradBuilder(ImplicitLocOpBuilder &b, TreeFFNGradOp op,
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

  /// Phase 1: the walks, into the visit buffers; returns dx's f32 rows.
  Value walk() {
    Value visits = mul(mul(s.rows, s.trees), s.levels);
    s.visitedNode = lb.allocVector(b.getIndexType(), visits);
    s.visitSlope = lb.allocVector(b.getF32Type(), visits);
    s.visitActivation = lb.allocVector(b.getF32Type(), visits);
    Value dx = lb.allocMatrix(op.getGradInput().getType(), b.getF32Type(),
                              s.rows, s.inWidth);
    Value zero = f32Constant(b, 0.0);
    Value work = mul(visits, add(s.inWidth, mul(s.outWidth, lb.index(2))));
    buildRowLoop(
        b, s.rows, work, kMinParallelTreeWork, /*strategy=*/{}, [&](Value row) {
          lb.loop(s.inWidth, [&](Value i) {
            memref::StoreOp::create(b, zero, dx, ValueRange{row, i});
          });
          lb.loop(s.trees, [&](Value tree) { walkTree(row, tree, dx); });
        });
    return dx;
  }

  /// Phase 2: the counting sort of every tree's visits by node.
  void group() {
    Value one = lb.index(1);
    Value bucketsPerTree = add(s.nodes, one);
    s.bucketStart =
        lb.allocVector(b.getIndexType(), mul(s.trees, bucketsPerTree));
    Value visitsPerTree = mul(s.rows, s.levels);
    s.members = lb.allocVector(b.getIndexType(), mul(s.trees, visitsPerTree));
    Value cursor = lb.allocVector(b.getIndexType(), s.nodes);
    lb.loop(s.trees, [&](Value tree) {
      Value base = mul(tree, bucketsPerTree);
      lb.loop(bucketsPerTree, [&](Value bucket) {
        memref::StoreOp::create(b, lb.index(0), s.bucketStart,
                                ValueRange{add(base, bucket)});
      });
      // Counts, in the bucket after each node's, then their prefix sums.
      forEachVisit(tree, [&](Value visit, Value node) {
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
      forEachVisit(tree, [&](Value visit, Value node) {
        Value position = memref::LoadOp::create(b, cursor, node);
        memref::StoreOp::create(b, visit, s.members,
                                ValueRange{add(memberBase, position)});
        memref::StoreOp::create(b, add(position, one), cursor, node);
      });
    });
  }

  /// Phase 3: dw_in and dw_out, in f32, shaped like the weights.
  std::pair<Value, Value> accumulateWeights() {
    Value dwIn = lb.alloc(op.getGradWIn().getType(), b.getF32Type(),
                          {s.trees, s.nodes, s.inWidth});
    Value dwOut = lb.alloc(op.getGradWOut().getType(), b.getF32Type(),
                           {s.trees, s.nodes, s.outWidth});
    Value columns = lb.index(kGradSlabColumns);
    Value inSlabs = arith::CeilDivUIOp::create(b, s.inWidth, columns);
    Value outSlabs = arith::CeilDivUIOp::create(b, s.outWidth, columns);
    Value visits = mul(mul(s.rows, s.trees), s.levels);
    Value work = mul(visits, add(s.inWidth, s.outWidth));
    buildRowLoop(
        b, add(inSlabs, outSlabs), work, kMinParallelTreeWork,
        /*strategy=*/{}, [&](Value slab) {
          Value isIn = arith::CmpIOp::create(b, arith::CmpIPredicate::ult, slab,
                                             inSlabs);
          scf::IfOp::create(
              b, isIn,
              [&](OpBuilder &nested, Location) {
                BuildInside inside(b, nested);
                accumulateSlab(dwIn, s.x, s.visitSlope, s.inWidth, slab);
                scf::YieldOp::create(b);
              },
              [&](OpBuilder &nested, Location) {
                BuildInside inside(b, nested);
                accumulateSlab(dwOut, s.dy, s.visitActivation, s.outWidth,
                               arith::SubIOp::create(b, slab, inSlabs));
                scf::YieldOp::create(b);
              });
        });
    return {dwIn, dwOut};
  }

  /// db_in in f32 [trees, nodes]: each node's visits' dl, in row order.
  Value accumulateInputBias() {
    Value dbIn = lb.alloc(cast<RankedTensorType>(op.getBInGrad().getType()),
                          b.getF32Type(), {s.trees, s.nodes});
    lb.loop(s.trees, [&](Value tree) {
      lb.loop(s.nodes, [&](Value node) {
        Value sum = sumOverVisits(tree, node, f32Constant(b, 0.0),
                                  [&](Value visit, Value, Value acc) {
                                    Value dl = memref::LoadOp::create(
                                        b, s.visitSlope, visit);
                                    return arith::AddFOp::create(b, acc, dl);
                                  });
        memref::StoreOp::create(b, sum, dbIn, ValueRange{tree, node});
      });
    });
    return dbIn;
  }

  /// db_out in f32 [Dout]: dy's column sums, in row order.
  Value accumulateOutputBias() {
    Value dbOut = lb.alloc(cast<RankedTensorType>(op.getBOutGrad().getType()),
                           b.getF32Type(), {s.outWidth});
    lb.loop(s.outWidth, [&](Value j) {
      memref::StoreOp::create(b, f32Constant(b, 0.0), dbOut, j);
    });
    lb.loop(s.rows, [&](Value row) {
      lb.loop(s.outWidth, [&](Value j) {
        Value acc = memref::LoadOp::create(b, dbOut, j);
        memref::StoreOp::create(
            b, arith::AddFOp::create(b, acc, lb.load(s.dy, {row, j})), dbOut,
            j);
      });
    });
    return dbOut;
  }

  const TreeGradState &state() const { return s; }

private:
  Value add(Value lhs, Value rhs) { return arith::AddIOp::create(b, lhs, rhs); }
  Value mul(Value lhs, Value rhs) { return arith::MulIOp::create(b, lhs, rhs); }

  /// One row's walk of one tree: records its visits, adds into dx[row].
  void walkTree(Value row, Value tree, Value dx) {
    Value zero = f32Constant(b, 0.0);
    Value firstVisit = mul(add(mul(row, s.trees), tree), s.levels);
    lb.loop(s.levels, lb.index(0), [&](Value level, ValueRange carried) {
      Value node = carried[0];
      Value logit = lb.dot(
          s.inWidth,
          [&](Value i) {
            return lb.load(s.x, {row, i});
          },
          [&](Value i) {
            return lb.load(s.wIn, {tree, node, i});
          });
      if (s.bIn)
        logit = arith::AddFOp::create(b, logit, lb.load(s.bIn, {tree, node}));
      Value activated =
          buildActivation(b, b.getLoc(), op.getActivation(), logit);
      Value slope =
          buildActivationSlope(b, b.getLoc(), op.getActivation(), logit);
      Value dyDotOut = lb.dot(
          s.outWidth,
          [&](Value j) {
            return lb.load(s.dy, {row, j});
          },
          [&](Value j) {
            return lb.load(s.wOut, {tree, node, j});
          });
      Value dl = arith::MulFOp::create(b, dyDotOut, slope);
      Value visit = add(firstVisit, level);
      memref::StoreOp::create(b, node, s.visitedNode, visit);
      memref::StoreOp::create(b, dl, s.visitSlope, visit);
      memref::StoreOp::create(b, activated, s.visitActivation, visit);
      lb.accumulateRow(dx, row, s.inWidth, dl, [&](Value i) {
        return lb.load(s.wIn, {tree, node, i});
      });
      // Exactly zero goes left, as in the forward.
      Value goRight =
          arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, logit, zero);
      return SmallVector<Value>{lb.child(node, goRight)};
    });
  }

  /// Calls `body(visit, node)` for each of `tree`'s visits, in row order.
  void forEachVisit(Value tree, function_ref<void(Value, Value)> body) {
    lb.loop(s.rows, [&](Value row) {
      Value firstVisit = mul(add(mul(row, s.trees), tree), s.levels);
      lb.loop(s.levels, [&](Value level) {
        Value visit = add(firstVisit, level);
        body(visit, memref::LoadOp::create(b, s.visitedNode, visit));
      });
    });
  }

  /// Folds `step(visit, row, acc)` over the visits of `tree`'s `node`, in
  /// row order, from `init`.
  Value sumOverVisits(Value tree, Value node, Value init,
                      function_ref<Value(Value, Value, Value)> step) {
    Value bucket = add(mul(tree, add(s.nodes, lb.index(1))), node);
    Value begin = memref::LoadOp::create(b, s.bucketStart, bucket);
    Value end = memref::LoadOp::create(b, s.bucketStart,
                                       ValueRange{add(bucket, lb.index(1))});
    Value memberBase = mul(tree, mul(s.rows, s.levels));
    Value visitsPerRow = mul(s.trees, s.levels);
    auto loop = scf::ForOp::create(
        b, begin, end, lb.index(1), ValueRange{init},
        [&](OpBuilder &nested, Location, Value position, ValueRange acc) {
          BuildInside inside(b, nested);
          Value visit = memref::LoadOp::create(
              b, s.members, ValueRange{add(memberBase, position)});
          Value row = arith::DivUIOp::create(b, visit, visitsPerRow);
          scf::YieldOp::create(b, step(visit, row, acc[0]));
        });
    return loop.getResult(0);
  }

  /// For every node, grad[tree, node, j] = sum over its visits of
  /// scale[visit] * source[row, j], for j in the slab's columns.
  void accumulateSlab(Value grad, Value source, Value scale, Value width,
                      Value slab) {
    Value columns = lb.index(kGradSlabColumns);
    Value first = mul(slab, columns);
    Value last = arith::MinUIOp::create(b, add(first, columns), width);
    Value zero = f32Constant(b, 0.0);
    auto slabColumns = [&](function_ref<void(Value)> body) {
      scf::ForOp::create(b, first, last, lb.index(1), ValueRange{},
                         [&](OpBuilder &nested, Location, Value j, ValueRange) {
                           BuildInside inside(b, nested);
                           body(j);
                           scf::YieldOp::create(b);
                         });
    };
    lb.loop(s.trees, [&](Value tree) {
      lb.loop(s.nodes, [&](Value node) {
        slabColumns([&](Value j) {
          memref::StoreOp::create(b, zero, grad, ValueRange{tree, node, j});
        });
        sumOverVisits(tree, node, zero, [&](Value visit, Value row, Value acc) {
          Value factor = memref::LoadOp::create(b, scale, visit);
          slabColumns([&](Value j) {
            Value old =
                memref::LoadOp::create(b, grad, ValueRange{tree, node, j});
            Value term =
                arith::MulFOp::create(b, factor, lb.load(source, {row, j}));
            memref::StoreOp::create(b, arith::AddFOp::create(b, old, term),
                                    grad, ValueRange{tree, node, j});
          });
          return acc;
        });
      });
    });
  }

  ImplicitLocOpBuilder &b;
  BufferLoopBuilder lb;
  TreeFFNGradOp op;
  TreeGradState s;
};

struct TreeFFNGradLowering : OpConversionPattern<TreeFFNGradOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TreeFFNGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    TreeGradBuilder builder(b, op, adaptor);
    BufferLoopBuilder lb(b);
    const TreeGradState &s = builder.state();
    Value dx = builder.walk();
    builder.group();
    auto [dwIn, dwOut] = builder.accumulateWeights();
    SmallVector<Value> results{
        lb.finish(dx, op.getGradInput().getType(), {s.rows, s.inWidth}),
        lb.finish(dwIn, op.getGradWIn().getType(),
                  {s.trees, s.nodes, s.inWidth}),
        lb.finish(dwOut, op.getGradWOut().getType(),
                  {s.trees, s.nodes, s.outWidth})};
    if (Value dbIn = op.getBInGrad())
      results.push_back(lb.finish(builder.accumulateInputBias(),
                                  cast<RankedTensorType>(dbIn.getType()),
                                  {s.trees, s.nodes}));
    if (Value dbOut = op.getBOutGrad())
      results.push_back(lb.finish(builder.accumulateOutputBias(),
                                  cast<RankedTensorType>(dbOut.getType()),
                                  ValueRange{s.outWidth}));
    rewriter.replaceOp(op, results);
    return success();
  }
};

} // namespace

void fff::populateTreeGradsToLoopsPatterns(RewritePatternSet &patterns) {
  patterns.add<TreeFFNGradLowering>(patterns.getContext());
}

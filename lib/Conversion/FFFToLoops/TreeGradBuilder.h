//===- TreeGradBuilder.h - tree_ffn_grad's CPU phases ----------*- C++ -*-===//
//
// fff.tree_ffn_grad on the CPU, in three phases (TreeGradsToLoops.cpp says
// why): the walk, threaded over rows; a counting sort of the visits by
// node; and the weights' sums, threaded over column slabs. The scalar
// lowering (convert-fff-to-loops) is this class as it is; the vector one
// (convert-fff-trees-to-vector) overrides the walk (the forward kernel's,
// TreeGradsToVector.cpp) and the slab sums, and keeps the rest, so the two
// group and order the sums alike.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_FFFTOLOOPS_TREEGRADBUILDER_H
#define FFF_LIB_CONVERSION_FFFTOLOOPS_TREEGRADBUILDER_H

#include "BufferLoops.h"

#include "fff/Dialect/FFF/IR/FFFOps.h"

namespace fff::loops {

/// The bytes dw_in's and dw_out's f32 buffers are aligned to: a cache line,
/// so that rows of a whole number of lines can be stored a line at a time.
constexpr uint64_t kGradAlignment = 64;

/// The values the phases share.
struct TreeGradState {
  Value dy, x, wIn, bIn, wOut;
  Value rows, inWidth, outWidth, trees, nodes, levels;
  /// Per visit (row, tree, level), flat index (row * trees + tree) *
  /// levels + level: the node visited, dl, and act(l).
  Value visitedNode, visitSlope, visitActivation;
  /// Per tree, the visits grouped by node: bucketStart[tree * (nodes + 1) +
  /// node] is where node's visits start in members[tree * rows * levels
  /// ...], which holds their flat indices in row order, memberRows their
  /// rows (derivable, index / (trees * levels), but kept so that the sums'
  /// inner loop divides nothing), and memberSlope and memberActivation
  /// their dl and act(l) (so that the sums read them in order, rather than
  /// gathered through members).
  Value bucketStart, members, memberRows, memberSlope, memberActivation;
};

class TreeGradBuilder {
public:
  TreeGradBuilder(ImplicitLocOpBuilder &b, TreeFFNGradOp op,
                  TreeFFNGradOp::Adaptor adaptor);
  virtual ~TreeGradBuilder() = default;

  /// Builds the lowering; returns the op's results.
  SmallVector<Value> build();

protected:
  /// Phase 1: every row's walk of every tree, recorded in the visit buffers;
  /// returns dx's f32 rows. Here a row at a time, threaded over rows.
  virtual Value walk();

  /// Allocates the visit buffers (into `s`) and returns dx's f32 rows.
  Value allocWalkBuffers();

  /// sum over j in [0, n) of lhs[lhsAt..., j] * rhs[rhsAt..., j], in f32
  /// (the walk's two dot products per visit).
  Value dot(Value n, Value lhs, ValueRange lhsAt, Value rhs, ValueRange rhsAt);

  /// acc[row, j] += scale * source[sourceAt..., j] for j in [0, n), acc f32
  /// (the walk's dx update).
  void addScaledRow(Value acc, Value row, Value scale, Value source,
                    ValueRange sourceAt, Value n);

  /// For every node, grad[tree, node, j] (f32) = the sum over its visits,
  /// in row order, of scale[member] * source[row, j], for the columns j of
  /// slab `slab` of a row `width` wide (`scale` in grouped order:
  /// memberSlope or memberActivation).
  virtual void accumulateSlab(Value grad, Value source, Value scale,
                              Value width, Value slab);

  /// Columns of dw_in or dw_out per slab.
  virtual int64_t slabColumns() const;

  /// Whether accumulateSlab sums in f32 registers and stores each sum
  /// once, so that dw_in and dw_out can have the weights' element type
  /// (rounded as stored); else they are f32, rounded in a pass after.
  virtual bool storesSlabSumsOnce() const { return false; }

  /// Recorded as `fff.strategy` on the threaded loops (null: nothing).
  virtual DictionaryAttr strategy() const { return {}; }

  Value add(Value lhs, Value rhs) { return arith::AddIOp::create(b, lhs, rhs); }
  Value mul(Value lhs, Value rhs) { return arith::MulIOp::create(b, lhs, rhs); }

  /// The flat index of (row, tree, level 0)'s visit.
  Value firstVisit(Value row, Value tree) {
    return mul(add(mul(row, s.trees), tree), s.levels);
  }

  /// Calls `body(visit, row, member)` for each visit of `tree`'s `node`, in
  /// row order, threading `inits` through (body returns the next values).
  /// `member` indexes the visit in the grouped buffers (see memberRowAhead).
  SmallVector<Value>
  foldVisits(Value tree, Value node, ValueRange inits,
             function_ref<SmallVector<Value>(Value visit, Value row,
                                             Value member, ValueRange carried)>
                 body);

  /// The row of the grouped visit `distance` after `member` (of the last
  /// visit, near the end), to prefetch.
  Value memberRowAhead(Value member, int64_t distance);

  ImplicitLocOpBuilder &b;
  BufferLoopBuilder lb;
  TreeFFNGradOp op;
  TreeGradState s;

private:
  void walkTree(Value row, Value tree, Value dx);
  void group();
  std::pair<Value, Value> accumulateWeights();
  Value accumulateInputBias();
  Value accumulateOutputBias();
  void
  forEachVisit(Value tree,
               function_ref<void(Value visit, Value row, Value node)> body);
};

} // namespace fff::loops

#endif // FFF_LIB_CONVERSION_FFFTOLOOPS_TREEGRADBUILDER_H

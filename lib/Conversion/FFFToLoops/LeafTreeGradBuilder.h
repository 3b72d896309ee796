//===- LeafTreeGradBuilder.h - leaf_tree_ffn_grad's CPU phases -*- C++ -*-===//
//
// fff.leaf_tree_ffn_grad on the CPU, in four phases
// (LeafTreeGradsToLoops.cpp says why): the route, threaded over rows; a
// counting sort of the rows by leaf, cut into tiles; each row's dpre,
// act(pre) and dx, threaded over tiles; and the leaves' sums, threaded over
// blocks of gradient rows. The scalar lowering (convert-fff-to-loops) is
// this class as it is; the vector one (convert-fff-trees-to-vector)
// overrides its row operations (routingDot, rowsTimesMatrix, sumOverRows,
// with groupSize) with vector code, and keeps the rest, so the two group
// and order the sums alike.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_FFFTOLOOPS_LEAFTREEGRADBUILDER_H
#define FFF_LIB_CONVERSION_FFFTOLOOPS_LEAFTREEGRADBUILDER_H

#include "BufferLoops.h"

#include "fff/Dialect/FFF/IR/FFFOps.h"

namespace fff::loops {

class LeafTreeGradBuilder {
public:
  LeafTreeGradBuilder(ImplicitLocOpBuilder &b, LeafTreeFFNGradOp op,
                      LeafTreeFFNGradOp::Adaptor adaptor);
  virtual ~LeafTreeGradBuilder() = default;

  /// Builds the lowering; returns the op's results.
  SmallVector<Value> build();

protected:
  /// dot(x[row], node_w[node]): a routing score before its bias.
  virtual Value routingDot(Value row, Value node);

  /// For each row r of `rowsOf` (a group, see groupSize): out[r, j] =
  /// bias[biasAt..., j] (0 without `bias`) + the sum over i in [0, m), in
  /// i order, of lhs[r, i] * rhs[rhsAt..., i, j], for j in [0, n); out f32.
  virtual void rowsTimesMatrix(Value out, ValueRange rowsOf, Value n,
                               Value bias, ValueRange biasAt, Value lhs,
                               Value m, Value rhs, ValueRange rhsAt);

  /// For each gradient row k of `ks` (a group, see groupSize):
  /// grad[leaf, k, j] = the sum over the rows r routed to `leaf`, in row
  /// order, of scales[r, k] * source[r, j], for j in [0, n); grad f32.
  /// Without `scales` (and `ks`), grad[leaf, j] = the sum of source[r, j].
  virtual void sumOverRows(Value leaf, Value grad, Value n, Value scales,
                           ValueRange ks, Value source);

  /// How many rows rowsTimesMatrix and sumOverRows take at a time.
  virtual int64_t groupSize() const { return 1; }

  /// The positions in `members` of the rows routed to `leaf`: [begin, end).
  std::pair<Value, Value> memberRange(Value leaf);

  /// acc[accAt..., j] += scale * source[sourceAt..., j] for j in [0, n),
  /// acc f32, as scalars.
  void addScaled(Value acc, ValueRange accAt, Value n, Value scale,
                 Value source, ValueRange sourceAt);

  /// Recorded as `fff.strategy` on the threaded loops (null: nothing).
  virtual DictionaryAttr strategy() const { return {}; }

  ImplicitLocOpBuilder &b;
  BufferLoopBuilder lb;
  LeafTreeFFNGradOp op;
  /// The operands' buffers, and the extents.
  Value dy, x, nodeW, nodeB, w1, b1, w2;
  Value rows, inWidth, hiddenWidth, outWidth, leaves;
  /// The rows grouped by leaf (phase 2).
  Value members;

private:
  Value add(Value lhs, Value rhs) { return arith::AddIOp::create(b, lhs, rhs); }
  Value mul(Value lhs, Value rhs) { return arith::MulIOp::create(b, lhs, rhs); }

  Value route(Value row);
  void routePhase();
  void group();
  Value transposeLeaves(Value weights, Value weightRows, Value weightCols);
  Value rowPhase();
  std::tuple<Value, Value, Value, Value> sums();
  void forEachGroup(Value first, Value last,
                    function_ref<void(ValueRange items)> body);

  /// Each row's leaf [B] (phase 1); act(pre) and dpre [B, W] (phase 3).
  Value leafOf, activated, dpre;
  /// Phase 2's grouping and tiles.
  Value leafStart, tileLeaf, tileFirst, tileCount;
};

} // namespace fff::loops

#endif // FFF_LIB_CONVERSION_FFFTOLOOPS_LEAFTREEGRADBUILDER_H

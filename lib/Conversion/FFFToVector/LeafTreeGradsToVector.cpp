//===- LeafTreeGradsToVector.cpp - leaf_tree_ffn backward as vectors -----===//
//
// convert-fff-trees-to-vector's lowering of fff.leaf_tree_ffn_grad: the
// phases of the scalar lowering (LeafTreeGradBuilder,
// FFFToLoops/LeafTreeGradsToLoops.cpp), with vector code for its three row
// operations:
//
// - a routing score's dot product is the forward kernel's
//   (TreesToVector.cpp, with the same CPUTreeStrategy), so the backward
//   routes each row as the forward did, bit for bit;
// - a row times a matrix (pre, dpre, dx) and a leaf's sums over its rows (dw1,
//   dw2, db1, db2) take kGroupRows rows at a time, and keep a chunk of up
//   to kChunkVectors vectors of each one's result in registers while the
//   terms are added into it in order, then store it once: each vector of
//   the matrix or of a source row is loaded once for the group, and each
//   element is still the sum of its terms in the scalar lowering's order,
//   so the thread count changes no bit of the result.
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/FFFToVector/FFFToVector.h"

#include "../FFFToLoops/LeafTreeGradBuilder.h"
#include "TokenEmitter.h"

#include "fff/Conversion/FFFToVector/CPUTreeStrategy.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace fff;
using namespace fff::loops;

namespace {

/// Vectors of columns a row operation keeps in registers at a time, per
/// row: at 16 lanes a 64-wide leaf is one chunk.
constexpr int64_t kChunkVectors = 4;

/// Rows a row operation takes at a time: with kChunkVectors, 16 sums in
/// registers, whose independent multiply-add chains cover their latency.
constexpr int64_t kGroupRows = 4;

class VectorLeafTreeGradBuilder : public LeafTreeGradBuilder {
public:
  VectorLeafTreeGradBuilder(ImplicitLocOpBuilder &b, LeafTreeFFNGradOp op,
                            LeafTreeFFNGradOp::Adaptor adaptor,
                            const CPUTreeStrategy &strategy)
      : LeafTreeGradBuilder(b, op, adaptor), emit(b, strategy),
        treeStrategy(strategy) {}

protected:
  Value routingDot(Value row, Value node) override {
    return emit.dotEach(x, row, nodeW, {{node}}, inWidth).front();
  }

  void rowsTimesMatrix(Value out, ValueRange rowsOf, Value n, Value bias,
                       ValueRange biasAt, Value lhs, Value m, Value rhs,
                       ValueRange rhsAt) override {
    int64_t count = rowsOf.size();
    forEachChunk(n, [&](ValueRange columns, ValueRange masks) {
      int64_t width = columns.size();
      // Row t's sum of column vector v is carried at t * width + v.
      SmallVector<Value> starts;
      for (int64_t t = 0; t < count; ++t)
        for (auto [column, mask] : llvm::zip(columns, masks))
          starts.push_back(bias ? emit.load(bias, at(biasAt, column), mask)
                                : emit.zeros());
      SmallVector<Value> sums =
          lb.loop(m, starts, [&](Value i, ValueRange partial) {
            SmallVector<Value> rowAt = at(rhsAt, i);
            SmallVector<Value> terms;
            for (auto [column, mask] : llvm::zip(columns, masks))
              terms.push_back(emit.load(rhs, at(rowAt, column), mask));
            SmallVector<Value> next;
            for (auto [t, row] : llvm::enumerate(rowsOf)) {
              Value factor = emit.splat(lb.load(lhs, {row, i}));
              for (int64_t v = 0; v < width; ++v)
                next.push_back(vector::FMAOp::create(b, factor, terms[v],
                                                     partial[t * width + v]));
            }
            return next;
          });
      for (auto [t, row] : llvm::enumerate(rowsOf))
        for (auto [v, column, mask] : llvm::enumerate(columns, masks))
          emit.store(sums[t * width + v], out, {row, column}, mask);
    });
  }

  void sumOverRows(Value leaf, Value grad, Value n, Value scales,
                   ValueRange ks, Value source) override {
    auto [begin, end] = memberRange(leaf);
    int64_t count = scales ? ks.size() : 1;
    forEachChunk(n, [&](ValueRange columns, ValueRange masks) {
      int64_t width = columns.size();
      // Gradient row t's sum of column vector v is carried at t * width + v.
      SmallVector<Value> zeros(count * width, emit.zeros());
      auto loop = scf::ForOp::create(
          b, begin, end, lb.index(1), zeros,
          [&](OpBuilder &nested, Location, Value position,
              ValueRange partial) {
            BuildInside inside(b, nested);
            Value row = memref::LoadOp::create(b, members, position);
            SmallVector<Value> terms;
            for (auto [column, mask] : llvm::zip(columns, masks))
              terms.push_back(emit.load(source, {row, column}, mask));
            SmallVector<Value> next;
            for (int64_t t = 0; t < count; ++t) {
              Value factor =
                  scales ? emit.splat(lb.load(scales, {row, ks[t]})) : Value();
              for (int64_t v = 0; v < width; ++v) {
                Value sum = partial[t * width + v];
                next.push_back(
                    factor ? Value(vector::FMAOp::create(b, factor, terms[v],
                                                         sum))
                           : Value(arith::AddFOp::create(b, sum, terms[v])));
              }
            }
            scf::YieldOp::create(b, next);
          });
      for (int64_t t = 0; t < count; ++t) {
        SmallVector<Value> gradAt{leaf};
        if (scales)
          gradAt.push_back(ks[t]);
        for (auto [v, column, mask] : llvm::enumerate(columns, masks))
          emit.store(loop.getResult(t * width + v), grad, at(gradAt, column),
                     mask);
      }
    });
  }

  /// Four rows (or gradient rows) share each vector of the matrix (or
  /// source row) they read, and their sums are independent chains.
  int64_t groupSize() const override { return kGroupRows; }

  DictionaryAttr strategy() const override {
    return treeStrategy.toAttr(b.getContext());
  }

private:
  /// `body(columns, masks)` for each chunk of [0, n): up to kChunkVectors
  /// vectors, fewer where n is known to need fewer, each under its tail
  /// mask (all lanes but the last ragged vector's: a mask known to be full
  /// folds away, and a store under a partial mask is not forwarded to the
  /// load after it, which would stall a sum kept in memory; these are kept
  /// in registers).
  void forEachChunk(Value n,
                    function_ref<void(ValueRange columns, ValueRange masks)>
                        body) {
    int64_t lanes = emit.getLanes();
    int64_t vectors = kChunkVectors;
    if (std::optional<int64_t> extent = getConstantIntValue(n))
      vectors = std::clamp<int64_t>(llvm::divideCeil(*extent, lanes), 1,
                                    kChunkVectors);
    emit.forLoop(lb.index(0), n, lanes * vectors, [&](Value first) {
      SmallVector<Value> columns, masks;
      for (int64_t v = 0; v < vectors; ++v) {
        columns.push_back(add(first, lb.index(v * lanes)));
        masks.push_back(emit.tailMask(n, columns.back()));
      }
      body(columns, masks);
    });
  }

  Value add(Value lhs, Value rhs) { return arith::AddIOp::create(b, lhs, rhs); }

  TokenEmitter emit;
  CPUTreeStrategy treeStrategy;
};

struct LeafTreeFFNGradToVector : OpConversionPattern<LeafTreeFFNGradOp> {
  LeafTreeFFNGradToVector(MLIRContext *context, CPUTarget target,
                          int64_t cacheBytes)
      : OpConversionPattern(context), target(target), cacheBytes(cacheBytes) {}

  LogicalResult
  matchAndRewrite(LeafTreeFFNGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    // The forward's strategy (LeafTreeFFNToVector's), whose dot products
    // route the rows.
    CPUTreeStrategy strategy = selectCPULeafStrategy(
        op.getDepth(), staticExtent(op.getInput(), 1), target, cacheBytes);
    rewriter.replaceOp(
        op, VectorLeafTreeGradBuilder(b, op, adaptor, strategy).build());
    return success();
  }

  CPUTarget target;
  int64_t cacheBytes;
};

} // namespace

void fff::populateFFFLeafTreeGradsToVectorPatterns(RewritePatternSet &patterns,
                                                   const CPUTarget &target,
                                                   int64_t cacheBytes) {
  patterns.add<LeafTreeFFNGradToVector>(patterns.getContext(), target,
                                        cacheBytes);
}

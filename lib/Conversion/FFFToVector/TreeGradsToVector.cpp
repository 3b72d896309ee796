//===- TreeGradsToVector.cpp - tree_ffn backward as vector code -*- C++ -*-===//
//
// convert-fff-trees-to-vector's lowering of fff.tree_ffn_grad: the phases
// of the scalar lowering (TreeGradBuilder, FFFToLoops/TreeGradsToLoops.cpp),
// with vector code where the arithmetic is:
//
// - the walk: each visit's two dot products (x . w_in, dy . w_out) into
//   several f32 vector accumulators (dot), and the dx row's update a vector
//   at a time (addScaledRow);
// - the weights' sums: a slab is `kSlabVectors` vectors of columns, held in
//   registers while a node's visits are added into them (a multiply-add of
//   the visit's scale and a vector of its x or dy row each), then stored
//   once; the scalar loops load and store the slab's gradient per visit.
//
// Each gradient element is still the sum of its node's visits in row order,
// so the thread count changes no bit of the result.
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/FFFToVector/FFFToVector.h"

#include "../FFFToLoops/TreeGradBuilder.h"
#include "VectorEmitter.h"

#include "fff/Conversion/FFFToVector/CPUTreeStrategy.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace fff;
using namespace fff::loops;

namespace {

/// Vectors of columns per slab: four cover the latency of the multiply-adds
/// into them (each waits on the one four back), and at 16 lanes make the
/// scalar lowering's 64 columns.
constexpr int64_t kSlabVectors = 4;

/// How many visits ahead a slab's accumulation prefetches its source rows.
constexpr int64_t kPrefetchVisits = 16;

class VectorTreeGradBuilder : public TreeGradBuilder {
public:
  VectorTreeGradBuilder(ImplicitLocOpBuilder &b, TreeFFNGradOp op,
                        TreeFFNGradOp::Adaptor adaptor,
                        const CPUVectorShape &shape)
      : TreeGradBuilder(b, op, adaptor), shape(shape), emit(b, shape) {}

protected:
  int64_t slabColumns() const override { return shape.lanes * kSlabVectors; }

  DictionaryAttr strategy() const override {
    SmallVector<NamedAttribute> attrs;
    shape.appendAttrs(b, attrs);
    attrs.push_back(b.getNamedAttr("min_parallel_work",
                                   b.getI64IntegerAttr(kMinParallelTreeWork)));
    attrs.push_back(
        b.getNamedAttr("slab_columns", b.getI64IntegerAttr(slabColumns())));
    return b.getDictionaryAttr(attrs);
  }

  void addScaledRow(Value acc, Value row, Value scale, Value source,
                    ValueRange sourceAt, Value n) override {
    Value lanes = emit.splat(scale);
    auto update = [&](Value j, Value mask) {
      SmallVector<Value> at(sourceAt);
      at.push_back(j);
      Value sum = vector::FMAOp::create(b, lanes, emit.load(source, at, mask),
                                        emit.load(acc, {row, j}, mask));
      emit.store(sum, acc, {row, j}, mask);
    };
    emit.forEachStep(
        n, shape.lanes, [&](Value j) { update(j, Value()); }, update);
  }

  void accumulateSlab(Value grad, Value source, Value scale, Value width,
                      Value slab) override {
    Value first = mul(slab, lb.index(slabColumns()));
    SmallVector<Value> columns, masks;
    for (int64_t v = 0; v < kSlabVectors; ++v) {
      columns.push_back(add(first, lb.index(v * shape.lanes)));
      // Lanes past the row (a narrow last slab) read as zero and are not
      // stored; create_mask clamps to [0, lanes].
      masks.push_back(emit.tailMask(width, columns.back()));
    }
    SmallVector<Value> zeros(kSlabVectors, emit.zeros());
    lb.loop(s.trees, [&](Value tree) {
      lb.loop(s.nodes, [&](Value node) {
        SmallVector<Value> sums = foldVisits(
            tree, node, zeros,
            [&](Value visit, Value row, Value member, ValueRange partial) {
              // The visits' rows are scattered over the batch: fetching
              // the slab of a row a few visits ahead hides the wait for it
              // behind this one's multiply-adds.
              Value ahead = memberRowAhead(member, kPrefetchVisits);
              for (Value column : columns)
                memref::PrefetchOp::create(b, source, ValueRange{ahead, column},
                                           /*isWrite=*/false,
                                           /*localityHint=*/3,
                                           /*isDataCache=*/true);
              Value factor =
                  emit.splat(memref::LoadOp::create(b, scale, visit));
              SmallVector<Value> next;
              for (int64_t v = 0; v < kSlabVectors; ++v)
                next.push_back(vector::FMAOp::create(
                    b, factor, emit.load(source, {row, columns[v]}, masks[v]),
                    partial[v]));
              return next;
            });
        for (int64_t v = 0; v < kSlabVectors; ++v)
          emit.store(sums[v], grad, {tree, node, columns[v]}, masks[v]);
      });
    });
  }

  Value dot(Value n, Value lhs, ValueRange lhsAt, Value rhs,
            ValueRange rhsAt) override {
    auto at = [](ValueRange prefix, Value j) {
      SmallVector<Value> indices(prefix);
      indices.push_back(j);
      return indices;
    };
    return emit.reduce(n, shape.accumulators,
                       [&](Value j, Value partial, Value mask) -> Value {
                         return vector::FMAOp::create(
                             b, emit.load(lhs, at(lhsAt, j), mask),
                             emit.load(rhs, at(rhsAt, j), mask), partial);
                       });
  }

private:
  CPUVectorShape shape;
  VectorEmitter emit;
};

struct TreeFFNGradToVector : OpConversionPattern<TreeFFNGradOp> {
  TreeFFNGradToVector(MLIRContext *context, CPUTarget target)
      : OpConversionPattern(context), target(target) {}

  LogicalResult
  matchAndRewrite(TreeFFNGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    int64_t inWidth = op.getInput().getType().getDimSize(1);
    std::optional<int64_t> rowSize;
    if (!ShapedType::isDynamic(inWidth))
      rowSize = inWidth;
    CPUVectorShape shape = selectCPUVectorShape(rowSize, target);
    rewriter.replaceOp(op,
                       VectorTreeGradBuilder(b, op, adaptor, shape).build());
    return success();
  }

  CPUTarget target;
};

} // namespace

void fff::populateFFFTreeGradsToVectorPatterns(RewritePatternSet &patterns,
                                               const CPUTarget &target) {
  patterns.add<TreeFFNGradToVector>(patterns.getContext(), target);
}

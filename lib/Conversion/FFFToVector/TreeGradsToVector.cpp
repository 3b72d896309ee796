//===- TreeGradsToVector.cpp - tree_ffn backward as vector code -*- C++ -*-===//
//
// convert-fff-trees-to-vector's lowering of fff.tree_ffn_grad: the phases
// of the scalar lowering (TreeGradBuilder, FFFToLoops/TreeGradsToLoops.cpp),
// with vector code where the arithmetic is:
//
// - the walk: the forward kernel's (TreesToVector.cpp, with its
//   CPUTreeStrategy): tokens walk in groups whose logits' dot products are
//   interleaved, the top levels in token order, the levels below the
//   strategy's sort level regrouped by the node each token reached there,
//   so that a subtree's weights stay in the core's cache while its tokens
//   walk it. Each logit is summed as the forward sums it, so the backward
//   takes the forward's paths bit for bit. Then a group's visits: dl =
//   dot(dy, w_out[node]) * act'(l) per level (independent of one another,
//   unlike the logits' chain; interleaved across the group's tokens), and
//   each token's dx row, held in registers while its levels' scaled w_in
//   rows are added in level order;
// - the weights' sums: every row's columns of a slab are packed into a
//   buffer of the slab's own, which stays in the core's cache across the
//   levels (read in place, each piece of a row drags its neighbours, other
//   slabs' columns, into the cache with it); a slab is `kSlabVectors`
//   vectors of columns, held in registers while a node's visits are added
//   into them (a multiply-add of the visit's scale and a vector of its
//   packed row each), then stored once; the scalar loops load and store
//   the slab's gradient per visit.
//
// Each gradient element is still the sum of its node's visits in row order,
// so the thread count changes no bit of the result.
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/FFFToVector/FFFToVector.h"

#include "../FFFToLoops/TreeGradBuilder.h"
#include "TokenEmitter.h"
#include "VectorEmitter.h"

#include "fff/Conversion/FFFToVector/CPUTreeStrategy.h"
#include "fff/Dialect/FFF/Utils/Activation.h"
#include "fff/Dialect/FFF/Utils/Routing.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

using namespace mlir;
using namespace fff;
using namespace fff::loops;

namespace {

/// Vectors of columns per slab: four cover the latency of the multiply-adds
/// into them (each waits on the one four back), and at 16 lanes make the
/// scalar lowering's 64 columns.
constexpr int64_t kSlabVectors = 4;

/// How many visits ahead a slab's accumulation prefetches its source rows.
constexpr int64_t kPrefetchVisits = 8;

class VectorTreeGradBuilder : public TreeGradBuilder {
public:
  VectorTreeGradBuilder(ImplicitLocOpBuilder &b, TreeFFNGradOp op,
                        TreeFFNGradOp::Adaptor adaptor,
                        const CPUVectorShape &shape,
                        const CPUTreeStrategy &walkStrategy,
                        bool streamGradients)
      : TreeGradBuilder(b, op, adaptor), shape(shape), emit(b, shape),
        walkStrategy(walkStrategy), streamGradients(streamGradients) {}

protected:
  Value walk() override {
    Value dx = allocWalkBuffers();
    TokenEmitter tokens(b, walkStrategy);
    int64_t levels = op.getDepth() + 1;
    int64_t sortLevel = walkStrategy.sortLevel;
    Value nodes, order;
    if (sortLevel > 0) {
      nodes = tokens.allocIndices(s.rows);
      order = tokens.allocIndices(s.rows);
    }
    bool singleTree = op.getWIn().getType().getDimSize(0) == 1;
    Value zero = emit.f32(0.0);
    tokens.loop(lb.index(0), s.trees, [&](Value tree) {
      auto visitAt = [&](Value row, Value level) {
        return add(firstVisit(row, tree), level);
      };
      // One level of the walks of tokens `walkRows`, at `walkNodes`: each
      // visit's node and logit are recorded (the logit where its activation
      // goes, until `differentiate` puts it there).
      auto route = [&](ValueRange walkRows, Value level, ValueRange at) {
        SmallVector<SmallVector<Value>> weightRows;
        for (Value node : at)
          weightRows.push_back({tree, node});
        SmallVector<Value> logits =
            tokens.dotEach(s.x, walkRows, s.wIn, weightRows, s.inWidth);
        SmallVector<Value> children;
        for (auto [row, node, logit] : llvm::zip(walkRows, at, logits)) {
          if (s.bIn)
            logit = arith::AddFOp::create(
                b, logit, tokens.loadScalar(s.bIn, {tree, node}));
          Value visit = visitAt(row, level);
          memref::StoreOp::create(b, node, s.visitedNode, visit);
          memref::StoreOp::create(b, logit, s.visitActivation, visit);
          // As the forward routes the row.
          Value goRight = arith::CmpFOp::create(
              b, goRightPredicate(op.getZeroGoesRight()), logit, zero);
          children.push_back(tokens.child(node, goRight));
        }
        return children;
      };
      auto walkLevels = [&](ValueRange walkRows, ValueRange starts,
                            int64_t from, int64_t to) {
        return tokens.walkEach(starts, from, to,
                               [&](Value level, ValueRange at) {
                                 return route(walkRows, level, at);
                               });
      };
      // Walked tokens' visits: act(l) and dl, their dot products
      // interleaved across the tokens.
      auto differentiate = [&](ValueRange walkRows) {
        tokens.loop(lb.index(0), lb.index(levels), [&](Value level) {
          SmallVector<Value> visits, logits;
          SmallVector<SmallVector<Value>> weightRows;
          for (Value row : walkRows) {
            visits.push_back(visitAt(row, level));
            weightRows.push_back({tree, memref::LoadOp::create(b, s.visitedNode,
                                                               visits.back())});
            logits.push_back(
                memref::LoadOp::create(b, s.visitActivation, visits.back()));
          }
          SmallVector<Value> dots =
              tokens.dotEach(s.dy, walkRows, s.wOut, weightRows, s.outWidth);
          for (auto [visit, logit, dot] : llvm::zip(visits, logits, dots)) {
            Value slope =
                buildActivationSlope(b, b.getLoc(), op.getActivation(), logit);
            memref::StoreOp::create(b, arith::MulFOp::create(b, dot, slope),
                                    s.visitSlope, visit);
            memref::StoreOp::create(
                b, buildActivation(b, b.getLoc(), op.getActivation(), logit),
                s.visitActivation, visit);
          }
        });
      };
      // A differentiated token's dx row.
      auto addInputGrad = [&](Value row) {
        TokenEmitter::ScaledRows terms{
            lb.index(0), lb.index(levels), /*sharedRows=*/false,
            [&](int64_t, Value level) {
              Value visit = visitAt(row, level);
              return std::make_pair(
                  Value(memref::LoadOp::create(b, s.visitSlope, visit)),
                  SmallVector<Value>{
                      tree, memref::LoadOp::create(b, s.visitedNode, visit)});
            }};
        auto fromZero = [&](Value, Value) { return tokens.zeros(); };
        if (singleTree)
          return tokens.addScaledRows(dx, row, s.wIn, s.inWidth, terms,
                                      fromZero);
        // dx sums the trees in order: the first starts it.
        Value isFirst = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, tree,
                                              lb.index(0));
        scf::IfOp::create(
            b, isFirst,
            [&](OpBuilder &nested, Location) {
              BuildInside inside(b, nested);
              tokens.addScaledRows(dx, row, s.wIn, s.inWidth, terms, fromZero);
              scf::YieldOp::create(b);
            },
            [&](OpBuilder &nested, Location) {
              BuildInside inside(b, nested);
              tokens.addScaledRows(dx, row, s.wIn, s.inWidth, terms);
              scf::YieldOp::create(b);
            });
      };
      // Multiply-adds per token: `walked` levels' logits, and the
      // gradient's two row operations per level.
      auto workOf = [&](int64_t walked, bool differentiated) -> Value {
        Value work = mul(s.inWidth, lb.index(walked));
        if (differentiated)
          work = add(work, mul(add(s.inWidth, s.outWidth), lb.index(levels)));
        return work;
      };
      auto roots = [&](ValueRange walkRows) {
        return SmallVector<Value>(walkRows.size(), lb.index(0));
      };
      if (sortLevel == 0) {
        tokens.forEachTokenGroup(
            s.rows, workOf(levels, true), [&](ValueRange walkRows) {
              walkLevels(walkRows, roots(walkRows), 0, levels);
              differentiate(walkRows);
              tokens.inTurn(walkRows, addInputGrad);
            });
        return;
      }
      tokens.forEachRegroupedTokenGroup(
          s.rows, sortLevel, nodes, order, workOf(sortLevel, false),
          workOf(levels - sortLevel, true),
          [&](ValueRange walkRows) {
            return walkLevels(walkRows, roots(walkRows), 0, sortLevel);
          },
          [&](ValueRange positions, ValueRange walkRows, ValueRange starts) {
            walkLevels(walkRows, starts, sortLevel, levels);
            differentiate(walkRows);
            tokens.inTurn(positions, [&](Value position) {
              addInputGrad(memref::LoadOp::create(b, order, position));
            });
          });
    });
    return dx;
  }

  int64_t slabColumns() const override { return shape.lanes * kSlabVectors; }

  bool storesSlabSumsOnce() const override { return true; }

  DictionaryAttr strategy() const override {
    SmallVector<NamedAttribute> attrs;
    shape.appendAttrs(b, attrs);
    attrs.push_back(b.getNamedAttr("min_parallel_work",
                                   b.getI64IntegerAttr(kMinParallelTreeWork)));
    attrs.push_back(
        b.getNamedAttr("slab_columns", b.getI64IntegerAttr(slabColumns())));
    attrs.push_back(
        b.getNamedAttr("stream_gradients", b.getBoolAttr(streamGradients)));
    return b.getDictionaryAttr(attrs);
  }

  void accumulateSlab(Value grad, Value source, Value scale, Value width,
                      Value slab) override {
    Value first = mul(slab, lb.index(slabColumns()));
    // The gradient is the result itself, in its element type: rows of
    // whole slabs that are whole lines are streamed.
    auto gradType = cast<MemRefType>(grad.getType());
    int64_t gradWidth = gradType.getShape().back();
    bool streamed = streamGradients && !ShapedType::isDynamic(gradWidth) &&
                    gradWidth % slabColumns() == 0 &&
                    (gradWidth * gradType.getElementTypeBitWidth() / 8) %
                            int64_t(kGradAlignment) ==
                        0 &&
                    succeeded(emit.declareStreamingFence());
    SmallVector<Value> columns, masks;
    for (int64_t v = 0; v < kSlabVectors; ++v) {
      columns.push_back(add(first, lb.index(v * shape.lanes)));
      // Lanes past the row (a narrow last slab) read as zero and are not
      // stored; create_mask clamps to [0, lanes].
      masks.push_back(emit.tailMask(width, columns.back()));
    }
    // Every row's columns of the slab, widened to f32, packed: each row is
    // read once per level (by its visit's node), and packed the slab's
    // rows stay in the core's cache across the levels, where read in place
    // each of its cache lines is a piece of a longer row whose neighbours
    // the hardware fetches too.
    SmallVector<Value> packedColumns;
    for (int64_t v = 0; v < kSlabVectors; ++v)
      packedColumns.push_back(lb.index(v * shape.lanes));
    Value packed = emit.alloc(
        MemRefType::get({ShapedType::kDynamic, slabColumns()}, b.getF32Type()),
        s.rows);
    lb.loop(s.rows, [&](Value row) {
      for (int64_t v = 0; v < kSlabVectors; ++v)
        emit.store(emit.load(source, {row, columns[v]}, masks[v]), packed,
                   {row, packedColumns[v]}, Value());
    });
    SmallVector<Value> zeros(kSlabVectors, emit.zeros());
    lb.loop(s.trees, [&](Value tree) {
      lb.loop(s.nodes, [&](Value node) {
        SmallVector<Value> sums = foldVisits(
            tree, node, zeros,
            [&](Value, Value row, Value member, ValueRange partial) {
              // The visits' rows are scattered over the batch: fetching
              // the slab of a row a few visits ahead hides the wait for it
              // behind this one's multiply-adds.
              Value ahead = memberRowAhead(member, kPrefetchVisits);
              for (Value column : packedColumns)
                memref::PrefetchOp::create(b, packed, ValueRange{ahead, column},
                                           /*isWrite=*/false,
                                           /*localityHint=*/3,
                                           /*isDataCache=*/true);
              Value factor =
                  emit.splat(memref::LoadOp::create(b, scale, member));
              SmallVector<Value> next;
              for (int64_t v = 0; v < kSlabVectors; ++v)
                next.push_back(vector::FMAOp::create(
                    b, factor,
                    emit.load(packed, {row, packedColumns[v]}, Value()),
                    partial[v]));
              return next;
            });
        // Whole lines of a gradient that is the result itself go straight
        // to memory: 25 MB for UltraFastBERT-1x11, which nothing here
        // reads again, and which a store would first read.
        emit.streamingStores = streamed;
        for (int64_t v = 0; v < kSlabVectors; ++v)
          emit.store(sums[v], grad, {tree, node, columns[v]},
                     streamed ? Value() : masks[v]);
        emit.streamingStores = false;
      });
    });
    // x86's streaming stores are weakly ordered: the slab's are ordered
    // before the store that tells another thread the slab is done.
    if (streamed)
      emit.fenceStreamingStores();
  }

private:
  CPUVectorShape shape;
  VectorEmitter emit;
  /// The walk's: the forward kernel's strategy for this layer.
  CPUTreeStrategy walkStrategy;
  /// Whether whole-line gradient rows may be stored with streaming stores
  /// (x86 hosts, as the norms' min_streamed_bytes).
  bool streamGradients;
};

struct TreeFFNGradToVector : OpConversionPattern<TreeFFNGradOp> {
  TreeFFNGradToVector(MLIRContext *context, CPUTarget target,
                      int64_t cacheBytes)
      : OpConversionPattern(context), target(target), cacheBytes(cacheBytes) {}

  LogicalResult
  matchAndRewrite(TreeFFNGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    std::optional<int64_t> rowSize = staticExtent(op.getInput(), 1);
    CPUVectorShape shape = selectCPUVectorShape(rowSize, target);
    std::optional<int64_t> outWidth = staticExtent(op.getGradOutput(), 1);
    std::optional<int64_t> nodeBytes;
    if (rowSize && outWidth)
      nodeBytes = (*rowSize + *outWidth) *
                  (op.getInput().getType().getElementTypeBitWidth() / 8);
    CPUTreeStrategy walkStrategy = selectCPUTreeStrategy(
        op.getDepth() + 1, nodeBytes, rowSize, target, cacheBytes);
    bool streamGradients = llvm::Triple(llvm::sys::getProcessTriple()).isX86();
    rewriter.replaceOp(op, VectorTreeGradBuilder(b, op, adaptor, shape,
                                                 walkStrategy, streamGradients)
                               .build());
    return success();
  }

  CPUTarget target;
  int64_t cacheBytes;
};

} // namespace

void fff::populateFFFTreeGradsToVectorPatterns(RewritePatternSet &patterns,
                                               const CPUTarget &target,
                                               int64_t cacheBytes) {
  patterns.add<TreeFFNGradToVector>(patterns.getContext(), target, cacheBytes);
}

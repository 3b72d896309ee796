//===- TreesToVector.cpp - fff tree layers to CPU vector loops --*- C++ -*-===//
//
// The CPU pipeline's lowering of fff's tree layers: loops over tokens (split
// across threads when large, RowLoops.h) whose bodies are vector code, built
// from the pieces in TokenEmitter.h.
// convert-fff-to-loops keeps the scalar form as the reference; this one is
// written for speed, with the same arithmetic per token:
//
// - dot products keep `accumulators` vector partial sums, which meet only
//   at the end of the row, and tails are masked;
// - a token's output row is written once per tree: the walk records each
//   level's node and logit, whose activations are then taken a vector at a
//   time, off the walk's chain of dependent sums; then `accumulators`
//   vectors of the row, starting from the bias, stay in registers while the
//   scaled weight rows of every level are added into them, in level order;
// - the tokens are regrouped once per tree (CPUTreeStrategy.h says why and
//   where), by a stable counting sort of the node or leaf each reached;
// - a token's own sums run in the same order whichever tokens run before
//   it or beside it, so neither the grouping nor the threads change a bit.
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/Passes.h"

#include "LaneWise.h"
#include "TokenEmitter.h"
#include "fff/Conversion/FFFToVector/CPUTreeStrategy.h"
#include "fff/Conversion/RowLoops.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "fff/Dialect/FFF/Utils/Activation.h"
#include "fff/Dialect/FFF/Utils/Routing.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

namespace fff {
#define GEN_PASS_DEF_CONVERTFFFTREESTOVECTOR
#include "fff/Conversion/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// The bytes of one element of `value`'s shaped type.
int64_t elementBytes(Value value) {
  return cast<ShapedType>(value.getType()).getElementTypeBitWidth() / 8;
}

/// Where a tree layer's f32 sums go: into its result, rounded to its
/// element type, or through the elementwise epilogue that alone reads it
/// (see elementwiseEpilogue) into the epilogue's result.
class LayerOutput {
public:
  LayerOutput(TokenEmitter &emit, ImplicitLocOpBuilder &b, Operation *layer,
              Value rows, Value out)
      : emit(emit), b(b), layer(layer),
        epilogue(elementwiseEpilogue(layer->getResult(0), layer)),
        type(cast<RankedTensorType>(
            (epilogue ? epilogue->getResult(0) : layer->getResult(0))
                .getType())) {
    std::tie(sums, result) = emit.allocSums(type, rows, out);
    if (epilogue)
      for (Value input : epilogue.getDpsInputs())
        epilogueInputs.push_back(
            input == layer->getResult(0) ? Value() : emit.readBuffer(input));
  }

  /// Writes a token's finished sums at (row, column) into the result.
  void write(Value total, Value row, Value column, Value mask) {
    if (!epilogue)
      return emit.store(total, result, {row, column}, mask);
    Type layerElement =
        cast<RankedTensorType>(layer->getResult(0).getType()).getElementType();
    Value layerValue =
        layerElement.isF32() ? total : emit.narrow(total, layerElement);
    SmallVector<Value> operands;
    for (Value input : epilogueInputs)
      operands.push_back(input ? emit.loadRaw(input, {row, column}, mask)
                               : layerValue);
    Value value =
        evaluateLaneWise(b, *epilogue.getBody(), operands, emit.getLanes())
            .front();
    emit.store(value, result, {row, column}, mask);
  }

  /// `write` as the token emitter takes it.
  auto writer() {
    return [this](Value total, Value row, Value column, Value mask) {
      write(total, row, column, mask);
    };
  }

  /// Whether the result, whose rows are `out` wide, is to be written with
  /// streaming stores: the layer moves at least `minBytes` (its input
  /// `x`, weights `weights` and result together), and the result's rows
  /// start on whole vectors.
  Value isStreamable(Value x, ValueRange weights, Value out, int64_t minBytes) {
    Value moved = emit.index(0);
    for (Value buffer : llvm::concat<Value>(ValueRange{x, result}, weights))
      moved = arith::AddIOp::create(b, moved, bytesOf(buffer));
    Value large = arith::CmpIOp::create(b, arith::CmpIPredicate::uge, moved,
                                        emit.index(minBytes));
    return arith::AndIOp::create(b, large,
                                 emit.startsOnWholeVectors(result, out));
  }

  /// Whether the sums are written into the result in a pass of their own
  /// (finishRow), rather than being the result.
  bool needsFinishing() const { return result != sums || epilogue; }

  /// Writes row `row` of the sums, [0, n), into the result.
  void finishRow(Value row, Value n) {
    emit.forEachVector(n, [&](Value j, Value mask) {
      write(emit.load(sums, {row, j}, mask), row, j, mask);
    });
  }

  /// Replaces the layer, and its epilogue, with the result.
  void replace(ConversionPatternRewriter &rewriter) {
    Value tensor = emit.toTensor(result, type);
    if (!epilogue)
      return rewriter.replaceOp(layer, tensor);
    rewriter.replaceOp(epilogue, tensor);
    rewriter.eraseOp(layer);
  }

  /// f32 [rows, out]; the result itself when it is f32.
  Value sums;
  /// The result's buffer.
  Value result;

private:
  /// The bytes `buffer` holds.
  Value bytesOf(Value buffer) {
    auto type = cast<MemRefType>(buffer.getType());
    Value bytes = emit.index(type.getElementTypeBitWidth() / 8);
    for (int64_t dim = 0; dim < type.getRank(); ++dim)
      bytes = arith::MulIOp::create(b, bytes,
                                    memref::DimOp::create(b, buffer, dim));
    return bytes;
  }

  TokenEmitter &emit;
  ImplicitLocOpBuilder &b;
  Operation *layer;
  linalg::GenericOp epilogue;
  RankedTensorType type;
  /// The epilogue's inputs as buffers; null for the layer's result.
  SmallVector<Value> epilogueInputs;
};

/// The options both tree patterns are built with.
struct TreeOptions {
  CPUTarget target;
  int64_t cacheBytes;
};

template <typename TreeOp>
struct TreeToVectorPattern : OpConversionPattern<TreeOp> {
  TreeToVectorPattern(MLIRContext *context, TreeOptions options)
      : OpConversionPattern<TreeOp>(context), options(options) {}

  TreeOptions options;
};

struct TreeFFNToVector : TreeToVectorPattern<TreeFFNOp> {
  using TreeToVectorPattern::TreeToVectorPattern;

  LogicalResult
  matchAndRewrite(TreeFFNOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    int64_t levels = op.getDepth() + 1;
    std::optional<int64_t> inWidth = staticExtent(adaptor.getWIn(), 2);
    std::optional<int64_t> outWidth = staticExtent(adaptor.getWOut(), 2);
    std::optional<int64_t> nodeBytes;
    if (inWidth && outWidth)
      nodeBytes = *inWidth * elementBytes(adaptor.getWIn()) +
                  *outWidth * elementBytes(adaptor.getWOut());
    CPUTreeStrategy strategy = selectCPUTreeStrategy(
        levels, nodeBytes, inWidth, options.target, options.cacheBytes);
    TokenEmitter emit(b, strategy);

    Value x = emit.readBuffer(adaptor.getInput());
    Value wIn = emit.readBuffer(adaptor.getWIn());
    Value bIn = emit.readBuffer(adaptor.getBIn());
    Value wOut = emit.readBuffer(adaptor.getWOut());
    Value bOut = emit.readBuffer(adaptor.getBOut());
    Value rows = memref::DimOp::create(b, x, 0);
    Value in = memref::DimOp::create(b, x, 1);
    Value trees = memref::DimOp::create(b, wIn, 0);
    Value out = memref::DimOp::create(b, wOut, 2);
    Value zero = emit.f32(0.0);

    // The f32 sums over the trees, finished into the result after the
    // last; a single tree writes the result directly.
    LayerOutput output(emit, b, op, rows, out);
    Value sums = output.sums, result = output.result;
    auto finish = output.writer();
    bool singleTree = staticExtent(adaptor.getWIn(), 0) == int64_t(1);
    // Whether a single tree's output pass writes the result with streaming
    // stores (CPUTreeStrategy::minStreamedBytes); null: never.
    Value streamed;
    if (singleTree && strategy.minStreamedBytes > 0 &&
        succeeded(emit.declareStreamingFence()))
      streamed =
          output.isStreamable(x, {wIn, wOut}, out, strategy.minStreamedBytes);
    int64_t sortLevel = strategy.sortLevel;
    Value nodes, order;
    if (sortLevel > 0) {
      nodes = emit.allocIndices(rows);
      order = emit.allocIndices(rows);
    }
    // Each token's path through the current tree: the node and the logit,
    // then the activation, at each level, for the output pass.
    Value pathNodes = emit.alloc(
        MemRefType::get({ShapedType::kDynamic, levels}, b.getIndexType()),
        rows);
    Value pathScales = emit.alloc(
        MemRefType::get({ShapedType::kDynamic, levels}, b.getF32Type()), rows);
    Value lastTree = arith::SubIOp::create(b, trees, emit.index(1));
    // Multiply-adds per token: a dot product of `in` per level walked, an
    // update of `out` per level added.
    auto workOf = [&](int64_t walked, int64_t added) -> Value {
      return arith::AddIOp::create(
          b, arith::MulIOp::create(b, in, emit.index(walked)),
          arith::MulIOp::create(b, out, emit.index(added)));
    };

    emit.loop(emit.index(0), trees, [&](Value tree) {
      Value isFirst = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, tree,
                                            emit.index(0));
      Value isLast =
          arith::CmpIOp::create(b, arith::CmpIPredicate::eq, tree, lastTree);
      // One level of the walks of tokens `walkRows`, at `walkNodes`, their
      // dot products interleaved: each node's logit routes its token; the
      // node and the logit are kept for the output pass. The activation
      // waits for the walk's end, off the chain of dependent loads and sums
      // each level of a walk is.
      auto visit = [&](ValueRange walkRows, Value level, ValueRange walkNodes) {
        SmallVector<SmallVector<Value>> weightRows;
        for (Value node : walkNodes)
          weightRows.push_back({tree, node});
        SmallVector<Value> logits =
            emit.dotEach(x, walkRows, wIn, weightRows, in);
        SmallVector<Value> children;
        for (auto [row, node, logit] : llvm::zip(walkRows, walkNodes, logits)) {
          if (bIn)
            logit = arith::AddFOp::create(b, logit,
                                          emit.loadScalar(bIn, {tree, node}));
          memref::StoreOp::create(b, node, pathNodes, ValueRange{row, level});
          memref::StoreOp::create(b, logit, pathScales, ValueRange{row, level});
          Value goRight = arith::CmpFOp::create(
              b, goRightPredicate(op.getZeroGoesRight()), logit, zero);
          children.push_back(emit.child(node, goRight));
        }
        return children;
      };
      // Levels [from, to) of the walks of tokens `walkRows` from `starts`,
      // recorded with their activations. Returns the nodes reached.
      auto walkPaths = [&](ValueRange walkRows, ValueRange starts, int64_t from,
                           int64_t to) {
        SmallVector<Value> reached = emit.walkEach(
            starts, from, to, [&](Value level, ValueRange walkNodes) {
              return visit(walkRows, level, walkNodes);
            });
        for (Value row : walkRows)
          emit.mapInPlace(pathScales, row, from, to, [&](Value logits) {
            return buildActivation(b, b.getLoc(), op.getActivation(), logits);
          });
        return reached;
      };
      auto roots = [&](ValueRange walkRows) {
        return SmallVector<Value>(walkRows.size(), emit.index(0));
      };
      auto fromBias = [&](Value column, Value mask) {
        return bOut ? emit.load(bOut, {column}, mask) : emit.zeros();
      };
      // The token's rows of w_out, scaled by the activations, in level
      // order, added to b_out (the first tree) or to the earlier trees'
      // sums; written to the result by the last tree. One pass over the
      // output row, which is written once per tree and read only by the
      // next.
      // Token `row`'s activation at `level`, and its row of w_out there.
      auto pathTerm = [&](Value row, Value level) {
        Value node =
            memref::LoadOp::create(b, pathNodes, ValueRange{row, level});
        Value scale =
            memref::LoadOp::create(b, pathScales, ValueRange{row, level});
        return std::make_pair(scale, SmallVector<Value>{tree, node});
      };
      auto addPath = [&](Value row) {
        TokenEmitter::ScaledRows levelRows{
            emit.index(0), emit.index(levels), /*sharedRows=*/false,
            [&](int64_t, Value level) { return pathTerm(row, level); }};
        if (singleTree) {
          emit.addScaledRows(result, row, wOut, out, levelRows, fromBias,
                             finish);
          return;
        }
        scf::IfOp::create(
            b, isFirst,
            [&](OpBuilder &nested, Location) {
              BuildInside inside(b, nested);
              emit.addScaledRows(sums, row, wOut, out, levelRows, fromBias);
              scf::YieldOp::create(b);
            },
            [&](OpBuilder &nested, Location) {
              BuildInside inside(b, nested);
              emit.addScaledRows(sums, row, wOut, out, levelRows);
              scf::YieldOp::create(b);
            });
        if (!output.needsFinishing())
          return;
        scf::IfOp::create(b, isLast, [&](OpBuilder &nested, Location) {
          BuildInside inside(b, nested);
          output.finishRow(row, out);
          scf::YieldOp::create(b);
        });
      };

      // `writeRows()`, the output pass of a token group, with streaming
      // stores where `streamed` holds; they are fenced before the group
      // ends, so that all are ordered before the token loop does.
      auto streamingWhere = [&](function_ref<void()> writeRows) {
        if (!streamed)
          return writeRows();
        emit.withStreamingStoresWhere(streamed, [&] {
          writeRows();
          if (emit.streamingStores)
            emit.fenceStreamingStores();
        });
      };

      // addPath for the tokens at consecutive `positions`, one at a time.
      auto addPathsInTurn = [&](ValueRange positions,
                                function_ref<Value(Value)> rowAt) {
        emit.inTurn(positions,
                    [&](Value position) { addPath(rowAt(position)); });
      };
      auto sortedRow = [&](Value position) -> Value {
        return memref::LoadOp::create(b, order, position);
      };
      // addPath for tokens walking together from the nodes `starts` of the
      // sort level: where all start at one node, their paths share the
      // levels above it, and each of those levels' weight vectors is
      // loaded once for all of them.
      auto addPaths = [&](ValueRange positions, ValueRange walkRows,
                          ValueRange starts) {
        if (!singleTree || walkRows.size() == 1)
          return addPathsInTurn(positions, sortedRow);
        scf::IfOp::create(
            b, emit.allEqual(starts),
            [&](OpBuilder &nested, Location) {
              BuildInside inside(b, nested);
              // The levels down to the sort level's are shared.
              auto term = [&](int64_t k, Value level) {
                return pathTerm(walkRows[k], level);
              };
              Value shared = emit.index(sortLevel + 1);
              emit.addScaledRows(
                  result, walkRows, wOut, out,
                  {{emit.index(0), shared, /*sharedRows=*/true, term},
                   {shared, emit.index(levels), /*sharedRows=*/false, term}},
                  fromBias, finish);
              scf::YieldOp::create(b);
            },
            [&](OpBuilder &nested, Location) {
              BuildInside inside(b, nested);
              addPathsInTurn(positions, sortedRow);
              scf::YieldOp::create(b);
            });
      };

      if (sortLevel == 0) {
        emit.forEachTokenGroup(
            rows, workOf(levels, levels), [&](ValueRange walkRows) {
              walkPaths(walkRows, roots(walkRows), 0, levels);
              streamingWhere([&] {
                addPathsInTurn(walkRows,
                               [](Value position) { return position; });
              });
            });
        return;
      }
      // The top levels in token order, then the rest, and the output row,
      // grouped by the node each token reached.
      emit.forEachRegroupedTokenGroup(
          rows, sortLevel, nodes, order, workOf(sortLevel, 0),
          workOf(levels - sortLevel, levels),
          [&](ValueRange walkRows) {
            return walkPaths(walkRows, roots(walkRows), 0, sortLevel);
          },
          [&](ValueRange positions, ValueRange walkRows, ValueRange starts) {
            walkPaths(walkRows, starts, sortLevel, levels);
            streamingWhere([&] { addPaths(positions, walkRows, starts); });
          });
    });
    output.replace(rewriter);
    return success();
  }
};

struct LeafTreeFFNToVector : TreeToVectorPattern<LeafTreeFFNOp> {
  using TreeToVectorPattern::TreeToVectorPattern;

  LogicalResult
  matchAndRewrite(LeafTreeFFNOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    int64_t depth = op.getDepth();
    CPUTreeStrategy strategy =
        selectCPULeafStrategy(depth, staticExtent(adaptor.getInput(), 1),
                              options.target, options.cacheBytes);
    TokenEmitter emit(b, strategy);
    int64_t lanes = strategy.lanes;

    Value x = emit.readBuffer(adaptor.getInput());
    Value nodeW = emit.readBuffer(adaptor.getNodeW());
    Value nodeB = emit.readBuffer(adaptor.getNodeB());
    Value w1 = emit.readBuffer(adaptor.getW1());
    Value b1 = emit.readBuffer(adaptor.getB1());
    Value w2 = emit.readBuffer(adaptor.getW2());
    Value b2 = emit.readBuffer(adaptor.getB2());
    Value rows = memref::DimOp::create(b, x, 0);
    Value in = memref::DimOp::create(b, x, 1);
    Value hiddenWidth = memref::DimOp::create(b, w1, 2);
    Value out = memref::DimOp::create(b, w2, 2);
    Value zero = emit.f32(0.0);

    LayerOutput output(emit, b, op, rows, out);
    Value sums = output.sums;

    // Route every token to its leaf, in token order.
    Value leaves = emit.allocIndices(rows);
    Value firstLeaf = emit.index(op.getNumRoutingNodes());
    emit.forEachTokenGroup(
        rows, arith::MulIOp::create(b, in, emit.index(depth)),
        [&](ValueRange walkRows) {
          SmallVector<Value> roots(walkRows.size(), emit.index(0));
          SmallVector<Value> reached =
              emit.walkEach(roots, 0, depth, [&](Value, ValueRange walkNodes) {
                SmallVector<SmallVector<Value>> weightRows;
                for (Value node : walkNodes)
                  weightRows.push_back({node});
                SmallVector<Value> children;
                for (auto [node, dot] :
                     llvm::zip(walkNodes, emit.dotEach(x, walkRows, nodeW,
                                                       weightRows, in))) {
                  Value score = arith::AddFOp::create(
                      b, dot, emit.loadScalar(nodeB, node));
                  // Zero goes right here (s >= 0), as in the original FFF
                  // code.
                  Value goRight = arith::CmpFOp::create(
                      b, goRightPredicate(/*zeroGoesRight=*/true), score, zero);
                  children.push_back(emit.child(node, goRight));
                }
                return children;
              });
          for (auto [row, leaf] : llvm::zip(walkRows, reached))
            memref::StoreOp::create(
                b, arith::SubIOp::create(b, leaf, firstLeaf), leaves, row);
        });

    // Tokens sharing a leaf (or, in deep trees, an ancestor at the sort
    // level) then run one after the other.
    int64_t sortLevel = strategy.sortLevel;
    Value order;
    if (sortLevel > 0) {
      order = emit.allocIndices(rows);
      Value shift = emit.index(depth - sortLevel);
      emit.sortTokens(order, rows, int64_t(1) << sortLevel,
                      [&](Value token) -> Value {
                        return arith::ShRUIOp::create(
                            b, memref::LoadOp::create(b, leaves, token), shift);
                      });
    }

    // The MLP of leaf `leaf` for tokens `tokenRows`, which all reached it:
    // each weight vector is loaded once for all of them, and each token's
    // sums are built in the order they are built for it alone.
    auto leafMLP = [&](ValueRange tokenRows, Value leaf) {
      int64_t tokens = tokenRows.size();
      for (Value row : tokenRows)
        emit.copy(sums, row, b2, leaf, out);
      // hidden units [h, h + lanes * count): b1 + x @ w1, with `count`
      // independent vectors (masked under `mask` when the last is
      // ragged); then each unit's activation scales its row of w2 into the
      // token's sums. A block narrower than the strategy's accumulators
      // splits the sum over the row into `chains` partial sums instead, so
      // that FMAs still do not wait on one another.
      auto hiddenBlock = [&](Value h, int64_t count, Value mask) {
        int64_t chains = std::max<int64_t>(1, strategy.accumulators / count);
        SmallVector<Value> columns;
        for (int64_t k = 0; k < count; ++k)
          columns.push_back(arith::AddIOp::create(b, h, emit.index(k * lanes)));
        // Token t's partial sum c of column k is carried at
        // (t * count + k) * chains + c.
        auto slot = [&](int64_t t, int64_t k, int64_t c) {
          return (t * count + k) * chains + c;
        };
        SmallVector<Value> init;
        for (int64_t t = 0; t < tokens; ++t)
          for (Value column : columns) {
            init.push_back(emit.load(b1, {leaf, column}, mask));
            init.append(chains - 1, emit.zeros());
          }
        // partial[t, k, c] += x[row t, i + c] * w1[leaf, i + c, column k]
        auto accumulate = [&](Value i, ValueRange partial, int64_t used) {
          SmallVector<Value> next(partial);
          for (int64_t c = 0; c < used; ++c) {
            Value ic = arith::AddIOp::create(b, i, emit.index(c));
            SmallVector<Value> weights;
            for (Value column : columns)
              weights.push_back(emit.load(w1, {leaf, ic, column}, mask));
            for (auto [t, row] : llvm::enumerate(tokenRows)) {
              Value xi = emit.splat(emit.loadScalar(x, {row, ic}));
              for (int64_t k = 0; k < count; ++k) {
                Value &acc = next[slot(t, k, c)];
                acc = math::FmaOp::create(b, xi, weights[k], acc);
              }
            }
          }
          return next;
        };
        Value chainsEnd = emit.roundDown(in, chains);
        auto unrolled = scf::ForOp::create(
            b, emit.index(0), chainsEnd, emit.index(chains), init,
            [&](OpBuilder &nested, Location, Value i, ValueRange partial) {
              BuildInside inside(b, nested);
              scf::YieldOp::create(b, accumulate(i, partial, chains));
            });
        auto rest = scf::ForOp::create(
            b, chainsEnd, in, emit.index(1), unrolled.getResults(),
            [&](OpBuilder &nested, Location, Value i, ValueRange partial) {
              BuildInside inside(b, nested);
              scf::YieldOp::create(b, accumulate(i, partial, 1));
            });
        // activated[t][k]: token t's activations of the units of column k.
        SmallVector<SmallVector<Value>> activated(tokens);
        for (int64_t t = 0; t < tokens; ++t)
          for (int64_t k = 0; k < count; ++k) {
            Value total = rest.getResult(slot(t, k, 0));
            for (int64_t c = 1; c < chains; ++c)
              total = arith::AddFOp::create(b, total,
                                            rest.getResult(slot(t, k, c)));
            activated[t].push_back(
                buildActivation(b, b.getLoc(), op.getActivation(), total));
          }
        // Each unit's activation scales its row of w2, which the tokens
        // share, into each token's sums.
        SmallVector<TokenEmitter::ScaledRows> unitRows;
        for (auto [k, first] : llvm::enumerate(columns)) {
          Value units = arith::MinUIOp::create(
              b, emit.index(lanes),
              arith::SubIOp::create(b, hiddenWidth, first));
          unitRows.push_back(
              {emit.index(0), units, /*sharedRows=*/true,
               [&, k = k, first = first](int64_t t, Value u) {
                 Value scale = vector::ExtractOp::create(b, activated[t][k],
                                                         OpFoldResult(u));
                 Value unit = arith::AddIOp::create(b, first, u);
                 return std::make_pair(scale, SmallVector<Value>{leaf, unit});
               }});
        }
        emit.addScaledRows(sums, tokenRows, w2, out, unitRows);
      };
      emit.forEachStep(
          hiddenWidth, strategy.stepElements(),
          [&](Value h) { hiddenBlock(h, strategy.accumulators, Value()); },
          [&](Value h, Value mask) { hiddenBlock(h, 1, mask); });
      if (output.needsFinishing())
        for (Value row : tokenRows)
          output.finishRow(row, out);
    };

    // Tokens walking together that reached one leaf compute its MLP
    // together; others, each alone.
    Value leafWork = arith::MulIOp::create(b, hiddenWidth,
                                           arith::AddIOp::create(b, in, out));
    auto rowAt = [&](Value position) -> Value {
      return order ? memref::LoadOp::create(b, order, position).getResult()
                   : position;
    };
    emit.forEachTokenGroup(rows, leafWork, [&](ValueRange positions) {
      SmallVector<Value> tokenRows, tokenLeaves;
      for (Value position : positions) {
        tokenRows.push_back(rowAt(position));
        tokenLeaves.push_back(
            memref::LoadOp::create(b, leaves, tokenRows.back()));
      }
      if (positions.size() == 1)
        return leafMLP(tokenRows, tokenLeaves.front());
      scf::IfOp::create(
          b, emit.allEqual(tokenLeaves),
          [&](OpBuilder &nested, Location) {
            BuildInside inside(b, nested);
            leafMLP(tokenRows, tokenLeaves.front());
            scf::YieldOp::create(b);
          },
          [&](OpBuilder &nested, Location) {
            BuildInside inside(b, nested);
            emit.inTurn(positions, [&](Value position) {
              Value row = rowAt(position);
              leafMLP(row, memref::LoadOp::create(b, leaves, row));
            });
            scf::YieldOp::create(b);
          });
    });
    output.replace(rewriter);
    return success();
  }
};

struct ConvertFFFTreesToVectorPass
    : fff::impl::ConvertFFFTreesToVectorBase<ConvertFFFTreesToVectorPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(checkVectorBits(getOperation(), vectorBits)))
      return signalPassFailure();
    if (cacheBytes < 0) {
      getOperation()->emitError()
          << "cache-bytes must be 0 (this host's) or positive, not "
          << int64_t(cacheBytes);
      return signalPassFailure();
    }
    ConversionTarget target(getContext());
    target.addIllegalOp<TreeFFNOp, LeafTreeFFNOp, TreeFFNGradOp,
                        LeafTreeFFNGradOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    populateFFFTreesToVectorPatterns(
        patterns, CPUTarget{vectorBits, integerBf16}, cacheBytes);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void fff::populateFFFTreesToVectorPatterns(RewritePatternSet &patterns,
                                           const CPUTarget &target,
                                           int64_t cacheBytes) {
  patterns.add<TreeFFNToVector, LeafTreeFFNToVector>(
      patterns.getContext(), TreeOptions{target, cacheBytes});
  populateFFFTreeGradsToVectorPatterns(patterns, target, cacheBytes);
  populateFFFLeafTreeGradsToVectorPatterns(patterns, target, cacheBytes);
}

//===- TreeKernel.cpp - the per-token code of fff's tree kernels ---------===//

#include "TreeKernel.h"

#include "LaneEmitter.h"
#include "fff/Dialect/FFF/Utils/Activation.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace fff;

namespace {

/// The shared-memory buffers of the staged rows: [trees * S, Din] and
/// [trees * S, Dout] of the element type.
std::pair<MemRefType, MemRefType> stagedRowTypes(const TreeStrategy &s,
                                                 const TreeProblem &p) {
  int64_t rows = p.trees * s.stagedNodesPerTree();
  return {workgroupBufferType({rows, *p.staticInWidth}, p.elementType),
          workgroupBufferType({rows, *p.staticOutWidth}, p.elementType)};
}

class TreeKernelEmitter : LaneEmitter {
public:
  TreeKernelEmitter(ImplicitLocOpBuilder &b, const TreeStrategy &strategy,
                    const TreeProblem &problem)
      : LaneEmitter(b, kWarpSize), s(strategy), p(problem) {}

  /// The kernel body. `shared` holds the block's records, [tokens per
  /// block, entries] coefficients (f32) and rows (i32), then its staged
  /// input and output rows, if any.
  void emitGPU(Value threadId, Value blockId, Value blocks,
               ArrayRef<BlockArgument> shared) {
    Value warpSize = index(kWarpSize);
    useGPULanes(arith::RemUIOp::create(b, threadId, warpSize));
    Value warp = arith::DivUIOp::create(b, threadId, warpSize);
    records = {shared[0], shared[1]};
    recordPrefix = {warp};
    slot = warp;
    prepare();
    if (s.stagedLevels) {
      stagedInput = shared[2];
      stagedOutput = shared[3];
      stageRows(threadId);
      gpu::BarrierOp::create(b);
    }
    Value first = arith::AddIOp::create(
        b, arith::MulIOp::create(b, blockId, index(s.tokensPerBlock)), warp);
    // Whole warps skip tokens past the end, so no shuffle loses its lanes.
    if (s.residentBlocks) {
      Value stride = arith::MulIOp::create(b, blocks, index(s.tokensPerBlock));
      auto tokens = kernelLoop(first, p.rows, stride);
      inside(tokens.getRegion(), [&] {
        token = tokens.getInductionVar();
        emitToken();
      });
      return;
    }
    token = first;
    Value inRange =
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, token, p.rows);
    inside(scf::IfOp::create(b, inRange).getThenRegion(), [&] { emitToken(); });
  }

  /// The CPU twin: every token in turn, after staging rows as one block
  /// would. Returns the loop over tokens.
  Operation *emitCPUTwin() {
    useTwinLanes();
    slot = index(0);
    records = {memref::AllocaOp::create(
                   b, MemRefType::get({s.entriesPerToken}, b.getF32Type())),
               memref::AllocaOp::create(
                   b, MemRefType::get({s.entriesPerToken}, b.getI32Type()))};
    prepare();
    if (s.stagedLevels) {
      // Aligned like shared memory, for the kernel's 16-byte accesses.
      auto hostBuffer = [&](MemRefType type) {
        return memref::AllocaOp::create(
            b, MemRefType::get(type.getShape(), type.getElementType()),
            b.getI64IntegerAttr(16));
      };
      auto [inType, outType] = stagedRowTypes(s, p);
      stagedInput = hostBuffer(inType);
      stagedOutput = hostBuffer(outType);
      auto threads = kernelLoop(index(0), index(s.threadsPerBlock()), index(1));
      inside(threads.getRegion(),
             [&] { stageRows(threads.getInductionVar()); });
    }
    auto tokens = kernelLoop(index(0), p.rows, index(1));
    inside(tokens.getRegion(), [&] {
      token = tokens.getInductionVar();
      emitToken();
    });
    return tokens;
  }

private:
  /// A loop of the kernel. On the GPU neither LLVM nor ptxas may unroll it:
  /// the strategy already unrolled what it wants in flight at once, and
  /// ptxas unrolling the rest (the recorded rows, the steps over a wide
  /// row) runs out of registers and spills.
  scf::ForOp kernelLoop(Value lower, Value upper, Value step,
                        ValueRange inits = {}) {
    auto forOp = scf::ForOp::create(b, lower, upper, step, inits);
    if (!onGPU())
      return forOp;
    // SCF-to-CF moves the annotation onto the loop's back edge, and LLVM's
    // NVPTX backend turns llvm.loop.unroll.disable into .pragma "nounroll".
    MLIRContext *context = b.getContext();
    auto noUnroll = LLVM::LoopUnrollAttr::get(
        context, /*disable=*/b.getBoolAttr(true), /*count=*/{},
        /*runtimeDisable=*/{}, /*full=*/{}, /*followupUnrolled=*/{},
        /*followupRemainder=*/{}, /*followupAll=*/{});
    forOp->setAttr("loop_annotation",
                   LLVM::LoopAnnotationAttr::get(
                       context, /*disableNonforced=*/{}, /*vectorize=*/{},
                       /*interleave=*/{}, noUnroll, /*unrollAndJam=*/{},
                       /*licm=*/{}, /*distribute=*/{}, /*pipeline=*/{},
                       /*peeled=*/{}, /*unswitch=*/{}, /*mustProgress=*/{},
                       /*isVectorized=*/{}, /*startLoc=*/{}, /*endLoc=*/{},
                       /*parallelAccesses=*/{}));
    return forOp;
  }

  void prepare() {
    inVectors = arith::DivUIOp::create(b, p.inWidth, index(s.in.vectorWidth));
    outVectors =
        arith::DivUIOp::create(b, p.outWidth, index(s.out.vectorWidth));
    if (p.isGradientWalk())
      gradVectors = arith::DivUIOp::create(b, p.gradient.gradWidth,
                                           index(s.gradOutput->vectorWidth));
  }

  /// This thread's share of copying the staged rows (the top levels of
  /// each tree, input and output) into shared memory: vectors thread,
  /// thread + block size, ..., so that each warp copies contiguous spans.
  void stageRows(Value thread) {
    int64_t stagedRows = p.trees * s.stagedNodesPerTree();
    auto copy = [&](Value from, Value to, int64_t rowWidth, int64_t width) {
      int64_t vectorsPerRow = rowWidth / width;
      auto loop = kernelLoop(thread, index(stagedRows * vectorsPerRow),
                             index(s.threadsPerBlock()));
      inside(loop.getRegion(), [&] {
        Value v = loop.getInductionVar();
        Value stagedRow = arith::DivUIOp::create(b, v, index(vectorsPerRow));
        Value col =
            column(arith::RemUIOp::create(b, v, index(vectorsPerRow)), width);
        Value tree =
            arith::DivUIOp::create(b, stagedRow, index(s.stagedNodesPerTree()));
        Value node =
            arith::RemUIOp::create(b, stagedRow, index(s.stagedNodesPerTree()));
        Value row = arith::AddIOp::create(
            b, arith::MulIOp::create(b, tree, index(p.nodesPerTree)), node);
        auto type = VectorType::get({width}, p.elementType);
        llvm::MaybeAlign alignment = vectorAlignment(p.elementType, width);
        Value vector =
            vector::LoadOp::create(b, type, from, ValueRange{row, col},
                                   /*nontemporal=*/false, alignment);
        vector::StoreOp::create(b, vector, to, ValueRange{stagedRow, col},
                                /*nontemporal=*/false, alignment);
      });
    };
    copy(p.routeWeights, stagedInput, *p.staticInWidth, s.in.vectorWidth);
    copy(p.outWeights, stagedOutput, *p.staticOutWidth, s.out.vectorWidth);
  }

  //===--- Loads --------------------------------------------------------===//

  /// `width` elements of `buffer` at [row, column] (or [column] when `row` is
  /// null), widened to f32. Rows are whole multiples of the vector width, so
  /// a vector is aligned to its size, up to 16 bytes.
  Value loadVector(Value buffer, Value row, Value column, int64_t width) {
    Type elementType = cast<MemRefType>(buffer.getType()).getElementType();
    SmallVector<Value> indices;
    if (row)
      indices.push_back(row);
    indices.push_back(column);
    return widen(vector::LoadOp::create(
        b, VectorType::get({width}, elementType), buffer, indices,
        /*nontemporal=*/false, vectorAlignment(elementType, width)));
  }
  static llvm::MaybeAlign vectorAlignment(Type elementType, int64_t width) {
    uint64_t bytes = width * elementType.getIntOrFloatBitWidth() / 8;
    return llvm::MaybeAlign(
        std::min<uint64_t>(16, uint64_t(1) << llvm::countr_zero(bytes)));
  }
  Value column(Value chunk, int64_t vectorWidth) {
    return arith::MulIOp::create(b, chunk, index(vectorWidth));
  }
  Value inputVector(Value chunk) {
    return loadVector(p.input, inputRow(), column(chunk, s.in.vectorWidth),
                      s.in.vectorWidth);
  }
  /// The rows of x and y that hold this token's.
  Value inputRow() const { return p.inputInSlots ? slot : token; }
  Value outputRow() const { return p.outputInSlots ? slot : token; }
  Value zeros(int64_t width) {
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(VectorType::get({width}, b.getF32Type()),
                                  b.getF32FloatAttr(0.0)));
  }
  Value fma(Value x, Value y, Value acc) {
    return vector::FMAOp::create(b, x, y, acc);
  }

  //===--- Routing ------------------------------------------------------===//

  /// One of a lane's vectors of a row, with `inRow` (null when statically
  /// true) masking a vector past the row's end; such a vector is clamped to
  /// the row's last one, which is always safe to load.
  struct LaneVector {
    Value chunk, inRow;
  };

  /// Runs `step` over a lane's vectors of a row of `vectors` vectors
  /// (`staticVectors` when known), as `walk` says: straight-line for one
  /// step, else a loop over the steps that threads `inits` through.
  SmallVector<Value> walkRow(
      Value lane, const TreeStrategy::LaneWalk &walk, Value vectors,
      std::optional<int64_t> staticVectors, ValueRange inits,
      function_ref<SmallVector<Value>(ArrayRef<LaneVector>, ValueRange)> step) {
    auto vectorsFrom = [&](Value first, std::optional<int64_t> staticFirst) {
      SmallVector<LaneVector> result;
      for (int64_t i = 0; i < walk.vectorsPerStep; ++i) {
        Value chunk = arith::AddIOp::create(
            b, lane,
            arith::MulIOp::create(b, arith::AddIOp::create(b, first, index(i)),
                                  index(kWarpSize)));
        bool inside = !walk.ragged ||
                      (staticFirst && staticVectors &&
                       (*staticFirst + i + 1) * kWarpSize <= *staticVectors);
        if (inside) {
          result.push_back({chunk, Value()});
          continue;
        }
        Value inRow =
            arith::CmpIOp::create(b, arith::CmpIPredicate::ult, chunk, vectors);
        Value last = arith::SubIOp::create(b, vectors, index(1));
        result.push_back({arith::MinUIOp::create(b, chunk, last), inRow});
      }
      return result;
    };
    if (walk.steps == 1)
      return step(vectorsFrom(index(0), 0), inits);
    Value steps = walk.steps
                      ? index(*walk.steps)
                      : arith::CeilDivUIOp::create(
                            b, vectors, index(kWarpSize * walk.vectorsPerStep));
    auto loop = kernelLoop(index(0), steps, index(1), inits);
    inside(loop.getRegion(), [&] {
      Value first = arith::MulIOp::create(b, loop.getInductionVar(),
                                          index(walk.vectorsPerStep));
      SmallVector<Value> next =
          step(vectorsFrom(first, std::nullopt), loop.getRegionIterArgs());
      // Without iteration values the loop already ends in its yield.
      if (!inits.empty())
        scf::YieldOp::create(b, next);
    });
    return llvm::to_vector_of<Value>(loop.getResults());
  }

  /// A lane's parts of dot(x[token], weights[row]) for each of `rows`, in
  /// one walk over x: each step loads its x vectors once and every row's
  /// vectors beside them, all in flight together.
  SmallVector<Value> dotPartials(Value lane, Value weights,
                                 ArrayRef<Value> rows) {
    int64_t width = s.in.vectorWidth;
    return rowDotPartials(
        lane, s.in, inVectors, staticVectors(p.staticInWidth, width), weights,
        rows, [&](int64_t i, Value chunk) {
          return gpuInput.empty() ? inputVector(chunk) : gpuInput[i];
        });
  }

  /// The same over a row that `walk` covers, whose vector `i` of a step (at
  /// `chunk`) `leftVector` gives.
  SmallVector<Value>
  rowDotPartials(Value lane, const TreeStrategy::LaneWalk &walk, Value vectors,
                 std::optional<int64_t> staticVectors, Value weights,
                 ArrayRef<Value> rows,
                 function_ref<Value(int64_t i, Value chunk)> leftVector) {
    int64_t width = walk.vectorWidth;
    SmallVector<Value> inits(rows.size(), zeros(width));
    SmallVector<Value> accs = walkRow(
        lane, walk, vectors, staticVectors, inits,
        [&](ArrayRef<LaneVector> laneVectors, ValueRange in) {
          SmallVector<Value> accs(in);
          for (auto [i, v] : llvm::enumerate(laneVectors)) {
            Value left = leftVector(i, v.chunk);
            Value col = column(v.chunk, width);
            for (auto [acc, row] : llvm::zip(accs, rows)) {
              Value next = fma(left, loadVector(weights, row, col, width), acc);
              acc = v.inRow ? arith::SelectOp::create(b, v.inRow, next, acc)
                            : next;
            }
          }
          return accs;
        });
    SmallVector<Value> partials;
    for (Value acc : accs)
      partials.push_back(sum(acc));
    return partials;
  }

  static std::optional<int64_t> staticVectors(std::optional<int64_t> width,
                                              int64_t vectorWidth) {
    return width ? std::optional(*width / vectorWidth) : std::nullopt;
  }

  /// 2 * node + 1 + (goRight ? 1 : 0).
  Value child(Value node, Value goRight) {
    Value right = arith::IndexCastOp::create(
        b, b.getIndexType(),
        arith::ExtUIOp::create(b, b.getI64Type(), goRight));
    return arith::AddIOp::create(
        b,
        arith::AddIOp::create(b, arith::MulIOp::create(b, node, index(2)),
                              index(1)),
        right);
  }

  /// Records output row `row` with `coefficient` as entry `entry`. On the
  /// GPU every lane holds the same values and writes them; each lane later
  /// reads back a value it wrote itself, so no warp barrier is needed.
  void record(Value entry, Value row, Value coefficient) {
    SmallVector<Value> indices = recordPrefix;
    indices.push_back(entry);
    memref::StoreOp::create(b, coefficient, records[0], indices);
    memref::StoreOp::create(b,
                            arith::IndexCastOp::create(b, b.getI32Type(), row),
                            records[1], indices);
  }

  /// One tree's walk: where its rows are, and what happens at each node.
  struct TreeWalk {
    Value treeBase;   // the tree's first row of routeWeights
    Value stagedBase; // ... and of the staged rows (null without staging)
    Value firstEntry; // the tree's first record (null: no records)
    arith::CmpFPredicate goRight;
  };

  /// The logits of `nodes` of one tree, in every lane, computed together.
  SmallVector<Value> nodeLogits(const TreeWalk &walk, ArrayRef<Value> nodes,
                                bool staged) {
    SmallVector<Value> rows;
    for (Value node : nodes)
      rows.push_back(arith::AddIOp::create(
          b, staged ? walk.stagedBase : walk.treeBase, node));
    Value weights = staged ? stagedInput : p.routeWeights;
    SmallVector<Value> logits = groupSums(nodes.size(), [&](Value lane) {
      return dotPartials(lane, weights, rows);
    });
    if (p.routeBias)
      for (auto [logit, node] : llvm::zip(logits, nodes))
        logit = add(
            logit,
            widen(memref::LoadOp::create(
                b, p.routeBias,
                ValueRange{arith::AddIOp::create(b, walk.treeBase, node)})));
    return logits;
  }

  /// Records `node` (tree_ffn) at `level` with act(logit), or, in the
  /// gradient walk, with dl, and stores the visit.
  void visit(const TreeWalk &walk, Value level, Value node, Value logit) {
    if (!walk.firstEntry)
      return;
    Value entry = arith::AddIOp::create(b, walk.firstEntry, level);
    Value row = arith::AddIOp::create(b, walk.treeBase, node);
    Value activation = buildActivation(b, b.getLoc(), p.activation, logit);
    if (!p.isGradientWalk()) {
      record(entry, row, activation);
      return;
    }
    const TreeProblem::GradientWalk &g = p.gradient;
    const TreeStrategy::LaneWalk &dyWalk = *s.gradOutput;
    Value dyDot = groupSum([&](Value lane) {
      return rowDotPartials(
          lane, dyWalk, gradVectors,
          staticVectors(g.staticGradWidth, dyWalk.vectorWidth), g.gradWeights,
          {row}, [&](int64_t, Value chunk) {
            return loadVector(g.gradOutput, token,
                              column(chunk, dyWalk.vectorWidth),
                              dyWalk.vectorWidth);
          })[0];
    });
    Value dl =
        mul(dyDot, buildActivationSlope(b, b.getLoc(), p.activation, logit));
    record(entry, row, dl);
    // Every lane holds the visit; one stores it.
    auto store = [&] {
      SmallVector<Value, 2> at{token, entry};
      memref::StoreOp::create(
          b, arith::IndexCastOp::create(b, b.getI32Type(), node), g.visitNodes,
          at);
      memref::StoreOp::create(b, dl, g.visitGrads, at);
      memref::StoreOp::create(b, activation, g.visitActivations, at);
    };
    if (!onGPU())
      return store();
    Value firstLane =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, gpuLane, index(0));
    inside(scf::IfOp::create(b, firstLane).getThenRegion(), store);
  }

  Value goesRight(const TreeWalk &walk, Value logit) {
    return arith::CmpFOp::create(b, walk.goRight, logit, f32(0.0));
  }

  /// Walks levels [first, last) from `node`, `s.levelsPerStep` levels a
  /// step; returns the node below the last level. With two levels a step,
  /// the node's and both children's rows are loaded and summed together,
  /// and the children's logits are picked after the node's decision.
  Value walkLevels(const TreeWalk &walk, int64_t first, int64_t last,
                   Value node, bool staged) {
    int64_t pairs = s.levelsPerStep == 2 ? (last - first) / 2 : 0;
    auto steps = [&](int64_t begin, int64_t count, int64_t levelsPerStep,
                     Value from,
                     function_ref<Value(Value level, Value node)> step) {
      if (count == 0)
        return from;
      auto loop =
          kernelLoop(index(0), index(count), index(1), ValueRange{from});
      inside(loop.getRegion(), [&] {
        Value level = arith::AddIOp::create(
            b, index(begin),
            arith::MulIOp::create(b, loop.getInductionVar(),
                                  index(levelsPerStep)));
        scf::YieldOp::create(b, step(level, loop.getRegionIterArg(0)));
      });
      return Value(loop.getResult(0));
    };
    node = steps(first, pairs, 2, node, [&](Value level, Value node) {
      Value left = child(node, arith::ConstantIntOp::create(b, 0, 1));
      Value right = arith::AddIOp::create(b, left, index(1));
      SmallVector<Value> logits = nodeLogits(walk, {node, left, right}, staged);
      Value right0 = goesRight(walk, logits[0]);
      Value next = arith::SelectOp::create(b, right0, right, left);
      Value nextLogit =
          arith::SelectOp::create(b, right0, logits[2], logits[1]);
      visit(walk, level, node, logits[0]);
      visit(walk, arith::AddIOp::create(b, level, index(1)), next, nextLogit);
      return child(next, goesRight(walk, nextLogit));
    });
    return steps(first + 2 * pairs, last - first - 2 * pairs, 1, node,
                 [&](Value level, Value node) {
                   Value logit = nodeLogits(walk, {node}, staged)[0];
                   visit(walk, level, node, logit);
                   return child(node, goesRight(walk, logit));
                 });
  }

  /// tree_ffn: every tree's walk, each visited neuron recorded with act(l);
  /// the staged top levels read their rows from shared memory. Exactly zero
  /// goes left.
  void routeTrees() {
    auto trees = kernelLoop(index(0), index(p.trees), index(1));
    inside(trees.getRegion(), [&] {
      Value tree = trees.getInductionVar();
      TreeWalk walk;
      walk.treeBase = arith::MulIOp::create(b, tree, index(p.nodesPerTree));
      if (s.stagedLevels)
        walk.stagedBase =
            arith::MulIOp::create(b, tree, index(s.stagedNodesPerTree()));
      walk.firstEntry = arith::MulIOp::create(b, tree, index(p.levels));
      walk.goRight = arith::CmpFPredicate::OGT;
      Value node =
          walkLevels(walk, 0, s.stagedLevels, index(0), /*staged=*/true);
      walkLevels(walk, s.stagedLevels, p.levels, node, /*staged=*/false);
    });
  }

  /// leaf_tree_ffn: the routing walk, then the leaf's hidden layer, each
  /// hidden unit recorded with act(hidden) against its row of w2. Zero goes
  /// right here (s >= 0), as in the original FFF code.
  void routeToLeafAndHidden() {
    TreeWalk walk;
    walk.treeBase = index(0);
    walk.goRight = arith::CmpFPredicate::OGE;
    Value node = walkLevels(walk, 0, p.levels, index(0), /*staged=*/false);
    leaf = arith::SubIOp::create(b, node, index(p.nodesPerTree));
    Value firstRow = arith::MulIOp::create(b, leaf, index(p.hiddenWidth));
    if (p.isGradientWalk())
      return leafGradient(firstRow);

    Value gpuHidden = onGPU() ? hiddenPartials(gpuLane) : Value();
    SmallVector<Value> hidden = groupSums(p.hiddenWidth, [&](Value lane) {
      Value partials = gpuHidden ? gpuHidden : hiddenPartials(lane);
      SmallVector<Value> units;
      for (int64_t unit = 0; unit < p.hiddenWidth; ++unit)
        units.push_back(
            vector::ExtractOp::create(b, partials, ArrayRef<int64_t>{unit}));
      return units;
    });
    for (auto [unit, sum] : llvm::enumerate(hidden)) {
      Value biased =
          add(sum, widen(memref::LoadOp::create(
                       b, p.hiddenBias, ValueRange{leaf, index(unit)})));
      record(index(unit), arith::AddIOp::create(b, firstRow, index(unit)),
             buildActivation(b, b.getLoc(), p.activation, biased));
    }
  }

  /// leaf_tree_ffn_grad's walk once routed (GPU only): the hidden layer's
  /// pre-activations, `hiddenUnitsPerPass` units a pass over x; each unit's
  /// dpre from `gradRowsPerStep` rows of w2 at a time, stored with act(pre)
  /// and the leaf as soon as they are known; then dx, `dxUnitsPerStep`
  /// units of a w1 row at a time.
  void leafGradient(Value firstRow) {
    assert(onGPU() && "the gradient walk has no twin");
    const TreeProblem::GradientWalk &g = p.gradient;
    const TreeStrategy::LaneWalk &dyWalk = *s.gradOutput;
    int64_t width = p.hiddenWidth;
    Value firstLane =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, gpuLane, index(0));
    // Every lane holds the values; the first lane stores them.
    auto storeByFirstLane = [&](function_ref<void()> store) {
      inside(scf::IfOp::create(b, firstLane).getThenRegion(), store);
    };
    storeByFirstLane([&] {
      memref::StoreOp::create(
          b, arith::IndexCastOp::create(b, b.getI32Type(), leaf), g.visitNodes,
          ValueRange{token, index(0)});
    });
    // pre, then dpre, wait in the token's records rather than in registers;
    // every lane writes and later reads back the same values, so no warp
    // barrier is needed. The steps over the units are a loop: unrolled, the
    // steps of 48 units spilled.
    auto recordAt = [&](Value unit) {
      SmallVector<Value> at = recordPrefix;
      at.push_back(unit);
      return at;
    };
    for (int64_t first = 0; first < width; first += s.hiddenUnitsPerPass) {
      int64_t count = std::min(s.hiddenUnitsPerPass, width - first);
      Value partials = hiddenPartials(gpuLane, first, count);
      SmallVector<Value> sums = groupSums(count, [&](Value) {
        SmallVector<Value> units;
        for (int64_t i = 0; i < count; ++i)
          units.push_back(
              vector::ExtractOp::create(b, partials, ArrayRef<int64_t>{i}));
        return units;
      });
      for (auto [i, sum] : llvm::enumerate(sums)) {
        Value unit = index(first + i);
        Value bias = widen(
            memref::LoadOp::create(b, p.hiddenBias, ValueRange{leaf, unit}));
        memref::StoreOp::create(b, add(sum, bias), records[0], recordAt(unit));
      }
    }
    // Units first, first + 1, ... (count of them): their dpre and act(pre).
    auto unitStep = [&](Value first, int64_t count) {
      SmallVector<Value> units, rows;
      for (int64_t i = 0; i < count; ++i) {
        units.push_back(arith::AddIOp::create(b, first, index(i)));
        rows.push_back(arith::AddIOp::create(b, firstRow, units.back()));
      }
      SmallVector<Value> dots = groupSums(count, [&](Value lane) {
        return rowDotPartials(
            lane, dyWalk, gradVectors,
            staticVectors(g.staticGradWidth, dyWalk.vectorWidth), g.gradWeights,
            rows, [&](int64_t, Value chunk) {
              return loadVector(g.gradOutput, token,
                                column(chunk, dyWalk.vectorWidth),
                                dyWalk.vectorWidth);
            });
      });
      SmallVector<Value> dpre, activations;
      for (auto [unit, dot] : llvm::zip(units, dots)) {
        Value z = memref::LoadOp::create(b, records[0], recordAt(unit));
        dpre.push_back(
            mul(dot, buildActivationSlope(b, b.getLoc(), p.activation, z)));
        activations.push_back(buildActivation(b, b.getLoc(), p.activation, z));
        memref::StoreOp::create(b, dpre.back(), records[0], recordAt(unit));
      }
      storeByFirstLane([&] {
        for (auto [unit, grad, activation] :
             llvm::zip(units, dpre, activations)) {
          SmallVector<Value, 2> at{token, unit};
          memref::StoreOp::create(b, grad, g.visitGrads, at);
          memref::StoreOp::create(b, activation, g.visitActivations, at);
        }
      });
    };
    int64_t steps = width / s.gradRowsPerStep;
    auto stepLoop = kernelLoop(index(0), index(steps), index(1));
    inside(stepLoop.getRegion(), [&] {
      unitStep(arith::MulIOp::create(b, stepLoop.getInductionVar(),
                                     index(s.gradRowsPerStep)),
               s.gradRowsPerStep);
    });
    if (int64_t rest = width % s.gradRowsPerStep)
      unitStep(index(width - rest), rest);
    // dx[token, d] = dot(w1[leaf, d, :], dpre): a lane per element, so that
    // a warp reads 32 consecutive rows of w1[leaf] and stores 32 of dx.
    Value firstW1Row = arith::MulIOp::create(b, leaf, p.inWidth);
    auto loop = kernelLoop(gpuLane, p.inWidth, index(kWarpSize), ValueRange{});
    inside(loop.getRegion(), [&] {
      Value d = loop.getInductionVar();
      Value row = arith::AddIOp::create(b, firstW1Row, d);
      // Units [first, first + count) of the sum; `first` is a multiple of
      // `multiple`. The pieces are a loop: unrolled, all of a 64-unit row's
      // loads were in flight at once, and spilled.
      auto piece = [&](Value first, int64_t multiple, int64_t count,
                       Value acc) -> Value {
        Value weights = w1Piece(row, first, multiple, count);
        SmallVector<Value> at = recordPrefix;
        at.push_back(first);
        Value units = vector::LoadOp::create(
            b, VectorType::get({count}, b.getF32Type()), records[0], at,
            /*nontemporal=*/false, rowPieceAlignment(multiple, count, 4));
        return add(acc, sum(arith::MulFOp::create(b, weights, units)));
      };
      int64_t step = s.dxUnitsPerStep;
      auto pieces = kernelLoop(index(0), index(width / step), index(1),
                               ValueRange{f32(0.0)});
      inside(pieces.getRegion(), [&] {
        Value first =
            arith::MulIOp::create(b, pieces.getInductionVar(), index(step));
        scf::YieldOp::create(
            b, piece(first, step, step, pieces.getRegionIterArg(0)));
      });
      Value acc = pieces.getResult(0);
      if (int64_t rest = width % step)
        acc = piece(index(width - rest), width - rest, rest, acc);
      if (!p.elementType.isF32())
        acc = arith::TruncFOp::create(b, p.elementType, acc);
      memref::StoreOp::create(b, acc, p.output, ValueRange{token, d});
    });
  }

  /// `count` units of w1's row `row` from unit `first` (a multiple of
  /// `multiple`), widened.
  Value w1Piece(Value row, Value first, int64_t multiple, int64_t count) {
    return widen(vector::LoadOp::create(
        b, VectorType::get({count}, p.elementType), p.hiddenWeights,
        ValueRange{row, first}, /*nontemporal=*/false,
        rowPieceAlignment(multiple, count,
                          p.elementType.getIntOrFloatBitWidth() / 8)));
  }
  Value w1Piece(Value row, int64_t first, int64_t count) {
    return w1Piece(row, index(first), first, count);
  }

  /// The alignment of `count` units from a unit that is a multiple of
  /// `multiple`, in a row of W units of `bytes` each (of w1[leaf], or of
  /// the records): what the row's size, the offset and the piece's size all
  /// allow.
  llvm::MaybeAlign rowPieceAlignment(int64_t multiple, int64_t count,
                                     int64_t bytes) {
    uint64_t known = uint64_t(p.hiddenWidth * bytes) | uint64_t(count * bytes);
    if (multiple)
      known |= uint64_t(multiple * bytes);
    return llvm::MaybeAlign(
        std::min<uint64_t>(16, uint64_t(1) << llvm::countr_zero(known)));
  }

  /// A lane's part of x[token] @ w1[leaf]: the lane takes input elements
  /// lane, lane + 32, ... and adds x[d] times row d of w1[leaf] (W
  /// contiguous values; a warp reads 32 consecutive rows). The one loop
  /// left for ptxas to unroll: each iteration's loads are independent, and
  /// unrolled they are in flight together.
  Value hiddenPartials(Value lane) {
    return hiddenPartials(lane, 0, p.hiddenWidth);
  }
  /// The same for `count` units from unit `first`. The gradient walk, which
  /// holds more state, keeps ptxas from unrolling the loop.
  Value hiddenPartials(Value lane, int64_t first, int64_t count) {
    Value firstRow = arith::MulIOp::create(b, leaf, p.inWidth);
    auto loop =
        p.isGradientWalk()
            ? kernelLoop(lane, p.inWidth, index(kWarpSize), zeros(count))
            : scf::ForOp::create(b, lane, p.inWidth, index(kWarpSize),
                                 ValueRange{zeros(count)});
    inside(loop.getRegion(), [&] {
      Value d = loop.getInductionVar();
      Value x =
          widen(memref::LoadOp::create(b, p.input, ValueRange{inputRow(), d}));
      Value row = w1Piece(arith::AddIOp::create(b, firstRow, d), first, count);
      Value xs = vector::BroadcastOp::create(
          b, VectorType::get({count}, b.getF32Type()), x);
      scf::YieldOp::create(b, fma(xs, row, loop.getRegionIterArg(0)));
    });
    return loop.getResult(0);
  }

  //===--- Output -------------------------------------------------------===//

  /// Recorded entry `entry`: its coefficient and output row.
  std::pair<Value, Value> loadRecord(Value entry) {
    SmallVector<Value> indices = recordPrefix;
    indices.push_back(entry);
    Value coefficient = memref::LoadOp::create(b, records[0], indices);
    Value row = arith::IndexCastOp::create(
        b, b.getIndexType(), memref::LoadOp::create(b, records[1], indices));
    return {coefficient, row};
  }

  /// Output row `row` (recorded as entry `entry`, static when unrolled) at
  /// `columns`, widened: from the staged rows when its level is staged,
  /// which a static entry tells at compile time.
  SmallVector<Value> outputRow(Value entry, std::optional<int64_t> staticEntry,
                               Value row, ArrayRef<Value> columns) {
    int64_t width = s.out.vectorWidth;
    auto load = [&](Value buffer, Value at) {
      SmallVector<Value> vectors;
      for (Value col : columns)
        vectors.push_back(loadVector(buffer, at, col, width));
      return vectors;
    };
    if (!s.stagedLevels)
      return load(p.outWeights, row);
    // Tree k's staged rows start at k * S instead of k * N.
    auto stagedRow = [&](Value tree) {
      return arith::SubIOp::create(
          b, row,
          arith::MulIOp::create(
              b, tree, index(p.nodesPerTree - s.stagedNodesPerTree())));
    };
    if (staticEntry) {
      if (*staticEntry % p.levels >= s.stagedLevels)
        return load(p.outWeights, row);
      return load(stagedOutput, stagedRow(index(*staticEntry / p.levels)));
    }
    Value level = arith::RemUIOp::create(b, entry, index(p.levels));
    Value staged = arith::CmpIOp::create(b, arith::CmpIPredicate::ult, level,
                                         index(s.stagedLevels));
    SmallVector<Type> types(columns.size(),
                            VectorType::get({width}, b.getF32Type()));
    auto source = scf::IfOp::create(b, types, staged, /*addThenBlock=*/true,
                                    /*addElseBlock=*/true);
    inside(source.getThenRegion(), [&] {
      Value tree = arith::DivUIOp::create(b, entry, index(p.levels));
      scf::YieldOp::create(b, load(stagedOutput, stagedRow(tree)));
    });
    inside(source.getElseRegion(),
           [&] { scf::YieldOp::create(b, load(p.outWeights, row)); });
    return llvm::to_vector_of<Value>(source.getResults());
  }

  /// y[token] at `vectors`: the bias plus every recorded row times its
  /// coefficient, summed in f32 registers, each vector stored once. All the
  /// vectors' loads of an entry are independent, and so are the entries'
  /// when unrolled, which is what keeps a lone token's output from waiting
  /// on one load at a time.
  void storeOutputVectors(ArrayRef<LaneVector> vectors) {
    int64_t width = s.out.vectorWidth;
    auto f32Vector = VectorType::get({width}, b.getF32Type());
    SmallVector<Value> columns, accs;
    for (LaneVector v : vectors) {
      columns.push_back(column(v.chunk, width));
      accs.push_back(p.outBias
                         ? loadVector(p.outBias, leaf, columns.back(), width)
                         : zeros(width));
    }
    auto accumulate = [&](Value entry, std::optional<int64_t> staticEntry,
                          ValueRange in) {
      auto [coefficient, row] = loadRecord(entry);
      Value coefficients =
          vector::BroadcastOp::create(b, f32Vector, coefficient);
      SmallVector<Value> out;
      for (auto [weights, acc] :
           llvm::zip(outputRow(entry, staticEntry, row, columns), in))
        out.push_back(fma(coefficients, weights, acc));
      return out;
    };
    if (s.unrollEntries) {
      for (int64_t e = 0; e < s.entriesPerToken; ++e)
        accs = accumulate(index(e), e, accs);
    } else {
      auto entries =
          kernelLoop(index(0), index(s.entriesPerToken), index(1), accs);
      inside(entries.getRegion(), [&] {
        scf::YieldOp::create(b,
                             accumulate(entries.getInductionVar(), std::nullopt,
                                        entries.getRegionIterArgs()));
      });
      accs = llvm::to_vector_of<Value>(entries.getResults());
    }
    for (auto [v, col, acc] : llvm::zip(vectors, columns, accs)) {
      Value y = acc;
      if (!p.elementType.isF32())
        y = arith::TruncFOp::create(b, VectorType::get({width}, p.elementType),
                                    y);
      auto store = [&] {
        vector::StoreOp::create(b, y, p.output, ValueRange{outputRow(), col},
                                /*nontemporal=*/false,
                                vectorAlignment(p.elementType, width));
      };
      if (v.inRow)
        inside(scf::IfOp::create(b, v.inRow).getThenRegion(), store);
      else
        store();
    }
  }

  void emitOutput() {
    forEachLane([&](Value lane) {
      walkRow(lane, s.out, outVectors,
              staticVectors(p.staticOutWidth, s.out.vectorWidth), {},
              [&](ArrayRef<LaneVector> vectors, ValueRange) {
                storeOutputVectors(vectors);
                return SmallVector<Value>{};
              });
    });
  }

  //===--- The token ----------------------------------------------------===//

  void emitToken() {
    if (p.hooks.before)
      p.hooks.before(b, token, slot, gpuLane);
    gpuInput.clear();
    if (onGPU() && s.inputInRegisters)
      walkRow(gpuLane, s.in, inVectors,
              staticVectors(p.staticInWidth, s.in.vectorWidth), {},
              [&](ArrayRef<LaneVector> vectors, ValueRange) {
                for (LaneVector v : vectors)
                  gpuInput.push_back(inputVector(v.chunk));
                return SmallVector<Value>{};
              });
    if (p.hiddenWidth > 0)
      routeToLeafAndHidden();
    else
      routeTrees();
    // A leaf's gradient walk has stored dx itself.
    if (!(p.hiddenWidth > 0 && p.isGradientWalk()))
      emitOutput();
    if (p.hooks.after)
      p.hooks.after(b, token, slot, gpuLane);
  }

  const TreeStrategy &s;
  const TreeProblem &p;
  Value token, inVectors, outVectors;
  /// Vectors of a dy row, in the gradient walk.
  Value gradVectors;
  /// The token's warp in its block on the GPU, 0 in the twin.
  Value slot;
  /// leaf_tree_ffn's leaf, once routed (null for tree_ffn).
  Value leaf;
  /// The staged rows (null without staging).
  Value stagedInput, stagedOutput;
  /// This token's records (coefficients, rows) and the indices before the
  /// entry index: the warp on the GPU, none in the twin.
  std::array<Value, 2> records;
  SmallVector<Value> recordPrefix;
  /// The lane's x vectors, when the strategy keeps them in registers.
  SmallVector<Value> gpuInput;
};

} // namespace

void fff::emitTreeKernel(ImplicitLocOpBuilder &b, const TreeStrategy &strategy,
                         const TreeProblem &problem, Value threadId,
                         Value blockId, Value blocks,
                         ArrayRef<BlockArgument> shared) {
  TreeKernelEmitter(b, strategy, problem)
      .emitGPU(threadId, blockId, blocks, shared);
}

Operation *fff::emitTreeTwin(ImplicitLocOpBuilder &b,
                             const TreeStrategy &strategy,
                             const TreeProblem &problem) {
  return TreeKernelEmitter(b, strategy, problem).emitCPUTwin();
}

SmallVector<Type> fff::treeSharedBuffers(MLIRContext *context,
                                         const TreeStrategy &strategy,
                                         const TreeProblem &problem) {
  SmallVector<int64_t> recordShape{strategy.tokensPerBlock,
                                   strategy.entriesPerToken};
  SmallVector<Type> buffers{
      workgroupBufferType(recordShape, Float32Type::get(context)),
      workgroupBufferType(recordShape, IntegerType::get(context, 32))};
  if (strategy.stagedLevels) {
    auto [input, output] = stagedRowTypes(strategy, problem);
    buffers.append({input, output});
  }
  return buffers;
}

//===- TreeKernel.cpp - the per-token code of fff's tree kernels ---------===//

#include "TreeKernel.h"

#include "TreeKernelEmitter.h"
#include "fff/Dialect/FFF/Utils/Activation.h"
#include "fff/Dialect/FFF/Utils/Routing.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace fff;
using namespace fff::detail;

namespace {

/// The shared-memory buffers of the staged rows: [trees * S, Din] and
/// [trees * S, Dout] of the element type.
std::pair<MemRefType, MemRefType> stagedRowTypes(const TreeStrategy &s,
                                                 const TreeProblem &p) {
  int64_t rows = p.trees * s.stagedNodesPerTree();
  return {workgroupBufferType({rows, *p.staticInWidth}, p.elementType),
          workgroupBufferType({rows, *p.staticOutWidth}, p.elementType)};
}

} // namespace

void TreeKernelEmitter::emitGPU(Value threadId, Value blockId, Value blocks,
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

Operation *TreeKernelEmitter::emitCPUTwin() {
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
    inside(threads.getRegion(), [&] { stageRows(threads.getInductionVar()); });
  }
  auto tokens = kernelLoop(index(0), p.rows, index(1));
  inside(tokens.getRegion(), [&] {
    token = tokens.getInductionVar();
    emitToken();
  });
  return tokens;
}

scf::ForOp TreeKernelEmitter::kernelLoop(Value lower, Value upper, Value step,
                                         ValueRange inits) {
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

void TreeKernelEmitter::stageRows(Value thread) {
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
      Value vector = vector::LoadOp::create(b, type, from, ValueRange{row, col},
                                            /*nontemporal=*/false, alignment);
      vector::StoreOp::create(b, vector, to, ValueRange{stagedRow, col},
                              /*nontemporal=*/false, alignment);
    });
  };
  copy(p.routeWeights, stagedInput, *p.staticInWidth, s.in.vectorWidth);
  copy(p.outWeights, stagedOutput, *p.staticOutWidth, s.out.vectorWidth);
}

SmallVector<Value> TreeKernelEmitter::walkRow(
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

SmallVector<Value> TreeKernelEmitter::rowDotPartials(
    Value lane, const TreeStrategy::LaneWalk &walk, Value vectors,
    std::optional<int64_t> staticVectors, Value weights, ArrayRef<Value> rows,
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
            acc =
                v.inRow ? arith::SelectOp::create(b, v.inRow, next, acc) : next;
          }
        }
        return accs;
      });
  SmallVector<Value> partials;
  for (Value acc : accs)
    partials.push_back(sum(acc));
  return partials;
}

SmallVector<Value> TreeKernelEmitter::nodeLogits(const TreeWalk &walk,
                                                 ArrayRef<Value> nodes,
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
      logit =
          add(logit,
              widen(memref::LoadOp::create(
                  b, p.routeBias,
                  ValueRange{arith::AddIOp::create(b, walk.treeBase, node)})));
  return logits;
}

void TreeKernelEmitter::visit(const TreeWalk &walk, Value level, Value node,
                              Value logit) {
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
    return rowDotPartials(lane, dyWalk, gradVectors,
                          staticVectors(g.staticGradWidth, dyWalk.vectorWidth),
                          g.gradWeights, {row}, [&](int64_t, Value chunk) {
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
    memref::StoreOp::create(b,
                            arith::IndexCastOp::create(b, b.getI32Type(), node),
                            g.visitNodes, at);
    memref::StoreOp::create(b, dl, g.visitGrads, at);
    memref::StoreOp::create(b, activation, g.visitActivations, at);
  };
  if (!onGPU())
    return store();
  Value firstLane =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, gpuLane, index(0));
  inside(scf::IfOp::create(b, firstLane).getThenRegion(), store);
}

Value TreeKernelEmitter::walkLevels(const TreeWalk &walk, int64_t first,
                                    int64_t last, Value node, bool staged) {
  int64_t pairs = s.levelsPerStep == 2 ? (last - first) / 2 : 0;
  auto steps = [&](int64_t begin, int64_t count, int64_t levelsPerStep,
                   Value from,
                   function_ref<Value(Value level, Value node)> step) {
    if (count == 0)
      return from;
    auto loop = kernelLoop(index(0), index(count), index(1), ValueRange{from});
    inside(loop.getRegion(), [&] {
      Value level =
          arith::AddIOp::create(b, index(begin),
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
    Value nextLogit = arith::SelectOp::create(b, right0, logits[2], logits[1]);
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

void TreeKernelEmitter::routeTrees() {
  auto trees = kernelLoop(index(0), index(p.trees), index(1));
  inside(trees.getRegion(), [&] {
    Value tree = trees.getInductionVar();
    TreeWalk walk;
    walk.treeBase = arith::MulIOp::create(b, tree, index(p.nodesPerTree));
    if (s.stagedLevels)
      walk.stagedBase =
          arith::MulIOp::create(b, tree, index(s.stagedNodesPerTree()));
    walk.firstEntry = arith::MulIOp::create(b, tree, index(p.levels));
    walk.goRight = goRightPredicate(p.zeroGoesRight);
    Value node = walkLevels(walk, 0, s.stagedLevels, index(0), /*staged=*/true);
    walkLevels(walk, s.stagedLevels, p.levels, node, /*staged=*/false);
  });
}

SmallVector<Value>
TreeKernelEmitter::outputRow(Value entry, std::optional<int64_t> staticEntry,
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
        arith::MulIOp::create(b, tree,
                              index(p.nodesPerTree - s.stagedNodesPerTree())));
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

void TreeKernelEmitter::storeOutputVectors(ArrayRef<LaneVector> vectors) {
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
    Value coefficients = vector::BroadcastOp::create(b, f32Vector, coefficient);
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

void TreeKernelEmitter::emitToken() {
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

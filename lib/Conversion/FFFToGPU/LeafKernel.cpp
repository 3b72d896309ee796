//===- LeafKernel.cpp - a leaf's hidden layer in fff's tree kernels -------===//
//
// The parts of TreeKernelEmitter that only leaf_tree_ffn's kernels run: the
// leaf's hidden layer after routing, and leaf_tree_ffn_grad's gradient walk.
//
//===----------------------------------------------------------------------===//

#include "TreeKernelEmitter.h"

#include "fff/Dialect/FFF/Utils/Activation.h"
#include "fff/Dialect/FFF/Utils/Routing.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace fff;
using namespace fff::detail;

void TreeKernelEmitter::routeToLeafAndHidden() {
  TreeWalk walk;
  walk.treeBase = index(0);
  walk.goRight = goRightPredicate(/*zeroGoesRight=*/true);
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
        add(sum, widen(memref::LoadOp::create(b, p.hiddenBias,
                                              ValueRange{leaf, index(unit)})));
    record(index(unit), arith::AddIOp::create(b, firstRow, index(unit)),
           buildActivation(b, b.getLoc(), p.activation, biased));
  }
}

void TreeKernelEmitter::leafGradient(Value firstRow) {
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
    memref::StoreOp::create(b,
                            arith::IndexCastOp::create(b, b.getI32Type(), leaf),
                            g.visitNodes, ValueRange{token, index(0)});
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

Value TreeKernelEmitter::w1Piece(Value row, Value first, int64_t multiple,
                                 int64_t count) {
  return widen(vector::LoadOp::create(
      b, VectorType::get({count}, p.elementType), p.hiddenWeights,
      ValueRange{row, first}, /*nontemporal=*/false,
      rowPieceAlignment(multiple, count,
                        p.elementType.getIntOrFloatBitWidth() / 8)));
}

llvm::MaybeAlign TreeKernelEmitter::rowPieceAlignment(int64_t multiple,
                                                      int64_t count,
                                                      int64_t bytes) {
  uint64_t known = uint64_t(p.hiddenWidth * bytes) | uint64_t(count * bytes);
  if (multiple)
    known |= uint64_t(multiple * bytes);
  return llvm::MaybeAlign(
      std::min<uint64_t>(16, uint64_t(1) << llvm::countr_zero(known)));
}

Value TreeKernelEmitter::hiddenPartials(Value lane, int64_t first,
                                        int64_t count) {
  Value firstRow = arith::MulIOp::create(b, leaf, p.inWidth);
  auto loop = p.isGradientWalk()
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

//===- NormGradKernel.cpp - the bodies of fff's norm backward kernels -----===//
//
// Per row, with xhat = (x - mean) * rstd (x * rstd for RMSNorm) and
// g = dy * gamma (dy without a scale), both kernels compute what
// DESIGN.md states and NormGradsToLoops.cpp spells out:
//
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))   (no mean(g) for RMS)
//
// with the two row means from one group sum each; an rms_norm_grad without
// rstd first sums x^2 (for rstd) and g * x (mean(g * xhat) is
// rstd * mean(g * x)) in the same pass. dy * xhat and dy go into the
// thread's partial sums for dgamma and dbeta.
//
//===----------------------------------------------------------------------===//

#include "NormGradKernel.h"

#include "LaneEmitter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace fff;

std::pair<Value, Value>
fff::partialBlocksAndRows(ImplicitLocOpBuilder &b,
                          const NormGradStrategy &strategy, Value rows) {
  Value one = arith::ConstantIndexOp::create(b, 1);
  Value most = arith::ConstantIndexOp::create(b, strategy.partialBlocks);
  Value blocks =
      arith::MaxUIOp::create(b, one, arith::MinUIOp::create(b, rows, most));
  Value rowsPerBlock = arith::CeilDivUIOp::create(b, rows, blocks);
  // Never an empty block: every partial row launched is written.
  Value launched = arith::CeilDivUIOp::create(
      b, rows, arith::MaxUIOp::create(b, one, rowsPerBlock));
  return {launched, rowsPerBlock};
}

namespace {

/// Emits the dx and partials kernel (see LaneEmitter; GPU form only).
class NormGradKernelEmitter : LaneEmitter {
public:
  NormGradKernelEmitter(ImplicitLocOpBuilder &b, const NormGradStrategy &s,
                        const NormGradProblem &p)
      : LaneEmitter(b, s.row.threadsPerRow), s(s), row(s.row), p(p) {
    if (p.gammaPartials)
      partials.push_back({p.gammaPartials, /*timesXhat=*/true});
    if (p.betaPartials)
      partials.push_back({p.betaPartials, /*timesXhat=*/false});
  }

  void emit(Value threadId, Value blockId, Value sharedPartials,
            ArrayRef<Value> sharedColumns) {
    Value threadsPerRow = index(row.threadsPerRow);
    useGPULanes(arith::RemUIOp::create(b, threadId, threadsPerRow),
                sharedPartials);
    group = arith::DivUIOp::create(b, threadId, threadsPerRow);
    block = blockId;
    invRowSize = arith::DivFOp::create(
        b, f32(1.0),
        arith::UIToFPOp::create(
            b, b.getF32Type(),
            arith::IndexCastUIOp::create(b, b.getI64Type(), p.rowSize)));
    vectors = arith::DivUIOp::create(b, p.rowSize, index(row.vectorWidth));
    Value rowsPerBlock = partialBlocksAndRows(b, s, p.rows).second;
    first = arith::MulIOp::create(b, blockId, rowsPerBlock);
    last = arith::MinUIOp::create(
        b, p.rows, arith::AddIOp::create(b, first, rowsPerBlock));
    if (row.kind == NormStrategy::Kind::Looped)
      return emitLoopedRows();
    emitRegisterRows(sharedColumns);
  }

private:
  //===--- Small builders -------------------------------------------------===//

  VectorType vectorType(Type elementType) {
    return VectorType::get({row.vectorWidth}, elementType);
  }
  Value splat(Value scalar) {
    return vector::BroadcastOp::create(b, vectorType(b.getF32Type()), scalar);
  }
  Value zeros() {
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(vectorType(b.getF32Type()), 0.0f));
  }
  Value column(Value chunk) {
    return arith::MulIOp::create(b, chunk, index(row.vectorWidth));
  }
  /// Rows start at multiples of the vector width, so a vector is aligned to
  /// its size, up to the 16 bytes of the widest access.
  llvm::MaybeAlign alignment(Type elementType) {
    return llvm::MaybeAlign(std::min<int64_t>(
        16, row.vectorWidth * (elementType.getIntOrFloatBitWidth() / 8)));
  }
  /// The vector at `chunk` of row `rowIndex` of `buffer`, or of a [rowSize]
  /// buffer when `rowIndex` is null, in the buffer's type.
  Value load(Value buffer, Value rowIndex, Value chunk) {
    SmallVector<Value> indices;
    if (rowIndex)
      indices.push_back(rowIndex);
    indices.push_back(column(chunk));
    Type elementType = cast<MemRefType>(buffer.getType()).getElementType();
    return vector::LoadOp::create(b, vectorType(elementType), buffer, indices,
                                  /*nontemporal=*/false,
                                  alignment(elementType));
  }
  void store(Value value, Value buffer, Value rowIndex, Value chunk) {
    SmallVector<Value> indices;
    if (rowIndex)
      indices.push_back(rowIndex);
    indices.push_back(column(chunk));
    Type elementType = cast<MemRefType>(buffer.getType()).getElementType();
    if (!elementType.isF32())
      value = arith::TruncFOp::create(b, vectorType(elementType), value);
    vector::StoreOp::create(b, value, buffer, indices, /*nontemporal=*/false,
                            alignment(elementType));
  }
  /// dy's vector at `chunk` of row `r`, in its storage type.
  Value loadGradOutput(Value r, Value chunk) {
    return p.loadGradOutput ? p.loadGradOutput(b, r, chunk)
                            : load(p.gradOutput, r, chunk);
  }
  /// x's vector at `chunk` of row `r`, in its type.
  Value loadInput(Value r, Value chunk) {
    return p.loadInput ? p.loadInput(b, r, chunk) : load(p.input, r, chunk);
  }
  /// Stores (or hands to the unit's epilogue) dx's f32 vector.
  void storeGradInput(Value dx, Value r, Value chunk) {
    if (p.storeGradInput)
      return p.storeGradInput(b, r, chunk, dx);
    store(dx, p.gradInput, r, chunk);
  }
  void ifThen(Value condition, function_ref<void()> body) {
    inside(scf::IfOp::create(b, condition).getThenRegion(), body);
  }

  //===--- One row's terms ------------------------------------------------===//

  /// A row's per-row values, as f32 scalars: rstd, and the means that dx
  /// subtracts (mean(g) null for RMSNorm).
  struct RowScalars {
    Value mean, rstd, meanGXhat, meanG;
  };

  /// The statistics the forward saved, loaded by every lane.
  RowScalars savedStatistics(Value r) {
    RowScalars scalars;
    if (p.mean)
      scalars.mean = memref::LoadOp::create(b, p.mean, r);
    if (p.rstd)
      scalars.rstd = memref::LoadOp::create(b, p.rstd, r);
    return scalars;
  }

  Value xhat(Value x, const RowScalars &scalars) {
    if (scalars.mean)
      x = arith::SubFOp::create(b, x, splat(scalars.mean));
    return mul(x, splat(scalars.rstd));
  }

  Value scaled(Value dy, Value chunk) {
    return p.gamma ? mul(dy, widen(load(p.gamma, Value(), chunk))) : dy;
  }

  /// The per-lane partial sums of one vector (x, dy widened to f32, g):
  /// layer_norm: g, g * xhat; rms_norm: g * x, and x^2 when rstd is to be
  /// recomputed.
  SmallVector<Value> rowTerms(Value x, Value g, const RowScalars &scalars) {
    if (p.subtractMean)
      return {sum(g), sum(mul(g, xhat(x, scalars)))};
    SmallVector<Value> terms{sum(mul(g, x))};
    if (!p.rstd)
      terms.push_back(sum(mul(x, x)));
    return terms;
  }

  /// Completes `scalars` from the row's group sums (rowTerms' order).
  void finishScalars(RowScalars &scalars, ArrayRef<Value> sums) {
    if (p.subtractMean) {
      scalars.meanG = mul(sums[0], invRowSize);
      scalars.meanGXhat = mul(sums[1], invRowSize);
      return;
    }
    if (!p.rstd)
      scalars.rstd =
          reciprocalSqrt(add(mul(sums[1], invRowSize), f32(p.epsilon)));
    scalars.meanGXhat = mul(scalars.rstd, mul(sums[0], invRowSize));
  }

  /// dx of one vector, in f32.
  Value gradInput(Value x, Value g, const RowScalars &scalars) {
    Value centred = arith::SubFOp::create(
        b, g, mul(xhat(x, scalars), splat(scalars.meanGXhat)));
    if (scalars.meanG)
      centred = arith::SubFOp::create(b, centred, splat(scalars.meanG));
    return mul(splat(scalars.rstd), centred);
  }

  /// The vector each wanted parameter gradient's partial sum gains.
  Value partialTerm(bool timesXhat, Value x, Value dy,
                    const RowScalars &scalars) {
    return timesXhat ? mul(dy, xhat(x, scalars)) : dy;
  }

  //===--- Register-resident rows -----------------------------------------===//

  /// The vectors a lane owns, lane, lane + T, lane + 2T, ... (T lanes), and
  /// whether each lies in the row; only the last ones can fall past its end.
  struct Owned {
    Value chunk, inRow, loadChunk;
  };

  SmallVector<Owned> ownedVectors() {
    SmallVector<Owned> owned;
    for (int64_t i = 0; i < row.vectorsPerThread; ++i) {
      Owned o;
      o.chunk = arith::AddIOp::create(b, gpuLane, index(i * row.threadsPerRow));
      // Register-resident rows have a static size: vectors that every lane
      // has inside the row load directly.
      if ((i + 1) * row.threadsPerRow * row.vectorWidth <= *p.staticRowSize) {
        o.inRow = arith::ConstantIntOp::create(b, 1, 1);
        o.loadChunk = o.chunk;
        owned.push_back(o);
        continue;
      }
      // Past the end, load the row's last vector instead (always in bounds)
      // and zero it: no branch, so the row stays in registers.
      o.inRow =
          arith::CmpIOp::create(b, arith::CmpIPredicate::ult, o.chunk, vectors);
      o.loadChunk = arith::MinUIOp::create(
          b, o.chunk, arith::SubIOp::create(b, vectors, index(1)));
      owned.push_back(o);
    }
    return owned;
  }

  /// `raw`, the vector loaded (or computed) at `o.loadChunk`, zero past
  /// the row, in the storage type: two 16-bit values a register, widened
  /// at each use.
  Value zeroPastRow(Value raw, const Owned &o) {
    auto type = cast<VectorType>(raw.getType());
    Value zero = arith::ConstantOp::create(
        b, DenseElementsAttr::get(type,
                                  b.getFloatAttr(type.getElementType(), 0.0)));
    return arith::SelectOp::create(b, o.inRow, raw, zero);
  }

  void emitRegisterRows(ArrayRef<Value> sharedColumns) {
    SmallVector<Owned> owned = ownedVectors();
    SmallVector<Value> initial(partials.size() * owned.size(), zeros());
    int64_t groups = row.rowsPerBlock;
    auto loop = scf::ForOp::create(b, arith::AddIOp::create(b, first, group),
                                   last, index(groups), initial);
    inside(loop.getRegion(), [&] {
      Value r = loop.getInductionVar();
      // The row stays in registers in its storage type; g = dy * gamma is
      // recomputed where it is used (gamma's loads hit the cache) rather
      // than held.
      SmallVector<Value> xs, dys;
      for (const Owned &o : owned) {
        xs.push_back(zeroPastRow(loadInput(r, o.loadChunk), o));
        dys.push_back(zeroPastRow(loadGradOutput(r, o.loadChunk), o));
      }
      auto x = [&](size_t i) { return widen(xs[i]); };
      auto dy = [&](size_t i) { return widen(dys[i]); };
      // Padding is zero in dy, so it adds nothing to any sum.
      auto g = [&](size_t i) { return scaled(dy(i), owned[i].loadChunk); };
      RowScalars scalars = savedStatistics(r);
      SmallVector<Value> sums =
          groupSums(p.subtractMean || !p.rstd ? 2 : 1, [&](Value) {
            SmallVector<Value> lanePartials;
            for (size_t i = 0; i < owned.size(); ++i) {
              SmallVector<Value> terms = rowTerms(x(i), g(i), scalars);
              if (lanePartials.empty())
                lanePartials = terms;
              else
                for (auto [total, term] : llvm::zip(lanePartials, terms))
                  total = add(total, term);
            }
            return lanePartials;
          });
      finishScalars(scalars, sums);
      SmallVector<Value> next;
      for (auto [k, partial] : llvm::enumerate(partials))
        for (auto [i, o] : llvm::enumerate(owned))
          next.push_back(
              add(loop.getRegionIterArg(k * owned.size() + i),
                  partialTerm(partial.timesXhat, x(i), dy(i), scalars)));
      for (auto [i, o] : llvm::enumerate(owned)) {
        Value dx = gradInput(x(i), g(i), scalars);
        ifThen(o.inRow, [&] { storeGradInput(dx, r, o.chunk); });
      }
      // Without partial sums the loop has no results, and its builder
      // made its yield.
      if (!next.empty())
        scf::YieldOp::create(b, next);
    });
    if (partials.empty())
      return;

    // The block's partial rows: with one row group, straight from the
    // registers; otherwise the groups add theirs in group order, each in
    // turn between barriers, the last storing the block's total.
    auto accumulated = [&](size_t k, size_t i) {
      return loop.getResult(k * owned.size() + i);
    };
    if (groups == 1) {
      for (auto [k, partial] : llvm::enumerate(partials))
        for (auto [i, o] : llvm::enumerate(owned))
          ifThen(o.inRow, [&] {
            store(accumulated(k, i), partial.buffer, block, o.chunk);
          });
      return;
    }
    for (int64_t turn = 0; turn < groups; ++turn) {
      if (turn > 0)
        gpu::BarrierOp::create(b);
      Value mine = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, group,
                                         index(turn));
      ifThen(mine, [&] {
        for (auto [k, partial] : llvm::enumerate(partials))
          for (auto [i, o] : llvm::enumerate(owned))
            ifThen(o.inRow, [&] {
              Value total = accumulated(k, i);
              if (turn > 0)
                total = add(total, load(sharedColumns[k], Value(), o.chunk));
              if (turn == groups - 1)
                store(total, partial.buffer, block, o.chunk);
              else
                store(total, sharedColumns[k], Value(), o.chunk);
            });
      });
    }
  }

  //===--- Looped rows ----------------------------------------------------===//

  /// `body(chunk)` for each vector this lane owns: lane, lane + T, ...
  void forEachOwnedVector(function_ref<void(Value chunk)> body) {
    auto loop =
        scf::ForOp::create(b, gpuLane, vectors, index(row.threadsPerRow));
    inside(loop.getRegion(), [&] { body(loop.getInductionVar()); });
  }

  /// Rows too long for registers, one after another for the whole block:
  /// each row's sums in one pass, then dx and the partial sums in a second.
  /// A thread keeps its columns' partial sums in the block's partial rows,
  /// which no other thread touches.
  void emitLoopedRows() {
    forEachOwnedVector([&](Value chunk) {
      for (const Partial &partial : partials)
        store(zeros(), partial.buffer, block, chunk);
    });
    auto rowLoop = scf::ForOp::create(b, first, last, index(1));
    inside(rowLoop.getRegion(), [&] {
      Value r = rowLoop.getInductionVar();
      RowScalars scalars = savedStatistics(r);
      int64_t count = p.subtractMean || !p.rstd ? 2 : 1;
      SmallVector<Value> sums = groupSums(count, [&](Value) {
        SmallVector<Value> initial(count, f32(0.0));
        auto loop = scf::ForOp::create(b, gpuLane, vectors,
                                       index(row.threadsPerRow), initial);
        inside(loop.getRegion(), [&] {
          Value chunk = loop.getInductionVar();
          Value x = widen(loadInput(r, chunk));
          Value g = scaled(widen(loadGradOutput(r, chunk)), chunk);
          SmallVector<Value> next;
          for (auto [total, term] :
               llvm::zip(loop.getRegionIterArgs(), rowTerms(x, g, scalars)))
            next.push_back(add(total, term));
          scf::YieldOp::create(b, next);
        });
        return SmallVector<Value>(loop.getResults());
      });
      finishScalars(scalars, sums);
      forEachOwnedVector([&](Value chunk) {
        Value x = widen(loadInput(r, chunk));
        Value dy = widen(loadGradOutput(r, chunk));
        storeGradInput(gradInput(x, scaled(dy, chunk), scalars), r, chunk);
        for (const Partial &partial : partials)
          store(add(load(partial.buffer, block, chunk),
                    partialTerm(partial.timesXhat, x, dy, scalars)),
                partial.buffer, block, chunk);
      });
    });
  }

  struct Partial {
    Value buffer;
    bool timesXhat;
  };

  const NormGradStrategy &s;
  const NormStrategy &row;
  const NormGradProblem &p;
  SmallVector<Partial, 2> partials;
  Value group, block, invRowSize, vectors, first, last;
};

} // namespace

void fff::emitNormGradKernel(ImplicitLocOpBuilder &b,
                             const NormGradStrategy &strategy,
                             const NormGradProblem &problem, Value threadId,
                             Value blockId, Value sharedPartials,
                             ArrayRef<Value> sharedColumns) {
  NormGradKernelEmitter(b, strategy, problem)
      .emit(threadId, blockId, sharedPartials, sharedColumns);
}

void fff::emitColumnSumsKernel(ImplicitLocOpBuilder &b,
                               const NormGradStrategy &strategy,
                               ValueRange partials, ValueRange gradients,
                               Value rowSize, Value threadId, Value blockId) {
  Value column = arith::AddIOp::create(
      b,
      arith::MulIOp::create(
          b, blockId,
          arith::ConstantIndexOp::create(b, strategy.columnThreads)),
      threadId);
  Value inRow =
      arith::CmpIOp::create(b, arith::CmpIPredicate::ult, column, rowSize);
  auto guard = scf::IfOp::create(b, inRow);
  OpBuilder::InsertionGuard insertion(b);
  b.setInsertionPoint(guard.thenBlock()->getTerminator());
  Value zero = arith::ConstantIndexOp::create(b, 0);
  Value one = arith::ConstantIndexOp::create(b, 1);
  for (auto [partial, gradient] : llvm::zip_equal(partials, gradients)) {
    Value blocks = memref::DimOp::create(b, partial, 0);
    auto loop = scf::ForOp::create(
        b, zero, blocks, one,
        ValueRange{arith::ConstantOp::create(b, b.getF32FloatAttr(0.0))});
    {
      OpBuilder::InsertionGuard inLoop(b);
      b.setInsertionPointToStart(loop.getBody());
      Value term = memref::LoadOp::create(
          b, partial, ValueRange{loop.getInductionVar(), column});
      scf::YieldOp::create(b, ValueRange{arith::AddFOp::create(
                                  b, loop.getRegionIterArg(0), term)});
    }
    Value total = loop.getResult(0);
    Type elementType = cast<MemRefType>(gradient.getType()).getElementType();
    if (!elementType.isF32())
      total = arith::TruncFOp::create(b, elementType, total);
    memref::StoreOp::create(b, total, gradient, column);
  }
}

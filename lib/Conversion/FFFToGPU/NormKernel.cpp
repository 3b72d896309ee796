//===- NormKernel.cpp - the per-row code of fff's norm kernels -----------===//

#include "NormKernel.h"

#include "LaneEmitter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace fff;

namespace {

/// Emits one norm kernel, as a GPU kernel body or its CPU twin (see
/// LaneEmitter): a group of lanes per row. The twin checks each strategy's
/// lane-to-data mapping, tails, masking, reduction order and statistics.
class NormKernelEmitter : LaneEmitter {
public:
  NormKernelEmitter(ImplicitLocOpBuilder &b, const NormStrategy &strategy,
                    const NormProblem &problem)
      : LaneEmitter(b, strategy.threadsPerRow), s(strategy), p(problem) {}

  /// The kernel body inside a gpu.launch; `sharedPartials` is 32 floats of
  /// workgroup memory (null for warp-per-row).
  void emitGPU(Value threadId, Value blockId, Value sharedPartials) {
    Value threadsPerRow = index(s.threadsPerRow);
    useGPULanes(arith::RemUIOp::create(b, threadId, threadsPerRow),
                sharedPartials);
    Value rowInBlock = arith::DivUIOp::create(b, threadId, threadsPerRow);
    row = arith::AddIOp::create(
        b, arith::MulIOp::create(b, blockId, index(s.rowsPerBlock)),
        rowInBlock);
    prepare();
    // Only warp-per-row blocks can hold rows past the end; whole warps share
    // a row, so the branch never splits a warp's shuffles, and the other
    // strategies (with barriers) launch exactly one block per row.
    if (s.rowsPerBlock == 1) {
      emitRow();
      return;
    }
    Value inRange =
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, row, p.rows);
    inside(scf::IfOp::create(b, inRange).getThenRegion(), [&] { emitRow(); });
  }

  /// One row of another kernel, by one warp (`lane`) or, in the twin (null
  /// lane), every lane in turn.
  void emitEmbeddedRow(Value atRow, Value lane) {
    if (lane)
      useGPULanes(lane);
    else
      useTwinLanes();
    row = atRow;
    prepare();
    emitRow();
  }

  /// The CPU twin: every row in turn.
  void emitCPUTwin() {
    useTwinLanes();
    prepare();
    auto rows = scf::ForOp::create(b, index(0), p.rows, index(1));
    rows->setAttr(kGPUTwinAttrName, b.getUnitAttr());
    inside(rows.getRegion(), [&] {
      row = rows.getInductionVar();
      laneCache.clear();
      emitRow();
    });
  }

private:
  //===--- Small builders -------------------------------------------------===//

  VectorType vectorType(Type elementType) {
    return VectorType::get({s.vectorWidth}, elementType);
  }
  Value splat(Value scalar) {
    return vector::BroadcastOp::create(b, vectorType(b.getF32Type()), scalar);
  }

  void prepare() {
    invRowSize = arith::DivFOp::create(
        b, f32(1.0),
        arith::UIToFPOp::create(
            b, b.getF32Type(),
            arith::IndexCastUIOp::create(b, b.getI64Type(), p.rowSize)));
    vectors = arith::DivUIOp::create(b, p.rowSize, index(s.vectorWidth));
  }

  //===--- Loads and stores -----------------------------------------------===//

  /// `vectorWidth` elements at vector index `chunk` of the row (or of a
  /// parameter when `rowIndex` is null), in the buffer's element type.
  Value loadRaw(Value buffer, Value rowIndex, Value chunk) {
    Value column = arith::MulIOp::create(b, chunk, index(s.vectorWidth));
    SmallVector<Value> indices;
    if (rowIndex)
      indices.push_back(rowIndex);
    indices.push_back(column);
    Type elementType = cast<MemRefType>(buffer.getType()).getElementType();
    return vector::LoadOp::create(b, vectorType(elementType), buffer, indices,
                                  /*nontemporal=*/false,
                                  alignment(elementType));
  }

  /// The norm's input vector at `chunk` of this row, in its storage type.
  Value inputChunk(Value chunk) {
    return p.loadInput ? p.loadInput(b, row, chunk)
                       : loadRaw(p.input, row, chunk);
  }

  void storeVector(Value value, Value chunk) {
    Value column = arith::MulIOp::create(b, chunk, index(s.vectorWidth));
    if (!p.elementType.isF32())
      value = arith::TruncFOp::create(b, vectorType(p.elementType), value);
    vector::StoreOp::create(b, value, p.output, ValueRange{row, column},
                            /*nontemporal=*/false, alignment(p.elementType));
  }

  /// Rows start at multiples of the vector width, so a vector is aligned to
  /// its size, up to the 16 bytes of the widest access.
  llvm::MaybeAlign alignment(Type elementType) {
    return llvm::MaybeAlign(std::min<int64_t>(
        16, s.vectorWidth * (elementType.getIntOrFloatBitWidth() / 8)));
  }

  //===--- Per-lane code, shared by both forms ----------------------------===//

  /// What one lane of a register-resident row holds: vectors lane,
  /// lane + T, lane + 2T, ... (T lanes), so that each load instruction of a
  /// warp reads one contiguous span. Values stay in the storage type (two
  /// 16-bit values a register) and are widened at each use.
  struct LaneRow {
    SmallVector<Value> chunks, inRow, raw;
  };

  /// Loads a lane's part of the row; on the GPU once per thread (cached),
  /// in the twin once per lane loop.
  LaneRow &laneRow(Value lane) {
    auto [it, inserted] = laneCache.try_emplace(lane.getAsOpaquePointer());
    LaneRow &lr = it->second;
    if (!inserted)
      return lr;
    Value zeros = arith::ConstantOp::create(
        b, DenseElementsAttr::get(vectorType(p.elementType),
                                  b.getFloatAttr(p.elementType, 0.0)));
    Value always = arith::ConstantIntOp::create(b, 1, 1);
    for (int64_t i = 0; i < s.vectorsPerThread; ++i) {
      Value chunk = arith::AddIOp::create(b, lane, index(i * s.threadsPerRow));
      lr.chunks.push_back(chunk);
      // Register-resident rows have a static size, so only the last vectors
      // of a lane can fall past the row's end; the others load directly.
      if ((i + 1) * s.threadsPerRow * s.vectorWidth <= *p.staticRowSize) {
        lr.inRow.push_back(always);
        lr.raw.push_back(inputChunk(chunk));
        continue;
      }
      // Past the end, load the row's last vector instead (always in bounds)
      // and zero it: no branch, so the row stays in registers.
      Value inRow =
          arith::CmpIOp::create(b, arith::CmpIPredicate::ult, chunk, vectors);
      Value last = arith::SubIOp::create(b, vectors, index(1));
      Value clamped = arith::MinUIOp::create(b, chunk, last);
      lr.inRow.push_back(inRow);
      lr.raw.push_back(
          arith::SelectOp::create(b, inRow, inputChunk(clamped), zeros));
    }
    return lr;
  }

  /// A lane's sum(x - shift) and sum((x - shift)^2) over its part of a long
  /// row (looped strategy); cached like laneRow.
  std::pair<Value, Value> loopedPartials(Value lane, Value shift) {
    LaneRow &lr = laneCache[lane.getAsOpaquePointer()];
    if (!lr.raw.empty())
      return {lr.raw[0], lr.raw[1]};
    auto loop = scf::ForOp::create(b, lane, vectors, index(s.threadsPerRow),
                                   ValueRange{f32(0.0), f32(0.0)});
    inside(loop.getRegion(), [&] {
      Value chunk = loop.getInductionVar();
      Value x =
          arith::SubFOp::create(b, widen(inputChunk(chunk)), splat(shift));
      scf::YieldOp::create(
          b, ValueRange{add(loop.getRegionIterArg(0), sum(x)),
                        add(loop.getRegionIterArg(1), sum(mul(x, x)))});
    });
    lr.raw = {loop.getResult(0), loop.getResult(1)};
    return {lr.raw[0], lr.raw[1]};
  }

  /// A row's statistics. LayerNorm's mean is kept as pivot + shift, where
  /// the pivot is the row's first element: deviations are taken as
  /// (x - pivot) - shift, exact in their first step for values near the
  /// pivot, so that |mean| >> stddev does not cost the bits a rounded mean
  /// would. RMSNorm does not centre (both are null).
  struct RowStatistics {
    Value pivot, shift, rstd;
  };

  /// x's deviation from the row's mean (x itself for RMSNorm), f32 vectors.
  Value centred(Value x, const RowStatistics &stats) {
    if (!stats.pivot)
      return x;
    return arith::SubFOp::create(
        b, arith::SubFOp::create(b, x, splat(stats.pivot)), splat(stats.shift));
  }

  /// y = (x - mean) * rstd * gamma + beta for one input vector, stored.
  void normalizeAndStore(Value raw, Value chunk, const RowStatistics &stats) {
    Value y = mul(centred(widen(raw), stats), splat(stats.rstd));
    if (p.gamma)
      y = mul(y, widen(loadRaw(p.gamma, Value(), chunk)));
    if (p.beta)
      y = add(y, widen(loadRaw(p.beta, Value(), chunk)));
    if (p.storeOutputs)
      return p.storeOutputs(b, row, chunk, raw, y);
    storeVector(y, chunk);
  }

  //===--- The row: written once, over lanes ------------------------------===//

  void emitRow() {
    RowStatistics stats = s.kind == NormStrategy::Kind::Looped
                              ? loopedStatistics()
                              : registerStatistics();
    forEachLane([&](Value lane) {
      if (s.kind == NormStrategy::Kind::Looped) {
        auto loop =
            scf::ForOp::create(b, lane, vectors, index(s.threadsPerRow));
        inside(loop.getRegion(), [&] {
          Value chunk = loop.getInductionVar();
          normalizeAndStore(inputChunk(chunk), chunk, stats);
        });
        return;
      }
      LaneRow &lr = laneRow(lane);
      for (auto [raw, chunk, inRow] : llvm::zip(lr.raw, lr.chunks, lr.inRow))
        inside(scf::IfOp::create(b, inRow).getThenRegion(),
               [&] { normalizeAndStore(raw, chunk, stats); });
    });
    storeStatistics(stats);
  }

  /// Two-pass mean and variance of a register-resident row: the sum of
  /// x - pivot, then the sum of squared deviations from the mean.
  RowStatistics registerStatistics() {
    RowStatistics stats;
    if (p.subtractMean) {
      stats.pivot = rowPivot();
      Value shiftedSum = groupSum([&](Value lane) {
        LaneRow &lr = laneRow(lane);
        Value partial = f32(0.0);
        for (auto [raw, inRow] : llvm::zip(lr.raw, lr.inRow)) {
          Value shifted =
              sum(arith::SubFOp::create(b, widen(raw), splat(stats.pivot)));
          partial = add(partial,
                        arith::SelectOp::create(b, inRow, shifted, f32(0.0)));
        }
        return partial;
      });
      stats.shift = mul(shiftedSum, invRowSize);
    }
    Value variance =
        mul(groupSum([&](Value lane) {
              LaneRow &lr = laneRow(lane);
              Value partial = f32(0.0);
              for (auto [raw, inRow] : llvm::zip(lr.raw, lr.inRow)) {
                // Padding holds zeros, which would add their
                // squared deviation.
                Value deviation = centred(widen(raw), stats);
                Value squares = arith::SelectOp::create(
                    b, inRow, sum(mul(deviation, deviation)), f32(0.0));
                partial = add(partial, squares);
              }
              return partial;
            }),
            invRowSize);
    stats.rstd = rsqrt(variance);
    return stats;
  }

  /// One pass over a long row, of values shifted by its first element so
  /// that the variance does not cancel when |mean| >> stddev.
  RowStatistics loopedStatistics() {
    RowStatistics stats;
    Value shift = p.subtractMean ? rowPivot() : f32(0.0);
    Value squares = mul(groupSum([&](Value lane) {
                          return loopedPartials(lane, shift).second;
                        }),
                        invRowSize);
    if (!p.subtractMean) {
      stats.rstd = rsqrt(squares);
      return stats;
    }
    stats.pivot = shift;
    stats.shift = mul(
        groupSum([&](Value lane) { return loopedPartials(lane, shift).first; }),
        invRowSize);
    Value variance = arith::MaximumFOp::create(
        b, arith::SubFOp::create(b, squares, mul(stats.shift, stats.shift)),
        f32(0.0));
    stats.rstd = rsqrt(variance);
    return stats;
  }

  /// The row's first element in f32, which every lane reads (one cached
  /// load per warp).
  Value rowPivot() {
    Value first = vector::ExtractOp::create(b, widen(inputChunk(index(0))),
                                            ArrayRef<int64_t>{0});
    return first;
  }

  Value rsqrt(Value variance) {
    return reciprocalSqrt(add(variance, f32(p.epsilon)));
  }

  void storeStatistics(const RowStatistics &stats) {
    if (!p.mean)
      return;
    auto store = [&] {
      memref::StoreOp::create(b, add(stats.pivot, stats.shift), p.mean, row);
      memref::StoreOp::create(b, stats.rstd, p.rstd, row);
    };
    if (!onGPU())
      return store();
    Value first =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, gpuLane, index(0));
    inside(scf::IfOp::create(b, first).getThenRegion(), store);
  }

  const NormStrategy &s;
  const NormProblem &p;
  Value row, invRowSize, vectors;
  llvm::DenseMap<void *, LaneRow> laneCache;
};

} // namespace

void fff::emitNormKernel(ImplicitLocOpBuilder &b, const NormStrategy &strategy,
                         const NormProblem &problem, Value threadId,
                         Value blockId, Value sharedPartials) {
  NormKernelEmitter(b, strategy, problem)
      .emitGPU(threadId, blockId, sharedPartials);
}

void fff::emitNormTwin(ImplicitLocOpBuilder &b, const NormStrategy &strategy,
                       const NormProblem &problem) {
  NormKernelEmitter(b, strategy, problem).emitCPUTwin();
}

void fff::emitNormRow(ImplicitLocOpBuilder &b, const NormStrategy &strategy,
                      const NormProblem &problem, Value row, Value lane) {
  NormKernelEmitter(b, strategy, problem).emitEmbeddedRow(row, lane);
}

//===- FFFToGPU.cpp - fff norms to GPU kernels ------------------*- C++ -*-===//
//
// Lowers each normalization and fused unit to one kernel launch, the kernel
// written with the strategy `selectNormStrategy` picks, and runs the pass
// (tree layers are in TreeFFNToGPU.cpp). Kernel outlining,
// NVVM conversion and PTX generation are upstream passes run by the GPU
// pipeline afterwards.
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/FFFToGPU/FFFToGPU.h"

#include "LaneEmitter.h"
#include "TreeFFNToGPU.h"
#include "fff/Conversion/FFFToGPU/KernelStrategy.h"
#include "fff/Conversion/Passes.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace fff {
#define GEN_PASS_DEF_CONVERTFFFTOGPU
#include "fff/Conversion/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// The dims [begin, end), as one reassociation group.
ReassociationIndices dimRange(int64_t begin, int64_t end) {
  return llvm::to_vector_of<int64_t, 2>(llvm::seq<int64_t>(begin, end));
}

/// The buffers and parameters one norm kernel works on, with the input
/// viewed as a [rows, rowSize] matrix.
struct NormProblem {
  bool subtractMean; // layer_norm; rms_norm does not centre
  float epsilon;
  Value input, gamma, beta, output; // [rows, rowSize], [rowSize], ..
  Value mean, rstd;                 // [rows] f32, or null
  Value rows, rowSize;              // index values
  std::optional<int64_t> staticRowSize;
  Type elementType;

  /// Where a fused unit computes the norm's input per vector instead of
  /// loading `input`, and stores its results instead of `output`: given the
  /// row, the vector index, the input vector (storage type) and the
  /// normalized vector (f32, after gamma and beta).
  std::function<Value(ImplicitLocOpBuilder &, Value row, Value chunk)>
      loadInput;
  std::function<void(ImplicitLocOpBuilder &, Value row, Value chunk,
                     Value input, Value normalized)>
      storeOutputs;

  /// A fused unit (null for a plain norm) and its buffers: one per unit
  /// input (a [rows, rowSize] matrix or a [rowSize] parameter), then one
  /// [rows, rowSize] matrix per unit result.
  FusionOp unit;
  SmallVector<Value> unitBuffers;
};

//===----------------------------------------------------------------------===//
// Fused units: their tensors evaluated one vector at a time
//===----------------------------------------------------------------------===//

/// A trailing projection (d0, ..., dn) -> (dk, ..., dn): how a per-column
/// parameter is read.
bool isTrailingProjection(AffineMap map, int64_t rank) {
  if (map.getNumDims() != unsigned(rank) ||
      map.getNumResults() > unsigned(rank))
    return false;
  int64_t first = rank - map.getNumResults();
  for (auto [i, expr] : llvm::enumerate(map.getResults()))
    if (expr != getAffineDimExpr(first + i, map.getContext()))
      return false;
  return true;
}

bool isScalarConstant(Value value) {
  return value.getType().isIntOrFloat() && matchPattern(value, m_Constant());
}

/// Why `unit` cannot become one GPU kernel yet, or "" if it can.
std::string unsupportedOnGPU(FusionOp unit) {
  Operation *norm = unit.getNorm();
  auto layerNorm = dyn_cast<LayerNormOp>(norm);
  if (layerNorm && layerNorm.getReturnStats())
    return "a norm that returns mean and rstd";
  auto type = cast<RankedTensorType>(norm->getOperand(0).getType());
  int64_t normalizedRank = layerNorm
                               ? layerNorm.getNormalizedRank()
                               : cast<RMSNormOp>(norm).getNormalizedRank();
  if (normalizedRank == type.getRank())
    return "a norm over the whole tensor";
  ArrayRef<int64_t> paramShape = type.getShape().take_back(normalizedRank);
  Block &body = unit.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    auto argType = dyn_cast<RankedTensorType>(arg.getType());
    if (!argType || (argType.getShape() != type.getShape() &&
                     argType.getShape() != paramShape))
      return "an input that is neither a row tensor nor a per-column parameter";
  }
  for (Value param : norm->getOperands().drop_front())
    if (!isa<BlockArgument>(param))
      return "a scale or bias computed inside the unit";
  for (Operation &op : body.without_terminator()) {
    if (&op == norm)
      continue;
    if (op.getNumResults() == 1 && isScalarConstant(op.getResult(0)))
      continue; // used by linalg.generic bodies, as a splat
    DenseElementsAttr dense;
    if (matchPattern(&op, m_Constant(&dense))) {
      if (!dense.isSplat())
        return "a constant tensor that is not a splat";
      continue;
    }
    if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
      for (OpOperand *input : generic.getDpsInputOperands()) {
        AffineMap map = generic.getMatchingIndexingMap(input);
        if (!map.isIdentity() && !isTrailingProjection(map, type.getRank()))
          return "a linalg.generic input that is neither elementwise nor "
                 "per-column";
      }
      if (!generic.getRegionOutputArgs()[0].use_empty())
        return "a linalg.generic that reads its output";
      bool closed = true;
      generic.getBody()->walk([&](Operation *inner) {
        for (Value operand : inner->getOperands())
          if (!generic.getRegion().isAncestor(operand.getParentRegion()) &&
              !isScalarConstant(operand))
            closed = false;
      });
      if (!closed)
        return "a linalg.generic body that uses a non-constant value from "
               "outside";
      continue;
    }
    if (!op.hasTrait<OpTrait::Elementwise>() || op.getNumRegions() != 0)
      return "an op that is not elementwise (" +
             op.getName().getStringRef().str() + ")";
  }
  return "";
}

/// Evaluates a unit's tensor values at one vector of one row: block
/// arguments load from their buffers, elementwise ops run on vectors.
class UnitVectorEvaluator {
public:
  UnitVectorEvaluator(ImplicitLocOpBuilder &b, FusionOp unit,
                      ArrayRef<Value> buffers, int64_t width, Value row,
                      Value chunk)
      : b(b), unit(unit), buffers(buffers), width(width), row(row),
        chunk(chunk) {}

  void seed(Value tensor, Value vector) { values[tensor] = vector; }

  Value get(Value tensor) {
    if (Value known = values.lookup(tensor))
      return known;
    Value vector = compute(tensor);
    values[tensor] = vector;
    return vector;
  }

  /// `vector` stored at this row and vector index of `buffer`.
  void store(Value vector, Value buffer) {
    vector::StoreOp::create(b, vector, buffer, ValueRange{row, column()},
                            /*nontemporal=*/false, alignment(vector.getType()));
  }

private:
  VectorType vectorOf(Type type) {
    return VectorType::get({width}, getElementTypeOrSelf(type));
  }
  Value column() {
    return arith::MulIOp::create(b, chunk,
                                 arith::ConstantIndexOp::create(b, width));
  }
  /// Rows start at multiples of the vector width: a vector is aligned to
  /// its size, up to 16 bytes.
  llvm::MaybeAlign alignment(Type vectorType) {
    Type element = getElementTypeOrSelf(vectorType);
    return llvm::MaybeAlign(
        std::min<int64_t>(16, width * (element.getIntOrFloatBitWidth() / 8)));
  }
  Value splat(Attribute scalar, Type type) {
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(vectorOf(type), scalar));
  }

  Value compute(Value tensor) {
    if (auto arg = dyn_cast<BlockArgument>(tensor)) {
      Value buffer = buffers[arg.getArgNumber()];
      SmallVector<Value> indices;
      if (cast<MemRefType>(buffer.getType()).getRank() == 2)
        indices.push_back(row);
      indices.push_back(column());
      VectorType type = vectorOf(tensor.getType());
      return vector::LoadOp::create(b, type, buffer, indices,
                                    /*nontemporal=*/false, alignment(type));
    }
    Operation *op = tensor.getDefiningOp();
    DenseElementsAttr dense;
    if (matchPattern(op, m_Constant(&dense)))
      return splat(dense.getSplatValue<Attribute>(), tensor.getType());
    IRMapping mapping;
    if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
      for (auto [input, arg] :
           llvm::zip(generic.getDpsInputs(), generic.getRegionInputArgs()))
        mapping.map(arg, get(input));
      for (Operation &inner : generic.getBody()->without_terminator())
        cloneVectorized(inner, mapping);
      return mapping.lookup(generic.getBody()->getTerminator()->getOperand(0));
    }
    for (Value operand : op->getOperands())
      mapping.map(operand, get(operand));
    return cloneVectorized(*op, mapping)->getResult(0);
  }

  /// Clones a scalar or tensor elementwise op onto vectors.
  Operation *cloneVectorized(Operation &op, IRMapping &mapping) {
    for (Value operand : op.getOperands())
      if (!mapping.contains(operand)) {
        Attribute scalar;
        matchPattern(operand, m_Constant(&scalar));
        mapping.map(operand, splat(scalar, operand.getType()));
      }
    if (matchPattern(&op, m_Constant())) {
      Attribute scalar;
      matchPattern(op.getResult(0), m_Constant(&scalar));
      Value vector = splat(scalar, op.getResult(0).getType());
      mapping.map(op.getResult(0), vector);
      return vector.getDefiningOp();
    }
    Operation *clone = b.clone(op, mapping);
    for (OpResult result : clone->getResults())
      result.setType(vectorOf(result.getType()));
    return clone;
  }

  ImplicitLocOpBuilder &b;
  FusionOp unit;
  ArrayRef<Value> buffers;
  int64_t width;
  Value row, chunk;
  DenseMap<Value, Value> values;
};

/// Points the emitter's input and output paths at a fused unit: the norm's
/// input is computed from the unit's inputs, and every unit result is
/// computed from the normalized value and stored.
void bindUnit(NormProblem &p, int64_t width) {
  FusionOp unit = p.unit;
  SmallVector<Value> buffers = p.unitBuffers;
  Operation *norm = unit.getNorm();
  unsigned numInputs = unit.getInputs().size();
  Value normInput = norm->getOperand(0), normResult = norm->getResult(0);
  p.loadInput = [=](ImplicitLocOpBuilder &b, Value row, Value chunk) {
    return UnitVectorEvaluator(b, unit, buffers, width, row, chunk)
        .get(normInput);
  };
  auto yield = cast<YieldOp>(unit.getBody().front().getTerminator());
  p.storeOutputs = [=](ImplicitLocOpBuilder &b, Value row, Value chunk,
                       Value input, Value normalized) {
    UnitVectorEvaluator evaluate(b, unit, buffers, width, row, chunk);
    evaluate.seed(normInput, input);
    Type elementType = getElementTypeOrSelf(normResult.getType());
    if (!elementType.isF32())
      normalized = arith::TruncFOp::create(
          b, VectorType::get({width}, elementType), normalized);
    evaluate.seed(normResult, normalized);
    for (auto [i, value] : llvm::enumerate(yield->getOperands()))
      evaluate.store(evaluate.get(value), buffers[numInputs + i]);
  };
}

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

  /// 1 / sqrt(variance + epsilon), correctly rounded in both forms. On the
  /// GPU, math.rsqrt and llvm.sqrt both become libdevice calls in the NVVM
  /// conversion, which only link where the CUDA toolkit is found at compile
  /// time; the NVVM intrinsic (sqrt.rn.f32) needs nothing.
  Value rsqrt(Value variance) {
    Value shifted = add(variance, f32(p.epsilon));
    Value root =
        onGPU() ? LLVM::CallIntrinsicOp::create(
                      b, b.getF32Type(), b.getStringAttr("llvm.nvvm.sqrt.rn.f"),
                      ValueRange{shifted})
                      .getResult(0)
                : math::SqrtOp::create(b, shifted).getResult();
    return arith::DivFOp::create(b, f32(1.0), root);
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

//===----------------------------------------------------------------------===//
// Host side: views, buffers and the launch
//===----------------------------------------------------------------------===//

/// [[0..lead-1], [lead..rank-1]] (rows, then the normalized dims); with no
/// leading dims, a unit row dim is added by expanding first.
struct RowView {
  RowView(ImplicitLocOpBuilder &b, Value input, int64_t normalizedRank) {
    auto type = cast<RankedTensorType>(input.getType());
    originalSizes = tensor::getMixedSizes(b, b.getLoc(), input);
    int64_t rank = type.getRank();
    int64_t lead = rank - normalizedRank;
    if (lead == 0) {
      // Give the single row an explicit unit dim.
      SmallVector<int64_t> shape{1};
      llvm::append_range(shape, type.getShape());
      SmallVector<ReassociationIndices> expand;
      expand.push_back({0, 1});
      for (int64_t d = 2; d <= rank; ++d)
        expand.push_back({d});
      input = tensor::ExpandShapeOp::create(
          b, RankedTensorType::get(shape, type.getElementType()), input,
          expand);
      type = cast<RankedTensorType>(input.getType());
      rank += 1;
      lead = 1;
      unitRowAdded = true;
    }
    ReassociationIndices rowDims, normalizedDims;
    for (int64_t d = 0; d < rank; ++d)
      (d < lead ? rowDims : normalizedDims).push_back(d);
    matrixGroups = {rowDims, normalizedDims};
    paramGroups = {dimRange(0, rank - lead)};
    matrix = collapsedBuffer(b, input, matrixGroups);
    auto matrixType = cast<MemRefType>(matrix.getType());
    rows = memref::DimOp::create(b, matrix, 0);
    rowSize = memref::DimOp::create(b, matrix, 1);
    staticRowSize = matrixType.isDynamicDim(1)
                        ? std::nullopt
                        : std::optional<int64_t>(matrixType.getDimSize(1));
  }

  /// A fresh buffer shaped like `resultType` (an op result), with the
  /// input's dynamic sizes; results are allocated in their final shape so
  /// that bufferization can hand them to the caller as out-params.
  Value allocResult(ImplicitLocOpBuilder &b,
                    RankedTensorType resultType) const {
    SmallVector<Value> dynamicSizes;
    for (int64_t d = 0; d < resultType.getRank(); ++d)
      if (resultType.isDynamicDim(d))
        dynamicSizes.push_back(
            getValueOrCreateConstantIndexOp(b, b.getLoc(), originalSizes[d]));
    return memref::AllocOp::create(
        b, MemRefType::get(resultType.getShape(), resultType.getElementType()),
        dynamicSizes);
  }

  /// The output buffer seen as the [rows, rowSize] matrix the kernel writes.
  Value outputMatrix(ImplicitLocOpBuilder &b, Value output) const {
    if (unitRowAdded) {
      auto type = cast<MemRefType>(output.getType());
      Value flat = output;
      if (type.getRank() > 1)
        flat = memref::CollapseShapeOp::create(
            b, output,
            ArrayRef<ReassociationIndices>{dimRange(0, type.getRank())});
      auto flatType = cast<MemRefType>(flat.getType());
      return memref::ExpandShapeOp::create(
          b,
          MemRefType::get({1, flatType.getDimSize(0)},
                          flatType.getElementType()),
          flat, ArrayRef<ReassociationIndices>{{0, 1}},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1),
                                 memref::getMixedSize(b, b.getLoc(), flat, 0)});
    }
    if (cast<MemRefType>(output.getType()).getRank() == 2)
      return output;
    return memref::CollapseShapeOp::create(b, output, matrixGroups);
  }

  /// A [lead..., 1...] statistics buffer seen as one value per row.
  static Value statsVector(ImplicitLocOpBuilder &b, Value stats) {
    auto type = cast<MemRefType>(stats.getType());
    if (type.getRank() == 1)
      return stats;
    return memref::CollapseShapeOp::create(
        b, stats, ArrayRef<ReassociationIndices>{dimRange(0, type.getRank())});
  }

  static Value toTensor(ImplicitLocOpBuilder &b, Value buffer) {
    auto type = cast<MemRefType>(buffer.getType());
    return bufferization::ToTensorOp::create(
        b, RankedTensorType::get(type.getShape(), type.getElementType()),
        buffer, /*restrict=*/true, /*writable=*/true);
  }

  SmallVector<OpFoldResult> originalSizes;
  bool unitRowAdded = false;
  SmallVector<ReassociationIndices> matrixGroups, paramGroups;
  Value matrix, rows, rowSize;
  std::optional<int64_t> staticRowSize;
  /// The element type of the rows.
  Type elementType() const {
    return cast<MemRefType>(matrix.getType()).getElementType();
  }
};

/// Builds the kernel `gpu.func @<op>_<strategy>` for `host` (a problem in
/// host values) and returns the host values to launch it with, in
/// `operands`. The kernel records its strategy as `fff.strategy`.
gpu::GPUFuncOp buildNormKernel(RewriterBase &rewriter, Operation *op,
                               const NormStrategy &strategy,
                               const NormProblem &host,
                               SmallVectorImpl<Value> &operands) {
  // The kernel's parameters: every buffer the problem has, then the sizes.
  NormProblem inKernel = host;
  SmallVector<Value *> fields{
      &inKernel.input, &inKernel.gamma, &inKernel.beta, &inKernel.output,
      &inKernel.mean,  &inKernel.rstd,  &inKernel.rows, &inKernel.rowSize};
  for (Value &buffer : inKernel.unitBuffers)
    fields.push_back(&buffer);
  KernelParameters parameters(fields);
  llvm::append_range(operands, parameters.operands());

  // e.g. layer_norm_bf16_768_warp_per_row: what a profiler should show.
  KernelSpec spec;
  llvm::raw_string_ostream os(spec.name);
  os << (host.unit ? "fused_" : "") << op->getName().stripDialect() << "_"
     << host.elementType << "_";
  if (host.staticRowSize)
    os << *host.staticRowSize;
  else
    os << "dynamic";
  os << "_" << NormStrategy::kindName(strategy.kind);
  spec.threadsPerBlock = strategy.threadsPerBlock();
  spec.maxRegisters = strategy.maxRegisters;
  spec.strategy = strategy.toAttr(rewriter.getContext());
  bool needsShared = strategy.threadsPerRow > kWarpSize;
  if (needsShared)
    spec.workgroupBuffers.push_back(
        workgroupBufferType({kWarpSize}, rewriter.getF32Type()));
  gpu::GPUFuncOp kernel = createKernel(rewriter, op, spec, operands);
  parameters.bind(kernel);
  if (inKernel.unit)
    bindUnit(inKernel, strategy.vectorWidth);

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(&kernel.front());
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  Value shared =
      needsShared ? Value(kernel.getWorkgroupAttributions().front()) : Value();
  NormKernelEmitter(b, strategy, inKernel)
      .emitGPU(gpu::ThreadIdOp::create(b, gpu::Dimension::x),
               gpu::BlockIdOp::create(b, gpu::Dimension::x), shared);
  gpu::ReturnOp::create(b);
  return kernel;
}

LogicalResult lowerNorm(Operation *op, ConversionPatternRewriter &rewriter,
                        bool cpuTwin, Value input, Value gamma, Value beta,
                        float epsilon, int64_t normalizedRank,
                        bool subtractMean, bool returnStats) {
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  RowView view(b, input, normalizedRank);
  Type elementType = view.elementType();
  NormStrategy strategy = selectNormStrategy(view.staticRowSize, elementType);

  NormProblem problem;
  problem.subtractMean = subtractMean;
  problem.epsilon = epsilon;
  problem.elementType = elementType;
  problem.input = view.matrix;
  problem.gamma = collapsedBuffer(b, gamma, view.paramGroups);
  problem.beta = collapsedBuffer(b, beta, view.paramGroups);
  problem.rows = view.rows;
  problem.rowSize = view.rowSize;
  problem.staticRowSize = view.staticRowSize;
  auto resultType = [&](unsigned i) {
    return cast<RankedTensorType>(op->getResult(i).getType());
  };
  SmallVector<Value> resultBuffers{view.allocResult(b, resultType(0))};
  problem.output = view.outputMatrix(b, resultBuffers[0]);
  if (returnStats) {
    resultBuffers.push_back(view.allocResult(b, resultType(1)));
    resultBuffers.push_back(view.allocResult(b, resultType(2)));
    problem.mean = RowView::statsVector(b, resultBuffers[1]);
    problem.rstd = RowView::statsVector(b, resultBuffers[2]);
  }

  auto results = [&] {
    SmallVector<Value> tensors;
    for (Value buffer : resultBuffers)
      tensors.push_back(RowView::toTensor(b, buffer));
    return tensors;
  };
  if (cpuTwin) {
    NormKernelEmitter(b, strategy, problem).emitCPUTwin();
    rewriter.replaceOp(op, results());
    return success();
  }

  Value blocks = arith::CeilDivUIOp::create(
      b, view.rows, arith::ConstantIndexOp::create(b, strategy.rowsPerBlock));
  SmallVector<Value> operands;
  gpu::GPUFuncOp kernel =
      buildNormKernel(rewriter, op, strategy, problem, operands);
  launchKernel(b, kernel, blocks, strategy.threadsPerBlock(), operands);
  rewriter.replaceOp(op, results());
  return success();
}

/// One kernel for a whole fused unit: the norm's kernel with its input and
/// output paths evaluating the unit's prologue and epilogue per vector.
LogicalResult lowerFusion(FusionOp unit, ValueRange inputs,
                          ConversionPatternRewriter &rewriter, bool cpuTwin) {
  Operation *norm = unit.getNorm();
  auto normType = cast<RankedTensorType>(norm->getOperand(0).getType());
  auto layerNorm = dyn_cast<LayerNormOp>(norm);
  auto rmsNorm = dyn_cast<RMSNormOp>(norm);
  int64_t normalizedRank =
      layerNorm ? layerNorm.getNormalizedRank() : rmsNorm.getNormalizedRank();
  Block &body = unit.getBody().front();
  auto isRowTensor = [&](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape() ==
           normType.getShape();
  };
  auto anchor = llvm::find_if(body.getArguments(), isRowTensor);
  if (anchor == body.getArguments().end())
    return rewriter.notifyMatchFailure(unit, "no row tensor among the inputs");

  ImplicitLocOpBuilder b(unit.getLoc(), rewriter);
  RowView view(b, inputs[anchor->getArgNumber()], normalizedRank);
  NormProblem problem;
  problem.subtractMean = bool(layerNorm);
  problem.epsilon = (layerNorm ? layerNorm.getEpsilon() : rmsNorm.getEpsilon())
                        .convertToFloat();
  problem.elementType = normType.getElementType();
  problem.rows = view.rows;
  problem.rowSize = view.rowSize;
  problem.staticRowSize = view.staticRowSize;
  problem.unit = unit;
  // Inputs that only serve as a linalg.generic's destination are never
  // read: they get no buffer, so their host allocations fold away.
  auto onlyDestination = [](BlockArgument arg) {
    return llvm::all_of(arg.getUses(), [](OpOperand &use) {
      auto generic = dyn_cast<linalg::GenericOp>(use.getOwner());
      return generic && generic.isDpsInit(&use);
    });
  };
  for (auto [arg, input] : llvm::zip(body.getArguments(), inputs))
    problem.unitBuffers.push_back(
        onlyDestination(arg)
            ? Value()
            : collapsedBuffer(b, input,
                              isRowTensor(arg) ? view.matrixGroups
                                               : view.paramGroups));
  auto bufferOf = [&](Value param) {
    return param
               ? problem.unitBuffers[cast<BlockArgument>(param).getArgNumber()]
               : Value();
  };
  problem.gamma =
      bufferOf(layerNorm ? layerNorm.getGamma() : rmsNorm.getGamma());
  problem.beta = bufferOf(layerNorm ? layerNorm.getBeta() : Value());
  SmallVector<Value> resultBuffers;
  for (Type type : unit.getResultTypes()) {
    resultBuffers.push_back(view.allocResult(b, cast<RankedTensorType>(type)));
    problem.unitBuffers.push_back(view.outputMatrix(b, resultBuffers.back()));
  }

  NormStrategy strategy =
      selectNormStrategy(view.staticRowSize, problem.elementType);
  if (cpuTwin) {
    bindUnit(problem, strategy.vectorWidth);
    NormKernelEmitter(b, strategy, problem).emitCPUTwin();
  } else {
    Value blocks = arith::CeilDivUIOp::create(
        b, view.rows, arith::ConstantIndexOp::create(b, strategy.rowsPerBlock));
    SmallVector<Value> operands;
    gpu::GPUFuncOp kernel =
        buildNormKernel(rewriter, norm, strategy, problem, operands);
    launchKernel(b, kernel, blocks, strategy.threadsPerBlock(), operands);
  }
  SmallVector<Value> results;
  for (Value buffer : resultBuffers)
    results.push_back(RowView::toTensor(b, buffer));
  rewriter.replaceOp(unit, results);
  return success();
}

/// Shared by the two norm patterns: whether to emit the CPU twin.
template <typename Op> struct NormToGPUPattern : OpConversionPattern<Op> {
  NormToGPUPattern(MLIRContext *context, bool cpuTwin)
      : OpConversionPattern<Op>(context), cpuTwin(cpuTwin) {}
  bool cpuTwin;
};

struct LayerNormToGPU : NormToGPUPattern<LayerNormOp> {
  using NormToGPUPattern::NormToGPUPattern;
  LogicalResult
  matchAndRewrite(LayerNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    return lowerNorm(op, rewriter, cpuTwin, adaptor.getInput(),
                     adaptor.getGamma(), adaptor.getBeta(),
                     op.getEpsilon().convertToFloat(), op.getNormalizedRank(),
                     /*subtractMean=*/true, op.getReturnStats());
  }
};

struct RMSNormToGPU : NormToGPUPattern<RMSNormOp> {
  using NormToGPUPattern::NormToGPUPattern;
  LogicalResult
  matchAndRewrite(RMSNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    return lowerNorm(op, rewriter, cpuTwin, adaptor.getInput(),
                     adaptor.getGamma(), Value(),
                     op.getEpsilon().convertToFloat(), op.getNormalizedRank(),
                     /*subtractMean=*/false,
                     /*returnStats=*/false);
  }
};

struct FusionToGPU : NormToGPUPattern<FusionOp> {
  using NormToGPUPattern::NormToGPUPattern;
  LogicalResult
  matchAndRewrite(FusionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    return lowerFusion(op, adaptor.getInputs(), rewriter, cpuTwin);
  }
};

/// The message for an fff op left without a GPU kernel.
std::string whyNoGPUKernel(Operation *op) {
  if (auto unit = dyn_cast<FusionOp>(op))
    return "has no GPU kernel yet: it contains " + unsupportedOnGPU(unit);
  if (isa<TreeFFNOp, LeafTreeFFNOp>(op))
    return "has no GPU kernel for " + whyTreeOpHasNoGPUKernel(op);
  return "has no GPU lowering yet";
}

/// Replaces transcendental math ops (erf, tanh, exp, ...) in kernels and
/// their twins by MLIR's f32 polynomial approximations. On the GPU they
/// would otherwise become libdevice calls, which link only where the CUDA
/// toolkit is found when the pipeline runs; the twins get the same
/// arithmetic, so the numeric tests check the approximations too.
LogicalResult approximateKernelMath(ModuleOp module) {
  RewritePatternSet patterns(module.getContext());
  populateMathPolynomialApproximationPatterns(patterns,
                                              [](StringRef) { return true; });
  FrozenRewritePatternSet frozen(std::move(patterns));
  SmallVector<Operation *> scopes;
  module.walk([&](Operation *op) {
    if (isa<gpu::GPUModuleOp>(op) || op->hasAttr(kGPUTwinAttrName))
      scopes.push_back(op);
  });
  for (Operation *scope : scopes) {
    scope->removeAttr(kGPUTwinAttrName);
    if (failed(applyPatternsGreedily(scope, frozen)))
      return scope->emitError("math approximation did not converge");
  }
  return success();
}

struct ConvertFFFToGPUPass
    : fff::impl::ConvertFFFToGPUBase<ConvertFFFToGPUPass> {
  using ConvertFFFToGPUBase::ConvertFFFToGPUBase;

  void runOnOperation() override {
    ConversionTarget target(getContext());
    // Norms inside a fused unit wait for the unit's own kernel.
    target.addDynamicallyLegalOp<LayerNormOp, RMSNormOp>([](Operation *op) {
      return op->getParentOfType<FusionOp>() != nullptr;
    });
    // Units the kernel emitter can evaluate become one kernel; the others
    // stay, and are reported below (or run on the CPU in twin mode). So do
    // tree ops whose shapes no tree kernel takes.
    target.addDynamicallyLegalOp<FusionOp>(
        [](FusionOp op) { return !unsupportedOnGPU(op).empty(); });
    target.addDynamicallyLegalOp<TreeFFNOp, LeafTreeFFNOp>(
        [](Operation *op) { return !whyTreeOpHasNoGPUKernel(op).empty(); });
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    if (failed(populateFFFToGPUPatterns(patterns, cpuTwin, treeVariant,
                                        treeStaging))) {
      getOperation().emitError("unknown tree-variant '")
          << treeVariant << "'; expected auto, latency or throughput";
      return signalPassFailure();
    }
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))) ||
        failed(approximateKernelMath(getOperation())))
      return signalPassFailure();
    if (cpuTwin)
      return; // what has no kernel takes the CPU path after this pass
    // Say so plainly rather than let bufferization trip over the op later.
    WalkResult unsupported = getOperation()->walk([](Operation *op) {
      if (!isa_and_present<FFFDialect>(op->getDialect()) ||
          op->getParentOfType<FusionOp>())
        return WalkResult::advance();
      op->emitOpError(whyNoGPUKernel(op)) << "; use --fff-cpu-pipeline";
      return WalkResult::interrupt();
    });
    if (unsupported.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

LogicalResult fff::populateFFFToGPUPatterns(RewritePatternSet &patterns,
                                            bool cpuTwin, StringRef treeVariant,
                                            bool treeStaging) {
  patterns.add<LayerNormToGPU, RMSNormToGPU, FusionToGPU>(patterns.getContext(),
                                                          cpuTwin);
  return populateTreeOpsToGPUPatterns(patterns, cpuTwin, treeVariant,
                                      treeStaging);
}

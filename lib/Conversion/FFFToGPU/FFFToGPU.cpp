//===- FFFToGPU.cpp - fff norms to GPU kernels ------------------*- C++ -*-===//
//
// Lowers each normalization to one `gpu.launch` whose body is the kernel,
// written with the strategy `selectNormStrategy` picks. Kernel outlining,
// NVVM conversion and PTX generation are upstream passes run by the GPU
// pipeline afterwards.
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/FFFToGPU/FFFToGPU.h"

#include "fff/Conversion/FFFToGPU/NormStrategy.h"
#include "fff/Conversion/Passes.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Transforms/DialectConversion.h"

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
};

/// Emits the body of one norm kernel inside a `gpu.launch`.
class NormKernelEmitter {
public:
  NormKernelEmitter(ImplicitLocOpBuilder &b, const NormStrategy &strategy,
                    const NormProblem &problem, Value sharedPartials)
      : b(b), s(strategy), p(problem), sharedPartials(sharedPartials) {}

  void emit(Value threadId, Value blockId) {
    Value threadsPerRow = index(s.threadsPerRow);
    lane = arith::RemUIOp::create(b, threadId, threadsPerRow);
    Value rowInBlock = arith::DivUIOp::create(b, threadId, threadsPerRow);
    row = arith::AddIOp::create(
        b, arith::MulIOp::create(b, blockId, index(s.rowsPerBlock)),
        rowInBlock);
    invRowSize = arith::DivFOp::create(
        b, f32(1.0),
        arith::UIToFPOp::create(
            b, b.getF32Type(),
            arith::IndexCastUIOp::create(b, b.getI64Type(), p.rowSize)));
    vectors = arith::DivUIOp::create(b, p.rowSize, index(s.vectorWidth));

    // Only warp-per-row blocks can hold rows past the end; whole warps share
    // a row, so the branch never splits a warp's shuffles, and the other
    // strategies (with barriers) launch exactly one block per row.
    if (s.rowsPerBlock == 1) {
      emitRow();
      return;
    }
    Value inRange =
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, row, p.rows);
    scf::IfOp::create(b, inRange, [&](OpBuilder &nested, Location) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(nested.getInsertionBlock(),
                          nested.getInsertionPoint());
      emitRow();
      scf::YieldOp::create(b);
    });
  }

private:
  //===--- Small builders -------------------------------------------------===//

  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value f32(double v) {
    return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
  }
  VectorType vectorType(Type elementType) {
    return VectorType::get({s.vectorWidth}, elementType);
  }
  Value splat(Value scalar) {
    return vector::BroadcastOp::create(b, vectorType(b.getF32Type()), scalar);
  }
  Value sum(Value vector) {
    return vector::ReductionOp::create(b, vector::CombiningKind::ADD, vector);
  }

  /// Loads `vectorWidth` elements at vector index `chunk` of a row (or of a
  /// parameter when `rowIndex` is null), widened to f32.
  Value loadVector(Value buffer, Value rowIndex, Value chunk) {
    return widen(loadRaw(buffer, rowIndex, chunk));
  }

  /// f16/bf16 vectors -> f32; f32 passes through.
  Value widen(Value vector) {
    if (p.elementType.isF32())
      return vector;
    return arith::ExtFOp::create(b, vectorType(b.getF32Type()), vector);
  }

  /// The same load, in the storage type.
  Value loadRaw(Value buffer, Value rowIndex, Value chunk) {
    Value column = arith::MulIOp::create(b, chunk, index(s.vectorWidth));
    SmallVector<Value> indices;
    if (rowIndex)
      indices.push_back(rowIndex);
    indices.push_back(column);
    return vector::LoadOp::create(b, vectorType(p.elementType), buffer,
                                  indices, /*nontemporal=*/false, alignment());
  }

  void storeVector(Value value, Value chunk) {
    Value column = arith::MulIOp::create(b, chunk, index(s.vectorWidth));
    if (!p.elementType.isF32())
      value = arith::TruncFOp::create(b, vectorType(p.elementType), value);
    vector::StoreOp::create(b, value, p.output, ValueRange{row, column},
                            /*nontemporal=*/false, alignment());
  }

  /// The alignment of a whole vector: rows start at multiples of the vector
  /// width, so every access is aligned to its own size.
  llvm::MaybeAlign alignment() {
    return llvm::MaybeAlign(s.vectorWidth *
                            (p.elementType.getIntOrFloatBitWidth() / 8));
  }

  //===--- Reductions across the threads of a row -------------------------===//

  Value warpSum(Value value) {
    for (int32_t offset = kWarpSize / 2; offset > 0; offset /= 2) {
      Value other = gpu::ShuffleOp::create(b, value, offset, kWarpSize,
                                           gpu::ShuffleMode::XOR)
                        .getShuffleResult();
      value = arith::AddFOp::create(b, value, other);
    }
    return value;
  }

  /// The sum of `value` over the row's threads, in every thread.
  Value rowSum(Value value) {
    value = warpSum(value);
    if (s.threadsPerRow == kWarpSize)
      return value;
    // Each warp publishes its partial sum; then every warp reads all of them
    // and reduces them again with shuffles, so all threads end up with the
    // total without a second broadcast through shared memory.
    Value warpSize = index(kWarpSize);
    Value laneInWarp = arith::RemUIOp::create(b, lane, warpSize);
    Value warp = arith::DivUIOp::create(b, lane, warpSize);
    Value isLeader = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                           laneInWarp, index(0));
    scf::IfOp::create(b, isLeader, [&](OpBuilder &nested, Location loc) {
      memref::StoreOp::create(nested, loc, value, sharedPartials, warp);
      scf::YieldOp::create(nested, loc);
    });
    gpu::BarrierOp::create(b);
    Value hasPartial =
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, laneInWarp,
                              index(s.threadsPerRow / kWarpSize));
    Value partial = scf::IfOp::create(
                        b, hasPartial,
                        [&](OpBuilder &nested, Location loc) {
                          Value v = memref::LoadOp::create(
                              nested, loc, sharedPartials, laneInWarp);
                          scf::YieldOp::create(nested, loc, v);
                        },
                        [&](OpBuilder &nested, Location loc) {
                          Value zero = arith::ConstantOp::create(
                              nested, loc, nested.getF32FloatAttr(0.0));
                          scf::YieldOp::create(nested, loc, zero);
                        })
                        .getResult(0);
    // The next reduction reuses the buffer only after everyone has read it.
    gpu::BarrierOp::create(b);
    return warpSum(partial);
  }

  //===--- The row ---------------------------------------------------------===//

  /// mean (0 for rms_norm) and rstd of the row, from per-thread partials of
  /// sum(x - shift) and sum((x - shift)^2), where `shift` is 0 or a pivot.
  std::pair<Value, Value> statistics(Value shiftedSum, Value shiftedSquares,
                                     Value shift) {
    Value squares = arith::MulFOp::create(b, rowSum(shiftedSquares), invRowSize);
    if (!p.subtractMean)
      return {f32(0.0), rsqrt(squares)};
    Value meanShift = arith::MulFOp::create(b, rowSum(shiftedSum), invRowSize);
    Value variance = arith::SubFOp::create(
        b, squares, arith::MulFOp::create(b, meanShift, meanShift));
    variance = arith::MaximumFOp::create(b, variance, f32(0.0));
    return {arith::AddFOp::create(b, shift, meanShift), rsqrt(variance)};
  }

  /// 1 / sqrt(variance + epsilon), correctly rounded (sqrt.rn, div.rn).
  /// math.rsqrt and llvm.sqrt both become libdevice calls in the NVVM
  /// conversion, which only link where the CUDA toolkit is found at compile
  /// time; the NVVM intrinsic needs nothing.
  Value rsqrt(Value variance) {
    Value root = LLVM::CallIntrinsicOp::create(
                     b, b.getF32Type(), b.getStringAttr("llvm.nvvm.sqrt.rn.f"),
                     ValueRange{arith::AddFOp::create(b, variance,
                                                      f32(p.epsilon))})
                     .getResult(0);
    return arith::DivFOp::create(b, f32(1.0), root);
  }

  /// y = (x - mean) * rstd * gamma + beta for one vector, stored.
  void normalizeAndStore(Value x, Value chunk, Value mean, Value rstd) {
    Value y = arith::MulFOp::create(
        b, arith::SubFOp::create(b, x, splat(mean)), splat(rstd));
    if (p.gamma)
      y = arith::MulFOp::create(b, y, loadVector(p.gamma, Value(), chunk));
    if (p.beta)
      y = arith::AddFOp::create(b, y, loadVector(p.beta, Value(), chunk));
    storeVector(y, chunk);
  }

  void storeStatistics(Value mean, Value rstd) {
    if (!p.mean)
      return;
    Value first =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, index(0));
    scf::IfOp::create(b, first, [&](OpBuilder &nested, Location loc) {
      memref::StoreOp::create(nested, loc, mean, p.mean, row);
      memref::StoreOp::create(nested, loc, rstd, p.rstd, row);
      scf::YieldOp::create(nested, loc);
    });
  }

  void emitRow() {
    if (s.kind == NormStrategy::Kind::Looped)
      emitLoopedRow();
    else
      emitRegisterRow();
  }

  /// The row is loaded once into registers: thread `lane` holds vectors
  /// lane, lane + T, lane + 2T, ... (T threads), so that each load
  /// instruction of a warp reads one contiguous span. Values stay in their
  /// storage type (two 16-bit values a register) and are widened at each
  /// use. The variance is the exact two-pass one.
  void emitRegisterRow() {
    SmallVector<Value> chunks, valid, values;
    Value zeros = arith::ConstantOp::create(
        b, DenseElementsAttr::get(vectorType(p.elementType),
                                  b.getFloatAttr(p.elementType, 0.0)));
    Value alwaysInRow = arith::ConstantIntOp::create(b, 1, 1);
    for (int64_t i = 0; i < s.vectorsPerThread; ++i) {
      Value chunk = arith::AddIOp::create(b, lane, index(i * s.threadsPerRow));
      chunks.push_back(chunk);
      // Register-resident rows have a static size, so only the last vectors
      // of a thread can fall past the row's end; the others load directly.
      if ((i + 1) * s.threadsPerRow * s.vectorWidth <= *p.staticRowSize) {
        valid.push_back(alwaysInRow);
        values.push_back(loadRaw(p.input, row, chunk));
        continue;
      }
      // Past the end, load the row's last vector instead (always in bounds)
      // and zero it: no branch, so the row stays in registers.
      Value inRow =
          arith::CmpIOp::create(b, arith::CmpIPredicate::ult, chunk, vectors);
      Value lastChunk = arith::SubIOp::create(b, vectors, index(1));
      Value clamped = arith::MinUIOp::create(b, chunk, lastChunk);
      Value x = arith::SelectOp::create(b, inRow,
                                        loadRaw(p.input, row, clamped), zeros);
      valid.push_back(inRow);
      values.push_back(x);
    }

    Value mean = f32(0.0);
    if (p.subtractMean) {
      Value partial = f32(0.0);
      for (Value x : values)
        partial = arith::AddFOp::create(b, partial, sum(widen(x)));
      mean = arith::MulFOp::create(b, rowSum(partial), invRowSize);
    }
    Value partialSquares = f32(0.0);
    for (auto [x, inRow] : llvm::zip(values, valid)) {
      // Padding lanes hold zeros, which would add mean^2 once centred.
      Value centred = arith::SubFOp::create(b, widen(x), splat(mean));
      Value squares = sum(arith::MulFOp::create(b, centred, centred));
      squares = arith::SelectOp::create(b, inRow, squares, f32(0.0));
      partialSquares = arith::AddFOp::create(b, partialSquares, squares);
    }
    Value variance =
        arith::MulFOp::create(b, rowSum(partialSquares), invRowSize);
    Value rstd = rsqrt(variance);

    for (auto [x, chunk, inRow] : llvm::zip(values, chunks, valid)) {
      scf::IfOp::create(b, inRow, [&](OpBuilder &nested, Location) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nested.getInsertionBlock(),
                            nested.getInsertionPoint());
        normalizeAndStore(widen(x), chunk, mean, rstd);
        scf::YieldOp::create(b);
      });
    }
    storeStatistics(mean, rstd);
  }

  /// Rows too long for registers: one pass accumulates per-thread sums of
  /// values shifted by the row's first element (so the variance does not
  /// cancel when |mean| >> stddev), a second pass normalizes.
  void emitLoopedRow() {
    Value shift = f32(0.0);
    if (p.subtractMean) {
      Value first = memref::LoadOp::create(b, p.input, ValueRange{row, index(0)});
      shift = p.elementType.isF32()
                  ? first
                  : arith::ExtFOp::create(b, b.getF32Type(), first).getResult();
    }
    Value step = index(s.threadsPerRow);
    auto sums = scf::ForOp::create(
        b, lane, vectors, step, ValueRange{f32(0.0), f32(0.0)},
        [&](OpBuilder &nested, Location, Value chunk, ValueRange acc) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nested.getInsertionBlock(),
                              nested.getInsertionPoint());
          Value x = arith::SubFOp::create(b, loadVector(p.input, row, chunk),
                                          splat(shift));
          Value s1 = arith::AddFOp::create(b, acc[0], sum(x));
          Value s2 = arith::AddFOp::create(
              b, acc[1], sum(arith::MulFOp::create(b, x, x)));
          scf::YieldOp::create(b, ValueRange{s1, s2});
        });
    auto [mean, rstd] =
        statistics(sums.getResult(0), sums.getResult(1), shift);
    scf::ForOp::create(
        b, lane, vectors, step, ValueRange{},
        [&](OpBuilder &nested, Location, Value chunk, ValueRange) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nested.getInsertionBlock(),
                              nested.getInsertionPoint());
          normalizeAndStore(loadVector(p.input, row, chunk), chunk, mean, rstd);
          scf::YieldOp::create(b);
        });
    storeStatistics(mean, rstd);
  }

  ImplicitLocOpBuilder &b;
  const NormStrategy &s;
  const NormProblem &p;
  Value sharedPartials;
  Value lane, row, invRowSize, vectors;
};

//===----------------------------------------------------------------------===//
// Host side: views, buffers and the launch
//===----------------------------------------------------------------------===//

/// Collapses `tensor` to rank `groups.size()` and returns it as a buffer.
Value collapsedBuffer(ImplicitLocOpBuilder &b, Value tensor,
                      ArrayRef<ReassociationIndices> groups) {
  if (!tensor)
    return Value();
  auto type = cast<RankedTensorType>(tensor.getType());
  if (type.getRank() != int64_t(groups.size()))
    tensor = tensor::CollapseShapeOp::create(b, tensor, groups);
  auto collapsed = cast<RankedTensorType>(tensor.getType());
  return bufferization::ToBufferOp::create(
      b, MemRefType::get(collapsed.getShape(), collapsed.getElementType()),
      tensor, /*read_only=*/true);
}

/// [[0..lead-1], [lead..rank-1]] (rows, then the normalized dims); with no
/// leading dims, a unit row dim is added by expanding first.
struct RowView {
  RowView(ImplicitLocOpBuilder &b, Value input, int64_t normalizedRank)
      : normalizedRank(normalizedRank) {
    auto type = cast<RankedTensorType>(input.getType());
    originalSizes = tensor::getMixedSizes(b, b.getLoc(), input);
    rank = type.getRank();
    lead = rank - normalizedRank;
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
    rowsType = matrixType;
  }

  /// A fresh buffer shaped like `resultType` (an op result), with the
  /// input's dynamic sizes; results are allocated in their final shape so
  /// that bufferization can hand them to the caller as out-params.
  Value allocResult(ImplicitLocOpBuilder &b, RankedTensorType resultType) const {
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
            b, output, ArrayRef<ReassociationIndices>{dimRange(0, type.getRank())});
      auto flatType = cast<MemRefType>(flat.getType());
      return memref::ExpandShapeOp::create(
          b, MemRefType::get({1, flatType.getDimSize(0)}, flatType.getElementType()),
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

  int64_t normalizedRank;
  SmallVector<OpFoldResult> originalSizes;
  int64_t rank, lead;
  bool unitRowAdded = false;
  SmallVector<ReassociationIndices> matrixGroups, paramGroups;
  Value matrix, rows, rowSize;
  std::optional<int64_t> staticRowSize;
  MemRefType rowsType;
};

LogicalResult lowerNorm(Operation *op, ConversionPatternRewriter &rewriter,
                        Value input, Value gamma, Value beta, float epsilon,
                        int64_t normalizedRank, bool subtractMean,
                        bool returnStats) {
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  RowView view(b, input, normalizedRank);
  auto elementType = view.rowsType.getElementType();
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

  Value one = arith::ConstantIndexOp::create(b, 1);
  Value rowsPerBlock = arith::ConstantIndexOp::create(b, strategy.rowsPerBlock);
  Value blocks = arith::CeilDivUIOp::create(b, view.rows, rowsPerBlock);
  Value threads =
      arith::ConstantIndexOp::create(b, strategy.threadsPerBlock());
  auto sharedType = MemRefType::get(
      {kWarpSize}, b.getF32Type(), MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(b.getContext(),
                                 gpu::AddressSpace::Workgroup));
  bool needsShared = strategy.threadsPerRow > kWarpSize;
  std::string kernelName = (op->getName().stripDialect() + "_" +
                            NormStrategy::kindName(strategy.kind))
                               .str();
  auto launch = gpu::LaunchOp::create(
      b, blocks, one, one, threads, one, one, /*dynamicSharedMemorySize=*/Value(),
      /*asyncTokenType=*/Type(), /*asyncDependencies=*/ValueRange(),
      needsShared ? TypeRange{sharedType} : TypeRange{}, TypeRange{},
      Value(), Value(), Value(), FlatSymbolRefAttr(),
      FlatSymbolRefAttr::get(b.getContext(), kernelName));
  launch->setAttr("fff.strategy", strategy.toAttr(b.getContext()));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&launch.getBody().front());
    Value shared =
        needsShared ? Value(launch.getWorkgroupAttributions().front()) : Value();
    NormKernelEmitter(b, strategy, problem, shared)
        .emit(launch.getThreadIds().x, launch.getBlockIds().x);
    gpu::TerminatorOp::create(b);
  }

  SmallVector<Value> results;
  for (Value buffer : resultBuffers)
    results.push_back(RowView::toTensor(b, buffer));
  rewriter.replaceOp(op, results);
  return success();
}

struct LayerNormToGPU : OpConversionPattern<LayerNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LayerNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    return lowerNorm(op, rewriter, adaptor.getInput(), adaptor.getGamma(),
                     adaptor.getBeta(), op.getEpsilon().convertToFloat(),
                     op.getNormalizedRank(), /*subtractMean=*/true,
                     op.getReturnStats());
  }
};

struct RMSNormToGPU : OpConversionPattern<RMSNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RMSNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    return lowerNorm(op, rewriter, adaptor.getInput(), adaptor.getGamma(),
                     Value(), op.getEpsilon().convertToFloat(),
                     op.getNormalizedRank(), /*subtractMean=*/false,
                     /*returnStats=*/false);
  }
};

struct ConvertFFFToGPUPass
    : fff::impl::ConvertFFFToGPUBase<ConvertFFFToGPUPass> {
  void runOnOperation() override {
    ConversionTarget target(getContext());
    target.addIllegalOp<LayerNormOp, RMSNormOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    populateFFFNormsToGPUPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();
    // Say so plainly rather than let bufferization trip over the op later.
    WalkResult unsupported = getOperation()->walk([](Operation *op) {
      if (!isa<FFFDialect>(op->getDialect()))
        return WalkResult::advance();
      op->emitOpError("has no GPU lowering yet; use --fff-cpu-pipeline");
      return WalkResult::interrupt();
    });
    if (unsupported.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

void fff::populateFFFNormsToGPUPatterns(RewritePatternSet &patterns) {
  patterns.add<LayerNormToGPU, RMSNormToGPU>(patterns.getContext());
}

//===- KernelStrategy.cpp - how each op maps onto a GPU kernel --*- C++ -*-===//

#include "fff/Conversion/FFFToGPU/KernelStrategy.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/MathExtras.h"

#include <string>

using namespace mlir;
using namespace fff;

namespace {
/// Bytes per load: 128-bit accesses (ld.global.v4.f32 / v8 of 16-bit types).
constexpr int64_t kLoadBytes = 16;
/// At most this many f32 row values per thread stay in registers; past it
/// ptxas starts spilling once the kernel's other state is counted.
constexpr int64_t kRegisterValuesPerThread = 32;
/// A warp keeps rows of up to kWarpSize * kWarpRowVectors vectors.
constexpr int64_t kWarpRowVectors = 8;
constexpr int64_t kWarpRowsPerBlock = 4;
/// Register-resident rows use at most this many threads: past 512, the
/// 64K-register file leaves under 64 registers a thread.
constexpr int64_t kMaxRegisterRowThreads = 512;
constexpr int64_t kLoopedThreads = 512;
} // namespace

StringRef NormStrategy::kindName(Kind kind) {
  switch (kind) {
  case Kind::WarpPerRow:
    return "warp_per_row";
  case Kind::BlockPerRow:
    return "block_per_row";
  case Kind::Looped:
    return "looped";
  }
  llvm_unreachable("unknown norm strategy");
}

DictionaryAttr NormStrategy::toAttr(MLIRContext *context) const {
  Builder b(context);
  return b.getDictionaryAttr({
      b.getNamedAttr("kind", b.getStringAttr(kindName(kind))),
      b.getNamedAttr("vector_width", b.getI64IntegerAttr(vectorWidth)),
      b.getNamedAttr("threads_per_row", b.getI64IntegerAttr(threadsPerRow)),
      b.getNamedAttr("rows_per_block", b.getI64IntegerAttr(rowsPerBlock)),
      b.getNamedAttr("vectors_per_thread",
                     b.getI64IntegerAttr(vectorsPerThread)),
      b.getNamedAttr("max_registers", b.getI64IntegerAttr(maxRegisters)),
  });
}

NormStrategy fff::selectNormStrategy(std::optional<int64_t> rowSize,
                                     Type elementType) {
  if (!rowSize)
    return {NormStrategy::Kind::Looped, /*vectorWidth=*/1, kLoopedThreads,
            /*rowsPerBlock=*/1, /*vectorsPerThread=*/0};

  // The widest load that divides the row keeps every row start aligned; odd
  // sizes fall back to narrower loads rather than misaligned wide ones.
  int64_t vectorWidth = kLoadBytes / (elementType.getIntOrFloatBitWidth() / 8);
  while (*rowSize % vectorWidth != 0)
    vectorWidth /= 2;
  int64_t vectors = *rowSize / vectorWidth;

  if (vectors <= kWarpSize * kWarpRowVectors &&
      vectorWidth * llvm::divideCeilSigned(vectors, kWarpSize) <=
          kRegisterValuesPerThread)
    return {NormStrategy::Kind::WarpPerRow, vectorWidth, kWarpSize,
            kWarpRowsPerBlock, llvm::divideCeilSigned(vectors, kWarpSize)};

  // Enough warps that each thread holds at most the register budget.
  int64_t vectorsPerThreadLimit =
      std::max<int64_t>(1, kRegisterValuesPerThread / vectorWidth);
  int64_t threads = llvm::alignTo(
      llvm::divideCeilSigned(vectors, vectorsPerThreadLimit), kWarpSize);
  threads = std::max<int64_t>(threads, 4 * kWarpSize);
  if (threads <= kMaxRegisterRowThreads)
    return {NormStrategy::Kind::BlockPerRow, vectorWidth, threads,
            /*rowsPerBlock=*/1, llvm::divideCeilSigned(vectors, threads)};

  return {NormStrategy::Kind::Looped, vectorWidth, kLoopedThreads,
          /*rowsPerBlock=*/1, /*vectorsPerThread=*/0};
}

namespace {
/// Loads a lane has in flight per step of a walk over x: an x vector and
/// one vector of each row being routed (1, or 3 when a step decides two
/// levels) per input vector; 64 registers' worth.
constexpr int64_t kTreeInputLoadsPerStep = 16;
/// A lane keeps x in registers up to this many 32-bit registers' worth.
constexpr int64_t kTreeInputRegisters = 16;
/// A lane sums at most 32 output values at once, in steps over its part of
/// the output row. Each step sums every recorded row, unrolled for up to 20
/// of them, whose coefficients and addresses then stay in registers across
/// the steps; otherwise in a loop. The loads in flight per step are at most
/// 36 when one step covers the lane's output, and 16 when the steps are a
/// loop: past those, ptxas spills.
constexpr int64_t kTreeOutputValuesPerStep = 32;
constexpr int64_t kTreeMaxUnrolledEntries = 20;
constexpr int64_t kTreeOneStepOutputLoads = 36;
constexpr int64_t kTreeLoopedOutputLoads = 16;
/// With the loads in flight above: 16 warps a multiprocessor.
constexpr int64_t kTreeRegisters = 128;
/// Latency kernels take four warps a block, so that a batch of a few
/// hundred tokens still spreads over every multiprocessor; throughput
/// kernels eight, to share each block's staged rows among more warps.
constexpr int64_t kTreeLatencyTokensPerBlock = 4;
constexpr int64_t kTreeThroughputTokensPerBlock = 8;
/// Shared memory for the recorded rows.
constexpr int64_t kTreeEntryBytes = 32 * 1024;
/// Shared memory a block may use in all, under the 48 KiB any block gets
/// without opting in.
constexpr int64_t kTreeSharedBytes = 46 * 1024;
/// Staging fewer levels than this does not pay for the copy and barrier.
constexpr int64_t kTreeMinStagedLevels = 2;
constexpr int64_t kRecordBytes = sizeof(float) + sizeof(int32_t);
/// A leaf's hidden values stay in registers: one f32 each, per lane.
constexpr int64_t kMaxHiddenWidth = 64;

/// The widest vector of at most 16 bytes that divides `width`.
int64_t vectorWidthFor(std::optional<int64_t> width, Type elementType) {
  if (!width)
    return 1;
  int64_t vectorWidth = kLoadBytes / (elementType.getIntOrFloatBitWidth() / 8);
  while (*width % vectorWidth != 0)
    vectorWidth /= 2;
  return vectorWidth;
}

/// A lane's walk over a row of `width` elements, at most `maxPerStep`
/// vectors a step.
TreeStrategy::LaneWalk laneWalk(std::optional<int64_t> width, Type elementType,
                                int64_t maxPerStep) {
  int64_t vectorWidth = vectorWidthFor(width, elementType);
  if (!width)
    return {vectorWidth, /*vectorsPerStep=*/1, /*steps=*/std::nullopt,
            /*ragged=*/true};
  int64_t vectors = *width / vectorWidth;
  int64_t perLane = llvm::divideCeilSigned(vectors, kWarpSize);
  int64_t perStep = std::max<int64_t>(1, std::min(perLane, maxPerStep));
  int64_t steps = llvm::divideCeilSigned(perLane, perStep);
  return {vectorWidth, perStep, steps,
          /*ragged=*/steps * perStep * kWarpSize != vectors};
}
} // namespace

DictionaryAttr TreeStrategy::LaneWalk::toAttr(MLIRContext *context) const {
  Builder b(context);
  return b.getDictionaryAttr({
      b.getNamedAttr("vector_width", b.getI64IntegerAttr(vectorWidth)),
      b.getNamedAttr("vectors_per_step", b.getI64IntegerAttr(vectorsPerStep)),
      b.getNamedAttr("steps", steps ? Attribute(b.getI64IntegerAttr(*steps))
                                    : Attribute(b.getStringAttr("dynamic"))),
  });
}

StringRef TreeStrategy::variantName(Variant variant) {
  return variant == Variant::Latency ? "latency" : "throughput";
}

DictionaryAttr TreeStrategy::toAttr(MLIRContext *context) const {
  Builder b(context);
  SmallVector<NamedAttribute> fields{
      b.getNamedAttr("kind", b.getStringAttr("warp_per_token")),
      b.getNamedAttr("variant", b.getStringAttr(variantName(variant))),
      b.getNamedAttr("in", in.toAttr(context)),
      b.getNamedAttr("out", out.toAttr(context)),
      b.getNamedAttr("input_in_registers", b.getBoolAttr(inputInRegisters)),
      b.getNamedAttr("unroll_entries", b.getBoolAttr(unrollEntries)),
      b.getNamedAttr("levels_per_step", b.getI64IntegerAttr(levelsPerStep)),
      b.getNamedAttr("staged_levels", b.getI64IntegerAttr(stagedLevels)),
      b.getNamedAttr("tokens_per_block", b.getI64IntegerAttr(tokensPerBlock)),
      b.getNamedAttr("resident_blocks", b.getI64IntegerAttr(residentBlocks)),
      b.getNamedAttr("entries_per_token", b.getI64IntegerAttr(entriesPerToken)),
      b.getNamedAttr("max_registers", b.getI64IntegerAttr(maxRegisters)),
  };
  if (fusedRowBytesPerToken)
    fields.push_back(
        b.getNamedAttr("fused_row_bytes_per_token",
                       b.getI64IntegerAttr(fusedRowBytesPerToken)));
  if (gradOutput)
    fields.push_back(
        b.getNamedAttr("grad_output", gradOutput->toAttr(context)));
  if (gradRowsPerStep > 1)
    fields.push_back(b.getNamedAttr("grad_rows_per_step",
                                    b.getI64IntegerAttr(gradRowsPerStep)));
  if (dxUnitsPerStep)
    fields.append({b.getNamedAttr("dx_units_per_step",
                                  b.getI64IntegerAttr(dxUnitsPerStep)),
                   b.getNamedAttr("hidden_units_per_pass",
                                  b.getI64IntegerAttr(hiddenUnitsPerPass))});
  return b.getDictionaryAttr(fields);
}

/// The most top levels whose rows fit in `bytes` of shared memory, if that
/// is enough to pay; else 0.
static int64_t levelsToStage(const TreeShape &shape, int64_t bytes) {
  if (shape.isLeafMLP() || !shape.inWidth || !shape.outWidth)
    return 0;
  int64_t rowBytes = (*shape.inWidth + *shape.outWidth) *
                     shape.elementType.getIntOrFloatBitWidth() / 8;
  int64_t levels = 0;
  while (levels < shape.levels &&
         shape.trees * ((int64_t(1) << (levels + 1)) - 1) * rowBytes <= bytes)
    ++levels;
  return levels >= kTreeMinStagedLevels ? levels : 0;
}

NormStrategy fff::selectWarpNormStrategy(int64_t rowSize, Type elementType) {
  NormStrategy strategy = selectNormStrategy(rowSize, elementType);
  if (strategy.kind == NormStrategy::Kind::WarpPerRow)
    return strategy;
  // Too long for one warp's registers: the warp loops over the row, with
  // the loads as wide as the size allows.
  int64_t vectorWidth = kLoadBytes / (elementType.getIntOrFloatBitWidth() / 8);
  while (rowSize % vectorWidth != 0)
    vectorWidth /= 2;
  return {NormStrategy::Kind::Looped, vectorWidth, kWarpSize,
          /*rowsPerBlock=*/1, /*vectorsPerThread=*/0};
}

namespace {
/// A backward thread keeps, per row element it owns, x and dy (held in
/// their storage type, but LLVM keeps the widened values live across the
/// row's sums) and two f32 partial sums (dy * xhat, dy): 4 registers an
/// element. Row state gets 64 of the 128; past that ptxas spills (checked
/// by test/Pipelines/norm-grad-kernels-ptxas.py).
constexpr int64_t kGradRegistersPerElement = 4;
constexpr int64_t kGradRowRegisters = 64;
/// What each further row buffer of a fused unit takes from the row state:
/// its 64-bit pointer and row address (f32 LayerNorm at 4096, with a mask
/// and a residual gradient, spilled at 64).
constexpr int64_t kGradRegistersPerExtraStream = 4;
constexpr int64_t kGradMaxRegisters = 128;
/// Warp-per-row backward blocks: eight rows in flight a block.
constexpr int64_t kGradWarpsPerBlock = 8;
/// At 128 registers a multiprocessor holds 512 threads.
constexpr int64_t kGradThreadsPerMultiprocessor = 512;
constexpr int64_t kGradLoopedThreads = 256;
constexpr int64_t kColumnSumThreads = 256;
} // namespace

DictionaryAttr NormGradStrategy::toAttr(MLIRContext *context) const {
  Builder b(context);
  SmallVector<NamedAttribute> entries(row.toAttr(context).getValue());
  entries.push_back(
      b.getNamedAttr("partial_blocks", b.getI64IntegerAttr(partialBlocks)));
  return b.getDictionaryAttr(entries);
}

DictionaryAttr NormGradStrategy::columnSumsAttr(MLIRContext *context) const {
  Builder b(context);
  return b.getDictionaryAttr({
      b.getNamedAttr("kind", b.getStringAttr("column_sums")),
      b.getNamedAttr("threads", b.getI64IntegerAttr(columnThreads)),
      b.getNamedAttr("partial_blocks", b.getI64IntegerAttr(partialBlocks)),
  });
}

NormGradStrategy fff::selectNormGradStrategy(std::optional<int64_t> rowSize,
                                             Type elementType,
                                             int64_t extraRowStreams) {
  auto blocksFor = [](int64_t threads) {
    return kMultiprocessors *
           std::max<int64_t>(1, kGradThreadsPerMultiprocessor / threads);
  };
  auto looped = [&](int64_t vectorWidth) {
    NormStrategy row{NormStrategy::Kind::Looped, vectorWidth,
                     kGradLoopedThreads,         /*rowsPerBlock=*/1,
                     /*vectorsPerThread=*/0,     kGradMaxRegisters};
    return NormGradStrategy{row, blocksFor(kGradLoopedThreads),
                            kColumnSumThreads};
  };
  if (!rowSize)
    return looped(/*vectorWidth=*/1);

  int64_t vectorWidth = vectorWidthFor(rowSize, elementType);
  int64_t vectors = *rowSize / vectorWidth;
  int64_t rowRegisters = std::max<int64_t>(
      kGradRegistersPerElement,
      kGradRowRegisters - kGradRegistersPerExtraStream * extraRowStreams);
  int64_t elementsPerThread = rowRegisters / kGradRegistersPerElement;
  int64_t vectorsPerThreadLimit =
      std::max<int64_t>(1, elementsPerThread / vectorWidth);

  if (vectors <= kWarpSize * vectorsPerThreadLimit) {
    NormStrategy row{NormStrategy::Kind::WarpPerRow,
                     vectorWidth,
                     kWarpSize,
                     kGradWarpsPerBlock,
                     llvm::divideCeilSigned(vectors, kWarpSize),
                     kGradMaxRegisters};
    return {row, blocksFor(kWarpSize * kGradWarpsPerBlock), kColumnSumThreads};
  }
  int64_t threads = llvm::alignTo(
      llvm::divideCeilSigned(vectors, vectorsPerThreadLimit), kWarpSize);
  threads = std::max<int64_t>(threads, 4 * kWarpSize);
  if (threads > kGradThreadsPerMultiprocessor)
    return looped(vectorWidth);
  NormStrategy row{NormStrategy::Kind::BlockPerRow,
                   vectorWidth,
                   threads,
                   /*rowsPerBlock=*/1,
                   llvm::divideCeilSigned(vectors, threads),
                   kGradMaxRegisters};
  return {row, blocksFor(threads), kColumnSumThreads};
}

FailureOr<TreeStrategy> fff::selectTreeStrategy(const TreeShape &shape,
                                                TreeStrategy::Variant variant,
                                                bool staging,
                                                std::string &whyNot) {
  int64_t entriesPerToken = shape.entriesPerToken();
  if (shape.hiddenWidth > kMaxHiddenWidth) {
    whyNot = "a leaf wider than " + std::to_string(kMaxHiddenWidth);
    return failure();
  }
  if (entriesPerToken * kTreeLatencyTokensPerBlock * kRecordBytes >
      kTreeEntryBytes) {
    whyNot = "more than " +
             std::to_string(kTreeEntryBytes / kTreeLatencyTokensPerBlock /
                            kRecordBytes) +
             " visited rows per token (trees * (depth + 1))";
    return failure();
  }
  Type elementType = shape.elementType;
  TreeStrategy s;
  s.variant = variant;
  s.entriesPerToken = entriesPerToken;
  s.fusedRowBytesPerToken = shape.fusedRowBytesPerToken;
  auto tokenBytes = [&](int64_t tokens) {
    return tokens * (entriesPerToken * kRecordBytes + s.fusedRowBytesPerToken);
  };
  // A fused kernel's rows may leave room for fewer tokens a block than the
  // variant takes: halve them until they fit.
  auto fittingTokens = [&](int64_t tokens) {
    while (tokens > 1 && tokenBytes(tokens) > kTreeSharedBytes)
      tokens /= 2;
    return tokens;
  };
  if (tokenBytes(1) > kTreeSharedBytes) {
    whyNot = "rows too wide for a fused sublayer kernel to keep in shared "
             "memory (" +
             std::to_string(tokenBytes(1)) + " bytes for one token, over " +
             std::to_string(kTreeSharedBytes) + ")";
    return failure();
  }
  s.levelsPerStep = variant == TreeStrategy::Variant::Latency ? 2 : 1;
  int64_t rowsPerStep = (int64_t(1) << s.levelsPerStep) - 1;
  s.in = laneWalk(shape.inWidth, elementType,
                  kTreeInputLoadsPerStep / (1 + rowsPerStep));
  // Packed 16-bit values take half a register each.
  int64_t inputRegisters = s.in.vectorsPerStep * s.in.vectorWidth *
                           elementType.getIntOrFloatBitWidth() / 32;
  s.inputInRegisters = s.in.steps == 1 && inputRegisters <= kTreeInputRegisters;

  int64_t outVectorWidth = vectorWidthFor(shape.outWidth, elementType);
  s.unrollEntries = entriesPerToken <= kTreeMaxUnrolledEntries;
  int64_t outPerStep = kTreeOutputValuesPerStep / outVectorWidth;
  auto loadsBound = [&](int64_t loads) {
    return s.unrollEntries ? std::min(outPerStep, loads / entriesPerToken)
                           : outPerStep;
  };
  s.out = laneWalk(shape.outWidth, elementType,
                   loadsBound(kTreeOneStepOutputLoads));
  if (s.out.steps != 1)
    s.out = laneWalk(shape.outWidth, elementType,
                     loadsBound(kTreeLoopedOutputLoads));
  s.maxRegisters = kTreeRegisters;

  if (variant == TreeStrategy::Variant::Latency) {
    s.stagedLevels = 0;
    s.tokensPerBlock = fittingTokens(kTreeLatencyTokensPerBlock);
    s.residentBlocks = 0;
    return s;
  }
  s.tokensPerBlock = fittingTokens(
      entriesPerToken * kTreeThroughputTokensPerBlock * kRecordBytes <=
              kTreeEntryBytes
          ? kTreeThroughputTokensPerBlock
          : kTreeLatencyTokensPerBlock);
  s.residentBlocks = kTreeResidentWarps / s.tokensPerBlock;
  s.stagedLevels = staging
                       ? levelsToStage(shape, kTreeSharedBytes -
                                                  tokenBytes(s.tokensPerBlock))
                       : 0;
  return s;
}

namespace {
/// The count and scatter kernels' threads, a block.
constexpr int64_t kTreeGradSortThreads = 256;
/// Row chunks of the counting sort: a thread each, so one block's worth
/// per tree; more chunks would spread large batches wider but make every
/// batch's scan longer.
constexpr int64_t kTreeGradMaxChunks = 256;
/// The counts (and then offsets) take 4 bytes per node and chunk: at most
/// 16 MiB per tree, so a deep tree gets fewer chunks.
constexpr int64_t kTreeGradMaxCountsPerTree = int64_t(1) << 22;
/// The sums kernels: a thread per column, a block per node or chunk.
constexpr int64_t kTreeGradSumThreads = 128;
/// A chunk sums block's visits: a thread's run is 256 visits of each of its
/// columns (a root's bucket, every row, was one block's before). Its loop
/// over the chunk's runs holds more than the 64 registers of the others
/// (f32 spilled 4 bytes there).
constexpr int64_t kTreeGradVisitsPerChunk = 256;
constexpr int64_t kTreeGradChunkSumRegisters = 96;
/// A leaf's gradient walk holds, beside the forward's routing and hidden
/// layer, the dy walk's loads and sums and the dx loop's: at 128 registers
/// ptxas spilled wherever the leaf was 48 units or wider, so the walk gets
/// 168 (12 warps a multiprocessor: three blocks of four), and keeps its
/// units' values (pre, then dpre) in the token's records. Its hidden layer
/// sums up to 32 units a pass over x, in a loop ptxas does not unroll. Up to
/// 16 units, it takes four rows of w2 per walk over dy, with the forward's
/// loads in flight (a dy vector and four row vectors each) and four f32
/// vector sums; wider leaves take one row and one dy vector a step. dx
/// loads 8 units of a w1 row at a time, in a loop.
constexpr int64_t kLeafGradRegisters = 168;
constexpr int64_t kLeafGradTokensPerBlock = 4;
constexpr int64_t kRegistersPerMultiprocessor = 65536;
constexpr int64_t kLeafGradHiddenUnitsPerPass = 32;
constexpr int64_t kLeafGradRowsPerStep = 4;
constexpr int64_t kLeafGradWideRowsPerStep = 1;
constexpr int64_t kLeafGradNarrowUnits = 16;
constexpr int64_t kLeafGradDxUnitsPerStep = 8;
/// A leaf's sums keep up to 16 units' columns (and db2's) in registers.
constexpr int64_t kLeafGradMaxUnitsPerPass = 16;
} // namespace

DictionaryAttr TreeGradStrategy::phaseAttr(MLIRContext *context,
                                           StringRef phase) const {
  Builder b(context);
  SmallVector<NamedAttribute> fields{
      b.getNamedAttr("kind", b.getStringAttr("tree_grad_" + phase.str()))};
  if (phase == "count" || phase == "scatter" || phase == "scan")
    fields.push_back(
        b.getNamedAttr("sort_chunks", b.getI64IntegerAttr(sortChunks)));
  if (phase == "sums" && unitsPerPass)
    fields.push_back(
        b.getNamedAttr("units_per_pass", b.getI64IntegerAttr(unitsPerPass)));
  if (phase == "chunk_sums" || phase == "node_sums")
    fields.push_back(b.getNamedAttr("visits_per_chunk",
                                    b.getI64IntegerAttr(visitsPerChunk)));
  if (phase == "chunk_sums")
    fields.push_back(b.getNamedAttr("max_registers",
                                    b.getI64IntegerAttr(maxRegisters(phase))));
  bool sums = phase == "sums" || phase == "chunk_sums" ||
              phase == "node_sums" || phase == "output_bias";
  int64_t threads = sums ? sumThreads : sortThreads;
  fields.push_back(b.getNamedAttr("threads", b.getI64IntegerAttr(threads)));
  return b.getDictionaryAttr(fields);
}

FailureOr<TreeGradStrategy> fff::selectTreeGradStrategy(const TreeShape &shape,
                                                        std::string &whyNot) {
  // The walk is the forward's throughput kernel over x, with (tree_ffn)
  // dx as its output rows; its input walk, and so its logits and leaves,
  // are the forward's.
  TreeShape walkShape = shape;
  if (!shape.isLeafMLP())
    walkShape.outWidth = shape.inWidth;
  FailureOr<TreeStrategy> walk = selectTreeStrategy(
      walkShape, TreeStrategy::Variant::Throughput, /*staging=*/false, whyNot);
  if (failed(walk))
    return failure();
  bool wideLeaf = shape.hiddenWidth > kLeafGradNarrowUnits;
  walk->gradRowsPerStep =
      !shape.isLeafMLP() ? 1
      : wideLeaf         ? kLeafGradWideRowsPerStep
                         : std::min(kLeafGradRowsPerStep, shape.hiddenWidth);
  walk->gradOutput = laneWalk(
      shape.outWidth, shape.elementType,
      wideLeaf ? 1 : kTreeInputLoadsPerStep / (1 + walk->gradRowsPerStep));
  if (shape.isLeafMLP()) {
    walk->maxRegisters = kLeafGradRegisters;
    walk->tokensPerBlock = kLeafGradTokensPerBlock;
    walk->residentBlocks =
        kMultiprocessors * std::max<int64_t>(1, kRegistersPerMultiprocessor /
                                                    (kLeafGradRegisters *
                                                     walk->threadsPerBlock()));
    walk->dxUnitsPerStep = std::min(kLeafGradDxUnitsPerStep, shape.hiddenWidth);
    walk->hiddenUnitsPerPass =
        std::min(kLeafGradHiddenUnitsPerPass, shape.hiddenWidth);
  }
  // Sort buckets: tree_ffn's nodes, or the leaves.
  int64_t nodes = shape.isLeafMLP() ? int64_t(1) << shape.levels
                                    : (int64_t(1) << shape.levels) - 1;
  int64_t chunks = kTreeGradMaxChunks;
  while (chunks > 1 && chunks * nodes > kTreeGradMaxCountsPerTree)
    chunks /= 2;
  TreeGradStrategy strategy{*walk, chunks, kTreeGradSortThreads,
                            kTreeGradSumThreads};
  if (shape.isLeafMLP())
    strategy.unitsPerPass =
        std::min(kLeafGradMaxUnitsPerPass, shape.hiddenWidth);
  else {
    strategy.visitsPerChunk = kTreeGradVisitsPerChunk;
    strategy.chunkSumRegisters = kTreeGradChunkSumRegisters;
  }
  return strategy;
}

int64_t TreeGradStrategy::maxRegisters(StringRef phase) const {
  return phase == "chunk_sums" ? chunkSumRegisters
                               : NormStrategy::kMaxRegistersPerThread;
}

DictionaryAttr ContractionStrategy::toAttr(MLIRContext *context) const {
  Builder b(context);
  return b.getDictionaryAttr({
      b.getNamedAttr("kind", b.getStringAttr("tiled_contraction")),
      b.getNamedAttr("tile", b.getDenseI64ArrayAttr({tileM, tileN, tileK})),
      b.getNamedAttr("threads", b.getDenseI64ArrayAttr({threadsM, threadsN})),
      b.getNamedAttr("max_registers", b.getI64IntegerAttr(maxRegisters)),
      b.getNamedAttr("unoptimized", b.getBoolAttr(true)),
  });
}

ContractionStrategy
fff::selectContractionStrategy(std::optional<int64_t> m,
                               std::optional<int64_t> n,
                               std::optional<int64_t> /*k*/) {
  // 64 x 64 tiles, 4 x 4 outputs a thread: 16 f32 accumulators, and 8 KiB
  // of staged operands a block. A side known to be small gets a narrower
  // tile, so that a matrix-vector-like product does not idle most threads.
  ContractionStrategy strategy{/*tileM=*/64,        /*tileN=*/64,
                               /*tileK=*/16,
                               /*threadsM=*/16,     /*threadsN=*/16,
                               /*maxRegisters=*/128};
  if (m && *m <= 16) {
    strategy.tileM = 16;
    strategy.threadsM = 4;
    strategy.threadsN = 64;
    strategy.tileN = 256;
  } else if (n && *n <= 16) {
    strategy.tileN = 16;
    strategy.threadsN = 4;
    strategy.threadsM = 64;
    strategy.tileM = 256;
  }
  return strategy;
}

DictionaryAttr LoopNestStrategy::toAttr(MLIRContext *context) const {
  Builder b(context);
  return b.getDictionaryAttr({
      b.getNamedAttr("kind",
                     b.getStringAttr(serial ? "serial" : "thread_per_point")),
      b.getNamedAttr("threads_per_block", b.getI64IntegerAttr(threadsPerBlock)),
      b.getNamedAttr("max_registers", b.getI64IntegerAttr(maxRegisters)),
  });
}

LoopNestStrategy fff::selectLoopNestStrategy(bool pointsShareOutputs) {
  if (pointsShareOutputs)
    return {/*serial=*/true, /*threadsPerBlock=*/1, /*maxRegisters=*/64};
  return {/*serial=*/false, /*threadsPerBlock=*/256, /*maxRegisters=*/64};
}

//===- KernelStrategy.cpp - how an fff op maps onto a GPU kernel *- C++ -*-===//

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
/// Input vectors a lane loads at once per level, a routing weight and an x
/// vector each: 8 of 16-bit types, 4 of f32, for which ptxas spills at 8
/// on wide rows (test/Conversion/FFFToGPU/tree-kernels-ptxas.py checks).
constexpr int64_t kTreeInputVectorsPerStep16Bit = 8;
constexpr int64_t kTreeInputVectorsPerStepF32 = 4;
/// A lane keeps x in registers up to this many 32-bit registers' worth.
constexpr int64_t kTreeInputRegisters = 16;
/// A lane's output takes one step when it can sum all its output values at
/// once (at most 32) with every recorded row's loads in flight (at most 36
/// loads). Then the sums unroll over the recorded rows (at most 20: their
/// coefficients and addresses stay in registers). Otherwise, the lane loops
/// over steps of 12 output values (3 vectors of f32, 1 of 16-bit types:
/// the most the checked shapes take without spills) and, in each, over the
/// recorded rows.
constexpr int64_t kTreeOutputValuesAtOnce = 32;
constexpr int64_t kTreeUnrolledOutputLoads = 36;
constexpr int64_t kTreeMaxUnrolledEntries = 20;
constexpr int64_t kTreeOutputValuesPerStep = 12;
/// With the loads in flight above: 16 warps a multiprocessor.
constexpr int64_t kTreeRegisters = 128;
/// Four warps a block: small enough that a batch of a few hundred tokens
/// still fills every multiprocessor.
constexpr int64_t kTreeTokensPerBlock = 4;
/// Shared memory for the recorded rows, under the 48 KiB any block gets.
constexpr int64_t kTreeEntryBytes = 32 * 1024;
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

DictionaryAttr TreeStrategy::toAttr(MLIRContext *context) const {
  Builder b(context);
  return b.getDictionaryAttr({
      b.getNamedAttr("kind", b.getStringAttr("warp_per_token")),
      b.getNamedAttr("in", in.toAttr(context)),
      b.getNamedAttr("out", out.toAttr(context)),
      b.getNamedAttr("input_in_registers", b.getBoolAttr(inputInRegisters)),
      b.getNamedAttr("unroll_entries", b.getBoolAttr(unrollEntries)),
      b.getNamedAttr("tokens_per_block", b.getI64IntegerAttr(tokensPerBlock)),
      b.getNamedAttr("entries_per_token",
                     b.getI64IntegerAttr(entriesPerToken)),
      b.getNamedAttr("max_registers", b.getI64IntegerAttr(maxRegisters)),
  });
}

FailureOr<TreeStrategy>
fff::selectTreeStrategy(std::optional<int64_t> inWidth,
                        std::optional<int64_t> outWidth, Type elementType,
                        int64_t entriesPerToken, int64_t hiddenWidth,
                        std::string &whyNot) {
  if (hiddenWidth > kMaxHiddenWidth) {
    whyNot = "a leaf wider than " + std::to_string(kMaxHiddenWidth);
    return failure();
  }
  constexpr int64_t kRecordBytes = sizeof(float) + sizeof(int32_t);
  if (entriesPerToken * kTreeTokensPerBlock * kRecordBytes > kTreeEntryBytes) {
    whyNot = "more than " +
             std::to_string(kTreeEntryBytes / kTreeTokensPerBlock / kRecordBytes) +
             " visited rows per token (trees * (depth + 1))";
    return failure();
  }
  TreeStrategy s;
  s.entriesPerToken = entriesPerToken;
  s.hiddenWidth = hiddenWidth;
  s.tokensPerBlock = kTreeTokensPerBlock;
  s.in = laneWalk(inWidth, elementType,
                 elementType.isF32() ? kTreeInputVectorsPerStepF32
                                     : kTreeInputVectorsPerStep16Bit);
  // Packed 16-bit values take half a register each.
  int64_t inputRegisters = s.in.vectorsPerStep * s.in.vectorWidth *
                           elementType.getIntOrFloatBitWidth() / 32;
  s.inputInRegisters = s.in.steps == 1 && inputRegisters <= kTreeInputRegisters;

  int64_t outVectorWidth = vectorWidthFor(outWidth, elementType);
  s.out = laneWalk(outWidth, elementType,
                   std::min(kTreeOutputValuesAtOnce / outVectorWidth,
                            kTreeUnrolledOutputLoads / entriesPerToken));
  s.unrollEntries =
      s.out.steps == 1 && entriesPerToken <= kTreeMaxUnrolledEntries;
  if (!s.unrollEntries)
    s.out = laneWalk(outWidth, elementType,
                     kTreeOutputValuesPerStep / outVectorWidth);
  s.maxRegisters = kTreeRegisters;
  return s;
}

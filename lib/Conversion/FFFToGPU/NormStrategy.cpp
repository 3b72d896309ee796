//===- NormStrategy.cpp - how a norm maps onto a GPU kernel -----*- C++ -*-===//

#include "fff/Conversion/FFFToGPU/NormStrategy.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/MathExtras.h"

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

//===- CPUNormStrategy.cpp - how a norm maps onto CPU vectors ---*- C++ -*-===//

#include "fff/Conversion/FFFToVector/CPUNormStrategy.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

fff::CPUNormStrategy fff::selectCPUNormStrategy(std::optional<int64_t> rowSize,
                                                const CPUTarget &target) {
  CPUNormStrategy strategy;
  static_cast<CPUVectorShape &>(strategy) =
      selectCPUVectorShape(rowSize, target);
  // fff's async runtime hands a block to a worker in well under a
  // microsecond when calls come back to back, and wakes a sleeping one in a
  // few. On this project's 2-core machine, with one block of rows per
  // thread, LayerNorms of rows of 768 f32 took, in one thread and in two:
  // 7.3 and 5.0 us at 64 rows (49K elements), 15 and 9 us at 128, 35 and
  // 16 us at 256, 0.10 and 0.035 ms at 512.
  strategy.minParallelElements = int64_t(1) << 17;
  // An ordinary store first reads the line it writes: a norm moves three
  // bytes per byte of result. Streaming stores skip that read, but leave
  // the result in memory rather than in cache for whoever reads it next.
  // Measured here, a 64 MB LayerNorm result took 5.2-6.4 ms streamed
  // against 8.7-9.9 ms stored; a 12 MB one was no faster (0.64-1.04 ms
  // against 0.65-0.74).
  strategy.minStreamedBytes = hostMinStreamedBytes();
  return strategy;
}

DictionaryAttr fff::CPUNormStrategy::toAttr(MLIRContext *context) const {
  Builder b(context);
  SmallVector<NamedAttribute> attrs;
  appendAttrs(b, attrs);
  attrs.push_back(b.getNamedAttr("min_parallel_elements",
                                 b.getI64IntegerAttr(minParallelElements)));
  attrs.push_back(b.getNamedAttr("min_streamed_bytes",
                                 b.getI64IntegerAttr(minStreamedBytes)));
  return b.getDictionaryAttr(attrs);
}

fff::CPUNormGradStrategy
fff::selectCPUNormGradStrategy(std::optional<int64_t> rowSize,
                               const CPUTarget &target) {
  CPUNormGradStrategy strategy;
  static_cast<CPUNormStrategy &>(strategy) =
      selectCPUNormStrategy(rowSize, target);
  // Enough blocks to keep 16 threads busy with four blocks each; the last
  // sum then reads 64 partial rows, under 1% of what the rows of a
  // backward worth threading move.
  strategy.rowBlocks = 64;
  return strategy;
}

DictionaryAttr fff::CPUNormGradStrategy::toAttr(MLIRContext *context) const {
  Builder b(context);
  SmallVector<NamedAttribute> attrs(
      CPUNormStrategy::toAttr(context).getValue());
  attrs.push_back(b.getNamedAttr("row_blocks", b.getI64IntegerAttr(rowBlocks)));
  return b.getDictionaryAttr(attrs);
}

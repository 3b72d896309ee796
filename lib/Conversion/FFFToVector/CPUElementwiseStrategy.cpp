//===- CPUElementwiseStrategy.cpp - elementwise work on CPU vectors -------===//

#include "fff/Conversion/FFFToVector/CPUElementwiseStrategy.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

fff::CPUElementwiseStrategy
fff::selectCPUElementwiseStrategy(const CPUTarget &target) {
  CPUElementwiseStrategy strategy;
  static_cast<CPUVectorShape &>(strategy) =
      selectCPUVectorShape(std::nullopt, target);
  // Elementwise work moves more bytes per element than it computes on:
  // threads pay sooner than for a norm. Measured here, f32 adds of rows of
  // 768, in one thread and in two: 2.5 and 2.8 us at 32 rows (24.6K
  // elements), 5.0 and 4.0 us at 64, 9.8 and 6.4 us at 128.
  strategy.minParallelElements = int64_t(1) << 15;
  return strategy;
}

DictionaryAttr fff::CPUElementwiseStrategy::toAttr(MLIRContext *context) const {
  Builder b(context);
  return b.getDictionaryAttr(
      {b.getNamedAttr("vector_bits", b.getI64IntegerAttr(vectorBits)),
       b.getNamedAttr("lanes", b.getI64IntegerAttr(lanes)),
       b.getNamedAttr("min_parallel_elements",
                      b.getI64IntegerAttr(minParallelElements))});
}

//===- CPUNormStrategy.cpp - how a norm maps onto CPU vectors ---*- C++ -*-===//

#include "fff/Conversion/FFFToVector/CPUNormStrategy.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

fff::CPUNormStrategy fff::selectCPUNormStrategy(std::optional<int64_t> rowSize,
                                                int64_t vectorBits) {
  CPUNormStrategy strategy;
  static_cast<CPUVectorShape &>(strategy) =
      selectCPUVectorShape(rowSize, vectorBits);
  // Waking the async runtime's workers costs tens of microseconds; on this
  // project's 2-core machine a LayerNorm of 768K f32 elements was faster in
  // one thread (0.28 ms) than in two, and one of 1.5M elements faster in
  // two (0.39 ms against 0.62).
  strategy.minParallelElements = int64_t(1) << 20;
  return strategy;
}

DictionaryAttr fff::CPUNormStrategy::toAttr(MLIRContext *context) const {
  Builder b(context);
  SmallVector<NamedAttribute> attrs;
  appendAttrs(b, attrs);
  attrs.push_back(b.getNamedAttr("min_parallel_elements",
                                 b.getI64IntegerAttr(minParallelElements)));
  return b.getDictionaryAttr(attrs);
}

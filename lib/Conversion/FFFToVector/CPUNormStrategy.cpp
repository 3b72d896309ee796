//===- CPUNormStrategy.cpp - how a norm maps onto CPU vectors ---*- C++ -*-===//

#include "fff/Conversion/FFFToVector/CPUNormStrategy.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>

using namespace mlir;

int64_t fff::hostVectorBits() {
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  if (features.lookup("avx512f"))
    return 512;
  if (features.lookup("avx2"))
    return 256;
  return 128;
}

LogicalResult fff::checkVectorBits(Operation *op, int64_t vectorBits) {
  if (vectorBits == 0 || vectorBits == 128 || vectorBits == 256 ||
      vectorBits == 512)
    return success();
  return op->emitError()
         << "vector-bits must be 0 (this host's), 128, 256 or 512, not "
         << vectorBits;
}

fff::CPUNormStrategy fff::selectCPUNormStrategy(std::optional<int64_t> rowSize,
                                                int64_t vectorBits) {
  CPUNormStrategy strategy;
  strategy.vectorBits = vectorBits > 0 ? vectorBits : hostVectorBits();
  strategy.lanes = strategy.vectorBits / 32;
  // Four partial sums cover the 4-cycle latency of a vector add issued once
  // a cycle; a short row gets no more than it has vectors to fill.
  constexpr int64_t kLatencyHidingAccumulators = 4;
  strategy.accumulators = kLatencyHidingAccumulators;
  if (rowSize)
    strategy.accumulators = std::clamp<int64_t>(*rowSize / strategy.lanes, 1,
                                                kLatencyHidingAccumulators);
  // Waking the async runtime's workers costs tens of microseconds; on this
  // project's 2-core machine a LayerNorm of 768K f32 elements was faster in
  // one thread (0.28 ms) than in two, and one of 1.5M elements faster in
  // two (0.39 ms against 0.62).
  strategy.minParallelElements = int64_t(1) << 20;
  return strategy;
}

DictionaryAttr fff::CPUNormStrategy::toAttr(MLIRContext *context) const {
  Builder b(context);
  return b.getDictionaryAttr({
      b.getNamedAttr("vector_bits", b.getI64IntegerAttr(vectorBits)),
      b.getNamedAttr("lanes", b.getI64IntegerAttr(lanes)),
      b.getNamedAttr("accumulators", b.getI64IntegerAttr(accumulators)),
      b.getNamedAttr("min_parallel_elements",
                     b.getI64IntegerAttr(minParallelElements)),
  });
}

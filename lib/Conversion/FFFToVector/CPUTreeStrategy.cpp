//===- CPUTreeStrategy.cpp - how a tree layer maps onto the CPU -*- C++ -*-===//

#include "fff/Conversion/FFFToVector/CPUTreeStrategy.h"

#include "fff/Conversion/FFFToVector/CPUNormStrategy.h"
#include "mlir/IR/Builders.h"

#include <algorithm>
#include <unistd.h>

using namespace mlir;

/// Regrouping counts tokens per node of the sort level, so its cost grows as
/// 2^level; deeper than this, tokens are grouped by the node's ancestor.
static constexpr int64_t kMaxSortLevel = 10;

int64_t fff::hostCacheBytes() {
#ifdef _SC_LEVEL2_CACHE_SIZE
  long bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (bytes > 0)
    return bytes;
#endif
  return int64_t(1) << 20;
}

static fff::CPUTreeStrategy baseStrategy(std::optional<int64_t> inWidth,
                                         int64_t vectorBits,
                                         int64_t cacheBytes) {
  fff::CPUTreeStrategy strategy;
  strategy.vectorBits = vectorBits > 0 ? vectorBits : fff::hostVectorBits();
  strategy.lanes = strategy.vectorBits / 32;
  // As for the norms: four partial sums hide the latency of the FMAs.
  constexpr int64_t kLatencyHidingAccumulators = 4;
  strategy.accumulators = kLatencyHidingAccumulators;
  if (inWidth)
    strategy.accumulators = std::clamp<int64_t>(*inWidth / strategy.lanes, 1,
                                                kLatencyHidingAccumulators);
  strategy.cacheBytes = cacheBytes > 0 ? cacheBytes : fff::hostCacheBytes();
  strategy.minParallelWork = fff::kMinParallelTreeWork;
  strategy.sortLevel = 0;
  return strategy;
}

fff::CPUTreeStrategy
fff::selectCPUTreeStrategy(int64_t levels, std::optional<int64_t> nodeBytes,
                           std::optional<int64_t> inWidth, int64_t vectorBits,
                           int64_t cacheBytes) {
  CPUTreeStrategy strategy = baseStrategy(inWidth, vectorBits, cacheBytes);
  // A dynamic width is taken as a BERT-sized row pair in f32.
  int64_t bytesPerNode = nodeBytes.value_or(2 * 1024 * 4);
  // The shallowest level whose subtrees' weights fit in half the cache: the
  // other half holds the tokens' rows and whatever else the core touches.
  auto subtreeBytes = [&](int64_t level) {
    int64_t subtreeLevels = std::min<int64_t>(levels - level, 40);
    return ((int64_t(1) << subtreeLevels) - 1) * bytesPerNode;
  };
  int64_t level = 0;
  while (level + 1 < levels && subtreeBytes(level) > strategy.cacheBytes / 2)
    ++level;
  strategy.sortLevel = std::min(level, kMaxSortLevel);
  return strategy;
}

fff::CPUTreeStrategy fff::selectCPULeafStrategy(int64_t depth,
                                                std::optional<int64_t> inWidth,
                                                int64_t vectorBits,
                                                int64_t cacheBytes) {
  CPUTreeStrategy strategy = baseStrategy(inWidth, vectorBits, cacheBytes);
  strategy.sortLevel = std::min(depth, kMaxSortLevel);
  return strategy;
}

DictionaryAttr fff::CPUTreeStrategy::toAttr(MLIRContext *context) const {
  Builder b(context);
  return b.getDictionaryAttr({
      b.getNamedAttr("vector_bits", b.getI64IntegerAttr(vectorBits)),
      b.getNamedAttr("lanes", b.getI64IntegerAttr(lanes)),
      b.getNamedAttr("accumulators", b.getI64IntegerAttr(accumulators)),
      b.getNamedAttr("sort_level", b.getI64IntegerAttr(sortLevel)),
      b.getNamedAttr("cache_bytes", b.getI64IntegerAttr(cacheBytes)),
      b.getNamedAttr("min_parallel_work", b.getI64IntegerAttr(minParallelWork)),
  });
}

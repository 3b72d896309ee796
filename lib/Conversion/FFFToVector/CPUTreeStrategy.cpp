//===- CPUTreeStrategy.cpp - how a tree layer maps onto the CPU -*- C++ -*-===//

#include "fff/Conversion/FFFToVector/CPUTreeStrategy.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <algorithm>
#include <limits>
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
                                         const fff::CPUTarget &target,
                                         int64_t cacheBytes) {
  fff::CPUTreeStrategy strategy;
  static_cast<fff::CPUVectorShape &>(strategy) =
      fff::selectCPUVectorShape(inWidth, target);
  strategy.cacheBytes = cacheBytes > 0 ? cacheBytes : fff::hostCacheBytes();
  strategy.minParallelWork = fff::kMinParallelTreeWork;
  strategy.sortLevel = 0;
  // A level of a walk is a chain: the dot product's sums, their reduction,
  // the comparison, the child's row. UltraFastBERT-1x11 at batch 4096 under
  // fff-run took 9.1-10.4 ms on one core walking one token at a time,
  // 7.4-8.0 two, 7.0-7.2 three, 6.5-6.9 four, and 6.2-6.5 eight; on two
  // cores, 4.3, 3.8-4.0, 3.6, 3.4-3.5 and 3.3-3.6 ms.
  strategy.walkTokens = 4;
  // Each token's partial sums are independent chains of FMAs: the tokens'
  // together cover the FMA's latency. Half the vector registers hold
  // them; the other half, the vectors loaded and the addresses' spills.
  // With AVX2's 16, four tokens with four sums each spilled in the dot
  // product's loop: UltraFastBERT-1x11 at batch 4096 took 8.8-9.2 ms on
  // one core, against 7.4-7.9 with two sums each.
  strategy.tokenAccumulators =
      std::clamp<int64_t>(strategy.vectorRegisters / 2 / strategy.walkTokens, 1,
                          strategy.accumulators);
  // Set by the layers that write each result row once.
  strategy.minStreamedBytes = 0;
  return strategy;
}

fff::CPUTreeStrategy
fff::selectCPUTreeStrategy(int64_t levels, std::optional<int64_t> nodeBytes,
                           std::optional<int64_t> inWidth,
                           const CPUTarget &target, int64_t cacheBytes) {
  CPUTreeStrategy strategy = baseStrategy(inWidth, target, cacheBytes);
  // A dynamic width is taken as a BERT-sized row pair in f32.
  int64_t bytesPerNode = nodeBytes.value_or(2 * 1024 * 4);
  // The shallowest level whose subtrees' weights fit in half the cache: the
  // other half holds the tokens' rows and whatever else the core touches.
  // Saturating: a subtree too large to count is larger than any cache.
  auto subtreeBytes = [&](int64_t level) {
    int64_t subtreeLevels = std::min<int64_t>(levels - level, 40);
    return llvm::checkedMul((int64_t(1) << subtreeLevels) - 1, bytesPerNode)
        .value_or(std::numeric_limits<int64_t>::max());
  };
  int64_t level = 0;
  while (level + 1 < levels && subtreeBytes(level) > strategy.cacheBytes / 2)
    ++level;
  strategy.sortLevel = std::min(level, kMaxSortLevel);
  // A tree_ffn writes each result row once. UltraFastBERT-1x11 at batch
  // 4096 (50 MB moved) took 3.9-4.7 ms on two cores with streaming
  // stores, against 4.6-5.5 ms without.
  strategy.minStreamedBytes = hostMinStreamedBytes();
  return strategy;
}

fff::CPUTreeStrategy fff::selectCPULeafStrategy(int64_t depth,
                                                std::optional<int64_t> inWidth,
                                                const CPUTarget &target,
                                                int64_t cacheBytes) {
  CPUTreeStrategy strategy = baseStrategy(inWidth, target, cacheBytes);
  strategy.sortLevel = std::min(depth, kMaxSortLevel);
  return strategy;
}

DictionaryAttr fff::CPUTreeStrategy::toAttr(MLIRContext *context) const {
  Builder b(context);
  SmallVector<NamedAttribute> attrs;
  appendAttrs(b, attrs);
  attrs.push_back(b.getNamedAttr("sort_level", b.getI64IntegerAttr(sortLevel)));
  attrs.push_back(
      b.getNamedAttr("cache_bytes", b.getI64IntegerAttr(cacheBytes)));
  attrs.push_back(b.getNamedAttr("min_parallel_work",
                                 b.getI64IntegerAttr(minParallelWork)));
  attrs.push_back(
      b.getNamedAttr("walk_tokens", b.getI64IntegerAttr(walkTokens)));
  attrs.push_back(b.getNamedAttr("min_streamed_bytes",
                                 b.getI64IntegerAttr(minStreamedBytes)));
  attrs.push_back(b.getNamedAttr("token_accumulators",
                                 b.getI64IntegerAttr(tokenAccumulators)));
  return b.getDictionaryAttr(attrs);
}

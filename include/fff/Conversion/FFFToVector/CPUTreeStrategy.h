//===- CPUTreeStrategy.h - how a tree layer maps onto the CPU ---*- C++ -*-===//
//
// The one place where the CPU lowering decides the shape of a tree layer's
// loops: vector width and accumulators (as for the norms), from what size
// its tokens are split across threads, how many walk the tree together, and
// at which level tokens are regrouped by the node they reached.
//
// Why regroup. Below the top levels, each token reads rows of weights that
// few other tokens read, so a token-by-token walk streams most of its
// weights from the last-level cache. Tokens that reach the same node at
// level `sortLevel` walk the same subtree below it: visited one after the
// other, they find that subtree's weights in the core's own cache, which
// is what `sortLevel` is chosen for. (Measured on this project's 2-core
// machine, UltraFastBERT-1x11 at batch 4096: 5.3 ms walking in token order,
// 3.4 ms regrouped at level 5.) Grouping every level instead, so that each
// node's rows are read once per batch, would re-read every token's rows at
// every level, and measured slower.
//
// The choice is recorded on the token loops as `fff.strategy`.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_CONVERSION_FFFTOVECTOR_CPUTREESTRATEGY_H
#define FFF_CONVERSION_FFFTOVECTOR_CPUTREESTRATEGY_H

#include "fff/Conversion/FFFToVector/CPUVectorShape.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cstdint>
#include <optional>

namespace fff {

/// The fewest multiply-adds from which a tree layer's token loop is split
/// across threads. fff's async runtime hands a block to a worker in well
/// under a microsecond when calls come back to back, and wakes a sleeping
/// one in a few. Measured here, UltraFastBERT-1x11 with one block of tokens
/// per thread (the loop after the sort level does 13.8K multiply-adds a
/// token), in one thread and in two: 16 tokens 9.5 and 9.1 us, 32 tokens
/// 23 and 15 us, 64 tokens 95 and 30 us, 128 tokens 0.21 and 0.09 ms.
constexpr int64_t kMinParallelTreeWork = int64_t(1) << 19;

/// `accumulators` also sets how many vectors of hidden units leaf_tree_ffn
/// computes together (or, for fewer units, how many partial sums of each),
/// and how many output vectors of a token alone stay in registers while
/// weight rows are added into them (TokenEmitter::rowVectors: fewer for
/// several tokens at once).
struct CPUTreeStrategy : CPUVectorShape {
  /// The level at which tokens are regrouped by the node they reached (for
  /// leaf_tree_ffn: the leaf's ancestor at that level); 0: never.
  int64_t sortLevel;
  /// The per-core cache the weights below `sortLevel` were sized to fit in
  /// half of.
  int64_t cacheBytes;
  /// The fewest multiply-adds a token loop must do to be split across
  /// threads.
  int64_t minParallelWork;
  /// Tokens that walk the tree together, their dot products interleaved:
  /// each level of one walk waits on the last, and another token's walk
  /// fills the wait.
  int64_t walkTokens;
  /// The partial sums each token of a walk keeps per dot product: as many
  /// as `accumulators`, or fewer where walkTokens tokens' would take more
  /// than half the vector registers. Every token's dot product has this
  /// many whatever tokens it walks with, so that its bits, and its route,
  /// do not depend on them.
  int64_t tokenAccumulators;
  /// The fewest bytes a single tree's layer must move (its input, weights
  /// and result) for its result to be written with streaming stores, where
  /// its rows start on whole vectors; 0: never. Past a last-level cache's
  /// worth, the result would not stay cached for the next op, and ordinary
  /// stores would first read every line they write.
  int64_t minStreamedBytes;

  /// The strategy as an attribute, for `fff.strategy` on the token loops.
  mlir::DictionaryAttr toAttr(mlir::MLIRContext *context) const;
};

/// The per-core (L2) cache of this machine's CPU in bytes, or 1 MiB where
/// the C library cannot tell.
int64_t hostCacheBytes();

/// The strategy for a tree_ffn of `levels` levels whose nodes hold
/// `nodeBytes` of weights each (nullopt when a width is dynamic), reading
/// rows of `inWidth` elements (nullopt: dynamic), on `target`.
/// `cacheBytes` of 0 means this host's.
CPUTreeStrategy selectCPUTreeStrategy(int64_t levels,
                                      std::optional<int64_t> nodeBytes,
                                      std::optional<int64_t> inWidth,
                                      const CPUTarget &target,
                                      int64_t cacheBytes);

/// The strategy for a leaf_tree_ffn of `depth` routing levels reading rows
/// of `inWidth` elements (nullopt: dynamic): tokens are regrouped by leaf
/// (by the leaf's ancestor, for trees too deep to count every leaf), so
/// that tokens sharing a leaf reuse its weights.
CPUTreeStrategy selectCPULeafStrategy(int64_t depth,
                                      std::optional<int64_t> inWidth,
                                      const CPUTarget &target,
                                      int64_t cacheBytes);

} // namespace fff

#endif // FFF_CONVERSION_FFFTOVECTOR_CPUTREESTRATEGY_H

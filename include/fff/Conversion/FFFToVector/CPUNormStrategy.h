//===- CPUNormStrategy.h - how a norm maps onto CPU vectors -----*- C++ -*-===//
//
// The one place where the CPU lowering decides the shape of a norm's loops:
// its vectors and accumulators (CPUVectorShape.h), from what size the rows
// are split across threads, and from what size the result is streamed to
// memory past the caches. The choice is recorded on the row loop as
// `fff.strategy`.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_CONVERSION_FFFTOVECTOR_CPUNORMSTRATEGY_H
#define FFF_CONVERSION_FFFTOVECTOR_CPUNORMSTRATEGY_H

#include "fff/Conversion/FFFToVector/CPUVectorShape.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cstdint>
#include <optional>

namespace fff {

struct CPUNormStrategy : CPUVectorShape {
  /// The smallest norm (rows x row size) whose rows are split across
  /// threads: below it, waking the other threads costs more than they save.
  int64_t minParallelElements;
  /// The smallest result, in bytes, written with streaming stores (which
  /// skip reading each cache line before overwriting it, and leave the
  /// caches to the input) when its rows start on whole vectors; 0: never,
  /// on hosts other than x86.
  int64_t minStreamedBytes;

  /// The strategy as an attribute, for `fff.strategy` on the row loop.
  mlir::DictionaryAttr toAttr(mlir::MLIRContext *context) const;
};

/// A norm backward's strategy: the forward's, and how its parameter
/// gradients are summed over rows.
struct CPUNormGradStrategy : CPUNormStrategy {
  /// The most blocks of rows: each block sums its rows' terms of dgamma
  /// and dbeta in row order into partial sums of its own, and the blocks'
  /// partial sums are then added in block order. The blocks are fixed by
  /// the shape alone, so the thread count cannot change a bit.
  int64_t rowBlocks;

  mlir::DictionaryAttr toAttr(mlir::MLIRContext *context) const;
};

/// Chooses the strategy for rows of `rowSize` elements (nullopt when
/// dynamic) on `target`.
CPUNormStrategy selectCPUNormStrategy(std::optional<int64_t> rowSize,
                                      const CPUTarget &target);

/// The same for a norm's backward.
CPUNormGradStrategy selectCPUNormGradStrategy(std::optional<int64_t> rowSize,
                                              const CPUTarget &target);

} // namespace fff

#endif // FFF_CONVERSION_FFFTOVECTOR_CPUNORMSTRATEGY_H

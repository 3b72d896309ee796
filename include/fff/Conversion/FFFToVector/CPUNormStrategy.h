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

/// Chooses the strategy for rows of `rowSize` elements (nullopt when
/// dynamic) on `target`.
CPUNormStrategy selectCPUNormStrategy(std::optional<int64_t> rowSize,
                                      const CPUTarget &target);

} // namespace fff

#endif // FFF_CONVERSION_FFFTOVECTOR_CPUNORMSTRATEGY_H

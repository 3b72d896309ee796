//===- CPUNormStrategy.h - how a norm maps onto CPU vectors -----*- C++ -*-===//
//
// The one place where the CPU lowering decides the shape of a norm's loops:
// how wide its vectors are (from the target's vector registers: AVX-512,
// AVX2 or SSE), how many independent accumulators each row's reductions
// keep to hide the latency of the adds, and from what size the rows are
// split across threads. The choice is recorded on the row loop as
// `fff.strategy`.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_CONVERSION_FFFTOVECTOR_CPUNORMSTRATEGY_H
#define FFF_CONVERSION_FFFTOVECTOR_CPUNORMSTRATEGY_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <optional>

namespace fff {

struct CPUNormStrategy {
  /// Bits of one vector register the loops fill (512, 256 or 128).
  int64_t vectorBits;
  /// f32 lanes per vector: all arithmetic is in f32, 16-bit elements are
  /// widened as they are loaded.
  int64_t lanes;
  /// Independent partial sums per reduction; each vector add waits only for
  /// the one `accumulators` steps back.
  int64_t accumulators;
  /// The smallest norm (rows x row size) whose rows are split across
  /// threads: below it, waking the other threads costs more than they save.
  int64_t minParallelElements;

  /// Elements one step of a reduction loop covers.
  int64_t stepElements() const { return lanes * accumulators; }

  /// The strategy as an attribute, for `fff.strategy` on the row loop.
  mlir::DictionaryAttr toAttr(mlir::MLIRContext *context) const;
};

/// The widest vector registers this machine's CPU has: 512 with AVX-512F,
/// 256 with AVX2, else 128.
int64_t hostVectorBits();

/// Fails with a one-line error on `op` unless `vectorBits` is 0 (this
/// host's), 128, 256 or 512.
mlir::LogicalResult checkVectorBits(mlir::Operation *op, int64_t vectorBits);

/// Chooses the strategy for rows of `rowSize` elements (nullopt when
/// dynamic) on vector registers of `vectorBits` (0: this host's).
CPUNormStrategy selectCPUNormStrategy(std::optional<int64_t> rowSize,
                                      int64_t vectorBits);

} // namespace fff

#endif // FFF_CONVERSION_FFFTOVECTOR_CPUNORMSTRATEGY_H

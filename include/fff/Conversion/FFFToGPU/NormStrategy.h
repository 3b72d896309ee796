//===- NormStrategy.h - how a norm maps onto a GPU kernel -------*- C++ -*-===//
//
// The one place where the GPU lowering decides how a normalization becomes a
// kernel: how many threads share a row, whether the row stays in registers,
// and how wide each load is. The choice depends only on the static row size
// and element type, and is recorded on the kernel as `fff.strategy`.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_CONVERSION_FFFTOGPU_NORMSTRATEGY_H
#define FFF_CONVERSION_FFFTOGPU_NORMSTRATEGY_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace fff {

struct NormStrategy {
  enum class Kind {
    /// One warp per row, the row in registers, shuffles only. Several rows
    /// per block.
    WarpPerRow,
    /// One block per row, the row in registers; warps combine their partial
    /// sums through shared memory.
    BlockPerRow,
    /// One block per row, looping over the row twice (statistics, then
    /// output); for rows too long for registers or of dynamic size.
    Looped,
  };

  Kind kind;
  /// Elements per load/store: 16 bytes' worth where the row size allows it,
  /// so that every row starts 16-byte aligned and loads are 128-bit.
  int64_t vectorWidth;
  /// Threads cooperating on one row (a multiple of the warp size).
  int64_t threadsPerRow;
  /// Rows handled by one block.
  int64_t rowsPerBlock;
  /// Vectors each thread keeps in registers (0 for Looped).
  int64_t vectorsPerThread;
  /// Register budget per thread handed to ptxas (`.maxnreg`).
  int64_t maxRegisters = kMaxRegistersPerThread;

  /// Enough for the largest register-resident row (32 f32 values per
  /// thread) plus addressing and reduction state, and still two 512-thread
  /// blocks per multiprocessor.
  static constexpr int64_t kMaxRegistersPerThread = 64;

  static llvm::StringRef kindName(Kind kind);
  int64_t threadsPerBlock() const { return threadsPerRow * rowsPerBlock; }

  /// The strategy as an attribute, for `fff.strategy` on the kernel.
  mlir::DictionaryAttr toAttr(mlir::MLIRContext *context) const;
};

constexpr int64_t kWarpSize = 32;

/// Chooses the kernel strategy for normalizing rows of `rowSize` elements
/// (nullopt when the size is dynamic) of `elementType`.
NormStrategy selectNormStrategy(std::optional<int64_t> rowSize,
                                mlir::Type elementType);

} // namespace fff

#endif // FFF_CONVERSION_FFFTOGPU_NORMSTRATEGY_H

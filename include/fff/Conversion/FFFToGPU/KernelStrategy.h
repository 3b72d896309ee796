//===- KernelStrategy.h - how an fff op maps onto a GPU kernel --*- C++ -*-===//
//
// The one place where the GPU lowering decides the shape of each kernel: how
// many threads share a row or token, what stays in registers, how wide each
// load is, and how many rows or tokens a block takes. The choice depends only
// on static shapes and element types, and is recorded on the kernel as
// `fff.strategy`.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_CONVERSION_FFFTOGPU_KERNELSTRATEGY_H
#define FFF_CONVERSION_FFFTOGPU_KERNELSTRATEGY_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/LogicalResult.h"

#include <cstdint>
#include <optional>
#include <string>

namespace fff {

constexpr int64_t kWarpSize = 32;

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

/// Chooses the kernel strategy for normalizing rows of `rowSize` elements
/// (nullopt when the size is dynamic) of `elementType`.
NormStrategy selectNormStrategy(std::optional<int64_t> rowSize,
                                mlir::Type elementType);

/// How `fff.tree_ffn` and `fff.leaf_tree_ffn` map onto a kernel. One warp
/// walks one token: its lanes split the input row for each level's dot
/// product (a shuffle butterfly leaves the logit in every lane, so the walk
/// never diverges within a warp), record the visited rows and their
/// coefficients, then split the output row, each lane summing its part of
/// every visited output row and writing it once.
struct TreeStrategy {
  /// How a lane covers its part of a row: vectors lane, lane + 32, lane + 64,
  /// ... taken `vectorsPerStep` at a time (unrolled, so that their loads
  /// are in flight together), in `steps` steps (a loop when more than one).
  struct LaneWalk {
    /// Elements per load: 16 bytes' worth where the row size allows.
    int64_t vectorWidth;
    int64_t vectorsPerStep;
    /// Steps per row; nullopt when the row size is dynamic.
    std::optional<int64_t> steps;
    /// Whether the last step can reach past the row's end, so that its
    /// vectors need masking.
    bool ragged;

    mlir::DictionaryAttr toAttr(mlir::MLIRContext *context) const;
  };

  /// Input rows (x, routing weights, per level) and output rows (output
  /// weights and y).
  LaneWalk in, out;
  /// Whether a lane keeps its part of x in registers across the levels
  /// (otherwise it rereads it, from L1, at each level).
  bool inputInRegisters;
  /// Whether the output sums unroll over the recorded rows, putting all
  /// their loads in flight together.
  bool unrollEntries;
  /// Tokens (warps) per block.
  int64_t tokensPerBlock;
  /// Visited rows a token records: trees * levels for tree_ffn, the leaf
  /// width for leaf_tree_ffn. Kept per warp in shared memory.
  int64_t entriesPerToken;
  /// leaf_tree_ffn's leaf width, whose hidden values each lane accumulates
  /// in registers for its input elements; 0 for tree_ffn.
  int64_t hiddenWidth;
  /// Register budget per thread handed to ptxas (`.maxnreg`).
  int64_t maxRegisters;

  int64_t threadsPerBlock() const { return kWarpSize * tokensPerBlock; }
  mlir::DictionaryAttr toAttr(mlir::MLIRContext *context) const;
};


/// Chooses the tree kernel's strategy for rows of `inWidth` and `outWidth`
/// elements (nullopt when dynamic) of `elementType`, recording
/// `entriesPerToken` rows per token, with leaves `hiddenWidth` wide (0 for
/// tree_ffn). Fails, with the reason in `whyNot`, for shapes no kernel
/// handles.
llvm::FailureOr<TreeStrategy>
selectTreeStrategy(std::optional<int64_t> inWidth,
                   std::optional<int64_t> outWidth, mlir::Type elementType,
                   int64_t entriesPerToken, int64_t hiddenWidth,
                   std::string &whyNot);

} // namespace fff

#endif // FFF_CONVERSION_FFFTOGPU_KERNELSTRATEGY_H

//===- KernelStrategy.h - how each op maps onto a GPU kernel ----*- C++ -*-===//
//
// The one place where the GPU lowering decides the shape of each kernel: how
// many threads share a row or token, what stays in registers, how wide each
// load is, and how many rows or tokens a block takes; for the linalg work
// around fff's ops, how contractions are tiled and how other ops spread over
// threads. The choice depends only on static shapes and element types, and
// is recorded on the kernel as `fff.strategy`.
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

/// The strategy for one warp normalizing a row of `rowSize` elements inside
/// another kernel (a fused sublayer's): the row in registers when it fits,
/// else looped; 16-byte loads where the size allows.
NormStrategy selectWarpNormStrategy(int64_t rowSize, mlir::Type elementType);

/// How a norm backward (`fff.layer_norm_grad`, `fff.rms_norm_grad`) maps
/// onto two kernels, deterministic by construction:
///
///  1. dx and partial parameter gradients. The grid is at most
///     `partialBlocks` blocks; block p takes the contiguous rows
///     [p * c, (p + 1) * c), c = ceil(rows / min(rows, partialBlocks)), and
///     its row groups take those in turn (group g: rows g, g + groups, ...).
///     A row group is `row.threadsPerRow` threads, laid out as the forward
///     kernel's `row` strategy says (a warp per row or a block per row with
///     the row in registers, or looped). Each thread sums dy * xhat and dy
///     in f32 for the columns it owns, over its group's rows, in row order;
///     the groups then add theirs in group order through shared memory, and
///     the block writes one partial row of dgamma and one of dbeta.
///  2. The column sums: `columnThreads` threads a block, a thread a column,
///     each adding the partial rows in block order.
///
/// No atomics: the bits of dgamma and dbeta depend on the shape alone.
struct NormGradStrategy {
  /// The per-row work; `row.rowsPerBlock` is the row groups per block.
  NormStrategy row;
  int64_t partialBlocks;
  int64_t columnThreads;

  mlir::DictionaryAttr toAttr(mlir::MLIRContext *context) const;
  /// The column-sum kernel's strategy.
  mlir::DictionaryAttr columnSumsAttr(mlir::MLIRContext *context) const;
};

/// Chooses the norm backward's strategy for rows of `rowSize` elements
/// (nullopt when dynamic) of `elementType`. A fused unit's kernel that
/// reads or writes `extraRowStreams` more [rows, rowSize] buffers than x,
/// dy and dx (a dropout mask, the residual gradient) keeps fewer row
/// elements a thread: their addresses take registers too.
NormGradStrategy selectNormGradStrategy(std::optional<int64_t> rowSize,
                                        mlir::Type elementType,
                                        int64_t extraRowStreams = 0);

/// Multiprocessors of the chips fff tunes for (H100 and H200). Grids sized
/// by it fill them; only speed depends on it.
constexpr int64_t kMultiprocessors = 132;

/// What the tree kernels' strategy depends on: an op's static shape.
struct TreeShape {
  /// Input and output row widths; nullopt when dynamic.
  std::optional<int64_t> inWidth, outWidth;
  mlir::Type elementType;
  /// Trees (1 for leaf_tree_ffn) and routing levels per tree.
  int64_t trees, levels;
  /// leaf_tree_ffn's leaf width; 0 for tree_ffn.
  int64_t hiddenWidth;
  /// Shared memory a fused sublayer kernel keeps per token besides the
  /// tree's own: its input and output rows (0 for a tree layer alone).
  int64_t fusedRowBytesPerToken = 0;

  bool isLeafMLP() const { return hiddenWidth > 0; }
  /// Rows a token visits and records: trees * levels, or the leaf width.
  int64_t entriesPerToken() const {
    return isLeafMLP() ? hiddenWidth : trees * levels;
  }
};

/// How `fff.tree_ffn` and `fff.leaf_tree_ffn` map onto a kernel. One warp
/// walks one token: its lanes split the input row for each level's dot
/// product (a shuffle butterfly leaves the logit in every lane, so the walk
/// never diverges within a warp), record the visited rows and their
/// coefficients, then split the output row, each lane summing its part of
/// every visited output row and writing it once.
///
/// Each op gets two kernels, and the host picks one by batch size:
///  * latency, for batches too small to fill the GPU: each warp's chain of
///    dependent levels is what takes time, so a step evaluates a node and
///    both its children at once (three rows' loads in flight) and decides
///    two levels;
///  * throughput, for large batches: blocks stay resident and loop over
///    tokens, and the top levels' rows, which every token visits, are
///    staged once per block in shared memory where the shape allows.
struct TreeStrategy {
  enum class Variant { Latency, Throughput };

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

  Variant variant;
  /// Input rows (x, routing weights, per level) and output rows (output
  /// weights and y).
  LaneWalk in, out;
  /// Whether a lane keeps its part of x in registers across the levels
  /// (otherwise it rereads it, from L1, at each level).
  bool inputInRegisters;
  /// Whether the output sums unroll over the recorded rows, putting all
  /// their loads in flight together.
  bool unrollEntries;
  /// Routing levels decided per step: 2 evaluates a node and both children.
  int64_t levelsPerStep;
  /// Top levels of each tree whose input and output rows a block stages in
  /// shared memory (tree_ffn, throughput variant); 0 for none.
  int64_t stagedLevels;
  /// Tokens (warps) per block.
  int64_t tokensPerBlock;
  /// 0: each block takes `tokensPerBlock` tokens. Otherwise the grid is at
  /// most this many blocks, which loop over the tokens.
  int64_t residentBlocks;
  /// Rows each token records (TreeShape::entriesPerToken).
  int64_t entriesPerToken;
  /// Shared bytes per token for a fused sublayer's rows
  /// (TreeShape::fusedRowBytesPerToken).
  int64_t fusedRowBytesPerToken;
  /// Register budget per thread handed to ptxas (`.maxnreg`).
  int64_t maxRegisters;
  /// The gradient walks only (fff.tree_ffn_grad's, fff.leaf_tree_ffn_grad's):
  /// how a lane covers dy and the rows of w_out (w2) for each visit's
  /// dot(dy, w_out[node]). tree_ffn_grad's `out` rows are then dx and the
  /// rows of w_in.
  std::optional<LaneWalk> gradOutput;
  /// Rows of w2 whose dot products with dy a leaf's gradient walk takes in
  /// one walk over dy (1 for tree_ffn_grad, whose levels come one by one).
  int64_t gradRowsPerStep = 1;
  /// leaf_tree_ffn_grad: units of a w1 row a lane loads at once for
  /// dx = w1[leaf] dpre (0 otherwise), and units whose pre-activations one
  /// pass over x sums.
  int64_t dxUnitsPerStep = 0;
  int64_t hiddenUnitsPerPass = 0;

  static llvm::StringRef variantName(Variant variant);
  int64_t threadsPerBlock() const { return kWarpSize * tokensPerBlock; }
  /// Rows staged per tree: the nodes of the top `stagedLevels` levels.
  int64_t stagedNodesPerTree() const {
    return (int64_t(1) << stagedLevels) - 1;
  }
  mlir::DictionaryAttr toAttr(mlir::MLIRContext *context) const;
};

/// Batches of at most this many tokens take the latency kernel: an H100 or
/// H200 (132 multiprocessors) runs 16 tree warps on each at once, 2112.
constexpr int64_t kTreeLatencyBoundTokens = 2048;
/// The throughput kernel's grid holds this many warps: two blocks of eight
/// per multiprocessor of an H100 or H200. Only speed depends on it.
constexpr int64_t kTreeResidentWarps = 2 * 8 * kMultiprocessors;

/// Chooses the tree kernel's strategy for `shape` and `variant`; without
/// `staging`, a throughput kernel stages no rows (to measure what staging
/// buys). Fails, with the reason in `whyNot`, for shapes no kernel handles.
llvm::FailureOr<TreeStrategy> selectTreeStrategy(const TreeShape &shape,
                                                 TreeStrategy::Variant variant,
                                                 bool staging,
                                                 std::string &whyNot);

/// How `fff.tree_ffn_grad` maps onto kernels, deterministic by
/// construction (no atomics: the bits depend on the shape alone):
///
///  1. walk: the forward's throughput kernel, a warp per token, routing with
///     the forward's dot products (so it takes the forward kernel's paths
///     bit for bit). Each visit also takes dot(dy, w_out[node]) and records
///     dl = that * act'(logit); the output phase sums dl * w_in[node] into
///     dx. Every visit's node, dl and act(logit) is stored for the sums.
///  2. count: `sortThreads`-thread blocks, a thread per (tree, chunk): the
///     rows are cut into `sortChunks` contiguous chunks, and each thread
///     counts its chunk's visits per node.
///  3. scan: a block per tree turns the counts, node-major, into each
///     (node, chunk)'s first slot: a stable counting sort's offsets.
///  4. scatter: the count's threads place their chunk's visits, in row
///     order, at those slots: each node's visits, in row order.
///  5. chunk sums: the sorted visits are cut into chunks of
///     `visitsPerChunk`, a block each, so that no block sums more than that
///     however many rows visit one node (the root: all of them). A thread
///     per column (`sumThreads`) sums dl * x and act * dy over each node's
///     run of visits in the chunk, in row order, into dw_in and dw_out
///     where the node's visits all lie in the chunk, else into the chunk's
///     head or tail partial row; one thread sums db_in.
///  6. node sums: a block per node adds a spanning node's partial rows in
///     chunk order, and gives a node no row visited zeros.
///  7. output bias: a thread per column sums dy over the rows, in row order.
///
/// fff.leaf_tree_ffn_grad takes the same steps with leaves for nodes and one
/// visit a row: the walk is the leaf forward kernel's, which then takes
/// dpre = dot(dy, w2[leaf, u]) * act'(pre) for each unit u, stores dpre and
/// act(pre), and sums dx = w1[leaf] dpre, a lane per element of dx; the sort
/// groups the rows by leaf; and the sums kernel, a block per leaf and
/// `sumThreads` columns, sums `unitsPerPass` units' dw1, dw2 and db2 columns
/// in registers over one pass of the leaf's rows (db1 by the first block's
/// first threads). No output-bias kernel: db2 is per leaf.
struct TreeGradStrategy {
  TreeStrategy walk;
  int64_t sortChunks;
  int64_t sortThreads;
  int64_t sumThreads;
  /// tree_ffn_grad: sorted visits a chunk sums block takes, and that
  /// kernel's register budget (the other kernels take the norms' 64).
  int64_t visitsPerChunk = 0;
  int64_t chunkSumRegisters = 0;
  /// leaf_tree_ffn_grad: units a sums pass takes (the last pass the rest);
  /// 0 for tree_ffn_grad.
  int64_t unitsPerPass = 0;

  /// The register budget of the kernel `phase`.
  int64_t maxRegisters(llvm::StringRef phase) const;
  /// The strategy of the kernel `phase` (count, scan, scatter, chunk_sums,
  /// node_sums, output_bias; sums for a leaf tree) records; the walk
  /// records `walk`'s.
  mlir::DictionaryAttr phaseAttr(mlir::MLIRContext *context,
                                 llvm::StringRef phase) const;
};

/// Chooses the strategy of fff.tree_ffn_grad or fff.leaf_tree_ffn_grad for
/// `shape` (the forward op's); fails, with the reason in `whyNot`, where the
/// walk has no kernel.
llvm::FailureOr<TreeGradStrategy> selectTreeGradStrategy(const TreeShape &shape,
                                                         std::string &whyNot);

/// A contraction (matmul, batch matmul, or a linalg.generic that multiplies
/// and accumulates over one reduction dim) as tiles of its output. Each
/// block computes a tileM x tileN tile of one batch, staging tileK-deep
/// slices of both operands in shared memory as f32; each thread accumulates
/// its (tileM / threadsM) x (tileN / threadsN) outputs in f32 registers, at
/// rows ty, ty + threadsM, ... and columns tx, tx + threadsN, ..., so that
/// a warp's shared-memory reads and output writes are contiguous.
///
/// Correct for any sizes and layouts, but unoptimized: no tensor cores, no
/// vector loads, no double buffering. It lets whole blocks compile; it does
/// not rival cuBLAS. The kernel records `unoptimized = true`.
struct ContractionStrategy {
  int64_t tileM, tileN, tileK;
  int64_t threadsM, threadsN;
  int64_t maxRegisters;

  int64_t threadsPerBlock() const { return threadsM * threadsN; }
  int64_t rowsPerThread() const { return tileM / threadsM; }
  int64_t columnsPerThread() const { return tileN / threadsN; }
  mlir::DictionaryAttr toAttr(mlir::MLIRContext *context) const;
};

/// The tiling for an M x N output over K (nullopt where dynamic).
ContractionStrategy selectContractionStrategy(std::optional<int64_t> m,
                                              std::optional<int64_t> n,
                                              std::optional<int64_t> k);

/// Any other linalg op: one thread per point of its parallel loops (the
/// points numbered with the last loop fastest, so that neighbouring threads
/// touch neighbouring elements of row-major buffers), walking its reduction
/// loops, if any, itself. Right for pointwise and broadcast work; a
/// reduction runs at one thread per row. An op whose parallel points share
/// output elements (its iterator types say parallel where its maps say
/// otherwise) runs serially, on one thread, rather than race.
struct LoopNestStrategy {
  bool serial;
  int64_t threadsPerBlock;
  int64_t maxRegisters;

  mlir::DictionaryAttr toAttr(mlir::MLIRContext *context) const;
};

/// `pointsShareOutputs`: whether two parallel points may write one output
/// element.
LoopNestStrategy selectLoopNestStrategy(bool pointsShareOutputs);

} // namespace fff

#endif // FFF_CONVERSION_FFFTOGPU_KERNELSTRATEGY_H

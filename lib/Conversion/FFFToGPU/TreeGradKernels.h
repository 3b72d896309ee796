//===- TreeGradKernels.h - the tree gradients' sorts and sums ---*- C++ -*-===//
//
// The kernels of fff.tree_ffn_grad and fff.leaf_tree_ffn_grad after their
// walk (TreeGradStrategy in KernelStrategy.h): a stable counting sort of
// every tree's visits by node (or of the rows by leaf), then each node's (or
// leaf's) weight gradients summed over its visits in row order (tree_ffn's
// in chunks of the sorted visits, then per node), and tree_ffn's db_out. The
// walk itself is the tree kernel's gradient walk (TreeKernel.h). All are GPU
// code only: no twins.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_FFFTOGPU_TREEGRADKERNELS_H
#define FFF_LIB_CONVERSION_FFFTOGPU_TREEGRADKERNELS_H

#include "fff/Conversion/FFFToGPU/KernelStrategy.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace fff {

/// The buffers of one tree_ffn_grad after its walk. A visit of row r to
/// tree k at level l is stored at [r, k * levels + l] of the visit buffers.
///
/// A leaf_tree_ffn_grad is sorted as one tree whose nodes are the leaves,
/// visited once a row (levels = 1: `members` holds rows). Its visit buffers
/// are then [B, W] (dpre and act(pre) of each unit), and its gradients dw1
/// as [leaves * Din, W], dw2 [leaves * W, Dout], db1 [leaves * W] and db2
/// [leaves, Dout].
struct TreeGradProblem {
  int64_t trees, nodesPerTree, levels;
  /// leaf_tree_ffn_grad's leaf width W; 0 for tree_ffn_grad.
  int64_t hiddenWidth = 0;
  mlir::Type elementType;
  mlir::Value input, gradOutput; // x [B, Din], dy [B, Dout]
  mlir::Value visitNodes, visitGrads, visitActivations; // [B, K * levels]
  /// [K * N * chunks] i32: the visits of each (tree, node, chunk), then the
  /// slot of its first one in `members`. Counts, slots and `members` are
  /// i32, which holds a tree's B * levels visits up to 2^31 (a batch of
  /// 178 million rows at depth 11).
  mlir::Value counts;
  /// [K * (N + 1)] i32: where each node's visits start in its tree's row of
  /// `members`, and the tree's visit count last.
  mlir::Value bucketStarts;
  /// [K, B * levels] i32: each tree's visits (r * levels + l), grouped by
  /// node, in row order within a node.
  mlir::Value members;
  /// dw_in [K * N, Din], dw_out [K * N, Dout]; db_in [K * N] and db_out
  /// [Dout] or null.
  mlir::Value gradInWeights, gradOutWeights, gradInBias, gradOutBias;
  /// tree_ffn_grad's chunked sums: the chunks of a tree's sorted visits
  /// (index), and two f32 partial rows per chunk, head and tail, of
  /// [dw_in | dw_out | db_in] ([K * chunks * 2, Din + Dout + 1]).
  mlir::Value chunks, partials;
  /// Index values: the batch, the rows of a chunk, the widths.
  mlir::Value rows, rowsPerChunk, inWidth, outWidth;
};

/// The bodies of the kernels after the walk, in launch order; `threadId`
/// and `blockId` are the thread's. The scan takes `sortThreads` i32 of
/// workgroup memory.
void emitTreeGradCount(mlir::ImplicitLocOpBuilder &b,
                       const TreeGradStrategy &strategy,
                       const TreeGradProblem &problem, mlir::Value threadId,
                       mlir::Value blockId);
void emitTreeGradScan(mlir::ImplicitLocOpBuilder &b,
                      const TreeGradStrategy &strategy,
                      const TreeGradProblem &problem, mlir::Value threadId,
                      mlir::Value blockId, mlir::Value shared);
void emitTreeGradScatter(mlir::ImplicitLocOpBuilder &b,
                         const TreeGradStrategy &strategy,
                         const TreeGradProblem &problem, mlir::Value threadId,
                         mlir::Value blockId);
void emitTreeGradChunkSums(mlir::ImplicitLocOpBuilder &b,
                           const TreeGradStrategy &strategy,
                           const TreeGradProblem &problem, mlir::Value threadId,
                           mlir::Value blockId);
void emitTreeGradNodeSums(mlir::ImplicitLocOpBuilder &b,
                          const TreeGradStrategy &strategy,
                          const TreeGradProblem &problem, mlir::Value threadId,
                          mlir::Value blockId);
/// leaf_tree_ffn_grad's sums (see TreeGradStrategy), in place of the
/// chunk and node sums and emitTreeGradOutputBias.
void emitLeafTreeGradSums(mlir::ImplicitLocOpBuilder &b,
                          const TreeGradStrategy &strategy,
                          const TreeGradProblem &problem, mlir::Value threadId,
                          mlir::Value blockId);
void emitTreeGradOutputBias(mlir::ImplicitLocOpBuilder &b,
                            const TreeGradStrategy &strategy,
                            const TreeGradProblem &problem,
                            mlir::Value threadId, mlir::Value blockId);

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOGPU_TREEGRADKERNELS_H

//===- TreeKernel.h - the per-token code of fff's tree kernels --*- C++ -*-===//
//
// The kernel of each fff.tree_ffn and fff.leaf_tree_ffn, in which a warp
// walks a token (see TreeStrategy in KernelStrategy.h):
//
//  1. Route. For each level, the lanes split the dot product of x with the
//     node's weight row (128-bit loads, a warp reads each row contiguously),
//     and a shuffle butterfly gives every lane the same logit, so the whole
//     warp takes the same branch. Each visited row is recorded with its
//     coefficient, act(logit) for tree_ffn. leaf_tree_ffn then computes its
//     leaf's hidden layer, recording one row of w2 per hidden unit with
//     coefficient act(hidden).
//  2. Output. The lanes split y: each lane sums, for its vectors of y, every
//     recorded row times its coefficient, in f32 registers, and stores each
//     vector once.
//
// The records live in shared memory, one slice per warp, so y never has to
// stay in registers across the walk and any output width fits.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_FFFTOGPU_TREEKERNEL_H
#define FFF_LIB_CONVERSION_FFFTOGPU_TREEKERNEL_H

#include "fff/Conversion/FFFToGPU/KernelStrategy.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <functional>

namespace fff {

/// Code a fused kernel runs around each token's walk, given the builder,
/// the token, its slot (see TreeProblem::inputInSlots) and, on the GPU,
/// this thread's lane (null in the twin, where the hook runs every lane
/// itself).
struct TreeTokenHooks {
  using Hook = std::function<void(mlir::ImplicitLocOpBuilder &, mlir::Value token,
                                  mlir::Value slot, mlir::Value lane)>;
  Hook before, after;
};

/// One tree kernel's buffers, with every weight tensor viewed as a matrix of
/// rows a warp reads whole.
struct TreeProblem {
  Activation activation;
  int64_t trees; // K; 1 for leaf_tree_ffn
  int64_t nodesPerTree;
  int64_t levels;      // routing levels: depth + 1 (tree_ffn), depth (leaf)
  int64_t hiddenWidth; // leaf_tree_ffn's W; 0 for tree_ffn
  bool zeroGoesRight = false; // tree_ffn's zero_goes_right
  mlir::Type elementType;

  mlir::Value input;        // [B, Din]
  mlir::Value routeWeights; // [K * N, Din]: w_in or node_w
  mlir::Value routeBias;    // [K * N]: b_in (optional) or node_b
  mlir::Value hiddenWeights,
      hiddenBias;   // leaf: w1 as [leaves * Din, W], b1 [leaves, W]
  mlir::Value outWeights; // [K * N, Dout] (w_out) or [leaves * W, Dout] (w2)
  mlir::Value outBias;    // b_out [Dout] (optional) or b2 [leaves, Dout]
  mlir::Value output;     // [B, Dout]
  mlir::Value rows, inWidth, outWidth;

  std::optional<int64_t> staticInWidth, staticOutWidth;

  /// For a fused kernel (SublayerToGPU.cpp): x, or y, is a row of a
  /// per-slot buffer ([slots, width], the slot being the token's warp in
  /// its block on the GPU, 0 in the twin) that the hooks fill or drain
  /// around each token, rather than a row of a [B, width] matrix indexed by
  /// token.
  bool inputInSlots = false, outputInSlots = false;
  TreeTokenHooks hooks;

  /// The gradient walks (TreeGradToGPU.cpp), with the strategy's
  /// `gradOutput` walk over dy. Null otherwise.
  ///
  /// fff.tree_ffn_grad: outWeights are w_in's rows and output is dx. Each
  /// visit also sums dot(dy[token], w_out[node]), records
  /// dl = that * act'(logit) as its coefficient, and stores its node, dl
  /// and act(logit) at [token, tree * levels + level].
  ///
  /// fff.leaf_tree_ffn_grad: there are no output weights; output is dx.
  /// Once the leaf's pre-activations are summed, each unit u takes
  /// dpre = dot(dy[token], w2[leaf * W + u]) * act'(pre); the token's leaf
  /// is stored at [token, 0] of visitNodes, dpre and act(pre) at [token, u],
  /// and dx[token] = w1[leaf] dpre is summed and stored directly.
  struct GradientWalk {
    mlir::Value gradOutput;  // dy [B, Dout]
    mlir::Value gradWeights; // w_out [K * N, Dout] or w2 [leaves * W, Dout]
    mlir::Value gradWidth;   // Dout
    std::optional<int64_t> staticGradWidth;
    mlir::Value visitNodes;       // [B, K * levels] i32, within the tree
    mlir::Value visitGrads;       // [B, K * levels] f32: dl (or [B, W]: dpre)
    mlir::Value visitActivations; // ... act(logit) (or act(pre))
  } gradient;
  bool isGradientWalk() const { return bool(gradient.gradOutput); }
};

/// The body of a tree kernel: `threadId`, `blockId` and `blocks` are the
/// thread's and the grid's; `shared` holds the block's records (f32
/// coefficients and i32 rows, [tokens per block, entries]) and then, with
/// staging, its staged input and output rows.
void emitTreeKernel(mlir::ImplicitLocOpBuilder &b, const TreeStrategy &strategy,
                    const TreeProblem &problem, mlir::Value threadId,
                    mlir::Value blockId, mlir::Value blocks,
                    llvm::ArrayRef<mlir::BlockArgument> shared);

/// The CPU twin of that kernel: every token in turn, after staging rows as
/// one block would. Returns the loop over tokens.
mlir::Operation *emitTreeTwin(mlir::ImplicitLocOpBuilder &b,
                              const TreeStrategy &strategy,
                              const TreeProblem &problem);

/// The shared-memory buffers a kernel with `strategy` needs, in the order
/// emitTreeKernel takes them.
llvm::SmallVector<mlir::Type> treeSharedBuffers(mlir::MLIRContext *context,
                                                const TreeStrategy &strategy,
                                                const TreeProblem &problem);

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOGPU_TREEKERNEL_H

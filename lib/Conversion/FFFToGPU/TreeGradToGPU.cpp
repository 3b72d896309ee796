//===- TreeGradToGPU.cpp - the tree gradient ops to GPU kernels ----------===//
//
// The host side of fff.tree_ffn_grad's seven launches and of
// fff.leaf_tree_ffn_grad's five (TreeGradStrategy in KernelStrategy.h): the
// gradient walk, which is the tree kernel's (TreeKernel.h), then the
// counting sort, the weight sums and tree_ffn's db_out (TreeGradKernels.h).
// The visits, counts and sorted visits are scratch buffers of the host
// function, freed by the pipeline's deallocation.
//
//===----------------------------------------------------------------------===//

#include "TreeGradToGPU.h"

#include "LaneEmitter.h"
#include "TreeFFNToGPU.h"
#include "TreeGradKernels.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace fff;

namespace {

/// tree_ffn_grad_<type>_<Din>x<Dout>_depth<d>[_trees<k>]_<phase>.
std::string kernelName(TreeFFNGradOp op, StringRef phase) {
  return treeOpKernelName(op, getElementTypeOrSelf(op.getInput().getType()),
                          staticDim(op.getInput(), 1),
                          staticDim(op.getWOut(), 2),
                          *staticDim(op.getWIn(), 0), phase);
}

/// A buffer for a result of type `type`, its dynamic sizes those of `like`
/// (a tensor of the same shape).
Value allocLike(ImplicitLocOpBuilder &b, Type type, Value like) {
  auto tensorType = cast<RankedTensorType>(type);
  SmallVector<Value> sizes;
  for (int64_t d = 0; d < tensorType.getRank(); ++d)
    if (tensorType.isDynamicDim(d))
      sizes.push_back(tensor::DimOp::create(b, like, d));
  return memref::AllocOp::create(
      b, MemRefType::get(tensorType.getShape(), tensorType.getElementType()),
      sizes);
}

Value collapse(ImplicitLocOpBuilder &b, Value buffer,
               ArrayRef<ReassociationIndices> groups) {
  return memref::CollapseShapeOp::create(b, buffer, groups);
}

/// The strategy for a tree gradient op of shape `shape`, or failure with
/// the reason (the shape's, or the strategy's) in `whyNot`.
FailureOr<TreeGradStrategy> strategyFor(FailureOr<TreeShape> shape,
                                        std::string &whyNot) {
  if (failed(shape))
    return failure();
  return selectTreeGradStrategy(*shape, whyNot);
}

/// Builds (or finds) the kernel `name` of `phase` and launches it on
/// `blocks` blocks of `threads`; every kernel after the walk takes the
/// whole problem.
void launch(ConversionPatternRewriter &rewriter, ImplicitLocOpBuilder &b,
            Operation *op, const std::string &name, const TreeGradStrategy &s,
            const TreeGradProblem &host, StringRef phase, Value blocks,
            int64_t threads, ArrayRef<Type> workgroupBuffers,
            function_ref<void(ImplicitLocOpBuilder &, const TreeGradProblem &,
                              Value, Value, ArrayRef<BlockArgument>)>
                emitBody) {
  TreeGradProblem k = host;
  KernelParameters parameters({&k.input, &k.gradOutput, &k.visitNodes,
                               &k.visitGrads, &k.visitActivations, &k.counts,
                               &k.bucketStarts, &k.members, &k.gradInWeights,
                               &k.gradOutWeights, &k.gradInBias, &k.gradOutBias,
                               &k.partials, &k.rows, &k.rowsPerChunk,
                               &k.inWidth, &k.outWidth, &k.chunks});
  KernelSpec spec;
  spec.name = name;
  spec.threadsPerBlock = threads;
  spec.maxRegisters = s.maxRegisters(phase);
  spec.strategy = s.phaseAttr(rewriter.getContext(), phase);
  spec.workgroupBuffers.assign(workgroupBuffers.begin(),
                               workgroupBuffers.end());
  gpu::GPUFuncOp kernel = kernelFor(
      rewriter, op, spec, parameters,
      [&](ImplicitLocOpBuilder &kb, gpu::GPUFuncOp kernel, Value thread,
          Value block) {
        emitBody(kb, k, thread, block, kernel.getWorkgroupAttributions());
      });
  launchKernel(b, kernel, blocks, threads, parameters.operands());
}

/// The scratch buffers of the counting sort of `p.rows` rows' visits
/// (p.levels a row to each of p.trees trees of p.nodesPerTree buckets), and
/// its three launches; `name(phase)` names the kernels.
void sortVisits(ConversionPatternRewriter &rewriter, ImplicitLocOpBuilder &b,
                Operation *op, function_ref<std::string(StringRef)> name,
                const TreeGradStrategy &s, TreeGradProblem &p) {
  p.counts = memref::AllocOp::create(
      b, MemRefType::get({p.trees * p.nodesPerTree * s.sortChunks},
                         b.getI32Type()));
  p.bucketStarts = memref::AllocOp::create(
      b, MemRefType::get({p.trees * (p.nodesPerTree + 1)}, b.getI32Type()));
  p.members = memref::AllocOp::create(
      b, MemRefType::get({p.trees, ShapedType::kDynamic}, b.getI32Type()),
      ValueRange{arith::MulIOp::create(
          b, p.rows, arith::ConstantIndexOp::create(b, p.levels))});
  p.rowsPerChunk = arith::CeilDivUIOp::create(
      b, p.rows, arith::ConstantIndexOp::create(b, s.sortChunks));
  Value sortBlocks = arith::ConstantIndexOp::create(
      b, llvm::divideCeilSigned(p.trees * s.sortChunks, s.sortThreads));
  launch(rewriter, b, op, name("count"), s, p, "count", sortBlocks,
         s.sortThreads, {},
         [&](ImplicitLocOpBuilder &kb, const TreeGradProblem &kp, Value thread,
             Value block, ArrayRef<BlockArgument>) {
           emitTreeGradCount(kb, s, kp, thread, block);
         });
  launch(rewriter, b, op, name("scan"), s, p, "scan",
         arith::ConstantIndexOp::create(b, p.trees), s.sortThreads,
         {workgroupBufferType({s.sortThreads}, b.getI32Type())},
         [&](ImplicitLocOpBuilder &kb, const TreeGradProblem &kp, Value thread,
             Value block, ArrayRef<BlockArgument> shared) {
           emitTreeGradScan(kb, s, kp, thread, block, shared[0]);
         });
  launch(rewriter, b, op, name("scatter"), s, p, "scatter", sortBlocks,
         s.sortThreads, {},
         [&](ImplicitLocOpBuilder &kb, const TreeGradProblem &kp, Value thread,
             Value block, ArrayRef<BlockArgument>) {
           emitTreeGradScatter(kb, s, kp, thread, block);
         });
}

/// Launches the gradient walk `walk` (TreeProblem::GradientWalk): the
/// forward's throughput kernel with the gradient's buffers as further
/// parameters.
void launchGradientWalk(ConversionPatternRewriter &rewriter, Operation *op,
                        const std::string &name, const TreeGradStrategy &s,
                        const TreeProblem &walk) {
  TreeProblem::GradientWalk inKernel = walk.gradient;
  TreeKernelExtension extension;
  extension.name = name;
  extension.parameters = {&inKernel.gradOutput, &inKernel.gradWeights,
                          &inKernel.gradWidth,  &inKernel.visitNodes,
                          &inKernel.visitGrads, &inKernel.visitActivations};
  extension.complete = [&](TreeProblem &kernelProblem, ArrayRef<Value>) {
    kernelProblem.gradient = inKernel;
  };
  buildTreeKernel(rewriter, op, s.walk, walk, /*cpuTwin=*/false, &extension);
}

/// The results as tensors, in place of `op`.
void replaceWithBuffers(ConversionPatternRewriter &rewriter,
                        ImplicitLocOpBuilder &b, Operation *op,
                        ArrayRef<Value> buffers) {
  SmallVector<Value> tensors;
  for (auto [buffer, result] : llvm::zip(buffers, op->getResults()))
    tensors.push_back(bufferization::ToTensorOp::create(
        b, result.getType(), buffer, /*restrict=*/true, /*writable=*/true));
  rewriter.replaceOp(op, tensors);
}

/// Views of weight and result tensors as the kernels index them.
const SmallVector<ReassociationIndices> kMatrix{{0}, {1}};
const SmallVector<ReassociationIndices> kWeightRows{{0, 1}, {2}};

/// A [rows, columns] scratch buffer of `type`, a row per row of the batch.
Value allocPerRow(ImplicitLocOpBuilder &b, Value rows, int64_t columns,
                  Type type) {
  return memref::AllocOp::create(
      b, MemRefType::get({ShapedType::kDynamic, columns}, type),
      ValueRange{rows});
}

/// What the lowerings of both tree gradient ops share: the strategy for the
/// op's shape (no match, with the reason, where no kernel takes it), and x
/// and dy as the kernels see them, with the batch and the widths.
template <typename Op> struct TreeGradToGPUPattern : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  using OpAdaptor = typename Op::Adaptor;

  LogicalResult
  matchAndRewrite(Op op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const final {
    std::string whyNot;
    FailureOr<TreeShape> shape = treeShapeOf(op, whyNot);
    FailureOr<TreeGradStrategy> strategy = strategyFor(shape, whyNot);
    if (failed(strategy))
      return rewriter.notifyMatchFailure(op, whyNot);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    TreeGradProblem p;
    p.elementType = shape->elementType;
    p.input = collapsedBuffer(b, adaptor.getInput(), kMatrix);
    p.gradOutput = collapsedBuffer(b, adaptor.getGradOutput(), kMatrix);
    p.rows = memref::DimOp::create(b, p.input, 0);
    p.inWidth = memref::DimOp::create(b, p.input, 1);
    p.outWidth = memref::DimOp::create(b, p.gradOutput, 1);
    lower(op, adaptor, rewriter, b, *shape, *strategy, p);
    return success();
  }

  /// Replaces `op` by its kernels' launches, given `p`'s row side.
  virtual void lower(Op op, OpAdaptor adaptor,
                     ConversionPatternRewriter &rewriter,
                     ImplicitLocOpBuilder &b, const TreeShape &shape,
                     const TreeGradStrategy &s, TreeGradProblem &p) const = 0;
};

struct TreeFFNGradToGPU : TreeGradToGPUPattern<TreeFFNGradOp> {
  using TreeGradToGPUPattern::TreeGradToGPUPattern;

  void lower(TreeFFNGradOp op, OpAdaptor adaptor,
             ConversionPatternRewriter &rewriter, ImplicitLocOpBuilder &b,
             const TreeShape &shape, const TreeGradStrategy &s,
             TreeGradProblem &p) const override {
    int64_t trees = shape.trees, levels = shape.levels;
    int64_t nodes = op.getNumNodes();
    p.trees = trees;
    p.nodesPerTree = nodes;
    p.levels = levels;
    Value wIn = collapsedBuffer(b, adaptor.getWIn(), kWeightRows);
    Value wOut = collapsedBuffer(b, adaptor.getWOut(), kWeightRows);

    Value dx = allocLike(b, op.getGradInput().getType(), adaptor.getInput());
    Value dwIn = allocLike(b, op.getGradWIn().getType(), adaptor.getWIn());
    Value dwOut = allocLike(b, op.getGradWOut().getType(), adaptor.getWOut());
    SmallVector<Value> results{dx, dwIn, dwOut};
    p.gradInWeights = collapse(b, dwIn, kWeightRows);
    p.gradOutWeights = collapse(b, dwOut, kWeightRows);
    if (Value dbIn = op.getBInGrad()) {
      results.push_back(allocLike(b, dbIn.getType(), adaptor.getBIn()));
      p.gradInBias = collapse(b, results.back(), {{0, 1}});
    }
    if (Value dbOut = op.getBOutGrad()) {
      auto type = cast<RankedTensorType>(dbOut.getType());
      SmallVector<Value> sizes;
      if (type.isDynamicDim(0))
        sizes.push_back(p.outWidth);
      results.push_back(memref::AllocOp::create(
          b, MemRefType::get(type.getShape(), p.elementType), sizes));
      p.gradOutBias = results.back();
    }

    // Scratch: each row's visits.
    p.visitNodes = allocPerRow(b, p.rows, trees * levels, b.getI32Type());
    p.visitGrads = allocPerRow(b, p.rows, trees * levels, b.getF32Type());
    p.visitActivations = allocPerRow(b, p.rows, trees * levels, b.getF32Type());
    launchWalk(rewriter, op, s, p, adaptor, wIn, wOut, dx);
    auto name = [&](StringRef phase) { return kernelName(op, phase); };
    sortVisits(rewriter, b, op, name, s, p);
    auto constant = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(b, v);
    };
    // The chunks of each tree's sorted visits, and their partial rows.
    p.chunks = arith::CeilDivUIOp::create(
        b, arith::MulIOp::create(b, p.rows, constant(levels)),
        constant(s.visitsPerChunk));
    p.partials = memref::AllocOp::create(
        b,
        MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                        b.getF32Type()),
        ValueRange{arith::MulIOp::create(b, p.chunks, constant(trees * 2)),
                   arith::AddIOp::create(
                       b, arith::AddIOp::create(b, p.inWidth, p.outWidth),
                       constant(1))});
    launch(rewriter, b, op, name("chunk_sums"), s, p, "chunk_sums",
           arith::MulIOp::create(b, p.chunks, constant(trees)), s.sumThreads,
           {},
           [&](ImplicitLocOpBuilder &kb, const TreeGradProblem &kp,
               Value thread, Value block, ArrayRef<BlockArgument>) {
             emitTreeGradChunkSums(kb, s, kp, thread, block);
           });
    launch(rewriter, b, op, name("node_sums"), s, p, "node_sums",
           constant(trees * nodes), s.sumThreads, {},
           [&](ImplicitLocOpBuilder &kb, const TreeGradProblem &kp,
               Value thread, Value block, ArrayRef<BlockArgument>) {
             emitTreeGradNodeSums(kb, s, kp, thread, block);
           });
    if (p.gradOutBias)
      launch(rewriter, b, op, name("output_bias"), s, p, "output_bias",
             arith::CeilDivUIOp::create(b, p.outWidth, constant(s.sumThreads)),
             s.sumThreads, {},
             [&](ImplicitLocOpBuilder &kb, const TreeGradProblem &kp,
                 Value thread, Value block, ArrayRef<BlockArgument>) {
               emitTreeGradOutputBias(kb, s, kp, thread, block);
             });

    replaceWithBuffers(rewriter, b, op, results);
  }

  /// The walk: the forward's throughput kernel in its gradient form, over
  /// x with w_in's rows as its output rows and dx as its output.
  static void launchWalk(ConversionPatternRewriter &rewriter, TreeFFNGradOp op,
                         const TreeGradStrategy &s, const TreeGradProblem &p,
                         OpAdaptor adaptor, Value wIn, Value wOut, Value dx) {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    TreeProblem walk;
    walk.activation = op.getActivation();
    walk.zeroGoesRight = op.getZeroGoesRight();
    walk.trees = p.trees;
    walk.nodesPerTree = p.nodesPerTree;
    walk.levels = p.levels;
    walk.hiddenWidth = 0;
    walk.elementType = p.elementType;
    walk.input = p.input;
    walk.routeWeights = wIn;
    if (adaptor.getBIn())
      walk.routeBias = collapsedBuffer(b, adaptor.getBIn(), {{0, 1}});
    walk.outWeights = wIn;
    walk.output = dx;
    walk.rows = p.rows;
    walk.inWidth = p.inWidth;
    walk.outWidth = p.inWidth;
    walk.staticInWidth = walk.staticOutWidth = staticDim(op.getInput(), 1);
    walk.gradient = {p.gradOutput,      wOut,
                     p.outWidth,        staticDim(op.getWOut(), 2),
                     p.visitNodes,      p.visitGrads,
                     p.visitActivations};
    launchGradientWalk(rewriter, op, kernelName(op, "walk"), s, walk);
  }
};

/// fff.leaf_tree_ffn_grad: the walk, the sort of the rows by leaf, and the
/// leaves' sums.
struct LeafTreeFFNGradToGPU : TreeGradToGPUPattern<LeafTreeFFNGradOp> {
  using TreeGradToGPUPattern::TreeGradToGPUPattern;

  void lower(LeafTreeFFNGradOp op, OpAdaptor adaptor,
             ConversionPatternRewriter &rewriter, ImplicitLocOpBuilder &b,
             const TreeShape &shape, const TreeGradStrategy &s,
             TreeGradProblem &p) const override {
    int64_t width = shape.hiddenWidth;
    auto name = [&](StringRef phase) {
      return treeOpKernelName(op, shape.elementType, shape.inWidth,
                              shape.outWidth, /*trees=*/1, phase);
    };
    p.trees = 1;
    p.nodesPerTree = op.getNumLeaves();
    p.levels = 1;
    p.hiddenWidth = width;

    Value dx = allocLike(b, op.getGradInput().getType(), adaptor.getInput());
    Value dw1 = allocLike(b, op.getGradW1().getType(), adaptor.getW1());
    Value db1 = allocLike(b, op.getGradB1().getType(), adaptor.getB1());
    Value dw2 = allocLike(b, op.getGradW2().getType(), adaptor.getW2());
    // db2 is [L, Dout], L static.
    auto db2Type = cast<RankedTensorType>(op.getGradB2().getType());
    Value db2 = memref::AllocOp::create(
        b, MemRefType::get(db2Type.getShape(), db2Type.getElementType()),
        db2Type.isDynamicDim(1) ? ValueRange{p.outWidth} : ValueRange{});
    p.gradInWeights = collapse(b, dw1, kWeightRows);
    p.gradInBias = collapse(b, db1, {{0, 1}});
    p.gradOutWeights = collapse(b, dw2, kWeightRows);
    p.gradOutBias = db2;

    p.visitNodes = allocPerRow(b, p.rows, 1, b.getI32Type());
    p.visitGrads = allocPerRow(b, p.rows, width, b.getF32Type());
    p.visitActivations = allocPerRow(b, p.rows, width, b.getF32Type());

    TreeProblem walk;
    walk.activation = op.getActivation();
    walk.trees = 1;
    walk.nodesPerTree = op.getNumRoutingNodes();
    walk.levels = op.getDepth();
    walk.hiddenWidth = width;
    walk.elementType = p.elementType;
    walk.input = p.input;
    walk.routeWeights = collapsedBuffer(b, adaptor.getNodeW(), kMatrix);
    walk.routeBias = collapsedBuffer(b, adaptor.getNodeB(), {{0}});
    walk.hiddenWeights = collapsedBuffer(b, adaptor.getW1(), kWeightRows);
    walk.hiddenBias = collapsedBuffer(b, adaptor.getB1(), kMatrix);
    walk.output = dx;
    walk.rows = p.rows;
    walk.inWidth = walk.outWidth = p.inWidth;
    walk.staticInWidth = walk.staticOutWidth = shape.inWidth;
    walk.gradient = {
        p.gradOutput,      collapsedBuffer(b, adaptor.getW2(), kWeightRows),
        p.outWidth,        shape.outWidth,
        p.visitNodes,      p.visitGrads,
        p.visitActivations};
    launchGradientWalk(rewriter, op, name("walk"), s, walk);

    sortVisits(rewriter, b, op, name, s, p);
    Value columnBlocks = arith::CeilDivUIOp::create(
        b, arith::MaxUIOp::create(b, p.inWidth, p.outWidth),
        arith::ConstantIndexOp::create(b, s.sumThreads));
    Value blocks = arith::MulIOp::create(
        b, arith::ConstantIndexOp::create(b, p.nodesPerTree),
        arith::MaxUIOp::create(b, columnBlocks,
                               arith::ConstantIndexOp::create(b, 1)));
    launch(rewriter, b, op, name("sums"), s, p, "sums", blocks, s.sumThreads,
           {},
           [&](ImplicitLocOpBuilder &kb, const TreeGradProblem &kp,
               Value thread, Value block, ArrayRef<BlockArgument>) {
             emitLeafTreeGradSums(kb, s, kp, thread, block);
           });
    replaceWithBuffers(rewriter, b, op, {dx, dw1, db1, dw2, db2});
  }
};

} // namespace

std::string fff::whyTreeGradHasNoGPUKernel(Operation *op) {
  std::string whyNot;
  (void)strategyFor(treeShapeOf(op, whyNot), whyNot);
  return whyNot;
}

void fff::populateTreeGradToGPUPatterns(RewritePatternSet &patterns) {
  patterns.add<TreeFFNGradToGPU, LeafTreeFFNGradToGPU>(patterns.getContext());
}

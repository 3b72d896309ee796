//===- TreeGradToGPU.cpp - fff.tree_ffn_grad to GPU kernels --------------===//
//
// The host side of fff.tree_ffn_grad's six launches (TreeGradStrategy in
// KernelStrategy.h): the gradient walk, which is the tree kernel's
// (TreeKernel.h), then the counting sort, the weight sums and db_out
// (TreeGradKernels.h). The visits, counts and sorted visits are scratch
// buffers of the host function, freed by the pipeline's deallocation.
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

struct TreeFFNGradToGPU : OpConversionPattern<TreeFFNGradOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TreeFFNGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    std::string whyNot;
    FailureOr<TreeShape> shape = treeShapeOf(op, whyNot);
    FailureOr<TreeGradStrategy> strategy =
        succeeded(shape) ? selectTreeGradStrategy(*shape, whyNot)
                         : FailureOr<TreeGradStrategy>(failure());
    if (failed(strategy))
      return rewriter.notifyMatchFailure(op, whyNot);
    const TreeGradStrategy &s = *strategy;
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Type elementType = shape->elementType;
    int64_t trees = shape->trees, levels = shape->levels;
    int64_t nodes = op.getNumNodes();
    const SmallVector<ReassociationIndices> matrix{{0}, {1}};
    const SmallVector<ReassociationIndices> weightRows{{0, 1}, {2}};

    // Operands and results as the kernels see them.
    TreeGradProblem p;
    p.trees = trees;
    p.nodesPerTree = nodes;
    p.levels = levels;
    p.elementType = elementType;
    p.input = collapsedBuffer(b, adaptor.getInput(), matrix);
    p.gradOutput = collapsedBuffer(b, adaptor.getGradOutput(), matrix);
    p.rows = memref::DimOp::create(b, p.input, 0);
    p.inWidth = memref::DimOp::create(b, p.input, 1);
    p.outWidth = memref::DimOp::create(b, p.gradOutput, 1);
    Value wIn = collapsedBuffer(b, adaptor.getWIn(), weightRows);
    Value wOut = collapsedBuffer(b, adaptor.getWOut(), weightRows);

    Value dx = allocLike(b, op.getGradInput().getType(), adaptor.getInput());
    Value dwIn = allocLike(b, op.getGradWIn().getType(), adaptor.getWIn());
    Value dwOut = allocLike(b, op.getGradWOut().getType(), adaptor.getWOut());
    SmallVector<Value> results{dx, dwIn, dwOut};
    p.gradInWeights = collapse(b, dwIn, weightRows);
    p.gradOutWeights = collapse(b, dwOut, weightRows);
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
          b, MemRefType::get(type.getShape(), elementType), sizes));
      p.gradOutBias = results.back();
    }

    // Scratch: the visits, the counts and the sorted visits.
    int64_t visitsPerRow = trees * levels;
    auto visits = [&](Type type) -> Value {
      return memref::AllocOp::create(
          b, MemRefType::get({ShapedType::kDynamic, visitsPerRow}, type),
          ValueRange{p.rows});
    };
    p.visitNodes = visits(b.getI32Type());
    p.visitGrads = visits(b.getF32Type());
    p.visitActivations = visits(b.getF32Type());
    p.counts = memref::AllocOp::create(
        b, MemRefType::get({trees * nodes * s.sortChunks}, b.getI32Type()));
    p.bucketStarts = memref::AllocOp::create(
        b, MemRefType::get({trees * (nodes + 1)}, b.getI32Type()));
    p.members = memref::AllocOp::create(
        b, MemRefType::get({trees, ShapedType::kDynamic}, b.getI32Type()),
        ValueRange{arith::MulIOp::create(
            b, p.rows, arith::ConstantIndexOp::create(b, levels))});
    p.rowsPerChunk = arith::CeilDivUIOp::create(
        b, p.rows, arith::ConstantIndexOp::create(b, s.sortChunks));

    launchWalk(rewriter, op, s, p, adaptor, wIn, wOut, dx);
    auto constant = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(b, v);
    };
    Value sortBlocks =
        constant(llvm::divideCeilSigned(trees * s.sortChunks, s.sortThreads));
    launch(rewriter, b, op, s, p, "count", sortBlocks, s.sortThreads, {},
           [&](ImplicitLocOpBuilder &kb, const TreeGradProblem &kp,
               Value thread, Value block, ArrayRef<BlockArgument>) {
             emitTreeGradCount(kb, s, kp, thread, block);
           });
    launch(rewriter, b, op, s, p, "scan", constant(trees), s.sortThreads,
           {workgroupBufferType({s.sortThreads}, b.getI32Type())},
           [&](ImplicitLocOpBuilder &kb, const TreeGradProblem &kp,
               Value thread, Value block, ArrayRef<BlockArgument> shared) {
             emitTreeGradScan(kb, s, kp, thread, block, shared[0]);
           });
    launch(rewriter, b, op, s, p, "scatter", sortBlocks, s.sortThreads, {},
           [&](ImplicitLocOpBuilder &kb, const TreeGradProblem &kp,
               Value thread, Value block, ArrayRef<BlockArgument>) {
             emitTreeGradScatter(kb, s, kp, thread, block);
           });
    launch(rewriter, b, op, s, p, "sums", constant(trees * nodes), s.sumThreads,
           {},
           [&](ImplicitLocOpBuilder &kb, const TreeGradProblem &kp,
               Value thread, Value block, ArrayRef<BlockArgument>) {
             emitTreeGradSums(kb, s, kp, thread, block);
           });
    if (p.gradOutBias)
      launch(rewriter, b, op, s, p, "output_bias",
             arith::CeilDivUIOp::create(b, p.outWidth, constant(s.sumThreads)),
             s.sumThreads, {},
             [&](ImplicitLocOpBuilder &kb, const TreeGradProblem &kp,
                 Value thread, Value block, ArrayRef<BlockArgument>) {
               emitTreeGradOutputBias(kb, s, kp, thread, block);
             });

    SmallVector<Value> tensors;
    for (auto [buffer, result] : llvm::zip(results, op->getResults()))
      tensors.push_back(bufferization::ToTensorOp::create(
          b, result.getType(), buffer, /*restrict=*/true, /*writable=*/true));
    rewriter.replaceOp(op, tensors);
    return success();
  }

  /// The walk: the forward's throughput kernel in its gradient form, over
  /// x with w_in's rows as its output rows and dx as its output.
  static void launchWalk(ConversionPatternRewriter &rewriter, TreeFFNGradOp op,
                         const TreeGradStrategy &s, const TreeGradProblem &p,
                         OpAdaptor adaptor, Value wIn, Value wOut, Value dx) {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    TreeProblem walk;
    walk.activation = op.getActivation();
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

    TreeProblem::GradientWalk inKernel = walk.gradient;
    TreeKernelExtension extension;
    extension.name = kernelName(op, "walk");
    extension.parameters = {&inKernel.gradOutput, &inKernel.gradWeights,
                            &inKernel.gradWidth,  &inKernel.visitNodes,
                            &inKernel.visitGrads, &inKernel.visitActivations};
    extension.complete = [&](TreeProblem &kernelProblem, ArrayRef<Value>) {
      kernelProblem.gradient = inKernel;
    };
    buildTreeKernel(rewriter, op, s.walk, walk, /*cpuTwin=*/false, &extension);
  }

  /// Builds (or finds) the kernel of `phase` and launches it on `blocks`
  /// blocks of `threads`; every kernel after the walk takes the whole
  /// problem.
  static void
  launch(ConversionPatternRewriter &rewriter, ImplicitLocOpBuilder &b,
         TreeFFNGradOp op, const TreeGradStrategy &s,
         const TreeGradProblem &host, StringRef phase, Value blocks,
         int64_t threads, ArrayRef<Type> workgroupBuffers,
         function_ref<void(ImplicitLocOpBuilder &, const TreeGradProblem &,
                           Value, Value, ArrayRef<BlockArgument>)>
             emitBody) {
    TreeGradProblem k = host;
    KernelParameters parameters(
        {&k.input, &k.gradOutput, &k.visitNodes, &k.visitGrads,
         &k.visitActivations, &k.counts, &k.bucketStarts, &k.members,
         &k.gradInWeights, &k.gradOutWeights, &k.gradInBias, &k.gradOutBias,
         &k.rows, &k.rowsPerChunk, &k.inWidth, &k.outWidth});
    KernelSpec spec;
    spec.name = kernelName(op, phase);
    spec.threadsPerBlock = threads;
    spec.maxRegisters = NormStrategy::kMaxRegistersPerThread;
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
};

} // namespace

std::string fff::whyTreeGradHasNoGPUKernel(TreeFFNGradOp op) {
  std::string whyNot;
  FailureOr<TreeShape> shape = treeShapeOf(op, whyNot);
  if (succeeded(shape))
    (void)selectTreeGradStrategy(*shape, whyNot);
  return whyNot;
}

void fff::populateTreeGradToGPUPatterns(RewritePatternSet &patterns) {
  patterns.add<TreeFFNGradToGPU>(patterns.getContext());
}
